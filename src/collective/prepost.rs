//! A collective's precondition and postcondition: built for the standard kinds, checked and
//! taken from the spec for `custom` (every source reaches every destination that needs it).

use super::{CollectiveKind, CollectiveSpec};
use crate::error::Errors;
use crate::limits;
use crate::topology::Topology;
use std::collections::VecDeque;

/// Which of a kind's conditions (pre, post) are every chunk at every NPU of the group: the
/// sides `conditions` leaves empty, held as `Pairs::every`.
pub(super) fn every_pair_sides(kind: CollectiveKind) -> (bool, bool) {
    use CollectiveKind::*;
    match kind {
        AllReduce => (true, true),
        ReduceScatter | Reduce => (true, false),
        AllGather | Broadcast => (false, true),
        _ => (false, false),
    }
}

/// The precondition and postcondition (sorted, without duplicates) and the combining flag:
/// built for the standard kinds, checked and taken from the spec for `custom`. A side that is
/// every chunk at every NPU (`every_pair_sides`) is left empty: the caller holds it as
/// `Pairs::every`.
pub(super) fn conditions(
    spec: &CollectiveSpec,
    group: &[usize],
    num_chunks: usize,
    root_rank: Option<usize>,
    errs: &mut Errors,
) -> (Vec<[u32; 2]>, Vec<[u32; 2]>, bool) {
    let p = group.len();
    let k = spec.chunks() as usize;
    let g = |r: usize| group[r] as u32;
    let mut pre: Vec<[u32; 2]> = Vec::new();
    let mut post: Vec<[u32; 2]> = Vec::new();
    let owned = |v: &mut Vec<[u32; 2]>| {
        for c in 0..num_chunks {
            v.push([g(c / k), c as u32]);
        }
    };
    let at_root = |v: &mut Vec<[u32; 2]>| {
        let r = g(root_rank.unwrap_or(0));
        for c in 0..num_chunks {
            v.push([r, c as u32]);
        }
    };
    let combining = match spec.kind {
        CollectiveKind::AllGather => {
            owned(&mut pre);
            false
        }
        CollectiveKind::ReduceScatter => {
            owned(&mut post);
            true
        }
        // Both sides every pair, the one set shared (`build_unchecked`).
        CollectiveKind::AllReduce => true,
        CollectiveKind::Broadcast => {
            at_root(&mut pre);
            false
        }
        CollectiveKind::Reduce => {
            at_root(&mut post);
            true
        }
        CollectiveKind::Scatter => {
            at_root(&mut pre);
            owned(&mut post);
            false
        }
        CollectiveKind::Gather => {
            owned(&mut pre);
            at_root(&mut post);
            false
        }
        CollectiveKind::AllToAll => {
            // Chunk (i·p + j)·k + x goes from rank i to rank j.
            for i in 0..p {
                for j in 0..p {
                    for x in 0..k {
                        let c = ((i * p + j) * k + x) as u32;
                        pre.push([g(i), c]);
                        post.push([g(j), c]);
                    }
                }
            }
            false
        }
        CollectiveKind::Custom => {
            custom_conditions(spec, group, num_chunks, &mut pre, &mut post, errs);
            spec.combining.unwrap_or(false)
        }
    };
    pre.sort_unstable();
    pre.dedup();
    post.sort_unstable();
    post.dedup();
    (pre, post, combining)
}

/// Appends a custom collective's given conditions to `pre` and `post`, reporting a missing or
/// oversized list and pairs outside the group or the chunk range.
pub(super) fn custom_conditions(
    spec: &CollectiveSpec,
    group: &[usize],
    num_chunks: usize,
    pre: &mut Vec<[u32; 2]>,
    post: &mut Vec<[u32; 2]>,
    errs: &mut Errors,
) {
    for (name, given, out) in [("precondition", &spec.precondition, pre), ("postcondition", &spec.postcondition, post)]
    {
        let Some(given) = given else {
            errs.push(name, "custom collectives need an explicit list of [npu, chunk] pairs");
            continue;
        };
        if given.len() > limits::MAX_CONDITION_PAIRS {
            errs.push(name, format!("more than {} pairs", limits::MAX_CONDITION_PAIRS));
            continue;
        }
        for (i, &[v, c]) in given.iter().enumerate() {
            if !group.contains(&(v as usize)) {
                errs.push(format!("{name}[{i}]"), format!("NPU {v} is not a live NPU of the group"));
            }
            if c as usize >= num_chunks {
                errs.push(
                    format!("{name}[{i}]"),
                    format!("chunk {c} out of range: expected {}", crate::error::ids(num_chunks)),
                );
            }
        }
        out.extend_from_slice(given);
    }
}

/// Reports postcondition pairs of a custom collective whose chunk no NPU holds in the
/// precondition.
pub(super) fn check_sources(pre: &[[u32; 2]], post: &[[u32; 2]], num_chunks: usize, errs: &mut Errors) {
    let mut has_source = vec![false; num_chunks];
    for &[_, c] in pre {
        has_source[c as usize] = true;
    }
    for (i, &[v, c]) in post.iter().enumerate() {
        if !has_source[c as usize] {
            errs.push(
                format!("postcondition[{i}]"),
                format!("NPU {v} needs chunk {c}, which no NPU holds in the precondition"),
            );
        }
    }
}

/// The nodes `sources` reach over `topo`'s links.
pub(crate) fn reachable_from(topo: &Topology, sources: &[u32]) -> Vec<bool> {
    let mut seen = vec![false; topo.nodes()];
    let mut q: VecDeque<usize> = VecDeque::new();
    for &s in sources {
        if !seen[s as usize] {
            seen[s as usize] = true;
            q.push_back(s as usize);
        }
    }
    while let Some(u) = q.pop_front() {
        for l in &topo.links()[topo.out_links(u)] {
            if !seen[l.dst] {
                seen[l.dst] = true;
                q.push_back(l.dst);
            }
        }
    }
    seen
}
