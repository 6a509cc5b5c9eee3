//! The validator's checks of each transfer on its own: endpoints, chunk lists, slots and
//! path, before any data flow is replayed.

use super::{At, Sink, ViolationKind, slot_name};
use crate::schedule::{Op, Schedule, TransferRef};
use crate::topology::Topology;
use std::fmt;

/// Checks every transfer on its own. Gives, per transfer, whether it names existing NPUs,
/// chunks and links, so that its data flow can be replayed.
pub(super) fn check_transfers(s: &Schedule, out: &mut Sink, poll: &mut crate::schedule::StopPoll) -> Option<Vec<bool>> {
    let mut ok = Vec::with_capacity(s.transfers.len());
    // Per shared chunk list, whether its own rules (not empty, no chunk twice, every chunk in
    // range) were found kept: checked once, not once per message carrying it (bucket on
    // torus:128x128 copied and sorted 128 chunk ids in each of 16 M messages, 4.5 s). A list
    // that breaks them is checked again for each transfer, which each names.
    let mut list_good = vec![false; s.transfers.lists().len()];
    for (i, t) in s.transfers.iter().enumerate() {
        if poll.stopped(i) {
            return None;
        }
        let list = s.transfers.list_index(i);
        let known = list.is_some_and(|l| list_good[l as usize]);
        let (good, list_kept) = check_transfer(s, i, t, known, out);
        if let (Some(l), true) = (list, list_kept) {
            list_good[l as usize] = true;
        }
        ok.push(good);
        if out.full() {
            // Counted as far as the check counts: the rest are not replayed either.
            ok.resize(s.transfers.len(), false);
            break;
        }
    }
    Some(ok)
}

/// Checks transfer `i` (its chunk list's own rules only unless `list_known_good`); gives
/// whether it broke no rule, and whether its chunk list kept its own.
fn check_transfer(s: &Schedule, i: usize, t: TransferRef, list_known_good: bool, out: &mut Sink) -> (bool, bool) {
    let mut ck = TransferCheck { s, t, i, out, good: true };
    ck.endpoints();
    let local = t.src == t.dst;
    if local {
        ck.local_move();
    }
    let before = ck.out.count;
    if !list_known_good {
        ck.chunk_list();
    }
    let list_kept = ck.out.count == before;
    ck.dst_slots();
    if t.op == Op::Reduce && !s.combining {
        ck.bad(ViolationKind::ReduceInNonCombining, Some(t.dst), None, "op \"reduce\" in a non-combining collective");
    }
    if ck.good && !local {
        ck.route();
    }
    (ck.good, list_kept)
}

/// The rules of one transfer on its own; `good` turns false at the first one it breaks.
struct TransferCheck<'a> {
    s: &'a Schedule,
    t: TransferRef<'a>,
    /// The transfer's index.
    i: usize,
    out: &'a mut Sink,
    good: bool,
}

