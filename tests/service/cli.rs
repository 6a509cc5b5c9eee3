//! The CLI as scripts use it: verbs, flags, JSON on stdout, exit codes 0/1/2.

use std::io::Write;
use std::process::{Command, Output, Stdio};

pub(crate) fn ccsynth(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccsynth"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        // A process that refuses its arguments may exit before it reads its input: the write
        // then fails with a broken pipe, and its exit code and output are what count.
        if let Err(e) = pipe.write_all(s.as_bytes()) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "writing ccsynth's stdin: {e}");
        }
    }
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ring-allreduce-torus4x4.json");

#[test]
fn topology_prints_canonical_json() {
    let o = ccsynth(&["topology", "ring:4@bw=50"], None);
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    assert_eq!(v["npus"], 4);
    assert_eq!(v["links"].as_array().unwrap().len(), 8);
    assert_eq!(v["links"][0], serde_json::json!({"src": 0, "dst": 1, "latency_ns": 500.0, "bandwidth_gb_per_s": 50.0}));
}

#[test]
fn topology_applies_failures_and_reports_connectivity() {
    let o = ccsynth(&["topology", "ring:4", "--fail-link", "0-1", "--fail-link", "2-3"], None);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json(&o)["links"].as_array().unwrap().len(), 4);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("NOT connected: it falls into 2 parts (NPUs [0, 3]; NPUs [1, 2])"), "{said}");
    let o = ccsynth(&["topology", "mesh:3x3", "--fail-npu", "4"], None);
    assert_eq!(json(&o)["failed_npus"], serde_json::json!([4]));
    let o = ccsynth(&["topology", "ring:4", "--fail-link", "0-2"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no link 0->2"));
    let o = ccsynth(&["topology", "ring:4", "--fail-link", "zero-one"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn topology_reads_files_and_names_bad_input() {
    let dir = std::env::temp_dir().join(format!("ccsynth-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.json");
    std::fs::write(&f, r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 2, "bidirectional": true}]}"#).unwrap();
    let o = ccsynth(&["topology", f.to_str().unwrap()], None);
    assert_eq!(json(&o)["links"].as_array().unwrap().len(), 2);
    std::fs::write(&f, r#"{"npus": 2, "links": [{"src": 0, "dst": 3}]}"#).unwrap();
    let o = ccsynth(&["topology", f.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("links[0].dst"));
    let o = ccsynth(&["topology", "no-such-file"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn validate_exit_codes() {
    let o = ccsynth(&["validate", EXAMPLE], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    assert_eq!(v["valid"], true);
    assert!((v["collective_time_ns"].as_f64().unwrap() - 49660.8).abs() < 1e-6);
    assert!(v["lower_bound_ns"].as_f64().unwrap() > 0.0);

    // From stdin, broken: drop the last transfer.
    let mut s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(EXAMPLE).unwrap()).unwrap();
    s["transfers"].as_array_mut().unwrap().pop();
    s.as_object_mut().unwrap().remove("collective_time_ns");
    let o = ccsynth(&["validate", "-"], Some(&s.to_string()));
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["valid"], false);
    assert_eq!(v["violations"][0]["kind"], "incomplete_reduction");

    // Unreadable input: exit 2 and a message naming the problem.
    let o = ccsynth(&["validate", "-"], Some("{\"format\": 3"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("format"));
    let o = ccsynth(&["validate", "/no/such/file.json"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/no/such/file.json"));
}

#[test]
fn simulate_prints_timing() {
    let o = ccsynth(&["simulate", EXAMPLE], None);
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    assert_eq!(v["rounds"], 30);
    assert!((v["collective_time_ns"].as_f64().unwrap() - 49660.8).abs() < 1e-6);
    assert!(v["links"].as_array().unwrap().len() > 16);
    assert!(v["lower_bounds"]["ingress_ns"].as_f64().is_some());
}

#[test]
fn synth_prints_a_validated_schedule_with_bounds_and_stats() {
    let o = ccsynth(
        &[
            "synth",
            "--algo",
            "greedy",
            "--topology",
            "ring:6",
            "--collective",
            "all_reduce",
            "--size",
            "6MiB",
            "--seed",
            "3",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    assert_eq!(v["format"], "ccsynth.schedule.v1");
    assert_eq!(v["algorithm"], "greedy");
    assert_eq!(v["seed"], 3);
    assert_eq!(v["stats"]["chosen_seed"], 3);
    assert!(v["stats"]["synthesis_ms"].as_f64().is_some());
    assert!(v["stats"]["ten_timesteps"].as_u64().unwrap() > 0);
    assert!(v["stats"]["discretization_ns"].as_f64().unwrap() > 0.0);
    assert!(v["collective_time_ns"].as_f64().unwrap() >= v["lower_bound_ns"].as_f64().unwrap());
    // The output is itself a valid schedule.
    let again = ccsynth(&["validate", "-"], Some(&String::from_utf8_lossy(&o.stdout)));
    assert_eq!(again.status.code(), Some(0));
    // Same seed, same bytes.
    let o2 = ccsynth(
        &[
            "synth",
            "--algo",
            "greedy",
            "--topology",
            "ring:6",
            "--collective",
            "all_reduce",
            "--size",
            "6MiB",
            "--seed",
            "3",
        ],
        None,
    );
    let strip = |v: &mut serde_json::Value| {
        v["stats"].as_object_mut().unwrap().retain(|k, _| !k.ends_with("_ms"));
    };
    let (mut a, mut b) = (v, json(&o2));
    strip(&mut a);
    strip(&mut b);
    assert_eq!(a, b);
}

#[test]
fn synth_compare_adds_the_baseline_table() {
    let o = ccsynth(
        &["synth", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB", "--compare"],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    let rows = v["comparison"]["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["algorithm"].as_str().unwrap()).collect();
    for want in ["auto", "ring", "swing-bandwidth", "bucket"] {
        assert!(names.contains(&want), "{names:?}");
    }
    // `auto` is the default and is never slower than a baseline: its row is the best.
    assert_eq!(rows[0]["best"], true);
    assert!(rows.iter().any(|r| r["algorithm"] == "auto" && r["best"] == true), "{rows:?}");
    assert!(v["comparison"]["speedup_over_best_baseline"].as_f64().unwrap() >= 1.0);
}

#[test]
fn synth_defaults_to_auto_and_says_which_candidate_won() {
    let o = ccsynth(&["synth", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "32"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let p = &v["stats"]["portfolio"];
    assert_eq!(p["chosen_by"], "auto");
    let candidates = p["candidates"].as_array().unwrap();
    let chosen: Vec<&serde_json::Value> = candidates.iter().filter(|c| c["chosen"] == true).collect();
    assert_eq!(chosen.len(), 1, "{p}");
    assert_eq!(v["algorithm"], chosen[0]["algorithm"]);
    assert_eq!(v["stats"]["algorithm"], chosen[0]["algorithm"]);
    assert_eq!(v["collective_time_ns"], chosen[0]["collective_time_ns"]);
    // At 32 B latency rules: a latency-optimal baseline beats the step-bound greedy here.
    let greedy = candidates.iter().find(|c| c["algorithm"] == "greedy").unwrap();
    assert!(greedy["collective_time_ns"].as_f64() >= v["collective_time_ns"].as_f64());
    // `--chunks-per-npu auto` is the default; the schedule records the k used.
    assert!(v["collective"]["chunks_per_npu"].as_u64().is_some());
    let bad = ccsynth(
        &["synth", "--topology", "ring:4", "--collective", "all_gather", "--size", "32", "--chunks-per-npu", "many"],
        None,
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("auto"));
}

#[test]
fn export_and_synth_write_msccl_xml() {
    // synth --format msccl-xml: the XML on stdout, nothing else.
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "ring:4",
            "--collective",
            "all_gather",
            "--size",
            "1MiB",
            "--algo",
            "ring",
            "--format",
            "msccl-xml",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let xml = String::from_utf8(o.stdout).unwrap();
    assert!(
        xml.starts_with(
            r#"<algo name="ccsynth-ring" proto="Simple" nchannels="1" nchunksperloop="4" ngpus="4" coll="allgather""#
        ),
        "{xml}"
    );
    assert_eq!(xml.matches("<gpu ").count(), 4);
    // export reads a schedule (file or stdin) and honours the MSCCL flags and --out.
    let schedule = ccsynth(
        &["baseline", "--algo", "ring", "--topology", "ring:4", "--collective", "all_reduce", "--size", "4096"],
        None,
    );
    let text = String::from_utf8(schedule.stdout).unwrap();
    let o = ccsynth(
        &[
            "export",
            "--format",
            "msccl-xml",
            "--msccl-proto",
            "LL128",
            "--msccl-target",
            "legacy",
            "--msccl-name",
            "ar4",
            "--max-bytes",
            "1MiB",
            "-",
        ],
        Some(&text),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let xml = String::from_utf8(o.stdout).unwrap();
    assert!(xml.starts_with(r#"<algo name="ar4" proto="LL128""#) && xml.contains(r#"maxBytes="1048576""#), "{xml}");
    let o = ccsynth(&["export", "--format", "msccl-xml", "--msccl-target", "rccl", "-"], Some(&text));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8(o.stdout).unwrap().contains(r#"coll="allreduce""#));
    let dir = std::env::temp_dir().join(format!("ccsynth-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("ar.xml");
    let o = ccsynth(&["export", "--format", "msccl-xml", "-", "--out", out.to_str().unwrap()], Some(&text));
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stdout.is_empty());
    assert!(std::fs::read_to_string(&out).unwrap().starts_with("<algo "));
    // --format json re-emits the validated schedule.
    let o = ccsynth(&["export", "--format", "json", "-"], Some(&text));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json(&o)["algorithm"], "ring");
    // Refusals exit 2 and say why: an invalid schedule, a collective MSCCL has no name for,
    // an unknown format.
    let mut broken: serde_json::Value = serde_json::from_str(&text).unwrap();
    broken["transfers"].as_array_mut().unwrap().pop();
    let o = ccsynth(&["export", "--format", "msccl-xml", "-"], Some(&broken.to_string()));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a valid schedule"));
    let scatter = ccsynth(
        &[
            "synth",
            "--topology",
            "ring:4",
            "--collective",
            "scatter",
            "--root",
            "0",
            "--size",
            "4096",
            "--algo",
            "greedy",
        ],
        None,
    );
    let o = ccsynth(&["export", "--format", "msccl-xml", "-"], Some(&String::from_utf8(scatter.stdout).unwrap()));
    // A valid schedule MSCCL cannot run is a refusal (3), not a mistake in the input (2).
    assert_eq!(o.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("MSCCL has no collective for scatter"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = ccsynth(&["export", "--format", "svg", "-"], Some(&text));
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn export_and_synth_write_mscclpp_plans() {
    let schedule = ccsynth(
        &["baseline", "--algo", "ring", "--topology", "ring:4", "--collective", "all_gather", "--size", "64KiB"],
        None,
    );
    let text = String::from_utf8(schedule.stdout).unwrap();
    let o = ccsynth(&["export", "--format", "mscclpp-json", "--msccl-name", "ag4", "--in-place", "-"], Some(&text));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((plan["name"].as_str(), plan["collective"].as_str()), (Some("ag4"), Some("allgather")));
    assert_eq!(plan["inplace"], true);
    assert_eq!(plan["gpus"][3]["output_chunks"], 4);
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "torus:2x2",
            "--collective",
            "all_reduce",
            "--size",
            "1MiB",
            "--format",
            "mscclpp-json",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((plan["collective"].as_str(), plan["inplace"].as_bool()), (Some("allreduce"), Some(false)));
    // A collective the shim cannot select by root is refused, with the reason.
    let bcast = ccsynth(
        &[
            "baseline",
            "--algo",
            "mst",
            "--topology",
            "ring:4",
            "--collective",
            "broadcast",
            "--root",
            "0",
            "--size",
            "64KiB",
        ],
        None,
    );
    let o = ccsynth(&["export", "--format", "mscclpp-json", "-"], Some(&String::from_utf8(bcast.stdout).unwrap()));
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("never by root"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn export_and_synth_write_chakra_traces_into_a_directory() {
    let dir = std::env::temp_dir().join(format!("ccsynth-chakra-{}", std::process::id()));
    let schedule = ccsynth(
        &["baseline", "--algo", "ring", "--topology", "ring:4", "--collective", "all_gather", "--size", "64KiB"],
        None,
    );
    let text = String::from_utf8(schedule.stdout).unwrap();
    let out = dir.join("ag");
    let o = ccsynth(
        &["export", "--format", "chakra-et", "--prefix", "ag", "--out", out.to_str().unwrap(), "-"],
        Some(&text),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let abs = std::fs::canonicalize(&out).unwrap();
    let stdout = String::from_utf8(o.stdout).unwrap();
    let key = format!(r#""all-gather-implementation-custom": ["{}/ag"]"#, abs.display());
    assert!(stdout.contains(&key) && stdout.contains("network: ag.network.yml"), "{stdout}");
    for v in 0..4 {
        let et = std::fs::read(abs.join(format!("ag.{v}.et"))).unwrap();
        assert_eq!(&et[..8], &[0x07, 0x0a, 0x05, b'0', b'.', b'0', b'.', b'4'], "metadata first");
        assert!(abs.join(format!("ag.workload.{v}.et")).exists());
    }
    let system = std::fs::read_to_string(abs.join("ag.system.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&system).unwrap();
    assert_eq!(v["preferred-dataset-splits"], 1);
    assert_eq!(v["all-gather-implementation-custom"][0], format!("{}/ag", abs.display()));
    // synth --format chakra-et, and the directory is required.
    let out2 = dir.join("ar");
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "torus:2x2",
            "--collective",
            "all_reduce",
            "--size",
            "1MiB",
            "--format",
            "chakra-et",
            "--out",
            out2.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8(o.stdout).unwrap().contains("network: none written"));
    assert!(out2.join("ccsynth.3.et").exists());
    let o = ccsynth(&["export", "--format", "chakra-et", "-"], Some(&text));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--out DIR"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = ccsynth(
        &["export", "--format", "chakra-et", "--prefix", "../up", "--out", out.to_str().unwrap(), "-"],
        Some(&text),
    );
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulate_traces_and_plot_draws() {
    let dir = std::env::temp_dir().join(format!("ccsynth-pictures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.json");
    let o = ccsynth(&["simulate", EXAMPLE, "--trace", trace.to_str().unwrap(), "--transfers"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let times = v["transfer_times"].as_array().unwrap();
    assert_eq!(times.len() as u64, v["transfers"].as_u64().unwrap());
    let last = times.iter().map(|t| t["end_ns"].as_f64().unwrap()).fold(0.0, f64::max);
    assert!((last - v["collective_time_ns"].as_f64().unwrap()).abs() < 1e-6);
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(t["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "X"));
    // Without --transfers, no per-transfer list.
    let o = ccsynth(&["simulate", EXAMPLE], None);
    assert!(json(&o).get("transfer_times").is_none());
    let o = ccsynth(&["plot", "timeline", EXAMPLE], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("<svg "));
    // The goodput chart from the size sweep's JSON.
    let o = ccsynth(&["bench", "--suite", "sizes", "--filter", "torus:4x4 all_reduce 32768", "--json"], None);
    assert_eq!(o.status.code(), Some(0));
    let svg = dir.join("g.svg");
    let p =
        ccsynth(&["plot", "goodput", "-", "--out", svg.to_str().unwrap()], Some(&String::from_utf8(o.stdout).unwrap()));
    assert_eq!(p.status.code(), Some(0), "{}", String::from_utf8_lossy(&p.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    for name in ["auto", "greedy", "best baseline", "bound"] {
        assert!(text.contains(&format!(r#"class="series" data-name="{name}""#)), "{name}: {text}");
    }
    // An all-reduce on 16 NPUs: busbw is algbw × 2·15/16.
    assert!(text.contains("busbw (GB/s, × 1.875)"), "{text}");
    // Or from compare --json runs at several sizes, one after another.
    let mut runs = String::new();
    for size in ["32KiB", "1MiB"] {
        let o =
            ccsynth(&["compare", "--topology", "ring:4", "--collective", "all_gather", "--size", size, "--json"], None);
        runs += &String::from_utf8(o.stdout).unwrap();
    }
    let p = ccsynth(&["plot", "goodput", "-"], Some(&runs));
    assert_eq!(p.status.code(), Some(0), "{}", String::from_utf8_lossy(&p.stderr));
    let text = String::from_utf8(p.stdout).unwrap();
    assert!(text.contains(r#"data-title="all_gather on 4 NPUs""#), "{text}");
    // An all-gather on 4 NPUs: busbw is algbw × 3/4.
    assert!(text.contains("busbw (GB/s, × 0.75)"), "{text}");
    for name in ["ring", "direct", "bound"] {
        assert!(text.contains(&format!(r#"class="series" data-name="{name}""#)), "{name}");
    }
    let bad = ccsynth(&["plot", "goodput", "-"], Some("{}"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("bench --suite sizes --json"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn people_get_a_summary_and_every_flag_has_help() {
    // The summary (forced here: stdout is a pipe in tests; at a terminal it is the default).
    let o = ccsynth(
        &["synth", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB", "--summary"],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    for line in [
        "algorithm ",
        "auto's fastest of",
        "collective      all_reduce of 1 MiB on 16 NPUs",
        "steps ",
        "time ",
        "lower bound",
        "best baseline   ",
        "not printed: give --out FILE, or --json",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    assert!(!text.contains('{'), "no JSON in the summary: {text}");
    // Times are rounded for people: three decimals and a unit.
    let time = text.lines().find(|l| l.starts_with("time")).unwrap();
    assert!(regex_like_time(time), "{time}");
    let ring = ["baseline", "--algo", "ring", "--topology", "ring:4", "--collective", "all_gather", "--size", "4KiB"];
    let o = ccsynth(&[&ring[..], &["--summary"]].concat(), None);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with("algorithm       ring\n") && text.contains("add --compare"), "{text}");
    // With --compare, the summary ends with the comparison table, the synthesized row in it.
    let o = ccsynth(
        &["synth", "--topology", "ring:6", "--collective", "all_reduce", "--size", "1MiB", "--compare", "--summary"],
        None,
    );
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("\n algorithm ") && text.contains("lower bound:"), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("auto ")), "{text}");
    // When the schedule is a baseline's, that baseline is the best one, tied (issue 30: the
    // summary once skipped it and claimed a speedup over the runner-up).
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "torus:8x8",
            "--collective",
            "all_gather",
            "--size",
            "64MiB",
            "--algo",
            "bucket",
            "--compare",
            "--summary",
        ],
        None,
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with("best baseline")).unwrap();
    assert!(line.starts_with("best baseline   bucket, ") && line.ends_with("this schedule is as fast"), "{text}");
    // A group's collective is on the group's NPUs, of the topology's.
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "switch:5",
            "--collective",
            "all_gather",
            "--size",
            "1MiB",
            "--group",
            "0,1,2,3",
            "--summary",
        ],
        None,
    );
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("collective      all_gather of 1 MiB on 4 of 5 NPUs"), "{text}");
    // Where `auto` skipped every baseline, each bounded above its schedule, the summary says
    // so (and the lowest price), not that none ran.
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "torus:4x4",
            "--collective",
            "all_reduce",
            "--size",
            "64MiB",
            "--fail-link",
            "0-1",
            "--summary",
        ],
        None,
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with("best baseline")).unwrap();
    assert!(
        line.starts_with(
            "best baseline   none built: each bounded above this schedule before it ran (the lowest price, "
        ),
        "{text}"
    );
    // --summary with --json is refused by the parser.
    let o = ccsynth(&[&ring[..], &["--summary", "--json"]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    // compare --with-synth adds auto's row; --tenants is not a compare flag.
    let o = ccsynth(
        &["compare", "--topology", "ring:6", "--collective", "all_reduce", "--size", "1MiB", "--with-synth", "--json"],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(json(&o)["rows"].as_array().unwrap().iter().any(|r| r["algorithm"] == "auto"));
    let o = ccsynth(&["compare", "--topology", "ring:6", "--tenants", "x.json"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unexpected argument '--tenants'"));
    // Every flag and argument of every verb says what it is for (`-h` puts the help on the
    // flag's line or, when some help is long, on the next lines).
    for verb in [
        "synth",
        "baseline",
        "compare",
        "export",
        "simulate",
        "validate",
        "topology",
        "bench",
        "serve",
        "plot timeline",
        "plot goodput",
    ] {
        let args: Vec<&str> = verb.split(' ').chain(["-h"]).collect();
        let help = String::from_utf8(ccsynth(&args, None).stdout).unwrap();
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            let indent = line.len() - t.len();
            let is_item = indent > 0
                && (t.starts_with("--")
                    || t.starts_with("-h")
                    || (t.starts_with('<') && !t.contains("  ") && t.ends_with('>')));
            let Some(first) = t.split("  ").next() else { continue };
            if !is_item || t.len() > first.len() {
                continue; // not a flag, or its help is on the same line
            }
            let next = lines.get(i + 1).copied().unwrap_or("");
            let next_t = next.trim_start();
            let has_help = next.len() - next_t.len() > indent && !next_t.is_empty() && !next_t.starts_with('-');
            assert!(has_help, "`ccsynth {verb}`: {t} has no help text");
        }
    }
}

/// `time            8.915 µs ...`: a number with exactly three decimals and a unit.
fn regex_like_time(line: &str) -> bool {
    let value = line.split_whitespace().nth(1).unwrap_or("");
    let unit = line.split_whitespace().nth(2).unwrap_or("");
    value.split_once('.').is_some_and(|(_, d)| d.len() == 3) && ["ns", "µs", "ms", "s"].contains(&unit)
}

#[test]
fn synth_refuses_bad_requests_with_exit_2() {
    for args in [
        &["synth", "--topology", "ring:4", "--collective", "all_reduce", "--size", "12XB"][..],
        &["synth", "--topology", "ring:4", "--collective", "allreduce", "--size", "1KiB"],
        &["synth", "--topology", "ring:4", "--collective", "broadcast", "--size", "1KiB"],
        &["synth", "--topology", "ring:4", "--collective", "all_gather", "--size", "1KiB", "--switch-model", "tree"],
        &[
            "synth",
            "--topology",
            "ring:4",
            "--collective",
            "all_gather",
            "--size",
            "1KiB",
            "--fail-link",
            "0-1",
            "--fail-link",
            "2-3",
        ],
    ] {
        let o = ccsynth(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!o.stderr.is_empty());
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn baseline_and_compare_verbs() {
    let o = ccsynth(&["baseline", "--list"], None);
    let names: Vec<String> =
        json(&o).as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap().to_string()).collect();
    for want in [
        "ring",
        "ring-bidir",
        "direct",
        "recursive-doubling",
        "rabenseifner",
        "bucket",
        "swing-latency",
        "swing-bandwidth",
        "traff",
        "kolmakov",
        "mst",
        "bde",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }
    let o = ccsynth(
        &["baseline", "--algo", "ring", "--topology", "ring:4", "--collective", "all_reduce", "--size", "4KiB"],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    assert_eq!(v["algorithm"], "ring");
    // 2(p−1)(α + (n/p)β) with α = 500 ns, β = 1/100 ns per byte.
    assert!((v["collective_time_ns"].as_f64().unwrap() - 6.0 * (500.0 + 1024.0 / 100.0)).abs() < 1e-6);
    let o = ccsynth(
        &["baseline", "--algo", "bucket", "--topology", "fc:4", "--collective", "all_reduce", "--size", "4KiB"],
        None,
    );
    assert_eq!(o.status.code(), Some(3), "a baseline that cannot serve the topology refuses");
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not support"));
    let o = ccsynth(&["compare", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB"], None);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    let best = text.lines().find(|l| l.trim_start().starts_with("swing-bandwidth")).expect("a swing-bandwidth row");
    assert!(best.trim_end().ends_with('*'), "{text}");
    assert_eq!(text.lines().next(), Some("all_reduce of 1 MiB on 16 NPUs"), "{text}");
    assert!(
        text.lines().nth(1).unwrap().split_whitespace().eq([
            "algorithm",
            "time",
            "(µs)",
            "algbw",
            "(GB/s)",
            "busbw",
            "(GB/s)",
            "vs",
            "best",
            "vs",
            "bound",
            "rounds",
            "best"
        ]),
        "{text}"
    );
    // algbw is bytes per ns (1 MiB over 8.915 µs), busbw that × 2(p−1)/p for all-reduce.
    let cells: Vec<&str> = best.split_whitespace().collect();
    assert_eq!(&cells[1..4], ["8.915", "117.62", "220.53"], "{best}");
    assert!(text.contains("lower bound: 4.915 µs"), "{text}");
    let o = ccsynth(
        &["compare", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB", "--json"],
        None,
    );
    assert!(json(&o)["rows"].as_array().unwrap().len() >= 8);
    // --algos: only the named baselines; an unknown name is a usage error naming it.
    let some = ["compare", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB", "--json"];
    let o = ccsynth(&[&some[..], &["--algos", "bucket,swing-bandwidth"]].concat(), None);
    let rows: Vec<String> =
        json(&o)["rows"].as_array().unwrap().iter().map(|r| r["algorithm"].as_str().unwrap().to_string()).collect();
    assert_eq!(rows.len(), 2);
    assert!(rows.contains(&"bucket".to_string()) && rows.contains(&"swing-bandwidth".to_string()));
    let o = ccsynth(&[&some[..], &["--algos", "bucket,fastest"]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown baseline \"fastest\""));
}

#[test]
fn synth_writes_multi_tenant_schedules_from_a_file() {
    let dir = std::env::temp_dir().join(format!("ccsynth-mt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("tenants.json");
    std::fs::write(
        &f,
        r#"[{"kind": "broadcast", "size_bytes": 1024, "root": 0}, {"kind": "all_gather", "size_bytes": 9216}]"#,
    )
    .unwrap();
    let out = dir.join("s.json");
    let o = ccsynth(
        &["synth", "--topology", "mesh:3x3", "--tenants", f.to_str().unwrap(), "--out", out.to_str().unwrap()],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let o = ccsynth(&["validate", out.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn synth_ilp_reports_its_search_and_dumps_the_model() {
    let dir = std::env::temp_dir().join(format!("ccsynth-cli-ilp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lp = dir.join("model.lp");
    let lp_arg = lp.to_str().unwrap();
    let args = [
        "synth",
        "--algo",
        "ilp",
        "--topology",
        "mesh:3x3",
        "--collective",
        "all_reduce",
        "--size",
        "9KiB",
        "--time-limit",
        "30",
        "--dump-lp",
        lp_arg,
        "--compare",
    ];
    let o = ccsynth(&args, None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    assert_eq!(v["algorithm"], "ilp");
    let stats = &v["stats"];
    assert_eq!(stats["status"], "optimal");
    for field in
        ["horizon", "horizon_lower_bound", "horizon_gap", "greedy_horizon", "solves", "highs_ms", "model_build_ms"]
    {
        assert!(stats.get(field).is_some(), "stats.{field} missing: {stats}");
    }
    assert_eq!(stats["horizon"], stats["ten_timesteps"]);
    assert!(v["comparison"]["rows"].as_array().unwrap().iter().any(|r| r["algorithm"] == "ilp"));
    // All-reduce has two phases, so two models, the phase name before the extension.
    for phase in ["reduce", "forward"] {
        let text = std::fs::read_to_string(dir.join(format!("model.{phase}.lp"))).unwrap();
        assert!(text.starts_with("\\ ccsynth ILP") && text.contains("Subject To") && text.trim_end().ends_with("End"));
    }
    // Bad ILP options are input errors (exit 2) that name the option.
    let o = ccsynth(
        &[
            "synth",
            "--algo",
            "ilp",
            "--topology",
            "ring:4",
            "--collective",
            "all_gather",
            "--size",
            "1KiB",
            "--time-limit",
            "0",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--time-limit: "));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_sizes_sweeps_auto_against_the_best_baseline() {
    // Two rows of the size sweep through the CLI door: the greedy within its target of the
    // best baseline, `auto` never above it, and the irregular example graph read from
    // examples/ (the sweep runs from the repository root, as cargo runs tests).
    for filter in ["torus:4x4 all_reduce 32768", "irregular-hetero.json all_gather 2097152"] {
        let o = ccsynth(&["bench", "--suite", "sizes", "--filter", filter, "--json"], None);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let rows = json(&o);
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 1, "{filter}: {rows:?}");
        let r = &rows[0];
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["met"], true, "{r}");
        assert!(r["auto_vs_best_baseline"].as_f64().unwrap() <= 1.0 + 1e-9, "{r}");
        assert!(r["greedy_us"].as_f64().unwrap() >= r["lower_bound_us"].as_f64().unwrap() * (1.0 - 1e-9), "{r}");
    }
    let bad = ccsynth(&["bench", "--suite", "sizez"], None);
    assert_ne!(bad.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("sizes"));
}

/// The failures suite at a size and effort of the caller's: every scenario regenerated at that
/// effort (echoed per row), the intact yardstick at the default, and no all-reduce target
/// below the issue's 64 MiB; the flags refused by name elsewhere or when malformed.
#[test]
fn bench_failures_takes_a_size_and_an_effort() {
    let o = ccsynth(
        &[
            "bench",
            "--suite",
            "failures",
            "--quick",
            "--filter",
            "torus:8x8 all_reduce",
            "--size",
            "4MiB",
            "--effort",
            "thorough",
            "--json",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = json(&o);
    let rows = rows.as_array().unwrap();
    let scenarios: Vec<&str> = rows.iter().map(|r| r["scenario"].as_str().unwrap()).collect();
    assert_eq!(scenarios, ["intact", "1 link", "3 links", "NPU 9"], "{rows:?}");
    for r in rows {
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["size_bytes"], 4 << 20, "{r}");
        assert_eq!(r["effort"], if r["scenario"] == "intact" { "standard" } else { "thorough" }, "{r}");
        assert!(r["target"].is_null() && r["met"].is_null(), "no all-reduce target below 64 MiB: {r}");
        assert!(r["time_us"].as_f64().unwrap() >= r["bound_us"].as_f64().unwrap() * (1.0 - 1e-9), "{r}");
    }
    let o = ccsynth(
        &["bench", "--suite", "failures", "--quick", "--filter", "torus:8x8 all_reduce", "--size", "4MiB"],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("| 1 link |") && !table.contains("(thorough)"), "{table}");
    for (args, named) in [
        (&["bench", "--suite", "sizes", "--size", "4MiB"][..], "--size"),
        (&["bench", "--suite", "greedy", "--effort", "thorough"][..], "--effort"),
        (&["bench", "--suite", "failures", "--size", "4XB"][..], "--size"),
        (&["bench", "--suite", "failures", "--effort", "quick"][..], "--effort"),
    ] {
        let o = ccsynth(args, None);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(named), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

/// `serve` refuses to listen beyond loopback without tokens (anyone could queue, cancel and
/// delete), and names a bad tokens file's line; both before binding anything.
#[test]
fn serve_refuses_an_open_service_beyond_loopback() {
    let dir = std::env::temp_dir().join(format!("ccsynth-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sqlite:{}", dir.join("open.db").display());
    let o = ccsynth(&["serve", "--addr", "0.0.0.0:0", "--database-url", &db], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a loopback address") && err.contains("--tokens-file"), "{err}");
    let bad = dir.join("tokens");
    std::fs::write(&bad, "# clients\nalice:short\n").unwrap();
    let o =
        ccsynth(&["serve", "--addr", "0.0.0.0:0", "--database-url", &db, "--tokens-file", bad.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 2") && err.contains("16 characters"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn regenerate_repairs_a_schedule_file_and_runs_it_afresh() {
    // The example: a ring all-reduce on a 4x4 torus. Link 0-1 fails.
    let o = ccsynth(&["regenerate", EXAMPLE, "--fail-link", "0-1", "--json"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let r = &v["stats"]["regeneration"];
    assert!((r["previous_collective_time_ns"].as_f64().unwrap() - 49660.8).abs() < 1e-6, "{r}");
    assert!(r["repair"]["rerouted"].as_u64().unwrap() > 0, "{r}");
    assert!(r["fresh"]["collective_time_ns"].is_number(), "{r}");
    let kept = r["kept"].as_str().unwrap();
    assert_eq!(r[kept]["collective_time_ns"], v["collective_time_ns"]);
    assert!(
        v["topology"]["links"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| (l["src"].as_u64(), l["dst"].as_u64()) != (Some(0), Some(1)))
    );
    // From stdin, with the fresh run a slow baseline: the repair is kept.
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let o = ccsynth(&["regenerate", "-", "--fail-link", "0-1", "--algo", "direct", "--json"], Some(&text));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&o)["stats"]["regeneration"]["kept"], "repair");
    // The summary puts it beside the previous schedule.
    let o = ccsynth(&["regenerate", EXAMPLE, "--fail-npu", "5", "--summary"], None);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("regenerated     from") && said.contains("NPU 5"), "{said}");
    // Bad input: a link the topology lacks, an unreadable file, an invalid schedule: exit 2.
    let o = ccsynth(&["regenerate", EXAMPLE, "--fail-link", "0-9"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no link 0->9"), "{}", String::from_utf8_lossy(&o.stderr));
    // Failures that cut NPU 0 off are named as the failures, with the NPU they cut off.
    let cut = ["--fail-link", "0-1", "--fail-link", "0-3", "--fail-link", "0-4", "--fail-link", "0-12"];
    let o = ccsynth(&[&["regenerate", EXAMPLE][..], &cut[..]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("failures: they split the collective's group: it falls into 2 parts (NPU 0; 15 NPUs from 1)"),
        "{said}"
    );
    // The same from `synth --fail-link`; with a `--group` inside the larger part it runs.
    let synth = ["synth", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB"];
    let o = ccsynth(&[&synth[..], &cut[..]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("failures: they split the collective's group"));
    let o = ccsynth(&[&synth[..], &cut[..], &["--group", "1,2,5", "--json"][..]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // A group naming no NPU: the group's own error, not a panic.
    let o = ccsynth(&[&synth[..], &["--fail-link", "0-1", "--group", "1,2,99"][..]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--group[2]: 99 is not an NPU"));
    let o = ccsynth(&["regenerate", "/no/such/file.json", "--fail-link", "0-1"], None);
    assert_eq!(o.status.code(), Some(2));
    let mut broken: serde_json::Value = serde_json::from_str(&text).unwrap();
    broken["transfers"].as_array_mut().unwrap().pop();
    broken.as_object_mut().unwrap().remove("collective_time_ns");
    let o = ccsynth(&["regenerate", "-", "--fail-link", "0-1"], Some(&broken.to_string()));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a valid schedule"));
}

/// Issue 30, rough edge 5: what a person at a terminal is told. Mistakes in flags are named by
/// the flag (not the API's JSON path), a file that is not a schedule says what it is, and a
/// missing topology file says it is missing.
#[test]
fn mistakes_are_worded_for_the_terminal() {
    let err = |args: &[&str]| {
        let o = ccsynth(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let ag = ["--topology", "ring:4", "--collective", "all_gather", "--size", "1MiB"];
    let e = err(&[&["synth"][..], &ag, &["--time-limit", "0"]].concat());
    assert!(e.starts_with("ccsynth: --time-limit: 0: expected seconds"), "{e}");
    // A limit too short for any schedule names the flag, not the API's field.
    let ar = ["--topology", "torus:16x16", "--collective", "all_reduce", "--size", "256MiB"];
    // It exits 4 (the time limit), not 2: the request itself was fine.
    let o = ccsynth(&[&["synth"][..], &ar, &["--algo", "greedy", "--time-limit", "0.0001"]].concat(), None);
    assert_eq!(o.status.code(), Some(4));
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(e.contains("ran out before any schedule was found; raise --time-limit"), "{e}");
    assert!(!e.contains("options.time_limit_s"), "{e}");
    let e = err(&["synth", "--topology", "ring:4", "--collective", "broadcast", "--size", "1MiB"]);
    assert!(e.starts_with("ccsynth: --root: broadcast needs a root NPU"), "{e}");
    let e = err(&[&["synth"][..], &ag, &["--seeds", "0"]].concat());
    assert!(e.contains("--seeds: 0: expected 1..="), "{e}");
    let e = err(&[
        "synth",
        "--topology",
        "ring:8",
        "--collective",
        "all_reduce",
        "--size",
        "1MiB",
        "--algo",
        "kolmakov-r9",
    ]);
    assert!(e.starts_with("ccsynth: --algo: kolmakov-r9: R = 9 on 8 processes"), "{e}");
    let e = err(&["synth", "--topology", "no/such/topology.json", "--collective", "all_gather", "--size", "1MiB"]);
    assert!(e.contains("no/such/topology.json: no such file"), "{e}");
    // Other commands' outputs where a schedule goes.
    let dir = std::env::temp_dir().join(format!("ccsynth-words-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cmp =
        ccsynth(&["compare", "--topology", "ring:4", "--collective", "all_reduce", "--size", "1MiB", "--json"], None);
    let cmp_file = dir.join("cmp.json");
    std::fs::write(&cmp_file, &cmp.stdout).unwrap();
    let bench_file = dir.join("bench.json");
    std::fs::write(&bench_file, r#"[{"case": "torus:8x8", "wall_s": 1.0}]"#).unwrap();
    let svg = dir.join("t.svg");
    for (verb, file, what) in [
        (&["simulate"][..], &cmp_file, "this is a comparison (`compare --json`), not a schedule"),
        (&["validate"][..], &cmp_file, "this is a comparison (`compare --json`), not a schedule"),
        (&["plot", "timeline"][..], &bench_file, "this is benchmark output (`bench --json`), not a schedule"),
    ] {
        let mut args: Vec<&str> = verb.to_vec();
        args.push(file.to_str().unwrap());
        if verb[0] == "plot" {
            args.extend(["--out", svg.to_str().unwrap()]);
        }
        let o = ccsynth(&args, None);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(what) && e.contains("ccsynth.schedule.v1"), "{args:?}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 30, rough edge 2: the size sweep runs from any directory (its topology file is built
/// in), and a row that cannot run fails the command instead of leaving a gap.
#[test]
fn the_size_sweep_runs_outside_the_repository() {
    let dir = std::env::temp_dir().join(format!("ccsynth-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ccsynth"))
        .args(["bench", "--suite", "sizes", "--quick", "--filter", "irregular", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = json(&o);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for r in rows {
        assert!(
            r["error"].is_null() && r["auto_us"].as_f64().is_some() && r["best_baseline_us"].as_f64().is_some(),
            "{r}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 30, rough edge 3: the container's entry point passes the tokens file only when one is
/// mounted (so `docker run IMAGE serve --allow-open` starts), fits the shutdown into `docker
/// stop`'s 10 s unless told otherwise, and runs other verbs as they are. The Dockerfile runs
/// it, checks the health on the port it serves, and builds what the crate embeds.
#[test]
fn the_container_entry_point_starts_open_or_with_tokens() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("ccsynth-entry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A stand-in for the binary: prints its arguments and the tokens file it was given.
    let fake = dir.join("fake-ccsynth");
    std::fs::write(&fake, "#!/bin/sh\necho \"args=$* tokens=${CCSYNTH_TOKENS_FILE:-none}\"\n").unwrap();
    Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
    let tokens = dir.join("tokens");
    let run = |args: &[&str], env_tokens: Option<&str>| {
        let mut c = Command::new("sh");
        c.arg(format!("{root}/scripts/docker-entrypoint.sh"))
            .args(args)
            .env("CCSYNTH_BIN", &fake)
            .env("CCSYNTH_TOKENS_PATH", &tokens)
            .env_remove("CCSYNTH_TOKENS_FILE");
        if let Some(t) = env_tokens {
            c.env("CCSYNTH_TOKENS_FILE", t);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(run(&["serve", "--allow-open"], None), "args=serve --grace-ms 7000 --allow-open tokens=none");
    std::fs::write(&tokens, "alice alice-token-0123456789\n").unwrap();
    let with = format!("args=serve --grace-ms 7000 tokens={}", tokens.display());
    assert_eq!(run(&["serve"], None), with);
    assert_eq!(
        run(&["serve", "--grace-ms", "3000"], None),
        format!("args=serve --grace-ms 3000 tokens={}", tokens.display())
    );
    assert_eq!(run(&["serve"], Some("/elsewhere")), "args=serve --grace-ms 7000 tokens=/elsewhere");
    assert_eq!(run(&["validate", "x.json"], None), format!("args=validate x.json tokens=none"));
    std::fs::remove_dir_all(&dir).unwrap();
    let dockerfile = std::fs::read_to_string(format!("{root}/Dockerfile")).unwrap();
    assert!(dockerfile.contains("ENTRYPOINT [\"ccsynth-entrypoint\"]"));
    assert!(!dockerfile.contains("CCSYNTH_TOKENS_FILE="), "the image must not name a tokens file that may not exist");
    let health = dockerfile.lines().skip_while(|l| !l.starts_with("HEALTHCHECK")).nth(1).unwrap();
    assert!(health.contains("${CCSYNTH_ADDR##*:}") && !health.contains(":8080"), "{health}");
    // What the crate embeds (include_str!) is in the build context and copied.
    assert!(dockerfile.contains("COPY examples ./examples") && dockerfile.contains("COPY openapi.yaml"));
    let ignored = std::fs::read_to_string(format!("{root}/.dockerignore")).unwrap();
    for dir in ["target", ".git"] {
        assert!(ignored.lines().any(|l| l.trim() == dir), "{dir} in .dockerignore");
    }
    for needed in ["src", "migrations", "examples", "scripts", "openapi.yaml", "Cargo.lock"] {
        assert!(!ignored.lines().any(|l| l.trim() == needed), "{needed} must reach the build");
    }
}

/// Issue 30, rough edge 4: the ILP's summary says whether it proved its schedule optimal (and
/// how it ended when it did not).
#[test]
fn the_ilp_summary_says_how_it_ended() {
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "ring:4",
            "--collective",
            "all_gather",
            "--size",
            "1MiB",
            "--algo",
            "ilp",
            "--summary",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("ilp ")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.trim_start_matches("ilp").trim_start().starts_with("optimal;"), "{line}");
    assert!(line.contains("solves"), "{line}");
}
