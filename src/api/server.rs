//! The server's life: `serve`/`serve_on` start the store, the workers and the accept loop
//! (HTTP/1 on hyper with header and body timeouts and a connection cap), and shut down in
//! order on SIGTERM (drain with 503, the grace for running jobs, comparisons and exports
//! answered 503 at its end: `until_stopped`).

use super::config::Config;
use super::error::ApiError;
use super::guard::Peer;
use super::{AppState, Metrics, Shared, conn, router, worker};
use crate::store::Store;
use axum::Router;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// `work` unless the shutdown's grace ends first: then `ApiError::ShuttingDown` (503), and
/// whatever `work` left on the blocking pool is abandoned to the process's exit. Comparisons
/// and exports (which no job's grace covers) run under it, so SIGTERM ends within drain + grace.
pub async fn until_stopped<T>(st: &AppState, work: impl std::future::Future<Output = T>) -> Result<T, ApiError> {
    let mut stopping = st.stopping.subscribe();
    tokio::select! {
        done = work => Ok(done),
        _ = stopping.wait_for(|s| *s) => Err(ApiError::ShuttingDown),
    }
}

/// Runs the service until SIGTERM or Ctrl-C: binds `addr`, starts the workers, serves, then
/// drains (running jobs get `grace_ms` from the signal, then are stopped and go back to the
/// queue).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    /// The address could not be bound (in use, not this machine's, a privileged port).
    #[error("cannot listen on {addr}: {source}{hint}")]
    Bind { addr: std::net::SocketAddr, source: std::io::Error, hint: &'static str },
}

pub async fn serve(config: Config, addr: std::net::SocketAddr) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| {
        let hint = match source.kind() {
            std::io::ErrorKind::AddrInUse => {
                " (another process listens there: stop it, or choose another port with --addr)"
            }
            std::io::ErrorKind::PermissionDenied => " (a port below 1024 needs privileges: choose another with --addr)",
            _ => "",
        };
        ServeError::Bind { addr, source, hint }
    })?;
    serve_on(config, listener, shutdown_signal()).await
}

pub async fn serve_on(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let store = Store::connect(&config.database_url).await?;
    let state = Arc::new(AppState {
        store,
        config: config.clone(),
        metrics: Metrics::default(),
        cancels: Mutex::new(HashMap::new()),
        queued: tokio::sync::Notify::new(),
        job_ended: tokio::sync::Notify::new(),
        shutting_down: AtomicBool::new(false),
        comparing: Mutex::new(HashMap::new()),
        allowance: Mutex::new(HashMap::new()),
        auth_failures: Mutex::new(HashMap::new()),
        stopping: tokio::sync::watch::Sender::new(false),
        large_bodies: tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())),
        validations: std::sync::Arc::new(tokio::sync::Semaphore::new(
            std::thread::available_parallelism().map_or(2, |n| n.get()).max(2),
        )),
        exports: Mutex::new(HashMap::new()),
        export_budget: std::sync::Arc::new(tokio::sync::Semaphore::new(config.export_memory_mb.max(1) as usize)),
        built: Mutex::new(None),
    });
    let workers: Vec<_> = (0..config.workers.max(1)).map(|i| tokio::spawn(worker::worker(state.clone(), i))).collect();
    compress_old_schedules(state.store.clone());
    let watcher = watch_other_replicas(state.clone());
    tracing::info!(addr = %listener.local_addr()?, workers = workers.len(), backend = ?state.store.backend, "serving");
    if config.clients.is_empty() {
        eprintln!(
            "ccsynth: no --tokens-file: every client that reaches this address may queue, read, cancel and delete"
        );
    }
    // Machine-readable for scripts and tests that start the server on port 0.
    eprintln!("ccsynth: listening on {}", listener.local_addr()?);
    let st = state.clone();
    // The running jobs' grace counts from the signal, beside the drain and the connections'
    // own grace, so the process is gone within drain + grace, not drain + twice the grace.
    let signalled: Arc<std::sync::OnceLock<tokio::time::Instant>> = Arc::default();
    let at = signalled.clone();
    let grace = std::time::Duration::from_millis(config.grace_ms);
    let (drain_ms, grace_ms) = (config.drain_ms, config.grace_ms);
    accept_loop(listener, router(state.clone()), &config, async move {
        shutdown.await;
        let _ = at.set(tokio::time::Instant::now());
        tracing::info!(drain_ms, grace_ms, "shutting down");
        eprintln!("ccsynth: shutting down: new work refused for {drain_ms} ms, running jobs get {grace_ms} ms");
        st.shutting_down.store(true, Ordering::SeqCst);
        st.queued.notify_waiters();
        // At the end of the grace, the solves still running are stopped; their workers put
        // them back in the queue (a cancel while shutting down is a re-queue).
        let running = st.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            running.stopping.send_replace(true);
            for flag in running.cancels.lock().unwrap().values() {
                flag.store(true, Ordering::SeqCst);
            }
        });
        // Long-polls on jobs this process will not run now answer 503 with the job's id.
        st.job_ended.notify_waiters();
        tokio::time::sleep(std::time::Duration::from_millis(st.config.drain_ms)).await;
    })
    .await;
    state.shutting_down.store(true, Ordering::SeqCst);
    state.queued.notify_waiters();
    state.job_ended.notify_waiters();
    // A stopped solve needs a moment to see its flag and re-queue its job.
    let since = signalled.get().copied().unwrap_or_else(tokio::time::Instant::now);
    let slack = std::time::Duration::from_secs(2);
    let _ = tokio::time::timeout_at(since + grace + slack, futures_join(workers)).await;
    // Whatever still runs (a worker that did not hand its job back in time) goes back to
    // the queue for the next start (or another replica).
    let running: Vec<(String, Arc<AtomicBool>)> =
        state.cancels.lock().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let requeued = running.len();
    for (id, flag) in running {
        flag.store(true, Ordering::SeqCst);
        let _ = state.store.requeue(&id).await;
    }
    watcher.abort();
    // Jobs whose workers did not hand them back within the grace are counted: the rest went
    // back to the queue (or ended) on their own.
    tracing::info!(requeued_late = requeued, "stopped");
    eprintln!("ccsynth: stopped");
    Ok(())
}

