//! The API's one error type: every failure a client can see, mapped to an HTTP status and an
//! `application/problem+json` body (`type`, `title`, `status`, `detail`, `errors`). Internal
//! errors are logged with the request's id and never described to the client.

use crate::error::{FieldError, InputError};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON (syntax).
    #[error("malformed JSON: {0}")]
    MalformedJson(String),
    #[error("the request body exceeds {0} bytes")]
    TooLarge(usize),
    /// The body did not arrive within the limit (milliseconds).
    #[error("the request body did not arrive within {0} ms")]
    BodyTimeout(u64),
    #[error("no {0} with id {1:?}")]
    NotFound(&'static str, String),
    /// A path no route serves (the path, cut short).
    #[error(
        "no route serves the path {0:?} (the routes are in openapi.yaml; a trailing slash or another case is another path)"
    )]
    NoRoute(String),
    /// Parses, but cannot be served: wrong fields, unknown NPU, unsupported algorithm, …
    #[error("{0}")]
    Unprocessable(InputError),
    /// Still needed: (what, id, how many queued or running jobs use it).
    #[error("{0} {1:?} is used by {2} queued or running job(s); cancel them or wait for them to end")]
    InUse(&'static str, String, i64),
    /// A `Host` the server does not answer to (DNS rebinding): the host given.
    #[error("host {0:?} is not one this server answers to (--allowed-host)")]
    BadHost(String),
    /// More than one `Host` header (how many).
    #[error("the request has {0} Host headers; HTTP/1.1 allows exactly one")]
    HostHeaders(usize),
    #[error("this route needs `Authorization: Bearer TOKEN` with a token the server knows")]
    Unauthorized,
    /// More than one `Authorization` header: which client is asking is ambiguous (a proxy may
    /// have added one), so none is taken.
    #[error("the request has {0} Authorization headers; send one, `Authorization: Bearer TOKEN`")]
    AuthorizationHeaders(usize),
    /// The caller's request allowance is spent: seconds until the next request is allowed.
    #[error("too many requests from this client; retry in {} s (Retry-After)", (.0.ceil() as u64).max(1))]
    RateLimited(f64),
    /// The caller's queued and running jobs, and its limit.
    #[error("you have {0} queued or running jobs, the limit per client is {1}; wait for some to end")]
    ClientQuota(i64, i64),
    /// The declared solve time of the caller's queued and running jobs with the new ones, and
    /// its limit (seconds).
    #[error(
        "your queued and running jobs would declare {0:.0} s of solving (their time limits), the limit per client is {1:.0} s; wait for some to end"
    )]
    ClientSeconds(f64, f64),
    /// The caller's active interactive jobs, and the limit.
    #[error(
        "you have {0} queued or running interactive jobs, the limit per client is {1}; wait for one to end or send the request as normal"
    )]
    InteractiveQuota(i64, i64),
    /// The caller's stored topologies, and the limit.
    #[error("you hold {0} topologies, the limit per client is {1}; delete some (DELETE /v1/topologies/{{id}}) first")]
    TopologyQuota(i64, i64),
    #[error("the job queue is full ({0} queued)")]
    QueueFull(i64),
    /// A body that is not `application/json` (the media type given).
    #[error("the body must be application/json in UTF-8, not {0:?}")]
    UnsupportedMediaType(String),
    /// A body in a content coding the service does not decode (it was read as plain bytes:
    /// gzip's a 400 "invalid utf-8").
    #[error("the body must not be encoded (Content-Encoding: {0:?}): send it as plain application/json")]
    UnsupportedEncoding(String),
    #[error("this route does not take that method")]
    MethodNotAllowed,
    /// A request target longer than the limit (bytes).
    #[error("the request's URI exceeds {0} bytes")]
    UriTooLong(usize),
    /// Not HTTP/1.1 that parses (hyper refused it before any route saw it).
    #[error("the request is not valid HTTP/1.1 (its request line or a header does not parse)")]
    UnparsableRequest,
    /// A request head over hyper's read buffer.
    #[error("the request's head (request line and headers) is too large")]
    HeadTooLarge,
    /// A query string that does not parse (the reason).
    #[error("bad query string: {0}")]
    BadQuery(String),
    /// A query value that does not parse, or is out of range: the key and what is wrong.
    #[error("bad query string: {}: {}", .0.path, .0.message)]
    BadQueryKey(FieldError),
    #[error("the server is shutting down")]
    ShuttingDown,
    /// Shutting down while a client waited for a job that stays queued (its id).
    #[error(
        "the server is shutting down; job {0} stays queued and runs on another replica or after the restart: GET /v1/jobs/{0}"
    )]
    ShuttingDownWithJob(String),
    /// The database cannot be reached, or cannot take writes now (a full or read-only disk):
    /// the reason is logged, not sent.
    #[error("the database cannot be reached or cannot take writes now (its disk full or read-only); try again shortly")]
    DatabaseUnavailable(String),
    #[error("internal error")]
    Internal(String),
}

