//! The trees' placement: every move placed one at a time in priority order at the first
//! timestep its link has free after the moves it waits for, each choosing its parent as it goes
//! (`place`), in key order sorted up front or through a flat bucket queue of the ready moves.

use super::{Moves, Parents};
use crate::synth::SynthError;

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
