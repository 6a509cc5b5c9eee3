//! The batched planner (the synthesizer's latency mode): few, large messages. Where the
//! matcher moves one chunk per TEN edge per timestep, here one round lets every edge carry
//! every chunk its source holds and its destination lacks, as one message that pays α once.
//! Chunks spread along shortest paths (all of them at once), so a phase takes about the
//! eccentricity of the holders in rounds: the diameter for all-gather, the root's
//! eccentricity for broadcast. Reversed on the transposed topology (as every phase of a
//! combining collective is) it is a reduction along shortest-path trees with every chunk's
//! tree running at once: reduce and reduce-scatter in as many rounds.
//!
//! Links shared by several edges (a switch port) carry one message per round; edges are
//! taken in order of how much their destination needs what they bring. A destination
//! reached by several edges in one round takes each chunk from the edge that finishes
//! soonest with it, which spreads the bytes over its incoming links.
//!
//! `all_reduce_by_contributions` floods every contribution separately (into scratch slots)
//! and reduces locally at the end: an all-reduce in as many rounds as an all-gather, for the
//! sizes where rounds cost more than bytes.

use crate::collective::Collective;
use crate::rng::Rng;
use crate::schedule::{Op, Schedule, Transfer, Transfers};
use crate::synth::SynthError;
use crate::synth::phase::{GreedyError, Move, Plan, Problem};
use crate::ten::Ten;

/// Bits of the per-NPU holding tables above which the batched planner refuses (32 MiB per
/// table): the relay-everything flood is for the latency-bound cases, not for all-to-all on
/// thousands of NPUs.
pub const MAX_BITS: usize = 1 << 28;

/// Plans one phase in rounds of batched messages (see the module doc). Every TEN edge must
/// span one timestep (the caller discretizes at the slowest edge), so a round is a timestep.
pub fn plan(p: &Problem, seed: u64, cancelled: &dyn Fn() -> bool) -> Result<Plan, SynthError> {
    let ten = p.ten;
    let (n, items) = (ten.npus, p.num_chunks);
    let words = items.div_ceil(64).max(1);
    let bits = n.saturating_mul(words * 64);
    if bits > MAX_BITS {
        return Err(GreedyError::TooManyRelayTables(bits, MAX_BITS).into());
    }
    let (mut has, want, mut remaining) = holding_tables(p, n, words);
    let mut rng = Rng::new(seed);
    let mut moves = Vec::new();
    let mut round = 0u32;
    let mut busy = vec![false; ten.resources];
    let mut order: Vec<u32> = (0..ten.edges.len() as u32).collect();
    while remaining > 0 {
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        let gains = rank_edges(ten, words, &has, &want, &mut rng, &mut order);
        let into = claim_links(ten, &gains, &mut busy);
        let arrived = assign_chunks(ten, words, &has, &into, round, &mut moves, cancelled)?;
        if arrived.is_empty() {
            return Err(GreedyError::Stuck(remaining).into());
        }
        for (d, x) in arrived {
            set_bit(&mut has, words, d, x);
            remaining -= get_bit(&want, words, d, x) as usize;
        }
        round += 1;
    }
    Ok(Plan { moves, timesteps: round, replacements: 0 })
}

/// Marks chunk `x` at NPU `v` in a holding table of `words` words per NPU.
fn set_bit(t: &mut [u64], words: usize, v: usize, x: usize) {
    t[v * words + x / 64] |= 1 << (x % 64);
}

/// Whether NPU `v` has chunk `x` marked in a holding table of `words` words per NPU.
fn get_bit(t: &[u64], words: usize, v: usize, x: usize) -> bool {
    t[v * words + x / 64] >> (x % 64) & 1 == 1
}

/// The held and wanted tables of `p`'s conditions, and how many wanted chunks are not yet held.
fn holding_tables(p: &Problem, n: usize, words: usize) -> (Vec<u64>, Vec<u64>, usize) {
    let mut has = vec![0u64; n * words];
    let mut want = vec![0u64; n * words];
    for &[v, x] in p.pre {
        set_bit(&mut has, words, v as usize, x as usize);
    }
    let mut remaining = 0usize;
    for &[v, x] in p.post {
        set_bit(&mut want, words, v as usize, x as usize);
        remaining += !get_bit(&has, words, v as usize, x as usize) as usize;
    }
    (has, want, remaining)
}

