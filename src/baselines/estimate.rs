//! Lower bounds on a baseline's simulated time from its structure alone, before it is built:
//! `auto` prices its candidates with them so that at scale it does not build schedules of tens
//! of millions of transfers that cannot win.
//!
//! Two bounds, both sound for the simulator (each transfer takes at least the latency of one
//! link plus its bytes over the fastest link, and holds each link of its path at least that
//! long, whether the path is cut through or stored and forwarded at its relays):
//! - the *chain*: the algorithm's steps depend on each other (a ring's step s forwards what it
//!   received at step s − 1, a butterfly's step sends what the step before reduced, a binomial
//!   tree's deepest rank waits for each tree edge above it), so the time is at least the sum
//!   over the chain of one message each;
//! - the *load*: on a torus whose butterfly follows the coordinates, the bytes times the hops
//!   of every message over all links: the busiest link carries at least the average.
//!
//! `None` where no bound is worked out (the baseline is then built and timed as before).

use super::{butterfly, ring};
use crate::collective::{CollectiveKind as K, CollectiveSpec};
use crate::topology::Topology;

/// What the bounds read off the topology.
struct Net {
    alpha_ns: f64,
    /// The fastest link, bytes per ns.
    beta: f64,
    /// Directed links (NPU or switch).
    links: f64,
}

impl Net {
    fn of(topo: &Topology) -> Option<Net> {
        let links = topo.links();
        if links.is_empty() {
            return None;
        }
        Some(Net {
            alpha_ns: links.iter().map(|l| l.latency_ns).fold(f64::INFINITY, f64::min),
            beta: links.iter().map(|l| l.bandwidth_gb_per_s).fold(0.0, f64::max),
            links: links.len() as f64,
        })
    }
    /// One message of `bytes` over the cheapest possible link.
    fn hop(&self, bytes: f64) -> f64 {
        self.alpha_ns + bytes / self.beta
    }
}

