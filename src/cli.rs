//! The command-line interface (stable: scripts depend on its verbs, flags and exit codes).

use crate::engine;
use crate::error::InputError;
use crate::schedule::Schedule;
use crate::topology::{Failures, Topology, parse_topology};
use clap::Parser;
use std::io::{IsTerminal, Read, Write};

mod args;
mod bench;
mod error;
mod input;
mod render;

pub use args::*;
pub use error::{CliError, Exit};
pub use input::load_topology;
use input::{
    flags, load_collectives, load_schedule, load_target, load_topology_with_failures, parse_failures, read_input,
};
pub use render::comparison_table;
use render::{duration, summary};

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ccsynth: {}", e.message);
            e.exit as i32
        }
    }
}

fn run(cmd: Command) -> Result<i32, CliError> {
    match cmd {
        Command::Topology { topology, fail_link, fail_npu, directed } => {
            Ok(topology_cmd(&topology, &fail_link, &fail_npu, directed)?)
        }
        Command::Validate { file } => Ok(validate_cmd(&file)?),
        Command::Simulate { file, trace, transfers } => simulate_cmd(&file, trace.as_deref(), transfers),
        Command::Plot { what } => plot_cmd(what),
        Command::Export(a) => export_cmd(*a),
        Command::Synth(a) => synth(*a),
        Command::Regenerate(a) => regenerate_cmd(*a),
        Command::Baseline(a) => baseline(*a),
        Command::Compare { target, json, with_synth, algos } => {
            compare_cmd(&target, json, with_synth, algos.as_deref())
        }
        Command::Serve(a) => Ok(serve_cmd(*a)?),
        Command::Bench { suite, runs, quick, filter, json } => {
            Ok(bench::bench_cmd(&suite, runs, quick, filter.as_deref(), json)?)
        }
    }
}

/// `topology`: prints the canonical JSON, after the failures (reporting what is left).
fn topology_cmd(topology: &str, fail_link: &[String], fail_npu: &[usize], directed: bool) -> Result<i32, String> {
    let topo = load_topology(topology)?;
    let f = parse_failures(fail_link, fail_npu, directed)?;
    let topo = if f.links.is_empty() && f.npus.is_empty() {
        topo
    } else {
        let t = topo.with_failures(&f).map_err(|e| format!("failures: {e}"))?;
        let c = t.connectivity();
        eprintln!(
            "ccsynth: {} live NPUs, {}",
            c.live_npus,
            if c.connected {
                "connected".to_string()
            } else {
                format!(
                    "NOT connected: {} components, sizes {:?}",
                    c.components.len(),
                    c.components.iter().map(Vec::len).collect::<Vec<_>>()
                )
            }
        );
        t
    };
    print_json(&topo)?;
    Ok(0)
}

/// `validate`: prints the report; exit 0 when valid, 1 when not.
fn validate_cmd(file: &str) -> Result<i32, String> {
    let s = load_schedule(file)?;
    let r = engine::check(&s);
    print_json(&r)?;
    Ok(if r.valid { 0 } else { 1 })
}

/// `simulate`: prints the timing (with a warning when the schedule is not valid), with each
/// transfer's times when asked, and writes the trace when asked; exit 1 when it cannot be
/// simulated at all.
fn simulate_cmd(file: &str, trace: Option<&std::path::Path>, transfers: bool) -> Result<i32, CliError> {
    let s = load_schedule(file)?;
    let r = engine::check(&s);
    let Some(timing) = &r.timing else {
        let first = r.violations.first().map(|v| v.message.as_str()).unwrap_or("unknown");
        eprintln!("ccsynth: the schedule cannot be simulated: {first}");
        return Ok(1);
    };
    if !r.valid {
        eprintln!(
            "ccsynth: warning: the schedule is not valid ({} violations); timing shown anyway",
            r.violation_count
        );
    }
    if let Some(path) = trace {
        let text =
            engine::export_trace(&s, engine::MAX_TRACE_SLICES).map_err(|e| CliError::from(e).context("--trace"))?;
        write_text(Some(path), &text)?;
    }
    let times = if transfers { Some(engine::transfer_times(&s)?) } else { None };
    #[derive(serde::Serialize)]
    struct Out<'a> {
        valid: bool,
        #[serde(flatten)]
        timing: &'a crate::sim::Timing,
        lower_bound_ns: Option<f64>,
        lower_bounds: &'a Option<engine::LowerBounds>,
        #[serde(skip_serializing_if = "Option::is_none")]
        transfer_times: Option<Vec<crate::sim::TransferTime>>,
    }
    print_json(&Out {
        valid: r.valid,
        timing,
        lower_bound_ns: r.lower_bound_ns,
        lower_bounds: &r.lower_bounds,
        transfer_times: times,
    })?;
    Ok(0)
}

