//! The HTTP service, black-box over real TCP: each test starts the app on port 0 with a fresh
//! database (removed afterwards), on SQLite and on PostgreSQL (the same body twice; the macro
//! and the helpers are `harness`), and talks HTTP/1.1 to it.

use super::harness::*;
use ccsynth::api::ROUTES;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

on_both_databases!(
    health_metadata_and_metrics,
    topologies_are_idempotent_paginated_and_deletable,
    syntheses_wait_cache_and_serve_schedules,
    errors_are_problems_with_the_right_status,
    a_full_queue_is_a_429,
    jobs_can_be_cancelled_while_running,
    a_quick_job_runs_beside_a_long_one,
    batches_report_aggregate_progress,
    regeneration_avoids_the_failed_link,
    a_slow_link_is_a_failure_at_both_doors,
    the_validate_route_reports_both_verdicts,
    documented_examples_are_served,
    a_job_has_one_result_even_when_its_lease_lapses,
    a_topology_in_use_is_not_deleted,
    tokens_authenticate_and_jobs_belong_to_their_client,
    topologies_belong_to_the_clients_that_stored_them,
    a_heavy_client_does_not_starve_a_light_one,
    interactive_jobs_are_claimed_first_within_their_limits,
    oversized_requests_are_refused_before_they_are_built,
    identical_requests_in_flight_share_one_job,
    http_hygiene_every_error_is_a_problem,
    a_job_is_tried_a_fixed_number_of_times,
    a_result_too_large_to_store_fails_its_job,
    failed_jobs_name_their_kind,
    schedules_export_as_msccl_xml,
    sizes_may_be_written_as_the_cli_writes_them,
    large_schedules_are_stored_compressed,
    schedules_are_served_compact_and_explicit,
    concurrent_exports_share_one_computation_within_a_memory_budget,
    concurrent_validations_wait_for_the_memory_budget,
    a_large_topology_built_for_a_request_is_not_parsed_again,
);

fn sizes_may_be_written_as_the_cli_writes_them(db: Db) {
    let s = start(db);
    let req =
        json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": "64KiB"}, "algorithm": "ring"});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(req));
    assert_eq!(code, 201, "{job}");
    let sid = job["schedule_id"].as_str().unwrap();
    let (_, schedule) = call(&s, "GET", &format!("/v1/schedules/{sid}"), None);
    assert_eq!(schedule["collective"]["size_bytes"], 65536, "stored as an integer");
    // The same request with the number is the same job (served from the store).
    let req = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 65536}, "algorithm": "ring"});
    let (_, again) = call(&s, "POST", "/v1/syntheses", Some(req));
    assert_eq!(again["schedule_id"].as_str(), Some(sid), "{again}");
    for (bad, says) in [
        (json!("12XB"), "12XB"),
        (json!(-5), "negative"),
        (json!(1.5), "whole number"),
        // 2^64 as a string was clamped to 2^64 − 1 and accepted (issue 64).
        (json!("18446744073709551616"), "too large"),
    ] {
        let req = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": bad}});
        let r = raw(s.addr, "POST", "/v1/syntheses", Some(req.to_string().as_bytes()));
        let p = assert_problem(&r, 422);
        assert!(p.to_string().contains("size_bytes") && p.to_string().contains(says), "{p}");
    }
    // An array is not read as a struct's fields in order (serde's default): the collective
    // and the whole request are objects, and the problem names where one was not.
    for (req, at) in [
        (json!({"spec": "ring:4", "collective": ["all_gather", 65536]}), "collective"),
        (json!(["ring:4", {"kind": "all_gather", "size_bytes": 65536}]), "."),
    ] {
        let r = raw(s.addr, "POST", "/v1/syntheses", Some(req.to_string().as_bytes()));
        let p = assert_problem(&r, 422);
        assert_eq!(p["errors"][0]["path"], at, "{p}");
        assert!(p["errors"][0]["message"].as_str().unwrap().contains("invalid type: sequence, expected a"), "{p}");
    }
    // A missing field is named at its own path, and a number's type in words, as the CLI says
    // them (`collective` "missing field `kind`"; "expected u64", "expected f64").
    for (req, at, says) in [
        (json!({"spec": "ring:4", "collective": {"size_bytes": 8}}), "collective.kind", "missing field `kind`"),
        (json!({"spec": "ring:4"}), "collective", "missing field `collective`"),
        (
            json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 8}, "wait_ms": -1}),
            "wait_ms",
            "-1 is negative: expected a non-negative integer",
        ),
        (
            json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 8}, "options": {"time_limit_s": "60"}}),
            "options.time_limit_s",
            "invalid type: string \"60\", expected a number",
        ),
    ] {
        let p = assert_problem(&raw(s.addr, "POST", "/v1/syntheses", Some(req.to_string().as_bytes())), 422);
        assert_eq!(
            (p["errors"][0]["path"].as_str(), p["errors"][0]["message"].as_str()),
            (Some(at), Some(says)),
            "{p}"
        );
    }
}

