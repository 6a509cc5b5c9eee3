//! One front door: the same request through the CLI, the HTTP API and the bench gives the same
//! schedule, or an error of the same kind naming the same field of the request.

use super::cli::ccsynth;
use super::harness::{Db, call, start};
use ccsynth::collective::{CollectiveKind, CollectiveSpec};
use ccsynth::engine::{self, Options, RequestSpec};
use ccsynth::engine::{Effort, SwitchModel};
use serde_json::{Value, json};

/// One request, spelled for each door.
struct Case {
    name: &'static str,
    topology: &'static str,
    kind: CollectiveKind,
    size_bytes: u64,
    chunks_per_npu: u32,
    root: Option<usize>,
    algorithm: &'static str,
    options: Options,
    /// `None`: a schedule; `Some(path)`: an input error naming this field.
    error_at: Option<&'static str>,
}

impl Case {
    fn collective(&self) -> CollectiveSpec {
        let mut c = CollectiveSpec::new(self.kind, self.size_bytes).with_chunks_per_npu(self.chunks_per_npu);
        c.root = self.root;
        c
    }

    fn cli_args(&self) -> Vec<String> {
        let synthesizer = matches!(self.algorithm, "greedy" | "ilp" | "auto");
        let mut a: Vec<String> = vec![if synthesizer { "synth" } else { "baseline" }.into()];
        // `--flag=value`: a negative value is not taken for a flag.
        let mut flag = |f: &str, v: String| a.push(format!("--{f}={v}"));
        flag("topology", self.topology.into());
        flag("collective", self.kind.name().into());
        flag("size", self.size_bytes.to_string());
        flag("algo", self.algorithm.into());
        if let Some(r) = self.root {
            flag("root", r.to_string());
        }
        // Every field of the engine's options, by name: a field added to `Options` does not
        // compile here until the CLI's flag for it is named (or its absence explained).
        let Options {
            seed,
            seeds,
            threads,
            chunks_per_npu,
            time_limit_s,
            solve_time_limit_s,
            switch_model,
            discretization,
            ignore_congestion,
            window,
            effort,
            // The CLI's own (`--dump-lp` writes the files); never in the API's JSON.
            keep_lp: _,
        } = &self.options;
        // `options.chunks_per_npu` overrides the collective's; the CLI has one flag for both.
        flag("chunks-per-npu", chunks_per_npu.unwrap_or(self.chunks_per_npu).to_string());
        let mut some = |f: &str, v: Option<String>| {
            if let Some(v) = v {
                flag(f, v);
            }
        };
        some("seed", seed.map(|x| x.to_string()));
        some("seeds", seeds.map(|x| x.to_string()));
        some("threads", threads.map(|x| x.to_string()));
        some("time-limit", time_limit_s.map(|x| x.to_string()));
        some("solve-time-limit", solve_time_limit_s.map(|x| x.to_string()));
        some("switch-model", switch_model.map(|m| m.name()));
        some("discretization", discretization.map(|x| x.to_string()));
        some("window", window.map(|x| x.to_string()));
        some("effort", effort.map(|e| e.name().to_string()));
        if *ignore_congestion == Some(true) {
            a.push("--ignore-congestion".into());
        }
        a
    }

    fn api_body(&self) -> Value {
        let mut options = serde_json::to_value(&self.options).unwrap();
        options.as_object_mut().unwrap().retain(|_, v| !v.is_null());
        json!({
            "spec": self.topology,
            "collective": self.collective(),
            "algorithm": self.algorithm,
            "options": options,
            "wait_ms": 60000,
        })
    }

    /// The request as a library caller writes it; an unknown algorithm is refused as it is
    /// parsed, as the other doors refuse it.
    fn request(&self) -> Result<RequestSpec, engine::Error> {
        Ok(RequestSpec {
            algorithm: self.algorithm.parse().map_err(engine::Error::Input)?,
            options: self.options.clone(),
            ..RequestSpec::new(self.collective())
        })
    }
}

