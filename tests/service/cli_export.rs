//! The CLI's output formats: MSCCL XML, MSCCL++ plans and Chakra traces from `export` and
//! `synth`, and `simulate`'s traces and `plot`'s drawings.

use super::cli::{EXAMPLE, ccsynth, json};

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
    // Sizes the API refuses, refused here too, whatever the format: --max-bytes 0 (an MSCCL++
    // plan read it as no upper limit) and a minimum above the maximum.
    for (format, sizes, says) in [
        ("mscclpp-json", vec!["--max-bytes", "0"], "--max-bytes 0"),
        ("json", vec!["--min-bytes", "1MiB", "--max-bytes", "1KiB"], "--min-bytes 1048576 is above --max-bytes 1024"),
    ] {
        let mut args = vec!["export", "--format", format];
        args.extend(sizes);
        args.push("-");
        let o = ccsynth(&args, Some(&text));
        assert_eq!(o.status.code(), Some(2), "{format}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // An MSCCL++ plan's 32-bit offsets reach so far: a --max-bytes beyond is written as that
    // reach, and a note says so; one within is written as asked, without a note.
    for (asked, cut) in [(1u64 << 40, true), (1 << 20, false)] {
        let asked_s = asked.to_string();
        let o = ccsynth(&["export", "--format", "mscclpp-json", "--max-bytes", &asked_s, "-"], Some(&text));
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let written = json(&o)["max_message_size"].as_u64().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if cut {
            assert!(written < asked, "{written}");
            let note =
                format!("--max-bytes {asked} is beyond what this plan's 32-bit offsets reach; written as {written}");
            assert!(err.contains(&note), "{err}");
        } else {
            assert_eq!(written, asked);
            assert!(!err.contains("note"), "{err}");
        }
    }
    // An MSCCL XML states at most 2^63 − 1: a --max-bytes beyond is written as that, and a
    // note says so (it was cut silently); 2^63 − 1 itself without a note.
    for (asked, cut) in [(u64::MAX, true), (i64::MAX as u64, false)] {
        let asked_s = asked.to_string();
        let o = ccsynth(&["export", "--format", "msccl-xml", "--max-bytes", &asked_s, "-"], Some(&text));
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains(&format!(r#"maxBytes="{}""#, i64::MAX)));
        let err = String::from_utf8_lossy(&o.stderr);
        let note =
            format!("--max-bytes {asked} is beyond the largest size an MSCCL XML states; written as {}", i64::MAX);
        assert_eq!(err.contains(&note), cut, "{err}");
    }
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
    // `--rank R`: rank R's view, the same plan with the other GPUs' blocks left out.
    let o = ccsynth(
        &["export", "--format", "mscclpp-json", "--msccl-name", "ag4", "--in-place", "--rank", "1", "-"],
        Some(&text),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let view: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((&view["name"], &view["gpus"][1]), (&plan["name"], &plan["gpus"][1]));
    assert_eq!(view["gpus"][0]["threadblocks"].as_array().map(Vec::len), Some(0));
    for (args, says) in [
        (["--format", "mscclpp-json", "--rank", "9"], "rank 9 is not a rank of the plan: its ranks are 0..=3"),
        (
            ["--format", "msccl-xml", "--rank", "1"],
            "--rank 1: only --format mscclpp-json and chakra-et have a per-rank view",
        ),
        // A flag the format does not read is refused (each was ignored).
        (
            ["--format", "mscclpp-json", "--msccl-proto", "ll"],
            "--msccl-proto LL: only --format msccl-xml names a protocol",
        ),
        (
            ["--format", "explicit", "--msccl-target", "rccl"],
            "--msccl-target rccl: only --format msccl-xml names an executor",
        ),
        (["--format", "json", "--prefix", "p"], "--prefix p: only --format chakra-et names its files"),
        (["--format", "mscclpp-json", "--msccl-name", ""], "--msccl-name '': name the algorithm"),
        // XML 1.0 allows no control character: the file was not well-formed.
        (["--format", "msccl-xml", "--msccl-name", "a\u{b}b"], "--msccl-name: holds the control character U+000B"),
        (
            ["--format", "json", "--msccl-name", "x"],
            "--msccl-name x: only --format msccl-xml and mscclpp-json name the algorithm",
        ),
    ] {
        let o = ccsynth(&[&["export"][..], &args[..], &["-"][..]].concat(), Some(&text));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let o = ccsynth(&["export", "--format", "mscclpp-json", "--in-place", "--msccl-proto", "LL", "-"], Some(&text));
    assert_eq!(o.status.code(), Some(2));
    // synth's flags that shape schedule v1 and its comparison go with the formats that write it
    // (with an executor's file they were ignored).
    for flag in ["--compare", "--json", "--pretty", "--summary"] {
        let args = [
            "synth",
            "--topology",
            "ring:4",
            "--collective",
            "all_reduce",
            "--size",
            "1MiB",
            "--format",
            "msccl-xml",
            flag,
        ];
        let o = ccsynth(&args, None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(&format!("{flag}: only --format json and explicit write schedule v1")), "{err}");
    }
    // Chakra traces without their directory are refused before the schedule is read (it was
    // refused only after a check of the whole schedule).
    let o = ccsynth(&["export", "--format", "chakra-et", "-"], Some("not a schedule"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("name their directory with --out DIR"), "{err}");
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
    // Past the whole export's cells (ring:16 at 16,385 chunks per NPU: 2^22 + 256) it is
    // refused from the counts, and no directory is made for it.
    let many = ["baseline", "--algo", "ring", "--topology", "ring:16", "--collective", "all_reduce", "--size", "1GiB"];
    let big = ccsynth(&[&many[..], &["--chunks-per-npu", "16385", "--json"]].concat(), None);
    assert_eq!(big.status.code(), Some(0), "{}", String::from_utf8_lossy(&big.stderr));
    let refused = dir.join("refused");
    let o = ccsynth(
        &["export", "--format", "chakra-et", "--out", refused.to_str().unwrap(), "-"],
        Some(&String::from_utf8_lossy(&big.stdout)),
    );
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("(NPU, slot) cells the whole export replays"));
    assert!(!refused.exists());
    // `--rank R`: rank R's trace alone, the same file.
    let one = dir.join("one");
    let o = ccsynth(
        &["export", "--format", "chakra-et", "--prefix", "ag", "--rank", "2", "--out", one.to_str().unwrap(), "-"],
        Some(&text),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let written: Vec<_> = std::fs::read_dir(&one).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(written, ["ag.2.et"]);
    assert_eq!(std::fs::read(one.join("ag.2.et")).unwrap(), std::fs::read(abs.join("ag.2.et")).unwrap());
    let o =
        ccsynth(&["export", "--format", "chakra-et", "--rank", "4", "--out", one.to_str().unwrap(), "-"], Some(&text));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--rank: 4: expected a rank in 0..=3"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Into the same directory again: nothing older of the prefix, no warning; then a mesh's
    // export, which has no network file, is warned of the ring's it did not write.
    let export_ag = ["export", "--format", "chakra-et", "--prefix", "ag", "--out", out.to_str().unwrap(), "-"];
    let o = ccsynth(&export_ag, Some(&text));
    assert_eq!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", String::from_utf8_lossy(&o.stderr));
    let mesh =
        ["baseline", "--algo", "ring", "--topology", "mesh:2x3", "--collective", "all_gather", "--size", "64KiB"];
    let o = ccsynth(&export_ag, Some(&String::from_utf8(ccsynth(&mesh, None).stdout).unwrap()));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("also holds ag.network.yml of prefix ag, which this export did not write"), "{said}");
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
    // An --out that is a file is named as the flag, not blamed on the schedule.
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let o = ccsynth(&["export", "--format", "chakra-et", "--out", file.to_str().unwrap(), "-"], Some(&text));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with(&format!("ccsynth: --out {}: a file, not a directory", file.display())), "{err}");
    let o = ccsynth(
        &["export", "--format", "chakra-et", "--prefix", "../up", "--out", out.to_str().unwrap(), "-"],
        Some(&text),
    );
    assert_eq!(o.status.code(), Some(2));
    // Named as the flag (it read "-: prefix: ...", as if the schedule were at fault).
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("ccsynth: --prefix: prefix \"../up\""), "{err}");
    // The schedule read, in the directory under a name the export writes (`ag.system.json`,
    // `ag.1.et`): refused before any file is written (it was replaced by the configuration).
    for name in ["ag.system.json", "ag.1.et"] {
        let input = out.join(name);
        std::fs::write(&input, &text).unwrap();
        let mut args = vec!["export", "--format", "chakra-et", "--prefix", "ag", "--out", out.to_str().unwrap()];
        if name.ends_with(".et") {
            args.extend(["--rank", "1"]);
        }
        args.push(input.to_str().unwrap());
        let o = ccsynth(&args, None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains("the same file as the input") && err.contains(name), "{err}");
        assert_eq!(std::fs::read_to_string(&input).unwrap(), text, "{name}: the input is kept");
    }
    // synth's topology file there under such a name is refused before anything else is read
    // (an unknown --algo would be named first), not after a synthesis of minutes.
    let topology = out.join("ag.network.yml");
    let t = ccsynth(&["topology", "ring:4"], None);
    std::fs::write(&topology, &t.stdout).unwrap();
    let o = ccsynth(
        &[
            "synth",
            "--topology",
            topology.to_str().unwrap(),
            "--collective",
            "all_gather",
            "--size",
            "1MiB",
            "--algo",
            "no-such-algorithm",
            "--format",
            "chakra-et",
            "--prefix",
            "ag",
            "--out",
            out.to_str().unwrap(),
        ],
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the same file as the input") && err.contains("ag.network.yml"), "{err}");
    assert_eq!(std::fs::read(&topology).unwrap(), t.stdout, "the topology is kept");
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
    // Runs on two fabrics of one NPU count are two charts, told apart by the topology (they
    // were one line with two points at each size).
    let mut runs = String::new();
    for topology in ["ring:4", "fc:4@bw=400"] {
        let args = ["compare", "--topology", topology, "--collective", "all_reduce", "--size", "1MiB", "--json"];
        runs += &String::from_utf8(ccsynth(&args, None).stdout).unwrap();
    }
    let p = ccsynth(&["plot", "goodput", "-"], Some(&runs));
    assert_eq!(p.status.code(), Some(0), "{}", String::from_utf8_lossy(&p.stderr));
    let text = String::from_utf8(p.stdout).unwrap();
    assert_eq!(text.matches(r#"data-title="all_reduce on 4 NPUs, topology "#).count(), 2, "{text}");
    // A run on one NPU takes no time: no goodput, refused rather than drawn at 0.
    let args = ["compare", "--topology", "switch:1", "--collective", "all_reduce", "--size", "1MiB", "--json"];
    let one = String::from_utf8(ccsynth(&args, None).stdout).unwrap();
    let p = ccsynth(&["plot", "goodput", "-"], Some(&one));
    assert_eq!(p.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&p.stderr).contains("no goodput to draw"));
    let bad = ccsynth(&["plot", "goodput", "-"], Some("{}"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("bench --suite sizes --json"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn export_and_synth_write_the_compact_and_the_explicit_form() {
    use ccsynth::schedule::Schedule;
    // The ring on ring:4 in 16 chunks per NPU: messages of 16 consecutive chunks.
    let args = [
        "synth",
        "--topology",
        "ring:4",
        "--collective",
        "all_reduce",
        "--size",
        "1MiB",
        "--chunks-per-npu",
        "16",
        "--algo",
        "ring",
        "--json",
    ];
    let o = ccsynth(&args, None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let compact = String::from_utf8(o.stdout).unwrap();
    // Rows, and the ring's 16 chunks a message one range.
    assert!(compact.contains(r#",16]],"reduce"]"#) && !compact.contains("precondition"), "{compact}");
    let doc = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
    assert!(doc(&compact)["stats"].is_object(), "synth's own fields are kept");
    let o = ccsynth(&[&args[..], &["--format", "explicit"]].concat(), None);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let explicit = String::from_utf8(o.stdout).unwrap();
    // No range (an array in a chunk list) and no row (a transfer array) in the explicit form.
    let ranged = |text: &str| text.contains(r#""chunks":[["#) || text.contains(r#""transfers":[["#);
    assert!(explicit.contains(r#""precondition":[[0,0],"#) && !ranged(&explicit), "{explicit}");
    assert!(doc(&explicit)["stats"].is_object());
    let (a, b) = (Schedule::from_json(&compact).unwrap(), Schedule::from_json(&explicit).unwrap());
    assert!(a == b, "the two forms read back different");
    // export turns either form into either, through a file too.
    let dir = std::env::temp_dir().join(format!("ccsynth-forms-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("explicit.json");
    let o = ccsynth(&["export", "--format", "explicit", "-", "--out", out.to_str().unwrap()], Some(&compact));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("\"precondition\"") && !ranged(&written));
    assert!(Schedule::from_json(&written).unwrap() == a);
    let o = ccsynth(&["export", "--format", "json", "-"], Some(&written));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let back = String::from_utf8(o.stdout).unwrap();
    assert!(back.contains(r#",16]],"reduce"]"#) && !back.contains("precondition"));
    assert!(Schedule::from_json(&back).unwrap() == a);
    // The runtimes' exports read the compact form as they read the explicit one.
    for format in ["msccl-xml", "mscclpp-json"] {
        let [a, b] =
            [&compact, &written].map(|text| ccsynth(&["export", "--format", format, "-"], Some(text.as_str())));
        assert_eq!((a.status.code(), b.status.code()), (Some(0), Some(0)), "{}", String::from_utf8_lossy(&a.stderr));
        assert!(a.stdout == b.stdout && !a.stdout.is_empty(), "{format}: the two forms export differently");
    }
    // An invalid schedule is refused in either form, as before.
    let broken = compact.replacen(r#",16]],"reduce"]"#, r#",15]],"reduce"]"#, 1);
    let o = ccsynth(&["export", "--format", "explicit", "-"], Some(&broken));
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
