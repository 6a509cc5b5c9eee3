//! Repair of a schedule after failures: every transfer whose links all survive is kept byte
//! for byte; a transfer over a failed link is rerouted along a detour between the same two
//! NPUs, spread over a few alternatives by the load they would add. Steps, chunks and ops do
//! not change, so the data flow, and with it the validity, is the stored schedule's; the
//! simulator re-times the result (detours share links with the kept transfers).
//!
//! A link that is slower than it was (degraded, not failed) keeps about the share of each
//! message it carries in the time the message took, the rest goes round in pieces; a message
//! of one chunk moves whole where a detour's busiest link would be less busy than the slow
//! one. So the slow link carries what its speed allows and nothing is refused.
//!
//! What a reroute cannot do: serve a collective whose group lost an NPU (its chunks are
//! another collective's), or move data out of a failed NPU. Those need a fresh synthesis.

use crate::schedule::{ChunkList, Route, Schedule, Transfer};
use crate::topology::Topology;
use serde::Serialize;

/// Detours computed per pair of NPUs whose transfers lost a link.
const DETOURS_PER_PAIR: usize = 4;
/// Pieces a detoured message is cut into at most (`Moves::cut`).
const MAX_PIECES: usize = 16;

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum RepairError {
    #[error("the topology has {new} nodes, the schedule's {old}: not the same network")]
    Nodes { old: usize, new: usize },
    #[error("NPU {0} failed and takes part in the collective: its chunks need a new schedule")]
    GroupChanged(usize),
    #[error("NPU {0} failed and the schedule stores chunks there on their way")]
    RelayFailed(u32),
    #[error("NPU {src} can no longer reach NPU {dst}")]
    Unreachable { src: u32, dst: u32 },
    #[error("stopped")]
    Stopped,
}

/// What a repair did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RepairStats {
    /// Transfers kept as they were.
    pub kept: usize,
    /// Transfers given a detour.
    pub rerouted: usize,
    /// Links the rerouted transfers cross, summed (their old routes' links, summed, for
    /// comparison: the detours' extra hops).
    pub rerouted_hops: usize,
    pub replaced_hops: usize,
    /// Transfers over a slowed (degraded) link moved to a detour, whole or but the share the
    /// link keeps (`keep_share`); they count in `rerouted` too.
    #[serde(skip_serializing_if = "is_zero")]
    pub rebalanced: usize,
    /// Transfers added by cutting detoured messages into pieces that pipeline over the NPUs
    /// they relay through (`pieces`), and by sending round the part of a message a slowed link
    /// does not keep.
    #[serde(skip_serializing_if = "is_zero")]
    pub pieces: usize,
    /// Links slowed, none failed: the stored schedule as it stands was no slower than any
    /// reroute, and is what the repair gives (every transfer `kept`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub as_stored: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The links transfer `i` occupies, as (src, dst) pairs (none for a local move).
fn hops_of(s: &Schedule, i: usize, out: &mut Vec<(u32, u32)>) {
    out.clear();
    let t = s.transfers.at(i);
    if t.is_local() {
        return;
    }
    match t.path_nodes() {
        Some(p) => out.extend(p.windows(2).map(|w| (w[0], w[1]))),
        None => out.push((t.src, t.dst)),
    }
}