fn schedules_export_as_msccl_xml(db: Db) {
    let s = start(db);
    let req =
        json!({"spec": "ring:4", "collective": {"kind": "reduce_scatter", "size_bytes": 4096}, "algorithm": "ring"});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(req));
    assert_eq!(code, 201, "{job}");
    let sid = job["schedule_id"].as_str().unwrap();
    let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/xml"));
    assert!(r.body.starts_with(r#"<algo name="ccsynth-ring" proto="Simple""#), "{}", r.body);
    assert!(r.body.contains(r#"coll="reducescatter""#));
    let r = raw(
        s.addr,
        "GET",
        &format!(
            "/v1/schedules/{sid}/export?format=msccl-xml&msccl_target=legacy&protocol=LL&name=rs4&min_bytes=1&max_bytes=8192"
        ),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.starts_with(r#"<algo name="rs4" proto="LL""#) && r.body.contains(r#"coll="reduce_scatter""#));
    assert!(r.body.contains(r#"minBytes="1" maxBytes="8192""#), "{}", r.body);
    let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml&msccl_target=rccl"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains(r#"coll="reducescatter""#), "{}", r.body);
    // maxBytes = 0 would read as no limit to the executor: refused, named.
    let p = assert_problem(
        &raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml&max_bytes=0"), None),
        422,
    );
    assert_eq!(p["errors"][0]["path"], "max_bytes", "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("max_bytes: 0: the executor reads maxBytes = 0 as no upper limit"),
        "{p}"
    );
    // The CLI's lower-case spelling of a protocol is taken here too.
    let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml&protocol=ll128"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains(r#"proto="LL128""#), "{}", r.body);
    // An MSCCL++ execution plan: every GPU in one JSON document, with its options.
    let r = raw(
        s.addr,
        "GET",
        &format!("/v1/schedules/{sid}/export?format=mscclpp-json&name=rs4pp&in_place=true&min_bytes=64&max_bytes=8192"),
        None,
    );
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/json")), "{}", r.body);
    let plan = r.json();
    assert_eq!((plan["name"].as_str(), plan["collective"].as_str()), (Some("rs4pp"), Some("reducescatter")));
    assert_eq!((plan["inplace"].as_bool(), plan["gpus"].as_array().map(Vec::len)), (Some(true), Some(4)));
    assert_eq!((plan["min_message_size"].as_u64(), plan["max_message_size"].as_u64()), (Some(64), Some(8192)));
    let p = assert_problem(
        &raw(
            s.addr,
            "GET",
            &format!("/v1/schedules/{sid}/export?format=mscclpp-json&min_bytes=9000&max_bytes=8192"),
            None,
        ),
        422,
    );
    assert_eq!(p["errors"][0], json!({"path": "min_bytes", "message": "9000 is above max_bytes 8192"}), "{p}");
    // One rank's view: the whole plan's header and every GPU's channels, that rank's blocks only.
    let whole = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=mscclpp-json"), None).json();
    let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=mscclpp-json&rank=2"), None);
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/json")), "{}", r.body);
    let view = r.json();
    assert_eq!((&view["name"], &view["gpus"][2]), (&whole["name"], &whole["gpus"][2]));
    assert_eq!(view["gpus"][1]["channels"], whole["gpus"][1]["channels"]);
    assert_eq!(view["gpus"][1]["threadblocks"].as_array().map(Vec::len), Some(0));
    assert!(!whole["gpus"][1]["threadblocks"].as_array().unwrap().is_empty());
    for (query, says) in [
        ("format=mscclpp-json&rank=4", "rank 4 is not a rank of the plan: its ranks are 0..=3"),
        ("format=msccl-xml&rank=1", "only format=mscclpp-json and chakra-et have a per-rank view"),
        ("format=explicit&rank=3", "only format=mscclpp-json and chakra-et have a per-rank view"),
    ] {
        let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?{query}"), None), 422);
        assert!(p["detail"].as_str().unwrap().contains(says), "{query}: {p}");
        assert!(p.to_string().contains("rank"), "{query}: {p}");
    }
    // Every key a format does not read is refused at that key (each was ignored).
    for (query, key, says) in [
        ("format=mscclpp-json&protocol=ll", "protocol", "LL: only format=msccl-xml names a protocol"),
        ("format=chakra-et&msccl_target=rccl", "msccl_target", "rccl: only format=msccl-xml names an executor"),
        ("format=msccl-xml&in_place=true", "in_place", "true: only format=mscclpp-json marks in-place calls"),
        ("format=mscclpp-json&prefix=x", "prefix", "x: only format=chakra-et names its files"),
        ("format=explicit&name=a", "name", "a: only format=msccl-xml and mscclpp-json name the algorithm"),
        (
            "format=timeline-svg&max_bytes=8",
            "max_bytes",
            "8: only format=msccl-xml and mscclpp-json carry a size range",
        ),
    ] {
        let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?{query}"), None), 422);
        assert_eq!(p["errors"][0], json!({"path": key, "message": says}), "{query}: {p}");
    }
    // An empty name names nothing (the executors tell plans apart by name).
    let p =
        assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml&name="), None), 422);
    assert_eq!(p["errors"][0]["path"], "name", "{p}");
    // Nor does one with a control character (XML 1.0 allows none: the MSCCL file was not
    // well-formed).
    let query = "format=msccl-xml&name=a%0Bb%00c";
    let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?{query}"), None), 422);
    assert_eq!(p["errors"][0]["path"], "name", "{p}");
    assert!(p["errors"][0]["message"].as_str().unwrap().contains("U+000B"), "{p}");
    // Nor one longer than the executor's attribute buffer (256 bytes with its zero, read without
    // a bound): 255 bytes are taken, 256 are not.
    let named = |n: usize| {
        raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml&name={}", "é".repeat(n)), None)
    };
    assert_eq!(named(127).status, 200);
    // Counted as written: 52 '&' are 260 bytes of `&amp;`, which the executor copies undecoded.
    let amps =
        raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml&name={}", "%26".repeat(52)), None);
    let p = assert_problem(&amps, 422);
    assert!(p["errors"][0]["message"].as_str().unwrap().starts_with("260 bytes as an XML attribute"), "{p}");
    let p = assert_problem(&named(128), 422);
    assert_eq!(
        p["errors"][0],
        json!({"path": "name", "message": "256 bytes as an XML attribute writes it: at most 255 (the MSCCL executor's buffer)"}),
        "{p}"
    );
    // An unknown format is named first.
    let p =
        assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=xml&protocol=LL"), None), 422);
    assert_eq!(p["errors"][0]["path"], "format", "{p}");
    // Pictures of the replay.
    let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=chrome-trace"), None);
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/json")), "{}", r.body);
    assert!(r.json()["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "X"));
    let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=timeline-svg"), None);
    assert_eq!((r.status, r.header("content-type")), (200, Some("image/svg+xml")), "{}", r.body);
    assert!(r.body.starts_with("<svg "));
    // Chakra traces for ASTRA-sim: a tar of every NPU's trace, the workloads and the configuration.
    let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=chakra-et&prefix=rs"), None);
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/x-tar")), "{}", r.body);
    assert_eq!(r.header("content-disposition"), Some(r#"attachment; filename="rs.tar""#));
    for name in ["rs.0.et", "rs.3.et", "rs.workload.0.et", "rs.system.json", "rs.memory.json", "rs.network.yml"] {
        assert!(r.body.contains(name), "{name} in the archive");
    }
    // One rank's trace: that rank's file of the archive, alone.
    let one = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=chakra-et&prefix=rs&rank=3"), None);
    assert_eq!((one.status, one.header("content-type")), (200, Some("application/octet-stream")), "{}", one.body);
    assert_eq!(one.header("content-disposition"), Some(r#"attachment; filename="rs.3.et""#));
    assert!(!one.body.is_empty() && r.body.contains(&one.body), "rank 3's trace is the archive's rs.3.et");
    let p =
        assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=chakra-et&rank=4"), None), 422);
    assert!(p["detail"].as_str().unwrap().contains("4: expected a rank in 0..=3"), "{p}");
    let p = assert_problem(
        &raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=chakra-et&prefix=a/b"), None),
        400,
    );
    assert!(p["detail"].as_str().unwrap().contains("prefix"), "{p}");
    assert_eq!(p["errors"][0]["path"], "prefix", "named at its key: {p}");
    // Bad queries are problems: an unknown format (422), an unknown parameter or value (400),
    // an unknown schedule (404), a collective MSCCL cannot run (422 naming it).
    let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=svg"), None), 422);
    assert_eq!(p["errors"][0]["path"], "format");
    let listed = "\"svg\": expected explicit, msccl-xml, mscclpp-json, chrome-trace, timeline-svg or chakra-et";
    assert!(p["detail"].as_str().unwrap().contains(listed), "{p}");
    assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml&colour=red"), None), 400);
    let p = assert_problem(
        &raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml&protocol=fast"), None),
        400,
    );
    assert_eq!(p["errors"][0]["path"], "protocol", "{p}");
    let p = assert_problem(
        &raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=mscclpp-json&rank=-1"), None),
        400,
    );
    assert_eq!(p["errors"][0], json!({"path": "rank", "message": "\"-1\": expected a non-negative whole number"}));
    assert_problem(&raw(s.addr, "GET", "/v1/schedules/nope/export?format=msccl-xml", None), 404);
    let req = json!({"spec": "ring:4", "collective": {"kind": "scatter", "size_bytes": 4096, "root": 0}, "algorithm": "greedy"});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(req));
    assert_eq!(code, 201, "{job}");
    let sid = job["schedule_id"].as_str().unwrap();
    let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml"), None), 422);
    assert!(p["detail"].as_str().unwrap().contains("MSCCL has no collective for scatter"), "{p}");
    // Nor a broadcast: the executor would run the file for every root.
    let req = json!({"spec": "ring:4", "collective": {"kind": "broadcast", "size_bytes": 4096, "root": 1}, "algorithm": "greedy"});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(req));
    assert_eq!(code, 201, "{job}");
    let sid = job["schedule_id"].as_str().unwrap();
    let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml"), None), 422);
    assert!(p["detail"].as_str().unwrap().contains("would run for every root"), "{p}");
    // A schedule of a few kilobytes whose exports would replay millions of (NPU, slot) cells:
    // refused from its counts before anything is built (ring:64 at 8,192 chunks per NPU took
    // the server to 2.9 GB for its Chakra traces, and down). ring:16 at 16,385: 2^22 + 256.
    let req = json!({"spec": "ring:16", "algorithm": "ring",
        "collective": {"kind": "all_reduce", "size_bytes": 1u64 << 30, "chunks_per_npu": 16385}});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(req));
    assert_eq!(code, 201, "{job}");
    let sid = job["schedule_id"].as_str().unwrap();
    for (format, says) in [
        (
            "chakra-et",
            "16 NPUs × 262160 chunk slots is more than the 4194304 (NPU, slot) cells the whole export replays",
        ),
        ("msccl-xml", "16 ranks × 262160 chunk slots is more than the 4194304 (rank, slot) cells"),
        ("mscclpp-json", "16 ranks × 262160 chunk slots is more than the 4194304 (rank, slot) cells"),
    ] {
        let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format={format}"), None);
        let p = assert_problem(&r, 422);
        assert!(p["detail"].as_str().unwrap().contains(says), "{format}: {p}");
    }
}

fn health_metadata_and_metrics(db: Db) {
    let s = start(db);
    let h = raw(s.addr, "GET", "/healthz", None);
    assert_eq!(h.status, 200);
    assert_eq!(h.header("x-request-id").map(str::len), Some(32), "every response names its request");
    assert_eq!(raw(s.addr, "GET", "/readyz", None).status, 200);
    let doc = raw(s.addr, "GET", "/openapi.yaml", None);
    assert_eq!(doc.status, 200);
    assert!(doc.body.starts_with("openapi: 3"));
    let (code, algos) = call(&s, "GET", "/v1/algorithms", None);
    assert_eq!(code, 200);
    let names: Vec<&str> =
        algos["synthesizers"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["auto", "greedy", "ilp"]);
    assert_eq!(algos["synthesizers"][0]["kind"], "portfolio");
    assert!(algos["baselines"].as_array().unwrap().iter().any(|b| b["name"] == "ring"));
    // Each synthesizer lists `custom`, which each serves (the list left it out).
    for a in algos["synthesizers"].as_array().unwrap() {
        assert!(a["collectives"].as_array().unwrap().iter().any(|k| k == "custom"), "{a}");
    }
    let custom = json!({"kind": "custom", "size_bytes": 4096, "num_chunks": 2, "precondition": [[0, 0], [1, 1]],
                        "postcondition": [[2, 0], [3, 1], [0, 0], [1, 1]]});
    let p = assert_problem(
        &raw(
            s.addr,
            "POST",
            "/v1/syntheses",
            Some(json!({"spec": "ring:4", "collective": custom, "algorithm": "ring"}).to_string().as_bytes()),
        ),
        422,
    );
    assert!(p["detail"].as_str().unwrap().contains("these serve custom: auto, greedy, ilp"), "{p}");
    // Without `algorithm` the portfolio runs; without `chunks_per_npu` the engine picks k.
    let (code, job) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}})),
    );
    assert_eq!(code, 201, "{job}");
    let summary = &job["summary"];
    assert_eq!(summary["stats"]["portfolio"]["chosen_by"], "auto", "{summary}");
    let candidates = summary["stats"]["portfolio"]["candidates"].as_array().unwrap();
    assert!(candidates.iter().any(|c| c["algorithm"] == "ilp"), "4 NPUs: the ilp joins");
    let winner = candidates.iter().find(|c| c["chosen"] == true).unwrap();
    assert_eq!(summary["algorithm"], winner["algorithm"]);
    assert_eq!(summary["collective"]["chunks_per_npu"], winner["chunks_per_npu"]);
    // Beside it, the fastest baseline that ran, as the CLI's summary says it.
    let (best, t) = candidates
        .iter()
        .filter(|c| !names.contains(&c["algorithm"].as_str().unwrap()))
        .filter_map(|c| Some((c["algorithm"].as_str().unwrap(), c["collective_time_ns"].as_f64()?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert_eq!(summary["best_baseline"]["algorithm"], best, "{summary}");
    assert_eq!(summary["best_baseline"]["collective_time_ns"], t, "{summary}");
    let speedup = t / summary["collective_time_ns"].as_f64().unwrap();
    assert!((summary["best_baseline"]["speedup"].as_f64().unwrap() - speedup).abs() < 1e-12, "{summary}");
    // The worker counts a job just after storing its end; on PostgreSQL the commit's
    // notification can wake the waiter (and answer this client) before that, so the scrape
    // waits for the count rather than racing it.
    let counted = "ccsynth_syntheses_total{algorithm=\"auto\",outcome=\"succeeded\"} 1";
    wait_until(Duration::from_secs(5), || raw(s.addr, "GET", "/metrics", None).body.contains(counted));
    let m = raw(s.addr, "GET", "/metrics", None);
    assert_eq!(m.status, 200);
    assert!(
        m.body.contains("ccsynth_http_requests_total{method=\"POST\",route=\"/v1/syntheses\",status=\"201\"} 1"),
        "{}",
        m.body
    );
    assert!(m.body.contains(counted));
    assert!(m.body.contains("ccsynth_solve_seconds_count 1"));
    assert!(m.body.contains("ccsynth_queue_depth 0"));
    // The OpenMetrics text format (prometheus-client), which Prometheus scrapes.
    assert!(m.header("content-type").is_some_and(|c| c.starts_with("application/openmetrics-text")));
    assert!(m.body.contains("# TYPE ccsynth_solve_seconds histogram"), "{}", m.body);
    assert!(m.body.contains("ccsynth_solve_seconds_bucket{le=\"+Inf\"} 1"), "{}", m.body);
    assert!(m.body.ends_with("# EOF\n"), "{}", m.body);
    // Made-up methods share one label (issue 28: 20,000 of them once grew /metrics to 2.4 MB).
    for i in 0..5 {
        raw(s.addr, &format!("BREW{i}"), "/healthz", None);
    }
    let m = raw(s.addr, "GET", "/metrics", None).body;
    assert!(!m.contains("BREW"), "{m}");
    assert!(m.contains("ccsynth_http_requests_total{method=\"other\",route=\"/healthz\",status=\"405\"} 5"), "{m}");
    // The greedy alone (after the counts above) runs no baseline: null.
    let greedy =
        json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}, "algorithm": "greedy"});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(greedy));
    assert_eq!(code, 201, "{job}");
    assert!(job["summary"]["best_baseline"].is_null(), "{job}");
}

fn topologies_are_idempotent_paginated_and_deletable(db: Db) {
    let s = start(db);
    let r = raw(s.addr, "POST", "/v1/topologies", Some(br#"{"spec": "torus:4x4@bw=50"}"#));
    assert_eq!(r.status, 201, "{}", r.body);
    let t = r.json();
    let id = t["id"].as_str().unwrap().to_string();
    assert_eq!(r.header("location"), Some(format!("/v1/topologies/{id}").as_str()));
    assert_eq!((t["npus"].as_i64(), t["links"].as_i64(), t["connected"].as_bool()), (Some(16), Some(64), Some(true)));
    // The same topology, as a spec or as its own canonical JSON, is the same id.
    let again = raw(s.addr, "POST", "/v1/topologies", Some(br#"{"spec": "torus:4x4@bw=50"}"#));
    assert_eq!((again.status, again.json()["id"].as_str()), (200, Some(id.as_str())));
    let (code, full) = call(&s, "GET", &format!("/v1/topologies/{id}"), None);
    assert_eq!(code, 200);
    let (code, same) = call(&s, "POST", "/v1/topologies", Some(full["topology"].clone()));
    assert_eq!((code, same["id"].as_str()), (200, Some(id.as_str())));
    let (code, _) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "ring:4"})));
    assert_eq!(code, 201);
    let (code, page) = call(&s, "GET", "/v1/topologies?limit=1&offset=1", None);
    assert_eq!(code, 200);
    assert_eq!((page["total"].as_i64(), page["items"].as_array().unwrap().len()), (Some(2), 1));
    // A failed link: a new topology that records its parent.
    let (code, degraded) = call(&s, "POST", &format!("/v1/topologies/{id}/failures"), Some(json!({"links": [[0, 1]]})));
    assert_eq!(code, 201, "{degraded}");
    assert_eq!(degraded["parent_id"].as_str(), Some(id.as_str()));
    assert_eq!(degraded["links"].as_i64(), Some(62));
    // Nothing failed: a 422, not the parent itself as a degraded topology found again.
    let p = assert_problem(&raw(s.addr, "POST", &format!("/v1/topologies/{id}/failures"), Some(b"{}")), 422);
    assert!(p["detail"].as_str().unwrap().contains("nothing to derive"), "{p}");
    let bad = raw(s.addr, "POST", &format!("/v1/topologies/{id}/failures"), Some(br#"{"links": [[0, 5]]}"#));
    let p = assert_problem(&bad, 422);
    assert!(p["errors"][0]["path"].as_str().unwrap().contains("links"), "{p}");
    // A problem lists 20 field errors and counts the rest, each clipped: a thousand self-loops,
    // or a 100 kB spec, get a short answer (issue 28: 900,000 self-loops once got 517 MB).
    let loops: Vec<Value> = (0..3000).map(|_| json!({"src": 1, "dst": 1})).collect();
    let r = raw(
        s.addr,
        "POST",
        "/v1/topologies",
        Some(
            json!({"npus": 4, "default_link": {"latency_ns": 500.0, "bandwidth_gb_per_s": 100.0}, "links": loops})
                .to_string()
                .as_bytes(),
        ),
    );
    let p = assert_problem(&r, 422);
    assert_eq!(p["errors"].as_array().unwrap().len(), 20, "{p}");
    // (The validator keeps the first 1000 and counts the rest: all 3000 are counted.)
    assert!(p["detail"].as_str().unwrap().contains("and 2980 more errors (the first 20 are listed)"), "{p}");
    assert!(r.body.len() < 8000, "{} bytes", r.body.len());
    let long = json!({"spec": format!("torus:{}", "9".repeat(100_000))});
    let r = raw(s.addr, "POST", "/v1/topologies", Some(long.to_string().as_bytes()));
    assert_problem(&r, 422);
    assert!(r.body.len() < 8000, "{} bytes: {}", r.body.len(), &r.body[..300]);
    // The list names the lineage as the topology's own page does.
    let did = degraded["id"].as_str().unwrap();
    let listed = |page: &Value| page["items"].as_array().unwrap().iter().find(|t| t["id"] == did).cloned().unwrap();
    let (_, page) = call(&s, "GET", "/v1/topologies", None);
    assert_eq!(
        (listed(&page)["parent_id"].as_str(), &listed(&page)["failures"]["links"]),
        (Some(id.as_str()), &json!([[0, 1]]))
    );
    assert_eq!(raw(s.addr, "DELETE", &format!("/v1/topologies/{id}"), None).status, 204);
    assert_problem(&raw(s.addr, "GET", &format!("/v1/topologies/{id}"), None), 404);
    assert_problem(&raw(s.addr, "DELETE", &format!("/v1/topologies/{id}"), None), 404);
    // A deleted parent is no longer named, on the page or in the list (it was, without tokens).
    let (_, child) = call(&s, "GET", &format!("/v1/topologies/{did}"), None);
    let (_, page) = call(&s, "GET", "/v1/topologies", None);
    for t in [&child, &listed(&page)] {
        assert!(t.get("parent_id").is_none() && t.get("failures").is_none(), "{t}");
    }
}

fn syntheses_wait_cache_and_serve_schedules(db: Db) {
    let s = start(db);
    let req = json!({"spec": "torus:4x4@bw=50", "collective": {"kind": "all_reduce", "size_bytes": 1048576}, "algorithm": "greedy", "options": {"seed": 3}});
    let r = raw(s.addr, "POST", "/v1/syntheses", Some(req.to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", r.body);
    let first = r.json();
    assert_eq!((first["status"].as_str(), first["cached"].as_bool()), (Some("succeeded"), Some(false)));
    let sid = first["schedule_id"].as_str().unwrap().to_string();
    assert_eq!(r.header("location"), Some(format!("/v1/schedules/{sid}").as_str()));
    let summary = &first["summary"];
    assert_eq!(summary["validation"]["valid"], true);
    assert_eq!(summary["seed"], 3);
    assert!(summary["collective_time_ns"].as_f64().unwrap() >= summary["lower_bound_ns"].as_f64().unwrap());
    // The identical request is served from the store; force solves again.
    let (code, cached) = call(&s, "POST", "/v1/syntheses", Some(req.clone()));
    assert_eq!(
        (code, cached["cached"].as_bool(), cached["schedule_id"].as_str()),
        (201, Some(true), Some(sid.as_str()))
    );
    // How many threads run it is not what it gives: the same request on 2 threads is the
    // cached schedule too.
    let mut threaded = req.clone();
    threaded["options"]["threads"] = json!(2);
    let (code, cached) = call(&s, "POST", "/v1/syntheses", Some(threaded));
    assert_eq!(
        (code, cached["cached"].as_bool(), cached["schedule_id"].as_str()),
        (201, Some(true), Some(sid.as_str()))
    );
    assert!(first["ignored_options"].is_null(), "{first}");
    // An option the greedy does not read is named, and is no other request: the cached
    // schedule (it was solved again, and said nothing).
    let mut unread = req.clone();
    unread["options"]["window"] = json!(3);
    unread["options"]["ignore_congestion"] = json!(true);
    let (code, cached) = call(&s, "POST", "/v1/syntheses", Some(unread));
    assert_eq!(
        (code, cached["cached"].as_bool(), cached["schedule_id"].as_str()),
        (201, Some(true), Some(sid.as_str()))
    );
    assert_eq!(cached["ignored_options"], json!(["ignore_congestion", "window"]), "{cached}");
    // Seeds for the ILP, which runs one, likewise (they were a 422).
    let ilp = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}, "algorithm": "ilp",
                     "options": {"seeds": 3}, "wait_ms": 60000});
    let (code, v) = call(&s, "POST", "/v1/syntheses", Some(ilp));
    assert_eq!((code, v["status"].as_str()), (201, Some("succeeded")), "{v}");
    assert_eq!(v["ignored_options"], json!(["seeds"]), "{v}");
    let mut forced = req.clone();
    forced["force"] = json!(true);
    let (code, again) = call(&s, "POST", "/v1/syntheses", Some(forced));
    assert_eq!((code, again["cached"].as_bool()), (201, Some(false)));
    assert_ne!(again["schedule_id"], first["schedule_id"]);
    // The schedule is format v1 and validates; the summary leaves the transfers out.
    let body = raw(s.addr, "GET", &format!("/v1/schedules/{sid}"), None);
    assert_eq!(body.status, 200);
    let schedule = ccsynth::schedule::Schedule::from_json(&body.body).unwrap();
    assert!(ccsynth::engine::check(&schedule).valid);
    assert_eq!(schedule.seed, Some(3));
    let (code, summ) = call(&s, "GET", &format!("/v1/schedules/{sid}/summary"), None);
    assert_eq!(code, 200);
    assert!(summ.get("transfers").is_some_and(|t| t.is_number()) && summ["stats"]["algorithm"] == "greedy");
    // The comparison: computed once (concurrent first requests share it), then read from the
    // store, as a marker written there shows.
    let path = format!("/v1/schedules/{sid}/comparison");
    let first: Vec<Resp> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..3).map(|_| sc.spawn(|| raw(s.addr, "GET", &path, None))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        first.iter().all(|r| r.status == 200 && r.body == first[0].body),
        "{:?}",
        first.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    let cmp = first[0].json();
    assert!(cmp["rows"].as_array().unwrap().iter().any(|r| r["algorithm"] == "greedy"));
    assert!(cmp["rows"].as_array().unwrap().iter().any(|r| r["algorithm"] == "ring"));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&s.url).await.unwrap();
        let n = sqlx::query("UPDATE comparisons SET body = '{\"stored\": true}' WHERE schedule_id = $1")
            .bind(sid.as_str())
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected();
        assert_eq!(n, 1, "one stored comparison");
    });
    assert_eq!(call(&s, "GET", &path, None), (200, json!({"stored": true})));
    // The schedule stores its topology by reference: deleting the topology hides it (404, not
    // listed) and keeps the schedule whole; storing the same topology again brings it back.
    let (code, t) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "torus:4x4@bw=50"})));
    assert_eq!(code, 200, "the synthesis stored it already: {t}");
    let tid = t["id"].as_str().unwrap().to_string();
    rt.block_on(async {
        let pool = sqlx::AnyPool::connect(&s.url).await.unwrap();
        let stored: String = sqlx::query_scalar("SELECT body FROM schedules WHERE id = $1")
            .bind(sid.as_str())
            .fetch_one(&pool)
            .await
            .unwrap();
        assert!(stored.contains("\"topology\":null") && !stored.contains("\"links\""), "the topology is not embedded");
    });
    assert_eq!(raw(s.addr, "DELETE", &format!("/v1/topologies/{tid}"), None).status, 204);
    assert_problem(&raw(s.addr, "GET", &format!("/v1/topologies/{tid}"), None), 404);
    let (_, page) = call(&s, "GET", "/v1/topologies", None);
    assert!(page["items"].as_array().unwrap().iter().all(|i| i["id"] != tid.as_str()), "{page}");
    let kept = raw(s.addr, "GET", &format!("/v1/schedules/{sid}"), None);
    assert_eq!(kept.status, 200);
    let kept = ccsynth::schedule::Schedule::from_json(&kept.body).unwrap();
    assert_eq!(kept.topology, ccsynth::topology::parse_topology("torus:4x4@bw=50").unwrap());
    assert!(ccsynth::engine::check(&kept).valid);
    // So is its regeneration, by itself and in a batch (a 404 "no topology" and a 422 "no
    // schedule" while the schedule itself was served).
    let (code, job) = call(
        &s,
        "POST",
        &format!("/v1/schedules/{sid}/regenerate"),
        Some(json!({"failed_links": [[0, 1]], "wait_ms": 30000})),
    );
    assert_eq!((code, job["status"].as_str()), (201, Some("succeeded")), "{job}");
    let (code, batch) = call(
        &s,
        "POST",
        "/v1/batches",
        Some(json!({"regenerations": [{"schedule_id": sid, "failed_links": [[1, 2]]}]})),
    );
    assert!(code == 201 || code == 202, "{code}: {batch}");
    let (_, again) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "torus:4x4@bw=50"})));
    assert_eq!(again["id"], tid.as_str());
    assert_eq!(raw(s.addr, "GET", &format!("/v1/topologies/{tid}"), None).status, 200);
    // A baseline by name, through the same job path.
    let (code, ring) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:8", "collective": {"kind": "all_reduce", "size_bytes": 8192}, "algorithm": "ring"})),
    );
    assert_eq!((code, ring["summary"]["algorithm"].as_str()), (201, Some("ring")));
    // A kolmakov-r<R> variant is a baseline name too.
    let (code, k) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"spec": "fc:8", "collective": {"kind": "all_reduce", "size_bytes": 8192}, "algorithm": "kolmakov-r1"}),
        ),
    );
    assert_eq!((code, k["summary"]["algorithm"].as_str()), (201, Some("kolmakov-r1")), "{k}");
    // wait_ms 0: a 202 with the job's URL, then the job ends on its own.
    let r = raw(
        s.addr,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "mesh:3x3", "collective": {"kind": "all_gather", "size_bytes": 9216}, "algorithm": "ilp", "wait_ms": 0}).to_string().as_bytes()),
    );
    // The job is read once, at once: a worker as quick as the answer may have ended it already
    // (a 201 with the schedule's URL; CI saw one, the ILP taking 8 ms).
    let id = r.json()["id"].as_str().unwrap().to_string();
    match r.status {
        202 => assert_eq!(r.header("location"), Some(format!("/v1/jobs/{id}").as_str())),
        201 => assert_eq!(r.json()["status"], "succeeded", "{}", r.body),
        other => panic!("{other}: {}", r.body),
    }
    let done = wait_for_job(&s, &id, &["succeeded", "failed"]);
    assert_eq!(done["status"], "succeeded", "{done}");
    let (_, summ) = call(&s, "GET", &format!("/v1/schedules/{}/summary", done["schedule_id"].as_str().unwrap()), None);
    assert_eq!(summ["stats"]["status"], "optimal");
    assert_problem(&raw(s.addr, "GET", "/v1/jobs/unknown", None), 404);
    assert_problem(&raw(s.addr, "GET", "/v1/schedules/unknown", None), 404);
    assert_problem(&raw(s.addr, "GET", "/v1/schedules/unknown/summary", None), 404);
    // A NUL byte (or anything else) in an id is a 404 on every route that takes one, never a
    // 500 (PostgreSQL refuses NUL in text).
    for (m, path) in [
        ("GET", "/v1/topologies/a%00b"),
        ("DELETE", "/v1/topologies/a%00b"),
        ("GET", "/v1/jobs/a%00b"),
        ("DELETE", "/v1/jobs/a%00b"),
        ("GET", "/v1/batches/a%00b"),
        ("GET", "/v1/schedules/a%00b"),
        ("GET", "/v1/schedules/a%00b/summary"),
        ("GET", "/v1/schedules/a%00b/comparison"),
    ] {
        assert_problem(&raw(s.addr, m, path, None), 404);
        // Nor is a percent-encoding that is not UTF-8 (it was axum's text/plain 400).
        let p = assert_problem(&raw(s.addr, m, &path.replace("a%00b", "%FF"), None), 404);
        assert!(p["detail"].as_str().unwrap().contains("with id \"%FF\""), "{p}");
    }
    assert_problem(&raw(s.addr, "GET", "/v1/schedules/%C3%28/export?format=json", None), 404);
    for id in ["a%00b", "%FF"] {
        assert_problem(&raw(s.addr, "POST", &format!("/v1/topologies/{id}/failures"), Some(b"{}")), 404);
        assert_problem(&raw(s.addr, "POST", &format!("/v1/schedules/{id}/regenerate"), Some(b"{}")), 404);
    }
    let body = json!({"topology_id": "a\u{0}b", "collective": {"kind": "all_gather", "size_bytes": 64}});
    let r = raw(s.addr, "POST", "/v1/syntheses", Some(body.to_string().as_bytes()));
    assert_eq!(assert_problem(&r, 422)["errors"][0]["path"], "topology_id");
    // A wait past the longest is refused at wait_ms, as the job route's is (it was capped).
    let body = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 64}, "wait_ms": 600_001});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/syntheses", Some(body.to_string().as_bytes())), 422);
    assert_eq!(
        (p["errors"][0]["path"].as_str(), p["detail"].as_str()),
        (Some("wait_ms"), Some("wait_ms: 600001 ms: at most 600000 are accepted"))
    );
}

