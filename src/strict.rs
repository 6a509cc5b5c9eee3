//! JSON read strictly: input structs from objects only (a derived `Deserialize` also takes a
//! JSON array as the struct's fields in declaration order, serde-rs/serde#1587, so `[1, 2]`
//! read as a topology of one NPU and two switches, and field order became an accidental
//! contract), and documents whose objects give no key twice (`strict_value`, what the API and
//! the CLI's topology files are read with).

use serde::de::{
    DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor, value::MapAccessDeserializer,
};
use serde_json::Value;
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

/// A JSON document as a `Value`, refusing an object that gives a key twice: `serde_json` would
/// keep the last, so `{"algorithm":"ring","algorithm":"ilp"}` would mean what a proxy or a
/// log that reads the first does not.
pub fn strict_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
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

#[cfg(test)]
mod strict_value_tests {
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
