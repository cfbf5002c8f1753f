//! Where a [`Pattern`] comes from and goes to: pattern files (CSV, JSON, per-message trace), a
//! netweave schedule file aggregated, or a generator spec such as `bruck:4096:2048`.
//!
//! ```
//! use netweave_core::mapping::pattern_files::{self, PatternFormat};
//! let p = pattern_files::generate("stencil:4x4:100:open").unwrap();
//! assert_eq!(p.num_messages(), 48);
//! let csv = pattern_files::to_csv(&p);
//! let q = pattern_files::parse_text(&csv, PatternFormat::Csv, "copy", None).unwrap();
//! assert_eq!(q.messages(), p.messages());
//! ```
//!
//! The formats are described in `docs/mapping-formats.md`: CSV rows `src,dst,bytes` (optional
//! header, `# num_ranks=N` comment), JSON `{"num_ranks": N, "messages": [[s, d, b], …]}` (or
//! `{src, dst, bytes}` objects), and trace lines `time src dst bytes`. Repeated pairs are summed.

use std::path::Path;

use super::Pattern;
use crate::error::{NetweaveError, Result};
use crate::invalid;
use crate::traffic::{io as schedule_io, Message};

/// A pattern file's text format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternFormat {
    Csv,
    Json,
    Trace,
}

impl PatternFormat {
    /// `csv`, `json` or `trace`.
    pub fn name(self) -> &'static str {
        match self {
            PatternFormat::Csv => "csv",
            PatternFormat::Json => "json",
            PatternFormat::Trace => "trace",
        }
    }

    /// The inverse of [`name`](Self::name).
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "csv" => Ok(PatternFormat::Csv),
            "json" => Ok(PatternFormat::Json),
            "trace" => Ok(PatternFormat::Trace),
            other => invalid!("unknown pattern format '{other}' (use csv, json or trace)"),
        }
    }
}

/// Generator specs: name and usage line, in listing order.
pub const GENERATORS: &[(&str, &str)] = &[
    ("bruck", "bruck:N[:BASE_BYTES]  Bruck allgather, one step (base 2048)"),
    ("ring", "ring:N[:BYTES]  ring allgather, one step (block 2048)"),
    ("alltoall", "alltoall:N[:BYTES]  every rank to every other (2048)"),
    ("stencil", "stencil:AxB[xC][:BYTES][:open]  halo exchange on a periodic grid (2048)"),
    ("random", "random:N[:DEGREE[:BYTES[:SEED]]]  seeded random sparse (4, 2048, 0)"),
];

/// Bytes per message of a generator spec that names none.
const DEFAULT_GENERATOR_BYTES: u64 = 2048;

/// A non-negative integer field of a spec; `1e6` is accepted for sizes.
fn spec_int(text: &str, what: &str) -> Result<u64> {
    if let Ok(v) = text.parse::<u64>() {
        return Ok(v);
    }
    if text.starts_with('-') && text[1..].parse::<u64>().is_ok() {
        return invalid!("{what} must not be negative, got {text}");
    }
    let scientific = text.contains('e') && text.chars().all(|c| c.is_ascii_digit() || c == '.' || c == 'e');
    match text.parse::<f64>() {
        Ok(v) if scientific && v.fract() == 0.0 && v < u64::MAX as f64 => Ok(v as u64),
        _ => invalid!("{what} '{text}' is not an integer"),
    }
}

fn spec_u32(text: &str, what: &str) -> Result<u32> {
    let v = spec_int(text, what)?;
    u32::try_from(v).map_err(|_| NetweaveError::InvalidParameter(format!("{what} {v} is too large")))
}

