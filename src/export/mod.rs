//! Schedules in other programs' formats and as pictures: MSCCL XML for the MSCCL executor and
//! RCCL, MSCCL++ execution plans, Chakra execution traces for ASTRA-sim, Chrome/Perfetto traces, SVG timelines and
//! goodput charts. Pure functions; the engine validates or replays before it calls them.

pub mod chakra;
mod layout;
pub mod msccl;
pub mod mscclpp;
pub mod plot;
pub mod trace;

/// Per transfer, each link of its path with the span it is busy for that transfer (a relayed
/// transfer's hop's; `sim::link_spans`).
pub type LinkSpans = Vec<Vec<(usize, crate::sim::TransferTime)>>;
