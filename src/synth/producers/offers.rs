//! Which runs each producer offers a request (`Producer::offers`), the request's facts they
//! decide on (`Offer`), and the one loop that asks every row (`runs`): the NPU counts that
//! bound each planner, the chunkings, seeds and TEN timesteps they run at, and which runs a
//! row replaces (`Offered::replaces`).

mod messages;
mod translation;
mod trees;

use super::{Mode, PRODUCERS, Run, TranslationPattern};
use crate::collective::{Collective, CollectiveKind};
use crate::synth::SynthError;
use crate::ten::SwitchModel;
use crate::topology::Topology;
pub use translation::MAX_TRANSLATION_MOVES;
pub(super) use translation::{rounds, translation};
pub use trees::beta_over_alpha;
use trees::tree_runs;

/// What the rows decide on: the request, its chunkings, and what is worked out once for all of
/// them (the matcher's timesteps, the translation patterns, the trees' messages).
pub struct Offer<'a> {
    /// The request, its seeds at least one and its matcher's chunkings at least one.
    pub ask: Ask<'a>,
    /// One collective that moves something: every planner may run. Tenants sharing a schedule,
    /// or a collective with nothing to move, get the matcher alone.
    pub open: bool,
    /// TEN timesteps per variant (`Mode::Matching(f)` is the `f`th); the first `base[v]` are
    /// the automatic ones, the rest the finer ones (`fine_discretizations`).
    pub factors: Vec<Vec<Option<f64>>>,
    base: Vec<usize>,
    /// Each variant's translation pattern, where translation serves.
    pub patterns: Vec<Option<TranslationPattern>>,
    /// Each variant's translation pattern in rounds (`translate::rounds`), where it serves.
    pub rounds: Vec<Option<TranslationPattern>>,
    /// The (variant, chunks a message) the trees run at (`trees::tree_runs`).
    tree_runs: Vec<(usize, u32)>,
}

/// What a request asks of the greedy, as `Offer::new` takes it.
#[derive(Clone, Copy)]
pub struct Ask<'a> {
    pub topology: &'a Topology,
    /// The collective at each chunks per NPU to try; the matcher runs on the first
    /// `matcher_variants`.
    pub variants: &'a [&'a Collective],
    pub matcher_variants: usize,
    pub seed: u64,
    pub seeds: usize,
    pub discretization_ns: Option<f64>,
    pub switch_model: SwitchModel,
    pub grouping: &'a [u32],
    pub mirroring: bool,
    /// Tenants share one schedule (the matcher alone plans them).
    pub tenants: bool,
    /// Nothing moves: no TEN is built.
    pub trivial: bool,
    /// How much the search spends: the tree packing runs at `Effort::Thorough` alone.
    pub effort: crate::synth::Effort,
}

/// A row's runs, and which of the runs before them they replace.
#[derive(Default)]
pub struct Offered {
    pub runs: Vec<Run>,
    pub replaces: Replaces,
}

impl Offered {
    fn of(runs: Vec<Run>) -> Offered {
        Offered { runs, replaces: Replaces::Nothing }
    }
}

/// Which runs offered before a row its runs replace: none; the matcher's family at chunkings
/// where a translation pattern is optimal (it cannot be beaten there); the step translation at
/// chunkings a rounds pattern is sure to beat; the matcher at one chunk a message on the first
/// chunking, where the groups run instead; or all of them.
#[derive(Default)]
pub enum Replaces {
    #[default]
    Nothing,
    MatcherFamilyAt(Vec<usize>),
    TranslationAt(Vec<usize>),
    FirstMatcher,
    All,
}

impl Replaces {
    fn drops(&self, r: &Run) -> bool {
        match self {
            Replaces::Nothing => false,
            Replaces::MatcherFamilyAt(variants) => variants.contains(&r.variant) && r.mode.is_matcher(),
            Replaces::TranslationAt(variants) => variants.contains(&r.variant) && r.mode == Mode::Translation,
            Replaces::FirstMatcher => r.variant == 0 && matches!(r.mode, Mode::Matching(_)),
            Replaces::All => true,
        }
    }
}

