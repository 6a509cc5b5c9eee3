//! Recursive doubling found on the graph (the greedy's third latency-mode planner; its
//! interleaved shapes also beyond that mode on fabrics with switches): for a
//! group of 2^m NPUs, a search for the hypercube labelling of the NPUs whose partners
//! (labels differing in one bit) are closest, then all-reduce (exchange and reduce the whole
//! partial, m rounds, every contribution set doubling) or all-gather (exchange everything held,
//! m rounds) along shortest paths. The chunks are split into as many groups as an NPU has
//! links (at most m); group g takes the bits in the order g, g+1, …, so in one round the groups
//! talk to different partners over different links, as multi-port Swing does on a torus. Or,
//! interleaved, a group per class of link the partners are reached over, the classes
//! alternating from each group's heaviest round (`Shape::interleaved`: rail fabrics).
//!
//! Where a baseline assumes its topology (rank order on a ring or torus), this finds the
//! labelling on any graph: on a 4-ring the Gray order puts both partners one hop away.

use crate::collective::{Collective, CollectiveKind};
use crate::rng::Rng;
use crate::schedule::{Op, Schedule, Transfer};
use crate::ten::Ten;

/// Group sizes up to which every shape runs (the labelling search's cost grows as p² log p per
/// pass).
pub const MAX_GROUP: usize = 256;
/// Group sizes up to which the interleaved shapes run (`Shape::interleaved`; the greedy offers
/// them beyond its latency mode on fabrics with switches): rail:128x8's all-gather at 128 MiB
/// 1.191× the bound (the matcher's) → 1.036×, in about a second of its 36 s synthesis.
pub const INTERLEAVED_MAX_GROUP: usize = 1024;

/// Whether it serves `c`: all-reduce or all-gather (one block of chunks per rank) on a group
/// of a power of two of NPUs, 2 to `MAX_GROUP`.
pub fn applies(c: &Collective) -> bool {
    serves(c, MAX_GROUP)
}

/// Whether the interleaved shapes serve `c` on `topo` beyond the latency mode (where they do
/// not need it): a fabric with switches, a group up to `INTERLEAVED_MAX_GROUP`.
pub fn interleaves(topo: &crate::topology::Topology, c: &Collective) -> bool {
    topo.switches() > 0 && serves(c, INTERLEAVED_MAX_GROUP)
}

fn serves(c: &Collective, max_group: usize) -> bool {
    let p = c.group.len();
    matches!(c.spec.kind, CollectiveKind::AllReduce | CollectiveKind::AllGather)
        && p >= 2
        && p.is_power_of_two()
        && p <= max_group
        && c.num_chunks.is_multiple_of(p)
}

/// Which exchange pattern runs on the labelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    /// All-reduce by recursive halving (reduce-scatter) then doubling (all-gather): 2m rounds,
    /// the bandwidth-optimal volume (Rabenseifner, Swing's bandwidth variant). Otherwise every
    /// round exchanges the whole partial (all-reduce) or everything held (all-gather): m
    /// rounds.
    pub halving: bool,
    /// The chunks split into as many groups as an NPU has links (at most m), each taking the
    /// bits in its own rotation; otherwise one group.
    pub multiport: bool,
    /// With `multiport`: a group per class of link the partners are reached over (`classes`;
    /// at most the links), each group's bits ordered so that the classes alternate from its
    /// heaviest round on, each group a class further along (two classes: in opposite phase;
    /// `interleaved_orders`), in place of the rotations. A run fails where the partners are
    /// all reached over one class.
    ///
    /// Why: the rounds double (all-gather) or halve (halving), so the last (first) few carry
    /// nearly everything, and a rotation of the bits puts them on one class of link in every
    /// group. On rail:8x32 (five bits through the node's switch, three through the rail's) the
    /// rotations leave the rail links idle while the node's run and then the other way round,
    /// 1.10× the bound at 128 MiB; alternated, each class carries half of every heavy round,
    /// the two groups taking turns.
    pub interleaved: bool,
}

impl Shape {
    /// The shapes worth trying for `c`.
    pub fn for_collective(c: &Collective) -> Vec<Shape> {
        let halving: &[bool] = if c.spec.kind == CollectiveKind::AllReduce { &[false, true] } else { &[false] };
        halving
            .iter()
            .flat_map(|&h| {
                [(false, false), (true, false), (true, true)].map(|(multiport, interleaved)| Shape {
                    halving: h,
                    multiport,
                    interleaved,
                })
            })
            .collect()
    }
}

