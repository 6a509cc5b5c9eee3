//! A test-only synthesizer, registered with the engine at run time: flooding. Each step, every
//! link carries the chunks its source holds and its destination lacks (each chunk to a
//! destination over one link only), until every NPU holds every chunk. Plain and slow, but
//! correct by construction, so it shows that a producer from outside the engine joins every
//! door and the conformance suite by one `registry::register` line, and that its schedules pass
//! the engine's gate like every other.

use ccsynth::collective::{Collective, CollectiveKind as K};
use ccsynth::engine::registry::{Produce, Synthesizer};
use ccsynth::schedule::{Schedule, Transfer};
use ccsynth::topology::Topology;

/// Its table entry.
pub const FLOOD: Synthesizer = Synthesizer {
    name: "test-flood",
    kind: "synthesizer",
    collectives: || vec![K::AllGather, K::Broadcast],
    options: &[],
    produce: Produce::Plain(flood),
};

/// The flooding schedule of an all-gather or a broadcast (whose postcondition is every chunk
/// at every member), on a fabric without switches.
fn flood(topo: &Topology, c: &Collective, stop: &dyn Fn() -> bool) -> Result<Schedule, String> {
    if topo.switches() > 0 {
        return Err("flooding runs on NPU-to-NPU links only; this fabric has switches".into());
    }
    let n = topo.npus();
    let mut have = vec![vec![false; c.num_chunks]; n];
    for [v, chunk] in c.precondition.iter() {
        have[v as usize][chunk as usize] = true;
    }
    let mut transfers = Vec::new();
    for step in 0u32.. {
        if stop() {
            return Err("stopped".into());
        }
        let mut claimed = have.clone();
        let mut sent = Vec::new();
        for l in topo.links() {
            let chunks: Vec<u32> =
                (0..c.num_chunks).filter(|&k| have[l.src][k] && !claimed[l.dst][k]).map(|k| k as u32).collect();
            if chunks.is_empty() {
                continue;
            }
            for &k in &chunks {
                claimed[l.dst][k as usize] = true;
            }
            sent.push(Transfer::copy(step, l.src, l.dst, chunks));
        }
        if sent.is_empty() {
            break;
        }
        have = claimed;
        transfers.extend(sent);
    }
    let mut s = Schedule::new(topo.clone(), c, FLOOD.name);
    s.transfers = transfers.into();
    Ok(s)
}
