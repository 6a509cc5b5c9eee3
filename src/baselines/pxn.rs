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
    // Rounds that relay, in round order; the first `late` of them relay at the end.
    let relaying: Vec<usize> = (1..sh.gpus).filter(|&r| relays_of(split, r) > 0).collect();
    let late = late.min(relaying.len());
    let xs = node_msgs(split, sh.gpus, &relaying[..late]);
    // Rail-first blocks, in the order the rounds forward them; each partner's own chunk rides
    // its first message over the rail, rail first or relay.
    let mut direct_sent = vec![false; sh.nodes];
    let rail_firsts = rail_first_msgs(split, sh.gpus, &relaying, late, a_block, &mut direct_sent);
    let b_msgs = relay_msgs(split, sh.gpus, b_block, &mut direct_sent);
    // Time the two uplinks together.
    Timing::new(sh, split, xs, rail_firsts, b_msgs).run()
}

/// How many node offsets go rail first in node round r (whose chunks that round relays).
fn relays_of(split: &Split, r: usize) -> usize {
    split.offsets(r, false).count()
}

/// How many pairs node round r sends its own chunks for: its partner and the node-first ones.
fn firsts_of(split: &Split, r: usize) -> usize {
    1 + split.offsets(r, true).count()
}

/// The node uplink's messages, in order: rounds 1 … G − 1 (relaying unless `deferred`), then
/// the relays of the `deferred` rounds in messages of their own.
fn node_msgs(split: &Split, gpus: usize, deferred: &[usize]) -> Vec<Msg> {
    // The node uplink's messages, in order.
    let mut xs: Vec<Msg> = (1..gpus)
        .map(|r| Msg::Node { r, firsts: true, relays: relays_of(split, r) > 0 && !deferred.contains(&r) })
        .collect();
    xs.extend(deferred.iter().map(|&r| Msg::Node { r, firsts: false, relays: true }));
    xs
}

/// The rail-first messages of a plan, by block, and which block carries each round's chunks.
struct RailFirsts {
    /// (message, its block)
    msgs: Vec<(Msg, usize)>,
    /// The block of each relaying round (`usize::MAX` for the others).
    block_of_round: Vec<usize>,
    /// How many blocks there are.
    blocks: usize,
}

/// Rail-first blocks (`a_block`, see `blocks`) over the relaying rounds, the `late` first of
/// them last, marking in `direct_sent` the partners whose own chunk one of them carries.
fn rail_first_msgs(
    split: &Split,
    gpus: usize,
    relaying: &[usize],
    late: usize,
    a_block: (usize, usize),
    direct_sent: &mut [bool],
) -> RailFirsts {
    let order: Vec<usize> = relaying[late..].iter().chain(&relaying[..late]).copied().collect();
    let mut a_msgs: Vec<(Msg, usize)> = Vec::new(); // (message, its block)
    let mut block_of_round = vec![usize::MAX; gpus];
    let a_blocks = blocks(order.len(), a_block.0, a_block.1);
    let n_blocks = a_blocks.len();
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
    RailFirsts { msgs: a_msgs, block_of_round, blocks: n_blocks }
}

/// Relay blocks (`b_block`; 0 halving) over node rounds 1 … G − 1, each with the last round it
/// forwards, carrying the own chunks of partners `direct_sent` does not mark yet.
fn relay_msgs(split: &Split, gpus: usize, b_block: usize, direct_sent: &mut [bool]) -> Vec<(Msg, usize)> {
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
    b_msgs
}

/// The two uplinks of one GPU timed together: their queues, how far each has gone, and when
/// what they carry ends.
struct Timing<'a> {
    sh: &'a Shape,
    split: &'a Split,
    /// The node uplink's messages, in order.
    xs: Vec<Msg>,
    /// (message, its block)
    a_msgs: Vec<(Msg, usize)>,
    /// (message, the last round it forwards)
    b_msgs: Vec<(Msg, usize)>,
    /// The rail-first block of each relaying round.
    block_of_round: Vec<usize>,
    /// When node round r (its firsts) ends.
    round_end_ns: Vec<Option<f64>>,
    /// When a block's last message ends.
    block_end_ns: Vec<Option<f64>>,
    // When each uplink is next free.
    node_free_ns: f64,
    rail_free_ns: f64,
    /// The next message of each queue: node, rail first, relay.
    ix: usize,
    ia: usize,
    ib: usize,
    /// The messages timed so far, with their start times.
    timed: Vec<(f64, Msg)>,
}

impl<'a> Timing<'a> {
    /// Nothing timed yet: both uplinks free at 0.
    fn new(sh: &'a Shape, split: &'a Split, xs: Vec<Msg>, a: RailFirsts, b_msgs: Vec<(Msg, usize)>) -> Self {
        let timed = Vec::with_capacity(xs.len() + a.msgs.len() + b_msgs.len());
        Timing {
            sh,
            split,
            xs,
            a_msgs: a.msgs,
            b_msgs,
            block_of_round: a.block_of_round,
            round_end_ns: vec![None; sh.gpus],
            block_end_ns: vec![None; a.blocks],
            node_free_ns: 0.0,
            rail_free_ns: 0.0,
            ix: 0,
            ia: 0,
            ib: 0,
            timed,
        }
    }