/// A pattern from a generator spec (see [`GENERATORS`]).
pub fn generate(spec: &str) -> Result<Pattern> {
    let mut fields = spec.split(':');
    let name = fields.next().unwrap_or_default();
    let args: Vec<&str> = fields.collect();
    let bytes_at = |i: usize| args.get(i).map_or(Ok(DEFAULT_GENERATOR_BYTES), |b| spec_int(b, "bytes"));
    if name == "stencil" {
        let Some(shape) = args.first() else {
            return invalid!("stencil needs a grid shape, e.g. stencil:16x16x16");
        };
        let dims =
            shape.to_ascii_lowercase().split('x').map(|d| spec_u32(d, "grid size")).collect::<Result<Vec<_>>>()?;
        let mut rest: Vec<&str> = args[1..].to_vec();
        let mut periodic = true;
        if let Some(&last) = rest.last() {
            if last == "open" || last == "periodic" {
                periodic = last == "periodic";
                rest.pop();
            }
        }
        let bytes = rest.first().map_or(Ok(DEFAULT_GENERATOR_BYTES), |b| spec_int(b, "bytes"))?;
        return Pattern::stencil(&dims, periodic, bytes);
    }
    if !GENERATORS.iter().any(|(g, _)| *g == name) {
        let known: Vec<&str> = GENERATORS.iter().map(|(g, _)| *g).collect();
        return invalid!("unknown pattern '{spec}': give a file or one of {}", known.join(", "));
    }
    let Some(n) = args.first() else {
        return invalid!("{name} needs a rank count, e.g. {name}:64");
    };
    let n = spec_u32(n, "rank count")?;
    match name {
        "bruck" => Pattern::bruck(n, bytes_at(1)?),
        "ring" => Pattern::ring(n, bytes_at(1)?),
        "alltoall" => Pattern::alltoall(n, bytes_at(1)?),
        _ => {
            let degree = args.get(1).map_or(Ok(4), |d| spec_u32(d, "degree"))?;
            let seed = args.get(3).map_or(Ok(0), |s| spec_int(s, "seed"))?;
            Pattern::random_sparse(n, degree, bytes_at(2)?, seed)
        }
    }
}

fn parse_err(format: PatternFormat, line: usize, message: String) -> NetweaveError {
    NetweaveError::Parse { format: format.name(), line, message }
}

/// Parse a pattern file's text. `num_ranks` overrides the job size the file declares (else
/// the largest rank + 1).
pub fn parse_text(text: &str, format: PatternFormat, name: &str, num_ranks: Option<u32>) -> Result<Pattern> {
    let records = match format {
        PatternFormat::Json => json_records(&json_document(text)?)?,
        _ => parse_lines(text, format)?,
    };
    pattern_of(records, name, num_ranks)
}

/// The pattern of parsed records; `num_ranks` overrides the size they declare.
fn pattern_of((records, declared): Records, name: &str, num_ranks: Option<u32>) -> Result<Pattern> {
    if records.is_empty() {
        return invalid!("pattern '{name}' has no messages");
    }
    let largest = records.iter().map(|&(s, d, _)| s.max(d)).max().unwrap_or(0);
    if largest > u32::MAX as u64 {
        return invalid!("pattern '{name}' names rank {largest}, beyond 32 bits");
    }
    let messages: Vec<Message> =
        records.iter().map(|&(src, dst, bytes)| Message { src: src as u32, dst: dst as u32, bytes }).collect();
    let n = match num_ranks.or(declared) {
        Some(0) => return invalid!("pattern '{name}' declares 0 ranks; it names ranks up to {largest}"),
        Some(n) => n,
        None => u32::try_from(largest + 1)
            .map_err(|_| NetweaveError::InvalidParameter(format!("pattern '{name}' has too many ranks")))?,
    };
    // Per-rank indexes (out and in offsets, the mapper's rank arrays) grow with the largest
    // rank named, not with the file: refuse a rank number the memory budget cannot index.
    crate::budget::ensure_items::<u64>(&format!("pattern '{name}' naming rank {}", n - 1), 4 * (u128::from(n) + 1))?;
    Pattern::from_messages(name, n, &messages)
}

type Records = (Vec<(u64, u64, u64)>, Option<u32>);

