//! Request and response bodies: a JSON body read within the size and time limits, parsed
//! strictly (broken JSON and a key given twice are 400s, the wrong shape a 422 naming the
//! field), and JSON responses.

use super::{ApiError, Shared};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Bodies parsed on the blocking pool rather than on an async thread.
const LARGE_BODY_BYTES: usize = 64 << 10;

/// Reads a JSON body within the size limit: 413 beyond it, 400 for broken JSON, 422 (with the
/// field's path) for JSON of the wrong shape.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned + Send + 'static> axum::extract::FromRequest<Shared> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Shared) -> Result<Self, ApiError> {
        let RawBody(bytes) = RawBody::from_request(req, st).await?;
        // A large body (up to `--max-body-bytes`) is parsed off the async threads, which must
        // keep answering meanwhile.
        if bytes.len() > LARGE_BODY_BYTES {
            let _permit = st.large_bodies.acquire().await.map_err(|e| ApiError::Internal(e.to_string()))?;
            return tokio::task::spawn_blocking(move || parse_json(&bytes))
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?
                .map(JsonBody);
        }
        parse_json(&bytes).map(JsonBody)
    }
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
        let limit = st.config.max_body_bytes;
        let ms = st.config.body_timeout_ms;
        let read = axum::body::to_bytes(req.into_body(), limit);
        match tokio::time::timeout(std::time::Duration::from_millis(ms.max(1)), read).await {
            Ok(body) => body.map(RawBody).map_err(|_| ApiError::TooLarge(limit)),
            Err(_) => Err(ApiError::BodyTimeout(ms)),
        }
    }
}

pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Syntax first: broken JSON is a 400, a well-formed document of the wrong shape a 422.
    let value = strict_value(bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ApiError::Unprocessable(crate::error::InputError::new(path, e.into_inner().to_string()))
    })
}

/// A JSON response with a status.
pub fn json<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(b) => (status, [(header::CONTENT_TYPE, "application/json")], b).into_response(),
        Err(e) => ApiError::Internal(format!("serializing a response: {e}")).into_response(),
    }
}

/// A JSON document as a `Value`, refusing an object that gives a key twice: `serde_json` would
/// keep the last, so `{"algorithm":"ring","algorithm":"ilp"}` would mean what a proxy or a
/// log that reads the first does not.
pub(super) fn strict_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = Strict.deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Builds a `Value` as `serde_json` does, but fails at a duplicate key.
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                let shown: String = key.chars().take(100).collect();
                return Err(A::Error::custom(format!("the key {shown:?} is given twice in one object")));
            }
            let value = map.next_value_seed(Strict)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::strict_value;

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth() {
        assert!(strict_value(br#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#).is_ok());
        let e = strict_value(br#"{"algorithm": "ring", "algorithm": "ilp"}"#).unwrap_err().to_string();
        assert!(e.contains("\"algorithm\" is given twice"), "{e}");
        assert!(strict_value(br#"{"o": {"x": [ {"k": 1, "k": 1} ]}}"#).is_err());
        // The same key in two objects is fine.
        assert!(strict_value(br#"[{"k": 1}, {"k": 2}]"#).is_ok());
    }

    #[test]
    fn values_parse_as_serde_json_parses_them() {
        let text =
            br#"{"n": -3, "u": 18446744073709551615, "f": 1.5e-300, "s": "\u00e9", "z": null, "t": [true, false]}"#;
        assert_eq!(strict_value(text).unwrap(), serde_json::from_slice::<serde_json::Value>(text).unwrap());
        assert!(strict_value(b"{} x").is_err(), "trailing characters");
    }
}
