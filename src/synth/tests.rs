//! Tests of the planner-independent core: dead-end pruning against its first version, and
//! the two phases planned side by side against the phases in order.
use super::*;
use crate::slots::PairSet;
use crate::synth::phase;
use crate::ten::Ten;
use std::collections::HashMap;

/// `prune_dead_ends` as it was first written (a pass over every move until nothing
/// changes): the oracle for the worklist.
fn prune_by_passes(ten: &Ten, num_chunks: usize, moves: Vec<phase::Move>, post: &[[u32; 2]]) -> Vec<phase::Move> {
    let wanted = PairSet::new(ten.npus, num_chunks, post);
    let is_dead_end = |m: &phase::Move| !wanted.contains(ten.edges[m.edge as usize].dst as usize, m.chunk as usize);
    let mut forwards: HashMap<(u32, u32), usize> = HashMap::new();
    for m in &moves {
        *forwards.entry((ten.edges[m.edge as usize].src, m.chunk)).or_default() += 1;
    }
    let mut alive = vec![true; moves.len()];
    loop {
        let mut changed = false;
        for (i, m) in moves.iter().enumerate() {
            let dst = ten.edges[m.edge as usize].dst;
            if alive[i] && is_dead_end(m) && forwards.get(&(dst, m.chunk)).copied().unwrap_or(0) == 0 {
                alive[i] = false;
                changed = true;
                *forwards.get_mut(&(ten.edges[m.edge as usize].src, m.chunk)).unwrap() -= 1;
            }
        }
        if !changed {
            break;
        }
    }
    moves.into_iter().zip(alive).filter(|(_, a)| *a).map(|(m, _)| m).collect()
}

/// The two phases planned side by side (the greedy) give the schedule planned one after
/// the other: each phase's plan depends only on its problem and seed.
#[test]
fn phases_side_by_side_plan_what_phases_in_order_plan() {
    let opts = PlanOptions { seed: 3, switch_model: SwitchModel::default(), discretization_ns: None };
    for (spec, fail) in [("torus:4x4", None), ("torus:4x4", Some((1, 2))), ("mesh:3x3", None), ("ring:6", None)] {
        let mut topo = crate::topology::parse_spec(spec).unwrap();
        if let Some((u, v)) = fail {
            let f = crate::topology::Failures { links: vec![[u, v]], ..Default::default() };
            topo = topo.with_failures(&f).unwrap();
        }
        let kind = crate::collective::CollectiveKind::AllReduce;
        let spec_c = crate::collective::CollectiveSpec::new(kind, 1 << 22).with_chunks_per_npu(2);
        let c = Collective::build(&spec_c, &topo).unwrap();
        let (roots, _) = roots_for(&topo, &c);
        let combining = vec![true; c.num_chunks];
        let never = || false;
        let mut each = |p: &phase::Problem, seed, _: &'static str, _: u32| matcher::plan(p, seed, &never);
        let both = |p: &phase::Problem, seed| matcher::plan(p, seed, &never);
        let in_order = Manner::picking(&c);
        let at_once = Manner { side_by_side: Some(&both), ..in_order };
        let (a, sa) = movement_core(&topo, &c, &combining, &roots, in_order, &opts, &mut each).unwrap();
        let (b, sb) = movement_core(&topo, &c, &combining, &roots, at_once, &opts, &mut each).unwrap();
        assert_eq!(sa, sb, "{spec} {fail:?}");
        assert!(a == b && !a.is_empty(), "{spec} {fail:?}");
    }
}

#[test]
fn pruning_by_worklist_equals_pruning_by_passes() {
    let topo = crate::topology::parse_spec("torus:3x4").unwrap();
    let ten = Ten::build(&topo, 1024.0, SwitchModel::default(), None).unwrap();
    let mut rng = crate::rng::Rng::new(7);
    for case in 0..200 {
        let num_chunks = 1 + rng.below(6);
        // Random walks of chunks (relay chains), and random wanted pairs.
        let mut moves = Vec::new();
        for _ in 0..rng.below(60) {
            let chunk = rng.below(num_chunks) as u32;
            let mut v = rng.below(ten.npus);
            for step in 0..1 + rng.below(6) as u32 {
                let out = ten.out_edges(v);
                let edge = out[rng.below(out.len())];
                moves.push(phase::Move { step, edge, chunk });
                v = ten.edges[edge as usize].dst as usize;
            }
        }
        let mut post: Vec<[u32; 2]> =
            (0..rng.below(20)).map(|_| [rng.below(ten.npus) as u32, rng.below(num_chunks) as u32]).collect();
        post.sort_unstable();
        post.dedup();
        let expected = prune_by_passes(&ten, num_chunks, moves.clone(), &post);
        assert_eq!(prune_dead_ends(&ten, num_chunks, moves, &post), expected, "case {case}");
    }
}

