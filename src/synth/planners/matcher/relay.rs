//! Relaying in the matcher: where some chunk is wanted by only part of the NPUs, requests are
//! delegated back along shortest paths from its holders, one distance field per set of holders.

use super::{GreedyError, Problem};
use std::collections::HashMap;

/// Entries of per-holder-set distance tables allowed for relaying (4 bytes each).
const MAX_RELAY_ENTRIES: usize = 1 << 26;

/// Per chunk, which distance field (one per set of holders) its requests are relayed along.
pub(super) struct Relay {
    pub(super) field_of_chunk: Vec<u32>,
    pub(super) fields: Vec<Vec<u32>>,
}

/// Relaying is needed when some chunk is wanted by only part of the NPUs: then requests are
/// delegated back along shortest paths from the chunk's holders.
pub(super) fn relay_tables(p: &Problem) -> Result<Option<Relay>, GreedyError> {
    // NPUs per chunk in pre ∪ post; both lists are sorted and free of duplicates.
    let mut count = vec![0usize; p.num_chunks];
    for &[_, c] in p.pre.iter().chain(p.post) {
        count[c as usize] += 1;
    }
    let (mut i, mut j) = (0, 0);
    while i < p.pre.len() && j < p.post.len() {
        match p.pre[i].cmp(&p.post[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                count[p.pre[i][1] as usize] -= 1;
                i += 1;
                j += 1;
            }
        }
    }
    if count.iter().all(|&n| n >= p.live_npus) {
        return Ok(None);
    }
    let holders = crate::collective::Holders::from_list(p.pre, p.num_chunks);
    let mut index: HashMap<&[u32], u32> = HashMap::new();
    let mut fields = Vec::new();
    let mut field_of_chunk = vec![0u32; p.num_chunks];
    for (c, slot) in field_of_chunk.iter_mut().enumerate() {
        let h = holders.of(c);
        let next = index.len() as u32;
        let id = *index.entry(h).or_insert(next);
        if id == next {
            let entries = (fields.len() + 1) * p.ten.npus;
            if entries > MAX_RELAY_ENTRIES {
                return Err(GreedyError::TooManyRelayTables(entries, MAX_RELAY_ENTRIES));
            }
            fields.push(p.ten.distances_from(h));
        }
        *slot = id;
    }
    Ok(Some(Relay { field_of_chunk, fields }))
}
