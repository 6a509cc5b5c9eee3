//! The command-line interface (stable: scripts depend on its verbs, flags and exit codes).

use crate::engine;
use crate::schedule::Form;
use crate::topology::Failures;
use clap::Parser;
use std::io::{IsTerminal, Write};

mod args;
mod bench;
mod error;
mod goodput;
mod input;
mod outputs;
mod render;
mod serve;

pub use args::{
    BaselineArgs, ChakraArgs, Chunks, Cli, CollectiveArg, CollectiveArgs, Command, ExportArgs, Format, MscclArgs,
    MscclProtoArg, MscclTargetArg, OutputArgs, PlotCommand, RegenerateArgs, ServeArgs, SynthArgs,
};
pub use error::{CliError, Exit};
use goodput::goodput_charts;
pub use input::load_topology;
use input::{
    failure_flags, flags, load_collectives, load_schedule, load_target, load_topology_with_failures, parse_failures,
    read_input,
};
use outputs::{check_out, not_an_input, write_chakra};
pub use render::comparison_table;
use render::{counted, duration, note_degraded, summary, summary_of_baseline};
use serve::serve_cmd;

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = e.exit_code();
            let _ = e.print();
            // `args_os`: an argument that is not UTF-8 (a file name) is clap's error, not a panic.
            let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
            if let Some(hint) = size_hint(&args) {
                eprintln!("{hint}");
            }
            return code;
        }
    };
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
        Command::Topology { topology, fail_link, fail_npu, degrade_link, directed } => {
            Ok(topology_cmd(&topology, parse_failures(&fail_link, &fail_npu, &degrade_link, directed)?)?)
        }
        Command::Validate { file } => Ok(validate_cmd(&file)?),
        Command::Simulate { file, trace, transfers } => {
            outputs::check_written("--trace", trace.as_deref())?;
            not_an_input("--trace", trace.as_deref(), &[Some(&file)])?;
            simulate_cmd(&file, trace.as_deref(), transfers)
        }
        Command::Plot { what } => {
            let (PlotCommand::Timeline { file, out } | PlotCommand::Goodput { file, out }) = &what;
            check_out(out.as_deref())?;
            not_an_input("--out", out.as_deref(), &[Some(file)])?;
            plot_cmd(what)
        }
        Command::Export(a) => {
            let chakra = (a.format == Format::ChakraEt).then(|| (a.chakra.prefix(), a.msccl.rank));
            outputs::check_written_by(chakra, a.out.as_deref(), &[Some(&a.file)])?;
            export_cmd(*a)
        }
        Command::Synth(a) => {
            let tenants = a.tenants.as_deref().and_then(|p| p.to_str());
            let chakra = (a.format == Format::ChakraEt).then(|| (a.chakra.prefix(), a.msccl.rank));
            outputs::check_written_by(chakra, a.output.out.as_deref(), &[Some(&a.target.topology), tenants])?;
            synth(*a)
        }
        Command::Regenerate(a) => {
            outputs::check_written_by(None, a.output.out.as_deref(), &[Some(&a.schedule)])?;
            regenerate_cmd(*a)
        }
        Command::Baseline(a) => {
            outputs::check_written_by(None, a.output.out.as_deref(), &[a.topology.as_deref()])?;
            baseline(*a)
        }
        Command::Compare { target, json, with_synth, seed, algos } => {
            compare_cmd(&target, json, with_synth.then_some(seed), algos.as_deref())
        }
        Command::Serve(a) => Ok(serve_cmd(*a)?),
        Command::Bench { suite, runs, quick, filter, json, size, effort } => {
            let failures = bench::FailuresArgs { size: size.as_deref(), effort };
            Ok(bench::bench_cmd(&suite, runs, quick, filter.as_deref(), json, failures)?)
        }
    }
}