/// A lower bound on the simulated time of baseline `name` serving `spec` on `topo`, ns; `None`
/// when none is worked out. The spec's chunking is the baseline's own (`chunks_per_npu` as
/// `build` would choose it).
pub fn lower_bound_ns(name: &str, topo: &Topology, spec: &CollectiveSpec, chunks_per_npu: u32) -> Option<f64> {
    let net = Net::of(topo)?;
    let p = spec.group.as_ref().map(Vec::len).unwrap_or_else(|| topo.live_npus().len());
    if p < 2 {
        return None;
    }
    let m = spec.size_bytes as f64;
    let phases = match spec.kind {
        K::AllReduce => 2.0,
        K::AllGather | K::ReduceScatter => 1.0,
        _ => 0.0,
    };
    // The grid the builder walks (`Ctx::new`): every NPU of it, in id order.
    let grid = topo.infer_grid().filter(|g| {
        spec.group
            .as_ref()
            .is_none_or(|r| r.len() == g.dims.iter().product::<usize>() && r.iter().enumerate().all(|(i, &v)| i == v))
    });
    let at = Priced { topo, spec, net, p, block: m / p as f64, k: chunks_per_npu.max(1) as f64, phases, grid };
    match name {
        "ring" | "ring-bidir" if phases > 0.0 => Some(at.ring(name == "ring-bidir")),
        "recursive-doubling" | "swing-latency" if spec.kind == K::AllReduce => {
            // log₂ of the power-of-two core steps, each moving the whole vector of one part.
            let parts = if name == "swing-latency" { butterfly::parts_on(at.grid.as_ref()) } else { 1 } as f64;
            Some(log_floor(p) as f64 * at.net.hop(m / parts))
        }
        "rabenseifner" | "bde" | "swing-bandwidth" if phases > 0.0 => Some(at.halving(name == "swing-bandwidth")),
        "bucket" if phases > 0.0 => {
            // 2d parts, part i reducing its dimensions in the order i, i+1, …: a ring of n − 1
            // messages along each.
            let g = at.whole()?;
            let part = m / (2 * g.dims.len()) as f64;
            Some(phases * grid_chains(&g, 2 * g.dims.len(), |n, reduced| (n - 1) as f64 * at.net.hop(part / reduced)))
        }
        "bucket-bidir" if phases > 0.0 => {
            // Pairs of bucket's parts, along a side n a chain of ⌈(n−1)/2⌉ steps: ⌊(n−1)/2⌋
            // carry both halves, the last one of an even side one half.
            let g = at.whole().filter(super::bucket::chains_apply)?;
            let half = m / (2 * g.dims.len()) as f64;
            if super::bucket::on_a_mesh(&g) {
                // On a mesh a line of n is a chain of n − 1 steps, each carrying both halves.
                return Some(
                    phases
                        * grid_chains(&g, g.dims.len(), |n, reduced| (n - 1) as f64 * at.net.hop(2.0 * half / reduced)),
                );
            }
            Some(
                phases
                    * grid_chains(&g, g.dims.len(), |n, reduced| {
                        let both = (n - 1) / 2;
                        both as f64 * at.net.hop(2.0 * half / reduced)
                            + (n / 2 - both) as f64 * at.net.hop(half / reduced)
                    }),
            )
        }
        "traff" | "kolmakov" if phases > 0.0 => at.circulant(name == "traff"),
        "mst" => {
            // The binomial tree's deepest rank (offset with the most bits set) is ⌊log₂ p⌋
            // messages from the root: a rank's sends to its children do not wait for each other.
            let rounds = log_floor(p) as f64;
            match spec.kind {
                K::Broadcast | K::Reduce => Some(rounds * at.net.hop(m)),
                K::Scatter | K::Gather => Some(rounds * at.net.hop(m / p as f64)),
                _ => None,
            }
        }
        // Refused above its size limit (the price would only put it in `auto`'s first wave).
        // Every rank sends its block (or another's) straight to every other along a shortest
        // path: the links carry the bytes times the hops of all p(p − 1) messages per phase.
        "direct" if phases > 0.0 && p <= super::direct::MAX_DIRECT_NPUS => {
            let hops = RankHops::of(topo, spec)?;
            let all: u64 = (0..p).map(|a| (0..p).map(|b| hops.between(a, b)).sum::<u64>()).sum();
            Some(at.net.hop(at.block).max(phases * at.block * all as f64 / (at.net.links * at.net.beta)))
        }
        _ => None,
    }
}

fn log_floor(n: usize) -> usize {
    (usize::BITS - 1 - n.leading_zeros()) as usize
}

/// What a price reads: the request and the network's cheapest hop.
struct Priced<'a> {
    topo: &'a Topology,
    spec: &'a CollectiveSpec,
    net: Net,
    p: usize,
    /// One rank's block (all-gather, reduce-scatter, all-reduce).
    block: f64,
    /// Chunks a rank's block is cut into.
    k: f64,
    /// Passes over the data: 2 for an all-reduce, 1 for a reduce-scatter or all-gather.
    phases: f64,
    grid: Option<crate::topology::Grid>,
}

