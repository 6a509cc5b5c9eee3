//! `ccsynth bench --suite scale`: issue 62's rows, schedules of 4,096 to 16,384 NPUs. Each row
//! runs the default door (`auto`) as `synth --out` does, writes the schedule in its compact form
//! to a file, reads it back and checks it as `validate` does, and records wall time, peak
//! memory, file size and the ratio to the bound (or to the intact schedule, for a failure).

use super::{peak_rss_mib, reset_peak_rss};
use crate::collective::{CollectiveKind, CollectiveSpec};
use crate::engine::{self, RequestSpec};
use crate::schedule::{Form, Schedule};
use crate::topology::Failures;
use serde::Serialize;
use std::io::Write;
use std::time::Instant;

/// One row of the suite: a request, and its targets (time, peak memory, file, ratio).
#[derive(Clone, Debug, Serialize)]
pub struct ScaleCase {
    pub topology: String,
    pub collective: CollectiveKind,
    pub size_bytes: u64,
    /// Links that fail: the row regenerates the previous row's schedule (the same topology
    /// intact) without them, and its ratio is to that schedule's time.
    pub failed_links: Vec<[usize; 2]>,
    pub target_s: f64,
    pub target_peak_mib: f64,
    pub target_file_mib: Option<f64>,
    pub target_ratio: f64,
}

/// What one row measured.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    pub case: ScaleCase,
    pub npus: usize,
    pub algorithm: Option<String>,
    pub time_us: Option<f64>,
    pub bound_us: Option<f64>,
    /// The time over the bound, or over the intact schedule's time for a failure row.
    pub ratio: Option<f64>,
    /// The run and the file written, as `synth --out` (seconds, MiB of peak resident memory,
    /// MiB of file).
    pub wall_s: f64,
    pub peak_rss_mib: Option<f64>,
    pub file_mib: Option<f64>,
    /// The file read back and checked, as `validate`.
    pub validate_s: Option<f64>,
    pub validate_peak_rss_mib: Option<f64>,
    pub valid: Option<bool>,
    pub met: Option<bool>,
    pub error: Option<String>,
}

/// Issue 62's table: all-reduce at 1 GiB on torus:64x64, 64x128 and 128x128, torus:128x128
/// less three links (regenerated), and all-gather on torus:16x32x32. `quick`: the same shapes a
/// sixteenth the NPUs (16x16, 16x32, 32x32, 32x32 less three links, 4x8x8), at 64 MiB, with the
/// same targets, for a check that the suite runs.
pub fn scale_suite(quick: bool) -> Vec<ScaleCase> {
    let gib = 1u64 << 30;
    let row = |topology: &str, collective, target_s, target_peak_mib, target_file_mib, target_ratio| ScaleCase {
        topology: topology.into(),
        collective,
        size_bytes: if quick { 64 << 20 } else { gib },
        failed_links: Vec::new(),
        target_s,
        target_peak_mib,
        target_file_mib,
        target_ratio,
    };
    let (a, b, c, d) = if quick {
        ("torus:16x16", "torus:16x32", "torus:32x32", "torus:4x8x8")
    } else {
        ("torus:64x64", "torus:64x128", "torus:128x128", "torus:16x32x32")
    };
    // Three links of the last torus: one in each of two rows, one between rows.
    let side = if quick { 32 } else { 128 };
    let failed = vec![[0, 1], [side + 5, side + 6], [7 * side + 9, 8 * side + 9]];
    vec![
        row(a, CollectiveKind::AllReduce, 5.0, 1024.0, Some(200.0), 1.03),
        row(b, CollectiveKind::AllReduce, 30.0, 4096.0, None, 1.05),
        row(c, CollectiveKind::AllReduce, 60.0, 8192.0, Some(2048.0), 1.05),
        // Right after its intact row, which it regenerates.
        ScaleCase { failed_links: failed, ..row(c, CollectiveKind::AllReduce, 120.0, 8192.0, None, 1.10) },
        row(d, CollectiveKind::AllGather, 60.0, 8192.0, None, 1.05),
    ]
}

