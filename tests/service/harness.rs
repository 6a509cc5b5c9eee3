//! The service tests' harness: a test's own database (SQLite or PostgreSQL, removed when the
//! test ends), the app started on port 0 in-process (`start`, `start_on`) or as the real binary
//! (`spawn_binary`), HTTP/1.1 over real TCP (`raw`, `call`), waiting (`wait_until`,
//! `wait_for_job`) and the checks every test shares (`assert_problem`, `on_both_databases`).
//!
//! PostgreSQL: `CCSYNTH_TEST_POSTGRES_URL` (default `postgres://ccsynth:ccsynth@127.0.0.1/postgres`,
//! the role `scripts/setup.sh` creates) names a server where each test creates its own database.

use ccsynth::api::Config;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub(crate) enum Db {
    Sqlite,
    Postgres,
}

pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    /// The database it serves from.
    pub(crate) url: String,
    pub(crate) stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(crate) rt: Option<tokio::runtime::Runtime>,
    /// The database it was started on, removed after the server stops (fields drop after
    /// `drop`); `None` for a replica on another server's database.
    pub(crate) owned: Option<TestDb>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

/// A test's own database, removed when it drops (the SQLite file with its `-wal` and `-shm`, or
/// the PostgreSQL database): each run of the suite would otherwise leave a hundred behind. It
/// reads as its URL.
pub(crate) struct TestDb {
    url: String,
    db: Db,
}

impl std::ops::Deref for TestDb {
    type Target = String;
    fn deref(&self) -> &String {
        &self.url
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match self.db {
            Db::Sqlite => {
                let file = self.url.trim_start_matches("sqlite:");
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let _ = std::fs::remove_file(format!("{file}{suffix}"));
                }
            }
            Db::Postgres => {
                let (admin, name) = (postgres_admin(), self.url.rsplit('/').next().unwrap_or_default().to_string());
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
                rt.block_on(async {
                    sqlx::any::install_default_drivers();
                    if let Ok(pool) = sqlx::AnyPool::connect(&admin).await {
                        // FORCE: a server a failing test left running still holds connections.
                        let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                        let _ = sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&pool).await;
                        pool.close().await;
                    }
                });
            }
        }
    }
}

fn postgres_admin() -> String {
    std::env::var("CCSYNTH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://ccsynth:ccsynth@127.0.0.1/postgres".into())
}

pub(crate) fn fresh_database(db: Db) -> TestDb {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let url = match db {
        Db::Sqlite => format!("sqlite:{}", std::env::temp_dir().join(format!("ccsynth-api-{id}.db")).display()),
        Db::Postgres => {
            let admin = postgres_admin();
            let name = format!("ccsynth_test_{id}");
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                sqlx::any::install_default_drivers();
                let pool = sqlx::AnyPool::connect(&admin).await.unwrap_or_else(|e| {
                    panic!("PostgreSQL at {admin} (run ./scripts/setup.sh, or set CCSYNTH_TEST_POSTGRES_URL): {e}")
                });
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&pool).await.unwrap();
                pool.close().await;
            });
            match admin.rsplit_once('/') {
                Some((base, _)) => format!("{base}/{name}"),
                None => panic!("CCSYNTH_TEST_POSTGRES_URL {admin:?} has no database part"),
            }
        }
    };
    TestDb { url, db }
}

pub(crate) fn start_with(db: Db, tweak: impl FnOnce(&mut Config)) -> Server {
    let db = fresh_database(db);
    let mut server = start_on(db.url.clone(), tweak);
    server.owned = Some(db);
    server
}

/// A server on an existing database (a second replica).
pub(crate) fn start_on(url: String, tweak: impl FnOnce(&mut Config)) -> Server {
    let mut config = Config::new(url.clone());
    config.workers = 2;
    tweak(&mut config);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    rt.spawn(async move {
        let stop = async move {
            let _ = rx.await;
        };
        if let Err(e) = ccsynth::api::serve_on(config, listener, stop).await {
            panic!("server: {e}");
        }
    });
    let server = Server { addr, url, stop: Some(tx), rt: Some(rt), owned: None };
    wait_until(Duration::from_secs(20), || call(&server, "GET", "/readyz", None).0 == 200);
    server
}

/// A synthesis that runs for minutes on two threads (4000 seeds of the matcher on a
/// 16×16 mesh), answered at once (202): it holds a worker while a test does something else.
pub(crate) fn long_job() -> Value {
    json!({"spec": "mesh:16x16", "collective": {"kind": "all_gather", "size_bytes": 1048576, "chunks_per_npu": 1},
           "algorithm": "greedy", "options": {"seeds": 4000}, "wait_ms": 0})
}

pub(crate) fn start(db: Db) -> Server {
    start_with(db, |_| {})
}

pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Resp {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

pub(crate) fn raw(addr: SocketAddr, method: &str, path: &str, body: Option<&[u8]>) -> Resp {
    raw_typed(addr, method, path, body, "application/json")
}

pub(crate) fn raw_typed(addr: SocketAddr, method: &str, path: &str, body: Option<&[u8]>, media: &str) -> Resp {
    raw_headers(addr, method, path, body, &[("Host", "127.0.0.1"), ("Content-Type", media)])
}

/// A request with exactly these headers (and `Connection: close`, `Content-Length`).
pub(crate) fn raw_headers(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    headers: &[(&str, &str)],
) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = body.unwrap_or(b"");
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let head =
        format!("{method} {path} HTTP/1.1\r\n{extra}Connection: close\r\nContent-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) before reading a large body; the answer is what counts.
    let _ = s.write_all(body);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))).collect();
    Resp { status, headers, body: body.to_string() }
}

pub(crate) fn call(s: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let r = raw(s.addr, method, path, body.map(|b| b.to_string().into_bytes()).as_deref());
    let v = serde_json::from_str(&r.body).unwrap_or(Value::String(r.body.clone()));
    (r.status, v)
}

pub(crate) fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "condition not met within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn wait_for_job(s: &Server, id: &str, statuses: &[&str]) -> Value {
    let mut last = Value::Null;
    wait_until(Duration::from_secs(120), || {
        let (code, v) = call(s, "GET", &format!("/v1/jobs/{id}"), None);
        assert_eq!(code, 200);
        last = v;
        statuses.contains(&last["status"].as_str().unwrap_or(""))
    });
    last
}

pub(crate) fn assert_problem(r: &Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/problem+json"), "{}", r.body);
    let v = r.json();
    for f in ["type", "title", "status", "detail", "errors"] {
        assert!(v.get(f).is_some(), "problem without {f}: {v}");
    }
    assert_eq!(v["status"], status);
    v
}

macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn sqlite() {
                    super::$name(super::Db::Sqlite)
                }
                #[test]
                fn postgres() {
                    super::$name(super::Db::Postgres)
                }
            }
        )*
    };
}
pub(crate) use on_both_databases;

/// Starts the real binary on port 0 with one worker; returns it and the address it printed.
pub(crate) fn spawn_binary(db: &str, extra: &[&str]) -> (std::process::Child, SocketAddr) {
    spawn_binary_env(db, extra, &[])
}

/// `spawn_binary` with these environment variables added.
pub(crate) fn spawn_binary_env(
    db: &str,
    extra: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> (std::process::Child, SocketAddr) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccsynth"))
        .args(["serve", "--addr", "127.0.0.1:0", "--database-url", db, "--workers", "1"])
        .args(extra)
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr: SocketAddr = loop {
        let line = lines.next().expect("the server printed its address").unwrap();
        if let Some(a) = line.strip_prefix("ccsynth: listening on ") {
            break a.trim().parse().unwrap();
        }
    };
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}
