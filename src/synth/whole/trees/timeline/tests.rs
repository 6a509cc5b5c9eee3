//! Tests of the trees' timeline: the placement's property tests, the floor, and exact cases of
//! the passes and restarts.

use super::*;
use crate::collective::{Collective, CollectiveKind, CollectiveSpec};
use crate::synth::trees::{build::build_trees, fabric};
use crate::topology::{Failures, parse_spec};

/// Why `timeline` (forward, or backward with `rev`) of `mv`'s moves under `par` is not a
/// timeline: a parent not one hop nearer its root, a move before one it waits for, two
/// moves on a link in one timestep, or `len` not the timesteps.
fn wrong(mv: &Moves<'_>, par: &Parents, start: &[u32], len: u32, rev: bool) -> Option<String> {
    let (f, t) = (mv.f, mv.t);
    let n = t.n;
    // Backward, time runs from the end: the forward conditions on the starts mirrored.
    let at = |i: usize| if rev { len - 1 - start[i] } else { start[i] };
    let mut used = std::collections::HashSet::new();
    for u in 0..t.roots.len() {
        let root = t.roots[u];
        let depth = &t.depth[u * n..(u + 1) * n];
        let mut reduced = 0;
        for v in (0..n as u32).filter(|&v| v != root) {
            let (a, b) = (par.up[u * n + v as usize], par.down[u * n + v as usize]);
            for p in [a, b] {
                if !f.neighbours(v).iter().any(|&(x, _)| x == p) || depth[p as usize] + 1 != depth[v as usize] {
                    return Some(format!("tree {u}: NPU {v}'s parent {p} is not one hop nearer the root"));
                }
            }
            let (up, down) = (mv.id(u, v, true), mv.id(u, v, false));
            for (i, x, y) in [(up, v, a), (down, b, v)] {
                let e = f.neighbours(x).iter().find(|&&(z, _)| z == y).unwrap().1;
                if !used.insert((f.link(e, x, y), start[i])) {
                    return Some(format!("two moves on link {x}->{y} at timestep {}", start[i]));
                }
            }
            if a == root {
                reduced = reduced.max(at(up) + 1);
            } else if at(mv.id(u, a, true)) <= at(up) {
                return Some(format!("tree {u}: NPU {a}'s partial leaves before {v}'s arrives"));
            }
        }
        for v in (0..n as u32).filter(|&v| v != root) {
            let b = par.down[u * n + v as usize];
            let ready = if b == root { reduced } else { at(mv.id(u, b, false)) + 1 };
            if at(mv.id(u, v, false)) < ready {
                return Some(format!("tree {u}: NPU {v}'s result leaves {b} before it has it"));
            }
        }
    }
    let last = (0..mv.count()).map(|i| start[i]).max().unwrap_or(0);
    (last + 1 != len).then(|| format!("{len} timesteps, the last move at {last}"))
}

/// Each directed link's moves under `par`.
fn loads(mv: &Moves<'_>, par: &Parents) -> Vec<u32> {
    let (f, t) = (mv.f, mv.t);
    let mut load = vec![0u32; 2 * f.edges];
    for u in 0..t.roots.len() {
        for v in (0..t.n as u32).filter(|&v| v != t.roots[u]) {
            for (x, y) in [(v, par.up[u * t.n + v as usize]), (par.down[u * t.n + v as usize], v)] {
                let e = f.neighbours(x).iter().find(|&&(z, _)| z == y).unwrap().1;
                load[f.link(e, x, y) as usize] += 1;
            }
        }
    }
    load
}

