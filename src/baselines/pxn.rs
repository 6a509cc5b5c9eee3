//! All-to-all on a rail-optimized fabric (`rail:NxG`: node switches and rail switches) through
//! relays that aggregate: NCCL's PXN (NVIDIA, "Doubling all2all performance with NCCL 2.12",
//! 2022) sends a chunk for another node first over the node switch to the GPU on the
//! destination's rail, which forwards it over its rail with other chunks for that GPU, so a
//! message through a switch carries several chunks and pays its two link latencies once.
//!
//! Here, after the first rounds (where every pair may go node first: nothing is there to relay
//! yet), some node pairs go node first and the others rail first (`Split::node_first`), so
//! both uplinks of a GPU work from the start and each relays the other's traffic later: the
//! node uplink (the busier: N(G − 1) chunks against G(N − 1)) sends, in round r, one message
//! to the GPU r places on carrying its own chunk, its node-first chunks for that rail and the
//! rail-first chunks it relays for it; the rail uplink sends the rail-first chunks in blocks
//! ahead of the rounds that forward them, and forwards node-first chunks, in blocks, behind the
//! rounds that brought them. Every GPU runs the same plan shifted (the rounds are permutations
//! of each switch's ports), so the plan of one GPU is timed alone, and the best of a few shapes
//! (how many node pairs go node first, block sizes, rounds whose relays wait to the end) is kept.

use super::{Algorithm, BaselineError, BaselineInfo, Ctx, Out};
use crate::collective::CollectiveKind as K;
use crate::schedule::Op;
use crate::topology::{Rails, Topology};

pub(super) const PXN: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "pxn",
        collectives: vec![K::AllToAll],
        topologies: "rail fabrics (every NPU on one node and one rail switch; whole group)",
        source: "NCCL 2.12 PXN (NVIDIA 2022), node-first and rail-first relays",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| {
        let unsupported = |what: &str| BaselineError::Unsupported { algorithm: "pxn", what: what.into() };
        let rails = ctx.topo.infer_rails().ok_or_else(|| unsupported("this topology: it needs a rail fabric"))?;
        if ctx.p() != ctx.topo.npus() {
            return Err(unsupported("a group of some NPUs: it needs every NPU"));
        }
        super::alltoall::too_many(ctx, "pxn")?;
        let shape = Shape::of(ctx.topo, &rails, ctx.k(), ctx.c.chunk_size_bytes);
        let plan = best_plan(&shape, &|| ctx.halted()).ok_or(BaselineError::Stopped)?;
        Ok(emit(ctx, &rails, &plan))
    },
};

/// What the plan's timing needs: the fabric's sides, chunks per pair, and a message's latency
/// and per-chunk time on each switch class (the slowest link of the class).
struct Shape {
    nodes: usize,
    gpus: usize,
    k: usize,
    node: Class,
    rail: Class,
}

#[derive(Clone, Copy)]
struct Class {
    /// Two links' latency: NPU to switch to NPU.
    alpha_ns: f64,
    chunk_ns: f64,
}

impl Class {
    fn time_ns(&self, chunks: usize) -> f64 {
        self.alpha_ns + chunks as f64 * self.chunk_ns
    }
}

impl Shape {
    fn of(topo: &Topology, rails: &Rails, k: usize, chunk_bytes: f64) -> Shape {
        let class = |switches: &[usize]| {
            let (mut lat, mut bw) = (0.0f64, f64::INFINITY);
            for &s in switches {
                for l in
                    topo.links()[topo.out_links(s)].iter().chain(topo.in_links(s).iter().map(|&i| &topo.links()[i]))
                {
                    lat = lat.max(l.latency_ns);
                    bw = bw.min(l.bandwidth_gb_per_s);
                }
            }
            Class { alpha_ns: 2.0 * lat, chunk_ns: chunk_bytes / bw }
        };
        Shape {
            nodes: rails.nodes(),
            gpus: rails.gpus(),
            k,
            node: class(&rails.node_switches),
            rail: class(&rails.rail_switches),
        }
    }
}

/// One message of the plan of GPU (a, g); every GPU sends the same, shifted by (a, g).
#[derive(Clone, Debug, PartialEq)]
enum Msg {
    /// Node round r, to (a, g + r): its own chunk and node-first chunks for rail g + r
    /// (`firsts`), and the rail-first chunks relayed for it (`relays`).
    Node { r: usize, firsts: bool, relays: bool },
    /// To (a + s, g) over the rail, s rail first: the chunks for (a + s, g + r), r in `rounds`,
    /// and its own chunk for (a + s, g) when `direct`.
    RailFirst { s: usize, rounds: Vec<usize>, direct: bool },
    /// To (a + d, g) over the rail, d node first: the chunks (a, g − r) sent it in rounds
    /// `rounds` for (a + d, g), and its own chunk for (a + d, g) when `direct`.
    Relay { d: usize, rounds: Vec<usize>, direct: bool },
}

