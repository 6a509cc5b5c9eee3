//! The contributor sets the validator's slots hold: numbered, counted by the slots that hold
//! them and freed at the end of the step no slot holds them any more; and the hasher of the
//! per-step memos keyed by pairs of their ids.

use crate::spans::Spans;

/// A contributor set stored in `Sets`; `NONE` means the slot is not held.
pub(super) type SetId = u32;
pub(super) const NONE: SetId = 0;

/// The contributor sets the slots hold, numbered from 1 and counted by the slots that hold
/// them: a slot is 4 bytes (a 4096-NPU all-reduce split in 4 parts has 2^26 slots), one set
/// serves every chunk a message carries, and sets no slot holds any more are freed at the end
/// of the step (a ring all-reduce on 4096 NPUs makes 67 million of them, a few alive at once).
/// Ids are not canonical: equal sets may have different ids.
#[derive(Default)]
pub(super) struct Sets {
    list: Vec<Option<Spans>>,
    refs: Vec<u32>,
    /// Ids whose count dropped to zero (or that were made) in this step: freed at its end
    /// unless held again, so ids in the step's reads and memos stay valid while it runs.
    doomed: Vec<SetId>,
    free: Vec<SetId>,
}

impl Sets {
    pub(super) fn add(&mut self, s: Spans) -> SetId {
        let id = match self.free.pop() {
            Some(id) => {
                self.list[id as usize - 1] = Some(s);
                id
            }
            None => {
                self.list.push(Some(s));
                self.refs.push(0);
                self.list.len() as SetId
            }
        };
        self.doomed.push(id);
        id
    }

    pub(super) fn get(&self, id: SetId) -> &Spans {
        self.list[id as usize - 1].as_ref().expect("live set id")
    }

    pub(super) fn hold(&mut self, id: SetId) {
        self.refs[id as usize - 1] += 1;
    }

    pub(super) fn release(&mut self, id: SetId) {
        let r = &mut self.refs[id as usize - 1];
        *r -= 1;
        if *r == 0 {
            self.doomed.push(id);
        }
    }

    pub(super) fn end_step(&mut self) {
        for id in std::mem::take(&mut self.doomed) {
            let i = id as usize - 1;
            if self.refs[i] == 0 && self.list[i].is_some() {
                self.list[i] = None;
                self.free.push(id);
            }
        }
    }
}

/// Hashes a pair of ids: set operations are memoized per step, because one message reduces
/// many chunks with the same two sets (a whole-vector message of a 4096-NPU all-reduce: 4096
/// chunks, one union), and SipHash on hundreds of millions of lookups showed up in profiles.
#[derive(Default, Clone, Copy)]
pub(super) struct IdHash;

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
