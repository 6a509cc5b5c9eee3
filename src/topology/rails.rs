//! Recognizes rail-optimized fabrics among arbitrary topologies: every NPU joined (both ways)
//! to one switch of each of two classes, node switches and rail switches, with exactly one NPU
//! per (node, rail) pair and no other link, so rail-aware baselines can address NPUs as
//! (node, rail) without the topology carrying its generator.

use super::Topology;

/// A rail-optimized fabric: `nodes` node switches of `gpus` NPUs each, and `gpus` rail switches
/// joining the NPUs of one index across the nodes. The node class is the one of fewer switches
/// (more NPUs each), whose uplinks carry the most of an all-to-all; with as many of each (a
/// square fabric, where either serves alike), the class of NPU 0's first switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rails {
    pub node_switches: Vec<usize>,
    pub rail_switches: Vec<usize>,
    /// The NPU of node a on rail g at `at[a * gpus + g]`.
    at: Vec<usize>,
}

impl Rails {
    pub fn nodes(&self) -> usize {
        self.node_switches.len()
    }
    pub fn gpus(&self) -> usize {
        self.rail_switches.len()
    }
    /// The NPU of node `a` on rail `g`.
    pub fn npu(&self, a: usize, g: usize) -> usize {
        self.at[a * self.gpus() + g]
    }
}

impl Topology {
    /// The rail fabric this topology is, link for link (ignoring link parameters), if any: at
    /// least two node and two rail switches, no failed NPU, no link between NPUs or between
    /// switches.
    pub fn infer_rails(&self) -> Option<Rails> {
        let (n, nodes) = (self.npus(), self.nodes());
        if n < 4 || self.switches() < 4 || !self.failed_npus().is_empty() || self.links().len() != 4 * n {
            return None;
        }
        // Each NPU: two switches, a link to and from each.
        let mut pair = Vec::with_capacity(n);
        for v in 0..n {
            let outs: Vec<usize> = self.links()[self.out_links(v)].iter().map(|l| l.dst).collect();
            let [s, t] = outs[..] else { return None };
            if !self.is_switch(s) || !self.is_switch(t) || self.in_links(v).len() != 2 {
                return None;
            }
            if self.link_index(s, v).is_none() || self.link_index(t, v).is_none() {
                return None;
            }
            pair.push([s, t]);
        }
        // 4n links, each NPU's four accounted for: no switch-to-switch link is left. Two-colour
        // the switches, each NPU joining one of each colour.
        let mut colour = vec![u8::MAX; nodes];
        let mut by_switch: Vec<Vec<usize>> = vec![Vec::new(); nodes];
        for (v, &[s, t]) in pair.iter().enumerate() {
            by_switch[s].push(v);
            by_switch[t].push(v);
        }
        colour[pair[0][0]] = 0;
        let mut stack = vec![pair[0][0]];
        while let Some(s) = stack.pop() {
            for &v in &by_switch[s] {
                let other = if pair[v][0] == s { pair[v][1] } else { pair[v][0] };
                if colour[other] == u8::MAX {
                    colour[other] = 1 - colour[s];
                    stack.push(other);
                } else if colour[other] == colour[s] {
                    return None;
                }
            }
        }
        let class = |c: u8| -> Vec<usize> { (n..nodes).filter(|&s| colour[s] == c).collect() };
        let (zero, one) = (class(0), class(1));
        if zero.len() + one.len() != self.switches() || zero.len() < 2 || one.len() < 2 {
            return None;
        }
        let (node_switches, rail_switches) = if one.len() < zero.len() { (one, zero) } else { (zero, one) };
        let (a_of, g_of) = (index_of(&node_switches, nodes), index_of(&rail_switches, nodes));
        let gpus = rail_switches.len();
        if node_switches.len() * gpus != n {
            return None;
        }
        let mut at = vec![usize::MAX; n];
        for (v, &[s, t]) in pair.iter().enumerate() {
            let (x, y) = if colour[s] == colour[node_switches[0]] { (s, t) } else { (t, s) };
            let cell = &mut at[a_of[x] * gpus + g_of[y]];
            if *cell != usize::MAX {
                return None;
            }
            *cell = v;
        }
        Some(Rails { node_switches, rail_switches, at })
    }
}

/// Position of each switch in `class` (by node id).
fn index_of(class: &[usize], nodes: usize) -> Vec<usize> {
    let mut idx = vec![usize::MAX; nodes];
    for (i, &s) in class.iter().enumerate() {
        idx[s] = i;
    }
    idx
}
