//! The service on a disk that fills up or turns read-only (issue 64, point 3): SQLite on a
//! small tmpfs this test mounts, or under a shim that refuses writes as a read-only filesystem
//! does (`read_only_shim.c`, built with `cc`). Every request answers 2xx or 503 with
//! Retry-After (never 500), `/readyz` says 200 once writes work again, the service heals
//! without a restart, and every job or topology it accepted is stored: a restart finds it.
//!
//! Mounting needs CAP_SYS_ADMIN (root in the project's CI and development machines); where
//! the mount is refused the full-disk tests say so on stderr and check nothing else.

use super::harness::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A tmpfs of its own for one test, unmounted (lazily) and removed on drop.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// `kib` KiB mounted at a fresh directory; `None` where this process may not mount.
    fn mount(kib: u32) -> Option<SmallDisk> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("ccsynth-disk-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir(&dir);
            eprintln!("disk_faults: cannot mount a tmpfs here (needs CAP_SYS_ADMIN): not checked");
            return None;
        }
        Some(SmallDisk { dir })
    }

    /// `mount -o remount,OPTIONS`: a new size. (Not `ro`: a mounted filesystem with files
    /// open for writing, as the server's database is, cannot be made read-only; a read-only
    /// database's refusal is classified as a full one's in `store::faults`' test.)
    fn remount(&self, options: &str) {
        let st = Command::new("mount").args(["-o", &format!("remount,{options}")]).arg(&self.dir).status().unwrap();
        assert!(st.success(), "remount {options}");
    }

    fn url(&self) -> String {
        format!("sqlite:{}", self.dir.join("ccsynth.db").display())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir_all(Path::new(&self.dir));
    }
}

/// A request the store must write: a topology of its own (`n` makes each one new).
fn topology(n: usize) -> Value {
    json!({"spec": format!("torus:{}x{}", 16 + n % 48, 16 + n / 48)})
}

