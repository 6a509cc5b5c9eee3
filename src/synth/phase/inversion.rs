//! Inversion's bookkeeping (TACOS VII-A): a spread planned on the transposed topology turned
//! into reductions on the topology (`reverse`), the relays a plan left behind dropped
//! (`prune_dead_ends`), and a whole all-gather or reduce-scatter schedule mirrored into the
//! other (`mirrored`).

use crate::schedule::{ChunkList, Op, Route, Transfer, Transfers};
use crate::slots::PairSet;
use crate::synth::phase;
use crate::ten::Ten;
use std::collections::HashMap;

/// Drops deliveries to NPUs that neither need the chunk nor pass it on (relays left behind
/// when the chunk reached its destination another way), repeatedly: a worklist, so a chain of
/// dead relays costs its length, not a pass over every move per link of the chain.
pub(crate) fn prune_dead_ends(
    ten: &Ten,
    num_chunks: usize,
    moves: Vec<phase::Move>,
    post: &[[u32; 2]],
) -> Vec<phase::Move> {
    let wanted = PairSet::new(ten.npus, num_chunks, post);
    let ends = |m: &phase::Move| {
        let e = &ten.edges[m.edge as usize];
        (e.src, e.dst)
    };
    let is_dead_end = |m: &phase::Move| !wanted.contains(ends(m).1 as usize, m.chunk as usize);
    if !moves.iter().any(is_dead_end) {
        return moves;
    }
    // Every (NPU, chunk) a move leaves or enters gets a dense index (the pairs sorted), so
    // the counts and lists below are arrays: there can be tens of millions of moves.
    let pair = |v: u32, c: u32| (v as u64) << 32 | c as u64;
    let mut keys: Vec<u64> = moves
        .iter()
        .flat_map(|m| {
            let (src, dst) = ends(m);
            [pair(src, m.chunk), pair(dst, m.chunk)]
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let index = |v: u32, c: u32| keys.binary_search(&pair(v, c)).expect("every move's pairs are indexed");
    let (from, into): (Vec<u32>, Vec<u32>) = moves
        .iter()
        .map(|m| {
            let (src, dst) = ends(m);
            (index(src, m.chunk) as u32, index(dst, m.chunk) as u32)
        })
        .unzip();
    // Live forwards out of each pair, and the unwanted deliveries into each (in CSR form).
    let mut forwards = vec![0u32; keys.len()];
    let mut start = vec![0usize; keys.len() + 1];
    for (i, m) in moves.iter().enumerate() {
        forwards[from[i] as usize] += 1;
        if is_dead_end(m) {
            start[into[i] as usize + 1] += 1;
        }
    }
    for k in 0..keys.len() {
        start[k + 1] += start[k];
    }
    let mut fill = start.clone();
    let mut unwanted = vec![0u32; start[keys.len()]];
    for (i, m) in moves.iter().enumerate() {
        if is_dead_end(m) {
            let k = into[i] as usize;
            unwanted[fill[k]] = i as u32;
            fill[k] += 1;
        }
    }
    let mut queue: Vec<u32> = (0..keys.len())
        .filter(|&k| forwards[k] == 0)
        .flat_map(|k| unwanted[start[k]..start[k + 1]].iter().copied())
        .collect();
    let mut alive = vec![true; moves.len()];
    while let Some(i) = queue.pop() {
        if !std::mem::replace(&mut alive[i as usize], false) {
            continue;
        }
        let k = from[i as usize] as usize;
        forwards[k] -= 1;
        if forwards[k] == 0 {
            queue.extend(unwanted[start[k]..start[k + 1]].iter().copied().filter(|&j| alive[j as usize]));
        }
    }
    moves.into_iter().zip(alive).filter(|(_, a)| *a).map(|(m, _)| m).collect()
}

/// Reverses a spread planned on the transposed TEN into reductions on the original topology.
/// A move over [t, t+span) becomes a reduce over [T−t−span, T−t) the other way. An NPU that
/// only relayed the chunk (no contribution of its own) receives its first partial as a copy,
/// in a step of its own before any reduce into it.
pub(in crate::synth) fn reverse(
    ten_t: &Ten,
    num_chunks: usize,
    moves: &[phase::Move],
    horizon: u32,
    contributors: &[[u32; 2]],
) -> Transfers {
    let has = PairSet::new(ten_t.npus, num_chunks, contributors);
    // Index-based: the reduce phase of a 4096-NPU all-reduce has 16.7 M moves, so the
    // transfers are made once, in their final order, from a step per move.
    let mut step: Vec<u32> = moves
        .iter()
        .map(|m| {
            let e = &ten_t.edges[m.edge as usize];
            2 * (horizon - m.step - e.span) + 1
        })
        .collect();
    let ends = |i: usize| {
        let e = &ten_t.edges[moves[i].edge as usize];
        (e.dst, e.src, moves[i].chunk)
    };
    let mut first: HashMap<(u32, u32), usize> = HashMap::new();
    for i in 0..moves.len() {
        let (_, to, chunk) = ends(i);
        if !has.contains(to as usize, chunk as usize) {
            let k = first.entry((to, chunk)).or_insert(i);
            if step[*k] > step[i] {
                *k = i;
            }
        }
    }
    let mut copies: Vec<u32> = first.into_values().map(|i| i as u32).collect();
    copies.sort_unstable();
    for &i in &copies {
        step[i as usize] -= 1;
    }
    // Renumber the steps densely, keeping their order (steps are below 2 × horizon + 1).
    let mut rank = vec![u32::MAX; 2 * horizon as usize + 2];
    for &t in &step {
        rank[t as usize] = 0;
    }
    for (next, r) in rank.iter_mut().filter(|r| **r == 0).enumerate() {
        *r = next as u32;
    }
    let mut order: Vec<u32> = (0..moves.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (step[i as usize], i));
    // One reversed route per TEN edge, shared by its transfers.
    let mut reversed: HashMap<u32, Route> = HashMap::new();
    let mut out = Transfers::with_capacity(moves.len());
    for i in order {
        let i = i as usize;
        let m = &moves[i];
        let (from, to, chunk) = ends(i);
        let op = if copies.binary_search(&(i as u32)).is_ok() { Op::Copy } else { Op::Reduce };
        let mut t = Transfer {
            op,
            ..Transfer::copy(rank[step[i] as usize], from as usize, to as usize, ChunkList::One(chunk))
        };
        if let Some(p) = &ten_t.edges[m.edge as usize].path {
            t.path = Some(
                reversed.entry(m.edge).or_insert_with(|| p.iter().rev().copied().collect::<Vec<u32>>().into()).clone(),
            );
        }
        out.push(t);
    }
    out
}

/// Why a schedule has no mirror.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error(
        "only an all-gather and a reduce-scatter, or a broadcast and a reduce from the same root, of the same chunks mirror each other"
    )]
    NotAPair,
    #[error("the collective's group is not every live NPU")]
    PartialGroup,
    #[error("the schedule moves chunks between slots or through scratch")]
    Slots,
    #[error("NPU {npu} receives chunk {chunk} twice, or as its owner: its mirror would send it twice")]
    Delivery { npu: u32, chunk: u32 },
}

