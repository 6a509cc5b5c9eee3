//! The transfers of a schedule in memory: columns of 32-bit fields (struct of arrays), not a
//! vector of `Transfer` structs. A synthesized all-reduce on 4096 NPUs holds 33.5 million
//! single-chunk transfers; as columns they take 17 bytes each (step, src, dst, chunk, flags)
//! instead of a 48-byte struct. What few transfers have beyond one chunk (a chunk list, a
//! path, destination slots) lives in side tables; a chunk list (by its range, or by its
//! contents) and a route are stored once however many transfers carry them. The wire format is the same array of
//! transfer objects (`Serialize`/`Deserialize` read and write it element by element).

use super::{ChunkList, Form, Op, Route, Transfer};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use std::sync::Arc;

pub(super) const REDUCE: u8 = 1;
/// `chunk[i]` indexes `lists` (a chunk list of other than one chunk).
pub(super) const MANY: u8 = 2;
/// `route[i]` indexes `routes`.
pub(super) const PATH: u8 = 4;
/// The transfer has an entry in `slots`.
pub(super) const SLOTS: u8 = 8;
/// No route in the `route` column.
const NO_ROUTE: u32 = u32::MAX;

/// A schedule's transfers, in array order (the order of the JSON array), as columns.
#[derive(Clone, Default)]
pub struct Transfers {
    pub(super) step: Vec<u32>,
    pub(super) src: Vec<u32>,
    pub(super) dst: Vec<u32>,
    /// The transfer's one chunk, or with `MANY` its list's index in `lists`.
    pub(super) chunk: Vec<u32>,
    pub(super) flags: Vec<u8>,
    pub(super) lists: Vec<Arc<Vec<u32>>>,
    /// Lists of evenly spaced chunks by (first chunk, length, spacing): such a list is stored
    /// once, however many transfers carry it (each message of a recursive halving carries one of
    /// a few ranges; bucket's messages on a 4096-NPU torus carry one of a few thousand lists of
    /// every fourth chunk, 4 M times).
    ranges: HashMap<(u32, u32, u32), u32>,
    /// Other lists by a hash of their contents: a list carried by many transfers is stored
    /// once whether the producer shared it or a reader parsed it once per transfer (bucket's
    /// all-gather on torus:16x32x32 carries each plane's chunks, 2-D progressions, in thousands
    /// of messages: 520 M chunk ids as they came, 4,256 lists stored once). On a hash
    /// collision between different lists the newcomer is simply stored again.
    uneven: HashMap<u64, u32>,
    /// Empty until a transfer has a path; then one entry per transfer (`NO_ROUTE` for none).
    pub(super) route: Vec<u32>,
    /// The distinct routes (by pointer: transfers built over one TEN edge share its route).
    pub(super) routes: Vec<Route>,
    route_ids: HashMap<usize, u32>,
    /// `(transfer, dst_chunks)` for the transfers with `SLOTS`, by transfer index.
    pub(super) slots: Vec<(u32, ChunkList)>,
    /// The digest of the data flow (`crate::validate::flow`) of the schedule these transfers
    /// were in when the validator replayed it and found nothing wrong. A route changes no data
    /// flow, so it keeps the stamp (a repair's detours); every other edit drops it, and a
    /// stamp whose digest is not the schedule's own any more is ignored.
    flow_stamp: std::sync::OnceLock<[u8; 32]>,
}

/// One transfer read from the columns: the fields of `Transfer`, borrowed. Serializes exactly
/// as `Transfer` does (the compact form).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransferRef<'a> {
    pub step: u32,
    pub src: u32,
    pub dst: u32,
    pub chunks: &'a [u32],
    pub op: Op,
    pub path: Option<&'a Route>,
    pub dst_chunks: Option<&'a [u32]>,
}

impl Serialize for TransferRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        super::wire::WrittenTransfer { t: *self, form: Form::Compact, items: None }.serialize(s)
    }
}

