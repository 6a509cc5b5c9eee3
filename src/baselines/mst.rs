//! Minimum-spanning-tree (binomial) algorithms from the lecture notes (§1, §1.1–1.4):
//! broadcast and reduce move the whole message ⌈log₂p⌉ times; scatter and gather halve the
//! range each round. Rank offsets are taken relative to the root.

use super::{Algorithm, BaselineInfo, Out};
use crate::collective::CollectiveKind as K;
use crate::schedule::Op;

pub(super) const MST: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "mst",
        collectives: vec![K::Broadcast, K::Reduce, K::Scatter, K::Gather],
        topologies: "any (tree edges routed by shortest path)",
        source: "lecture notes 1 (MST broadcast), 1.1 (reduce), 1.2 (scatter), 1.4 (gather)",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| {
        let mut out = Out::new(ctx);
        let root = ctx.root_rank();
        let p = ctx.p();
        let all: Vec<u32> = (0..ctx.c.num_chunks as u32).collect();
        match ctx.c.spec.kind {
            K::Broadcast => {
                tree(p, |step, a, b| out.send(step, (a + root) % p, (b + root) % p, all.clone(), Op::Copy), false);
            }
            K::Reduce => {
                tree(p, |step, a, b| out.send(step, (b + root) % p, (a + root) % p, all.clone(), Op::Reduce), true);
            }
            K::Scatter => {
                let blocks: Vec<Vec<u32>> = (0..p).map(|r| ctx.block(r).collect()).collect();
                scatter(&mut out, root, &blocks, 0);
            }
            K::Gather => {
                let blocks: Vec<Vec<u32>> = (0..p).map(|r| ctx.block(r).collect()).collect();
                gather(&mut out, root, &blocks, 0);
            }
            _ => unreachable!("checked against the supported kinds"),
        }
        Ok(out.transfers)
    },
};

fn rounds(p: usize) -> u32 {
    usize::BITS - (p.max(1) - 1).leading_zeros()
}

/// Calls `edge(step, a, b)` for every binomial-tree edge a→b over offsets 0..p (0 is the root):
/// top-down (`a` has the data first) or, reversed, bottom-up.
fn tree(p: usize, mut edge: impl FnMut(u32, usize, usize), bottom_up: bool) {
    let r = rounds(p);
    for j in 0..r {
        let mask = 1usize << (r - 1 - j);
        let step = if bottom_up { r - 1 - j } else { j };
        for a in (0..p).step_by(2 * mask) {
            if a + mask < p {
                edge(step, a, a + mask);
            }
        }
    }
}

/// Binomial scatter of `blocks[r]` (rank r's chunks) from `root`, from `step0`; returns the
/// next free step. Each edge carries the blocks of the receiving subtree.
pub(super) fn scatter(out: &mut Out, root: usize, blocks: &[Vec<u32>], step0: u32) -> u32 {
    let p = blocks.len();
    let r = rounds(p);
    for j in 0..r {
        let mask = 1usize << (r - 1 - j);
        for a in (0..p).step_by(2 * mask) {
            if a + mask < p {
                let chunks: Vec<u32> =
                    (a + mask..(a + 2 * mask).min(p)).flat_map(|o| blocks[(o + root) % p].clone()).collect();
                out.send(step0 + j, (a + root) % p, (a + mask + root) % p, chunks, Op::Copy);
            }
        }
    }
    step0 + r
}

/// Binomial gather of every rank's block to `root` (the reverse of `scatter`).
pub(super) fn gather(out: &mut Out, root: usize, blocks: &[Vec<u32>], step0: u32) -> u32 {
    let p = blocks.len();
    let r = rounds(p);
    for j in 0..r {
        let mask = 1usize << j;
        for a in (0..p).step_by(2 * mask) {
            if a + mask < p {
                let chunks: Vec<u32> =
                    (a + mask..(a + 2 * mask).min(p)).flat_map(|o| blocks[(o + root) % p].clone()).collect();
                out.send(step0 + j, (a + mask + root) % p, (a + root) % p, chunks, Op::Copy);
            }
        }
    }
    step0 + r
}
