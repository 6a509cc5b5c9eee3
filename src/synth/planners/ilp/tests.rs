//! The ILP's own tests: its bounds refuted below, symmetric plans, the work budget, and the
//! limits on a model's size.

use super::chunks::ChunkInfo;
use super::model::{Congestion, Goal, Model};
use super::symmetric::{Symmetry, congestion_free};
use crate::collective::{Collective, CollectiveKind as K, CollectiveSpec};
use crate::synth::phase::Problem;
use crate::ten::{SwitchModel, Ten};
use crate::topology::parse_spec;
use std::time::{Duration, Instant};

/// The problem of a non-combining collective's one phase, as `movement_core` poses it.
fn problem_parts(spec: &str, kind: K, chunks: u32) -> (Ten, Collective) {
    let topo = parse_spec(spec).unwrap();
    let mut cs = CollectiveSpec::new(kind, 1 << 30).with_chunks_per_npu(chunks);
    if kind.needs_root() {
        cs.root = Some(1);
    }
    let c = Collective::build(&cs, &topo).unwrap();
    let ten = Ten::build(&topo, c.chunk_size_bytes, SwitchModel::Native, None).unwrap();
    (ten, c)
}

/// A condition's pairs as a slice the greedy's `Problem` borrows, for the rest of the test.
fn listed(p: &crate::collective::Pairs) -> &'static [[u32; 2]] {
    Box::leak(p.to_vec().into_boxed_slice())
}

/// The one phase of `c` on `ten`: every NPU live.
fn problem<'a>(ten: &'a Ten, c: &'a Collective) -> Problem<'a> {
    Problem {
        ten,
        num_chunks: c.num_chunks,
        pre: listed(&c.precondition),
        post: listed(&c.postcondition),
        live_npus: ten.npus,
        rarest_first: false,
        capacity: 1,
    }
}

/// The horizon lower bound is sound: the full model one timestep below it has no solution
/// (HiGHS proves it), on fabrics with pods behind slower links (where the cut bounds
/// apply), meshes and rings with uneven links, for every non-combining collective.
#[test]
fn nothing_fits_below_the_lower_bound() {
    let specs = [
        "hier:ring2,fc2,switch2@bw=200,100,50;lat=500",
        "hier:ring2,switch3@bw=200,50;lat=500",
        "hier:fc3,switch2@bw=100,25;lat=0",
        "hier:ring2,fc2,switch2@bw=200,200,100;lat=0",
        "mesh:3x3@bw=100,60;lat=0,0",
        "ring:6@bw=100;lat=0",
        "rail:2x3@bw=400,50;lat=500",
    ];
    let kinds = [K::AllGather, K::Broadcast, K::Gather, K::Scatter, K::AllToAll];
    let (mut refuted, mut checked, mut by_cuts) = (0, 0, 0);
    for spec in specs {
        for kind in kinds {
            for chunks in [1] {
                let (ten, c) = problem_parts(spec, kind, chunks);
                let p = problem(&ten, &c);
                let info = ChunkInfo::new(&p);
                let lb = info.lower_bound(&ten);
                if lb == 0 {
                    continue;
                }
                checked += 1;
                by_cuts += usize::from(lb > info.basic_bound(&ten));
                let below = Model::build(&ten, &info, lb - 1, Goal::Probe, Congestion::PerResource, &|| false);
                let Ok(Some(model)) = below else {
                    refuted += 1; // a target farther than the horizon: trivially infeasible
                    continue;
                };
                // The limit leaves a few hard refutations undecided; none may find a plan.
                let deadline = Instant::now() + Duration::from_secs(5);
                let out = model.solve(deadline, None, 1, Goal::Probe, &[], &|| false).unwrap();
                let found = out.values.is_some();
                assert!(!found, "{spec} {kind:?} k={chunks}: a plan of {} timesteps, below the bound", lb - 1);
                if out.result == super::SolveResult::Infeasible {
                    refuted += 1;
                } else {
                    eprintln!("{spec} {kind:?} k={chunks}: T = {} undecided", lb - 1);
                }
            }
        }
    }
    eprintln!("{refuted} of {checked} refuted, {by_cuts} bounds raised by the cut bounds");
    assert!(checked >= 30, "{checked} cases");
    assert!(refuted + 2 >= checked, "{refuted} of {checked} refuted");
    // The cut bounds decide some of them.
    assert!(by_cuts >= 5, "the cut bounds raised {by_cuts} bounds");
}

