//! `GET /v1/schedules/{id}/export`: a stored schedule in another program's format (MSCCL XML,
//! MSCCL++ plans, Chakra traces as a tar), as a picture of its replay (Chrome trace, SVG
//! timeline), or as its own JSON in the explicit form (streamed, not stored).
use super::id::Id;
use super::owned::own_schedule;
use super::streamed::streamed_json;
use super::{ApiError, Caller, Shared};
use crate::engine;
use crate::error::InputError;
use axum::Router;
use axum::extract::{Extension, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use std::sync::Arc;

pub fn router() -> Router<Shared> {
    Router::new().route("/v1/schedules/{id}/export", get(export))
}

/// `?format=msccl-xml` and the MSCCL file's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExportQuery {
    format: String,
    #[serde(default)]
    msccl_target: Option<engine::MscclTarget>,
    #[serde(default)]
    protocol: Option<engine::MscclProtocol>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    min_bytes: Option<u64>,
    #[serde(default)]
    max_bytes: Option<u64>,
    /// Mark an MSCCL++ plan for in-place calls (`mscclpp-json`).
    #[serde(default)]
    in_place: Option<bool>,
    /// The Chakra files' prefix (`chakra-et`).
    #[serde(default)]
    prefix: Option<String>,
    /// One rank's view of an MSCCL++ plan (`mscclpp-json`), or its Chakra trace (`chakra-et`).
    #[serde(default)]
    rank: Option<u32>,
}

/// An empty name and the size range's mistakes, named at their keys before anything is built
/// (the writers check the sizes too, but their refusal names only the format).
fn check_sizes(q: &ExportQuery) -> Result<(), ApiError> {
    use engine::ExportOptionError as E;
    let (key, message) = match engine::check_export_options(q.name.as_deref(), q.min_bytes, q.max_bytes) {
        Ok(()) => return Ok(()),
        Err(E::EmptyName) => ("name", "empty: name the algorithm, or leave name out for the default".to_string()),
        Err(E::NameControl { code }) => (
            "name",
            format!(
                "holds the {} U+{code:04X}: name the algorithm in printable characters",
                engine::unwritable_kind(code)
            ),
        ),
        Err(E::NameTooLong { bytes }) => (
            "name",
            format!(
                "{bytes} bytes as an XML attribute writes it: at most {} (the MSCCL executor's buffer)",
                engine::MAX_NAME_BYTES
            ),
        ),
        Err(E::MaxBytesZero) => (
            "max_bytes",
            "0: the executor reads maxBytes = 0 as no upper limit; leave max_bytes out for that".to_string(),
        ),
        Err(E::MinAboveMax { min, max }) => ("min_bytes", format!("{min} is above max_bytes {max}")),
    };
    Err(InputError::new(key, message).into())
}

