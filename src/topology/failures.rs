//! Failure transforms: remove links and NPUs from a topology, slow links down, and report what
//! stays connected.

use super::{Link, Topology};
use crate::error::{Errors, InputError};
use petgraph::graph::DiGraph;
use serde::{Deserialize, Serialize};

/// Links and NPUs to remove, and links that stay but run slower. A link `[u, v]` (failed or
/// degraded) means both directions unless `directed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct Failures {
    #[serde(default)]
    pub links: Vec<[usize; 2]>,
    #[serde(default)]
    pub npus: Vec<usize>,
    /// Links that still work, at a lower bandwidth or a higher latency (a link trained down,
    /// one NIC of a bond lost): the most common failure, and not a missing link.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded_links: Vec<DegradedLink>,
    #[serde(default)]
    pub directed: bool,
}
crate::strict::objects_only!(Failures, "failures (an object)", serialize);

/// A link's new parameters: either or both, each no better than the link's own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct DegradedLink {
    pub link: [usize; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gb_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<f64>,
}
crate::strict::objects_only!(DegradedLink, "a degraded link (an object)", serialize);

impl Failures {
    /// Nothing fails and nothing slows down.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty() && self.npus.is_empty() && self.degraded_links.is_empty()
    }
}

/// A link whose parameters a topology changed from another's, for a summary: its ends and both
/// parameters before and after.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkChange {
    pub src: usize,
    pub dst: usize,
    pub bandwidth_gb_per_s: f64,
    pub was_bandwidth_gb_per_s: f64,
    pub latency_ns: f64,
    pub was_latency_ns: f64,
}

/// Reachability among the NPUs that have not failed (switches and NPUs may forward).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Connectivity {
    pub live_npus: usize,
    /// Every live NPU can reach every other live NPU.
    pub connected: bool,
    /// Live NPUs grouped by strongly connected component, largest first.
    pub components: Vec<Vec<usize>>,
}

impl Topology {
    /// Removes the given links and NPUs. Failed NPUs keep their ids (schedules and
    /// operators refer to NPUs by id) but lose every link and join no default group.
    pub fn with_failures(&self, f: &Failures) -> Result<Topology, InputError> {
        let mut errs = Errors::default();
        let mut removed = vec![false; self.links.len()];
        // A failure listed twice is refused, as a degraded link or a topology's failed NPU
        // given twice is: a list of failures that repeats one is likely not the list meant.
        let mut listed = std::collections::HashSet::new();
        for (i, &[u, v]) in f.links.iter().enumerate() {
            if let Some(x) = [u, v].into_iter().find(|&x| x >= self.nodes()) {
                errs.push(format!("links[{i}]"), format!("{u}->{v}: {x} is not a node: expected {}", self.node_ids()));
                continue;
            }
            // The same pair twice; `[0, 1]` beside `[1, 0]` is how many write a link that
            // fails both ways, and stays accepted.
            if !listed.insert((u, v)) {
                errs.push(format!("links[{i}]"), format!("{u}->{v} is listed twice"));
                continue;
            }
            let mut found = false;
            for (a, b) in [(u, v), (v, u)].into_iter().take(if f.directed { 1 } else { 2 }) {
                if let Some(k) = self.link_index(a, b) {
                    removed[k] = true;
                    found = true;
                }
            }
            if !found {
                errs.push(
                    format!("links[{i}]"),
                    format!("no link {u}->{v} in the topology; {}", self.neighbours_of(u)),
                );
            }
        }
        let mut failed = self.failed_npus.clone();
        let mut named = std::collections::HashSet::new();
        for (i, &v) in f.npus.iter().enumerate() {
            if v >= self.npus {
                errs.push(
                    format!("npus[{i}]"),
                    format!("{v} is not an NPU: expected {}", crate::error::ids(self.npus)),
                );
            } else if !named.insert(v) {
                errs.push(format!("npus[{i}]"), format!("{v} is listed twice"));
            } else if self.failed_npus.contains(&v) {
                // As a link already gone is ("no link"): failing it again changes nothing, so
                // the list is likely not the one meant.
                errs.push(format!("npus[{i}]"), format!("{v} has failed already in this topology"));
            } else {
                failed.push(v);
            }
        }
        failed.sort_unstable();
        failed.dedup();
        // A link of an NPU that fails too changes nothing (the NPU takes it), as a degraded
        // one there is refused: the list is likely not the one meant.
        for (i, &[u, v]) in f.links.iter().enumerate() {
            if let Some(x) = [u, v].into_iter().find(|x| named.contains(x) && failed.binary_search(x).is_ok()) {
                errs.push(format!("links[{i}]"), format!("{u}->{v}: NPU {x} fails too, with all its links"));
            }
        }
        if failed.len() == self.npus && !f.npus.is_empty() {
            errs.push("npus", format!("every NPU ({}) would fail: at least one must stay", self.npus));
        }
        let slowed = self.slowed_links(f, &removed, &failed, &mut errs);
        errs.into_result(())?;
        let links = self
            .links
            .iter()
            .zip(&removed)
            .zip(slowed)
            .filter(|((l, gone), _)| {
                !**gone && failed.binary_search(&l.src).is_err() && failed.binary_search(&l.dst).is_err()
            })
            .map(|((l, _), slow)| slow.unwrap_or_else(|| l.clone()))
            .collect();
        Ok(Topology::from_sorted(self.npus, self.switches, links, failed))
    }