/// TACOS Table I's Ring(2)_FC(4)_Switch(4) at 1 GiB: the fabric spans 1, 2 and 4 timesteps
/// (ring, FC, switch). All-gather needs 16, argued by hand: a pod of 8 NPUs must take in
/// 24 chunks through its 8 switch ports, one per port every 4 timesteps from timestep 4,
/// and a chunk entering at time a reaches the farthest NPU of the pod only at a + 3 (ring
/// then FC), so entries at 4, 8 and 12 fill every port and the last round ends at 15 at
/// the earliest; then an NPU v must take in, over [13, 15], its ring partner's last entry
/// (through the ring), its three FC neighbours' (through the FC links, at 14 at the
/// earliest) and their ring partners' (at 15): seven chunks, but three FC links carry
/// one each in that window and the ring three, so 15 is too short. The cover bound gives
/// 15, the ingress flow 16; the symmetric plan meets it.
#[test]
fn table_one_all_gather_bound_is_sixteen_and_a_symmetric_plan_meets_it() {
    let (ten, c) = problem_parts("hier:ring2,fc4,switch4@bw=200,100,50;lat=500", K::AllGather, 1);
    assert_eq!(
        ten.edges.iter().map(|e| e.span).collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>(),
        [1, 2, 4]
    );
    let p = Problem {
        ten: &ten,
        num_chunks: c.num_chunks,
        pre: listed(&c.precondition),
        post: listed(&c.postcondition),
        live_npus: 32,
        rarest_first: false,
        capacity: 1,
    };
    let info = ChunkInfo::new(&p);
    assert_eq!(info.lower_bound(&ten), 16);
    let sym = Symmetry::find(&ten).expect("Z2 x Z4 x Z4 acts on the fabric");
    let blocks = sym.pattern(&info, c.num_chunks).expect("every NPU spreads its own chunk");
    // One NPU's spread at T = 16: a model of one chunk, its translates congestion-free.
    let pattern = info.only(&blocks.blocks[0]);
    let model = Model::build(&ten, &pattern, 16, Goal::Probe, Congestion::PerClass(&sym.classes), &|| false)
        .ok()
        .flatten()
        .unwrap();
    assert!(model.cols.len() < 3000, "{} columns", model.cols.len());
    let out = model.solve(Instant::now() + Duration::from_secs(120), None, 1, Goal::Probe, &[], &|| false).unwrap();
    let moves = sym.translate(&ten, &blocks, &model.moves(&out.values.expect("feasible"))).unwrap();
    assert!(congestion_free(&ten, &moves));
    let plan = super::extract::plan_of(&ten, moves);
    assert_eq!(plan.timesteps, 16);
    // Every NPU receives every chunk it lacks.
    let mut got = std::collections::HashSet::new();
    for m in &plan.moves {
        got.insert((ten.edges[m.edge as usize].dst, m.chunk));
    }
    assert_eq!(got.len(), 32 * 31);
}

