//! The links' taken timesteps in `place` (`Taken`): a bit a timestep per link, the first run
//! of free ones a move of a link's cost needs, the rows widened as the timeline grows.

/// Each link's taken timesteps, a bit each, `words` words a link (doubled when a move would
/// start beyond).
pub(super) struct Taken {
    pub(super) bits: Vec<u64>,
    pub(super) words: usize,
    pub(super) links: usize,
}

impl Taken {
    /// The first timestep from `ready` on that `link` has free for `cost` timesteps running,
    /// the rows widened until it has them (inlined always: it runs for every parent a move
    /// weighs, and the loop defeats the hint).
    #[inline(always)]
    pub(super) fn free_from(&mut self, link: u32, ready: u32, cost: u32) -> u32 {
        let mut from = ready;
        loop {
            let row = &self.bits[link as usize * self.words..(link as usize + 1) * self.words];
            match first_free(row, from) {
                Some(slot) if cost == 1 => return slot,
                // The run from `slot` is as long as the first taken timestep after it allows.
                Some(slot) => match first_taken(row, slot, slot + cost) {
                    None if (slot + cost) as usize <= row.len() * 64 => return slot,
                    None => self.widen(slot + cost),
                    Some(taken) => from = taken + 1,
                },
                None => self.widen(from),
            }
        }
    }
    /// Marks `cost` timesteps of `link` taken from `slot`.
    pub(super) fn take(&mut self, link: u32, slot: u32, cost: u32) {
        let base = link as usize * self.words;
        for s in slot..slot + cost {
            self.bits[base + s as usize / 64] |= 1 << (s % 64);
        }
    }
    /// Every link's row twice as wide (and past `ready`), keeping the timesteps taken.
    fn widen(&mut self, ready: u32) {
        let wider = 2 * self.words.max(ready as usize / 64 + 1);
        let mut grown = vec![0u64; self.links * wider];
        for (l, old) in self.bits.chunks_exact(self.words).enumerate() {
            grown[l * wider..l * wider + self.words].copy_from_slice(old);
        }
        (self.bits, self.words) = (grown, wider);
    }
}

/// The first timestep of `from..to` that `bits` has taken, if any (timesteps past its end are
/// free).
fn first_taken(bits: &[u64], from: u32, to: u32) -> Option<u32> {
    (from..to.min((bits.len() * 64) as u32)).find(|&s| bits[s as usize / 64] & (1 << (s % 64)) != 0)
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