impl From<InputError> for ApiError {
    fn from(e: InputError) -> Self {
        ApiError::Unprocessable(e)
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        if e.is_unavailable() {
            ApiError::DatabaseUnavailable(e.to_string())
        } else {
            ApiError::Internal(e.to_string())
        }
    }
}

/// `Retry-After` of a 429 (and of a 503 while the database is unreachable), seconds.
pub const RETRY_AFTER_S: &str = "5";

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: String,
    errors: &'a [FieldError],
    /// The job a 503 at shutdown leaves queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    job_id: Option<&'a str>,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::MalformedJson(_) => StatusCode::BAD_REQUEST,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::NotFound(..) | ApiError::NoRoute(_) => StatusCode::NOT_FOUND,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::InUse(..) => StatusCode::CONFLICT,
            ApiError::BadHost(_) | ApiError::HostHeaders(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized | ApiError::AuthorizationHeaders(_) => StatusCode::UNAUTHORIZED,
            ApiError::ClientQuota(..)
            | ApiError::ClientSeconds(..)
            | ApiError::InteractiveQuota(..)
            | ApiError::TopologyQuota(..)
            | ApiError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::QueueFull(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::UnsupportedMediaType(_) | ApiError::UnsupportedEncoding(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UriTooLong(_) => StatusCode::URI_TOO_LONG,
            ApiError::UnparsableRequest => StatusCode::BAD_REQUEST,
            ApiError::HeadTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::BadQuery(_) | ApiError::BadQueryKey(_) => StatusCode::BAD_REQUEST,
            ApiError::ShuttingDown | ApiError::ShuttingDownWithJob(_) | ApiError::DatabaseUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            ApiError::MalformedJson(_) => "malformed-json",
            ApiError::TooLarge(_) => "body-too-large",
            ApiError::BodyTimeout(_) => "body-timeout",
            ApiError::NotFound(..) | ApiError::NoRoute(_) => "not-found",
            ApiError::Unprocessable(_) => "unprocessable",
            ApiError::InUse(..) => "in-use",
            ApiError::BadHost(_) | ApiError::HostHeaders(_) => "bad-host",
            ApiError::Unauthorized | ApiError::AuthorizationHeaders(_) => "unauthorized",
            ApiError::ClientQuota(..)
            | ApiError::ClientSeconds(..)
            | ApiError::InteractiveQuota(..)
            | ApiError::TopologyQuota(..) => "client-quota",
            ApiError::RateLimited(_) => "rate-limited",
            ApiError::QueueFull(_) => "queue-full",
            ApiError::UnsupportedMediaType(_) => "unsupported-media-type",
            ApiError::UnsupportedEncoding(_) => "unsupported-encoding",
            ApiError::MethodNotAllowed => "method-not-allowed",
            ApiError::UriTooLong(_) => "uri-too-long",
            ApiError::UnparsableRequest => "unparsable-request",
            ApiError::HeadTooLarge => "head-too-large",
            ApiError::BadQuery(_) | ApiError::BadQueryKey(_) => "bad-query",
            ApiError::ShuttingDown | ApiError::ShuttingDownWithJob(_) => "shutting-down",
            ApiError::DatabaseUnavailable(_) => "database-unavailable",
            ApiError::Internal(_) => "internal",
        }
    }
}

