//! Shared helpers for the integration tests: small topologies, collectives and schedules, the
//! engine's front door (`run_request`, `baseline`), the greedy matcher alone (`matcher`) and
//! the doubling planner alone (`doubled`).
#![allow(dead_code)]

use ccsynth::collective::{Collective, CollectiveKind, CollectiveSpec};
use ccsynth::engine::{self, Options, RequestSpec};
use ccsynth::schedule::{Schedule, Transfer};
use ccsynth::synth::{self, PlanOptions, PlanStats};
use ccsynth::ten::SwitchModel;
use ccsynth::topology::{Topology, parse_spec};

pub fn topo(spec: &str) -> Topology {
    parse_spec(spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// The torus of these sides, with its spec and its translation view, if it has at least 4
/// NPUs (a ring at least 4) and is recognised as a torus: the random tori of the translation
/// property tests.
pub fn random_torus(dims: &[usize]) -> Option<(String, Topology, synth::translate::Torus)> {
    let n: usize = dims.iter().product();
    if n < 4 || (dims.len() == 1 && dims[0] < 4) {
        return None;
    }
    let spec = format!("torus:{}", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x"));
    let t = topo(&spec);
    let torus = synth::translate::Torus::of(&t)?;
    Some((spec, t, torus))
}

pub fn coll(t: &Topology, kind: CollectiveKind, size: u64) -> Collective {
    Collective::build(&CollectiveSpec::new(kind, size), t).unwrap()
}

pub fn coll_spec(t: &Topology, spec: CollectiveSpec) -> Collective {
    Collective::build(&spec, t).unwrap()
}

pub fn sched(t: &Topology, c: &Collective, transfers: Vec<Transfer>) -> Schedule {
    let mut s = Schedule::new(t.clone(), c, "test");
    s.transfers = transfers.into();
    s
}

/// Unidirectional ring all-gather along `order` (hops may carry paths from `path_of`).
pub fn ring_all_gather(order: &[usize], k: usize, path_of: &dyn Fn(usize, usize) -> Option<Vec<u32>>) -> Vec<Transfer> {
    let p = order.len();
    let mut out = Vec::new();
    for s in 0..p - 1 {
        for i in 0..p {
            let owner = (i + p - s) % p;
            let chunks: Vec<u32> = (0..k).map(|x| (owner * k + x) as u32).collect();
            let (a, b) = (order[i], order[(i + 1) % p]);
            let mut t = Transfer::copy(s as u32, a, b, chunks);
            t.path = path_of(a, b).map(Into::into);
            out.push(t);
        }
    }
    out
}

/// The all-gather ring 0→2→1→3 on ring:4, one chunk per NPU (chunk v is NPU v's): 0→2 goes
/// through 1 and 1→3 through 2, so every step the link 1→2 carries 1→3's first hop and 0→2's
/// second (the relay-order tests of the GPU exports).
pub fn ring_0213_relayed() -> Vec<Transfer> {
    let order = [0usize, 2, 1, 3];
    (0..3)
        .flat_map(|s| {
            (0..4).map(move |i| {
                let (a, b) = (order[i], order[(i + 1) % 4]);
                let mut t = Transfer::copy(s as u32, a, b, vec![order[(i + 4 - s) % 4] as u32]);
                let neighbours = b == (a + 1) % 4 || a == (b + 1) % 4;
                t.path = (!neighbours).then(|| vec![a as u32, (a as u32 + 1) % 4, b as u32].into());
                t
            })
        })
        .collect()
}

/// Ring all-reduce along `order`: p−1 reduce steps, then p−1 copy steps. Chunk c belongs to
/// rank c; rank i ends the reduce-scatter holding chunk i+1 complete.
pub fn ring_all_reduce(order: &[usize], path_of: &dyn Fn(usize, usize) -> Option<Vec<u32>>) -> Vec<Transfer> {
    let p = order.len();
    let mut out = Vec::new();
    for s in 0..p - 1 {
        for i in 0..p {
            let c = ((i + p - s) % p) as u32;
            let (a, b) = (order[i], order[(i + 1) % p]);
            let mut t = Transfer::reduce(s as u32, a, b, vec![c]);
            t.path = path_of(a, b).map(Into::into);
            out.push(t);
        }
    }
    for j in 0..p - 1 {
        for i in 0..p {
            let c = ((i + 1 + p - j) % p) as u32;
            let (a, b) = (order[i], order[(i + 1) % p]);
            let mut t = Transfer::copy((p - 1 + j) as u32, a, b, vec![c]);
            t.path = path_of(a, b).map(Into::into);
            out.push(t);
        }
    }
    out
}

pub fn no_path(_: usize, _: usize) -> Option<Vec<u32>> {
    None
}

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The engine's one front door (`engine::run`) with the library's limits, run to the end: the
/// request is checked by `Request::new` (its refusals come back as `engine::Error::Input`).
pub fn run_request(t: &Topology, spec: RequestSpec) -> Result<engine::Output, engine::Error> {
    run_request_with(t, spec, &|| false)
}

/// `run_request` with a cancel poll.
pub fn run_request_with(
    t: &Topology,
    spec: RequestSpec,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<engine::Output, engine::Error> {
    let req = engine::Request::new(t.clone(), spec, &engine::Limits::default())?;
    engine::run(&req, engine::Control { cancelled, progress: &|_, _| {}, since: None })
}

/// `algorithm` through the front door at seed 3 alone with a 600 s limit: its schedule, or the
/// refusal as text (the export suites run every producer this way).
pub fn run_seeded(t: &Topology, spec: &CollectiveSpec, algorithm: &str) -> Result<Schedule, String> {
    let options = Options { seed: Some(3), seeds: Some(1), time_limit_s: Some(600.0), ..Options::default() };
    let rs = RequestSpec {
        target: engine::Target::One(spec.clone()),
        algorithm: algorithm.parse().map_err(|e: ccsynth::error::InputError| e.to_string())?,
        options,
    };
    run_request(t, rs).map(|o| o.schedule).map_err(|e| e.to_string())
}

/// A baseline through the front door: its schedule and check report. The chunks are the
/// spec's (or the baseline's own minimum), and the time limit is the library's cap, so the
/// construction runs to its end as a direct build would.
pub fn baseline(
    name: &str,
    t: &Topology,
    spec: CollectiveSpec,
) -> Result<(Schedule, engine::CheckReport), engine::Error> {
    let options = Options { time_limit_s: Some(engine::Limits::default().max_solve_s), ..Options::default() };
    let algorithm = name.parse().map_err(engine::Error::Input)?;
    let out = run_request(t, RequestSpec { algorithm, options, ..RequestSpec::new(spec) })?;
    Ok((out.schedule, out.report))
}

/// What `matcher` returns: a validated, timed schedule and the matcher's own statistics.
pub struct Matched {
    /// The schedule, with its simulated time.
    pub schedule: Schedule,
    /// Its check report (validity, rounds, simulated time, bounds).
    pub report: engine::CheckReport,
    /// TEN timesteps (all phases and per phase), the TEN timestep, replacements.
    pub stats: PlanStats,
}

/// The greedy matcher alone (TACOS's greedy), validated and timed: what `engine::run` tries
/// first, without the latency-mode planners or the chunk search. One seed, chunks per NPU as
/// `spec` says (1 when omitted), on each automatic TEN timestep (the fastest edge's, and finer
/// ones where link times are not multiples of it; none when nothing moves), keeping the
/// fastest by simulated time, ties to the coarser timestep, as the engine ranks its runs.
/// Panics, naming the case, if the collective cannot be built or the matcher fails.
pub fn matcher(t: &Topology, spec: CollectiveSpec, seed: u64, switch_model: SwitchModel) -> Matched {
    let what = format!("the matcher on {:?} (seed {seed}, {switch_model:?})", spec.kind);
    let c = Collective::build(&spec, t).unwrap_or_else(|e| panic!("{what}: {e}"));
    let discretizations: Vec<Option<f64>> = if c.needed().is_empty() {
        vec![None] // nothing moves: no TEN is built
    } else {
        synth::auto_discretizations(t, c.chunk_size_bytes, switch_model)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .into_iter()
            .map(Some)
            .collect()
    };
    let mut best: Option<(f64, Schedule, PlanStats)> = None;
    for discretization_ns in discretizations {
        let opts = PlanOptions { seed, switch_model, discretization_ns };
        let (s, stats) = synth::greedy(t, &c, &opts, &|| false).unwrap_or_else(|e| panic!("{what}: {e}"));
        let time = ccsynth::sim::simulate(&s).map(|x| x.collective_time_ns).unwrap_or(f64::INFINITY);
        if best.as_ref().is_none_or(|b| time < b.0) {
            best = Some((time, s, stats));
        }
    }
    let (_, s, stats) = best.expect("at least one TEN timestep");
    let (schedule, report) = engine::finalize(s).unwrap_or_else(|e| panic!("{what}: {e}"));
    Matched { schedule, report, stats }
}

/// In place, an all-to-all's output cell of the chunk NPU 0 receives from NPU 1 is the input
/// cell of the chunk it sends to NPU 1. This valid schedule on fc:2 moves that chunk aside (into
/// a scratch slot) with a local move in the step the other lands, and sends it on from there: an
/// export must read it before the landing overwrites the cell.
pub fn all_to_all_moved_aside_while_landing() -> Schedule {
    let t = topo("fc:2");
    let c = coll(&t, CollectiveKind::AllToAll, 2 << 20);
    let moving = |from: u32, to: u32| -> u32 {
        (0..c.num_chunks as u32)
            .find(|&ch| c.precondition.iter().any(|p| p == [from, ch]) && c.postcondition.iter().any(|p| p == [to, ch]))
            .expect("a chunk from one NPU to the other")
    };
    let (o, w) = (moving(0, 1), moving(1, 0));
    let aside = c.num_chunks as u32;
    let mut s = sched(
        &t,
        &c,
        vec![
            Transfer::copy(0, 0, 0, vec![o]).into_slots(vec![aside]),
            Transfer::copy(0, 1, 0, vec![w]),
            Transfer::copy(1, 0, 1, vec![aside]).into_slots(vec![o]),
        ],
    );
    s.scratch = vec![o];
    assert!(ccsynth::validate::validate(&s).valid);
    s
}

/// Recursive doubling on `t` at `shape`, as the greedy's doubling run makes it (its labelling
/// searched, seed 0).
pub fn doubled(t: &Topology, c: &Collective, shape: synth::doubling::Shape) -> Result<Schedule, synth::SynthError> {
    let at = synth::doubling::labelling(t, c, Default::default(), 0, &|| false).unwrap();
    synth::doubling::synthesize(t, c, Default::default(), shape, &at, 0).map(|(s, _, _)| s)
}