    /// Each link's degraded form (`None` where `f` leaves it as it is), with every problem of
    /// `f.degraded_links` pushed to `errs`: a link that is not there or also fails, a value that
    /// is not a bandwidth or latency, or one better than the link's own (a degradation cannot
    /// speed a link up: that is a new topology).
    fn slowed_links(&self, f: &Failures, removed: &[bool], failed: &[usize], errs: &mut Errors) -> Vec<Option<Link>> {
        let mut slowed: Vec<Option<Link>> = vec![None; self.links.len()];
        for (i, d) in f.degraded_links.iter().enumerate() {
            let at = |field: &str| format!("degraded_links[{i}]{field}");
            let [u, v] = d.link;
            if let Some(x) = [u, v].into_iter().find(|&x| x >= self.nodes()) {
                errs.push(at(".link"), format!("{u}->{v}: {x} is not a node: expected {}", self.node_ids()));
                continue;
            }
            if let Some(x) = [u, v].into_iter().find(|x| failed.binary_search(x).is_ok()) {
                errs.push(at(".link"), format!("{u}->{v}: NPU {x} failed, with all its links"));
                continue;
            }
            if d.bandwidth_gb_per_s.is_none() && d.latency_ns.is_none() {
                errs.push(at(""), "neither bandwidth_gb_per_s nor latency_ns: say what the link runs at".to_string());
                continue;
            }
            let least = crate::limits::MIN_BANDWIDTH_GB_PER_S;
            if let Some(bw) = d.bandwidth_gb_per_s.filter(|&bw| !crate::limits::bandwidth_ok(bw)) {
                let bw = crate::units::short(bw);
                errs.push(
                    at(".bandwidth_gb_per_s"),
                    format!("{bw}: expected a finite bandwidth of at least {least:e}"),
                );
                continue;
            }
            let most = crate::limits::MAX_LATENCY_NS;
            if let Some(lat) = d.latency_ns.filter(|&lat| !crate::limits::latency_ok(lat)) {
                let lat = crate::units::short(lat);
                errs.push(at(".latency_ns"), format!("{lat}: expected a latency from 0 to {most:e}"));
                continue;
            }
            // Both directions (unless directed) or neither: one error per entry, the first found.
            let mut found = Vec::new();
            let mut why = None;
            for (a, b) in [(u, v), (v, u)].into_iter().take(if f.directed { 1 } else { 2 }) {
                let Some(k) = self.link_index(a, b) else { continue };
                let l = &self.links[k];
                why = why.or_else(|| {
                    if removed[k] {
                        Some((".link", format!("{a}->{b} fails too: a link is either failed or degraded")))
                    } else if slowed[k].is_some() {
                        Some((".link", format!("{a}->{b} is degraded twice")))
                    } else if let Some(bw) = d.bandwidth_gb_per_s.filter(|&bw| bw > l.bandwidth_gb_per_s) {
                        let was = l.bandwidth_gb_per_s;
                        Some((
                            ".bandwidth_gb_per_s",
                            format!("{bw} GB/s is above {a}->{b}'s {was} GB/s: a degraded link cannot speed up"),
                        ))
                    } else if let Some(lat) = d.latency_ns.filter(|&lat| lat < l.latency_ns) {
                        let was = l.latency_ns;
                        Some((
                            ".latency_ns",
                            format!("{lat} ns is below {a}->{b}'s {was} ns: a degraded link cannot speed up"),
                        ))
                    } else {
                        None
                    }
                });
                found.push(k);
            }
            match why {
                _ if found.is_empty() => {
                    errs.push(at(".link"), format!("no link {u}->{v} in the topology; {}", self.neighbours_of(u)))
                }
                Some((field, why)) => errs.push(at(field), why),
                None => {
                    for k in found {
                        let l = &self.links[k];
                        slowed[k] = Some(Link {
                            bandwidth_gb_per_s: d.bandwidth_gb_per_s.unwrap_or(l.bandwidth_gb_per_s),
                            latency_ns: d.latency_ns.unwrap_or(l.latency_ns),
                            ..l.clone()
                        });
                    }
                }
            }
        }
        slowed
    }