/// Every row's runs, in the table's order, each row's replacements applied to the runs before
/// it.
pub fn runs(o: &Offer<'_>) -> Vec<Run> {
    let mut runs = Vec::new();
    for p in PRODUCERS {
        let Offered { runs: more, replaces } = (p.offers)(o, &runs);
        runs.retain(|r| !replaces.drops(r));
        runs.extend(more);
    }
    runs
}

impl<'a> Offer<'a> {
    /// The facts every row decides on, worked out once: the matcher's timesteps, the
    /// translation patterns (searched here: it is cheap) and the trees' messages.
    pub fn new(ask: Ask<'a>, cancelled: &(dyn Fn() -> bool + Sync)) -> Result<Offer<'a>, SynthError> {
        let matcher_variants = ask.matcher_variants.clamp(1, ask.variants.len());
        let ask = Ask { seeds: ask.seeds.max(1), matcher_variants, ..ask };
        let mut o = Offer {
            ask,
            open: !ask.tenants && !ask.trivial,
            factors: Vec::new(),
            base: Vec::new(),
            patterns: Vec::new(),
            rounds: Vec::new(),
            tree_runs: Vec::new(),
        };
        o.factors = o.timesteps(ask.trivial)?;
        o.base = o.factors.iter().map(Vec::len).collect();
        o.add_fine_timesteps()?;
        (o.patterns, o.rounds) = o.translation_patterns(cancelled);
        // Not where translation is optimal (an intact uniform torus keeps its runs as they
        // were).
        if o.open && !o.patterns.iter().flatten().any(|p| p.2) {
            o.tree_runs = tree_runs(o.ask.topology, o.ask.variants, o.grouping());
        }
        Ok(o)
    }

    fn npus(&self) -> usize {
        self.ask.topology.npus()
    }

    fn first(&self) -> &Collective {
        self.ask.variants[0]
    }

    /// The TEN timesteps to try per variant: the given one, or the default and, when link
    /// times are not multiples of the fastest, finer ones (a coarse grid misjudges the slower
    /// links); none where nothing moves (`trivial`).
    fn timesteps(&self, trivial: bool) -> Result<Vec<Vec<Option<f64>>>, SynthError> {
        self.ask
            .variants
            .iter()
            .map(|v| match self.ask.discretization_ns {
                _ if trivial => Ok(vec![None]), // nothing moves: no TEN is built
                Some(f) => Ok(vec![Some(f)]),
                None => {
                    crate::synth::auto_discretizations(self.ask.topology, v.chunk_size_bytes, self.ask.switch_model)
                        .map(|fs| fs.into_iter().map(Some).collect())
                        .map_err(SynthError::from)
                }
            })
            .collect()
    }

    /// Edges of mixed times on a small fabric: the matcher also at finer timesteps
    /// (`synth::fine_discretizations`), on up to `FINE_GRID_MAX_NPUS`. Only the matcher: the
    /// runs derived from it keep the usual timesteps, but the rarest-first pick. Not where the
    /// routed planner serves (all-to-all, scatter, gather: in the size sweep the finer runs
    /// never won there).
    fn add_fine_timesteps(&mut self) -> Result<(), SynthError> {
        if !self.open
            || self.ask.discretization_ns.is_some()
            || self.npus() > FINE_GRID_MAX_NPUS
            || crate::synth::routed::applies(self.first())
        {
            return Ok(());
        }
        for variant in 0..self.ask.matcher_variants {
            let bytes = self.ask.variants[variant].chunk_size_bytes;
            for d in crate::synth::fine_discretizations(self.ask.topology, bytes, self.ask.switch_model)? {
                let factors = &mut self.factors[variant];
                if !factors.iter().flatten().any(|&f| (f - d).abs() <= 1e-9 * d) {
                    factors.push(Some(d));
                }
            }
        }
        Ok(())
    }

    /// The groups of chunks a message the matcher and the trees try: none where translation
    /// serves on the first chunking (an intact uniform torus keeps its runs as they were).
    /// On thousands of NPUs the matcher at one chunk per message is both the slowest run and,
    /// its messages a fifth latency, not the fastest schedule (torus:64x64 at 1 GiB after three
    /// link failures: all-reduce 7.6 ms, in groups of four 6.8 ms; all-gather after one: 4.26
    /// ms, eight chunks a message 3.70 ms): the groups run instead.
    fn grouping(&self) -> &[u32] {
        if self.translation_first() { &[] } else { self.ask.grouping }
    }

    /// Whether a translation pattern serves the first chunking.
    fn translation_first(&self) -> bool {
        self.patterns.first().is_some_and(Option::is_some)
    }

    /// Each seed's run of `mode` at `variant`.
    fn seeded(&self, variant: usize, mode: Mode) -> impl Iterator<Item = Run> + '_ {
        (0..self.ask.seeds as u64).map(move |i| Run { variant, seed: self.ask.seed.wrapping_add(i), mode })
    }

