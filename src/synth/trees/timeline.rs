//! The timeline of `synth::trees`: every tree's moves, identified without being stored
//! (`Moves`), the scheduler that places them one by one and lets each choose its parent as it
//! goes (`place`), its forward–backward passes (`timeline`) and their restarts from noisy
//! priorities (`perturbed`).
//!
//! Why the parents are chosen while placing: with every tree's parents fixed, a list schedule
//! of the trees ended 11–14 timesteps over the busiest link's load on torus:32x32 less a link
//! at 64 MiB (142 against 128 in fours), every link idle now and then for want of a ready
//! move while a neighbouring link had a queue. An NPU off its tree's axes has two or more
//! neighbours one hop nearer the root, so a partial may go to whichever of them takes it first
//! and a result may come from whichever has it first. Placed so, the same trees take 131
//! timesteps there without a restart (docs/BENCHMARKS.md, "Parents chosen as the moves are
//! placed"). The trees stay shortest-path trees (every choice is one hop nearer the root), so
//! each move's chain is as short as before; the up and the down tree of a unit may now differ.

use super::Fabric;
use super::build::Trees;
use crate::synth::SynthError;

/// Forward–backward passes after the first forward pass (each a backward and a forward pass),
/// unless one reaches the busiest link's load first.
const IMPROVEMENT_PASSES: usize = 6;

/// Moves beyond which two passes are the most made.
const LARGE_MOVES: usize = 1 << 22;

/// Moves beyond which a pass that does not shorten the timeline ends the passes (one where a
/// pass costs a tenth of a second or more; two below).
const PATIENT_BELOW: usize = 1 << 19;

/// `perturbed`: the noise added to each move's priority, up to this many timesteps (in eighths;
/// 1, 2, 4, 6 and 10 were tried on torus:8x8x8 less a link with the parents fixed: 3 did best).
const NOISE_TIMESTEPS: usize = 3;

/// Each move's parent in its tree, the partials' (`up`) and the results' (`down`) apart, at
/// `tree * n + npu` (`u32::MAX` at the root). A move's link is its NPU's edge to that parent.
/// Both start as the built trees' parents; every `place` may change them.
#[derive(Clone, PartialEq, Debug)]
pub(super) struct Parents {
    pub(super) up: Vec<u32>,
    pub(super) down: Vec<u32>,
}

impl Parents {
    pub(super) fn of(t: &Trees) -> Parents {
        Parents { up: t.parent.clone(), down: t.parent.clone() }
    }
}

/// A schedule of every move: each move's start, the timesteps until the last arrives, the
/// parents the moves took, and whether they chose them as they were placed (`place`) or kept
/// their trees' (the passes and restarts from it go on the same way).
#[derive(Clone)]
pub(super) struct Timeline {
    pub(super) start: Vec<u32>,
    pub(super) len: u32,
    pub(super) par: Parents,
    pub(super) chosen: bool,
}

impl Timeline {
    /// `place`'s cap for a timeline shorter than `beat`: each link under `beat` moves where the
    /// parents are chosen, none but the move's own where they are fixed.
    fn cap(&self, beat: u32) -> u32 {
        if self.chosen { beat.saturating_sub(1) } else { 0 }
    }
}

/// The moves of every tree, identified without being stored: tree t's moves are `t * 2m + i`
/// with m = n − 1, the partial of the ith non-root NPU up (i < m), then its result down
/// (m + i). What each move waits for depends on the parents a schedule gives them (`Parents`).
pub(super) struct Moves<'a> {
    pub(super) f: &'a Fabric,
    pub(super) t: &'a Trees,
    m: usize,
    /// `nearer[u * n + v]`: bit k set where v's kth neighbour is one hop nearer tree u's root
    /// (every bit where v has more than 32 neighbours: `place` then reads their depths).
    nearer: Vec<u32>,
    /// `floor`'s, once asked for.
    floor: std::sync::OnceLock<u32>,
}

impl<'a> Moves<'a> {
    pub(super) fn new(f: &'a Fabric, t: &'a Trees) -> Moves<'a> {
        let (n, units) = (t.n, t.roots.len());
        let mut nearer = vec![0u32; units * n];
        for u in 0..units {
            let depth = &t.depth[u * n..(u + 1) * n];
            for v in 0..n as u32 {
                let nb = f.neighbours(v);
                nearer[u * n + v as usize] = if nb.len() > 32 {
                    u32::MAX
                } else {
                    nb.iter()
                        .enumerate()
                        .filter(|&(_, &(p, _))| depth[p as usize] + 1 == depth[v as usize])
                        .fold(0, |m, (k, _)| m | 1 << k)
                };
            }
        }
        Moves { f, t, m: n - 1, nearer, floor: std::sync::OnceLock::new() }
    }
    pub(super) fn count(&self) -> usize {
        self.t.roots.len() * 2 * self.m
    }
    /// (tree, NPU, up?) of move `i`.
    pub(super) fn decode(&self, i: usize) -> (usize, u32, bool) {
        let (u, r) = (i / (2 * self.m), i % (2 * self.m));
        let (k, up) = if r < self.m { (r, true) } else { (r - self.m, false) };
        let root = self.t.roots[u] as usize;
        let v = if k < root { k } else { k + 1 };
        (u, v as u32, up)
    }
    pub(super) fn id(&self, u: usize, v: u32, up: bool) -> usize {
        let root = self.t.roots[u];
        let k = if v < root { v } else { v - 1 } as usize;
        u * 2 * self.m + if up { k } else { self.m + k }
    }

    /// The fewest timesteps a timeline of these moves takes: on their trees' own parents
    /// (`fixed`) the busiest link's load, or more where a link's moves cannot all be early or
    /// all be late (`jackson_floor`; from `LARGE_MOVES` the load alone, the bound sorts every
    /// move). Where the parents are chosen a move may leave the busiest link, and no bound is
    /// known: the load, where the passes and restarts stop all the same (as they always have).
    pub(super) fn floor(&self, fixed: bool) -> u32 {
        if !fixed {
            return self.t.busiest();
        }
        *self.floor.get_or_init(|| {
            let load = self.t.busiest();
            if self.count() > LARGE_MOVES { load } else { load.max(jackson_floor(self.f, self.t)) }
        })
    }
}

