//! A schedule's critical paths pipelined: its chunks cut into pieces, and where a path waits on
//! a message's data (a relay forwarding what it has just received), that message and the one it
//! waits for sent piece by piece, so the forward starts with the first piece; every other
//! message stays whole, at one α. Kept where the simulator finds it faster.
//!
//! Why: a producer's chunking trades α per message against the fill of its paths, and the best
//! single chunking still pays both. On dragonfly:4:5@bw=400,200 each NPU sends its groupmates'
//! chunks over one global link (200 GB/s) and hands what arrives on to three groupmates (400
//! GB/s); at 4 chunks an NPU the all-gather is 16 global messages (16 α) plus one local hand-on
//! of a whole chunk after the last: 285.3 µs, 1.063× the bound, the best any chunking gives.
//! With the last messages' hand-ons in four pieces: 280.5 µs, 1.045×.

use crate::collective::{Collective, CollectiveKind};
use crate::schedule::{ChunkList, Schedule, Transfer, Transfers};
use crate::sim::{SimError, TransferTime, links_of, simulate_with_times_on_slots_until};

/// Pieces a chunk is cut into, each tried.
pub const PIECES: [u32; 2] = [2, 4];
/// Rounds of splitting at each piece count: each splits what the paths that end within
/// `NEAR_END` of the schedule's end wait on (a round's split moves the end to other paths; the
/// dragonfly's all-reduce gains in its fourth).
const ROUNDS: usize = 8;
/// The share of the schedule's time within which a path's end counts as the end.
const NEAR_END: f64 = 0.01;
/// The schedule's transfers times the pieces (the most the pieced schedule can have) up to
/// which the pass runs: it simulates the pieced schedule up to `ROUNDS + 1` times a piece
/// count.
pub const MAX_TRANSFERS: usize = 300_000;
/// (node, slot) cells of the pieced schedule up to which the pass runs: its analysis holds a
/// writer and a time for each.
const MAX_CELLS: usize = 4 << 20;
/// No transfer: in `Wait` and the cell table.
const NONE: u32 = u32::MAX;

/// A pipelined schedule and what the pass did.
#[derive(Clone, Debug)]
pub struct Pipelined {
    pub schedule: Schedule,
    /// The pieces each chunk was cut into.
    pub pieces: u32,
    /// Transfers sent piece by piece (each of the schedule's before the pass).
    pub split: usize,
    /// Its simulated time.
    pub time_ns: f64,
}

/// One transfer of the pieced schedule: the original's index and, when split, its piece.
#[derive(Clone, Copy)]
struct Item {
    orig: u32,
    piece: Option<u32>,
}

/// What a transfer's start waited for in the replay: the write of its data, or the transfer
/// before it on a link of its path.
#[derive(Clone, Copy)]
enum Wait {
    Data(u32),
    Link(u32),
    Nothing,
}

/// `s` pipelined (the module's doc), when that simulates faster than `before_ns`; `None` where
/// it does not, or where the pass does not apply: a custom collective, scratch slots or moves
/// between them, transfers relayed through NPUs (stored and forwarded hop by hop, which its
/// analysis does not follow), or a pieced schedule past the size limits. (The engine leaves
/// multi-tenant runs out.)
pub fn pipeline(s: &Schedule, before_ns: f64, stop: &dyn Fn() -> bool) -> Result<Option<Pipelined>, SimError> {
    if !applies(s) {
        return Ok(None);
    }
    let mut best: Option<Pipelined> = None;
    for m in PIECES {
        // More pieces only where fewer helped: where two gain nothing, four have not either
        // (torus:8x8x8 less a link, all-gather; hier:ring2,fc4,switch4's all-reduce gains with
        // two and loses with four, the dragonfly's gains more with four).
        if m != PIECES[0] && best.is_none() {
            break;
        }
        let Some(target) = pieced_collective(s, m) else { continue };
        if s.transfers.len().saturating_mul(m as usize) > MAX_TRANSFERS
            || s.topology.nodes().saturating_mul(target.num_chunks) > MAX_CELLS
        {
            continue;
        }
        let mut items: Vec<Item> = (0..s.transfers.len() as u32).map(|orig| Item { orig, piece: None }).collect();
        let mut last = f64::INFINITY;
        for round in 0..=ROUNDS {
            let r = build(s, &target, &items, m);
            let (timing, times) = simulate_with_times_on_slots_until(&r, stop)?;
            let t = timing.collective_time_ns;
            let bar = best.as_ref().map_or(before_ns, |b| b.time_ns);
            if t < bar * (1.0 - 1e-9) {
                let split = items.iter().filter(|i| i.piece == Some(0)).count();
                best = Some(Pipelined { schedule: r.clone(), pieces: m, split, time_ns: t });
            }
            // A round slower than the one before ends the piece count: the splits moved the
            // end to paths that wait on links (hier:ring2,fc4,switch4's all-reduce, two pieces:
            // 1080.1, 1079.1, then 1079.6 µs and on up); the dragonfly's only improve or hold.
            if round == ROUNDS || t > last * (1.0 + 1e-9) {
                break;
            }
            last = t;
            let marked = critical(&r, &times, t)?;
            let splits = marked.iter().filter(|&&b| b).count();
            let mut next = Vec::with_capacity(items.len() + splits * (m as usize - 1));
            let mut any = false;
            for (i, item) in items.iter().enumerate() {
                if marked[i] && item.piece.is_none() {
                    any = true;
                    next.extend((0..m).map(|j| Item { orig: item.orig, piece: Some(j) }));
                } else {
                    next.push(*item);
                }
            }
            if !any {
                break;
            }
            items = next;
        }
    }
    Ok(best)
}