impl Priced<'_> {
    /// The grid, or on a mesh or torus less a few links the whole one, whose grid baselines are
    /// built whole and rerouted (`engine::rerouted`): a message there crosses at least as many
    /// links of each dimension as on the whole grid, each at least one hop's time, so the whole
    /// grid's chains and the load over the links left still bound it.
    fn whole(&self) -> Option<crate::topology::Grid> {
        self.grid.clone().or_else(|| self.spec.group.is_none().then(|| self.topo.grid_or_whole()).flatten())
    }

    /// A ring's p − 1 steps a pass: every rank's block is split over the rings, the smallest
    /// share ⌊k/R⌋ chunks.
    fn ring(&self, bidir: bool) -> f64 {
        let rings = ring::ring_count(self.topo, bidir) as f64;
        let share = (self.k / rings).floor().max(1.0) * self.block / self.k;
        self.phases * (self.p - 1) as f64 * self.net.hop(share)
    }

    /// Rabenseifner, BDE and bandwidth-optimal Swing: the halving chain, on a torus the load of
    /// the peers' distances, and Swing's logical line off a grid it follows.
    fn halving(&self, swing: bool) -> f64 {
        let (p, net, phases) = (self.p, &self.net, self.phases);
        let parts = if swing { butterfly::parts_on(self.grid.as_ref()) } else { 1 };
        let part_block = self.block / parts as f64;
        // Halving over the power-of-two core q (the whole group on power-of-two grids, else
        // folded): at step s a core rank sends at least q / 2^(s+1) blocks of its part.
        // Swing's schemes for other even p send each block once at some step, so there
        // only one block a step is counted.
        let q = 1usize << log_floor(p);
        let halving = !swing || p.is_power_of_two();
        let sent = |s: usize| if halving { (q >> (s + 1)).max(1) } else { 1 } as f64;
        let chain: f64 = (0..log_floor(q)).map(|s| net.hop(sent(s) * part_block)).sum::<f64>() * phases;
        // On a torus with power-of-two sides the peers follow the coordinates exactly: each
        // step's messages cross a known number of links along one dimension, and the
        // busiest link carries at least the average of every message's bytes × hops.
        let load = self
            .grid
            .as_ref()
            .filter(|g| g.torus && g.dims.iter().all(|d| d.is_power_of_two()))
            .map(|g| {
                let per_part: f64 = (0..parts)
                    .map(|part| {
                        let hops = butterfly::grid_hops(g, swing, part % g.dims.len());
                        hops.iter()
                            .enumerate()
                            .map(|(s, &h)| (p >> (s + 1)).max(1) as f64 * part_block * h as f64)
                            .sum::<f64>()
                    })
                    .sum();
                phases * p as f64 * per_part / (net.links * net.beta)
            })
            .unwrap_or(0.0);
        // Swing off a grid it follows, on p not a power of two: its logical line.
        let line = if swing && !p.is_power_of_two() && self.grid.as_ref().is_none_or(|g| !butterfly::swing_grid(g)) {
            swing_line_bound(self.topo, self.spec, net, p, part_block, phases).unwrap_or(0.0)
        } else {
            0.0
        };
        chain.max(load).max(line)
    }

    /// Träff and Kolmakov: ⌈log₂ p⌉ rounds: with n blocks left, rank r sends ⌊n/2⌋ of them to
    /// r + shift (the all-gather replays the rounds backwards, the same sizes the other way).
    /// The rounds need not wait for each other everywhere, so no chain: the longest message,
    /// and on a grid the load of every message's bytes over its distance.
    fn circulant(&self, traff: bool) -> Option<f64> {
        let (p, net) = (self.p, &self.net);
        let mut rounds: Vec<(f64, i64)> = Vec::new();
        let mut n = p;
        while n > 1 {
            let kept = n.div_ceil(2);
            let shift = if traff { kept as i64 } else { -((n / 2) as i64) };
            rounds.push(((n - kept) as f64 * self.block, shift));
            n = kept;
        }
        let longest = rounds.iter().map(|r| net.hop(r.0)).fold(0.0, f64::max);
        if let Some(g) = self.whole() {
            return Some(longest.max(self.phases * grid_load(self.topo, &g, &rounds)));
        }
        let hops = RankHops::of(self.topo, self.spec)?;
        let byte_hops: f64 = rounds
            .iter()
            .map(|&(bytes, shift)| {
                let hops: u64 = (0..p).map(|r| hops.between(r, (r as i64 + shift).rem_euclid(p as i64) as usize)).sum();
                bytes * hops as f64
            })
            .sum();
        Some(longest.max(self.phases * byte_hops / (net.links * net.beta)))
    }
}