fn cases() -> Vec<Case> {
    let base = |name, topology, kind, algorithm| Case {
        name,
        topology,
        kind,
        size_bytes: 1 << 16,
        chunks_per_npu: 1,
        root: None,
        algorithm,
        options: Options::default(),
        error_at: None,
    };
    let mut v = Vec::new();
    let mut c = base("greedy all-gather, seed 3", "ring:5", CollectiveKind::AllGather, "greedy");
    c.options.seed = Some(3);
    v.push(c);
    let mut c = base("greedy all-reduce, 2 seeds", "torus:3x3", CollectiveKind::AllReduce, "greedy");
    c.options.seeds = Some(2);
    c.chunks_per_npu = 2;
    v.push(c);
    let mut c = base("unwound switch broadcast", "switch:4", CollectiveKind::Broadcast, "greedy");
    c.root = Some(2);
    c.options.switch_model = Some(SwitchModel::Unwind { degree: 1 });
    v.push(c);
    v.push(base("a baseline", "torus:4x4", CollectiveKind::AllReduce, "swing-bandwidth"));
    let mut c = base("ilp", "ring:4", CollectiveKind::AllGather, "ilp");
    c.options.time_limit_s = Some(30.0);
    v.push(c);
    // The ILP's own options, which the API's copy of the options lacked (solve_time_limit_s).
    let mut c = base("ilp with its options", "ring:4", CollectiveKind::AllReduce, "ilp");
    c.options.time_limit_s = Some(30.0);
    c.options.solve_time_limit_s = Some(20.0);
    c.options.ignore_congestion = Some(true);
    c.options.window = Some(4);
    v.push(c);
    let mut c = base("greedy on a finer grid, chunks from the options", "ring:5", CollectiveKind::AllGather, "greedy");
    c.options.discretization = Some(100.0);
    c.options.chunks_per_npu = Some(2);
    v.push(c);
    let mut c = base("no time per solve", "ring:4", CollectiveKind::AllGather, "ilp");
    c.options.solve_time_limit_s = Some(-1.0);
    c.error_at = Some("options.solve_time_limit_s");
    v.push(c);
    let mut c = base("no window", "ring:4", CollectiveKind::AllGather, "ilp");
    c.options.window = Some(0);
    c.error_at = Some("options.window");
    v.push(c);
    let mut c = base("no timestep", "ring:4", CollectiveKind::AllGather, "greedy");
    c.options.discretization = Some(-5.0);
    c.error_at = Some("options.discretization");
    v.push(c);
    // `options.threads`, which the API refused as an unknown field while its documents
    // advertised it.
    let mut c = base("greedy all-reduce on 2 threads", "torus:3x3", CollectiveKind::AllReduce, "greedy");
    c.options.threads = Some(2);
    c.options.seeds = Some(3);
    v.push(c);
    let mut c = base("greedy all-reduce, thorough", "torus:3x3", CollectiveKind::AllReduce, "greedy");
    c.options.effort = Some(Effort::Thorough);
    v.push(c);
    let mut c = base("auto on 1 thread", "ring:6", CollectiveKind::AllReduce, "auto");
    c.options.threads = Some(1);
    v.push(c);
    let mut c = base("no threads", "ring:4", CollectiveKind::AllGather, "greedy");
    c.options.threads = Some(0);
    c.error_at = Some("options.threads");
    v.push(c);

    let mut c = base("no seeds", "ring:4", CollectiveKind::AllGather, "greedy");
    c.options.seeds = Some(0);
    c.error_at = Some("options.seeds");
    v.push(c);
    let mut c = base("unknown algorithm", "ring:4", CollectiveKind::AllGather, "fastest");
    c.error_at = Some("algorithm");
    v.push(c);
    let mut c = base("a root where none is taken", "ring:4", CollectiveKind::AllGather, "greedy");
    c.root = Some(1);
    c.error_at = Some("collective.root");
    v.push(c);
    let mut c = base("a baseline that does not serve the kind", "ring:4", CollectiveKind::Scatter, "swing-bandwidth");
    c.root = Some(0);
    c.error_at = Some("algorithm");
    v.push(c);
    let mut c = base("no time", "ring:4", CollectiveKind::AllGather, "ilp");
    c.options.time_limit_s = Some(0.0);
    c.error_at = Some("options.time_limit_s");
    v.push(c);
    // The 130-byte request that used to crash the server: 2^25 chunks at 4096 NPUs.
    let mut c = base("broadcast of 2^25 chunks on 4096 NPUs", "ring:4096", CollectiveKind::Broadcast, "greedy");
    c.root = Some(0);
    c.chunks_per_npu = 1 << 25;
    c.error_at = Some("collective.chunks_per_npu");
    v.push(c);
    v
}

