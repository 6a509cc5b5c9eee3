//! Switches split off the tree packing's graph (ForestColl's switch removal): every switch's
//! capacity in paired with its capacity out into arcs from NPU to NPU through it, so that the
//! trees are grown among NPUs alone and each arc that crosses a switch is one message through
//! it (a switch holds and forwards nothing of its own).
//!
//! Why it can work: at the packing's capacities a switch takes in as many trees as it sends out
//! (its links come in pairs of one bandwidth), and in such a graph the pairs can be split off
//! one by one without cutting any NPU off from the trees it needs (splitting-off theorems for
//! Eulerian digraphs, as ForestColl uses them). Each split here is kept only where the trees
//! still fit (`fits`, one max-flow per NPU), the largest amount that does, so what comes out
//! always fits; a switch that cannot be split off completely leaves the fabric unserved.

use super::Graph;
use crate::synth::SynthError;

/// An arc of the graph being split: (from, to, trees it may carry, its nodes from `from` to
/// `to`, local ids).
type Arc = (usize, usize, u32, Vec<usize>);

/// The graph among the NPUs, each arc's capacity and each arc's route (`split_off`).
pub(super) type Split = (Graph, Vec<u32>, Vec<Vec<usize>>);

/// The graph among `g`'s NPUs with every switch split off, each arc's capacity, and each arc's
/// route (local node ids, switches between its ends); `None` where a switch cannot be split off
/// with the trees still fitting. `cap` is the packing's, which `Graph::feasible` accepted.
pub(super) fn split_off(
    g: &Graph,
    cap: &[u32],
    k: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Split>, SynthError> {
    let mut arcs: Vec<Arc> =
        g.arcs.iter().zip(cap).filter(|(_, c)| **c > 0).map(|(&(a, b, _), &c)| (a, b, c, vec![a, b])).collect();
    for w in g.n..g.nodes {
        // Every pair's fair share at once, what is left at the switch dropped, checked once:
        // where the trees still fit, the switch is off in one max-flow per NPU instead of one
        // per NPU for each pair and halving (hier's eight switches at one tree per root: 4 ms
        // against 37 ms; rail:4x8's rail switches, not its node switches).
        let batch: Vec<Arc> = fair_shares(&arcs, w).into_iter().filter(|a| a.0 != w && a.1 != w && a.2 > 0).collect();
        if fits(g, &batch, k) {
            arcs = batch;
            continue;
        }
        // Else pair by pair: a fair share first (each tree in over one link spread over the
        // links out), then whatever more still fits: a star's trees then go straight to every
        // NPU.
        for fair in [true, false] {
            arcs = pass(arcs, w, fair, |arcs, i, o, most| match cancelled() {
                true => Err(SynthError::Cancelled),
                false => Ok(largest(most, |x| fits(g, &split(arcs, i, o, x), k))),
            })?;
        }
        // What is left at the switch (a link's trees back to where they came from) goes.
        let rest: Vec<Arc> = arcs.iter().filter(|a| a.0 != w && a.1 != w && a.2 > 0).cloned().collect();
        if !fits(g, &rest, k) {
            return Ok(None);
        }
        arcs = rest;
    }
    let graph = Graph {
        n: g.n,
        nodes: g.n,
        roots: g.roots.clone(),
        arcs: arcs.iter().map(|a| (a.0, a.1, f64::NAN)).collect(),
        global: g.global[..g.n].to_vec(),
    };
    let cap = arcs.iter().map(|a| a.2).collect();
    Ok(Some((graph, cap, arcs.into_iter().map(|a| a.3).collect())))
}

/// `arcs` with every pair of an arc into `w` and an arc out of it to another node split by the
/// in-arc's fair share over its links out (as far as both arcs have trees left), unchecked.
fn fair_shares(arcs: &[Arc], w: usize) -> Vec<Arc> {
    match pass(arcs.to_vec(), w, true, |_, _, _, most| Ok::<u32, std::convert::Infallible>(most)) {
        Ok(arcs) => arcs,
        Err(never) => match never {},
    }
}

/// One pass over the pairs at switch `w` (each arc in with each arc out to another node), each
/// split by `amount(arcs, in, out, most)`, `most` what both arcs have left, capped at the
/// in-arc's fair share over its links out where `fair`.
fn pass<E>(
    mut arcs: Vec<Arc>,
    w: usize,
    fair: bool,
    mut amount: impl FnMut(&[Arc], usize, usize, u32) -> Result<u32, E>,
) -> Result<Vec<Arc>, E> {
    let ins: Vec<usize> = (0..arcs.len()).filter(|&i| arcs[i].1 == w && arcs[i].2 > 0).collect();
    for i in ins {
        let outs: Vec<usize> =
            (0..arcs.len()).filter(|&o| arcs[o].0 == w && arcs[o].2 > 0 && arcs[o].1 != arcs[i].0).collect();
        let share = arcs[i].2.div_ceil(outs.len().max(1) as u32);
        for o in outs {
            let most = arcs[i].2.min(arcs[o].2).min(if fair { share } else { u32::MAX });
            let x = amount(&arcs, i, o, most)?;
            if x > 0 {
                arcs = split(&arcs, i, o, x);
            }
        }
    }
    Ok(arcs)
}

/// The largest x in 0..=most that `ok` accepts, `ok` monotone (accepts 0).
fn largest(most: u32, ok: impl Fn(u32) -> bool) -> u32 {
    if most == 0 || ok(most) {
        return most;
    }
    let (mut lo, mut hi) = (0, most);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) { lo = mid } else { hi = mid }
    }
    lo
}

/// `arcs` with `amount` trees of arc `i` (into a switch) and arc `o` (out of it) made one arc
/// past the switch, merged into an arc of the same route if there is one (arcs keep their
/// indices: one left with nothing stays until its switch is done).
fn split(arcs: &[Arc], i: usize, o: usize, amount: u32) -> Vec<Arc> {
    let mut out = arcs.to_vec();
    out[i].2 -= amount;
    out[o].2 -= amount;
    let mut route = arcs[i].3.clone();
    route.extend_from_slice(&arcs[o].3[1..]);
    match out.iter_mut().find(|a| a.3 == route) {
        Some(a) => a.2 += amount,
        None => out.push((arcs[i].0, arcs[o].1, amount, route)),
    }
    out
}

/// Whether k trees per root of `g` fit `arcs` (`Graph::feasible` on them).
fn fits(g: &Graph, arcs: &[Arc], k: usize) -> bool {
    let h = Graph {
        n: g.n,
        nodes: g.nodes,
        roots: g.roots.clone(),
        arcs: arcs.iter().map(|a| (a.0, a.1, f64::NAN)).collect(),
        global: Vec::new(),
    };
    let cap: Vec<u32> = arcs.iter().map(|a| a.2).collect();
    h.feasible(&cap, k)
}
