//! Documented hard limits on input sizes; inputs over them are rejected, never attempted.

/// Nodes (NPUs + switches) in one topology.
pub const MAX_NODES: usize = 1 << 20;
/// Directed links in one topology.
pub const MAX_LINKS: usize = 1 << 24;
/// Chunks in one collective.
pub const MAX_CHUNKS: usize = 1 << 25;
/// Chunk ids held in a schedule's distinct chunk lists once read (what its ranges expand to:
/// 1 GiB).
pub const MAX_LIST_ENTRIES: usize = 1 << 28;
/// (npu, chunk) pairs a custom collective's condition may list, and a synthesizer (the greedy,
/// the ILP) may track in the larger of its collective's conditions: it holds state per pair
/// (the greedy held 6.5 GB for the 2^26 of an all-reduce on 8,192 NPUs).
pub const MAX_CONDITION_PAIRS: usize = 1 << 26;
/// (npu, slot) cells the check of one schedule tracks: the simulator holds 4 bytes per cell, the
/// validator 8 per cell of the groups of chunks it replays at once. Bucket's all-reduce on
/// 16,384 NPUs (4 chunks per NPU) has 2^30.
pub const MAX_CHECKED_CELLS: usize = 1 << 30;
/// Bytes of slot tables the validator's chunk replay holds at once: groups of chunks replay
/// side by side on the pool's threads only as far as their tables fit this together.
pub const REPLAY_BYTES: u64 = 1 << 30;
/// Violations listed in a report; the total is still counted beyond this.
pub const MAX_REPORTED_VIOLATIONS: usize = 1000;
/// Violations counted: the check stops at this many (its report says the count is capped). A
/// file of a few kilobytes can name hundreds of millions (2,000 transfers sharing one list of a
/// million chunks none of whose sources hold them: 2^31 violations, 55 s to count).
pub const MAX_COUNTED_VIOLATIONS: usize = 1 << 24;
/// Work budget (compute NPUs × (nodes + links)) above which the exact min-cut bound is skipped.
pub const MIN_CUT_BUDGET: usize = 40_000_000;
/// Edges the min-cut bound's max-flows may scan (`maxflow::FlowNet::work`) before it is skipped:
/// past the work budget above, the flow's paths' lengths decide its cost (a line of 1,024 NPUs
/// pushes every holder's flow along the line: 14 s), and counting scans stops it at the same
/// point on every machine: about 5 s (mesh:2x512 takes 1.6 G scans, 3.2 s).
pub const MIN_CUT_SCANS: u64 = 1 << 31;
/// Timesteps one TEN edge may span (a finer discretization is refused).
pub const MAX_TEN_SPAN: usize = 1 << 16;
/// Timesteps the greedy may plan over before it gives up (memory and time stay bounded).
pub const MAX_GREEDY_TIMESTEPS: u32 = 1 << 26;
/// Seeds one synthesis request may try.
pub const MAX_SEEDS: usize = 4096;
/// Threads one synthesis request may use.
pub const MAX_THREADS: usize = 256;
/// Overall wall-clock budget one ILP synthesis may be given (seconds).
pub const MAX_SOLVE_TIME_S: f64 = 86_400.0;
/// Missing links (one way each) of a mesh or torus up to which its grid baselines are built on
/// the whole grid and rerouted around them (`engine::rerouted`): a few failures, not another
/// network (each missing link's transfers crowd the links around it).
pub const REROUTE_MAX_MISSING_LINKS: usize = 64;

/// The largest link latency, ns (a thousand seconds), and the least bandwidth, GB/s (a
/// kilobyte a second), any door takes: every time the simulator sums stays finite. A latency of
/// 1e308 summed to infinity and a subnormal bandwidth made every transfer infinite, and the
/// schedule's time then read `null` with the run reported valid.
pub const MAX_LATENCY_NS: f64 = 1e12;
pub const MIN_BANDWIDTH_GB_PER_S: f64 = 1e-6;
/// Whether a link latency is within `0..=MAX_LATENCY_NS` (NaN is not): every door asks this.
pub fn latency_ok(ns: f64) -> bool {
    (0.0..=MAX_LATENCY_NS).contains(&ns)
}
/// Whether a link bandwidth is finite and at least `MIN_BANDWIDTH_GB_PER_S`.
pub fn bandwidth_ok(gb_per_s: f64) -> bool {
    gb_per_s.is_finite() && gb_per_s >= MIN_BANDWIDTH_GB_PER_S
}
/// The largest reduction cost, ns a byte, for the same reason.
pub const MAX_GAMMA_NS_PER_BYTE: f64 = 1e6;
