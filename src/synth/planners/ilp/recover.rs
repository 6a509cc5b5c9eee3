//! Shortest-path recovery (TACOS V-B): the chunks a clustered search left undelivered reach
//! their targets over shortest TEN paths, each hop when its resources are free.

use crate::synth::phase::Move;
use crate::ten::Ten;
use std::collections::HashSet;

/// TACOS V-B: each missing (npu, chunk) gets the chunk over a shortest TEN path from its
/// nearest holder, every hop at the first time from `start` on when the edge's resources are
/// free for its whole span. Holders grow as chunks pass, so later paths may start nearer.
pub fn recover(ten: &Ten, holders: &mut [Vec<u32>], missing: &[[u32; 2]], start: u32) -> Vec<Move> {
    let mut busy: HashSet<(u32, u32)> = HashSet::new();
    let mut out = Vec::new();
    for &[n, c] in missing {
        let hs = &holders[c as usize];
        if hs.contains(&n) {
            continue;
        }
        let Some(path) = shortest_path(ten, hs, n) else { continue };
        let mut ready = start;
        for e in path {
            let edge = &ten.edges[e as usize];
            let mut t = ready;
            while (t..t + edge.span).any(|s| edge.resources.iter().any(|&r| busy.contains(&(r, s)))) {
                t += 1;
            }
            for s in t..t + edge.span {
                for &r in &edge.resources {
                    busy.insert((r, s));
                }
            }
            out.push(Move { step: t, edge: e, chunk: c });
            holders[c as usize].push(edge.dst);
            ready = t + edge.span;
        }
    }
    out
}

/// Edge ids of a shortest (in timesteps) path from the nearest of `from` to `to`.
fn shortest_path(ten: &Ten, from: &[u32], to: u32) -> Option<Vec<u32>> {
    let (dist, via) = ten.shortest_tree(from);
    if dist[to as usize] == u32::MAX {
        return None;
    }
    let mut path = Vec::new();
    let mut v = to;
    while dist[v as usize] != 0 {
        let e = via[v as usize];
        path.push(e);
        v = ten.edges[e as usize].src;
    }
    path.reverse();
    Some(path)
}
