//! Precondition holders per chunk (`Holders`), shared where every chunk has the same ones.

/// Precondition holders per chunk, sorted, as one flat array with offsets; where every chunk
/// has the same holders (an all-reduce: every NPU holds every chunk), the one list serves all
/// (a 4096-NPU all-reduce in 4 parts would otherwise list 2^26 holders, 268 MB).
pub struct Holders {
    /// Offsets into `npus` per chunk; empty when `npus` is every chunk's list.
    start: Vec<usize>,
    npus: Vec<u32>,
}

impl Holders {
    pub fn new(pre: &super::Pairs, num_chunks: usize) -> Holders {
        if let Some((npus, chunks)) = pre.as_every()
            && chunks == num_chunks
        {
            return Holders { start: Vec::new(), npus: npus.to_vec() };
        }
        Self::from_list(&pre.as_slice(), num_chunks)
    }

    /// `new` on a list.
    pub fn from_list(pre: &[[u32; 2]], num_chunks: usize) -> Holders {
        match Self::uniform(pre, num_chunks) {
            Some(npus) => Holders { start: Vec::new(), npus },
            None => Self::csr(pre, num_chunks),
        }
    }

    /// Every chunk's list on its own.
    fn csr(pre: &[[u32; 2]], num_chunks: usize) -> Holders {
        let mut start = vec![0usize; num_chunks + 1];
        for &[_, c] in pre {
            if (c as usize) < num_chunks {
                start[c as usize + 1] += 1;
            }
        }
        for c in 0..num_chunks {
            start[c + 1] += start[c];
        }
        let mut fill = start.clone();
        let mut npus = vec![0u32; start[num_chunks]];
        for &[v, c] in pre {
            if (c as usize) < num_chunks {
                npus[fill[c as usize]] = v;
                fill[c as usize] += 1;
            }
        }
        for c in 0..num_chunks {
            npus[start[c]..start[c + 1]].sort_unstable();
        }
        Holders { start, npus }
    }

    /// The one holder list, when `pre` is every chunk `0..num_chunks` at each of a strictly
    /// rising run of NPUs, in that order (how an all-reduce's precondition is built).
    fn uniform(pre: &[[u32; 2]], num_chunks: usize) -> Option<Vec<u32>> {
        if num_chunks == 0 || pre.is_empty() || !pre.len().is_multiple_of(num_chunks) {
            return None;
        }
        let mut npus = Vec::with_capacity(pre.len() / num_chunks);
        for block in pre.chunks_exact(num_chunks) {
            let v = block[0][0];
            if npus.last().is_some_and(|&u| u >= v) {
                return None;
            }
            if !block.iter().enumerate().all(|(c, &[u, ch])| u == v && ch as usize == c) {
                return None;
            }
            npus.push(v);
        }
        Some(npus)
    }

    pub fn of(&self, chunk: usize) -> &[u32] {
        if self.start.is_empty() {
            return &self.npus;
        }
        &self.npus[self.start[chunk]..self.start[chunk + 1]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The one shared holder list (an all-reduce's precondition: every chunk at every NPU,
        /// NPU by NPU) answers as the per-chunk lists do, and it is never used where chunks
        /// have different holders (a pair dropped, two swapped).
        #[test]
        fn holders_shared_or_per_chunk_answer_the_same(
            npus in proptest::collection::btree_set(0u32..12, 1..6),
            chunks in 1usize..5,
            drop in proptest::option::of(0usize..30),
            swap in proptest::option::of((0usize..30, 0usize..30)),
        ) {
            let mut pre: Vec<[u32; 2]> =
                npus.iter().flat_map(|&v| (0..chunks as u32).map(move |c| [v, c])).collect();
            let canonical = pre.clone();
            if let Some(i) = drop.filter(|&i| i < pre.len()) {
                pre.remove(i);
            }
            if let Some((i, j)) = swap.filter(|&(i, j)| i < pre.len() && j < pre.len()) {
                pre.swap(i, j);
            }
            let shared = Holders::from_list(&pre, chunks);
            let per_chunk = Holders::csr(&pre, chunks);
            if pre == canonical {
                prop_assert!(shared.start.is_empty(), "an all-reduce's precondition shares one list");
            }
            if (0..chunks).any(|c| per_chunk.of(c) != per_chunk.of(0)) {
                prop_assert!(!shared.start.is_empty(), "chunks with other holders share one list");
            }
            for c in 0..chunks {
                prop_assert_eq!(shared.of(c), per_chunk.of(c));
            }
        }
    }
}
