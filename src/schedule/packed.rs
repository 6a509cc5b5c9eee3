//! The packed form of a schedule: how the service stores a large schedule (then compressed),
//! instead of its JSON. A JSON header (the schedule without its conditions and transfers), the
//! conditions as runs of consecutive chunks, and the transfers as little-endian columns, as
//! `Transfers` holds them. The JSON of a torus:32x32 all-reduce (0.5 M transfers, 4 M pairs in
//! each condition) is 157 MB and took 0.8 s to parse, which a regeneration paid before it
//! could start.
//!
//! Layout: `MAGIC`, the explicit JSON form's length (u64: what limits and budgets read without
//! decoding; it grows with the chunk moves a reader holds), the header's length (u64), the header (UTF-8), the precondition, then the
//! postcondition or, when it is the same list, the marker `SAME` alone (each a count of runs
//! (u64), then each run as NPU, first chunk and length, u32), then the transfers:
//! count n (u64); the columns step, src, dst, chunk (n × u32 each), flags (n × u8); the chunk
//! lists (count, then each as length and entries, u32); the routes (the same); the route
//! column (n × u32, present only when a transfer has a path); the destination slots (count,
//! then each as transfer index, length and entries, u32).
//!
//! Reading trusts nothing: every length is checked against what is left, every index against
//! its table, so a damaged body is an error, never a panic or a huge allocation.

use super::transfers::{MANY, PATH, REDUCE, SLOTS};
use super::wire::{digits, list_json_len};
use super::{ChunkList, Form, Route, Schedule, Transfer, Transfers};
use crate::collective::Pairs;
use std::sync::Arc;

/// What a packed body starts with (a JSON body starts with `{`).
pub const MAGIC: &[u8; 8] = b"ccsPACK1";

/// A packed body, split into its parts.
pub struct Packed<'a> {
    /// The explicit JSON form's length (`json_len`).
    pub json_len: u64,
    /// The schedule's JSON with empty conditions and no transfers.
    pub header: &'a str,
    /// The conditions and the transfers.
    rest: &'a [u8],
}

/// Whether `bytes` is a packed body (rather than JSON).
pub fn is_packed(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// A schedule packed: the bytes and the length of the JSON they stand for (its header as
/// edited).
pub struct Packing {
    pub bytes: Vec<u8>,
    pub json_len: u64,
}

/// The precondition's count when the postcondition is the same list.
const SAME: u64 = u64::MAX;

/// Packs `s`. `edit_header` may change the header's JSON (the schedule with empty conditions
/// and no transfers) before it is written: the service leaves out a topology it stores once.
pub fn pack(s: &mut Schedule, edit_header: impl FnOnce(&mut String)) -> serde_json::Result<Packing> {
    let header = header(s, edit_header)?;
    let json_len = len_with(&header, s, Form::Explicit);
    let mut out = Vec::with_capacity(64 + header.len() + 17 * s.transfers.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&json_len.to_le_bytes());
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    put_runs(&mut out, &s.precondition);
    if s.postcondition == s.precondition {
        out.extend_from_slice(&SAME.to_le_bytes());
    } else {
        put_runs(&mut out, &s.postcondition);
    }
    s.transfers.write_packed(&mut out);
    Ok(Packing { bytes: out, json_len })
}

/// The length of `s`'s JSON as serde_json writes it (the compact form), counted without
/// writing it.
pub fn schedule_json_len(s: &mut Schedule) -> serde_json::Result<u64> {
    schedule_json_len_in(s, Form::Compact)
}

/// The length of `s`'s JSON in `form`, counted without writing it.
pub fn schedule_json_len_in(s: &mut Schedule, form: Form) -> serde_json::Result<u64> {
    let header = header(s, |_| {})?;
    Ok(len_with(&header, s, form))
}

/// The header (edited): `s`'s JSON with empty conditions and no transfers.
fn header(s: &mut Schedule, edit_header: impl FnOnce(&mut String)) -> serde_json::Result<String> {
    let transfers = std::mem::take(&mut s.transfers);
    let pre = std::mem::take(&mut s.precondition);
    let post = std::mem::take(&mut s.postcondition);
    // Empty conditions are never implied ones: the header writes them, as `[]`.
    let header = serde_json::to_string(&*s);
    (s.transfers, s.precondition, s.postcondition) = (transfers, pre, post);
    let mut header = header?;
    edit_header(&mut header);
    Ok(header)
}

/// The length of the JSON in `form` that `header` stands for with `s`'s conditions and
/// transfers. In the explicit form, what the service's result limit and export budgets read:
/// it grows with the chunk moves a reader holds.
fn len_with(header: &str, s: &Schedule, form: Form) -> u64 {
    // The header writes `"precondition":[],"postcondition":[],` (37 characters, 33 without
    // the brackets) and `[]` for the transfers.
    let conditions = if form == Form::Compact && super::wire::conditions_implied(s) {
        0
    } else {
        33 + pairs_json_len(&s.precondition) + pairs_json_len(&s.postcondition)
    };
    header.len() as u64 - 37 - 2 + conditions + transfers_json_len(&s.transfers, form)
}

/// Splits a packed body into its parts.
pub fn split(bytes: &[u8]) -> Result<Packed<'_>, String> {
    let mut r = Reader(bytes);
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not a packed schedule".into());
    }
    let json_len = r.u64()?;
    let header_len = r.len()?;
    let header = std::str::from_utf8(r.take(header_len)?).map_err(|e| format!("header: {e}"))?;
    Ok(Packed { json_len, header, rest: r.0 })
}

