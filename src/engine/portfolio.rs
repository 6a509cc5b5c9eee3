//! `auto`, the portfolio: runs the greedy (searching chunks per NPU when the request leaves it
//! open), the ILP where the instance is small, and every applicable baseline of `compare`'s
//! default set, within the request's time limit, and returns the fastest schedule, validated:
//! the candidates are simulated, only the fastest is validated (were it invalid, a producer's
//! bug, every candidate runs again with its own validation and the fastest valid one wins).
//! Baselines are priced before they are built (a lower bound on their time from their
//! structure, `baselines::lower_bound_ns`): a baseline whose price exceeds a schedule already
//! found is skipped unbuilt, so at scale `auto` costs about what its winner costs; once a
//! schedule at the collective's quick lower bound is in hand, the synthesizers are not run.
//! `stats.portfolio` lists every candidate; the result is deterministic whenever no candidate
//! was cut by the limit (ties go to the earlier candidate: greedy, ilp, then the baselines in
//! registry order). The candidates run on the rayon pool, keeping only the fastest schedule.

use super::registry::{self, Algorithm};
use super::request::{Request, Target};
use super::search::{self, Incumbent, Outcomes, Stop};
use super::{Control, Error, Gate, Output, RunStats, SynthStats};
use crate::synth::ilp::IlpStatus;
use serde::Serialize;
use std::time::{Duration, Instant};

/// The note of a candidate that finished slower than the winner and so was not validated.
pub const NOT_VALIDATED: &str = "not validated: slower than the winner (auto validates only the schedule it returns)";

/// The ILP joins the portfolio on topologies of at most this many NPUs (beyond, its model
/// rarely proves anything within a default budget; `--algo ilp` still runs it).
pub const ILP_MAX_NPUS: usize = 8;
/// The ILP candidate's share of the budget: at most this many seconds, and at most half of
/// what is left when its turn comes (the baselines run after it).
pub const ILP_BUDGET_S: f64 = 10.0;

/// How far above the collective's quick bound (`bounds::quick_bound_ns`) the cheapest-priced
/// baseline's price may be for it to start beside the synthesizers.
pub const FIRST_WAVE_PRICE: f64 = 1.25;
/// The note of a synthesizer not run because a schedule at the lower bound was in hand.
pub const AT_THE_BOUND: &str = "skipped: a schedule at the collective's lower bound was already found";

/// One candidate of the portfolio.
#[derive(Clone, Debug, Serialize)]
pub struct PortfolioEntry {
    /// The algorithm (`greedy`, `ilp`, a baseline).
    pub algorithm: String,
    /// The chunks per NPU of its schedule, when it gave one.
    pub chunks_per_npu: Option<u32>,
    /// The greedy's planner that made its schedule (`matching`, `batched`, `contributions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub greedy_mode: Option<&'static str>,
    /// The first seed it ran from (the greedy only): echoed whichever candidate wins, since the
    /// greedy's time decided which baselines were built and which won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Seeds it ran (the greedy only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seeds: Option<usize>,
    /// Its simulated time, when it gave a schedule.
    pub collective_time_ns: Option<f64>,
    /// Its schedule passed the validator (false when it gave none, and for one slower than the
    /// winner: only the winner and the lead, the cheapest-priced baseline run first, are
    /// validated; the others' `note` says so).
    pub valid: bool,
    /// The time limit stopped it: its time, if any, is the best it found so far.
    pub cut: bool,
    /// Its wall time, milliseconds.
    pub wall_ms: f64,
    /// A baseline's price: a lower bound on its time from its structure alone, worked out
    /// before it is built (absent where none is worked out); the greedy's when every run it
    /// had was priced so above a schedule already found (a translation pattern's busiest link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_ns: Option<f64>,
    /// A baseline built, then dropped before its simulation because its busiest link alone is
    /// busy longer than a schedule already found: that busy time (its `skipped:` note's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_link_ns: Option<f64>,
    /// Why it gave no schedule (it does not serve this case, it ran out of time, …), or what
    /// to know of the one it gave (not validated, being slower; the ILP stopped by auto's cap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// It won.
    pub chosen: bool,
}

