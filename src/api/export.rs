//! `GET /v1/schedules/{id}/export`: a stored schedule in another program's format (MSCCL XML,
//! MSCCL++ plans, Chakra traces as a tar) or as a picture of its replay (Chrome trace, SVG timeline).
use super::jobs::own_schedule;
use super::{ApiError, Caller, Shared};
use crate::engine;
use crate::error::InputError;
use axum::extract::{Extension, Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

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
}

/// The stored schedule in another program's format (validated again before it is written).
pub(super) async fn export(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    q: Result<axum::extract::Query<ExportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    own_schedule(&st, &caller, &id).await?;
    let axum::extract::Query(q) = q.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let (format, media) = match q.format.as_str() {
        "msccl-xml" => (ExportFormat::MscclXml, "application/xml"),
        "mscclpp-json" => (ExportFormat::MscclppJson, "application/json"),
        "chrome-trace" => (ExportFormat::ChromeTrace, "application/json"),
        "timeline-svg" => (ExportFormat::TimelineSvg, "image/svg+xml"),
        "chakra-et" => (ExportFormat::ChakraEt, "application/x-tar"),
        other => {
            return Err(InputError::new(
                "format",
                format!("{other:?}: expected msccl-xml, mscclpp-json, chrome-trace, timeline-svg or chakra-et"),
            )
            .into());
        }
    };
    let prefix = q.prefix.unwrap_or_else(|| "ccsynth".to_string());
    let plan_opts = engine::MscclppOptions {
        name: q.name.clone(),
        in_place: q.in_place.unwrap_or(false),
        min_bytes: q.min_bytes,
        max_bytes: q.max_bytes,
    };
    let opts = engine::MscclOptions {
        target: q.msccl_target.unwrap_or_default(),
        protocol: q.protocol.unwrap_or_default(),
        name: q.name,
        min_bytes: q.min_bytes,
        max_bytes: q.max_bytes,
    };
    let (body, _) = st.store.schedule_body(&id).await?.ok_or(ApiError::NotFound("schedule", id))?;
    let disposition =
        matches!(format, ExportFormat::ChakraEt).then(|| format!("attachment; filename=\"{prefix}.tar\""));
    let bytes = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, ApiError> {
        let s = crate::schedule::Schedule::from_json(&body).map_err(|e| ApiError::Internal(e.to_string()))?;
        let out = match format {
            ExportFormat::MscclXml => engine::export_msccl(&s, &opts).map(String::into_bytes),
            ExportFormat::MscclppJson => engine::export_mscclpp(&s, &plan_opts).map(String::into_bytes),
            ExportFormat::ChromeTrace => engine::export_trace(&s, engine::API_MAX_TRACE_SLICES).map(String::into_bytes),
            ExportFormat::TimelineSvg => engine::plot_timeline(&s).map(String::into_bytes),
            // The system configuration names the traces by the bare prefix: run ASTRA-sim in
            // the directory the archive is unpacked in.
            ExportFormat::ChakraEt => engine::export_chakra(&s, &prefix, None).map(|e| engine::chakra_tar(&e.files)),
        };
        out.map_err(|e| match e {
            // The prefix is the caller's; anything else about a stored schedule passed the
            // validator when it was stored.
            engine::Error::Input(e) if e.errors.iter().all(|f| f.path == "prefix") => ApiError::BadQuery(e.to_string()),
            engine::Error::Input(e) => ApiError::Internal(e.to_string()),
            e => ApiError::Unprocessable(InputError::new("format", e.to_string())),
        })
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    let mut response = ([(header::CONTENT_TYPE, media)], bytes).into_response();
    if let Some(d) = disposition.and_then(|d| header::HeaderValue::from_str(&d).ok()) {
        response.headers_mut().insert(header::CONTENT_DISPOSITION, d);
    }
    Ok(response)
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