/// `old` with every transfer that crosses a link `topo` lacks rerouted on `topo`; `stop` is
/// polled every 65,536 transfers.
pub fn reroute(
    old: Schedule,
    topo: &Topology,
    stop: &dyn Fn() -> bool,
) -> Result<(Schedule, RepairStats), RepairError> {
    if old.topology.nodes() != topo.nodes() {
        return Err(RepairError::Nodes { old: old.topology.nodes(), new: topo.nodes() });
    }
    let group: Vec<usize> = match &old.collective.group {
        Some(g) => g.clone(),
        None => old.topology.live_npus(),
    };
    if let Some(&v) = group.iter().find(|&&v| topo.is_failed(v)) {
        return Err(RepairError::GroupChanged(v));
    }
    let bytes = |i: usize| old.transfers.at(i).wire_chunks() as f64 * old.chunk_size_bytes;
    // Busy time per link of the new topology from the transfers that keep their routes, and
    // the transfers that lose one.
    let mut load = vec![0.0f64; topo.links().len()];
    let mut broken: Vec<u32> = Vec::new();
    let mut slowed: Vec<u32> = Vec::new();
    let was = old_params(&old.topology, topo);
    let (slower, shares) = (slower_links(topo, &was), bandwidth_shares(topo, &was));
    let mut hops = Vec::new();
    for i in 0..old.transfers.len() {
        if i % 65_536 == 0 && stop() {
            return Err(RepairError::Stopped);
        }
        hops_of(&old, i, &mut hops);
        let links: Option<Vec<usize>> = hops.iter().map(|&(a, b)| topo.link_index(a as usize, b as usize)).collect();
        match links {
            Some(links) => {
                if links.iter().any(|&l| slower[l]) {
                    slowed.push(i as u32);
                }
                for l in links {
                    load[l] += bytes(i) / topo.links()[l].bandwidth_gb_per_s;
                }
            }
            None => {
                let t = old.transfers.at(i);
                if let Some(v) = [t.src, t.dst].into_iter().find(|&v| topo.is_failed(v as usize)) {
                    return Err(RepairError::RelayFailed(v));
                }
                broken.push(i as u32)
            }
        }
    }
    let mut stats = RepairStats { kept: old.transfers.len() - broken.len(), ..RepairStats::default() };
    let mut s = old;
    s.topology = topo.clone();
    s.collective_time_ns = None;
    // Every transfer that lost a link moves; then those over a slowed link that a detour
    // serves better (their load is on their links already, and comes off while they choose).
    let mean = (load.iter().sum::<f64>() / load.len().max(1) as f64).max(1e-9);
    let mut moves = Moves {
        s: &mut s,
        topo,
        load: &mut load,
        mean,
        stats: &mut stats,
        stop,
        slower: &slower,
        shares: &shares,
        was: &was,
    };
    moves.run(broken, false)?;
    moves.run(slowed, true)?;
    Ok((s, stats))
}

/// Per link of `new`, whether it is slower than it `was` (lower bandwidth or higher latency).
fn slower_links(new: &Topology, was: &[(f64, f64)]) -> Vec<bool> {
    let slower = |(l, &(alpha, beta)): (&crate::topology::Link, &(f64, f64))| {
        l.bandwidth_gb_per_s / beta < 1.0 || l.latency_ns > alpha
    };
    new.links().iter().zip(was).map(slower).collect()
}

/// Per link of `new`, its bandwidth over what it `was` where lower (else 1).
fn bandwidth_shares(new: &Topology, was: &[(f64, f64)]) -> Vec<f64> {
    new.links().iter().zip(was).map(|(l, &(_, beta))| (l.bandwidth_gb_per_s / beta).min(1.0)).collect()
}

/// How much link `l`'s latency rose over `was` (ns; 0 where it did not).
fn rise(topo: &Topology, was: &[(f64, f64)], l: usize) -> f64 {
    (topo.links()[l].latency_ns - was[l].0).max(0.0)
}

/// Per link of `new`, the same link's (latency, bandwidth) in `old` (its own where `old` has
/// no such link).
fn old_params(old: &Topology, new: &Topology) -> Vec<(f64, f64)> {
    let was = |l: &crate::topology::Link| {
        let o = old.link_index(l.src, l.dst).map_or(l, |i| &old.links()[i]);
        (o.latency_ns, o.bandwidth_gb_per_s)
    };
    new.links().iter().map(was).collect()
}

