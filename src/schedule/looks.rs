//! What a document given where a schedule or a topology goes looks like, named for the
//! message at both doors (a comparison sent to `POST /v1/validate` read "collective: invalid
//! type"): the outputs of other commands that people pass in their place.

/// What a document given where a topology goes looks like, for the message (a schedule read
/// "algorithm: unknown field"): a schedule's `topology` is one, which `ccsynth topology` can
/// write out.
pub fn not_a_topology(text: &str) -> Option<String> {
    match looks_like(text)? {
        // A topology with a field wrong, or a `{"spec": …}` document: the parser's error
        // names it (a missing `links` read "JSON without a format field").
        "a topology" | "JSON without a \"format\" field" => None,
        "empty" => Some("empty: expected a topology (\"npus\" and \"links\")".into()),
        "a schedule" => Some(
            "this is a schedule, not a topology: a topology has \"npus\" and \"links\" (the schedule's own is its \"topology\" field)".into(),
        ),
        looks => Some(format!("this is {looks}, not a topology: a topology has \"npus\" and \"links\"")),
    }
}

/// What a document that is not a schedule looks like, for the message: the outputs of other
/// commands that people pass where a schedule goes.
pub fn not_a_schedule(text: &str) -> Option<String> {
    let looks = looks_like(text).filter(|l| *l != "a schedule")?;
    if looks == "empty" {
        return Some(format!("empty: expected a schedule (\"format\": \"{}\")", super::FORMAT_V1));
    }
    Some(format!(
        "this is {looks}, not a schedule: a schedule has \"format\": \"{}\" (what `synth`, `baseline` and `regenerate` write)",
        super::FORMAT_V1
    ))
}

/// What a document looks like, by the fields of each command's output (an export, a trace, a
/// comparison, a benchmark, an API answer), where it is JSON or XML.
fn looks_like(text: &str) -> Option<&'static str> {
    if text.trim().is_empty() {
        // "malformed JSON: EOF while parsing a value (line 1, column 0)" said it at path ".".
        return Some("empty");
    }
    if text.trim_start().starts_with("<svg") {
        return Some("an SVG picture (`plot timeline`)");
    }
    if text.trim_start().starts_with('<') {
        // An export's MSCCL XML read "malformed JSON: expected value".
        return Some("XML (an MSCCL algorithm file, `export --format msccl-xml`?)");
    }
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let has = |k: &str| v.get(k).is_some();
    Some(if has("format") && v["format"].as_str() == Some(super::FORMAT_V1) {
        "a schedule"
    } else if has("rows") && has("refused") {
        "a comparison (`compare --json`)"
    } else if has("rows") || v.as_array().is_some_and(|a| a.first().is_some_and(|r| r.is_object())) {
        "benchmark output (`bench --json`)"
    } else if v.is_array() {
        // `[1, 2]` or `[]` is no command's output (it read "benchmark output").
        "a JSON array"
    } else if has("npus") && has("links") {
        "a topology"
    } else if has("gpus") && has("num_threads_per_block") {
        "an MSCCL++ execution plan (`export --format mscclpp-json`)"
    } else if has("traceEvents") {
        "a Chrome trace (`simulate --trace`)"
    } else if has("schedule_id") {
        "a job or a summary from the HTTP API (GET /v1/schedules/ID gives the schedule)"
    } else if !has("format") {
        "JSON without a \"format\" field"
    } else {
        return None;
    })
}
