//! Baselines that need a whole mesh or torus, on one less a few links or with a few slower
//! links: built on the whole grid at its common link speed and their transfers over the missing
//! links rerouted, those over the slower links where a detour carries them sooner
//! (`synth::repair`, the repair a regeneration applies to a stored schedule). Without it `auto`
//! on a torus after a failure has only the baselines that route anywhere, at 16,384 NPUs, where
//! the greedy does not run, kolmakov's 1.138 s against bucket's 5.6 ms before the failure; after
//! a slowdown, a grid baseline whose every ring waits on the slow link.

use crate::baselines::BaselineError;
use crate::schedule::Schedule;
use crate::synth::repair::{self, RepairError};
use crate::topology::Topology;

pub use crate::limits::REROUTE_MAX_MISSING_LINKS;

/// Baseline `name` as every door builds it (`synth --algo`, `baseline`, `compare`, `auto`):
/// on a grid with a few slower links, built on the grid before the slowdown and rerouted; not
/// on this topology but on the whole grid it is one less a few links of, built there and
/// rerouted (not again where the caller holds that: `in_hand`, a regeneration's repair of it).
/// `Error::Cancelled` once `poll` says stop.
pub(super) fn baseline_on(
    name: &str,
    topo: &crate::topology::Topology,
    spec: &crate::collective::CollectiveSpec,
    in_hand: bool,
    poll: &dyn Fn() -> bool,
) -> Result<Schedule, super::Error> {
    if let Some(built) = on_slowed_grid(name, topo, spec, in_hand, poll) {
        return built;
    }
    let built = match crate::baselines::build_within(name, topo, spec, poll) {
        // Only where it is a grid's: on a rail the note spoke of "the whole grid".
        Err(BaselineError::Unsupported { algorithm, what })
            if in_hand && topo.grid_before_changes(REROUTE_MAX_MISSING_LINKS).is_some() =>
        {
            Err(BaselineError::Unsupported {
                algorithm,
                what: format!("{what} (not built again: on the whole grid, rerouted, it is the repair in hand)"),
            })
        }
        Err(e @ BaselineError::Unsupported { .. }) => {
            build(name, topo, spec, poll).unwrap_or_else(|| Err(not_rerouted(e, topo)))
        }
        other => other,
    };
    match built {
        Err(BaselineError::Stopped) => Err(super::Error::Cancelled),
        other => Ok(other?),
    }
}

/// `e` (a baseline that does not serve `topo`) with why it was not built on a whole grid and
/// rerouted either, where `topo` lost what no reroute goes round: an NPU, or more links than
/// `REROUTE_MAX_MISSING_LINKS` (the refusal named neither, on a 16×16 torus less 33 links).
fn not_rerouted(e: BaselineError, topo: &Topology) -> BaselineError {
    let BaselineError::Unsupported { algorithm, what } = e else { return e };
    let failed = topo.failed_npus();
    let why = if !failed.is_empty() {
        let list: Vec<String> = failed.iter().map(usize::to_string).collect();
        let npus = if failed.len() == 1 { "NPU" } else { "NPUs" };
        Some(format!("{npus} {} failed: a baseline is rerouted round failed links, not NPUs", list.join(", ")))
    } else {
        topo.grid_missing_link_count().filter(|&m| m > REROUTE_MAX_MISSING_LINKS).map(|m| {
            format!("a mesh or torus less {m} directed links: a baseline is rerouted round at most {REROUTE_MAX_MISSING_LINKS}")
        })
    };
    match why {
        Some(why) => BaselineError::Unsupported { algorithm, what: format!("{what} ({why})") },
        None => BaselineError::Unsupported { algorithm, what },
    }
}

