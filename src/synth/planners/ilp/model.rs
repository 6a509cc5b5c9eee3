//! The integer program at one horizon: its columns (`sent`, `hold`), rows (holding,
//! consistency, congestion, post) and objective, built from the chunks' facts on the TEN.

use super::chunks::{Chunk, ChunkInfo};
use super::{MAX_NONZEROS, MAX_SPAN, MAX_VARIABLES};
use crate::ten::{Ten, TenEdge};
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Goal {
    /// Is horizon T feasible? Every target held at T, earlier arrivals rewarded (TACOS's sum
    /// of holds); HiGHS stops at the first solution, which answers the question.
    Probe,
    /// A time-clustering window: no target required; deliveries, and progress towards the
    /// targets, rewarded.
    Window,
}

impl Goal {
    pub(super) fn name(self) -> &'static str {
        match self {
            Goal::Probe => "probe",
            Goal::Window => "window",
        }
    }
}

/// A column: `sent[chunk, edge, t]` or `hold[chunk, npu, t]`.
#[derive(Clone, Copy)]
pub(super) enum Col {
    Sent { c: u32, e: u32, t: u32 },
    Hold { c: u32, n: u32, t: u32 },
}

/// A constraint family, for names in an LP dump.
#[derive(Clone, Copy)]
pub(super) enum Family {
    /// Holding is monotone and a new hold needs a delivery (one delivery at most).
    Holding { c: u32, n: u32, t: u32 },
    /// A send needs the source to hold the chunk when it starts.
    Consistency { c: u32, e: u32, t: u32 },
    /// One chunk per resource per timestep.
    Congestion { r: u32, t: u32 },
    /// The target holds the chunk at the horizon.
    Post { c: u32, n: u32 },
}

pub(super) struct Row {
    pub(super) family: Family,
    pub(super) terms: Vec<(u32, f64)>,
    pub(super) lo: f64,
    pub(super) hi: f64,
}

/// How the model limits what resources carry.
#[derive(Clone, Copy)]
pub(super) enum Congestion<'a> {
    /// Not at all (TACCL-like).
    Ignored,
    /// One chunk per resource per timestep.
    PerResource,
    /// A symmetric plan's model (`symmetric`): the load its sends put on every translate of a
    /// resource, per class of resources the symmetry maps onto each other.
    PerClass(&'a super::symmetric::Classes),
}

impl Congestion<'_> {
    pub(super) fn of(ignore_congestion: bool) -> Congestion<'static> {
        if ignore_congestion { Congestion::Ignored } else { Congestion::PerResource }
    }
}

pub(super) enum BuildStop {
    Interrupted,
    /// Over `MAX_VARIABLES` variables or `MAX_NONZEROS` nonzeros: what, how many, the limit.
    TooLarge {
        what: &'static str,
        count: usize,
        limit: usize,
    },
    /// A link's transfer spans more than `MAX_SPAN` timesteps of the grid (`span`).
    TooFine {
        span: u32,
    },
}

impl Model {
    /// `TooLarge` when the chunk whose candidate sends are `windows` (edge, first and last
    /// timestep) would take the model over a limit: its send and hold columns, and the terms
    /// those add (two for a send's consistency row, one in its arrival's holding row, one per
    /// resource and timestep it occupies; two per hold). An upper bound: sends whose source
    /// cannot hold the chunk in time are dropped while building.
    fn check_room(&self, ten: &Ten, windows: &[(u32, u32, u32)], horizon: u32) -> Result<(), BuildStop> {
        let (mut sends, mut terms) = (0usize, 0usize);
        let mut first: HashMap<u32, u32> = HashMap::new();
        for &(ei, from, last) in windows {
            let e = &ten.edges[ei as usize];
            let n = (last - from) as usize + 1;
            sends = sends.saturating_add(n);
            let per = 3usize.saturating_add((e.span as usize).saturating_mul(e.resources.len()));
            terms = terms.saturating_add(n.saturating_mul(per));
            let at = from.saturating_add(e.span);
            let f = first.entry(e.dst).or_insert(at);
            *f = (*f).min(at);
        }
        let holds: usize = first.values().map(|&t0| horizon.saturating_sub(t0) as usize + 1).sum();
        let cols = self.cols.len().saturating_add(sends).saturating_add(holds);
        if cols > MAX_VARIABLES {
            return Err(BuildStop::TooLarge { what: "variables", count: cols, limit: MAX_VARIABLES });
        }
        let nonzeros = self.nonzeros.saturating_add(terms).saturating_add(holds.saturating_mul(2));
        if nonzeros > MAX_NONZEROS {
            return Err(BuildStop::TooLarge { what: "nonzeros", count: nonzeros, limit: MAX_NONZEROS });
        }
        Ok(())
    }
}

