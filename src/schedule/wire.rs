//! How a schedule is written as JSON and read back: the compact form every writer emits (a
//! transfer as a row `[step, src, dst, chunks, op]`, a chunk list's runs as ranges `[start,
//! count, stride]` where that is shorter, the conditions left out where the collective implies
//! them) and the explicit form (`Form::Explicit`: transfer objects, every chunk id listed, both
//! conditions written out), which every reader of v1 takes. Readers take both, and the range
//! objects `{"start", "count", "stride"}` written before rows. All are `ccsynth.schedule.v1`
//! (docs/FORMAT.md, "Compact form").

use super::{Schedule, TransferRef, Transfers};
use crate::collective::{Collective, CollectiveKind, Pairs};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

mod lists;
pub use lists::{Item, MAX_RUN, items};
use lists::{ItemsIn, ListIn};
pub(super) use lists::{digits, list_json_len, read_list, write_list};

/// Which JSON a writer emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Transfers as rows, runs of evenly spaced chunks as ranges, implied conditions left out:
    /// what ccsynth writes.
    Compact,
    /// Transfer objects, every chunk id listed and both conditions written: what readers before
    /// the compact form take (`ccsynth export --format explicit`, `?format=explicit`).
    Explicit,
}

/// Whether `s`'s conditions are the ones its collective object implies (not a custom
/// collective's, which are written out): only then does the compact form leave them out. A
/// condition a producer or a test changed is written as it is.
pub fn conditions_implied(s: &Schedule) -> bool {
    if s.collective.kind == CollectiveKind::Custom || s.precondition.is_empty() || s.postcondition.is_empty() {
        return false;
    }
    let Ok(c) = Collective::build_unchecked(&s.collective, &s.topology) else {
        return false;
    };
    c.num_chunks == s.num_chunks && s.precondition == c.precondition && s.postcondition == c.postcondition
}

/// A schedule as written in one form: `schedule.written(Form::Explicit)`. The field order is
/// the format's (the store finds the topology as the first field after format, algorithm and
/// seed).
pub struct Written<'a> {
    pub schedule: &'a Schedule,
    pub form: Form,
}

impl Serialize for Written<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let s = self.schedule;
        let conditions = self.form == Form::Explicit || !conditions_implied(s);
        let mut n = 7 + usize::from(s.algorithm.is_some()) + usize::from(s.seed.is_some());
        n += 2 * usize::from(conditions) + usize::from(!s.scratch.is_empty());
        n += usize::from(s.collective_time_ns.is_some());
        let mut m = ser.serialize_struct("Schedule", n)?;
        m.serialize_field("format", &s.format)?;
        if let Some(a) = &s.algorithm {
            m.serialize_field("algorithm", a)?;
        }
        if let Some(seed) = &s.seed {
            m.serialize_field("seed", seed)?;
        }
        m.serialize_field("topology", &s.topology)?;
        m.serialize_field("collective", &s.collective)?;
        m.serialize_field("num_chunks", &s.num_chunks)?;
        m.serialize_field("chunk_size_bytes", &s.chunk_size_bytes)?;
        m.serialize_field("combining", &s.combining)?;
        if conditions {
            m.serialize_field("precondition", &s.precondition)?;
            m.serialize_field("postcondition", &s.postcondition)?;
        }
        if !s.scratch.is_empty() {
            m.serialize_field("scratch", &s.scratch)?;
        }
        m.serialize_field("transfers", &TransfersIn { transfers: &s.transfers, form: self.form })?;
        if let Some(t) = &s.collective_time_ns {
            m.serialize_field("collective_time_ns", t)?;
        }
        m.end()
    }
}

/// The transfers array in one form.
struct TransfersIn<'a> {
    transfers: &'a Transfers,
    form: Form,
}

/// Items a shared list's compact form is remembered by at most: a longer one (scattered
/// chunks) is cut into items each time it is written, which costs little beside writing them.
const CACHED_ITEMS: usize = 16;

