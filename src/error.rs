//! Input errors that name the offending field (a JSON path) and what was expected.

use serde::Serialize;
use std::fmt;

/// One problem with one field of an input document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// JSON path of the field, e.g. `links[3].dst`; `.` for the document itself.
    pub path: String,
    /// What is wrong and what was expected.
    pub message: String,
}

/// A rejected input: one or more field errors. Never a panic, never a silent fix-up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    pub errors: Vec<FieldError>,
    /// Errors found beyond those listed (see `MAX_FIELD_ERRORS`).
    pub omitted: usize,
}

impl InputError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        InputError { errors: vec![FieldError { path: path.into(), message: message.into() }], omitted: 0 }
    }

    /// Prefixes every path with `prefix` (for documents nested in other documents).
    pub fn within(mut self, prefix: &str) -> Self {
        for e in &mut self.errors {
            e.path = join_path(prefix, &e.path);
        }
        self
    }

    /// Renames the field `from` (and what lies under it: `from[2]`, `from.x`) to `to`, for a
    /// document whose fields a door names otherwise (the API's `failed_links` are a
    /// `Failures`' `links`).
    pub fn renamed(mut self, from: &str, to: &str) -> Self {
        for e in &mut self.errors {
            if let Some(rest) = e.path.strip_prefix(from)
                && (rest.is_empty() || rest.starts_with(['[', '.']))
            {
                e.path = format!("{to}{rest}");
            }
        }
        self
    }

    /// Turns a serde_path_to_error failure into a field error.
    pub fn from_json(err: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let mut path = err.path().to_string();
        let inner = err.into_inner();
        let message = integer_out_of_range(&strip_position(&inner.to_string()));
        // A missing field is reported at the object holding it: named at its own path
        // (`collective.kind`, not `collective`).
        if let Some(missing) = message.strip_prefix("missing field `").and_then(|r| r.strip_suffix('`')) {
            path = if path.is_empty() || path == "." { missing.to_string() } else { format!("{path}.{missing}") };
        }
        let message = if inner.is_syntax() || inner.is_eof() {
            format!("malformed JSON: {message} (line {}, column {})", inner.line(), inner.column())
        } else {
            message
        };
        InputError::new(path, message)
    }

    /// What follows a document read with `serde_path_to_error` straight from `de`: anything but
    /// whitespace is malformed JSON (`serde_json::from_str` checks this; a deserializer used
    /// directly does not, so `{...} garbage` and two schedules in one file read as the first).
    pub fn json_end(de: &mut serde_json::Deserializer<serde_json::de::StrRead<'_>>) -> Result<(), InputError> {
        de.end().map_err(|e| {
            let message = strip_position(&e.to_string());
            InputError::new("", format!("malformed JSON: {message} (line {}, column {})", e.line(), e.column()))
        })
    }

    /// `from_json` for a document parsed straight from `text`. `serde_json` reports a value of
    /// the wrong type where it expects an enum's name (`"kind": 1`, `"op": null`) as a syntax
    /// error ("expected value"), which read as "malformed JSON" on a well-formed file: where
    /// `text` is well-formed JSON, the value found there is named instead. (Documents read
    /// through a `Value`, as the API's are, get serde's own "invalid type" message.)
    pub fn from_json_text(err: serde_path_to_error::Error<serde_json::Error>, text: &str) -> Self {
        let inner = err.inner();
        let said = inner.to_string();
        let misread = |words: &str| {
            inner.is_syntax() && said.starts_with(words) && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
        };
        // An array longer than a fixed-length field (`[0, 0, 0]` for a pair) is reported
        // where its extra element starts, as "trailing characters".
        if misread("trailing characters") {
            let why = "invalid length: an array of more elements than expected".to_string();
            return InputError::new(err.path().to_string(), why);
        }
        if !misread("expected value") {
            return InputError::from_json(err);
        }
        let found = value_at(text, inner.line(), inner.column()).map_or(String::new(), |v| format!(": {v}"));
        InputError::new(err.path().to_string(), format!("invalid type{found}, expected a name (a string)"))
    }
}

