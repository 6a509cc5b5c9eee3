//! The engine's one search kernel: when a run must stop and why (`Stop`), and how the
//! candidates of a search fold into one result (`Outcomes`: the fastest and the runner-up,
//! the first error, how many the clock cut, whether the caller cancelled), side by side on the
//! pool (`fold`) or one after another. Its clients: the greedy's runs (`greedy_runs`), `auto`'s
//! candidates (`portfolio`) and the ILP's grids (`ilp`), with the fastest time so far their
//! runs share while they run (`Incumbent`). Beneath it, `fastest` holds the deterministic merges.

use super::error::Error;
use super::fastest::{FastestTwo, Least, time};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why a run must stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The caller cancelled.
    Cancelled,
    /// The time limit ran out.
    Deadline,
}

/// When a run must stop: the caller's cancel poll, the run's deadline, and the time limit a
/// `TimeLimit` error names. A search may stop its runs earlier once any has a schedule
/// (`with_reserve`). A caller's cancel is always said as such, never as the clock's.
#[derive(Clone, Copy)]
pub struct Stop<'a> {
    cancelled: &'a (dyn Fn() -> bool + Sync),
    deadline: Instant,
    limit_s: f64,
    /// An earlier deadline that holds once the flag is set (the greedy's runs, once one has a
    /// schedule, leave the winner's check its time).
    early: Option<(Instant, &'a AtomicBool)>,
}

impl<'a> Stop<'a> {
    /// Stops on `cancelled` or at `deadline`; a run the clock stops fails with
    /// `Error::TimeLimit { limit_s }`.
    pub fn new(cancelled: &'a (dyn Fn() -> bool + Sync), deadline: Instant, limit_s: f64) -> Stop<'a> {
        Stop { cancelled, deadline, limit_s, early: None }
    }

    /// The same, but stopping at `at` already once `armed` is set.
    pub(super) fn with_reserve(self, at: Instant, armed: &'a AtomicBool) -> Stop<'a> {
        Stop { early: Some((at, armed)), ..self }
    }

    /// The same, by a deadline no later than `at` (a candidate's share of the budget).
    pub(super) fn until(self, at: Instant) -> Stop<'a> {
        Stop { deadline: self.deadline.min(at), ..self }
    }

    /// The same, polling `cancelled` instead (a poll that also reports progress).
    pub(super) fn polling(self, cancelled: &'a (dyn Fn() -> bool + Sync)) -> Stop<'a> {
        Stop { cancelled, ..self }
    }

    /// Why the run must stop now, if it must: a cancel first.
    pub fn why(&self) -> Option<Why> {
        if (self.cancelled)() {
            return Some(Why::Cancelled);
        }
        let now = Instant::now();
        let early = self.early.is_some_and(|(at, armed)| now >= at && armed.load(Ordering::Relaxed));
        (now >= self.deadline || early).then_some(Why::Deadline)
    }

    /// Whether the run must stop now (the poll every algorithm beneath the engine takes).
    pub fn now(&self) -> bool {
        self.why().is_some()
    }

    /// Whether the caller cancelled.
    pub(super) fn cancelled(&self) -> bool {
        (self.cancelled)()
    }

    /// The caller's cancel poll alone (for the checks, which the clock does not stop).
    pub(super) fn cancel_poll(&self) -> &'a (dyn Fn() -> bool + Sync) {
        self.cancelled
    }

    /// The deadline.
    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The time limit a `TimeLimit` error names, seconds.
    pub(super) fn limit_s(&self) -> f64 {
        self.limit_s
    }

    /// The time left to the deadline (zero once past).
    pub(super) fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The error of a run stopped now: `Cancelled` where the caller cancelled, else the
    /// clock's `TimeLimit` (what a poll that said stop meant).
    pub(super) fn error(&self) -> Error {
        self.error_for(self.why().unwrap_or(Why::Deadline))
    }

    /// The error of a run that must stop now, if it must (the cancel poll asked once).
    pub(super) fn halted(&self) -> Option<Error> {
        self.why().map(|why| self.error_for(why))
    }

    fn error_for(&self, why: Why) -> Error {
        match why {
            Why::Cancelled => Error::Cancelled,
            Why::Deadline => Error::TimeLimit { limit_s: self.limit_s },
        }
    }
}

/// The candidates of a search folded together: the fastest and the runner-up (ties to the
/// smaller key `K`, the candidate's place in the search), the first failure (by index), how
/// many the clock cut, and whether the caller cancelled. Merging is associative and
/// commutative: the result does not depend on the order the pool finishes them in.
pub(super) struct Outcomes<K, T> {
    best: FastestTwo<K, T>,
    error: Least<usize, Error>,
    cut: usize,
    cancelled: bool,
    /// Whether the runner-up is kept: not where candidates are whole schedules the search never
    /// looks at again (`auto`'s, the ILP's grids'), so a loser is dropped as soon as it loses.
    runner_up: bool,
}

impl<K, T> Default for Outcomes<K, T> {
    fn default() -> Self {
        Outcomes { best: FastestTwo::default(), error: Least::default(), cut: 0, cancelled: false, runner_up: true }
    }
}

/// A search's end: its fastest candidate, the runner-up, and how many the clock cut.
pub(super) struct Finished<T> {
    pub(super) best: T,
    pub(super) runner_up: Option<T>,
    pub(super) cut: usize,
}

impl<K: Ord, T> Outcomes<K, T> {
    /// A candidate that finished in `time_ns`.
    pub(super) fn won(time_ns: f64, key: K, item: T) -> Self {
        Outcomes { best: FastestTwo::of((time(time_ns), key), item), ..Outcomes::default() }
    }

