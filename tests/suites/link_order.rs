//! The simulator's order of each link's messages, and the check that an export's thread blocks
//! send in it (issue 66): what the GPU exports' replays log of every send, read against the
//! schedule by contributors, so the check needs no knowledge of how a writer numbers its cells.
//!
//! The order (docs/FORMAT.md, "Simulator"): steps one after another; within a step, every
//! transfer's first hop in the step's order, then every second hop, and so on (hop-major). A
//! hop runs between the ranks a transfer visits (switches are transparent to the GPU runtimes).
//! A thread block's sends to one peer, read in its order, must take that link's hops in the
//! simulator's order: each send's cells found among the chunks of a hop no earlier than the
//! hop the block's previous send came from. A block may carry only some of a link's hops
//! (another channel's block carries others) and a hop may be cut into several sends; all the
//! blocks' sends over a link together carry exactly its hops' cells.
//!
//! Cells are told apart by contributors only: hops over one link whose chunks have the same
//! contributor sets (an all-to-all's chunks of one source, an all-gather's chunks of one rank)
//! are interchangeable to the check, so a swap among them goes unseen.

use ccsynth::schedule::Schedule;
use std::collections::{BTreeMap, HashMap};

/// A contributor set, as the ranks (indices in the collective's group) whose data a cell holds.
pub type Ranks = Vec<usize>;

