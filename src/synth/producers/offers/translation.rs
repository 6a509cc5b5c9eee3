//! The translation rows' offers: each chunking's step pattern and rounds pattern on a torus
//! (searched once per request: it is cheap), and the runs they make of them.

use super::{Offer, Offered, Replaces};
use crate::collective::CollectiveKind;
use crate::synth::producers::{Mode, Run, TranslationPattern};
use crate::synth::translate;

impl Offer<'_> {
    /// Each variant's translation patterns where translation serves: the step pattern
    /// (`translate::search`), and the rounds pattern where the torus and block are small enough
    /// (`translate::rounds::search`; never called optimal: it replaces only step patterns it is
    /// sure to beat, `rounds`).
    #[allow(clippy::type_complexity)]
    pub(super) fn translation_patterns(
        &self,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> (Vec<Option<TranslationPattern>>, Vec<Option<TranslationPattern>>) {
        let torus = if self.open { translate::Torus::of(self.ask.topology) } else { None };
        self.ask
            .variants
            .iter()
            .map(|v| {
                let Some(torus) = torus.as_ref().filter(|t| translate::applies(t, v)) else { return (None, None) };
                let k = v.spec.chunks() as usize;
                let steps = translate::search(torus, k, self.ask.seed, cancelled).ok().map(|pattern| {
                    let phases: u32 = if v.spec.kind == CollectiveKind::AllReduce { 2 } else { 1 };
                    let per_npu = (phases as usize * k * (torus.npus() - 1)).div_ceil(torus.directions()) as u32;
                    let no_gamma = v.spec.gamma_ns_per_byte.is_none_or(|g| g == 0.0) || phases == 1;
                    let optimal = no_gamma && phases * pattern.steps <= per_npu.max(phases * torus.diameter());
                    (torus.clone(), pattern, optimal)
                });
                // Beyond the moves translation builds, no rounds run is made: not searched.
                let rounds = within_moves(torus, v)
                    .then(|| translate::rounds::search(torus, k, self.ask.seed, cancelled).ok().flatten())
                    .flatten();
                (steps, rounds.map(|pattern| (torus.clone(), pattern, false)))
            })
            .unzip()
    }
}

/// Chunk moves (every chunk to every other NPU, once a phase) up to which translation runs:
/// its schedules move each chunk in a message of its own or a few, so their build and check
/// follow the moves. Beyond, on torus:64x128 (an all-reduce of 134 M moves at one chunk per
/// NPU), the rounds pattern beat bucket-bidir by 1.3% (5464.7 against 5538.0 µs at 1 GiB) for
/// 72.6 s and 4.7 GB against 12.2 s and 0.5 GB (`bench --suite scale`, 2026-12-05; issue 62's
/// target there: 30 s and 4 GiB). An all-reduce on torus:64x64 (33.5 M) is within. Beyond, an
/// optimal step pattern still replaces the matcher (it cannot be faster), so the greedy may be
/// left with no run.
pub const MAX_TRANSLATION_MOVES: usize = 1 << 25;

/// Whether `c` on `torus` is within `MAX_TRANSLATION_MOVES`.
fn within_moves(torus: &translate::Torus, c: &crate::collective::Collective) -> bool {
    let phases = if c.spec.kind == CollectiveKind::AllReduce { 2 } else { 1 };
    let n = torus.npus();
    [phases, c.spec.chunks() as usize, n, n.saturating_sub(1)]
        .into_iter()
        .try_fold(1usize, usize::checked_mul)
        .is_some_and(|moves| moves <= MAX_TRANSLATION_MOVES)
}

/// Translation on tori: a run per chunking whose pattern serves, within
/// `MAX_TRANSLATION_MOVES`; where the pattern reaches the bound of any schedule moving one
/// chunk per link per step, the matcher's family at that chunking cannot be faster and is
/// replaced.
pub(in crate::synth::producers) fn translation(o: &Offer<'_>, _: &[Run]) -> Offered {
    let served = o.patterns.iter().enumerate().filter_map(|(v, p)| p.as_ref().map(|p| (v, p)));
    let built = served.clone().filter(|(v, (torus, ..))| within_moves(torus, o.ask.variants[*v]));
    let runs = built.map(|(variant, (_, p, _))| Run { variant, seed: p.seed, mode: Mode::Translation });
    let optimal = served.filter(|(_, p)| p.2).map(|(v, _)| v).collect();
    Offered { runs: runs.collect(), replaces: Replaces::MatcherFamilyAt(optimal) }
}

/// Translation in rounds on tori (searched within `MAX_TRANSLATION_MOVES` only), beside the step patterns (it pays α once a round where they
/// pay it once a chunk, and balances finer: on torus:4x4x8 it is the faster from two chunks per
/// NPU). Not at a chunking whose price (its busiest link's load, a lower bound on its time) is
/// above another chunking's rounds time worked out from its pattern (`rounds::estimate_ns`, an
/// upper bound): it cannot win (on torus:16x16 four chunkings cost 0.3 s and two could). For
/// the same reason it replaces the step pattern at every chunking priced at or above its best
/// rounds time (to a relative 1e-9: on torus:4x4 at one chunk per NPU the two are equal, summed
/// in different orders): on torus:16x16x16 building both doubled the greedy's 7.6 s and 0.6 GB.
pub(in crate::synth::producers) fn rounds(o: &Offer<'_>, _: &[Run]) -> Offered {
    let Some(link) = o.ask.topology.links().first() else { return Offered::default() };
    let served = o.rounds.iter().enumerate().filter_map(|(v, p)| p.as_ref().map(|(t, p, _)| (v, t, p)));
    let priced: Vec<(usize, u64, f64, f64)> = served
        .map(|(v, torus, p)| {
            let c = o.ask.variants[v];
            (v, p.seed, translate::link_load_ns(torus, p, c, link), translate::rounds::estimate_ns(torus, p, c, link))
        })
        .collect();
    let best = priced.iter().map(|&(.., estimate)| estimate).fold(f64::INFINITY, f64::min);
    let runs = priced.into_iter().filter(|&(_, _, price, _)| price <= best * (1.0 + 1e-9));
    let beaten = (o.patterns.iter().enumerate())
        .filter_map(|(v, p)| {
            p.as_ref().map(|(torus, p, _)| (v, translate::link_load_ns(torus, p, o.ask.variants[v], link)))
        })
        .filter(|&(_, price)| price >= best * (1.0 - 1e-9))
        .map(|(v, _)| v)
        .collect();
    let runs = runs.map(|(variant, seed, ..)| Run { variant, seed, mode: Mode::Rounds }).collect();
    Offered { runs, replaces: Replaces::TranslationAt(beaten) }
}
