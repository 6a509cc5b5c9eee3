//! Chunk lists as the schedule's JSON writes and reads them: a compact list's items (ids and
//! ranges `[start, count, stride]` where those are shorter), their lengths counted without
//! writing, and the reader that takes ids, array ranges and range objects mixed, checking each
//! range before it is expanded.

use super::Form;
use crate::limits;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// One entry of a chunk list as written: a chunk id, or a run of `count` chunks from `start`,
/// `stride` apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    One(u32),
    Run { start: u32, count: u32, stride: u32 },
}

/// JSON characters of a decimal u32.
pub(in crate::schedule) fn digits(x: u32) -> u64 {
    x.checked_ilog10().map_or(1, |d| d as u64 + 1)
}

impl Item {
    /// Characters of the item's JSON.
    fn json_len(self) -> u64 {
        match self {
            Item::One(c) => digits(c),
            // [S,N] and ,D unless 1.
            Item::Run { start, count, stride } => {
                3 + digits(start) + digits(count) + if stride == 1 { 0 } else { 1 + digits(stride) }
            }
        }
    }
}

/// `list` as `Form::Compact` writes it: left to right, the longest evenly increasing run from
/// each position becomes one range where the range's JSON is shorter than its numbers', else
/// the position's chunk stands alone. Deterministic, one pass.
pub fn items(list: &[u32]) -> impl Iterator<Item = Item> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let &start = list.get(i)?;
        let stride = match list.get(i + 1) {
            Some(&b) if b > start => b - start,
            _ => {
                i += 1;
                return Some(Item::One(start));
            }
        };
        let mut n = 2;
        while list.get(i + n).is_some_and(|&c| list[i + n - 1].checked_add(stride) == Some(c)) {
            n += 1;
        }
        let run = Item::Run { start, count: n as u32, stride };
        // As numbers: each id and the comma after all but the last.
        let plain: u64 = list[i..i + n].iter().map(|&c| digits(c)).sum::<u64>() + n as u64 - 1;
        if run.json_len() < plain {
            i += n;
            Some(run)
        } else {
            i += 1;
            Some(Item::One(start))
        }
    })
}

/// Characters of `list`'s JSON array in `form`.
pub(in crate::schedule) fn list_json_len(list: &[u32], form: Form) -> u64 {
    let (n, sum) = match form {
        Form::Explicit => (list.len() as u64, list.iter().map(|&c| digits(c)).sum()),
        Form::Compact => items(list).fold((0u64, 0u64), |(n, s), it| (n + 1, s + it.json_len())),
    };
    2 + n.saturating_sub(1) + sum
}

/// Writes `list` as a JSON array in `form`.
pub(in crate::schedule) fn write_list<S: Serializer>(list: &[u32], form: Form, s: S) -> Result<S::Ok, S::Error> {
    if form == Form::Explicit {
        return list.serialize(s);
    }
    let mut seq = s.serialize_seq(None)?;
    for it in items(list) {
        seq.serialize_element(&it)?;
    }
    seq.end()
}

impl Serialize for Item {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Item::One(c) => s.serialize_u32(c),
            Item::Run { start, count, stride } => {
                let mut r = s.serialize_seq(Some(if stride == 1 { 2 } else { 3 }))?;
                r.serialize_element(&start)?;
                r.serialize_element(&count)?;
                if stride != 1 {
                    r.serialize_element(&stride)?;
                }
                r.end()
            }
        }
    }
}

/// Entries one range may expand to: every chunk and scratch slot a schedule can have.
pub const MAX_RUN: u64 = (limits::MAX_CHUNKS as u64) * 2;

/// Reads a chunk list in either form: an array of chunk ids and ranges (`[start, count]`,
/// `[start, count, stride]` or the object `{"start", "count", "stride"}`), mixed freely. A range
/// is checked before it is expanded: at least one chunk, a stride of at least 1, no entry past
/// 2^32 - 1, and at most `MAX_RUN` entries.
pub(in crate::schedule) fn read_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
    struct List;
    impl<'de> Visitor<'de> for List {
        type Value = Vec<u32>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of chunk ids and ranges [start, count, stride]")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u32>, A::Error> {
            let mut out: Vec<u32> = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 12));
            while let Some(e) = seq.next_element::<Entry>()? {
                match e.0 {
                    Item::One(c) => out.push(c),
                    Item::Run { start, count, stride } => {
                        if out.len() as u64 + count as u64 > MAX_RUN {
                            return Err(de::Error::custom(format_args!(
                                "the list expands to more than {MAX_RUN} chunks (two per chunk a collective may have)"
                            )));
                        }
                        out.extend((0..count).map(|k| start + k * stride));
                    }
                }
            }
            Ok(out)
        }
    }
    d.deserialize_seq(List)
}

