//! The groups of chunks the validator replays in independent passes: each a range of the
//! schedule's slot layout (`slots::SlotOrder`), with its slots renumbered from 0.

use crate::collective::Pairs;
use crate::schedule::{Schedule, TransferRef};
use std::sync::Arc;

/// The chunks one pass of the replay tracks and their scratch slots, with the slots
/// renumbered from 0 (`place`). The chunks are laid out by `SlotOrder` (the schedule's most
/// used evenly spaced lists side by side) and the groups take consecutive ranges of that
/// layout, so a group's slot table has each such message's chunks in a few cache lines and a
/// message's chunks in one group or two. One group holds every chunk unless the schedule
/// has more (npu, slot) pairs than `Group::SLOTS` and its messages are short (long chunk
/// lists would be read once per group; their contributor sets are few and shared anyway).
pub(super) struct Group {
    pub(super) index: u32,
    /// Layout positions per group: chunk slots are local `0..positions` (some unused).
    pub(super) positions: usize,
    /// Every slot's group and local slot, one table shared by the groups (one per group grew
    /// with groups × slots: a declared 2^25 chunks on 16 NPUs made 512 groups of 128 MiB).
    /// `NOT_HERE` as the group of a scratch slot of a chunk out of range.
    place: Arc<[(u32, u32)]>,
    pub(super) slots: usize,
    pub(super) num_chunks: usize,
    /// The group's chunks, rising.
    chunks: Vec<u32>,
    /// `Group::written` of the schedule, worked out once for every group.
    written: usize,
}

const NOT_HERE: u32 = u32::MAX;

impl Group {
    /// (npu, slot) pairs per group: 4 MB of slot ids and at most a million sets alive.
    const SLOTS: usize = 1 << 20;
    /// Groups for a schedule whose messages carry long chunk lists: each group reads every
    /// list that meets its chunks, so only a few (a fixed number, so the report's order does
    /// not depend on the machine); each holds only its chunks' contributor sets (bucket's
    /// all-reduce on torus:64x64 at 1 GiB: 3.2 GB at its peak in one group).
    const LONG_LISTS: usize = 8;

    /// How many groups the schedule's replay is split into.
    pub(super) fn count(s: &Schedule) -> usize {
        let pairs = s.topology.npus().saturating_mul(s.slots());
        if pairs <= Self::SLOTS {
            return 1;
        }
        let entries: usize = s.transfers.iter().map(|t| t.chunks.len()).sum();
        // Past the check's cell limit a group stays at `SLOTS` however long the lists: the
        // replay then reads them more often, but holds what it was sized for.
        if entries > 2 * s.transfers.len() && pairs <= crate::limits::MAX_CHECKED_CELLS {
            pairs.div_ceil(Self::SLOTS).min(Self::LONG_LISTS)
        } else {
            pairs.div_ceil(Self::SLOTS)
        }
    }

    /// `count` groups of consecutive layout positions (fewer when there are fewer chunks), and
    /// each chunk's group; group `g` holds the chunks at positions `g·per ..` `(g + 1)·per`,
    /// local slots `0..per`, then its chunks' scratch slots. One pass over the slots builds them
    /// all.
    pub(super) fn split(s: &Schedule, count: usize) -> (Vec<Group>, Vec<u32>) {
        let layout = crate::slots::SlotOrder::new(s.num_chunks, s.transfers.dominant_spacing());
        let per = layout.len().div_ceil(count.max(1)).max(1);
        let n = layout.len().div_ceil(per).max(1);
        let mut group_of: Vec<u32> = Vec::with_capacity(s.num_chunks);
        let mut chunks: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut place: Vec<(u32, u32)> = Vec::with_capacity(s.slots());
        for c in 0..s.num_chunks as u32 {
            let at = layout.of(c) as usize;
            let g = at / per;
            group_of.push(g as u32);
            chunks[g].push(c);
            place.push((g as u32, (at - g * per) as u32));
        }
        let mut next = vec![per as u32; n];
        for &c in &s.scratch {
            place.push(match group_of.get(c as usize) {
                Some(&g) => {
                    next[g as usize] += 1;
                    (g, next[g as usize] - 1)
                }
                None => (NOT_HERE, 0),
            });
        }
        let place: Arc<[(u32, u32)]> = place.into();
        let written = Self::written(s);
        let groups = chunks
            .into_iter()
            .enumerate()
            .map(|(g, chunks)| Group {
                index: g as u32,
                positions: per,
                place: Arc::clone(&place),
                slots: next[g] as usize,
                num_chunks: s.num_chunks,
                chunks,
                written,
            })
            .collect();
        (groups, group_of)
    }

