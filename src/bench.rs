//! `ccsynth bench`: the benchmark suites behind docs/BENCHMARKS.md (wall-clock timing lives
//! here, never in unit tests).

pub mod failures;
mod greedy;
mod ilp;
pub mod scale;
mod sizes;

pub use greedy::{BenchCase, BenchResult, greedy_suite, judge_growth, markdown, run_case};
pub use ilp::{IlpCase, IlpRow, IlpTarget, ilp_markdown, ilp_suite, run_ilp_case};
pub use sizes::{SWEEP_SIZES, SizeCase, SizeRow, run_size_case, sizes_markdown, sizes_suite};

use crate::engine::{self, Request, RequestSpec};
use crate::topology::Topology;

/// 1 GiB/s in the topology format's GB/s (TACOS quotes GiB/s).
const GIB: f64 = 1.073_741_824;

/// Resets the process's peak resident memory (Linux: `5` written to `/proc/self/clear_refs`
/// sets VmHWM to the current RSS), so the next reading is one case's own. False when the
/// kernel does not allow it.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Runs one request through the engine's front door, as every bench case does.
pub fn run_on(topology: &Topology, spec: RequestSpec) -> Result<engine::Output, engine::Error> {
    let req = Request::new(topology.clone(), spec, &engine::Limits::default())?;
    engine::run(&req, engine::Control::none())
}

/// `run_on` a generator spec (`torus:4x4`): the bench's door for a request, as the CLI's and
/// the API's are theirs.
pub fn run_request(topology: &str, spec: RequestSpec) -> Result<engine::Output, engine::Error> {
    let topology = engine::topology_from_spec(topology, &engine::Limits::default())?;
    run_on(&topology, spec)
}