/// The shortest of `parts` chains over a grid's dimensions (part i taking them in the order
/// i, i+1, …), one pass: along a side n, after dimensions whose sizes multiply to `reduced`
/// (itself included), `along(n, reduced)` ns.
fn grid_chains(g: &crate::topology::Grid, parts: usize, along: impl Fn(usize, f64) -> f64) -> f64 {
    let d = g.dims.len();
    (0..parts)
        .map(|i| {
            let mut reduced = 1.0;
            (0..d)
                .map(|step| {
                    let n = g.dims[(i + step) % d];
                    reduced *= n as f64;
                    along(n, reduced)
                })
                .sum::<f64>()
        })
        .fold(f64::INFINITY, f64::min)
}

/// The load bound of rounds in which every rank r of a whole mesh or torus (ranks in NPU-id
/// order) sends `bytes` to rank r + `shift`: any path crosses at least the two NPUs' distance
/// along each dimension on that dimension's links, so those links together carry at least the
/// bytes times those hops, and the busiest of them for at least that over their summed
/// bandwidth; the largest over the dimensions. Needs no table of p² hops (traff's price on
/// torus:16x32x32: its 16,384 ranks are past `MAX_RANK_HOPS`; unpriced, it was built, 45 s, to
/// lose 57× to bucket), and it sees a dimension that carries more than the average link does.
fn grid_load(topo: &Topology, g: &crate::topology::Grid, rounds: &[(f64, i64)]) -> f64 {
    let dims = g.dims.len();
    let p: usize = g.dims.iter().product();
    let mut bandwidth = vec![0.0f64; dims];
    for l in topo.links() {
        if l.src < p
            && l.dst < p
            && let Some(j) = (0..dims).find(|&j| g.coord(l.src, j) != g.coord(l.dst, j))
        {
            bandwidth[j] += l.bandwidth_gb_per_s;
        }
    }
    let mut byte_hops = vec![0.0f64; dims];
    for &(bytes, shift) in rounds {
        for r in 0..p {
            let q = (r as i64 + shift).rem_euclid(p as i64) as usize;
            for (j, bh) in byte_hops.iter_mut().enumerate() {
                let d = g.coord(r, j).abs_diff(g.coord(q, j));
                let hops = if g.torus { d.min(g.dims[j] - d) } else { d };
                *bh += bytes * hops as f64;
            }
        }
    }
    (0..dims).filter(|&j| bandwidth[j] > 0.0).map(|j| byte_hops[j] / bandwidth[j]).fold(0.0, f64::max)
}

/// Bandwidth-optimal Swing over the logical line of q ranks (p even: q = p; p odd: q = p − 1
/// and a lone rank whose messages are left out), p not a power of two, S = ⌈log₂ q⌉ steps.
///
/// A rank sends every other block once, each at the last step whose peer reaches it
/// (`butterfly::send_sets`), and a peer reaches at most 2^(S−1−s) ranks through the steps after
/// step s. So the steps after s take at most 2^(S−1−s) − 1 blocks, the steps up to s at least
/// q − 2^(S−1−s), and step s alone at least 2^(S−1−s) − (2^S − q) (each step before it at most
/// its own reach). Each such message crosses at least the hops between the two ranks: the
/// links carry at least those bytes times hops, in each part and phase. On torus:64x64 less
/// NPU 9 at 1 GiB that is 12.9 ms (the fold's 10.7 ms is the price) where the chain said
/// 40 µs; it runs 248 ms.
///
/// Where the blocks do not reach every rank the builder folds instead: the extra ranks then hand
/// over a whole part first and take it back last, at least one message of a part (two for an
/// all-reduce, the second waiting for the first's contribution). The lesser of the two counts.
/// `None` beyond `RankHops`' groups.
fn swing_line_bound(
    topo: &Topology,
    spec: &CollectiveSpec,
    net: &Net,
    p: usize,
    part_block: f64,
    phases: f64,
) -> Option<f64> {
    let q = if p.is_multiple_of(2) { p } else { p - 1 };
    let fold_messages = if spec.kind == K::AllReduce { 2.0 } else { 1.0 };
    let fold = fold_messages * net.hop(part_block * p as f64);
    if q < 2 {
        return Some(0.0);
    }
    let steps = q.next_power_of_two().trailing_zeros();
    let excess = (1usize << steps) - q;
    let hops = RankHops::of(topo, spec)?;
    let mut byte_hops = 0.0;
    for s in 0..steps {
        let blocks = (1usize << (steps - 1 - s)).saturating_sub(excess);
        if blocks == 0 {
            continue;
        }
        // The plain part and the mirrored one (peer 2r − x of the plain peer x).
        let crossed: u64 = (0..q)
            .map(|r| {
                let x = butterfly::swing_peer(r, s, q);
                hops.between(r, x) + hops.between(r, (2 * r + q - x) % q)
            })
            .sum();
        byte_hops += blocks as f64 * part_block * crossed as f64;
    }
    let line = phases * byte_hops / (net.links * net.beta);
    Some(line.min(fold))
}