fn parse_lines(text: &str, format: PatternFormat) -> Result<Records> {
    let mut records = Vec::new();
    let mut declared = None;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let lineno = index + 1;
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            // `# num_ranks=N`, `# num_ranks: N` or `# num_ranks N` declares the job size.
            if let Some(rest) = comment.trim_start().strip_prefix("num_ranks") {
                let value = rest.trim_start().trim_start_matches(['=', ':']).trim_start();
                let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<u32>() {
                    declared = Some(n);
                }
            }
            continue;
        }
        let fields: Vec<&str> = match format {
            PatternFormat::Csv => line.split(',').map(str::trim).collect(),
            _ => line.split_whitespace().collect(),
        };
        if format == PatternFormat::Csv && records.is_empty() && fields == ["src", "dst", "bytes"] {
            continue; // the optional header
        }
        let (want, columns) = match format {
            PatternFormat::Csv => (3, "src,dst,bytes"),
            _ => (4, "time src dst bytes"),
        };
        if fields.len() != want {
            return Err(parse_err(format, lineno, format!("expected {columns}")));
        }
        let not_numeric = || parse_err(format, lineno, format!("'{line}' is not numeric"));
        if format == PatternFormat::Trace && fields[0].parse::<f64>().is_err() {
            return Err(not_numeric());
        }
        let values = fields[want - 3..].iter().map(|f| f.parse::<i128>()).collect::<std::result::Result<Vec<_>, _>>();
        let values = values.map_err(|_| not_numeric())?;
        if values.iter().any(|&v| v < 0) {
            return invalid!("{} line {lineno}: negative rank or byte count in '{line}'", format.name());
        }
        let value = |i: usize| u64::try_from(values[i]).map_err(|_| not_numeric());
        records.push((value(0)?, value(1)?, value(2)?));
    }
    Ok((records, declared))
}

fn json_document(text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| NetweaveError::Parse {
        format: "pattern JSON",
        line: e.line(),
        message: e.to_string(),
    })
}

fn json_records(doc: &serde_json::Value) -> Result<Records> {
    let json_err = |message: String| NetweaveError::Parse { format: "pattern JSON", line: 0, message };
    let declared = match doc.get("num_ranks") {
        None => None,
        Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Some(n),
            None => return Err(json_err(format!("num_ranks must be a non-negative integer, got {v}"))),
        },
    };
    let messages = if doc.is_object() { doc.get("messages") } else { Some(doc) };
    let Some(serde_json::Value::Array(messages)) = messages else {
        return invalid!("pattern JSON needs a 'messages' list");
    };
    let mut records = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let fields = match m {
            serde_json::Value::Object(o) => ["src", "dst", "bytes"].map(|k| o.get(k).and_then(|v| v.as_i64())),
            serde_json::Value::Array(a) if a.len() == 3 => [0, 1, 2].map(|k| a[k].as_i64()),
            _ => [None; 3],
        };
        let [Some(s), Some(d), Some(b)] = fields else {
            return Err(json_err(format!("message {i} is not {{src, dst, bytes}} or [src, dst, bytes]")));
        };
        if s < 0 || d < 0 || b < 0 {
            return invalid!("pattern JSON message {i} has a negative rank or byte count");
        }
        records.push((s as u64, d as u64, b as u64));
    }
    Ok((records, declared))
}

/// The pattern as CSV: a `# num_ranks=N` line, the header, one aggregated row per pair.
pub fn to_csv(pattern: &Pattern) -> String {
    let mut out = format!("# num_ranks={}\nsrc,dst,bytes\n", pattern.num_ranks());
    for m in pattern.messages() {
        out += &format!("{},{},{}\n", m.src, m.dst, m.bytes);
    }
    out
}

/// The pattern as netweave-pattern JSON (version 1), aggregated.
pub fn to_json(pattern: &Pattern) -> String {
    let messages: Vec<[u64; 3]> = pattern.messages().iter().map(|m| [m.src as u64, m.dst as u64, m.bytes]).collect();
    let doc = serde_json::json!({
        "format": "netweave-pattern", "version": 1, "name": pattern.name(),
        "num_ranks": pattern.num_ranks(), "messages": messages,
    });
    doc.to_string() + "\n"
}

/// Write `pattern`: CSV for a `.csv` path, JSON otherwise.
pub fn save(pattern: &Pattern, path: &Path) -> Result<()> {
    let csv = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let text = if csv { to_csv(pattern) } else { to_json(pattern) };
    std::fs::write(path, text)
        .map_err(|e| NetweaveError::InvalidParameter(format!("cannot write {}: {e}", path.display())))
}

