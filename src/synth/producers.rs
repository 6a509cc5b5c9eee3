//! The greedy's producers in one table (`PRODUCERS`): for each planner the greedy runs, which
//! runs are its (`Mode`), the name `stats.greedy_mode` reports, whether it belongs to the
//! matcher's family, the runs it offers a request (`offers`: where it applies, at which
//! chunkings, seeds and timesteps, and which runs before it it replaces), and how one run
//! becomes a schedule (`produce`, one shape for all: `Produced`).
//!
//! A new producer is its module, a `Mode` variant and one row here (ARCHITECTURE.md, "Recipes").

pub mod offers;

use super::{Effort, PlanOptions, PlanStats, SynthError};
use crate::collective::Collective;
use crate::schedule::Schedule;
use crate::ten::SwitchModel;
use crate::topology::Topology;
use offers::{Offer, Offered};

/// How a greedy run plans: the matcher at one of the variant's discretizations, or another
/// planner with its parameters. The order of the variants breaks ties between runs of equal
/// time (after the chunking and the seed), so a new variant goes last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// The matcher, at this index into the discretizations tried.
    Matching(usize),
    /// Batched messages along shortest paths (`flood::plan`).
    Batched,
    /// All-reduce by flooding every contribution (`flood::all_reduce_by_contributions`).
    Contributions,
    /// Recursive doubling (or halving then doubling) on a searched hypercube labelling
    /// (`doubling`).
    Doubling(super::doubling::Shape),
    /// One broadcast pattern translated to every source on a torus (`translate`).
    Translation,
    /// The matcher on an all-reduce with this many chunks moved together in every message
    /// (`greedy_grouped`), at the fastest edge's timestep.
    Grouped(u32),
    /// Every chunk on a path of its own, spread over the shortest paths and list-scheduled
    /// at the best of a few numbers of chunks per message (`routed`).
    Routed,
    /// The matcher as before unequal shares (`greedy_plain`), at this index into the
    /// discretizations tried.
    Plain(usize),
    /// The matcher with the rarest-first pick (`greedy_rarest`), at this index into the
    /// discretizations tried.
    Rarest(usize),
    /// The matcher's all-reduce in this many pipelined stages (`staged`), at this index into
    /// the discretizations tried.
    Staged(u32, usize),
    /// The matcher's all-reduce with spread shares (`greedy_spread`), at this index into the
    /// discretizations tried.
    Spread(usize),
    /// An all-reduce of per-chunk spanning trees, this many chunks a message, list-scheduled
    /// (`trees`).
    Trees(u32),
    /// An all-gather or a broadcast down this many spanning trees per root, packed at the
    /// min-cut bound, chunks pipelined down them (`packing`).
    Packing(u32),
    /// One broadcast pattern in rounds, several chunks a direction a round sent as one
    /// message, translated to every source on a torus (`translate::rounds`).
    Rounds,
}

/// One greedy run: which chunking (`variant`, an index into the chunkings tried), seed and
/// planner.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub variant: usize,
    pub seed: u64,
    pub mode: Mode,
}

/// Whether a producer's runs are the matcher's on the TEN (dropped at a chunking where a
/// translation pattern is optimal: they cannot beat it there) or a planner of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Matcher,
    Own,
}

/// One row of the table.
pub struct Producer {
    /// Whether a run is this producer's.
    pub runs: fn(Mode) -> bool,
    /// The name `stats.greedy_mode` reports.
    pub name: &'static str,
    pub family: Family,
    /// The runs it offers a request, given the runs the rows above offered.
    pub offers: fn(&Offer<'_>, &[Run]) -> Offered,
    /// One run's schedule (not yet ranked or validated).
    pub produce: fn(&Input<'_>, Mode, &Polled<'_>) -> Result<Produced, SynthError>,
}

/// The stop poll every run takes: a cancel, or its deadline.
pub type Polled<'a> = dyn Fn() -> bool + Sync + 'a;

/// What a run produced: a schedule, its planner's statistics and, for the trees, where a
/// polish resumes (`trees::polish`).
pub struct Produced {
    pub schedule: Schedule,
    pub stats: PlanStats,
    pub resume: Option<super::trees::Resume>,
}

impl Produced {
    fn of((schedule, stats): (Schedule, PlanStats)) -> Produced {
        Produced { schedule, stats, resume: None }
    }

