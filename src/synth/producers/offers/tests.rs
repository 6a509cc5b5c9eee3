//! The offers' tests: which runs each row offers a request.

use super::*;
use crate::collective::CollectiveSpec;
use crate::topology::parse_spec;

/// The runs the table offers `kind` of `size` bytes on `spec` at one chunk per NPU, with
/// `seeds` seeds and the automatic timesteps; and the offer's facts.
fn offered(spec: &str, kind: CollectiveKind, size: u64, seeds: usize) -> (Vec<Run>, Vec<usize>, Vec<usize>) {
    offered_at(spec, kind, size, seeds, crate::synth::Effort::Standard)
}

fn offered_at(
    spec: &str,
    kind: CollectiveKind,
    size: u64,
    seeds: usize,
    effort: crate::synth::Effort,
) -> (Vec<Run>, Vec<usize>, Vec<usize>) {
    offered_with(spec, kind, size, &[1], seeds, effort)
}

/// The runs offered at each of `ks` chunks per NPU (a broadcast from NPU 0), every chunking the
/// matcher's; and the offer's facts.
fn offered_with(
    spec: &str,
    kind: CollectiveKind,
    size: u64,
    ks: &[u32],
    seeds: usize,
    effort: crate::synth::Effort,
) -> (Vec<Run>, Vec<usize>, Vec<usize>) {
    let t = parse_spec(spec).unwrap();
    let built: Vec<Collective> = ks
        .iter()
        .map(|&k| {
            let cs = CollectiveSpec::new(kind, size).with_chunks_per_npu(k);
            let cs = if kind == CollectiveKind::Broadcast { cs.with_root(0) } else { cs };
            Collective::build(&cs, &t).unwrap()
        })
        .collect();
    let variants: Vec<&Collective> = built.iter().collect();
    let ask = Ask {
        topology: &t,
        variants: &variants,
        matcher_variants: ks.len(),
        seed: 7,
        seeds,
        discretization_ns: None,
        switch_model: SwitchModel::Native,
        grouping: &[],
        mirroring: false,
        tenants: false,
        trivial: false,
        effort,
    };
    let o = Offer::new(ask, &|| false).unwrap();
    let all = o.factors.iter().map(Vec::len).collect();
    (runs(&o), o.base.clone(), all)
}

fn count(runs: &[Run], f: impl Fn(&Run) -> bool) -> usize {
    runs.iter().filter(|r| f(r)).count()
}

/// On mixed link times (hier's switch paths beside its FC links) the matcher also runs at
/// finer timesteps; the plain matcher and the
/// stages go beside the automatic timesteps only, each seed once, and the rarest-first pick
/// (a collective that does not combine) beside every timestep.
#[test]
fn the_runs_beside_the_matcher_keep_their_timesteps() {
    let hier = "hier:ring2,fc4,switch4";
    let (runs, base, all) = offered(hier, CollectiveKind::AllReduce, 256 << 20, 2);
    assert!(all[0] > base[0], "finer timesteps: {all:?} beside {base:?}");
    assert_eq!(count(&runs, |r| matches!(r.mode, Mode::Matching(_))), 2 * all[0]);
    assert_eq!(count(&runs, |r| matches!(r.mode, Mode::Plain(_))), 2 * base[0]);
    assert!(runs.iter().all(|r| match r.mode {
        Mode::Plain(f) | Mode::Staged(_, f) | Mode::Spread(f) => f < base[0],
        _ => true,
    }));
    assert_eq!(count(&runs, |r| matches!(r.mode, Mode::Rarest(_))), 0, "an all-reduce combines");
    let seeds: Vec<u64> = runs.iter().filter(|r| r.mode == Mode::Matching(0)).map(|r| r.seed).collect();
    assert_eq!(seeds, [7, 8]);

    let (runs, _, all) = offered(hier, CollectiveKind::AllGather, 256 << 20, 1);
    assert_eq!(count(&runs, |r| matches!(r.mode, Mode::Rarest(_))), all[0]);
    assert_eq!(count(&runs, |r| matches!(r.mode, Mode::Plain(_))), 0, "an all-gather does not combine");
}

/// Where a translation pattern is optimal it replaces the matcher's family at its chunking,
/// and the rounds pattern the step pattern priced at or above its rounds (torus:4x4, one
/// chunk per NPU: 4 steps of α and a chunk against 4 rounds carrying 4 chunks a link); an
/// all-to-all on 512 NPUs gets the routed planner alone, on 16 beside the matcher and the
/// batched planner.
#[test]
fn rows_replace_the_runs_they_beat() {
    let (runs, _, _) = offered("torus:4x4", CollectiveKind::AllGather, 64 << 10, 1);
    assert_eq!(count(&runs, |r| r.mode == Mode::Translation), 0, "{runs:?}");
    assert_eq!(count(&runs, |r| r.mode == Mode::Rounds), 1, "{runs:?}");
    assert_eq!(count(&runs, |r| r.mode.is_matcher()), 0, "{runs:?}");
    assert!(count(&runs, |r| r.mode == Mode::Batched) == 1);

    let (runs, _, _) = offered("torus:8x8x8", CollectiveKind::AllToAll, 16 << 20, 2);
    assert_eq!(runs.iter().map(|r| (r.variant, r.seed, r.mode)).collect::<Vec<_>>(), [(0, 7, Mode::Routed)]);
    let (runs, _, _) = offered("torus:4x4", CollectiveKind::AllToAll, 4 << 20, 1);
    let names: Vec<&str> = runs.iter().map(|r| r.mode.name()).collect();
    assert_eq!(names, ["matching", "routed", "batched"]);
}