/// The edges that bring something, best first, as (needed, any, edge): links go to the most useful.
fn rank_edges(
    ten: &Ten,
    words: usize,
    has: &[u64],
    want: &[u64],
    rng: &mut Rng,
    order: &mut [u32],
) -> Vec<(usize, usize, u32)> {
    // Edges by what they bring: needed chunks first, then any (relays), random ties.
    rng.shuffle(order);
    let mut gains: Vec<(usize, usize, u32)> = Vec::new();
    for &e in order.iter() {
        let edge = &ten.edges[e as usize];
        let (s, d) = (edge.src as usize, edge.dst as usize);
        let (mut needed, mut any) = (0usize, 0usize);
        for w in 0..words {
            let new = has[s * words + w] & !has[d * words + w];
            any += new.count_ones() as usize;
            needed += (new & want[d * words + w]).count_ones() as usize;
        }
        if any > 0 {
            gains.push((needed, any, e));
        }
    }
    gains.sort_by_key(|&(needed, any, _)| std::cmp::Reverse((needed, any)));
    gains
}

/// Each destination's edges this round, in `gains` order while links are free: one message per link.
fn claim_links(ten: &Ten, gains: &[(usize, usize, u32)], busy: &mut [bool]) -> Vec<Vec<u32>> {
    let mut into: Vec<Vec<u32>> = vec![Vec::new(); ten.npus];
    let mut taken = Vec::new();
    for &(_, _, e) in gains {
        let edge = &ten.edges[e as usize];
        if edge.resources.iter().all(|&r| !busy[r as usize]) {
            for &r in &edge.resources {
                busy[r as usize] = true;
                taken.push(r);
            }
            into[edge.dst as usize].push(e);
        }
    }
    for r in taken {
        busy[r as usize] = false;
    }
    into
}

