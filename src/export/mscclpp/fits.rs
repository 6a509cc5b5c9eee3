//! The MSCCL++ writer's cheap tests before a plan is laid out: the executor's and the writer's
//! limits on a schedule's counts (`fits`, `fits_outline`) and, from its messages alone, the
//! fewest thread blocks each NPU's part takes (`fewest_thread_blocks`).
use super::{MAX_OPS, MAX_TBS, MAX_TRANSFERS, MscclppError};
use crate::export::msccl::MAX_TRACKED_CELLS;
use crate::schedule::Schedule;
use std::collections::{HashMap, HashSet};

/// A cheap first test, before the schedule is validated: every message is at least three
/// operations (`put`, `nop`, `signal`), and the writer tracks every (rank, slot).
pub fn fits(s: &Schedule) -> Result<(), MscclppError> {
    fits_outline(s, s.transfers.len())?;
    let (npu, tbs, ops) = fewest_thread_blocks(s)
        .into_iter()
        .enumerate()
        .fold((0, 0, 0), |best, (v, (t, o))| if t > best.1 { (v, t, o) } else { best });
    if tbs > MAX_TBS {
        return Err(MscclppError::TooManyThreadBlocksAtLeast { npu: npu as u32, tbs, ops });
    }
    Ok(())
}

/// Per NPU, at least how many thread blocks and operations its part of the plan takes, from
/// the schedule's messages alone (one pass, nothing laid out): each lane (a peer it sends to,
/// one it receives from) opens with one handshake operation, a message hop sent over a memory
/// channel is at least `put`, `nop`, `signal` (a port channel's at least one `pwsf`), a hop
/// received at least `wait`, and where it lands a copy or reduce after a `nop` (in a step that
/// relays through NPUs the landings come after the step's waits: one `nop` for a lane's
/// landings of the step); a lane of n
/// operations is at least ⌈n / `MAX_OPS`⌉ thread blocks. Local moves and final copies count
/// nothing. A torus:32x32 all-gather's plan took 10 s and 3 GB to be refused for 136 thread
/// blocks; this refuses it at once. Nodes outside the topology are skipped (the validator
/// names them).
pub fn fewest_thread_blocks(s: &Schedule) -> Vec<(usize, usize)> {
    let topo = &s.topology;
    let n = topo.nodes();
    // Per ordered pair of NPUs (a hop's ends): messages, and whether any crosses a switch
    // (the pair is then a port channel, as `Builder::channel_types` decides).
    let mut pairs: HashMap<(u32, u32), (usize, bool)> = HashMap::new();
    // Per NPU and peer it receives from: the hops received, and the operations of what lands.
    let mut recv: HashMap<(u32, u32), (usize, usize)> = HashMap::new();
    // The NPU hops of a transfer (each with whether it crosses a switch), past its source.
    let hops_of = |t: &crate::schedule::TransferRef<'_>| -> Vec<(u32, bool)> {
        let ends = [t.src, t.dst];
        let path: &[u32] = t.path.map_or(&ends, |p| &p[..]);
        let mut switched = false;
        // Not validated yet (this runs first, to refuse a plan before it is built): an empty
        // path has no hops, and the validator names it after.
        path.get(1..)
            .unwrap_or_default()
            .iter()
            .filter_map(|&v| {
                if (v as usize) >= n {
                    return None;
                }
                if topo.is_npu(v as usize) {
                    let hop = (v, switched);
                    switched = false;
                    Some(hop)
                } else {
                    switched = true;
                    None
                }
            })
            .collect()
    };
    let relaying: HashSet<u32> =
        s.transfers.iter().filter(|t| t.src != t.dst && hops_of(t).len() > 1).map(|t| t.step).collect();
    // (NPU, peer, step) of a relaying step whose landings have their `nop` counted.
    let mut after_waits: HashSet<(u32, u32, u32)> = HashSet::new();
    for t in s.transfers.iter() {
        if t.src == t.dst {
            continue;
        }
        let npus = hops_of(&t);
        let mut from = t.src;
        for (i, &(to, port)) in npus.iter().enumerate() {
            let e = pairs.entry((from, to)).or_insert((0, false));
            e.0 += 1;
            e.1 |= port;
            let r = recv.entry((to, from)).or_insert((0, 0));
            r.0 += 1;
            if i + 1 == npus.len() {
                let nop = !relaying.contains(&t.step) || after_waits.insert((to, from, t.step));
                r.1 += 1 + nop as usize;
            }
            from = to;
        }
    }
    let mut out = vec![(0usize, 0usize); n];
    let mut add = |v: u32, ops: usize| {
        if let Some(x) = out.get_mut(v as usize) {
            x.0 += ops.div_ceil(MAX_OPS);
            x.1 += ops;
        }
    };
    for (&(a, _), &(msgs, port)) in &pairs {
        add(a, 1 + msgs * if port { 1 } else { 3 });
    }
    for (&(v, _), &(hops, landing)) in &recv {
        add(v, 1 + hops + landing);
    }
    out
}