impl BuildStop {
    /// `TooLarge` when the model so far is over a limit.
    fn check_size(m: &Model) -> Result<(), BuildStop> {
        if m.cols.len() > MAX_VARIABLES {
            return Err(BuildStop::TooLarge { what: "variables", count: m.cols.len(), limit: MAX_VARIABLES });
        }
        if m.nonzeros > MAX_NONZEROS {
            return Err(BuildStop::TooLarge { what: "nonzeros", count: m.nonzeros, limit: MAX_NONZEROS });
        }
        Ok(())
    }
}

pub(super) struct Model {
    pub(super) cols: Vec<Col>,
    pub(super) obj: Vec<f64>,
    pub(super) rows: Vec<Row>,
    /// Per (chunk, npu) with hold columns: the first timestep and the column of hold at it.
    pub(super) holds: HashMap<(u32, u32), (u32, u32)>,
    /// Column of `sent[c,e,t]`.
    pub(super) sents: HashMap<(u32, u32, u32), u32>,
    pub(super) horizon: u32,
    /// Nonzero coefficients of `rows` (while building, also the congestion terms waiting for
    /// their rows).
    pub(super) nonzeros: usize,
}

impl Model {
    /// `Ok(None)`: some target cannot be reached within the horizon (trivially infeasible).
    pub(super) fn build(
        ten: &Ten,
        info: &ChunkInfo,
        horizon: u32,
        goal: Goal,
        congestion: Congestion,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Model>, BuildStop> {
        if let Some(span) = ten.edges.iter().map(|e| e.span).max().filter(|&s| s > MAX_SPAN) {
            return Err(BuildStop::TooFine { span });
        }
        let mut b = Builder::new(ten, horizon, goal, congestion, stop);
        for ch in &info.chunks {
            if !b.add_chunk(ch)? {
                return Ok(None);
            }
        }
        Ok(Some(b.finish()))
    }
}

/// The model under construction, with what its rows still need across chunks.
struct Builder<'a> {
    ten: &'a Ten,
    horizon: u32,
    goal: Goal,
    /// A window: no target required, so no post rows and no unreachable target.
    soft: bool,
    congestion: Congestion<'a>,
    stop: &'a dyn Fn() -> bool,
    m: Model,
    /// Per (resource or class, timestep): the sends it carries, for the congestion rows.
    load: HashMap<(u32, u32), Vec<(u32, f64)>>,
    /// Sends added so far, to poll `stop` and the size limits within a large chunk.
    polled: usize,
}

