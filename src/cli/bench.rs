//! `ccsynth bench`: the suites behind docs/BENCHMARKS.md (greedy, ilp, sizes, failures, scale), run
//! through `crate::bench` and printed as Markdown tables or JSON.

use super::print_json;

/// The failures suite's own flags: a size for every case, the regenerations' effort.
pub(super) struct FailuresArgs<'a> {
    pub(super) size: Option<&'a str>,
    pub(super) effort: Option<crate::engine::Effort>,
}

/// `bench`: runs the greedy or the ilp suite (the cases whose name contains `filter`).
pub(super) fn bench_cmd(
    suite: &str,
    runs: Option<usize>,
    quick: bool,
    filter: Option<&str>,
    json: bool,
    failures: FailuresArgs<'_>,
) -> Result<i32, String> {
    if let Some(n) = runs.filter(|_| suite != "greedy") {
        return Err(format!("--runs {n}: only the greedy suite runs a case more than once, not --suite {suite:?}"));
    }
    if suite != "failures" {
        if let Some(size) = failures.size {
            return Err(format!("--size {size:?}: only the failures suite takes a size, not --suite {suite:?}"));
        }
        if let Some(effort) = failures.effort {
            return Err(format!(
                "--effort {}: only the failures suite takes an effort, not --suite {suite:?}",
                effort.name()
            ));
        }
    }
    match suite {
        "ilp" => bench_ilp(quick, filter, json),
        "greedy" => bench_greedy(runs.unwrap_or(3), quick, filter, json),
        "sizes" => bench_sizes(quick, filter, json),
        "failures" => bench_failures(quick, filter, json, failures),
        "scale" => bench_scale(quick, filter, json),
        other => Err(format!("--suite {other:?}: expected greedy, ilp, sizes, failures or scale")),
    }
}

/// `--filter` that names no case of the suite: a mistake, not an empty table.
fn matched<T>(rows: Vec<T>, filter: Option<&str>, suite: &str) -> Result<Vec<T>, String> {
    match filter {
        Some(f) if rows.is_empty() => Err(format!("--filter {f:?}: no case of the {suite} suite has it in its name")),
        _ => Ok(rows),
    }
}

fn bench_scale(quick: bool, filter: Option<&str>, json: bool) -> Result<i32, String> {
    use crate::bench::scale;
    let cases: Vec<scale::ScaleCase> = scale::scale_suite(quick)
        .into_iter()
        .filter(|c| filter.is_none_or(|f| format!("{} {}", c.topology, c.collective.name()).contains(f)))
        .collect();
    let cases = matched(cases, filter, "scale")?;
    let rows = scale::run_scale_suite(&cases, &mut |r| {
        eprintln!(
            "ccsynth bench: {} {} ({} failed links): {} us, x{} {}, {:.1} s, {} MiB, file {} MiB, validate {} s, met {} {}",
            r.case.topology,
            r.case.collective.name(),
            r.case.failed_links.len(),
            r.time_us.map_or_else(|| "–".into(), |t| format!("{t:.1}")),
            r.ratio.map_or_else(|| "–".into(), |x| format!("{x:.3}")),
            if r.case.failed_links.is_empty() { "bound" } else { "intact" },
            r.wall_s,
            r.peak_rss_mib.map_or_else(|| "–".into(), |m| format!("{m:.0}")),
            r.file_mib.map_or_else(|| "–".into(), |m| format!("{m:.0}")),
            r.validate_s.map_or_else(|| "–".into(), |s| format!("{s:.1}")),
            met(r.met),
            r.error.clone().unwrap_or_default()
        )
    });
    if json {
        print_json(&rows)?;
    } else {
        print!("{}", scale::scale_markdown(&rows));
    }
    every_row_ran(&rows)?;
    Ok(0)
}

