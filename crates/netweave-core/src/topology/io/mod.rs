//! Topology files: read and write a [`Topology`] in four text formats.
//!
//! | [`Format`]        | names                                   | extensions             | carries |
//! |-------------------|-----------------------------------------|------------------------|---------|
//! | [`Format::Json`]  | `json`                                  | `.json`                | everything (lossless) |
//! | [`Format::IbNet`] | `ibnet`, `ibnetdiscover`, `ibsim`, `net` | `.net`, `.ibnet`, `.topo` | structure, labels, IB link rates |
//! | [`Format::AnyNet`]| `anynet`, `booksim`                     | `.anynet`              | structure, latencies in cycles |
//! | [`Format::Dot`]   | `dot`, `graphviz`                       | `.dot`, `.gv`          | everything (lossless) |
//!
//! Every reader returns [`NetweaveError::Parse`] on bad input — a single line that names the
//! format and the 1-based line — and never panics, whatever the text. Writers are
//! deterministic: the same topology always gives the same bytes, so files diff and cache well.
//! Each format module documents exactly what survives a round trip.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::error::{NetweaveError, Result};
use crate::topology::{Topology, TopologyBuilder};

pub mod anynet;
pub mod dot;
pub mod ibnet;
pub mod json;

#[cfg(test)]
mod tests;

/// A topology file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// netweave's own versioned JSON (`docs/topology-json.md`); lossless.
    Json,
    /// InfiniBand `ibnetdiscover` output and ibsim's `net` files (same grammar).
    IbNet,
    /// BookSim2's `anynet` network file.
    AnyNet,
    /// Graphviz DOT (the subset netweave writes).
    Dot,
}

/// Names accepted by [`Format::from_name`], canonical name first, for error messages.
const NAMES: &[(Format, &[&str])] = &[
    (Format::Json, &["json"]),
    (Format::IbNet, &["ibnet", "ibnetdiscover", "ibsim", "net"]),
    (Format::AnyNet, &["anynet", "booksim"]),
    (Format::Dot, &["dot", "graphviz"]),
];

/// File extensions recognised by [`Format::from_path`] (lower case, without the dot).
const EXTENSIONS: &[(Format, &[&str])] = &[
    (Format::Json, &["json"]),
    (Format::IbNet, &["net", "ibnet", "topo"]),
    (Format::AnyNet, &["anynet"]),
    (Format::Dot, &["dot", "gv"]),
];

impl Format {
    /// All formats, in the order they are listed in messages.
    pub const ALL: [Format; 4] = [Format::Json, Format::IbNet, Format::AnyNet, Format::Dot];

    /// Canonical short name (`"json"`, `"ibnet"`, `"anynet"`, `"dot"`), also used in
    /// parse errors.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::IbNet => "ibnet",
            Format::AnyNet => "anynet",
            Format::Dot => "dot",
        }
    }

    /// Conventional file extension for writing, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::IbNet => "net",
            Format::AnyNet => "anynet",
            Format::Dot => "dot",
        }
    }

    /// Format from a user-given name, case-insensitively: `json`; `ibnet`, `ibnetdiscover`,
    /// `ibsim`, `net`; `anynet`, `booksim`; `dot`, `graphviz`.
    pub fn from_name(name: &str) -> Result<Format> {
        let wanted = name.trim().to_ascii_lowercase();
        NAMES.iter().find(|(_, names)| names.contains(&wanted.as_str())).map(|&(f, _)| f).ok_or_else(|| {
            NetweaveError::InvalidParameter(format!(
                "unknown topology format {:?} (known: {})",
                snippet(name),
                list(NAMES)
            ))
        })
    }

    /// Format from a file name's extension, case-insensitively: `.json`; `.net`, `.ibnet`,
    /// `.topo`; `.anynet`; `.dot`, `.gv`.
    pub fn from_path(path: &Path) -> Result<Format> {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        ext.as_deref().and_then(|e| EXTENSIONS.iter().find(|(_, exts)| exts.contains(&e))).map(|&(f, _)| f).ok_or_else(
            || {
                let dotted: Vec<(Format, Vec<String>)> =
                    EXTENSIONS.iter().map(|(f, exts)| (*f, exts.iter().map(|e| format!(".{e}")).collect())).collect();
                let known = dotted
                    .iter()
                    .map(|(f, exts)| format!("{} for {}", exts.join("/"), f.name()))
                    .collect::<Vec<_>>()
                    .join(", ");
                NetweaveError::InvalidParameter(format!(
                    "cannot tell the topology format of {:?} from its extension (known: {known}); \
                     name the format explicitly",
                    snippet(&path.display().to_string())
                ))
            },
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = NetweaveError;
    /// Same as [`Format::from_name`].
    fn from_str(s: &str) -> Result<Format> {
        Format::from_name(s)
    }
}

/// Render `topo` as text in `format`.
///
/// Fails only where the format cannot express the topology (ibsim limits, anynet's
/// one-router-per-host rule, …); the error says what and where.
pub fn write(topo: &Topology, format: Format) -> Result<String> {
    match format {
        Format::Json => json::write(topo),
        Format::IbNet => ibnet::write(topo),
        Format::AnyNet => anynet::write(topo),
        Format::Dot => dot::write(topo),
    }
}

/// Parse a topology from `text` in `format`. Errors are [`NetweaveError::Parse`].
pub fn read(text: &str, format: Format) -> Result<Topology> {
    match format {
        Format::Json => json::read(text),
        Format::IbNet => ibnet::read(text),
        Format::AnyNet => anynet::read(text),
        Format::Dot => dot::read(text),
    }
}

fn list(table: &[(Format, &[&str])]) -> String {
    table.iter().map(|(_, names)| names.join("/")).collect::<Vec<_>>().join(", ")
}

// ---------------------------------------------------------------------------------------
// Helpers shared by the readers and writers.

/// Upper bound on the total number of ports a file may declare. Readers allocate per-port
/// tables, so without a cap a 30-byte line like `Switch 65535 "x"` repeated could ask for
/// gigabytes; 2^26 ports is far beyond any real fabric (a 32×32×32 torus has ~200k).
pub(crate) const MAX_TOTAL_PORTS: u64 = 1 << 26;

/// A parse error, forced onto one line: the CLI prints errors as one line and file content
/// quoted in a message could otherwise smuggle in newlines.
pub(crate) fn parse_error(format: &'static str, line: usize, message: impl fmt::Display) -> NetweaveError {
    NetweaveError::Parse { format, line, message: one_line(&message.to_string()) }
}

/// Replace control characters by their escapes so a message stays on one line.
pub(crate) fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A short excerpt of user text for messages: at most 40 characters.
pub(crate) fn snippet(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX).collect();
        t.push('…');
        t
    }
}

/// Build the topology a reader assembled. Readers check ports and endpoints themselves so
/// they can name the line; this only maps the builder's (unexpected) complaint into the
/// reader's error type so callers always see `Parse` errors from `read`.
pub(crate) fn finish(builder: TopologyBuilder, format: &'static str) -> Result<Topology> {
    builder.build().map_err(|e| parse_error(format, 0, e))
}

/// Fail if a reader has accumulated more than [`MAX_TOTAL_PORTS`] ports.
pub(crate) fn check_total_ports(format: &'static str, line: usize, total: u64) -> Result<()> {
    if total > MAX_TOTAL_PORTS {
        return Err(parse_error(
            format,
            line,
            format!("the file declares more than {MAX_TOTAL_PORTS} ports in total, refusing to allocate them"),
        ));
    }
    Ok(())
}