    /// A planner that works in rounds, not on the matcher's TEN: its rounds and their time.
    fn rounds((schedule, rounds, discretization_ns): (Schedule, u32, f64)) -> Produced {
        let stats = PlanStats {
            ten_timesteps: rounds,
            phase_timesteps: vec![rounds],
            discretization_ns,
            ..PlanStats::default()
        };
        Produced { schedule, stats, resume: None }
    }
}

/// What the runs of one synthesis work out once and share (a run waits for the first to):
/// the doubling planners' labelling, for every shape and chunking, and the tree packing at
/// each number of trees per root, for every chunking.
#[derive(Default)]
pub struct Memo {
    pub labels: std::sync::OnceLock<Result<Vec<usize>, SynthError>>,
    pub packings: super::packing::Packings,
}

/// A translation pattern where it serves (`translate`): the torus, the pattern, and whether
/// it is optimal among schedules of one chunk per link per step (every NPU receives k(N−1)
/// chunks per phase over its links; with a reduce cost γ the two phases' transfers differ in
/// length, so a two-phase bound is not claimed then).
pub type TranslationPattern = (super::translate::Torus, super::translate::Pattern, bool);

/// What one run takes beside its mode.
pub struct Input<'a> {
    pub topology: &'a Topology,
    /// The run's chunking of the collective.
    pub collective: &'a Collective,
    /// The first chunking (the doubling planners label the NPUs on it).
    pub first: &'a Collective,
    /// The seed, the switch model, and the TEN timestep of a run of the matcher's family.
    pub opts: PlanOptions,
    pub effort: Effort,
    /// The chunking's translation pattern, where translation serves (in rounds for a
    /// `Mode::Rounds` run).
    pub pattern: Option<&'a TranslationPattern>,
    pub memo: &'a Memo,
}

impl Input<'_> {
    fn switch_model(&self) -> SwitchModel {
        self.opts.switch_model
    }
}

/// Every producer the greedy runs, in the order they offer their runs (`offers::runs`).
pub const PRODUCERS: &[Producer] = &[
    Producer {
        runs: |m| matches!(m, Mode::Matching(_)),
        name: "matching",
        family: Family::Matcher,
        offers: offers::matching,
        produce: |i, _, polled| super::greedy(i.topology, i.collective, &i.opts, polled).map(Produced::of),
    },
    Producer {
        runs: |m| matches!(m, Mode::Plain(_)),
        name: "matching",
        family: Family::Matcher,
        offers: offers::plain,
        produce: |i, _, polled| super::greedy_plain(i.topology, i.collective, &i.opts, polled).map(Produced::of),
    },
    Producer {
        runs: |m| matches!(m, Mode::Staged(..)),
        name: "matching",
        family: Family::Matcher,
        offers: offers::staged,
        produce: |i, m, polled| {
            let Mode::Staged(n, _) = m else { unreachable!("the staged row's runs") };
            super::greedy_staged(i.topology, i.collective, n, &i.opts, polled).map(Produced::of)
        },
    },
    Producer {
        runs: |m| matches!(m, Mode::Spread(_)),
        name: "matching",
        family: Family::Matcher,
        offers: offers::spread,
        produce: |i, _, polled| super::greedy_spread(i.topology, i.collective, &i.opts, polled).map(Produced::of),
    },
    Producer {
        runs: |m| matches!(m, Mode::Rarest(_)),
        name: "matching",
        family: Family::Matcher,
        offers: offers::rarest,
        produce: |i, _, polled| super::greedy_rarest(i.topology, i.collective, &i.opts, polled).map(Produced::of),
    },
    Producer {
        runs: |m| matches!(m, Mode::Translation),
        name: "translation",
        family: Family::Own,
        offers: offers::translation,
        produce: translated,
    },
    Producer {
        runs: |m| matches!(m, Mode::Rounds),
        name: "translation_rounds",
        family: Family::Own,
        offers: offers::rounds,
        produce: translated,
    },
    Producer {
        runs: |m| matches!(m, Mode::Grouped(_)),
        name: "matching",
        family: Family::Own,
        offers: offers::grouped,
        produce: |i, m, polled| {
            let Mode::Grouped(g) = m else { unreachable!("the grouped row's runs") };
            super::greedy_grouped(i.topology, i.collective, g as usize, &i.opts, polled).map(Produced::of)
        },
    },
    Producer {
        runs: |m| matches!(m, Mode::Trees(_)),
        name: "trees",
        family: Family::Own,
        offers: offers::trees,
        // The trees say where they stopped, for the winner's polish.
        produce: |i, m, polled| {
            let Mode::Trees(g) = m else { unreachable!("the trees row's runs") };
            super::trees::all_reduce_resumable(i.topology, i.collective, g as usize, i.opts.seed, i.effort, polled)
                .map(|(schedule, stats, resume)| Produced { schedule, stats, resume })
        },
    },
    Producer {
        runs: |m| matches!(m, Mode::Packing(_)),
        name: "packing",
        family: Family::Own,
        offers: offers::packing,
        produce: |i, m, polled| {
            let Mode::Packing(k) = m else { unreachable!("the packing row's runs") };
            let packings = &i.memo.packings;
            super::packing::produce(i.topology, i.collective, k as usize, i.opts.seed, packings, polled)
                .map(Produced::of)
        },
    },
    Producer {
        runs: |m| matches!(m, Mode::Routed),
        name: "routed",
        family: Family::Own,
        offers: offers::routed,
        produce: |i, _, polled| {
            let groups = super::routed::groups(i.topology, i.collective.chunk_size_bytes);
            super::routed::synthesize(i.topology, i.collective, &groups, i.opts.seed, polled).map(Produced::of)
        },
    },
    Producer {
        runs: |m| matches!(m, Mode::Contributions),
        name: "contributions",
        family: Family::Own,
        offers: offers::contributions,
        produce: |i, _, polled| {
            super::flood::all_reduce_by_contributions(i.topology, i.collective, i.switch_model(), i.opts.seed, polled)
                .map(Produced::rounds)
        },
    },
    Producer {
        runs: |m| matches!(m, Mode::Batched),
        name: "batched",
        family: Family::Own,
        offers: offers::batched,
        produce: |i, _, polled| super::batched(i.topology, i.collective, &i.opts, polled).map(Produced::of),
    },
    Producer {
        runs: |m| matches!(m, Mode::Doubling(s) if !s.halving),
        name: "doubling",
        family: Family::Own,
        offers: |o, _| offers::doubling(o, false),
        produce: doubling,
    },
    Producer {
        runs: |m| matches!(m, Mode::Doubling(s) if s.halving),
        name: "halving_doubling",
        family: Family::Own,
        offers: |o, _| offers::doubling(o, true),
        produce: doubling,
    },
];