impl<'a> TransferRef<'a> {
    /// The slots written at the destination.
    pub fn written(&self) -> &'a [u32] {
        self.dst_chunks.unwrap_or(self.chunks)
    }
    /// A move between two slots of one NPU: no link, no wire time.
    pub fn is_local(&self) -> bool {
        self.src == self.dst && self.dst_chunks.is_some()
    }
    /// How many chunks cross the wire: each distinct chunk once, however many slots it feeds.
    pub fn wire_chunks(&self) -> usize {
        if self.dst_chunks.is_none() || self.chunks.len() < 2 {
            return self.chunks.len();
        }
        let mut v = self.chunks.to_vec();
        v.sort_unstable();
        v.dedup();
        v.len()
    }
    /// The path's nodes, if it has one.
    pub fn path_nodes(&self) -> Option<&'a [u32]> {
        self.path.map(|p| &p[..])
    }
    /// The transfer as an owned `Transfer` (its chunk list and path shared, not copied).
    pub fn to_owned(&self) -> Transfer {
        Transfer { chunks: self.chunks.to_vec().into(), ..self.without_chunks() }
    }
}

impl Transfers {
    pub fn new() -> Transfers {
        Transfers::default()
    }

    pub fn with_capacity(n: usize) -> Transfers {
        let mut t = Transfers::default();
        t.reserve(n);
        t
    }

    pub fn reserve(&mut self, n: usize) {
        self.step.reserve_exact(n);
        self.src.reserve_exact(n);
        self.dst.reserve_exact(n);
        self.chunk.reserve_exact(n);
        self.flags.reserve_exact(n);
    }

    pub fn len(&self) -> usize {
        self.step.len()
    }

    pub fn is_empty(&self) -> bool {
        self.step.is_empty()
    }

    /// Bytes held by the columns and side tables (not counting shared lists and routes).
    pub fn heap_bytes(&self) -> usize {
        4 * (self.step.capacity() + self.src.capacity() + self.dst.capacity() + self.chunk.capacity())
            + self.flags.capacity()
            + 4 * self.route.capacity()
            + 8 * (self.lists.capacity() + self.routes.capacity())
            + std::mem::size_of::<(u32, ChunkList)>() * self.slots.capacity()
    }