    /// The same, in a search that keeps no runner-up (whatever it is merged with keeps none).
    pub(super) fn won_alone(time_ns: f64, key: K, item: T) -> Self {
        Outcomes { runner_up: false, ..Outcomes::won(time_ns, key, item) }
    }

    /// Candidate `index` failed with `e`.
    pub(super) fn failed(index: usize, e: Error) -> Self {
        Outcomes { error: Least::of(index, e), ..Outcomes::default() }
    }

    /// A candidate the clock cut.
    pub(super) fn cut() -> Self {
        Outcomes { cut: 1, ..Outcomes::default() }
    }

    /// A candidate the caller's cancel stopped.
    pub(super) fn cancelled() -> Self {
        Outcomes { cancelled: true, ..Outcomes::default() }
    }

    /// A candidate stopped for `why`: cancelled, or cut by the clock.
    pub(super) fn stopped(why: Why) -> Self {
        match why {
            Why::Cancelled => Outcomes::cancelled(),
            Why::Deadline => Outcomes::cut(),
        }
    }

    /// Both folded together.
    pub(super) fn merge(self, other: Self) -> Self {
        let runner_up = self.runner_up && other.runner_up;
        let best = self.best.merge(other.best);
        Outcomes {
            best: if runner_up { best } else { best.without_second() },
            error: self.error.merge(other.error),
            cut: self.cut + other.cut,
            cancelled: self.cancelled || other.cancelled,
            runner_up,
        }
    }

    /// Whether any candidate finished.
    pub(super) fn any(&self) -> bool {
        self.best.key().is_some()
    }

