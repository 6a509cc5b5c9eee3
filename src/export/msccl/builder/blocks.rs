//! The program's thread blocks and channels: which channel a message takes and whether its
//! send is deferred, whether a block has room, which block a step goes to, and each step
//! appended with the dependencies and blocked state its cell accesses give it.
use super::super::{FIFO_CAPACITY, MAX_CHANNELS, MAX_DEPID, MAX_TBS_PER_CHANNEL};
use super::{Builder, MscclError, OpId, OpStep, Role, StepType, Tb};
use crate::export::layout::Cell;

impl Builder<'_> {
    /// The channel of connection a→b for a send of `cnt` chunks, and whether it is deferred:
    /// the lowest channel with room (steps for it at both ends, or room for a new thread block
    /// on the channel and on the GPU) where the send fits (no deferred send before it, and the
    /// calls in flight plus its own at one chunk per call within `FIFO_CAPACITY`); else the
    /// lowest with room, deferred.
    pub(super) fn channel_for(&mut self, a: u32, b: u32, cnt: u32, need_a: usize) -> Result<(u32, bool), MscclError> {
        let msgs = self.messages.entry((a, b)).or_default();
        *msgs += 1;
        let msgs = *msgs;
        let mut fallback = None;
        for ch in 0..MAX_CHANNELS {
            if !(self.room(a, Role::Send(b), ch, need_a) && self.room(b, Role::Recv(a), ch, 1)) {
                continue;
            }
            let queue = self.outstanding.get(&(a, b, ch));
            let deferred_before = queue.is_some_and(|q| q.iter().any(|f| f.deferred));
            let in_flight: u32 = queue.map_or(0, |q| q.iter().map(|f| f.calls).sum());
            let fits = !deferred_before && in_flight + cnt <= FIFO_CAPACITY;
            if fits {
                fallback = Some((ch, false));
                break;
            }
            fallback.get_or_insert((ch, true));
        }
        let Some((ch, deferred)) = fallback else {
            // The blocks a GPU opens for connections: the target's, and at most as many as a
            // dependency can name.
            let max_tbs = self.target.max_tbs().min(MAX_DEPID + 1);
            let (max_steps, target) = (self.target.max_steps(), self.target.name());
            return Err(MscclError::NoChannel { src: a, dst: b, messages: msgs, max_steps, max_tbs, target });
        };
        // Both ends' blocks now, so later choices count them.
        self.tb(a, Role::Send(b), ch);
        self.tb(b, Role::Recv(a), ch);
        Ok((ch, deferred))
    }

    /// Whether a step of `need` steps (no-ops included) fits the block of (rank, role, channel),
    /// or a new block can be opened for it: room on the channel, and on the GPU with one block
    /// kept for local steps. A GPU opens at most 128 blocks for connections (fewer when the
    /// target allows fewer), so that any block can be waited for (`MAX_DEPID`); beyond that,
    /// sends share the blocks there are, deferred.
    pub(super) fn room(&self, r: u32, role: Role, ch: u32, need: usize) -> bool {
        match self.tb_of.get(&(r, role, ch)) {
            Some(&tb) => {
                // A receiving block keeps a step for each receive queued on it (each can land
                // in scratch in one step when its block is nearly full).
                let queued = match role {
                    Role::Recv(a) => self.outstanding.get(&(a, r, ch)).map_or(0, |q| q.len()),
                    _ => 0,
                };
                self.tbs[tb as usize].steps + queued + need <= self.target.max_steps()
            }
            None => {
                // Another channel for a connection that has one must leave a block for each
                // connection not yet open.
                let first = !self.opened.contains(&(r, role));
                let reserve = if first { 0 } else { self.unopened[r as usize] as usize };
                let budget = self.target.max_tbs().min(MAX_DEPID + 1) - 1;
                self.tbs_on_channel.get(&(r, ch)).copied().unwrap_or(0) < MAX_TBS_PER_CHANNEL
                    && self.tbs_per_rank[r as usize] as usize + reserve < budget
            }
        }
    }

    /// Whether a step at rank `r` reading `src` and writing `dst` would wait for a step that
    /// cannot complete at its place in generation order (see `blocked`).
    pub(super) fn waits_for_blocked(&self, r: u32, src: Option<Cell>, dst: Option<Cell>, cnt: u32) -> bool {
        if self.blocked.is_empty() {
            return false;
        }
        let r = r as usize;
        (0..cnt).any(|i| {
            let read = src.and_then(|s| self.cells[r].get(&self.layout.canonical(r, s.plus(i))));
            let written = dst.and_then(|d| self.cells[r].get(&self.layout.canonical(r, d.plus(i))));
            read.is_some_and(|st| st.last_write.is_some_and(|w| self.blocked.contains(&w)))
                || written.is_some_and(|st| {
                    st.last_write.is_some_and(|w| self.blocked.contains(&w))
                        || st.readers.iter().any(|x| self.blocked.contains(x))
                })
        })
    }

    pub(super) fn tb(&mut self, r: u32, role: Role, chan: u32) -> u32 {
        if let Some(&tb) = self.tb_of.get(&(r, role, chan)) {
            return tb;
        }
        let id = self.tbs.len() as u32;
        if self.opened.insert((r, role)) {
            self.unopened[r as usize] = self.unopened[r as usize].saturating_sub(1);
        }
        self.tbs.push(Tb { rank: r, role, chan, ops: Vec::new(), steps: 0 });
        self.tb_of.insert((r, role, chan), id);
        *self.tbs_on_channel.entry((r, chan)).or_default() += 1;
        self.tbs_per_rank[r as usize] += 1;
        id
    }

    /// A local step at rank `r`, in its local thread block (a new one when it is full).
    pub(super) fn local_op(&mut self, r: u32, ty: StepType, src: Option<Cell>, dst: Cell, cnt: u32) {
        let max = self.target.max_steps();
        let need = self.dep_tbs(r, src, Some(dst), cnt).max(1);
        let tb = match self.local_tb[r as usize] {
            Some(tb) if self.tbs[tb as usize].steps + need <= max => tb,
            _ => {
                // Local blocks use no connection: the first channel with room.
                let chan = (0..MAX_CHANNELS)
                    .find(|&ch| self.tbs_on_channel.get(&(r, ch)).copied().unwrap_or(0) < MAX_TBS_PER_CHANNEL)
                    .unwrap_or(0);
                let id = self.tbs.len() as u32;
                self.tbs.push(Tb { rank: r, role: Role::Local, chan, ops: Vec::new(), steps: 0 });
                *self.tbs_on_channel.entry((r, chan)).or_default() += 1;
                self.tbs_per_rank[r as usize] += 1;
                self.local_tb[r as usize] = Some(id);
                id
            }
        };
        self.push_op(tb, ty, src, Some(dst), cnt);
    }

    /// How many thread blocks a step at rank `r` reading `src` and writing `dst` would wait for
    /// (its own block counted too: an upper bound on its no-ops plus one).
    pub(super) fn dep_tbs(&self, r: u32, src: Option<Cell>, dst: Option<Cell>, cnt: u32) -> usize {
        let r = r as usize;
        let mut tbs: Vec<u32> = Vec::new();
        let mut add = |d: OpId| {
            if !tbs.contains(&d.tb) {
                tbs.push(d.tb);
            }
        };
        for i in 0..cnt {
            if let Some(st) = src.and_then(|s| self.cells[r].get(&self.layout.canonical(r, s.plus(i)))) {
                st.last_write.into_iter().for_each(&mut add);
            }
            if let Some(st) = dst.and_then(|d| self.cells[r].get(&self.layout.canonical(r, d.plus(i)))) {
                st.last_write.into_iter().for_each(&mut add);
                st.readers.iter().copied().for_each(&mut add);
            }
        }
        tbs.len()
    }

    /// Appends a step to thread block `tb` with the dependencies its cell accesses need, and
    /// updates the cells' hazard state. `Send` reads `src`; `Recv` writes `dst`; `rrc`, `cpy`
    /// read `src` and write `dst`; `re` reads `src` and `dst` and writes `dst`.
    pub(super) fn push_op(&mut self, tb: u32, ty: StepType, src: Option<Cell>, dst: Option<Cell>, cnt: u32) -> OpId {
        let r = self.tbs[tb as usize].rank as usize;
        let me = OpId { tb, idx: self.tbs[tb as usize].ops.len() as u32 };
        let mut deps: Vec<OpId> = Vec::new();
        let add = |deps: &mut Vec<OpId>, d: OpId| {
            if d.tb == tb {
                return;
            }
            match deps.iter_mut().find(|x| x.tb == d.tb) {
                Some(x) => x.idx = x.idx.max(d.idx),
                None => deps.push(d),
            }
        };
        for i in 0..cnt {
            if let Some(s) = src {
                let c = self.layout.canonical(r, s.plus(i));
                let st = self.cells[r].entry(c).or_default();
                if let Some(w) = st.last_write {
                    add(&mut deps, w);
                }
            }
            if let Some(d) = dst {
                let c = self.layout.canonical(r, d.plus(i));
                let st = self.cells[r].entry(c).or_default();
                if let Some(w) = st.last_write {
                    add(&mut deps, w);
                }
                for &x in &st.readers {
                    add(&mut deps, x);
                }
            }
        }
        // Update the hazard state: reads, then writes.
        for i in 0..cnt {
            if let Some(s) = src {
                let c = self.layout.canonical(r, s.plus(i));
                self.cells[r].entry(c).or_default().readers.push(me);
            }
            let Some(d) = dst else { continue };
            let c = self.layout.canonical(r, d.plus(i));
            let st = self.cells[r].entry(c).or_default();
            // (A `re` also reads its destination; the write below supersedes that read.)
            st.last_write = Some(me);
            st.readers.clear();
        }
        // The executor fuses a `re` into the previous one when both reduce into the same cell
        // from the same buffer and the second waits for nothing, and its step counter then
        // disagrees with the file's: make such a step wait for its predecessor.
        let t = &self.tbs[tb as usize];
        if ty == StepType::Reduce
            && deps.is_empty()
            && let Some(prev) = t.ops.last()
            && prev.ty == StepType::Reduce
            && prev.dst == dst
            && prev.src.map(|c| c.buf) == src.map(|c| c.buf)
        {
            deps.push(OpId { tb, idx: me.idx - 1 });
        }
        for d in &deps {
            self.tbs[d.tb as usize].ops[d.idx as usize].has_dep = true;
        }
        // A local step that waits for a blocked step, or follows one in its block, is blocked
        // too. (Receives are kept from waiting for blocked steps; sends are the caller's.)
        if !self.blocked.is_empty() && matches!(ty, StepType::Copy | StepType::Reduce) {
            let after_blocked = me.idx > 0 && self.blocked.contains(&OpId { tb, idx: me.idx - 1 });
            if after_blocked || deps.iter().any(|d| self.blocked.contains(d)) {
                self.blocked.insert(me);
            }
        }
        debug_assert!(
            !matches!(ty, StepType::Recv | StepType::RecvReduceCopy) || !deps.iter().any(|d| self.blocked.contains(d)),
            "a receive waits for a step that completes only after a later receive"
        );
        let t = &mut self.tbs[tb as usize];
        t.steps += deps.len().max(1);
        t.ops.push(OpStep { ty, src, dst, cnt, deps, has_dep: false });
        me
    }
}