/// The multi-port shapes' chunk groups: the most TEN edges leaving a rank, at most m.
fn port_groups(ten: &Ten, c: &Collective) -> usize {
    let m = c.group.len().trailing_zeros() as usize;
    c.group.iter().map(|&v| ten.out_edges(v).len()).max().unwrap_or(1).clamp(1, m.max(1))
}

/// The chunks per NPU at which the multi-port shapes split every block evenly over their
/// groups (each rank's block then has a chunk in every group), where the greedy runs them:
/// the ports where every shape runs (`applies`); beyond, on a fabric with switches where only
/// the interleaved shapes run, an NPU's links (a class is reached over one of them: on a rail
/// fabric two), not the ports through the switches (a TEN edge to each NPU behind one).
/// `None` where no doubling runs.
pub fn even_chunks(topo: &crate::topology::Topology, c: &Collective, model: crate::ten::SwitchModel) -> Option<u32> {
    let m = c.group.len().trailing_zeros() as usize;
    if applies(c) {
        let ten = Ten::build(topo, c.chunk_size_bytes, model, None).ok()?;
        Some(port_groups(&ten, c) as u32)
    } else if interleaves(topo, c) {
        let links = c.group.iter().map(|&v| topo.out_links(v).len()).max().unwrap_or(1);
        Some(links.clamp(1, m.max(1)) as u32)
    } else {
        None
    }
}

/// Ranks' distances (TEN timesteps at `c`'s chunk size: latency-weighted hops) and each
/// rank's shortest-path tree (the TEN edge reaching every NPU).
fn distances(ten: &Ten, c: &Collective) -> Result<(Vec<u32>, Vec<Vec<u32>>), crate::synth::SynthError> {
    let p = c.group.len();
    let mut dist = vec![0u32; p * p];
    let mut via: Vec<Vec<u32>> = Vec::with_capacity(p);
    for (r, &u) in c.group.iter().enumerate() {
        let (d, tree) = ten.shortest_tree(&[u as u32]);
        for (s, &v) in c.group.iter().enumerate() {
            if d[v] == u32::MAX {
                return Err(crate::error::InputError::new("collective", "the group is not strongly connected").into());
            }
            dist[r * p + s] = d[v];
        }
        via.push(tree);
    }
    Ok((dist, via))
}