/// Each link alone as one machine with a job per move: a move can start no earlier than the
/// chain of moves before it (its head: a partial after its subtree's height, a result after
/// the tree's height and its parent's depth) and is followed by a chain after it (its tail: a
/// partial's way to the root and the tree's height down; a result's subtree height). With
/// moves of one timestep and whole heads, Jackson's rule (of the moves released, the longest
/// tail first) is optimal for one machine (Carlier's bound: its preemptive schedule is then a
/// schedule), so the most over links of its finish plus tail bounds every timeline. On
/// dragonfly:4:5 it is the load plus two, where every restart ends.
fn jackson_floor(f: &Fabric, t: &Trees) -> u32 {
    let (n, units) = (t.n, t.roots.len());
    let mut height = vec![0u32; n];
    // (link, head, tail) of every move.
    let mut jobs: Vec<(u32, u32, u32)> = Vec::with_capacity(units * 2 * n.saturating_sub(1));
    for u in 0..units {
        let (order, parent, depth) =
            (&t.order[u * n..(u + 1) * n], &t.parent[u * n..(u + 1) * n], &t.depth[u * n..(u + 1) * n]);
        height.fill(0);
        for &v in order.iter().rev() {
            let p = parent[v as usize];
            if p != u32::MAX {
                height[p as usize] = height[p as usize].max(height[v as usize] + 1);
            }
        }
        let tree = height[t.roots[u] as usize];
        for &v in order {
            let p = parent[v as usize];
            if p == u32::MAX {
                continue;
            }
            let (d, h) = (depth[v as usize], height[v as usize]);
            let e = super::build::edge_between(f, v, p);
            jobs.push((f.link(e, v, p), h, d - 1 + tree));
            jobs.push((f.link(e, p, v), tree + d - 1, h));
        }
    }
    jobs.sort_unstable();
    let mut floor = 0;
    let mut tails = std::collections::BinaryHeap::new();
    let mut i = 0;
    while i < jobs.len() {
        let link = jobs[i].0;
        let mut time = jobs[i].1;
        loop {
            while i < jobs.len() && jobs[i].0 == link && jobs[i].1 <= time {
                tails.push(jobs[i].2);
                i += 1;
            }
            match tails.pop() {
                Some(tail) => {
                    floor = floor.max(time + 1 + tail);
                    time += 1;
                }
                None if i < jobs.len() && jobs[i].0 == link => time = jobs[i].1,
                None => break,
            }
        }
    }
    floor
}

/// Places every move, one at a time, the waiting move of lowest `(key, id)` first, each at the
/// first timestep its link has free after the moves it waits for: forward (`rev` false) or
/// the DAG reversed (time running backwards from the end). Each move takes as parent, of its
/// NPU's neighbours one hop nearer the root, the one whose link starts it first (ties to its
/// parent in `par`): a move of the reducing kind (a partial forward, a result backward) among
/// those whose own move of that kind is still to be placed (they wait for it), a move of the
/// broadcasting kind among those already placed (it waits for them); another parent than its
/// own only where that link carries fewer than `cap` moves (a timeline of L timesteps needs
/// every link under L moves). `par` becomes the parents taken. Each move's start, and the
/// timesteps.
///
/// A move waits until every move that waits for it in `par` is placed (its children there of
/// the reducing kind; its parent of the broadcasting kind), so any key gives a valid timeline;
/// where the keys follow `par`'s DAG the moves are placed in key order, sorted up front (no
/// heap), and otherwise by a heap of the moves whose turn may come.
pub(super) fn place(
    mv: &Moves<'_>,
    par: &mut Parents,
    rev: bool,
    key: &[u32],
    cap: u32,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<u32>, u32), SynthError> {
    match place_in(mv, par, rev, key, cap, Order::Sorted, cancelled)? {
        Some(timeline) => Ok(timeline),
        None => place_noisy(mv, par, rev, key, cap, false, cancelled),
    }
}

/// `place` by the heap alone, for keys that need not follow the DAG (noisy ones).
fn place_noisy(
    mv: &Moves<'_>,
    par: &mut Parents,
    rev: bool,
    key: &[u32],
    cap: u32,
    rebalance: bool,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<u32>, u32), SynthError> {
    let placed = place_in(mv, par, rev, key, cap, Order::Queue { rebalance }, cancelled)?;
    // A heap holds every move whose turn may come, so it never meets one that is not ready.
    placed.ok_or(SynthError::Greedy(crate::synth::greedy::GreedyError::Unsupported("trees: a move was never ready")))
}

/// What `place` keeps of NPU v in tree u (at `u * n + v`), side by side so that a move reads
/// one cache line for itself and one for each neighbour it weighs.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Node {
    depth: u32,
    /// `Moves::nearer`.
    nearer: u32,
    /// Its parents for the reducing and the broadcasting kind (`u32::MAX` at the root).
    red: u32,
    bc: u32,
    /// Its children of the reducing kind not yet placed.
    pending: u32,
    /// The latest arrival of those children's moves (at the root: the whole reduction).
    arrived: u32,
    /// The starts of its two moves, `u32::MAX` until placed.
    s_red: u32,
    s_bc: u32,
}

/// The waiting moves, in `place`'s order: every move sorted by `(key, id)` up front, or the
/// moves whose turn may come by key (`Buckets`).
enum Queue {
    Sorted(Vec<u32>, usize),
    Heap(Buckets),
}

/// Moves whose turn may come, by key: a bucket per key, first in first out within one (keys
/// are timesteps, a few hundred, or eight times that with noise: cheaper than a binary heap).
/// Every move comes once with its own key, so the buckets are laid out flat up front, each as
/// long as its key's moves.
struct Buckets {
    slots: Vec<u32>,
    /// Bucket k's next move to come is `slots[read[k]]`, its next free slot `write[k]`.
    read: Vec<u32>,
    write: Vec<u32>,
    /// No bucket below holds a move still to come.
    least: usize,
}