/// `plot`: SVG of a schedule's timeline, or of a size sweep's goodput.
fn plot_cmd(what: PlotCommand) -> Result<i32, CliError> {
    let (svg, out) = match what {
        PlotCommand::Timeline { file, out } => {
            let s = load_schedule(&file)?;
            (engine::plot_timeline(&s).map_err(|e| CliError::from(e).context(&file))?, out)
        }
        PlotCommand::Goodput { file, out } => {
            let text = read_input(&file)?;
            (engine::plot_goodput(&goodput_charts(&text).map_err(|e| format!("{file}: {e}"))?), out)
        }
    };
    write_text(out.as_deref(), &svg)?;
    Ok(0)
}

/// The charts of a goodput input: the JSON of `bench --suite sizes --json` (per topology and
/// collective, the series auto, greedy, best baseline and lower bound), or `compare --json`
/// outputs at several sizes, one after another or in a JSON array (per collective and NPU
/// count, one series per algorithm and the lower bound).
fn goodput_charts(text: &str) -> Result<Vec<engine::GoodputChart>, String> {
    const BOUND: &str = engine::GOODPUT_BOUND_SERIES;
    const EXPECTED: &str =
        "expected the JSON of `ccsynth bench --suite sizes --json` or of `ccsynth compare --json` runs";
    let mut values = Vec::new();
    for v in serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>() {
        match v.map_err(|e| format!("{EXPECTED}: {e}"))? {
            serde_json::Value::Array(items) => values.extend(items),
            other => values.push(other),
        }
    }
    let mut charts: Vec<engine::GoodputChart> = Vec::new();
    let mut add = |title: String, series: &str, size: u64, ns: f64| {
        let at = match charts.iter().position(|c| c.title == title) {
            Some(at) => at,
            None => {
                charts.push(engine::GoodputChart { title, series: Vec::new() });
                charts.len() - 1
            }
        };
        let chart = &mut charts[at];
        let s = match chart.series.iter().position(|s| s.name == series) {
            Some(i) => i,
            None => {
                chart.series.push(engine::Series { name: series.to_string(), points: Vec::new() });
                chart.series.len() - 1
            }
        };
        chart.series[s].points.push((size, ns));
    };
    for (i, v) in values.iter().enumerate() {
        if let (Some(topology), Some(kind), Some(size)) =
            (v["case"]["topology"].as_str(), v["case"]["collective"].as_str(), v["case"]["size_bytes"].as_u64())
        {
            let title = format!("{kind} on {topology}");
            for (series, field) in [
                ("auto", "auto_us"),
                ("greedy", "greedy_us"),
                ("best baseline", "best_baseline_us"),
                (BOUND, "lower_bound_us"),
            ] {
                if let Some(us) = v[field].as_f64() {
                    add(title.clone(), series, size, us * 1e3);
                }
            }
        } else if let (Some(kind), Some(size), Some(npus), Some(rows)) =
            (v["collective"].as_str(), v["size_bytes"].as_u64(), v["npus"].as_u64(), v["rows"].as_array())
        {
            let title = format!("{kind} on {npus} NPUs");
            for r in rows {
                if let (Some(name), Some(ns)) = (r["algorithm"].as_str(), r["collective_time_ns"].as_f64()) {
                    add(title.clone(), name, size, ns);
                }
            }
            if let Some(ns) = v["lower_bound_ns"].as_f64() {
                add(title, BOUND, size, ns);
            }
        } else {
            return Err(format!("item {i}: {EXPECTED}"));
        }
    }
    if charts.is_empty() {
        return Err(format!("no rows: {EXPECTED}"));
    }
    Ok(charts)
}