fn errors_are_problems_with_the_right_status(db: Db) {
    let s = start_with(db, |c| c.max_body_bytes = 4096);
    assert_problem(&raw(s.addr, "POST", "/v1/syntheses", Some(b"{not json")), 400);
    assert_problem(&raw(s.addr, "POST", "/v1/topologies", Some(b"")), 400);
    let big = format!(r#"{{"spec": "ring:4", "pad": "{}"}}"#, "x".repeat(10_000));
    assert_problem(&raw(s.addr, "POST", "/v1/topologies", Some(big.as_bytes())), 413);
    let cases = [
        (json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 1}, "colour": 1}), "colour"),
        (
            json!({"spec": "ring:4", "collective": {"kind": "broadcast", "size_bytes": 64, "root": 9}}),
            "collective.root",
        ),
        (
            json!({"spec": "ring:4", "collective": {"kind": "all_reduce", "size_bytes": 64}, "algorithm": "mst"}),
            "algorithm",
        ),
        (
            json!({"spec": "ring:4", "collective": {"kind": "all_reduce", "size_bytes": 64}, "algorithm": "nope"}),
            "algorithm",
        ),
        (
            json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 64}, "algorithm": "kolmakov-r1"}),
            "algorithm",
        ),
        (json!({"spec": "ring:0", "collective": {"kind": "all_reduce", "size_bytes": 64}}), "spec"),
        (json!({"collective": {"kind": "all_reduce", "size_bytes": 64}}), "topology_id"),
        (json!({"topology_id": "missing", "collective": {"kind": "all_reduce", "size_bytes": 64}}), "topology_id"),
        (
            json!({"spec": "ring:4", "collective": {"kind": "all_reduce", "size_bytes": 64}, "options": {"time_limit_s": -1}}),
            "options.time_limit_s",
        ),
        (
            json!({"spec": "ring:4", "collective": {"kind": "all_reduce", "size_bytes": 64}, "options": {"switch_model": "tree"}}),
            "options.switch_model",
        ),
    ];
    for (body, path) in cases {
        let r = raw(s.addr, "POST", "/v1/syntheses", Some(body.to_string().as_bytes()));
        let p = assert_problem(&r, 422);
        assert!(
            p["errors"].as_array().unwrap().iter().any(|e| e["path"].as_str().unwrap().contains(path)),
            "{path}: {p}"
        );
    }
    // A disconnected group is refused up front.
    // (ring:4 is stored only now: the requests above that named it were refused, and a refused
    // request stores nothing.)
    let (code, t) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "ring:4"})));
    assert_eq!(code, 201);
    let (_, split) = call(
        &s,
        "POST",
        &format!("/v1/topologies/{}/failures", t["id"].as_str().unwrap()),
        Some(json!({"links": [[0, 1], [2, 3]]})),
    );
    let r = raw(
        s.addr,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"topology_id": split["id"], "collective": {"kind": "all_gather", "size_bytes": 64}})
                .to_string()
                .as_bytes(),
        ),
    );
    assert_problem(&r, 422);
    let p = assert_problem(&raw(s.addr, "GET", "/v2/nothing", None), 404);
    assert!(p["detail"].as_str().unwrap().contains("route"));
}

fn a_full_queue_is_a_429(db: Db) {
    let s = start_with(db, |c| {
        c.max_queue = 1;
        c.workers = 1;
    });
    // One slow job occupies the worker, one waits in the queue; the next is refused.
    let slow = |seed: u64| {
        json!({"spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500", "collective": {"kind": "all_gather", "size_bytes": 67108864},
               "algorithm": "ilp", "options": {"time_limit_s": 20, "seed": seed}, "wait_ms": 0})
    };
    let (code, running) = call(&s, "POST", "/v1/syntheses", Some(slow(1)));
    assert_eq!(code, 202);
    wait_for_job(&s, running["id"].as_str().unwrap(), &["running"]);
    let (code, queued) = call(&s, "POST", "/v1/syntheses", Some(slow(2)));
    assert_eq!(code, 202);
    let r = raw(s.addr, "POST", "/v1/syntheses", Some(slow(3).to_string().as_bytes()));
    let p = assert_problem(&r, 429);
    assert!(p["detail"].as_str().unwrap().contains("queue"));
    assert_eq!(r.header("retry-after"), Some("5"), "a 429 says when to come back");
    // A batch the queue can never hold is a 422 naming the limit (it was a 429 saying to wait).
    let items: Vec<Value> = [slow(4), slow(5)]
        .into_iter()
        .map(|mut r| {
            r.as_object_mut().unwrap().remove("wait_ms");
            r
        })
        .collect();
    let two = json!({ "requests": items });
    let p = assert_problem(&raw(s.addr, "POST", "/v1/batches", Some(two.to_string().as_bytes())), 422);
    assert_eq!(p["errors"][0]["path"], "requests", "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("2 requests and regenerations: at most 1 fit in this server's queue"),
        "{p}"
    );
    for j in [&running, &queued] {
        assert_eq!(raw(s.addr, "DELETE", &format!("/v1/jobs/{}", j["id"].as_str().unwrap()), None).status, 200);
    }
}

