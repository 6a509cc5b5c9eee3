//! Time clustering (TACOS V-C): windows of a few timesteps solved one after another from the
//! current holders, finished by shortest-path recovery, and the phase's plan from them.

use super::chunks::ChunkInfo;
use super::extract::plan_of;
use super::model::Goal;
use super::recover::recover;
use super::search::{Outcome, Search};
use super::{IlpStatus, PhasePlan, PhaseStats};
use crate::synth::SynthError;
use crate::synth::phase::Move;
use std::collections::HashSet;

impl Search<'_> {
    /// One phase with time clustering: the windows' plan, or the greedy's (`greedy_moves`, of
    /// `ub` timesteps) when it is shorter; `lb` is the phase's lower bound.
    pub(super) fn clustered_plan(
        mut self,
        w: u32,
        lb: u32,
        ub: u32,
        greedy_moves: Vec<Move>,
        mut stats: PhaseStats,
    ) -> Result<PhasePlan, SynthError> {
        let ten = self.p.ten;
        let (moves, recovered) = self.clustered(w)?;
        let plan = plan_of(ten, moves);
        // Clustering trades optimality for speed; keep the greedy when it is better.
        let result = if plan.timesteps <= ub {
            stats.source = if recovered { "clustered+recovery" } else { "clustered" };
            if recovered {
                stats.reason = Some("time clustering stopped early; unmet chunks finished by shortest paths".into());
            }
            plan
        } else {
            stats.reason = Some(format!("time clustering took {} timesteps, the greedy {ub}", plan.timesteps));
            plan_of(ten, greedy_moves)
        };
        stats.horizon = result.timesteps;
        if stats.horizon == lb {
            stats.status = IlpStatus::Optimal;
        }
        let lp = self.lp.pop().map(|(_, t)| t);
        Ok(self.finish(result, stats, lp))
    }

    /// TACOS V-C: windows of `w` timesteps from the current holders, one after another, then
    /// shortest paths for whatever is left. Returns the moves and whether recovery was needed.
    fn clustered(&mut self, w: u32) -> Result<(Vec<Move>, bool), SynthError> {
        let ten = self.p.ten;
        let w = w.max(ten.edges.iter().map(|e| e.span).max().unwrap_or(1));
        let mut holders: Vec<Vec<u32>> = vec![Vec::new(); self.p.num_chunks];
        for &[v, c] in self.p.pre {
            holders[c as usize].push(v);
        }
        let mut held: HashSet<(u32, u32)> = self.p.pre.iter().map(|&[v, c]| (v, c)).collect();
        let mut moves = Vec::new();
        let mut offset = 0u32;
        loop {
            let targets: Vec<Vec<u32>> = {
                let mut t = vec![Vec::new(); self.p.num_chunks];
                for &[v, c] in self.p.post {
                    if !held.contains(&(v, c)) {
                        t[c as usize].push(v);
                    }
                }
                t
            };
            if targets.iter().all(Vec::is_empty) {
                return Ok((moves, false));
            }
            let info = ChunkInfo::from_sets(ten, holders.clone(), targets);
            let window = match self.solve_with(&info, w, Goal::Window, None)? {
                Outcome::Solved(m) if !m.is_empty() => m,
                _ => break,
            };
            for m in window {
                let e = &ten.edges[m.edge as usize];
                if held.insert((e.dst, m.chunk)) {
                    holders[m.chunk as usize].push(e.dst);
                }
                moves.push(Move { step: m.step + offset, ..m });
            }
            offset += w;
        }
        let missing: Vec<[u32; 2]> = self.p.post.iter().copied().filter(|&[v, c]| !held.contains(&(v, c))).collect();
        let start = moves.iter().map(|m| m.step + ten.edges[m.edge as usize].span).max().unwrap_or(0);
        moves.extend(recover(ten, &mut holders, &missing, start));
        Ok((moves, true))
    }
}
