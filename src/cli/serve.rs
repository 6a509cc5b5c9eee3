//! `ccsynth serve`: the HTTP service's configuration from the flags, and its runtime.

use super::ServeArgs;

/// `serve`: runs the HTTP service until it is stopped.
pub(super) fn serve_cmd(a: ServeArgs) -> Result<i32, String> {
    let ServeArgs {
        addr,
        database_url,
        workers,
        job_threads,
        max_queue,
        max_body_bytes,
        max_npus,
        max_links,
        max_chunks,
        max_solve_s,
        lease_ms,
        grace_ms,
        drain_ms,
        max_attempts,
        max_result_bytes,
        export_memory_mb,
        max_interactive_per_client,
        max_interactive_s,
        header_timeout_ms,
        body_timeout_ms,
        max_connections,
        tokens_file,
        allow_open,
        allowed_hosts,
        max_active_per_client,
        max_client_seconds,
        max_requests_per_s,
        private_metrics,
        max_auth_failures_per_s,
        max_client_topologies,
        min_free_disk,
    } = a;
    let addr: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| format!("--addr {addr:?}: {e}: expected an IP address and port, as 127.0.0.1:8080"))?;
    if crate::store::sqlite_in_memory(&database_url) {
        return Err(format!("--database-url {}", crate::store::StoreError::InMemory(database_url)));
    }
    let clients = match &tokens_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| unreadable_tokens(path, &e, process_uid()))?;
            crate::api::parse_clients(&text).map_err(|e| format!("--tokens-file {}: {e}", path.display()))?
        }
        None => Vec::new(),
    };
    if clients.is_empty() && !addr.ip().is_loopback() && !allow_open {
        return Err(format!(
            "--addr {addr} is not a loopback address and no --tokens-file is given: anyone who can reach it could queue, \
             cancel and delete. Give --tokens-file FILE (NAME TOKEN lines), or --allow-open to serve it open anyway"
        ));
    }
    let mut config = crate::api::Config::new(database_url);
    if let Some(w) = workers {
        config.workers = w;
    }
    if let Some(t) = job_threads {
        config.job_threads = t;
    }
    config.max_queue = max_queue;
    config.max_body_bytes = max_body_bytes;
    config.max_npus = max_npus;
    config.max_links = max_links;
    config.max_chunks = max_chunks;
    if !(max_solve_s.is_finite() && max_solve_s > 0.0) {
        return Err(format!("--max-solve-s {max_solve_s}: expected seconds > 0"));
    }
    config.max_solve_s = max_solve_s;
    config.lease_ms = lease_ms;
    config.grace_ms = grace_ms;
    config.drain_ms = drain_ms;
    config.max_attempts = max_attempts;
    config.max_result_bytes = max_result_bytes;
    config.export_memory_mb = export_memory_mb;
    config.max_interactive_per_client = max_interactive_per_client;
    if !(max_interactive_s.is_finite() && max_interactive_s > 0.0) {
        return Err(format!("--max-interactive-s {max_interactive_s}: expected seconds > 0"));
    }
    config.max_interactive_s = max_interactive_s;
    config.header_timeout_ms = header_timeout_ms;
    config.body_timeout_ms = body_timeout_ms;
    config.max_connections = max_connections;
    config.clients = clients;
    config.max_active_per_client = max_active_per_client;
    if !(max_client_seconds.is_finite() && max_client_seconds > 0.0) {
        return Err(format!("--max-client-seconds {max_client_seconds}: expected seconds > 0"));
    }
    config.max_active_seconds_per_client = max_client_seconds;
    if !(max_requests_per_s.is_finite() && max_requests_per_s >= 0.0) {
        return Err(format!("--max-requests-per-s {max_requests_per_s}: expected a number of requests ≥ 0"));
    }
    config.max_requests_per_s = max_requests_per_s;
    if !(max_auth_failures_per_s.is_finite() && max_auth_failures_per_s >= 0.0) {
        return Err(format!("--max-auth-failures-per-s {max_auth_failures_per_s}: expected a number of requests ≥ 0"));
    }
    config.max_auth_failures_per_s = max_auth_failures_per_s;
    config.max_topologies_per_client = max_client_topologies;
    config.min_free_disk_bytes = min_free_disk;
    config.private_metrics = private_metrics;
    config.allowed_hosts = if !allowed_hosts.is_empty() {
        Some(
            allowed_hosts
                .iter()
                .map(|h| h.trim().trim_start_matches('[').trim_end_matches(']').to_lowercase())
                .collect(),
        )
    } else if addr.ip().is_loopback() {
        Some(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()])
    } else {
        None
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    let served = rt.block_on(crate::api::serve(config, addr));
    // A comparison or export abandoned at the end of the grace may still run on the blocking
    // pool: the process leaves without it (dropping the runtime would wait for it to finish).
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    served.map_err(|e| e.to_string())?;
    Ok(0)
}

/// The error for a tokens file that cannot be read; where it is a permission, which user the
/// server runs as and how to give it the file (a secret mounted at mode 0600 for root cannot
/// be read by the image's user, uid 10001).
fn unreadable_tokens(path: &std::path::Path, e: &std::io::Error, uid: Option<u32>) -> String {
    let at = format!("--tokens-file {}: {e}", path.display());
    if e.kind() != std::io::ErrorKind::PermissionDenied {
        return at;
    }
    let who = uid.map_or_else(|| "the server's user".to_string(), |u| format!("uid {u}"));
    format!(
        "{at}: the server runs as {who} and must read it; give that user the file (chown, or mode 0444 on a \
         read-only mount; in the container image the server is uid 10001: for a Docker secret, set its uid \
         to 10001 or its mode to 0444)"
    )
}

/// The real uid of this process, from /proc (Linux); `None` elsewhere.
fn process_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 66, Docker: a tokens file the server may not read says which user it runs as and
    /// how to give it the file; other errors are as the system words them.
    #[test]
    fn an_unreadable_tokens_file_names_the_user_and_the_fix() {
        let path = std::path::Path::new("/run/secrets/ccsynth_tokens");
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let said = unreadable_tokens(path, &denied, Some(10001));
        assert!(said.starts_with("--tokens-file /run/secrets/ccsynth_tokens: permission denied"), "{said}");
        assert!(said.contains("runs as uid 10001") && said.contains("mode 0444"), "{said}");
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(unreadable_tokens(path, &missing, Some(0)), format!("--tokens-file {}: {missing}", path.display()));
        assert!(process_uid().is_some(), "Linux has /proc/self/status");
    }
}
