//! Input structs read from JSON objects only: a derived `Deserialize` also takes a JSON array
//! as the struct's fields in declaration order (serde-rs/serde#1587), so `[1, 2]` read as a
//! topology of one NPU and two switches, and field order became an accidental contract.

use serde::de::{Deserializer, MapAccess, Visitor, value::MapAccessDeserializer};
use std::marker::PhantomData;

/// A struct whose derived deserializer is kept as an inherent function (`#[serde(remote =
/// "Self")]`), for `objects_only!` to call on a JSON object's entries.
pub trait Derived<'de>: Sized {
    const WHAT: &'static str;
    fn derived<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

/// Reads `T` from a map (a JSON object) and refuses any other value with serde's own "invalid
/// type: sequence, expected …" error, at the value's path.
pub fn from_object<'de, D: Deserializer<'de>, T: Derived<'de>>(d: D) -> Result<T, D::Error> {
    struct Object<T>(PhantomData<T>);
    impl<'de, T: Derived<'de>> Visitor<'de> for Object<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(T::WHAT)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::derived(MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_map(Object(PhantomData))
}

/// For a struct marked `#[serde(remote = "Self")]`: `Deserialize` from a JSON object only (the
/// description names it in errors), and with `serialize`, `Serialize` as derived.
macro_rules! objects_only {
    ($t:ty, $what:literal) => {
        impl<'de> $crate::strict::Derived<'de> for $t {
            const WHAT: &'static str = $what;
            fn derived<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$t>::deserialize(d)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::strict::from_object(d)
            }
        }
    };
    ($t:ty, $what:literal, serialize) => {
        $crate::strict::objects_only!($t, $what);
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                <$t>::serialize(self, s)
            }
        }
    };
}
pub(crate) use objects_only;

#[cfg(test)]
mod tests {
    use crate::schedule::Schedule;
    use crate::topology::Topology;

    #[test]
    fn an_array_is_not_read_as_a_struct_s_fields() {
        // Read as fields in order, `[1, 2]` was a topology of one NPU and two switches.
        let e = Topology::from_json("[1, 2]").unwrap_err();
        assert_eq!(
            (e.errors[0].path.as_str(), e.errors[0].message.as_str()),
            (".", "invalid type: sequence, expected a topology (an object)")
        );
        let e = Topology::from_json(r#"{"npus": 2, "links": [[0, 1, 500.0, 100.0, true]]}"#).unwrap_err();
        assert_eq!(e.errors[0].path, "links[0]");
        assert!(e.errors[0].message.contains("expected a link (an object)"), "{e}");
        // Nested documents: a schedule's transfer and a request's collective.
        let topo: Topology = crate::topology::parse_topology("ring:4").unwrap();
        let spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 4096);
        let c = crate::collective::Collective::build(&spec, &topo).unwrap();
        let mut s = Schedule::new(topo, &c, "test");
        s.transfers.push(crate::schedule::Transfer::copy(0, 0, 1, [0]));
        // A transfer is an object or a row of its own shape (`schedule::wire`), nothing else.
        let mut v = serde_json::to_value(s.written(crate::schedule::Form::Explicit)).unwrap();
        v["transfers"][0] = serde_json::json!([0, 0, 1, [0], "copy"]);
        assert_eq!(Schedule::from_json(&v.to_string()).unwrap().transfers, s.transfers);
        for (row, says) in [
            (serde_json::json!([0, 0, 1, [0]]), "invalid length 4, expected a transfer: an object, or a row"),
            (serde_json::json!([0, 0, 1, [0], "copy", [0, 1], 7]), "invalid length 7"),
            (serde_json::json!([0, 0, 1, [0], "send"]), "unknown variant `send`"),
            (serde_json::json!(["0", 0, 1, [0], "copy"]), "expected a non-negative integer"),
            (serde_json::json!(7), "expected a transfer: an object, or a row"),
        ] {
            v["transfers"][0] = row.clone();
            let e = Schedule::from_json(&v.to_string()).unwrap_err();
            assert!(e.errors[0].path.starts_with("transfers[0]"), "{row}: {e}");
            assert!(e.errors[0].message.contains(says), "{row}: {e}");
        }
        let mut w = serde_json::to_value(&s).unwrap();
        w["topology"] = serde_json::json!([4, 0, []]);
        let e = Schedule::from_json(&w.to_string()).unwrap_err();
        assert_eq!(e.errors[0].path, "topology");
        assert!(e.errors[0].message.contains("expected a topology (an object)"), "{e}");
        let r = serde_json::from_str::<Vec<crate::collective::CollectiveSpec>>(r#"[["all_gather", 4096]]"#);
        assert!(r.unwrap_err().to_string().contains("expected a collective (an object)"));
        let r = serde_json::from_value::<crate::engine::Options>(serde_json::json!([60.0]));
        assert!(r.unwrap_err().to_string().contains("expected request options (an object)"));
        // Objects read as before.
        let back = Schedule::from_json(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.transfers, s.transfers);
    }
}
