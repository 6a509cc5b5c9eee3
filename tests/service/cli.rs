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

pub(crate) fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

pub(crate) const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ring-allreduce-torus4x4.json");

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
    // Named by the flag and its value, with the links the node has (issue 66, rough edge 5).
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("--fail-link 0-2: no link 0->2 in the topology; 0 links to 1 and 3"), "{said}");
    let o = ccsynth(&["topology", "ring:4", "--fail-link", "1-0", "--fail-link", "0-99"], None);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("--fail-link 0-99: 0->99: 99 is not a node: expected 0..=3 (4 NPUs)"), "{said}");
    assert!(!said.contains("failures."), "{said}");
    let o = ccsynth(&["topology", "ring:4", "--fail-npu", "7"], None);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("--fail-npu 7: 7 is not an NPU: expected 0..=3"), "{said}");
    let o = ccsynth(&["topology", "ring:4", "--fail-link", "zero-one"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"zero-one\" is not of the form U-V"));
    // An id past the largest is too large, as --fail-npu's is (it read "not of the form U-V").
    let o = ccsynth(&["topology", "ring:4", "--fail-link", "0-99999999999999999999"], None);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("--fail-link #1: \"0-99999999999999999999\": node id 99999999999999999999 is too large"),
        "{said}"
    );
    // A missing file whose name holds a `:` is a missing file, not an unknown generator.
    let o = ccsynth(&["topology", "runs/2024-01-01T10:00/topo.json"], None);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("runs/2024-01-01T10:00/topo.json: no such file"), "{said}");
    // A spec's mistake is named by the flag that gave it (it said `spec:`).
    for verb in [&["synth"][..], &["compare"], &["baseline", "--algo", "ring"]] {
        let args = [verb, &["--topology", "rng:8", "--collective", "all_gather", "--size", "1MiB"]].concat();
        let o = ccsynth(&args, None);
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(said.starts_with("ccsynth: --topology: \"rng:8\": unknown generator"), "{verb:?}: {said}");
    }
}