impl Buckets {
    fn new(key: &[u32], top: usize) -> Buckets {
        let mut write = vec![0u32; top + 2];
        for &k in key {
            write[k as usize + 1] += 1;
        }
        for k in 1..write.len() {
            write[k] += write[k - 1];
        }
        write.pop();
        Buckets { slots: vec![0; key.len()], read: write.clone(), write, least: 0 }
    }
    fn push(&mut self, key: u32, i: usize) {
        let k = key as usize;
        self.slots[self.write[k] as usize] = i as u32;
        self.write[k] += 1;
        self.least = self.least.min(k);
    }
    /// The move `d` turns ahead in the least bucket, if it holds one (a later push may come
    /// before it).
    fn ahead(&self, d: usize) -> Option<&u32> {
        let k = self.least;
        let at = *self.read.get(k)? as usize + d;
        (at < self.write[k] as usize).then(|| &self.slots[at])
    }
    fn pop(&mut self) -> Option<usize> {
        while self.least < self.read.len() {
            let k = self.least;
            if self.read[k] < self.write[k] {
                self.read[k] += 1;
                return Some(self.slots[self.read[k] as usize - 1] as usize);
            }
            self.least += 1;
        }
        None
    }
}

/// In which order `place_in` takes the moves.
#[derive(Clone, Copy)]
enum Order {
    /// In key order, sorted up front: `None` where a move's turn comes before a move it waits
    /// for (`par` is then untouched).
    Sorted,
    /// By a heap of the ready moves; with `rebalance`, a move also leaves a link over `cap`.
    Queue { rebalance: bool },
}