/// Parses a packed body back into its schedule; `fix_header` may edit the header first (the
/// store splices a topology kept apart back in).
pub fn decode(bytes: &[u8], fix_header: impl FnOnce(&str) -> String) -> Result<Schedule, String> {
    let p = split(bytes)?;
    let header = fix_header(p.header);
    let mut s = Schedule::from_json(&header).map_err(|e| format!("header: {e}"))?;
    if !s.transfers.is_empty() || !s.precondition.is_empty() || !s.postcondition.is_empty() {
        return Err("header: conditions or transfers outside their columns".into());
    }
    let mut r = Reader(p.rest);
    // No condition has more pairs than NPUs times chunks: a damaged length asks for no more.
    let cap = (s.topology.npus() as u64).saturating_mul(s.num_chunks as u64);
    s.precondition = runs(&mut r, "precondition", cap)?;
    s.postcondition = match Reader(r.0).u64() {
        Ok(SAME) => {
            r.u64()?;
            s.precondition.clone()
        }
        _ => runs(&mut r, "postcondition", cap)?,
    };
    s.transfers = Transfers::from_packed(r.0)?;
    Ok(s)
}

/// The header of a packed body read as a schedule (as `fix_header` makes it: no conditions,
/// no transfers) and how many transfers the body holds, without decoding its conditions or its
/// transfers: what a cheap check (an export's limits) reads before the whole is decoded.
pub fn outline(bytes: &[u8], fix_header: impl FnOnce(&str) -> String) -> Result<(Schedule, usize), String> {
    let p = split(bytes)?;
    let s = Schedule::from_json(&fix_header(p.header)).map_err(|e| format!("header: {e}"))?;
    let mut r = Reader(p.rest);
    let skip_runs = |r: &mut Reader| -> Result<(), String> {
        let n = r.len()?;
        r.take(n.checked_mul(12).ok_or("count overflows")?)?;
        Ok(())
    };
    skip_runs(&mut r)?;
    if Reader(r.0).u64()? == SAME {
        r.u64()?;
    } else {
        skip_runs(&mut r)?;
    }
    Ok((s, r.len()?))
}

/// A condition as runs of consecutive chunks at one NPU: an all-reduce's 4 M pairs on 1024
/// NPUs are 1024 runs.
fn put_runs(out: &mut Vec<u8>, pairs: &Pairs) {
    let mut runs: Vec<[u32; 3]> = Vec::new();
    for [v, c] in pairs.iter() {
        match runs.last_mut() {
            Some([rv, first, len]) if *rv == v && first.checked_add(*len) == Some(c) => *len += 1,
            _ => runs.push([v, c, 1]),
        }
    }
    out.extend_from_slice(&(runs.len() as u64).to_le_bytes());
    for r in runs {
        put_u32s(out, &r);
    }
}