impl TransferCheck<'_> {
    /// Records a violation of this transfer; the message is prefixed with its index.
    fn bad(&mut self, kind: ViolationKind, npu: Option<u32>, chunk: Option<u32>, msg: impl fmt::Display) {
        let i = self.i;
        let at = At { transfer: i, step: self.t.step };
        self.out.add(kind, Some(at), npu, chunk, format_args!("transfer {i}: {msg}"));
        self.good = false;
    }

    /// `src` and `dst` are NPUs of the topology.
    fn endpoints(&mut self) {
        let (s, t) = (self.s, self.t);
        let topo = &s.topology;
        for (role, v) in [("src", t.src), ("dst", t.dst)] {
            if (v as usize) >= topo.nodes() {
                self.bad(
                    ViolationKind::UnknownNode,
                    Some(v),
                    None,
                    format_args!("{role} {v} is not a node (topology has {} nodes)", topo.nodes()),
                );
            } else if !topo.is_npu(v as usize) {
                self.bad(
                    ViolationKind::NotAnNpu,
                    Some(v),
                    None,
                    format_args!("{role} {v} is a switch; transfers run between NPUs"),
                );
            }
        }
    }

    /// A local move (`src == dst`) names its slots, takes no path and moves every chunk.
    fn local_move(&mut self) {
        let (s, t) = (self.s, self.t);
        let v = t.src;
        let why = if t.dst_chunks.is_none() {
            Some(format!("src and dst are both {v}; a local move between slots names its dst_chunks"))
        } else if t.path.is_some() {
            Some(format!("a local move (src == dst == {v}) takes no path"))
        } else {
            t.chunks
                .iter()
                .zip(t.written())
                .find(|(a, b)| a == b)
                .map(|(&c, _)| format!("a local move at NPU {v} writes {} onto itself", slot_name(c, s.num_chunks)))
        };
        if let Some(why) = why {
            self.bad(ViolationKind::SelfTransfer, Some(v), None, why);
        }
    }

    /// The chunks: at least one, no slot written twice, every slot in range.
    fn chunk_list(&mut self) {
        use ViolationKind::*;
        let (s, t) = (self.s, self.t);
        if t.chunks.is_empty() {
            self.bad(EmptyTransfer, None, None, "carries no chunks");
        }
        // A chunk may feed several slots (with dst_chunks); a slot takes one write per message.
        let written = t.written();
        let mut seen: Vec<u32> = if written.len() > 1 { written.to_vec() } else { Vec::new() };
        seen.sort_unstable();
        for w in seen.windows(2) {
            if self.out.full() {
                return;
            }
            if w[0] == w[1] {
                let what = if t.dst_chunks.is_some() { "dst_chunks" } else { "chunks" };
                self.bad(
                    DuplicateChunk,
                    None,
                    Some(w[0]),
                    format_args!("{} appears twice in {what}", slot_name(w[0], s.num_chunks)),
                );
            }
        }
        let slots = s.slots();
        for &c in t.chunks.iter().chain(t.dst_chunks.iter().flat_map(|d| d.iter())) {
            if self.out.full() {
                return;
            }
            if (c as usize) >= slots {
                let scratch = if s.scratch.is_empty() { "" } else { " (chunks, then scratch slots)" };
                self.bad(
                    ChunkOutOfRange,
                    None,
                    Some(c),
                    format_args!("chunk {c} out of range: expected {}{scratch}", crate::error::ids(slots)),
                );
            }
        }
    }

    /// `dst_chunks`, if given: one slot per chunk, each a slot of the chunk written into it.
    fn dst_slots(&mut self) {
        let (s, t) = (self.s, self.t);
        let Some(d) = &t.dst_chunks else {
            return;
        };
        if d.len() != t.chunks.len() {
            self.bad(
                ViolationKind::SlotMismatch,
                None,
                None,
                format_args!(
                    "dst_chunks has {} entries, chunks {}: expected one slot per chunk",
                    d.len(),
                    t.chunks.len()
                ),
            );
        } else if let Some((&a, &b)) = t.chunks.iter().zip(d.iter()).find(|&(&a, &b)| {
            let (x, y) = (s.chunk_of(a), s.chunk_of(b));
            x.is_some() && y.is_some() && x != y
        }) {
            let name = |c: u32| slot_name(c, s.num_chunks);
            self.bad(
                ViolationKind::SlotMismatch,
                None,
                Some(b),
                format_args!(
                    "{} is written into {}, a slot of chunk {}: expected a slot of chunk {}",
                    name(a),
                    name(b),
                    s.chunk_of(b).unwrap_or(b),
                    s.chunk_of(a).unwrap_or(a)
                ),
            );
        }
    }

    /// Between two NPUs: a link, or a path over links.
    fn route(&mut self) {
        let (s, t) = (self.s, self.t);
        let topo = &s.topology;
        match &t.path {
            None => {
                if topo.link_index(t.src as usize, t.dst as usize).is_none() {
                    self.bad(
                        ViolationKind::MissingLink,
                        None,
                        None,
                        format_args!("no link {}->{} and no path given", t.src, t.dst),
                    );
                }
            }
            Some(p) => {
                if let Err(e) = check_path(topo, t.src, t.dst, p) {
                    self.bad(e.kind(), None, None, e);
                }
            }
        }
    }
}

/// Why a transfer's `path` is rejected. `Display` gives the violation's message (after the
/// transfer's name), `kind` its kind.
#[derive(Debug)]
enum PathError<'a> {
    /// Shorter than one link, or not from `src` to `dst`.
    Ends { path: &'a [u32], src: u32, dst: u32 },
    /// A node the topology does not have (it has `nodes`).
    UnknownNode { node: u32, nodes: usize },
    /// A node visited twice.
    Revisit { path: &'a [u32] },
    /// A hop `from -> to` that is not a link.
    NotALink { path: &'a [u32], from: u32, to: u32 },
}

impl PathError<'_> {
    fn kind(&self) -> ViolationKind {
        match self {
            PathError::UnknownNode { .. } => ViolationKind::UnknownNode,
            PathError::Ends { .. } | PathError::Revisit { .. } | PathError::NotALink { .. } => {
                ViolationKind::InvalidPath
            }
        }
    }
}

impl fmt::Display for PathError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Ends { path, src, dst } => {
                write!(f, "path {path:?} must start at src {src} and end at dst {dst}")
            }
            PathError::UnknownNode { node, nodes } => {
                write!(f, "path node {node} is not a node (topology has {nodes} nodes)")
            }
            PathError::Revisit { path } => write!(f, "path {path:?} visits a node twice"),
            PathError::NotALink { path, from, to } => {
                write!(f, "path {path:?} uses {from}->{to}, which is not a link")
            }
        }
    }
}

fn check_path<'p>(topo: &Topology, src: u32, dst: u32, path: &'p [u32]) -> Result<(), PathError<'p>> {
    if path.len() < 2 || path[0] != src || path[path.len() - 1] != dst {
        return Err(PathError::Ends { path, src, dst });
    }
    if let Some(&node) = path.iter().find(|&&v| v as usize >= topo.nodes()) {
        return Err(PathError::UnknownNode { node, nodes: topo.nodes() });
    }
    let mut sorted = path.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(PathError::Revisit { path });
    }
    for w in path.windows(2) {
        if topo.link_index(w[0] as usize, w[1] as usize).is_none() {
            return Err(PathError::NotALink { path, from: w[0], to: w[1] });
        }
    }
    Ok(())
}