/// `fits` for a schedule of `transfers` transfers whose list `s` may leave out (an outline).
pub fn fits_outline(s: &Schedule, transfers: usize) -> Result<(), MscclppError> {
    let ranks = s.topology.npus().max(1);
    let max_ops = ranks.saturating_mul(MAX_TBS * MAX_OPS);
    if transfers.saturating_mul(3) > max_ops {
        return Err(MscclppError::TooLarge { transfers, ranks, max_ops });
    }
    if transfers > MAX_TRANSFERS {
        return Err(MscclppError::TooManyTransfers { transfers, max: MAX_TRANSFERS });
    }
    let cells = ranks.saturating_mul(s.slots());
    if cells > MAX_TRACKED_CELLS {
        let max = MAX_TRACKED_CELLS;
        return Err(MscclppError::TooManyCells { ranks, slots: s.slots(), max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{MAX_OPS, MAX_TBS, MAX_TRANSFERS, MscclppError};
    use super::fits;
    use crate::collective::{Collective, CollectiveKind};
    use crate::schedule::{Schedule, Transfer};

    /// Past `MAX_TRANSFERS` the refusal names that limit, not the executor's operation count
    /// (33 M transfers on 16,384 GPUs fit the executor's 113 M operations by that count).
    #[test]
    fn too_many_transfers_for_the_writer_is_told_apart_from_too_many_operations() {
        let topo = crate::topology::parse_topology("torus:128x128").unwrap();
        let spec = crate::collective::CollectiveSpec::new(CollectiveKind::AllGather, 1 << 20);
        let c = Collective::build(&spec, &topo).unwrap();
        let mut s = Schedule::new(topo, &c, "test");
        // Empty, it is refused only for the cells its writer would track.
        assert!(matches!(fits(&s), Err(MscclppError::TooManyCells { ranks: 16384, .. })));
        for i in 0..=MAX_TRANSFERS as u32 {
            s.transfers.push(Transfer::copy(i / 16384, (i % 16384) as usize, ((i + 1) % 16384) as usize, [i % 16384]));
        }
        let e = fits(&s).unwrap_err();
        assert_eq!(e, MscclppError::TooManyTransfers { transfers: MAX_TRANSFERS + 1, max: MAX_TRANSFERS });
        assert!(e.to_string().contains("at most 4194304"), "{e}");
        // On four GPUs the executor's limit comes first.
        let topo = crate::topology::parse_topology("ring:4").unwrap();
        let c = Collective::build(&spec, &topo).unwrap();
        let mut s = Schedule::new(topo, &c, "test");
        for i in 0..(4 * MAX_TBS * MAX_OPS / 3 + 1) as u32 {
            s.transfers.push(Transfer::copy(i, 0, 1, [0]));
        }
        assert!(matches!(fits(&s), Err(MscclppError::TooLarge { ranks: 4, .. })));
    }
}
