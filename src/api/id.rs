//! The `{id}` of a route's path, as an extractor whose refusals are problems: an id whose
//! percent-encoding is not UTF-8 could not be ours, so it is a 404 as any unknown id is (axum's
//! own rejection was a `text/plain` 400).

use super::ApiError;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

/// The route's `{id}`.
pub struct Id(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, st).await {
            Ok(Path(id)) => Ok(Id(id)),
            Err(e) => {
                tracing::debug!(error = %e, "a path's id does not decode");
                // `/v1/{things}/{id}...`: the thing named as the routes name it.
                let mut segments = parts.uri.path().split('/').skip(2);
                let what = match segments.next() {
                    Some("jobs") => "job",
                    Some("batches") => "batch",
                    Some("topologies") => "topology",
                    _ => "schedule",
                };
                let id = segments.next().unwrap_or("").chars().take(200).collect();
                Err(ApiError::NotFound(what, id))
            }
        }
    }
}