    /// Transfer `i` (panics when out of range, as indexing does).
    #[inline]
    pub fn at(&self, i: usize) -> TransferRef<'_> {
        let f = self.flags[i];
        let chunks: &[u32] =
            if f & MANY != 0 { &self.lists[self.chunk[i] as usize] } else { std::slice::from_ref(&self.chunk[i]) };
        TransferRef {
            step: self.step[i],
            src: self.src[i],
            dst: self.dst[i],
            chunks,
            op: if f & REDUCE != 0 { Op::Reduce } else { Op::Copy },
            path: if f & PATH != 0 { Some(&self.routes[self.route[i] as usize]) } else { None },
            dst_chunks: if f & SLOTS != 0 { Some(self.slots_of(i)) } else { None },
        }
    }

    /// The step of transfer `i` (the replay's sort key, read without the rest).
    #[inline]
    pub fn step(&self, i: usize) -> u32 {
        self.step[i]
    }

    /// The chunk of transfer `i` when it reads and writes one chunk's own slot (no list, no
    /// destination slots): a look at two columns, for passes that skip most transfers.
    #[inline]
    pub fn single_chunk(&self, i: usize) -> Option<u32> {
        (self.flags[i] & (MANY | SLOTS) == 0).then_some(self.chunk[i])
    }

    /// The index of transfer `i`'s chunk list in `lists()` when it carries one (and names no
    /// destination slots): transfers that share a list share its index, so a pass can work
    /// something out once per list instead of once per transfer.
    #[inline]
    pub fn list_index(&self, i: usize) -> Option<u32> {
        (self.flags[i] & (MANY | SLOTS) == MANY).then_some(self.chunk[i])
    }

    /// Chunk ids held in the distinct chunk lists: what the reader of the written transfers
    /// counts against `limits::MAX_LIST_ENTRIES` (it keeps the same lists).
    pub fn list_entries(&self) -> usize {
        self.lists.iter().map(|l| l.len()).sum()
    }

    /// Chunk ids held in the transfers' destination slots (each transfer's own list).
    pub fn slot_entries(&self) -> usize {
        self.slots.iter().map(|(_, l)| l.len()).sum()
    }

    /// The length of distinct list `l` (as `list_index` gives it).
    #[inline]
    pub fn list_len(&self, l: u32) -> usize {
        self.lists[l as usize].len()
    }

    /// Whether a transfer names destination slots (reads one slot, writes another).
    pub fn has_dst_slots(&self) -> bool {
        !self.slots.is_empty()
    }

    /// How many transfers carry each distinct list (as `list_index` numbers them).
    pub fn list_uses(&self) -> Vec<u64> {
        let mut uses = vec![0u64; self.lists.len()];
        for i in 0..self.len() {
            if let Some(l) = self.list_index(i) {
                uses[l as usize] += 1;
            }
        }
        uses
    }

    /// The distinct chunk lists (`list_index` indexes them).
    pub fn lists(&self) -> impl ExactSizeIterator<Item = &[u32]> + '_ {
        self.lists.iter().map(|l| &l[..])
    }

    /// The spacing of the evenly spaced chunk lists that carry the most chunk entries (1 when
    /// lists of consecutive chunks, or uneven ones, carry at least as many): what `SlotOrder`
    /// lays per-NPU tables out by.
    pub fn dominant_spacing(&self) -> u32 {
        if self.lists.is_empty() {
            return 1;
        }
        let uses = self.list_uses();
        let mut weight: HashMap<u32, u64> = HashMap::default();
        for (list, n) in self.lists.iter().zip(uses) {
            if n == 0 || list.len() < 2 {
                continue;
            }
            let d = list[1].wrapping_sub(list[0]);
            let even = d > 0 && list.windows(2).all(|w| w[1] == w[0].wrapping_add(d));
            *weight.entry(if even { d } else { 1 }).or_default() += n * list.len() as u64;
        }
        weight.into_iter().max_by_key(|&(d, w)| (w, std::cmp::Reverse(d))).map_or(1, |(d, _)| d)
    }

    /// Every transfer's step, in array order.
    pub fn steps(&self) -> &[u32] {
        &self.step
    }

    fn slots_of(&self, i: usize) -> &[u32] {
        let k = self.slots.binary_search_by_key(&(i as u32), |e| e.0).expect("a transfer with SLOTS has slots");
        &self.slots[k].1
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = TransferRef<'_>> + DoubleEndedIterator + Clone + '_ {
        (0..self.len()).map(move |i| self.at(i))
    }

    /// The transfers as owned structs (for tests and small schedules).
    pub fn to_vec(&self) -> Vec<Transfer> {
        (0..self.len()).map(|i| self.owned(i)).collect()
    }

    /// Changes the transfers as a vector of structs: for tests that break schedules on
    /// purpose, and for small rewrites. Rebuilds the columns.
    pub fn edit<R>(&mut self, f: impl FnOnce(&mut Vec<Transfer>) -> R) -> R {
        let mut v = self.to_vec();
        let r = f(&mut v);
        *self = v.into();
        r
    }

    pub fn push(&mut self, t: Transfer) {
        self.flow_stamp.take();
        let i = self.len() as u32;
        let mut flags = if t.op == Op::Reduce { REDUCE } else { 0 };
        let (chunk, many) = self.intern(t.chunks);
        if many {
            flags |= MANY;
        }
        if let Some(p) = t.path {
            flags |= PATH;
            if self.route.is_empty() {
                self.route = vec![NO_ROUTE; i as usize];
                self.route.reserve(self.step.capacity().saturating_sub(i as usize));
            }
            let key = Arc::as_ptr(&p.0) as usize;
            let id = *self.route_ids.entry(key).or_insert_with(|| {
                self.routes.push(p);
                (self.routes.len() - 1) as u32
            });
            self.route.push(id);
        } else if !self.route.is_empty() {
            self.route.push(NO_ROUTE);
        }
        if let Some(d) = t.dst_chunks {
            flags |= SLOTS;
            self.slots.push((i, *d));
        }
        self.step.push(t.step);
        self.src.push(t.src);
        self.dst.push(t.dst);
        self.chunk.push(chunk);
        self.flags.push(flags);
    }

    /// The `chunk` column's entry for `chunks`, and whether it indexes `lists`: a list is
    /// stored once by its range, or by its contents.
    fn intern(&mut self, chunks: ChunkList) -> (u32, bool) {
        let list = match chunks {
            ChunkList::One(c) => return (c, false),
            ChunkList::Many(list) => list,
        };
        let spacing = match list[..] {
            [a, b, ..] => b.wrapping_sub(a),
            _ => 1,
        };
        let even = !list.is_empty() && is_progression(&list, spacing);
        let lists = &mut self.lists;
        let mut add = |list| {
            lists.push(list);
            (lists.len() - 1) as u32
        };
        let id = if even {
            *self.ranges.entry((list[0], list.len() as u32, spacing)).or_insert_with(|| add(list))
        } else {
            let key = content_hash(&list);
            match self.uneven.get(&key) {
                Some(&id) if *self.lists[id as usize] == *list => id,
                seen => {
                    self.lists.push(list);
                    let id = (self.lists.len() - 1) as u32;
                    if seen.is_none() {
                        self.uneven.insert(key, id);
                    }
                    id
                }
            }
        };
        (id, true)
    }

    /// Sets the chunks of transfer `i` (one without destination slots); every other field
    /// stays. A repair cuts a detoured message into pieces with it, pushing the others.
    pub fn set_chunks(&mut self, i: usize, chunks: ChunkList) {
        assert!(self.flags[i] & SLOTS == 0, "set_chunks on a transfer with destination slots");
        self.flow_stamp.take();
        let (chunk, many) = self.intern(chunks);
        self.chunk[i] = chunk;
        if many {
            self.flags[i] |= MANY;
        } else {
            self.flags[i] &= !MANY;
        }
    }

    /// Sets the step of transfer `i`.
    pub fn set_step(&mut self, i: usize, step: u32) {
        self.flow_stamp.take();
        self.step[i] = step;
    }

    /// Sets (or with `None` clears) the route of transfer `i`; every other field stays.
    pub fn set_path(&mut self, i: usize, path: Option<Route>) {
        match path {
            Some(p) => {
                if self.route.is_empty() {
                    self.route = vec![NO_ROUTE; self.len()];
                }
                let key = Arc::as_ptr(&p.0) as usize;
                let id = *self.route_ids.entry(key).or_insert_with(|| {
                    self.routes.push(p);
                    (self.routes.len() - 1) as u32
                });
                self.route[i] = id;
                self.flags[i] |= PATH;
            }
            None => {
                if !self.route.is_empty() {
                    self.route[i] = NO_ROUTE;
                }
                self.flags[i] &= !PATH;
            }
        }
    }

    /// Sets the op of transfer `i`.
    pub fn set_op(&mut self, i: usize, op: Op) {
        self.flow_stamp.take();
        match op {
            Op::Reduce => self.flags[i] |= REDUCE,
            Op::Copy => self.flags[i] &= !REDUCE,
        }
    }

    /// The data-flow digest the validator stamped these transfers with (`stamp_flow`).
    pub(crate) fn flow_stamp(&self) -> Option<&[u8; 32]> {
        self.flow_stamp.get()
    }

    /// Stamps the transfers with the digest of the data flow the validator replayed and found
    /// valid (only the validator calls this; a second stamp is ignored).
    pub(crate) fn stamp_flow(&self, digest: [u8; 32]) {
        let _ = self.flow_stamp.set(digest);
    }

    /// Feeds `h` everything of the transfers a replay of the data flow reads, in array order:
    /// each transfer's step, ends, chunk (or chunk list) and op, the lists' contents and the
    /// destination slots; not the routes.
    pub(crate) fn hash_flow(&self, h: &mut impl FnMut(&[u32])) {
        h(&[self.len() as u32, self.lists.len() as u32, self.slots.len() as u32]);
        h(&self.step);
        h(&self.src);
        h(&self.dst);
        h(&self.chunk);
        let flags: Vec<u32> = self.flags.iter().map(|&f| (f & !PATH) as u32).collect();
        h(&flags);
        for l in &self.lists {
            h(&[l.len() as u32]);
            h(l);
        }
        for (i, d) in &self.slots {
            h(&[*i, d.len() as u32]);
            h(d);
        }
    }

    /// Keeps the transfers at `order`'s indices, in that order (a permutation, or a subset).
    pub fn permuted(&self, order: &[u32]) -> Transfers {
        if order.len() != self.len() {
            let mut out = Transfers::with_capacity(order.len());
            for &i in order {
                out.push(self.owned(i as usize));
            }
            return out;
        }
        // A permutation keeps every list and route: the columns are gathered and the side
        // tables shared as they are (pushing each transfer again scanned and looked up its
        // list once more: half of bucket's build on torus:128x128).
        let gather = |col: &[u32]| -> Vec<u32> { order.iter().map(|&i| col[i as usize]).collect() };
        let mut slots: Vec<(u32, ChunkList)> = Vec::with_capacity(self.slots.len());
        if !self.slots.is_empty() {
            for (k, &i) in order.iter().enumerate() {
                if self.flags[i as usize] & SLOTS != 0 {
                    let at = self.slots.binary_search_by_key(&i, |e| e.0).expect("a transfer with SLOTS has slots");
                    slots.push((k as u32, self.slots[at].1.clone()));
                }
            }
        }
        Transfers {
            step: gather(&self.step),
            src: gather(&self.src),
            dst: gather(&self.dst),
            chunk: gather(&self.chunk),
            flags: order.iter().map(|&i| self.flags[i as usize]).collect(),
            lists: self.lists.clone(),
            ranges: self.ranges.clone(),
            uneven: self.uneven.clone(),
            route: if self.route.is_empty() { Vec::new() } else { gather(&self.route) },
            routes: self.routes.clone(),
            route_ids: self.route_ids.clone(),
            slots,
            flow_stamp: std::sync::OnceLock::new(),
        }
    }

    /// Transfer `i` as an owned `Transfer`, its chunk list and route shared, not copied.
    pub fn owned(&self, i: usize) -> Transfer {
        let t = self.at(i);
        let chunks = if self.flags[i] & MANY != 0 {
            ChunkList::Many(self.lists[self.chunk[i] as usize].clone())
        } else {
            ChunkList::One(self.chunk[i])
        };
        Transfer { chunks, ..t.without_chunks() }
    }
}