    /// Whether the caller cancelled.
    pub(super) fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// The search's result: `Cancelled` where the caller cancelled; the fastest and the
    /// runner-up; where nothing finished, the first failure, else the clock's `TimeLimit`.
    pub(super) fn finish(self, limit_s: f64) -> Result<Finished<T>, Error> {
        if self.cancelled {
            return Err(Error::Cancelled);
        }
        match self.best.into_inner() {
            (Some(best), runner_up) => Ok(Finished { best, runner_up, cut: self.cut }),
            (None, _) => Err(self.error.into_inner().unwrap_or(Error::TimeLimit { limit_s })),
        }
    }
}

/// Every one of `items` through `each` on the current rayon pool, folded (`Outcomes::merge`):
/// the result is the same whatever the threads.
pub(super) fn fold<I, K, T>(items: &[I], each: impl Fn(usize, &I) -> Outcomes<K, T> + Sync + Send) -> Outcomes<K, T>
where
    I: Sync,
    K: Ord + Send,
    T: Send,
{
    use rayon::prelude::*;
    items.par_iter().enumerate().map(|(i, x)| each(i, x)).reduce(Outcomes::default, Outcomes::merge)
}

/// `fold`, one after another on this thread.
pub(super) fn fold_serial<I, K: Ord, T>(items: &[I], each: impl Fn(usize, &I) -> Outcomes<K, T>) -> Outcomes<K, T> {
    items.iter().enumerate().map(|(i, x)| each(i, x)).fold(Outcomes::default(), Outcomes::merge)
}

/// The fastest time found so far by runs side by side (f64 bits, +∞ at first), shared across
/// the pool: each run offers its time, and reads it to skip or cut what cannot beat it. It may
/// know the collective's lower bound (its floor), below which nothing can finish.
pub(super) struct Incumbent {
    time_ns: std::sync::atomic::AtomicU64,
    floor_ns: f64,
}

impl Incumbent {
    /// With `ns` (a schedule the caller already has) to beat, or nothing.
    pub(super) fn new(ns: Option<f64>) -> Incumbent {
        Incumbent { time_ns: std::sync::atomic::AtomicU64::new(ns.unwrap_or(f64::INFINITY).to_bits()), floor_ns: 0.0 }
    }

    /// The same, knowing the collective's lower bound (`None`: not known).
    pub(super) fn with_floor(self, floor: Option<f64>) -> Incumbent {
        Incumbent { floor_ns: floor.unwrap_or(0.0), ..self }
    }

