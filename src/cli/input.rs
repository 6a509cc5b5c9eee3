//! What the CLI reads: topologies (a spec or a file), schedules, collectives from flags or a
//! `--tenants` file, failures; and how it words the engine's input errors for a terminal (by
//! flag, not by the API's JSON path).

use super::CollectiveArgs;
use crate::engine;
use crate::error::InputError;
use crate::schedule::Schedule;
use crate::schedule::looks::{not_a_schedule, not_a_topology};
use crate::topology::{Failures, Topology};
use std::io::Read;

/// A whole input: a file, or stdin for `-`.
pub(super) fn read_input(arg: &str) -> Result<String, String> {
    if arg == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| format!("stdin: {e}"))?;
        return Ok(text);
    }
    std::fs::read_to_string(arg).map_err(|e| format!("{arg}: {e}"))
}

/// The failures `--fail-link`, `--fail-npu`, `--degrade-link` and `--directed` name.
pub(super) fn parse_failures(
    links: &[String],
    npus: &[usize],
    degraded: &[String],
    directed: bool,
) -> Result<Failures, String> {
    // It says which way the links fail or slow: with none named it would say nothing.
    if directed && links.is_empty() && degraded.is_empty() {
        return Err("--directed: no --fail-link or --degrade-link for it to apply to".into());
    }
    let mut f = Failures { npus: npus.to_vec(), directed, ..Failures::default() };
    for (i, s) in links.iter().enumerate() {
        f.links.push(link_ends(s).map_err(|why| format!("--fail-link #{}: {why}", i + 1))?);
    }
    for (i, s) in degraded.iter().enumerate() {
        f.degraded_links.push(degraded_link(s).map_err(|why| format!("--degrade-link #{}: {s:?}: {why}", i + 1))?);
    }
    Ok(f)
}

/// `U-V` as two node ids; an id of digits past the largest is too large (it read "not of
/// the form U-V", where `--fail-npu` said "number too large").
fn link_ends(s: &str) -> Result<[usize; 2], String> {
    let form = || format!("{s:?} is not of the form U-V (two node ids)");
    let (a, b) = s.split_once('-').ok_or_else(form)?;
    let id = |t: &str| {
        let t = t.trim();
        t.parse::<usize>().map_err(|_| match !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            true => format!("{s:?}: node id {t} is too large (at most {})", engine::Limits::default().max_npus - 1),
            false => form(),
        })
    };
    Ok([id(a)?, id(b)?])
}

/// `U-V@bw=X`, `U-V@lat=Y` or `U-V@bw=X;lat=Y` (`,` also separates): a link's new bandwidth
/// (GB/s) and latency (ns). Whether they are a slowdown is the topology's to say.
fn degraded_link(s: &str) -> Result<crate::topology::DegradedLink, String> {
    const FORM: &str = "expected U-V@bw=GBPS, U-V@lat=NS or U-V@bw=GBPS;lat=NS";
    let (ends, params) = s.split_once('@').ok_or_else(|| format!("no @ before the link's parameters: {FORM}"))?;
    let link = link_ends(ends)?;
    let mut d = crate::topology::DegradedLink { link, ..Default::default() };
    // A trailing separator is taken, as a generator's `@bw=5;` is (it was refused here alone).
    let params = params.trim_end().strip_suffix([';', ',']).unwrap_or(params);
    for param in params.split([';', ',']).map(str::trim) {
        let (key, value) = param.split_once('=').ok_or_else(|| format!("{param:?} is not KEY=VALUE: {FORM}"))?;
        let number = value.trim().parse::<f64>().map_err(|_| format!("{key}={value:?} is not a number: {FORM}"))?;
        // `1e400` parses as infinity, which the topology's check then echoed as `inf`.
        if number.is_infinite() {
            let what = if number > 0.0 { "too large" } else { "negative" };
            return Err(format!("{key}={}: {what}: expected a finite number", value.trim()));
        }
        let slot = match key.trim() {
            "bw" => &mut d.bandwidth_gb_per_s,
            "lat" => &mut d.latency_ns,
            other => return Err(format!("{other:?} is not bw or lat: {FORM}")),
        };
        if slot.replace(number).is_some() {
            return Err(format!("{key} is given twice"));
        }
    }
    Ok(d)
}

pub(super) fn load_topology_with_failures(
    a: &CollectiveArgs,
    tenants: Option<&std::path::Path>,
) -> Result<Topology, String> {
    // A spec's mistakes are the flag's ("spec: \"rng:8\": unknown generator" named no flag).
    let topo = load_topology(&a.topology).map_err(|e| match e.strip_prefix("spec: ") {
        Some(rest) => format!("--topology: {rest}"),
        None => e,
    })?;
    let f = parse_failures(&a.fail_link, &a.fail_npu, &a.degrade_link, a.directed)?;
    if f.is_empty() {
        return Ok(topo);
    }
    // Refused where the failures cut a collective apart where it needs to reach (each tenant's
    // on its own); a collective the flags do not name yet is refused later, by its own check.
    let runs = match load_collectives(a, tenants) {
        Ok(engine::Target::One(c)) => vec![c],
        Ok(engine::Target::Tenants(list)) => list,
        Err(_) => Vec::new(),
    };
    let after = engine::degraded(&topo, &runs, &f).map_err(|e| failure_flags(e.within("failures"), &f))?;
    super::render::note_failed(&f);
    super::render::note_degraded(&f, &after, &topo);
    Ok(after)
}