impl Serialize for TransfersIn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let ts = self.transfers;
        let mut seq = s.serialize_seq(Some(ts.len()))?;
        // A shared list is cut into items once, not once per message carrying it (bucket on
        // torus:128x128 writes 130 K lists of 128 chunks in 16 M messages).
        let mut cut: Vec<Option<Option<Box<[Item]>>>> = vec![None; ts.lists().len()];
        let compact = self.form == Form::Compact;
        for i in 0..ts.len() {
            let t = ts.at(i);
            let items = match ts.list_index(i).filter(|_| compact) {
                Some(l) => cut[l as usize]
                    .get_or_insert_with(|| {
                        let v: Vec<Item> = items(t.chunks).take(CACHED_ITEMS + 1).collect();
                        (v.len() <= CACHED_ITEMS).then(|| v.into_boxed_slice())
                    })
                    .as_deref(),
                None => None,
            };
            seq.serialize_element(&WrittenTransfer { t, form: self.form, items })?;
        }
        seq.end()
    }
}

/// A transfer as one form writes it (`TransferRef`'s `Serialize`: the compact form). Compact:
/// a row `[step, src, dst, chunks, op]`, with the path as a sixth entry when it has one; an
/// object where it writes into other slots (`dst_chunks`, rare) and in the explicit form.
pub(super) struct WrittenTransfer<'a> {
    pub(super) t: TransferRef<'a>,
    pub(super) form: Form,
    /// `t.chunks` already cut into compact items, when the writer has them.
    pub(super) items: Option<&'a [Item]>,
}

impl WrittenTransfer<'_> {
    fn as_row(&self) -> bool {
        self.form == Form::Compact && self.t.dst_chunks.is_none()
    }
}

impl Serialize for WrittenTransfer<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = &self.t;
        if self.as_row() {
            let mut r = s.serialize_seq(Some(5 + usize::from(t.path.is_some())))?;
            r.serialize_element(&t.step)?;
            r.serialize_element(&t.src)?;
            r.serialize_element(&t.dst)?;
            match self.items {
                Some(items) => r.serialize_element(&ItemsIn(items))?,
                None => r.serialize_element(&ListIn(t.chunks, self.form))?,
            }
            r.serialize_element(&t.op)?;
            if let Some(p) = t.path {
                r.serialize_element(p)?;
            }
            return r.end();
        }
        let n = 5 + usize::from(t.path.is_some()) + usize::from(t.dst_chunks.is_some());
        let mut m = s.serialize_struct("Transfer", n)?;
        m.serialize_field("step", &t.step)?;
        m.serialize_field("src", &t.src)?;
        m.serialize_field("dst", &t.dst)?;
        match self.items {
            Some(items) => m.serialize_field("chunks", &ItemsIn(items))?,
            None => m.serialize_field("chunks", &ListIn(t.chunks, self.form))?,
        }
        m.serialize_field("op", &t.op)?;
        if let Some(p) = t.path {
            m.serialize_field("path", p)?;
        }
        if let Some(d) = t.dst_chunks {
            m.serialize_field("dst_chunks", &ListIn(d, self.form))?;
        }
        m.end()
    }
}

/// Characters of one transfer's JSON in `form`, its chunk list's (`chunks`) already counted.
pub(super) fn transfer_json_len(t: &TransferRef<'_>, form: Form, chunks: u64) -> u64 {
    let op = match t.op {
        super::Op::Copy => 6,
        super::Op::Reduce => 8,
    };
    let fields = digits(t.step) + digits(t.src) + digits(t.dst) + chunks + op;
    if (WrittenTransfer { t: *t, form, items: None }).as_row() {
        // [,,,,] and ,PATH.
        return 6 + fields + t.path.map_or(0, |p| 1 + list_json_len(p, Form::Explicit));
    }
    // {"step":,"src":,"dst":,"chunks":,"op":}, ,"path": and ,"dst_chunks":.
    39 + fields
        + t.path.map_or(0, |p| 8 + list_json_len(p, Form::Explicit))
        + t.dst_chunks.map_or(0, |d| 14 + list_json_len(d, form))
}