/// The JSON value that starts at `line` and `column` (1-based, as `serde_json` counts) of
/// `text`, described as serde describes an unexpected value (`integer `1``, `null`, `map`).
/// An object is reported past its `{`, where a name was looked for as its only key.
fn value_at(text: &str, line: usize, column: usize) -> Option<String> {
    let start: usize = text.split_inclusive('\n').take(line.checked_sub(1)?).map(str::len).sum();
    let at = start + column.checked_sub(1)?;
    if text.get(..at)?.trim_end().ends_with('{') {
        return Some("map".to_string());
    }
    let v = serde_json::Deserializer::from_str(text.get(at..)?).into_iter::<serde_json::Value>().next()?.ok()?;
    Some(match v {
        serde_json::Value::Null => "null".to_string(),
        serde_json::Value::Bool(b) => format!("boolean `{b}`"),
        serde_json::Value::Number(n) if n.is_f64() => format!("floating point `{n}`"),
        serde_json::Value::Number(n) => format!("integer `{n}`"),
        serde_json::Value::String(_) => return None,
        serde_json::Value::Array(_) => "sequence".to_string(),
        serde_json::Value::Object(_) => "map".to_string(),
    })
}

/// serde's words for an integer that does not fit its field ("invalid value: integer `-1`,
/// expected u32"), said as what is wrong: a negative value, or the largest the field takes.
fn integer_out_of_range(message: &str) -> String {
    const TYPES: [(&str, u64); 5] = [
        ("u8", u8::MAX as u64),
        ("u16", u16::MAX as u64),
        ("u32", u32::MAX as u64),
        ("u64", u64::MAX),
        ("usize", usize::MAX as u64),
    ];
    for (name, max) in TYPES {
        let Some(head) = message.strip_suffix(&format!(", expected {name}")) else { continue };
        if let Some(n) = head.strip_prefix("invalid value: integer `").and_then(|r| r.strip_suffix('`')) {
            return if n.starts_with('-') {
                format!("{n} is negative: expected a non-negative integer")
            } else {
                format!("{n} is too large: at most {max}")
            };
        }
        // A whole number past 2^64 is read as a float (`"dst": 18446744073709551616`):
        // too large, not of the wrong type.
        if let Some(x) = head.strip_prefix("invalid type: floating point `").and_then(|r| r.strip_suffix('`'))
            && x.parse::<f64>().is_ok_and(|x| x >= 18446744073709551615.0)
        {
            return format!("{x} is too large: at most {max}");
        }
        return format!("{head}, expected a non-negative integer");
    }
    // The other number types by what they take, not by Rust's name.
    for (name, words) in [("i64", "an integer"), ("i32", "an integer"), ("f64", "a number"), ("f32", "a number")] {
        if let Some(head) = message.strip_suffix(&format!(", expected {name}")) {
            return format!("{head}, expected {words}");
        }
    }
    message.to_string()
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// The ids 0 to n − 1 as error messages write a range, inclusive (`0..=15`), so "16 is not an
/// NPU: expected 0..=15" cannot be read as allowing 16.
pub(crate) fn ids(n: usize) -> String {
    match n.checked_sub(1) {
        Some(last) => format!("0..={last}"),
        None => "none (there are 0)".to_string(),
    }
}

pub(crate) fn join_path(prefix: &str, path: &str) -> String {
    if path.is_empty() || path == "." {
        prefix.to_string()
    } else if path.starts_with('[') {
        format!("{prefix}{path}")
    } else {
        format!("{prefix}.{path}")
    }
}

/// Field errors an `InputError` shows (the CLI prints them; the API lists as many): the rest
/// are counted, so a file with a million bad fields gets a few lines.
pub const SHOWN_FIELD_ERRORS: usize = 20;
/// Characters of a shown path or message (a message may echo the offending value).
pub const SHOWN_ERROR_CHARS: usize = 300;

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clip = |s: &str| match s.char_indices().nth(SHOWN_ERROR_CHARS) {
            None => s.to_string(),
            Some((at, _)) => format!("{}… ({} characters)", &s[..at], s.chars().count()),
        };
        for (i, e) in self.errors.iter().take(SHOWN_FIELD_ERRORS).enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            // A document's own fault (text after it, a read that failed) has no field to name.
            match e.path.is_empty() {
                true => write!(f, "{}", clip(&e.message))?,
                false => write!(f, "{}: {}", clip(&e.path), clip(&e.message))?,
            }
        }
        let more = self.errors.len().saturating_sub(SHOWN_FIELD_ERRORS) + self.omitted;
        if more > 0 {
            write!(f, "; and {more} more errors")?;
        }
        Ok(())
    }
}

/// Field errors one pass keeps; beyond them it only counts (`InputError::omitted`), so an input
/// with a million bad fields costs a bounded amount of memory to refuse.
pub const MAX_FIELD_ERRORS: usize = 1000;

/// Accumulates field errors so one pass reports all of them (the first `MAX_FIELD_ERRORS`,
/// and how many more).
#[derive(Default)]
pub(crate) struct Errors {
    list: Vec<FieldError>,
    total: usize,
}