/// On fabrics a regular group maps onto itself (rings, tori, a hypercube, switched pods, a
/// fully connected graph), the first horizon at which the symmetric model has a solution
/// gives, translated, a complete plan free of congestion, no shorter than the lower bound.
#[test]
fn symmetric_plans_translate_to_complete_congestion_free_plans() {
    for spec in [
        "ring:6",
        "ring:5:uni",
        "torus:3x3",
        "torus:2x4",
        "hypercube:3",
        "fc:4",
        "hier:ring2,fc2,switch2@bw=200,100,50;lat=500",
        "hier:ring2,switch4@bw=200,50;lat=0",
    ] {
        for chunks in [1, 2] {
            let (ten, c) = problem_parts(spec, K::AllGather, chunks);
            let p = problem(&ten, &c);
            let info = ChunkInfo::new(&p);
            let sym = Symmetry::find(&ten).unwrap_or_else(|| panic!("{spec}: no symmetry"));
            let blocks = sym.pattern(&info, c.num_chunks).expect("all-gather is a pattern");
            let pattern = info.only(&blocks.blocks[0]);
            let lb = info.lower_bound(&ten);
            let found = (lb..lb + 8).find_map(|t| {
                let m = Model::build(&ten, &pattern, t, Goal::Probe, Congestion::PerClass(&sym.classes), &|| false)
                    .ok()
                    .flatten()?;
                let out =
                    m.solve(Instant::now() + Duration::from_secs(30), None, 1, Goal::Probe, &[], &|| false).unwrap();
                out.values.map(|v| (t, m.moves(&v)))
            });
            let (t, moves) = found.unwrap_or_else(|| panic!("{spec} k={chunks}: no symmetric plan up to {}", lb + 7));
            let all = sym.translate(&ten, &blocks, &moves).unwrap();
            assert!(congestion_free(&ten, &all), "{spec} k={chunks}");
            let plan = super::extract::plan_of(&ten, all);
            assert!(plan.timesteps >= lb && plan.timesteps <= t, "{spec} k={chunks}: {} vs {lb}..{t}", plan.timesteps);
            // Every NPU receives every chunk it lacks, over an edge that starts where the
            // chunk already is.
            let mut have: std::collections::HashSet<(u32, u32)> = c.precondition.iter().map(|[v, c]| (v, c)).collect();
            let mut moves = plan.moves.clone();
            moves.sort_by_key(|m| m.step);
            let mut arrivals = Vec::new();
            for m in &moves {
                let e = &ten.edges[m.edge as usize];
                arrivals.retain(|&(at, v, ch)| {
                    if at <= m.step {
                        have.insert((v, ch));
                        false
                    } else {
                        true
                    }
                });
                assert!(
                    have.contains(&(e.src, m.chunk)),
                    "{spec} k={chunks}: {} sends chunk {} it lacks",
                    e.src,
                    m.chunk
                );
                arrivals.push((m.step + e.span, e.dst, m.chunk));
            }
            have.extend(arrivals.iter().map(|&(_, v, ch)| (v, ch)));
            assert_eq!(have.len(), ten.npus * c.num_chunks, "{spec} k={chunks}");
        }
    }
}

/// A fabric without a regular symmetry (a mesh: corners are not like centres) has none.
#[test]
fn meshes_have_no_symmetric_plans_and_tori_do() {
    let (mesh, _) = problem_parts("mesh:3x3", K::AllGather, 1);
    assert!(Symmetry::find(&mesh).is_none());
    let (torus, _) = problem_parts("torus:3x4", K::AllGather, 1);
    assert!(Symmetry::find(&torus).is_some());
}

/// The work budget decides, not the clock: the same request on a machine slowed down
/// (every poll at HiGHS's interrupt points sleeps 50 ms) takes the same decisions, solve for
/// solve, and returns the same schedule, as long as the wall clock's limit does not cut
/// it. The budget is small enough that solves end on it (TACOS's Table I all-gather, whose
/// symmetric probe at the bound needs about 13,000 LP iterations).
#[test]
fn the_work_budget_decides_the_same_on_a_slower_machine() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let topo = parse_spec("hier:ring2,fc4,switch4@bw=200,100,50;lat=500").unwrap();
    let c = Collective::build(&CollectiveSpec::new(K::AllGather, 1 << 30), &topo).unwrap();
    let plan = crate::synth::PlanOptions { seed: 1, switch_model: SwitchModel::Native, discretization_ns: None };
    let opts = super::IlpOptions { time_limit_s: 600.0, work_limit_s: Some(3.0), ..Default::default() };
    let run = |cancelled: &dyn Fn() -> bool| crate::synth::ilp(&topo, &c, &plan, &opts, cancelled).unwrap();
    let fast = run(&|| false);
    let polls = AtomicU64::new(0);
    let slow = run(&|| {
        polls.fetch_add(1, Ordering::Relaxed);
        // HiGHS polls at its interrupt points (a few dozen in these solves): each poll
        // costs what a busy machine would make its stretch of work cost.
        std::thread::sleep(Duration::from_millis(50));
        false
    });
    let (f, s) = (&fast.2.stats, &slow.2.stats);
    assert!(polls.load(Ordering::Relaxed) >= 10, "the slow run was polled {polls:?} times");
    assert!(!f.cut_by_time_limit && !s.cut_by_time_limit, "the wall clock cut a run");
    let decided = |st: &super::IlpStats| -> Vec<(&'static str, u32, super::SolveResult, u64, u64)> {
        st.phases
            .iter()
            .flat_map(|p| &p.solves)
            .map(|r| (r.kind, r.horizon, r.result, r.lp_iterations, r.nodes))
            .collect()
    };
    assert!(
        decided(f).iter().any(|d| d.2 == super::SolveResult::WorkLimit),
        "no solve ended on its work budget: {:?}",
        decided(f)
    );
    assert_eq!(decided(f), decided(s));
    assert_eq!((f.status, f.horizon, f.horizon_lower_bound), (s.status, s.horizon, s.horizon_lower_bound));
    assert_eq!(f.work_s, s.work_s);
    assert_eq!(fast.0.transfers, slow.0.transfers);
}

