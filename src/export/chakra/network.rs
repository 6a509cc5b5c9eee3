//! ASTRA-sim's network file for a schedule's topology (`network_yaml`, where its
//! congestion-aware backend has one like it) and the export's files as one tar archive.

use crate::schedule::Schedule;

/// Added to the exported latency: ASTRA-sim floors each hop's time to a whole ns.
pub const ROUNDING_NS: f64 = 0.5;

/// ASTRA-sim's congestion-aware network for the schedule's topology, when it has one: a ring
/// (NPU i to i ± 1), a fully connected graph or one switch, every link with the same bandwidth
/// and latency and no failed NPU. Bandwidth in ASTRA-sim's GB/s (2^30 B/s); ccsynth's is 10^9.
pub(super) fn network_yaml(s: &Schedule) -> Result<String, String> {
    let t = &s.topology;
    let n = t.npus();
    let links = t.links();
    let first = links.first().ok_or("the topology has no links")?;
    if links.iter().any(|l| l.latency_ns != first.latency_ns || l.bandwidth_gb_per_s != first.bandwidth_gb_per_s) {
        return Err("its links differ in bandwidth or latency; ASTRA-sim's congestion-aware backend has one of each per dimension".into());
    }
    if !t.failed_npus().is_empty() {
        return Err("it has failed NPUs, which ASTRA-sim's stock networks do not".into());
    }
    let has = |a: usize, b: usize| t.link(a, b).is_some();
    let shape = if t.switches() == 0 && n >= 2 && links.len() == n * (n - 1) {
        "FullyConnected"
    } else if t.switches() == 0
        && n >= 3
        && links.len() == 2 * n
        && (0..n).all(|i| has(i, (i + 1) % n) && has((i + 1) % n, i))
    {
        "Ring"
    } else if t.switches() == 1 && links.len() == 2 * n && (0..n).all(|i| has(i, n) && has(n, i)) {
        "Switch"
    } else {
        return Err("it is not a ring, a fully connected graph or one switch, the single-dimension networks of ASTRA-sim's congestion-aware backend".into());
    };
    let bw = first.bandwidth_gb_per_s * 1e9 / (1u64 << 30) as f64;
    // ASTRA-sim delivers a hop floor(latency + bytes/bw) after it starts: half a nanosecond more
    // latency makes that the nearest whole ns instead of the one below (at 64 KiB on `ring:4`
    // the floor alone lost 0.127%).
    Ok(format!(
        "# ccsynth's {} GB/s (10^9 B/s) in ASTRA-sim's GB/s (2^30 B/s); ccsynth's latency of {} ns + {ROUNDING_NS} ns, so ASTRA-sim's whole-ns hops round instead of flooring\ntopology: [ {shape} ]\nnpus_count: [ {n} ]\nbandwidth: [ {bw} ]\nlatency: [ {} ]\n",
        first.bandwidth_gb_per_s,
        first.latency_ns,
        first.latency_ns + ROUNDING_NS
    ))
}

/// The files as one uncompressed tar archive (what the service sends).
pub fn to_tar(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, bytes) in files {
        let mut h = tar::Header::new_ustar();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        b.append_data(&mut h, name, bytes.as_slice()).expect("writing to memory");
    }
    b.into_inner().expect("writing to memory")
}