/// `topology`: prints the canonical JSON, after the failures (reporting what is left).
fn topology_cmd(topology: &str, f: Failures) -> Result<i32, String> {
    let topo = load_topology(topology)?;
    let topo = if f.is_empty() {
        topo
    } else {
        let t = topo.with_failures(&f).map_err(|e| failure_flags(e.within("failures"), &f))?;
        note_degraded(&f, &t, &topo);
        let live = t.live_npus();
        let parts = t.parts_of(&live);
        eprintln!(
            "ccsynth: {} live NPUs, {}",
            live.len(),
            if parts.len() < 2 {
                "connected".to_string()
            } else {
                format!("NOT connected: {}", crate::collective::describe_parts(&parts))
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
        let at_least = if r.violation_count_capped { "at least " } else { "" };
        eprintln!(
            "ccsynth: warning: the schedule is not valid ({at_least}{}); timing shown anyway",
            counted(r.violation_count, "violation")
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
            let t = engine::plot_timeline(&s).map_err(|e| CliError::from(e).context(&file))?;
            if let Some(why) = &t.invalid {
                eprintln!("ccsynth: warning: the schedule is {why}; drawn as it replays");
            }
            (t.svg, out)
        }
        PlotCommand::Goodput { file, out } => {
            let text = read_input(&file)?;
            (engine::plot_goodput(&goodput_charts(&text).map_err(|e| format!("{file}: {e}"))?), out)
        }
    };
    write_text(out.as_deref(), &svg)?;
    Ok(0)
}

/// An MSCCL++ plan of `s`, with a note on stderr where the plan's 32-bit offsets cut
/// `--max-bytes` (the plan says the value written, in `max_message_size`).
fn mscclpp_plan(s: &crate::schedule::Schedule, opts: &engine::MscclppOptions) -> Result<String, CliError> {
    let (plan, written) = engine::export_mscclpp_reached(s, opts)?;
    if let Some(asked) = opts.max_bytes.filter(|&asked| asked > written) {
        eprintln!(
            "ccsynth: note: --max-bytes {asked} is beyond what this plan's 32-bit offsets reach; written as {written} (max_message_size)"
        );
    }
    Ok(plan)
}

/// `export`: validates the schedule and writes it in `--format`.
fn export_cmd(a: ExportArgs) -> Result<i32, CliError> {
    let opts = a.msccl.options()?;
    a.msccl.check_format(a.format, &a.chakra, a.out.as_deref())?;
    let s = load_schedule(&a.file)?;
    let text = match a.format {
        Format::Json | Format::Explicit => {
            engine::require_valid(&s).map_err(|e| CliError::from(e).context(&a.file))?;
            let form = if a.format == Format::Json { Form::Compact } else { Form::Explicit };
            // Written as it goes: an explicit form runs to gigabytes.
            match a.out.as_deref() {
                Some(path) => {
                    write_json_file(path, &s.written(form), false)?;
                    eprintln!("ccsynth: wrote {}", path.display());
                }
                None => write_json_stdout(&s.written(form), false)?,
            }
            return Ok(0);
        }
        Format::MscclXml => engine::export_msccl(&s, &opts).map_err(|e| CliError::from(e).context(&a.file))?,
        Format::MscclppJson => {
            let opts = a.msccl.mscclpp_options()?;
            mscclpp_plan(&s, &opts).map_err(|e| e.context(&a.file))? + "\n"
        }
        Format::ChakraEt => {
            write_chakra(&s, (Some(&a.file), &[Some(&a.file)]), a.out.as_deref(), a.chakra.prefix(), a.msccl.rank)?;
            return Ok(0);
        }
    };
    write_text(a.out.as_deref(), &text)?;
    Ok(0)
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
            quiet_on_broken_pipe(w.write_all(text.as_bytes()).and_then(|_| w.flush()))
        }
    }
}