    /// Whether the routed planner alone serves: chunks that each go their own way, on many
    /// NPUs.
    fn routed_only(&self) -> bool {
        self.open && crate::synth::routed::applies(self.first()) && self.npus() >= ROUTED_ONLY_NPUS
    }

    /// Whether the latency-mode planners (batched messages, doubling, the contribution flood)
    /// run: beside the matcher for one collective, where their rounds can pay.
    fn latency_mode(&self) -> bool {
        self.open && !self.routed_only() && latency_mode_pays(self.ask.topology, self.first())
    }
}

/// The matcher per (chunking, seed, TEN timestep), on the first `matcher_variants` chunkings.
pub(super) fn matching(o: &Offer<'_>, _: &[Run]) -> Offered {
    // Each seed at the automatic timesteps, then the finer ones (the order the first failure is
    // reported in when every run fails).
    let base = (0..o.ask.matcher_variants).flat_map(|variant| {
        (0..o.ask.seeds as u64).flat_map(move |i| {
            (0..o.base[variant]).map(move |f| Run {
                variant,
                seed: o.ask.seed.wrapping_add(i),
                mode: Mode::Matching(f),
            })
        })
    });
    let fine = (0..o.ask.matcher_variants).flat_map(|variant| {
        (o.base[variant]..o.factors[variant].len()).flat_map(move |f| o.seeded(variant, Mode::Matching(f)))
    });
    Offered::of(base.chain(fine).collect())
}

/// One run in `mode` beside each matcher run at the automatic timesteps where `beside` holds.
fn beside_matcher(o: &Offer<'_>, runs: &[Run], modes: impl Fn(&Run, usize) -> Vec<Mode>) -> Offered {
    let runs = runs
        .iter()
        .filter_map(|r| match r.mode {
            Mode::Matching(f) if f < o.base[r.variant] => Some((r, f)),
            _ => None,
        })
        .flat_map(|(r, f)| modes(r, f).into_iter().map(move |mode| Run { mode, ..*r }))
        .collect();
    Offered::of(runs)
}

/// Combining collectives: the matcher as it was before unequal shares and rarest-first picks
/// beside it (same seeds and timesteps), the faster kept, on up to `PLAIN_MAX_NPUS`.
pub(super) fn plain(o: &Offer<'_>, runs: &[Run]) -> Offered {
    if !(o.open && o.first().combining && o.npus() <= PLAIN_MAX_NPUS) {
        return Offered::default();
    }
    beside_matcher(o, runs, |_, f| vec![Mode::Plain(f)])
}

/// An all-reduce on NPUs of unequal rates: also in pipelined stages (`synth::staged`), at the
/// matcher's chunkings, seeds and timesteps, on up to `STAGED_MAX_NPUS`.
pub(super) fn staged(o: &Offer<'_>, runs: &[Run]) -> Offered {
    if !(o.open && o.npus() <= STAGED_MAX_NPUS) {
        return Offered::default();
    }
    beside_matcher(o, runs, |r, f| {
        crate::synth::staged::STAGES
            .into_iter()
            .filter(|&n| crate::synth::staged::applies(o.ask.topology, o.ask.variants[r.variant], n))
            .map(|n| Mode::Staged(n, f))
            .collect()
    })
}