/// Hops on a shortest path between the ranks of a group (breadth first from every rank over the
/// topology's links, switches included): what a message routed by shortest path crosses at
/// least. Worked out for groups of at most `MAX_RANK_HOPS` NPUs, and within
/// `RANK_HOPS_WORK`: beyond it every pair counts one hop (still at least what a message
/// crosses, so a price stays a lower bound, only a looser one).
struct RankHops {
    p: usize,
    /// p × p hops, row by row; empty when every pair counts one.
    hops: Vec<u16>,
}

/// Groups up to which `RankHops` is worked out (p² entries of 2 bytes: 32 MiB at the limit).
const MAX_RANK_HOPS: usize = 4096;
/// Work (ranks × (nodes + links), one breadth-first search per rank) above which `RankHops`
/// counts every pair one hop: on `hier:fc1400` (1.96 M links, 2.7·10⁹) the searches took 7 s
/// a price, three prices a request, before its deadline was first asked; torus:64x64 is
/// 8.4·10⁷ and torus:16x16x16 1.3·10⁸, both still searched.
const RANK_HOPS_WORK: usize = 1 << 28;

impl RankHops {
    fn of(topo: &Topology, spec: &CollectiveSpec) -> Option<RankHops> {
        let ranks: Vec<usize> = spec.group.clone().unwrap_or_else(|| topo.live_npus());
        let p = ranks.len();
        if p > MAX_RANK_HOPS || ranks.iter().any(|&v| v >= topo.nodes()) {
            return None;
        }
        if p.saturating_mul(topo.nodes() + topo.links().len()) > RANK_HOPS_WORK {
            return Some(RankHops { p, hops: Vec::new() });
        }
        let mut hops = vec![u16::MAX; p * p];
        let mut dist = vec![u32::MAX; topo.nodes()];
        let mut queue = std::collections::VecDeque::new();
        for (a, &src) in ranks.iter().enumerate() {
            dist.iter_mut().for_each(|d| *d = u32::MAX);
            dist[src] = 0;
            queue.push_back(src);
            while let Some(u) = queue.pop_front() {
                for l in topo.out_links(u) {
                    let v = topo.links()[l].dst;
                    if dist[v] == u32::MAX {
                        dist[v] = dist[u] + 1;
                        queue.push_back(v);
                    }
                }
            }
            for (b, &dst) in ranks.iter().enumerate() {
                hops[a * p + b] = dist[dst].min(u16::MAX as u32) as u16;
            }
        }
        Some(RankHops { p, hops })
    }

    /// Hops from rank `a` to rank `b` (at least one between two ranks; unreachable pairs count
    /// one, as the builder refuses them anyway).
    fn between(&self, a: usize, b: usize) -> u64 {
        if self.hops.is_empty() {
            return 1;
        }
        match self.hops[a * self.p + b] {
            0 if a != b => 1,
            u16::MAX => 1,
            h => h as u64,
        }
    }
}