fn jobs_can_be_cancelled_while_running(db: Db) {
    let s = start(db);
    let (code, job) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500", "collective": {"kind": "all_gather", "size_bytes": 67108864},
                    "algorithm": "ilp", "options": {"time_limit_s": 120}, "wait_ms": 0}),
        ),
    );
    assert_eq!(code, 202);
    let id = job["id"].as_str().unwrap().to_string();
    wait_for_job(&s, &id, &["running"]);
    // A running ILP reports how much of its time limit it has used.
    let mut seen = Value::Null;
    wait_until(Duration::from_secs(20), || {
        seen = call(&s, "GET", &format!("/v1/jobs/{id}"), None).1;
        seen["progress"]["fraction"].as_f64().unwrap_or(0.0) > 0.0
    });
    assert!(seen["progress"]["message"].as_str().unwrap().starts_with("ilp: "), "{seen}");
    assert!(seen["progress"]["fraction"].as_f64().unwrap() < 1.0);
    // `GET ?wait_ms` long-polls: the job as it is once the wait has passed (issue 66, rough
    // edge 2), or once it ends: a waiter is answered as the job is cancelled.
    let began = Instant::now();
    let (code, v) = call(&s, "GET", &format!("/v1/jobs/{id}?wait_ms=300"), None);
    assert_eq!((code, v["status"].as_str()), (200, Some("running")), "{v}");
    assert!(began.elapsed() >= Duration::from_millis(300), "answered after {:?}", began.elapsed());
    // A query key the route does not read, and a wait over the limit, are 400s naming them.
    let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/jobs/{id}?wait=30000"), None), 400);
    assert_eq!(p["errors"][0]["path"], "wait", "{p}");
    let said = p["detail"].as_str().unwrap();
    assert!(said.contains("unknown query key") && said.contains("takes wait_ms"), "{p}");
    let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/jobs/{id}?wait_ms=600001"), None), 400);
    assert_eq!(p["errors"][0]["path"], "wait_ms", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("at most 600000"), "{p}");
    // A value that does not parse is named at its key, with the value given.
    let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/jobs/{id}?wait_ms=-5"), None), 400);
    assert_eq!(p["errors"][0], json!({"path": "wait_ms", "message": "\"-5\": expected a non-negative whole number"}));
    let p = assert_problem(&raw(s.addr, "GET", "/v1/algorithms?verbose=1", None), 400);
    assert!(p["detail"].as_str().unwrap().contains("GET /v1/algorithms takes none"), "{p}");
    // HEAD reads what GET reads; a method the route does not take is still a 405.
    assert_eq!(raw(s.addr, "HEAD", &format!("/v1/jobs/{id}?wait_ms=1"), None).status, 200);
    assert_problem(&raw(s.addr, "PUT", &format!("/v1/jobs/{id}?wait_ms=1"), None), 405);
    let (addr, path) = (s.addr, format!("/v1/jobs/{id}?wait_ms=60000"));
    let waiter = std::thread::spawn(move || {
        let began = Instant::now();
        let r = raw(addr, "GET", &path, None);
        (r.status, r.json()["status"].as_str().map(str::to_string), began.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    let (code, v) = call(&s, "DELETE", &format!("/v1/jobs/{id}"), None);
    assert_eq!((code, v["status"].as_str()), (200, Some("cancelled")));
    let (code, status, took) = waiter.join().unwrap();
    assert_eq!((code, status.as_deref()), (200, Some("cancelled")));
    assert!(took < Duration::from_secs(30), "the waiter heard the cancel after {took:?}");
    // The solver stops (its worker takes the next job) and the job stays cancelled.
    let (code, next) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:5", "collective": {"kind": "all_gather", "size_bytes": 5120}, "wait_ms": 30000})),
    );
    assert_eq!(code, 201, "{next}");
    let (_, v) = call(&s, "GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!(v["status"], "cancelled");
    assert!(v.get("schedule_id").is_none());
}

/// Each worker runs its job on a pool of its own: a quick job is served while a long one keeps
/// the other worker's threads busy, rather than queueing behind the long job's runs.
fn a_quick_job_runs_beside_a_long_one(db: Db) {
    let s = start_with(db, |c| {
        c.workers = 2;
        c.job_threads = 2;
    });
    let (code, long) = call(&s, "POST", "/v1/syntheses", Some(long_job()));
    assert_eq!(code, 202, "{long}");
    let id = long["id"].as_str().unwrap().to_string();
    wait_for_job(&s, &id, &["running"]);
    let (code, quick) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:4", "collective": {"kind": "all_reduce", "size_bytes": 4096}, "wait_ms": 20000})),
    );
    assert_eq!((code, quick["status"].as_str()), (201, Some("succeeded")), "{quick}");
    let (_, v) = call(&s, "GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!(v["status"], "running", "the long job ran beside it: {v}");
    let (code, _) = call(&s, "DELETE", &format!("/v1/jobs/{id}"), None);
    assert_eq!(code, 200);
}

fn batches_report_aggregate_progress(db: Db) {
    let s = start(db);
    let requests: Vec<Value> = [4, 6, 8]
        .iter()
        .map(|p| json!({"spec": format!("ring:{p}"), "collective": {"kind": "all_gather", "size_bytes": 1024 * p}}))
        .collect();
    let r = raw(s.addr, "POST", "/v1/batches", Some(json!({"requests": requests}).to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", r.body);
    let b = r.json();
    let bid = b["batch_id"].as_str().unwrap().to_string();
    assert_eq!(b["job_ids"].as_array().unwrap().len(), 3);
    let mut last = Value::Null;
    wait_until(Duration::from_secs(60), || {
        last = call(&s, "GET", &format!("/v1/batches/{bid}"), None).1;
        last["succeeded"] == 3
    });
    assert_eq!((last["total"].as_i64(), last["progress"]["fraction"].as_f64()), (Some(3), Some(1.0)));
    assert!(last["jobs"].as_array().unwrap().iter().all(|j| j["schedule_id"].is_string()));
    // A job cancelled part way is done too: a batch with nothing left to run reads 1 (it read
    // the cancelled job's partial progress, and a client polling for 1 never stopped).
    let mut long = long_job();
    long.as_object_mut().unwrap().remove("wait_ms");
    let quick = json!({"spec": "ring:5", "collective": {"kind": "all_gather", "size_bytes": 5120}});
    let (code, cut) = call(&s, "POST", "/v1/batches", Some(json!({"requests": [long, quick]})));
    assert_eq!(code, 201, "{cut}");
    let (code, _) = call(&s, "DELETE", &format!("/v1/jobs/{}", cut["job_ids"][0].as_str().unwrap()), None);
    assert_eq!(code, 200);
    let path = format!("/v1/batches/{}", cut["batch_id"].as_str().unwrap());
    wait_until(Duration::from_secs(60), || {
        last = call(&s, "GET", &path, None).1;
        last["succeeded"] == 1
    });
    assert_eq!((last["cancelled"].as_i64(), last["progress"]["fraction"].as_f64()), (Some(1), Some(1.0)), "{last}");
    // The same batch again is answered from the cache: its items name the first batch's jobs,
    // and its own listing holds them, in its items' order (once they listed none). A batch
    // that names a request twice lists its job twice, as its job_ids do.
    let again = json!({"requests": [requests[2], requests[0], requests[1], requests[0]]});
    let r = raw(s.addr, "POST", "/v1/batches", Some(again.to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", r.body);
    let b2 = r.json();
    let first_ids = b["job_ids"].as_array().unwrap();
    let want = [&first_ids[2], &first_ids[0], &first_ids[1], &first_ids[0]];
    assert_eq!(b2["job_ids"].as_array().unwrap().iter().collect::<Vec<_>>(), want, "{b2}");
    assert!(b["ignored_options"].is_null() && b2["ignored_options"].is_null(), "none ignored: {b2}");
    // The options an item's algorithm does not read are named, in the requests' order.
    let mut unread = requests[0].clone();
    unread["algorithm"] = json!("ring");
    unread["options"] = json!({"window": 3, "seeds": 2});
    let r = raw(s.addr, "POST", "/v1/batches", Some(json!({"requests": [requests[1], unread]}).to_string().as_bytes()));
    let b3 = r.json();
    assert_eq!(b3["ignored_options"], json!([[], ["seeds", "window"]]), "{b3}");
    assert_eq!(b3["job_ids"][0], first_ids[1], "{b3}");
    let listed = call(&s, "GET", &format!("/v1/batches/{}", b2["batch_id"].as_str().unwrap()), None).1;
    assert_eq!((listed["total"].as_i64(), listed["succeeded"].as_i64()), (Some(4), Some(4)), "{listed}");
    let listed_ids: Vec<&Value> = listed["jobs"].as_array().unwrap().iter().map(|j| &j["id"]).collect();
    assert_eq!(listed_ids, want, "{listed}");
    // The first batch's listing is unchanged.
    let first = call(&s, "GET", &format!("/v1/batches/{bid}"), None).1;
    assert_eq!(first["total"].as_i64(), Some(3), "{first}");
    // Two identical new items (not yet solved) name one job twice: each made a job of its own.
    let new = json!({"spec": "ring:11", "collective": {"kind": "all_gather", "size_bytes": 11264}});
    let r =
        raw(s.addr, "POST", "/v1/batches", Some(json!({"requests": [new, requests[0], new]}).to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", r.body);
    let ids = r.json()["job_ids"].as_array().unwrap().clone();
    assert_eq!((&ids[0], &ids[1]), (&ids[2], &first_ids[0]), "{ids:?}");
    // A forced item is solved again all the same.
    let forced = json!({"spec": "ring:11", "collective": {"kind": "all_gather", "size_bytes": 11264}, "force": true});
    let r = raw(s.addr, "POST", "/v1/batches", Some(json!({"requests": [forced, forced]}).to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", r.body);
    let ids = r.json()["job_ids"].as_array().unwrap().clone();
    assert_ne!(ids[0], ids[1], "{ids:?}");
    // An item's wait_ms is refused, as its interactive priority is (it was read and ignored).
    let waiting =
        json!({"spec": "ring:10", "collective": {"kind": "all_gather", "size_bytes": 10240}, "wait_ms": 60000});
    let r = raw(s.addr, "POST", "/v1/batches", Some(json!({"requests": [waiting]}).to_string().as_bytes()));
    let p = assert_problem(&r, 422);
    assert_eq!(p["errors"][0]["path"], "requests[0].wait_ms", "{p}");
    // One bad request refuses the whole batch, naming it.
    let bad = json!({"requests": [requests[0], {"spec": "ring:4", "collective": {"kind": "gather", "size_bytes": 8}}]});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/batches", Some(bad.to_string().as_bytes())), 422);
    assert!(p["errors"][0]["path"].as_str().unwrap().starts_with("requests[1]"), "{p}");
    // Every bad item is named, not the first alone (a client learnt of them one a POST).
    let mut urgent = requests[1].clone();
    urgent["priority"] = json!("interactive");
    let bad = json!({"requests": [waiting, requests[0], urgent], "regenerations": [{"schedule_id": "nope"}]});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/batches", Some(bad.to_string().as_bytes())), 422);
    let paths: Vec<&str> = p["errors"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["requests[0].wait_ms", "requests[2].priority", "regenerations[0].schedule_id"], "{p}");
    // So is every item whose topology is not there (found when the items are built).
    let lost = json!({"topology_id": "nope", "collective": {"kind": "all_gather", "size_bytes": 8}});
    let bad = json!({"requests": [lost, requests[0], lost]});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/batches", Some(bad.to_string().as_bytes())), 422);
    let paths: Vec<&str> = p["errors"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["requests[0].topology_id", "requests[2].topology_id"], "{p}");
    // The items are counted before any is read: 10,001 of them are refused for their number,
    // not for what the first says (a 16 MiB batch of small items took 450 MB to read first).
    let many = format!("{{\"requests\": [{}]}}", vec!["{\"bogus\": 1}"; 10_001].join(","));
    let p = assert_problem(&raw(s.addr, "POST", "/v1/batches", Some(many.as_bytes())), 422);
    assert_eq!(p["errors"][0]["path"], "requests", "{p}");
    assert!(
        p["errors"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("10001 requests and regenerations: expected 1 to 10000"),
        "{p}"
    );
    assert_problem(&raw(s.addr, "GET", "/v1/batches/unknown", None), 404);
    // A path no route serves says which (it said `no route with id ""`).
    let p = assert_problem(&raw(s.addr, "GET", &format!("/v1/batches/{bid}/"), None), 404);
    assert!(p["detail"].as_str().unwrap().contains(&format!("no route serves the path \"/v1/batches/{bid}/\"")), "{p}");
}

/// Issue 63, point 4: `degraded_links` in a regeneration (alone and in a batch) and in a
/// topology's failures: the link stays at its new speed, the summary names it, and a mistake is
/// a 422 at the entry's field.
fn a_slow_link_is_a_failure_at_both_doors(db: Db) {
    let s = start(db);
    let (code, first) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "torus:4x4", "collective": {"kind": "all_reduce", "size_bytes": 1048576}})),
    );
    assert_eq!(code, 201, "{first}");
    let sid = first["schedule_id"].as_str().unwrap();
    let slow = json!([{"link": [0, 1], "bandwidth_gb_per_s": 25}]);
    let (code, job) = call(
        &s,
        "POST",
        &format!("/v1/schedules/{sid}/regenerate"),
        Some(json!({"degraded_links": slow, "wait_ms": 30000})),
    );
    assert_eq!((code, job["status"].as_str()), (201, Some("succeeded")), "{job}");
    let r = &job["summary"]["stats"]["regeneration"];
    assert_eq!(r["degraded_links"].as_array().map(Vec::len), Some(2), "{r}");
    assert_eq!(r["degraded_links"][0]["was_bandwidth_gb_per_s"].as_f64(), Some(100.0), "{r}");
    assert!(r["repair"]["collective_time_ns"].is_number(), "a slow link is repaired: {r}");
    let new_id = job["schedule_id"].as_str().unwrap();
    let new =
        ccsynth::schedule::Schedule::from_json(&raw(s.addr, "GET", &format!("/v1/schedules/{new_id}"), None).body)
            .unwrap();
    assert_eq!(new.topology.link(1, 0).map(|l| l.bandwidth_gb_per_s), Some(25.0));
    assert!(ccsynth::engine::check(&new).valid);
    for (body, path, says) in [
        (
            json!({"degraded_links": [{"link": [0, 1], "bandwidth_gb_per_s": 250}]}),
            "degraded_links[0].bandwidth_gb_per_s",
            "cannot speed up",
        ),
        (json!({"degraded_links": [{"link": [0, 9], "latency_ns": 900}]}), "degraded_links[0].link", "no link 0->9"),
        (
            json!({"failed_links": [[0, 1]], "degraded_links": [{"link": [0, 1], "latency_ns": 900}]}),
            "degraded_links[0].link",
            "fails too",
        ),
        (json!({"degraded_links": [{"link": [0, 1]}]}), "degraded_links[0]", "neither"),
    ] {
        let p = assert_problem(
            &raw(s.addr, "POST", &format!("/v1/schedules/{sid}/regenerate"), Some(body.to_string().as_bytes())),
            422,
        );
        assert_eq!(p["errors"][0]["path"], path, "{p}");
        assert!(p["errors"][0]["message"].as_str().unwrap().contains(says), "{p}");
    }
    // In a batch, named under the scenario.
    let bad = json!({"regenerations": [
        {"schedule_id": sid, "degraded_links": [{"link": [2, 3], "bandwidth_gb_per_s": 50}]},
        {"schedule_id": sid, "degraded_links": [{"link": [2, 3], "bandwidth_gb_per_s": -50}]},
    ]});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/batches", Some(bad.to_string().as_bytes())), 422);
    assert_eq!(p["errors"][0]["path"], "regenerations[1].degraded_links[0].bandwidth_gb_per_s", "{p}");
    // A topology's failures: the same links, one slower, the failures recorded with it.
    let (_, intact) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "torus:4x4"})));
    let tid = intact["id"].as_str().unwrap();
    let (code, t) = call(
        &s,
        "POST",
        &format!("/v1/topologies/{tid}/failures"),
        Some(json!({"degraded_links": [{"link": [2, 3], "latency_ns": 4000}], "directed": true})),
    );
    assert!(code == 201 || code == 200, "{t}");
    assert_eq!(t["links"].as_i64(), Some(64), "{t}");
    assert_eq!(t["failures"]["degraded_links"][0]["latency_ns"].as_f64(), Some(4000.0), "{t}");
    let (_, full) = call(&s, "GET", &format!("/v1/topologies/{}", t["id"].as_str().unwrap()), None);
    let links = full["topology"]["links"].as_array().unwrap();
    let at = |u: u64, v: u64| links.iter().find(|l| l["src"] == u && l["dst"] == v).unwrap()["latency_ns"].as_f64();
    assert_eq!((at(2, 3), at(3, 2)), (Some(4000.0), Some(500.0)));
    let p = assert_problem(
        &raw(
            s.addr,
            "POST",
            &format!("/v1/topologies/{tid}/failures"),
            Some(br#"{"degraded_links": [{"link": [2, 3], "latency_ns": 1}]}"#),
        ),
        422,
    );
    assert_eq!(p["errors"][0]["path"], "degraded_links[0].latency_ns", "{p}");
}

fn regeneration_avoids_the_failed_link(db: Db) {
    let s = start(db);
    let (code, first) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "torus:4x4", "collective": {"kind": "all_reduce", "size_bytes": 65536}})),
    );
    assert_eq!(code, 201);
    let sid = first["schedule_id"].as_str().unwrap();
    let old = ccsynth::schedule::Schedule::from_json(&raw(s.addr, "GET", &format!("/v1/schedules/{sid}"), None).body)
        .unwrap();
    let uses = |sch: &ccsynth::schedule::Schedule, a: u32, b: u32| {
        sch.transfers.iter().any(|t| {
            let hops: Vec<u32> = t.path.map(|p| p.to_vec()).unwrap_or_else(|| vec![t.src, t.dst]);
            hops.windows(2).any(|w| (w[0], w[1]) == (a, b) || (w[0], w[1]) == (b, a))
        })
    };
    assert!(uses(&old, 0, 1), "the test needs a schedule that used link 0-1");
    let (code, job) = call(
        &s,
        "POST",
        &format!("/v1/schedules/{sid}/regenerate"),
        Some(json!({"failed_links": [[0, 1]], "wait_ms": 30000})),
    );
    assert_eq!(code, 201, "{job}");
    assert_eq!(job["status"], "succeeded");
    let new_id = job["schedule_id"].as_str().unwrap();
    let new =
        ccsynth::schedule::Schedule::from_json(&raw(s.addr, "GET", &format!("/v1/schedules/{new_id}"), None).body)
            .unwrap();
    assert!(ccsynth::engine::check(&new).valid);
    assert!(!uses(&new, 0, 1));
    assert!(new.topology.link(0, 1).is_none());
    // The stored schedule was repaired first, and the report puts both attempts beside it.
    let r = &job["summary"]["stats"]["regeneration"];
    assert_eq!(r["previous_collective_time_ns"], json!(old.collective_time_ns), "{job}");
    assert!(r["repair"]["collective_time_ns"].is_number() && r["repair"]["rerouted"].as_u64().unwrap() > 0, "{r}");
    let kept = r["kept"].as_str().unwrap();
    assert!(kept == "repair" || kept == "fresh", "{r}");
    let time = job["summary"]["collective_time_ns"].as_f64().unwrap();
    assert_eq!(r[kept]["collective_time_ns"].as_f64(), Some(time), "{r}");
    // Against a slow fresh algorithm the repair is kept: every transfer that did not use the
    // failed link is the stored schedule's, byte for byte.
    let (code, job) = call(
        &s,
        "POST",
        &format!("/v1/schedules/{sid}/regenerate"),
        Some(json!({"failed_links": [[0, 1]], "algorithm": "ring", "wait_ms": 30000})),
    );
    assert_eq!((code, job["status"].as_str()), (201, Some("succeeded")), "{job}");
    assert_eq!(job["summary"]["stats"]["regeneration"]["kept"], "repair", "{job}");
    let repaired = ccsynth::schedule::Schedule::from_json(
        &raw(s.addr, "GET", &format!("/v1/schedules/{}", job["schedule_id"].as_str().unwrap()), None).body,
    )
    .unwrap();
    assert_eq!(repaired.transfers.len(), old.transfers.len());
    let mut kept = 0;
    for (a, b) in old.transfers.iter().zip(repaired.transfers.iter()) {
        let hops: Vec<u32> = a.path.map(|p| p.to_vec()).unwrap_or_else(|| vec![a.src, a.dst]);
        if !hops.windows(2).any(|w| (w[0], w[1]) == (0, 1) || (w[0], w[1]) == (1, 0)) {
            assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
            kept += 1;
        }
    }
    assert_eq!(job["summary"]["stats"]["regeneration"]["repair"]["kept"], json!(kept));
    assert!(!uses(&repaired, 0, 1));
    // A failed NPU: the same collective on the survivors.
    let (code, job) = call(
        &s,
        "POST",
        &format!("/v1/schedules/{sid}/regenerate"),
        Some(json!({"failed_npus": [5], "algorithm": "greedy", "wait_ms": 30000})),
    );
    assert_eq!((code, job["status"].as_str()), (201, Some("succeeded")), "{job}");
    let new = ccsynth::schedule::Schedule::from_json(
        &raw(s.addr, "GET", &format!("/v1/schedules/{}", job["schedule_id"].as_str().unwrap()), None).body,
    )
    .unwrap();
    assert!(new.transfers.iter().all(|t| t.src != 5 && t.dst != 5));
    // One direction only (`directed`, as the CLI's --directed): 0->1 fails, 1->0 stays, alone
    // and in a batch.
    let (code, job) = call(
        &s,
        "POST",
        &format!("/v1/schedules/{sid}/regenerate"),
        Some(json!({"failed_links": [[0, 1]], "directed": true, "wait_ms": 30000})),
    );
    assert_eq!((code, job["status"].as_str()), (201, Some("succeeded")), "{job}");
    let one_way = ccsynth::schedule::Schedule::from_json(
        &raw(s.addr, "GET", &format!("/v1/schedules/{}", job["schedule_id"].as_str().unwrap()), None).body,
    )
    .unwrap();
    assert!(one_way.topology.link(0, 1).is_none() && one_way.topology.link(1, 0).is_some());
    assert!(ccsynth::engine::check(&one_way).valid);
    let batch = json!({"regenerations": [{"schedule_id": sid, "failed_links": [[1, 0]], "directed": true}]});
    let r = raw(s.addr, "POST", "/v1/batches", Some(batch.to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", r.body);
    // Bad failures are named by the request's own fields, with what the topology has.
    let p = assert_problem(
        &raw(s.addr, "POST", &format!("/v1/schedules/{sid}/regenerate"), Some(br#"{"failed_links": [[0, 9]]}"#)),
        422,
    );
    assert_eq!(p["errors"][0]["path"], "failed_links[0]", "{p}");
    assert!(
        p["errors"][0]["message"]
            .as_str()
            .unwrap()
            .ends_with("no link 0->9 in the topology; 0 links to 1, 3, 4 and 12"),
        "{p}"
    );
    let p = assert_problem(
        &raw(s.addr, "POST", &format!("/v1/schedules/{sid}/regenerate"), Some(br#"{"failed_npus": [3, 99]}"#)),
        422,
    );
    assert_eq!(p["errors"][0]["path"], "failed_npus[1]", "{p}");
    assert!(p["errors"][0]["message"].as_str().unwrap().contains("99 is not an NPU: expected 0..=15"), "{p}");
    // Every NPU of a subgroup's collective failing is named as the failed NPUs (it was
    // `collective.group`, a field the request did not have).
    let (code, sub) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"spec": "torus:4x4", "collective": {"kind": "all_gather", "size_bytes": 1048576, "group": [0, 1, 5]}}),
        ),
    );
    assert_eq!(code, 201, "{sub}");
    let sub = sub["schedule_id"].as_str().unwrap();
    let p = assert_problem(
        &raw(s.addr, "POST", &format!("/v1/schedules/{sub}/regenerate"), Some(br#"{"failed_npus": [0, 1, 5]}"#)),
        422,
    );
    assert_eq!(p["errors"][0]["path"], "failed_npus", "{p}");
    // So is a failed NPU a custom collective's conditions name (it was named at
    // `collective.postcondition[1]`).
    let custom = json!({"kind": "custom", "size_bytes": 4096, "num_chunks": 2,
                        "precondition": [[0, 0], [1, 1]], "postcondition": [[2, 0], [3, 1], [0, 0], [1, 1]]});
    let (code, own) =
        call(&s, "POST", "/v1/syntheses", Some(json!({"spec": "ring:4", "collective": custom, "algorithm": "greedy"})));
    assert_eq!(code, 201, "{own}");
    let own = own["schedule_id"].as_str().unwrap();
    let r = raw(s.addr, "POST", &format!("/v1/schedules/{own}/regenerate"), Some(br#"{"failed_npus": [3]}"#));
    let p = assert_problem(&r, 422);
    assert_eq!(p["errors"][0]["path"], "failed_npus", "{p}");
    assert!(p["errors"][0]["message"].as_str().unwrap().contains("NPU 3 holds or wants chunks"), "{p}");
    assert_problem(&raw(s.addr, "POST", "/v1/schedules/unknown/regenerate", Some(b"{}")), 404);
    // Failures that cut NPU 0 off: the collective cannot run on what is left, a 422, and the
    // degraded topology is not stored.
    let topologies = || call(&s, "GET", "/v1/topologies", None).1["total"].as_i64().unwrap();
    let before = topologies();
    let cut = json!({"failed_links": [[0, 1], [0, 3], [0, 4], [0, 12]]});
    let r = raw(s.addr, "POST", &format!("/v1/schedules/{sid}/regenerate"), Some(cut.to_string().as_bytes()));
    let p = assert_problem(&r, 422);
    // Named by the failures (the request gave no group) and saying which NPU is cut off.
    assert_eq!(p["errors"][0]["path"], "failed_links", "{p}");
    let said = p["errors"][0]["message"].as_str().unwrap();
    assert!(said.contains("split the collective's group") && said.contains("(NPU 0; 15 NPUs from 1)"), "{p}");
    assert_eq!(topologies(), before, "a refused regeneration stores nothing");
    // A batch of regenerations, one per failure scenario, runs as any batch; one bad scenario
    // refuses the whole batch, naming it, and stores nothing.
    let scenarios = json!({"regenerations": [
        {"schedule_id": sid, "failed_links": [[1, 2]]},
        {"schedule_id": sid, "failed_links": [[5, 6], [9, 10]]},
        {"schedule_id": sid, "failed_npus": [7]},
    ]});
    let r = raw(s.addr, "POST", "/v1/batches", Some(scenarios.to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", r.body);
    let bid = r.json()["batch_id"].as_str().unwrap().to_string();
    let mut last = Value::Null;
    let t = Instant::now();
    while last["succeeded"] != 3 {
        assert!(t.elapsed() < Duration::from_secs(60), "{last}");
        std::thread::sleep(Duration::from_millis(50));
        last = call(&s, "GET", &format!("/v1/batches/{bid}"), None).1;
    }
    for j in last["jobs"].as_array().unwrap() {
        let (_, summary) =
            call(&s, "GET", &format!("/v1/schedules/{}/summary", j["schedule_id"].as_str().unwrap()), None);
        assert!(summary["stats"]["regeneration"]["kept"].is_string(), "{summary}");
    }
    let before = topologies();
    let bad = json!({"regenerations": [
        {"schedule_id": sid, "failed_links": [[2, 3]]},
        {"schedule_id": sid, "failed_links": [[0, 9]]},
    ]});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/batches", Some(bad.to_string().as_bytes())), 422);
    assert_eq!(p["errors"][0]["path"], "regenerations[1].failed_links[0]", "{p}");
    let p = assert_problem(
        &raw(
            s.addr,
            "POST",
            "/v1/batches",
            Some(json!({"regenerations": [{"schedule_id": "nope"}]}).to_string().as_bytes()),
        ),
        422,
    );
    assert_eq!(p["errors"][0]["path"], "regenerations[0].schedule_id", "{p}");
    assert_eq!(topologies(), before, "a refused batch stores nothing");
    // The stored request's seeds were the engine's (four for `auto` on 16 NPUs); regenerated by
    // the ILP, which runs one, they follow it instead of refusing the request (then cancelled).
    let (code, job) = call(
        &s,
        "POST",
        &format!("/v1/schedules/{sid}/regenerate"),
        Some(json!({"failed_links": [[0, 1]], "algorithm": "ilp", "wait_ms": 0})),
    );
    assert!(code == 201 || code == 202, "{code} {job}");
    let _ = call(&s, "DELETE", &format!("/v1/jobs/{}", job["id"].as_str().unwrap()), None);
}

fn the_validate_route_reports_both_verdicts(db: Db) {
    let s = start(db);
    let (_, job) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:4", "collective": {"kind": "all_reduce", "size_bytes": 4096}})),
    );
    let body = raw(s.addr, "GET", &format!("/v1/schedules/{}", job["schedule_id"].as_str().unwrap()), None).body;
    let r = raw(s.addr, "POST", "/v1/validate", Some(body.as_bytes()));
    assert_eq!((r.status, r.json()["valid"].as_bool()), (200, Some(true)));
    // A schedule with scratch slots, dst_chunks and local moves survives the store and
    // validates as served.
    let (code, k) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"spec": "fc:7", "collective": {"kind": "all_reduce", "size_bytes": 7168}, "algorithm": "kolmakov-r1"}),
        ),
    );
    assert_eq!(code, 201, "{k}");
    let served = raw(s.addr, "GET", &format!("/v1/schedules/{}", k["schedule_id"].as_str().unwrap()), None).body;
    let v: Value = serde_json::from_str(&served).unwrap();
    assert_eq!(v["scratch"].as_array().map(|a| a.len()), Some(7));
    assert!(v["transfers"].as_array().unwrap().iter().any(|t| t["src"] == t["dst"] && t.get("dst_chunks").is_some()));
    let r = raw(s.addr, "POST", "/v1/validate", Some(served.as_bytes()));
    assert_eq!((r.status, r.json()["valid"].as_bool()), (200, Some(true)), "{}", r.body);
    let mut broken: Value = serde_json::from_str(&body).unwrap();
    broken["transfers"].as_array_mut().unwrap().pop();
    broken.as_object_mut().unwrap().remove("collective_time_ns");
    let r = raw(s.addr, "POST", "/v1/validate", Some(broken.to_string().as_bytes()));
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["valid"], false);
    assert!(v["violation_count"].as_u64().unwrap() >= 1);
    assert_problem(&raw(s.addr, "POST", "/v1/validate", Some(b"[1, 2")), 400);
    assert_problem(&raw(s.addr, "POST", "/v1/validate", Some(br#"{"format": "other"}"#)), 422);
    // Another command's output is named for what it is, as the CLI names it (a comparison read
    // "collective: invalid type: string").
    let comparison = json!({"collective": "all_gather", "size_bytes": 8, "rows": [], "refused": []});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/validate", Some(comparison.to_string().as_bytes())), 422);
    assert!(
        p["errors"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("this is a comparison (`compare --json`), not a schedule"),
        "{p}"
    );
    // The crash of the hostile-requests issue: a broadcast of 2^25 chunks on 4096 NPUs is
    // refused from its parameters, before the validator allocates its tables.
    let mut huge: Value = serde_json::from_str(&body).unwrap();
    huge["collective"] = json!({"kind": "broadcast", "size_bytes": 1 << 25, "chunks_per_npu": 1 << 25, "root": 0});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/validate", Some(huge.to_string().as_bytes())), 422);
    assert_eq!(p["errors"][0]["path"], "collective.chunks_per_npu", "{p}");
}

/// Requests are measured before anything is built for them: limits of the server, not of
/// the library, and answers in milliseconds rather than a frozen server.
fn oversized_requests_are_refused_before_they_are_built(db: Db) {
    let s = start_with(db, |c| {
        c.max_npus = 64;
        c.max_links = 1000;
        c.max_body_bytes = 1 << 16;
    });
    let t = Instant::now();
    for spec in ["hypercube:20", "torus:1024x1024", "ring:65", "fc:100000"] {
        let (code, v) = call(
            &s,
            "POST",
            "/v1/syntheses",
            Some(json!({"spec": spec, "collective": {"kind": "all_gather", "size_bytes": 4096}})),
        );
        assert_eq!((code, v["errors"][0]["path"].as_str()), (422, Some("spec")), "{spec}: {v}");
        assert!(v["detail"].as_str().unwrap().contains("at most 64"), "{spec}: {v}");
        let (code, _) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": spec})));
        assert_eq!(code, 422, "{spec}");
    }
    assert!(t.elapsed() < Duration::from_secs(20), "refusals took {:?}", t.elapsed());
    // A document over the limit is named at its own `npus` (it was `topology.npus` on a route
    // whose body is the topology).
    let document = json!({"npus": 65, "links": []});
    let (code, v) = call(&s, "POST", "/v1/topologies", Some(document.clone()));
    assert_eq!((code, v["errors"][0]["path"].as_str()), (422, Some("npus")), "{v}");
    let inline = json!({"topology": document, "collective": {"kind": "all_gather", "size_bytes": 4096}});
    let (code, v) = call(&s, "POST", "/v1/syntheses", Some(inline));
    assert_eq!((code, v["errors"][0]["path"].as_str()), (422, Some("topology.npus")), "{v}");
    // Within the NPU limit but not the link limit (issue 28: fc:4096, 16.8 million links, was
    // built on the request thread): measured from the spec.
    // hier's fc dimensions too (issue 64: `hier:fc2048` was stored with 4.19 M links, and a
    // synthesis on it ran for 19 minutes).
    for spec in ["fc:64", "fc:40", "hier:fc40", "hier:ring2,fc32", "hier:fc16,mesh4"] {
        let t = Instant::now();
        let (code, v) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": spec})));
        assert_eq!((code, v["errors"][0]["path"].as_str()), (422, Some("spec")), "{spec}: {v}");
        assert!(v["detail"].as_str().unwrap().contains("links: at most 1000 are accepted"), "{spec}: {v}");
        assert!(t.elapsed() < Duration::from_secs(5), "{spec}: {:?}", t.elapsed());
    }
    let (code, _) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "fc:16"})));
    assert_eq!(code, 201, "fc:16 has 240 links");
    let (code, _) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "hier:ring2,fc4,switch4"})));
    assert_eq!(code, 201, "hier:ring2,fc4,switch4 has 32 + 96 + 64 links");
    // A collective too large for the server's chunk limit, on a topology it accepts.
    let (code, v) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"spec": "ring:64", "collective": {"kind": "all_to_all", "size_bytes": 4096, "chunks_per_npu": 1024}}),
        ),
    );
    assert_eq!((code, v["errors"][0]["path"].as_str()), (422, Some("collective.chunks_per_npu")), "{v}");
    // The same chunking given by `options.chunks_per_npu` is named there (it named the
    // collective's field, which the request did not set); so is a chunking of 0.
    for k in [1024, 0] {
        let body = json!({"spec": "ring:64", "collective": {"kind": "all_to_all", "size_bytes": 4096},
            "options": {"chunks_per_npu": k}});
        let (code, v) = call(&s, "POST", "/v1/syntheses", Some(body));
        assert_eq!((code, v["errors"][0]["path"].as_str()), (422, Some("options.chunks_per_npu")), "{k}: {v}");
    }
    // The validate route's body limit is the server's, answered as a problem.
    let big = vec![b' '; 70_000];
    assert_problem(&raw(s.addr, "POST", "/v1/validate", Some(&big)), 413);
}

