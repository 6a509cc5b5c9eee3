//! An MSCCL++ plan's operations: each lane's items as the executor's ops, with a `nop` wherever
//! the kernel needs one (`emit`), and a lane cut into thread blocks of at most `MAX_OPS`
//! (`segments`).
use super::builder::{Builder, Item};
use super::{ChanType, MAX_OPS, MAX_SEMAPHORE_IDS};
use crate::export::layout::Cell;
use serde::Serialize;
use std::collections::HashSet;

#[derive(Serialize, Clone, Default)]
pub(super) struct OpJson {
    name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    channel_ids: Vec<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    src_buff: Vec<BuffRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dst_buff: Vec<BuffRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    semaphore_ids: Vec<u32>,
}

impl OpJson {
    pub(super) fn named(name: &'static str) -> OpJson {
        OpJson { name, ..Default::default() }
    }
    pub(super) fn on(name: &'static str, ty: ChanType) -> OpJson {
        OpJson { name, channel_type: Some(ty.name()), channel_ids: vec![0], ..Default::default() }
    }
}

#[derive(Serialize, Clone)]
#[serde(untagged)]
pub(super) enum BuffRef {
    Local {
        #[serde(rename = "type")]
        ty: &'static str,
        index: u32,
        size: u32,
    },
    Remote {
        buffer_id: u32,
        index: u32,
        size: u32,
    },
}

fn local(c: Cell, size: u32) -> BuffRef {
    BuffRef::Local { ty: c.buf.letter(), index: c.off, size }
}

/// A lane's operations, with a `nop` wherever the kernel needs one (see the module doc).
pub(super) fn emit(b: &Builder<'_>, lane: usize, ty: ChanType) -> Vec<OpJson> {
    let lane = &b.lanes[lane];
    let r = lane.rank as usize;
    let mut ops: Vec<OpJson> = Vec::new();
    let mut since = Since::default();
    let canon = |c: Cell, n: u32| (0..n).map(move |i| b.canonical(r, c.plus(i)));
    for e in &lane.entries {
        match &e.item {
            Item::Acquire(ids) => {
                for chunk in ids.chunks(MAX_SEMAPHORE_IDS) {
                    ops.push(OpJson { semaphore_ids: chunk.to_vec(), ..OpJson::named("sem_acquire") });
                }
                since.waited = true;
            }
            Item::Wait => {
                ops.push(OpJson::on("wait", ty));
                since.waited = true;
            }
            Item::Signal => {
                if since.dirty {
                    since.nop(&mut ops);
                }
                ops.push(OpJson::on("signal", ty));
            }
            item => {
                let (reads, writes): (Vec<Run>, Vec<Run>) = match item {
                    Item::Put { pieces } => (pieces.iter().map(|&(c, _, n)| (c, n)).collect(), Vec::new()),
                    Item::Copy { src, dst, cnt } => (vec![(*src, *cnt)], vec![(*dst, *cnt)]),
                    Item::Reduce { srcs, dst, cnt } => (vec![(srcs[0], *cnt), (srcs[1], *cnt)], vec![(*dst, *cnt)]),
                    _ => unreachable!("handled above"),
                };
                let r_cells: Vec<Cell> = reads.iter().flat_map(|&(c, n)| canon(c, n)).collect();
                let w_cells: Vec<Cell> = writes.iter().flat_map(|&(c, n)| canon(c, n)).collect();
                let conflict = w_cells.iter().any(|c| since.read.contains(c) || since.written.contains(c))
                    || r_cells.iter().any(|c| since.written.contains(c));
                // A port put also signals (thread 0): the data before it must be complete.
                let port_put = matches!(item, Item::Put { .. }) && ty == ChanType::Port;
                if since.waited || conflict || (port_put && since.dirty) {
                    since.nop(&mut ops);
                }
                ops.push(data_op(item, ty));
                since.dirty = true;
                since.read.extend(r_cells);
                since.written.extend(w_cells);
            }
        }
        if !e.releases.is_empty() {
            if since.dirty {
                since.nop(&mut ops);
            }
            for chunk in e.releases.chunks(MAX_SEMAPHORE_IDS) {
                ops.push(OpJson { semaphore_ids: chunk.to_vec(), ..OpJson::named("sem_release") });
            }
        }
    }
    ops
}

/// `count` cells from a first one.
type Run = (Cell, u32);

/// What a thread block did since its last `nop`: a data op ran (only part of it is done in
/// each thread), a wait or acquire ran (only thread 0 has waited), and the cells read and
/// written (a later op touching them must not overlap).
#[derive(Default)]
struct Since {
    dirty: bool,
    waited: bool,
    read: HashSet<Cell>,
    written: HashSet<Cell>,
}

impl Since {
    fn nop(&mut self, ops: &mut Vec<OpJson>) {
        ops.push(OpJson::named("nop"));
        *self = Since::default();
    }
}

/// The operation of a data item.
fn data_op(item: &Item, ty: ChanType) -> OpJson {
    match item {
        Item::Put { pieces } => {
            let src_buff = pieces.iter().map(|&(c, _, n)| local(c, n)).collect();
            let dst_buff =
                pieces.iter().map(|&(_, off, n)| BuffRef::Remote { buffer_id: 0, index: off, size: n }).collect();
            match ty {
                ChanType::Memory => OpJson { channel_type: Some("memory"), src_buff, dst_buff, ..OpJson::named("put") },
                ChanType::Port => OpJson { src_buff, dst_buff, ..OpJson::on("pwsf", ty) },
            }
        }
        Item::Copy { src, dst, cnt } => {
            OpJson { src_buff: vec![local(*src, *cnt)], dst_buff: vec![local(*dst, *cnt)], ..OpJson::named("copy") }
        }
        Item::Reduce { srcs, dst, cnt } => OpJson {
            src_buff: vec![local(srcs[0], *cnt), local(srcs[1], *cnt)],
            dst_buff: vec![local(*dst, *cnt)],
            ..OpJson::named("re")
        },
        _ => unreachable!("only data items"),
    }
}

/// Cuts a lane's operations into thread blocks of at most `MAX_OPS`: each but the last ends
/// with `nop`, `sem_release` of a fresh semaphore (`next_sem` counts the GPU's), and the next
/// begins with its `sem_acquire`, `nop`.
pub(super) fn segments(ops: Vec<OpJson>, next_sem: &mut u32) -> Vec<Vec<OpJson>> {
    let mut out: Vec<Vec<OpJson>> = Vec::new();
    let mut rest = ops.as_slice();
    let mut opening: Vec<OpJson> = Vec::new();
    loop {
        if opening.len() + rest.len() <= MAX_OPS {
            let mut seg = std::mem::take(&mut opening);
            seg.extend_from_slice(rest);
            out.push(seg);
            return out;
        }
        let body = MAX_OPS - opening.len() - 2;
        let mut seg = std::mem::take(&mut opening);
        seg.extend_from_slice(&rest[..body]);
        rest = &rest[body..];
        let id = *next_sem;
        *next_sem += 1;
        if seg.last().is_none_or(|o| o.name != "nop") {
            seg.push(OpJson::named("nop"));
        }
        seg.push(OpJson { semaphore_ids: vec![id], ..OpJson::named("sem_release") });
        out.push(seg);
        opening = vec![OpJson { semaphore_ids: vec![id], ..OpJson::named("sem_acquire") }, OpJson::named("nop")];
        if rest.first().is_some_and(|o| o.name == "nop") {
            rest = &rest[1..];
        }
    }
}