    /// The fastest time offered so far (or given at the start), +∞ when none.
    pub(super) fn get(&self) -> f64 {
        f64::from_bits(self.time_ns.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Takes `ns` as the best when it beats it (a tie keeps the incumbent); whether it did.
    pub(super) fn offer(&self, ns: f64) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.time_ns.fetch_update(SeqCst, SeqCst, |best| (ns < f64::from_bits(best)).then_some(ns.to_bits())).is_ok()
    }

    /// Whether a schedule at the lower bound is in hand (within rounding): nothing can be
    /// faster.
    pub(super) fn at_floor(&self) -> bool {
        self.floor_ns > 0.0 && self.get() <= self.floor_ns * (1.0 + 1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A candidate of a test search: finished in a time, failed, cut, or cancelled.
    #[derive(Clone, Copy, Debug)]
    enum Case {
        Won(u8),
        Failed,
        Cut,
        Cancelled,
    }

    fn outcome(i: usize, c: Case) -> Outcomes<usize, usize> {
        match c {
            Case::Won(t) => Outcomes::won(t as f64, i, i),
            Case::Failed => Outcomes::failed(
                i,
                Error::Unsupported { by: crate::engine::Refuser::Synthesizer, reason: i.to_string() },
            ),
            Case::Cut => Outcomes::cut(),
            Case::Cancelled => Outcomes::cancelled(),
        }
    }

    fn case() -> impl Strategy<Value = Case> {
        prop_oneof![(0u8..5).prop_map(Case::Won), Just(Case::Failed), Just(Case::Cut), Just(Case::Cancelled),]
    }

    /// What a search of `cases` must end in, written out without the kernel.
    fn expected(cases: &[Case]) -> Result<(usize, Option<usize>, usize), String> {
        if cases.iter().any(|c| matches!(c, Case::Cancelled)) {
            return Err("cancelled".into());
        }
        let mut won: Vec<(u8, usize)> = cases
            .iter()
            .enumerate()
            .filter_map(|(i, c)| if let Case::Won(t) = c { Some((*t, i)) } else { None })
            .collect();
        won.sort();
        let cut = cases.iter().filter(|c| matches!(c, Case::Cut)).count();
        match (won.first(), cases.iter().position(|c| matches!(c, Case::Failed))) {
            (Some(&(_, i)), _) => Ok((i, won.get(1).map(|w| w.1), cut)),
            (None, Some(i)) => Err(format!("failed {i}")),
            (None, None) => Err("time limit".into()),
        }
    }

    fn said(r: Result<Finished<usize>, Error>) -> Result<(usize, Option<usize>, usize), String> {
        match r {
            Ok(f) => Ok((f.best, f.runner_up, f.cut)),
            Err(Error::Cancelled) => Err("cancelled".into()),
            Err(Error::TimeLimit { limit_s }) => {
                assert_eq!(limit_s, 7.0);
                Err("time limit".into())
            }
            Err(Error::Unsupported { reason, .. }) => Err(format!("failed {reason}")),
            Err(e) => panic!("unexpected {e}"),
        }
    }

    proptest! {
        /// Any mix of finished, failed, cut and cancelled candidates ends as the rule says
        /// (cancelled over all; else the fastest, ties to the earliest, and the runner-up;
        /// else the earliest failure; else the clock), whether folded on the pool or one by one.
        #[test]
        fn a_search_ends_as_its_candidates_say(cases in proptest::collection::vec(case(), 0..20)) {
            let want = expected(&cases);
            let pooled = fold(&cases, |i, &c| outcome(i, c));
            let serial = fold_serial(&cases, |i, &c| outcome(i, c));
            prop_assert_eq!(said(pooled.finish(7.0)), want.clone());
            prop_assert_eq!(said(serial.finish(7.0)), want);
        }
    }

    /// A search of candidates that won alone keeps no runner-up, whatever the merges.
    #[test]
    fn a_search_alone_keeps_no_runner_up() {
        let each = |i: usize, &t: &u8| Outcomes::won_alone(t as f64, i, i);
        for f in [fold(&[3u8, 1, 2], each), fold_serial(&[3u8, 1, 2], each)] {
            let done = f.finish(1.0).ok().unwrap();
            assert_eq!((done.best, done.runner_up), (1, None));
        }
        let two = fold_serial(&[3u8, 1, 2], |i, &t| Outcomes::won(t as f64, i, i)).finish(1.0).ok().unwrap();
        assert_eq!((two.best, two.runner_up), (1, Some(2)));
    }

    /// A stop says why: the caller's cancel over the clock, the clock once past, the early
    /// deadline only once armed, and the error of each.
    #[test]
    fn a_stop_says_why() {
        let past = Instant::now() - Duration::from_millis(1);
        let later = Instant::now() + Duration::from_secs(3600);
        let yes = || true;
        let no = || false;
        assert_eq!(Stop::new(&yes, later, 5.0).why(), Some(Why::Cancelled));
        assert_eq!(Stop::new(&yes, past, 5.0).why(), Some(Why::Cancelled));
        assert!(matches!(Stop::new(&yes, past, 5.0).error(), Error::Cancelled));
        assert_eq!(Stop::new(&no, past, 5.0).why(), Some(Why::Deadline));
        assert!(matches!(Stop::new(&no, past, 5.0).halted(), Some(Error::TimeLimit { limit_s }) if limit_s == 5.0));
        assert_eq!(Stop::new(&no, later, 5.0).why(), None);
        assert!(Stop::new(&no, later, 5.0).halted().is_none());
        let armed = AtomicBool::new(false);
        let early = Stop::new(&no, later, 5.0).with_reserve(past, &armed);
        assert_eq!(early.why(), None);
        armed.store(true, Ordering::Relaxed);
        assert_eq!(early.why(), Some(Why::Deadline));
        assert_eq!(Stop::new(&no, later, 5.0).until(past).why(), Some(Why::Deadline));
        assert_eq!(Stop::new(&no, past, 5.0).until(later).deadline(), past, "a share never extends the budget");
    }
}