/// Reads `put_runs`'s condition, holding it to what a condition is: sorted, no pair twice.
/// Runs of every chunk from 0 to the same end at each NPU are held as that (`Pairs::every`),
/// not written out.
fn runs(r: &mut Reader, what: &str, cap: u64) -> Result<Pairs, String> {
    let n = r.len()?;
    let mut read: Vec<[u32; 3]> = Vec::new();
    let mut pairs = 0u64;
    for _ in 0..n {
        let (v, first, len) = (r.u32()?, r.u32()?, r.u32()?);
        let end =
            first.checked_add(len).filter(|_| len > 0).ok_or_else(|| format!("{what}: a run of {len} from {first}"))?;
        if read.last().is_some_and(|&[u, f, l]| [u, f + l - 1] >= [v, first]) {
            return Err(format!("{what}: runs out of order at NPU {v}, chunk {first}"));
        }
        pairs += len as u64;
        if pairs > cap {
            return Err(format!("{what}: more than {cap} pairs (NPUs times chunks)"));
        }
        read.push([v, first, end - first]);
    }
    let chunks = read.first().map_or(0, |r| r[2]);
    if chunks > 0 && read.iter().all(|&[_, first, len]| first == 0 && len == chunks) {
        return Ok(Pairs::every(read.iter().map(|r| r[0]).collect(), chunks));
    }
    Ok(Pairs::from(
        read.iter().flat_map(|&[v, first, len]| (first..first + len).map(move |c| [v, c])).collect::<Vec<_>>(),
    ))
}

/// The length of a condition's JSON array ([[v,c],...]); every chunk at every NPU of a set
/// is counted per NPU.
fn pairs_json_len(pairs: &Pairs) -> u64 {
    let items = match pairs.as_every() {
        Some((npus, chunks)) => {
            let ids: u64 = (0..chunks as u32).map(digits).sum();
            npus.iter().map(|&v| chunks as u64 * (3 + digits(v)) + ids).sum()
        }
        None => pairs.iter().map(|[v, c]| 3 + digits(v) + digits(c)).sum::<u64>(),
    };
    2 + pairs.len().saturating_sub(1) as u64 + items
}

/// The length of `transfers`' explicit JSON array (every chunk id listed), counted without
/// writing it: what the service's result limit and export budgets read.
pub fn json_len(transfers: &Transfers) -> u64 {
    transfers_json_len(transfers, Form::Explicit)
}

/// The length of `transfers`' JSON array in `form` as serde_json writes it (without
/// whitespace), counted without writing it.
pub fn transfers_json_len(transfers: &Transfers, form: Form) -> u64 {
    // Lists shared by many transfers are measured once.
    let mut by_list: Vec<Option<u64>> = vec![None; transfers.lists().len()];
    let mut n = 2 + transfers.len().saturating_sub(1) as u64;
    for (i, t) in transfers.iter().enumerate() {
        let chunks = match transfers.list_index(i) {
            Some(l) => *by_list[l as usize].get_or_insert_with(|| list_json_len(t.chunks, form)),
            None => list_json_len(t.chunks, form),
        };
        n += super::wire::transfer_json_len(&t, form, chunks);
    }
    n
}

/// A cursor over untrusted bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err(format!("truncated: {n} bytes wanted, {} left", self.0.len()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    /// A count of items of at least one byte each: no more than the bytes left.
    fn len(&mut self) -> Result<usize, String> {
        let n = self.u64()?;
        if n > self.0.len() as u64 {
            return Err(format!("a count of {n} with {} bytes left", self.0.len()));
        }
        Ok(n as usize)
    }
    /// `n` little-endian u32s.
    fn u32s(&mut self, n: usize) -> Result<Vec<u32>, String> {
        let bytes = self.take(n.checked_mul(4).ok_or("count overflows")?)?;
        Ok(bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))).collect())
    }
    /// A list: its length (u32), then its entries.
    fn list(&mut self) -> Result<Vec<u32>, String> {
        let n = self.u32()? as usize;
        self.u32s(n)
    }
}