/// A small synthesis, queued and answered at once (202), each different.
fn synthesis(n: usize) -> Value {
    json!({"spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096 + 4 * n as u64}, "wait_ms": 0})
}

/// A synthesis of about 1.7 s (40 seeds of the greedy on a 16×16 mesh on two threads) whose
/// schedule (600 KB) cannot be stored on a full 3 MiB disk.
fn in_flight() -> Value {
    json!({"spec": "mesh:16x16", "collective": {"kind": "all_gather", "size_bytes": 1048576, "chunks_per_npu": 1},
           "algorithm": "greedy", "options": {"seeds": 40}, "wait_ms": 0})
}

/// POSTs `body` to `path`: the id of what was accepted (2xx), or None after a 503 that has a
/// Retry-After and the problem type a client retries on. Anything else fails the test.
fn post(s: &Server, path: &str, body: &Value) -> Option<String> {
    let r = raw(s.addr, "POST", path, Some(body.to_string().as_bytes()));
    if (200..300).contains(&r.status) {
        return Some(r.json()["id"].as_str().expect("an id").to_string());
    }
    let p = assert_problem(&r, 503);
    assert!(p["type"].as_str().unwrap().ends_with("/database-unavailable"), "{p}");
    assert!(r.header("retry-after").is_some(), "{}", r.body);
    None
}

/// Fills the disk with topologies until one is refused; the ids accepted on the way.
fn fill(s: &Server) -> Vec<String> {
    let mut kept = Vec::new();
    for n in 0..2000 {
        match post(s, "/v1/topologies", &topology(n)) {
            Some(id) => kept.push(id),
            None => return kept,
        }
    }
    panic!("the disk never filled");
}

/// Every id still served (200) by `s` at `path`/{id}.
fn all_served(s: &Server, path: &str, ids: &[String]) {
    for id in ids {
        let (code, v) = call(s, "GET", &format!("{path}/{id}"), None);
        assert_eq!(code, 200, "{path}/{id}: {v}");
    }
}

/// A full disk: writes answer 2xx or 503 (never 500), `/readyz` says the disk is nearly
/// full; room made again, the service heals by itself (the job that ended while the disk was
/// full is recorded), and what it accepted before, during and after survives a restart.
#[test]
fn a_full_disk_loses_no_accepted_work_and_the_service_heals() {
    let Some(disk) = SmallDisk::mount(3 * 1024) else { return };
    // Ready below 1 MiB free no more (the default, 64 MiB, is more than this disk).
    let s = start_on(disk.url(), |c| c.min_free_disk_bytes = 1 << 20);
    // A job that solves for a second or two and ends while the disk is full: recording its
    // end (a transaction) fails at the commit, which left its connection holding SQLite's
    // write lock, so nothing could be written again until a restart.
    let solving = post(&s, "/v1/syntheses", &in_flight()).expect("accepted before the disk filled");
    let topologies = fill(&s);
    assert!(!topologies.is_empty(), "the first topology did not fit");
    std::thread::sleep(Duration::from_secs(6));
    // Not ready: the probe's write fails, or, where a small one still fits (SQLite reuses its
    // write-ahead log in place), the disk has less than the floor free.
    let r = raw(s.addr, "GET", "/readyz", None);
    assert_eq!(r.status, 503, "/readyz on a full disk: {}", r.body);
    // Jobs while full: each accepted one must be stored (none was lost with a connection
    // left inside a failed transaction, as before).
    let mut jobs: Vec<String> = (0..10).filter_map(|n| post(&s, "/v1/syntheses", &synthesis(n))).collect();
    jobs.push(solving);
    disk.remount("size=64m");
    wait_until(Duration::from_secs(20), || call(&s, "GET", "/readyz", None).0 == 200);
    for n in 10..13 {
        jobs.push(post(&s, "/v1/syntheses", &synthesis(n)).expect("accepted once there is room"));
    }
    for id in &jobs {
        let v = wait_for_job(&s, id, &["succeeded", "failed", "cancelled"]);
        assert_eq!(v["status"], "succeeded", "{v}");
    }
    let url = disk.url();
    drop(s);
    let again = start_on(url, |c| c.min_free_disk_bytes = 1 << 20);
    all_served(&again, "/v1/topologies", &topologies);
    all_served(&again, "/v1/jobs", &jobs);
}

/// A disk nearly full that every write still fits on (filled by another file, not by the
/// service): `/readyz` says 503 naming the disk and the floor, and 200 once there is room.
#[test]
fn readyz_says_a_nearly_full_disk_is_not_ready() {
    let Some(disk) = SmallDisk::mount(8 * 1024) else { return };
    let s = start_on(disk.url(), |c| c.min_free_disk_bytes = 4 << 20);
    let filler = disk.dir.join("filler");
    std::fs::write(&filler, vec![0u8; 5 << 20]).unwrap();
    let r = raw(s.addr, "GET", "/readyz", None);
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("disk nearly full") && r.body.contains("--min-free-disk 4194304"), "{}", r.body);
    // The service itself still works: the disk is not full.
    assert!(post(&s, "/v1/topologies", &topology(0)).is_some());
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(call(&s, "GET", "/readyz", None).0, 200);
}

/// The real binary with `read_only_shim.c` preloaded: its database directory turns read-only
/// (every write, sync or opening for writing refused with EROFS) while `flag` exists.
struct ReadOnlyDisk {
    dir: PathBuf,
    shim: PathBuf,
    flag: PathBuf,
}

impl ReadOnlyDisk {
    /// Builds the shim with the C compiler every machine the project builds on has (`cc`).
    fn new() -> ReadOnlyDisk {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("ccsynth-ro-{}-{n}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let source = dir.join("shim.c");
        std::fs::write(&source, include_str!("read_only_shim.c")).unwrap();
        let shim = dir.join("shim.so");
        let st =
            Command::new("cc").args(["-shared", "-fPIC", "-O1", "-o"]).arg(&shim).arg(&source).arg("-ldl").status();
        assert!(st.is_ok_and(|s| s.success()), "cc could not build the read-only shim");
        let flag = dir.join("read-only");
        ReadOnlyDisk { dir, shim, flag }
    }

    fn url(&self) -> String {
        format!("sqlite:{}", self.dir.join("data/ccsynth.db").display())
    }

    /// The server on this disk, with the shim loaded or (`shimmed` false) without it; killed
    /// when the first of the pair drops.
    fn spawn(&self, shimmed: bool) -> (Killed, Server) {
        let data = format!("{}/", self.dir.join("data").display());
        let env: Vec<(&str, &std::ffi::OsStr)> = if shimmed {
            vec![
                ("LD_PRELOAD", self.shim.as_os_str()),
                ("CCSYNTH_TEST_READ_ONLY_DIR", std::ffi::OsStr::new(&data)),
                ("CCSYNTH_TEST_READ_ONLY_FLAG", self.flag.as_os_str()),
            ]
        } else {
            Vec::new()
        };
        let (child, addr) = spawn_binary_env(&self.url(), &["--min-free-disk", "0"], &env);
        (Killed(child), Server { addr, url: self.url(), stop: None, rt: None, owned: None })
    }

    fn read_only(&self, on: bool) {
        if on {
            std::fs::write(&self.flag, b"").unwrap();
        } else {
            std::fs::remove_file(&self.flag).unwrap();
        }
    }
}

/// A server process, killed (SIGKILL) on drop, a failed assertion's unwinding included.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ReadOnlyDisk {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A read-only disk (the issue's `chattr +i` reproducer, where 6 of 30 POSTs answered 202 were
/// never stored and the service needed a restart): while it lasts every request answers 2xx
/// or 503 with Retry-After (never 500) and `/readyz` says 503; once writes work again the
/// service heals by itself (the job that ended while the disk was read-only is recorded, and
/// every write is accepted: the requests sent sixteen at a time while it was read-only made the
/// pool open connections, which SQLite opened read-only, and such a connection refused every
/// write after the disk came back), and everything it accepted, before, during and after, is
/// found by a restart.
#[test]
fn a_read_only_disk_loses_no_accepted_work_and_the_service_heals() {
    let disk = ReadOnlyDisk::new();
    let (server, s) = disk.spawn(true);
    let mut topologies: Vec<String> = (0..3).map(|n| post(&s, "/v1/topologies", &topology(n)).unwrap()).collect();
    let mut jobs = vec![post(&s, "/v1/syntheses", &in_flight()).expect("accepted before the disk turned read-only")];
    disk.read_only(true);
    let before = jobs.len() + topologies.len();
    let accepted: Vec<(bool, String)> = std::thread::scope(|scope| {
        let senders: Vec<_> = (0..16)
            .map(|i| {
                let s = &s;
                scope.spawn(move || {
                    let mut ids = Vec::new();
                    for n in (i..40).step_by(16) {
                        let (path, body) =
                            if n < 30 { ("/v1/syntheses", synthesis(n)) } else { ("/v1/topologies", topology(n - 27)) };
                        ids.extend(post(s, path, &body).map(|id| (n < 30, id)));
                    }
                    ids
                })
            })
            .collect();
        senders.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    for (job, id) in accepted {
        if job { jobs.push(id) } else { topologies.push(id) }
    }
    assert_eq!(jobs.len() + topologies.len(), before, "a write was accepted on a read-only disk");
    wait_until(Duration::from_secs(20), || raw(s.addr, "GET", "/readyz", None).status == 503);
    // A job that solved on and ended while the disk was read-only (its end waits for it).
    std::thread::sleep(Duration::from_secs(3));
    disk.read_only(false);
    wait_until(Duration::from_secs(20), || call(&s, "GET", "/readyz", None).0 == 200);
    // One after another: the pool hands its connections out in turn, so every one is tried.
    for n in 40..48 {
        jobs.push(post(&s, "/v1/syntheses", &synthesis(n)).expect("accepted once the disk takes writes"));
    }
    for id in &jobs {
        let v = wait_for_job(&s, id, &["succeeded", "failed", "cancelled"]);
        assert_eq!(v["status"], "succeeded", "{v}");
    }
    drop(server);
    let (_server, again) = disk.spawn(false);
    all_served(&again, "/v1/topologies", &topologies);
    all_served(&again, "/v1/jobs", &jobs);
}
