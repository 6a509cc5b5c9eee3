//! `compare`: every applicable baseline built, checked and timed beside an optional schedule,
//! as a table ranked by time with the lower bound; a door may stop it (`compare_until`).

use super::{Error, check};
use crate::collective::Collective;
use crate::schedule::Schedule;
use serde::Serialize;

/// One row of a comparison table.
#[derive(Clone, Debug, Serialize)]
pub struct ComparisonRow {
    /// The algorithm of the row.
    pub algorithm: String,
    /// Its simulated time.
    pub collective_time_ns: f64,
    /// This time over the best row's.
    pub ratio_to_best: f64,
    /// This time over the lower bound.
    pub ratio_to_bound: Option<f64>,
    /// Distinct steps.
    pub rounds: usize,
    /// Transfers.
    pub transfers: usize,
    /// The chunking the algorithm used.
    pub chunks_per_npu: u32,
    /// The fastest row (ties all marked).
    pub best: bool,
}

/// Every applicable baseline (and optionally a synthesized schedule) on one simulator.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The collective compared (its kind's name): with the size and the NPUs, what a chart of
    /// several comparisons needs (`ccsynth plot goodput`).
    pub collective: &'static str,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// The NPUs the collective runs on: its group's, else the topology's live ones (busbw's
    /// factor is the group's: 4 of 8 NPUs were counted as 8).
    pub npus: usize,
    /// The first 16 hex digits of the SHA-256 of the topology's canonical JSON (what `ccsynth
    /// topology` prints): comparisons on two fabrics of one NPU count are not one chart's points.
    pub topology_digest: String,
    /// The collective's lower bound.
    pub lower_bound_ns: Option<f64>,
    /// Fastest first.
    pub rows: Vec<ComparisonRow>,
    /// Baselines that refused the case, with their reasons.
    pub refused: Vec<(String, String)>,
    /// Each refusal's kind, in `refused`'s order (a door's exit code or status reads it).
    #[serde(skip)]
    pub refused_kinds: Vec<super::ErrorKind>,
    /// The best baseline's time over the synthesized schedule's, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup_over_best_baseline: Option<f64>,
    /// The seed the synthesized row's run took, where a door ran one for the comparison
    /// (`compare --with-synth --seed N`): the same seed gives the same row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// Runs every baseline that supports the collective; `extra` rows (a synthesized schedule)
/// join the table. A baseline that fails validation is a bug and is reported as refused with
/// the reason rather than hidden.
pub fn compare(
    topology: &crate::topology::Topology,
    spec: &crate::collective::CollectiveSpec,
    extra: Option<(&str, &Schedule)>,
) -> Comparison {
    compare_among(topology, spec, extra, &crate::baselines::names())
}

/// `compare` over the named baselines only (names from `baselines::names()`; others are
/// refused with the reason "unknown baseline").
pub fn compare_among(
    topology: &crate::topology::Topology,
    spec: &crate::collective::CollectiveSpec,
    extra: Option<(&str, &Schedule)>,
    names: &[&str],
) -> Comparison {
    match compare_until(topology, spec, extra, names, &|| false) {
        Ok(c) => c,
        Err(e) => unreachable!("a comparison that is never stopped stopped: {e}"),
    }
}