/// Runs the rows in order; a failure row regenerates the schedule of the row just before it
/// when that is its topology intact (else it runs the intact request itself first). Only that
/// one schedule is kept from row to row.
pub fn run_scale_suite(cases: &[ScaleCase], on_row: &mut dyn FnMut(&ScaleRow)) -> Vec<ScaleRow> {
    let mut intact: Option<(String, Schedule)> = None;
    let mut rows = Vec::new();
    for c in cases {
        let previous = intact.take().filter(|(t, _)| *t == c.topology).map(|(_, s)| s);
        let (row, schedule) = run_scale_case(c, previous);
        if c.failed_links.is_empty() {
            intact = schedule.map(|s| (c.topology.clone(), s));
        }
        on_row(&row);
        rows.push(row);
    }
    rows
}

fn run_scale_case(c: &ScaleCase, previous: Option<Schedule>) -> (ScaleRow, Option<Schedule>) {
    let mut r = ScaleRow {
        case: c.clone(),
        npus: 0,
        algorithm: None,
        time_us: None,
        bound_us: None,
        ratio: None,
        wall_s: 0.0,
        peak_rss_mib: None,
        file_mib: None,
        validate_s: None,
        validate_peak_rss_mib: None,
        valid: None,
        met: Some(false),
        error: None,
    };
    let path = std::env::temp_dir().join(format!("ccsynth-bench-scale-{}.json", std::process::id()));
    remove_on_signal(&path);
    let ran = measured(c, previous, &path, &mut r);
    std::fs::remove_file(&path).ok();
    match ran {
        Ok(s) => {
            r.met = Some(met(&r));
            (r, Some(s))
        }
        Err(e) => {
            r.error = Some(e);
            (r, None)
        }
    }
}

/// The row's file, removed if the process is stopped by SIGINT or SIGTERM (Ctrl-C, `timeout`)
/// while a row runs: it is hundreds of megabytes at 16,384 NPUs, and was left in the temporary
/// directory. Every row writes the same path, so the handlers are installed once.
fn remove_on_signal(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    static PATH: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    extern "C" fn remove_and_stop(signal: libc::c_int) {
        // Only async-signal-safe calls: unlink, then the signal's default action.
        if let Some(p) = PATH.get() {
            // SAFETY: a NUL-terminated path that lives for the whole process.
            unsafe { libc::unlink(p.as_ptr()) };
        }
        // SAFETY: restoring the default disposition and raising the signal again ends the
        // process as the signal would have.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return };
    if PATH.set(c).is_ok() {
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: installs a handler that makes only async-signal-safe calls.
            unsafe { libc::signal(signal, remove_and_stop as *const () as libc::sighandler_t) };
        }
    }
}

/// The row's run, file and check; gives the schedule (intact rows keep it for the next).
fn measured(
    c: &ScaleCase,
    previous: Option<Schedule>,
    path: &std::path::Path,
    r: &mut ScaleRow,
) -> Result<Schedule, String> {
    let limits = engine::Limits::default();
    let topo = engine::topology_from_spec(&c.topology, &limits).map_err(|e| e.to_string())?;
    r.npus = topo.npus();
    // The default door, as `synth` with no flags: `auto`.
    let auto = |target| RequestSpec { algorithm: engine::Algorithm::Auto, ..RequestSpec::new(target) };
    let spec = auto(CollectiveSpec::new(c.collective, c.size_bytes));
    // The intact schedule a failure row regenerates, built first when no row left one (not
    // counted in the row).
    let previous = match (c.failed_links.is_empty(), previous) {
        (true, _) => None,
        (false, Some(p)) => Some(p),
        (false, None) => Some(super::run_on(&topo, spec.clone()).map_err(|e| e.to_string())?.schedule),
    };
    let scope = reset_peak_rss();
    let started = Instant::now();
    let out = match &previous {
        None => super::run_on(&topo, spec).map_err(|e| e.to_string())?,
        Some(p) => {
            let failures = Failures { links: c.failed_links.clone(), ..Failures::default() };
            let (t, target) = engine::regeneration_target(p, &failures).map_err(|e| e.to_string())?;
            let req = engine::Request::new(t, auto(target), &limits).map_err(|e| e.to_string())?;
            engine::regenerate(p.clone(), &req, engine::Control::none()).map_err(|e| e.to_string())?
        }
    };
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    serde_json::to_writer(&mut w, &out.schedule.written(Form::Compact)).map_err(|e| e.to_string())?;
    w.flush().map_err(|e| e.to_string())?;
    drop(w);
    r.wall_s = started.elapsed().as_secs_f64();
    r.peak_rss_mib = peak_rss_mib().filter(|_| scope);
    r.file_mib = std::fs::metadata(path).ok().map(|m| m.len() as f64 / (1 << 20) as f64);
    r.algorithm = out.stats.algorithm();
    r.time_us = out.schedule.collective_time_ns.map(|t| t / 1e3);
    r.bound_us = out.report.lower_bound_ns.map(|b| b / 1e3);
    r.ratio = match &previous {
        None => r.time_us.zip(r.bound_us).map(|(t, b)| t / b),
        Some(p) => r.time_us.zip(p.collective_time_ns).map(|(t, i)| t * 1e3 / i),
    };
    let schedule = out.schedule;
    // The file read back and checked, as `ccsynth validate FILE` does.
    let scope = reset_peak_rss();
    let started = Instant::now();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let read = Schedule::from_json(&text).map_err(|e| e.to_string())?;
    drop(text);
    let report = engine::check(&read);
    r.validate_s = Some(started.elapsed().as_secs_f64());
    r.validate_peak_rss_mib = peak_rss_mib().filter(|_| scope);
    r.valid = Some(report.valid);
    Ok(schedule)
}