fn bench_failures(quick: bool, filter: Option<&str>, json: bool, args: FailuresArgs<'_>) -> Result<i32, String> {
    use crate::bench::failures;
    let size = args.size.map(crate::units::parse_size).transpose().map_err(|e| format!("--size: {e}"))?;
    // As `synth` refuses it, before any case runs (every row failed, naming a field of the
    // request, and the suite exited 0).
    if size == Some(0) {
        return Err("--size: 0: expected a size of at least 1 byte".into());
    }
    let effort = args.effort.unwrap_or_default();
    let mut rows = Vec::new();
    for c in failures::failures_suite(quick, size) {
        let name = format!("{} {} {}", c.topology, c.collective.name(), c.size_bytes);
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        eprintln!("ccsynth bench: {name} ...");
        rows.extend(failures::run_failure_case(&c, effort, &mut |r| {
            eprintln!(
                "  {}: {} us ({}), x{} intact, x{} bound, {:.2} s, met {} {}",
                r.scenario,
                r.time_us.map_or_else(|| "–".into(), |t| format!("{t:.1}")),
                r.algorithm.as_deref().unwrap_or("–"),
                r.ratio_to_intact.map_or_else(|| "–".into(), |x| format!("{x:.3}")),
                r.ratio_to_bound.map_or_else(|| "–".into(), |x| format!("{x:.3}")),
                r.wall_s,
                met(r.met),
                r.error.clone().unwrap_or_default()
            )
        }));
    }
    let rows = matched(rows, filter, "failures")?;
    if json {
        print_json(&rows)?;
    } else {
        print!("{}", failures::failures_markdown(&rows));
    }
    every_row_ran(&rows)?;
    Ok(0)
}

fn bench_ilp(quick: bool, filter: Option<&str>, json: bool) -> Result<i32, String> {
    let mut rows = Vec::new();
    let cases = crate::bench::ilp_suite(quick);
    for c in cases.iter().filter(|c| filter.is_none_or(|f| c.name.contains(f))) {
        eprintln!("ccsynth bench: {} ...", c.name);
        let r = crate::bench::run_ilp_case(c);
        eprintln!(
            "  {:?} T = {} (bound {}), {:.2} s, {:.1} us, met {} {}",
            r.status,
            r.horizon,
            r.horizon_lower_bound,
            r.synthesis_s,
            r.ilp_us,
            met(r.met),
            r.error.clone().unwrap_or_default()
        );
        rows.push(r);
    }
    let rows = matched(rows, filter, "ilp")?;
    if json {
        print_json(&rows)?;
    } else {
        print!("{}", crate::bench::ilp_markdown(&rows));
    }
    every_row_ran(&rows)?;
    Ok(0)
}

fn bench_sizes(quick: bool, filter: Option<&str>, json: bool) -> Result<i32, String> {
    let mut rows = Vec::new();
    for c in crate::bench::sizes_suite(quick) {
        let name = format!("{} {} {}", c.topology, c.collective.name(), c.size_bytes);
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let r = crate::bench::run_size_case(&c);
        eprintln!(
            "ccsynth bench: {name}: greedy/best {}, auto/best {}, {:.2} s {}",
            r.greedy_vs_best_baseline.map_or_else(|| "–".into(), |x| format!("{x:.2}")),
            r.auto_vs_best_baseline.map_or_else(|| "–".into(), |x| format!("{x:.2}")),
            r.auto_s,
            r.error.clone().unwrap_or_default()
        );
        rows.push(r);
    }
    let rows = matched(rows, filter, "sizes")?;
    if json {
        print_json(&rows)?;
    } else {
        print!("{}", crate::bench::sizes_markdown(&rows));
    }
    every_row_ran(&rows)?;
    Ok(0)
}

/// A suite's row that may have failed to run: its name in an error, and the reason.
trait Ran {
    fn failure(&self) -> Option<String>;
}

impl Ran for crate::bench::SizeRow {
    fn failure(&self) -> Option<String> {
        let c = &self.case;
        self.error.as_ref().map(|e| format!("{} {:?} {} B: {e}", c.topology, c.collective, c.size_bytes))
    }
}

impl Ran for crate::bench::failures::FailureRow {
    fn failure(&self) -> Option<String> {
        let r = self;
        r.error.as_ref().map(|e| format!("{} {:?} {} B {}: {e}", r.topology, r.collective, r.size_bytes, r.scenario))
    }
}