/// `compare`: every baseline (or those `--algos` names) on the target, as a table or JSON.
fn compare_cmd(
    target: &CollectiveArgs,
    json: bool,
    with_synth: Option<u64>,
    algos: Option<&[String]>,
) -> Result<i32, CliError> {
    let names: Vec<&str> = match algos {
        None => engine::registry::baseline_names(),
        Some(list) => engine::registry::check_baselines("--algos", list).map_err(|e| e.to_string())?,
    };
    let (topo, spec) = load_target(target)?;
    // The request is checked as `synth` checks it, before any baseline is built: a broadcast
    // without --root was a table of refusals and exit 0.
    let options = engine::Options { seed: with_synth, ..Default::default() };
    let rs =
        engine::RequestSpec { algorithm: engine::Algorithm::Auto, options, ..engine::RequestSpec::new(spec.clone()) };
    let req = engine::Request::new(topo.clone(), rs, &engine::Limits::default()).map_err(flags)?;
    let synthesized = if with_synth.is_some() {
        let out = with_progress("ccsynth compare --with-synth", |ctl| engine::run(&req, ctl))?;
        Some(out.schedule)
    } else {
        None
    };
    drop(req);
    let extra = synthesized.as_ref().map(|s| (engine::registry::PORTFOLIO, s));
    let cmp = engine::Comparison { seed: with_synth, ..engine::compare_among(&topo, &spec, extra, &names) };
    // The baselines named by --algos, none of which serves the request, are a mistake in the
    // command, as `baseline --algo mst` for an all-reduce is.
    if algos.is_some() && cmp.rows.is_empty() {
        let why: Vec<String> = cmp.refused.iter().map(|(name, e)| format!("{name}: {e}")).collect();
        let message = format!("--algos: none of them serves this request ({})", why.join("; "));
        // Every one serving the collective but refusing the topology exits as `baseline` does
        // then (3: it was 2); one not made for the collective is a mistake in the command.
        let serve = names.iter().all(|n| engine::registry::baseline_supports(n, spec.kind));
        let exit = match serve && cmp.refused_kinds.iter().all(|&k| k == engine::ErrorKind::Refused) {
            true => error::Exit::Refused,
            false => error::Exit::BadInput,
        };
        return Err(CliError { exit, message });
    }
    if json {
        print_json(&cmp)?;
    } else {
        print!("{}", comparison_table(&cmp));
    }
    Ok(0)
}

fn synth(a: SynthArgs) -> Result<i32, CliError> {
    let msccl = a.msccl.options()?;
    a.msccl.check_format(a.format, &a.chakra, a.output.out.as_deref())?;
    // An executor's file or traces are written alone: the flags that shape schedule v1's output
    // (and its comparison) were ignored with them.
    if !matches!(a.format, Format::Json | Format::Explicit) {
        let shaping = [
            ("--compare", a.compare),
            ("--json", a.output.json),
            ("--pretty", a.output.pretty),
            ("--summary", a.output.summary),
        ];
        if let Some((flag, _)) = shaping.into_iter().find(|&(_, on)| on) {
            return Err(format!("{flag}: only --format json and explicit write schedule v1, which it shapes; --format {} writes its own file alone", a.format.name()).into());
        }
    }
    let topo = load_topology_with_failures(&a.target, a.tenants.as_deref())?;
    let spec = engine::RequestSpec {
        target: load_collectives(&a.target, a.tenants.as_deref())?,
        algorithm: a.algo.parse().map_err(flags)?,
        options: engine::Options {
            seed: Some(a.seed),
            seeds: a.seeds,
            threads: a.threads,
            chunks_per_npu: None,
            time_limit_s: a.time_limit,
            solve_time_limit_s: a.solve_time_limit,
            switch_model: Some(a.switch_model),
            discretization: a.discretization,
            ignore_congestion: Some(a.ignore_congestion),
            window: a.window,
            effort: Some(a.effort),
            keep_lp: a.dump_lp.is_some(),
        },
    };
    let req = engine::Request::new(topo, spec, &engine::Limits::default()).map_err(flags)?;
    input::note_unread_flags(&input::synth_flags(&a), &req.algorithm);
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
        let plan = mscclpp_plan(&out.schedule, &a.msccl.mscclpp_options()?)?;
        write_text(a.output.out.as_deref(), &(plan + "\n"))?;
        return Ok(0);
    }
    if a.format == Format::ChakraEt {
        let inputs = [Some(a.target.topology.as_str()), a.tenants.as_deref().and_then(|p| p.to_str())];
        write_chakra(&out.schedule, (None, &inputs), a.output.out.as_deref(), a.chakra.prefix(), a.msccl.rank)?;
        return Ok(0);
    }
    let comparison = (a.compare && matches!(req.target, engine::Target::One(_)))
        .then(|| engine::compare(&req.topology, &out.schedule.collective, Some((req.algorithm.name(), &out.schedule))));
    let form = if a.format == Format::Explicit { Form::Explicit } else { Form::Compact };
    Ok(emit(&out, comparison.as_ref(), &a.output, form)?)
}