/// The collective whose schedules mirror into `kind`'s (`mirrored`): all-gather and
/// reduce-scatter, broadcast and reduce.
pub fn mirror_kind(kind: crate::collective::CollectiveKind) -> Option<crate::collective::CollectiveKind> {
    use crate::collective::CollectiveKind::{AllGather, Broadcast, Reduce, ReduceScatter};
    match kind {
        AllGather => Some(ReduceScatter),
        ReduceScatter => Some(AllGather),
        Broadcast => Some(Reduce),
        Reduce => Some(Broadcast),
        _ => None,
    }
}

/// `s` (an all-gather or a reduce-scatter; a broadcast or a reduce) mirrored into `target`, the
/// other of the two on the same chunks (and root): every transfer the other way (route reversed), a copy made a reduce or back,
/// at step S − 1 − step, the whole replay order reversed. An all-gather's deliveries of a chunk
/// form a tree from its owner, so its mirror reduces up the same tree into the owner; a
/// reduce-scatter's partials flow up such a tree, so its mirror copies down it. The
/// simulator's replay is the longest path through each transfer's data and links, both of
/// which the mirror reverses: it runs on the transposed topology (each link reversed, with its
/// latency and bandwidth; on paired links, `Topology::is_paired`, the same topology), where
/// each of its transfers crosses the link its source crossed, and takes the same time but for
/// the reduce cost (γ) it adds (to a reduce-scatter) or drops (from an all-gather). So a
/// search on the transposed topology mirrors onto this one. Refused where the data flow would
/// not stay valid.
pub fn mirrored(
    s: &crate::schedule::Schedule,
    target: &crate::collective::Collective,
) -> Result<crate::schedule::Schedule, MirrorError> {
    let pair = mirror_kind(s.collective.kind) == Some(target.spec.kind) && s.collective.root == target.spec.root;
    if !pair || s.num_chunks != target.num_chunks || s.chunk_size_bytes != target.chunk_size_bytes {
        return Err(MirrorError::NotAPair);
    }
    if target.group != s.topology.live_npus() {
        return Err(MirrorError::PartialGroup);
    }
    if !s.scratch.is_empty() || s.transfers.iter().any(|t| t.dst_chunks.is_some() || t.is_local()) {
        return Err(MirrorError::Slots);
    }
    if !s.combining {
        // Each NPU receives each chunk once, and an owner (the root) never: the mirror's
        // partials then leave every NPU once, each after the partials that reduce into it.
        let mut has = PairSet::new(s.topology.nodes(), s.num_chunks, &target.postcondition.iter().collect::<Vec<_>>());
        for t in s.transfers.iter() {
            for &c in t.chunks {
                if has.contains(t.dst as usize, c as usize) {
                    return Err(MirrorError::Delivery { npu: t.dst, chunk: c });
                }
                has.insert(t.dst as usize, c as usize);
            }
        }
    }
    let order = s.replay_order();
    let last = s.transfers.steps().iter().copied().max().unwrap_or(0);
    let op = if target.combining { Op::Reduce } else { Op::Copy };
    let mut reversed: HashMap<*const [u32], Route> = HashMap::new();
    let mut out = Transfers::with_capacity(s.transfers.len());
    for k in (0..order.len()).rev() {
        let t = s.transfers.at(order.get(k));
        let mut m = Transfer {
            op,
            ..Transfer::copy(last - t.step, t.dst as usize, t.src as usize, ChunkList::from(t.chunks.to_vec()))
        };
        if let Some(p) = t.path_nodes() {
            m.path = Some(
                reversed
                    .entry(p as *const [u32])
                    .or_insert_with(|| p.iter().rev().copied().collect::<Vec<u32>>().into())
                    .clone(),
            );
        }
        out.push(m);
    }
    let mut mirror =
        crate::schedule::Schedule::new(s.topology.transposed(), target, s.algorithm.as_deref().unwrap_or("greedy"));
    mirror.seed = s.seed;
    mirror.transfers = out;
    Ok(mirror)
}