impl Ran for crate::bench::scale::ScaleRow {
    fn failure(&self) -> Option<String> {
        let c = &self.case;
        self.error.as_ref().map(|e| format!("{} {:?} {} B: {e}", c.topology, c.collective, c.size_bytes))
    }
}

impl Ran for crate::bench::IlpRow {
    fn failure(&self) -> Option<String> {
        self.error.as_ref().map(|e| format!("{}: {e}", self.case.name))
    }
}

impl Ran for crate::bench::BenchResult {
    fn failure(&self) -> Option<String> {
        self.error.as_ref().map(|e| format!("{}: {e}", self.case.name))
    }
}

/// A row that could not run is a failed sweep (exit 2, naming the rows, after the table),
/// not a table with a gap: in every suite.
fn every_row_ran<R: Ran>(rows: &[R]) -> Result<(), String> {
    let failed: Vec<String> = rows.iter().filter_map(Ran::failure).collect();
    if !failed.is_empty() {
        return Err(format!("{} of {} rows failed: {}", failed.len(), rows.len(), failed.join("; ")));
    }
    Ok(())
}

fn bench_greedy(runs: usize, quick: bool, filter: Option<&str>, json: bool) -> Result<i32, String> {
    let cases = crate::bench::greedy_suite(quick);
    let mut results = Vec::new();
    for c in cases.iter().filter(|c| filter.is_none_or(|f| c.name.contains(f))) {
        eprintln!("ccsynth bench: {} ...", c.name);
        let r = crate::bench::run_case(c, runs);
        eprintln!(
            "  synthesis {:.3} s, {:.1} us, met {} {}",
            r.synthesis_s_median,
            r.collective_time_us,
            met(r.met),
            r.error.clone().unwrap_or_default()
        );
        results.push(r);
    }
    let mut results = matched(results, filter, "greedy")?;
    crate::bench::judge_growth(&mut results);
    if json {
        print_json(&results)?;
    } else {
        print!("{}", crate::bench::markdown(&results));
    }
    every_row_ran(&results)?;
    Ok(0)
}

/// A bench case's verdict for people: `yes`, `no`, or `–` when there is no target.
fn met(m: Option<bool>) -> &'static str {
    match m {
        Some(true) => "yes",
        Some(false) => "no",
        None => "–",
    }
}

#[cfg(test)]
mod tests {
    use crate::bench::{SizeCase, run_size_case};
    use crate::collective::CollectiveKind;

    /// Issue 30, rough edge 2: a sweep with a row that could not run fails, naming the row; a
    /// sweep whose rows all ran passes.
    #[test]
    fn a_sweep_with_a_row_that_could_not_run_fails() {
        let case = |topology: &str| SizeCase {
            topology: topology.into(),
            collective: CollectiveKind::AllGather,
            size_bytes: 32 << 10,
            torus: false,
        };
        let ran = run_size_case(&case("ring:4"));
        assert!(ran.error.is_none(), "{:?}", ran.error);
        let broken = run_size_case(&case("ring:zero"));
        assert!(broken.error.is_some());
        super::every_row_ran(std::slice::from_ref(&ran)).unwrap();
        let e = super::every_row_ran(&[ran, broken]).unwrap_err();
        assert!(e.starts_with("1 of 2 rows failed: ring:zero AllGather 32768 B: "), "{e}");
    }

    /// The failures suite too (its rows that could not run exited 0 before): a case whose
    /// topology does not build fails, naming the case and its row.
    #[test]
    fn a_failures_row_that_could_not_run_fails_the_suite() {
        use crate::bench::failures::{FailureCase, run_failure_case};
        let case = FailureCase {
            topology: "torus:zero".into(),
            collective: CollectiveKind::AllReduce,
            size_bytes: 1 << 20,
            scenarios: Vec::new(),
        };
        let rows = run_failure_case(&case, Default::default(), &mut |_| {});
        let e = super::every_row_ran(&rows).unwrap_err();
        assert!(e.starts_with("1 of 1 rows failed: torus:zero AllReduce 1048576 B intact: "), "{e}");
    }
}
