//! Documented hard limits on input sizes; inputs over them are rejected, never attempted.

/// Nodes (NPUs + switches) in one topology.
pub const MAX_NODES: usize = 1 << 20;
/// Directed links in one topology.
pub const MAX_LINKS: usize = 1 << 24;
/// Chunks in one collective.
pub const MAX_CHUNKS: usize = 1 << 25;
/// (npu, chunk) pairs in one pre- or postcondition.
pub const MAX_CONDITION_PAIRS: usize = 1 << 26;
/// Violations listed in a report; the total is still counted beyond this.
pub const MAX_REPORTED_VIOLATIONS: usize = 1000;
/// Work budget (compute NPUs × (nodes + links)) above which the exact min-cut bound is skipped.
pub const MIN_CUT_BUDGET: usize = 40_000_000;