/// Which pairs go node first: in the first `early` rounds all (nothing to relay yet, so those
/// rounds need no rail-first chunk), after them the node offsets in `later`.
#[derive(Clone, Debug, PartialEq)]
struct Split {
    nodes: usize,
    early: usize,
    later: Vec<usize>,
}

impl Split {
    /// Whether chunks for node offset d sent in node round r go node first.
    fn node_first(&self, r: usize, d: usize) -> bool {
        r <= self.early || self.later.contains(&d)
    }
    /// Node offsets that go node first in round r, and the others (rail first).
    fn offsets(&self, r: usize, node_first: bool) -> impl Iterator<Item = usize> + '_ {
        (1..self.nodes).filter(move |&d| self.node_first(r, d) == node_first)
    }
}

/// A plan: the split, its messages in planned start order, and its makespan.
struct Plan {
    split: Split,
    msgs: Vec<Msg>,
    makespan_ns: f64,
}

/// The shapes tried: which node pairs go node first, in how many early rounds all do, how many
/// rounds leave their relays to the end, and the rail-first and relay blocks.
/// `None` once `halted` says stop (asked before each split's shapes).
fn best_plan(sh: &Shape, halted: &dyn Fn() -> bool) -> Option<Plan> {
    let mut best: Option<Plan> = None;
    for later in node_first_sets(sh.nodes) {
        for early in 0..=3.min(sh.gpus - 1) {
            if halted() {
                return None;
            }
            let split = Split { nodes: sh.nodes, early, later: later.clone() };
            let lates = 0..=3.min(sh.gpus - 1 - early);
            let a_blocks = [1, 2, 4].into_iter().flat_map(|first| [1, 2, 4, 8, 0].map(|then| (first, then)));
            let shapes = lates.flat_map(|late| a_blocks.clone().map(move |a| (late, a)));
            for ((late, a_block), b_block) in shapes.flat_map(|x| [1, 2, 4, 8, 0].map(|b| (x, b))) {
                let p = plan(sh, &split, late, a_block, b_block);
                if best.as_ref().is_none_or(|b| p.makespan_ns < b.makespan_ns) {
                    best = Some(p);
                }
            }
        }
    }
    best
}

/// The symmetric sets of node offsets (d and N − d together), farthest first, of every size.
fn node_first_sets(nodes: usize) -> Vec<Vec<usize>> {
    let mut by_far: Vec<usize> = (1..=nodes / 2).collect();
    by_far.reverse();
    let mut out = vec![Vec::new()];
    let mut cur = Vec::new();
    for m in by_far {
        cur.push(m);
        if m != nodes - m {
            cur.push(nodes - m);
        }
        let mut set = cur.clone();
        set.sort_unstable();
        out.push(set);
    }
    out
}

/// Block lengths covering `n` rounds: `first`, then `block` each; `block` 0 doubling (first,
/// 2·first, …: the first arrive soon); `usize::MAX` the same reversed (…, 2, 1 for `first` 1:
/// a short tail behind the last).
fn blocks(n: usize, first: usize, block: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let (mut left, mut len) = (n, first.max(1));
    while left > 0 {
        let l = len.min(left);
        out.push(l);
        left -= l;
        len = match block {
            0 | usize::MAX => len.saturating_mul(2),
            b => b,
        };
    }
    if block == usize::MAX {
        out.reverse();
    }
    out
}

