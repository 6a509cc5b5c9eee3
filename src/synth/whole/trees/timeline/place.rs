//! The trees' placement: every move placed one at a time in priority order at the first
//! timestep its link has free after the moves it waits for, each choosing its parent as it goes
//! (`place`), in key order sorted up front or through a flat bucket queue of the ready moves.

use super::{Moves, Parents};
use crate::synth::SynthError;
use crate::synth::trees::Fabric;
use crate::synth::trees::build::Trees;
use taken::Taken;

mod taken;

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
pub(super) fn place_noisy(
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
    placed.ok_or(SynthError::Greedy(crate::synth::GreedyError::Unsupported("trees: a move was never ready")))
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

/// `place`, in the `order` given: the moves taken off the queue one at a time, each placed with
/// the parent it chooses (`Placer::place_one`), then the parents and starts handed back.
fn place_in(
    mv: &Moves<'_>,
    par: &mut Parents,
    rev: bool,
    key: &[u32],
    cap: u32,
    order: Order,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<(Vec<u32>, u32)>, SynthError> {
    let mut placer = Placer::new(mv, par, rev, key, cap, order);
    let mut placed = 0usize;
    // Records that fit in a core's cache need no fetching ahead (on dragonfly:4:5, a fifth of
    // the placement's time went to it).
    let fetch = std::mem::size_of_val(&placer.nodes[..]) > PREFETCH_ABOVE_BYTES;
    loop {
        let i = match &mut placer.queue {
            Queue::Sorted(order, at) => {
                *at += 1;
                order.get(*at - 1).map(|&i| i as usize)
            }
            Queue::Heap(h) => h.pop(),
        };
        if fetch {
            placer.prefetch_ahead();
        }
        let Some(i) = i else { break };
        if placed.is_multiple_of(1 << 16) && cancelled() {
            return Err(SynthError::Cancelled);
        }
        placed += 1;
        if !placer.place_one(i)? {
            return Ok(None);
        }
    }
    if placed != mv.count() {
        return Ok(None);
    }
    Ok(Some(placer.finish(par)))
}

/// What `place_in`'s moves share as they are placed one at a time: the NPUs' records, the
/// links' loads and taken timesteps, the moves still to come.
struct Placer<'a> {
    mv: &'a Moves<'a>,
    f: &'a Fabric,
    t: &'a Trees,
    key: &'a [u32],
    n: usize,
    cap: u32,
    rebalance: bool,
    /// Forward the partials reduce and the results broadcast; backward the other way round.
    reducing_up: bool,
    nodes: Vec<Node>,
    /// Each link's moves under `par`, kept as moves change parents.
    load: Vec<u32>,
    children: Children,
    queue: Queue,
    taken: Taken,
    len: u32,
}

/// The children lists of the broadcasting kind, for the heap alone (in key order up front a
/// move's turn comes after its parent's anyway): `first[u * n + q]`, then `next[u * n + c]`.
struct Children {
    first: Vec<u32>,
    next: Vec<u32>,
}

/// The move being placed: NPU v's in tree u, partial (`up`) or result, of the reducing kind or
/// not; its record `me` when its turn came, and `now` the parent it has so far.
#[derive(Clone, Copy)]
struct Turn {
    u: usize,
    v: u32,
    up: bool,
    reducing: bool,
    root: u32,
    now: u32,
    me: Node,
}

/// The parent a move takes: `p`, on `link` at `slot`; `was_link` its link to the one it had.
struct Choice {
    p: u32,
    slot: u32,
    link: u32,
    was_link: u32,
}

impl<'a> Placer<'a> {
    /// The state before the first move: the records and loads from `par`, the queue in `order`.
    fn new(mv: &'a Moves<'a>, par: &Parents, rev: bool, key: &'a [u32], cap: u32, order: Order) -> Placer<'a> {
        let (sorted, rebalance) = match order {
            Order::Sorted => (true, false),
            Order::Queue { rebalance } => (false, rebalance),
        };
        let (f, t) = (mv.f, mv.t);
        let reducing_up = !rev;
        let (red, bc) = if reducing_up { (&par.up, &par.down) } else { (&par.down, &par.up) };
        let mut nodes = records(mv, red, bc);
        let load = count_under(mv, par, red, &mut nodes, cap);
        let top = key.iter().copied().max().unwrap_or(0) as usize;
        let (queue, children) = if sorted {
            (sorted_queue(key, top, mv.count()), Children { first: Vec::new(), next: Vec::new() })
        } else {
            heap_queue(mv, key, bc, &nodes, top, reducing_up)
        };
        let words = (t.busiest() as usize * 2).div_ceil(64) + 1;
        let taken = Taken { bits: vec![0u64; 2 * f.edges * words], words, links: 2 * f.edges };
        Placer { mv, f, t, key, n: t.n, cap, rebalance, reducing_up, nodes, load, children, queue, taken, len: 0 }
    }

    /// The move a few turns ahead: its NPU's and its parents' records fetched now, so that
    /// they are in cache when its turn comes (the records of a few hundred trees do not fit
    /// in it, and the turns go from tree to tree).
    #[inline]
    fn prefetch_ahead(&self) {
        let ahead = match &self.queue {
            Queue::Sorted(order, at) => order.get(*at + PREFETCH_AHEAD),
            Queue::Heap(h) => h.ahead(PREFETCH_AHEAD),
        };
        let Some(&ahead) = ahead else { return };
        let n = self.n;
        let (u, v, _) = self.mv.decode(ahead as usize);
        let x = u * n + v as usize;
        prefetch(&self.nodes[x]);
        let nearer = self.mv.nearer[x];
        for (k, &(p, _)) in self.f.neighbours(v).iter().enumerate().take(32) {
            if nearer & (1 << k) != 0 {
                prefetch(&self.nodes[u * n + p as usize]);
            }
        }
    }

    /// Places move `i` at the first timestep free on the link to the parent it chooses: that
    /// timestep taken, the load moved where it changed links, its records updated and the
    /// moves that waited for it queued. `Ok(false)` where, in key order, its turn came before
    /// a move it waits for (the heap holds no such move).
    #[inline]
    fn place_one(&mut self, i: usize) -> Result<bool, SynthError> {
        let (u, v, up) = self.mv.decode(i);
        let reducing = up == self.reducing_up;
        let root = self.t.roots[u];
        let tree = &self.nodes[u * self.n..(u + 1) * self.n];
        let me = tree[v as usize];
        let now = if reducing { me.red } else { me.bc };
        if matches!(self.queue, Queue::Sorted(..)) {
            let ready = if reducing {
                me.pending == 0
            } else if now == root {
                tree[root as usize].pending == 0
            } else {
                tree[now as usize].s_bc != u32::MAX
            };
            if !ready {
                return Ok(false);
            }
        }
        let m = Turn { u, v, up, reducing, root, now, me };
        let Some(c) = self.choose(&m) else {
            // Its parent in `par` is always a candidate; reaching here is a bug, not an input.
            return Err(SynthError::Greedy(crate::synth::GreedyError::Unsupported("trees: a move has no parent")));
        };
        let cost = self.f.link_cost(c.link);
        self.taken.take(c.link, c.slot, cost);
        if c.link != c.was_link {
            self.load[c.was_link as usize] -= self.f.link_cost(c.was_link);
            self.load[c.link as usize] += cost;
        }
        self.len = self.len.max(c.slot + cost);
        self.settle(&m, &c);
        Ok(true)
    }

    /// Of the NPU's neighbours one hop nearer the root, the parent whose link starts the move
    /// first (ties to the one it had); another only on a link under `cap`, and with
    /// `rebalance` its own last where its link is over `cap`. A reducing move goes only to a
    /// parent whose own is still to come (the root has none), a broadcasting one only from a
    /// parent that has the result. `None` where no neighbour can take it.
    #[inline]
    fn choose(&mut self, m: &Turn) -> Option<Choice> {
        let (f, n, cap) = (self.f, self.n, self.cap);
        let tree = &self.nodes[m.u * n..(m.u + 1) * n];
        // (own link over the cap, slot, not the parent it had, parent, link)
        let mut pick = (true, u32::MAX, true, u32::MAX, 0u32);
        let mut was_link = u32::MAX;
        for (k, (&(p, _), &out)) in f.neighbours(m.v).iter().zip(f.out_links(m.v)).enumerate() {
            if (k < 32 && m.me.nearer & (1 << k) == 0) || (cap == 0 && p != m.now) {
                continue;
            }
            let them = &tree[p as usize];
            if them.depth + 1 != m.me.depth {
                continue;
            }
            let link = if m.up { out } else { out ^ 1 };
            let cost = f.link_cost(link);
            if p == m.now {
                was_link = link;
            } else if self.load[link as usize] + cost > cap {
                continue;
            }
            let ready = if m.reducing {
                if p != m.root && them.s_red != u32::MAX {
                    continue;
                }
                m.me.arrived
            } else if p == m.root {
                if them.pending != 0 {
                    continue;
                }
                them.arrived
            } else {
                match them.s_bc {
                    u32::MAX => continue,
                    s => s + self.bc_cost(m.u, p),
                }
            };
            let slot = self.taken.free_from(link, ready, cost);
            let over = self.rebalance && p == m.now && self.load[link as usize] > cap;
            if (over, slot, p != m.now) < (pick.0, pick.1, pick.2) {
                pick = (over, slot, p != m.now, p, link);
            }
        }
        let (_, slot, _, p, link) = pick;
        (p != u32::MAX).then_some(Choice { p, slot, link, was_link })
    }

    /// Timesteps NPU q's result took to come down to it in tree u, once placed (from its
    /// broadcasting parent; one where every link is alike).
    #[inline]
    fn bc_cost(&self, u: usize, q: u32) -> u32 {
        self.f.cost_between(q, self.nodes[u * self.n + q as usize].bc)
    }

    /// The move's record as placed, and the moves that waited for it queued: of the reducing
    /// kind, its parent's arrival moved on and the parent it had, once no longer waiting for
    /// any child, queued (the root: its children's broadcasting moves); of the broadcasting
    /// kind, its children's.
    #[inline]
    fn settle(&mut self, m: &Turn, c: &Choice) {
        let (u, n, now, root) = (m.u, self.n, m.now, m.root);
        let tree = &mut self.nodes[u * n..(u + 1) * n];
        if m.reducing {
            tree[m.v as usize].s_red = c.slot;
            tree[m.v as usize].red = c.p;
            let a = &mut tree[c.p as usize].arrived;
            *a = (*a).max(c.slot + self.f.link_cost(c.link));
            // The parent it had no longer waits for it (the new one never counted it).
            let was = &mut tree[now as usize].pending;
            *was -= 1;
            if *was == 0 && matches!(self.queue, Queue::Heap(_)) {
                if now == root {
                    self.release(u, root);
                } else {
                    push(&mut self.queue, self.key, self.mv.id(u, now, self.reducing_up));
                }
            }
        } else {
            tree[m.v as usize].s_bc = c.slot;
            tree[m.v as usize].bc = c.p;
            if matches!(self.queue, Queue::Heap(_)) {
                self.release(u, m.v);
            }
        }
    }

    /// Queues the broadcasting moves of NPU q's children in tree u, now that q has the result.
    #[inline]
    fn release(&mut self, u: usize, q: u32) {
        let n = self.n;
        let mut c = self.children.first[u * n + q as usize];
        while c != u32::MAX {
            push(&mut self.queue, self.key, self.mv.id(u, c, !self.reducing_up));
            c = self.children.next[u * n + c as usize];
        }
    }

    /// Every move placed: `par` becomes the parents taken; each move's start, and the timesteps.
    fn finish(&self, par: &mut Parents) -> (Vec<u32>, u32) {
        let (mv, t, n, units, reducing_up) = (self.mv, self.t, self.n, self.t.roots.len(), self.reducing_up);
        let mut start = vec![0u32; mv.count()];
        let (red, bc) = if reducing_up { (&mut par.up, &mut par.down) } else { (&mut par.down, &mut par.up) };
        for u in 0..units {
            let root = t.roots[u];
            for v in 0..n as u32 {
                if v == root {
                    continue;
                }
                let x = &self.nodes[u * n + v as usize];
                red[u * n + v as usize] = x.red;
                bc[u * n + v as usize] = x.bc;
                start[mv.id(u, v, reducing_up)] = x.s_red;
                start[mv.id(u, v, !reducing_up)] = x.s_bc;
            }
        }
        (start, self.len)
    }
}

/// Every NPU's record in every tree before any move is placed, its parents `red` and `bc`.
fn records(mv: &Moves<'_>, red: &[u32], bc: &[u32]) -> Vec<Node> {
    let t = mv.t;
    (0..t.roots.len() * t.n)
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
        .collect()
}

/// Each link's moves under `par` (its load), and each NPU's children of the reducing kind
/// (`Node::pending`, which the reducing move waits for).
fn count_under(mv: &Moves<'_>, par: &Parents, red: &[u32], nodes: &mut [Node], cap: u32) -> Vec<u32> {
    let (f, n, units) = (mv.f, mv.t.n, mv.t.roots.len());
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
                    let (up, down) = (link_to(v, a), link_to(v, b) ^ 1);
                    load[up as usize] += f.link_cost(up);
                    load[down as usize] += f.link_cost(down);
                }
                nodes[u * n + red[u * n + v as usize] as usize].pending += 1;
            }
        }
    }
    load
}

/// Every move in `(key, id)` order, by a counting sort over the keys (stable: ties by id).
fn sorted_queue(key: &[u32], top: usize, total: usize) -> Queue {
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
}

/// The heap holding the moves ready before any is placed (the reducing moves of NPUs with no
/// children of that kind, `up` as `Placer::reducing_up`), and the children lists (from `bc`)
/// by which it is fed later.
fn heap_queue(mv: &Moves<'_>, key: &[u32], bc: &[u32], nodes: &[Node], top: usize, up: bool) -> (Queue, Children) {
    let (t, n, units) = (mv.t, mv.t.n, mv.t.roots.len());
    let (mut first, mut next) = (vec![u32::MAX; units * n], vec![u32::MAX; units * n]);
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
                let i = mv.id(u, v, up);
                heap.push(key[i], i);
            }
        }
    }
    (Queue::Heap(heap), Children { first, next })
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