/// A format as `format=` spells it: the engine's writer of it, and what this route builds it
/// as with its media type (`None` for `explicit`, streamed from the stored schedule instead).
struct Format {
    name: &'static str,
    writer: engine::Writer,
    built: Option<(ExportFormat, &'static str)>,
}

/// Every format of the route, once: its options' check, its writer and its media type.
const FORMATS: [Format; 6] = [
    Format { name: "explicit", writer: engine::Writer::Explicit, built: None },
    Format {
        name: "msccl-xml",
        writer: engine::Writer::MscclXml,
        built: Some((ExportFormat::MscclXml, "application/xml")),
    },
    Format {
        name: "mscclpp-json",
        writer: engine::Writer::MscclppJson,
        built: Some((ExportFormat::MscclppJson, "application/json")),
    },
    Format {
        name: "chrome-trace",
        writer: engine::Writer::ChromeTrace,
        built: Some((ExportFormat::ChromeTrace, "application/json")),
    },
    Format {
        name: "timeline-svg",
        writer: engine::Writer::TimelineSvg,
        built: Some((ExportFormat::TimelineSvg, "image/svg+xml")),
    },
    Format {
        name: "chakra-et",
        writer: engine::Writer::ChakraEt,
        built: Some((ExportFormat::ChakraEt, "application/x-tar")),
    },
];

/// A key the format does not read, refused at that key (each was ignored: `protocol=LL` on an
/// MSCCL++ plan changed nothing and said nothing). An unknown format is named by the format's
/// own check.
fn check_applies(q: &ExportQuery) -> Result<(), ApiError> {
    let Some(writer) = FORMATS.iter().find(|f| f.name == q.format).map(|f| f.writer) else {
        return Ok(());
    };
    use engine::ExportOption as O;
    let unread = engine::unread_option(writer, |o| match o {
        O::Rank => q.rank.map(|r| ("rank", r.to_string())),
        O::MscclTarget => q.msccl_target.map(|t| ("msccl_target", spelled(t))),
        O::Protocol => q.protocol.map(|p| ("protocol", spelled(p))),
        O::Name => q.name.clone().map(|n| ("name", n)),
        O::MinBytes => q.min_bytes.map(|b| ("min_bytes", b.to_string())),
        O::MaxBytes => q.max_bytes.map(|b| ("max_bytes", b.to_string())),
        O::InPlace => q.in_place.map(|b| ("in_place", b.to_string())),
        O::Prefix => q.prefix.clone().map(|p| ("prefix", p)),
    });
    let Some((option, (key, value))) = unread else {
        return Ok(());
    };
    let (writers, what) = option.read_by();
    let names: Vec<&str> = FORMATS.iter().filter(|f| writers.contains(&f.writer)).map(|f| f.name).collect();
    Err(InputError::new(key, format!("{value}: only format={} {what}", names.join(" and "))).into())
}

/// A value as its query spells it.
fn spelled(v: impl serde::Serialize) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// The stored schedule in another program's format (validated again before it is written).
pub(super) async fn export(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
    axum::extract::RawQuery(q): axum::extract::RawQuery,
) -> Result<Response, ApiError> {
    own_schedule(&st, &caller, &id).await?;
    let q: ExportQuery = super::query::parse(q.as_deref())?;
    check_sizes(&q)?;
    check_applies(&q)?;
    let Some(found) = FORMATS.iter().find(|f| f.name == q.format) else {
        let names: Vec<&str> = FORMATS.iter().map(|f| f.name).collect();
        let (last, rest) = names.split_last().unwrap_or((&"", &[]));
        let why = format!("{:?}: expected {} or {last}", q.format, rest.join(", "));
        return Err(InputError::new("format", why).into());
    };
    let Some((format, media)) = found.built else {
        return explicit(&st, &id).await;
    };
    let q_rank = q.rank;
    // One rank's Chakra trace is one file, not an archive.
    let media = match (format, q.rank) {
        (ExportFormat::ChakraEt, Some(_)) => "application/octet-stream",
        _ => media,
    };
    let prefix = q.prefix.clone().unwrap_or_else(|| "ccsynth".to_string());
    // Identical requests (schedule, format, options) in flight share one computation.
    let key = format!(
        "{id}\u{1f}{}\u{1f}{:?}\u{1f}{:?}\u{1f}{:?}\u{1f}{:?}\u{1f}{:?}\u{1f}{:?}\u{1f}{:?}{}",
        q.format,
        q.msccl_target,
        q.protocol,
        q.name,
        q.min_bytes,
        q.max_bytes,
        q.in_place,
        q.prefix,
        // Appended only when given, so the variants stored before it keep their keys.
        q.rank.map(|r| format!("\u{1f}rank={r}")).unwrap_or_default()
    );
    // Stored once built: a later GET (after a restart too) reads it back instead.
    let variant = {
        use sha2::Digest;
        let options = key.split_once('\u{1f}').map_or("", |(_, rest)| rest);
        let versioned = format!("{}\u{1f}{}\u{1f}{options}", env!("CARGO_PKG_VERSION"), exports_version(format));
        format!("{:x}", sha2::Sha256::digest(versioned.as_bytes()))
    };
    let pending = st.exports.lock().unwrap().entry(key.clone()).or_default().clone();
    let result = pending
        .result
        .get_or_init(|| async {
            match stored(&st, &id, &variant).await {
                Ok(Some(bytes)) => Ok(bytes),
                // A stored export that does not decompress is built again (and not stored over).
                Err(ExportFail::Internal(why)) => {
                    tracing::warn!(schedule = %id, error = %why, "a stored export is unreadable; building it");
                    build(&st, &id, format, q, prefix.clone()).await
                }
                Ok(None) => {
                    let built = build(&st, &id, format, q, prefix.clone()).await;
                    if let Ok(bytes) = &built {
                        keep(&st, &id, &variant, bytes.clone());
                    }
                    built
                }
                Err(e) => Err(e),
            }
        })
        .await
        .clone();
    {
        let mut map = st.exports.lock().unwrap();
        if map.get(&key).is_some_and(|p| Arc::ptr_eq(p, &pending)) {
            map.remove(&key);
        }
    }
    let bytes = result.map_err(ExportFail::into_api)?;
    let disposition = match (format, q_rank) {
        (ExportFormat::ChakraEt, Some(r)) => Some(format!("attachment; filename=\"{prefix}.{r}.et\"")),
        (ExportFormat::ChakraEt, None) => Some(format!("attachment; filename=\"{prefix}.tar\"")),
        _ => None,
    };
    // Every waiter answers from the one buffer (no copy per response).
    let body = axum::body::Bytes::from_owner(SharedBytes(bytes));
    let mut response = ([(header::CONTENT_TYPE, media)], body).into_response();
    if let Some(d) = disposition.and_then(|d| header::HeaderValue::from_str(&d).ok()) {
        response.headers_mut().insert(header::CONTENT_DISPOSITION, d);
    }
    Ok(response)
}

/// `GET /v1/schedules/{id}/export?format=explicit`: the schedule's JSON in the explicit form
/// (every chunk id listed, both conditions written), streamed as `schedule` streams its own.
async fn explicit(st: &Shared, id: &str) -> Result<Response, ApiError> {
    let (body, _) = st.store.schedule_body(id).await?.ok_or_else(|| ApiError::NotFound("schedule", id.to_string()))?;
    let (len, body) = streamed_json(body, crate::schedule::Form::Explicit).await?;
    Ok(([(header::CONTENT_TYPE, "application/json"), (header::CONTENT_LENGTH, &len.to_string())], body).into_response())
}

/// An export's bytes, shared by the responses that send them.
struct SharedBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// One export being computed: the requests for it wait on `result`.
#[derive(Default)]
pub struct Pending {
    result: tokio::sync::OnceCell<Result<Arc<Vec<u8>>, ExportFail>>,
}

/// Why an export failed, shared by every request waiting for it.
#[derive(Clone, Debug)]
enum ExportFail {
    NotFound(String),
    BadQuery(crate::error::FieldError),
    Internal(String),
    Unprocessable(InputError),
    ShuttingDown,
}

impl ExportFail {
    fn into_api(self) -> ApiError {
        match self {
            ExportFail::NotFound(id) => ApiError::NotFound("schedule", id),
            ExportFail::BadQuery(f) => ApiError::BadQueryKey(f),
            ExportFail::Internal(m) => ApiError::Internal(m),
            ExportFail::Unprocessable(e) => ApiError::Unprocessable(e),
            ExportFail::ShuttingDown => ApiError::ShuttingDown,
        }
    }
}

/// Peak memory of an export per byte of the stored schedule's JSON, measured on the release
/// build (torus:16x16 all-gather by the greedy, a 4.4 MB schedule: MSCCL XML 54 MB of peak
/// resident memory, the MSCCL++ plan 225 MB, Chakra traces 98 MB, the Chrome trace 41 MB),
/// rounded up.
fn peak_per_byte(format: ExportFormat) -> u64 {
    match format {
        ExportFormat::MscclXml => 15,
        ExportFormat::MscclppJson => 60,
        ExportFormat::ChakraEt => 30,
        ExportFormat::ChromeTrace | ExportFormat::TimelineSvg => 12,
    }
}

/// Peak memory of an export per (NPU, slot) cell of its schedule, where that is more than its
/// bytes say (a compact schedule's ranges are a few bytes for millions of chunk moves):
/// measured on bucket's torus:32x32 all-reduce (2^22 cells, a 16 MB schedule) as MSCCL XML 1.2
/// GB, an MSCCL++ plan 3.5 GB, Chakra traces 1.18 GB; one rank's trace replays the transfers
/// that touch it alone.
fn peak_per_cell(format: ExportFormat, rank: Option<u32>) -> u64 {
    match (format, rank) {
        (ExportFormat::MscclXml, _) => 290,
        (ExportFormat::MscclppJson, _) => 840,
        (ExportFormat::ChakraEt, None) => 290,
        (ExportFormat::ChakraEt, Some(_)) | (ExportFormat::ChromeTrace | ExportFormat::TimelineSvg, _) => 0,
    }
}

/// Computes one export on the blocking pool, within the export memory budget: it takes its
/// estimated peak (at least 1 MiB, at most the whole budget, so that one larger than the
/// budget still runs, alone) before it builds anything, and gives it back when done.
async fn build(
    st: &Shared,
    id: &str,
    format: ExportFormat,
    q: ExportQuery,
    prefix: String,
) -> Result<Arc<Vec<u8>>, ExportFail> {
    let rank = q.rank;
    let plan_opts = engine::MscclppOptions {
        name: q.name.clone(),
        in_place: q.in_place.unwrap_or(false),
        min_bytes: q.min_bytes,
        max_bytes: q.max_bytes,
        rank: q.rank,
    };
    let opts = engine::MscclOptions {
        target: q.msccl_target.unwrap_or_default(),
        protocol: q.protocol.unwrap_or_default(),
        name: q.name,
        min_bytes: q.min_bytes,
        max_bytes: q.max_bytes,
    };
    let (body, _) = match st.store.schedule_body(id).await {
        Ok(Some(found)) => found,
        Ok(None) => return Err(ExportFail::NotFound(id.to_string())),
        Err(e) => return Err(ExportFail::Internal(e.to_string())),
    };
    // A format's limits that its counts already break refuse a packed schedule before it is
    // decoded (the same error the export gives): torus:128x128's all-reduce decodes to 1.6 GB
    // in seconds only for its 33 M transfers to be past what a plan holds.
    let outlined = tokio::task::spawn_blocking(move || {
        let fits = body.outline().map(|(outline, transfers)| {
            let cells = (outline.topology.npus() as u64).saturating_mul(outline.slots() as u64);
            let fits = match format {
                ExportFormat::MscclXml => engine::msccl_fits(&outline, transfers),
                ExportFormat::MscclppJson => engine::mscclpp_fits(&outline, transfers),
                // One rank's trace is small at any size: its rank and tags are what can refuse it.
                ExportFormat::ChakraEt => match rank {
                    Some(r) => engine::chakra_rank_fits(&outline, transfers, r),
                    None => engine::chakra_fits(&outline, transfers),
                },
                ExportFormat::ChromeTrace | ExportFormat::TimelineSvg => Ok(()),
            };
            (cells, fits)
        });
        (body, fits)
    });
    let (body, outlined) = super::until_stopped(st, outlined)
        .await
        .map_err(|_| ExportFail::ShuttingDown)?
        .map_err(|e| ExportFail::Internal(e.to_string()))?;
    let cells = outlined.as_ref().map_or(0, |(cells, _)| *cells);
    let fits = outlined.map(|(_, fits)| fits);
    match fits {
        // A rank the schedule does not have, named.
        Some(Err(engine::Error::Input(e))) => return Err(ExportFail::Unprocessable(e)),
        Some(Err(e)) => return Err(ExportFail::Unprocessable(InputError::new("format", e.to_string()))),
        _ => {}
    }
    let budget = st.config.export_memory_mb.max(1);
    let peak = (body.json_len() as u64)
        .saturating_mul(peak_per_byte(format))
        .max(cells.saturating_mul(peak_per_cell(format, rank)));
    let mib = peak.div_ceil(1 << 20).clamp(1, budget as u64) as u32;
    if st.export_budget.available_permits() < mib as usize {
        st.metrics.export_budget_waits.inc();
    }
    // A shutdown's grace ends the wait for room and the export (503).
    let budget =
        super::until_stopped(st, st.export_budget.acquire_many(mib)).await.map_err(|_| ExportFail::ShuttingDown)?;
    let _permit = budget.map_err(|e| ExportFail::Internal(e.to_string()))?;
    st.metrics.exports_built.inc();
    let work = tokio::task::spawn_blocking(move || -> Result<Arc<Vec<u8>>, ExportFail> {
        let s = body.into_schedule().map_err(ExportFail::Internal)?;
        let out = match format {
            ExportFormat::MscclXml => engine::export_msccl(&s, &opts).map(String::into_bytes),
            ExportFormat::MscclppJson => engine::export_mscclpp(&s, &plan_opts).map(String::into_bytes),
            ExportFormat::ChromeTrace => engine::export_trace(&s, engine::API_MAX_TRACE_SLICES).map(String::into_bytes),
            ExportFormat::TimelineSvg => engine::plot_timeline(&s).map(|t| t.svg.into_bytes()),
            // The system configuration names the traces by the bare prefix: run ASTRA-sim in
            // the directory the archive is unpacked in.
            ExportFormat::ChakraEt => match rank {
                Some(r) => engine::export_chakra_rank(&s, &prefix, r).map(|(_, bytes)| bytes),
                None => engine::export_chakra(&s, &prefix, None).map(|e| engine::chakra_tar(&e.files)),
            },
        };
        out.map(Arc::new).map_err(|e| match e {
            // The prefix is the caller's; anything else about a stored schedule passed the
            // validator when it was stored.
            // Named at its key, as every other key's error is (`errors` was empty).
            engine::Error::Input(mut e) if !e.errors.is_empty() && e.errors.iter().all(|f| f.path == "prefix") => {
                ExportFail::BadQuery(e.errors.swap_remove(0))
            }
            // A rank outside the plan (its size is known only once the plan is laid out).
            engine::Error::Input(e) if e.errors.iter().all(|f| f.path == "rank") => ExportFail::Unprocessable(e),
            engine::Error::Input(e) => ExportFail::Internal(e.to_string()),
            // The format cannot hold this schedule (an executor's limit, a picture's size).
            e if e.kind() == engine::ErrorKind::Refused => {
                ExportFail::Unprocessable(InputError::new("format", e.to_string()))
            }
            e => ExportFail::Internal(e.to_string()),
        })
    });
    super::until_stopped(st, work)
        .await
        .map_err(|_| ExportFail::ShuttingDown)?
        .map_err(|e| ExportFail::Internal(e.to_string()))
        .inspect(|_| release_freed_memory())?
}

/// A format's exporter version, bumped when its output changes for the same schedule and
/// options, so stored exports of earlier builds (and of the crate's earlier versions) are not
/// served; per format, so one exporter's change leaves the others' stored exports in use.
fn exports_version(format: ExportFormat) -> u32 {
    match format {
        // 2: a pair's messages in the simulator's order through relays. 3 (and MSCCL XML's 2): no
        // landing in place over what a local move of its step reads. 4: relays hop by hop
        // (hop-major). The pictures' 2: a relayed transfer drawn on each link for its hop. Chakra's
        // 2: a relayed transfer a SEND and a RECV per hop, hop-major.
        ExportFormat::MscclppJson => 4,
        ExportFormat::MscclXml => 2,
        ExportFormat::ChromeTrace | ExportFormat::TimelineSvg => 2,
        ExportFormat::ChakraEt => 2,
    }
}

/// A stored export, decompressed within the export memory budget (its whole size), or `None`.
async fn stored(st: &Shared, id: &str, variant: &str) -> Result<Option<Arc<Vec<u8>>>, ExportFail> {
    let Some((zstd, bytes)) = st.store.export(id, variant).await.map_err(|e| ExportFail::Internal(e.to_string()))?
    else {
        return Ok(None);
    };
    let mib = bytes.div_ceil(1 << 20).clamp(1, st.config.export_memory_mb.max(1) as u64) as u32;
    let budget =
        super::until_stopped(st, st.export_budget.acquire_many(mib)).await.map_err(|_| ExportFail::ShuttingDown)?;
    let _permit = budget.map_err(|e| ExportFail::Internal(e.to_string()))?;
    let work = tokio::task::spawn_blocking(move || zstd::bulk::decompress(&zstd, bytes as usize));
    let whole = super::until_stopped(st, work)
        .await
        .map_err(|_| ExportFail::ShuttingDown)?
        .map_err(|e| ExportFail::Internal(e.to_string()))?
        .map_err(|e| ExportFail::Internal(format!("stored export of schedule {id}: {e}")))?;
    Ok(Some(Arc::new(whole)))
}

/// Stores a built export, compressed, in the background (the response does not wait); a
/// failure only costs a later GET the build.
fn keep(st: &Shared, id: &str, variant: &str, bytes: Arc<Vec<u8>>) {
    let (st, id, variant) = (st.clone(), id.to_string(), variant.to_string());
    tokio::spawn(async move {
        let whole = bytes.len() as u64;
        let packed = tokio::task::spawn_blocking(move || zstd::bulk::compress(&bytes, 3)).await;
        let stored = match packed {
            Ok(Ok(z)) => st.store.put_export(&id, &variant, &z, whole).await.map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = stored {
            tracing::warn!(schedule = %id, error = %e, "storing an export failed; the next GET builds it again");
        }
    });
}

/// Returns the memory an export freed to the system. glibc keeps each thread's malloc arena
/// at its peak, and exports run on whichever blocking thread is free: eight exports of a
/// 4.4 MB schedule's MSCCL++ plan left 1.3 GB resident after they ended, two at a time.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What `GET /v1/schedules/{id}/export` writes.
#[derive(Clone, Copy)]
enum ExportFormat {
    MscclXml,
    MscclppJson,
    ChromeTrace,
    TimelineSvg,
    ChakraEt,
}