    /// Whether chunk (not slot) `c` is this group's.
    #[inline]
    pub(super) fn has(&self, c: u32) -> bool {
        (c as usize) < self.num_chunks && self.place[c as usize].0 == self.index
    }

    /// The local slot of slot `c`, if it is this group's.
    #[inline]
    pub(super) fn slot(&self, c: u32) -> Option<u32> {
        self.place.get(c as usize).filter(|p| p.0 == self.index).map(|p| p.1)
    }

    /// About how many of the group's (npu, slot) cells the replay writes: its share of
    /// `Group::written`.
    pub(super) fn filled(&self) -> usize {
        let pairs = self.written as u128;
        (pairs * self.chunks.len() as u128 / self.num_chunks.max(1) as u128) as usize
    }

    /// About the bytes of the slot and stamp tables this group's replay holds (4 bytes a cell
    /// each); its contributor sets are not counted (one set unless the collective reduces).
    pub(super) fn table_bytes(&self, s: &Schedule) -> u64 {
        2 * crate::slots::table_bytes(s.topology.npus(), self.slots, self.filled(), 4)
    }

    /// The (npu, slot) cells the whole replay writes, about: the precondition's pairs, then one
    /// a chunk move, which a valid schedule makes for every postcondition pair it lacks; never
    /// more than the larger condition (one transfer of 1,024 chunks on 1,024 NPUs wrote 1 GB
    /// of dense tables for a postcondition of 2^30 pairs it never reaches).
    fn written(s: &Schedule) -> usize {
        let pre = s.precondition.len();
        pre.max(s.postcondition.len()).min(pre.saturating_add(crate::runs::chunk_moves(s)))
    }

    /// `table_bytes` of the largest group `Group::split(s, Group::count(s))` makes, worked out
    /// without making them (they hold a few bytes a chunk and a slot).
    pub(super) fn largest_table_bytes(s: &Schedule) -> u64 {
        let count = Self::count(s).max(1);
        let layout = crate::slots::SlotOrder::new(s.num_chunks, s.transfers.dominant_spacing());
        let per = layout.len().div_ceil(count).max(1);
        // At most every scratch slot in one group; a chunk's share of either condition.
        let slots = per + s.scratch.len();
        let pairs = Self::written(s) as u128;
        let filled = (pairs * per.min(s.num_chunks) as u128 / s.num_chunks.max(1) as u128) as usize;
        2 * crate::slots::table_bytes(s.topology.npus(), slots, filled, 4)
    }

    /// The pairs of `pairs` whose chunk is this group's, in order, with the chunk's local
    /// slot: `(npu, chunk, local)`. An every-pair set gives the group's chunks at each of its
    /// NPUs without reading the other groups' (a 16,384-NPU all-reduce has 2^28 pairs per
    /// condition).
    pub(super) fn pairs_here<'a>(&'a self, pairs: &'a Pairs) -> impl Iterator<Item = (u32, u32, u32)> + 'a {
        let (every, listed) = match pairs.as_every() {
            Some((npus, k)) => (Some((npus, k)), None),
            None => (None, Some(pairs.iter())),
        };
        let every = every.into_iter().flat_map(move |(npus, k)| {
            let chunks = &self.chunks[..self.chunks.partition_point(|&c| (c as usize) < k)];
            npus.iter().flat_map(move |&v| chunks.iter().map(move |&c| (v, c, self.place[c as usize].1)))
        });
        let listed = listed
            .into_iter()
            .flatten()
            .filter_map(|[v, c]| Some((v, c, self.slot(c).filter(|_| (c as usize) < self.num_chunks)?)));
        every.chain(listed)
    }

    /// The entries of a transfer (that passed `check_transfer`) in this group: (slot read,
    /// slot written), both global and local.
    pub(super) fn entries<'t>(&'t self, t: &TransferRef<'t>) -> impl Iterator<Item = Entry> + 't {
        t.chunks.iter().zip(t.written()).filter_map(move |(&c, &d)| {
            Some(Entry { read: c, written: d, local_read: self.slot(c)?, local_written: self.slot(d)? })
        })
    }
}

/// One entry of a transfer within a group: slot `read` at the source to slot `written` at the
/// destination (global ids, for messages), and the same slots in the group's numbering.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub(super) read: u32,
    pub(super) written: u32,
    pub(super) local_read: u32,
    pub(super) local_written: u32,
}
