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

/// A default name's part taken from a schedule's `algorithm` (any text a file holds): control
/// characters (which XML 1.0 does not allow, so the MSCCL file was not well-formed) as `?`, cut
/// on a character boundary to at most `max` bytes.
pub(crate) fn printable(algorithm: &str, max: usize) -> String {
    let mut out = String::new();
    for c in algorithm.chars().map(|c| if c.is_control() { '?' } else { c }) {
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

/// Per transfer, each link of its path with the span it is busy for that transfer (a relayed
/// transfer's hop's; `sim::link_spans`).
pub type LinkSpans = Vec<Vec<(usize, crate::sim::TransferTime)>>;
