//! Failure transforms: remove links and NPUs from a topology and report what stays connected.

use super::Topology;
use crate::error::{Errors, InputError};
use petgraph::graph::DiGraph;
use serde::{Deserialize, Serialize};

/// Links and NPUs to remove. A link `[u, v]` removes both directions unless `directed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct Failures {
    #[serde(default)]
    pub links: Vec<[usize; 2]>,
    #[serde(default)]
    pub npus: Vec<usize>,
    #[serde(default)]
    pub directed: bool,
}
crate::strict::objects_only!(Failures, "failures (an object)", serialize);

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
        for (i, &[u, v]) in f.links.iter().enumerate() {
            if let Some(x) = [u, v].into_iter().find(|&x| x >= self.nodes()) {
                errs.push(format!("links[{i}]"), format!("{u}->{v}: {x} is not a node: expected {}", self.node_ids()));
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
        for (i, &v) in f.npus.iter().enumerate() {
            if v >= self.npus {
                errs.push(
                    format!("npus[{i}]"),
                    format!("{v} is not an NPU: expected {}", crate::error::ids(self.npus)),
                );
            } else {
                failed.push(v);
            }
        }
        errs.into_result(())?;
        failed.sort_unstable();
        failed.dedup();
        let links = self
            .links
            .iter()
            .zip(&removed)
            .filter(|(l, gone)| {
                !**gone && failed.binary_search(&l.src).is_err() && failed.binary_search(&l.dst).is_err()
            })
            .map(|(l, _)| l.clone())
            .collect();
        Ok(Topology::from_sorted(self.npus, self.switches, links, failed))
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
        for (i, c) in petgraph::algo::tarjan_scc(&g).into_iter().enumerate() {
            for v in c {
                comp[v.index()] = i;
            }
        }
        comp
    }
}