    /// The links `self` runs slower or faster than `before` does (both directions listed), in
    /// `self`'s order; links only one of them has are not compared.
    pub fn changed_links(&self, before: &Topology) -> Vec<LinkChange> {
        self.links
            .iter()
            .filter_map(|l| {
                let was = &before.links[before.link_index(l.src, l.dst)?];
                (was.bandwidth_gb_per_s != l.bandwidth_gb_per_s || was.latency_ns != l.latency_ns).then_some(
                    LinkChange {
                        src: l.src,
                        dst: l.dst,
                        bandwidth_gb_per_s: l.bandwidth_gb_per_s,
                        was_bandwidth_gb_per_s: was.bandwidth_gb_per_s,
                        latency_ns: l.latency_ns,
                        was_latency_ns: was.latency_ns,
                    },
                )
            })
            .collect()
    }

    /// The directed links of `before` gone from this topology, as `[src, dst]`, but those of
    /// an NPU failed here and not there (they go with it): what a regeneration found failed.
    pub fn removed_links(&self, before: &Topology) -> Vec<[usize; 2]> {
        let newly_failed = |v: usize| self.is_failed(v) && !before.is_failed(v);
        before
            .links
            .iter()
            .filter(|l| !newly_failed(l.src) && !newly_failed(l.dst) && self.link_index(l.src, l.dst).is_none())
            .map(|l| [l.src, l.dst])
            .collect()
    }

    /// The node ids as a message writes them: `0..=15 (16 NPUs)`, `0..=19 (16 NPUs + 4 switches)`.
    fn node_ids(&self) -> String {
        match self.switches {
            0 => format!("{} ({} NPUs)", crate::error::ids(self.nodes()), self.npus),
            s => format!("{} ({} NPUs + {s} switches)", crate::error::ids(self.nodes()), self.npus),
        }
    }

    /// Where `u`'s links go, for a message about a link it does not have: "0 links to 1, 3, 4 and
    /// 12" (the first eight, then how many more).
    fn neighbours_of(&self, u: usize) -> String {
        const SHOWN: usize = 8;
        let to: Vec<String> = self.out_links(u).map(|k| self.links[k].dst.to_string()).collect();
        match to.len() {
            0 => format!("{u} has no links"),
            1 => format!("{u} links only to {}", to[0]),
            n if n <= SHOWN => format!("{u} links to {} and {}", to[..n - 1].join(", "), to[n - 1]),
            n => format!("{u} links to {} and {} more", to[..SHOWN].join(", "), n - SHOWN),
        }
    }

    /// Strongly connected components of the live NPUs.
    pub fn connectivity(&self) -> Connectivity {
        let live = self.live_npus();
        let mut components = self.parts_of(&live);
        components.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
        Connectivity { live_npus: live.len(), connected: components.len() <= 1, components }
    }

    /// `group`'s NPUs by strongly connected part (NPUs in different parts cannot reach each
    /// other both ways), the smallest part first, each in `group`'s order.
    pub fn parts_of(&self, group: &[usize]) -> Vec<Vec<usize>> {
        let scc = self.scc_ids();
        let mut parts: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for &v in group {
            parts.entry(scc[v]).or_default().push(v);
        }
        let mut parts: Vec<Vec<usize>> = parts.into_values().collect();
        parts.sort_by(|a, b| a.len().cmp(&b.len()).then(a[0].cmp(&b[0])));
        parts
    }

    /// Strongly-connected-component id of every node.
    pub(crate) fn scc_ids(&self) -> Vec<usize> {
        let mut g: DiGraph<(), ()> = DiGraph::with_capacity(self.nodes(), self.links.len());
        for _ in 0..self.nodes() {
            g.add_node(());
        }
        for l in &self.links {
            g.add_edge((l.src as u32).into(), (l.dst as u32).into(), ());
        }
        let mut comp = vec![0usize; self.nodes()];
        // Kosaraju's walk keeps its stack on the heap; petgraph's Tarjan recurses once a node
        // along a path, and overflowed the thread's stack on torus:128x256 (32,768 NPUs).
        for (i, c) in petgraph::algo::kosaraju_scc(&g).into_iter().enumerate() {
            for v in c {
                comp[v.index()] = i;
            }
        }
        comp
    }
}
