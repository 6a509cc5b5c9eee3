//! `synth --algo ilp` at the CLI: its search reported, its model dumped, its summary.

use super::cli::{ccsynth, json};

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
    // Optimal in its model, which the line says (auto may find faster outside it).
    let status = line.trim_start_matches("ilp").trim_start();
    assert!(status.starts_with("optimal in its model (its time-expanded network at this chunking);"), "{line}");
    assert!(line.contains("solves"), "{line}");
}
