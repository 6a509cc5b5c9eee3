//! Regeneration after failures: a schedule the caller has (stored, or a file), and the same
//! request on the degraded topology. The repair comes first (`synth::repair`: every transfer
//! that does not touch a failed link is kept byte for byte, the others take detours), then a
//! fresh run of the request within what is left of its budget (the repair's time already
//! prices `auto`'s baselines); the repair is kept only when it is strictly faster. Run first,
//! the repair is a construction like a baseline: a cancel stops it, the time limit does not (at
//! 16,384 NPUs its simulation alone outlasts the default minute, and the fresh run has no
//! schedule to give there). A repair of a schedule whose data flow this process found valid is
//! checked without a replay (`validate::flow_vouched`), so it runs first at any size; a heavy
//! one that is not (read from the service's store) runs after the fresh run, within what is
//! left of the time limit.

use super::{Control, Error, Output, Request, RunStats, Target};
use crate::schedule::Schedule;
use crate::synth::repair::{self, RepairError, RepairStats};
use serde::Serialize;
use std::time::Instant;

/// Which schedule a regeneration returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kept {
    /// The stored schedule with detours around the failures.
    Repair,
    /// A new run of the request on the degraded topology.
    Fresh,
}

/// The repair's side of a regeneration.
#[derive(Clone, Debug, Serialize)]
pub struct RepairOutcome {
    /// Its simulated time, when it gave a schedule.
    pub collective_time_ns: Option<f64>,
    /// What it kept and rerouted.
    #[serde(flatten)]
    pub stats: Option<RepairStats>,
    /// Its wall time (the reroute and simulation, and its validation when it was kept),
    /// milliseconds.
    pub wall_ms: f64,
    /// Why it gave no schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The fresh run's side of a regeneration.
#[derive(Clone, Debug, Serialize)]
pub struct FreshOutcome {
    /// The algorithm run (the request's).
    pub algorithm: String,
    /// Its simulated time, when it gave a schedule.
    pub collective_time_ns: Option<f64>,
    /// Its wall time, milliseconds.
    pub wall_ms: f64,
    /// Why it gave no schedule (the budget ran out, every candidate was slower than the repair,
    /// it does not serve the case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What `stats.regeneration` reports: the schedule regenerated from, both attempts, and which
/// was kept.
#[derive(Clone, Debug, Serialize)]
pub struct RegenerationStats {
    /// The schedule returned.
    pub kept: Kept,
    /// The producer of the schedule regenerated from.
    pub previous_algorithm: Option<String>,
    /// Its simulated time, on its own (intact or less degraded) topology.
    pub previous_collective_time_ns: Option<f64>,
    /// The returned schedule's time over the previous one's.
    pub slower_than_previous: Option<f64>,
    /// The repair of the previous schedule.
    pub repair: RepairOutcome,
    /// The fresh run of the request on the degraded topology.
    pub fresh: FreshOutcome,
    /// The links that run slower (or faster) than in the previous schedule's topology, each
    /// direction with its parameters before and after.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub degraded_links: Vec<crate::topology::LinkChange>,
    /// The directed links of the previous schedule's topology that failed (`[src, dst]`; those
    /// of a failed NPU go with it, in `failed_npus`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_links: Vec<[usize; 2]>,
    /// The NPUs that failed since the previous schedule's topology.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_npus: Vec<usize>,
}

/// The statistics of a regeneration: the kept schedule's producer, both attempts, and the
/// fresh run's own statistics when it gave a schedule.
#[derive(Clone, Debug, Serialize)]
pub struct RegenerationRun {
    /// `repair`, or the fresh run's winner.
    pub algorithm: String,
    /// Both attempts and which was kept.
    pub regeneration: RegenerationStats,
    /// The fresh run's statistics (the portfolio's candidates for `auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fresh: Option<RunStats>,
}

/// Chunk moves of a schedule (every transfer's chunks): what its check costs.
fn chunk_moves(s: &Schedule) -> usize {
    s.transfers.iter().map(|t| t.chunks.len()).sum()
}

/// Chunk moves above which the repair runs after the fresh run instead of before it (about ten
/// seconds of checking on this project's machine).
pub const REPAIR_FIRST_MAX_MOVES: usize = 1 << 25;

/// Whether the stored schedule serves the request's collective: the same kind, size, root and
/// reduction cost, and the same group once the failed NPUs are gone (a failed member makes it
/// another collective, with other chunks).
fn serves(previous: &Schedule, req: &Request) -> Result<(), String> {
    let Target::One(spec) = &req.target else {
        return Err("several collectives at once are regenerated fresh".into());
    };
    let p = &previous.collective;
    // Tenants' schedules are stored as one custom collective: "not the stored schedule's
    // collective" read as if the caller had asked for another.
    if p.kind == crate::collective::CollectiveKind::Custom {
        return Err("a custom collective (several tenants' schedules too) is synthesized afresh, not repaired".into());
    }
    if (p.kind, p.size_bytes, p.root, p.gamma_ns_per_byte)
        != (spec.kind, spec.size_bytes, spec.root, spec.gamma_ns_per_byte)
    {
        return Err("the request is not the stored schedule's collective".into());
    }
    let group = |g: &Option<Vec<usize>>, t: &crate::topology::Topology| g.clone().unwrap_or_else(|| t.live_npus());
    let before = group(&p.group, &previous.topology);
    let after = group(&spec.group, &req.topology);
    if let Some(v) = before.iter().find(|v| !after.contains(v)) {
        return Err(format!("NPU {v} left the collective's group: its chunks need a new schedule"));
    }
    if before != after {
        return Err("the collective's group changed".into());
    }
    Ok(())
}

/// Regenerates `previous` for `req` (the same collective on a degraded topology): the repair,
/// then a fresh run of `req` within its time limit; the faster schedule, the fresh one on a
/// tie. Fails only when neither gives a schedule (the fresh run's error), or on cancel.
pub fn regenerate(previous: Schedule, req: &Request, ctl: Control) -> Result<Output, Error> {
    let started = ctl.since.unwrap_or_else(Instant::now);
    let deadline = started + std::time::Duration::from_secs_f64(req.time_limit_s);
    let stop = super::Stop::new(ctl.cancelled, deadline, req.time_limit_s);
    let previous_algorithm = previous.algorithm.clone();
    let previous_time = previous.collective_time_ns;
    let degraded_links = req.topology.changed_links(&previous.topology);
    let failed_links = req.topology.removed_links(&previous.topology);
    let failed_npus: Vec<usize> =
        req.topology.failed_npus().iter().copied().filter(|&v| !previous.topology.is_failed(v)).collect();
    // The repair is a pass over the transfers and a few shortest paths, then the gate, whose
    // check is as long as the schedule's chunk moves: first where that is cheap (its time then
    // prices `auto`'s baselines), after the fresh run where it is not (a 4096-NPU bucket
    // schedule moves 134 M chunks: its check would take most of a minute's budget). A
    // schedule whose data flow this process found valid (its stamp: checked by `synth` or
    // `require_valid`, not read from a store) is cheap at any size: the repair changes routes
    // only, so its check replays nothing (`validate::flow_vouched`).
    let moves = chunk_moves(&previous);
    let heavy = moves > REPAIR_FIRST_MAX_MOVES && !crate::validate::flow_vouched(&previous);
    let serving = serves(&previous, req);
    // Links slowed, none failed: the stored schedule as it stands is a candidate too (where
    // its check is cheap: it is a second simulation).
    let as_stored = failed_links.is_empty() && failed_npus.is_empty() && moves <= REPAIR_FIRST_MAX_MOVES;
    let mut previous = Some(previous);
    let mut repair = |stop: &(dyn Fn() -> bool + Sync), beat: Option<f64>| {
        let serving = (serving.clone(), as_stored);
        repair_stored(previous.take().expect("repaired once"), req, serving, ctl, stop, beat)
    };
    // A stored baseline's repair is that baseline rerouted: `auto` on the degraded grid (less
    // links, or with slower ones) would build the same schedule again (bucket on
    // torus:128x128: 45 s; bucket-bidir with link 0-1 at a quarter speed: 58 s).
    let fresh_req = previous_algorithm
        .as_deref()
        .filter(|a| serving.is_ok() && super::registry::baseline_names().contains(a))
        .filter(|_| {
            req.topology.infer_grid().is_none()
                || req.topology.grid_before_changes(super::REROUTE_MAX_MISSING_LINKS).is_some()
        })
        .map(|a| Request { rerouted_in_hand: Some(a.to_string()), ..req.clone() });
    let fresh_req = fresh_req.as_ref().unwrap_or(req);
    let fresh_run = |incumbent: Option<f64>| -> (Result<Output, Error>, f64) {
        (ctl.progress)(0.05, "regenerate: a fresh run on the degraded topology");
        let began = Instant::now();
        let out = super::produce(fresh_req, ctl, stop, incumbent);
        (out, began.elapsed().as_secs_f64() * 1e3)
    };
    // The repair run first, a construction like a baseline, is stopped by a cancel, not by
    // the time limit (as `auto` checks a baseline it has built): its simulation at 16,384 NPUs
    // alone takes longer than the default minute, and without it there is no schedule at all
    // there. Run after the fresh run (heavy, not vouched for), it gets what is left of the
    // limit, so the regeneration ends within it.
    let ((repaired, repair_ms), (fresh, fresh_ms)) = if heavy {
        let fresh = fresh_run(None);
        let beat = fresh.0.as_ref().ok().and_then(|o| o.schedule.collective_time_ns);
        (repair(&|| stop.now(), beat), fresh)
    } else {
        let repaired = repair(ctl.cancelled, None);
        let incumbent = repaired.0.as_ref().ok().and_then(|(o, _)| o.schedule.collective_time_ns);
        (repaired, fresh_run(incumbent))
    };
    if (ctl.cancelled)() {
        return Err(Error::Cancelled);
    }
    let repair_time = repaired.as_ref().ok().and_then(|(o, _)| o.schedule.collective_time_ns);
    let fresh = match fresh {
        Err(Error::Cancelled) => return Err(Error::Cancelled),
        f => f,
    };
    let fresh_time = fresh.as_ref().ok().and_then(|o| o.schedule.collective_time_ns);
    let keep_repair = match (repair_time, fresh_time) {
        (Some(r), Some(f)) => r < f,
        (Some(_), None) => true,
        _ => false,
    };
    let mut repair_outcome = RepairOutcome {
        collective_time_ns: repair_time,
        stats: repaired.as_ref().ok().map(|(_, s)| s.clone()),
        wall_ms: repair_ms,
        note: repaired.as_ref().err().cloned(),
    };
    let fresh_outcome = fresh_outcome(req, &fresh, fresh_ms, repair_time.is_some());
    let (repaired, keep_repair) = check_kept(keep_repair, repaired, fresh.is_ok(), ctl, &mut repair_outcome)?;
    let (mut out, fresh_stats) = if keep_repair {
        let (out, _) = repaired.expect("a repair time means a repaired schedule");
        (out, fresh.ok().map(|o| o.stats))
    } else {
        let out = fresh?;
        let stats = out.stats.clone();
        (Output { stats: RunStats::Baseline { algorithm: String::new() }, ..out }, Some(stats))
    };
    let algorithm = match &fresh_stats {
        Some(s) if !keep_repair => s.algorithm().unwrap_or_else(|| out.schedule.algorithm.clone().unwrap_or_default()),
        _ => "repair".to_string(),
    };
    let time = out.schedule.collective_time_ns;
    out.stats = RunStats::Regeneration(Box::new(RegenerationRun {
        algorithm,
        regeneration: RegenerationStats {
            kept: if keep_repair { Kept::Repair } else { Kept::Fresh },
            previous_algorithm,
            previous_collective_time_ns: previous_time,
            slower_than_previous: time.zip(previous_time).filter(|(_, p)| *p > 0.0).map(|(t, p)| t / p),
            repair: repair_outcome,
            fresh: fresh_outcome,
            degraded_links,
            failed_links,
            failed_npus,
        },
        fresh: fresh_stats,
    }));
    Ok(out)
}

/// The fresh run's side of a regeneration, from what it gave (`repaired`: the repair gave a
/// schedule, so a fresh run that ran out of time found none faster).
fn fresh_outcome(req: &Request, fresh: &Result<Output, Error>, wall_ms: f64, repaired: bool) -> FreshOutcome {
    FreshOutcome {
        algorithm: req.algorithm.name().to_string(),
        collective_time_ns: fresh.as_ref().ok().and_then(|o| o.schedule.collective_time_ns),
        wall_ms,
        note: fresh.as_ref().err().map(|e| match e {
            Error::TimeLimit { .. } if repaired => {
                "no schedule faster than the repair within the time limit".to_string()
            }
            e => e.to_string(),
        }),
    }
}

/// A repair's schedule and statistics, or why it gave none.
type Repaired = Result<(Output, RepairStats), String>;

/// The repair, when `keep` says it is kept, validated now with the simulation it has (its
/// wall time added to `outcome`); were it invalid (a bug of the repair, logged), the fresh
/// schedule is returned if there is one (`fresh_ok`), and the outcome says why. Whether the
/// repair is still kept.
fn check_kept(
    keep: bool,
    repaired: Repaired,
    fresh_ok: bool,
    ctl: Control,
    outcome: &mut RepairOutcome,
) -> Result<(Repaired, bool), Error> {
    match (keep, repaired) {
        (true, Ok((out, stats))) => {
            let began = Instant::now();
            let checked = finalize_repair(out, ctl);
            outcome.wall_ms += began.elapsed().as_secs_f64() * 1e3;
            match checked {
                Ok(out) => Ok((Ok((out, stats)), true)),
                Err(Error::Internal(e)) if fresh_ok => {
                    tracing::error!("regenerate: the repair is not valid, the fresh schedule is kept: {e}");
                    outcome.note = Some(format!("not kept: {e}"));
                    Ok((Err(e.to_string()), false))
                }
                Err(e) => Err(e),
            }
        }
        (_, r) => Ok((r, false)),
    }
}

/// The repair of `previous` for `req` (`serving`: why it cannot serve it, if so), simulated
/// but not yet validated, stopped by `stop`; with `beat` (a schedule already in hand: the
/// fresh run's, when the repair runs after it) a repair whose busiest link alone takes longer
/// is priced out before its simulation. And its wall time, ms.
fn repair_stored(
    previous: Schedule,
    req: &Request,
    (serving, as_stored): (Result<(), String>, bool),
    ctl: Control,
    stop: &(dyn Fn() -> bool + Sync),
    beat: Option<f64>,
) -> (Repaired, f64) {
    // Asked by the repair's pass and its simulation.
    let began = Instant::now();
    // Where nothing failed (links only slowed) the stored schedule still runs as it is: it is
    // simulated beside the reroute and kept where the reroute is no faster (a link at 90 of
    // 100 GB/s: the greedy's all-reduce on torus:8x8 rerouted 1.676 ms, as it was 1.476 ms).
    let out = serving.and_then(|()| {
        (ctl.progress)(0.0, "regenerate: repairing the stored schedule");
        let stored = as_stored.then(|| previous.clone());
        let (mut s, stats) = repair::reroute(previous, &req.topology, stop).map_err(|e| match e {
            RepairError::Stopped => "stopped: cancelled, or the time limit ran out".to_string(),
            e => e.to_string(),
        })?;
        let ms = began.elapsed().as_secs_f64() * 1e3;
        tracing::debug!(target: "ccsynth::timing", wall_ms = ms, "regenerate: rerouted");
        if let Some(why) = priced_out(&s, beat) {
            return Err(why);
        }
        s.algorithm = Some("repair".into());
        // Simulated only: it is validated (and bounded) once kept, so a repair that loses
        // to the fresh run costs no validation (a 4096-NPU bucket schedule's is ~10 s).
        let (schedule, report) = super::gate_until(s, super::Gate::Deferred, stop).map_err(|e| match e {
            Error::Cancelled => "stopped (cancelled, or the time limit ran out) before its check ended".to_string(),
            e => e.to_string(),
        })?;
        let (schedule, report, stats) = match stored.map(|s| as_it_stands(s, req, stop)) {
            Some(Ok((s, r))) if s.collective_time_ns.zip(schedule.collective_time_ns).is_some_and(|(a, b)| a <= b) => {
                let kept = s.transfers.len();
                (s, r, RepairStats { kept, as_stored: true, ..RepairStats::default() })
            }
            _ => (schedule, report, stats),
        };
        let algorithm = "repair".to_string();
        Ok((Output { schedule, report, stats: RunStats::Baseline { algorithm }, lp: Vec::new() }, stats))
    });
    (out, began.elapsed().as_secs_f64() * 1e3)
}

/// `stored` on the request's topology as it is (every link it uses still there), simulated.
fn as_it_stands(
    mut stored: Schedule,
    req: &Request,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, super::check::CheckReport), Error> {
    stored.topology = req.topology.clone();
    stored.collective_time_ns = None;
    stored.algorithm = Some("repair".into());
    super::gate_until(stored, super::Gate::Deferred, stop)
}

/// Why a repair is not simulated: its busiest link alone is busy at least as long as `beat`
/// (the fresh schedule's time), so it cannot be kept.
fn priced_out(repaired: &Schedule, beat: Option<f64>) -> Option<String> {
    let beat = beat?;
    let busiest = crate::sim::link_load_bound_ns(repaired).filter(|&b| b >= beat)?;
    Some(format!(
        "priced out: its busiest link alone is busy {:.3} us, longer than the fresh schedule ({:.3} us)",
        busiest / 1e3,
        beat / 1e3
    ))
}

/// The kept repair's full check: validated with the simulation it already has, and bounded.
fn finalize_repair(out: Output, ctl: Control) -> Result<Output, Error> {
    let (schedule, report) = super::finalize_deferred(out.schedule, out.report, true, ctl.cancelled)?;
    Ok(Output { schedule, report, ..out })
}

/// `topo` after `failures`, refused (on the failures, named from their root) where they cut
/// a collective of `runs` apart: its group (every live NPU when it has none; every live NPU
/// when `runs` is empty) falls into parts and the collective cannot reach where it needs to
/// (every link of an NPU, a ring broken twice). A split it does not need is no error: a
/// broadcast from a root that still reaches every NPU runs, as it does on the same topology
/// read from a file (the flags refused it). The group is not the user's fault there, so the
/// error names the failures, not the group. Its failed NPUs leave it, and ids that are no
/// NPU are left to the collective's own check.
pub fn degraded(
    topo: &crate::topology::Topology,
    runs: &[crate::collective::CollectiveSpec],
    failures: &crate::topology::Failures,
) -> Result<crate::topology::Topology, crate::error::InputError> {
    use crate::collective::Collective;
    let after = topo.with_failures(failures)?;
    let live = |v: &usize| after.is_npu(*v) && !after.is_failed(*v);
    let every = [None];
    let specs: Vec<Option<&crate::collective::CollectiveSpec>> =
        if runs.is_empty() { every.to_vec() } else { runs.iter().map(Some).collect() };
    for (i, spec) in specs.iter().enumerate() {
        let given = spec.and_then(|s| s.group.as_deref());
        let group: Vec<usize> = given.map_or_else(|| after.live_npus(), |g| g.iter().copied().filter(live).collect());
        let split = after.parts_of(&group);
        if split.len() < 2 || topo.parts_of(&group).len() >= 2 {
            continue;
        }
        // Whether the collective still reaches where it needs to: a rooted one from or to its
        // root (a search of the links, not its conditions, which a large all-gather's are not
        // cheap to list before its limits are checked), a custom one by its listed conditions;
        // the others need every NPU of the group to reach every other. A root that is no live
        // NPU is left to the collective's own check.
        use crate::collective::CollectiveKind as K;
        let reaches = spec.is_some_and(|s| match (s.kind, s.root) {
            (K::Broadcast | K::Scatter, Some(r)) => root_reaches(&after, r, &group, false),
            (K::Reduce | K::Gather, Some(r)) => root_reaches(&after, r, &group, true),
            (K::Custom, _) => {
                let survivors = crate::collective::CollectiveSpec { group: given.map(|_| group.clone()), ..s.clone() };
                Collective::build_unchecked(&survivors, &after).map_or(true, |c| c.check_reachable(&after).is_ok())
            }
            _ => false,
        });
        if reaches {
            continue;
        }
        let whose = if specs.len() > 1 { format!("tenants[{i}]'s group") } else { "the collective's group".into() };
        // A rooted collective's advice is about its root: failing the NPUs of the root's part
        // would fail the root itself, where the root is cut off alone.
        let advice = match spec.and_then(|s| s.root) {
            Some(r) if split.iter().any(|p| p.as_slice() == [r]) => {
                format!("its root, NPU {r}, is cut off from every other NPU of it, so the collective cannot run")
            }
            Some(r) => format!("fail the NPUs cut off from its root, NPU {r}, too"),
            None => "fail the NPUs cut off too".to_string(),
        };
        return Err(crate::error::InputError::new(
            "",
            format!("they split {whose}: {}; {advice}", crate::collective::describe_parts(&split)),
        ));
    }
    Ok(after)
}

/// Whether `root` reaches every NPU of `group` over `t`'s links (`inward`: whether every one
/// reaches it); a root that is no node of `t` is left to the collective's own check.
fn root_reaches(t: &crate::topology::Topology, root: usize, group: &[usize], inward: bool) -> bool {
    if root >= t.nodes() || t.is_failed(root) {
        return true;
    }
    let from = [root as u32];
    let seen = if inward {
        crate::collective::reachable_from(&t.transposed(), &from)
    } else {
        crate::collective::reachable_from(t, &from)
    };
    group.iter().all(|&v| v >= t.nodes() || seen[v])
}

/// A regenerated collective's group: `group` without the `failed` NPUs. Every NPU of it failing
/// is named at `path` (the failed NPUs), not at the group the caller never gave (the CLI said
/// "--group: expected at least one live NPU", the API `collective.group`).
pub fn surviving_group(group: &mut Vec<usize>, failed: &[usize], path: &str) -> Result<(), crate::error::InputError> {
    let ids: Vec<String> = group.iter().map(|v| v.to_string()).collect();
    group.retain(|v| !failed.contains(v));
    match group.is_empty() {
        true => Err(crate::error::InputError::new(
            path,
            format!(
                "every NPU of the collective's group ({}) fails: none is left to regenerate it for",
                ids.join(", ")
            ),
        )),
        false => Ok(()),
    }
}

/// What a regeneration of `previous` after `failures` runs on: the degraded topology, and the
/// same collective (kind, size, root, reduction cost) on the survivors, its group without the
/// failed NPUs and its chunks per NPU left open for the fresh run. An error where the failures
/// cut the group apart.
pub fn regeneration_target(
    previous: &Schedule,
    failures: &crate::topology::Failures,
) -> Result<(crate::topology::Topology, crate::collective::CollectiveSpec), crate::error::InputError> {
    use crate::error::InputError;
    let mut spec = previous.collective.clone();
    spec.chunks_per_npu = None;
    if let Some(g) = &mut spec.group {
        surviving_group(g, &failures.npus, "failures.npus")?;
    }
    let topo = degraded(&previous.topology, std::slice::from_ref(&spec), failures).map_err(|e| e.within("failures"))?;
    survivors_serve(&spec, &failures.npus).map_err(|why| InputError::new("failures.npus", why))?;
    Ok((topo, spec))
}

/// Why failing `failed_npus` leaves the stored collective `spec` nothing to regenerate, said of
/// the failed NPUs (the caller names the field): its root failed, or a failed NPU is named in
/// a custom collective's conditions (tenants' too), which a regeneration keeps as the caller
/// gave them (it was named at `collective.postcondition[1]`, a field the request has not).
pub fn survivors_serve(spec: &crate::collective::CollectiveSpec, failed_npus: &[usize]) -> Result<(), String> {
    if let Some(root) = spec.root.filter(|r| failed_npus.contains(r)) {
        return Err(format!("NPU {root} is the collective's root"));
    }
    let named = spec.precondition.iter().chain(&spec.postcondition).flatten().map(|p| p[0] as usize);
    match named.filter(|v| failed_npus.contains(v)).min() {
        Some(v) => Err(format!(
            "NPU {v} holds or wants chunks of the stored custom collective, whose conditions a regeneration keeps: synthesize the collective without it"
        )),
        None => Ok(()),
    }
}

/// A stored request's `o`ptions for a run by `to` where `from` ran it: seeds and a time limit
/// that were `from`'s defaults on the `intact` topology become `to`'s on the `degraded` one (a
/// thorough greedy's 600 s kept by the ILP, which does not read `effort`, ran ten times its
/// default), as a new request by `to` would have them. `caps`: the server's limits a default
/// time was cut to when stored (its `max_solve_s`, then an interactive job's).
pub fn options_for_algorithm(
    o: &mut super::CheckedOptions,
    (from, to): (&super::Algorithm, &super::Algorithm),
    (intact, degraded): (&crate::topology::Topology, &crate::topology::Topology),
    caps: [f64; 2],
) {
    if o.seeds == from.default_seeds(intact) {
        o.seeds = to.default_seeds(degraded);
    }
    let default_s = |a: &super::Algorithm| a.default_time_limit_s(o.effort).min(caps[0]);
    let was = default_s(from);
    if o.time_limit_s == was || o.time_limit_s == was.min(caps[1]) {
        o.time_limit_s = default_s(to);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Algorithm, Effort, Options, Request, RequestSpec, Target};
    use crate::collective::{CollectiveKind, CollectiveSpec};

    /// What a request by `algorithm` stores, given `effort` and maybe a time limit.
    fn stored(algorithm: &str, effort: Effort, time_limit_s: Option<f64>) -> super::super::CheckedOptions {
        let topo = crate::topology::parse_spec("torus:4x4").unwrap();
        let spec = RequestSpec {
            target: Target::One(CollectiveSpec::new(CollectiveKind::AllReduce, 1 << 20)),
            algorithm: algorithm.parse().unwrap(),
            options: Options { effort: Some(effort), time_limit_s, ..Options::default() },
        };
        Request::new(topo, spec, &Default::default()).unwrap().checked_options()
    }

    #[test]
    fn defaults_follow_the_algorithm_a_regeneration_changes_to() {
        let topo = crate::topology::parse_spec("torus:4x4").unwrap();
        let moved = |mut o, from: &str, to: &str, caps| {
            let (from, to): (Algorithm, Algorithm) = (from.parse().unwrap(), to.parse().unwrap());
            super::options_for_algorithm(&mut o, (&from, &to), (&topo, &topo), caps);
            o
        };
        let thorough = stored("auto", Effort::Thorough, None);
        assert_eq!((thorough.seeds, thorough.time_limit_s), (4, 600.0));
        let o = moved(thorough.clone(), "auto", "ilp", [3600.0, 60.0]);
        assert_eq!((o.seeds, o.time_limit_s), (1, 60.0));
        assert_eq!(moved(thorough.clone(), "auto", "greedy", [3600.0, 60.0]).time_limit_s, 600.0);
        // Cut to the interactive limit when stored (30 s here), it is a default still; a time
        // that is neither default nor cut is the caller's.
        let capped = super::super::CheckedOptions { time_limit_s: 30.0, ..thorough.clone() };
        assert_eq!(moved(capped, "greedy", "ilp", [3600.0, 30.0]).time_limit_s, 60.0);
        let own = super::super::CheckedOptions { time_limit_s: 45.0, ..thorough };
        assert_eq!(moved(own, "greedy", "ilp", [3600.0, 30.0]).time_limit_s, 45.0);
        // The caller's own time and seeds stay.
        let given = stored("greedy", Effort::Thorough, Some(600.0));
        let given = super::super::CheckedOptions { seeds: 3, time_limit_s: 123.0, ..given };
        let o = moved(given, "greedy", "ilp", [3600.0, 60.0]);
        assert_eq!((o.seeds, o.time_limit_s), (3, 123.0));
    }
}