/// An all-reduce whose balanced shares sit on a few NPUs: also with the shares spread
/// (`synth::shares::spread`), at the matcher's chunkings, seeds and timesteps, below the size
/// where the matcher at one chunk a message gives way to the groups.
pub(super) fn spread(o: &Offer<'_>, runs: &[Run]) -> Offered {
    if !(o.open && o.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS) {
        return Offered::default();
    }
    beside_matcher(o, runs, |r, f| {
        match crate::synth::shares::concentrated(o.ask.topology, o.ask.variants[r.variant]) {
            true => vec![Mode::Spread(f)],
            false => Vec::new(),
        }
    })
}

/// Collectives that do not combine (all-gather, broadcast), whose matcher picks at random: the
/// rarest-first pick beside it (same seeds and timesteps, the finer ones too), the faster
/// kept, on up to `RAREST_MAX_NPUS`. Not where the routed planner serves.
pub(super) fn rarest(o: &Offer<'_>, runs: &[Run]) -> Offered {
    if !o.open || o.first().combining || o.npus() > RAREST_MAX_NPUS || crate::synth::routed::applies(o.first()) {
        return Offered::default();
    }
    let runs = runs
        .iter()
        .filter_map(|r| match r.mode {
            Mode::Matching(f) => Some(Run { mode: Mode::Rarest(f), ..*r }),
            _ => None,
        })
        .collect();
    Offered::of(runs)
}

/// An all-reduce or all-gather whose chunks are mostly latency also moves them in groups (at
/// k = 1); from `GROUPED_ONLY_NPUS` (`GROUPED_ONLY_ALL_REDUCE_NPUS` for an all-reduce) instead
/// of the matcher at one chunk a message, and from a thousand NPUs the trees replace the
/// groups where they serve (on torus:32x32 at 256 MiB 1.487–1.505 against 1.571–1.729 ms after
/// one or three failed links or less NPU 9, on torus:64x64 at 1 GiB 5.68 against 6.79 ms after
/// three failed links and 5.71 against 6.55 less NPU 9, each run 9–11 s there).
pub(super) fn grouped(o: &Offer<'_>, _: &[Run]) -> Offered {
    let mut offered = groups_at_one_chunk(o);
    offered.runs.extend(shards_a_message(o));
    offered.runs.extend(whole_load_messages(o));
    offered
}

/// The chunkings beyond the matcher's that the engine adds for some planners alone, above one
/// chunk per NPU: where the doubling patterns split every block over their groups
/// (`doubling::even_chunks`: finer chunks cost them no extra rounds, unlike the matcher), and
/// where an all-gather's busiest NPU takes a whole load on each link
/// (`messages::whole_load_chunks`, for `whole_load_messages`).
pub fn extra_chunkings(topo: &Topology, c: &Collective, model: SwitchModel) -> Vec<u32> {
    let doubling = crate::synth::doubling::even_chunks(topo, c, model);
    let mut ks: Vec<u32> =
        doubling.into_iter().chain(messages::whole_load_chunks(topo, c)).filter(|&k| k > 1).collect();
    ks.dedup();
    ks
}

/// An all-gather at `messages::whole_load_chunks` (where the engine added that chunking) in
/// messages of `messages::whole_load_groups`: the busiest NPU's links each carry a whole load
/// in a few messages. On up to `SHARD_MESSAGES_MAX_NPUS`; not where translation serves.
fn whole_load_messages(o: &Offer<'_>) -> Vec<Run> {
    let (topo, c) = (o.ask.topology, o.first());
    if !o.open || o.npus() > SHARD_MESSAGES_MAX_NPUS || o.translation_first() {
        return Vec::new();
    }
    let Some(k) = messages::whole_load_chunks(topo, c) else { return Vec::new() };
    let Some(v) = o.ask.variants.iter().position(|c| c.spec.chunks() == k) else { return Vec::new() };
    messages::whole_load_groups(topo, o.ask.variants[v])
        .into_iter()
        .flat_map(|g| o.seeded(v, Mode::Grouped(g)))
        .collect()
}