/// The hypercube labelling of `c`'s group: `at[label]` is the rank at that label. It depends
/// on the group and the links only, so one search serves every shape and chunking.
pub fn labelling(
    topo: &crate::topology::Topology,
    c: &Collective,
    model: crate::ten::SwitchModel,
    seed: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<usize>, crate::synth::SynthError> {
    let ten = Ten::build(topo, c.chunk_size_bytes, model, None)?;
    let (dist, _) = distances(&ten, c)?;
    let p = c.group.len();
    let m = p.trailing_zeros() as usize;
    let found = search(&dist, p, m, grid_labels(topo, c).unwrap_or_else(|| (0..p).collect()), seed, cancelled)?;
    // Rank order where it is as short in all and shorter round by round: on a mesh line of 4
    // the Gray order's second partners are 3 hops apart, rank order's 2 (the same sum); a relay
    // stores and forwards, so two exchanges sharing a link in one round pipeline.
    let ranks: Vec<usize> = (0..p).collect();
    let measure = |at: &[usize]| (summed(&dist, p, m, at), rounds_apart(&dist, p, m, at));
    let (ranked, searched) = (measure(&ranks), measure(&found));
    Ok(if ranked.0 <= searched.0 && ranked.1 < searched.1 { ranks } else { found })
}

/// The summed distance of every exchange of a labelling, both ways (what the search minimizes).
fn summed(dist: &[u32], p: usize, m: usize, at: &[usize]) -> u64 {
    (0..m).flat_map(|b| (0..p).map(move |x| dist[at[x] * p + at[x ^ (1 << b)]] as u64)).sum()
}

/// The farthest exchange of each round, summed over the rounds: a latency-bound run's time.
fn rounds_apart(dist: &[u32], p: usize, m: usize, at: &[usize]) -> u64 {
    (0..m).map(|b| (0..p).map(|x| dist[at[x] * p + at[x ^ (1 << b)]] as u64).max().unwrap_or(0)).sum()
}

/// Synthesizes `c` with `shape` on the labelling `at` (from `labelling`); returns the
/// schedule, its rounds and the TEN timestep its distances were measured in.
pub fn synthesize(
    topo: &crate::topology::Topology,
    c: &Collective,
    model: crate::ten::SwitchModel,
    shape: Shape,
    at: &[usize],
    seed: u64,
) -> Result<(Schedule, u32, f64), crate::synth::SynthError> {
    let ten = Ten::build(topo, c.chunk_size_bytes, model, None)?;
    let p = c.group.len();
    let m = p.trailing_zeros() as usize;
    let (_, via) = distances(&ten, c)?;
    let all_reduce = c.spec.kind == CollectiveKind::AllReduce;
    let halving = shape.halving && all_reduce;
    let mut label_of = vec![0usize; p];
    for (x, &r) in at.iter().enumerate() {
        label_of[r] = x;
    }
    let mut ex = Exchange { ten: &ten, c, at, via, label_of, p, m, block: c.num_chunks / p, groups: 1 };
    let orders: Vec<Vec<usize>> = match (shape.multiport, shape.interleaved) {
        (false, _) => vec![(0..m).map(|i| 1usize << i).collect()],
        (true, false) => {
            let groups = port_groups(&ten, c);
            (0..groups).map(|g| (0..m).map(|i| 1usize << ((i + g) % m)).collect()).collect()
        }
        (true, true) => {
            let classes = ex.classes();
            if classes.len() < 2 {
                return Err(crate::synth::GreedyError::Unsupported(
                    "interleaved doubling: every partner is reached over one class of link",
                )
                .into());
            }
            interleaved_orders(&classes, port_groups(&ten, c).min(classes.len()), halving)
        }
    };
    ex.groups = orders.len();
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.seed = Some(seed);
    for (g, bits) in orders.iter().enumerate() {
        let chunks: Vec<usize> = (0..c.num_chunks).filter(|&ch| ex.group_of(ch) == g).collect();
        let bits = bits.as_slice();
        if halving {
            ex.halve_then_double(&mut s, &chunks, bits);
        } else {
            ex.exchange_whole(&mut s, &chunks, bits, all_reduce);
        }
    }
    let rounds = if halving { 2 * m } else { m };
    Ok((s, rounds as u32, ten.discretization_ns))
}

/// What every exchange of one synthesis reads, so the round loops stay small and share it.
struct Exchange<'a> {
    ten: &'a Ten,
    c: &'a Collective,
    at: &'a [usize],
    via: Vec<Vec<u32>>,
    label_of: Vec<usize>,
    p: usize,
    m: usize,
    block: usize,
    groups: usize,
}