/// The transfers and time of a schedule document, the parts that must agree across doors.
fn essence(doc: &Value) -> (Value, Value, Value) {
    (doc["algorithm"].clone(), doc["transfers"].clone(), doc["collective_time_ns"].clone())
}

#[test]
fn cli_api_and_bench_agree_on_every_request() {
    let server = start(Db::Sqlite);
    for case in cases() {
        let name = case.name;
        // CLI.
        let args = case.cli_args();
        let o = ccsynth(&args.iter().map(String::as_str).collect::<Vec<_>>(), None);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        // Bench.
        let bench = case.request().and_then(|r| ccsynth::bench::run_request(case.topology, r));
        // API.
        let (code, body) = call(&server, "POST", "/v1/syntheses", Some(case.api_body()));
        match case.error_at {
            Some(field) => {
                assert_eq!(o.status.code(), Some(2), "{name}: CLI exit; stderr {stderr}");
                // The CLI names the flag that set the field; the API and the bench its path.
                let flag = match field {
                    "algorithm" => "--algo",
                    "collective.root" => "--root",
                    "collective.chunks_per_npu" => "--chunks-per-npu",
                    "options.seeds" => "--seeds",
                    "options.switch_model" => "--switch-model",
                    "options.time_limit_s" => "--time-limit",
                    "options.threads" => "--threads",
                    "options.solve_time_limit_s" => "--solve-time-limit",
                    "options.window" => "--window",
                    "options.discretization" => "--discretization",
                    other => panic!("{name}: which flag sets {other}?"),
                };
                assert!(stderr.contains(&format!("{flag}: ")), "{name}: the CLI names {flag}: {stderr}");
                match bench {
                    Err(engine::Error::Input(e)) => {
                        assert_eq!(e.errors[0].path, field, "{name}: bench: {e}");
                    }
                    Err(e) => panic!("{name}: bench gave another kind of error: {e}"),
                    Ok(_) => panic!("{name}: bench accepted it"),
                }
                assert_eq!(code, 422, "{name}: API status; {body}");
                assert_eq!(body["errors"][0]["path"], field, "{name}: API: {body}");
            }
            None => {
                assert_eq!(o.status.code(), Some(0), "{name}: CLI: {stderr}");
                let cli: Value = serde_json::from_slice(&o.stdout).unwrap();
                let out = bench.unwrap_or_else(|e| panic!("{name}: bench: {e}"));
                let bench = serde_json::to_value(&out.schedule).unwrap();
                assert_eq!(code, 201, "{name}: API: {body}");
                let url = body["schedule_url"].as_str().unwrap_or_else(|| panic!("{name}: {body}"));
                let (code, api) = call(&server, "GET", url, None);
                assert_eq!(code, 200);
                assert_eq!(essence(&cli), essence(&bench), "{name}: CLI and bench differ");
                assert_eq!(essence(&api), essence(&bench), "{name}: API and bench differ");
                assert!(bench["transfers"].as_array().is_some_and(|t| !t.is_empty()), "{name}: nothing moved");
            }
        }
    }
}