fn put_u32s(out: &mut Vec<u8>, v: &[u32]) {
    out.reserve(4 * v.len());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

fn put_list(out: &mut Vec<u8>, v: &[u32]) {
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    put_u32s(out, v);
}

/// Rebuilds one transfer from its columns (the tables already checked by the caller).
fn transfer(
    step: u32,
    src: u32,
    dst: u32,
    chunks: ChunkList,
    reduce: bool,
    path: Option<Route>,
    slots: Option<ChunkList>,
) -> Transfer {
    let t = Transfer::copy(step, src as usize, dst as usize, chunks);
    let mut t = if reduce { Transfer { op: super::Op::Reduce, ..t } } else { t };
    t.path = path;
    t.dst_chunks = slots.map(Box::new);
    t
}

/// The transfers' section (`Transfers`' fields are visible within `schedule`).
impl Transfers {
    /// Appends the packed transfers' section (`schedule::packed`): the columns as they are.
    fn write_packed(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        for col in [&self.step, &self.src, &self.dst, &self.chunk] {
            put_u32s(out, col);
        }
        out.extend_from_slice(&self.flags);
        out.extend_from_slice(&(self.lists.len() as u64).to_le_bytes());
        for l in &self.lists {
            put_list(out, l);
        }
        out.extend_from_slice(&(self.routes.len() as u64).to_le_bytes());
        for r in &self.routes {
            put_list(out, r);
        }
        out.push(u8::from(!self.route.is_empty()));
        put_u32s(out, &self.route);
        out.extend_from_slice(&(self.slots.len() as u64).to_le_bytes());
        for (i, d) in &self.slots {
            out.extend_from_slice(&i.to_le_bytes());
            put_list(out, d);
        }
    }

    /// Reads what `write_packed` wrote, checking every index against its table; the transfers
    /// are pushed again, so the columns keep their invariants whatever the bytes said.
    pub fn from_packed(bytes: &[u8]) -> Result<Transfers, String> {
        let mut r = Reader(bytes);
        let n = r.len()?;
        let (step, src, dst, chunk) = (r.u32s(n)?, r.u32s(n)?, r.u32s(n)?, r.u32s(n)?);
        let flags = r.take(n)?;
        let count = r.len()?;
        let lists = (0..count).map(|_| r.list().map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        let count = r.len()?;
        let routes = (0..count).map(|_| r.list().map(Route::from)).collect::<Result<Vec<_>, _>>()?;
        let route = match r.take(1)?[0] {
            0 => Vec::new(),
            1 => r.u32s(n)?,
            x => return Err(format!("route column marker {x}")),
        };
        let count = r.len()?;
        let mut slots = Vec::with_capacity(count);
        for _ in 0..count {
            let i = r.u32()?;
            if slots.last().is_some_and(|&(last, _)| last >= i) || i as usize >= n {
                return Err(format!("destination slots of transfer {i} out of order or range"));
            }
            slots.push((i, ChunkList::from(r.list()?)));
        }
        if !r.0.is_empty() {
            return Err(format!("{} bytes after the transfers", r.0.len()));
        }
        let mut slots = slots.into_iter().peekable();
        let mut out = Transfers::with_capacity(n);
        for i in 0..n {
            let f = flags[i];
            if f & !(REDUCE | MANY | PATH | SLOTS) != 0 {
                return Err(format!("transfer {i}: flags {f:#x}"));
            }
            let chunks = if f & MANY != 0 {
                let l =
                    lists.get(chunk[i] as usize).ok_or_else(|| format!("transfer {i}: no chunk list {}", chunk[i]))?;
                ChunkList::Many(l.clone())
            } else {
                ChunkList::One(chunk[i])
            };
            let path = if f & PATH != 0 {
                let id = route.get(i).ok_or_else(|| format!("transfer {i}: a path without a route column"))?;
                Some(routes.get(*id as usize).ok_or_else(|| format!("transfer {i}: no route {id}"))?.clone())
            } else {
                None
            };
            let dst_chunks = if f & SLOTS != 0 {
                match slots.next_if(|&(at, _)| at as usize == i) {
                    Some((_, d)) => Some(d),
                    None => return Err(format!("transfer {i}: destination slots missing")),
                }
            } else {
                None
            };
            out.push(transfer(step[i], src[i], dst[i], chunks, f & REDUCE != 0, path, dst_chunks));
        }
        if slots.next().is_some() {
            return Err("destination slots of a transfer without them".into());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Op;
    use crate::topology::Topology;

    fn sample() -> Schedule {
        let topo: Topology = crate::topology::parse_topology("ring:4").unwrap();
        let spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 4096);
        let c = crate::collective::Collective::build(&spec, &topo).unwrap();
        let mut s = Schedule::new(topo, &c, "test");
        let shared: Route = vec![0u32, 1, 2].into();
        s.transfers.push(Transfer::copy(0, 0, 1, [0]));
        s.transfers.push(Transfer::reduce(1, 1, 2, vec![0, 1, 2, 3]));
        s.transfers.push(Transfer::copy(1, 2, 3, vec![3, 1, 2]));
        s.transfers.push(Transfer::copy(2, 0, 2, vec![1, 2]).via(shared.clone()));
        s.transfers.push(Transfer::copy(3, 0, 2, [3]).via(shared));
        s.transfers.push(Transfer::copy(4, 3, 3, vec![2, 2]).into_slots(vec![2, 2]));
        s.transfers.push(Transfer::copy(5, 3, 0, vec![]));
        s.collective_time_ns = Some(12.5);
        s
    }

    fn packed(s: &Schedule) -> Vec<u8> {
        pack(&mut s.clone(), |_| {}).unwrap().bytes
    }

    #[test]
    fn a_packed_schedule_reads_back_equal_and_knows_its_json_length() {
        let s = sample();
        let bytes = packed(&s);
        assert!(is_packed(&bytes));
        let back = decode(&bytes, str::to_string).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.transfers.at(1).op, Op::Reduce);
        assert_eq!(back.transfers.at(5).dst_chunks, Some(&[2u32, 2][..]));
        let explicit = serde_json::to_string(&s.written(Form::Explicit)).unwrap();
        assert_eq!(split(&bytes).unwrap().json_len, explicit.len() as u64);
        assert_eq!(schedule_json_len_in(&mut s.clone(), Form::Explicit).unwrap(), explicit.len() as u64);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(schedule_json_len(&mut s.clone()).unwrap(), json.len() as u64);
        assert!(json.len() < explicit.len() && !json.contains("precondition"), "{json}");
        assert_eq!(json_len(&Transfers::new()), 2);
        // An all-gather's conditions differ; an all-reduce's are one list, kept once.
        assert!(s.precondition != s.postcondition);
        let mut same = s.clone();
        same.postcondition = same.precondition.clone();
        let back = decode(&packed(&same), str::to_string).unwrap();
        assert!(crate::collective::Pairs::ptr_eq(&back.precondition, &back.postcondition));
        assert_eq!(back, same);
    }

    #[test]
    fn an_outline_is_the_header_and_the_transfer_count() {
        let s = sample();
        let mut same = s.clone();
        same.postcondition = same.precondition.clone();
        for s in [s, same] {
            let bytes = packed(&s);
            let (outline, n) = outline(&bytes, str::to_string).unwrap();
            assert_eq!(n, s.transfers.len());
            assert!(outline.transfers.is_empty() && outline.precondition.is_empty());
            assert_eq!((&outline.topology, &outline.collective), (&s.topology, &s.collective));
            assert_eq!((outline.num_chunks, outline.slots()), (s.num_chunks, s.slots()));
            // Cut anywhere, it is an error or the same count: never a wrong count or a panic.
            for cut in 0..bytes.len() {
                if let Ok((_, m)) = outline_at(&bytes[..cut]) {
                    assert_eq!(m, n, "cut at {cut}");
                }
            }
        }
    }

    fn outline_at(bytes: &[u8]) -> Result<(Schedule, usize), String> {
        outline(bytes, str::to_string)
    }

    #[test]
    fn a_damaged_body_is_an_error_not_a_panic() {
        let bytes = packed(&sample());
        // Every truncation, and every single byte changed, reads as an error or as some
        // schedule: never a panic, never a huge allocation.
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], str::to_string).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            for x in [0u8, 1, 0x7f, 0xff] {
                let mut b = bytes.clone();
                b[at] = x;
                let _ = decode(&b, str::to_string);
            }
        }
        assert!(decode(b"{\"format\":1}", str::to_string).is_err());
    }
}