/// Whether `list` (not empty) rises by `spacing` (wrapping) from its first entry: checked a
/// block at a time without stopping early, which the compiler vectorizes (every message of
/// bucket's on torus:128x128 carries 128 chunks, 16 M times).
fn is_progression(list: &[u32], spacing: u32) -> bool {
    const BLOCK: usize = 32;
    let first = list[0];
    list.chunks(BLOCK).enumerate().all(|(b, block)| {
        let base = first.wrapping_add(((b * BLOCK) as u32).wrapping_mul(spacing));
        block
            .iter()
            .enumerate()
            .fold(true, |ok, (i, &c)| ok & (c == base.wrapping_add((i as u32).wrapping_mul(spacing))))
    })
}

/// A hash of a chunk list's contents, in order (`Transfers::uneven`'s key).
fn content_hash(list: &[u32]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    list.hash(&mut h);
    h.finish()
}

impl TransferRef<'_> {
    /// `to_owned` with an empty chunk list (for callers that share the list).
    fn without_chunks(&self) -> Transfer {
        Transfer {
            step: self.step,
            src: self.src,
            dst: self.dst,
            chunks: ChunkList::Many(Arc::default()),
            op: self.op,
            path: self.path.cloned(),
            dst_chunks: self.dst_chunks.map(|d| Box::new(d.to_vec().into())),
        }
    }
}

impl From<Vec<Transfer>> for Transfers {
    fn from(v: Vec<Transfer>) -> Transfers {
        let mut out = Transfers::with_capacity(v.len());
        for t in v {
            out.push(t);
        }
        out
    }
}

impl FromIterator<Transfer> for Transfers {
    fn from_iter<I: IntoIterator<Item = Transfer>>(it: I) -> Transfers {
        let mut out = Transfers::new();
        out.extend(it);
        out
    }
}

impl Extend<Transfer> for Transfers {
    fn extend<I: IntoIterator<Item = Transfer>>(&mut self, it: I) {
        for t in it {
            self.push(t);
        }
    }
}

impl<'a> IntoIterator for &'a Transfers {
    type Item = TransferRef<'a>;
    type IntoIter = Box<dyn ExactSizeIterator<Item = TransferRef<'a>> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl PartialEq for Transfers {
    fn eq(&self, other: &Transfers) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl std::fmt::Debug for Transfers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests;