/// What reads a transfer: its object (as derived, `strict`) or a row `[step, src, dst, chunks,
/// op]` or `[step, src, dst, chunks, op, path]`. Nothing else: an array of another length, or
/// of other types, is an error naming the entry.
impl<'de> Deserialize<'de> for super::Transfer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<super::Transfer, D::Error> {
        struct V;
        const WHAT: &str =
            "a transfer: an object, or a row [step, src, dst, chunks, op] or [step, src, dst, chunks, op, path]";
        impl<'de> Visitor<'de> for V {
            type Value = super::Transfer;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<super::Transfer, A::Error> {
                <super::Transfer as crate::strict::Derived>::derived(de::value::MapAccessDeserializer::new(map))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<super::Transfer, A::Error> {
                let missing = |n: usize| de::Error::invalid_length(n, &WHAT);
                let step = seq.next_element::<u32>()?.ok_or_else(|| missing(0))?;
                let src = seq.next_element::<u32>()?.ok_or_else(|| missing(1))?;
                let dst = seq.next_element::<u32>()?.ok_or_else(|| missing(2))?;
                let chunks = seq.next_element::<super::ChunkList>()?.ok_or_else(|| missing(3))?;
                let op = seq.next_element::<super::Op>()?.ok_or_else(|| missing(4))?;
                let path = seq.next_element::<super::Route>()?;
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(7, &WHAT));
                }
                Ok(super::Transfer { step, src, dst, chunks, op, path, dst_chunks: None })
            }
        }
        d.deserialize_any(V)
    }
}

/// What a schedule is read into: `Schedule`'s fields with the conditions optional.
#[derive(Deserialize)]
pub(super) struct Read {
    format: String,
    #[serde(default)]
    algorithm: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    topology: crate::topology::Topology,
    collective: crate::collective::CollectiveSpec,
    num_chunks: usize,
    #[serde(deserialize_with = "a_size")]
    chunk_size_bytes: f64,
    combining: bool,
    #[serde(default)]
    precondition: Option<Vec<[u32; 2]>>,
    #[serde(default)]
    postcondition: Option<Vec<[u32; 2]>>,
    #[serde(default)]
    scratch: Vec<u32>,
    transfers: Transfers,
    #[serde(default)]
    collective_time_ns: Option<f64>,
}

/// `chunk_size_bytes`: a finite size of at least 0 (1e308 was simulated as `null` and
/// validated against no time, −262144 simulated in 0 ns).
fn a_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let x = f64::deserialize(d)?;
    if x.is_finite() && x >= 0.0 && x <= u64::MAX as f64 {
        return Ok(x);
    }
    Err(serde::de::Error::custom(format_args!("{x}: expected a size in bytes, from 0 to 2^64")))
}

impl Read {
    /// The schedule, its missing conditions those the collective implies (none where it
    /// cannot be built: the validator then reports `invalid_collective`). A condition given
    /// that is the implied one's every chunk at every NPU is held as that, not as its list (an
    /// explicit file of a 4096-NPU all-reduce in 4 parts lists 67 M pairs, 537 MB, twice).
    pub(super) fn into_schedule(self) -> Schedule {
        let (pre, post) = (self.precondition, self.postcondition);
        let mut s = Schedule {
            format: self.format,
            algorithm: self.algorithm,
            seed: self.seed,
            topology: self.topology,
            collective: self.collective,
            num_chunks: self.num_chunks,
            chunk_size_bytes: self.chunk_size_bytes,
            combining: self.combining,
            precondition: Pairs::default(),
            postcondition: Pairs::default(),
            scratch: self.scratch,
            transfers: self.transfers,
            collective_time_ns: self.collective_time_ns,
        };
        let read = |l: &Option<Vec<[u32; 2]>>| l.as_ref().is_none_or(|l| !l.is_empty());
        let built =
            (read(&pre) || read(&post)).then(|| Collective::build_unchecked(&s.collective, &s.topology).ok()).flatten();
        let side = |given: Option<Vec<[u32; 2]>>, implied: Option<&Pairs>| match given {
            None => implied.cloned().unwrap_or_default(),
            Some(l) => Pairs::given(l, implied),
        };
        s.precondition = side(pre, built.as_ref().map(|c| &c.precondition));
        s.postcondition = side(post, built.as_ref().map(|c| &c.postcondition));
        s
    }
}