/// Writes a run's schedule JSON (with bounds, stats and the comparison) to `--out` or stdout,
/// or the human summary at a terminal.
fn emit(
    out: &engine::Output,
    comparison: Option<&engine::Comparison>,
    a: &OutputArgs,
    form: Form,
) -> Result<i32, String> {
    #[derive(serde::Serialize)]
    struct Out<'a> {
        #[serde(flatten)]
        schedule: crate::schedule::Written<'a>,
        lower_bound_ns: Option<f64>,
        lower_bounds: &'a Option<engine::LowerBounds>,
        stats: &'a engine::RunStats,
        #[serde(skip_serializing_if = "Option::is_none")]
        comparison: Option<&'a engine::Comparison>,
    }
    let doc = Out {
        schedule: out.schedule.written(form),
        lower_bound_ns: out.report.lower_bound_ns,
        lower_bounds: &out.report.lower_bounds,
        stats: &out.stats,
        comparison,
    };
    let human = a.summary || (std::io::stdout().is_terminal() && !a.json && !a.pretty);
    if let Some(path) = &a.out {
        write_json_file(path, &doc, a.pretty)?;
    }
    if human {
        let text = summary(out, comparison, a.out.as_deref());
        print!("{text}");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
    } else if a.out.is_none() {
        write_json_stdout(&doc, a.pretty)?;
    } else if let Some(path) = &a.out {
        // A baseline has no seed: only what the schedule has is said.
        let mut facts = vec![counted(out.schedule.transfers.len(), "transfer")];
        facts.extend(out.schedule.collective_time_ns.map(duration));
        facts.extend(out.schedule.seed.map(|s| format!("seed {s}")));
        eprintln!("ccsynth: wrote {} ({})", path.display(), facts.join(", "));
    }
    Ok(0)
}

fn regenerate_cmd(a: RegenerateArgs) -> Result<i32, CliError> {
    let previous = load_schedule(&a.schedule)?;
    engine::require_valid(&previous).map_err(|e| CliError::from(e).context(&a.schedule))?;
    let failures = parse_failures(&a.fail_link, &a.fail_npu, &a.degrade_link, a.directed)?;
    let (topo, collective) =
        engine::regeneration_target(&previous, &failures).map_err(|e| failure_flags(e, &failures))?;
    // As `synth` and `topology` say it (a degradation that changed nothing was silent here).
    note_degraded(&failures, &topo, &previous.topology);
    let spec = engine::RequestSpec {
        target: engine::Target::One(collective),
        algorithm: a.algo.parse().map_err(flags)?,
        options: engine::Options {
            seed: Some(a.seed),
            seeds: a.seeds,
            threads: a.threads,
            time_limit_s: a.time_limit,
            effort: Some(a.effort),
            ..engine::Options::default()
        },
    };
    let req = engine::Request::new(topo, spec, &engine::Limits::default()).map_err(flags)?;
    input::note_unread_flags(&input::regenerate_flags(&a), &req.algorithm);
    let out = with_progress("ccsynth regenerate", |ctl| engine::regenerate(previous, &req, ctl))?;
    Ok(emit(&out, None, &a.output, Form::Compact)?)
}

/// Runs `f` with a progress bar on stderr when it is a terminal (drawn only after a second, so
/// quick runs stay quiet), fed by the engine's progress reports.
fn with_progress<T>(what: &str, f: impl FnOnce(engine::Control) -> T) -> T {
    if !std::io::stderr().is_terminal() {
        return f(engine::Control::none());
    }
    // Hidden until the first report after a second: drawn at once, a quick run flashed an
    // empty bar and cleared it.
    let bar = indicatif::ProgressBar::with_draw_target(Some(1000), indicatif::ProgressDrawTarget::hidden());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{elapsed}] {wide_bar} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_prefix(what.to_string());
    let started = std::time::Instant::now();
    let report = |fraction: f64, message: &str| {
        if started.elapsed() >= std::time::Duration::from_secs(1) {
            if bar.is_hidden() {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            bar.set_position((fraction * 1000.0) as u64);
            bar.set_message(message.to_string());
        }
    };
    let out = f(engine::Control { cancelled: &|| false, progress: &report, since: None });
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
        // With --algo, that baseline's entry alone (the flag was ignored: all were listed).
        let mut all = engine::registry::baselines();
        if let Some(name) = &a.algo {
            let known = matches!(engine::Algorithm::parse(name), Some(engine::Algorithm::Baseline(_)));
            if !known {
                return Err(format!("--algo: {name:?} is not a baseline; --list alone lists them").into());
            }
            let variant = !all.iter().any(|b| b.name == name.as_str());
            all.retain(|b| if variant { b.name.contains("<R>") } else { b.name == name.as_str() });
        }
        print_json(&all)?;
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
        degrade_link: Vec::new(),
        directed: false,
    };
    let (topo, collective) = load_target(&target)?;
    let name = a.algo.as_deref().unwrap_or_default();
    if engine::Algorithm::parse(name).is_some_and(|alg| alg.is_synthesizer()) {
        return Err(format!("--algo {name:?} is a synthesizer; run it with `ccsynth synth --algo {name}`").into());
    }
    engine::registry::check_baseline("--algo", name, collective.kind).map_err(flags)?;
    let spec = engine::RequestSpec { algorithm: name.parse().map_err(flags)?, ..engine::RequestSpec::new(collective) };
    let req = engine::Request::new(topo, spec, &engine::Limits::default()).map_err(flags)?;
    let out = engine::run(&req, engine::Control::none())?;
    let o = &a.output;
    if let Some(path) = &o.out {
        write_json_file(path, &out.schedule, o.pretty)?;
    }
    if o.summary || (std::io::stdout().is_terminal() && !o.json && !o.pretty) {
        print!("{}", summary_of_baseline(&out, o.out.as_deref()));
    } else if o.out.is_none() {
        write_json_stdout(&out.schedule, o.pretty)?;
    }
    Ok(0)
}

