//! Topology model: NPUs `0..npus` and switches `npus..npus+switches`, joined by directed
//! α-β links; JSON input with conveniences, and the canonical sorted output.

mod failures;
mod grid;
mod rails;
mod spec;

pub use failures::{Connectivity, DegradedLink, Failures, LinkChange};
pub use grid::Grid;
pub use rails::Rails;
pub use spec::{parse_spec, parse_spec_capped};

use crate::error::{Errors, InputError};
use crate::limits;
use serde::{Deserialize, Serialize};

/// One directed link. Moving `m` bytes takes `latency_ns + m / bandwidth_gb_per_s` ns
/// (1 GB/s = 1 byte/ns).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Link {
    pub src: usize,
    pub dst: usize,
    pub latency_ns: f64,
    pub bandwidth_gb_per_s: f64,
}

impl Link {
    pub fn time_ns(&self, bytes: f64) -> f64 {
        self.latency_ns + bytes / self.bandwidth_gb_per_s
    }
}

/// Latency and bandwidth of a link, as given in `default_link` or by a generator.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct LinkParams {
    pub latency_ns: f64,
    pub bandwidth_gb_per_s: f64,
}
crate::strict::objects_only!(LinkParams, "a link's parameters (an object)", serialize);

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams { latency_ns: 500.0, bandwidth_gb_per_s: 100.0 }
    }
}

/// The topology JSON as users write it (before normalization).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct TopologyInput {
    pub npus: usize,
    #[serde(default)]
    pub switches: usize,
    #[serde(default)]
    pub links: Vec<LinkInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_link: Option<LinkParams>,
    /// NPUs that have failed: they keep their ids but have no links and join no collective.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_npus: Vec<usize>,
}
crate::strict::objects_only!(TopologyInput, "a topology (an object)", serialize);

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct LinkInput {
    pub src: usize,
    pub dst: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gb_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bidirectional: bool,
}
crate::strict::objects_only!(LinkInput, "a link (an object)", serialize);

/// A validated topology. Invariants: links are sorted by `(src, dst)`, unique, free of
/// self-loops, within range, with finite positive bandwidth and finite non-negative
/// latency; failed NPUs have no links. `out_start` is the CSR index into `links`.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    npus: usize,
    switches: usize,
    links: Vec<Link>,
    failed_npus: Vec<usize>,
    out_start: Vec<usize>,
    in_start: Vec<usize>,
    in_links: Vec<usize>,
}

#[derive(Serialize)]
struct CanonicalOut<'a> {
    npus: usize,
    switches: usize,
    links: &'a [Link],
    #[serde(skip_serializing_if = "<[usize]>::is_empty")]
    failed_npus: &'a [usize],
}

impl Serialize for Topology {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CanonicalOut { npus: self.npus, switches: self.switches, links: &self.links, failed_npus: &self.failed_npus }
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Topology {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let input = <TopologyInput as Deserialize>::deserialize(d)?; // the trait: objects only
        Topology::from_input(input).map_err(serde::de::Error::custom)
    }
}

