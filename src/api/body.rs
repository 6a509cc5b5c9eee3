//! Request and response bodies: a JSON body read within the size and time limits, parsed
//! strictly (broken JSON and a key given twice are 400s, the wrong shape a 422 naming the
//! field), and JSON responses.

use super::{ApiError, Shared};
use crate::strict::strict_value;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

/// Bodies parsed on the blocking pool rather than on an async thread.
const LARGE_BODY_BYTES: usize = 64 << 10;

/// Reads a JSON body within the size limit: 413 beyond it, 400 for broken JSON, 422 (with the
/// field's path) for JSON of the wrong shape.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned + Send + 'static> axum::extract::FromRequest<Shared> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Shared) -> Result<Self, ApiError> {
        let RawBody(bytes) = RawBody::from_request(req, st).await?;
        parse_body(st, bytes, parse_json).await.map(JsonBody)
    }
}

/// `parse(bytes)`, off the async threads for a large body (up to `--max-body-bytes`): they
/// must keep answering meanwhile.
pub async fn parse_body<T: Send + 'static>(
    st: &Shared,
    bytes: axum::body::Bytes,
    parse: impl FnOnce(&[u8]) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    if bytes.len() > LARGE_BODY_BYTES {
        let _permit = st.large_bodies.acquire().await.map_err(|e| ApiError::Internal(e.to_string()))?;
        return tokio::task::spawn_blocking(move || parse(&bytes))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
    }
    parse(&bytes)
}

/// A JSON request body of at most `max_body_bytes` (413 problem+json beyond), unparsed; any
/// other media type is a 415.
pub struct RawBody(pub axum::body::Bytes);

impl axum::extract::FromRequest<Shared> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Shared) -> Result<Self, ApiError> {
        // Only JSON: a form or text/plain POST is what a browser on another site can send
        // without asking (CORS preflights only the others).
        let media = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let essence = media.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        if essence != "application/json" && !(essence.starts_with("application/") && essence.ends_with("+json")) {
            return Err(ApiError::UnsupportedMediaType(media.to_string()));
        }
        // JSON is read as UTF-8 (ASCII is UTF-8): a body declared in another charset (UTF-16) was
        // read as UTF-8.
        let charset = media
            .split(';')
            .skip(1)
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("charset"));
        if let Some((_, cs)) = charset
            && !matches!(
                cs.trim().trim_matches('"').to_ascii_lowercase().as_str(),
                "utf-8" | "utf8" | "us-ascii" | "ascii"
            )
        {
            return Err(ApiError::UnsupportedMediaType(media.to_string()));
        }
        // No content coding is decoded: an encoded body is refused, not parsed as its bytes.
        if let Some(coding) = req.headers().get(header::CONTENT_ENCODING) {
            let coding = String::from_utf8_lossy(coding.as_bytes()).trim().to_ascii_lowercase();
            if !coding.is_empty() && coding != "identity" {
                return Err(ApiError::UnsupportedEncoding(coding.chars().take(100).collect()));
            }
        }
        let limit = st.config.max_body_bytes;
        // A declared length over the limit is refused from the head, before the body is read
        // (`Expect: 100-continue` was answered "100 Continue", then 413 after 16 MiB read).
        let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(ApiError::TooLarge(limit));
        }
        let ms = st.config.body_timeout_ms;
        let read = axum::body::to_bytes(req.into_body(), limit);
        match tokio::time::timeout(std::time::Duration::from_millis(ms.max(1)), read).await {
            Ok(Ok(body)) => Ok(RawBody(body)),
            // Over the limit is a 413; a body that broke off or whose chunked coding does not
            // parse is not HTTP/1.1 that parses (it was a 413 "exceeds 16777216 bytes" too).
            Ok(Err(e)) if over_limit(&e) => Err(ApiError::TooLarge(limit)),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "reading a request body failed");
                Err(ApiError::UnparsableRequest)
            }
            Err(_) => Err(ApiError::BodyTimeout(ms)),
        }
    }
}

/// Whether reading a body failed on the length limit (anywhere in the error's chain).
fn over_limit(e: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = c.source();
    }
    false
}

pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Syntax first: broken JSON is a 400, a well-formed document of the wrong shape a 422.
    let value = strict_value(bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    // Named as the CLI's reader names it: a missing field at its own path, a number's type in
    // words ("expected u64" was sent).
    serde_path_to_error::deserialize(value).map_err(|e| ApiError::Unprocessable(crate::error::InputError::from_json(e)))
}

/// A JSON response with a status.
pub fn json<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(b) => (status, [(header::CONTENT_TYPE, "application/json")], b).into_response(),
        Err(e) => ApiError::Internal(format!("serializing a response: {e}")).into_response(),
    }
}
