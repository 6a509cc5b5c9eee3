//! Schedules in other programs' formats and as pictures: MSCCL XML for the MSCCL executor and
//! RCCL, MSCCL++ execution plans, Chakra execution traces for ASTRA-sim, Chrome/Perfetto traces, SVG timelines and
//! goodput charts. Pure functions; the engine validates or replays before it calls them.

pub mod chakra;
mod layout;
pub mod msccl;
pub mod mscclpp;
pub mod plot;
pub mod trace;

/// The longest name a writer puts in a file, in bytes: the MSCCL executor reads an attribute
/// into 256 bytes with its terminating zero, and copies to the closing quote without a bound.
pub const MAX_NAME_BYTES: usize = 255;

/// A character no name may hold: a control character, or one XML 1.0 does not allow at all
/// (U+FFFE, U+FFFF): an MSCCL file with one is not well-formed.
pub fn unwritable(c: char) -> bool {
    c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}'
}

/// The bytes `c` takes in an XML attribute as the writers escape it (`&amp;`, `&quot;`, …): what
/// the executor copies, undecoded, into its buffer.
fn escaped_width(c: char) -> usize {
    match c {
        '&' => 5,
        '<' | '>' => 4,
        '"' | '\'' => 6,
        c => c.len_utf8(),
    }
}

/// A name's bytes as an XML attribute writes it (`MAX_NAME_BYTES` bounds these).
pub fn escaped_len(name: &str) -> usize {
    name.chars().map(escaped_width).sum()
}

/// A default name's part taken from a schedule's `algorithm` (any text a file holds):
/// unwritable characters as `?`, cut on a character boundary to at most `max` bytes as an XML
/// attribute writes them.
pub(crate) fn printable(algorithm: &str, max: usize) -> String {
    let (mut out, mut width) = (String::new(), 0);
    for c in algorithm.chars().map(|c| if unwritable(c) { '?' } else { c }) {
        if width + escaped_width(c) > max {
            break;
        }
        width += escaped_width(c);
        out.push(c);
    }
    out
}

/// Per transfer, each link of its path with the span it is busy for that transfer (a relayed
/// transfer's hop's; `sim::link_spans`).
pub type LinkSpans = Vec<Vec<(usize, crate::sim::TransferTime)>>;