/// A failure's error worded by the flag that named it: `failures.links[1]` is the second
/// `--fail-link` (`--fail-link 0-2`), `failures.npus[0]` the first `--fail-npu`,
/// `failures.degraded_links[0].bandwidth_gb_per_s` the first `--degrade-link`; what the
/// failures do together (cut the group apart) is named by `--fail-link` when any were given.
pub(super) fn failure_flags(mut e: InputError, f: &Failures) -> String {
    let index = |rest: &str| rest.strip_prefix('[')?.split_once(']')?.0.parse::<usize>().ok();
    for err in &mut e.errors {
        let Some(rest) = err.path.strip_prefix("failures") else { continue };
        err.path = if let Some(i) = rest.strip_prefix(".links").and_then(index).filter(|&i| i < f.links.len()) {
            format!("--fail-link {}-{}", f.links[i][0], f.links[i][1])
        } else if let Some(d) =
            rest.strip_prefix(".degraded_links").and_then(index).and_then(|i| f.degraded_links.get(i))
        {
            let params: Vec<String> = [("bw", d.bandwidth_gb_per_s), ("lat", d.latency_ns)]
                .into_iter()
                .filter_map(|(k, v)| Some(format!("{k}={}", crate::units::short(v?))))
                .collect();
            format!("--degrade-link {}-{}@{}", d.link[0], d.link[1], params.join(";"))
        } else if let Some(i) = rest.strip_prefix(".npus").and_then(index).filter(|&i| i < f.npus.len()) {
            format!("--fail-npu {}", f.npus[i])
        } else if rest == ".npus" || f.links.is_empty() {
            "--fail-npu".to_string()
        } else {
            "--fail-link".to_string()
        };
    }
    e.to_string()
}

/// The topology and collective a synthesis or baseline command names.
pub(super) fn load_target(a: &CollectiveArgs) -> Result<(Topology, crate::collective::CollectiveSpec), String> {
    let topo = load_topology_with_failures(a, None)?;
    Ok((topo, collective_spec(a)?))
}

/// The collective `--collective`, `--size`, `--chunks-per-npu`, `--root` and `--group` name.
fn collective_spec(a: &CollectiveArgs) -> Result<crate::collective::CollectiveSpec, String> {
    let kind = a.collective.ok_or("--collective is required (or, for synth, --tenants FILE)")?.kind();
    let size =
        crate::units::parse_size(a.size.as_deref().ok_or("--size is required")?).map_err(|e| format!("--size: {e}"))?;
    let mut spec = crate::collective::CollectiveSpec::new(kind, size);
    spec.chunks_per_npu = a.chunks_per_npu.0;
    spec.root = a.root;
    spec.group = a.group.clone();
    Ok(spec)
}

/// The collective the flags name, or the list a `--tenants` file holds.
pub(super) fn load_collectives(
    a: &CollectiveArgs,
    tenants: Option<&std::path::Path>,
) -> Result<engine::Target, String> {
    let Some(path) = tenants else {
        return collective_spec(a).map(engine::Target::One);
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    let list: Vec<crate::collective::CollectiveSpec> = serde_path_to_error::deserialize(&mut *de)
        .map_err(|e| format!("{}: {}", path.display(), InputError::from_json_text(e, &text)))?;
    InputError::json_end(de).map_err(|e| format!("{}: {e}", path.display()))?;
    if list.is_empty() {
        return Err(format!("{}: expected a non-empty list", path.display()));
    }
    Ok(engine::Target::Tenants(list))
}

/// A topology from a generator spec or a JSON file.
pub fn load_topology(arg: &str) -> Result<Topology, String> {
    let path = std::path::Path::new(arg);
    // Built as the API builds its `spec` and `topology` (`engine::TopologySource`), within the
    // library's limits.
    let limits = engine::Limits::default();
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{arg}: {e}"))?;
        let named = |e: InputError| match not_a_topology(&text) {
            Some(what) => format!("{arg}: {what}"),
            None => format!("{arg}: {e}"),
        };
        let source = engine::TopologySource::parse(&text).map_err(named)?;
        return source.build(&limits).map_err(named);
    }
    // A spec holds no `/` and ends in no `.json`: such a name is a missing file, also with a
    // `:` in it (`runs/10:00/topo.json` read as an unknown generator).
    let looks_like_a_path = !arg.trim_start().starts_with('{') && (arg.contains('/') || arg.ends_with(".json"));
    if !looks_like_a_path && (arg.contains(':') || arg.trim_start().starts_with('{')) {
        let source = engine::TopologySource::parse(arg).map_err(|e: InputError| e.to_string())?;
        return source.build(&limits).map_err(|e| e.to_string());
    }
    // A name that looks like a file is a missing file, not a malformed spec.
    if looks_like_a_path || arg.contains('.') {
        return Err(format!("{arg}: no such file (a topology is a JSON file or a spec such as torus:4x4)"));
    }
    Err(format!("{arg:?} is neither a topology file nor a spec such as torus:4x4"))
}