/// Compresses, in the background, the schedules stored before bodies were compressed: a few at
/// a time, once per start.
fn compress_old_schedules(store: crate::store::Store) {
    tokio::spawn(async move {
        let mut total = 0;
        loop {
            match store.compress_old_schedules(16).await {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e) => {
                    tracing::warn!(error = %e, "compressing stored schedules failed; they stay as they are");
                    break;
                }
            }
        }
        if total > 0 {
            tracing::info!(schedules = total, "compressed schedules stored before compression");
        }
    });
}

/// Hears other replicas' job events (PostgreSQL): their ends wake this process's `wait_ms`
/// waiters, their queued jobs its idle workers.
fn watch_other_replicas(state: Shared) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let st = state.clone();
        state
            .store
            .watch_jobs(move |e| {
                use crate::store::JobEvent;
                if e != JobEvent::Queued {
                    st.job_ended.notify_waiters();
                }
                if e != JobEvent::Ended {
                    st.queued.notify_waiters();
                }
            })
            .await
    })
}

/// Accepts and serves HTTP/1 connections until `shutdown` completes, then lets every open
/// connection finish its request in flight (keep-alive off) for up to `grace_ms`.
///
/// Written out instead of `axum::serve`, which sets no hyper timer, so hyper's header-read
/// timeout never fires: a client could hold a connection forever by sending nothing, or a
/// request head a byte at a time. Here each connection must send its first byte within
/// `header_timeout_ms` (hyper's own timeout does not cover a connection that never sends,
/// axum#3478) and each request head within `header_timeout_ms` of the connection opening or
/// its previous response (hyper's header-read timeout, which since hyper 1.6 also covers idle
/// keep-alive connections); at most `max_connections` are open at once, and one over is
/// closed on accept.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    config: &Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let timeout = std::time::Duration::from_millis(config.header_timeout_ms.max(1));
    let cap = config.max_connections.clamp(1, 1 << 20);
    let slots = Arc::new(tokio::sync::Semaphore::new(cap));
    let (closing, _) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (socket, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: pause instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(max_connections = config.max_connections, "connection refused: at the limit");
            continue; // dropped: closed
        };
        let _ = socket.set_nodelay(true);
        // Every request knows its peer's address (failed authentications are counted by it).
        let with_peer =
            tower::ServiceExt::map_request(app.clone(), move |mut r: hyper::Request<hyper::body::Incoming>| {
                r.extensions_mut().insert(Peer(peer));
                r
            });
        let service = hyper_util::service::TowerToHyperService::new(with_peer);
        let mut closing = closing.subscribe();
        tokio::spawn(async move {
            let _slot = slot;
            if tokio::time::timeout(timeout, socket.readable()).await.is_err() {
                return; // nothing sent: closed
            }
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(timeout);
            let conn = builder.serve_connection(TokioIo::new(conn::Watched::new(socket)), service);
            let mut conn = std::pin::pin!(conn);
            loop {
                tokio::select! {
                    _ = conn.as_mut() => break,
                    changed = closing.changed() => {
                        conn.as_mut().graceful_shutdown();
                        if changed.is_err() {
                            // The server is gone; finish the request in flight.
                            let _ = conn.as_mut().await;
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    // Every connection holds a slot: all slots back means all closed.
    let all = cap as u32;
    let grace = std::time::Duration::from_millis(config.grace_ms);
    let _ = tokio::time::timeout(grace, slots.acquire_many(all)).await;
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
    for h in handles {
        let _ = h.await;
    }
}

fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    // Both handlers are installed now, before "listening on" is printed: a SIGTERM that came
    // between that line and the first poll of this future found the default handler and killed
    // the process without its shutdown (seen under load in the service tests).
    use tokio::signal::unix::{SignalKind, signal};
    let (interrupt, terminate) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
    async move {
        let wait = |s: std::io::Result<tokio::signal::unix::Signal>| async move {
            match s {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = wait(interrupt) => {},
            _ = wait(terminate) => {},
        }
    }
}