/// `compare_among` for a door that may stop it (a server shutting down): every baseline's
/// build and check polls `cancelled`; once it says stop, `Error::Cancelled`.
pub fn compare_until(
    topology: &crate::topology::Topology,
    spec: &crate::collective::CollectiveSpec,
    extra: Option<(&str, &Schedule)>,
    names: &[&str],
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<Comparison, Error> {
    let row = |algorithm: &str, s: &Schedule, rounds: usize| ComparisonRow {
        algorithm: algorithm.to_string(),
        collective_time_ns: s.collective_time_ns.unwrap_or(f64::NAN),
        ratio_to_best: f64::NAN,
        ratio_to_bound: None,
        rounds,
        transfers: s.transfers.len(),
        chunks_per_npu: s.collective.chunks(),
        best: false,
    };
    let mut rows = Vec::new();
    let mut refused = Vec::new();
    let mut refused_kinds = Vec::new();
    // Every baseline on the caller's pool (they are independent), kept in `names` order. The
    // bound is computed once below, not per row.
    let built: Vec<Result<ComparisonRow, Error>> = {
        use rayon::prelude::*;
        names
            .par_iter()
            .map(|&name| {
                // Built as `synth --algo` builds it (a grid's baselines rerouted around its
                // failed and slower links): the two doors gave ring on torus:4x4 with one slow
                // link 158.3 us and 35.4 us.
                let built = super::rerouted::baseline_on(name, topology, spec, false, cancelled)?;
                check::finalize_until(built, false, cancelled).map(|(s, r)| row(name, &s, r.rounds))
            })
            .collect()
    };
    if cancelled() {
        return Err(Error::Cancelled);
    }
    for (&name, result) in names.iter().zip(built) {
        match result {
            Ok(r) => rows.push(r),
            Err(Error::Cancelled) => return Err(Error::Cancelled),
            Err(e) => {
                refused_kinds.push(e.kind());
                refused.push((name.to_string(), e.to_string()));
            }
        }
    }
    let best_baseline = rows.iter().map(|r| r.collective_time_ns).fold(f64::INFINITY, f64::min);
    let mut speedup = None;
    if let Some((name, s)) = extra {
        let mut r = row(name, s, s.rounds());
        if best_baseline.is_finite() {
            speedup = Some(best_baseline / r.collective_time_ns);
        }
        // A baseline's own schedule (`synth --algo ring --compare`) was listed twice under one
        // name: the baseline's row is dropped where it is the same schedule, and the schedule's
        // row is told apart where it is not (another chunking).
        let same = |b: &ComparisonRow| {
            b.algorithm == r.algorithm
                && (b.collective_time_ns, b.transfers, b.chunks_per_npu)
                    == (r.collective_time_ns, r.transfers, r.chunks_per_npu)
        };
        if let Some(i) = rows.iter().position(same) {
            rows.remove(i);
        } else if rows.iter().any(|b| b.algorithm == r.algorithm) {
            r.algorithm = format!("{name} (this schedule)");
        }
        rows.push(r);
    }
    // One bound every row respects: at the finest chunking among the rows. A bound holds for
    // schedules of its own chunking (the latency bound carries one chunk over the farthest
    // path, less the finer the chunks), and the others are the same at any: broadcast on
    // torus:4x4 at one chunk an NPU gave 43.9 µs, above `auto`'s valid 21.7 µs in 32 chunks.
    let finest =
        rows.iter().map(|r| r.chunks_per_npu).max().filter(|&k| k > spec.chunks() && spec.num_chunks.is_none());
    let spec = &crate::collective::CollectiveSpec { chunks_per_npu: finest.or(spec.chunks_per_npu), ..spec.clone() };
    let bound = Collective::build_unchecked(spec, topology)
        .ok()
        .and_then(|c| crate::bounds::lower_bounds(topology, &c).lower_bound_ns);
    let best = rows.iter().map(|r| r.collective_time_ns).fold(f64::INFINITY, f64::min);
    rows.sort_by(|a, b| a.collective_time_ns.total_cmp(&b.collective_time_ns).then(a.algorithm.cmp(&b.algorithm)));
    for r in &mut rows {
        let t = r.collective_time_ns;
        r.best = t == best;
        r.ratio_to_best = t / best;
        r.ratio_to_bound = bound.filter(|&b| b > 0.0).map(|b| t / b);
    }
    Ok(Comparison {
        collective: spec.kind.name(),
        size_bytes: spec.size_bytes,
        npus: spec.group.as_ref().map_or_else(|| topology.live_npus().len(), Vec::len),
        topology_digest: topology.digest()[..16].to_string(),
        lower_bound_ns: bound,
        rows,
        refused,
        refused_kinds,
        speedup_over_best_baseline: speedup,
        seed: None,
    })
}
