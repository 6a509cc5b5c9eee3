//! The query strings of the API's routes: parsed so that a value that does not parse is a 400
//! whose `errors[]` names the key, with the value given and what the key takes (axum's
//! `Query` said "invalid digit found in string" and named nothing a client could read).

use super::error::ApiError;
use crate::error::FieldError;
use serde::de::DeserializeOwned;

/// Longest part of a bad value echoed in the problem.
const MAX_ECHO_CHARS: usize = 64;

/// Parses a route's query string (`None`, or empty: every key absent) into `T`.
pub(super) fn parse<T: DeserializeOwned>(query: Option<&str>) -> Result<T, ApiError> {
    let query = query.unwrap_or("");
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.inner().to_string();
        // A missing key has the document's path; its name is in serde's message.
        if let Some(missing) = inner.strip_prefix("missing field `").and_then(|r| r.strip_suffix('`')) {
            return ApiError::BadQueryKey(FieldError { path: missing.to_string(), message: "required".to_string() });
        }
        // So has a key given twice (it was named at path ".").
        if let Some(twice) = inner.strip_prefix("duplicate field `").and_then(|r| r.strip_suffix('`')) {
            let message = "given twice: give it once".to_string();
            return ApiError::BadQueryKey(FieldError { path: twice.to_string(), message });
        }
        let key = e.path().to_string();
        let value = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| *k == key).map(|(_, v)| v.into_owned());
        ApiError::BadQueryKey(FieldError { message: what_is_wrong(&inner, value.as_deref()), path: key })
    })
}

/// A parse error of one value, said in the API's words: the value given, then what was
/// expected.
fn what_is_wrong(inner: &str, value: Option<&str>) -> String {
    let Some(value) = value else { return inner.to_string() };
    let shown: String = value.chars().take(MAX_ECHO_CHARS).collect();
    let shown = if shown.len() < value.len() { format!("{shown:?}…") } else { format!("{shown:?}") };
    let expected = if inner.contains("invalid digit") || inner.contains("empty string") {
        if value.starts_with('-') { "expected a non-negative whole number" } else { "expected a whole number" }
    } else if inner.contains("too large") || inner.contains("too small") {
        "a whole number out of the range this key takes"
    } else if inner.contains("`true` or `false`") {
        "expected true or false"
    } else {
        inner
    };
    format!("{shown}: {expected}")
}

#[cfg(test)]
mod tests {
    use super::parse;
    use crate::api::ApiError;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Needs {
        #[allow(dead_code)]
        format: String,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Q {
        rank: Option<u32>,
        offset: Option<i64>,
        flag: Option<bool>,
    }

    fn refusal(q: &str) -> (String, String) {
        match parse::<Q>(Some(q)) {
            Err(ApiError::BadQueryKey(f)) => (f.path, f.message),
            other => panic!("{q}: {other:?}"),
        }
    }

    #[test]
    fn a_bad_value_is_named_with_its_key_and_what_the_key_takes() {
        assert_eq!(parse::<Q>(None).unwrap(), Q { rank: None, offset: None, flag: None });
        assert_eq!(
            parse::<Q>(Some("rank=3&offset=-2&flag=true")).unwrap(),
            Q { rank: Some(3), offset: Some(-2), flag: Some(true) }
        );
        assert_eq!(refusal("rank=-1"), ("rank".into(), "\"-1\": expected a non-negative whole number".into()));
        assert_eq!(refusal("flag=true&rank=abc"), ("rank".into(), "\"abc\": expected a whole number".into()));
        assert_eq!(refusal("rank="), ("rank".into(), "\"\": expected a whole number".into()));
        assert_eq!(
            refusal("rank=4294967296"),
            ("rank".into(), "\"4294967296\": a whole number out of the range this key takes".into())
        );
        assert_eq!(refusal("flag=yes"), ("flag".into(), "\"yes\": expected true or false".into()));
        assert_eq!(refusal("rank=1&rank=2"), ("rank".into(), "given twice: give it once".into()));
        match parse::<Needs>(Some("")) {
            Err(ApiError::BadQueryKey(f)) => assert_eq!((f.path.as_str(), f.message.as_str()), ("format", "required")),
            other => panic!("{other:?}"),
        }
        // A long value is echoed cut short.
        let (_, m) = refusal(&format!("rank={}", "9".repeat(500)));
        assert!(m.len() < 120 && m.contains("…"), "{m}");
    }
}