/// Bytes buffered before a write to a file: a schedule's JSON runs to gigabytes (bucket's
/// all-reduce on torus:64x64 at 1 GiB, 2.6 GB); in a default `BufWriter`'s 8 KiB pieces its
/// `--out` took 1.35 times as long (docs/BENCHMARKS.md, "The timeline's floor").
const FILE_BUFFER_BYTES: usize = 1 << 20;

/// The same to a pipe: a default `BufWriter`'s (see `write_json_stdout`).
const PIPE_BUFFER_BYTES: usize = 8 << 10;

fn write_json_file(path: &std::path::Path, v: &impl serde::Serialize, pretty: bool) -> Result<(), String> {
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    write_json(std::io::BufWriter::with_capacity(FILE_BUFFER_BYTES, f), v, pretty)
}

/// To stdout: where it is a file (`> schedule.json`) in `FILE_BUFFER_BYTES` pieces, else in a
/// default `BufWriter`'s: through a pipe larger ones were no faster (the same schedule in 64 KiB
/// pieces 1.04-1.09 times as long, in 1 MiB 1.2 times: a write beyond what the pipe holds waits
/// for the reader).
fn write_json_stdout(v: &impl serde::Serialize, pretty: bool) -> Result<(), String> {
    use std::os::fd::AsFd;
    let out = std::io::stdout().lock();
    let to_file =
        out.as_fd().try_clone_to_owned().map(std::fs::File::from).and_then(|f| f.metadata()).is_ok_and(|m| m.is_file());
    let capacity = if to_file { FILE_BUFFER_BYTES } else { PIPE_BUFFER_BYTES };
    write_json(std::io::BufWriter::with_capacity(capacity, out), v, pretty)
}

fn write_json<W: Write, T: serde::Serialize>(mut w: W, v: &T, pretty: bool) -> Result<(), String> {
    let written = if pretty { serde_json::to_writer_pretty(&mut w, v) } else { serde_json::to_writer(&mut w, v) };
    // As an I/O error a write's keeps its kind, so a broken pipe is told apart.
    quiet_on_broken_pipe(written.map_err(std::io::Error::from).and_then(|_| writeln!(w)).and_then(|_| w.flush()))
}

/// A write to a reader that went away (`ccsynth … | head -c 10`) is not an error: the reader
/// has what it wanted. Any other failure is.
fn quiet_on_broken_pipe(r: std::io::Result<()>) -> Result<(), String> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| e.to_string()),
    }
}

/// A hint for a size written as two words (`--size 1 GiB`, which the shell splits and the
/// parser then reads `GiB` as a stray argument): the flag, the number and the unit, and how to
/// write them as one word.
fn size_hint(args: &[String]) -> Option<String> {
    const FLAGS: [&str; 3] = ["--size", "--min-bytes", "--max-bytes"];
    args.windows(3).find_map(|w| {
        let (flag, num, unit) = (w[0].as_str(), w[1].as_str(), w[2].as_str());
        let joined = format!("{num}{unit}");
        (FLAGS.contains(&flag) && num.parse::<f64>().is_ok() && crate::units::parse_size(&joined).is_ok())
            .then(|| format!("hint: a size is one word: {flag} {joined}"))
    })
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<(), String> {
    write_json_stdout(v, true)
}