/// A phase planner: `greedy::plan`, `flood::plan`.
type PhasePlanner = fn(&phase::Problem, u64, &dyn Fn() -> bool) -> Result<phase::Plan, SynthError>;

/// A planner on fc:256's all-gather (on the TEN `ten_of` builds), with a stop that counts its
/// polls and says stop from poll `stop_at` on: what it planned, and how many polls it made.
fn fc256_all_gather_polled(
    ten_of: fn(&crate::topology::Topology, &Collective) -> Ten,
    plan: PhasePlanner,
    stop_at: Option<usize>,
) -> (Result<phase::Plan, SynthError>, usize) {
    let topo = crate::topology::parse_spec("fc:256").unwrap();
    let spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 1 << 26);
    let c = Collective::build(&spec, &topo).unwrap();
    let ten = ten_of(&topo, &c);
    let (pre, post) = (c.precondition.to_vec(), c.postcondition.to_vec());
    let p = phase::Problem {
        ten: &ten,
        num_chunks: c.num_chunks,
        pre: &pre,
        post: &post,
        live_npus: ten.npus,
        rarest_first: false,
        capacity: 1,
    };
    let calls = std::cell::Cell::new(0usize);
    let planned = plan(&p, 0, &|| {
        calls.set(calls.get() + 1);
        stop_at.is_some_and(|n| calls.get() >= n)
    });
    (planned, calls.get())
}

/// The greedy polls its stop within a timestep, not only between two: on fc:256 an
/// all-gather's 65,280 moves all land in one timestep, and their arrivals (each offering its
/// chunk over 255 edges) took half a minute on fc:1024 without a poll. A stop that answers
/// true at its second call ends the plan there, in the timestep of the arrivals.
#[test]
fn the_greedy_polls_between_the_arrivals_of_one_timestep() {
    let ten = |t: &crate::topology::Topology, c: &Collective| {
        Ten::build(t, c.chunk_size_bytes, crate::ten::SwitchModel::Native, None).unwrap()
    };
    let (whole, calls) = fc256_all_gather_polled(ten, matcher::plan, None);
    let whole = whole.unwrap();
    let arrivals: usize = 255 * 256;
    assert!(whole.moves.len() >= arrivals, "{} moves", whole.moves.len());
    // One poll a timestep (the last, with nothing left to move, ends before its poll), and
    // one every `ARRIVALS_PER_POLL` arrivals (before, one poll in all).
    let per_timestep = whole.timesteps as usize;
    assert!(calls >= per_timestep + arrivals / (1 << 14), "{calls} polls, {} timesteps", whole.timesteps);
    let (stopped, calls) = fc256_all_gather_polled(ten, matcher::plan, Some(2));
    assert!(matches!(stopped, Err(SynthError::Cancelled)), "{stopped:?}");
    assert_eq!(calls, 2);
}

/// The batched planner polls between the destinations of a round: fc:256's all-gather is one
/// round bringing 65,280 chunks (fc:1448's took 6 s without a poll).
#[test]
fn the_batched_planner_polls_between_the_destinations_of_a_round() {
    let ten = |t: &crate::topology::Topology, c: &Collective| {
        flood::round_ten(t, c.chunk_size_bytes, crate::ten::SwitchModel::Native).unwrap()
    };
    let (whole, calls) = fc256_all_gather_polled(ten, flood::plan, None);
    let whole = whole.unwrap();
    assert_eq!((whole.timesteps, whole.moves.len()), (1, 255 * 256));
    // One poll a round, one a destination.
    assert_eq!(calls, 1 + 256);
    let (stopped, calls) = fc256_all_gather_polled(ten, flood::plan, Some(3));
    assert!(matches!(stopped, Err(SynthError::Cancelled)), "{stopped:?}");
    assert_eq!(calls, 3);
}