impl Exchange<'_> {
    /// The chunk group (a port's rotation, or a class's order) of chunk `ch`, so every group
    /// spreads over the owners.
    fn group_of(&self, ch: usize) -> usize {
        // A chunk's group: its index within its block when blocks have enough chunks (every owner
        // then has data in every group), else its id.
        if self.block >= self.groups { (ch % self.block) % self.groups } else { ch % self.groups }
    }

    /// The bits by the link their partners are reached over: two bits are of one class where
    /// every rank reaches both partners through the same first node (a neighbour, or the
    /// switch both routes enter), each class in bit order, the classes by their lowest bit.
    fn classes(&self) -> Vec<Vec<usize>> {
        let first = |x: usize, bit: usize| -> u32 {
            let (r, to) = (self.at[x], self.at[x ^ bit]);
            match self.route(r, to) {
                Some(path) => path[1],
                None => self.c.group[to] as u32,
            }
        };
        let firsts: Vec<Vec<u32>> = (0..self.m).map(|b| (0..self.p).map(|x| first(x, 1 << b)).collect()).collect();
        let mut classes: Vec<Vec<usize>> = Vec::new();
        for b in 0..self.m {
            match classes.iter_mut().find(|k| firsts[k[0].trailing_zeros() as usize] == firsts[b]) {
                Some(k) => k.push(1 << b),
                None => classes.push(vec![1 << b]),
            }
        }
        classes
    }

    /// The label chunk `ch` ends at, which decides where halving and doubling send it.
    fn target(&self, ch: usize) -> usize {
        // The final owner's label of a chunk (halving sends each chunk toward it).
        self.label_of[ch / self.block]
    }

    /// The node path from rank `r` to rank `s` on `r`'s shortest-path tree (`None`: one plain edge).
    fn route(&self, r: usize, s: usize) -> Option<crate::schedule::Route> {
        let (c, ten, via) = (self.c, self.ten, &self.via);
        let (u, v) = (c.group[r], c.group[s]);
        let mut edges = Vec::new();
        let mut x = v;
        while x != u {
            let e = &ten.edges[via[r][x] as usize];
            edges.push(via[r][x]);
            x = e.src as usize;
        }
        if edges.len() == 1 && ten.edges[edges[0] as usize].path.is_none() {
            return None;
        }
        let mut nodes = vec![u as u32];
        for &e in edges.iter().rev() {
            let e = &ten.edges[e as usize];
            let hop: &[u32] = match &e.path {
                Some(path) => &path[1..],
                None => std::slice::from_ref(&e.dst),
            };
            for &x in hop {
                // Edges of an unwound switch each pass through it ([a, s, b] then [b, s, c]):
                // a node met again closes a loop, which the route skips ([a, s, c]).
                match nodes.iter().position(|&y| y == x) {
                    Some(k) => nodes.truncate(k + 1),
                    None => nodes.push(x),
                }
            }
        }
        Some(nodes.into())
    }

    /// Adds the transfer from label `x` to its partner across `bit`, unless it carries nothing.
    fn send(&self, s: &mut Schedule, step: usize, x: usize, bit: usize, chunks: Vec<u32>, op: Op) {
        if chunks.is_empty() {
            return;
        }
        let (r, to) = (self.at[x], self.at[x ^ bit]);
        let mut t = Transfer::copy(step as u32, self.c.group[r], self.c.group[to], chunks);
        t.op = op;
        t.path = self.route(r, to);
        s.transfers.push(t);
    }

    /// One group's 2m rounds of the halving shape, so each round moves only the chunks it must.
    fn halve_then_double(&self, s: &mut Schedule, chunks: &[usize], bits: &[usize]) {
        let (p, m) = (self.p, self.m);
        // Reduce-scatter by recursive halving, then all-gather by recursive doubling back.
        for (i, &bit) in bits.iter().enumerate() {
            let prefix: usize = bits[..i].iter().sum();
            for x in 0..p {
                let y = x ^ bit;
                let sent = chunks
                    .iter()
                    .filter(|&&ch| self.target(ch) & prefix == x & prefix && self.target(ch) & bit == y & bit);
                self.send(s, i, x, bit, sent.map(|&ch| ch as u32).collect(), Op::Reduce);
            }
        }
        let mut expanded = 0usize;
        for (j, &bit) in bits.iter().enumerate().rev() {
            for x in 0..p {
                let held = chunks.iter().filter(|&&ch| self.target(ch) & !expanded == x & !expanded);
                self.send(s, m + (m - 1 - j), x, bit, held.map(|&ch| ch as u32).collect(), Op::Copy);
            }
            expanded |= bit;
        }
    }

    /// One group's m rounds exchanging the whole partial or all held, so latency is paid m times.
    fn exchange_whole(&self, s: &mut Schedule, chunks: &[usize], bits: &[usize], all_reduce: bool) {
        for (i, &bit) in bits.iter().enumerate() {
            let done: usize = bits[..i].iter().sum();
            for x in 0..self.p {
                let sent: Vec<u32> = if all_reduce {
                    chunks.iter().map(|&ch| ch as u32).collect()
                } else {
                    // Everything of this group that x's subcube (the bits done) holds.
                    chunks.iter().filter(|&&ch| self.target(ch) & !done == x & !done).map(|&ch| ch as u32).collect()
                };
                self.send(s, i, x, bit, sent, if all_reduce { Op::Reduce } else { Op::Copy });
            }
        }
    }
}

