//! The service as a process and as replicas: a server killed with SIGKILL or stopped with
//! SIGTERM mid-job loses nothing (the jobs run again after a restart), and two replicas on one
//! PostgreSQL share the queue without running a job twice.

use super::harness::*;
use ccsynth::api::Config;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A real process killed with SIGKILL mid-job: after a restart the queued and the running jobs
/// run again, and the finished result is still there.
#[test]
fn jobs_survive_a_kill_9_and_a_restart() {
    let db = fresh_database(Db::Sqlite);
    let spawn = || spawn_binary(&db, &["--lease-ms", "1000"]);
    let (mut child, addr) = spawn();
    let s = Server { addr, url: db.to_string(), stop: None, rt: None, owned: None };
    let (code, done) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(json!({"spec": "ring:6", "collective": {"kind": "all_reduce", "size_bytes": 6144}})),
    );
    assert_eq!(code, 201);
    let slow = |seed: u64| {
        json!({"spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500", "collective": {"kind": "all_gather", "size_bytes": 67108864},
               "algorithm": "ilp", "options": {"time_limit_s": 4, "seed": seed}, "wait_ms": 0})
    };
    let (_, running) = call(&s, "POST", "/v1/syntheses", Some(slow(1)));
    let (_, queued) = call(&s, "POST", "/v1/syntheses", Some(slow(2)));
    wait_for_job(&s, running["id"].as_str().unwrap(), &["running"]);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let (mut child, addr) = spawn();
    let s = Server { addr, url: db.to_string(), stop: None, rt: None, owned: None };
    for j in [&running, &queued] {
        let v = wait_for_job(&s, j["id"].as_str().unwrap(), &["succeeded", "failed"]);
        assert_eq!(v["status"], "succeeded", "{v}");
    }
    let (code, _) = call(&s, "GET", &format!("/v1/schedules/{}", done["schedule_id"].as_str().unwrap()), None);
    assert_eq!(code, 200);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// SIGTERM: the server stops, running jobs get the grace period, then go back to the queue;