/// `export`: validates the schedule and writes it in `--format`.
fn export_cmd(a: ExportArgs) -> Result<i32, CliError> {
    let opts = a.msccl.options()?;
    let s = load_schedule(&a.file)?;
    let text = match a.format {
        Format::Json => {
            engine::require_valid(&s).map_err(|e| CliError::from(e).context(&a.file))?;
            serde_json::to_string(&s).map_err(|e| e.to_string())? + "\n"
        }
        Format::MscclXml => engine::export_msccl(&s, &opts).map_err(|e| CliError::from(e).context(&a.file))?,
        Format::MscclppJson => {
            let opts = a.msccl.mscclpp_options()?;
            engine::export_mscclpp(&s, &opts).map_err(|e| CliError::from(e).context(&a.file))? + "\n"
        }
        Format::ChakraEt => {
            write_chakra(&s, a.out.as_deref(), &a.chakra.prefix).map_err(|e| e.context(&a.file))?;
            return Ok(0);
        }
    };
    write_text(a.out.as_deref(), &text)?;
    Ok(0)
}

/// `--format chakra-et`: writes the traces, workload and configuration files into the
/// directory `out` (created if missing), then prints what ASTRA-sim needs to run them.
fn write_chakra(s: &Schedule, out: Option<&std::path::Path>, prefix: &str) -> Result<(), CliError> {
    let dir = out.ok_or("--format chakra-et writes several files: name their directory with --out DIR")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let abs = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let abs_text = abs.to_str().ok_or_else(|| format!("{}: not a UTF-8 path", abs.display()))?;
    let export = engine::export_chakra(s, prefix, Some(abs_text))?;
    for (name, bytes) in &export.files {
        let path = abs.join(name);
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    eprintln!("ccsynth: wrote {} files to {}", export.files.len(), abs.display());
    let network = match &export.network {
        Ok(name) => format!("network: {name}"),
        Err(why) => format!("network: none written: {why}"),
    };
    println!(
        "system configuration: {}
{network}
run, in {}: {}",
        export.system_key,
        abs.display(),
        export.command
    );
    Ok(())
}

/// Writes `text` to `out`, or to stdout.
fn write_text(out: Option<&std::path::Path>, text: &str) -> Result<(), String> {
    match out {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("ccsynth: wrote {}", path.display());
            Ok(())
        }
        None => {
            let mut w = std::io::stdout().lock();
            w.write_all(text.as_bytes()).and_then(|_| w.flush()).map_err(|e| e.to_string())
        }
    }
}

/// `compare`: every baseline (or those `--algos` names) on the target, as a table or JSON.
fn compare_cmd(
    target: &CollectiveArgs,
    json: bool,
    with_synth: bool,
    algos: Option<&[String]>,
) -> Result<i32, CliError> {
    let names: Vec<&str> = match algos {
        None => engine::registry::baseline_names(),
        Some(list) => engine::registry::check_baselines("--algos", list).map_err(|e| e.to_string())?,
    };
    let (topo, spec) = load_target(target)?;
    let synthesized = if with_synth {
        let rs = engine::RequestSpec {
            algorithm: engine::registry::PORTFOLIO.to_string(),
            ..engine::RequestSpec::new(spec.clone())
        };
        let req = engine::Request::new(topo.clone(), rs, &engine::Limits::default()).map_err(flags)?;
        let out = with_progress("ccsynth compare --with-synth", |ctl| engine::run(&req, ctl))?;
        Some(out.schedule)
    } else {
        None
    };
    let extra = synthesized.as_ref().map(|s| (engine::registry::PORTFOLIO, s));
    let cmp = engine::compare_among(&topo, &spec, extra, &names);
    if json {
        print_json(&cmp)?;
    } else {
        print!("{}", comparison_table(&cmp));
    }
    Ok(0)
}