/// The plan of one shape, timed: node rounds 1 … G − 1 (of those that relay, the first `late`
/// leave their relays to rounds of their own at the end); rail-first chunks in blocks
/// (`a_block`, see `blocks`) in the order the rounds need them; relays in blocks (`b_block`;
/// 0 here means halving), each sent once its rounds have arrived and the rail-first blocks can
/// spare the time.
fn plan(sh: &Shape, split: &Split, late: usize, a_block: (usize, usize), b_block: usize) -> Plan {
    let (nodes, gpus, k) = (sh.nodes, sh.gpus, sh.k);
    let relays_of = |r: usize| split.offsets(r, false).count();
    let firsts_of = |r: usize| 1 + split.offsets(r, true).count();
    // Rounds that relay, in round order; the first `late` of them relay at the end.
    let relaying: Vec<usize> = (1..gpus).filter(|&r| relays_of(r) > 0).collect();
    let late = late.min(relaying.len());
    let deferred = |r: usize| relaying[..late].contains(&r);
    // The node uplink's messages, in order.
    let mut xs: Vec<Msg> =
        (1..gpus).map(|r| Msg::Node { r, firsts: true, relays: relays_of(r) > 0 && !deferred(r) }).collect();
    xs.extend(relaying[..late].iter().map(|&r| Msg::Node { r, firsts: false, relays: true }));
    let x_chunks = |m: &Msg| match *m {
        Msg::Node { r, firsts, relays } => {
            k * (usize::from(firsts) * firsts_of(r) + usize::from(relays) * relays_of(r))
        }
        _ => unreachable!(),
    };
    // Rail-first blocks, in the order the rounds forward them; each partner's own chunk rides
    // its first message over the rail, rail first or relay.
    let order: Vec<usize> = relaying[late..].iter().chain(&relaying[..late]).copied().collect();
    let mut direct_sent = vec![false; nodes];
    let mut a_msgs: Vec<(Msg, usize)> = Vec::new(); // (message, its block)
    let mut block_of_round = vec![usize::MAX; gpus];
    let a_blocks = blocks(order.len(), a_block.0, a_block.1);
    let mut block_end_ns: Vec<Option<f64>> = vec![None; a_blocks.len()]; // when a block's last message ends
    let mut at = 0;
    for (block, len) in a_blocks.into_iter().enumerate() {
        let rounds = &order[at..at + len];
        at += len;
        for &r in rounds {
            block_of_round[r] = block;
        }
        for (s, sent) in direct_sent.iter_mut().enumerate().skip(1) {
            let rs: Vec<usize> = rounds.iter().copied().filter(|&r| !split.node_first(r, s)).collect();
            if !rs.is_empty() {
                let direct = !std::mem::replace(sent, true);
                a_msgs.push((Msg::RailFirst { s, rounds: rs, direct }, block));
            }
        }
    }
    // Relay blocks over node rounds 1 … G − 1.
    let all: Vec<usize> = (1..gpus).collect();
    let mut b_msgs: Vec<(Msg, usize)> = Vec::new(); // (message, the last round it forwards)
    let mut from = 0;
    let b_blocks = if b_block == 0 { blocks(all.len(), 1, usize::MAX) } else { blocks(all.len(), b_block, b_block) };
    for len in b_blocks {
        let rounds = &all[from..from + len];
        from += len;
        for (d, sent) in direct_sent.iter_mut().enumerate().skip(1) {
            let rs: Vec<usize> = rounds.iter().copied().filter(|&r| split.node_first(r, d)).collect();
            if let Some(&last) = rs.last() {
                let direct = !std::mem::replace(sent, true);
                b_msgs.push((Msg::Relay { d, rounds: rs, direct }, last));
            }
        }
    }
    let y_chunks = |m: &Msg| match m {
        Msg::RailFirst { rounds, direct, .. } | Msg::Relay { rounds, direct, .. } => {
            k * (rounds.len() + usize::from(*direct))
        }
        Msg::Node { .. } => unreachable!(),
    };
    // Time the two uplinks together.
    let mut round_end_ns: Vec<Option<f64>> = vec![None; gpus]; // when node round r (its firsts) ends
    // When each uplink is next free.
    let (mut node_free_ns, mut rail_free_ns) = (0.0f64, 0.0f64);
    let (mut ix, mut ia, mut ib) = (0usize, 0usize, 0usize);
    let mut timed: Vec<(f64, Msg)> = Vec::with_capacity(xs.len() + a_msgs.len() + b_msgs.len());
    // The rail-first block a node message waits for (its relays).
    let needs = |m: &Msg| match *m {
        Msg::Node { r, relays: true, .. } => Some(block_of_round[r]),
        _ => None,
    };
    while ix < xs.len() || ia < a_msgs.len() || ib < b_msgs.len() {
        if ix < xs.len() {
            let m = &xs[ix];
            let ready_ns = match needs(m) {
                Some(b) => block_end_ns[b],
                None => Some(0.0),
            };
            if let Some(ready_ns) = ready_ns {
                let start_ns = node_free_ns.max(ready_ns);
                node_free_ns = start_ns + sh.node.time_ns(x_chunks(m));
                if let Msg::Node { r, firsts: true, .. } = *m {
                    round_end_ns[r] = Some(node_free_ns);
                }
                timed.push((start_ns, m.clone()));
                ix += 1;
                continue;
            }
        }
        // The rail uplink: a relay block when its rounds have arrived and the next rail-first
        // block still arrives before the round that needs it; else the next rail-first message.
        // When the next relay block's rounds have all arrived (`None`: not yet timed). With no
        // rail-first message left every node message has what it waits for, so the node queue
        // has run dry above and every round is timed.
        let b_release_ns = b_msgs.get(ib).and_then(|&(_, last)| round_end_ns[last]);
        let take_b = match (ia < a_msgs.len(), b_release_ns) {
            (false, _) => true,
            (true, None) => false,
            (true, Some(release_ns)) => {
                let blk = a_msgs[ia].1;
                let rest_ns: f64 =
                    a_msgs[ia..].iter().take_while(|(_, b)| *b == blk).map(|(m, _)| sh.rail.time_ns(y_chunks(m))).sum();
                // When the first node message waiting for this block would start unhindered.
                let need_ns = node_free_ns
                    + xs[ix..]
                        .iter()
                        .take_while(|m| needs(m) != Some(blk))
                        .map(|m| sh.node.time_ns(x_chunks(m)))
                        .sum::<f64>();
                rail_free_ns.max(release_ns) + sh.rail.time_ns(y_chunks(&b_msgs[ib].0)) + rest_ns <= need_ns
            }
        };
        if take_b {
            let (m, last) = &b_msgs[ib];
            let release_ns = round_end_ns[*last].expect("a relay block is taken once its rounds are timed");
            let start_ns = rail_free_ns.max(release_ns);
            rail_free_ns = start_ns + sh.rail.time_ns(y_chunks(m));
            timed.push((start_ns, m.clone()));
            ib += 1;
        } else {
            let (m, blk) = &a_msgs[ia];
            let start_ns = rail_free_ns;
            rail_free_ns = start_ns + sh.rail.time_ns(y_chunks(m));
            if a_msgs.get(ia + 1).is_none_or(|(_, b)| b != blk) {
                block_end_ns[*blk] = Some(rail_free_ns);
            }
            timed.push((start_ns, m.clone()));
            ia += 1;
        }
    }
    // Start order. A message never starts before what it forwards has arrived, and where start
    // times tie (zero-time links) its producer was pushed first and the sort is stable: every
    // message lands in a later step than what it forwards.
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let makespan_ns = node_free_ns.max(rail_free_ns);
    Plan { split: split.clone(), msgs: timed.into_iter().map(|(_, m)| m).collect(), makespan_ns }
}

