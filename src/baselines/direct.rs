//! Direct algorithms: every NPU sends straight to every NPU that needs its data, in one step
//! per phase, each message along a shortest path (TACOS's "Direct" baseline).

use super::{Algorithm, BaselineInfo, Out};
use crate::collective::CollectiveKind as K;
use crate::schedule::{ChunkList, Op};

/// Above this many NPUs the p² routed messages of the pairwise kinds are refused (memory).
pub const MAX_DIRECT_NPUS: usize = 1024;

pub(super) const DIRECT: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "direct",
        collectives: vec![
            K::AllGather,
            K::ReduceScatter,
            K::AllReduce,
            K::Broadcast,
            K::Reduce,
            K::Scatter,
            K::Gather,
            K::AllToAll,
        ],
        topologies: "any (shortest-path routing)",
        source: "TACOS VII-C (Direct baseline)",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| {
        if ctx.p() > MAX_DIRECT_NPUS && ctx.c.spec.kind != K::Broadcast && ctx.c.spec.kind != K::Scatter {
            return Err(super::BaselineError::Unsupported {
                algorithm: "direct",
                what: format!("groups above {MAX_DIRECT_NPUS} NPUs (p² routed messages)"),
            });
        }
        let mut out = Out::new(ctx);
        let p = ctx.p();
        let root = ctx.root_rank();
        let block = |r: usize| -> Vec<u32> { ctx.block(r).collect() };
        let all: Vec<u32> = (0..ctx.c.num_chunks as u32).collect();
        let k = ctx.k() as u32;
        for a in 0..p {
            for b in (0..p).filter(|&b| b != a) {
                match ctx.c.spec.kind {
                    K::AllGather => out.send(0, a, b, block(a), Op::Copy),
                    K::ReduceScatter => out.send(0, a, b, block(b), Op::Reduce),
                    K::AllReduce => {
                        out.send(0, a, b, block(b), Op::Reduce);
                        out.send(1, b, a, block(b), Op::Copy);
                    }
                    K::Broadcast if a == root => out.send(0, a, b, all.clone(), Op::Copy),
                    K::Reduce if b == root => out.send(0, a, b, all.clone(), Op::Reduce),
                    K::Scatter if a == root => out.send(0, a, b, block(b), Op::Copy),
                    K::Gather if b == root => out.send(0, a, b, block(a), Op::Copy),
                    K::AllToAll => {
                        let base = ((a * p + b) as u32) * k;
                        out.send(0, a, b, (base..base + k).collect::<ChunkList>(), Op::Copy);
                    }
                    _ => {}
                }
            }
        }
        Ok(out.transfers)
    },
};