impl Topology {
    /// Parses topology JSON, naming the JSON path of any problem.
    pub fn from_json(text: &str) -> Result<Topology, InputError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let input: TopologyInput =
            serde_path_to_error::deserialize(&mut *de).map_err(|e| InputError::from_json_text(e, text))?;
        InputError::json_end(de)?;
        Topology::from_input(input)
    }

    /// Validates and normalizes user input; reports every problem found.
    pub fn from_input(input: TopologyInput) -> Result<Topology, InputError> {
        let mut errs = Errors::default();
        let Some(nodes) = check_node_counts(&mut errs, &input) else {
            return errs.into_result(Topology::empty());
        };
        if let Some(d) = &input.default_link {
            check_params(&mut errs, "default_link", Some(d.latency_ns), Some(d.bandwidth_gb_per_s));
        }
        let mut links = expand_links(&mut errs, &input, nodes);
        if links.len() > limits::MAX_LINKS {
            errs.push("links", format!("{} directed links exceed the limit of {}", links.len(), limits::MAX_LINKS));
            return errs.into_result(Topology::empty());
        }
        links.sort_by_key(|(i, l)| (l.src, l.dst, *i));
        check_duplicate_links(&mut errs, &links);
        let failed = check_failed_npus(&mut errs, &input);
        if !errs.is_empty() {
            return errs.into_result(Topology::empty());
        }
        check_links_avoid_failed(&mut errs, &links, &failed);
        let links = links.into_iter().map(|(_, l)| l).collect();
        errs.into_result(())?;
        Ok(Topology::from_sorted(input.npus, input.switches, links, failed))
    }

    fn empty() -> Topology {
        Topology::from_sorted(0, 0, Vec::new(), Vec::new())
    }

    /// Builds the indices; `links` must already satisfy the invariants.
    pub(crate) fn from_sorted(npus: usize, switches: usize, mut links: Vec<Link>, failed_npus: Vec<usize>) -> Topology {
        // A latency of -0 is 0 (it was written back as `-0.0`, so one topology had two canonical
        // forms and two digests).
        for l in &mut links {
            l.latency_ns += 0.0;
        }
        let nodes = npus + switches;
        let mut out_start = vec![0usize; nodes + 1];
        let mut in_start = vec![0usize; nodes + 1];
        for l in &links {
            out_start[l.src + 1] += 1;
            in_start[l.dst + 1] += 1;
        }
        for v in 0..nodes {
            out_start[v + 1] += out_start[v];
            in_start[v + 1] += in_start[v];
        }
        let mut fill = in_start.clone();
        let mut in_links = vec![0usize; links.len()];
        for (i, l) in links.iter().enumerate() {
            in_links[fill[l.dst]] = i;
            fill[l.dst] += 1;
        }
        Topology { npus, switches, links, failed_npus, out_start, in_start, in_links }
    }

    /// Builds a topology from links in any order (used by generators and transforms).
    /// Later duplicates of a `(src, dst)` pair are dropped.
    pub(crate) fn from_links(npus: usize, switches: usize, mut links: Vec<Link>, failed: Vec<usize>) -> Topology {
        links.sort_by_key(|l| (l.src, l.dst));
        links.dedup_by_key(|l| (l.src, l.dst));
        Topology::from_sorted(npus, switches, links, failed)
    }

    /// The SHA-256 of the canonical JSON (what `ccsynth topology` prints), in hex: the store's
    /// key for a topology, and what tells two comparisons' fabrics apart.
    pub fn digest(&self) -> String {
        json_digest(&serde_json::to_string(self).unwrap_or_default())
    }

    pub fn npus(&self) -> usize {
        self.npus
    }
    pub fn switches(&self) -> usize {
        self.switches
    }
    pub fn nodes(&self) -> usize {
        self.npus + self.switches
    }
    pub fn is_npu(&self, v: usize) -> bool {
        v < self.npus
    }
    pub fn is_switch(&self, v: usize) -> bool {
        v >= self.npus && v < self.nodes()
    }
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    pub fn failed_npus(&self) -> &[usize] {
        &self.failed_npus
    }
    pub fn is_failed(&self, v: usize) -> bool {
        self.failed_npus.binary_search(&v).is_ok()
    }
    /// NPUs that have not failed, in id order.
    pub fn live_npus(&self) -> Vec<usize> {
        (0..self.npus).filter(|&v| !self.is_failed(v)).collect()
    }
    /// Links on a fewest-hop path from `src` to every node, switches included (`usize::MAX`:
    /// unreachable).
    pub fn hop_distances(&self, src: usize) -> Vec<usize> {
        let mut dist = vec![usize::MAX; self.nodes()];
        let mut q = std::collections::VecDeque::from([src]);
        dist[src] = 0;
        while let Some(u) = q.pop_front() {
            for l in &self.links()[self.out_links(u)] {
                if dist[l.dst] == usize::MAX {
                    dist[l.dst] = dist[u] + 1;
                    q.push_back(l.dst);
                }
            }
        }
        dist
    }
    /// Index range into `links()` of the links leaving `v`.
    pub fn out_links(&self, v: usize) -> std::ops::Range<usize> {
        self.out_start[v]..self.out_start[v + 1]
    }
    /// Indices into `links()` of the links entering `v`.
    pub fn in_links(&self, v: usize) -> &[usize] {
        &self.in_links[self.in_start[v]..self.in_start[v + 1]]
    }
    /// Index of the link `src -> dst`, if it exists.
    pub fn link_index(&self, src: usize, dst: usize) -> Option<usize> {
        if src >= self.nodes() {
            return None;
        }
        let r = self.out_links(src);
        let base = r.start;
        self.links[r].binary_search_by_key(&dst, |l| l.dst).ok().map(|i| base + i)
    }
    pub fn link(&self, src: usize, dst: usize) -> Option<&Link> {
        self.link_index(src, dst).map(|i| &self.links[i])
    }
    /// Sum of the bandwidths of the links entering `v`, GB/s.
    pub fn ingress_gb_per_s(&self, v: usize) -> f64 {
        self.in_links(v).iter().map(|&i| self.links[i].bandwidth_gb_per_s).sum()
    }

    /// The same nodes with every link reversed (for combining collectives by inversion).
    pub fn transposed(&self) -> Topology {
        let links = self.links.iter().map(|l| Link { src: l.dst, dst: l.src, ..l.clone() }).collect();
        Topology::from_links(self.npus, self.switches, links, self.failed_npus.clone())
    }

    /// Every link has a link back of the same latency and bandwidth: a schedule's mirror (each
    /// transfer the other way, in reverse order) takes its time on it.
    pub fn is_paired(&self) -> bool {
        self.links.iter().all(|l| {
            self.link(l.dst, l.src)
                .is_some_and(|b| (b.latency_ns, b.bandwidth_gb_per_s) == (l.latency_ns, l.bandwidth_gb_per_s))
        })
    }

    /// The canonical JSON text (every directed link, fully specified, sorted).
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("topology serializes")
    }
}