/// Every part of the row's target: valid, the ratio, the run's and the check's time and
/// peak memory, the file's size.
fn met(r: &ScaleRow) -> bool {
    let c = &r.case;
    let within = |s: Option<f64>, m: Option<f64>| {
        s.is_some_and(|s| s <= c.target_s) && m.is_some_and(|m| m <= c.target_peak_mib)
    };
    r.valid == Some(true)
        && r.ratio.is_some_and(|x| x <= c.target_ratio)
        && within(Some(r.wall_s), r.peak_rss_mib)
        && within(r.validate_s, r.validate_peak_rss_mib)
        && c.target_file_mib.is_none_or(|t| r.file_mib.is_some_and(|f| f <= t))
}

/// The rows as a markdown table.
pub fn scale_markdown(rows: &[ScaleRow]) -> String {
    let f = |x: Option<f64>, d: usize| x.map_or_else(|| "–".to_string(), |x| format!("{x:.d$}"));
    let mut out = String::from(
        "| topology | collective | size | failed links | NPUs | algorithm | time (µs) | bound (µs) | ratio | wall (s) | peak MiB | file MiB | validate (s) | validate peak MiB | valid | target | met |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let c = &r.case;
        let failed = if c.failed_links.is_empty() {
            "–".to_string()
        } else {
            c.failed_links.iter().map(|[u, v]| format!("{u}-{v}")).collect::<Vec<_>>().join(" ")
        };
        let ratio_of = if c.failed_links.is_empty() { "bound" } else { "intact" };
        let file = c.target_file_mib.map(|m| format!(", file ≤ {m:.0} MiB")).unwrap_or_default();
        let target =
            format!("≤ {:.2}× {ratio_of}, ≤ {:.0} s, ≤ {:.0} MiB{file}", c.target_ratio, c.target_s, c.target_peak_mib);
        let met = match (r.met, &r.error) {
            (_, Some(e)) => format!("no: {e}"),
            (Some(true), None) => "yes".into(),
            _ => "no".into(),
        };
        out += &format!(
            "| {} | {} | {} | {failed} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {target} | {met} |\n",
            c.topology,
            c.collective.name(),
            crate::units::format_size(c.size_bytes),
            r.npus,
            r.algorithm.as_deref().unwrap_or("–"),
            f(r.time_us, 1),
            f(r.bound_us, 1),
            f(r.ratio, 3),
            r.wall_s,
            f(r.peak_rss_mib, 0),
            f(r.file_mib, 0),
            f(r.validate_s, 1),
            f(r.validate_peak_rss_mib, 0),
            r.valid.map_or("–", |v| if v { "yes" } else { "no" }),
        );
    }
    out
}