/// `groups` bit orders over `classes` (`Shape::interleaved`): from the heaviest round on (the
/// last for doubling, the first for halving), group g's jth round takes a bit of class
/// (g + j) mod k while that class has bits left, else of the class with the most left. On
/// rail:8x32 (node bits N, rail bits R) the doubling orders are NNRNRNRN and NNNRNRNR.
fn interleaved_orders(classes: &[Vec<usize>], groups: usize, halving: bool) -> Vec<Vec<usize>> {
    let m: usize = classes.iter().map(Vec::len).sum();
    let k = classes.len();
    (0..groups)
        .map(|g| {
            let mut left: Vec<std::collections::VecDeque<usize>> =
                classes.iter().map(|c| c.iter().copied().collect()).collect();
            let mut order = vec![0usize; m];
            for j in 0..m {
                let at = if halving { j } else { m - 1 - j };
                let want = (g + j) % k;
                let class = if left[want].is_empty() {
                    (0..k).max_by_key(|&c| (left[c].len(), std::cmp::Reverse(c))).expect("a bit is left")
                } else {
                    want
                };
                order[at] = left[class].pop_front().expect("the class has a bit left");
            }
            order
        })
        .collect()
}

/// A starting labelling for a mesh or torus whose every side is a power of two (the group
/// being every NPU in id order): per dimension, the Gray code of the position, so that the
/// low bits' partners are neighbours along each ring (the labelling multi-port Swing and
/// recursive doubling use on tori). `None` elsewhere: the search starts from rank order.
fn grid_labels(topo: &crate::topology::Topology, c: &Collective) -> Option<Vec<usize>> {
    let g = topo.infer_grid()?;
    if !c.group.iter().enumerate().all(|(i, &v)| i == v) || g.dims.iter().any(|d| !d.is_power_of_two()) {
        return None;
    }
    let p = c.group.len();
    let gray_inverse = |mut x: usize| {
        let mut pos = 0;
        while x != 0 {
            pos ^= x;
            x >>= 1;
        }
        pos
    };
    let mut at = vec![0usize; p];
    for (label, slot) in at.iter_mut().enumerate() {
        // Split the label into per-dimension fields (dimension 0 in the low bits).
        let (mut rest, mut coords) = (label, Vec::with_capacity(g.dims.len()));
        for &d in &g.dims {
            coords.push(gray_inverse(rest % d));
            rest /= d;
        }
        *slot = g.node(&coords);
    }
    Some(at)
}

/// The labelling: `at[label]` is the rank at that hypercube label. Simulated annealing over
/// label swaps from the identity, minimizing the summed distance of every exchange (both
/// ways); seeded, so reproducible. A swap changes only the 2m pairs of its two labels, so each
/// step costs O(m).
fn search(
    dist: &[u32],
    p: usize,
    m: usize,
    start: Vec<usize>,
    seed: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<usize>, crate::synth::SynthError> {
    let pair = |at: &[usize], x: usize, y: usize| (dist[at[x] * p + at[y]] + dist[at[y] * p + at[x]]) as i64;
    let touched = |a: usize, b: usize| -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = Vec::with_capacity(4 * m);
        for x in [a, b] {
            for bit in 0..m {
                let y = x ^ (1 << bit);
                v.push((x.min(y), x.max(y)));
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut at = start;
    let mut cost = summed(dist, p, m, &at) as i64;
    let (mut best, mut best_cost) = (at.clone(), cost);
    let mut rng = Rng::new(seed);
    let iterations = (500 * p * m).min(500_000);
    let (t0, t1) = (4.0f64, 0.05f64);
    for i in 0..iterations {
        if i % 4096 == 0 && cancelled() {
            return Err(crate::synth::SynthError::Cancelled);
        }
        let (a, b) = (rng.below(p), rng.below(p));
        if a == b {
            continue;
        }
        let pairs = touched(a, b);
        let before: i64 = pairs.iter().map(|&(x, y)| pair(&at, x, y)).sum();
        at.swap(a, b);
        let after: i64 = pairs.iter().map(|&(x, y)| pair(&at, x, y)).sum();
        let delta = after - before;
        let t = t0 * (t1 / t0).powf(i as f64 / iterations as f64);
        let accept = delta <= 0 || (rng.next_u64() as f64 / u64::MAX as f64) < (-(delta as f64) / t).exp();
        if accept {
            cost += delta;
            if cost < best_cost {
                best_cost = cost;
                best.clone_from(&at);
            }
        } else {
            at.swap(a, b);
        }
    }
    Ok(best)
}