impl ApiError {
    /// The problem+json body.
    pub fn problem_json(&self) -> String {
        let status = self.status();
        let (detail, errors) = match self {
            ApiError::Internal(why) => {
                tracing::error!(error = %why, "internal error");
                ("the server failed to serve the request; it is logged".to_string(), Vec::new())
            }
            ApiError::DatabaseUnavailable(why) => {
                tracing::warn!(error = %why, "database unreachable");
                (self.to_string(), Vec::new())
            }
            ApiError::Unprocessable(e) => bounded_errors(&e.errors, e.omitted),
            ApiError::BadQueryKey(f) => {
                (clip(&self.to_string(), MAX_DETAIL_CHARS), bounded_errors(std::slice::from_ref(f), 0).1)
            }
            other => (clip(&other.to_string(), MAX_DETAIL_CHARS), Vec::new()),
        };
        let body = Problem {
            kind: format!("https://ccsynth.dev/problems/{}", self.slug()),
            title: status.canonical_reason().unwrap_or("error"),
            status: status.as_u16(),
            detail,
            errors: &errors,
            job_id: match self {
                ApiError::ShuttingDownWithJob(id) => Some(id),
                _ => None,
            },
        };
        serde_json::to_string(&body).unwrap_or_default()
    }
}

/// Field errors a problem lists; the rest are counted in `detail`.
pub const MAX_LISTED_ERRORS: usize = 20;
/// Characters of one field error's path or message (a message may echo the offending value).
pub const MAX_ERROR_CHARS: usize = 300;
/// Characters of `detail`.
pub const MAX_DETAIL_CHARS: usize = 2000;

/// The first `MAX_LISTED_ERRORS` field errors, each clipped, and a `detail` joining them that
/// says how many were left out: a request with a million bad fields gets a small answer.
fn bounded_errors(all: &[crate::error::FieldError], omitted: usize) -> (String, Vec<crate::error::FieldError>) {
    let listed: Vec<crate::error::FieldError> = all
        .iter()
        .take(MAX_LISTED_ERRORS)
        .map(|e| crate::error::FieldError {
            path: clip(&e.path, MAX_ERROR_CHARS),
            message: clip(&e.message, MAX_ERROR_CHARS),
        })
        .collect();
    let mut detail = listed.iter().map(|e| format!("{}: {}", e.path, e.message)).collect::<Vec<_>>().join("; ");
    let more = all.len() - listed.len() + omitted;
    if more > 0 {
        detail.push_str(&format!("; and {more} more errors (the first {} are listed)", listed.len()));
    }
    (clip(&detail, MAX_DETAIL_CHARS + 200), listed)
}

/// `s` cut to at most `max` characters, with "…" and the full length when cut.
fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((at, _)) => format!("{}… ({} characters)", &s[..at], s.chars().count()),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut resp = (status, self.problem_json()).into_response();
        resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        match self {
            // A full queue drains at the workers' pace: ask for a retry a few seconds on.
            ApiError::QueueFull(_)
            | ApiError::ClientQuota(..)
            | ApiError::ClientSeconds(..)
            | ApiError::InteractiveQuota(..)
            | ApiError::DatabaseUnavailable(_) => {
                resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_S));
            }
            ApiError::RateLimited(wait_s) => {
                let seconds = (wait_s.ceil() as u64).max(1).to_string();
                if let Ok(v) = HeaderValue::from_str(&seconds) {
                    resp.headers_mut().insert(header::RETRY_AFTER, v);
                }
            }
            ApiError::ShuttingDownWithJob(id) => {
                if let Ok(v) = HeaderValue::from_str(&format!("/v1/jobs/{id}")) {
                    resp.headers_mut().insert(header::LOCATION, v);
                }
            }
            ApiError::Unauthorized | ApiError::AuthorizationHeaders(_) => {
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"ccsynth\""));
            }
            _ => {}
        }
        resp
    }
}