fn check_params(errs: &mut Errors, p: &str, lat: Option<f64>, bw: Option<f64>) {
    if let Some(lat) = lat
        && !limits::latency_ok(lat)
    {
        let most = limits::MAX_LATENCY_NS;
        let lat = crate::units::short(lat);
        errs.push(format!("{p}.latency_ns"), format!("{lat} is invalid: expected a latency from 0 to {most:e} ns"));
    }
    if let Some(bw) = bw
        && !limits::bandwidth_ok(bw)
    {
        let least = limits::MIN_BANDWIDTH_GB_PER_S;
        let bw = crate::units::short(bw);
        errs.push(
            format!("{p}.bandwidth_gb_per_s"),
            format!("{bw} is invalid: expected a finite bandwidth of at least {least:e} GB/s"),
        );
    }
}

/// The node count, or `None` once it exceeds the limit: nothing else is worth checking then.
fn check_node_counts(errs: &mut Errors, input: &TopologyInput) -> Option<usize> {
    if input.npus == 0 {
        errs.push("npus", "expected at least 1 NPU, got 0");
    }
    let nodes = input.npus.saturating_add(input.switches);
    if nodes > limits::MAX_NODES {
        errs.push("npus", format!("npus + switches = {nodes} exceeds the limit of {} nodes", limits::MAX_NODES));
        return None;
    }
    Some(nodes)
}

/// The directed links of every valid input link (both ways if bidirectional), tagged with its index for messages.
fn expand_links(errs: &mut Errors, input: &TopologyInput, nodes: usize) -> Vec<(usize, Link)> {
    let mut links = Vec::with_capacity(input.links.len() * 2);
    for (i, l) in input.links.iter().enumerate() {
        let p = format!("links[{i}]");
        let before = errs.len();
        let (lat, bw) = check_link(errs, &p, l, input, nodes);
        if errs.len() > before {
            continue;
        }
        let (lat, bw) = (lat.unwrap_or(0.0), bw.unwrap_or(1.0));
        links.push((i, Link { src: l.src, dst: l.dst, latency_ns: lat, bandwidth_gb_per_s: bw }));
        if l.bidirectional {
            links.push((i, Link { src: l.dst, dst: l.src, latency_ns: lat, bandwidth_gb_per_s: bw }));
        }
    }
    links
}