/// The ranks whose data a cell holds, each once, rising (what the replays log per cell).
pub fn contributors(ranks: impl Iterator<Item = usize>) -> Ranks {
    let mut v: Ranks = ranks.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// One send as a replay executed it: from rank `from`'s block `block` to rank `to`, one entry
/// of contributors per cell. (A runtime whose whole connection keeps one order, however many
/// blocks run it in turn, logs its sends in the order they ran under one `block`.)
#[derive(Clone, Debug)]
pub struct Sent {
    pub from: usize,
    pub to: usize,
    pub block: usize,
    pub cells: Vec<Ranks>,
}

/// Per directed rank pair, its hops in the simulator's order, each as the contributor sets of
/// the chunks it carries (one per distinct chunk).
pub type Hops = HashMap<(usize, usize), Vec<Vec<Ranks>>>;

/// Replays `s` chunk by chunk from its precondition (each holder's chunk holds its own rank)
/// and lists every link's hops in the simulator's order.
pub fn hops_by_link(s: &Schedule) -> Hops {
    let ranks: Vec<usize> = match &s.collective.group {
        Some(g) => g.clone(),
        None => s.topology.live_npus(),
    };
    let rank_of: HashMap<usize, usize> = ranks.iter().enumerate().map(|(r, &v)| (v, r)).collect();
    let mut held: HashMap<(usize, u32), Ranks> = HashMap::new();
    for [v, c] in s.precondition.iter() {
        if let Some(&r) = rank_of.get(&(v as usize)) {
            held.insert((v as usize, c), vec![r]);
        }
    }
    // (step, hop, replay position), link, carried
    type Keyed = ((u32, usize, usize), (usize, usize), Vec<Ranks>);
    let mut keyed: Vec<Keyed> = Vec::new();
    let order = s.replay_order();
    for steps in order.steps(&s.transfers) {
        let mut writes: Vec<((usize, u32), Ranks, bool)> = Vec::new();
        for k in steps {
            let t = s.transfers.at(order.get(k));
            let mut chunks: Vec<u32> = t.chunks.to_vec();
            let carried_all: Vec<Ranks> =
                chunks.iter().map(|&c| held.get(&(t.src as usize, c)).cloned().unwrap_or_default()).collect();
            let reduce = t.op == ccsynth::schedule::Op::Reduce;
            for (i, &slot) in t.written().iter().enumerate() {
                writes.push(((t.dst as usize, slot), carried_all[i].clone(), reduce));
            }
            if t.is_local() {
                continue;
            }
            chunks.sort_unstable();
            chunks.dedup();
            let carried: Vec<Ranks> =
                chunks.iter().map(|&c| held.get(&(t.src as usize, c)).cloned().unwrap_or_default()).collect();
            let visits: Vec<usize> = match t.path {
                Some(p) => p.iter().map(|&v| v as usize).filter(|&v| s.topology.is_npu(v)).collect(),
                None => vec![t.src as usize, t.dst as usize],
            };
            let visits: Vec<usize> = visits
                .iter()
                .map(|v| *rank_of.get(v).unwrap_or_else(|| panic!("NPU {v} on a path is not in the group")))
                .collect();
            for (h, w) in visits.windows(2).enumerate() {
                keyed.push(((t.step, h, k), (w[0], w[1]), carried.clone()));
            }
        }
        for (at, set, reduce) in writes {
            let e = held.entry(at).or_default();
            if reduce {
                e.extend(set);
                e.sort_unstable();
                e.dedup();
            } else {
                *e = set;
            }
        }
    }
    keyed.sort_by_key(|(key, ..)| *key);
    let mut hops = Hops::new();
    for (_, link, carried) in keyed {
        hops.entry(link).or_default().push(carried);
    }
    hops
}

/// Whether every block's sends take their link's hops in the simulator's order (see the module
/// doc); Err names the block, the send and what it carried.
pub fn sends_in_order(hops: &Hops, sent: &[Sent]) -> Result<(), String> {
    // Per (block, link): the hop the block's last send came from, and what is left of the
    // hops it has used (cells of one hop may be sent by other blocks too, so each block
    // consumes its own copy).
    type Left = BTreeMap<usize, BTreeMap<Ranks, usize>>;
    let mut at: HashMap<(usize, usize, usize), (usize, Left)> = HashMap::new();
    for (i, x) in sent.iter().enumerate() {
        let link_hops = hops.get(&(x.from, x.to)).ok_or_else(|| {
            format!("send {i} of rank {} block {} goes to rank {}: no hop of the schedule does", x.from, x.block, x.to)
        })?;
        let (pos, left) = at.entry((x.from, x.block, x.to)).or_default();
        let mut last = *pos;
        for cell in &x.cells {
            let found = (*pos..link_hops.len()).find(|&h| {
                let rest = left.entry(h).or_insert_with(|| multiset(&link_hops[h]));
                rest.get(cell).is_some_and(|&n| n > 0)
            });
            let Some(h) = found else {
                return Err(format!(
                    "rank {} block {}: send {i} to rank {} carries a cell of contributors {cell:?} that no hop from \
                     hop {} on of the link {}→{} (of {}) has left: out of the simulator's order",
                    x.from,
                    x.block,
                    x.to,
                    *pos,
                    x.from,
                    x.to,
                    link_hops.len()
                ));
            };
            *left.get_mut(&h).and_then(|m| m.get_mut(cell)).expect("found") -= 1;
            last = last.max(h);
        }
        *pos = last;
    }
    // Nothing left out: each link's sends, all blocks together, carry its hops' cells.
    let mut logged: HashMap<(usize, usize), BTreeMap<Ranks, usize>> = HashMap::new();
    for x in sent {
        let m = logged.entry((x.from, x.to)).or_default();
        for c in &x.cells {
            *m.entry(c.clone()).or_insert(0) += 1;
        }
    }
    for (&(a, b), link_hops) in hops {
        let want = multiset(&link_hops.concat());
        let got = logged.remove(&(a, b)).unwrap_or_default();
        if got != want {
            let (n_got, n_want) = (got.values().sum::<usize>(), want.values().sum::<usize>());
            return Err(format!("the link {a}→{b}: the sends carry {n_got} cells, its hops {n_want} (or others)"));
        }
    }
    Ok(())
}

fn multiset(cells: &[Ranks]) -> BTreeMap<Ranks, usize> {
    let mut m = BTreeMap::new();
    for c in cells {
        *m.entry(c.clone()).or_insert(0) += 1;
    }
    m
}

fn sent(from: usize, to: usize, block: usize, cells: &[&[usize]]) -> Sent {
    Sent { from, to, block, cells: cells.iter().map(|c| c.to_vec()).collect() }
}

/// The check on a link of three hops: in order (whole, cut into pieces, shared between two
/// blocks) it passes; a block that sends a later hop before an earlier one, a cell no hop has
/// left, a cell never sent, or a link the schedule does not use, it names.
#[test]
fn a_block_that_sends_out_of_the_simulators_order_is_named() {
    let hops: Hops = [((0, 1), vec![vec![vec![0]], vec![vec![0, 2], vec![0, 2]], vec![vec![0, 1, 2]]])].into();
    let ok = |log: &[Sent]| sends_in_order(&hops, log);
    ok(&[sent(0, 1, 0, &[&[0]]), sent(0, 1, 0, &[&[0, 2], &[0, 2]]), sent(0, 1, 0, &[&[0, 1, 2]])]).unwrap();
    ok(&[sent(0, 1, 0, &[&[0]]), sent(0, 1, 0, &[&[0, 2]]), sent(0, 1, 0, &[&[0, 2]]), sent(0, 1, 0, &[&[0, 1, 2]])])
        .unwrap();
    ok(&[sent(0, 1, 0, &[&[0]]), sent(0, 1, 1, &[&[0, 2], &[0, 2]]), sent(0, 1, 0, &[&[0, 1, 2]])]).unwrap();
    let short = ok(&[sent(0, 1, 0, &[&[0]]), sent(0, 1, 0, &[&[0, 2]]), sent(0, 1, 0, &[&[0, 1, 2]])]).unwrap_err();
    assert!(short.contains("carry 3 cells, its hops 4"), "{short}");
    let late = ok(&[sent(0, 1, 0, &[&[0, 1, 2]]), sent(0, 1, 0, &[&[0]])]).unwrap_err();
    assert!(late.contains("rank 0 block 0: send 1") && late.contains("out of the simulator's order"), "{late}");
    let twice = ok(&[sent(0, 1, 0, &[&[0, 2], &[0, 2], &[0, 2]])]).unwrap_err();
    assert!(twice.contains("[0, 2]"), "{twice}");
    let nowhere = ok(&[sent(1, 0, 0, &[&[1]])]).unwrap_err();
    assert!(nowhere.contains("no hop of the schedule"), "{nowhere}");
}

/// On a real export: the relayed ring 0→2→1→3 on ring:4, whose GPU 1 sends its own chunk to GPU
/// 2 before the relayed one in every step, passes; the same log with one step's two sends
/// swapped does not.
#[test]
fn the_relayed_rings_msccl_sends_are_in_order_and_a_swap_is_caught() {
    use crate::common::*;
    use crate::msccl_replay::{self, Executor};
    use ccsynth::collective::CollectiveKind as K;
    use ccsynth::engine::{self, MscclOptions};
    let t = topo("ring:4");
    let s = sched(&t, &coll(&t, K::AllGather, 64 << 10), ring_0213_relayed());
    let xml = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    let mut log = msccl_replay::replay_ends(&xml, None, Executor::Current).unwrap();
    let hops = hops_by_link(&s);
    assert_eq!(hops[&(1, 2)].len(), 6, "three steps of two hops over 1→2");
    sends_in_order(&hops, &log).unwrap();
    let from_1: Vec<usize> = (0..log.len()).filter(|&i| log[i].from == 1 && log[i].to == 2).collect();
    assert_eq!(from_1.len(), 6);
    log.swap(from_1[2], from_1[3]);
    let e = sends_in_order(&hops, &log).unwrap_err();
    assert!(e.contains("out of the simulator's order"), "{e}");
}
