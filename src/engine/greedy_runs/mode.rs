//! The greedy's planners (`Mode`, each with the name `stats.greedy_mode` reports) and one
//! run's parameters (`Run`): what `plan::plan_runs` lays out and `greedy_runs` runs.

/// One greedy run's parameters: which variant (chunks per NPU), seed and planner.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    /// Index into the variants tried.
    pub(super) variant: usize,
    pub(super) seed: u64,
    pub(super) mode: Mode,
}

/// How a greedy run plans: the matcher at one of the variant's discretizations, or the
/// latency mode (batched messages, or for all-reduce every contribution flooded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// The matcher, at this index into the discretizations tried.
    Matching(usize),
    /// Batched messages along shortest paths (`synth::flood::plan`).
    Batched,
    /// All-reduce by flooding every contribution (`synth::flood::all_reduce_by_contributions`).
    Contributions,
    /// Recursive doubling (or halving then doubling) on a searched hypercube labelling
    /// (`synth::doubling`).
    Doubling(crate::synth::doubling::Shape),
    /// One broadcast pattern translated to every source on a torus (`synth::translate`).
    Translation,
    /// The matcher on an all-reduce with this many chunks moved together in every message
    /// (`synth::greedy_grouped`), at the fastest edge's timestep.
    Grouped(u32),
    /// Every chunk on a path of its own, spread over the shortest paths and list-scheduled
    /// at the best of a few numbers of chunks per message (`synth::routed`).
    Routed,
    /// The matcher as before unequal shares (`synth::greedy_plain`), at this index into the
    /// discretizations tried: beside `Matching` on combining collectives of up to
    /// `PLAIN_MAX_NPUS` NPUs.
    Plain(usize),
    /// The matcher with the rarest-first pick (`synth::greedy_rarest`), at this index into the
    /// discretizations tried: beside `Matching` on collectives that do not combine, of up to
    /// `RAREST_MAX_NPUS` NPUs.
    Rarest(usize),
    /// The matcher's all-reduce in this many pipelined stages (`synth::staged`), at this index
    /// into the discretizations tried: beside `Matching` where at least one NPU in eight moves
    /// data slower than the fastest (`synth::staged::applies`), on up to `STAGED_MAX_NPUS` NPUs.
    Staged(u32, usize),
    /// The matcher's all-reduce with spread shares (`synth::greedy_spread`), at this index into
    /// the discretizations tried: beside `Matching` where the balanced shares sit on fewer than
    /// one NPU in eight (`synth::shares::concentrated`).
    Spread(usize),
    /// An all-reduce of per-chunk spanning trees, this many chunks a message, list-scheduled
    /// (`synth::trees`): beside the matcher on an all-reduce whose links are alike both ways.
    Trees(u32),
}

impl Mode {
    /// The name `stats.greedy_mode` reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Matching(_) => "matching",
            Mode::Batched => "batched",
            Mode::Contributions => "contributions",
            Mode::Doubling(s) if s.halving => "halving_doubling",
            Mode::Doubling(_) => "doubling",
            Mode::Translation => "translation",
            Mode::Grouped(_) | Mode::Plain(_) | Mode::Rarest(_) | Mode::Staged(..) | Mode::Spread(_) => "matching",
            Mode::Routed => "routed",
            Mode::Trees(_) => "trees",
        }
    }
}