/// `place` on one set of trees, forward and backward, with keys that follow the DAG (the
/// first pass's, and a pass's from the last timeline) and noisy ones, the parents fixed
/// (`cap` 0: they stay as they were) and chosen within `cap` (no link ends above the larger
/// of its load before and the cap).
fn check(spec: &str, failed: &[[usize; 2]], chunks: u32, group: usize, seed: u64, cap: u32) -> Result<(), String> {
    let t = parse_spec(spec).unwrap();
    let Ok(t) = t.with_failures(&Failures { links: failed.to_vec(), ..Failures::default() }) else { return Ok(()) };
    let spec_c = CollectiveSpec::new(CollectiveKind::AllReduce, 1 << 20).with_chunks_per_npu(chunks);
    let Ok(c) = Collective::build(&spec_c, &t) else { return Ok(()) };
    let Some(f) = fabric(&t, &c, group) else { return Ok(()) };
    let trees = build_trees(&f, c.num_chunks.div_ceil(group), seed, &|| false).unwrap();
    let mv = Moves::new(&f, &trees);
    if mv.floor(true) < trees.busiest() || mv.floor(false) != trees.busiest() {
        return Err(format!("{spec} less {failed:?}: the floors {} and {}", mv.floor(true), mv.floor(false)));
    }
    let no = &|| false;
    let mut rng = crate::rng::Rng::new(seed);
    let mut par = Parents::of(&trees);
    let first: Vec<u32> = (0..mv.count())
        .map(|i| {
            let (u, v, up) = mv.decode(i);
            let d = trees.depth[u * trees.n + v as usize];
            (u * 2 * trees.n) as u32 + if up { trees.n as u32 - d } else { trees.n as u32 + d }
        })
        .collect();
    let mut key = first;
    let mut noisy = false;
    for round in 0..6 {
        let rev = round % 2 == 1;
        let before = (par.clone(), loads(&mv, &par));
        let (start, len) = if noisy {
            place_noisy(&mv, &mut par, rev, &key, cap, seed.is_multiple_of(2), no)
        } else {
            place(&mv, &mut par, rev, &key, cap, no)
        }
        .map_err(|e| format!("{e}"))?;
        let what =
            format!("{spec} less {failed:?}, {chunks} chunks in {group}s, seed {seed}, cap {cap}, round {round}");
        if let Some(e) = wrong(&mv, &par, &start, len, rev) {
            return Err(format!("{what}: {e}"));
        }
        // No timeline on the trees' own parents is shorter than their floor.
        if cap == 0 && len < mv.floor(true) {
            return Err(format!("{what}: {len} timesteps, under the floor {}", mv.floor(true)));
        }
        if cap == 0 && par != before.0 {
            return Err(format!("{what}: a fixed parent changed"));
        }
        if let Some(l) = (0..2 * f.edges).find(|&l| loads(&mv, &par)[l] > before.1[l].max(cap)) {
            return Err(format!("{what}: link {l} above the cap"));
        }
        // The next round's keys: this timeline's order for the other direction (they follow
        // the DAG under the parents it took), with noise every other time.
        noisy = round % 4 == 1;
        key = start.iter().map(|&s| (len - 1 - s) * 8 + if noisy { rng.below(25) as u32 } else { 0 }).collect();
    }
    Ok(())
}

proptest::proptest! {
    /// On random tori, less up to two random links (where they stay connected), at any
    /// chunking, group, seed and cap: `place` gives a timeline of the trees' moves whose
    /// parents are one hop nearer the root, with every move after those it waits for and
    /// one move a link and timestep, the fixed parents kept and the chosen ones within the
    /// cap.
    #[test]
    fn placed_moves_make_a_timeline(
        a in 2usize..7,
        b in 2usize..7,
        cut in proptest::collection::vec((0usize..36, 0usize..4), 0..3),
        chunks in 1u32..4,
        group in 1usize..4,
        seed in 0u64..1000,
        cap in proptest::prop_oneof![proptest::strategy::Just(0u32), 1u32..40, proptest::strategy::Just(u32::MAX)],
    ) {
        let n = a * b;
        let failed: Vec<[usize; 2]> = cut
            .iter()
            .map(|&(v, d)| {
                let v = v % n;
                let (x, y) = (v % a, v / a);
                let w = match d { 0 => (x + 1) % a + y * a, 1 => x + ((y + 1) % b) * a, 2 => (x + a - 1) % a + y * a, _ => x + ((y + b - 1) % b) * a };
                [v, w]
            })
            .filter(|[v, w]| v != w)
            .collect();
        if let Err(e) = check(&format!("torus:{a}x{b}"), &failed, chunks, group, seed, cap) {
            proptest::prop_assert!(false, "{}", e);
        }
    }
}

/// The trees of `spec` less `links` at 64 MiB, `chunks` per NPU, `group` a message, seed 0.
fn trees_of(spec: &str, links: &[[usize; 2]], chunks: u32, group: usize) -> (Fabric, Trees) {
    let t =
        parse_spec(spec).unwrap().with_failures(&Failures { links: links.to_vec(), ..Failures::default() }).unwrap();
    let spec_c = CollectiveSpec::new(CollectiveKind::AllReduce, 64 << 20).with_chunks_per_npu(chunks);
    let c = Collective::build(&spec_c, &t).unwrap();
    let f = fabric(&t, &c, group).unwrap();
    let trees = build_trees(&f, c.num_chunks.div_ceil(group), 0, &|| false).unwrap();
    (f, trees)
}

/// Every pass of a descent, fixed or chosen, from the first pass's keys: its timesteps.
fn descent(mv: &Moves<'_>, chosen: bool) -> u32 {
    let t = mv.t;
    let first: Vec<u32> = (0..mv.count())
        .map(|i| {
            let (u, v, up) = mv.decode(i);
            let k = t.order[u * t.n..(u + 1) * t.n].iter().position(|&x| x == v).unwrap() as u32;
            (u * 2 * t.n) as u32 + if up { t.n as u32 - k } else { t.n as u32 + k }
        })
        .collect();
    let mut d = Descent::new(mv, &first, chosen, t.busiest(), &|| false).unwrap();
    for _ in 0..IMPROVEMENT_PASSES {
        d.pass(mv, &|| false).unwrap();
    }
    d.best.len
}