/// Every `value:` example in openapi.yaml is JSON the live server accepts on its route.
fn documented_examples_are_served(db: Db) {
    let s = start(db);
    let (_, topo) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "torus:4x4"})));
    let (_, job) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "torus:4x4", "collective": {"kind": "all_gather", "size_bytes": 4096}})),
    );
    let mut path = String::new();
    let mut served = 0;
    for line in ccsynth::api::OPENAPI_YAML.lines() {
        if let Some(p) = line.strip_prefix("  /").and_then(|p| p.strip_suffix(':')) {
            path = format!("/{p}");
        }
        let Some(example) = line.trim_start().strip_prefix("value: ") else { continue };
        let v: Value =
            serde_json::from_str(example).unwrap_or_else(|e| panic!("{path}: example is not JSON ({e}): {example}"));
        if path == "/v1/syntheses" {
            let _: ccsynth::api::SynthesisRequest = serde_json::from_value(v.clone()).unwrap();
        }
        let target = path
            .replace("/v1/topologies/{id}", &format!("/v1/topologies/{}", topo["id"].as_str().unwrap()))
            .replace("/v1/schedules/{id}", &format!("/v1/schedules/{}", job["schedule_id"].as_str().unwrap()));
        let r = raw(s.addr, "POST", &target, Some(v.to_string().as_bytes()));
        assert!((200..300).contains(&r.status), "{path}: {} {}", r.status, r.body);
        served += 1;
    }
    assert!(served >= 7, "{served}");
}

#[test]
fn routes_and_openapi_match_exactly() {
    let mut documented = Vec::new();
    let mut path = None;
    for line in ccsynth::api::OPENAPI_YAML.lines() {
        if line.starts_with("components:") {
            break;
        }
        if let Some(p) = line.strip_prefix("  /").and_then(|p| p.strip_suffix(':')) {
            path = Some(format!("/{p}"));
            continue;
        }
        for m in ["get", "post", "delete", "put", "patch"] {
            if line == format!("    {m}:")
                && let Some(p) = &path
            {
                documented.push((m.to_uppercase(), p.clone()));
            }
        }
    }
    let mut routes: Vec<(String, String)> = ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    documented.sort();
    routes.sort();
    assert_eq!(documented, routes);
    // And every listed route is really routed (not the fallback's 404 or a 405).
    let s = start(Db::Sqlite);
    for (m, p) in ROUTES {
        let r = raw(s.addr, m, &p.replace("{id}", "x"), Some(b"{}"));
        assert_ne!(r.status, 405, "{m} {p}");
        assert!(!(r.status == 404 && r.body.contains("no route")), "{m} {p}: {}", r.body);
    }
}

/// The query keys each route reads (`QUERY_KEYS`, which the server enforces) are exactly the
/// `in: query` parameters openapi.yaml documents for it (at the path, for every method, or at
/// the method).
#[test]
fn query_keys_and_openapi_match_exactly() {
    use std::collections::BTreeMap;
    let mut documented: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let (mut path, mut method, mut shared): (String, Option<String>, Vec<String>) = Default::default();
    for line in ccsynth::api::OPENAPI_YAML.lines() {
        if line.starts_with("components:") {
            break;
        }
        if let Some(p) = line.strip_prefix("  /").and_then(|p| p.strip_suffix(':')) {
            (path, method, shared) = (format!("/{p}"), None, Vec::new());
            continue;
        }
        if let Some(m) = ["get", "post", "delete"].into_iter().find(|m| line == format!("    {m}:")) {
            method = Some(m.to_uppercase());
            documented.entry((method.clone().unwrap(), path.clone())).or_default().extend(shared.clone());
            continue;
        }
        let Some(name) = line.split("name: ").nth(1).filter(|_| line.contains("in: query")) else { continue };
        let name = name.split([',', ' ']).next().unwrap().to_string();
        match &method {
            Some(m) => documented.entry((m.clone(), path.clone())).or_default().push(name),
            None => shared.push(name),
        }
    }
    documented.retain(|_, keys| !keys.is_empty());
    let mut enforced: BTreeMap<(String, String), Vec<String>> = ccsynth::api::QUERY_KEYS
        .iter()
        .map(|(m, p, keys)| ((m.to_string(), p.to_string()), keys.iter().map(|k| k.to_string()).collect()))
        .collect();
    for keys in documented.values_mut().chain(enforced.values_mut()) {
        keys.sort();
    }
    assert_eq!(documented, enforced);
}

/// A queued job of the store tests: no batch, request id, topology or owner.
fn bare_job<'a>(id: &'a str, key: &'a str) -> ccsynth::store::NewJob<'a> {
    ccsynth::store::NewJob {
        id,
        batch_id: None,
        request_id: None,
        key,
        request: "{}",
        algorithm: "greedy",
        topology_id: "no-topology",
        owner: None,
        budget_s: 60.0,
        shared: false,
        priority: 0,
    }
}

/// Completion is a compare-and-set on the claim: a worker whose lease lapsed mid-solve (and
/// whose job another worker claimed) writes nothing, and a cancelled job stays cancelled.
fn a_job_has_one_result_even_when_its_lease_lapses(db: Db) {
    use ccsynth::store::{JobStatus, Store, new_id};
    let url = fresh_database(db);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::connect(&url).await.unwrap();
        let [j1, j2, late, s1, again, s2] = std::array::from_fn(|_| new_id());
        store.create_job(bare_job(&j1, "key-1")).await.unwrap();
        // A lease of 0 ms lapses at once: the job is claimable again while the first worker
        // is still "solving".
        let first = store.claim_job(0, 3).await.unwrap().unwrap().lease().unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = store.claim_job(60_000, 3).await.unwrap().expect("a lapsed job is claimed again").lease().unwrap();
        assert_ne!(first, second);
        assert!(!store.renew_lease(&first, 60_000).await.unwrap(), "the lapsed worker lost its lease");
        assert!(store.renew_lease(&second, 60_000).await.unwrap());
        assert!(
            !store.finish_job(&first, &late, "t", &json_body(), "{}", false).await.unwrap(),
            "the lapsed worker wrote"
        );
        assert!(store.finish_job(&second, &s1, "t", &json_body(), "{}", false).await.unwrap());
        assert!(!store.finish_job(&second, &again, "t", &json_body(), "{}", false).await.unwrap(), "a second result");
        assert!(!store.end_claimed(&second, JobStatus::Failed, Some(&failure("late"))).await.unwrap());
        let j = store.job(&j1).await.unwrap().unwrap();
        assert_eq!((j.status, j.schedule_id.as_deref()), (JobStatus::Succeeded, Some(s1.as_str())));
        assert!(store.schedule_body(&late).await.unwrap().is_none());
        // Ids that could not be ours name nothing, on both backends (PostgreSQL refuses NUL).
        for bad in ["a\0b", "../x", "", &"f".repeat(33)] {
            assert!(store.job(bad).await.unwrap().is_none(), "{bad:?}");
            assert!(store.schedule_body(bad).await.unwrap().is_none(), "{bad:?}");
        }
        assert!(store.schedule_body(&again).await.unwrap().is_none());

        // Cancelled while running: the worker's result is dropped, the job stays cancelled.
        store.create_job(bare_job(&j2, "key-2")).await.unwrap();
        let lease = store.claim_job(60_000, 3).await.unwrap().unwrap().lease().unwrap();
        assert!(store.end_job(&j2, JobStatus::Cancelled, None).await.unwrap());
        assert!(!store.renew_lease(&lease, 60_000).await.unwrap());
        assert!(!store.finish_job(&lease, &s2, "t", &json_body(), "{}", false).await.unwrap());
        assert!(!store.requeue_claimed(&lease).await.unwrap());
        let j = store.job(&j2).await.unwrap().unwrap();
        assert_eq!((j.status, j.schedule_id), (JobStatus::Cancelled, None));
    });
}

/// Twenty identical requests while the first is still solving make one job, not twenty.
fn identical_requests_in_flight_share_one_job(db: Db) {
    let s = start_with(db, |c| c.workers = 1);
    let slow = json!({"spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500",
                      "collective": {"kind": "all_gather", "size_bytes": 67108864},
                      "algorithm": "ilp", "options": {"time_limit_s": 20}, "wait_ms": 0});
    let ids: Vec<String> = (0..20)
        .map(|_| {
            let (code, v) = call(&s, "POST", "/v1/syntheses", Some(slow.clone()));
            assert_eq!(code, 202, "{v}");
            v["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    // Identical requests racing each other (issue 28: 100 in parallel made 15 jobs on SQLite,
    // 2 on PostgreSQL): one job. A fresh request (another seed), 100 at once.
    let mut racing = slow.clone();
    racing["options"]["seed"] = json!(7);
    let barrier = std::sync::Barrier::new(100);
    let raced: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..100)
            .map(|_| {
                let (barrier, body) = (&barrier, racing.to_string());
                scope.spawn(move || {
                    barrier.wait();
                    let r = raw(s.addr, "POST", "/v1/syntheses", Some(body.as_bytes()));
                    assert_eq!(r.status, 202, "{}", r.body);
                    r.json()["id"].as_str().unwrap().to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        raced.iter().all(|id| *id == raced[0]),
        "{} jobs",
        raced.iter().collect::<std::collections::HashSet<_>>().len()
    );
    assert_ne!(raced[0], ids[0]);
    assert_eq!(raw(s.addr, "DELETE", &format!("/v1/jobs/{}", raced[0]), None).status, 200);
    // `force` asks for a run of its own.
    let mut forced = slow.clone();
    forced["force"] = json!(true);
    let (code, v) = call(&s, "POST", "/v1/syntheses", Some(forced));
    assert_eq!(code, 202);
    assert_ne!(v["id"].as_str().unwrap(), ids[0]);
    for id in [ids[0].as_str(), v["id"].as_str().unwrap()] {
        assert_eq!(raw(s.addr, "DELETE", &format!("/v1/jobs/{id}"), None).status, 200);
    }
}

/// Only JSON bodies are read, unencoded (415 otherwise: a text/plain or form POST is what
/// another site's page can send unasked); a wrong method and a bad query string are problems too.
fn http_hygiene_every_error_is_a_problem(db: Db) {
    let s = start(db);
    let body = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}}).to_string();
    for media in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""] {
        for path in ["/v1/syntheses", "/v1/validate", "/v1/topologies", "/v1/batches"] {
            let r = raw_typed(s.addr, "POST", path, Some(body.as_bytes()), media);
            assert_problem(&r, 415);
        }
    }
    let r = raw_typed(s.addr, "POST", "/v1/syntheses", Some(body.as_bytes()), "application/json; charset=utf-8");
    assert_eq!(r.status, 201, "{}", r.body);
    // Another charset is refused, not read as UTF-8.
    for media in ["application/json; charset=utf-16", "application/json;charset=\"latin1\""] {
        let p =
            assert_problem(&raw_typed(s.addr, "POST", "/v1/topologies", Some(br#"{"spec": "ring:4"}"#), media), 415);
        assert!(p["detail"].as_str().unwrap().contains("charset"), "{p}");
    }
    // An encoded body is refused naming its coding (no coding is decoded: gzip was read as its
    // bytes, a 400 "invalid utf-8", and a plain body labelled gzip was taken).
    for coding in ["gzip", "br"] {
        let headers = [("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Content-Encoding", coding)];
        let p = assert_problem(&raw_headers(s.addr, "POST", "/v1/validate", Some(body.as_bytes()), &headers), 415);
        assert!(p["detail"].as_str().unwrap().contains(coding), "{p}");
    }
    let identity = [("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Content-Encoding", "identity")];
    assert_eq!(raw_headers(s.addr, "POST", "/v1/syntheses", Some(body.as_bytes()), &identity).status, 201);
    assert_problem(&raw(s.addr, "PUT", "/v1/syntheses", Some(body.as_bytes())), 405);
    assert_problem(&raw(s.addr, "DELETE", "/v1/algorithms", None), 405);
    let p = assert_problem(&raw(s.addr, "GET", "/v1/topologies?limit=many", None), 400);
    assert_eq!(p["errors"][0], json!({"path": "limit", "message": "\"many\": expected a whole number"}), "{p}");
}

/// A job whose worker keeps stopping without finishing (every lease lapses) is failed after
/// `max_attempts` claims, with the reason, instead of being solved again forever.
fn a_job_is_tried_a_fixed_number_of_times(db: Db) {
    use ccsynth::store::{JobStatus, Store, new_id};
    let url = fresh_database(db);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::connect(&url).await.unwrap();
        let id = new_id();
        store.create_job(bare_job(&id, "key")).await.unwrap();
        for attempt in 1..=3 {
            let j = store.claim_job(0, 3).await.unwrap().unwrap_or_else(|| panic!("claim {attempt}"));
            assert_eq!(j.id, id);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(store.claim_job(0, 3).await.unwrap().is_none(), "a fourth claim");
        let j = store.job(&id).await.unwrap().unwrap();
        assert_eq!(j.status, JobStatus::Failed);
        assert!(j.error.as_deref().unwrap().contains("started 3 times"), "{:?}", j.error);
        assert_eq!(j.error_kind, Some(ccsynth::engine::ErrorKind::Internal), "a worker that keeps dying is ours");
        // A graceful re-queue (shutdown) does not count as a failed attempt.
        let other = new_id();
        store.create_job(bare_job(&other, "key-2")).await.unwrap();
        for _ in 0..5 {
            let lease = store.claim_job(60_000, 3).await.unwrap().unwrap().lease().unwrap();
            assert!(store.requeue_claimed(&lease).await.unwrap());
        }
        assert_eq!(store.job(&other).await.unwrap().unwrap().status, JobStatus::Queued);
    });
}

/// A schedule larger than the server stores fails its job once, with the limit named, rather
/// than being solved again at every lease.
fn a_result_too_large_to_store_fails_its_job(db: Db) {
    let s = start_with(db, |c| c.max_result_bytes = 1000);
    let (code, v) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:8", "collective": {"kind": "all_gather", "size_bytes": 8192}, "wait_ms": 30000})),
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["status"], "failed", "{v}");
    assert!(v["error"].as_str().unwrap().contains("--max-result-bytes"), "{v}");
    assert_eq!(v["error_kind"], "refused", "{v}");
}

/// A failed job says what kind of failure ended it (issue 30 point 2), as the CLI's exit code
/// does: a request to fix, one its algorithm refuses, one to retry with a longer limit.
fn failed_jobs_name_their_kind(db: Db) {
    let s = start(db);
    let fails = |req: Value| {
        let (code, v) = call(&s, "POST", "/v1/syntheses", Some(req));
        assert_eq!(code, 201, "{v}");
        assert_eq!(v["status"], "failed", "{v}");
        v
    };
    // bucket is a torus algorithm: a fully connected fabric is refused by the baseline itself.
    let v = fails(json!({"spec": "fc:4", "collective": {"kind": "all_reduce", "size_bytes": 4096},
        "algorithm": "bucket", "wait_ms": 30000}));
    assert_eq!(v["error_kind"], "refused", "{v}");
    assert!(v["error"].as_str().unwrap().contains("does not support"), "{v}");
    // No greedy run on 256 NPUs finishes in 0.1 ms.
    let v = fails(json!({"spec": "torus:16x16", "collective": {"kind": "all_reduce", "size_bytes": 268435456},
        "algorithm": "greedy", "options": {"time_limit_s": 0.0001}, "wait_ms": 60000}));
    assert_eq!(v["error_kind"], "time_limit", "{v}");
    assert!(v["error"].as_str().unwrap().contains("raise options.time_limit_s"), "{v}");
    // A job that succeeds has neither.
    let (code, v) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:4",
        "collective": {"kind": "all_gather", "size_bytes": 4096}, "algorithm": "ring", "wait_ms": 30000})),
    );
    assert_eq!((code, &v["status"]), (201, &json!("succeeded")), "{v}");
    assert!(v.get("error").is_none() && v.get("error_kind").is_none(), "{v}");
}

/// Reads until the server closes the connection or `limit` passes; the time it closed at
/// (None: still open at `limit`).
fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = [0u8; 4096];
    while started.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return Some(started.elapsed()), // reset: closed too
        }
    }
    None
}