/// The links between two NPUs of `group` (what the trees and the whole loads plan over).
fn links_among<'a>(topo: &'a Topology, group: &[usize]) -> Vec<&'a crate::topology::Link> {
    let mut inside = vec![false; topo.nodes()];
    group.iter().for_each(|&u| inside[u] = true);
    topo.links().iter().filter(|l| inside[l.src] && inside[l.dst] && l.src != l.dst).collect()
}

/// The groups of `grouped` at one chunk per NPU.
fn groups_at_one_chunk(o: &Offer<'_>) -> Offered {
    let grouping = o.grouping();
    if !o.open || grouping.is_empty() {
        return Offered::default();
    }
    let only = match o.first().spec.kind {
        CollectiveKind::AllReduce => GROUPED_ONLY_ALL_REDUCE_NPUS,
        _ => GROUPED_ONLY_NPUS,
    };
    let trees_instead = o.npus() >= GROUPED_ONLY_ALL_REDUCE_NPUS && !o.tree_runs.is_empty();
    let runs = grouping.iter().filter(|_| !trees_instead).flat_map(|&g| o.seeded(0, Mode::Grouped(g))).collect();
    let replaces = if o.npus() >= only { Replaces::FirstMatcher } else { Replaces::Nothing };
    Offered { runs, replaces }
}

/// An all-gather at each finer chunking (k chunks per NPU) also with a shard a message
/// (`Mode::Grouped(k)`): the TEN's timestep is an NPU's whole shard, as at one chunk per NPU,
/// and where a timestep is short of work the finer chunks go over more links in smaller
/// messages (`Timeline::assign` spreads before it fills). Where an NPU's links do not divide
/// its shards evenly, one chunk per NPU leaves links idle in the last timesteps and the finer
/// chunkings pay α once a chunk; a shard a message does neither (at 256 MiB: mesh:8x8 1.024 →
/// 1.012× the bound, rail:4x8 1.045 → 1.012×, torus:4x4x8 less link 0-1 1.048 → 1.028×). On up
/// to `SHARD_MESSAGES_MAX_NPUS`; not where translation serves the first chunking.
fn shards_a_message(o: &Offer<'_>) -> Vec<Run> {
    let c = o.first();
    if !o.open
        || c.spec.kind != CollectiveKind::AllGather
        || c.combining
        || o.npus() > SHARD_MESSAGES_MAX_NPUS
        || o.translation_first()
    {
        return Vec::new();
    }
    (1..o.ask.matcher_variants).flat_map(|v| o.seeded(v, Mode::Grouped(o.ask.variants[v].spec.chunks()))).collect()
}

/// An all-reduce over direct links both ways: per-chunk trees (`synth::trees`) at every
/// chunking below a thousand NPUs, and in messages of `tree_groups` on the first.
pub(super) fn trees(o: &Offer<'_>, _: &[Run]) -> Offered {
    Offered::of(o.tree_runs.iter().flat_map(|&(variant, g)| o.seeded(variant, Mode::Trees(g))).collect())
}