/// Checks one input link at path `p`, returning its latency and bandwidth with `default_link` filled in.
fn check_link(
    errs: &mut Errors,
    p: &str,
    l: &LinkInput,
    input: &TopologyInput,
    nodes: usize,
) -> (Option<f64>, Option<f64>) {
    for (field, id) in [("src", l.src), ("dst", l.dst)] {
        if id >= nodes {
            errs.push(
                format!("{p}.{field}"),
                format!(
                    "node {id} out of range: expected 0..={} ({} NPUs + {} switches)",
                    nodes.saturating_sub(1),
                    input.npus,
                    input.switches
                ),
            );
        }
    }
    if l.src == l.dst {
        errs.push(format!("{p}.dst"), format!("self-loop {0}->{0}: expected src != dst", l.src));
    }
    let lat = l.latency_ns.or(input.default_link.map(|d| d.latency_ns));
    let bw = l.bandwidth_gb_per_s.or(input.default_link.map(|d| d.bandwidth_gb_per_s));
    if lat.is_none() {
        errs.push(format!("{p}.latency_ns"), "missing: expected a latency in ns here or a top-level default_link");
    }
    if bw.is_none() {
        errs.push(
            format!("{p}.bandwidth_gb_per_s"),
            "missing: expected a bandwidth in GB/s here or a top-level default_link",
        );
    }
    check_params(errs, p, l.latency_ns, l.bandwidth_gb_per_s);
    (lat, bw)
}

/// Reports each repeat of a directed link; `links` must be sorted by `(src, dst, index)`.
fn check_duplicate_links(errs: &mut Errors, links: &[(usize, Link)]) {
    for w in links.windows(2) {
        if w[0].1.src == w[1].1.src && w[0].1.dst == w[1].1.dst {
            errs.push(
                format!("links[{}]", w[1].0),
                format!(
                    "duplicate link {}->{} (also given by links[{}]); expected each directed link once",
                    w[1].1.src, w[1].1.dst, w[0].0
                ),
            );
        }
    }
}

/// The failed NPUs sorted and deduplicated, reporting ids that are not NPUs and repeats.
fn check_failed_npus(errs: &mut Errors, input: &TopologyInput) -> Vec<usize> {
    let mut failed = input.failed_npus.clone();
    for (i, &v) in input.failed_npus.iter().enumerate() {
        if v >= input.npus {
            errs.push(
                format!("failed_npus[{i}]"),
                format!("{v} is not an NPU: expected {}", crate::error::ids(input.npus)),
            );
        }
    }
    failed.sort_unstable();
    failed.dedup();
    if failed.len() != input.failed_npus.len() {
        // Named at its second listing, as a group's repeat is (`group[3]: NPU 2 is listed twice`).
        let mut seen = std::collections::HashSet::new();
        if let Some((i, v)) = input.failed_npus.iter().enumerate().find(|(_, v)| !seen.insert(**v)) {
            errs.push(format!("failed_npus[{i}]"), format!("NPU {v} is listed twice"));
        }
    } else if input.npus > 0 && failed.len() == input.npus {
        errs.push("failed_npus", format!("every NPU ({}) is failed: at least one must be live", input.npus));
    }
    failed
}

/// Reports links touching a failed NPU, which must have none; `failed` must be sorted.
fn check_links_avoid_failed(errs: &mut Errors, links: &[(usize, Link)], failed: &[usize]) {
    for (i, l) in links {
        for v in [l.src, l.dst] {
            if failed.binary_search(&v).is_ok() {
                errs.push(format!("links[{i}]"), format!("link {}->{} touches failed NPU {v}", l.src, l.dst));
            }
        }
    }
}

/// Reads a topology from JSON text or a generator spec (`torus:4x4@bw=50`).
pub fn parse_topology(text_or_spec: &str) -> Result<Topology, InputError> {
    let t = text_or_spec.trim_start();
    if t.starts_with('{') { Topology::from_json(t) } else { parse_spec(t) }
}

/// `Topology::digest` of a topology's canonical JSON already written out.
pub fn json_digest(canonical: &str) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(canonical.as_bytes()))
}