/// What `auto` reports: how the winner was chosen, and every candidate.
#[derive(Clone, Debug, Serialize)]
pub struct PortfolioStats {
    /// Always `auto`.
    pub chosen_by: &'static str,
    /// The overall budget, seconds.
    pub time_limit_s: f64,
    /// Some candidate was cut by the limit, so another run may choose differently.
    pub cut: bool,
    /// Every candidate, in the order ties are broken.
    pub candidates: Vec<PortfolioEntry>,
}

impl PortfolioStats {
    /// The fastest baseline among the candidates that gave a schedule (by simulated time:
    /// `auto` validates only its winner), with its time in ns: what the summaries put beside
    /// the schedule. A baseline that won is its own closest rival.
    pub fn best_baseline(&self) -> Option<(&str, f64)> {
        self.baselines()
            .filter_map(|c| c.collective_time_ns.map(|t| (c.algorithm.as_str(), t)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The baselines among the candidates, whether or not they were built.
    pub fn baselines(&self) -> impl Iterator<Item = &PortfolioEntry> {
        self.candidates.iter().filter(|c| !Algorithm::parse(&c.algorithm).is_some_and(|a| a.is_synthesizer()))
    }
}

/// The statistics of an `auto` run.
#[derive(Clone, Debug, Serialize)]
pub struct PortfolioRun {
    /// The winning algorithm (also the schedule's `algorithm`).
    pub algorithm: String,
    /// Every candidate and how the winner was chosen.
    pub portfolio: PortfolioStats,
    /// The winner's synthesis statistics, when a synthesizer won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthesis: Option<SynthStats>,
}

/// The algorithms `auto` tries on this request, in tie-break order.
pub fn candidates(req: &Request) -> Vec<Algorithm> {
    let mut v = vec![Algorithm::Greedy];
    if req.topology.npus() <= ILP_MAX_NPUS {
        v.push(Algorithm::Ilp);
    }
    if let Target::One(spec) = &req.target {
        v.extend(
            registry::baseline_names()
                .into_iter()
                .filter(|b| registry::baseline_supports(b, spec.kind))
                .map(|b| Algorithm::Baseline(b.to_string())),
        );
    }
    v
}

/// Runs the portfolio; see the module doc.
pub fn run(req: &Request, ctl: Control, stop: Stop) -> Result<Output, Error> {
    run_against(req, ctl, stop, None)
}

/// `run`, where a schedule of time `incumbent_ns` is already at hand (a repair, when
/// regenerating): baselines priced above it are skipped unbuilt from the start. A portfolio
/// whose every candidate was skipped so gives no schedule (the incumbent is the faster).
pub fn run_against(req: &Request, ctl: Control, stop: Stop, incumbent_ns: Option<f64>) -> Result<Output, Error> {
    match run_gated(req, ctl, stop, incumbent_ns, Gate::Deferred) {
        // The fastest candidate failed the validator (a producer's bug, logged): every
        // candidate again, each validated, so the fastest valid one wins as before.
        Err(Error::Internal(e @ super::EngineError::InvalidSchedule { .. })) => {
            tracing::error!("auto: the fastest candidate is not valid, all are checked again: {e}");
            run_gated(req, ctl, stop, incumbent_ns, Gate::Full { bounds: false })
        }
        done => done,
    }
}

/// `run_against`, the candidates checked as `gate` says: deferred, only the winner is
/// validated (the losers never leave the engine; their entries say they were not validated).
fn run_gated(req: &Request, ctl: Control, stop: Stop, incumbent_ns: Option<f64>, gate: Gate) -> Result<Output, Error> {
    let algorithms = candidates(req);
    let n = algorithms.len();
    // Baselines are priced before anything is built (`baselines::lower_bound_ns`): the
    // synthesizers, the unpriced baselines and the cheapest-priced one run first; the others
    // then in order of price, each skipped unbuilt when its price already exceeds a schedule
    // found (at 4096 NPUs a ring alone is 33 M transfers).
    let prices: Vec<Option<f64>> = algorithms
        .iter()
        .map(|a| match a {
            Algorithm::Baseline(name) => crate::baselines::lower_bound_ns(name, &req.topology, req.collective()),
            _ => None,
        })
        .collect();
    // The cheapest-priced baseline starts beside the synthesizers when its price is within
    // `FIRST_WAVE_PRICE` of the collective's quick bound (it may well win: bucket on an intact
    // torus is priced at its own time); otherwise it waits like the others, so a baseline that
    // cannot win is not built while the synthesizers run (a swing on a degraded 4096-NPU torus
    // priced at twice the bound took 20 s and a gigabyte beside the greedy).
    let quick = match &req.target {
        Target::One(_) => req.built.first().and_then(|c| crate::bounds::quick_bound_ns(&req.topology, c)),
        Target::Tenants(_) => None,
    };
    let cheapest =
        (0..n).filter(|&i| prices[i].is_some_and(|p| quick.is_none_or(|q| p <= FIRST_WAVE_PRICE * q))).min_by(
            |&a, &b| prices[a].unwrap_or(f64::INFINITY).total_cmp(&prices[b].unwrap_or(f64::INFINITY)).then(a.cmp(&b)),
        );
    // That baseline leads, alone and checked in full (its validation beside its simulation,
    // on every core), when its price is also at least the quick bound (a price below the
    // collective's own bound says nothing of the baseline: swing-bandwidth on torus:64x64 less
    // NPU 9 was priced at 40 us by its chain alone and runs 248 ms): the synthesizers then
    // run against its time, and skip a run priced above it before building it (on an intact
    // torus:64x64 the greedy's translation pattern is priced at 6.39 ms against bucket's
    // 5.49 ms: 4 M transfers neither built nor simulated). Otherwise it runs beside them.
    let leads = |i: usize| quick.is_some_and(|q| prices[i].is_some_and(|p| p >= q));
    let lead: Vec<usize> = cheapest.filter(|&i| leads(i)).into_iter().collect();
    let first: Vec<usize> = (0..n).filter(|&i| prices[i].is_none() || (Some(i) == cheapest && !leads(i))).collect();
    let mut later: Vec<usize> = (0..n).filter(|&i| prices[i].is_some() && Some(i) != cheapest).collect();
    later.sort_by(|&a, &b| {
        prices[a].unwrap_or(f64::INFINITY).total_cmp(&prices[b].unwrap_or(f64::INFINITY)).then(a.cmp(&b))
    });
    // Every candidate of a wave on the pool (they are independent; the greedy and the ILP use
    // the request's threads within theirs); only the fastest schedule so far is kept.
    let best = Incumbent::new(None).with_floor(quick);
    if let Some(t) = incumbent_ns {
        best.offer(t);
    }
    let wave = |indices: &[usize], gate: Gate| -> Acc {
        // Whether a schedule at the bound is in hand is decided once a wave, not as its
        // candidates finish beside each other: the same request runs the same candidates.
        let at_floor = best.at_floor();
        let entries = std::sync::Mutex::new(Vec::new());
        let one = Candidates { req, algorithms: &algorithms, prices: &prices, ctl, stop, best: &best, gate, at_floor };
        let outcomes = search::fold(indices, |_, &i| {
            let (entry, outcome) = one.attempt(i);
            entries.lock().unwrap_or_else(|e| e.into_inner()).push((i, entry));
            outcome
        });
        Acc { entries: entries.into_inner().unwrap_or_else(|e| e.into_inner()), outcomes }
    };
    let lead_gate = match gate {
        Gate::Deferred => Gate::Full { bounds: false },
        g => g,
    };
    let mut acc = wave(&lead, lead_gate);
    for indices in [&first, &later] {
        if acc.outcomes.is_cancelled() {
            break;
        }
        acc = acc.merge(wave(indices, gate));
    }
    acc.entries.sort_by_key(|(i, _)| *i);
    let mut entries: Vec<PortfolioEntry> = acc.entries.into_iter().map(|(_, e)| e).collect();
    let mut out = acc.outcomes.finish(stop.limit_s())?.best;
    if !out.report.valid {
        // Deferred: the winner alone is validated now, with the simulator's report it has, and
        // bounded with the collective the validator builds.
        let t0 = Instant::now();
        let (schedule, report) = super::finalize_deferred(out.schedule, out.report, true, stop.cancel_poll())?;
        out.schedule = schedule;
        out.report = report;
        tracing::debug!(target: "ccsynth::timing", wall_ms = t0.elapsed().as_secs_f64() * 1e3, "auto: the winner validated");
    }
    for e in entries.iter_mut().filter(|e| e.collective_time_ns.is_some() && !e.valid) {
        match &mut e.note {
            Some(note) => *note = format!("{note}; {NOT_VALIDATED}"),
            None => e.note = Some(NOT_VALIDATED.to_string()),
        }
    }
    if out.report.lower_bounds.is_none()
        && let Ok(c) = crate::collective::Collective::build_unchecked(&out.schedule.collective, &out.schedule.topology)
    {
        let t0 = Instant::now();
        let b = crate::bounds::lower_bounds(&out.schedule.topology, &c);
        out.report.lower_bound_ns = b.lower_bound_ns;
        out.report.lower_bounds = Some(b);
        tracing::debug!(target: "ccsynth::timing", wall_ms = t0.elapsed().as_secs_f64() * 1e3, "auto: the winner bounded");
    }
    let winner = out.schedule.algorithm.clone().unwrap_or_default();
    let synthesis = out.stats.synthesis().cloned();
    // The winner's entry: the first with the best time (the order ties are broken in).
    let won = entries.iter().position(|e| e.collective_time_ns == out.schedule.collective_time_ns);
    if let Some(i) = won {
        entries[i].chosen = true;
        entries[i].valid = true;
        entries[i].note = None;
    }
    let name = won.map_or(winner, |i| entries[i].algorithm.clone());
    let cut = entries.iter().any(|e| e.cut);
    out.stats = RunStats::Portfolio(Box::new(PortfolioRun {
        algorithm: name,
        portfolio: PortfolioStats {
            chosen_by: registry::PORTFOLIO,
            time_limit_s: req.time_limit_s,
            cut,
            candidates: entries,
        },
        synthesis,
    }));
    Ok(out)
}

/// The waves so far: every candidate's entry (by candidate index, sorted at the end) and
/// their outcomes (`search::Outcomes`: the fastest schedule, ties to the earlier candidate;
/// the greedy's error if it gave none; whether the caller cancelled).
struct Acc {
    entries: Vec<(usize, PortfolioEntry)>,
    outcomes: Outcomes<usize, Output>,
}

impl Acc {
    fn merge(mut self, other: Acc) -> Acc {
        self.entries.extend(other.entries);
        self.outcomes = self.outcomes.merge(other.outcomes);
        self
    }
}

/// A baseline candidate: built, then dropped before the validator and the simulator (most of
/// its cost) when its busiest link alone is busy longer than a schedule some candidate has
/// already finished with. Such a candidate is strictly slower than that schedule, so it can
/// neither win nor tie: the winner is the same as without the test.
fn baseline_candidate(
    req: &Request,
    name: &str,
    best: &Incumbent,
    stop: Stop,
    gate: Gate,
) -> Result<Result<Output, (String, f64)>, Error> {
    let t0 = Instant::now();
    let s = super::build_baseline(req, name, stop)?;
    tracing::debug!(target: "ccsynth::timing", algorithm = name, wall_ms = t0.elapsed().as_secs_f64() * 1e3, "auto: baseline built");
    let so_far = best.get();
    if let Some(bound) = crate::sim::link_load_bound_ns(&s)
        && bound > so_far
    {
        let note = format!(
            "skipped: its busiest link alone is busy {:.3} us, longer than a schedule already found ({:.3} us)",
            bound / 1e3,
            so_far / 1e3
        );
        return Ok(Err((note, bound)));
    }
    // Every candidate serves one collective: its bounds are computed once, at the end.
    let (schedule, report) = super::gate_until(s, gate, stop.cancel_poll())?;
    Ok(Ok(Output { schedule, report, stats: RunStats::Baseline { algorithm: name.to_string() }, lp: Vec::new() }))
}

/// What every candidate of a wave shares: the request, the candidates and their prices, the
/// door's control, when to stop, the fastest time so far, the gate, and whether a schedule at
/// the bound was in hand when the wave began.
struct Candidates<'a> {
    req: &'a Request,
    algorithms: &'a [Algorithm],
    prices: &'a [Option<f64>],
    ctl: Control<'a>,
    stop: Stop<'a>,
    best: &'a Incumbent,
    gate: Gate,
    at_floor: bool,
}

impl Candidates<'_> {
    /// Runs candidate `i` (a baseline priced at `prices[i]`) until `stop`: its entry, and its
    /// outcome (its schedule, or the greedy's error, or a cancel).
    fn attempt(&self, i: usize) -> (PortfolioEntry, Outcomes<usize, Output>) {
        let (req, algorithm, price_ns, best) = (self.req, &self.algorithms[i], self.prices[i], self.best);
        let mut entry = PortfolioEntry {
            algorithm: algorithm.name().to_string(),
            chunks_per_npu: None,
            greedy_mode: None,
            seed: (*algorithm == Algorithm::Greedy).then_some(req.seed),
            seeds: (*algorithm == Algorithm::Greedy).then_some(req.seeds),
            collective_time_ns: None,
            valid: false,
            cut: false,
            wall_ms: 0.0,
            price_ns,
            busiest_link_ns: None,
            note: None,
            chosen: false,
        };
        if self.stop.cancelled() {
            return (entry, Outcomes::cancelled());
        }
        let now = Instant::now();
        if let Some((note, cut)) = self.not_run(algorithm, price_ns, now) {
            entry.cut = cut;
            entry.note = Some(note);
            return (entry, Outcomes::default());
        }
        (self.ctl.progress)(i as f64 / self.algorithms.len() as f64, &format!("auto: {}", algorithm.name()));
        // The ILP candidate stopped by its own cap, not by the time limit (a longer limit
        // would not run it longer).
        let mut own_cap = false;
        let result = match algorithm {
            Algorithm::Ilp => {
                let left = self.stop.deadline().saturating_duration_since(now).as_secs_f64();
                own_cap = left / 2.0 >= ILP_BUDGET_S && req.time_limit_s / 2.0 >= ILP_BUDGET_S;
                let share = now + Duration::from_secs_f64((left / 2.0).min(ILP_BUDGET_S));
                let mut ilp = req.clone();
                ilp.seeds = 1;
                // Its work budget is fixed by the request, not by what the candidates before it
                // left: the same request gets the same ILP schedule, unless the clock cuts it.
                ilp.ilp.work_limit_s = Some((req.time_limit_s / 2.0).min(ILP_BUDGET_S));
                super::run_synthesizer(&ilp, algorithm, self.ctl, self.stop.until(share), self.gate, None)
            }
            Algorithm::Baseline(name) => match baseline_candidate(req, name, best, self.stop, self.gate) {
                Ok(Ok(out)) => Ok(out),
                Ok(Err((skipped, busiest_ns))) => {
                    entry.wall_ms = now.elapsed().as_secs_f64() * 1e3;
                    entry.note = Some(skipped);
                    entry.busiest_link_ns = Some(busiest_ns);
                    return (entry, Outcomes::default());
                }
                Err(e) => Err(e),
            },
            _ => {
                let beat = Some(best.get()).filter(|t| t.is_finite());
                super::run_synthesizer(req, algorithm, self.ctl, self.stop, self.gate, beat)
            }
        };
        entry.wall_ms = now.elapsed().as_secs_f64() * 1e3;
        tracing::debug!(target: "ccsynth::timing", algorithm = algorithm.name(), wall_ms = entry.wall_ms, "auto: candidate done");
        let outcome = match result {
            Ok(out) => {
                // Deferred, a time is offered before its schedule is validated: were the winner
                // found invalid, `run_against` runs every candidate again, each validated.
                let t = out.schedule.collective_time_ns.unwrap_or(f64::INFINITY);
                if out.report.valid || self.gate == Gate::Deferred {
                    best.offer(t);
                }
                entry.collective_time_ns = out.schedule.collective_time_ns;
                entry.chunks_per_npu = Some(out.schedule.collective.chunks());
                entry.greedy_mode = out.stats.synthesis().and_then(|s| s.greedy_mode());
                entry.valid = out.report.valid;
                let unproven =
                    out.stats.synthesis().and_then(|s| s.ilp.as_ref()).is_some_and(|i| i.status == IlpStatus::Feasible);
                entry.cut = out.stats.synthesis().and_then(|s| s.greedy.as_ref()).is_some_and(|g| g.runs_cut > 0)
                    || (unproven && !own_cap);
                if unproven && own_cap {
                    entry.note = Some(format!(
                        "not proven optimal: stopped by auto's cap on the ILP candidate ({} s), not by the time limit; `--algo ilp` runs it within the time limit",
                        crate::units::short(ILP_BUDGET_S)
                    ));
                }
                Outcomes::won_alone(t, i, out)
            }
            Err(Error::Cancelled) => Outcomes::cancelled(),
            Err(e) => {
                entry.cut = matches!(e, Error::TimeLimit { .. }) && !own_cap;
                if let Error::PricedOut { price_ns, .. } = e {
                    entry.price_ns = Some(price_ns);
                }
                entry.note = Some(e.to_string());
                // The greedy's error is the portfolio's where nothing gave a schedule.
                if !entry.cut && *algorithm == Algorithm::Greedy { Outcomes::failed(i, e) } else { Outcomes::default() }
            }
        };
        (entry, outcome)
    }

    /// Why a candidate is not run at all, if it is not, and whether that was the clock's cut:
    /// its price above a schedule already found, a synthesizer beside a schedule at the bound,
    /// or the deadline past at `now`.
    fn not_run(&self, algorithm: &Algorithm, price_ns: Option<f64>, now: Instant) -> Option<(String, bool)> {
        let so_far = self.best.get();
        // A price above a schedule already found: it cannot win, nor tie (strictly slower).
        if let Some(price) = price_ns
            && price > so_far
        {
            let note = format!(
                "skipped before it was built: its structure alone takes at least {:.3} us, longer than a schedule already found ({:.3} us)",
                price / 1e3,
                so_far / 1e3
            );
            return Some((note, false));
        }
        // A schedule at the collective's lower bound already (a lead baseline's, an incumbent's):
        // a synthesizer could at best tie it, and would take the time limit trying (the greedy
        // on fc:1024 beside direct's all-gather at the bound: 10 s for nothing).
        if matches!(algorithm, Algorithm::Greedy | Algorithm::Ilp) && self.at_floor {
            return Some((format!("{AT_THE_BOUND} ({:.3} us)", so_far / 1e3), false));
        }
        (now >= self.stop.deadline()).then(|| ("not started: the time limit had run out".into(), true))
    }
}