/// `serve`: runs the HTTP service until it is stopped.
fn serve_cmd(a: ServeArgs) -> Result<i32, String> {
    let ServeArgs {
        addr,
        database_url,
        workers,
        job_threads,
        max_queue,
        max_body_bytes,
        max_npus,
        max_links,
        max_chunks,
        max_solve_s,
        lease_ms,
        grace_ms,
        drain_ms,
        max_attempts,
        max_result_bytes,
        export_memory_mb,
        max_interactive_per_client,
        max_interactive_s,
        header_timeout_ms,
        body_timeout_ms,
        max_connections,
        tokens_file,
        allow_open,
        allowed_hosts,
        max_active_per_client,
        max_client_seconds,
        max_requests_per_s,
        private_metrics,
        max_auth_failures_per_s,
        max_client_topologies,
    } = a;
    let addr: std::net::SocketAddr = addr.parse().map_err(|e| format!("--addr {addr:?}: {e}"))?;
    let clients = match &tokens_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("--tokens-file {}: {e}", path.display()))?;
            crate::api::parse_clients(&text).map_err(|e| format!("--tokens-file {}: {e}", path.display()))?
        }
        None => Vec::new(),
    };
    if clients.is_empty() && !addr.ip().is_loopback() && !allow_open {
        return Err(format!(
            "--addr {addr} is not a loopback address and no --tokens-file is given: anyone who can reach it could queue, \
             cancel and delete. Give --tokens-file FILE (NAME TOKEN lines), or --allow-open to serve it open anyway"
        ));
    }
    let mut config = crate::api::Config::new(database_url);
    if let Some(w) = workers {
        config.workers = w.max(1);
    }
    if let Some(t) = job_threads {
        config.job_threads = t.max(1);
    }
    config.max_queue = max_queue;
    config.max_body_bytes = max_body_bytes;
    config.max_npus = max_npus;
    config.max_links = max_links;
    config.max_chunks = max_chunks;
    config.max_solve_s = max_solve_s;
    config.lease_ms = lease_ms;
    config.grace_ms = grace_ms;
    config.drain_ms = drain_ms;
    config.max_attempts = max_attempts.max(1);
    config.max_result_bytes = max_result_bytes;
    config.export_memory_mb = export_memory_mb.max(1);
    config.max_interactive_per_client = max_interactive_per_client.max(0);
    if !(max_interactive_s.is_finite() && max_interactive_s > 0.0) {
        return Err(format!("--max-interactive-s {max_interactive_s}: expected seconds > 0"));
    }
    config.max_interactive_s = max_interactive_s;
    config.header_timeout_ms = header_timeout_ms;
    config.body_timeout_ms = body_timeout_ms;
    config.max_connections = max_connections;
    config.clients = clients;
    config.max_active_per_client = max_active_per_client.max(1);
    if !(max_client_seconds.is_finite() && max_client_seconds > 0.0) {
        return Err(format!("--max-client-seconds {max_client_seconds}: expected seconds > 0"));
    }
    config.max_active_seconds_per_client = max_client_seconds;
    if !(max_requests_per_s.is_finite() && max_requests_per_s >= 0.0) {
        return Err(format!("--max-requests-per-s {max_requests_per_s}: expected a number of requests ≥ 0"));
    }
    config.max_requests_per_s = max_requests_per_s;
    if !(max_auth_failures_per_s.is_finite() && max_auth_failures_per_s >= 0.0) {
        return Err(format!("--max-auth-failures-per-s {max_auth_failures_per_s}: expected a number of requests ≥ 0"));
    }
    config.max_auth_failures_per_s = max_auth_failures_per_s;
    if max_client_topologies < 1 {
        return Err(format!("--max-client-topologies {max_client_topologies}: expected at least 1"));
    }
    config.max_topologies_per_client = max_client_topologies;
    config.private_metrics = private_metrics;
    config.allowed_hosts = if !allowed_hosts.is_empty() {
        Some(
            allowed_hosts
                .iter()
                .map(|h| h.trim().trim_start_matches('[').trim_end_matches(']').to_lowercase())
                .collect(),
        )
    } else if addr.ip().is_loopback() {
        Some(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()])
    } else {
        None
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    let served = rt.block_on(crate::api::serve(config, addr));
    // A comparison or export abandoned at the end of the grace may still run on the blocking
    // pool: the process leaves without it (dropping the runtime would wait for it to finish).
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    served.map_err(|e| e.to_string())?;
    Ok(0)
}

