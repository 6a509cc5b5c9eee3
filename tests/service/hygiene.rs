//! The service's lesser bounds (issue 28, point 9), black-box over TCP: a JSON key given twice,
//! two `Host`s or a foreign absolute-form target are 400s; HTTP/1.0 is served; the bearer
//! scheme is case-insensitive and failed tokens are rate-limited per address; a variant's
//! parameter and a discretization are checked at the request; topologies are stored only for
//! accepted requests, within each client's quota; a batch runs its cheap checks on every item
//! first; at shutdown long-polls and comparisons get a 503 (with the job's id), not a closed
//! connection.

use super::harness::{
    Db, Resp, Server, assert_problem, call, fresh_database, long_job, on_both_databases, raw, raw_headers,
    spawn_binary, start, start_on, start_with, wait_until,
};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::time::Duration;

on_both_databases!(
    refused_requests_leave_no_topology_behind,
    each_client_holds_at_most_its_topology_quota,
    a_finished_export_is_stored_and_read_back,
);

#[test]
fn a_key_given_twice_is_a_400() {
    let s = start(Db::Sqlite);
    let body = br#"{"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 64}, "spec": "ring:8"}"#;
    let v = assert_problem(&raw(s.addr, "POST", "/v1/syntheses", Some(body)), 400);
    assert!(v["detail"].as_str().unwrap().contains(r#""spec" is given twice"#), "{v}");
    // Nested, and on the route that reads a schedule too.
    let nested = br#"{"spec": "ring:4", "collective": {"kind": "all_gather", "kind": "broadcast", "size_bytes": 64}}"#;
    assert_problem(&raw(s.addr, "POST", "/v1/syntheses", Some(nested)), 400);
    assert_problem(&raw(s.addr, "POST", "/v1/validate", Some(br#"{"format": 1, "format": 2}"#)), 400);
    // The same key in two objects is fine.
    let twice = br#"{"requests": [{"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 64}},
                                  {"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 128}}]}"#;
    assert_eq!(raw(s.addr, "POST", "/v1/batches", Some(twice)).status, 201);
}

#[test]
fn one_host_header_naming_an_allowed_host() {
    let s = start_with(Db::Sqlite, |c| c.allowed_hosts = Some(vec!["127.0.0.1".into(), "localhost".into()]));
    let get = |path: &str, headers: &[(&str, &str)]| raw_headers(s.addr, "GET", path, None, headers);
    assert_eq!(get("/healthz", &[("Host", "127.0.0.1")]).status, 200);
    let v = assert_problem(&get("/healthz", &[("Host", "127.0.0.1"), ("Host", "evil.example")]), 400);
    assert!(v["detail"].as_str().unwrap().contains("2 Host headers"), "{v}");
    // An absolute-form target names the host the request is for (RFC 9112 §3.2.2).
    assert_problem(&get("http://evil.example/healthz", &[("Host", "127.0.0.1")]), 400);
    assert_problem(&get("http://127.0.0.1/healthz", &[("Host", "evil.example")]), 400);
    assert_eq!(get("http://127.0.0.1:9/healthz", &[("Host", "127.0.0.1")]).status, 200);
    // Two Hosts are a 400 on a server that answers to any host, too.
    let any = start(Db::Sqlite);
    let r = raw_headers(any.addr, "GET", "/healthz", None, &[("Host", "a.example"), ("Host", "b.example")]);
    assert_problem(&r, 400);
}

/// HTTP/1.0 is served as openapi.yaml says (the Host check applies: without one, a server
/// with an allow-list refuses it).
#[test]
fn http_1_0_is_served_and_host_checked() {
    let s = start_with(Db::Sqlite, |c| c.allowed_hosts = Some(vec!["127.0.0.1".into()]));
    let exchange = |head: &str| {
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(head.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    };
    let ok = exchange("GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.0 200") || ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.ends_with("ok\n"), "{ok}");
    let refused = exchange("GET /healthz HTTP/1.0\r\n\r\n");
    assert!(refused.contains(" 400 ") && refused.contains("bad-host"), "{refused}");
}

#[test]
fn the_bearer_scheme_is_case_insensitive_and_failed_tokens_are_rate_limited() {
    let s = start_with(Db::Sqlite, |c| {
        c.clients = ccsynth::api::parse_clients("alice alice-token-0123456789\n").unwrap();
        c.max_auth_failures_per_s = 1.0;
    });
    let with = |auth: &str| {
        raw_headers(s.addr, "GET", "/v1/algorithms", None, &[("Host", "127.0.0.1"), ("Authorization", auth)])
    };
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        assert_eq!(with(&format!("{scheme} alice-token-0123456789")).status, 200, "{scheme}");
    }
    // Ten failures in a burst are answered 401; then 429 with the seconds to wait.
    for i in 0..10 {
        assert_problem(&with(&format!("Bearer guess-{i:016}")), 401);
    }
    let r = with("Bearer guess-x");
    let v = assert_problem(&r, 429);
    assert_eq!(v["type"], "https://ccsynth.dev/problems/rate-limited");
    let after = r.header("retry-after").unwrap_or_else(|| panic!("{:?}", r.headers));
    // The detail says the header's seconds (it said "retry in 0.0 s" beside a `Retry-After: 1`).
    assert!(v["detail"].as_str().unwrap().contains(&format!("retry in {after} s")), "{v} {after}");
    assert_problem(&with("Basic YWxpY2U6eA=="), 429);
    // A client with its token is not held up by someone else's guesses.
    assert_eq!(with("Bearer alice-token-0123456789").status, 200);
    // Two Authorization headers name no one client, whichever comes first.
    let alice = ("Authorization", "Bearer alice-token-0123456789");
    for pair in
        [[alice, ("Authorization", "Bearer guess-y")], [("Authorization", "Bearer guess-y"), alice], [alice, alice]]
    {
        let r = raw_headers(s.addr, "GET", "/v1/algorithms", None, &[("Host", "127.0.0.1"), pair[0], pair[1]]);
        let v = assert_problem(&r, 401);
        assert!(v["detail"].as_str().unwrap().contains("2 Authorization headers"), "{v}");
    }
}

#[test]
fn a_variant_and_a_discretization_are_checked_at_the_request() {
    let s = start(Db::Sqlite);
    let post = |algorithm: &str, options: Value| {
        let body = json!({"spec": "ring:8", "collective": {"kind": "all_reduce", "size_bytes": 4096},
                          "algorithm": algorithm, "options": options, "wait_ms": 0});
        raw(s.addr, "POST", "/v1/syntheses", Some(body.to_string().as_bytes()))
    };
    let v = assert_problem(&post("kolmakov-r64", json!({})), 422);
    assert_eq!(v["errors"][0]["path"], "algorithm", "{v}");
    assert!(v["errors"][0]["message"].as_str().unwrap().contains("R = 64 on 8 processes"), "{v}");
    // R = 1 and 2 fit 8 processes (3 rounds).
    assert!([201, 202].contains(&post("kolmakov-r2", json!({})).status));
    let v = assert_problem(&post("ilp", json!({"discretization": 1e-300})), 422);
    assert_eq!(v["errors"][0]["path"], "options.discretization", "{v}");
    assert!(v["errors"][0]["message"].as_str().unwrap().contains("over the limit"), "{v}");
    let (_, jobs) = call(&s, "GET", "/v1/topologies", None);
    assert_eq!(jobs["total"], 1, "only the accepted request's ring:8 is stored: {jobs}");
}

/// The cheap checks (names, option ranges, one topology source) run on every item before any
/// item is built: the error names the last item's unknown algorithm, not the first item's
/// root, which only building its collective finds.
#[test]
fn a_batch_runs_its_cheap_checks_on_every_item_first() {
    let s = start(Db::Sqlite);
    let batch = json!({"requests": [
        {"spec": "ring:4", "collective": {"kind": "broadcast", "size_bytes": 4096, "root": 9}},
        {"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 64}, "options": {"seeds": 0}},
    ]});
    let r = raw(s.addr, "POST", "/v1/batches", Some(batch.to_string().as_bytes()));
    let v = assert_problem(&r, 422);
    assert_eq!(v["errors"][0]["path"], "requests[1].options.seeds", "{v}");
    let (_, t) = call(&s, "GET", "/v1/topologies", None);
    assert_eq!(t["total"], 0, "{t}");
}

fn as_alice(s: &Server, method: &str, path: &str, body: Option<Value>) -> Resp {
    let headers = [
        ("Host", "127.0.0.1"),
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer alice-token-0123456789"),
    ];
    raw_headers(s.addr, method, path, body.map(|b| b.to_string().into_bytes()).as_deref(), &headers)
}

fn topologies_held(s: &Server) -> i64 {
    as_alice(s, "GET", "/v1/topologies", None).json()["total"].as_i64().unwrap()
}

/// Requests refused by the queue or the quotas (429) store no topology: an inline spec, a
/// regeneration's degraded topology, a batch's.
fn refused_requests_leave_no_topology_behind(db: Db) {
    let s = start_with(db, |c| {
        c.clients = ccsynth::api::parse_clients("alice alice-token-0123456789\n").unwrap();
        c.max_active_per_client = 1;
    });
    let r = as_alice(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:8", "collective": {"kind": "all_gather", "size_bytes": 4096},
                    "algorithm": "ring", "wait_ms": 30000})),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let schedule = r.json()["schedule_id"].as_str().unwrap().to_string();
    // A long job takes the client's one active job.
    let r = as_alice(&s, "POST", "/v1/syntheses", Some(long_job()));
    assert_eq!(r.status, 202, "{}", r.body);
    let long = r.json()["id"].as_str().unwrap().to_string();
    let held = topologies_held(&s);
    assert_eq!(held, 2);
    let r = as_alice(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:6", "collective": {"kind": "all_gather", "size_bytes": 4096}})),
    );
    assert_problem(&r, 429);
    let regenerate = format!("/v1/schedules/{schedule}/regenerate");
    assert_problem(&as_alice(&s, "POST", &regenerate, Some(json!({"failed_links": [[0, 1]]}))), 429);
    let batch = json!({"requests": [{"spec": "ring:5", "collective": {"kind": "all_gather", "size_bytes": 4096}}],
                       "regenerations": [{"schedule_id": schedule, "failed_links": [[2, 3]]}]});
    // Two items never fit the client's one active job: a 422, not a 429 to wait on.
    let p = assert_problem(&as_alice(&s, "POST", "/v1/batches", Some(batch)), 422);
    assert!(p["detail"].as_str().unwrap().contains("at most 1 fit in a client's active jobs"), "{p}");
    let batch = json!({"regenerations": [{"schedule_id": schedule, "failed_links": [[2, 3]]}]});
    assert_problem(&as_alice(&s, "POST", "/v1/batches", Some(batch)), 429);
    assert_eq!(topologies_held(&s), held, "refused requests stored nothing");
    // Once there is room, the same regeneration is accepted and stores its topology.
    assert_eq!(as_alice(&s, "DELETE", &format!("/v1/jobs/{long}"), None).status, 200);
    let r = as_alice(&s, "POST", &regenerate, Some(json!({"failed_links": [[0, 1]], "wait_ms": 30000})));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(topologies_held(&s), held + 1);
}

/// A client holds at most `max_topologies_per_client` topologies: one more is a 429 (no
/// `Retry-After`: waiting does not help, deleting does), whichever door would store it; one it
/// holds already is not counted twice, and another client has its own quota.
fn each_client_holds_at_most_its_topology_quota(db: Db) {
    let s = start_with(db, |c| {
        c.clients = ccsynth::api::parse_clients("alice alice-token-0123456789\nbob bob-token-0123456789\n").unwrap();
        c.max_topologies_per_client = 2;
    });
    let store = |spec: &str| as_alice(&s, "POST", "/v1/topologies", Some(json!({"spec": spec})));
    assert_eq!(store("ring:4").status, 201);
    let five = store("ring:5");
    assert_eq!(five.status, 201);
    let r = store("ring:6");
    let v = assert_problem(&r, 429);
    assert_eq!(v["type"], "https://ccsynth.dev/problems/client-quota");
    assert!(v["detail"].as_str().unwrap().contains("2 topologies"), "{v}");
    assert!(r.header("retry-after").is_none(), "{:?}", r.headers);
    assert_eq!(store("ring:4").status, 200, "held already");
    let inline = json!({"spec": "ring:7", "collective": {"kind": "all_gather", "size_bytes": 64}});
    assert_problem(&as_alice(&s, "POST", "/v1/syntheses", Some(inline)), 429);
    let four = store("ring:4").json()["id"].as_str().unwrap().to_string();
    let failures = json!({"links": [[0, 1]]});
    assert_problem(&as_alice(&s, "POST", &format!("/v1/topologies/{four}/failures"), Some(failures)), 429);
    assert_eq!(topologies_held(&s), 2);
    // Bob's quota is his own, even for a topology alice holds.
    let bob = |spec: &str| {
        let body = json!({"spec": spec}).to_string();
        let headers = [
            ("Host", "127.0.0.1"),
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer bob-token-0123456789"),
        ];
        raw_headers(s.addr, "POST", "/v1/topologies", Some(body.as_bytes()), &headers)
    };
    assert_eq!(bob("ring:6").status, 201);
    // Alice's ring:4 is new to him: a 201 (a 200 told him alice had stored it).
    assert_eq!(bob("ring:4").status, 201);
    assert_problem(&bob("ring:7"), 429);
    // Deleting makes room.
    let five = five.json()["id"].as_str().unwrap().to_string();
    assert_eq!(as_alice(&s, "DELETE", &format!("/v1/topologies/{five}"), None).status, 204);
    assert_eq!(store("ring:6").status, 201, "bob's ring:6, new to alice");
}

/// At SIGTERM (here the in-process server's stop), a client long-polling a queued job gets a
/// 503 naming the job (it stays queued for the next start), and a comparison or an export
/// still computing gets a 503 at the end of the grace: none waits for the connection to be
/// closed.
#[test]
fn long_polls_and_comparisons_answer_503_at_shutdown() {
    let mut s = start_with(Db::Sqlite, |c| {
        c.workers = 1;
        c.job_threads = 1;
        c.grace_ms = 300;
        c.drain_ms = 300;
    });
    let stored = |spec: &str, collective: Value, algorithm: &str| {
        let body = json!({"spec": spec, "collective": collective, "algorithm": algorithm, "wait_ms": 60000});
        let (code, done) = call(&s, "POST", "/v1/syntheses", Some(body));
        assert_eq!(code, 201, "{done}");
        done["schedule_id"].as_str().unwrap().to_string()
    };
    // A stored broadcast on 2,304 NPUs (a small schedule): comparing it builds and checks
    // every broadcast baseline there (about 12 s and 1.6 GB on the machine of BENCHMARKS.md).
    let schedule = stored("torus:48x48", json!({"kind": "broadcast", "size_bytes": 67108864, "root": 0}), "mst");
    // A stored all-gather on 1,024 NPUs whose MSCCL XML (about 250 MB) takes seconds to build.
    let big = stored("torus:32x32", json!({"kind": "all_gather", "size_bytes": 67108864}), "bucket");
    // The one worker is busy, so the next job stays queued.
    let (code, long) = call(&s, "POST", "/v1/syntheses", Some(long_job()));
    assert_eq!(code, 202, "{long}");
    super::harness::wait_for_job(&s, long["id"].as_str().unwrap(), &["running"]);
    let addr = s.addr;
    let waiter = std::thread::spawn(move || {
        let body = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 64}, "wait_ms": 120000});
        raw(addr, "POST", "/v1/syntheses", Some(body.to_string().as_bytes()))
    });
    // A long poll of a queued job (queued before the signal, behind the running one) is
    // answered as the POST is.
    let body = json!({"spec": "ring:6", "collective": {"kind": "all_gather", "size_bytes": 64}, "wait_ms": 0});
    let (code, queued) = call(&s, "POST", "/v1/syntheses", Some(body));
    assert_eq!(code, 202, "{queued}");
    let id = queued["id"].as_str().unwrap().to_string();
    let polling = {
        let path = format!("/v1/jobs/{id}?wait_ms=120000");
        std::thread::spawn(move || raw(addr, "GET", &path, None))
    };
    let comparing = {
        let path = format!("/v1/schedules/{schedule}/comparison");
        std::thread::spawn(move || raw(addr, "GET", &path, None))
    };
    let exporting = {
        let path = format!("/v1/schedules/{big}/export?format=msccl-xml");
        std::thread::spawn(move || raw(addr, "GET", &path, None))
    };
    std::thread::sleep(Duration::from_millis(1500));
    let signalled = std::time::Instant::now();
    let _ = s.stop.take().unwrap().send(());
    let r = waiter.join().unwrap();
    let v = assert_problem(&r, 503);
    let job = v["job_id"].as_str().unwrap_or_else(|| panic!("no job_id: {v}")).to_string();
    assert_eq!(r.header("location"), Some(format!("/v1/jobs/{job}").as_str()));
    assert!(v["detail"].as_str().unwrap().contains("stays queued"), "{v}");
    // It was a 200 with the job still queued, which read as "poll again" to a server going away.
    let r = polling.join().unwrap();
    let v = assert_problem(&r, 503);
    assert_eq!(
        (v["job_id"].as_str(), r.header("location")),
        (Some(id.as_str()), Some(format!("/v1/jobs/{id}").as_str()))
    );
    let r = comparing.join().unwrap();
    let v = assert_problem(&r, 503);
    assert_eq!(v["type"], "https://ccsynth.dev/problems/shutting-down");
    let r = exporting.join().unwrap();
    let v = assert_problem(&r, 503);
    assert_eq!(v["type"], "https://ccsynth.dev/problems/shutting-down");
    // Within the grace (300 ms) and the drain (300 ms), with room for a loaded machine; the
    // comparison alone takes several seconds.
    assert!(signalled.elapsed() < Duration::from_secs(4), "{:?}", signalled.elapsed());
}

/// The process itself: SIGTERM while a comparison computes ends within drain + grace (the
/// comparison's baselines stop, and the runtime does not wait for what runs on its blocking
/// pool), the comparison answered 503. It took 17 s with a 2 s grace before.
#[test]
fn sigterm_stops_a_comparison_within_drain_and_grace() {
    let db = fresh_database(Db::Sqlite);
    let (mut child, addr) = spawn_binary(&db, &["--grace-ms", "300", "--drain-ms", "300"]);
    let body = json!({"spec": "torus:48x48", "collective": {"kind": "broadcast", "size_bytes": 67108864, "root": 0},
                      "algorithm": "mst", "wait_ms": 60000});
    let r = raw(addr, "POST", "/v1/syntheses", Some(body.to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", r.body);
    let path = format!("/v1/schedules/{}/comparison", r.json()["schedule_id"].as_str().unwrap());
    let comparing = std::thread::spawn(move || raw(addr, "GET", &path, None));
    std::thread::sleep(Duration::from_millis(1500));
    let signalled = std::time::Instant::now();
    let status = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exited = child.wait().unwrap();
    assert!(exited.success(), "{exited:?}");
    let took = signalled.elapsed();
    assert_problem(&comparing.join().unwrap(), 503);
    // Drain (300 ms) + grace (300 ms), with room for a loaded machine; the whole comparison
    // takes about 12 s.
    assert!(took < Duration::from_secs(4), "{took:?}");
}

fn metric(s: &Server, name: &str) -> u64 {
    let m = raw(s.addr, "GET", "/metrics", None).body;
    let line = m.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} in {m}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue 28, reproducer 5: an export is built once and stored compressed; a later GET, here on
/// another server over the same database (a restart, a replica), reads it instead of building
/// it again, byte for byte. Other options are another export.
fn a_finished_export_is_stored_and_read_back(db: Db) {
    let s = start(db);
    let req = json!({"spec": "torus:4x4", "collective": {"kind": "all_gather", "size_bytes": 1048576},
                     "algorithm": "greedy", "wait_ms": 60000});
    let (code, v) = call(&s, "POST", "/v1/syntheses", Some(req));
    assert_eq!(code, 201, "{v}");
    let path = format!("/v1/schedules/{}/export?format=msccl-xml", v["schedule_id"].as_str().unwrap());
    let first = raw(s.addr, "GET", &path, None);
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(metric(&s, "ccsynth_exports_built_total"), 1);
    // Stored in the background: the next GET reads it.
    let stored = || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            sqlx::any::install_default_drivers();
            let pool = sqlx::AnyPool::connect(&s.url).await.unwrap();
            let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM exports").fetch_one(&pool).await.unwrap();
            pool.close().await;
            n
        })
    };
    wait_until(Duration::from_secs(20), || stored() == 1);
    let again = raw(s.addr, "GET", &path, None);
    assert_eq!((again.status, &again.body), (200, &first.body));
    assert_eq!(metric(&s, "ccsynth_exports_built_total"), 1, "read back, not built");
    let other = start_on(s.url.clone(), |_| {});
    let there = raw(other.addr, "GET", &path, None);
    assert_eq!((there.status, &there.body), (200, &first.body));
    assert_eq!(metric(&other, "ccsynth_exports_built_total"), 0, "another server reads it too");
    let named = raw(other.addr, "GET", &format!("{path}&name=other"), None);
    assert_eq!(named.status, 200);
    assert_ne!(named.body, first.body);
    assert_eq!(metric(&other, "ccsynth_exports_built_total"), 1, "other options, another export");
}