/// Records the round's moves, spreading each destination's bytes over its edges; returns
/// arrivals. Polls `cancelled` between destinations: one round of fc:1448's all-gather brings
/// two million chunks.
fn assign_chunks(
    ten: &Ten,
    words: usize,
    has: &[u64],
    into: &[Vec<u32>],
    round: u32,
    moves: &mut Vec<Move>,
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<(usize, usize)>, SynthError> {
    // Each destination takes each new chunk from the edge that would finish soonest with
    // it, counting what that edge already carries this round.
    let mut arrived = Vec::new();
    // The edges (indices in the destination's list, ascending) whose source holds each bit of
    // the word at hand: found once a word rather than once a chunk.
    let mut bringers: Vec<Vec<u32>> = vec![Vec::new(); 64];
    for (d, edges) in into.iter().enumerate() {
        if edges.is_empty() {
            continue;
        }
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        let mut load = vec![0usize; edges.len()];
        for w in 0..words {
            let held = |e: u32| has[ten.edges[e as usize].src as usize * words + w];
            let union = edges.iter().fold(0u64, |u, &e| u | held(e));
            let mut new = union & !has[d * words + w];
            if new == 0 {
                continue;
            }
            bringers.iter_mut().for_each(Vec::clear);
            for (i, &e) in edges.iter().enumerate() {
                let mut bits = held(e) & new;
                while bits != 0 {
                    bringers[bits.trailing_zeros() as usize].push(i as u32);
                    bits &= bits - 1;
                }
            }
            while new != 0 {
                let b = new.trailing_zeros() as usize;
                new &= new - 1;
                let x = w * 64 + b;
                let pick = soonest_edge(ten, edges, &bringers[b], &load);
                load[pick] += 1;
                moves.push(Move { step: round, edge: edges[pick], chunk: x as u32 });
                arrived.push((d, x));
            }
        }
    }
    Ok(arrived)
}

/// Of the edges (indices in `edges`) in `bringing`, the one that finishes soonest given its
/// `load`, first on ties.
fn soonest_edge(ten: &Ten, edges: &[u32], bringing: &[u32], load: &[usize]) -> usize {
    bringing
        .iter()
        .map(|&i| i as usize)
        .min_by(|&i, &j| {
            let cost = |i: usize| (load[i] + 1) as f64 * ten.edges[edges[i] as usize].time_ns;
            cost(i).total_cmp(&cost(j))
        })
        .expect("some edge brings it")
}

/// Merges the single-chunk transfers of one step between the same NPUs over the same route
/// with the same op into one message (α paid once), keeping the order of first appearance.
pub fn batch(transfers: &Transfers) -> Transfers {
    type Key = (u32, u32, u32, Op, Option<crate::schedule::Route>);
    let mut groups: Vec<(Transfer, Vec<u32>, Option<Vec<u32>>)> = Vec::new();
    // An index only (the order is the transfers'): Fx, not SipHash (a second of fc:1448's
    // all-gather).
    let mut slot: rustc_hash::FxHashMap<Key, usize> = rustc_hash::FxHashMap::default();
    for t in transfers {
        let key = (t.step, t.src, t.dst, t.op, t.path.cloned());
        let i = *slot.entry(key).or_insert_with(|| {
            groups.push((t.to_owned(), Vec::new(), t.dst_chunks.map(|_| Vec::new())));
            groups.len() - 1
        });
        let (_, chunks, dst) = &mut groups[i];
        chunks.extend(t.chunks.iter().copied());
        if let (Some(dst), Some(extra)) = (dst.as_mut(), t.dst_chunks) {
            dst.extend(extra.iter().copied());
        }
    }
    groups
        .into_iter()
        .map(|(mut t, chunks, dst)| {
            t.chunks = chunks.into();
            t.dst_chunks = dst.map(|d| Box::new(d.into()));
            t
        })
        .collect()
}

/// The TEN of `topo` at the granularity of the batched planner: the slowest edge's time, so
/// every edge spans one timestep (a round).
pub fn round_ten(
    topo: &crate::topology::Topology,
    chunk_size_bytes: f64,
    model: crate::ten::SwitchModel,
) -> Result<Ten, crate::ten::TenError> {
    let probe = Ten::build(topo, chunk_size_bytes, model, None)?;
    let slowest = probe.edges.iter().map(|e| e.time_ns).fold(0.0, f64::max);
    if slowest > 0.0 && slowest.is_finite() {
        Ten::build(topo, chunk_size_bytes, model, Some(slowest))
    } else {
        Ok(probe)
    }
}

/// Whether `all_reduce_by_contributions` serves `c`: all-reduce, reduce-scatter or reduce,
/// whose postcondition holders also contribute to their chunks (so each reduces what it
/// receives into its own partial), within `MAX_BITS` of contributions × NPUs.
pub fn contributions_apply(c: &Collective, npus: usize) -> bool {
    use crate::collective::CollectiveKind as K;
    if !c.combining || !matches!(c.spec.kind, K::AllReduce | K::ReduceScatter | K::Reduce) {
        return false;
    }
    let items = c.precondition.len();
    npus.saturating_mul(items.div_ceil(64) * 64) <= MAX_BITS
        && npus.saturating_mul(items) <= crate::limits::MAX_CONDITION_PAIRS
}

/// Whether the contribution flood can be worth its cost on `c`: every NPU receives every other
/// contributor's partial of each chunk it ends with, so its bytes alone take
/// `max_v received(v) / ingress(v)`. A heuristic cut: when that is over 4·p·α (four times the
/// latency of p rounds, more than the flood's D + 1 rounds pay), a planner that moves fewer
/// bytes wins, and the flood (p² items on p NPUs) is not built. At 1 GiB on 256 NPUs it held
/// 5 GB.
pub fn contributions_pay(topo: &crate::topology::Topology, c: &Collective) -> bool {
    let alpha = topo.links().iter().map(|l| l.latency_ns).fold(f64::INFINITY, f64::min);
    if !alpha.is_finite() {
        return false;
    }
    let holders = c.holders();
    let mut received = vec![0usize; topo.nodes()];
    for [v, ch] in c.postcondition.iter() {
        received[v as usize] += holders.of(ch as usize).len().saturating_sub(1);
    }
    let bytes_ns = (0..topo.npus())
        .filter(|&v| received[v] > 0)
        .map(|v| received[v] as f64 * c.chunk_size_bytes / topo.ingress_gb_per_s(v))
        .fold(0.0, f64::max);
    let p = c.group.len();
    if bytes_ns > 4.0 * p as f64 * alpha {
        return false;
    }
    p <= FLOOD_CHEAP_NPUS || bytes_ns <= 2.0 * (hop_diameter(topo, &c.group) as f64 + 1.0) * alpha
}

/// Group NPUs up to which `contributions_pay`'s first cut alone decides. Above, the flood (p²
/// items relayed over the diameter) costs seconds (torus:16x16: 7–10 s of a synthesis), so its
/// bytes must also stay within 2 (D + 1) α, D the group's diameter in hops: about the rounds it
/// saves over the planners that move fewer bytes. On torus:16x16 at 32 KiB it took 33.0 µs
/// against the batched planner's 16.2 µs (bytes 21 µs, 2 (D + 1) α = 17 µs); at 32 B it wins.
const FLOOD_CHEAP_NPUS: usize = 64;

/// The most hops between two NPUs of `group` (switches count as hops).
fn hop_diameter(topo: &crate::topology::Topology, group: &[usize]) -> usize {
    group
        .iter()
        .flat_map(|&s| {
            let dist = topo.hop_distances(s);
            group.iter().map(move |&v| dist[v]).filter(|&d| d != usize::MAX)
        })
        .max()
        .unwrap_or(0)
}

/// All-reduce by flooding every contribution: contribution (u, c) is an item of its own,
/// held by u in its slot c and carried to every other NPU needing c, into a scratch slot of
/// its own; relays forward it from there. In a last step every NPU reduces each received
/// contribution into its own partial with a local move (the sets are disjoint: one per
/// contributor). Rounds: the all-gather's; bytes: every NPU receives every other's buffer.
pub fn all_reduce_by_contributions(
    topo: &crate::topology::Topology,
    c: &Collective,
    model: crate::ten::SwitchModel,
    seed: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Schedule, u32, f64), crate::synth::SynthError> {
    let ten = round_ten(topo, c.chunk_size_bytes, model)?;
    let holders = c.holders();
    // Items: the precondition pairs, in order; item i is (u, chunk) = precondition[i] (within
    // the pair limit, `contributions_apply`).
    let given = c.precondition.as_slice();
    let items = given.len();
    let pre: Vec<[u32; 2]> = given.iter().enumerate().map(|(i, &[u, _])| [u, i as u32]).collect();
    // The precondition is sorted by (npu, chunk); index items by chunk instead.
    let mut by_chunk: Vec<Vec<u32>> = vec![Vec::new(); c.num_chunks];
    for (i, &[_, ch]) in given.iter().enumerate() {
        by_chunk[ch as usize].push(i as u32);
    }
    let mut post = Vec::new();
    for [v, ch] in c.postcondition.iter() {
        if holders.of(ch as usize).binary_search(&v).is_err() {
            return Err(crate::error::InputError::new(
                "collective",
                "a postcondition holder has no partial of its own",
            )
            .into());
        }
        for &i in &by_chunk[ch as usize] {
            if given[i as usize][0] != v {
                post.push([v, i]);
            }
        }
    }
    post.sort_unstable();
    let problem = Problem {
        ten: &ten,
        num_chunks: items,
        pre: &pre,
        post: &post,
        live_npus: topo.live_npus().len(),
        rarest_first: false,
        capacity: 1,
    };
    let plan = plan(&problem, seed, cancelled)?;
    let moves = crate::synth::prune_dead_ends(&ten, items, plan.moves, &post);
    let scratch_of = |i: u32| (c.num_chunks as u32) + i;
    // The moves batched as they are made into transfers, one per link (source, destination and
    // path) and step, in the order each first moves (what `batch` makes of one transfer per
    // move, without the p³ transfers in between: 16.7 M on torus:16x16, 2 GB).
    let mut link_of_edge: std::collections::HashMap<(u32, u32, Option<crate::schedule::Route>), u32> =
        std::collections::HashMap::new();
    let canon: Vec<u32> = ten
        .edges
        .iter()
        .enumerate()
        .map(|(i, e)| *link_of_edge.entry((e.src, e.dst, e.path.clone())).or_insert(i as u32))
        .collect();
    let mut group_of: std::collections::HashMap<(u32, u32), usize> = std::collections::HashMap::new();
    let mut groups: Vec<(u32, u32, Vec<u32>, Vec<u32>)> = Vec::new();
    for m in &moves {
        let edge = canon[m.edge as usize];
        let g = *group_of.entry((m.step, edge)).or_insert_with(|| {
            groups.push((m.step, edge, Vec::new(), Vec::new()));
            groups.len() - 1
        });
        let e = &ten.edges[m.edge as usize];
        let [u, ch] = given[m.chunk as usize];
        groups[g].2.push(if e.src == u { ch } else { scratch_of(m.chunk) });
        groups[g].3.push(scratch_of(m.chunk));
    }
    drop(moves);
    let mut transfers: Vec<Transfer> = groups
        .into_iter()
        .map(|(step, edge, reads, slots)| {
            let e = &ten.edges[edge as usize];
            let mut t = Transfer::copy(step, e.src as usize, e.dst as usize, reads).into_slots(slots);
            t.path = e.path.clone();
            t
        })
        .collect();
    let last = plan.timesteps;
    // One local reduce per NPU and contributor: that contributor's partial of every chunk the
    // NPU ends with, each into its own slot (a slot is written once per transfer). `post` is
    // sorted by NPU, then item, and items by contributor. One per contribution was p³ transfers
    // on an all-reduce of one chunk per NPU: 16.7 M on torus:16x16, 4.5 GB.
    for run in post.chunk_by(|a, b| a[0] == b[0] && given[a[1] as usize][0] == given[b[1] as usize][0]) {
        let v = run[0][0] as usize;
        let reads: Vec<u32> = run.iter().map(|&[_, i]| scratch_of(i)).collect();
        let slots: Vec<u32> = run.iter().map(|&[_, i]| given[i as usize][1]).collect();
        transfers.push(Transfer::reduce(last, v, v, reads).into_slots(slots));
    }
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.scratch = given.iter().map(|&[_, ch]| ch).collect();
    s.seed = Some(seed);
    s.transfers = transfers.into();
    Ok((s, plan.timesteps + 1, ten.discretization_ns))
}
