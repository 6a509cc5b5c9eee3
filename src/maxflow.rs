//! Dinic's max-flow on f64 capacities (`FlowNet`): the min-cut bound (`bounds::min_cut`), the
//! tree packing's feasibility checks (`synth::whole::packing`) and the translation rounds'
//! shares (`synth::translate::rounds`) solve on it.

/// Dinic's max-flow on f64 capacities.
pub struct FlowNet {
    head: Vec<usize>,
    to: Vec<usize>,
    next: Vec<usize>,
    cap: Vec<f64>,
    flow: Vec<f64>,
    level: Vec<i32>,
    iter: Vec<usize>,
    /// Edges scanned so far (`work`).
    scans: u64,
}

const NONE: usize = usize::MAX;
const EPS: f64 = 1e-12;

impl FlowNet {
    /// A network of `n` nodes and no edges.
    pub fn new(n: usize) -> FlowNet {
        FlowNet {
            head: vec![NONE; n],
            to: vec![],
            next: vec![],
            cap: vec![],
            flow: vec![],
            level: vec![0; n],
            iter: vec![0; n],
            scans: 0,
        }
    }
    /// Adds the edge `u → v` of capacity `c` (and its residual twin); returns its id.
    pub fn add(&mut self, u: usize, v: usize, c: f64) -> usize {
        let e = self.to.len();
        for (a, b, cap) in [(u, v, c), (v, u, 0.0)] {
            self.to.push(b);
            self.cap.push(cap);
            self.flow.push(0.0);
            self.next.push(self.head[a]);
            self.head[a] = self.to.len() - 1;
        }
        e
    }
    /// Every flow back to 0, the capacities kept.
    pub fn reset(&mut self) {
        self.flow.iter_mut().for_each(|f| *f = 0.0);
    }
    /// Sets edge `e`'s capacity (an id `add` returned).
    pub fn set_capacity(&mut self, e: usize, c: f64) {
        self.cap[e] = c;
    }
    /// The flow on edge `e` (an id `add` returned).
    pub fn flow(&self, e: usize) -> f64 {
        self.flow[e]
    }
    fn residual(&self, e: usize) -> f64 {
        self.cap[e] - self.flow[e]
    }
    fn bfs(&mut self, s: usize, t: usize) -> bool {
        self.level.iter_mut().for_each(|l| *l = -1);
        let mut q = std::collections::VecDeque::new();
        self.level[s] = 0;
        q.push_back(s);
        while let Some(u) = q.pop_front() {
            let mut e = self.head[u];
            while e != NONE {
                self.scans += 1;
                let v = self.to[e];
                if self.level[v] < 0 && self.residual(e) > EPS {
                    self.level[v] = self.level[u] + 1;
                    q.push_back(v);
                }
                e = self.next[e];
            }
        }
        self.level[t] >= 0
    }
    fn dfs(&mut self, u: usize, t: usize, pushed: f64) -> f64 {
        if u == t {
            return pushed;
        }
        while self.iter[u] != NONE {
            self.scans += 1;
            let e = self.iter[u];
            let v = self.to[e];
            if self.level[v] == self.level[u] + 1 && self.residual(e) > EPS {
                let d = self.dfs(v, t, pushed.min(self.residual(e)));
                if d > EPS {
                    self.flow[e] += d;
                    self.flow[e ^ 1] -= d;
                    return d;
                }
            }
            self.iter[u] = self.next[e];
        }
        0.0
    }
    /// The maximum flow from `s` to `t`, added to the flows already there.
    pub fn max_flow(&mut self, s: usize, t: usize) -> f64 {
        let mut total = 0.0;
        while self.bfs(s, t) {
            self.iter.copy_from_slice(&self.head);
            loop {
                let f = self.dfs(s, t, f64::INFINITY);
                if f <= EPS {
                    break;
                }
                total += f;
            }
        }
        total
    }
    /// Edges the searches have scanned since the network was made: a measure of the work done
    /// that does not depend on the machine (a caller's budget).
    pub fn work(&self) -> u64 {
        self.scans
    }
    /// The nodes `s` reaches in the residual network: after `max_flow`, a minimum cut's side.
    pub fn source_side(&self, s: usize) -> Vec<bool> {
        let mut seen = vec![false; self.head.len()];
        let mut stack = vec![s];
        seen[s] = true;
        while let Some(u) = stack.pop() {
            let mut e = self.head[u];
            while e != NONE {
                let v = self.to[e];
                if !seen[v] && self.residual(e) > EPS {
                    seen[v] = true;
                    stack.push(v);
                }
                e = self.next[e];
            }
        }
        seen
    }
}