/// `place`, in the `order` given.
fn place_in(
    mv: &Moves<'_>,
    par: &mut Parents,
    rev: bool,
    key: &[u32],
    cap: u32,
    order: Order,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<(Vec<u32>, u32)>, SynthError> {
    let (sorted, rebalance) = match order {
        Order::Sorted => (true, false),
        Order::Queue { rebalance } => (false, rebalance),
    };
    let (f, t) = (mv.f, mv.t);
    let (n, units, total) = (t.n, t.roots.len(), mv.count());
    // Forward the partials reduce and the results broadcast; backward the other way round.
    let reducing_up = !rev;
    let (red, bc) = if reducing_up { (&par.up, &par.down) } else { (&par.down, &par.up) };
    let mut nodes: Vec<Node> = (0..units * n)
        .map(|i| Node {
            depth: t.depth[i],
            nearer: mv.nearer[i],
            red: red[i],
            bc: bc[i],
            pending: 0,
            arrived: 0,
            s_red: u32::MAX,
            s_bc: u32::MAX,
        })
        .collect();
    // Each link's moves under `par`, kept as moves change parents.
    let mut load = vec![0u32; 2 * f.edges];
    let link_to = |v: u32, p: u32| -> u32 {
        let at = f.neighbours(v).iter().position(|&(x, _)| x == p).expect("a parent is a neighbour");
        f.out_links(v)[at]
    };
    for u in 0..units {
        for v in 0..n as u32 {
            let (a, b) = (par.up[u * n + v as usize], par.down[u * n + v as usize]);
            if a != u32::MAX {
                // With `cap` 0 no move changes parent: the loads are not needed.
                if cap > 0 {
                    load[link_to(v, a) as usize] += 1;
                    load[(link_to(v, b) ^ 1) as usize] += 1;
                }
                nodes[u * n + red[u * n + v as usize] as usize].pending += 1;
            }
        }
    }
    // The children lists of the broadcasting kind, for the heap alone (in key order up front a
    // move's turn comes after its parent's anyway).
    let (mut first, mut next) = (Vec::new(), Vec::new());
    let top = key.iter().copied().max().unwrap_or(0) as usize;
    let mut queue = if sorted {
        // A counting sort over the keys.
        let mut at = vec![0u32; top + 2];
        for &k in key {
            at[k as usize + 1] += 1;
        }
        for k in 1..at.len() {
            at[k] += at[k - 1];
        }
        let mut order = vec![0u32; total];
        for (i, &k) in key.iter().enumerate() {
            order[at[k as usize] as usize] = i as u32;
            at[k as usize] += 1;
        }
        Queue::Sorted(order, 0)
    } else {
        (first, next) = (vec![u32::MAX; units * n], vec![u32::MAX; units * n]);
        let mut heap = Buckets::new(key, top);
        for u in 0..units {
            let root = t.roots[u];
            for v in 0..n as u32 {
                let i = u * n + v as usize;
                if v == root {
                    continue;
                }
                let q = bc[i] as usize;
                next[i] = first[u * n + q];
                first[u * n + q] = v;
                if nodes[i].pending == 0 {
                    let i = mv.id(u, v, reducing_up);
                    heap.push(key[i], i);
                }
            }
        }
        Queue::Heap(heap)
    };
    // Each link's taken timesteps, a bit each, `words` words a link (doubled when a move
    // would start beyond).
    let mut words = (t.busiest() as usize * 2).div_ceil(64) + 1;
    let mut taken = vec![0u64; 2 * f.edges * words];
    let (mut placed, mut len) = (0usize, 0u32);
    // Records that fit in a core's cache need no fetching ahead (on dragonfly:4:5, a fifth of
    // the placement's time went to it).
    let fetch = std::mem::size_of_val(&nodes[..]) > PREFETCH_ABOVE_BYTES;
    loop {
        let i = match &mut queue {
            Queue::Sorted(order, at) => {
                *at += 1;
                order.get(*at - 1).map(|&i| i as usize)
            }
            Queue::Heap(h) => h.pop(),
        };
        // The move a few turns ahead: its NPU's and its parents' records fetched now, so that
        // they are in cache when its turn comes (the records of a few hundred trees do not fit
        // in it, and the turns go from tree to tree).
        let ahead = match &queue {
            _ if !fetch => None,
            Queue::Sorted(order, at) => order.get(*at + PREFETCH_AHEAD),
            Queue::Heap(h) => h.ahead(PREFETCH_AHEAD),
        };
        if let Some(&ahead) = ahead {
            let (u, v, _) = mv.decode(ahead as usize);
            let x = u * n + v as usize;
            prefetch(&nodes[x]);
            let nearer = mv.nearer[x];
            for (k, &(p, _)) in f.neighbours(v).iter().enumerate().take(32) {
                if nearer & (1 << k) != 0 {
                    prefetch(&nodes[u * n + p as usize]);
                }
            }
        }
        let Some(i) = i else { break };
        if placed % (1 << 16) == 0 && cancelled() {
            return Err(SynthError::Cancelled);
        }
        placed += 1;
        let (u, v, up) = mv.decode(i);
        let reducing = up == reducing_up;
        let root = t.roots[u];
        let tree = &mut nodes[u * n..(u + 1) * n];
        let me = tree[v as usize];
        let now = if reducing { me.red } else { me.bc };
        if matches!(queue, Queue::Sorted(..)) {
            let ready = if reducing {
                me.pending == 0
            } else if now == root {
                tree[root as usize].pending == 0
            } else {
                tree[now as usize].s_bc != u32::MAX
            };
            if !ready {
                return Ok(None);
            }
        }
        // (own link over the cap, slot, not the parent it had, parent, link)
        let mut pick = (true, u32::MAX, true, u32::MAX, 0u32);
        let mut was_link = u32::MAX;
        for (k, (&(p, _), &out)) in f.neighbours(v).iter().zip(f.out_links(v)).enumerate() {
            if (k < 32 && me.nearer & (1 << k) == 0) || (cap == 0 && p != now) {
                continue;
            }
            let them = &tree[p as usize];
            if them.depth + 1 != me.depth {
                continue;
            }
            let link = if up { out } else { out ^ 1 };
            if p == now {
                was_link = link;
            } else if load[link as usize] >= cap {
                continue;
            }
            let ready = if reducing {
                if p != root && them.s_red != u32::MAX {
                    continue;
                }
                me.arrived
            } else if p == root {
                if them.pending != 0 {
                    continue;
                }
                them.arrived
            } else {
                match them.s_bc {
                    u32::MAX => continue,
                    s => s + 1,
                }
            };
            let slot = loop {
                match first_free(&taken[link as usize * words..(link as usize + 1) * words], ready) {
                    Some(slot) => break slot,
                    None => {
                        let wider = 2 * words.max(ready as usize / 64 + 1);
                        let mut grown = vec![0u64; 2 * f.edges * wider];
                        for (l, old) in taken.chunks_exact(words).enumerate() {
                            grown[l * wider..l * wider + words].copy_from_slice(old);
                        }
                        (taken, words) = (grown, wider);
                    }
                }
            };
            let over = rebalance && p == now && load[link as usize] > cap;
            if (over, slot, p != now) < (pick.0, pick.1, pick.2) {
                pick = (over, slot, p != now, p, link);
            }
        }
        let (_, slot, _, p, link) = pick;
        if p == u32::MAX {
            // Its parent in `par` is always a candidate; reaching here is a bug, not an input.
            return Err(SynthError::Greedy(crate::synth::greedy::GreedyError::Unsupported(
                "trees: a move has no parent",
            )));
        }
        taken[link as usize * words + slot as usize / 64] |= 1 << (slot % 64);
        if link != was_link {
            load[was_link as usize] -= 1;
            load[link as usize] += 1;
        }
        len = len.max(slot + 1);
        if reducing {
            tree[v as usize].s_red = slot;
            tree[v as usize].red = p;
            let a = &mut tree[p as usize].arrived;
            *a = (*a).max(slot + 1);
            // The parent it had no longer waits for it (the new one never counted it).
            let was = &mut tree[now as usize].pending;
            *was -= 1;
            if *was == 0 && matches!(queue, Queue::Heap(_)) {
                if now == root {
                    let mut c = first[u * n + root as usize];
                    while c != u32::MAX {
                        push(&mut queue, key, mv.id(u, c, !reducing_up));
                        c = next[u * n + c as usize];
                    }
                } else {
                    push(&mut queue, key, mv.id(u, now, reducing_up));
                }
            }
        } else {
            tree[v as usize].s_bc = slot;
            tree[v as usize].bc = p;
            if matches!(queue, Queue::Heap(_)) {
                let mut c = first[u * n + v as usize];
                while c != u32::MAX {
                    push(&mut queue, key, mv.id(u, c, !reducing_up));
                    c = next[u * n + c as usize];
                }
            }
        }
    }
    if placed != total {
        return Ok(None);
    }
    let mut start = vec![0u32; total];
    let (red, bc) = if reducing_up { (&mut par.up, &mut par.down) } else { (&mut par.down, &mut par.up) };
    for u in 0..units {
        let root = t.roots[u];
        for v in 0..n as u32 {
            if v == root {
                continue;
            }
            let x = &nodes[u * n + v as usize];
            red[u * n + v as usize] = x.red;
            bc[u * n + v as usize] = x.bc;
            start[mv.id(u, v, reducing_up)] = x.s_red;
            start[mv.id(u, v, !reducing_up)] = x.s_bc;
        }
    }
    Ok(Some((start, len)))
}

/// Turns ahead that `place` fetches a move's records.
const PREFETCH_AHEAD: usize = 12;
/// Records from which `place` fetches them ahead.
const PREFETCH_ABOVE_BYTES: usize = 1 << 20;

/// Asks the processor to fetch `x`'s cache line (a hint; nothing where the target has none).
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault; `x` is a live
    // reference in any case.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((x as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

fn push(queue: &mut Queue, key: &[u32], i: usize) {
    if let Queue::Heap(h) = queue {
        h.push(key[i], i);
    }
}

/// The first timestep from `from` on that `bits` has free, if any.
fn first_free(bits: &[u64], from: u32) -> Option<u32> {
    let mut w = from as usize / 64;
    let mut mask = !0u64 << (from % 64);
    while w < bits.len() {
        let free = !bits[w] & mask;
        if free != 0 {
            return Some((w * 64 + free.trailing_zeros() as usize) as u32);
        }
        (w, mask) = (w + 1, !0);
    }
    None
}

/// One forward–backward pass from `cur`: the reversed DAG placed with the move that started
/// last going first, then the forward DAG by the latest starts that allows; the parents
/// chosen as `cur`'s were, within `cap` (`place`).
fn forward_backward(
    mv: &Moves<'_>,
    cur: &Timeline,
    cap: u32,
    cancelled: &dyn Fn() -> bool,
) -> Result<Timeline, SynthError> {
    let mut par = cur.par.clone();
    let last = cur.start.iter().copied().max().unwrap_or(0);
    let key: Vec<u32> = cur.start.iter().map(|&s| last - s).collect();
    let (back, back_len) = place(mv, &mut par, true, &key, cap, cancelled)?;
    let key: Vec<u32> = back.iter().map(|&s| back_len - 1 - s).collect();
    let (start, len) = place(mv, &mut par, false, &key, cap, cancelled)?;
    Ok(Timeline { start, len, par, chosen: cur.chosen })
}

/// The forward–backward timeline of every move of `mv`, from the built trees' parents: the
/// timeline and the floor of its kind where its passes stop (`Moves::floor`). The passes
/// are made both with every move on its tree's parent and with the parents chosen as the moves
/// are placed, the shorter kept (ties to the fixed parents): in full where `restarted` (the
/// restarts that follow cost ten times the passes, and which start is the better shows only at
/// the end: torus:16x16 less three links at 64 MiB, 171 trees of three chunks, fixed 95 and
/// chosen 92 timesteps, the fixed shorter after one pass), else the first pass and one more
/// each, the passes going on from the shorter. Where a link carries hundreds of moves against a
/// tree's height of tens, the trees' own balance is what the timeline needs and the fixed
/// parents reach it (torus:16x16 less three links at 64 MiB in 1024 trees: 514 timesteps, the
/// busiest link's load, against 517 with the parents chosen); where it carries a few times a
/// tree's height, the choice is what lets the links keep busy (in 256 trees of four chunks on
/// torus:32x32 less a link: 131 timesteps against 142).
pub(super) fn timeline(
    mv: &Moves<'_>,
    restarted: bool,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Timeline, u32), SynthError> {
    let total = mv.count();
    let floor = mv.t.busiest();
    // The first pass: tree by tree, within one the partials from the deepest NPUs first and
    // the results to the shallowest (its breadth-first order, reversed for the partials).
    let (n, units) = (mv.t.n, mv.t.roots.len());
    let mut depth_rank = vec![0u32; mv.t.order.len()];
    for u in 0..units {
        for (k, &v) in mv.t.order[u * n..(u + 1) * n].iter().enumerate() {
            depth_rank[u * n + v as usize] = k as u32;
        }
    }
    let first: Vec<u32> = (0..total)
        .map(|i| {
            let (u, v, up) = mv.decode(i);
            let k = depth_rank[u * n + v as usize];
            (u * 2 * n) as u32 + if up { n as u32 - k } else { n as u32 + k }
        })
        .collect();
    drop(depth_rank);
    // At millions of moves a pass costs a second or more, and the first two win most.
    let passes = if total > LARGE_MOVES { 2 } else { IMPROVEMENT_PASSES };
    let race = if restarted { passes } else { 1 };
    let mut kept: Option<Descent> = None;
    // At millions of moves, the fixed parents alone: a link there carries many times a tree's
    // height (on torus:64x64 less three links at 1 GiB, 1024 trees of four chunks, the choice
    // gained a timestep of 517 for 7 s more).
    let ways: &[bool] = if total > LARGE_MOVES { &[false] } else { &[false, true] };
    for &chosen in ways {
        if kept.as_ref().is_some_and(|k| k.best.len <= floor) {
            break;
        }
        let mut d = Descent::new(mv, &first, chosen, mv.floor(!chosen), cancelled)?;
        for _ in 0..race {
            d.pass(mv, cancelled)?;
        }
        if kept.as_ref().is_none_or(|k| d.best.len < k.best.len) {
            kept = Some(d);
        }
    }
    let mut kept = kept.expect("one way at least");
    for _ in race..passes {
        kept.pass(mv, cancelled)?;
    }
    Ok((kept.best, kept.floor))
}

/// Forward–backward passes from a first pass, the parents fixed or chosen: the shortest
/// timeline so far and the last, and how many passes in a row have not shortened it.
struct Descent {
    best: Timeline,
    current: Timeline,
    stale: usize,
    patience: usize,
    floor: u32,
}

impl Descent {
    /// The first pass by `first`, the parents fixed or `chosen`.
    fn new(
        mv: &Moves<'_>,
        first: &[u32],
        chosen: bool,
        floor: u32,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Descent, SynthError> {
        let mut par = Parents::of(mv.t);
        let cap = if chosen { u32::MAX } else { 0 };
        let (start, len) = place(mv, &mut par, false, first, cap, cancelled)?;
        let best = Timeline { start, len, par, chosen };
        tracing::trace!(target: "ccsynth::timing", chosen, first_len = best.len, floor, "trees: first pass");
        // Passes that may not shorten it before the search stops: one where a pass costs a
        // tenth of a second or more.
        let patience = if mv.count() > PATIENT_BELOW { 1 } else { 2 };
        Ok(Descent { current: best.clone(), best, stale: 0, patience, floor })
    }

    /// Whether the passes stop: at the floor, or out of patience.
    fn done(&self) -> bool {
        self.best.len <= self.floor || self.stale >= self.patience
    }

    /// One more forward–backward pass, unless `done`.
    fn pass(&mut self, mv: &Moves<'_>, cancelled: &dyn Fn() -> bool) -> Result<(), SynthError> {
        if self.done() {
            return Ok(());
        }
        let next = forward_backward(mv, &self.current, self.current.cap(self.best.len), cancelled)?;
        tracing::trace!(target: "ccsynth::timing", chosen = next.chosen, len = next.len, "trees: pass");
        // A pass that does not shorten the timeline may still reorder it for the next.
        if next.len < self.best.len {
            self.best = next.clone();
            self.stale = 0;
        } else {
            self.stale += 1;
        }
        self.current = next;
        Ok(())
    }
}

/// Restarts the forward–backward passes `rounds` times from `start` with noise in the
/// priorities: each restart's keys are the last kept timeline's, each plus a random fraction
/// of up to `NOISE_TIMESTEPS`, then `passes` plain passes. A restart within a timestep of the
/// last kept one is kept to restart from (a walk, not a descent); the shortest is returned.
/// Forward–backward alone stops in a local optimum (with the parents fixed, on torus:8x8x8 less
/// a link at 64 MiB, 171 trees of three chunks took 62 timesteps against a busiest link of 57;
/// six restarts 60, twenty 59). `rebalancing` (where the parents are chosen): every other
/// restart's noisy placements, from the first, move a move off its own parent's link wherever
/// that link carries more than a shorter timeline allows (`place`'s rebalancing), even to a
/// later timestep.
pub(super) fn perturbed(
    mv: &Moves<'_>,
    start: Timeline,
    rounds: usize,
    passes: usize,
    seed: u64,
    rebalancing: bool,
    cancelled: &dyn Fn() -> bool,
) -> Result<Timeline, SynthError> {
    let floor = mv.floor(!start.chosen);
    let mut rng = crate::rng::Rng::new(seed);
    let noise = 8 * NOISE_TIMESTEPS + 1;
    let mut best = start.clone();
    let mut cur = start;
    for round in 0..rounds {
        if best.len <= floor {
            break;
        }
        let rebalance = rebalancing && cur.chosen && round % 2 == 0;
        let mut par = cur.par.clone();
        let last = cur.start.iter().copied().max().unwrap_or(0);
        let key: Vec<u32> = cur.start.iter().map(|&s| (last - s) * 8 + rng.below(noise) as u32).collect();
        let cap = cur.cap(best.len);
        // Noisy keys need not follow the DAG: the heap's order.
        let (back, back_len) = place_noisy(mv, &mut par, true, &key, cap, rebalance, cancelled)?;
        let key: Vec<u32> = back.iter().map(|&s| (back_len - 1 - s) * 8 + rng.below(noise) as u32).collect();
        let (fwd, fwd_len) = place_noisy(mv, &mut par, false, &key, cap, rebalance, cancelled)?;
        let mut next = Timeline { start: fwd, len: fwd_len, par, chosen: cur.chosen };
        for _ in 0..passes {
            let again = forward_backward(mv, &next, cap, cancelled)?;
            if again.len <= next.len {
                next = again;
            }
        }
        if next.len < best.len {
            best = next.clone();
        }
        if next.len <= cur.len + 1 {
            cur = next;
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, CollectiveKind, CollectiveSpec};
    use crate::synth::trees::{build::build_trees, fabric};
    use crate::topology::{Failures, parse_spec};

    /// Why `timeline` (forward, or backward with `rev`) of `mv`'s moves under `par` is not a
    /// timeline: a parent not one hop nearer its root, a move before one it waits for, two
    /// moves on a link in one timestep, or `len` not the timesteps.
    fn wrong(mv: &Moves<'_>, par: &Parents, start: &[u32], len: u32, rev: bool) -> Option<String> {
        let (f, t) = (mv.f, mv.t);
        let n = t.n;
        // Backward, time runs from the end: the forward conditions on the starts mirrored.
        let at = |i: usize| if rev { len - 1 - start[i] } else { start[i] };
        let mut used = std::collections::HashSet::new();
        for u in 0..t.roots.len() {
            let root = t.roots[u];
            let depth = &t.depth[u * n..(u + 1) * n];
            let mut reduced = 0;
            for v in (0..n as u32).filter(|&v| v != root) {
                let (a, b) = (par.up[u * n + v as usize], par.down[u * n + v as usize]);
                for p in [a, b] {
                    if !f.neighbours(v).iter().any(|&(x, _)| x == p) || depth[p as usize] + 1 != depth[v as usize] {
                        return Some(format!("tree {u}: NPU {v}'s parent {p} is not one hop nearer the root"));
                    }
                }
                let (up, down) = (mv.id(u, v, true), mv.id(u, v, false));
                for (i, x, y) in [(up, v, a), (down, b, v)] {
                    let e = f.neighbours(x).iter().find(|&&(z, _)| z == y).unwrap().1;
                    if !used.insert((f.link(e, x, y), start[i])) {
                        return Some(format!("two moves on link {x}->{y} at timestep {}", start[i]));
                    }
                }
                if a == root {
                    reduced = reduced.max(at(up) + 1);
                } else if at(mv.id(u, a, true)) <= at(up) {
                    return Some(format!("tree {u}: NPU {a}'s partial leaves before {v}'s arrives"));
                }
            }
            for v in (0..n as u32).filter(|&v| v != root) {
                let b = par.down[u * n + v as usize];
                let ready = if b == root { reduced } else { at(mv.id(u, b, false)) + 1 };
                if at(mv.id(u, v, false)) < ready {
                    return Some(format!("tree {u}: NPU {v}'s result leaves {b} before it has it"));
                }
            }
        }
        let last = (0..mv.count()).map(|i| start[i]).max().unwrap_or(0);
        (last + 1 != len).then(|| format!("{len} timesteps, the last move at {last}"))
    }

    /// Each directed link's moves under `par`.
    fn loads(mv: &Moves<'_>, par: &Parents) -> Vec<u32> {
        let (f, t) = (mv.f, mv.t);
        let mut load = vec![0u32; 2 * f.edges];
        for u in 0..t.roots.len() {
            for v in (0..t.n as u32).filter(|&v| v != t.roots[u]) {
                for (x, y) in [(v, par.up[u * t.n + v as usize]), (par.down[u * t.n + v as usize], v)] {
                    let e = f.neighbours(x).iter().find(|&&(z, _)| z == y).unwrap().1;
                    load[f.link(e, x, y) as usize] += 1;
                }
            }
        }
        load
    }

    /// `place` on one set of trees, forward and backward, with keys that follow the DAG (the
    /// first pass's, and a pass's from the last timeline) and noisy ones, the parents fixed
    /// (`cap` 0: they stay as they were) and chosen within `cap` (no link ends above the larger
    /// of its load before and the cap).
    fn check(spec: &str, failed: &[[usize; 2]], chunks: u32, group: usize, seed: u64, cap: u32) -> Result<(), String> {
        let t = parse_spec(spec).unwrap();
        let Ok(t) = t.with_failures(&Failures { links: failed.to_vec(), ..Failures::default() }) else { return Ok(()) };
        let spec_c = CollectiveSpec::new(CollectiveKind::AllReduce, 1 << 20).with_chunks_per_npu(chunks);
        let Ok(c) = Collective::build(&spec_c, &t) else { return Ok(()) };
        let Some(f) = fabric(&t, &c, group) else { return Ok(()) };
        let trees = build_trees(&f, c.num_chunks.div_ceil(group), seed, &|| false).unwrap();
        let mv = Moves::new(&f, &trees);
        if mv.floor(true) < trees.busiest() || mv.floor(false) != trees.busiest() {
            return Err(format!("{spec} less {failed:?}: the floors {} and {}", mv.floor(true), mv.floor(false)));
        }
        let no = &|| false;
        let mut rng = crate::rng::Rng::new(seed);
        let mut par = Parents::of(&trees);
        let first: Vec<u32> = (0..mv.count())
            .map(|i| {
                let (u, v, up) = mv.decode(i);
                let d = trees.depth[u * trees.n + v as usize];
                (u * 2 * trees.n) as u32 + if up { trees.n as u32 - d } else { trees.n as u32 + d }
            })
            .collect();
        let mut key = first;
        let mut noisy = false;
        for round in 0..6 {
            let rev = round % 2 == 1;
            let before = (par.clone(), loads(&mv, &par));
            let (start, len) = if noisy {
                place_noisy(&mv, &mut par, rev, &key, cap, seed.is_multiple_of(2), no)
            } else {
                place(&mv, &mut par, rev, &key, cap, no)
            }
            .map_err(|e| format!("{e}"))?;
            let what =
                format!("{spec} less {failed:?}, {chunks} chunks in {group}s, seed {seed}, cap {cap}, round {round}");
            if let Some(e) = wrong(&mv, &par, &start, len, rev) {
                return Err(format!("{what}: {e}"));
            }
            // No timeline on the trees' own parents is shorter than their floor.
            if cap == 0 && len < mv.floor(true) {
                return Err(format!("{what}: {len} timesteps, under the floor {}", mv.floor(true)));
            }
            if cap == 0 && par != before.0 {
                return Err(format!("{what}: a fixed parent changed"));
            }
            if let Some(l) = (0..2 * f.edges).find(|&l| loads(&mv, &par)[l] > before.1[l].max(cap)) {
                return Err(format!("{what}: link {l} above the cap"));
            }
            // The next round's keys: this timeline's order for the other direction (they follow
            // the DAG under the parents it took), with noise every other time.
            noisy = round % 4 == 1;
            key = start.iter().map(|&s| (len - 1 - s) * 8 + if noisy { rng.below(25) as u32 } else { 0 }).collect();
        }
        Ok(())
    }

    proptest::proptest! {
        /// On random tori, less up to two random links (where they stay connected), at any
        /// chunking, group, seed and cap: `place` gives a timeline of the trees' moves whose
        /// parents are one hop nearer the root, with every move after those it waits for and
        /// one move a link and timestep, the fixed parents kept and the chosen ones within the
        /// cap.
        #[test]
        fn placed_moves_make_a_timeline(
            a in 2usize..7,
            b in 2usize..7,
            cut in proptest::collection::vec((0usize..36, 0usize..4), 0..3),
            chunks in 1u32..4,
            group in 1usize..4,
            seed in 0u64..1000,
            cap in proptest::prop_oneof![proptest::strategy::Just(0u32), 1u32..40, proptest::strategy::Just(u32::MAX)],
        ) {
            let n = a * b;
            let failed: Vec<[usize; 2]> = cut
                .iter()
                .map(|&(v, d)| {
                    let v = v % n;
                    let (x, y) = (v % a, v / a);
                    let w = match d { 0 => (x + 1) % a + y * a, 1 => x + ((y + 1) % b) * a, 2 => (x + a - 1) % a + y * a, _ => x + ((y + b - 1) % b) * a };
                    [v, w]
                })
                .filter(|[v, w]| v != w)
                .collect();
            if let Err(e) = check(&format!("torus:{a}x{b}"), &failed, chunks, group, seed, cap) {
                proptest::prop_assert!(false, "{}", e);
            }
        }
    }

    /// The trees of `spec` less `links` at 64 MiB, `chunks` per NPU, `group` a message, seed 0.
    fn trees_of(spec: &str, links: &[[usize; 2]], chunks: u32, group: usize) -> (Fabric, Trees) {
        let t = parse_spec(spec)
            .unwrap()
            .with_failures(&Failures { links: links.to_vec(), ..Failures::default() })
            .unwrap();
        let spec_c = CollectiveSpec::new(CollectiveKind::AllReduce, 64 << 20).with_chunks_per_npu(chunks);
        let c = Collective::build(&spec_c, &t).unwrap();
        let f = fabric(&t, &c, group).unwrap();
        let trees = build_trees(&f, c.num_chunks.div_ceil(group), 0, &|| false).unwrap();
        (f, trees)
    }

    /// Every pass of a descent, fixed or chosen, from the first pass's keys: its timesteps.
    fn descent(mv: &Moves<'_>, chosen: bool) -> u32 {
        let t = mv.t;
        let first: Vec<u32> = (0..mv.count())
            .map(|i| {
                let (u, v, up) = mv.decode(i);
                let k = t.order[u * t.n..(u + 1) * t.n].iter().position(|&x| x == v).unwrap() as u32;
                (u * 2 * t.n) as u32 + if up { t.n as u32 - k } else { t.n as u32 + k }
            })
            .collect();
        let mut d = Descent::new(mv, &first, chosen, t.busiest(), &|| false).unwrap();
        for _ in 0..IMPROVEMENT_PASSES {
            d.pass(mv, &|| false).unwrap();
        }
        d.best.len
    }

    /// Where a link carries a few times a tree's height, the links stay busy when the moves
    /// choose their parents: torus:32x32 less a link at 64 MiB in 256 trees of four chunks
    /// (busiest link 128, trees 32 hops high) takes 142 timesteps with the trees' parents and
    /// 131 with the parents chosen, and the timeline keeps the chosen.
    #[test]
    fn chosen_parents_keep_the_links_busy() {
        let (f, trees) = trees_of("torus:32x32", &[[5, 6]], 1, 4);
        let mv = Moves::new(&f, &trees);
        assert_eq!(trees.busiest(), 128);
        assert_eq!((descent(&mv, false), descent(&mv, true)), (142, 131));
        let (tl, floor) = timeline(&mv, false, &|| false).unwrap();
        assert_eq!((tl.len, tl.chosen, floor), (131, true, 128));
        assert!(wrong(&mv, &tl.par, &tl.start, tl.len, false).is_none());
    }

    /// Where a link carries many times a tree's height, the trees' own balance is what the
    /// timeline needs: torus:16x16 less three links at 64 MiB in 512 trees (busiest link 257,
    /// trees 16 hops high) takes 258 timesteps with the trees' parents and 260 chosen, and the
    /// timeline keeps the fixed.
    #[test]
    fn fixed_parents_where_links_carry_many_trees() {
        let (f, trees) = trees_of("torus:16x16", &[[0, 1], [17, 18], [100, 101]], 2, 1);
        let mv = Moves::new(&f, &trees);
        assert_eq!(trees.busiest(), 257);
        assert_eq!((descent(&mv, false), descent(&mv, true)), (258, 260));
        let (tl, _) = timeline(&mv, true, &|| false).unwrap();
        assert_eq!((tl.len, tl.chosen), (258, false));
        assert_eq!(tl.par, Parents::of(&trees));
    }

    /// The same on fabrics other than 2-D tori: a hypercube (up to six neighbours nearer a
    /// root), a mesh less a link, and a 3-D torus less a link.
    #[test]
    fn placed_moves_make_a_timeline_elsewhere() {
        for (spec, failed) in [("hypercube:6", vec![]), ("mesh:5x4", vec![[6, 7]]), ("torus:4x4x4", vec![[0, 1]])] {
            for cap in [0, 30, u32::MAX] {
                check(spec, &failed, 1, 1, 7, cap).unwrap();
                check(spec, &failed, 2, 3, 8, cap).unwrap();
            }
        }
    }

    /// The floor by hand: on torus:2x2 (the ring 0-1-3-2), trees rooted at 0 with NPU 3 under
    /// NPU 1. In one tree 3's partial takes two hops up and the result two down, 4 timesteps,
    /// each link carrying one move. In two alike link 3->1 carries both partials, the second a
    /// timestep behind, 5 (the load, 2, plus the three hops after it). The fixed parents'
    /// timelines end there; with the trees' loads alone the floors would be 1 and 2.
    #[test]
    fn the_floor_counts_the_hops_before_and_after_a_link() {
        let t = parse_spec("torus:2x2").unwrap();
        let c = Collective::build(&CollectiveSpec::new(CollectiveKind::AllReduce, 1 << 20), &t).unwrap();
        let f = fabric(&t, &c, 1).unwrap();
        for (units, floor) in [(1usize, 4u32), (2, 5)] {
            let mut load = vec![0u32; f.edges];
            for (v, p) in [(1, 0), (2, 0), (3, 1)] {
                load[crate::synth::trees::build::edge_between(&f, v, p) as usize] += units as u32;
            }
            let trees = Trees {
                n: 4,
                roots: vec![0; units],
                parent: [u32::MAX, 0, 0, 1].repeat(units),
                order: [0, 1, 2, 3].repeat(units),
                depth: [0, 1, 1, 2].repeat(units),
                load,
            };
            let mv = Moves::new(&f, &trees);
            assert_eq!((trees.busiest(), mv.floor(true), mv.floor(false)), (units as u32, floor, units as u32));
            let d = descent(&mv, false);
            assert_eq!(d, floor, "{units} trees");
        }
    }

    /// On dragonfly:4:5 in 40 trees the fixed parents' timeline reaches its floor, two over
    /// the busiest link's load, and the restarts end there without a placement (on this
    /// fabric they never shortened a timeline: dragonfly:4:5 all-reduce at 32 MiB, twenty
    /// restarts of each of five runs, the wall 1.7 times the old trees').
    #[test]
    fn where_the_timeline_reaches_its_floor_the_restarts_stop() {
        let (f, trees) = trees_of("dragonfly:4:5", &[], 2, 1);
        let mv = Moves::new(&f, &trees);
        let (tl, floor) = timeline(&mv, true, &|| false).unwrap();
        assert_eq!((trees.busiest(), floor, tl.len, tl.chosen), (20, 22, 22, false));
        let placed = std::cell::Cell::new(0);
        let counted = || {
            placed.set(placed.get() + 1);
            false
        };
        let walked = perturbed(&mv, tl.clone(), 20, 2, 0, false, &counted).unwrap();
        assert_eq!((walked.len, placed.get()), (22, 0));
    }
}