/// The reroute in progress: the schedule, every link's busy time so far, and the counts.
struct Moves<'a> {
    s: &'a mut Schedule,
    topo: &'a Topology,
    load: &'a mut [f64],
    mean: f64,
    stats: &'a mut RepairStats,
    stop: &'a dyn Fn() -> bool,
    /// Per link, whether it runs slower than before: the detours of a transfer that may stay
    /// avoid them (a slow link is its own route's to keep, not a detour's to add).
    slower: &'a [bool],
    /// Per link, its bandwidth over what it was where lower (else 1): the share of a message
    /// it carries in the time the whole message took there (`keep_share`).
    shares: &'a [f64],
    /// Per link, its (latency, bandwidth) before: a message over a link whose latency rose
    /// takes that much longer whatever the link's load (a link at 1 ms was kept: busy time
    /// alone does not see it).
    was: &'a [(f64, f64)],
}

impl Moves<'_> {
    /// Gives each of `transfers` a detour, per (src, dst) pair from a few found on the links'
    /// busy time so far (so the second avoids what the first loads), each transfer onto the
    /// one whose busiest link would be least busy with it. With `optional` (a transfer whose
    /// route still exists, its load counted), the transfer keeps its route unless a detour's
    /// busiest link would be strictly less busy than its own.
    fn run(&mut self, transfers: Vec<u32>, optional: bool) -> Result<(), RepairError> {
        let topo = self.topo;
        let bytes = |s: &Schedule, i: usize| s.transfers.at(i).wire_chunks() as f64 * s.chunk_size_bytes;
        let mut hops = Vec::new();
        // (src, dst, transfer, bytes, hops it had) of every transfer, by pair.
        let mut pairs: Vec<(u32, u32, u32, f64, usize)> = transfers
            .iter()
            .map(|&i| {
                let t = self.s.transfers.at(i as usize);
                hops_of(self.s, i as usize, &mut hops);
                (t.src, t.dst, i, bytes(self.s, i as usize), hops.len())
            })
            .collect();
        drop(transfers);
        pairs.sort_unstable_by_key(|p| (p.0, p.1, p.2));
        let mut k = 0;
        while k < pairs.len() {
            if (self.stop)() {
                return Err(RepairError::Stopped);
            }
            let (src, dst) = (pairs[k].0, pairs[k].1);
            let end = k + pairs[k..].iter().take_while(|p| (p.0, p.1) == (src, dst)).count();
            let share: f64 = pairs[k..end].iter().map(|p| p.3).sum::<f64>();
            let detours = self.detours(src, dst, share, optional);
            if detours.is_empty() && !optional {
                return Err(RepairError::Unreachable { src, dst });
            }
            for &(_, _, i, b, had) in &pairs[k..end] {
                let i = i as usize;
                let load = &mut *self.load;
                let busiest = |load: &[f64], links: &[usize]| busiest_with(topo, load, links, b);
                let own: Option<Vec<usize>> = optional.then(|| {
                    hops_of(self.s, i, &mut hops);
                    hops.iter().filter_map(|&(a, b)| topo.link_index(a as usize, b as usize)).collect()
                });
                if let Some(own) = &own {
                    for &l in own {
                        load[l] -= b / topo.links()[l].bandwidth_gb_per_s;
                    }
                    if self.keep_share(i, own, &detours) {
                        continue;
                    }
                }
                let load = &mut *self.load;
                let best = least_busy(topo, load, detours.iter().filter(|(links, _)| own.as_ref() != Some(links)), b);
                // A route whose latency rose by more than the message takes to send leaves it
                // as a failed link does: for the best detour, in pieces (kept, each message
                // waited the rise: a link at 1 ms held bucket on torus:8x8 at 17.3 ms).
                // Busy time, which the comparison below weighs, does not see latency.
                let was = self.was;
                let rise = |own: &[usize]| own.iter().map(|&l| rise(topo, was, l)).sum::<f64>();
                let by_latency = own.as_deref().is_some_and(|own| {
                    let slowest = own.iter().map(|&l| topo.links()[l].bandwidth_gb_per_s).fold(f64::INFINITY, f64::min);
                    rise(own) > b / slowest
                });
                let best = match (best, &own) {
                    (Some(d), Some(own)) if !by_latency && busiest(load, &d.0) >= busiest(load, own) => None,
                    (d, _) => d,
                };
                let Some((links, route)) = best else {
                    for &l in own.as_deref().unwrap_or_default() {
                        load[l] += b / topo.links()[l].bandwidth_gb_per_s;
                    }
                    continue;
                };
                self.stats.replaced_hops += had;
                self.stats.rerouted_hops += links.len();
                self.stats.rerouted += 1;
                if optional {
                    self.stats.kept -= 1;
                    self.stats.rebalanced += 1;
                }
                let cut = if optional && !by_latency { None } else { self.cut(i, links, route) };
                let Some(pieces) = cut else {
                    for &l in links {
                        self.load[l] += b / topo.links()[l].bandwidth_gb_per_s;
                    }
                    self.s.transfers.set_path(i, if links.len() == 1 { None } else { Some(route.clone()) });
                    continue;
                };
                // Each piece onto the detour whose busiest link it loads least: the pieces
                // of one message spread over the pair's detours.
                let template = self.s.transfers.owned(i);
                let n = pieces.len();
                for (k, piece) in pieces.into_iter().enumerate() {
                    let bp = piece.len() as f64 * self.s.chunk_size_bytes;
                    let path = self.onto_least_busy(detours.iter(), bp).expect("the whole message had a detour");
                    if k == 0 {
                        self.s.transfers.set_chunks(i, piece);
                        self.s.transfers.set_path(i, path);
                    } else {
                        self.s.transfers.push(Transfer { chunks: piece, path, ..template.clone() });
                    }
                }
                self.stats.pieces += n - 1;
            }
            k = end;
        }
        Ok(())
    }

    /// Transfer `i` over links `own`, one of them slower than it was: about the
    /// share of its chunks the slowest of them carries in the time the whole message took there
    /// stays (a little more, as its detours are busy too; rounded), the rest goes in pieces (`pieces`), each onto whichever other detour of
    /// the pair it loads least. Where the stored schedule keeps every link busy, a slow link
    /// that kept whole messages held every later step back (bucket-bidir on torus:32x32 with
    /// link 0-1 at a quarter speed: 21.5 ms, against 5.4 ms intact), and one that sent them all
    /// round loaded its detours as a failure does. False where no chunk would stay or none
    /// would go (a transfer of one chunk, or with destination slots): the caller then keeps or
    /// moves the whole transfer.
    fn keep_share(&mut self, i: usize, own: &[usize], detours: &[(Vec<usize>, Route)]) -> bool {
        let topo = self.topo;
        let t = self.s.transfers.at(i);
        let b = t.wire_chunks() as f64 * self.s.chunk_size_bytes;
        // The share of the message the link sends in the time the whole message took there:
        // x with α' + x b / β' = α + b / β (x = β' / β where only the bandwidth fell; none
        // where the latency alone is longer than the whole message took).
        let share_of = |l: usize| {
            let (link, (alpha_was, beta_was)) = (&topo.links()[l], self.was[l]);
            if rise(topo, self.was, l) == 0.0 {
                return self.shares[l];
            }
            let (alpha, beta) = (link.latency_ns, link.bandwidth_gb_per_s);
            ((alpha_was + b / beta_was - alpha) * beta / b).clamp(0.0, 1.0)
        };
        let share = own.iter().map(|&l| share_of(l)).fold(1.0, f64::min);
        let others: Vec<&(Vec<usize>, Route)> = detours.iter().filter(|d| d.0 != own).collect();
        // With d equally short detours as busy as the link was, keeping x of a message costs
        // the slow link x / share message times and each detour 1 + (1 − x) / d: equal at
        // x = share (d + 1) / (d + share) (torus:32x32, link 0-1 at a quarter speed: 7.63 ms
        // keeping a quarter, 7.43 ms keeping a third over the two detours round the square).
        let shortest = others.iter().map(|o| o.0.len()).min().unwrap_or(0);
        let d = others.iter().filter(|o| o.0.len() == shortest).count() as f64;
        let share = share * (d + 1.0) / (d + share);
        let keep = (t.chunks.len() as f64 * share).round() as usize;
        if t.dst_chunks.is_some() || keep == 0 || keep >= t.chunks.len() {
            return false;
        }
        let chunk = self.s.chunk_size_bytes;
        let (kept, moved) = t.chunks.split_at(keep);
        let (kept, moved) = (kept.to_vec(), moved.to_vec());
        let Some((links, route)) = least_busy(topo, self.load, others.iter().copied(), moved.len() as f64 * chunk)
        else {
            return false;
        };
        let pieces = self.pieces(&moved, links, route).unwrap_or_else(|| vec![moved.into()]);
        for &l in own {
            self.load[l] += kept.len() as f64 * chunk / topo.links()[l].bandwidth_gb_per_s;
        }
        self.s.transfers.set_chunks(i, kept.into());
        let template = self.s.transfers.owned(i);
        self.stats.kept -= 1;
        self.stats.rebalanced += 1;
        self.stats.rerouted += 1;
        self.stats.replaced_hops += own.len();
        self.stats.rerouted_hops += links.len();
        self.stats.pieces += pieces.len();
        for piece in pieces {
            let path = self.onto_least_busy(others.iter().copied(), piece.len() as f64 * chunk).expect("a detour");
            self.s.transfers.push(Transfer { chunks: piece, path, ..template.clone() });
        }
        true
    }

    /// `bytes` more onto whichever of `detours` they load least (`least_busy`), its links'
    /// busy time counted: the path a transfer takes there (`None` over one link); `None` where
    /// there is no detour.
    fn onto_least_busy<'d>(
        &mut self,
        detours: impl Iterator<Item = &'d (Vec<usize>, Route)>,
        bytes: f64,
    ) -> Option<Option<Route>> {
        let topo = self.topo;
        let (links, route) = least_busy(topo, self.load, detours, bytes)?;
        for &l in links {
            self.load[l] += bytes / topo.links()[l].bandwidth_gb_per_s;
        }
        Some((links.len() > 1).then(|| route.clone()))
    }

    /// Transfer `i`'s chunks cut into the pieces that take a detour `links` soonest, if more
    /// than one: a relay stores and forwards (`sim`), so a whole message over h hops between
    /// NPUs takes h message times where m pieces take (m + h − 1) of a piece each, plus a
    /// latency a piece: m minimises (m + h − 1)(α + B/(mβ)), the detour's largest latency and
    /// smallest bandwidth, up to `MAX_PIECES` and the message's chunks. None for a transfer
    /// with destination slots (a piece could not say which slots it writes).
    fn cut(&self, i: usize, links: &[usize], route: &Route) -> Option<Vec<ChunkList>> {
        let t = self.s.transfers.at(i);
        if t.dst_chunks.is_some() {
            return None;
        }
        self.pieces(t.chunks, links, route)
    }

    /// `chunks` cut into the pieces that take a detour `links` soonest, if more than one
    /// (`cut`).
    fn pieces(&self, chunks: &[u32], links: &[usize], route: &Route) -> Option<Vec<ChunkList>> {
        if chunks.len() < 2 {
            return None;
        }
        let topo = self.topo;
        let hops = 1 + route[1..route.len() - 1].iter().filter(|&&v| topo.is_npu(v as usize)).count();
        if hops < 2 {
            return None;
        }
        let alpha = links.iter().map(|&l| topo.links()[l].latency_ns).fold(0.0, f64::max);
        let beta = links.iter().map(|&l| topo.links()[l].bandwidth_gb_per_s).fold(f64::INFINITY, f64::min);
        let wire = chunks.len() as f64 * self.s.chunk_size_bytes / beta;
        let time = |m: usize| (m + hops - 1) as f64 * (alpha + wire / m as f64);
        let m = (1..=MAX_PIECES.min(chunks.len())).min_by(|&a, &b| time(a).total_cmp(&time(b)))?;
        if m < 2 {
            return None;
        }
        // m runs of consecutive entries, the first ones a chunk longer: runs of a range are
        // ranges, so the compact form stays compact.
        let (per, extra) = (chunks.len() / m, chunks.len() % m);
        let mut at = 0;
        Some(
            (0..m)
                .map(|k| {
                    let len = per + usize::from(k < extra);
                    let piece: ChunkList = chunks[at..at + len].to_vec().into();
                    at += len;
                    piece
                })
                .collect(),
        )
    }

    /// Up to `DETOURS_PER_PAIR` distinct paths from `src` to `dst`, each found on the busy time
    /// so far plus a share of `share` bytes on the ones before it; around the slowed links with
    /// `around_slowed`.
    fn detours(&self, src: u32, dst: u32, share: f64, around_slowed: bool) -> Vec<(Vec<usize>, Route)> {
        let topo = self.topo;
        let mut detours: Vec<(Vec<usize>, Route)> = Vec::new();
        let mut penalty = self.load.to_vec();
        if around_slowed {
            for (p, _) in penalty.iter_mut().zip(self.slower).filter(|(_, slow)| **slow) {
                *p = f64::INFINITY;
            }
        }
        for _ in 0..DETOURS_PER_PAIR {
            let Some(links) = cheapest_path(topo, src as usize, dst as usize, &penalty, self.mean) else { break };
            if detours.iter().any(|(l, _)| *l == links) {
                break;
            }
            for &l in &links {
                penalty[l] += share / topo.links()[l].bandwidth_gb_per_s / DETOURS_PER_PAIR as f64;
            }
            let mut nodes = vec![src];
            nodes.extend(links.iter().map(|&l| topo.links()[l].dst as u32));
            detours.push((links, Route::from(nodes)));
        }
        detours
    }
}

