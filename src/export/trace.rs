//! Chrome / Perfetto trace of a replayed schedule: one track per link, one complete slice per
//! transfer on every link of its path, for the time that link carries it (a relayed transfer's
//! hop; one track per NPU for local moves), times in µs.
//! Opens in ui.perfetto.dev and chrome://tracing (the Trace Event Format's JSON object form).

use crate::schedule::{Op, Schedule};
use crate::sim::TransferTime;
use serde_json::{Value, json};

/// Chunk ids listed per slice; longer lists are cut (the slice's `chunk_count` has the size).
const LISTED_CHUNKS: usize = 16;

/// Slices the trace holds for `s`: one per link of each transfer's path, one per local move.
pub fn slices(s: &Schedule) -> usize {
    s.transfers.iter().map(|t| if t.is_local() { 1 } else { t.path.as_ref().map_or(1, |p| p.len() - 1) }).sum()
}

/// The trace. `times` and `links` are the replay's (`sim::simulate_with_hops`,
/// `sim::link_spans`), indexed as `s.transfers`.
pub(crate) fn chrome_trace(s: &Schedule, times: &[TransferTime], links: &[Vec<(usize, TransferTime)>]) -> String {
    const LINKS: u32 = 1;
    const NPUS: u32 = 2;
    let topo = &s.topology;
    // Written event by event: the text is all the memory a trace of millions of slices takes.
    let mut out: Vec<u8> = Vec::with_capacity(64 + slices(s) * 320);
    out.extend_from_slice(b"{\"traceEvents\":[");
    let mut first = true;
    let mut push = |e: Value| {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut out, &e).expect("writing JSON to memory");
    };
    push(json!({"ph": "M", "pid": LINKS, "tid": 0, "name": "process_name", "args": {"name": "links"}}));
    push(json!({"ph": "M", "pid": NPUS, "tid": 0, "name": "process_name", "args": {"name": "local moves (NPUs)"}}));
    let mut named_links = vec![false; topo.links().len()];
    let mut named_npus = vec![false; topo.npus()];
    for (i, t) in s.transfers.iter().enumerate() {
        let time = times[i];
        let op = match t.op {
            Op::Copy => "copy",
            Op::Reduce => "reduce",
        };
        let shown: Vec<u32> = t.chunks.iter().take(LISTED_CHUNKS).copied().collect();
        let args = json!({
            "transfer": i,
            "step": t.step,
            "src": t.src,
            "dst": t.dst,
            "op": op,
            "chunks": shown,
            "chunk_count": t.chunks.len(),
            "bytes": s.chunk_size_bytes * t.wire_chunks() as f64,
            "start_ns": time.start_ns,
            "end_ns": time.end_ns,
        });
        let name = format!(
            "{op} {}→{} ({} chunk{})",
            t.src,
            t.dst,
            t.chunks.len(),
            if t.chunks.len() == 1 { "" } else { "s" }
        );
        let slice = |pid: u32, tid: usize, span: TransferTime| {
            json!({
                "ph": "X", "cat": op, "name": name, "pid": pid, "tid": tid,
                "ts": span.start_ns / 1e3, "dur": (span.end_ns - span.start_ns) / 1e3, "args": args,
            })
        };
        if links[i].is_empty() {
            let npu = t.dst as usize;
            if !named_npus[npu] {
                named_npus[npu] = true;
                push(
                    json!({"ph": "M", "pid": NPUS, "tid": npu, "name": "thread_name", "args": {"name": format!("NPU {npu}")}}),
                );
            }
            push(slice(NPUS, npu, time));
            continue;
        }
        for &(l, span) in &links[i] {
            if !named_links[l] {
                named_links[l] = true;
                let link = &topo.links()[l];
                let label =
                    format!("{}→{} ({} GB/s, {} ns)", link.src, link.dst, link.bandwidth_gb_per_s, link.latency_ns);
                push(json!({"ph": "M", "pid": LINKS, "tid": l, "name": "thread_name", "args": {"name": label}}));
                // Tracks in link order, not in order of first use.
                push(
                    json!({"ph": "M", "pid": LINKS, "tid": l, "name": "thread_sort_index", "args": {"sort_index": l}}),
                );
            }
            push(slice(LINKS, l, span));
        }
    }
    let other = json!({
        "algorithm": s.algorithm,
        "collective": s.collective.kind.name(),
        "size_bytes": s.collective.size_bytes,
        "collective_time_ns": s.collective_time_ns,
    });
    out.extend_from_slice(b"],\"displayTimeUnit\":\"ns\",\"otherData\":");
    serde_json::to_writer(&mut out, &other).expect("writing JSON to memory");
    out.extend_from_slice(b"}\n");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}
