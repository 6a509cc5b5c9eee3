//! Bucket (Swing paper 2.3.4): per-dimension ring reduce-scatters, then all-gathers in the
//! reverse order, 2D concurrent buckets (each part starting at another dimension, either way
//! round); a whole mesh or torus only (the engine reroutes it onto one less a few links:
//! `engine::rerouted`).

use super::butterfly::sub_block;
use super::{Algorithm, BaselineError, BaselineInfo, Ctx, Out};
use crate::collective::CollectiveKind as K;
use crate::schedule::{ChunkList, Op, Transfers};

pub(super) const BUCKET: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "bucket",
        collectives: vec![K::AllReduce, K::ReduceScatter, K::AllGather],
        topologies: "meshes and tori (whole grid as the group), also less up to 64 links (built whole, rerouted)",
        source: "Swing paper 2.3.4 (bucket / per-dimension rings, 2D concurrent buckets)",
    },
    chunking: |t, s| {
        let d = t.infer_grid().map(|g| g.dims.len()).unwrap_or(1) as u32;
        s.chunks().max(1).next_multiple_of(2 * d)
    },
    build: bucket,
};

fn bucket(ctx: &Ctx) -> Result<Transfers, BaselineError> {
    let g = ctx.grid.clone().ok_or(BaselineError::Unsupported {
        algorithm: "bucket",
        what: "topologies that are not a whole mesh or torus".into(),
    })?;
    let kind = ctx.c.spec.kind;
    let dims = g.dims.len();
    let parts = 2 * dims;
    let p = ctx.p();
    let mut out = Out::new(ctx);
    let stride: Vec<usize> = (0..dims).map(|i| g.dims[..i].iter().product()).collect();
    let rs = matches!(kind, K::AllReduce | K::ReduceScatter);
    let ag = matches!(kind, K::AllReduce | K::AllGather);
    for part in 0..parts {
        let dir: i64 = if part < dims { 1 } else { -1 };
        let order: Vec<usize> = (0..dims).map(|i| (part + i) % dims).collect();
        let chunks_of =
            |blocks: &[usize]| -> Vec<u32> { blocks.iter().flat_map(|&b| sub_block(ctx, b, part, parts)).collect() };
        // Blocks node v is responsible for once dims `done` are reduced: those agreeing with v there.
        // Blocks agreeing with node v on the reduced dimensions `done` and with coordinate
        // `gcoord` on dimension j: enumerated directly over the free dimensions.
        let group = |v: usize, done: &[usize], j: usize, gcoord: usize| -> Vec<usize> {
            let mut c = g.coords(v);
            c[j] = gcoord;
            let free: Vec<usize> = (0..dims).filter(|i| *i != j && !done.contains(i)).collect();
            for &i in &free {
                c[i] = 0;
            }
            let mut out = Vec::new();
            loop {
                out.push(g.node(&c));
                let mut k = 0;
                while k < free.len() {
                    let i = free[k];
                    c[i] += 1;
                    if c[i] < g.dims[i] {
                        break;
                    }
                    c[i] = 0;
                    k += 1;
                }
                if k == free.len() {
                    return out;
                }
            }
        };
        let mut step: u32;
        // A step's messages carry one chunk list per group (the group's first block names it):
        // built once and shared (on torus:64x64, 16,384 messages a step, 64 or 4,096 lists).
        let mut lists: Vec<Option<ChunkList>> = vec![None; p];
        let mut line_phase = |out: &mut Out, step: &mut u32, j: usize, done: &[usize], reduce: bool| {
            let d = g.dims[j];
            for s in 0..d - 1 {
                lists.iter_mut().for_each(|l| *l = None);
                for v in 0..p {
                    let a = g.coord(v, j);
                    // Position along the ring in direction `dir`.
                    let pos = if dir > 0 { a } else { (d - a) % d };
                    let gpos = if reduce { (pos + 2 * d - s - 1) % d } else { (pos + d - s) % d };
                    let gcoord = if dir > 0 { gpos } else { (d - gpos) % d };
                    // The group's first block: v with coordinate gcoord on j, 0 on the free dims.
                    let first = (0..dims)
                        .filter(|&i| i == j || !done.contains(&i))
                        .fold(v, |r, i| r - g.coord(v, i) * stride[i])
                        + gcoord * stride[j];
                    let chunks = lists[first]
                        .get_or_insert_with(|| {
                            let blocks = group(v, done, j, gcoord);
                            debug_assert_eq!(blocks[0], first);
                            chunks_of(&blocks).into()
                        })
                        .clone();
                    let (w, path) = ctx.route_along(v, j, dir);
                    out.push(*step, v, w, chunks, if reduce { Op::Reduce } else { Op::Copy }, path);
                }
                *step += 1;
            }
        };
        // The t-th phase of every part starts at the same step, `t` times the longest line
        // apart. A link serves its messages in step order, and on a torus of unequal sides
        // one part's short messages (a dimension it reduces late) share links with another's
        // long ones (the same dimension, reduced first): numbered side by side, each short
        // message waited for the long one of the step before it, and the part's last phase
        // started only when the other's long phase was half done (bucket on torus:16x32 ran
        // 1.50x its bound). Aligned, the short phases of the all-gather precede the long
        // ones. On equal sides nothing moves.
        let line = g.dims.iter().max().map_or(0, |&d| d - 1) as u32;
        if rs {
            for i in 0..dims {
                step = i as u32 * line;
                line_phase(&mut out, &mut step, order[i], &order[..i], true);
            }
        }
        let ag_from = if rs { dims as u32 * line } else { 0 };
        if ag {
            for (t, i) in (0..dims).rev().enumerate() {
                step = ag_from + t as u32 * line;
                line_phase(&mut out, &mut step, order[i], &order[..i], false);
            }
        }
    }
    Ok(out.transfers)
}