/// Baseline `name` built on the whole grid `topo` is a mesh or torus less a few links (or with
/// a few slower links) of (`Topology::grid_before_changes`), and rerouted onto `topo`; None
/// where `topo` is no such grid, or the baseline does not serve the whole grid either (the
/// caller keeps its own error then).
pub(super) fn build(
    name: &str,
    topo: &Topology,
    spec: &crate::collective::CollectiveSpec,
    stop: &dyn Fn() -> bool,
) -> Option<Result<Schedule, BaselineError>> {
    let (_, whole) = topo.grid_before_changes(REROUTE_MAX_MISSING_LINKS)?;
    let s = match crate::baselines::build_within(name, &whole, spec, stop) {
        Ok(s) => s,
        Err(BaselineError::Stopped) => return Some(Err(BaselineError::Stopped)),
        Err(_) => return None,
    };
    Some(match repair::reroute(s, topo, stop) {
        Ok((s, stats)) => {
            tracing::debug!(
                algorithm = name,
                rerouted = stats.rerouted,
                kept = stats.kept,
                "baseline rerouted around failed or slower links"
            );
            Ok(s)
        }
        Err(RepairError::Stopped) => Err(BaselineError::Stopped),
        Err(e) => {
            tracing::debug!(algorithm = name, "a rerouted baseline failed: {e}");
            return None;
        }
    })
}

/// Baseline `name` on a grid with every link there but a few slower than the rest
/// (`Topology::grid_before_changes`): built on the grid before the slowdown and rerouted
/// (`build`), the repair moving off the slow links what a detour carries sooner (bucket-bidir
/// on torus:128x128 with link 0-1 at a quarter speed: 21.6 ms as it stands, every ring waiting
/// on the slow link, against 5.5 ms intact), or as it stands where that is faster
/// (`BOTH_WAYS_MAX_TRANSFERS`); refused where the caller holds that rerouted
/// (`in_hand`: a regeneration's repair of it). None where the topology is no such grid or the
/// baseline does not serve it (it is built as it stands then); a stop is `Error::Cancelled`.
pub(super) fn on_slowed_grid(
    name: &str,
    topo: &Topology,
    spec: &crate::collective::CollectiveSpec,
    in_hand: bool,
    stop: &dyn Fn() -> bool,
) -> Option<Result<Schedule, super::Error>> {
    topo.infer_grid()?;
    if in_hand {
        topo.grid_before_changes(REROUTE_MAX_MISSING_LINKS)?;
        let reason = format!(
            "{name}: a grid with slower links (not built again: on the grid before them, rerouted, it is the repair in hand)"
        );
        return Some(Err(super::Error::Unsupported { by: super::error::Refuser::Baseline, reason }));
    }
    let rerouted = match build(name, topo, spec, stop)? {
        Ok(s) => s,
        Err(BaselineError::Stopped) => return Some(Err(super::Error::Cancelled)),
        Err(_) => return None,
    };
    if rerouted.transfers.len() > BOTH_WAYS_MAX_TRANSFERS {
        return Some(Ok(rerouted));
    }
    let plain = match crate::baselines::build_within(name, topo, spec, stop) {
        Ok(s) => s,
        Err(BaselineError::Stopped) => return Some(Err(super::Error::Cancelled)),
        Err(_) => return Some(Ok(rerouted)),
    };
    let time = |s: &Schedule| crate::sim::simulate_until(s, stop).ok().map(|t| t.collective_time_ns);
    let faster = match (time(&rerouted), time(&plain)) {
        (Some(r), Some(p)) if p < r => plain,
        _ => rerouted,
    };
    if stop() {
        return Some(Err(super::Error::Cancelled));
    }
    Some(Ok(faster))
}

/// Transfers up to which a slowed grid's baseline is also built as it stands, both simulated
/// and the faster kept: the repair moves each transfer off a slow link where a detour carries
/// it sooner, which can make the whole later (direct's all-gather on ring:8 with link 0-1 at
/// 10 µs: 90.5 µs rerouted, 30.8 µs as it stands). Beyond it the rerouted is kept unsimulated
/// (bucket-bidir on torus:128x128 with a link at a quarter speed: 7.7 ms, every ring waiting on
/// it as it stands 21.6 ms; a second simulation would take half a minute).
const BOTH_WAYS_MAX_TRANSFERS: usize = 1 << 20;