/// Every GPU's copy of the plan, one step per planned message.
fn emit(ctx: &Ctx, rails: &Rails, plan: &Plan) -> crate::schedule::Transfers {
    let (nodes, gpus) = (rails.nodes(), rails.gpus());
    let mut rank = vec![usize::MAX; ctx.topo.npus()];
    for (i, &v) in ctx.ranks.iter().enumerate() {
        rank[v] = i;
    }
    let npu = |a: usize, g: usize| rails.npu(a % nodes, g % gpus);
    let chunks_of =
        |from: usize, to: usize, out: &mut Vec<u32>| out.extend(super::alltoall::pair(ctx, rank[from], rank[to]));
    let mut out = Out::new(ctx);
    for (step, m) in plan.msgs.iter().enumerate() {
        for a in 0..nodes {
            for g in 0..gpus {
                let mut chunks = Vec::new();
                let (dst, switch) = match m {
                    Msg::Node { r, firsts, relays } => {
                        let h = g + r;
                        if *firsts {
                            chunks_of(npu(a, g), npu(a, h), &mut chunks);
                            for d in plan.split.offsets(*r, true) {
                                chunks_of(npu(a, g), npu(a + d, h), &mut chunks);
                            }
                        }
                        if *relays {
                            // From the GPU s nodes back, which sent them rail first.
                            for s in plan.split.offsets(*r, false) {
                                chunks_of(npu(a + nodes - s, g), npu(a, h), &mut chunks);
                            }
                        }
                        (npu(a, h), rails.node_switches[a])
                    }
                    Msg::RailFirst { s, rounds, direct } => {
                        if *direct {
                            chunks_of(npu(a, g), npu(a + s, g), &mut chunks);
                        }
                        for &r in rounds {
                            chunks_of(npu(a, g), npu(a + s, g + r), &mut chunks);
                        }
                        (npu(a + s, g), rails.rail_switches[g])
                    }
                    Msg::Relay { d, rounds, direct } => {
                        if *direct {
                            chunks_of(npu(a, g), npu(a + d, g), &mut chunks);
                        }
                        for &r in rounds {
                            chunks_of(npu(a, g + gpus - r), npu(a + d, g), &mut chunks);
                        }
                        (npu(a + d, g), rails.rail_switches[g])
                    }
                };
                chunks.sort_unstable();
                let src = npu(a, g);
                let path = vec![src as u32, switch as u32, dst as u32];
                out.push(step as u32, src, dst, chunks, Op::Copy, Some(path.into()));
            }
        }
    }
    out.transfers
}

/// The planned makespan of the best shape on `topo` for an all-to-all of `chunk_bytes` chunks,
/// `k` per pair, for tests: `None` where the topology is no rail fabric.
pub fn planned_ns_for_tests(topo: &Topology, k: usize, chunk_bytes: f64) -> Option<f64> {
    let rails = topo.infer_rails()?;
    best_plan(&Shape::of(topo, &rails, k, chunk_bytes), &|| false).map(|p| p.makespan_ns)
}