/// A model over `MAX_NONZEROS` is not built. At a fine TEN timestep every send is a term of
/// each congestion row its link time spans: the request that found it (rail:5x5 with 2 µs
/// links, an all-gather's finest grid of 166 ns) built 138 M nonzeros, peaked at 12.7 GB
/// and ran 43 s past its 30 s limit. The build stops once over the cap and the search says
/// why; a coarser grid's model is built and counts its nonzeros exactly.
#[test]
fn a_model_over_the_nonzero_limit_is_not_built_and_the_search_says_so() {
    use super::model::BuildStop;
    let topo = parse_spec("rail:5x5@bw=100,200;lat=2000").unwrap();
    let mut spec = CollectiveSpec::new(K::AllGather, 1 << 20).with_chunks_per_npu(2);
    spec.group = Some(vec![0, 1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 14, 17, 19, 21, 22, 24]);
    let c = Collective::build(&spec, &topo).unwrap();
    let fine = Ten::build(&topo, c.chunk_size_bytes, SwitchModel::Native, Some(166.0)).unwrap();
    let p = problem(&fine, &c);
    let info = ChunkInfo::new(&p);
    let horizon = 450;
    let built = Model::build(&fine, &info, horizon, Goal::Probe, Congestion::of(false), &|| false);
    assert!(
        matches!(built, Err(BuildStop::TooLarge { what: "nonzeros", count, limit })
            if limit == super::MAX_NONZEROS && count > limit),
        "the T = {horizon} model on the 166 ns grid is over the nonzero limit"
    );
    let lb = info.lower_bound(&fine);
    let deadline = Instant::now() + Duration::from_secs(600);
    let opts = super::IlpOptions { time_limit_s: 600.0, ..Default::default() };
    let out = super::plan(&p, 0, &opts, 600.0, deadline, "forward", &|| false).unwrap();
    let reason = out.stats.reason.unwrap_or_default();
    assert!(
        reason.contains(&format!("nonzeros (limit {})", super::MAX_NONZEROS)),
        "lower bound {lb}, greedy horizon {}: {reason}",
        out.stats.greedy_horizon
    );
    assert_eq!(out.stats.source, "greedy");
    let coarse = Ten::build(&topo, c.chunk_size_bytes, SwitchModel::Native, None).unwrap();
    let p = problem(&coarse, &c);
    let info = ChunkInfo::new(&p);
    let horizon = crate::synth::matcher::plan(&p, 0, &|| false).unwrap().timesteps;
    let Ok(Some(m)) = Model::build(&coarse, &info, horizon, Goal::Probe, Congestion::of(false), &|| false) else {
        panic!("the coarse grid's model at the greedy's horizon {horizon} is built");
    };
    assert_eq!(m.nonzeros, m.rows.iter().map(|r| r.terms.len()).sum::<usize>());
    assert!(m.nonzeros > m.cols.len() && m.nonzeros <= super::MAX_NONZEROS);
    // A horizon of a hundred million timesteps (a 1 ns grid): one chunk's candidate sends
    // alone would be billions; they are counted, not allocated (a 12 GB vector once
    // aborted the service here).
    let built = Model::build(&coarse, &info, 100_000_000, Goal::Probe, Congestion::of(false), &|| false);
    assert!(matches!(built, Err(BuildStop::TooLarge { what: "variables", count, .. }) if count > 100_000_000));
    // On a 1 ns grid a 2 µs link's transfer spans over 2,000 timesteps: the grid is refused
    // whatever the horizon (HiGHS's presolve once spent 34 s of a 20 s limit on such a
    // model of 15,044 columns).
    let nano = Ten::build(&topo, c.chunk_size_bytes, SwitchModel::Native, Some(1.0)).unwrap();
    let span = nano.edges.iter().map(|e| e.span).max().unwrap();
    let built =
        Model::build(&nano, &ChunkInfo::new(&problem(&nano, &c)), 10, Goal::Probe, Congestion::of(false), &|| false);
    assert!(span > super::MAX_SPAN && matches!(built, Err(BuildStop::TooFine { span: s }) if s == span));
}
