//! Between plans and the model's columns: a solution's moves, the columns a warm start fixes
//! from an earlier plan, and the plan (sorted, with its horizon) of a list of moves.

use super::chunks::ChunkInfo;
use super::model::{Col, Model};
use crate::synth::phase::{Move, Plan};
use crate::ten::Ten;
use std::collections::{HashMap, HashSet};

impl Model {
    /// Columns to fix at 1 from a complete plan with a longer horizon: its deliveries that
    /// arrive by `keep_until` (≤ the horizon), with their holds; the rest is left free.
    /// Deliveries the model has no column for (useless at this horizon) are skipped.
    pub(super) fn partial_start(&self, ten: &Ten, info: &ChunkInfo, plan: &[Move], keep_until: u32) -> Vec<u32> {
        let tracked: HashSet<u32> = info.chunks.iter().map(|c| c.id).collect();
        // Earliest arrival per (chunk, npu); later deliveries are dropped (holding is monotone).
        let mut arrival: HashMap<(u32, u32), (u32, Move)> = HashMap::new();
        for m in plan {
            let e = &ten.edges[m.edge as usize];
            let a = m.step + e.span;
            if !tracked.contains(&m.chunk) || a > keep_until.min(self.horizon) {
                continue;
            }
            let slot = arrival.entry((m.chunk, e.dst)).or_insert((a, *m));
            if a < slot.0 {
                *slot = (a, *m);
            }
        }
        let mut fixed = Vec::new();
        let mut keys: Vec<_> = arrival.into_iter().collect();
        keys.sort_unstable_by_key(|&(k, (a, _))| (k, a));
        for ((c, n), (a, mv)) in keys {
            let (Some(&col), Some(&(t0, base))) = (self.sents.get(&(c, mv.edge, mv.step)), self.holds.get(&(c, n)))
            else {
                continue;
            };
            if a < t0 {
                continue;
            }
            fixed.push(col);
            fixed.extend((a..=self.horizon).map(|t| base + (t - t0)));
        }
        fixed
    }

    /// The moves of a solution: its `sent` columns at 1.
    pub(super) fn moves(&self, values: &[f64]) -> Vec<Move> {
        self.cols
            .iter()
            .zip(values)
            .filter_map(|(col, &v)| match *col {
                Col::Sent { c, e, t } if v > 0.5 => Some(Move { step: t, edge: e, chunk: c }),
                _ => None,
            })
            .collect()
    }
}

pub(super) fn plan_of(ten: &Ten, mut moves: Vec<Move>) -> Plan {
    moves.sort_by_key(|m| (m.step, m.edge, m.chunk));
    let timesteps = moves.iter().map(|m| m.step + ten.edges[m.edge as usize].span).max().unwrap_or(0);
    Plan { moves, timesteps, replacements: 0 }
}