/// Slow and idle clients (issue 15): a connection that sends nothing, one that sends its
/// request head a byte at a time, and a keep-alive connection left idle after its response
/// are each closed after the header timeout; the same connection that keeps sending requests
/// in time is served every time.
#[test]
fn slow_and_idle_connections_are_closed_after_the_header_timeout() {
    let s = start_with(Db::Sqlite, |c| c.header_timeout_ms = 400);
    let limit = Duration::from_secs(5);
    // Nothing sent.
    let mut silent = TcpStream::connect(s.addr).unwrap();
    let t = closed_within(&mut silent, limit).expect("a silent connection is closed");
    assert!(t >= Duration::from_millis(300), "closed after {t:?}, before the timeout");
    // A request head trickling in, one byte every 50 ms (the whole head would take > 1 s).
    let mut slow = TcpStream::connect(s.addr).unwrap();
    let started = Instant::now();
    let mut closed = false;
    for b in b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Padding: aaaaaaaaaaaaaaaaaaaa\r\n\r\n" {
        if slow.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(closed || closed_within(&mut slow, Duration::from_millis(500)).is_some(), "the slow head was served");
    assert!(started.elapsed() < Duration::from_secs(4));
    // Keep-alive: served twice in time, then closed once idle.
    let mut kept = TcpStream::connect(s.addr).unwrap();
    for _ in 0..2 {
        kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
        kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 1024];
        let n = kept.read(&mut buf).unwrap();
        assert!(
            String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = closed_within(&mut kept, limit).expect("an idle keep-alive connection is closed");
    assert!(t >= Duration::from_millis(200), "closed after {t:?}");
    assert_eq!(call(&s, "GET", "/healthz", None).0, 200);
}

/// A request body trickling in (a byte now and then, each in time for any per-read timeout)
/// is answered 408 once the body timeout passes, and the connection closed (issue 28: twenty
/// such connections once held the server as long as they liked).
#[test]
fn a_body_that_trickles_in_is_refused_after_the_body_timeout() {
    let s = start_with(Db::Sqlite, |c| c.body_timeout_ms = 500);
    let mut slow = TcpStream::connect(s.addr).unwrap();
    let head = "POST /v1/topologies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
    slow.write_all(head.as_bytes()).unwrap();
    let started = Instant::now();
    for b in br#"{"spec": "ring:4"#.iter().take(8) {
        if slow.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("did not arrive within 500 ms"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    assert_eq!(call(&s, "GET", "/healthz", None).0, 200);
}

/// Connections beyond `max_connections` are closed on accept, and the slots come back when
/// connections close.
#[test]
fn connections_over_the_limit_are_closed_at_once() {
    let s = start_with(Db::Sqlite, |c| {
        c.max_connections = 4;
        c.header_timeout_ms = 30_000;
    });
    // start_with's readiness probe may still hold its slot for a moment.
    std::thread::sleep(Duration::from_millis(200));
    let held: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(s.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut over = TcpStream::connect(s.addr).unwrap();
    let t = closed_within(&mut over, Duration::from_secs(3)).expect("the fifth connection is closed");
    assert!(t < Duration::from_secs(2), "closed after {t:?}");
    drop(held);
    wait_until(Duration::from_secs(10), || call(&s, "GET", "/healthz", None).0 == 200);
}

/// A topology that a queued or running job runs on is not deleted (409 over HTTP, naming the
/// jobs); once its jobs have ended it is (issue 15).
fn a_topology_in_use_is_not_deleted(db: Db) {
    use ccsynth::store::{Deletion, JobStatus, NewJob, Store, TopologyRow, new_id};
    let url = fresh_database(db);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::connect(&url).await.unwrap();
        let row = |id: &str, digest: &str| TopologyRow {
            id: id.into(),
            digest: digest.into(),
            body: "{}".into(),
            npus: 2,
            switches: 0,
            links: 2,
            connected: true,
            parent_id: None,
            failures: None,
            created_at: 0,
        };
        let (used, free) = (new_id(), new_id());
        store.put_topology(&row(&used, "d-used")).await.unwrap();
        store.put_topology(&row(&free, "d-free")).await.unwrap();
        let [queued, running] = std::array::from_fn(|_| new_id());
        for (id, key) in [(&queued, "k1"), (&running, "k2")] {
            let job = NewJob { topology_id: &used, ..bare_job(id, key) };
            store.create_job(job).await.unwrap();
        }
        let lease = store.claim_job(60_000, 3).await.unwrap().unwrap().lease().unwrap();
        assert_eq!(store.delete_topology(&used).await.unwrap(), Deletion::InUse(2));
        assert_eq!(store.delete_topology(&free).await.unwrap(), Deletion::Deleted);
        assert_eq!(store.delete_topology(&free).await.unwrap(), Deletion::NotFound);
        // One job ends: still in use by the other.
        assert!(store.end_claimed(&lease, JobStatus::Failed, Some(&failure("done"))).await.unwrap());
        let ended = store.job(&lease.job_id).await.unwrap().unwrap();
        assert_eq!((ended.error.as_deref(), ended.error_kind), (Some("done"), Some(failure("done").kind)));
        assert_eq!(store.delete_topology(&used).await.unwrap(), Deletion::InUse(1));
        let other = store.claim_job(60_000, 3).await.unwrap().unwrap().lease().unwrap();
        assert!(store.end_claimed(&other, JobStatus::Failed, Some(&failure("done"))).await.unwrap());
        assert_eq!(store.delete_topology(&used).await.unwrap(), Deletion::Deleted);
        assert!(store.topology(&used).await.unwrap().is_none());
    });
    // Over HTTP: a 409 problem naming the jobs, while a long job runs on the topology.
    let s = start(db);
    let (status, t) = call(&s, "POST", "/v1/topologies", Some(json!({"spec": "mesh:8x8"})));
    assert!(status == 200 || status == 201, "{status} {t}");
    let id = t["id"].as_str().unwrap().to_string();
    let (status, job) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"topology_id": id, "collective": {"kind": "all_gather", "size_bytes": 1048576, "chunks_per_npu": 1},
                    "algorithm": "greedy", "options": {"seeds": 4000}}),
        ),
    );
    assert!(status == 201 || status == 202, "{status} {job}");
    let job_id = job["id"].as_str().unwrap().to_string();
    let r = raw(s.addr, "DELETE", &format!("/v1/topologies/{id}"), None);
    assert_problem(&r, 409);
    assert!(r.json()["detail"].as_str().unwrap().contains("1 queued or running job"), "{}", r.body);
    assert_eq!(call(&s, "DELETE", &format!("/v1/jobs/{job_id}"), None).0, 200);
    wait_until(Duration::from_secs(30), || raw(s.addr, "DELETE", &format!("/v1/topologies/{id}"), None).status == 204);
}

/// A `Host` outside the allow-list (a page that rebound its DNS name to 127.0.0.1) is a 400
/// problem on every route; the names allowed pass with any port and in any case.
#[test]
fn hosts_outside_the_allow_list_are_refused() {
    let s =
        start_with(Db::Sqlite, |c| c.allowed_hosts = Some(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]));
    let get = |host: &str, path: &str| raw_headers(s.addr, "GET", path, None, &[("Host", host)]);
    for path in ["/healthz", "/v1/algorithms"] {
        let r = get("evil.example", path);
        let p = assert_problem(&r, 400);
        assert!(p["type"].as_str().unwrap().ends_with("/bad-host"), "{p}");
        assert!(p["detail"].as_str().unwrap().contains("evil.example"), "{p}");
        let r = get("evil.example:8080", path);
        assert_eq!(r.status, 400);
    }
    for host in ["localhost", "LOCALHOST:8080", "127.0.0.1:1234", "[::1]:80"] {
        assert_eq!(get(host, "/healthz").status, 200, "{host}");
    }
    // No Host at all: refused too.
    assert_eq!(raw_headers(s.addr, "GET", "/healthz", None, &[]).status, 400);
}

/// With tokens: the /v1/ routes need a bearer token (401 with `WWW-Authenticate` otherwise;
/// health and metrics stay open); jobs, batches and schedules belong to the client that made
/// them (404 for another, to read, cancel, export or regenerate); the cache is per client; a
/// client's queued and running jobs are capped (429 with `Retry-After`) without holding back
/// another client.
/// With tokens, a topology is seen by the clients that stored it (or derived it, or named it
/// inline in a synthesis): another client gets 404 for it, does not list it, cannot name it in
/// a synthesis or derive from it; storing the same topology makes it theirs too, and a delete
/// takes it away from the deleting client only, until the last one.
fn topologies_belong_to_the_clients_that_stored_them(db: Db) {
    let clients = ccsynth::api::parse_clients("alice alice-token-0123456789\nbob bob-token-0123456789\n").unwrap();
    let s = start_with(db, |c| c.clients = clients);
    let as_ = |who: &str, method: &str, path: &str, body: Option<Value>| {
        let token = format!("Bearer {who}-token-0123456789");
        let headers = [("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Authorization", token.as_str())];
        let body = body.map(|b| b.to_string().into_bytes());
        raw_headers(s.addr, method, path, body.as_deref(), &headers)
    };
    let ring = json!({"spec": "ring:6"});
    let r = as_("alice", "POST", "/v1/topologies", Some(ring.clone()));
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap().to_string();
    let path = format!("/v1/topologies/{id}");
    assert_eq!(as_("alice", "GET", &path, None).status, 200);
    // Not bob's: a 404 to read, delete and derive from, absent from his list, unknown to his
    // syntheses.
    assert_problem(&as_("bob", "GET", &path, None), 404);
    assert_problem(&as_("bob", "DELETE", &path, None), 404);
    assert_problem(&as_("bob", "POST", &format!("{path}/failures"), Some(json!({"links": [[0, 1]]}))), 404);
    let listed = |who: &str| -> Vec<String> {
        let v = as_(who, "GET", "/v1/topologies", None).json();
        v["items"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(listed("alice"), vec![id.clone()]);
    assert!(listed("bob").is_empty());
    assert_eq!(as_("bob", "GET", "/v1/topologies", None).json()["total"], 0);
    let by_id =
        json!({"topology_id": id, "collective": {"kind": "all_gather", "size_bytes": 6144}, "algorithm": "ring"});
    let p = assert_problem(&as_("bob", "POST", "/v1/syntheses", Some(by_id.clone())), 422);
    assert!(p["detail"].as_str().unwrap().contains("topology_id"), "{p}");
    assert_eq!(as_("alice", "POST", "/v1/syntheses", Some(by_id.clone())).status, 201);
    // A degraded topology alice derives is hers alone too.
    let r = as_("alice", "POST", &format!("{path}/failures"), Some(json!({"links": [[0, 1]]})));
    assert_eq!(r.status, 201, "{}", r.body);
    let degraded = r.json()["id"].as_str().unwrap().to_string();
    assert_problem(&as_("bob", "GET", &format!("/v1/topologies/{degraded}"), None), 404);
    // Bob stores the degraded graph as plain JSON: the same row, without alice's lineage (her
    // topology's id, a 404 to him, and her failures were in his answer, his GET and his list).
    let graph = as_("alice", "GET", &format!("/v1/topologies/{degraded}"), None).json();
    assert_eq!((graph["parent_id"].as_str(), &graph["failures"]["links"]), (Some(id.as_str()), &json!([[0, 1]])));
    let r = as_("bob", "POST", "/v1/topologies", Some(graph["topology"].clone()));
    let seen = [r.json(), as_("bob", "GET", &format!("/v1/topologies/{degraded}"), None).json()];
    let listed_row = as_("bob", "GET", "/v1/topologies", None).json()["items"][0].clone();
    for v in seen.iter().chain([&listed_row]) {
        assert_eq!(v["id"].as_str(), Some(degraded.as_str()), "{v}");
        assert!(v.get("parent_id").is_none() && v.get("failures").is_none(), "{v}");
    }
    assert_eq!(as_("bob", "DELETE", &format!("/v1/topologies/{degraded}"), None).status, 204);
    // Bob stores the same topology: the same id, now his too, and created for him (a 200 told
    // him another client had stored it); stored again, a 200.
    let r = as_("bob", "POST", "/v1/topologies", Some(ring.clone()));
    assert_eq!((r.status, r.json()["id"].as_str()), (201, Some(id.as_str())));
    let r = as_("bob", "POST", "/v1/topologies", Some(ring));
    assert_eq!((r.status, r.json()["id"].as_str()), (200, Some(id.as_str())));
    // Deriving alice's degraded topology from it is created for him too.
    let r = as_("bob", "POST", &format!("{path}/failures"), Some(json!({"links": [[0, 1]]})));
    assert_eq!((r.status, r.json()["id"].as_str()), (201, Some(degraded.as_str())), "{}", r.body);
    assert_eq!(as_("bob", "GET", &path, None).status, 200);
    assert_eq!(as_("bob", "POST", "/v1/syntheses", Some(by_id)).status, 201);
    // Alice's delete takes it from her only; bob's, the last, removes it.
    assert_eq!(as_("alice", "DELETE", &path, None).status, 204);
    assert_problem(&as_("alice", "GET", &path, None), 404);
    assert_eq!(as_("bob", "GET", &path, None).status, 200);
    assert_eq!(as_("bob", "DELETE", &path, None).status, 204);
    assert_problem(&as_("bob", "GET", &path, None), 404);
    // What he holds still: the degraded topology he derived.
    assert_eq!(listed("bob"), vec![degraded]);
    // A topology both hold, which alice's running job uses: her delete takes it from her; bob's,
    // the last, is a 204 (it stays for her job). It was a 409 counting her job and telling him
    // to cancel it, a job that is a 404 to him.
    let r = as_("alice", "POST", "/v1/syntheses", Some(long_job()));
    assert_eq!(r.status, 202, "{}", r.body);
    let job = r.json()["id"].as_str().unwrap().to_string();
    let r = as_("bob", "POST", "/v1/topologies", Some(json!({"spec": long_job()["spec"]})));
    assert_eq!(r.status, 201, "{}", r.body);
    let mesh = format!("/v1/topologies/{}", r.json()["id"].as_str().unwrap());
    assert_eq!(as_("alice", "DELETE", &mesh, None).status, 204);
    let r = as_("bob", "DELETE", &mesh, None);
    assert_eq!(r.status, 204, "{}", r.body);
    assert_problem(&as_("bob", "GET", &mesh, None), 404);
    // It is alice's again, as if she had deleted it last (a 409 for her): not a row no client
    // holds, which nobody could delete.
    assert_eq!(as_("alice", "GET", &mesh, None).status, 200);
    let status = as_("alice", "GET", &format!("/v1/jobs/{job}"), None).json()["status"].clone();
    assert!(status == "queued" || status == "running", "{status}");
    assert_eq!(as_("alice", "DELETE", &format!("/v1/jobs/{job}"), None).status, 200);
}

/// With tokens the queue is fair between clients (issue 28, reproducer 4): with one worker,
/// alice's running job and two more of hers queued, bob's job (queued after them) runs next,
/// before alice's; and a client's queued work is bounded in declared seconds as well as in jobs.
fn a_heavy_client_does_not_starve_a_light_one(db: Db) {
    let clients = ccsynth::api::parse_clients("alice alice-token-0123456789\nbob bob-token-0123456789\n").unwrap();
    let s = start_with(db, |c| {
        c.clients = clients;
        c.workers = 1;
        c.max_active_seconds_per_client = 50.0;
    });
    let as_ = |who: &str, method: &str, path: &str, body: Option<Value>| {
        let token = format!("Bearer {who}-token-0123456789");
        let headers = [("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Authorization", token.as_str())];
        let body = body.map(|b| b.to_string().into_bytes());
        raw_headers(s.addr, method, path, body.as_deref(), &headers)
    };
    let job = |who: &str, id: &str| as_(who, "GET", &format!("/v1/jobs/{id}"), None).json();
    let wait = |who: &str, id: &str, statuses: &[&str]| {
        let mut last = Value::Null;
        wait_until(Duration::from_secs(120), || {
            last = job(who, id);
            statuses.contains(&last["status"].as_str().unwrap_or(""))
        });
        last
    };
    // ILP runs of up to 20 s each (cancelled below).
    let slow = |seed: u64| {
        json!({"spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500", "collective": {"kind": "all_gather", "size_bytes": 67108864},
               "algorithm": "ilp", "options": {"time_limit_s": 20, "seed": seed}, "wait_ms": 0})
    };
    let queue = |who: &str, body: Value| {
        let r = as_(who, "POST", "/v1/syntheses", Some(body));
        assert_eq!(r.status, 202, "{}", r.body);
        r.json()["id"].as_str().unwrap().to_string()
    };
    let a1 = queue("alice", slow(1));
    wait("alice", &a1, &["running"]);
    let a2 = queue("alice", slow(2));
    // 20 s running + 20 s queued + 20 s more would be 60 s of declared solving: over alice's 50.
    let r = as_("alice", "POST", "/v1/syntheses", Some(slow(3)));
    let p = assert_problem(&r, 429);
    assert!(
        p["detail"].as_str().unwrap().contains("declare 60 s of solving")
            && p["detail"].as_str().unwrap().contains("50 s"),
        "{p}"
    );
    assert_eq!(r.header("retry-after"), Some("5"));
    // A request over the 50 s alone can never be queued: a 422 at its time limit, not a 429
    // that no wait satisfies; a batch over it, at `requests`.
    let mut alone = slow(4);
    alone["options"]["time_limit_s"] = json!(51);
    let p = assert_problem(&as_("bob", "POST", "/v1/syntheses", Some(alone.clone())), 422);
    assert_eq!(p["errors"][0]["path"], "options.time_limit_s", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("51 s of solving declared"), "{p}");
    alone.as_object_mut().unwrap().remove("wait_ms");
    let mut other = alone.clone();
    other["options"]["seed"] = json!(5);
    let p = assert_problem(&as_("bob", "POST", "/v1/batches", Some(json!({"requests": [alone, other]}))), 422);
    assert_eq!(p["errors"][0]["path"], "requests", "{p}");
    // Bob's quick job, queued after alice's second.
    let quick = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 65536}, "algorithm": "ring",
                       "options": {"time_limit_s": 5}, "wait_ms": 0});
    let b = queue("bob", quick);
    // The worker frees up: bob's job is next, though alice's was queued first.
    assert_eq!(as_("alice", "DELETE", &format!("/v1/jobs/{a1}"), None).status, 200);
    let done = wait("bob", &b, &["succeeded"]);
    let started_b = done["started_at_ms"].as_i64().unwrap();
    let second = job("alice", &a2);
    if let Some(started_a2) = second["started_at_ms"].as_i64() {
        assert!(started_a2 >= started_b, "alice's second job started before bob's: {second} {done}");
    }
    // Without bob, alice's next job runs.
    wait("alice", &a2, &["running"]);
    assert_eq!(as_("alice", "DELETE", &format!("/v1/jobs/{a2}"), None).status, 200);
}