/// A broadcast over direct links, an all-gather over direct links where no translation pattern
/// serves (one tree per root, on the first two chunkings), or at `Effort::Thorough` either on
/// any fabric (switches split off, every chunking, one to `packing::MAX_TREES_PER_ROOT` trees
/// per root): spanning trees packed at the min-cut bound (`synth::packing`), up to
/// `packing::MAX_NPUS`. The all-gather wins dragonfly:8:9 (128 MiB: 1.185 → 1.041× the bound,
/// 0.12 → 0.69 s) and dragonfly:4:5 at 2 and 32 MiB (8.77 → 7.74 and 88.89 → 86.39 µs), and
/// no other row of the sizes or failures suites, for about half a second a synthesis on 64
/// NPUs (torus:8x8 less a link; docs/BENCHMARKS.md, "At the bound on every fabric"): its trees
/// pay their depth in fill, where a broadcast's pipeline many chunks. Through switches a
/// broadcast's trees are chains (the root's one link carries one tree a share): no faster on
/// rail:4x8, rail:8x8 or hier:ring2,fc4,switch4, and up to four times the synthesis (rail:8x8
/// 0.33 → 1.46 s).
pub(super) fn packing(o: &Offer<'_>, _: &[Run]) -> Offered {
    let broadcast = o.ask.variants[0].spec.kind == CollectiveKind::Broadcast;
    let thorough = o.ask.effort == crate::synth::Effort::Thorough;
    let direct = o.ask.topology.switches() == 0;
    if !o.open || !(direct && (broadcast || !o.translation_first()) || thorough) {
        return Offered::default();
    }
    // A standard all-gather: one tree per root on the first two chunkings.
    let (variants, per_root) = if thorough || broadcast {
        (o.ask.variants.len(), crate::synth::packing::MAX_TREES_PER_ROOT as u32)
    } else {
        (o.ask.variants.len().min(2), 1)
    };
    let runs = (0..variants)
        .flat_map(|v| (1..=per_root).map(move |k| (v, k)))
        .filter(|&(v, k)| crate::synth::packing::applies(o.ask.topology, o.ask.variants[v], k as usize))
        .map(|(variant, k)| Run { variant, seed: o.ask.seed, mode: Mode::Packing(k) })
        .collect();
    Offered::of(runs)
}

/// Chunks that each go their own way (all-to-all, scatter, gather): the routed planner at
/// every chunking; from `ROUTED_ONLY_NPUS` alone.
pub(super) fn routed(o: &Offer<'_>, _: &[Run]) -> Offered {
    if !(o.open && crate::synth::routed::applies(o.first())) {
        return Offered::default();
    }
    let runs = (0..o.ask.variants.len()).map(|variant| Run { variant, seed: o.ask.seed, mode: Mode::Routed }).collect();
    let replaces = if o.routed_only() { Replaces::All } else { Replaces::Nothing };
    Offered { runs, replaces }
}

/// The contribution flood: deterministic on direct links and cheap, the first seed; its bytes
/// do not depend on the chunking, the request's alone. Not in a search for a mirror: the flood
/// reduces in scratch slots, which do not mirror.
pub(super) fn contributions(o: &Offer<'_>, _: &[Run]) -> Offered {
    let c = o.first();
    if !(o.latency_mode()
        && !o.ask.mirroring
        && crate::synth::flood::contributions_apply(c, o.npus())
        && crate::synth::flood::contributions_pay(o.ask.topology, c))
    {
        return Offered::default();
    }
    Offered::of(vec![Run { variant: 0, seed: o.ask.seed, mode: Mode::Contributions }])
}

/// Batched messages at every chunking tried: finer chunks balance better over an NPU's
/// incoming links.
pub(super) fn batched(o: &Offer<'_>, _: &[Run]) -> Offered {
    if !o.latency_mode() {
        return Offered::default();
    }
    Offered::of(
        (0..o.ask.variants.len()).map(|variant| Run { variant, seed: o.ask.seed, mode: Mode::Batched }).collect(),
    )
}