/// Translation is built up to `MAX_TRANSLATION_MOVES` chunk moves: an all-reduce on
/// torus:64x64 (2 · 4096 · 4095 moves) gets its rounds run; on torus:64x128 (four times
/// as many) no run is left, its optimal step pattern having replaced the matcher.
#[test]
fn translation_stops_at_its_moves() {
    let (runs, _, _) = offered("torus:64x64", CollectiveKind::AllReduce, 1 << 30, 1);
    const { assert!(2 * 4096 * 4095 <= MAX_TRANSLATION_MOVES && 8192 * 8191 > MAX_TRANSLATION_MOVES) };
    assert_eq!(count(&runs, |r| matches!(r.mode, Mode::Translation | Mode::Rounds)), 1, "{runs:?}");
    let (runs, _, _) = offered("torus:64x128", CollectiveKind::AllReduce, 1 << 30, 1);
    assert!(runs.is_empty(), "{runs:?}");
    let (runs, _, _) = offered("torus:64x128", CollectiveKind::AllGather, 1 << 30, 1);
    assert!(runs.is_empty(), "{runs:?}");
}

/// The tree packing runs on an all-gather at a thorough effort alone, at one to eight trees
/// per root no more than a root's chunks, on direct links and through switches; on a
/// broadcast at the standard effort over direct links alone.
#[test]
fn where_the_packing_runs() {
    use crate::synth::Effort;
    let packings = |runs: &[Run]| -> Vec<Mode> {
        runs.iter().filter(|r| matches!(r.mode, Mode::Packing(_))).map(|r| r.mode).collect()
    };
    let (runs, _, _) = offered("torus:4x4", CollectiveKind::AllGather, 64 << 20, 1);
    assert!(packings(&runs).is_empty(), "a translation pattern serves");
    let (runs, _, _) = offered("mesh:4x4", CollectiveKind::AllGather, 64 << 20, 1);
    assert_eq!(packings(&runs), [Mode::Packing(1)], "standard: one tree per root");
    let at = |effort| {
        let runs = offered_with("mesh:4x4", CollectiveKind::AllGather, 64 << 20, &[1, 2, 4], 1, effort).0;
        runs.iter().filter(|r| matches!(r.mode, Mode::Packing(_))).map(|r| (r.variant, r.mode)).collect::<Vec<_>>()
    };
    assert_eq!(at(Effort::Standard), [(0, Mode::Packing(1)), (1, Mode::Packing(1))], "the first two chunkings");
    assert_eq!(at(Effort::Thorough).len(), 1 + 2 + 4, "every chunking, up to its chunks per root");
    let (runs, _, _) = offered("switch:8", CollectiveKind::AllGather, 64 << 20, 1);
    assert!(packings(&runs).is_empty(), "through switches only when thorough");
    let (runs, _, _) = offered_at("torus:4x4", CollectiveKind::AllGather, 64 << 20, 1, Effort::Thorough);
    assert_eq!(packings(&runs), [Mode::Packing(1)], "one chunk per NPU: one tree per root");
    let (runs, _, _) = offered_at("switch:8", CollectiveKind::AllGather, 64 << 20, 1, Effort::Thorough);
    assert_eq!(packings(&runs), [Mode::Packing(1)], "a switch is split off");
    let (runs, _, _) = offered("torus:4x4", CollectiveKind::Broadcast, 64 << 20, 1);
    assert_eq!(packings(&runs), [Mode::Packing(1)], "a broadcast of one chunk: one tree");
    let (runs, _, _) = offered("switch:8", CollectiveKind::Broadcast, 64 << 20, 1);
    assert!(packings(&runs).is_empty(), "through a switch a broadcast's trees are chains");
    let (runs, _, _) = offered_at("switch:8", CollectiveKind::Broadcast, 64 << 20, 1, Effort::Thorough);
    assert_eq!(packings(&runs), [Mode::Packing(1)]);
}

/// An all-gather runs a shard a message at each finer chunking, each seed (mesh:4x4: two
/// chunks a message at k = 2, four at k = 4, none at k = 1); not an all-reduce, not where a
/// translation pattern serves (torus:4x4), not above `SHARD_MESSAGES_MAX_NPUS` (mesh:16x32).
#[test]
fn an_all_gather_runs_a_shard_a_message_at_its_finer_chunkings() {
    let shards = |runs: &[Run]| -> Vec<(usize, u64, Mode)> {
        runs.iter().filter(|r| matches!(r.mode, Mode::Grouped(_))).map(|r| (r.variant, r.seed, r.mode)).collect()
    };
    let offered_chunkings =
        |spec, kind| offered_with(spec, kind, 64 << 20, &[1, 2, 4], 2, crate::synth::Effort::Standard).0;
    let runs = offered_chunkings("mesh:4x4", CollectiveKind::AllGather);
    assert_eq!(
        shards(&runs),
        [(1, 7, Mode::Grouped(2)), (1, 8, Mode::Grouped(2)), (2, 7, Mode::Grouped(4)), (2, 8, Mode::Grouped(4))]
    );
    assert!(shards(&offered_chunkings("mesh:4x4", CollectiveKind::AllReduce)).is_empty());
    assert!(shards(&offered_chunkings("torus:4x4", CollectiveKind::AllGather)).is_empty());
    const { assert!(16 * 32 > SHARD_MESSAGES_MAX_NPUS) };
    assert!(shards(&offered_chunkings("mesh:16x32", CollectiveKind::AllGather)).is_empty());
}