/// How busy the busiest of `links` would be with `bytes` more on each.
fn busiest_with(topo: &Topology, load: &[f64], links: &[usize], bytes: f64) -> f64 {
    links.iter().map(|&l| load[l] + bytes / topo.links()[l].bandwidth_gb_per_s).fold(0.0, f64::max)
}

/// The detour whose busiest link would be least busy with `bytes` more (the shorter on a tie).
fn least_busy<'d>(
    topo: &Topology,
    load: &[f64],
    detours: impl Iterator<Item = &'d (Vec<usize>, Route)>,
    bytes: f64,
) -> Option<&'d (Vec<usize>, Route)> {
    let busiest = |links: &[usize]| busiest_with(topo, load, links, bytes);
    detours.min_by(|x, y| busiest(&x.0).total_cmp(&busiest(&y.0)).then(x.0.len().cmp(&y.0.len())))
}

/// The links of the cheapest path from `src` to `dst` where a link costs one hop plus its busy
/// time over the mean busy time (so detours prefer idle links, at most a few hops longer).
/// Intermediate nodes may be switches or NPUs; failed NPUs have no links.
fn cheapest_path(topo: &Topology, src: usize, dst: usize, busy: &[f64], mean: f64) -> Option<Vec<usize>> {
    use ordered_float::OrderedFloat;
    use std::cmp::Reverse;
    let n = topo.nodes();
    let mut dist = vec![f64::INFINITY; n];
    let mut via = vec![usize::MAX; n];
    let mut heap = std::collections::BinaryHeap::new();
    dist[src] = 0.0;
    heap.push(Reverse((OrderedFloat(0.0), src)));
    while let Some(Reverse((OrderedFloat(d), u))) = heap.pop() {
        if d > dist[u] {
            continue;
        }
        if u == dst {
            break;
        }
        for l in topo.out_links(u) {
            let v = topo.links()[l].dst;
            let nd = d + 1.0 + busy[l] / mean;
            if nd < dist[v] {
                dist[v] = nd;
                via[v] = l;
                heap.push(Reverse((OrderedFloat(nd), v)));
            }
        }
    }
    if !dist[dst].is_finite() {
        return None;
    }
    let mut links = Vec::new();
    let mut v = dst;
    while v != src {
        let l = via[v];
        links.push(l);
        v = topo.links()[l].src;
    }
    links.reverse();
    Some(links)
}