fn synth(a: SynthArgs) -> Result<i32, CliError> {
    let msccl = a.msccl.options()?;
    let topo = load_topology_with_failures(&a.target)?;
    let spec = engine::RequestSpec {
        target: load_collectives(&a.target, a.tenants.as_deref())?,
        algorithm: a.algo.clone(),
        options: engine::Options {
            seed: Some(a.seed),
            seeds: Some(a.seeds),
            threads: a.threads,
            chunks_per_npu: None,
            time_limit_s: Some(a.time_limit),
            solve_time_limit_s: a.solve_time_limit,
            switch_model: Some(a.switch_model),
            discretization: a.discretization,
            ignore_congestion: Some(a.ignore_congestion),
            window: a.window,
            keep_lp: a.dump_lp.is_some(),
        },
    };
    let req = engine::Request::new(topo, spec, &engine::Limits::default()).map_err(flags)?;
    let out = with_progress(&format!("ccsynth synth --algo {}", req.algorithm.name()), |ctl| engine::run(&req, ctl))?;
    if let Some(path) = &a.dump_lp {
        write_lp(path, &out.lp)?;
    }
    if a.format == Format::MscclXml {
        let xml = engine::export_msccl(&out.schedule, &msccl)?;
        write_text(a.output.out.as_deref(), &xml)?;
        return Ok(0);
    }
    if a.format == Format::MscclppJson {
        let plan = engine::export_mscclpp(&out.schedule, &a.msccl.mscclpp_options()?)?;
        write_text(a.output.out.as_deref(), &(plan + "\n"))?;
        return Ok(0);
    }
    if a.format == Format::ChakraEt {
        write_chakra(&out.schedule, a.output.out.as_deref(), &a.chakra.prefix)?;
        return Ok(0);
    }
    let comparison = (a.compare && matches!(req.target, engine::Target::One(_)))
        .then(|| engine::compare(&req.topology, &out.schedule.collective, Some((req.algorithm.name(), &out.schedule))));
    Ok(emit(&out, comparison.as_ref(), &a.output)?)
}

/// Writes a run's schedule JSON (with bounds, stats and the comparison) to `--out` or stdout,
/// or the human summary at a terminal.
fn emit(out: &engine::Output, comparison: Option<&engine::Comparison>, a: &OutputArgs) -> Result<i32, String> {
    #[derive(serde::Serialize)]
    struct Out<'a> {
        #[serde(flatten)]
        schedule: &'a Schedule,
        lower_bound_ns: Option<f64>,
        lower_bounds: &'a Option<engine::LowerBounds>,
        stats: &'a engine::RunStats,
        #[serde(skip_serializing_if = "Option::is_none")]
        comparison: Option<&'a engine::Comparison>,
    }
    let doc = Out {
        schedule: &out.schedule,
        lower_bound_ns: out.report.lower_bound_ns,
        lower_bounds: &out.report.lower_bounds,
        stats: &out.stats,
        comparison,
    };
    let human = a.summary || (std::io::stdout().is_terminal() && !a.json && !a.pretty);
    if let Some(path) = &a.out {
        let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        write_json(std::io::BufWriter::new(f), &doc, a.pretty)?;
    }
    if human {
        let text = summary(out, comparison, a.out.as_deref());
        print!("{text}");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
    } else if a.out.is_none() {
        write_json(std::io::BufWriter::new(std::io::stdout().lock()), &doc, a.pretty)?;
    } else if let Some(path) = &a.out {
        eprintln!(
            "ccsynth: wrote {} ({} transfers, {} , seed {})",
            path.display(),
            out.schedule.transfers.len(),
            duration(out.schedule.collective_time_ns.unwrap_or(0.0)),
            out.schedule.seed.unwrap_or(0)
        );
    }
    Ok(0)
}

fn regenerate_cmd(a: RegenerateArgs) -> Result<i32, CliError> {
    let previous = load_schedule(&a.schedule)?;
    engine::require_valid(&previous).map_err(|e| CliError::from(e).context(&a.schedule))?;
    let failures = parse_failures(&a.fail_link, &a.fail_npu, a.directed)?;
    let (topo, collective) = engine::regeneration_target(&previous, &failures).map_err(|e| e.to_string())?;
    let spec = engine::RequestSpec {
        target: engine::Target::One(collective),
        algorithm: a.algo.clone(),
        options: engine::Options {
            seed: Some(a.seed),
            seeds: Some(a.seeds),
            threads: a.threads,
            time_limit_s: Some(a.time_limit),
            ..engine::Options::default()
        },
    };
    let req = engine::Request::new(topo, spec, &engine::Limits::default()).map_err(flags)?;
    let out = with_progress("ccsynth regenerate", |ctl| engine::regenerate(previous, &req, ctl))?;
    Ok(emit(&out, None, &a.output)?)
}