/// the next start runs them.
#[test]
fn sigterm_requeues_what_the_grace_period_does_not_finish() {
    let db = fresh_database(Db::Sqlite);
    let spawn = || spawn_binary(&db, &["--grace-ms", "300", "--drain-ms", "3000"]);
    let (mut child, addr) = spawn();
    let s = Server { addr, url: db.to_string(), stop: None, rt: None, owned: None };
    let (_, job) = call(
        &s,
        "POST",
        "/v1/syntheses",
        Some(
            json!({"spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500", "collective": {"kind": "all_gather", "size_bytes": 67108864},
                    "algorithm": "ilp", "options": {"time_limit_s": 5}, "wait_ms": 0}),
        ),
    );
    let id = job["id"].as_str().unwrap().to_string();
    wait_for_job(&s, &id, &["running"]);
    let signalled = Instant::now();
    let status = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    // While it drains, it says so: new work and readiness get 503.
    std::thread::sleep(Duration::from_millis(300));
    let r = raw(
        addr,
        "POST",
        "/v1/syntheses",
        Some(br#"{"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 64}}"#),
    );
    assert_problem(&r, 503);
    assert_eq!(raw(addr, "GET", "/readyz", None).status, 503);
    // The grace (300 ms) counts from the signal: the solve is stopped and its job back in the
    // queue well before the 3 s drain ends.
    wait_until(Duration::from_millis(1500), || {
        call(&s, "GET", &format!("/v1/jobs/{id}"), None).1["status"] == "queued"
    });
    let exited = child.wait().unwrap();
    assert!(exited.success(), "{exited:?}");
    // Gone within drain + grace (+ the 2 s a stopped solve has to hand its job back), not
    // drain + twice the grace or more.
    assert!(signalled.elapsed() < Duration::from_millis(3000 + 300 + 2000), "{:?}", signalled.elapsed());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let status: String = rt.block_on(async {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&db).await.unwrap();
        let row = sqlx::query("SELECT status FROM jobs WHERE id = $1").bind(&id).fetch_one(&pool).await.unwrap();
        sqlx::Row::get(&row, "status")
    });
    assert_eq!(status, "queued", "the running job goes back to the queue on SIGTERM");
    // Restart: the job was put back in the queue, not lost, and now runs to the end.
    let (mut child, addr) = spawn();
    let s = Server { addr, url: db.to_string(), stop: None, rt: None, owned: None };
    let v = wait_for_job(&s, &id, &["succeeded", "failed"]);
    assert_eq!(v["status"], "succeeded", "{v}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Two replicas on one PostgreSQL share the queue: both take jobs, and no job runs twice (a
/// second run would store a second schedule for it).
#[test]
fn replicas_share_one_postgres_queue() {
    let url = fresh_database(Db::Postgres);
    let start_on = |url: &str| {
        let url = url.to_string();
        let mut config = Config::new(url.clone());
        config.workers = 2;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        rt.spawn(async move {
            let _ = ccsynth::api::serve_on(config, listener, async move {
                let _ = rx.await;
            })
            .await;
        });
        let s = Server { addr, url, stop: Some(tx), rt: Some(rt), owned: None };
        wait_until(Duration::from_secs(20), || call(&s, "GET", "/readyz", None).0 == 200);
        s
    };
    let a = start_on(&url);
    let b = start_on(&url);
    let requests: Vec<Value> = (0..10)
        .map(|seed| {
            json!({"spec": "hier:ring2,fc4,switch2@bw=200,100,50;lat=500", "collective": {"kind": "all_reduce", "size_bytes": 16777216},
                   "algorithm": "ilp", "options": {"seed": seed}})
        })
        .collect();
    let (code, batch) = call(&a, "POST", "/v1/batches", Some(json!({"requests": requests})));
    assert_eq!(code, 201, "{batch}");
    let bid = batch["batch_id"].as_str().unwrap().to_string();
    wait_until(Duration::from_secs(120), || call(&b, "GET", &format!("/v1/batches/{bid}"), None).1["succeeded"] == 10);
    let solved = |s: &Server| {
        let m = raw(s.addr, "GET", "/metrics", None).body;
        m.lines()
            .find(|l| l.starts_with("ccsynth_syntheses_total{algorithm=\"ilp\",outcome=\"succeeded\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // A worker counts a job just after storing it: the last count may trail the batch's status.
    // (A count past 10 fails below at once; one short of it is given five seconds.)
    let t = Instant::now();
    while solved(&a) + solved(&b) < 10 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (na, nb) = (solved(&a), solved(&b));
    assert_eq!(na + nb, 10, "each job solved once: {na} + {nb}");
    assert!(na > 0 && nb > 0, "both replicas took jobs: {na} + {nb}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dupes: i64 = rt.block_on(async {
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM (SELECT job_id FROM schedules GROUP BY job_id HAVING COUNT(*) > 1) d",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        sqlx::Row::get(&row, "n")
    });
    assert_eq!(dupes, 0);
}

/// A TCP relay to PostgreSQL that the test can cut (every connection closed, new ones closed
/// as they arrive) and restore: a database outage without stopping the cluster the other tests
/// share.
struct Relay {
    addr: std::net::SocketAddr,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Relay {
    fn to(target: String) -> Relay {
        use std::sync::atomic::Ordering::SeqCst;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>> = Default::default();
        let (up2, open2) = (up.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !up2.load(SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(server) = std::net::TcpStream::connect(&target) else { continue };
                let mut list = open2.lock().unwrap();
                list.extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Relay { addr, up, open }
    }

    /// A relay to the PostgreSQL server of `url`, and the same URL through it.
    fn in_front_of(url: &str) -> (Relay, String) {
        let (head, rest) = url.split_once("://").unwrap();
        let (creds, tail) = rest.rsplit_once('@').map_or(("", rest), |(c, t)| (c, t));
        let (host_port, name) = tail.split_once('/').unwrap();
        let target = if host_port.contains(':') { host_port.to_string() } else { format!("{host_port}:5432") };
        let relay = Relay::to(target);
        let at = if creds.is_empty() { String::new() } else { format!("{creds}@") };
        let through = format!("{head}://{at}{}/{name}", relay.addr);
        (relay, through)
    }

    fn cut(&self) {
        self.up.store(false, std::sync::atomic::Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.up.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Issue 64, point 4: while PostgreSQL is unreachable, requests that need it answer 503
/// `database-unavailable` with a Retry-After within a few seconds (they waited 30 s for the
/// pool, then answered 500), /readyz says 503 at once and /metrics answers; once it is back,
/// the service serves again.
#[test]
fn a_database_outage_is_a_prompt_503() {
    let db = fresh_database(Db::Postgres);
    let (relay, through) = Relay::in_front_of(&db);
    let mut s = start_on(through, |_| {});
    s.owned = Some(db);
    let job = json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}, "wait_ms": 30000});
    let (code, done) = call(&s, "POST", "/v1/syntheses", Some(job.clone()));
    assert_eq!(code, 201, "{done}");
    let id = done["id"].as_str().unwrap().to_string();
    relay.cut();
    for (method, path, body, want) in [
        ("GET", format!("/v1/jobs/{id}"), None, 503),
        (
            "POST",
            "/v1/syntheses".to_string(),
            Some(json!({"spec": "ring:5", "collective": {"kind": "all_gather", "size_bytes": 5120}}).to_string()),
            503,
        ),
        ("GET", "/readyz".to_string(), None, 503),
        ("GET", "/metrics".to_string(), None, 200),
    ] {
        let began = Instant::now();
        let r = raw(s.addr, method, &path, body.as_deref().map(str::as_bytes));
        let took = began.elapsed();
        assert_eq!(r.status, want, "{method} {path}: {}", r.body);
        assert!(took < Duration::from_secs(8), "{method} {path} took {took:?}");
        if path.starts_with("/v1/") {
            let p = assert_problem(&r, 503);
            assert!(p["type"].as_str().unwrap().ends_with("/database-unavailable"), "{p}");
            assert!(r.header("retry-after").is_some(), "{method} {path}");
        }
        if path == "/metrics" {
            assert!(r.body.contains("ccsynth_queue_depth -1"), "{}", r.body);
        }
    }
    relay.restore();
    wait_until(Duration::from_secs(30), || call(&s, "GET", "/readyz", None).0 == 200);
    let (code, again) = call(&s, "GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!((code, again["status"].as_str()), (200, Some("succeeded")), "{again}");
}

/// Issue 64, point 5: a job that finishes while PostgreSQL is away keeps its result and its one
/// attempt. Its lease lapses in the outage (no owner can renew it); the worker records the end
/// once the database is back, and for a lease's time after the outage no worker takes a
/// lapsed job (here the server's idle second worker, which took it and solved it again).
#[test]
fn a_job_finished_in_an_outage_keeps_its_result_and_its_attempt() {
    let db = fresh_database(Db::Postgres);
    let (relay, through) = Relay::in_front_of(&db);
    let direct = db.to_string();
    let mut s = start_on(through, |c| {
        c.lease_ms = 1000;
        c.workers = 2;
    });
    s.owned = Some(db);
    // A solve of a few seconds (an eightieth of `long_job`'s seeds: the all-gather's search
    // runs its rarest-first pick and the reduce-scatter's mirrored beside each seed's own).
    let mut job = long_job();
    job["options"]["seeds"] = json!(50);
    let (code, queued) = call(&s, "POST", "/v1/syntheses", Some(job));
    assert_eq!(code, 202, "{queued}");
    let id = queued["id"].as_str().unwrap().to_string();
    wait_for_job(&s, &id, &["running"]);
    relay.cut();
    // Longer than the solve and many leases.
    std::thread::sleep(Duration::from_secs(8));
    relay.restore();
    let done = wait_for_job(&s, &id, &["succeeded", "failed"]);
    assert_eq!(done["status"], "succeeded", "{done}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let attempts: i64 = rt.block_on(async {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&direct).await.unwrap();
        let n = sqlx::query_scalar("SELECT attempts FROM jobs WHERE id = $1").bind(&id).fetch_one(&pool).await.unwrap();
        pool.close().await;
        n
    });
    assert_eq!(attempts, 1, "the job was claimed again after the outage");
}
