//! The program's limits checked and its XML written: thread block ids (the blocks waited for
//! first), steps per block, blocks per GPU, nodes per rank, then one `<gpu>` per rank.
use super::super::{MAX_DEPID, MAX_NODES_PER_RANK, MAX_OFFSET, MscclOptions};
use super::{Builder, MscclError, OpId, Role};
use crate::export::layout::Cell;
use crate::schedule::Schedule;
use quick_xml::Writer;
use quick_xml::events::BytesStart;

impl Builder<'_> {
    /// Thread block ids per GPU: the blocks another block waits for first (the executor keeps
    /// a dependency's block id in 8 signed bits), each group in creation order. Returns each
    /// GPU's blocks in id order and each block's id.
    fn tb_ids(&self) -> (Vec<Vec<u32>>, Vec<u32>) {
        let mut per_rank: Vec<Vec<u32>> = vec![Vec::new(); self.layout.p];
        for waited in [true, false] {
            for (i, t) in self.tbs.iter().enumerate() {
                if t.ops.iter().any(|o| o.has_dep) == waited {
                    per_rank[t.rank as usize].push(i as u32);
                }
            }
        }
        let mut local_id = vec![0u32; self.tbs.len()];
        for tbs in &per_rank {
            for (id, &tb) in tbs.iter().enumerate() {
                local_id[tb as usize] = id as u32;
            }
        }
        (per_rank, local_id)
    }

    pub(in crate::export::msccl) fn check_limits(&self) -> Result<(), MscclError> {
        let max = self.target.max_steps();
        let (per_rank, local_id) = self.tb_ids();
        for (r, tbs) in per_rank.iter().enumerate() {
            let gpu = r as u32;
            let target = self.target.name();
            if tbs.len() > self.target.max_tbs() {
                return Err(MscclError::TooManyThreadBlocks {
                    gpu,
                    tbs: tbs.len(),
                    max: self.target.max_tbs(),
                    target,
                });
            }
            let waited = tbs.iter().filter(|&&tb| self.tbs[tb as usize].ops.iter().any(|o| o.has_dep)).count();
            if waited > MAX_DEPID + 1 {
                return Err(MscclError::DependencyIds { gpu, waited });
            }
            let mut steps = 0;
            for &tb in tbs {
                let t = &self.tbs[tb as usize];
                if t.steps > max {
                    let tb = local_id[tb as usize];
                    return Err(MscclError::TooManySteps { gpu, tb, steps: t.steps, max, target });
                }
                steps += t.steps;
                if let Some(c) = t.ops.iter().flat_map(|o| [o.src, o.dst]).flatten().find(|c| c.off > MAX_OFFSET) {
                    return Err(MscclError::OffsetOutOfRange { gpu, offset: c.off, buffer: c.buf.name() });
                }
            }
            let nodes = 1 + self.layout.p + tbs.len() + steps;
            if nodes > MAX_NODES_PER_RANK {
                return Err(MscclError::TooManyNodes { gpu, nodes, max: MAX_NODES_PER_RANK });
            }
        }
        Ok(())
    }

    pub(in crate::export::msccl) fn write(&self, s: &Schedule, opts: &MscclOptions) -> String {
        let p = self.layout.p;
        // Thread block ids per GPU, and each step's index counting the no-ops placed before it.
        let (per_rank, local_id) = self.tb_ids();
        let step_index: Vec<Vec<u32>> = self
            .tbs
            .iter()
            .map(|t| {
                let mut at = 0u32;
                t.ops
                    .iter()
                    .map(|o| {
                        at += o.deps.len().max(1) as u32;
                        at - 1
                    })
                    .collect()
            })
            .collect();
        let nchannels = self.tbs.iter().map(|t| t.chan + 1).max().unwrap_or(1);
        // The default within MAX_NAME_BYTES and printable, whatever the schedule's `algorithm`.
        let algorithm = s.algorithm.as_deref().unwrap_or("schedule");
        let name = opts.name.clone().unwrap_or_else(|| {
            let prefix = "ccsynth-";
            format!("{prefix}{}", crate::export::printable(algorithm, crate::export::MAX_NAME_BYTES - prefix.len()))
        });
        let n = self.layout.i_chunks.max(self.layout.o_chunks);
        let min = opts.min_bytes.unwrap_or(0);
        let max = opts.max_bytes.unwrap_or(super::super::MAX_BYTES).min(super::super::MAX_BYTES);

        let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
        let mut algo = BytesStart::new("algo");
        for (k, v) in [
            ("name", name),
            ("proto", opts.protocol.name().to_string()),
            ("nchannels", nchannels.to_string()),
            ("nchunksperloop", n.to_string()),
            ("ngpus", p.to_string()),
            ("coll", self.layout.coll.to_string()),
            ("inplace", "1".into()),
            ("outofplace", "1".into()),
            ("minBytes", min.to_string()),
            ("maxBytes", max.to_string()),
        ] {
            algo.push_attribute((k, v.as_str()));
        }
        let io = |r: std::io::Result<()>| r.expect("writing to memory");
        io(w.write_event(quick_xml::events::Event::Start(algo)));
        for (r, tbs) in per_rank.iter().enumerate() {
            let mut gpu = BytesStart::new("gpu");
            gpu.push_attribute(("id", r.to_string().as_str()));
            gpu.push_attribute(("i_chunks", self.layout.i_chunks.to_string().as_str()));
            gpu.push_attribute(("o_chunks", self.layout.o_chunks.to_string().as_str()));
            gpu.push_attribute(("s_chunks", self.place.scratch_next[r].to_string().as_str()));
            io(w.write_event(quick_xml::events::Event::Start(gpu)));
            for &tbi in tbs {
                let t = &self.tbs[tbi as usize];
                let (send, recv) = match t.role {
                    Role::Send(b) => (b as i64, -1),
                    Role::Recv(a) => (-1, a as i64),
                    Role::Local => (-1, -1),
                };
                let mut tb = BytesStart::new("tb");
                tb.push_attribute(("id", local_id[tbi as usize].to_string().as_str()));
                tb.push_attribute(("send", send.to_string().as_str()));
                tb.push_attribute(("recv", recv.to_string().as_str()));
                tb.push_attribute(("chan", t.chan.to_string().as_str()));
                io(w.write_event(quick_xml::events::Event::Start(tb)));
                let mut s_idx = 0u32;
                for o in &t.ops {
                    let dep = |d: &OpId| (local_id[d.tb as usize], step_index[d.tb as usize][d.idx as usize]);
                    // Extra dependencies ride on no-op steps before the step; the step
                    // itself carries the last one (the executor requires it).
                    for d in o.deps.iter().take(o.deps.len().saturating_sub(1)) {
                        let (id, st) = dep(d);
                        io(write_step(&mut w, s_idx, "nop", None, None, 0, Some((id, st)), false));
                        s_idx += 1;
                    }
                    let last = o.deps.last().map(dep);
                    io(write_step(&mut w, s_idx, o.ty.code(), o.src, o.dst, o.cnt, last, o.has_dep));
                    s_idx += 1;
                }
                io(w.write_event(quick_xml::events::Event::End(quick_xml::events::BytesEnd::new("tb"))));
            }
            io(w.write_event(quick_xml::events::Event::End(quick_xml::events::BytesEnd::new("gpu"))));
        }
        io(w.write_event(quick_xml::events::Event::End(quick_xml::events::BytesEnd::new("algo"))));
        let mut out = String::from_utf8(w.into_inner()).expect("quick-xml writes UTF-8");
        out.push('\n');
        out
    }
}