/// Runs `f` with a progress bar on stderr when it is a terminal (drawn only after a second, so
/// quick runs stay quiet), fed by the engine's progress reports.
fn with_progress<T>(what: &str, f: impl FnOnce(engine::Control) -> T) -> T {
    if !std::io::stderr().is_terminal() {
        return f(engine::Control::none());
    }
    let bar = indicatif::ProgressBar::with_draw_target(Some(1000), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{elapsed}] {wide_bar} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_prefix(what.to_string());
    let started = std::time::Instant::now();
    let report = |fraction: f64, message: &str| {
        if started.elapsed() >= std::time::Duration::from_secs(1) {
            bar.set_position((fraction * 1000.0) as u64);
            bar.set_message(message.to_string());
        }
    };
    let out = f(engine::Control { cancelled: &|| false, progress: &report });
    bar.finish_and_clear();
    out
}

/// Writes each phase's LP text: to `path` when there is one, else to `stem.PHASE.ext`.
fn write_lp(path: &std::path::Path, models: &[engine::PhaseLp]) -> Result<(), String> {
    if models.is_empty() {
        eprintln!("ccsynth: --dump-lp: no model was built (nothing to move, or not the ilp algorithm)");
    }
    for engine::PhaseLp { phase, text } in models {
        let target = if models.len() == 1 {
            path.to_path_buf()
        } else {
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let name = match path.extension() {
                Some(ext) => format!("{stem}.{phase}.{}", ext.to_string_lossy()),
                None => format!("{stem}.{phase}"),
            };
            path.with_file_name(name)
        };
        std::fs::write(&target, text).map_err(|e| format!("--dump-lp {}: {e}", target.display()))?;
        eprintln!("ccsynth: wrote the {phase} model to {}", target.display());
    }
    Ok(())
}

fn baseline(a: BaselineArgs) -> Result<i32, CliError> {
    if a.list {
        print_json(&engine::registry::baselines())?;
        return Ok(0);
    }
    let target = CollectiveArgs {
        topology: a.topology.clone().unwrap_or_default(),
        collective: a.collective,
        size: a.size.clone(),
        chunks_per_npu: a.chunks_per_npu,
        root: a.root,
        group: None,
        fail_link: Vec::new(),
        fail_npu: Vec::new(),
    };
    let (topo, collective) = load_target(&target)?;
    let name = a.algo.as_deref().unwrap_or_default();
    if engine::Algorithm::parse(name).is_some_and(|alg| alg.is_synthesizer()) {
        return Err(format!("--algo {name:?} is a synthesizer; run it with `ccsynth synth --algo {name}`").into());
    }
    let spec = engine::RequestSpec { algorithm: name.to_string(), ..engine::RequestSpec::new(collective) };
    let req = engine::Request::new(topo, spec, &engine::Limits::default()).map_err(flags)?;
    let out = engine::run(&req, engine::Control::none())?;
    let o = &a.output;
    if let Some(path) = &o.out {
        let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        write_json(std::io::BufWriter::new(f), &out.schedule, o.pretty)?;
    }
    if o.summary || (std::io::stdout().is_terminal() && !o.json && !o.pretty) {
        print!("{}", summary(&out, None, o.out.as_deref()));
    } else if o.out.is_none() {
        write_json(std::io::BufWriter::new(std::io::stdout().lock()), &out.schedule, o.pretty)?;
    }
    Ok(0)
}

fn write_json<W: Write, T: serde::Serialize>(mut w: W, v: &T, pretty: bool) -> Result<(), String> {
    if pretty { serde_json::to_writer_pretty(&mut w, v) } else { serde_json::to_writer(&mut w, v) }
        .map_err(|e| e.to_string())?;
    writeln!(w).and_then(|_| w.flush()).map_err(|e| e.to_string())
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<(), String> {
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    serde_json::to_writer_pretty(&mut w, v).map_err(|e| e.to_string())?;
    writeln!(w).and_then(|_| w.flush()).map_err(|e| e.to_string())
}
