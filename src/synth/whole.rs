//! Producers of a whole collective, beyond one phase's plan: pipelined stages of the matcher
//! (`staged`), per-chunk spanning trees (`trees`), per-chunk routes (`routed`) and recursive
//! doubling on a searched labelling (`doubling`), and all-gather by packed spanning trees
//! (`packing`).

pub mod doubling;
pub mod packing;
pub mod routed;
pub mod staged;
pub mod trees;