/// Issue 63, point 4: `--degrade-link U-V@bw=X[;lat=Y]` at `topology`, `synth` and
/// `regenerate`: the link stays at its new speed, mistakes are named by the flag as written,
/// and a regeneration says which links it found slower.
#[test]
fn slow_links_at_every_verb() {
    let o = ccsynth(&["topology", "ring:4", "--degrade-link", "0-1@bw=25;lat=900"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let links = json(&o)["links"].as_array().unwrap().clone();
    assert_eq!(links.len(), 8);
    let at = |u: u64, v: u64| links.iter().find(|l| l["src"] == u && l["dst"] == v).unwrap().clone();
    assert_eq!((at(0, 1)["bandwidth_gb_per_s"].as_f64(), at(0, 1)["latency_ns"].as_f64()), (Some(25.0), Some(900.0)));
    assert_eq!(at(1, 0)["bandwidth_gb_per_s"].as_f64(), Some(25.0));
    let o = ccsynth(&["topology", "ring:4", "--degrade-link", "0-1@lat=900", "--directed"], None);
    let links = json(&o)["links"].as_array().unwrap().clone();
    let at = |u: u64, v: u64| links.iter().find(|l| l["src"] == u && l["dst"] == v).unwrap().clone();
    assert_eq!((at(0, 1)["latency_ns"].as_f64(), at(1, 0)["latency_ns"].as_f64()), (Some(900.0), Some(500.0)));
    // A trailing separator is taken, as a generator's `@bw=5;` is.
    let o = ccsynth(&["topology", "ring:4", "--degrade-link", "0-1@bw=5;"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    for (flag, says) in [
        ("0-1", "--degrade-link #1: \"0-1\": no @ before the link's parameters"),
        ("0-1@bw", "\"bw\" is not KEY=VALUE"),
        ("0-1@speed=3", "\"speed\" is not bw or lat"),
        ("0-1@bw=fast", "bw=\"fast\" is not a number"),
        ("0-1@bw=3,bw=4", "bw is given twice"),
        // Past f64 it parsed as infinity and was echoed as `inf`.
        ("0-1@bw=1e400", "bw=1e400: too large: expected a finite number"),
        ("0-1@bw=-inf", "bw=-inf: negative: expected a finite number"),
        ("0-99999999999999999999@bw=1", "node id 99999999999999999999 is too large (at most 1048575)"),
        ("0-1@;", "\"\" is not KEY=VALUE"),
        ("0-2@bw=3", "--degrade-link 0-2@bw=3: no link 0->2 in the topology; 0 links to 1 and 3"),
        ("0-1@bw=300", "--degrade-link 0-1@bw=300: 300 GB/s is above 0->1's 100 GB/s: a degraded link cannot speed up"),
    ] {
        let o = ccsynth(&["topology", "ring:4", "--degrade-link", flag], None);
        assert_eq!(o.status.code(), Some(2), "{flag}");
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(said.contains(says), "{flag}: {said}");
        assert!(!said.contains("failures.") && !said.contains("degraded_links"), "{said}");
    }
    // synth on the degraded topology: the schedule's topology has the slow link.
    let synth = ["synth", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB", "--json"];
    let o = ccsynth(&[&synth[..], &["--degrade-link", "5-6@bw=10"][..]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let l = v["topology"]["links"].as_array().unwrap().iter().find(|l| l["src"] == 6 && l["dst"] == 5).unwrap().clone();
    assert_eq!(l["bandwidth_gb_per_s"].as_f64(), Some(10.0));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("ccsynth: degraded 5-6 at 10 GB/s (was 100)"), "{said}");
    assert!(!said.contains("ccsynth: failed"), "{said}");
    // What failed is said as what slowed is (it was not said at all); a link named both ways
    // once, a directed one with its arrow.
    let failing = ["--fail-link", "0-1", "--fail-link", "1-0", "--fail-npu", "10", "--fail-link", "5-6"];
    let o = ccsynth(&[&synth[..], &failing[..]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("ccsynth: failed links 0-1, 5-6; NPU 10\n"), "{said}");
    let o = ccsynth(&[&synth[..], &["--fail-link", "5-6", "--directed"][..]].concat(), None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("ccsynth: failed link 5->6\n"));
    // regenerate: a slow link is repaired (not refused), and both forms say which links.
    let o = ccsynth(&["regenerate", EXAMPLE, "--degrade-link", "0-1@bw=20", "--json"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json(&o)["stats"]["regeneration"].clone();
    assert!(r["repair"]["collective_time_ns"].is_number(), "{r}");
    let changed: Vec<(u64, u64, f64, f64)> = r["degraded_links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let f = |k: &str| c[k].as_f64().unwrap();
            (
                c["src"].as_u64().unwrap(),
                c["dst"].as_u64().unwrap(),
                f("bandwidth_gb_per_s"),
                f("was_bandwidth_gb_per_s"),
            )
        })
        .collect();
    assert_eq!(changed, vec![(0, 1, 20.0, 100.0), (1, 0, 20.0, 100.0)]);
    let o = ccsynth(&["regenerate", EXAMPLE, "--degrade-link", "0-1@bw=20", "--summary"], None);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("degraded        0-1 at 20 GB/s (was 100)"), "{said}");
    // On stderr as `synth` says it, a degradation that changes nothing too (it was silent).
    assert!(String::from_utf8_lossy(&o.stderr).contains("ccsynth: degraded 0-1 at 20 GB/s (was 100)"));
    let o = ccsynth(&["regenerate", EXAMPLE, "--degrade-link", "0-1@bw=100"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("ccsynth: degraded no link: each given already runs at that speed"), "{said}");
    let o = ccsynth(&["regenerate", EXAMPLE, "--degrade-link", "0-1@bw=20", "--fail-link", "0-1"], None);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("--degrade-link 0-1@bw=20: 0->1 fails too"), "{said}");
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
    // A field missing or misspelled, or a spec document's own error, is the parser's to name.
    for (text, said) in [(r#"{"npus": 2, "link": []}"#, "link"), (r#"{"spec": "ring:1x"}"#, "ring:1x")] {
        std::fs::write(&f, text).unwrap();
        let o = ccsynth(&["topology", f.to_str().unwrap()], None);
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(said) && !e.contains("not a topology"), "{e}");
    }
    let o = ccsynth(&["topology", "no-such-file"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn validate_exit_codes() {
    let o = ccsynth(&["validate", EXAMPLE], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    assert_eq!(v["valid"], true);
    assert!((v["collective_time_ns"].as_f64().unwrap() - 43903.68).abs() < 1e-6);
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
    // Empty input says so, naming standard input (it said "-: .: malformed JSON: EOF while
    // parsing a value (line 1, column 0)").
    let o = ccsynth(&["validate", "-"], Some(""));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("standard input: empty: expected a schedule"), "{err}");
    let o = ccsynth(&["validate", "/no/such/file.json"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/no/such/file.json"));
    // A file name that is not UTF-8 (legal on Linux) is clap's error, exit 2: it panicked (101)
    // on the way to the hint about sizes.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"r4\xff.json");
        let o = Command::new(env!("CARGO_BIN_EXE_ccsynth")).arg("validate").arg(name).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("invalid UTF-8") && !err.contains("panicked"), "{err}");
    }
}

#[test]
fn simulate_prints_timing() {
    let o = ccsynth(&["simulate", EXAMPLE], None);
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    assert_eq!(v["rounds"], 30);
    assert!((v["collective_time_ns"].as_f64().unwrap() - 43903.68).abs() < 1e-6);
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

/// The schedule JSON is the same wherever it goes: a pipe, stdout redirected to a file (written
/// in larger pieces there) and `--out`. 2.7 MB in the explicit form (1.1 MB compact), so the
/// file's buffer fills more than once.
#[test]
fn synth_writes_the_same_schedule_to_a_pipe_a_file_and_out() {
    let args = [
        "synth",
        "--algo",
        "greedy",
        "--topology",
        "torus:12x12",
        "--collective",
        "all_reduce",
        "--size",
        "64MiB",
        "--format",
        "explicit",
    ];
    let dir = std::env::temp_dir().join(format!("ccsynth-where-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (redirected, out) = (dir.join("stdout.json"), dir.join("out.json"));
    let piped = ccsynth(&args, None);
    assert_eq!(piped.status.code(), Some(0), "{}", String::from_utf8_lossy(&piped.stderr));
    let status = Command::new(env!("CARGO_BIN_EXE_ccsynth"))
        .args(args)
        .stdout(Stdio::from(std::fs::File::create(&redirected).unwrap()))
        .status()
        .unwrap();
    assert!(status.success());
    let o = ccsynth(&[&args[..], &["--out", out.to_str().unwrap()]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // The stats hold wall times; everything else is the same byte for byte.
    let without_stats = |bytes: &[u8]| {
        assert!(bytes.len() > 2 << 20 && bytes.ends_with(b"\n"), "{} bytes", bytes.len());
        let mut v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        v.as_object_mut().unwrap().remove("stats").expect("stats");
        serde_json::to_string(&v).unwrap()
    };
    let piped = without_stats(&piped.stdout);
    assert_eq!(without_stats(&std::fs::read(&redirected).unwrap()), piped);
    assert_eq!(without_stats(&std::fs::read(&out).unwrap()), piped);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A search flag the algorithm does not read is named in a note (it was ignored without a
/// word), and the schedule is written as before.
#[test]
fn synth_notes_the_flags_its_algorithm_does_not_read() {
    let target = ["synth", "--topology", "ring:4", "--collective", "all_gather", "--size", "1MiB", "--json"];
    let run = |extra: &[&str]| {
        let o = ccsynth(&[&target[..], extra].concat(), None);
        assert_eq!(o.status.code(), Some(0), "{extra:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let said = run(&["--algo", "ring", "--window", "3", "--seeds", "2", "--threads", "1"]);
    assert!(said.contains("note: --algo ring does not read --seeds, --window: ignored"), "{said}");
    let said = run(&["--algo", "greedy", "--window", "3", "--seeds", "2"]);
    assert!(said.contains("note: --algo greedy does not read --window: ignored"), "{said}");
    // --effort sets the default time limit of the algorithms that read it only (a ring ran
    // with 600 s for it, the effort ignored).
    for extra in [&[][..], &["--time-limit", "5"][..]] {
        let said = run(&[&["--algo", "ring", "--effort", "thorough"][..], extra].concat());
        assert!(said.contains("note: --algo ring does not read --effort: ignored"), "{said}");
    }
    // `auto` reads every one of them.
    let said = run(&["--window", "3", "--seeds", "2", "--effort", "thorough", "--time-limit", "30"]);
    assert!(!said.contains("does not read"), "{said}");
    // `regenerate`'s fresh run says so too (it was silent).
    let dir = std::env::temp_dir().join(format!("ccsynth-unread-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stored = dir.join("s.json");
    let o = ccsynth(&[&target[..], &["--algo", "ring", "--out", stored.to_str().unwrap()][..]].concat(), None);
    assert_eq!(o.status.code(), Some(0));
    let again = ["regenerate", stored.to_str().unwrap(), "--fail-link", "0-1", "--summary", "--algo", "ring"];
    let o = ccsynth(&[&again[..], &["--effort", "thorough", "--seeds", "2"][..]].concat(), None);
    assert_eq!(o.status.code(), Some(0));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("note: --algo ring does not read --seeds, --effort: ignored"), "{said}");
    std::fs::remove_dir_all(&dir).unwrap();
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
    // The summary says when the time limit cut candidates (only the JSON said so). Whether
    // 0.1 s cuts the greedy's all-to-all depends on the machine: the line follows the file.
    let dir = std::env::temp_dir().join(format!("ccsynth-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("cut.json");
    let a2a = ["--topology", "torus:8x8", "--collective", "all_to_all", "--size", "64MiB", "--time-limit", "0.1"];
    let o = ccsynth(&[&["synth"][..], &a2a, &["--summary", "--out", out.to_str().unwrap()]].concat(), None);
    if o.status.code() == Some(0) {
        let cut = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&out).unwrap()).unwrap()["stats"]
            ["portfolio"]["cut"]
            .as_bool()
            .unwrap();
        let said = String::from_utf8_lossy(&o.stdout);
        assert_eq!(said.contains("the time limit, 0.1 s, cut "), cut, "{said}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn people_get_a_summary_and_every_flag_has_help() {
    // A broadcast's chunks are the root's buffer's: counted, not "per NPU".
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "ring:4",
            "--collective",
            "broadcast",
            "--root",
            "0",
            "--size",
            "1MiB",
            "--chunks-per-npu",
            "4",
            "--summary",
        ],
        None,
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("collective      broadcast of 1 MiB on 4 NPUs, 4 chunks\n"), "{text}");
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
    // `baseline` has no --compare: its summary points at `compare` (it said to add --compare,
    // which `baseline` refuses).
    assert!(text.starts_with("algorithm       ring\n") && text.contains("(`ccsynth compare` builds them)"), "{text}");
    assert!(!text.contains("--compare"), "{text}");
    assert!(text.contains("steps           3 rounds, 12 transfers"), "{text}");
    // One of a thing is one, not "1 rounds" (issue 66, rough edge 10).
    let direct = ["baseline", "--algo", "direct", "--topology", "fc:4", "--collective", "all_gather", "--size", "4KiB"];
    let o = ccsynth(&[&direct[..], &["--summary"]].concat(), None);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("steps           1 round, 12 transfers"), "{text}");
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
            "bucket-bidir",
            "--compare",
            "--summary",
        ],
        None,
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with("best baseline")).unwrap();
    assert!(line.starts_with("best baseline   bucket-bidir, ") && line.ends_with("this schedule is as fast"), "{text}");
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
    // so (and the lowest price), not that none ran (at 2 MiB: at 4 MiB bucket-bidir, rerouted
    // around the link, is priced below the greedy's schedule and built).
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            "torus:4x4",
            "--collective",
            "all_reduce",
            "--size",
            "2MiB",
            "--fail-link",
            "0-1",
            "--summary",
        ],
        None,
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with("best baseline")).unwrap();
    assert!(
        line.starts_with("best baseline   none simulated: each bounded above this schedule first (the lowest bound, "),
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
    assert_eq!(json(&o)["seed"], 0, "the row's seed is echoed");
    // --seed takes the row's seed (it had none), echoed in JSON and in the table; without
    // --with-synth there is no row for it to seed.
    let ring6 = ["compare", "--topology", "ring:6", "--collective", "all_reduce", "--size", "1MiB"];
    let o = ccsynth(&[&ring6[..], &["--with-synth", "--seed", "5", "--json"]].concat(), None);
    assert_eq!(json(&o)["seed"], 5, "{}", String::from_utf8_lossy(&o.stderr));
    let o = ccsynth(&[&ring6[..], &["--with-synth", "--seed", "5"]].concat(), None);
    assert!(String::from_utf8_lossy(&o.stdout).contains("auto's row: seed 5\n"));
    let o = ccsynth(&[&ring6[..], &["--seed", "5"]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--with-synth"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = ccsynth(&ring6, None);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("seed"));
    let o = ccsynth(&["compare", "--topology", "ring:6", "--tenants", "x.json"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unexpected argument '--tenants'"));
    // A baseline named twice is refused (it was two identical rows, both best); a table of
    // times of 0 (one NPU: nothing to move) says "-" where the ratio is undefined, not NaN.
    let o = ccsynth(
        &["compare", "--topology", "ring:6", "--collective", "all_reduce", "--size", "1MiB", "--algos", "ring, ring"],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--algos: ring is named twice"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = ccsynth(&["compare", "--topology", "ring:1", "--collective", "all_reduce", "--size", "1MiB"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains(" ring ") && !table.contains("NaN"), "{table}");
    // One NPU, not "1 NPUs"; no bandwidth where nothing took time ("-", not 0.00); and a
    // schedule of no transfers moved 0 bytes, not -0.
    assert!(table.starts_with("all_reduce of 1 MiB on 1 NPU\n") && !table.contains("0.00 "), "{table}");
    let one = ["--topology", "ring:1", "--collective", "all_reduce", "--size", "1MiB"];
    let o = ccsynth(&[&["synth"][..], &one, &["--json"]].concat(), None);
    let t = ccsynth(&["simulate", "-"], Some(&String::from_utf8_lossy(&o.stdout)));
    let said = String::from_utf8_lossy(&t.stdout);
    assert!(said.contains("\"bytes_on_links\": 0.0") && !said.contains("-0.0"), "{said}");
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
    // Each names its flag and the value given (`--size 0` said only what it expected, and
    // `--size -5` was clap's "unexpected argument '-5'").
    let ag = ["synth", "--topology", "ring:4", "--collective", "all_gather"];
    for (extra, said) in [
        (&["--size", "0"][..], "--size: 0: expected a size of at least 1 byte"),
        (&["--size", "-5"], "--size: invalid size \"-5\": a size cannot be negative"),
        (&["--size", "1KiB", "--chunks-per-npu", "0"], "--chunks-per-npu: 0: expected at least 1"),
        (&["--size", "1KiB", "--chunks-per-npu", "-1"], "'--chunks-per-npu <CHUNKS_PER_NPU>': \"-1\""),
    ] {
        let o = ccsynth(&[&ag[..], extra].concat(), None);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(said), "{extra:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

/// Issue 66, rough edges 6 and 7: a topology file whose NPUs fall apart is named as the
/// topology when no `--group` was given, and an algorithm that does not serve the collective
/// is refused with the exit code the README's table gives it (2) and the algorithms that do.
#[test]
fn refusals_name_what_the_command_said() {
    let dir = std::env::temp_dir().join(format!("ccsynth-cli-parts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("two-pairs.json");
    let link =
        |u: u32, v: u32| serde_json::json!({"src": u, "dst": v, "bandwidth_gb_per_s": 100.0, "latency_ns": 500.0});
    let topo = serde_json::json!({"npus": 4, "links": [link(0, 1), link(1, 0), link(2, 3), link(3, 2)]});
    std::fs::write(&file, topo.to_string()).unwrap();
    let f = file.to_str().unwrap();
    let o = ccsynth(&["synth", "--topology", f, "--collective", "all_gather", "--size", "1MiB"], None);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("--topology: the collective's NPUs are not connected where it needs them"), "{said}");
    assert!(said.contains("it falls into 2 parts (NPUs [0, 1]; NPUs [2, 3])"), "{said}");
    assert!(!said.contains("--group:"), "no --group was given: {said}");
    // With a group that spans both parts, the group is named.
    let o =
        ccsynth(&["synth", "--topology", f, "--collective", "all_gather", "--size", "1MiB", "--group", "0,2"], None);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("--group: the collective's NPUs are not connected"), "{said}");
    // And with a group inside one part it runs.
    let o =
        ccsynth(&["synth", "--topology", f, "--collective", "all_gather", "--size", "1MiB", "--group", "2,3"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).ok();
    // `baseline` lists the baselines only (it refuses the synthesizers it listed as choices).
    for (verb, algo, listed) in [
        ("synth", "mst", "--algo: mst does not support all_reduce; these serve all_reduce: auto, greedy"),
        ("baseline", "mst", "--algo: mst does not support all_reduce; these baselines do: ring, "),
        ("baseline", "nope", "--algo: \"nope\": expected a baseline serving all_reduce: ring, "),
    ] {
        let o = ccsynth(
            &[verb, "--algo", algo, "--topology", "ring:4", "--collective", "all_reduce", "--size", "1MiB"],
            None,
        );
        assert_eq!(o.status.code(), Some(2), "{verb}");
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(said.contains(listed), "{said}");
        assert!(said.contains(", ring-bidir,") && said.contains("bucket") && !said.contains(" mst,"), "{said}");
        assert_eq!(verb == "synth", said.contains("greedy"), "{said}");
    }
    // The README's table gives this refusal exit 2, by name.
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let row = readme.lines().find(|l| l.starts_with("| 2 |")).unwrap();
    assert!(row.contains("an `--algo` that does not serve the collective"), "{row}");
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
    // With --algo, that entry alone (the flag was ignored); a synthesizer is refused.
    for (algo, want) in [("ring", "ring"), ("kolmakov-r2", "kolmakov-r<R>")] {
        let o = ccsynth(&["baseline", "--list", "--algo", algo], None);
        let listed: Vec<serde_json::Value> = json(&o).as_array().unwrap().clone();
        assert_eq!((listed.len(), listed[0]["name"].as_str()), (1, Some(want)), "{algo}");
    }
    let o = ccsynth(&["baseline", "--list", "--algo", "greedy"], None);
    assert_eq!(o.status.code(), Some(2));
    // kolmakov-r0 is kolmakov: said so, as kolmakov-r64 gets its range (it got "expected a
    // baseline serving …").
    let o = ccsynth(
        &["baseline", "--algo", "kolmakov-r0", "--topology", "ring:8", "--collective", "all_reduce", "--size", "4KiB"],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("kolmakov-r0 is R = 0, which is kolmakov itself"));
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
    // A group's comparison counts the group's NPUs, in the header, the JSON and busbw's
    // 2(p − 1)/p (4 of ring:8's NPUs were counted as 8: busbw × 1.75 instead of × 1.5).
    let grouped = ["compare", "--topology", "ring:8", "--collective", "all_reduce", "--size", "1MiB"];
    let grouped = [&grouped[..], &["--group", "0,1,2,3", "--algos", "direct"]].concat();
    let o = ccsynth(&grouped, None);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.lines().next(), Some("all_reduce of 1 MiB on 4 NPUs"), "{text}");
    let row = text.lines().find(|l| l.trim_start().starts_with("direct")).expect("a direct row");
    let cells: Vec<f64> = row.split_whitespace().skip(2).take(2).map(|c| c.parse().unwrap()).collect();
    assert!((cells[1] / cells[0] - 1.5).abs() < 0.01, "busbw = algbw × 1.5: {row}");
    assert_eq!(json(&ccsynth(&[&grouped[..], &["--json"]].concat(), None))["npus"], 4);
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
    // Each tenant gives its own chunks: --chunks-per-npu beside the list is refused (it was
    // ignored), as --size and --collective are.
    let o =
        ccsynth(&["synth", "--topology", "mesh:3x3", "--tenants", f.to_str().unwrap(), "--chunks-per-npu", "3"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("'--tenants <TENANTS>' cannot be used with '--chunks-per-npu"));
}

#[test]
fn regenerate_repairs_a_schedule_file_and_runs_it_afresh() {
    // Nothing failed: synthesized afresh, and the summary says so (it spoke of slowed links).
    let o = ccsynth(&["regenerate", EXAMPLE, "--summary"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("failed          nothing: the same topology, synthesized afresh"), "{said}");
    assert!(
        said.contains("(the schedule as it stands: nothing to reroute round,") && !said.contains("slowed"),
        "{said}"
    );
    // The example: a ring all-reduce on a 4x4 torus. Link 0-1 fails.
    let o = ccsynth(&["regenerate", EXAMPLE, "--fail-link", "0-1", "--json"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let r = &v["stats"]["regeneration"];
    assert!((r["previous_collective_time_ns"].as_f64().unwrap() - 43903.68).abs() < 1e-6, "{r}");
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
    // From stdin, with the fresh run a slow baseline: the repair is kept (recursive doubling
    // 87.9 us against the repair's 53.1; `direct`, relayed, ties the repair since relays store
    // and forward, and a tie keeps the fresh schedule).
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let o = ccsynth(&["regenerate", "-", "--fail-link", "0-1", "--algo", "recursive-doubling", "--json"], Some(&text));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&o)["stats"]["regeneration"]["kept"], "repair");
    // A kept repair is not called auto's pick: an all-to-all that avoids link 0-1, on torus:4x4
    // whose 0-1 takes 1 ms, slowed a hair more elsewhere, is kept as it stands (397.5 us)
    // against auto's fresh run (438.2 us); it read "repair (auto's fastest of 12 candidates)".
    let args = ["synth", "--topology", "torus:4x4", "--collective", "all_to_all", "--size", "64MiB", "--json"];
    let mut avoiding = json(&ccsynth(&[&args[..], &["--fail-link", "0-1"]].concat(), None));
    avoiding["topology"] = json(&ccsynth(&["topology", "torus:4x4", "--degrade-link", "0-1@lat=1e6"], None));
    for stale in ["collective_time_ns", "lower_bound_ns", "lower_bounds", "stats"] {
        avoiding.as_object_mut().unwrap().remove(stale);
    }
    let o = ccsynth(&["regenerate", "-", "--degrade-link", "4-5@lat=501", "--summary"], Some(&avoiding.to_string()));
    let said = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(said.contains("algorithm       repair\n") && said.contains("kept            the repair"), "{said}");
    // The summary puts it beside the previous schedule.
    let o = ccsynth(&["regenerate", EXAMPLE, "--fail-npu", "5", "--summary"], None);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("regenerated     from") && said.contains("NPU 5"), "{said}");
    // And names what failed (it named only what was slowed): NPU 5's links go with it.
    assert!(said.contains("\nfailed          NPU 5\n"), "{said}");
    let both = ["regenerate", EXAMPLE, "--fail-npu", "5", "--fail-link", "0-1", "--fail-link", "2-3", "--json"];
    let r = &json(&ccsynth(&both, None))["stats"]["regeneration"];
    assert_eq!(
        (&r["failed_links"], &r["failed_npus"]),
        (&serde_json::json!([[0, 1], [1, 0], [2, 3], [3, 2]]), &serde_json::json!([5])),
        "{r}"
    );
    let mut one_way = both.to_vec();
    one_way.splice(6.., ["--directed", "--summary"]);
    let said = String::from_utf8_lossy(&ccsynth(&one_way, None).stdout).into_owned();
    assert!(said.contains("\nfailed          link 0->1; NPU 5\n"), "{said}");
    // Bad input: a link the topology lacks, an unreadable file, an invalid schedule: exit 2.
    let o = ccsynth(&["regenerate", EXAMPLE, "--fail-link", "0-9"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no link 0->9"), "{}", String::from_utf8_lossy(&o.stderr));
    // Failing every NPU of a subgroup's collective is named as the failed NPUs (it said
    // "--group: expected at least one live NPU", a flag regenerate does not have).
    let group =
        ["synth", "--topology", "torus:4x4", "--collective", "all_gather", "--size", "1MiB", "--group", "0,1,5"];
    let text = String::from_utf8(ccsynth(&[&group[..], &["--json"]].concat(), None).stdout).unwrap();
    let o = ccsynth(&["regenerate", "-", "--fail-npu", "0", "--fail-npu", "1", "--fail-npu", "5"], Some(&text));
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("--fail-npu: every NPU of the collective's group (0, 1, 5) fails"), "{said}");
    // Failures that cut NPU 0 off are named as the failures, with the NPU they cut off.
    let cut = ["--fail-link", "0-1", "--fail-link", "0-3", "--fail-link", "0-4", "--fail-link", "0-12"];
    let o = ccsynth(&[&["regenerate", EXAMPLE][..], &cut[..]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("--fail-link: they split the collective's group: it falls into 2 parts (NPU 0; 15 NPUs from 1)"),
        "{said}"
    );
    // The same from `synth --fail-link`; with a `--group` inside the larger part it runs.
    let synth = ["synth", "--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB"];
    let o = ccsynth(&[&synth[..], &cut[..]].concat(), None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--fail-link: they split the collective's group"));
    let o = ccsynth(&[&synth[..], &cut[..], &["--group", "1,2,5", "--json"][..]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // A split the collective does not need runs, as the same topology read from a file does:
    // the switch no longer sends to NPU 0, and a broadcast from 0 still reaches every NPU.
    let one_way = ["synth", "--topology", "switch:4", "--fail-link", "4-0", "--directed", "--size", "1MiB", "--json"];
    let o = ccsynth(&[&one_way[..], &["--collective", "broadcast", "--root", "0"][..]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let o = ccsynth(&[&one_way[..], &["--collective", "all_gather"][..]].concat(), None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--fail-link: they split the collective's group"));
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
    // A negative number is the flag's value, checked as any other (not "unexpected argument
    // '-1'" with a tip to write `-- -1`).
    let e = err(&[&["synth"][..], &ag, &["--time-limit", "-1"]].concat());
    assert!(e.starts_with("ccsynth: --time-limit: -1: expected seconds in (0, 86400]"), "{e}");
    let e = err(&[&["synth"][..], &ag, &["--discretization", "-5"]].concat());
    assert!(e.starts_with("ccsynth: --discretization: -5: expected nanoseconds > 0"), "{e}");
    let e = err(&[&["synth"][..], &ag, &["--seed", "-3"]].concat());
    assert!(e.contains("invalid value '-3' for '--seed <SEED>'"), "{e}");
    // `compare` checks the request as `synth` does, and --algos none of which serves it is a
    // mistake in the command (both were a table of refusals and exit 0).
    let e = err(&["compare", "--topology", "ring:4", "--collective", "broadcast", "--size", "1MiB"]);
    assert!(e.starts_with("ccsynth: --root: broadcast needs a root NPU"), "{e}");
    let e = err(&["compare", "--topology", "ring:4", "--collective", "all_reduce", "--size", "1MiB", "--algos", "mst"]);
    assert!(e.contains("--algos: none of them serves this request (mst: mst does not support all_reduce"), "{e}");
    // Every one refusing the topology exits 3, as `baseline --algo pxn` does there (it was 2).
    let pxn = ["compare", "--topology", "torus:4x4", "--collective", "all_to_all", "--size", "1MiB", "--algos", "pxn"];
    let o = ccsynth(&pxn, None);
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("pxn does not support this topology"));
    // A limit too short for any schedule names the flag, not the API's field.
    let ar = ["--topology", "torus:16x16", "--collective", "all_reduce", "--size", "256MiB"];
    // It exits 4 (the time limit), not 2: the request itself was fine.
    let o = ccsynth(&[&["synth"][..], &ar, &["--algo", "greedy", "--time-limit", "0.0001"]].concat(), None);
    assert_eq!(o.status.code(), Some(4));
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(e.contains("ran out before any schedule was found; raise --time-limit"), "{e}");
    assert!(!e.contains("options.time_limit_s"), "{e}");
    // A tiny limit is written short (1e-300 was 300 digits).
    let o = ccsynth(&[&["synth"][..], &ar, &["--algo", "greedy", "--time-limit", "1e-300"]].concat(), None);
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(e.contains("the time limit of 1e-300 s ran out"), "{e}");
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
    // An array of no objects is no command's output (it read "benchmark output").
    let array_file = dir.join("array.json");
    std::fs::write(&array_file, "[1, 2]").unwrap();
    let svg = dir.join("t.svg");
    // The exports and the trace (a JSON or XML error named none of them).
    let [plan, xml, trace] = ["plan.json", "a.xml", "trace.json"].map(|f| dir.join(f));
    for (args, file) in
        [(&["export", "--format", "mscclpp-json"][..], &plan), (&["export", "--format", "msccl-xml"], &xml)]
    {
        let o = ccsynth(&[args, &[EXAMPLE, "--out", file.to_str().unwrap()]].concat(), None);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = ccsynth(&["simulate", EXAMPLE, "--trace", trace.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    for (verb, file, what) in [
        (&["simulate"][..], &cmp_file, "this is a comparison (`compare --json`), not a schedule"),
        (&["validate"][..], &cmp_file, "this is a comparison (`compare --json`), not a schedule"),
        (&["plot", "timeline"][..], &bench_file, "this is benchmark output (`bench --json`), not a schedule"),
        (&["validate"][..], &array_file, "this is a JSON array, not a schedule"),
        (
            &["validate"][..],
            &plan,
            "this is an MSCCL++ execution plan (`export --format mscclpp-json`), not a schedule",
        ),
        (
            &["simulate"][..],
            &xml,
            "this is XML (an MSCCL algorithm file, `export --format msccl-xml`?), not a schedule",
        ),
        (&["validate"][..], &trace, "this is a Chrome trace (`simulate --trace`), not a schedule"),
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
    // And where a topology goes (a comparison read "collective: unknown field").
    for file in [&cmp_file, &plan] {
        let o = ccsynth(&["topology", file.to_str().unwrap()], None);
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("not a topology: a topology has \"npus\" and \"links\""), "{e}");
    }
    // Text after a document is malformed JSON, in every file a verb reads (a schedule and then
    // another read as the first; a topology and a tenants list likewise).
    let made =
        ccsynth(&["synth", "--topology", "ring:4", "--collective", "all_gather", "--size", "4KiB", "--json"], None);
    let schedule = String::from_utf8_lossy(&made.stdout).into_owned();
    // --directed with no link to direct says so (it was ignored).
    for verb in [
        &["topology", "ring:4", "--directed"][..],
        &[
            "synth",
            "--topology",
            "ring:4",
            "--collective",
            "all_gather",
            "--size",
            "4KiB",
            "--fail-npu",
            "1",
            "--directed",
        ][..],
    ] {
        let e = err(verb);
        assert!(e.contains("--directed: no --fail-link or --degrade-link for it to apply to"), "{verb:?}: {e}");
    }
    // And the reverse: a schedule where a topology goes (it read "algorithm: unknown field").
    let as_topology = dir.join("schedule.json");
    std::fs::write(&as_topology, &schedule).unwrap();
    let e =
        err(&["synth", "--topology", as_topology.to_str().unwrap(), "--collective", "all_gather", "--size", "1MiB"]);
    assert!(e.contains("schedule.json: this is a schedule, not a topology"), "{e}");
    let topology = String::from_utf8_lossy(&ccsynth(&["topology", "ring:4"], None).stdout).into_owned();
    let tenants = r#"[{"kind": "all_gather", "size_bytes": 4096}]"#;
    for (name, text, verb) in [
        ("twice.json", format!("{schedule}{schedule}"), "validate"),
        ("tail.json", format!("{schedule} garbage"), "simulate"),
        ("topology.json", format!("{topology} x"), "topology"),
        ("tenants.json", format!("{tenants} x"), "synth"),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        let path = file.to_str().unwrap();
        let args: Vec<&str> = match verb {
            "synth" => vec!["synth", "--topology", "ring:4", "--tenants", path],
            v => vec![v, path],
        };
        let e = err(&args);
        assert!(e.contains(&format!("{path}: ")) && e.contains("trailing characters"), "{args:?}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 66, rough edge 1: an output path that cannot be written is refused before any work
/// (a 600 s thorough run was lost to a missing directory), naming the flag, the path and why.
#[test]
fn an_output_path_is_checked_before_the_work() {
    let dir = std::env::temp_dir().join(format!("ccsynth-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("nodir").join("x.json");
    let missing = missing.to_str().unwrap();
    let target = ["--topology", "torus:4x4", "--collective", "all_reduce", "--size", "1MiB"];
    let cases: [(Vec<&str>, String); 6] = [
        (
            [&["synth"][..], &target, &["--out", missing]].concat(),
            format!("the directory {}", dir.join("nodir").display()),
        ),
        ([&["baseline", "--algo", "ring"][..], &target, &["--out", missing]].concat(), "does not exist".into()),
        ([&["synth"][..], &target, &["--out", dir.to_str().unwrap()]].concat(), "a directory; name a file".into()),
        (vec!["export", "--format", "msccl-xml", EXAMPLE, "--out", missing], "does not exist".into()),
        (vec!["simulate", EXAMPLE, "--trace", missing], "--trace".into()),
        (vec!["plot", "timeline", EXAMPLE, "--out", missing], "does not exist".into()),
    ];
    for (args, says) in cases {
        let o = ccsynth(&args, None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let flag = if args.contains(&"--trace") { "--trace" } else { "--out" };
        assert!(err.contains(flag) && err.contains(&says), "{args:?}: {err}");
        // Refused before the run: no progress, no summary, nothing on stdout.
        assert!(o.stdout.is_empty() && !err.contains("wrote"), "{args:?}: {err}");
    }
    assert!(!dir.join("nodir").exists());
    // An output that names a file the command reads is refused, and the file left as it was.
    let input = dir.join("in.json");
    std::fs::copy(EXAMPLE, &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let same = input.to_str().unwrap();
    // The same file by another name.
    let dotted = format!("{}/./in.json", dir.display());
    let topology = dir.join("t.json");
    std::fs::write(&topology, ccsynth(&["topology", "ring:4"], None).stdout).unwrap();
    let t = topology.to_str().unwrap();
    // And by a hard link, which has a path of its own (it overwrote the input).
    let linked = dir.join("linked.json");
    std::fs::hard_link(&input, &linked).unwrap();
    let linked = linked.to_str().unwrap();
    let ag = ["--collective", "all_gather", "--size", "4KiB"];
    let cases: [Vec<&str>; 9] = [
        vec!["simulate", same, "--trace", same],
        vec!["simulate", same, "--trace", linked],
        vec!["plot", "timeline", same, "--out", linked],
        vec!["regenerate", linked, "--fail-link", "0-1", "--out", same],
        vec!["export", "--format", "msccl-xml", same, "--out", &dotted],
        vec!["plot", "timeline", same, "--out", same],
        vec!["regenerate", same, "--fail-link", "0-1", "--out", same],
        [&["synth", "--topology", t][..], &ag, &["--out", t]].concat(),
        [&["baseline", "--algo", "ring", "--topology", t][..], &ag, &["--out", t]].concat(),
    ];
    for args in cases {
        let o = ccsynth(&args, None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("the same file as the input") && err.contains("name another file"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // Stdin redirected from the file is that file (`simulate - --trace in.json < in.json`).
    for args in [vec!["simulate", "-", "--trace", same], vec!["regenerate", "-", "--fail-link", "0-1", "--out", linked]]
    {
        let o = Command::new(env!("CARGO_BIN_EXE_ccsynth"))
            .args(&args)
            .stdin(std::fs::File::open(&input).unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("the same file as the input on stdin"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&input).unwrap(), before);
    assert!(std::fs::read_to_string(&topology).unwrap().contains("\"npus\""));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 66, rough edge 4: a reader that stops reading (`| head -c 10`) ends the command
/// quietly with exit 0, not "Broken pipe (os error 32)" and exit 2.
#[test]
fn a_reader_that_goes_away_is_a_quiet_exit_0() {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccsynth"))
        .args(["baseline", "--algo", "ring", "--topology", "ring:64", "--collective", "all_gather", "--size", "64MiB"])
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut head = [0u8; 10];
    out.read_exact(&mut head).unwrap();
    assert_eq!(&head[..2], b"{\"");
    drop(out);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("Broken pipe") && !err.contains("error"), "{err}");
}

/// Issue 66, rough edge 8: a size written as two words is refused with the hint of how to
/// write it; `1G` is the documented 10^9 bytes.
#[test]
fn a_size_in_two_words_gets_a_hint() {
    let o = ccsynth(&["synth", "--topology", "ring:4", "--collective", "all_gather", "--size", "1", "GiB"], None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("hint: a size is one word: --size 1GiB"), "{err}");
    let o = ccsynth(&["synth", "--topology", "ring:4", "--collective", "all_gather", "--sizee", "1"], None);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("hint: a size"));
    let o = ccsynth(
        &["baseline", "--algo", "ring", "--topology", "ring:4", "--collective", "all_gather", "--size", "1G"],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&o)["collective"]["size_bytes"], 1_000_000_000u64);
}