pub(super) fn load_schedule(arg: &str) -> Result<Schedule, String> {
    let text = read_input(arg)?;
    let named = if arg == "-" { "standard input" } else { arg };
    Schedule::from_json(&text).map_err(|e| match not_a_schedule(&text) {
        Some(what) => format!("{named}: {what}"),
        None => format!("{named}: {e}"),
    })
}

/// The flag a request field comes from at the CLI (`options.time_limit_s` is `--time-limit`).
const FLAGS: &[(&str, &str)] = &[
    ("algorithm", "--algo"),
    ("collective.kind", "--collective"),
    ("collective.size_bytes", "--size"),
    ("collective.root", "--root"),
    ("collective.group", "--group"),
    ("collective.chunks_per_npu", "--chunks-per-npu"),
    ("options.chunks_per_npu", "--chunks-per-npu"),
    ("options.seeds", "--seeds"),
    ("options.seed", "--seed"),
    ("prefix", "--prefix"),
    ("options.threads", "--threads"),
    ("options.time_limit_s", "--time-limit"),
    ("options.solve_time_limit_s", "--solve-time-limit"),
    ("options.switch_model", "--switch-model"),
    ("options.discretization", "--discretization"),
    ("options.window", "--window"),
    ("options.ignore_congestion", "--ignore-congestion"),
    ("options.effort", "--effort"),
    ("rank", "--rank"),
    ("topology", "--topology"),
];

/// An engine input error worded for a terminal: each field by the flag that set it (the rest,
/// a `--tenants` file's or a topology's, by their path).
pub(super) fn flags(mut e: InputError) -> String {
    for f in &mut e.errors {
        let found = FLAGS.iter().find(|(path, _)| {
            f.path.strip_prefix(path).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        });
        if let Some((path, flag)) = found {
            f.path = format!("{flag}{}", &f.path[path.len()..]);
        }
    }
    e.to_string()
}

/// A search flag: whether it was given, the option it sets, its name.
pub(super) type Given = (bool, engine::registry::OptionName, &'static str);

/// The search flags `synth` and `regenerate` share, in the note's order: seed, seeds, threads
/// and time limit first, effort last (`between`: `synth`'s own flags).
fn shared_flags(
    (seed, seeds, threads): (u64, Option<usize>, Option<usize>),
    (time_limit, effort): (Option<f64>, engine::Effort),
    between: impl IntoIterator<Item = Given>,
) -> Vec<Given> {
    use engine::registry::OptionName as O;
    let mut given = vec![
        (seed != 0, O::Seed, "--seed"),
        (seeds.is_some(), O::Seeds, "--seeds"),
        (threads.is_some(), O::Threads, "--threads"),
        (time_limit.is_some(), O::TimeLimitS, "--time-limit"),
    ];
    given.extend(between);
    given.push((effort != engine::Effort::default(), O::Effort, "--effort"));
    given
}

/// `synth`'s search flags.
pub(super) fn synth_flags(a: &super::SynthArgs) -> Vec<Given> {
    use engine::registry::OptionName as O;
    let own = [
        (a.solve_time_limit.is_some(), O::SolveTimeLimitS, "--solve-time-limit"),
        (a.switch_model != engine::SwitchModel::default(), O::SwitchModel, "--switch-model"),
        (a.discretization.is_some(), O::Discretization, "--discretization"),
        (a.ignore_congestion, O::IgnoreCongestion, "--ignore-congestion"),
        (a.window.is_some(), O::Window, "--window"),
    ];
    shared_flags((a.seed, a.seeds, a.threads), (a.time_limit, a.effort), own)
}

/// `regenerate`'s search flags (its fresh run's).
pub(super) fn regenerate_flags(a: &super::RegenerateArgs) -> Vec<Given> {
    shared_flags((a.seed, a.seeds, a.threads), (a.time_limit, a.effort), [])
}

/// Says which of the search's flags `given` the algorithm does not read (`--window 3` with
/// `--algo ring` was ignored without a word). A note, not a refusal: scripts that pass one set
/// of flags to every algorithm keep working, as requests over HTTP do.
pub(super) fn note_unread_flags(given: &[Given], algorithm: &engine::Algorithm) {
    let set: Vec<_> = given.iter().filter(|g| g.0).map(|g| g.1).collect();
    let unread = algorithm.unread(&set);
    if !unread.is_empty() {
        let names: Vec<&str> = given.iter().filter(|g| g.0 && unread.contains(&g.1)).map(|g| g.2).collect();
        eprintln!("ccsynth: note: --algo {} does not read {}: ignored", algorithm.name(), names.join(", "));
    }
}