/// The doubling patterns (`halving`: the halving-then-doubling shapes, else the others) at
/// every chunking where they apply: they put every owner's block in every port's group. In
/// the latency mode every shape, up to `doubling::MAX_GROUP` NPUs; on fabrics with switches
/// also the bandwidth-optimal interleaved shapes (an all-gather, an all-reduce by halving) up
/// to `doubling::INTERLEAVED_MAX_GROUP`, in that mode or not: they serve where an NPU reaches
/// its partners through a few switches (rail:64x8's all-gather at 128 MiB: the matcher 1.135×
/// the bound, interleaved 1.032×). An all-reduce exchanging the whole partial moves m times
/// the bytes, which only the latency mode can pay for.
pub(super) fn doubling(o: &Offer<'_>, halving: bool) -> Offered {
    use crate::synth::doubling::{Shape, applies, interleaves};
    if !o.open || o.routed_only() {
        return Offered::default();
    }
    let (latency, topo) = (o.latency_mode(), o.ask.topology);
    let wanted = move |s: &Shape, v: &Collective| {
        let bandwidth = s.interleaved && (s.halving || v.spec.kind != CollectiveKind::AllReduce);
        s.halving == halving && ((latency && applies(v)) || (bandwidth && interleaves(topo, v)))
    };
    let runs = o
        .ask
        .variants
        .iter()
        .enumerate()
        .flat_map(|(variant, v)| {
            Shape::for_collective(v).into_iter().filter(move |s| wanted(s, v)).map(move |shape| Run {
                variant,
                seed: o.ask.seed,
                mode: Mode::Doubling(shape),
            })
        })
        .collect();
    Offered::of(runs)
}

/// NPUs up to which the matcher as it was before unequal shares (`Mode::Plain`) runs beside
/// the matcher on combining collectives: it won only on heterogeneous fabrics of 12–42 NPUs,
/// never above 64, where its run is the slowest of the greedy's (docs/BENCHMARKS.md, "Where
/// the plain matcher wins").
pub const PLAIN_MAX_NPUS: usize = 64;

/// NPUs up to which the matcher with the rarest-first pick (`Mode::Rarest`) runs beside the
/// matcher's random pick on collectives that do not combine.
pub const RAREST_MAX_NPUS: usize = 256;

/// NPUs up to which an all-gather also runs a shard a message at its finer chunkings
/// (`shards_a_message`).
pub const SHARD_MESSAGES_MAX_NPUS: usize = 256;

/// NPUs up to which the matcher also runs at finer timesteps where edge times are mixed
/// (`synth::fine_discretizations`): each run is cheap there (0.1–0.2 s at 64 NPUs).
pub const FINE_GRID_MAX_NPUS: usize = 64;

/// NPUs up to which an all-reduce on NPUs of unequal rates also runs in pipelined stages
/// (`Mode::Staged`).
pub const STAGED_MAX_NPUS: usize = 256;

/// NPUs from which an all-reduce or all-gather that moves chunks in groups
/// (`chunking::grouping`) does not also run the matcher at one chunk per message.
pub const GROUPED_ONLY_NPUS: usize = 2048;

/// `GROUPED_ONLY_NPUS` for an all-reduce: from here the matcher at one chunk per message is
/// the longest run and slower than the grouped runs (docs/BENCHMARKS.md, "The matcher's groups:
/// chunks a message").
pub const GROUPED_ONLY_ALL_REDUCE_NPUS: usize = 1024;

/// NPUs from which an all-to-all, scatter or gather runs the routed planner alone: the
/// matcher's time grows with every chunk's candidate edges (7.3 s of a 512-NPU all-to-all) and
/// its schedules are slower there (torus:8x8x8 at 64 MiB: 1066.5 µs against the routed
/// planner's 765 µs); the batched planner relays every chunk everywhere (torus:8x8x8 at
/// 16 MiB: 80 s and 8 GB beside the routed planner).
pub const ROUTED_ONLY_NPUS: usize = 256;

/// NPUs up to which the greedy always tries its latency mode; beyond, only where one chunk is
/// mostly latency (its transfer time on the fastest link below the smallest link latency),
/// as the batched planner relays every chunk everywhere and the ranking then simulates every
/// candidate: on thousands of NPUs at large sizes it costs more than it can win.
pub const LATENCY_MODE_MAX_NPUS: usize = 256;

/// Whether the greedy tries its latency mode on `c` (see `LATENCY_MODE_MAX_NPUS`).
fn latency_mode_pays(topo: &Topology, c: &Collective) -> bool {
    if topo.npus() <= LATENCY_MODE_MAX_NPUS {
        return true;
    }
    beta_over_alpha(topo, c.chunk_size_bytes) < 1.0
}

#[cfg(test)]
mod tests;