/// Where a link carries a few times a tree's height, the links stay busy when the moves
/// choose their parents: torus:32x32 less a link at 64 MiB in 256 trees of four chunks
/// (busiest link 128, trees 32 hops high) takes 142 timesteps with the trees' parents and
/// 131 with the parents chosen, and the timeline keeps the chosen.
#[test]
fn chosen_parents_keep_the_links_busy() {
    let (f, trees) = trees_of("torus:32x32", &[[5, 6]], 1, 4);
    let mv = Moves::new(&f, &trees);
    assert_eq!(trees.busiest(), 128);
    assert_eq!((descent(&mv, false), descent(&mv, true)), (142, 131));
    let (tl, floor) = timeline(&mv, false, &|| false).unwrap();
    assert_eq!((tl.len, tl.chosen, floor), (131, true, 128));
    assert!(wrong(&mv, &tl.par, &tl.start, tl.len, false).is_none());
}

/// Where a link carries many times a tree's height, the trees' own balance is what the
/// timeline needs: torus:16x16 less three links at 64 MiB in 512 trees (busiest link 257,
/// trees 16 hops high) takes 258 timesteps with the trees' parents and 260 chosen, and the
/// timeline keeps the fixed.
#[test]
fn fixed_parents_where_links_carry_many_trees() {
    let (f, trees) = trees_of("torus:16x16", &[[0, 1], [17, 18], [100, 101]], 2, 1);
    let mv = Moves::new(&f, &trees);
    assert_eq!(trees.busiest(), 257);
    assert_eq!((descent(&mv, false), descent(&mv, true)), (258, 260));
    let (tl, _) = timeline(&mv, true, &|| false).unwrap();
    assert_eq!((tl.len, tl.chosen), (258, false));
    assert_eq!(tl.par, Parents::of(&trees));
}

/// The same on fabrics other than 2-D tori: a hypercube (up to six neighbours nearer a
/// root), a mesh less a link, and a 3-D torus less a link.
#[test]
fn placed_moves_make_a_timeline_elsewhere() {
    for (spec, failed) in [("hypercube:6", vec![]), ("mesh:5x4", vec![[6, 7]]), ("torus:4x4x4", vec![[0, 1]])] {
        for cap in [0, 30, u32::MAX] {
            check(spec, &failed, 1, 1, 7, cap).unwrap();
            check(spec, &failed, 2, 3, 8, cap).unwrap();
        }
    }
}

/// The floor by hand: on torus:2x2 (the ring 0-1-3-2), trees rooted at 0 with NPU 3 under
/// NPU 1. In one tree 3's partial takes two hops up and the result two down, 4 timesteps,
/// each link carrying one move. In two alike link 3->1 carries both partials, the second a
/// timestep behind, 5 (the load, 2, plus the three hops after it). The fixed parents'
/// timelines end there; with the trees' loads alone the floors would be 1 and 2.
#[test]
fn the_floor_counts_the_hops_before_and_after_a_link() {
    let t = parse_spec("torus:2x2").unwrap();
    let c = Collective::build(&CollectiveSpec::new(CollectiveKind::AllReduce, 1 << 20), &t).unwrap();
    let f = fabric(&t, &c, 1).unwrap();
    for (units, floor) in [(1usize, 4u32), (2, 5)] {
        let mut load = vec![0u32; f.edges];
        for (v, p) in [(1, 0), (2, 0), (3, 1)] {
            load[crate::synth::trees::build::edge_between(&f, v, p) as usize] += units as u32;
        }
        let trees = Trees {
            n: 4,
            roots: vec![0; units],
            parent: [u32::MAX, 0, 0, 1].repeat(units),
            order: [0, 1, 2, 3].repeat(units),
            depth: [0, 1, 1, 2].repeat(units),
            load,
        };
        let mv = Moves::new(&f, &trees);
        assert_eq!((trees.busiest(), mv.floor(true), mv.floor(false)), (units as u32, floor, units as u32));
        let d = descent(&mv, false);
        assert_eq!(d, floor, "{units} trees");
    }
}

/// On dragonfly:4:5 in 40 trees the fixed parents' timeline reaches its floor, two over
/// the busiest link's load, and the restarts end there without a placement (on this
/// fabric they never shortened a timeline: dragonfly:4:5 all-reduce at 32 MiB, twenty
/// restarts of each of five runs, the wall 1.7 times the old trees').
#[test]
fn where_the_timeline_reaches_its_floor_the_restarts_stop() {
    let (f, trees) = trees_of("dragonfly:4:5", &[], 2, 1);
    let mv = Moves::new(&f, &trees);
    let (tl, floor) = timeline(&mv, true, &|| false).unwrap();
    assert_eq!((trees.busiest(), floor, tl.len, tl.chosen), (20, 22, 22, false));
    let placed = std::cell::Cell::new(0);
    let counted = || {
        placed.set(placed.get() + 1);
        false
    };
    let walked = perturbed(&mv, tl.clone(), 20, 2, 0, false, &counted).unwrap();
    assert_eq!((walked.len, placed.get()), (22, 0));
}