/// A scheduler that needs an answer now marks its request interactive (issue 28, point 4): with
/// one worker busy and a normal job of the same client queued before it, the interactive job
/// runs first; interactive jobs have short time limits and a small per-client count; a batch
/// cannot be interactive.
fn interactive_jobs_are_claimed_first_within_their_limits(db: Db) {
    let s = start_with(db, |c| {
        c.workers = 1;
        c.max_interactive_per_client = 1;
    });
    let slow = |seed: u64| {
        json!({"spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500", "collective": {"kind": "all_gather", "size_bytes": 67108864},
               "algorithm": "ilp", "options": {"time_limit_s": 20, "seed": seed}, "wait_ms": 0})
    };
    let queue = |body: Value| {
        let (code, v) = call(&s, "POST", "/v1/syntheses", Some(body));
        assert_eq!(code, 202, "{v}");
        v["id"].as_str().unwrap().to_string()
    };
    let first = queue(slow(1));
    wait_for_job(&s, &first, &["running"]);
    let normal = queue(slow(2));
    let mut quick = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 65536}, "algorithm": "ring",
                           "options": {"time_limit_s": 5}, "priority": "interactive", "wait_ms": 0});
    let interactive = queue(quick.clone());
    // One interactive job at a time here: a second is refused, naming the limit, and stores
    // nothing (its new topology was kept and counted).
    let stored = || call(&s, "GET", "/v1/topologies", None).1["total"].as_i64().unwrap();
    let before = stored();
    quick["spec"] = json!("ring:6");
    let r = raw(s.addr, "POST", "/v1/syntheses", Some(quick.to_string().as_bytes()));
    let p = assert_problem(&r, 429);
    assert!(p["detail"].as_str().unwrap().contains("interactive jobs, the limit per client is 1"), "{p}");
    assert_eq!(stored(), before);
    // The worker frees up: the interactive job runs before the normal one queued earlier.
    assert_eq!(raw(s.addr, "DELETE", &format!("/v1/jobs/{first}"), None).status, 200);
    let done = wait_for_job(&s, &interactive, &["succeeded"]);
    let second = call(&s, "GET", &format!("/v1/jobs/{normal}"), None).1;
    if let Some(started) = second["started_at_ms"].as_i64() {
        assert!(started >= done["started_at_ms"].as_i64().unwrap(), "{second} {done}");
    }
    wait_for_job(&s, &normal, &["running"]);
    // Short limits only, and not in batches.
    let mut long = slow(3);
    long["priority"] = json!("interactive");
    long["options"]["time_limit_s"] = json!(120);
    long["spec"] = json!("ring:7");
    let p = assert_problem(&raw(s.addr, "POST", "/v1/syntheses", Some(long.to_string().as_bytes())), 422);
    assert!(p["detail"].as_str().unwrap().contains("at most 60 s"), "{p}");
    assert_eq!(stored(), before);
    let batch = json!({"requests": [{"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}, "priority": "interactive"}]});
    let p = assert_problem(&raw(s.addr, "POST", "/v1/batches", Some(batch.to_string().as_bytes())), 422);
    assert_eq!(p["errors"][0]["path"], "requests[0].priority", "{p}");
    assert_eq!(raw(s.addr, "DELETE", &format!("/v1/jobs/{normal}"), None).status, 200);
    // A schedule whose request ran 600 s (thorough) regenerates interactively within the
    // interactive limit (it was a 422 at options.time_limit_s, which the route does not take).
    let thorough = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}, "algorithm": "greedy",
                          "options": {"effort": "thorough"}, "wait_ms": 60000});
    let (code, v) = call(&s, "POST", "/v1/syntheses", Some(thorough));
    assert_eq!(code, 201, "{v}");
    let again = json!({"failed_links": [[0, 1]], "priority": "interactive", "wait_ms": 60000});
    let (code, v) =
        call(&s, "POST", &format!("/v1/schedules/{}/regenerate", v["schedule_id"].as_str().unwrap()), Some(again));
    assert_eq!((code, v["status"].as_str()), (201, Some("succeeded")), "{v}");
}

fn tokens_authenticate_and_jobs_belong_to_their_client(db: Db) {
    let clients =
        ccsynth::api::parse_clients("# two clients\nalice alice-token-0123456789\n\nbob:bob-token-0123456789xx\n")
            .unwrap();
    assert_eq!(clients.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["alice", "bob"]);
    let s = start_with(db, |c| {
        c.clients = clients;
        c.max_active_per_client = 2;
    });
    let as_ = |who: Option<&str>, method: &str, path: &str, body: Option<Value>| {
        let token = who.map(|w| format!("Bearer {w}-token-0123456789{}", if w == "bob" { "xx" } else { "" }));
        let mut headers = vec![("Host", "127.0.0.1"), ("Content-Type", "application/json")];
        if let Some(t) = &token {
            headers.push(("Authorization", t.as_str()));
        }
        let body = body.map(|b| b.to_string().into_bytes());
        raw_headers(s.addr, method, path, body.as_deref(), &headers)
    };
    let r = as_(None, "GET", "/v1/algorithms", None);
    assert_problem(&r, 401);
    assert!(r.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")), "{:?}", r.headers);
    let wrong = raw_headers(
        s.addr,
        "GET",
        "/v1/algorithms",
        None,
        &[("Host", "127.0.0.1"), ("Authorization", "Bearer alice-token-0123456780")],
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(as_(Some("alice"), "GET", "/v1/algorithms", None).status, 200);
    assert_eq!(as_(None, "GET", "/healthz", None).status, 200);
    assert_eq!(as_(None, "GET", "/metrics", None).status, 200);
    // Long jobs (4000 seeds of the matcher on a mesh), each a different request.
    let long = |seeds: u32| {
        json!({"spec": "mesh:8x8", "collective": {"kind": "all_gather", "size_bytes": 1048576, "chunks_per_npu": 1},
               "algorithm": "greedy", "options": {"seeds": seeds}, "wait_ms": 0})
    };
    let queue = |who: &str, seeds: u32| as_(Some(who), "POST", "/v1/syntheses", Some(long(seeds)));
    let id_of = |r: Resp| {
        assert_eq!(r.status, 202, "{}", r.body);
        r.json()["id"].as_str().unwrap().to_string()
    };
    let first = id_of(queue("alice", 4000));
    // Another client's job is not there for bob: 404 to read and to cancel.
    assert_problem(&as_(Some("bob"), "GET", &format!("/v1/jobs/{first}"), None), 404);
    assert_problem(&as_(Some("bob"), "DELETE", &format!("/v1/jobs/{first}"), None), 404);
    assert_eq!(as_(Some("alice"), "GET", &format!("/v1/jobs/{first}"), None).status, 200);
    let second = id_of(queue("alice", 4001));
    let r = queue("alice", 4002);
    let p = assert_problem(&r, 429);
    assert!(p["detail"].as_str().unwrap().contains("limit per client is 2"), "{p}");
    assert!(r.header("retry-after").is_some());
    // A batch beyond the quota is refused before its items are checked: heavy ones (4096 NPUs)
    // cost no CPU (issue 28). Five never fit two active jobs: a 422 naming the limit.
    let heavy = json!({"spec": "torus:64x64", "collective": {"kind": "all_reduce", "size_bytes": 1u64 << 30}});
    let t = Instant::now();
    let r = as_(Some("bob"), "POST", "/v1/batches", Some(json!({"requests": vec![heavy; 5]})));
    let p = assert_problem(&r, 422);
    assert!(p["detail"].as_str().unwrap().contains("at most 2 fit in a client's active jobs"), "{p}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let theirs = id_of(queue("bob", 4003));
    // Its owner cancels it; then alice has room again.
    assert_eq!(as_(Some("alice"), "DELETE", &format!("/v1/jobs/{first}"), None).status, 200);
    let third = id_of(queue("alice", 4004));
    // Clean up: every long job cancelled by its owner.
    for (who, id) in [("alice", &second), ("alice", &third), ("bob", &theirs)] {
        assert_eq!(as_(Some(who), "DELETE", &format!("/v1/jobs/{id}"), None).status, 200);
    }
    // Results are per client: the same request is solved for each, cached for each, and one's
    // schedule and batch are a 404 for the other.
    let quick =
        json!({"spec": "ring:4", "collective": {"kind": "all_reduce", "size_bytes": 4096}, "algorithm": "greedy"});
    let done = |who: &str| {
        let r = as_(Some(who), "POST", "/v1/syntheses", Some(quick.clone()));
        assert_eq!(r.status, 201, "{}", r.body);
        r.json()
    };
    let (a, b) = (done("alice"), done("bob"));
    assert_eq!((a["cached"].as_bool(), b["cached"].as_bool()), (Some(false), Some(false)), "bob's is his own");
    assert_ne!(a["schedule_id"], b["schedule_id"]);
    assert_eq!(done("alice")["cached"], true);
    let sid = a["schedule_id"].as_str().unwrap();
    for path in ["", "/summary", "/comparison", "/export?format=chrome-trace"] {
        assert_eq!(as_(Some("alice"), "GET", &format!("/v1/schedules/{sid}{path}"), None).status, 200, "{path}");
        assert_problem(&as_(Some("bob"), "GET", &format!("/v1/schedules/{sid}{path}"), None), 404);
    }
    let regen =
        as_(Some("bob"), "POST", &format!("/v1/schedules/{sid}/regenerate"), Some(json!({"failed_links": [[0, 1]]})));
    assert_problem(&regen, 404);
    let batch = as_(Some("alice"), "POST", "/v1/batches", Some(json!({"requests": [quick]})));
    assert_eq!(batch.status, 201, "{}", batch.body);
    let bid = batch.json()["batch_id"].as_str().unwrap().to_string();
    assert_eq!(as_(Some("alice"), "GET", &format!("/v1/batches/{bid}"), None).status, 200);
    assert_problem(&as_(Some("bob"), "GET", &format!("/v1/batches/{bid}"), None), 404);
}

/// Per-client request rate (token bucket: `max_requests_per_s` a second, bursts of as many):
/// beyond it a 429 `rate-limited` problem with `Retry-After`, for that client alone, and
/// allowed again once the allowance refills. `private_metrics` puts `/metrics` behind a token.
#[test]
fn each_client_has_a_request_rate_and_metrics_can_be_private() {
    let clients = ccsynth::api::parse_clients("alice alice-token-0123456789\nbob bob-token-0123456789xx\n").unwrap();
    let s = start_with(Db::Sqlite, |c| {
        c.clients = clients;
        c.max_requests_per_s = 2.0;
        c.private_metrics = true;
    });
    let get = |token: Option<&str>, path: &str| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Host", "127.0.0.1")];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        raw_headers(s.addr, "GET", path, None, &headers)
    };
    let (alice, bob) = ("alice-token-0123456789", "bob-token-0123456789xx");
    assert_problem(&get(None, "/metrics"), 401);
    assert_eq!(get(None, "/healthz").status, 200);
    // A burst of 2: the third request in a row is refused.
    let statuses: Vec<u16> = (0..4).map(|_| get(Some(alice), "/v1/algorithms").status).collect();
    assert_eq!(&statuses[..2], [200, 200], "{statuses:?}");
    let r = get(Some(alice), "/v1/algorithms");
    let p = assert_problem(&r, 429);
    assert!(p["type"].as_str().unwrap().ends_with("/rate-limited"), "{p}");
    assert!(r.header("retry-after").and_then(|v| v.parse::<u64>().ok()).is_some_and(|v| v >= 1), "{:?}", r.headers);
    assert_eq!(get(Some(bob), "/metrics").status, 200, "another client's allowance is its own");
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(get(Some(alice), "/v1/algorithms").status, 200, "refilled");
}

/// Sends `head` on `s` and reads one response: (status line, content type, body).
fn raw_exchange(s: &mut TcpStream, head: &[u8]) -> (String, String, serde_json::Value) {
    s.write_all(head).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).unwrap_or(0);
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(split) = text.find("\r\n\r\n") {
            let (head, body) = text.split_at(split + 4);
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= len || n == 0 {
                let kind = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type: ").map(str::to_string))
                    .unwrap_or_default();
                let status = head.lines().next().unwrap_or("").to_string();
                return (status, kind, serde_json::from_str(&body[..len]).unwrap_or(serde_json::Value::Null));
            }
        }
        assert!(n > 0, "closed before a whole response: {}", String::from_utf8_lossy(&got));
    }
}

/// A body is judged by its head where it can be: a declared length over the limit is a 413 at
/// once, even to a client that asks `Expect: 100-continue` (it was told "100 Continue", then
/// refused after 16 MiB). A body that breaks off, or whose chunked coding does not parse, is a
/// 400, not a 413 saying a 17-byte body exceeds the limit.
#[test]
fn a_body_is_refused_from_its_head_and_a_broken_one_is_a_400() {
    let s = start_with(Db::Sqlite, |c| c.max_body_bytes = 4096);
    let head = |extra: &str| {
        format!("POST /v1/topologies HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{extra}\r\n")
    };
    let mut c = TcpStream::connect(s.addr).unwrap();
    let (status, kind, body) =
        raw_exchange(&mut c, head("Expect: 100-continue\r\nContent-Length: 100000\r\n").as_bytes());
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    assert_eq!((kind.as_str(), &body["status"]), ("application/problem+json", &json!(413)), "{body}");
    let broken = [
        // A chunk size that is no hex number.
        format!("{}zz\r\n{{\"spec\":\"ring:4\"}}\r\n0\r\n\r\n", head("Transfer-Encoding: chunked\r\n")),
        // 7 of the 100 bytes declared, then the client stops sending.
        format!("{}{{\"spec\"", head("Content-Length: 100\r\n")),
    ];
    // Over the limit in chunks, with no length declared: still a 413 (read up to the limit).
    let chunk = format!("{:x}\r\n{}\r\n", 5000, "x".repeat(5000));
    let mut c = TcpStream::connect(s.addr).unwrap();
    let (status, _, body) =
        raw_exchange(&mut c, format!("{}{chunk}0\r\n\r\n", head("Transfer-Encoding: chunked\r\n")).as_bytes());
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    assert_eq!(body["status"], 413, "{body}");
    for request in broken {
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let (status, kind, body) = raw_exchange(&mut c, b"");
        assert!(status.starts_with("HTTP/1.1 400"), "{request:?}: {status}");
        assert_eq!(kind, "application/problem+json", "{status}");
        assert_eq!(body["type"], "https://ccsynth.dev/problems/unparsable-request", "{body}");
    }
}

/// Every error is a problem, those hyper answers before any route sees the request too: a
/// request target over `MAX_URI_BYTES` is a 414 problem, however long (hyper itself refuses
/// one over 64 KiB) and whichever request of a kept-alive connection it is; a request line
/// that does not parse is a 400 problem, a head over hyper's buffer a 431 problem (issue 15).
#[test]
fn a_long_uri_is_a_414_problem() {
    let s = start_with(Db::Sqlite, |_| {});
    let long = |n: usize| format!("/healthz?pad={}", "a".repeat(n));
    let problem = |status: &str, kind: &str, body: &Value, code: u16| {
        assert!(status.starts_with(&format!("HTTP/1.1 {code}")), "{status}");
        assert_eq!(kind, "application/problem+json", "{status}");
        assert_eq!(body["status"], code, "{body}");
    };
    for n in [70_000, ccsynth::api::MAX_URI_BYTES + 100] {
        let mut c = TcpStream::connect(s.addr).unwrap();
        let (status, kind, body) =
            raw_exchange(&mut c, format!("GET {} HTTP/1.1\r\nHost: localhost\r\n\r\n", long(n)).as_bytes());
        problem(&status, &kind, &body, 414);
        assert!(body["detail"].as_str().unwrap().contains("8192"), "{body}");
    }
    // Kept alive: the first request is served, a second too long is a problem either way.
    for n in [ccsynth::api::MAX_URI_BYTES, 70_000] {
        let mut c = TcpStream::connect(s.addr).unwrap();
        let (status, ..) = raw_exchange(&mut c, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let head = format!("GET {} HTTP/1.1\r\nHost: localhost\r\n\r\n", long(n));
        let (status, kind, body) = raw_exchange(&mut c, head.as_bytes());
        problem(&status, &kind, &body, 414);
    }
    // Just under the limit: served.
    let at_limit = long(ccsynth::api::MAX_URI_BYTES - "/healthz?pad=".len());
    let mut c = TcpStream::connect(s.addr).unwrap();
    let (status, ..) = raw_exchange(&mut c, format!("GET {at_limit} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    // Not HTTP, and a head over hyper's buffer (about 400 KiB).
    let mut c = TcpStream::connect(s.addr).unwrap();
    let (status, kind, body) = raw_exchange(&mut c, b"GET /healthz\x01 HTTP/1.1\r\nHost: localhost\r\n\r\n");
    problem(&status, &kind, &body, 400);
    let mut c = TcpStream::connect(s.addr).unwrap();
    let huge = format!("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Pad: {}\r\n\r\n", "b".repeat(600_000));
    let (status, kind, body) = raw_exchange(&mut c, huge.as_bytes());
    problem(&status, &kind, &body, 431);
}

/// On PostgreSQL a replica hears the others' job events (LISTEN/NOTIFY): a request waiting on
/// replica A for a job that replica B runs is answered as soon as B ends it, not at A's next
/// look at the database (every 2 s when it listens), and B's idle worker is woken by the job
/// A queued (issue 15).
#[test]
fn a_waiter_hears_another_replica_end_its_job() {
    let url = fresh_database(Db::Postgres);
    let a = start_on(url.clone(), |c| c.workers = 1);
    // A's only worker is busy with a long solve.
    let (code, long) = call(
        &a,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500", "collective": {"kind": "all_gather", "size_bytes": 67108864},
                    "algorithm": "ilp", "options": {"time_limit_s": 60}, "wait_ms": 0}),
        ),
    );
    assert_eq!(code, 202, "{long}");
    let long_id = long["id"].as_str().unwrap().to_string();
    wait_for_job(&a, &long_id, &["running"]);
    let b = start_on(url.to_string(), |c| c.workers = 1);
    for seed in 0..3 {
        let started = Instant::now();
        let (code, v) = call(
            &a,
            "POST",
            "/v1/syntheses",
            Some(json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096},
                        "algorithm": "greedy", "options": {"seed": seed}, "wait_ms": 20000})),
        );
        assert_eq!((code, &v["status"]), (201, &json!("succeeded")), "{v}");
        assert!(started.elapsed() < Duration::from_millis(1500), "answered after {:?}", started.elapsed());
    }
    let (code, _) = call(&b, "DELETE", &format!("/v1/jobs/{long_id}"), None);
    assert!(code < 300, "{code}");
    drop(b);
}

/// A small stored schedule body.
fn json_body() -> ccsynth::store::StoredBody {
    ccsynth::store::StoredBody::Json("{}".into())
}

/// Schedule bodies from 64 KiB on are stored compressed and served as the same document
/// (issue 15): an all-gather on ring:64 (4,032 transfers).
/// `GET /v1/schedules/{id}` serves the compact form (rows, ranges, no implied conditions) and
/// `export?format=explicit` the explicit one, each under its exact Content-Length, for a
/// schedule stored as JSON and for one stored packed; both read back as the same schedule.
fn schedules_are_served_compact_and_explicit(db: Db) {
    use ccsynth::schedule::Schedule;
    let s = start(db);
    // The ring's messages on ring:64 in 8 chunks per NPU carry 8 consecutive chunks, as a range;
    // on ring:4 in one chunk per NPU a single chunk each.
    for (spec, chunks, packed) in [("ring:4", 1, false), ("ring:64", 8, true)] {
        let req = json!({"spec": spec, "algorithm": "ring", "wait_ms": 30000,
            "collective": {"kind": "all_reduce", "size_bytes": 1 << 20, "chunks_per_npu": chunks}});
        let (code, v) = call(&s, "POST", "/v1/syntheses", Some(req));
        assert_eq!(code, 201, "{v}");
        let sid = v["schedule_id"].as_str().unwrap().to_string();
        let compact = raw(s.addr, "GET", &format!("/v1/schedules/{sid}"), None);
        let explicit = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=explicit"), None);
        for r in [&compact, &explicit] {
            assert_eq!((r.status, r.header("content-type")), (200, Some("application/json")), "{}", r.body);
            assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
        }
        assert!(!compact.body.contains("precondition"), "{spec}: {}", &compact.body[..300]);
        // No row and no range (arrays in a transfer) in the explicit form.
        let ranged = |t: &str| t.contains("\"chunks\":[[") || t.contains("\"transfers\":[[");
        assert!(explicit.body.contains("\"precondition\"") && !ranged(&explicit.body));
        assert!(ranged(&compact.body), "{spec}: the compact form has no row");
        assert_eq!(compact.body.contains(",8]],\"copy\"]"), packed, "{spec}");
        assert_eq!(explicit.body.len() >= ccsynth::store::COMPRESS_FROM_BYTES, packed, "{spec}");
        let (a, b) = (Schedule::from_json(&compact.body).unwrap(), Schedule::from_json(&explicit.body).unwrap());
        assert!(a == b, "{spec}: the two forms differ");
        assert!(compact.body.len() < explicit.body.len());
    }
}