/// One entry of a chunk list being read.
struct Entry(Item);

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entry, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a chunk id (u32) or a range [start, count, stride]")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Entry, E> {
                u32::try_from(v)
                    .map(|c| Entry(Item::One(c)))
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &"a chunk id (u32)"))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Entry, E> {
                Err(E::invalid_value(de::Unexpected::Signed(v), &"a chunk id (u32)"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
                let (mut start, mut count, mut stride) = (None, None, None);
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let slot = match &*key {
                        "start" => &mut start,
                        "count" => &mut count,
                        "stride" => &mut stride,
                        other => return Err(de::Error::unknown_field(other, &["start", "count", "stride"])),
                    };
                    if slot.is_some() {
                        return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                    }
                    *slot = Some(map.next_value::<u32>()?);
                }
                let start = start.ok_or_else(|| de::Error::missing_field("start"))?;
                let count = count.ok_or_else(|| de::Error::missing_field("count"))?;
                run(start, count, stride.unwrap_or(1)).map_err(de::Error::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entry, A::Error> {
                const WHAT: &str = "a range [start, count] or [start, count, stride]";
                let start = seq.next_element::<u32>()?.ok_or_else(|| de::Error::invalid_length(0, &WHAT))?;
                let count = seq.next_element::<u32>()?.ok_or_else(|| de::Error::invalid_length(1, &WHAT))?;
                let stride = seq.next_element::<u32>()?.unwrap_or(1);
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(4, &WHAT));
                }
                run(start, count, stride).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A range as read, checked before it is expanded: at least one chunk, a stride of at least 1,
/// no entry past 2^32 - 1, at most `MAX_RUN` entries.
fn run(start: u32, count: u32, stride: u32) -> Result<Entry, String> {
    if count == 0 {
        return Err("a range of count 0: expected at least 1 chunk".into());
    }
    if stride == 0 {
        return Err("a range of stride 0: expected at least 1".into());
    }
    let last = (count as u64 - 1) * stride as u64 + start as u64;
    if last > u32::MAX as u64 {
        return Err(format!("a range from {start} of {count} chunks {stride} apart ends at {last}, past {}", u32::MAX));
    }
    if count as u64 > MAX_RUN {
        return Err(format!("a range of {count} chunks: at most {MAX_RUN}"));
    }
    Ok(Entry(Item::Run { start, count, stride }))
}

/// A chunk list as one form writes it.
pub(in crate::schedule) struct ListIn<'a>(pub(in crate::schedule) &'a [u32], pub(in crate::schedule) Form);

/// A chunk list already cut into compact items.
pub(in crate::schedule) struct ItemsIn<'a>(pub(in crate::schedule) &'a [Item]);

impl Serialize for ItemsIn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for it in self.0 {
            seq.serialize_element(it)?;
        }
        seq.end()
    }
}

impl Serialize for ListIn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write_list(self.0, self.1, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(list: &[u32]) -> String {
        let mut out = Vec::new();
        write_list(list, Form::Compact, &mut serde_json::Serializer::new(&mut out)).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn read(text: &str) -> Result<Vec<u32>, String> {
        read_list(&mut serde_json::Deserializer::from_str(text)).map_err(|e| e.to_string())
    }

    #[test]
    fn runs_are_written_where_shorter() {
        assert_eq!(json(&[]), "[]");
        assert_eq!(json(&[7]), "[7]");
        // As a range, "[0,4,4]" is as long as the ids, and a range must be shorter.
        assert_eq!(json(&[0, 4, 8]), "[0,4,8]");
        assert_eq!(json(&[0, 4, 8, 12]), "[[0,4,4]]");
        let every_fourth: Vec<u32> = (0..64).map(|k| 3 + 4 * k).collect();
        assert_eq!(json(&every_fourth), "[[3,64,4]]");
        let consecutive: Vec<u32> = (100..140).collect();
        assert_eq!(json(&consecutive), "[[100,40]]");
        // A stray id before a run, a descending tail, and two runs of different strides.
        let mut mixed = vec![5];
        mixed.extend(100..130);
        mixed.extend([9, 8]);
        mixed.extend((0..20).map(|k| 1000 + 7 * k));
        assert_eq!(json(&mixed), "[5,[100,30],9,8,[1000,20,7]]");
        for list in [vec![], vec![7], vec![0, 4, 8, 12], every_fourth, consecutive, mixed] {
            assert_eq!(read(&json(&list)).unwrap(), list);
            assert_eq!(list_json_len(&list, Form::Compact), json(&list).len() as u64);
            assert_eq!(list_json_len(&list, Form::Explicit), serde_json::to_string(&list).unwrap().len() as u64);
        }
    }

    #[test]
    fn a_bad_range_is_refused_before_it_is_expanded() {
        assert_eq!(read(r#"[{"start":4,"count":3,"stride":2}]"#).unwrap(), vec![4, 6, 8]);
        assert_eq!(read(r#"[1,{"count":2,"start":4}]"#).unwrap(), vec![1, 4, 5]);
        // Ranges as arrays, mixed with objects and ids.
        assert_eq!(read(r#"[[4,3,2],1,[7,2],{"start":0,"count":1}]"#).unwrap(), vec![4, 6, 8, 1, 7, 8, 0]);
        for (text, says) in [
            ("[[4,0]]", "count 0"),
            ("[[4,2,0]]", "stride 0"),
            ("[[4294967290,3,3]]", "past 4294967295"),
            ("[[0,4000000000]]", "at most 67108864"),
            ("[[4]]", "invalid length 1, expected a range [start, count]"),
            ("[[]]", "invalid length 0"),
            ("[[4,1,1,1]]", "invalid length 4"),
            ("[[4,-1]]", "expected u32"),
            ("[[4,\"2\"]]", "expected u32"),
            (r#"[{"start":4,"count":0}]"#, "count 0"),
            (r#"[{"start":4,"count":2,"stride":0}]"#, "stride 0"),
            (r#"[{"start":4294967290,"count":3,"stride":3}]"#, "past 4294967295"),
            (r#"[{"start":0,"count":4000000000}]"#, "at most 67108864"),
            (r#"[{"start":4}]"#, "missing field `count`"),
            (r#"[{"start":4,"count":1,"step":1}]"#, "unknown field `step`"),
            (r#"[{"start":4,"count":1,"count":2}]"#, "duplicate field `count`"),
            (r#"[-1]"#, "expected a chunk id"),
            (r#"[4294967296]"#, "expected a chunk id"),
            (r#"{"start":4,"count":1}"#, "expected an array"),
        ] {
            let e = read(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