/// A pattern from `source`: a file (`.csv`, `.json`, `.trace`/`.txt`; a netweave schedule,
/// `.json` with phases or `.nws`, is aggregated) or a generator spec. `num_ranks` overrides the
/// size a pattern file declares and must match a schedule's or a generator's.
pub fn load(source: &str, num_ranks: Option<u32>) -> Result<Pattern> {
    let path = Path::new(source);
    let pattern = if path.is_file() {
        let suffix = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        let format = match suffix.as_str() {
            "nws" => None,
            "csv" => Some(PatternFormat::Csv),
            "json" => Some(PatternFormat::Json),
            "trace" | "txt" => Some(PatternFormat::Trace),
            _ => return invalid!("unknown pattern file type '.{suffix}' (use .csv, .json, .trace or a .nws schedule)"),
        };
        let Some(format) = format else {
            return check_size(Pattern::from_schedule(&schedule_io::load(path)?)?, source, num_ranks);
        };
        let text = crate::input::read_text(path)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(source);
        if format != PatternFormat::Json {
            return parse_text(&text, format, name, num_ranks);
        }
        // A JSON file is a netweave schedule when it has phases, else a pattern.
        let doc = json_document(&text)?;
        if doc.get("phases").is_none() {
            return pattern_of(json_records(&doc)?, name, num_ranks);
        }
        Pattern::from_schedule(&schedule_io::from_json(&text)?)?
    } else {
        if !source.contains(':') && !GENERATORS.iter().any(|(g, _)| *g == source) {
            return invalid!("pattern '{source}' is neither a file nor a generator spec such as bruck:64");
        }
        generate(source)?
    };
    check_size(pattern, source, num_ranks)
}

/// A schedule's or a generator's pattern must have the size asked for, if any.
fn check_size(pattern: Pattern, source: &str, num_ranks: Option<u32>) -> Result<Pattern> {
    match num_ranks {
        Some(n) if n != pattern.num_ranks() => {
            invalid!("pattern '{source}' has {} ranks, not {n}", pattern.num_ranks())
        }
        _ => Ok(pattern),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_match_the_pattern_constructors() {
        assert_eq!(generate("bruck:64").unwrap(), Pattern::bruck(64, 2048).unwrap());
        assert_eq!(generate("random:32:3:10:7").unwrap(), Pattern::random_sparse(32, 3, 10, 7).unwrap());
        assert_eq!(generate("alltoall:8:1e3").unwrap(), Pattern::alltoall(8, 1000).unwrap());
        assert!(generate("stencil").unwrap_err().to_string().contains("grid shape"));
        assert!(generate("nonsense:4").unwrap_err().to_string().contains("unknown pattern"));
        assert!(generate("ring:-3").unwrap_err().to_string().contains("negative"));
    }

    #[test]
    fn every_text_format_reads_the_same_traffic() {
        let csv = parse_text("# num_ranks=4\nsrc,dst,bytes\n0,1,10\n0,1,5\n3,2,1\n", PatternFormat::Csv, "c", None);
        let trace = parse_text("# num_ranks 4\n0.0 0 1 10\n5e-6 0 1 5\n7 3 2 1\n", PatternFormat::Trace, "t", None);
        let json = parse_text(
            r#"{"num_ranks": 4, "messages": [[0, 1, 15], {"src": 3, "dst": 2, "bytes": 1}]}"#,
            PatternFormat::Json,
            "j",
            None,
        );
        for p in [csv, trace, json] {
            let p = p.unwrap();
            assert_eq!(p.num_ranks(), 4);
            assert_eq!(p.messages(), &[Message { src: 0, dst: 1, bytes: 15 }, Message { src: 3, dst: 2, bytes: 1 }]);
        }
    }

    #[test]
    fn bad_lines_are_named() {
        let e = parse_text("src,dst,bytes\n0,x,3\n", PatternFormat::Csv, "p", None).unwrap_err().to_string();
        assert_eq!(e, "csv parse error at line 2: '0,x,3' is not numeric");
        let e = parse_text("0 1 2\n", PatternFormat::Trace, "p", None).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = parse_text("# num_ranks=4\n0,9,1\n", PatternFormat::Csv, "p", None).unwrap_err().to_string();
        assert!(e.contains("rank 9"), "{e}");
    }

    #[test]
    fn json_and_csv_round_trip() {
        let p = generate("random:20:2:123:1").unwrap();
        for (text, format) in [(to_csv(&p), PatternFormat::Csv), (to_json(&p), PatternFormat::Json)] {
            assert_eq!(parse_text(&text, format, "p", None).unwrap().messages(), p.messages());
        }
    }
}