    /// Times every message, the node uplink first whenever its next message can go, and gives the plan.
    fn run(mut self) -> Plan {
        while self.ix < self.xs.len() || self.ia < self.a_msgs.len() || self.ib < self.b_msgs.len() {
            if self.time_node() {
                continue;
            }
            if self.take_relay() {
                self.time_relay();
            } else {
                self.time_rail_first();
            }
        }
        self.into_plan()
    }

    /// Chunks a node message carries.
    fn x_chunks(&self, m: &Msg) -> usize {
        match *m {
            Msg::Node { r, firsts, relays } => {
                self.sh.k
                    * (usize::from(firsts) * firsts_of(self.split, r) + usize::from(relays) * relays_of(self.split, r))
            }
            _ => unreachable!(),
        }
    }

    /// Chunks a rail message (rail first or relay) carries.
    fn y_chunks(&self, m: &Msg) -> usize {
        match m {
            Msg::RailFirst { rounds, direct, .. } | Msg::Relay { rounds, direct, .. } => {
                self.sh.k * (rounds.len() + usize::from(*direct))
            }
            Msg::Node { .. } => unreachable!(),
        }
    }

    /// The rail-first block a node message waits for (its relays).
    fn needs(&self, m: &Msg) -> Option<usize> {
        match *m {
            Msg::Node { r, relays: true, .. } => Some(self.block_of_round[r]),
            _ => None,
        }
    }

    /// Times the next node message if there is one and the block it waits for has ended.
    fn time_node(&mut self) -> bool {
        if self.ix >= self.xs.len() {
            return false;
        }
        let m = &self.xs[self.ix];
        let ready_ns = match self.needs(m) {
            Some(b) => self.block_end_ns[b],
            None => Some(0.0),
        };
        let Some(ready_ns) = ready_ns else {
            return false;
        };
        let start_ns = self.node_free_ns.max(ready_ns);
        self.node_free_ns = start_ns + self.sh.node.time_ns(self.x_chunks(m));
        if let Msg::Node { r, firsts: true, .. } = *m {
            self.round_end_ns[r] = Some(self.node_free_ns);
        }
        self.timed.push((start_ns, m.clone()));
        self.ix += 1;
        true
    }

    /// Whether the rail uplink sends the next relay block now rather than the next rail-first message.
    fn take_relay(&self) -> bool {
        // The rail uplink: a relay block when its rounds have arrived and the next rail-first
        // block still arrives before the round that needs it; else the next rail-first message.
        // When the next relay block's rounds have all arrived (`None`: not yet timed). With no
        // rail-first message left every node message has what it waits for, so the node queue
        // has run dry above and every round is timed.
        let b_release_ns = self.b_msgs.get(self.ib).and_then(|&(_, last)| self.round_end_ns[last]);
        match (self.ia < self.a_msgs.len(), b_release_ns) {
            (false, _) => true,
            (true, None) => false,
            (true, Some(release_ns)) => self.relay_fits(release_ns),
        }
    }

    /// Whether the next relay block, released at `release_ns`, and then the rest of the next
    /// rail-first block still end before the first node message waiting for that block.
    fn relay_fits(&self, release_ns: f64) -> bool {
        let blk = self.a_msgs[self.ia].1;
        let rest_ns: f64 = self.a_msgs[self.ia..]
            .iter()
            .take_while(|(_, b)| *b == blk)
            .map(|(m, _)| self.sh.rail.time_ns(self.y_chunks(m)))
            .sum();
        // When the first node message waiting for this block would start unhindered.
        let need_ns = self.node_free_ns
            + self.xs[self.ix..]
                .iter()
                .take_while(|m| self.needs(m) != Some(blk))
                .map(|m| self.sh.node.time_ns(self.x_chunks(m)))
                .sum::<f64>();
        let relay_ns = self.sh.rail.time_ns(self.y_chunks(&self.b_msgs[self.ib].0));
        let relay_end_ns = self.rail_free_ns.max(release_ns) + relay_ns;
        relay_end_ns + rest_ns <= need_ns
    }

    /// Times the next relay block, once its rounds have arrived.
    fn time_relay(&mut self) {
        let (m, last) = &self.b_msgs[self.ib];
        let release_ns = self.round_end_ns[*last].expect("a relay block is taken once its rounds are timed");
        let start_ns = self.rail_free_ns.max(release_ns);
        self.rail_free_ns = start_ns + self.sh.rail.time_ns(self.y_chunks(m));
        self.timed.push((start_ns, m.clone()));
        self.ib += 1;
    }

    /// Times the next rail-first message, ending its block when it is the block's last.
    fn time_rail_first(&mut self) {
        let (m, blk) = &self.a_msgs[self.ia];
        let start_ns = self.rail_free_ns;
        self.rail_free_ns = start_ns + self.sh.rail.time_ns(self.y_chunks(m));
        if self.a_msgs.get(self.ia + 1).is_none_or(|(_, b)| b != blk) {
            self.block_end_ns[*blk] = Some(self.rail_free_ns);
        }
        self.timed.push((start_ns, m.clone()));
        self.ia += 1;
    }

    /// The plan: the timed messages in start order and the later uplink's end.
    fn into_plan(mut self) -> Plan {
        // Start order. A message never starts before what it forwards has arrived, and where start
        // times tie (zero-time links) its producer was pushed first and the sort is stable: every
        // message lands in a later step than what it forwards.
        self.timed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let makespan_ns = self.node_free_ns.max(self.rail_free_ns);
        Plan { split: self.split.clone(), msgs: self.timed.into_iter().map(|(_, m)| m).collect(), makespan_ns }
    }
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