/// A switch model that names none: the type cannot hold it, so each door refuses it as it
/// reads it, naming the field (the API's JSON path, the CLI's flag).
#[test]
fn a_switch_model_that_names_none_is_refused_at_every_door() {
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "switch:4",
            "--collective",
            "all_gather",
            "--size",
            "4KiB",
            "--switch-model",
            "unwind:zero",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("--switch-model") && stderr.contains("expected native, unwind:D"), "{stderr}");
    let e = serde_json::from_value::<Options>(json!({"switch_model": "unwind:zero"})).unwrap_err();
    assert!(e.to_string().contains("expected native, unwind:D"), "{e}");
    let server = start(Db::Sqlite);
    let body = json!({"spec": "switch:4", "collective": {"kind": "all_gather", "size_bytes": 4096},
        "algorithm": "greedy", "options": {"switch_model": "unwind:zero"}});
    let (code, v) = call(&server, "POST", "/v1/syntheses", Some(body));
    assert_eq!(code, 422, "{v}");
    assert_eq!(v["errors"][0]["path"], "options.switch_model", "{v}");
    // `keep_lp` is the CLI's alone: the API does not know the field.
    let body = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096},
        "algorithm": "ilp", "options": {"keep_lp": true}});
    let (code, v) = call(&server, "POST", "/v1/syntheses", Some(body));
    assert_eq!(code, 422, "{v}");
    assert!(v["errors"][0]["message"].as_str().unwrap().contains("unknown field `keep_lp`"), "{v}");
}

/// An effort that names none is refused at every door, naming the field; a thorough request is
/// run, its effort echoed (`stats.effort`) and kept apart from a standard one in the API's
/// result cache; an interactive one gets the interactive jobs' budget.
#[test]
fn the_effort_is_read_at_every_door() {
    let args = ["synth", "--topology", "torus:3x3", "--collective", "all_reduce", "--size", "64KiB", "--effort"];
    let o = ccsynth(&[&args[..], &["quick"]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("--effort") && stderr.contains("expected standard or thorough"), "{stderr}");
    let o = ccsynth(&[&args[..], &["thorough", "--algo", "greedy", "--json"]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["stats"]["effort"], "thorough", "{}", doc["stats"]);
    let server = start(Db::Sqlite);
    let body = |effort: Value| {
        json!({"spec": "torus:3x3", "collective": {"kind": "all_reduce", "size_bytes": 65536},
            "algorithm": "greedy", "options": {"effort": effort}, "wait_ms": 60000})
    };
    let (code, v) = call(&server, "POST", "/v1/syntheses", Some(body(json!("quick"))));
    assert_eq!(code, 422, "{v}");
    assert_eq!(v["errors"][0]["path"], "options.effort", "{v}");
    let mut ids = Vec::new();
    for effort in ["standard", "thorough"] {
        let (code, v) = call(&server, "POST", "/v1/syntheses", Some(body(json!(effort))));
        assert_eq!(code, 201, "{v}");
        assert_eq!(v["summary"]["stats"]["effort"], effort, "{v}");
        assert_eq!(v["cached"], false, "a thorough request is not the standard one's cached result: {v}");
        ids.push(v["schedule_id"].clone());
    }
    assert_ne!(ids[0], ids[1]);
    // Thorough leaves the budget at 600 s where the request does not give one; an interactive
    // job may run at most 60 s, which then caps that default instead of refusing it.
    let mut quick = body(json!("thorough"));
    quick["priority"] = json!("interactive");
    quick["options"]["seed"] = json!(1);
    let (code, v) = call(&server, "POST", "/v1/syntheses", Some(quick.clone()));
    assert_eq!(code, 201, "{v}");
    quick["options"]["time_limit_s"] = json!(600);
    let (code, v) = call(&server, "POST", "/v1/syntheses", Some(quick));
    assert_eq!(code, 422, "{v}");
    assert_eq!(v["errors"][0]["path"], "options.time_limit_s", "{v}");
}
