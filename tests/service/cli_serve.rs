//! `ccsynth serve` refusing an open service, and the container's entry point.

use super::cli::ccsynth;
use std::process::Command;

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

/// A limit of the service that would refuse every request, or a lease that lapses at once, is
/// refused at start naming the flag and the range (they were taken, or read as 1, silently);
/// 0 stays taken where it means something (no interactive jobs).
#[test]
fn serve_refuses_a_limit_that_would_serve_nothing() {
    let dir = std::env::temp_dir().join(format!("ccsynth-serve-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sqlite:{}", dir.join("limits.db").display());
    for (flag, value) in [
        ("--max-body-bytes", "0"),
        ("--max-npus", "0"),
        ("--lease-ms", "0"),
        ("--lease-ms", "-5"),
        ("--workers", "0"),
        ("--max-attempts", "0"),
        ("--max-connections", "0"),
        ("--max-queue", "-1"),
    ] {
        let o = ccsynth(&["serve", "--database-url", &db, "--addr", "127.0.0.1:0", flag, value], None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        // In words, not the type's bounds ("0 is not in 1..18446744073709551615").
        let said =
            if flag == "--max-body-bytes" { "expected at least 1 byte" } else { "expected a whole number ≥ 1" };
        assert!(
            err.contains(flag) && err.contains(&format!("'{value}'")) && err.contains(said),
            "{flag} {value}: {err}"
        );
        assert!(!err.contains("..") && !err.contains("u64"), "{err}");
    }
    // Byte limits take sizes, as --min-free-disk does.
    let o = ccsynth(
        &[
            "serve",
            "--database-url",
            &db,
            "--max-body-bytes",
            "1MiB",
            "--max-result-bytes",
            "2GB",
            "--addr",
            "localhost:1",
        ],
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--addr \"localhost:1\"") && err.contains("as 127.0.0.1:8080"), "{err}");
    // An SQLite database in memory is one a connection: the service answered ready, then 500 to
    // every request (its other connections had no tables).
    for memory in ["sqlite::memory:", "sqlite:", "sqlite:x.db?mode=memory"] {
        let o = ccsynth(&["serve", "--database-url", memory, "--addr", "127.0.0.1:0"], None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{memory}: {err}");
        assert!(err.contains("--database-url") && err.contains("in memory") && err.contains("name a file"), "{err}");
    }
    let o = ccsynth(&["serve", "--database-url", &db, "--addr", "127.0.0.1:0", "--max-solve-s", "0"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--max-solve-s 0: expected seconds > 0"));
    let _ = std::fs::remove_dir_all(&dir);
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
    let health = dir.join("health");
    let run_with = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = Command::new("sh");
        c.arg(format!("{root}/scripts/docker-entrypoint.sh"))
            .args(args)
            .env("CCSYNTH_BIN", &fake)
            .env("CCSYNTH_TOKENS_PATH", &tokens)
            .env("CCSYNTH_HEALTH_FILE", &health)
            .env_remove("CCSYNTH_TOKENS_FILE")
            .env_remove("CCSYNTH_ADDR")
            .env_remove("CCSYNTH_ALLOWED_HOSTS");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let run = |args: &[&str], env_tokens: Option<&str>| match env_tokens {
        Some(t) => run_with(args, &[("CCSYNTH_TOKENS_FILE", t)]),
        None => run_with(args, &[]),
    };
    // Where the HEALTHCHECK probes: the port the server listens on, with a Host it answers to
    // (issue 66: `--allowed-host` or `--addr` turned the container unhealthy).
    let probe = |args: &[&str], env: &[(&str, &str)]| {
        run_with(args, env);
        std::fs::read_to_string(&health).unwrap().trim().to_string()
    };
    assert_eq!(probe(&["serve"], &[]), "http://127.0.0.1:8080/healthz 127.0.0.1");
    assert_eq!(
        probe(&["serve", "--addr", "0.0.0.0:9091", "--allowed-host", "ccsynth.example.com"], &[]),
        "http://127.0.0.1:9091/healthz ccsynth.example.com"
    );
    assert_eq!(
        probe(&["serve"], &[("CCSYNTH_ADDR", "0.0.0.0:7000"), ("CCSYNTH_ALLOWED_HOSTS", "a.example,b.example")]),
        "http://127.0.0.1:7000/healthz a.example"
    );
    assert_eq!(
        probe(&["serve", "--addr=10.1.2.3:81", "--allowed-host=x.example"], &[("CCSYNTH_ALLOWED_HOSTS", "y.example")]),
        "http://10.1.2.3:81/healthz x.example"
    );
    assert_eq!(probe(&["serve", "--addr", "[::1]:8081"], &[]), "http://[::1]:8081/healthz ::1");
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
    // The probe reads what the entry point writes, at the path it writes it by default.
    let entry = std::fs::read_to_string(format!("{root}/scripts/docker-entrypoint.sh")).unwrap();
    assert!(health.contains("cat /tmp/ccsynth-health") && health.contains("-H \"Host: ${2:-127.0.0.1}\""), "{health}");
    assert!(entry.contains("${CCSYNTH_HEALTH_FILE:-/tmp/ccsynth-health}"));
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

/// Issue 66, rough edge 3: `serve` on a port another process holds names the address and what
/// to do, not only "Address already in use (os error 98)".
#[test]
fn serve_on_a_busy_port_names_the_address() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let dir = std::env::temp_dir().join(format!("ccsynth-busy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sqlite:{}", dir.join("busy.db").display());
    let o = ccsynth(&["serve", "--addr", &addr, "--database-url", &db], None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("cannot listen on {addr}")) && err.contains("--addr"), "{err}");
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 66, Docker: open mode by environment as well as by flag (CCSYNTH_ALLOW_OPEN; 0 is
/// off), and a line on stderr when the server begins to shut down and when it has stopped.
#[test]
fn open_mode_by_environment_and_a_shutdown_said() {
    use std::io::BufRead;
    use std::process::Stdio;
    let dir = std::env::temp_dir().join(format!("ccsynth-open-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sqlite:{}", dir.join("open.db").display());
    let serve = |allow: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ccsynth"));
        c.args(["serve", "--addr", "0.0.0.0:0", "--database-url", &db, "--grace-ms", "200", "--drain-ms", "100"])
            .env("CCSYNTH_ALLOW_OPEN", allow)
            .env_remove("CCSYNTH_TOKENS_FILE")
            .env_remove("CCSYNTH_ADDR")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    };
    let o = serve("0").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "CCSYNTH_ALLOW_OPEN=0 is off");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-open"));
    let mut child = serve("1").spawn().unwrap();
    let lines: Vec<String> = {
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            let listening = line.starts_with("ccsynth: listening on ");
            seen.push(line);
            if listening {
                break;
            }
        }
        assert!(seen.last().is_some_and(|l| l.starts_with("ccsynth: listening on ")), "{seen:?}");
        let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        assert!(status.success());
        seen.extend(lines.map(|l| l.unwrap()));
        seen
    };
    assert!(child.wait().unwrap().success());
    let said = lines.join("\n");
    assert!(said.contains("ccsynth: shutting down: new work refused for 100 ms, running jobs get 200 ms"), "{said}");
    assert!(lines.last().is_some_and(|l| l == "ccsynth: stopped"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
