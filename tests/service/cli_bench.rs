//! `ccsynth bench` through the CLI: the size sweep and the failures suite, and the sweep run
//! from outside the repository.

use super::cli::{ccsynth, json};
use std::process::Command;

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
/// below the 64 MiB; the flags refused by name elsewhere or when malformed.
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
        (&["bench", "--suite", "failures", "--size", "0"][..], "--size"),
        (&["bench", "--suite", "failures", "--effort", "quick"][..], "--effort"),
    ] {
        let o = ccsynth(args, None);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(named), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
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

/// The scale suite's quick rows through the CLI: every row ran, wrote a file, read it back
/// valid, and reports its ratio (to the bound; for the failure row, to the intact schedule
/// of the row before it) and a verdict on every part of its target.
#[test]
fn bench_scale_writes_checks_and_judges_every_row() {
    let o = ccsynth(&["bench", "--suite", "scale", "--quick", "--json"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = json(&o);
    let rows = rows.as_array().unwrap();
    let shapes: Vec<(&str, usize)> = rows
        .iter()
        .map(|r| (r["case"]["topology"].as_str().unwrap(), r["case"]["failed_links"].as_array().unwrap().len()))
        .collect();
    assert_eq!(
        shapes,
        [("torus:16x16", 0), ("torus:16x32", 0), ("torus:32x32", 0), ("torus:32x32", 3), ("torus:4x8x8", 0)]
    );
    for r in rows {
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["valid"], true, "{r}");
        assert!(r["met"].is_boolean() && r["file_mib"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["validate_s"].as_f64().is_some() && r["wall_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    for r in [&rows[0], &rows[1], &rows[2], &rows[4]] {
        let (t, b) = (r["time_us"].as_f64().unwrap(), r["bound_us"].as_f64().unwrap());
        assert!((r["ratio"].as_f64().unwrap() - t / b).abs() < 1e-9 && t >= b * (1.0 - 1e-9), "{r}");
    }
    // The regenerated all-reduce is measured against the intact 32x32 row's time.
    let (intact, failed) = (rows[2]["time_us"].as_f64().unwrap(), &rows[3]);
    let ratio = failed["ratio"].as_f64().unwrap();
    assert!((ratio - failed["time_us"].as_f64().unwrap() / intact).abs() < 1e-9, "{failed}");
    let o = ccsynth(&["bench", "--suite", "scale", "--quick", "--filter", "torus:16x16"], None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("| torus:16x16 | all_reduce | 64 MiB |") && table.lines().count() == 3, "{table}");
}

/// A scale row's file (hundreds of megabytes at 16,384 NPUs) is removed when the run is
/// stopped by SIGTERM or SIGINT while it exists (it was left in the temporary directory); the
/// suites' own flags are refused elsewhere, and a filter that names no case is an error.
#[test]
fn bench_cleans_up_when_stopped_and_refuses_flags_it_would_ignore() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let child = Command::new(env!("CARGO_BIN_EXE_ccsynth"))
            .args(["bench", "--suite", "scale", "--quick", "--filter", "torus:32x32"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let file = std::env::temp_dir().join(format!("ccsynth-bench-scale-{}.json", child.id()));
        let began = std::time::Instant::now();
        while !file.exists() && began.elapsed() < std::time::Duration::from_secs(120) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(file.exists(), "the row's file was never seen");
        // SAFETY: a signal to the child this test started.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let out = child.wait_with_output().unwrap();
        assert!(!out.status.success());
        assert!(!file.exists(), "signal {signal}: {} left behind", file.display());
    }
    for (args, says) in [
        (&["bench", "--suite", "ilp", "--runs", "2"][..], "--runs 2: only the greedy suite"),
        (&["bench", "--suite", "greedy", "--filter", "no such case"][..], "no case of the greedy suite"),
        (&["bench", "--runs", "0"][..], "0 is not in 1..=1000"),
    ] {
        let o = ccsynth(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}