impl<'a> Builder<'a> {
    /// An empty model at `horizon`, so that chunks can be added one at a time.
    fn new(
        ten: &'a Ten,
        horizon: u32,
        goal: Goal,
        congestion: Congestion<'a>,
        stop: &'a dyn Fn() -> bool,
    ) -> Builder<'a> {
        let m = Model {
            cols: Vec::new(),
            obj: Vec::new(),
            rows: Vec::new(),
            holds: HashMap::new(),
            sents: HashMap::new(),
            horizon,
            nonzeros: 0,
        };
        let soft = goal == Goal::Window;
        Builder { ten, horizon, goal, soft, congestion, stop, m, load: HashMap::new(), polled: 0 }
    }

    /// Adds a chunk's columns and rows; `Ok(false)` when one of its targets cannot be reached.
    fn add_chunk(&mut self, ch: &Chunk) -> Result<bool, BuildStop> {
        if !self.soft && ch.targets.iter().any(|&n| ch.from[n as usize] > self.horizon) {
            return Ok(false);
        }
        let windows = self.windows(ch);
        // What this chunk's columns and terms would be, before any is allocated: at a fine
        // timestep a window spans millions of timesteps (a 12 GB vector of sends once
        // aborted the service before the size checks below saw a column).
        self.m.check_room(self.ten, &windows, self.horizon)?;
        let sends = self.sends(&windows);
        // Hold columns from each receiving NPU's earliest arrival to the horizon.
        let receivers = self.receivers(&sends);
        self.add_holds(ch, &receivers);
        if !self.soft && ch.targets.iter().any(|&n| !self.m.holds.contains_key(&(ch.id, n))) {
            return Ok(false);
        }
        // Send columns whose source can hold the chunk at their start.
        let arrivals = self.add_sends(ch, &sends)?;
        self.add_holding_rows(ch, &receivers, &arrivals);
        if !self.soft {
            self.add_post_rows(ch);
        }
        self.check_stop()?;
        Ok(true)
    }

    /// Per edge, the start timesteps (edge, first t, last t) of the sends of `ch` that can matter.
    fn windows(&self, ch: &Chunk) -> Vec<(u32, u32, u32)> {
        // Candidate sends: after the source can have the chunk, early enough for the
        // destination to still reach a target (a window only needs progress).
        let mut windows: Vec<(u32, u32, u32)> = Vec::new(); // (edge, first t, last t)
        for (ei, e) in self.ten.edges.iter().enumerate() {
            let (from, to_dst) = (ch.from[e.src as usize], ch.to[e.dst as usize]);
            if from == u32::MAX || to_dst == u32::MAX || ch.holders.contains(&e.dst) {
                continue;
            }
            let last = if self.soft {
                if to_dst != 0 && to_dst >= ch.to[e.src as usize] {
                    continue; // a window relays only towards the targets
                }
                self.horizon.checked_sub(e.span)
            } else {
                self.horizon.checked_sub(e.span + to_dst)
            };
            match last {
                Some(last) if last >= from => windows.push((ei as u32, from, last)),
                _ => {}
            }
        }
        windows
    }

    /// The candidate sends (edge, t, dst) of `windows`, once `check_room` has allowed them.
    fn sends(&self, windows: &[(u32, u32, u32)]) -> Vec<(u32, u32, u32)> {
        let mut sends: Vec<(u32, u32, u32)> = Vec::new(); // (edge, t, dst)
        for &(ei, from, last) in windows {
            let dst = self.ten.edges[ei as usize].dst;
            for t in from..=last {
                sends.push((ei, t, dst));
            }
        }
        sends
    }

    /// Each receiving NPU with its earliest arrival, sorted so that columns come in a fixed order.
    fn receivers(&self, sends: &[(u32, u32, u32)]) -> Vec<(u32, u32)> {
        let mut first: HashMap<u32, u32> = HashMap::new();
        for &(e, t, dst) in sends {
            let a = t + self.ten.edges[e as usize].span;
            let f = first.entry(dst).or_insert(a);
            *f = (*f).min(a);
        }
        let mut receivers: Vec<(u32, u32)> = first.into_iter().collect();
        receivers.sort_unstable();
        receivers
    }

    /// Hold columns of `ch` at each receiver from its earliest arrival, weighted by the goal.
    fn add_holds(&mut self, ch: &Chunk, receivers: &[(u32, u32)]) {
        for &(n, t0) in receivers {
            let base = self.m.cols.len() as u32;
            self.m.holds.insert((ch.id, n), (t0, base));
            let target = ch.to[n as usize] == 0;
            for t in t0..=self.horizon {
                self.m.cols.push(Col::Hold { c: ch.id, n, t });
                self.m.obj.push(match self.goal {
                    Goal::Probe => f64::from(target),
                    Goal::Window if target => 1.0,
                    Goal::Window => 0.5 / (1.0 + ch.to[n as usize] as f64),
                });
            }
        }
    }

    /// Send columns of `ch` with their consistency rows and loads; the arrivals, for the holding rows.
    fn add_sends(&mut self, ch: &Chunk, sends: &[(u32, u32, u32)]) -> Result<HashMap<(u32, u32), Vec<u32>>, BuildStop> {
        let ten = self.ten;
        let mut arrivals: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        for &(e, t, dst) in sends {
            let edge = &ten.edges[e as usize];
            let src_hold = if ch.holders.contains(&edge.src) {
                None
            } else {
                match self.m.holds.get(&(ch.id, edge.src)) {
                    Some(&(t0, base)) if t >= t0 => Some(base + (t - t0)),
                    _ => continue,
                }
            };
            let col = self.m.cols.len() as u32;
            self.m.cols.push(Col::Sent { c: ch.id, e, t });
            self.m.obj.push(0.0);
            self.m.sents.insert((ch.id, e, t), col);
            arrivals.entry((dst, t + edge.span)).or_default().push(col);
            if let Some(h) = src_hold {
                self.m.nonzeros += 2;
                self.m.rows.push(Row {
                    family: Family::Consistency { c: ch.id, e, t },
                    terms: vec![(col, 1.0), (h, -1.0)],
                    lo: f64::NEG_INFINITY,
                    hi: 0.0,
                });
            }
            self.add_load(edge, col, t);
            self.polled += 1;
            if self.polled.is_multiple_of(4096) {
                self.check_stop()?;
            }
        }
        Ok(arrivals)
    }

    /// Queues the send `col` on what `edge` occupies from `t`: congestion rows wait for all chunks.
    fn add_load(&mut self, edge: &TenEdge, col: u32, t: u32) {
        for &r in &edge.resources {
            let (key, weight) = match self.congestion {
                Congestion::Ignored => break,
                Congestion::PerResource => (r, 1.0),
                Congestion::PerClass(k) => (k.of[r as usize], k.weight[k.of[r as usize] as usize]),
            };
            for s in t..t + edge.span {
                self.load.entry((key, s)).or_default().push((col, weight));
            }
            self.m.nonzeros += edge.span as usize;
        }
    }

    /// Holding rows of `ch`: a hold needs the previous hold or a delivery arriving then.
    fn add_holding_rows(&mut self, ch: &Chunk, receivers: &[(u32, u32)], arrivals: &HashMap<(u32, u32), Vec<u32>>) {
        for &(n, t0) in receivers {
            let base = self.m.holds[&(ch.id, n)].1;
            for t in t0..=self.horizon {
                let h = base + (t - t0);
                let mut terms = vec![(h, 1.0)];
                if t > t0 {
                    terms.push((h - 1, -1.0));
                }
                for &a in arrivals.get(&(n, t)).map(Vec::as_slice).unwrap_or(&[]) {
                    terms.push((a, -1.0));
                }
                self.m.nonzeros += terms.len();
                self.m.rows.push(Row { family: Family::Holding { c: ch.id, n, t }, terms, lo: 0.0, hi: 0.0 });
            }
        }
    }

    /// Post rows of `ch`: a probe requires every target to hold the chunk at the horizon.
    fn add_post_rows(&mut self, ch: &Chunk) {
        for &n in &ch.targets {
            let (t0, base) = self.m.holds[&(ch.id, n)];
            self.m.nonzeros += 1;
            self.m.rows.push(Row {
                family: Family::Post { c: ch.id, n },
                terms: vec![(base + (self.horizon - t0), 1.0)],
                lo: 1.0,
                hi: 1.0,
            });
        }
    }

    /// `Interrupted` or `TooLarge`, so that a long build answers a stop and stays within limits.
    fn check_stop(&self) -> Result<(), BuildStop> {
        if (self.stop)() {
            return Err(BuildStop::Interrupted);
        }
        BuildStop::check_size(&self.m)
    }

    /// The model with its congestion rows, which needed every chunk's sends first.
    fn finish(mut self) -> Model {
        // A row only where the sends could exceed one chunk.
        let mut keys: Vec<(u32, u32)> =
            self.load.iter().filter(|(_, v)| v.len() > 1 || v.iter().any(|t| t.1 > 1.0)).map(|(k, _)| *k).collect();
        keys.sort_unstable();
        for (r, t) in keys {
            let terms = self.load.remove(&(r, t)).unwrap_or_default();
            self.m.rows.push(Row { family: Family::Congestion { r, t }, terms, lo: f64::NEG_INFINITY, hi: 1.0 });
        }
        // Exact now: a resource's load at a timestep with a single send needed no row.
        self.m.nonzeros = self.m.rows.iter().map(|r| r.terms.len()).sum();
        self.m
    }
}