/// One `<step>` element, every attribute present (the executor requires them all).
#[allow(clippy::too_many_arguments)]
fn write_step(
    w: &mut Writer<Vec<u8>>,
    s: u32,
    ty: &str,
    src: Option<Cell>,
    dst: Option<Cell>,
    cnt: u32,
    dep: Option<(u32, u32)>,
    has_dep: bool,
) -> std::io::Result<()> {
    let (srcbuf, srcoff) = src.map(|c| (c.buf.letter(), c.off as i64)).unwrap_or(("i", -1));
    let (dstbuf, dstoff) = dst.map(|c| (c.buf.letter(), c.off as i64)).unwrap_or(("o", -1));
    let (depid, deps) = dep.map(|(a, b)| (a as i64, b as i64)).unwrap_or((-1, -1));
    let mut e = BytesStart::new("step");
    for (k, v) in [
        ("s", s.to_string()),
        ("type", ty.to_string()),
        ("srcbuf", srcbuf.to_string()),
        ("srcoff", srcoff.to_string()),
        ("dstbuf", dstbuf.to_string()),
        ("dstoff", dstoff.to_string()),
        ("cnt", cnt.to_string()),
        ("depid", depid.to_string()),
        ("deps", deps.to_string()),
        ("hasdep", if has_dep { "1" } else { "0" }.to_string()),
    ] {
        e.push_attribute((k, v.as_str()));
    }
    w.write_event(quick_xml::events::Event::Empty(e))
}