impl Errors {
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.total += 1;
        if self.list.len() < MAX_FIELD_ERRORS {
            self.list.push(FieldError { path: path.into(), message: message.into() });
        }
    }
    pub fn into_result<T>(self, ok: T) -> Result<T, InputError> {
        if self.total == 0 {
            Ok(ok)
        } else {
            let omitted = self.total - self.list.len();
            Err(InputError { errors: self.list, omitted })
        }
    }
    /// Every error of `e`, counted as `e` counted them (its omitted ones too).
    pub fn push_all(&mut self, e: InputError) {
        self.total += e.omitted;
        for f in e.errors {
            self.push(f.path, f.message);
        }
    }
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
    /// Errors pushed so far, listed or not.
    pub fn len(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::InputError;

    /// An integer that does not fit its field says which way it misses, and the largest the
    /// field takes (it said "expected a non-negative integer" of 2^32 in a u32).
    #[test]
    fn an_integer_out_of_range_says_the_range() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Doc {
            step: u32,
            count: Option<u64>,
        }
        let said = |text: &str| {
            let de = &mut serde_json::Deserializer::from_str(text);
            let e = serde_path_to_error::deserialize::<_, Doc>(de).unwrap_err();
            let e = InputError::from_json(e);
            (e.errors[0].path.clone(), e.errors[0].message.clone())
        };
        assert_eq!(
            said(r#"{"step": 4294967296}"#),
            ("step".into(), "4294967296 is too large: at most 4294967295".into())
        );
        assert_eq!(said(r#"{"step": -1}"#), ("step".into(), "-1 is negative: expected a non-negative integer".into()));
        assert_eq!(said(r#"{"step": 1, "count": -3}"#).1, "-3 is negative: expected a non-negative integer");
        assert_eq!(said(r#"{"step": "0"}"#).1, "invalid type: string \"0\", expected a non-negative integer");
        assert_eq!(said(r#"{"step": 1.5}"#).1, "invalid type: floating point `1.5`, expected a non-negative integer");
        // Past 2^64 serde reads a float: too large, as 2^64 − 1 + 1 in a u64 is.
        let past = "18446744073709551616";
        let huge = said(&format!(r#"{{"step": 1, "count": {past}}}"#)).1;
        assert_eq!(huge, "1.8446744073709552e+19 is too large: at most 18446744073709551615");
        assert_eq!(said(r#"{"step": 1e30}"#).1, "1e+30 is too large: at most 4294967295");
    }

    fn parse(text: &str) -> InputError {
        let de = &mut serde_json::Deserializer::from_str(text);
        let e = serde_path_to_error::deserialize::<_, Vec<crate::collective::CollectiveSpec>>(de).unwrap_err();
        InputError::from_json_text(e, text)
    }

    #[test]
    fn a_name_of_the_wrong_type_is_named_not_called_malformed() {
        for (value, found) in [
            ("1", "integer `1`"),
            ("-1.5", "floating point `-1.5`"),
            ("null", "null"),
            ("true", "boolean `true`"),
            ("[0]", "sequence"),
        ] {
            let text = format!(
                "[{{\"kind\": \"all_gather\", \"size_bytes\": 4096}},\n {{\"size_bytes\": 1, \"kind\": {value}}}]"
            );
            let e = parse(&text);
            assert_eq!(e.errors[0].path, "[1].kind", "{value}");
            assert_eq!(e.errors[0].message, format!("invalid type: {found}, expected a name (a string)"), "{value}");
        }
        // A map where a name belongs: the type, without a value to show.
        let e = parse(r#"[{"kind": {}, "size_bytes": 1}]"#);
        assert_eq!(e.errors[0].message, "invalid type: map, expected a name (a string)");
    }

    #[test]
    fn id_ranges_are_written_inclusive() {
        assert_eq!(
            (super::ids(16), super::ids(1), super::ids(0)),
            ("0..=15".into(), "0..=0".into(), "none (there are 0)".into())
        );
        let topo = crate::topology::parse_topology("ring:4").unwrap();
        let mut spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 4096);
        spec.group = Some(vec![0, 4]);
        let e = crate::collective::Collective::build(&spec, &topo).unwrap_err().to_string();
        assert!(e.contains("4 is not an NPU: expected 0..=3"), "{e}");
    }

    #[test]
    fn malformed_json_is_still_called_malformed() {
        let e = parse(r#"[{"kind": , "size_bytes": 1}]"#);
        assert!(e.errors[0].message.starts_with("malformed JSON: expected value (line 1, column 11)"), "{e}");
        let e = parse(r#"[{"kind": "all_gather", "size_bytes": 1}"#);
        assert!(e.errors[0].message.starts_with("malformed JSON: EOF"), "{e}");
    }
}