// The transfers' JSON: the array of transfer objects, written compact, read in either form.
impl Serialize for Transfers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TransfersIn { transfers: self, form: Form::Compact }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Transfers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Seq;
        impl<'de> serde::de::Visitor<'de> for Seq {
            type Value = Transfers;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of transfers")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Transfers, A::Error> {
                // A size hint is the sender's claim: capped, so a short body cannot reserve much.
                let mut out = Transfers::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                // Ranges make a short text of long lists: the distinct lists held are capped.
                let mut entries = 0usize;
                while let Some(t) = seq.next_element::<super::Transfer>()? {
                    let lists = out.lists.len();
                    // Destination slots are kept per transfer: each counts (they were not
                    // counted, so ten of 2^26 ids read 2.5 GiB).
                    entries += t.dst_chunks.as_ref().map_or(0, |d| d.len());
                    out.push(t);
                    entries += out.lists.get(lists).map_or(0, |new| new.len());
                    if entries > crate::limits::MAX_LIST_ENTRIES {
                        return Err(serde::de::Error::custom(format_args!(
                            "transfer {}: the chunk lists (distinct lists and destination slots) hold more than {} chunk ids",
                            out.len() - 1,
                            crate::limits::MAX_LIST_ENTRIES
                        )));
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Seq)
    }
}

/// At most how many chunk ids a schedule document's chunk lists expand to once read (what
/// `Transfers` counts against `limits::MAX_LIST_ENTRIES`), from its JSON before it is decoded:
/// a few bytes of ranges (`[0, 67108864, 1]`) expand to hundreds of megabytes, so a service
/// sizes the read from this first. `chunks` written alike count once, as the reader keeps them
/// once; every `dst_chunks` counts, as the reader keeps each; a range counts its whole
/// `count`, a malformed entry one (the reader refuses it).
pub fn declared_list_ids(doc: &serde_json::Value) -> u64 {
    use serde_json::Value;
    let Some(transfers) = doc.get("transfers").and_then(Value::as_array) else { return 0 };
    let ids_of = |list: &[Value]| {
        let count = |e: &Value| match e {
            Value::Array(r) => r.get(1).and_then(Value::as_u64).unwrap_or(1),
            Value::Object(r) => r.get("count").and_then(Value::as_u64).unwrap_or(1),
            _ => 1,
        };
        list.iter().map(count).fold(0u64, u64::saturating_add)
    };
    // By their text, not a hash of it: lists made to collide would be counted once.
    let mut seen = std::collections::HashSet::new();
    let mut ids = 0u64;
    for t in transfers {
        let (chunks, slots) = match t {
            Value::Array(row) => (row.get(3), None),
            Value::Object(o) => (o.get("chunks"), o.get("dst_chunks")),
            _ => continue,
        };
        if let Some(list) = chunks.and_then(Value::as_array)
            && seen.insert(serde_json::to_string(list).unwrap_or_default())
        {
            ids = ids.saturating_add(ids_of(list));
        }
        if let Some(list) = slots.and_then(Value::as_array) {
            ids = ids.saturating_add(ids_of(list));
        }
    }
    ids
}
