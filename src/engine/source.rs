//! Where a request's topology comes from, as every door names it: a generator spec or a
//! topology document. One type and one builder, so the CLI (`--topology SPEC|FILE`) and the
//! API (`spec`, `topology`) build topologies within the same limits and refuse them in the
//! same words. A stored topology (the API's `topology_id`) is the service's, not the engine's.

use super::Limits;
use crate::error::InputError;
use crate::topology::Topology;

/// A topology as a caller gives it.
#[derive(Clone, Debug, PartialEq)]
pub enum TopologySource {
    /// A generator spec such as `torus:8x8@bw=50`; its errors name `spec`.
    Spec(String),
    /// A topology document (its JSON), or `{"spec": "..."}` standing for a spec; its errors
    /// name paths under `topology`.
    Document(serde_json::Value),
}

impl TopologySource {
    /// What a text holds: JSON (it starts with `{` or `[`, after a byte-order mark) is a
    /// document, anything else a spec. The
    /// CLI reads `--topology` (a file's text, or the argument itself) this way.
    pub fn parse(text: &str) -> Result<TopologySource, InputError> {
        let t = text.trim_start_matches('\u{feff}').trim_start();
        if !t.starts_with(['{', '[']) {
            return Ok(TopologySource::Spec(t.trim_end().to_string()));
        }
        // A key given twice is refused, as the API refuses it (`"npus": 2, …, "npus": 3` read
        // as three NPUs).
        crate::strict::strict_value(t.as_bytes())
            .map(TopologySource::Document)
            .map_err(|e| InputError::new("topology", e.to_string()))
    }

    /// The topology; a spec naming more than `limits` allow (`max_npus`, `max_links`) is
    /// refused before anything is built. A spec's errors name `spec`; a document's name paths
    /// within it (`links[3].src`), which a door prefixes with where the document sits.
    pub fn build(&self, limits: &Limits) -> Result<Topology, InputError> {
        match self {
            TopologySource::Spec(spec) => super::topology_from_spec(spec, limits),
            TopologySource::Document(v) => match v.get("spec") {
                Some(spec) => {
                    // `{"spec": ...}` stands for the spec alone: another field is a mistake, as
                    // it is in any other object (`{"spec": "ring:4", "npus": 8}` was ring:4).
                    if let Some(other) = v.as_object().and_then(|o| o.keys().find(|k| *k != "spec")) {
                        let shown: String = other.chars().take(100).collect();
                        return Err(InputError::new(
                            shown.clone(),
                            format!("unknown field `{shown}`: a document with `spec` has no other field"),
                        ));
                    }
                    let spec = spec.as_str().ok_or_else(|| InputError::new("spec", "expected a string"))?;
                    super::topology_from_spec(spec, limits)
                }
                None => Topology::from_json(&v.to_string()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Text is a spec unless it is JSON; a spec over the limits is refused before it is built,
    /// naming `spec`; a document's errors name paths within it, `{"spec": ..}` stands for the
    /// spec, and both sources of one fabric build the same topology.
    #[test]
    fn every_door_reads_a_topology_alike() {
        let limits = Limits::default();
        assert_eq!(TopologySource::parse(" torus:4x4 \n").unwrap(), TopologySource::Spec("torus:4x4".into()));
        let doc = TopologySource::parse(r#"{"spec": "torus:4x4"}"#).unwrap();
        assert_eq!(doc, TopologySource::Document(json!({"spec": "torus:4x4"})));
        let by_spec = TopologySource::Spec("torus:4x4".into()).build(&limits).unwrap();
        assert_eq!(doc.build(&limits).unwrap(), by_spec);
        let canonical: serde_json::Value = serde_json::from_str(&by_spec.to_json_pretty()).unwrap();
        assert_eq!(TopologySource::Document(canonical).build(&limits).unwrap(), by_spec);

        let small = Limits { max_npus: 8, ..Limits::default() };
        let e = TopologySource::Spec("torus:64x64".into()).build(&small).unwrap_err();
        assert_eq!(e.errors[0].path, "spec", "{e}");
        assert!(e.to_string().contains('8'), "{e}");
        let e = TopologySource::Document(json!({"spec": 3})).build(&limits).unwrap_err();
        assert_eq!((e.errors[0].path.as_str(), e.errors[0].message.as_str()), ("spec", "expected a string"));
        let e =
            TopologySource::Document(json!({"npus": 2, "links": [{"src": 0, "dst": 5}]})).build(&limits).unwrap_err();
        assert!(e.errors[0].path.starts_with("links[0]"), "{e}");
        assert!(TopologySource::parse("{not json").unwrap_err().errors[0].path == "topology");
        // A byte-order mark before the JSON, and JSON that is no document, are read as JSON.
        assert_eq!(
            TopologySource::parse("\u{feff}{\"spec\": \"ring:4\"}").unwrap(),
            TopologySource::Document(json!({"spec": "ring:4"}))
        );
        let e = TopologySource::parse(r#"["torus"]"#).unwrap().build(&limits).unwrap_err();
        assert_ne!(e.errors[0].path, "spec", "{e}");
        // `{"spec": ...}` with another field names it.
        let e = TopologySource::parse(r#"{"spec": "ring:4", "npus": 8}"#).unwrap().build(&limits).unwrap_err();
        assert!(e.errors[0].path == "npus" && e.to_string().contains("unknown field `npus`"), "{e}");
        // A key given twice is refused (serde_json keeps the last), at any depth.
        for text in [
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1}], "npus": 3}"#,
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "dst": 0}]}"#,
        ] {
            let e = TopologySource::parse(text).unwrap_err();
            assert!(e.errors[0].path == "topology" && e.to_string().contains("is given twice"), "{e}");
        }
    }
}
