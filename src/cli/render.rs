//! What people read at a terminal: the summary of a run, the comparison table, durations.
use crate::engine;

/// A duration for people: ns, µs, ms or s with three decimals (JSON keeps the exact number).
pub(super) fn duration(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.3} ns")
    } else if ns < 1e6 {
        format!("{:.3} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// Says on stderr which links `--degrade-link` changed from `before` to `after` (or that none
/// changed), when `f` slows any: every verb that takes the flag says it so.
pub(super) fn note_degraded(
    f: &crate::topology::Failures,
    after: &crate::topology::Topology,
    before: &crate::topology::Topology,
) {
    if !f.degraded_links.is_empty() {
        eprintln!("ccsynth: degraded {}", degraded_links(&after.changed_links(before)));
    }
}

/// Says on stderr which links and NPUs `--fail-link` and `--fail-npu` took out, as
/// `note_degraded` says what slowed (`synth`, `compare`, `baseline`: their output says nothing
/// of the topology's changes; a regeneration's summary has its own line).
pub(super) fn note_failed(f: &crate::topology::Failures) {
    if f.links.is_empty() && f.npus.is_empty() {
        return;
    }
    let both = f.links.iter().flat_map(|&[u, v]| [[u, v], [v, u]]);
    let mut links: Vec<[usize; 2]> = if f.directed { f.links.clone() } else { both.collect() };
    links.sort_unstable();
    links.dedup();
    eprintln!("ccsynth: failed {}", failed(&links, &f.npus));
}

/// Slowed links for people: `9->10 and 10->9 at 25 GB/s (was 100)`, a pair of directions
/// changed alike written once as `9-10`; the first four, then how many more.
pub(super) fn degraded_links(changes: &[crate::topology::LinkChange]) -> String {
    const SHOWN: usize = 4;
    let same = |a: &crate::topology::LinkChange, b: &crate::topology::LinkChange| {
        (a.bandwidth_gb_per_s, a.was_bandwidth_gb_per_s, a.latency_ns, a.was_latency_ns)
            == (b.bandwidth_gb_per_s, b.was_bandwidth_gb_per_s, b.latency_ns, b.was_latency_ns)
    };
    if changes.is_empty() {
        return "no link: each given already runs at that speed".to_string();
    }
    let mut said = Vec::new();
    for c in changes {
        let back = changes.iter().find(|b| (b.src, b.dst) == (c.dst, c.src) && same(b, c));
        let ends = match back {
            Some(_) if c.src > c.dst => continue, // written with its pair
            Some(_) => format!("{}-{}", c.src, c.dst),
            None => format!("{}->{}", c.src, c.dst),
        };
        let mut what = Vec::new();
        if c.bandwidth_gb_per_s != c.was_bandwidth_gb_per_s {
            what.push(format!(
                "{} GB/s (was {})",
                crate::units::short(c.bandwidth_gb_per_s),
                crate::units::short(c.was_bandwidth_gb_per_s)
            ));
        }
        if c.latency_ns != c.was_latency_ns {
            what.push(format!(
                "{} ns (was {})",
                crate::units::short(c.latency_ns),
                crate::units::short(c.was_latency_ns)
            ));
        }
        said.push(format!("{ends} at {}", what.join(", ")));
    }
    match said.len() {
        n if n > SHOWN => format!("{} and {} more", said[..SHOWN].join("; "), n - SHOWN),
        _ => said.join("; "),
    }
}

/// What `synth` prints for a person: what ran, how fast the schedule is against the bound and
/// the best baseline (from `--compare`, or from `auto`'s candidates), and where it went.
pub(super) fn summary(
    out: &engine::Output,
    comparison: Option<&engine::Comparison>,
    written: Option<&std::path::Path>,
) -> String {
    summary_at(out, comparison, written, "add --compare to build them")
}

/// `summary` for a door whose way to the baselines is `compare` (the `baseline` verb has no
/// `--compare`, and its summary said to add it).
pub(super) fn summary_of_baseline(out: &engine::Output, written: Option<&std::path::Path>) -> String {
    summary_at(out, None, written, "`ccsynth compare` builds them")
}

/// The summary; `to_compare` says how this door builds the baselines.
fn summary_at(
    out: &engine::Output,
    comparison: Option<&engine::Comparison>,
    written: Option<&std::path::Path>,
    to_compare: &str,
) -> String {
    let s = &out.schedule;
    let time = s.collective_time_ns.unwrap_or(0.0);
    let algorithm = s.algorithm.as_deref().unwrap_or("?");
    let portfolio = out.stats.portfolio();
    // A kept repair was not chosen from the fresh run's candidates ("repair (auto's fastest of
    // 12 candidates)" said it was).
    let repaired = out.stats.regeneration().is_some_and(|r| r.kept == engine::Kept::Repair);
    let mut lines = vec![algorithm_line(algorithm, portfolio.filter(|_| !repaired))];
    if let Some(r) = out.stats.regeneration() {
        lines.extend(regeneration_lines(r));
    }
    if let Some(seed) = s.seed {
        lines.push(format!("seed            {seed}"));
    }
    lines.push(collective_line(s));
    let (rounds, transfers) = (s.rounds(), s.transfers.len());
    lines.push(format!("steps           {}, {}", counted(rounds, "round"), counted(transfers, "transfer")));
    lines.push(time_line(time, out.report.lower_bound_ns));
    // The ILP: whether it proved its schedule optimal, and if not how far it got and why.
    if let Some(ilp) = out.stats.synthesis().and_then(|st| st.ilp.as_ref()) {
        lines.push(format!("ilp             {}", ilp_line(ilp)));
    }
    lines.push(baseline_line(comparison, portfolio, time, to_compare));
    lines.push(written_line(written));
    let mut text = lines.join("\n") + "\n";
    if let Some(c) = comparison {
        text += "\n";
        text += &comparison_table(c);
    }
    text
}

/// The `algorithm` line: the schedule's producer, and for `auto` how many candidates it was chosen from.
/// Where the time limit cut some, says so: another run (or a longer limit) may choose otherwise.
fn algorithm_line(algorithm: &str, portfolio: Option<&engine::PortfolioStats>) -> String {
    match portfolio {
        Some(p) if p.cut => format!(
            "algorithm       {algorithm} (auto's fastest of {} candidates; the time limit, {} s, cut {}: a longer one may find a faster schedule)",
            p.candidates.len(),
            crate::units::short(p.time_limit_s),
            counted(p.candidates.iter().filter(|c| c.cut).count(), "candidate"),
        ),
        Some(p) => format!("algorithm       {algorithm} (auto's fastest of {} candidates)", p.candidates.len()),
        None => format!("algorithm       {algorithm}"),
    }
}

/// A regeneration's lines: the schedule regenerated from, the degraded links, both attempts and the one kept.
fn regeneration_lines(r: &engine::RegenerationStats) -> Vec<String> {
    let prev = match (&r.previous_algorithm, r.previous_collective_time_ns) {
        (Some(a), Some(t)) => format!("{a}, {}", duration(t)),
        (a, t) => a.clone().or(t.map(duration)).unwrap_or_else(|| "?".into()),
    };
    let slower = r.slower_than_previous.map(|x| format!(", {x:.2}× its time")).unwrap_or_default();
    let mut lines = vec![format!("regenerated     from {prev}{slower}")];
    if !r.failed_links.is_empty() || !r.failed_npus.is_empty() {
        lines.push(format!("failed          {}", failed(&r.failed_links, &r.failed_npus)));
    }
    if !r.degraded_links.is_empty() {
        lines.push(format!("degraded        {}", degraded_links(&r.degraded_links)));
    }
    let kept = match r.kept {
        engine::Kept::Repair => "repair",
        engine::Kept::Fresh => "fresh",
    };
    if r.failed_links.is_empty() && r.failed_npus.is_empty() && r.degraded_links.is_empty() {
        lines.push("failed          nothing: the same topology, synthesized afresh".into());
    }
    lines.push(format!("repair          {}", repair_outcome(&r.repair, !r.degraded_links.is_empty())));
    lines.push(format!("fresh           {}", fresh_outcome(&r.fresh)));
    lines.push(format!("kept            the {kept} schedule"));
    lines
}

/// What failed, short: a link down both ways as `0-1`, one way as `0->1`, then the NPUs; the
/// first eight of each, then how many more.
fn failed(links: &[[usize; 2]], npus: &[usize]) -> String {
    const SHOWN: usize = 8;
    let listed = |items: Vec<String>| {
        let more = items.len().saturating_sub(SHOWN);
        let mut text = items.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
        if more > 0 {
            text += &format!(" and {more} more");
        }
        text
    };
    let mut parts = Vec::new();
    let pairs: Vec<String> = links
        .iter()
        .filter_map(|&[u, v]| match links.contains(&[v, u]) {
            true if u < v => Some(format!("{u}-{v}")),
            true => None,
            false => Some(format!("{u}->{v}")),
        })
        .collect();
    if !pairs.is_empty() {
        parts.push(format!("{} {}", if pairs.len() == 1 { "link" } else { "links" }, listed(pairs)));
    }
    if !npus.is_empty() {
        let word = if npus.len() == 1 { "NPU" } else { "NPUs" };
        parts.push(format!("{word} {}", listed(npus.iter().map(|v| v.to_string()).collect())));
    }
    parts.join("; ")
}

/// The repair's outcome: its time with the transfers it kept and rerouted, or why it gave none.
/// `slowed`: some link was degraded (a regeneration may change nothing at all).
fn repair_outcome(repair: &engine::regenerate::RepairOutcome, slowed: bool) -> String {
    match (repair.collective_time_ns, &repair.stats, &repair.note) {
        (Some(t), Some(st), _) if st.as_stored => format!(
            "{} (the schedule as it stands: {}, {:.0} ms)",
            duration(t),
            if slowed { "no reroute round the slowed links was faster" } else { "nothing to reroute round" },
            repair.wall_ms
        ),
        (Some(t), Some(st), _) => format!(
            "{} ({} transfers kept, {} rerouted{}, {:.0} ms)",
            duration(t),
            st.kept,
            st.rerouted,
            match (st.rebalanced, st.pieces) {
                (0, 0) => String::new(),
                (n, 0) => format!(" ({n} off slowed links)"),
                (0, k) => format!(" (cut into {k} more pieces)"),
                (n, k) => format!(" ({n} off slowed links; cut into {k} more pieces)"),
            },
            repair.wall_ms
        ),
        (_, _, Some(why)) => format!("none: {why}"),
        _ => "none".into(),
    }
}

/// The fresh run's outcome: its time with its algorithm, or why it gave none.
fn fresh_outcome(fresh: &engine::regenerate::FreshOutcome) -> String {
    match (fresh.collective_time_ns, &fresh.note) {
        (Some(t), _) => format!("{} ({}, {:.0} ms)", duration(t), fresh.algorithm, fresh.wall_ms),
        (None, Some(why)) => format!("none: {why}"),
        _ => "none".into(),
    }
}

/// The `collective` line: its kind and size, the NPUs it runs on (of the live ones) and its chunks.
/// "1 NPU", "16 NPUs".
fn npus(n: usize) -> String {
    if n == 1 { "1 NPU".into() } else { format!("{n} NPUs") }
}

fn collective_line(s: &crate::schedule::Schedule) -> String {
    let live = s.topology.live_npus().len();
    let npus = match &s.collective.group {
        Some(g) if g.len() < live => format!("{} of {live} NPUs", g.len()),
        _ => npus(live),
    };
    // A broadcast's or reduce's chunks are the root's buffer's, a custom collective's (and
    // tenants') as its conditions say: "per NPU" read k there, or 1.
    use crate::collective::CollectiveKind as K;
    let chunks = match s.collective.kind {
        K::Broadcast | K::Reduce | K::Custom => counted(s.num_chunks, "chunk"),
        _ => format!("{} chunk(s) per NPU", s.collective.chunks()),
    };
    format!(
        "collective      {} of {} on {npus}, {chunks}",
        s.collective.kind.name(),
        crate::units::format_size(s.collective.size_bytes),
    )
}

/// The `time` line: the simulated time, and its ratio to the lower bound when there is one.
fn time_line(time: f64, lower_bound_ns: Option<f64>) -> String {
    let bound = match lower_bound_ns {
        Some(b) if b > 0.0 => format!(" (lower bound {}, {:.2}× it)", duration(b), time / b),
        _ => String::new(),
    };
    format!("time            {}{bound}", duration(time))
}

/// The `best baseline` line: the fastest baseline against this schedule, or why there is none.
fn baseline_line(
    comparison: Option<&engine::Comparison>,
    portfolio: Option<&engine::PortfolioStats>,
    time: f64,
    to_compare: &str,
) -> String {
    match fastest_baseline(comparison, portfolio) {
        Some((name, t)) if time > 0.0 => format!("best baseline   {name}, {}: {}", duration(t), verdict(t, time)),
        // No baseline simulated: `auto` skipped each that applies (portfolio.rs's notes start
        // "skipped") because a bound on its time, its price or its busiest link's load, was
        // already above a schedule found. Say so, and the lowest such bound (a lower bound of
        // that baseline's time, not the best baseline's time).
        _ => no_baseline_line(portfolio, time, to_compare),
    }
}

/// The fastest baseline's name and time, for the `best baseline` line.
fn fastest_baseline(
    comparison: Option<&engine::Comparison>,
    portfolio: Option<&engine::PortfolioStats>,
) -> Option<(String, f64)> {
    // The fastest baseline: from the comparison, else among auto's candidates (by simulated
    // time: `auto` validates only its winner). A baseline that is also the schedule's own
    // algorithm counts: it is the one to beat (or to tie).
    let is_synth = |name: &str| engine::Algorithm::parse(name).is_some_and(|a| a.is_synthesizer());
    match comparison {
        Some(c) => c
            .rows
            .iter()
            // The schedule's own row, where a baseline's of another chunking is beside it, is
            // no baseline to beat.
            .filter(|r| !is_synth(&r.algorithm) && !r.algorithm.ends_with(" (this schedule)"))
            .min_by(|a, b| a.collective_time_ns.total_cmp(&b.collective_time_ns))
            .map(|r| (r.algorithm.clone(), r.collective_time_ns)),
        None => portfolio.and_then(|p| p.best_baseline()).map(|(name, t)| (name.to_string(), t)),
    }
}

/// The `best baseline` verdict: this schedule as fast as the baseline's time `t`, or how many times faster or slower.
fn verdict(t: f64, time: f64) -> String {
    if (t / time - 1.0).abs() < 0.005 {
        "this schedule is as fast".to_string()
    } else if t > time {
        format!("this schedule is {:.2}× faster", t / time)
    } else {
        format!("this schedule is {:.2}× slower", time / t)
    }
}

/// The `best baseline` line when none was timed: whether `auto` skipped each, and the lowest
/// bound one was skipped by (its structure's price before it was built, or its busiest link's
/// busy time once built: "none built" was said of baselines built and dropped).
fn no_baseline_line(portfolio: Option<&engine::PortfolioStats>, time: f64, to_compare: &str) -> String {
    let baselines = || portfolio.into_iter().flat_map(|p| p.baselines());
    let skipped = baselines().any(|c| c.note.as_deref().is_some_and(|n| n.starts_with("skipped")));
    let bound = |c: &engine::PortfolioEntry| match c.busiest_link_ns {
        Some(busy) => Some((busy, "busiest link alone")),
        None => c.price_ns.map(|p| (p, "structure alone")),
    };
    let lowest = baselines()
        .filter_map(|c| bound(c).filter(|b| b.0 > time).map(|b| (c.algorithm.as_str(), b)))
        .min_by(|a, b| a.1.0.total_cmp(&b.1.0));
    let said = "best baseline   none simulated: each bounded above this schedule first";
    match (skipped, lowest) {
        (false, _) => format!("best baseline   ({to_compare})"),
        (true, Some((name, (t, what)))) if time > 0.0 => format!(
            "{said} (the lowest bound, {name}'s {what} at {}, is {:.2}× this schedule's time); {to_compare}",
            duration(t),
            t / time
        ),
        (true, _) => format!("{said}; {to_compare}"),
    }
}

/// The `schedule` line: where the schedule was written, or how to get it.
fn written_line(written: Option<&std::path::Path>) -> String {
    match written {
        Some(p) => format!("schedule        written to {}", p.display()),
        None => "schedule        not printed: give --out FILE, or --json for stdout".to_string(),
    }
}

/// The comparison as an aligned text table (comfy-table, no borders): a line naming the
/// collective, its size and NPUs, then a row per algorithm with its time, algorithm and bus
/// bandwidth (as nccl-tests reports them: busbw = algbw × 2(p−1)/p for all-reduce, × (p−1)/p
/// for all-gather, reduce-scatter and all-to-all), its ratios and rounds, the best row marked
/// with `*`; then the bound and the baselines that refused.
pub fn comparison_table(c: &engine::Comparison) -> String {
    use comfy_table::{CellAlignment, Table, presets};
    let bus_factor = crate::collective::CollectiveKind::parse(c.collective).map_or(1.0, |k| k.bus_factor(c.npus));
    let mut table = Table::new();
    table.load_style(presets::NOTHING).set_header([
        "algorithm",
        "time (µs)",
        "algbw (GB/s)",
        "busbw (GB/s)",
        "vs best",
        "vs bound",
        "rounds",
        "best",
    ]);
    for r in &c.rows {
        // Bytes per ns are GB/s.
        // No bandwidth where nothing took time (one NPU): "-", not 0.00.
        let algbw = (r.collective_time_ns > 0.0).then(|| c.size_bytes as f64 / r.collective_time_ns);
        table.add_row([
            r.algorithm.clone(),
            format!("{:.3}", r.collective_time_ns / 1e3),
            algbw.map_or_else(|| "-".into(), |b| format!("{b:.2}")),
            algbw.map_or_else(|| "-".into(), |b| format!("{:.2}", b * bus_factor)),
            // NaN where the best time is 0 (a collective with nothing to move): JSON's null.
            if r.ratio_to_best.is_finite() { format!("{:.3}", r.ratio_to_best) } else { "-".into() },
            r.ratio_to_bound.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into()),
            r.rounds.to_string(),
            if r.best { "*".into() } else { String::new() },
        ]);
    }
    for i in 1..7 {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = format!("{} of {} on {}\n", c.collective, crate::units::format_size(c.size_bytes), npus(c.npus));
    out.extend(table.lines().map(|l| l.trim_end().to_string() + "\n"));
    if let Some(b) = c.lower_bound_ns {
        out += &format!("lower bound: {:.3} µs\n", b / 1e3);
    }
    if let Some(seed) = c.seed {
        out += &format!("auto's row: seed {seed}\n");
    }
    out += &refusals(&c.refused);
    out
}

/// The baselines that refused, a line per reason with every baseline that gave it (a
/// reason that opens with the baseline's own name is shared without it): an all-to-all is
/// refused by a dozen baselines for its kind alone, which one line says.
fn refusals(refused: &[(String, String)]) -> String {
    let mut lines: Vec<(String, Vec<&str>)> = Vec::new();
    for (name, why) in refused {
        let reason = why.strip_prefix(name.as_str()).and_then(|r| r.strip_prefix(' ')).unwrap_or(why);
        match lines.iter_mut().find(|(r, _)| r == reason) {
            Some((_, names)) => names.push(name),
            None => lines.push((reason.to_string(), vec![name])),
        }
    }
    lines.iter().map(|(reason, names)| format!("not applicable: {}: {reason}\n", names.join(", "))).collect()
}

/// The ILP's outcome in a line: `optimal` in its model, or `feasible` with the gaps it left and
/// the reason it stopped.
fn ilp_line(ilp: &engine::IlpStats) -> String {
    use engine::IlpStatus;
    let mut parts = vec![match ilp.status {
        // Proven within its model only: a finer time grid, another chunking or another
        // algorithm (`auto`'s candidates) may be faster in the simulator.
        IlpStatus::Optimal => "optimal in its model (its time-expanded network at this chunking)".to_string(),
        IlpStatus::Feasible => "feasible (not proven optimal)".to_string(),
    }];
    if ilp.status == IlpStatus::Feasible || ilp.horizon > ilp.horizon_lower_bound {
        parts.push(format!(
            "horizon {} timesteps, at least {} ({:.1}% gap)",
            ilp.horizon,
            ilp.horizon_lower_bound,
            ilp.horizon_gap * 100.0
        ));
    }
    if let Some(g) = ilp.mip_gap.filter(|g| *g > 0.0) {
        parts.push(format!("within a MIP gap of {:.2}%", g * 100.0));
    }
    if let Some(why) = &ilp.reason {
        parts.push(why.clone());
    }
    if ilp.cut_by_time_limit {
        parts.push("cut by the time limit (another run may end elsewhere)".into());
    }
    parts.push(format!("{} solves, {:.0} ms in HiGHS, {:.1} s of work", ilp.solves, ilp.highs_ms, ilp.work_s));
    parts.join("; ")
}

pub(super) use crate::units::counted;

#[cfg(test)]
mod tests {
    use super::{degraded_links, refusals};

    #[test]
    fn failures_are_written_short() {
        use super::failed;
        assert_eq!(failed(&[[0, 1], [1, 0], [5, 4]], &[]), "links 0-1, 5->4");
        assert_eq!(failed(&[[1, 0]], &[7]), "link 1->0; NPU 7");
        assert_eq!(failed(&[], &[3, 9]), "NPUs 3, 9");
        let many: Vec<[usize; 2]> = (0..10).map(|i| [2 * i, 2 * i + 1]).collect();
        assert_eq!(failed(&many, &[]), "links 0->1, 2->3, 4->5, 6->7, 8->9, 10->11, 12->13, 14->15 and 2 more");
    }

    #[test]
    fn degraded_links_are_written_short_whatever_the_speed() {
        let change = |src, dst, bw: f64, lat: f64| crate::topology::LinkChange {
            src,
            dst,
            bandwidth_gb_per_s: bw,
            was_bandwidth_gb_per_s: 100.0,
            latency_ns: lat,
            was_latency_ns: 500.0,
        };
        let both = [change(9, 10, 25.0, 500.0), change(10, 9, 25.0, 500.0)];
        assert_eq!(degraded_links(&both), "9-10 at 25 GB/s (was 100)");
        assert_eq!(degraded_links(&[change(9, 10, 1e-300, 500.0)]), "9->10 at 1e-300 GB/s (was 100)");
        assert_eq!(degraded_links(&[change(9, 10, 100.0, 1e300)]), "9->10 at 1e300 ns (was 500)");
        assert_eq!(degraded_links(&[change(9, 10, 0.5, 2000.0)]), "9->10 at 0.5 GB/s (was 100), 2000 ns (was 500)");
        // A degradation to the link's own speed changes nothing, and says so.
        assert_eq!(degraded_links(&[]), "no link: each given already runs at that speed");
    }

    /// The `algorithm` line says how many of `auto`'s candidates the time limit cut, and only
    /// where it cut some (the summary was silent; `stats.portfolio.cut` alone said so).
    #[test]
    fn the_algorithm_line_says_when_the_time_limit_cut_candidates() {
        let entry = |algorithm: &str, cut| crate::engine::PortfolioEntry {
            algorithm: algorithm.into(),
            chunks_per_npu: None,
            greedy_mode: None,
            seed: None,
            seeds: None,
            collective_time_ns: Some(1.0),
            valid: true,
            cut,
            wall_ms: 1.0,
            price_ns: None,
            busiest_link_ns: None,
            note: None,
            chosen: false,
        };
        let stats = |cut| crate::engine::PortfolioStats {
            chosen_by: "auto",
            time_limit_s: 0.1,
            cut,
            candidates: vec![entry("greedy", cut), entry("ring", false)],
        };
        assert_eq!(
            super::algorithm_line("ring", Some(&stats(true))),
            "algorithm       ring (auto's fastest of 2 candidates; the time limit, 0.1 s, cut 1 candidate: a longer one may find a faster schedule)"
        );
        assert_eq!(
            super::algorithm_line("ring", Some(&stats(false))),
            "algorithm       ring (auto's fastest of 2 candidates)"
        );
    }

    #[test]
    fn refusals_for_one_reason_share_a_line() {
        let r = |n: &str, w: &str| (n.to_string(), w.to_string());
        let refused = [
            r("ring", "ring does not support all_to_all collectives"),
            r("bucket", "bucket does not support all_to_all collectives"),
            r("dimension-ordered", "dimension-ordered does not support this topology: it needs a grid"),
            r("odd", "a reason without the name"),
        ];
        assert_eq!(
            refusals(&refused),
            "not applicable: ring, bucket: does not support all_to_all collectives\n\
             not applicable: dimension-ordered: does not support this topology: it needs a grid\n\
             not applicable: odd: a reason without the name\n"
        );
        assert_eq!(refusals(&[]), "");
    }
}