/// Whether the pass may cut `s`'s chunks: one standard collective's, every transfer a plain
/// message between NPUs (switches on its path cut through, no NPU relays, no slots).
fn applies(s: &Schedule) -> bool {
    let npus = s.topology.npus() as u32;
    !matches!(s.collective.kind, CollectiveKind::Custom)
        && s.scratch.is_empty()
        && !s.transfers.has_dst_slots()
        && s.transfers
            .iter()
            .all(|t| t.path_nodes().is_none_or(|p| p.len() < 3 || p[1..p.len() - 1].iter().all(|&v| v >= npus)))
}

/// The collective at `m` times `s`'s chunks per NPU, where chunk `x·m + j` is piece `j` of
/// `s`'s chunk `x` (every kind numbers its chunks so, `collective::prepost`): checked by the
/// counts and sizes.
fn pieced_collective(s: &Schedule, m: u32) -> Option<Collective> {
    let k = s.collective.chunks().checked_mul(m)?;
    let spec = s.collective.clone().with_chunks_per_npu(k);
    let c = Collective::build(&spec, &s.topology).ok()?;
    let size_ok = (c.chunk_size_bytes * m as f64 - s.chunk_size_bytes).abs() <= 1e-9 * s.chunk_size_bytes;
    (c.num_chunks == s.num_chunks * m as usize && size_ok && c.combining == s.combining).then_some(c)
}

/// The pieced schedule of `items` (in `s`'s array order, a split transfer's pieces in a row at
/// its step): a whole transfer carries every piece of its chunks, piece `j` the `j`-th.
fn build(s: &Schedule, target: &Collective, items: &[Item], m: u32) -> Schedule {
    let mut transfers = Transfers::with_capacity(items.len());
    for item in items {
        let t = s.transfers.at(item.orig as usize);
        let chunks: Vec<u32> = match item.piece {
            None => t.chunks.iter().flat_map(|&x| (0..m).map(move |j| x * m + j)).collect(),
            Some(j) => t.chunks.iter().map(|&x| x * m + j).collect(),
        };
        transfers.push(Transfer {
            op: t.op,
            path: t.path.cloned(),
            ..Transfer::copy(t.step, t.src as usize, t.dst as usize, ChunkList::from(chunks))
        });
    }
    let mut r = Schedule::new(s.topology.clone(), target, s.algorithm.as_deref().unwrap_or("greedy"));
    r.seed = s.seed;
    r.transfers = transfers;
    r
}

/// The transfers to split: walking back from every transfer that ends within `NEAR_END` of
/// `end` along what each start waited for, every transfer that waited on data and the one it
/// waited on (a transfer waiting on a link only passes the walk on).
fn critical(s: &Schedule, times: &[TransferTime], end: f64) -> Result<Vec<bool>, SimError> {
    let waits = waits(s, times)?;
    let mut marked = vec![false; times.len()];
    let mut seen = vec![false; times.len()];
    for (first, t) in times.iter().enumerate() {
        if t.end_ns < end * (1.0 - NEAR_END) {
            continue;
        }
        let mut i = first;
        while !seen[i] {
            seen[i] = true;
            i = match waits[i] {
                Wait::Data(w) => {
                    marked[i] = true;
                    marked[w as usize] = true;
                    w as usize
                }
                Wait::Link(p) => p as usize,
                Wait::Nothing => break,
            };
        }
    }
    Ok(marked)
}

/// What each transfer's start waited for, read off the replay's times: its data's last write
/// (its chunks at its source are final at the latest end of a write in an earlier step) when
/// that is its start, else the transfer before it on a link of its path that ended then.
fn waits(s: &Schedule, times: &[TransferTime]) -> Result<Vec<Wait>, SimError> {
    let slots = s.slots();
    let cell = |v: u32, c: u32| v as usize * slots + c as usize;
    let mut last_write: Vec<(f64, u32)> = vec![(0.0, NONE); s.topology.nodes() * slots];
    let mut on_link: Vec<u32> = vec![NONE; s.topology.links().len()];
    let mut waits = vec![Wait::Nothing; times.len()];
    let mut pending: Vec<(usize, f64, u32)> = Vec::new();
    let order = s.replay_order();
    let mut step = None;
    let tol = 1e-9 * times.iter().map(|t| t.end_ns).fold(1.0, f64::max);
    for k in 0..order.len() {
        let i = order.get(k);
        let t = s.transfers.at(i);
        if step != Some(t.step) {
            // Reads within a step never see writes of the same step.
            for (c, end, w) in pending.drain(..) {
                if end >= last_write[c].0 {
                    last_write[c] = (end, w);
                }
            }
            step = Some(t.step);
        }
        let start = times[i].start_ns;
        let (ready, writer) = t
            .chunks
            .iter()
            .map(|&c| last_write[cell(t.src, c)])
            .fold((0.0, NONE), |a, b| if b.0 > a.0 { b } else { a });
        let links = links_of(s, i)?;
        let before = links
            .iter()
            .map(|&l| on_link[l])
            .filter(|&p| p != NONE)
            .max_by(|&a, &b| times[a as usize].end_ns.total_cmp(&times[b as usize].end_ns));
        waits[i] = if writer != NONE && ready >= start - tol {
            Wait::Data(writer)
        } else if let Some(p) = before.filter(|&p| times[p as usize].end_ns >= start - tol) {
            Wait::Link(p)
        } else {
            Wait::Nothing
        };
        for &l in &links {
            on_link[l] = i as u32;
        }
        pending.extend(t.chunks.iter().map(|&c| (cell(t.dst, c), times[i].end_ns, i as u32)));
    }
    Ok(waits)
}
