//! Reading input files that may hold anything: every reader goes through here.
//!
//! A file is read in pieces, never more than [`budget::max_file_bytes`](crate::budget::max_file_bytes)
//! (so `/dev/zero` or a multi-gigabyte file is refused, not swallowed), and a text file must
//! be UTF-8 without NUL bytes — the first offending byte is named by its offset, which lets a
//! binary or truncated file be told from a text one at once. Errors are
//! [`NetweaveError::File`] and name the path.

use std::io::Read;
use std::path::Path;

use crate::budget;
use crate::error::{NetweaveError, Result};

/// Bytes read per `read` call; also how far a binary file is read before its magic is checked.
const CHUNK: usize = 1 << 16;

fn file_error(path: &Path, message: impl Into<String>) -> NetweaveError {
    NetweaveError::File { path: path.display().to_string(), message: message.into() }
}

/// An OS error as one line without Rust's `(os error N)` tail: `No such file or directory`.
pub fn os_message(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

/// What the file must be.
#[derive(Clone, Copy, Debug)]
enum Expect<'a> {
    /// UTF-8 text without NUL bytes.
    Text,
    /// Bytes; when `magic` is non-empty, the file must start with it (checked after the first
    /// piece, so a wrong or endless file stops at once).
    Binary { magic: &'a [u8], format: &'a str },
}

fn read(path: &Path, expect: Expect<'_>) -> Result<Vec<u8>> {
    let limit = budget::max_file_bytes()?;
    let mut file = std::fs::File::open(path).map_err(|e| file_error(path, os_message(&e)))?;
    if let Ok(meta) = file.metadata() {
        if meta.is_dir() {
            return Err(file_error(path, "is a directory, not a file"));
        }
        if meta.is_file() && meta.len() > limit {
            return Err(too_large(path, limit));
        }
    }
    let mut data = Vec::new();
    let mut piece = vec![0u8; CHUNK];
    loop {
        let n = match file.read(&mut piece) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(file_error(path, os_message(&e))),
        };
        if data.len() as u64 + n as u64 > limit {
            return Err(too_large(path, limit));
        }
        let start = data.len();
        data.extend_from_slice(&piece[..n]);
        match expect {
            Expect::Text => {
                if let Some(at) = data[start..].iter().position(|&b| b == 0) {
                    return Err(file_error(
                        path,
                        format!("not a text file (a NUL byte at byte offset {})", start + at),
                    ));
                }
            }
            Expect::Binary { magic, format } => {
                let have = data.len().min(magic.len());
                if data[..have] != magic[..have] {
                    return Err(file_error(
                        path,
                        format!("not a {format} file (it does not start with the {format} signature)"),
                    ));
                }
            }
        }
    }
    if let Expect::Binary { magic, format } = expect {
        if data.len() < magic.len() {
            return Err(file_error(
                path,
                format!("not a {format} file ({} bytes, shorter than its signature)", data.len()),
            ));
        }
    }
    Ok(data)
}

fn too_large(path: &Path, limit: u64) -> NetweaveError {
    file_error(
        path,
        format!(
            "larger than the {} an input file may take (a quarter of the memory budget; --max-memory raises it)",
            budget::human_bytes(limit.into())
        ),
    )
}

/// Check `bytes` read from `path` are text: UTF-8 with no NUL byte. The error names the
/// byte offset of the first bad byte.
pub fn text_of(path: &Path, bytes: Vec<u8>) -> Result<String> {
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(file_error(path, format!("not a text file (a NUL byte at byte offset {at})")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let byte = e.as_bytes()[at];
        file_error(path, format!("not UTF-8 text (byte 0x{byte:02x} at byte offset {at})"))
    })
}

/// Read a text file: UTF-8, no NUL byte, within the file-size limit.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = read(path, Expect::Text)?;
    text_of(path, bytes)
}

/// Read a binary file within the file-size limit that must start with `magic` (the name of
/// its `format` goes into the error when it does not).
pub fn read_binary(path: &Path, magic: &[u8], format: &str) -> Result<Vec<u8>> {
    read(path, Expect::Binary { magic, format })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("netweave-input-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn hostile_bytes_are_named_by_offset() {
        let bad_utf8 = temp_file("latin1.txt", b"hosts 3\ncaf\xe9\n");
        let e = read_text(&bad_utf8).unwrap_err().to_string();
        std::fs::remove_file(&bad_utf8).unwrap();
        assert!(e.ends_with("not UTF-8 text (byte 0xe9 at byte offset 11)"), "{e}");

        let nul = temp_file("nul.txt", b"ab\0c");
        let e = read_text(&nul).unwrap_err().to_string();
        std::fs::remove_file(&nul).unwrap();
        assert!(e.ends_with("not a text file (a NUL byte at byte offset 2)"), "{e}");
    }

    #[test]
    fn devices_directories_and_missing_files_give_one_line_naming_the_path() {
        let e = read_text(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(e, "/dev/zero: not a text file (a NUL byte at byte offset 0)");
        let e = read_binary(Path::new("/dev/zero"), b"NWSCHED\0", "NWSCHED").unwrap_err().to_string();
        assert!(e.starts_with("/dev/zero: not a NWSCHED file"), "{e}");
        let e = read_text(&std::env::temp_dir()).unwrap_err().to_string();
        assert!(e.ends_with("is a directory, not a file"), "{e}");
        let e = read_text(Path::new("/nonexistent/netweave/x.json")).unwrap_err().to_string();
        assert_eq!(e, "/nonexistent/netweave/x.json: No such file or directory");
    }

    #[test]
    fn text_and_binary_files_read_back_whole() {
        let text = temp_file("ok.txt", "ünïcode\n".as_bytes());
        assert_eq!(read_text(&text).unwrap(), "ünïcode\n");
        std::fs::remove_file(&text).unwrap();
        let bin = temp_file("ok.bin", b"MAGIC\0\xff\x00");
        assert_eq!(read_binary(&bin, b"MAGIC", "test").unwrap(), b"MAGIC\0\xff\x00");
        let short = read_binary(&bin, b"MAGIC\0\xff\x00\x01", "test").unwrap_err().to_string();
        std::fs::remove_file(&bin).unwrap();
        assert!(short.contains("shorter than its signature"), "{short}");
    }
}