/// A translation run, in steps or in rounds: its chunking's pattern (`Input::pattern`)
/// translated to every source.
fn translated(i: &Input<'_>, _: Mode, polled: &Polled<'_>) -> Result<Produced, SynthError> {
    let (torus, pattern, _) = i.pattern.expect("a translation run has its pattern");
    super::translated(i.topology, i.collective, &i.opts, torus, pattern, polled).map(Produced::of)
}

/// The doubling planners' run: the labelling searched once (on the first chunking), then the
/// run's shape on it.
fn doubling(i: &Input<'_>, m: Mode, polled: &Polled<'_>) -> Result<Produced, SynthError> {
    let Mode::Doubling(shape) = m else { unreachable!("the doubling rows' runs") };
    let at = i
        .memo
        .labels
        .get_or_init(|| super::doubling::labelling(i.topology, i.first, i.switch_model(), i.opts.seed, polled));
    let at = at.clone()?;
    super::doubling::synthesize(i.topology, i.collective, i.switch_model(), shape, &at, i.opts.seed)
        .map(Produced::rounds)
}

impl Mode {
    /// Its row of `PRODUCERS`.
    pub fn producer(self) -> &'static Producer {
        PRODUCERS.iter().find(|p| (p.runs)(self)).expect("every mode has its row in PRODUCERS")
    }

    /// The name `stats.greedy_mode` reports.
    pub fn name(self) -> &'static str {
        self.producer().name
    }

    /// Whether it is a run of the matcher's family.
    pub fn is_matcher(self) -> bool {
        self.producer().family == Family::Matcher
    }

    /// The index into the discretizations tried, for a run of the matcher's family.
    pub fn discretization(self) -> Option<usize> {
        match self {
            Mode::Matching(f) | Mode::Plain(f) | Mode::Rarest(f) | Mode::Staged(_, f) | Mode::Spread(f) => Some(f),
            _ => None,
        }
    }

    /// One run's schedule.
    pub fn produce(self, input: &Input<'_>, polled: &Polled<'_>) -> Result<Produced, SynthError> {
        (self.producer().produce)(input, self, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::doubling::Shape;

    /// Every mode has exactly one row, and the names and families are the ones `stats`
    /// reported before the table (`matching` for the matcher's variants and its groups).
    #[test]
    fn every_mode_has_one_row() {
        let modes = [
            (Mode::Matching(0), "matching", Family::Matcher),
            (Mode::Batched, "batched", Family::Own),
            (Mode::Contributions, "contributions", Family::Own),
            (Mode::Translation, "translation", Family::Own),
            (Mode::Rounds, "translation_rounds", Family::Own),
            (Mode::Grouped(2), "matching", Family::Own),
            (Mode::Routed, "routed", Family::Own),
            (Mode::Plain(1), "matching", Family::Matcher),
            (Mode::Rarest(0), "matching", Family::Matcher),
            (Mode::Staged(2, 0), "matching", Family::Matcher),
            (Mode::Spread(0), "matching", Family::Matcher),
            (Mode::Trees(3), "trees", Family::Own),
            (Mode::Packing(2), "packing", Family::Own),
            (
                Mode::Doubling(Shape { halving: true, multiport: false, interleaved: false }),
                "halving_doubling",
                Family::Own,
            ),
            (Mode::Doubling(Shape { halving: false, multiport: true, interleaved: false }), "doubling", Family::Own),
        ];
        for (m, name, family) in modes {
            assert_eq!(PRODUCERS.iter().filter(|p| (p.runs)(m)).count(), 1, "{m:?}");
            assert_eq!((m.name(), m.producer().family), (name, family), "{m:?}");
        }
    }
}