fn large_schedules_are_stored_compressed(db: Db) {
    let s = start(db);
    let (code, v) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"spec": "ring:64", "collective": {"kind": "all_gather", "size_bytes": 65536}, "algorithm": "ring", "wait_ms": 30000}),
        ),
    );
    assert_eq!(code, 201, "{v}");
    let sid = v["schedule_id"].as_str().unwrap().to_string();
    let r = raw(s.addr, "GET", &format!("/v1/schedules/{sid}"), None);
    assert_eq!(r.status, 200);
    // Written as the client reads it (never held whole), under the length counted ahead.
    assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
    let doc = r.json();
    assert_eq!(doc["transfers"].as_array().unwrap().len(), 4032);
    assert_eq!(doc["topology"]["npus"], 64, "the topology is spliced back in");
    // It checks out: the document served is the schedule, whole.
    let (code, report) = call(&s, "POST", "/v1/validate", Some(doc.clone()));
    assert_eq!(code, 200, "{report}");
    assert_eq!(report["valid"], true, "{report}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (plain, packed): (String, Option<Vec<u8>>) = rt.block_on(async {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&s.url).await.unwrap();
        let row = sqlx::query("SELECT body, body_zstd FROM schedules WHERE id = $1")
            .bind(&sid)
            .fetch_one(&pool)
            .await
            .unwrap();
        (sqlx::Row::get(&row, "body"), sqlx::Row::get(&row, "body_zstd"))
    });
    let packed = packed.expect("stored compressed");
    assert!(plain.is_empty());
    assert!(r.body.len() >= ccsynth::store::COMPRESS_FROM_BYTES);
    assert!(packed.len() * 5 < r.body.len(), "{} compressed bytes for {} of JSON", packed.len(), r.body.len());
    // Stored packed (a JSON header and the transfers as columns), not as JSON: a regeneration
    // reads it back first, and the export reads it too.
    let bytes = zstd::stream::decode_all(&packed[..]).unwrap();
    assert!(ccsynth::schedule::packed::is_packed(&bytes));
    let (code, job) = call(
        &s,
        "POST",
        &format!("/v1/schedules/{sid}/regenerate"),
        Some(json!({"failed_links": [[0, 1]], "algorithm": "greedy", "wait_ms": 30000})),
    );
    assert_eq!((code, job["status"].as_str()), (201, Some("succeeded")), "{job}");
    let r2 = &job["summary"]["stats"]["regeneration"];
    assert_eq!(r2["previous_collective_time_ns"], doc["collective_time_ns"], "{job}");
    assert!(r2["repair"]["rerouted"].as_u64().unwrap() > 0, "{r2}");
    let xml = raw(s.addr, "GET", &format!("/v1/schedules/{sid}/export?format=msccl-xml"), None);
    assert_eq!(xml.status, 200);
    assert!(xml.body.contains("<algo"), "{}", &xml.body[..xml.body.len().min(200)]);
    // A row as it was stored before compression (the whole JSON in `body`) is compressed at
    // the next start, and served the same.
    let url = s.url.clone();
    // The database outlives this server: the next one starts on it.
    let mut s = s;
    let _db = s.owned.take();
    drop(s);
    rt.block_on(async {
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        sqlx::query("UPDATE schedules SET body = $1, body_zstd = NULL, topology_by_ref = 0 WHERE id = $2")
            .bind(&r.body)
            .bind(&sid)
            .execute(&pool)
            .await
            .unwrap();
    });
    let s = start_on(url.clone(), |_| {});
    wait_until(Duration::from_secs(20), || {
        rt.block_on(async {
            let pool = sqlx::AnyPool::connect(&url).await.unwrap();
            let row =
                sqlx::query("SELECT body_zstd FROM schedules WHERE id = $1").bind(&sid).fetch_one(&pool).await.unwrap();
            sqlx::Row::get::<Option<Vec<u8>>, _>(&row, "body_zstd").is_some()
        })
    });
    let again = raw(s.addr, "GET", &format!("/v1/schedules/{sid}"), None);
    assert_eq!(again.status, 200);
    assert_eq!(again.json(), doc);
}

/// Issue 28, reproducer 5: concurrent GETs of one export share one computation (and one
/// buffer), and different heavy exports wait for the export memory budget instead of being
/// computed side by side.
fn concurrent_exports_share_one_computation_within_a_memory_budget(db: Db) {
    let s = start_with(db, |c| c.export_memory_mb = 1);
    let req = json!({"spec": "torus:16x16", "collective": {"kind": "all_gather", "size_bytes": 268435456},
                     "algorithm": "greedy", "wait_ms": 120000});
    let (code, v) = call(&s, "POST", "/v1/syntheses", Some(req));
    assert_eq!(code, 201, "{v}");
    let sid = v["schedule_id"].as_str().unwrap().to_string();
    let metric = |name: &str| -> u64 {
        let m = raw(s.addr, "GET", "/metrics", None).body;
        let line = m.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} in {m}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    // Fired together, each GET at once: a computation of the plan takes about a second.
    let fire = |paths: Vec<String>| -> Vec<Resp> {
        let barrier = std::sync::Barrier::new(paths.len());
        std::thread::scope(|scope| {
            let handles: Vec<_> = paths
                .iter()
                .map(|p| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        raw(s.addr, "GET", p, None)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    let built = metric("ccsynth_exports_built_total");
    let same = format!("/v1/schedules/{sid}/export?format=mscclpp-json");
    let answers = fire(vec![same.clone(); 6]);
    for r in &answers {
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body, answers[0].body, "one plan for all");
    }
    assert_eq!(metric("ccsynth_exports_built_total"), built + 1, "six identical GETs, one computation");
    // Two different exports with a budget of 1 MiB: each is estimated far above it, so they
    // run one after the other, the second waiting for the first. Fired together they still
    // reach the budget one at a time when one's read of the stored schedule is slow (a busy
    // database), so a pair is fired again, under new names, until one of them waits: a
    // budget that never makes an export wait fails every round.
    let waits = metric("ccsynth_export_budget_waits_total");
    let mut rounds = 0;
    while metric("ccsynth_export_budget_waits_total") == waits && rounds < 5 {
        let answers = fire(vec![format!("{same}&name=a{rounds}"), format!("{same}&name=b{rounds}")]);
        assert!(answers.iter().all(|r| r.status == 200));
        rounds += 1;
        assert_eq!(metric("ccsynth_exports_built_total"), built + 1 + 2 * rounds, "each name its own computation");
    }
    assert!(metric("ccsynth_export_budget_waits_total") > waits, "no export waited for the budget in {rounds} rounds");
}

/// The validate route holds its check's estimated peak of the memory budget exports hold
/// theirs from: two heavy checks fired together run one after the other. Without it a
/// 155 kB body (1,024 NPUs of 1,024 chunks each) held 2 GB per request, side by side. So do
/// the lists a body's ranges expand to, while they are read.
fn concurrent_validations_wait_for_the_memory_budget(db: Db) {
    let s = start_with(db, |c| c.export_memory_mb = 1);
    // A ring of 256 NPUs, an all-gather of 256 chunks each, one transfer: 2^24 (npu, slot)
    // cells, a check estimated far above the budget of 1 MiB, every postcondition pair unmet.
    let n = 256u32;
    let links: Vec<Value> = (0..n)
        .flat_map(|v| [(v, (v + 1) % n), ((v + 1) % n, v)])
        .map(|(a, b)| json!({"src": a, "dst": b, "latency_ns": 500.0, "bandwidth_gb_per_s": 100.0}))
        .collect();
    let doc = json!({"format": "ccsynth.schedule.v1", "topology": {"npus": n, "switches": 0, "links": links},
        "collective": {"kind": "all_gather", "size_bytes": 1u64 << 30, "chunks_per_npu": 256},
        "num_chunks": 65536, "chunk_size_bytes": 16384.0, "combining": false,
        "transfers": [[0, 0, 1, [[0, 256, 1]], "copy"]]})
    .to_string();
    let metric = || budget_waits(s.addr);
    let fire = || validate_twice(s.addr, &doc);
    // As with the exports above: a pair may reach the budget one at a time by chance, so it
    // is fired again until one waits; a budget that never makes a check wait fails every round.
    let waits = metric();
    let mut rounds = 0;
    while metric() == waits && rounds < 5 {
        for r in fire() {
            assert_eq!(r.status, 200, "{}", r.body);
            let v = r.json();
            assert_eq!(v["valid"], false, "{v}");
            assert!(v["violation_count"].as_u64().unwrap() >= 1000, "{v}");
        }
        rounds += 1;
    }
    assert!(metric() > waits, "no check waited for the budget in {rounds} rounds");
    // A few bytes of ranges that expand to many ids: the lists are held from the budget while
    // they are read, sized from the document first. Each body's 4 × 2^20 ids (16 MiB of lists)
    // take a budget of 16 MiB whole, so two wait for each other. Before, a check this small
    // took 1 MiB of it, and two bodies of 1 kB read 1 GiB of lists each side by side.
    let s = start_with(db, |c| c.export_memory_mb = 16);
    let ring: Vec<Value> = (0..4u32)
        .flat_map(|v| [(v, (v + 1) % 4), ((v + 1) % 4, v)])
        .map(|(a, b)| json!({"src": a, "dst": b, "latency_ns": 500.0, "bandwidth_gb_per_s": 100.0}))
        .collect();
    let rows: Vec<Value> = (0..4u64).map(|k| json!([0, 0, 1, [[k, 1u64 << 20, 1]], "copy"])).collect();
    let doc = json!({"format": "ccsynth.schedule.v1", "topology": {"npus": 4, "switches": 0, "links": ring},
        "collective": {"kind": "all_gather", "size_bytes": 4096, "chunks_per_npu": 1},
        "num_chunks": 4, "chunk_size_bytes": 1024.0, "combining": false, "transfers": rows})
    .to_string();
    assert!(doc.len() < 1024, "{}", doc.len());
    let metric = || budget_waits(s.addr);
    let waits = metric();
    let mut rounds = 0;
    while metric() == waits && rounds < 5 {
        for r in validate_twice(s.addr, &doc) {
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(r.json()["valid"], false);
        }
        rounds += 1;
    }
    assert!(metric() > waits, "no read of ranges waited for the budget in {rounds} rounds");
}

/// `ccsynth_export_budget_waits_total` of the server at `addr`.
fn budget_waits(addr: std::net::SocketAddr) -> u64 {
    let m = raw(addr, "GET", "/metrics", None).body;
    let line = m.lines().find(|l| l.starts_with("ccsynth_export_budget_waits_total ")).expect("the metric");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `doc` validated twice at once (released together by a barrier).
fn validate_twice(addr: std::net::SocketAddr, doc: &str) -> Vec<Resp> {
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    raw(addr, "POST", "/v1/validate", Some(doc.as_bytes()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A failure as a worker records it (a refusal).
fn failure(message: &str) -> ccsynth::store::Failure {
    ccsynth::store::Failure { kind: ccsynth::engine::ErrorKind::Refused, message: message.to_string() }
}

/// The property names openapi.yaml documents for the object at `path` under
/// `components.schemas` (`["SynthesisRequest", "options"]`): the keys one level under its
/// `properties:` (the file's own layout: two spaces a level).
fn documented(path: &[&str]) -> std::collections::BTreeSet<String> {
    let lines: Vec<&str> = ccsynth::api::OPENAPI_YAML.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut at = lines.iter().position(|l| *l == "  schemas:").expect("components.schemas");
    for (depth, name) in path.iter().enumerate() {
        let want = format!("{}{name}:", " ".repeat(4 + 4 * depth));
        at += lines[at..].iter().position(|l| *l == want).unwrap_or_else(|| panic!("{path:?}: no {want:?}"));
        let props = format!("{}properties:", " ".repeat(6 + 4 * depth));
        at += lines[at..].iter().position(|l| *l == props).unwrap_or_else(|| panic!("{path:?}: no properties"));
    }
    let keys = 8 + 4 * (path.len() - 1);
    lines[at + 1..]
        .iter()
        .filter(|l| !l.trim().is_empty())
        .take_while(|l| indent(l) >= keys)
        .filter(|l| indent(l) == keys)
        .map(|l| l.trim().split(':').next().unwrap().to_string())
        .collect()
}

/// The fields a `deny_unknown_fields` type accepts, from serde's own refusal of one it does not.
fn accepted<T: serde::de::DeserializeOwned + std::fmt::Debug>() -> std::collections::BTreeSet<String> {
    let e = serde_json::from_value::<T>(json!({"__not_a_field": 1})).unwrap_err().to_string();
    let list = e.split("expected one of ").nth(1).unwrap_or_else(|| panic!("{e}"));
    list.split(", ").map(|f| f.trim_matches(|c: char| c == '`' || c.is_whitespace()).to_string()).collect()
}

/// openapi.yaml's request schemas are the types the server reads, field for field in both
/// directions (the API's options once were a copy that lacked `threads` while the document
/// advertised it), and every key a job answers with is documented.
#[test]
fn openapi_schemas_match_the_types() {
    assert_eq!(documented(&["SynthesisRequest"]), accepted::<ccsynth::api::SynthesisRequest>(), "the request");
    assert_eq!(documented(&["SynthesisRequest", "options"]), accepted::<ccsynth::engine::Options>(), "options");
    assert_eq!(
        documented(&["SynthesisRequest", "collective"]),
        accepted::<ccsynth::collective::CollectiveSpec>(),
        "the collective"
    );
    // Responses: every key of a succeeded and a failed job as POST answers them and of a
    // batch's job as GET answers it is documented, and every documented key appears in one.
    let s = start(Db::Sqlite);
    let ok = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}, "algorithm": "ring"});
    let mut waiting = ok.clone();
    waiting["wait_ms"] = json!(30000);
    // A ring does not read `window`: the answer names it in `ignored_options`.
    waiting["options"] = json!({"window": 3});
    let (_, succeeded) = call(&s, "POST", "/v1/syntheses", Some(waiting));
    let (_, failed) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "fc:4",
        "collective": {"kind": "all_reduce", "size_bytes": 4096}, "algorithm": "bucket", "wait_ms": 30000})),
    );
    assert_eq!((&succeeded["status"], &failed["status"]), (&json!("succeeded"), &json!("failed")));
    // Not the request above: a batch's job for it would be that job, served from the cache.
    let other =
        json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 8192}, "algorithm": "ring"});
    let (code, batch) = call(&s, "POST", "/v1/batches", Some(json!({"requests": [other]})));
    assert_eq!(code, 201, "{batch}");
    let id = batch["job_ids"][0].as_str().unwrap_or_else(|| panic!("{batch}"));
    let in_batch = wait_for_job(&s, id, &["succeeded"]);
    let mut seen = std::collections::BTreeSet::new();
    for job in [&succeeded, &failed, &in_batch] {
        for k in job.as_object().unwrap().keys() {
            seen.insert(k.clone());
        }
    }
    assert_eq!(seen, documented(&["Job"]), "a job's keys");
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>();
    assert_eq!(keys(&succeeded["summary"]), documented(&["Summary"]), "a summary's keys");
}

/// A topology a request built (65,536 links or more) is handed to the worker that runs the job
/// in this process, not parsed again from its stored body (issue 64: fc:1448's 140 MB took a
/// fifth of a 10 s limit): `ccsynth_topologies_reused` counts it, a small one is not kept, the
/// schedule is the one the engine gives on the topology as parsed, and the job takes it (the
/// next job on the topology parses its body).
fn a_large_topology_built_for_a_request_is_not_parsed_again(db: Db) {
    let s = start(db);
    let reused = |s: &Server| {
        let m = raw(s.addr, "GET", "/metrics", None).body;
        let line =
            m.lines().find(|l| l.starts_with("ccsynth_topologies_reused_total ")).unwrap_or_else(|| panic!("{m}"));
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    assert_eq!(reused(&s), 0);
    let small =
        json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}, "algorithm": "ring"});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(small));
    assert_eq!(code, 201, "{job}");
    assert_eq!(reused(&s), 0, "ring:4 is parsed in microseconds: not kept");
    // fc:257: 65,792 links.
    let large =
        json!({"spec": "fc:257", "collective": {"kind": "all_gather", "size_bytes": 1 << 20}, "algorithm": "direct"});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(large));
    assert!(code == 201 || code == 202, "{job}");
    let job = wait_for_job(&s, job["id"].as_str().unwrap(), &["succeeded"]);
    assert_eq!(reused(&s), 1);
    let topo = ccsynth::topology::parse_spec("fc:257").unwrap();
    let parsed = ccsynth::topology::Topology::from_json(&serde_json::to_string(&topo).unwrap()).unwrap();
    assert_eq!(parsed, topo, "the stored body parses to the topology built");
    let collective = ccsynth::collective::CollectiveSpec::new(ccsynth::collective::CollectiveKind::AllGather, 1 << 20);
    let spec = ccsynth::engine::RequestSpec {
        algorithm: "direct".parse().unwrap(),
        ..ccsynth::engine::RequestSpec::new(collective)
    };
    let request = ccsynth::engine::Request::new(parsed, spec, &ccsynth::engine::Limits::default()).unwrap();
    let engine_time =
        ccsynth::engine::run(&request, ccsynth::engine::Control::none()).unwrap().schedule.collective_time_ns;
    let (_, schedule) = call(&s, "GET", &format!("/v1/schedules/{}", job["schedule_id"].as_str().unwrap()), None);
    assert_eq!(schedule["collective_time_ns"].as_f64(), engine_time, "{job}");
    // Taken by the job that used it: the next job on that topology (by its id) parses it.
    let (_, page) = call(&s, "GET", "/v1/topologies", None);
    let fc = page["items"].as_array().unwrap().iter().find(|i| i["npus"] == 257).unwrap_or_else(|| panic!("{page}"));
    let by_id = json!({"topology_id": fc["id"], "collective": {"kind": "all_gather", "size_bytes": 2 << 20}, "algorithm": "direct"});
    let (code, job) = call(&s, "POST", "/v1/syntheses", Some(by_id));
    assert!(code == 201 || code == 202, "{job}");
    wait_for_job(&s, job["id"].as_str().unwrap(), &["succeeded"]);
    assert_eq!(reused(&s), 1, "parsed from the store");
}
