//! Collectives as chunk sets with a precondition, a postcondition and a combining flag.

use crate::error::{Errors, InputError};
use crate::limits;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};

mod holders;
mod pairs;
mod prepost;

pub use holders::Holders;
pub use pairs::Pairs;
pub(crate) use prepost::reachable_from;
use prepost::{check_sources, conditions, every_pair_sides};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveKind {
    AllGather,
    ReduceScatter,
    AllReduce,
    Broadcast,
    Reduce,
    Scatter,
    Gather,
    AllToAll,
    Custom,
}

impl CollectiveKind {
    /// Bus bandwidth over algorithm bandwidth on `p` NPUs, as nccl-tests computes busbw (what
    /// each link would carry in the best ring schedule): 2(p−1)/p for all-reduce, (p−1)/p for
    /// all-gather, reduce-scatter, all-to-all, gather and scatter (nccl-tests' `GatherGetBw` and
    /// `ScatterGetBw`), 1 for broadcast, reduce and custom collectives.
    pub fn bus_factor(self, p: usize) -> f64 {
        let p = p.max(1) as f64;
        match self {
            CollectiveKind::AllReduce => 2.0 * (p - 1.0) / p,
            CollectiveKind::AllGather
            | CollectiveKind::ReduceScatter
            | CollectiveKind::AllToAll
            | CollectiveKind::Gather
            | CollectiveKind::Scatter => (p - 1.0) / p,
            _ => 1.0,
        }
    }

    pub const ALL: [CollectiveKind; 9] = [
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::AllReduce,
        CollectiveKind::Broadcast,
        CollectiveKind::Reduce,
        CollectiveKind::Scatter,
        CollectiveKind::Gather,
        CollectiveKind::AllToAll,
        CollectiveKind::Custom,
    ];
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::Broadcast => "broadcast",
            CollectiveKind::Reduce => "reduce",
            CollectiveKind::Scatter => "scatter",
            CollectiveKind::Gather => "gather",
            CollectiveKind::AllToAll => "all_to_all",
            CollectiveKind::Custom => "custom",
        }
    }
    pub fn parse(s: &str) -> Option<CollectiveKind> {
        let s = s.replace('-', "_").to_ascii_lowercase();
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
    pub fn needs_root(self) -> bool {
        matches!(
            self,
            CollectiveKind::Broadcast | CollectiveKind::Reduce | CollectiveKind::Scatter | CollectiveKind::Gather
        )
    }
    pub fn combining(self) -> bool {
        matches!(self, CollectiveKind::ReduceScatter | CollectiveKind::AllReduce | CollectiveKind::Reduce)
    }
}

/// What a user asks for: the `collective` object of requests and schedules.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct CollectiveSpec {
    pub kind: CollectiveKind,
    /// Size of the whole result buffer at one NPU (the all-reduce buffer, the all-gather
    /// output, the root's buffer for rooted kinds, what each NPU receives in all-to-all;
    /// for `custom`, the sum over all chunks). Read from a number or, as the CLI takes it, a
    /// size string (`"1MiB"`); always written as a number.
    #[serde(deserialize_with = "crate::units::deserialize_size")]
    pub size_bytes: u64,
    /// Chunks each NPU's share is cut into. `None` (omitted): a request lets the engine choose
    /// (`auto`); a schedule without it has 1, as format v1 always said. See `chunks()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks_per_npu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<usize>,
    /// The NPUs taking part, default: every live NPU. Ranks follow this order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Vec<usize>>,
    /// Reduction cost the simulator adds to every `reduce` transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma_ns_per_byte: Option<f64>,
    /// `custom` only: the chunk count and the conditions as `[npu, chunk]` pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_chunks: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<Vec<[u32; 2]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postcondition: Option<Vec<[u32; 2]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combining: Option<bool>,
}
crate::strict::objects_only!(CollectiveSpec, "a collective (an object)", serialize);

impl CollectiveSpec {
    pub fn new(kind: CollectiveKind, size_bytes: u64) -> CollectiveSpec {
        CollectiveSpec {
            kind,
            size_bytes,
            chunks_per_npu: None,
            root: None,
            group: None,
            gamma_ns_per_byte: None,
            num_chunks: None,
            precondition: None,
            postcondition: None,
            combining: None,
        }
    }
    pub fn with_root(mut self, root: usize) -> Self {
        self.root = Some(root);
        self
    }
    pub fn with_chunks_per_npu(mut self, k: u32) -> Self {
        self.chunks_per_npu = Some(k);
        self
    }
    pub fn with_kind(mut self, kind: CollectiveKind) -> Self {
        self.kind = kind;
        self
    }
    /// Chunks per NPU as the collective is built: the given number, or 1 when none was given.
    pub fn chunks(&self) -> u32 {
        self.chunks_per_npu.unwrap_or(1)
    }
}

/// Chunks of a collective of `kind` over `p` NPUs with `k` chunks per NPU (`None` on
/// overflow); not for `custom`, whose count is given.
pub fn chunk_count(kind: CollectiveKind, p: usize, k: usize) -> Option<usize> {
    match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce | CollectiveKind::Custom => Some(k),
        CollectiveKind::AllToAll => p.checked_mul(p).and_then(|x| x.checked_mul(k)),
        _ => p.checked_mul(k),
    }
}

/// (npu, chunk) pairs in the larger of the pre- and postcondition of a collective of `kind`
/// over `p` NPUs with `chunks` chunks (`None` on overflow): every NPU holds every chunk at one
/// end of all-gather, reduce-scatter, all-reduce, broadcast and reduce; one NPU each of the
/// others.
pub fn condition_pairs(kind: CollectiveKind, p: usize, chunks: usize) -> Option<usize> {
    match kind {
        CollectiveKind::Scatter | CollectiveKind::Gather | CollectiveKind::AllToAll | CollectiveKind::Custom => {
            Some(chunks)
        }
        _ => chunks.checked_mul(p),
    }
}

/// A collective made concrete on a topology. Conditions are sorted `(npu, chunk)` pairs of
/// topology NPU ids. Combining: `(v, c)` in the precondition means v holds its own
/// contribution to c; in the postcondition, v must hold c reduced over every NPU that holds
/// c in the precondition.
#[derive(Clone, Debug, PartialEq)]
pub struct Collective {
    pub spec: CollectiveSpec,
    pub group: Vec<usize>,
    pub num_chunks: usize,
    pub chunk_size_bytes: f64,
    pub combining: bool,
    pub precondition: Pairs,
    pub postcondition: Pairs,
}

impl Collective {
    /// Builds the conditions and checks that the topology can serve them: every chunk a
    /// postcondition needs is reachable from where it (or each of its contributions) starts.
    pub fn build(spec: &CollectiveSpec, topo: &Topology) -> Result<Collective, InputError> {
        let c = Collective::build_unchecked(spec, topo)?;
        c.check_reachable(topo)?;
        Ok(c)
    }

    /// Builds the conditions without the reachability check (the validator uses this: an
    /// unreachable postcondition is then reported as unmet, not as bad input).
    pub fn build_unchecked(spec: &CollectiveSpec, topo: &Topology) -> Result<Collective, InputError> {
        let mut errs = Errors::default();
        let group = resolve_group(spec, topo, &mut errs);
        check_fields(spec, &mut errs);
        let root_rank = resolve_root(spec, &group, &mut errs);
        let kind = spec.kind;
        let custom_fields = spec.num_chunks.is_some()
            || spec.precondition.is_some()
            || spec.postcondition.is_some()
            || spec.combining.is_some();
        if kind != CollectiveKind::Custom && custom_fields {
            errs.push(".", "num_chunks, precondition, postcondition and combining are for kind \"custom\" only");
        }
        if !errs.is_empty() {
            return errs.into_result(Collective::empty(spec));
        }

        let p = group.len();
        let k = spec.chunks() as usize;
        let num_chunks = count_chunks(spec, p, k)?;
        let chunk_size_bytes = match kind {
            CollectiveKind::AllToAll => spec.size_bytes as f64 / (p * k) as f64,
            _ => spec.size_bytes as f64 / num_chunks as f64,
        };
        let (pre, post, combining) = conditions(spec, &group, num_chunks, root_rank, &mut errs);
        if kind == CollectiveKind::Custom && errs.is_empty() {
            check_sources(&pre, &post, num_chunks, &mut errs);
        }
        // A side that is every chunk at every NPU is held as the group and the chunk count (a
        // 4096-NPU all-reduce in 4 parts would list 67 M pairs, 537 MB); an all-reduce's two
        // sides are one.
        let (pre_all, post_all) = every_pair_sides(kind);
        let every = || Pairs::every(group.iter().map(|&v| v as u32).collect(), num_chunks as u32);
        let precondition = if pre_all { every() } else { Pairs::from(pre) };
        let postcondition = match (kind, post_all) {
            (CollectiveKind::AllReduce, _) => precondition.clone(),
            (_, true) => every(),
            _ => Pairs::from(post),
        };
        errs.into_result(Collective {
            spec: spec.clone(),
            group,
            num_chunks,
            chunk_size_bytes,
            combining,
            precondition,
            postcondition,
        })
    }

    fn empty(spec: &CollectiveSpec) -> Collective {
        Collective {
            spec: spec.clone(),
            group: Vec::new(),
            num_chunks: 0,
            chunk_size_bytes: 0.0,
            combining: false,
            precondition: Pairs::default(),
            postcondition: Pairs::default(),
        }
    }

    /// NPUs holding each chunk in the precondition (its sources; for combining collectives,
    /// its contributors), as CSR: `holders(c)`.
    pub fn holders(&self) -> Holders {
        Holders::new(&self.precondition, self.num_chunks)
    }

    /// Postcondition pairs that need a delivery (not already satisfied by the precondition;
    /// for combining collectives, every pair whose chunk has a contributor other than itself).
    pub fn needed(&self) -> Vec<[u32; 2]> {
        self.needed_with(&self.holders())
    }

    /// `needed`, given `holders()` (a 4096-NPU all-reduce has 2^26 precondition pairs, so
    /// callers that need both build the holders once).
    pub fn needed_with(&self, holders: &Holders) -> Vec<[u32; 2]> {
        self.needed_iter(holders).collect()
    }

    /// `needed_with`, one pair at a time (in postcondition order), for passes that need not
    /// hold the list.
    pub fn needed_iter<'a>(&'a self, holders: &'a Holders) -> impl Iterator<Item = [u32; 2]> + 'a {
        self.postcondition.iter().filter(move |&[v, c]| self.needs(holders.of(c as usize), v))
    }

    /// Whether NPU `v` needs a delivery of a chunk held (sorted) by `h`: it does not hold it;
    /// combining, it is not its only contributor.
    pub fn needs(&self, h: &[u32], v: u32) -> bool {
        if self.combining { h.iter().any(|&u| u != v) } else { h.binary_search(&v).is_err() }
    }

    /// Checks that every needed pair can be served over the topology's links.
    pub fn check_reachable(&self, topo: &Topology) -> Result<(), InputError> {
        // Fast path, without building the holders: every NPU either condition names lies in one
        // strongly connected component (a 4096-NPU all-reduce's conditions are 2^26 pairs).
        let scc = topo.scc_ids();
        let post =
            if Pairs::ptr_eq(&self.precondition, &self.postcondition) { None } else { Some(&self.postcondition) };
        let mut npus = self.precondition.npus().chain(post.into_iter().flat_map(Pairs::npus)).map(|v| v as usize);
        if let Some(first) = npus.next().and_then(|v| scc.get(v).copied())
            && npus.all(|v| scc.get(v) == Some(&first))
        {
            return Ok(());
        }
        let holders = self.holders();
        let needed = self.needed_with(&holders);
        if needed.is_empty() {
            return Ok(());
        }
        // Slow path: reachability from each distinct source set, computed once.
        let mut cache: std::collections::HashMap<Vec<u32>, Vec<bool>> = Default::default();
        for &[v, c] in &needed {
            let h = holders.of(c as usize);
            let sources: Vec<Vec<u32>> = if self.combining {
                h.iter().filter(|&&u| u != v).map(|&u| vec![u]).collect()
            } else {
                vec![h.to_vec()]
            };
            for src in sources {
                let reach = cache.entry(src.clone()).or_insert_with(|| reachable_from(topo, &src));
                if !reach[v as usize] {
                    let what = if self.combining {
                        format!("the contribution of NPU {} to chunk {c}", src[0])
                    } else {
                        format!("chunk {c} from any of its holders {:?}", src)
                    };
                    return Err(InputError::new(
                        "group",
                        format!(
                            "the collective's NPUs are not connected where it needs them: NPU {v} cannot receive {what}{}",
                            self.parts_hint(topo)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Where the group falls apart and what to do about it (empty where the group lies in one
    /// part, as where one-way links reach only some pairs).
    fn parts_hint(&self, topo: &Topology) -> String {
        let parts = topo.parts_of(&self.group);
        if parts.len() < 2 {
            return String::new();
        }
        format!("; {}: fail the NPUs cut off too, or give a group inside one part", describe_parts(&parts))
    }
}

/// "it falls into 2 parts (NPU 0; 15 NPUs from 1)": the three smallest parts, each by its NPUs
/// where there are few, else by how many and the first.
pub fn describe_parts(parts: &[Vec<usize>]) -> String {
    let one = |part: &Vec<usize>| match part.as_slice() {
        [v] => format!("NPU {v}"),
        _ if part.len() <= 4 => format!("NPUs {part:?}"),
        _ => format!("{} NPUs from {}", part.len(), part[0]),
    };
    let shown: Vec<String> = parts.iter().take(3).map(one).collect();
    let more = if parts.len() > 3 { format!(" and {} more", parts.len() - 3) } else { String::new() };
    format!("it falls into {} parts ({}{more})", parts.len(), shown.join("; "))
}

/// The group's NPUs (every live NPU by default), reporting any that is not a live NPU or is
/// listed twice, and an empty group.
fn resolve_group(spec: &CollectiveSpec, topo: &Topology, errs: &mut Errors) -> Vec<usize> {
    let group: Vec<usize> = match &spec.group {
        None => topo.live_npus(),
        Some(g) => {
            let mut seen = std::collections::HashSet::new();
            for (i, &v) in g.iter().enumerate() {
                if !topo.is_npu(v) {
                    errs.push(
                        format!("group[{i}]"),
                        format!("{v} is not an NPU: expected {}", crate::error::ids(topo.npus())),
                    );
                } else if topo.is_failed(v) {
                    errs.push(format!("group[{i}]"), format!("NPU {v} has failed"));
                } else if !seen.insert(v) {
                    errs.push(format!("group[{i}]"), format!("NPU {v} is listed twice"));
                }
            }
            g.clone()
        }
    };
    if group.is_empty() {
        errs.push("group", "expected at least one live NPU");
    }
    group
}

/// Reports a zero size or chunks per NPU and an invalid reduction cost.
fn check_fields(spec: &CollectiveSpec, errs: &mut Errors) {
    if spec.size_bytes == 0 {
        errs.push("size_bytes", "0: expected a size of at least 1 byte");
    }
    if spec.chunks_per_npu == Some(0) {
        errs.push("chunks_per_npu", "0: expected at least 1");
    }
    if let Some(g) = spec.gamma_ns_per_byte
        && !(0.0..=crate::limits::MAX_GAMMA_NS_PER_BYTE).contains(&g)
    {
        let most = crate::limits::MAX_GAMMA_NS_PER_BYTE;
        let g = crate::units::short(g);
        errs.push("gamma_ns_per_byte", format!("{g} is invalid: expected a value from 0 to {most:e} ns a byte"));
    }
}

/// The root's rank in `group` for the kinds that need one; reports a missing root, a root
/// outside the group, and a root given to a kind that takes none.
fn resolve_root(spec: &CollectiveSpec, group: &[usize], errs: &mut Errors) -> Option<usize> {
    let kind = spec.kind;
    if kind.needs_root() {
        match spec.root {
            None => {
                errs.push("root", format!("{} needs a root NPU", kind.name()));
                None
            }
            Some(r) => match group.iter().position(|&v| v == r) {
                Some(i) => Some(i),
                None => {
                    errs.push("root", format!("root {r} is not a live NPU of the group"));
                    None
                }
            },
        }
    } else {
        if spec.root.is_some() {
            errs.push("root", format!("{} takes no root", kind.name()));
        }
        None
    }
}

/// The collective's chunk count over `p` NPUs with `k` chunks per NPU (given for `custom`),
/// refused beyond the chunk limit. Its conditions cost no more: a side of every chunk at every
/// NPU is held as the group (`Pairs::every`), the others list each chunk once.
fn count_chunks(spec: &CollectiveSpec, p: usize, k: usize) -> Result<usize, InputError> {
    let kind = spec.kind;
    let num_chunks = match kind {
        CollectiveKind::Custom => match spec.num_chunks {
            Some(n) if n > 0 => Some(n),
            _ => return Err(InputError::new("num_chunks", "custom collectives need num_chunks >= 1")),
        },
        _ => chunk_count(kind, p, k),
    };
    let num_chunks = match num_chunks {
        Some(n) if n <= limits::MAX_CHUNKS => n,
        _ => {
            return Err(InputError::new(
                "chunks_per_npu",
                format!("the collective would have more than {} chunks", limits::MAX_CHUNKS),
            ));
        }
    };
    Ok(num_chunks)
}

#[cfg(test)]
mod tests {
    use super::CollectiveKind;

    /// nccl-tests' busbw factors (`*GetBw` in its sources) on 4 ranks: gather and scatter are
    /// (p − 1)/p there too (they read as 1, busbw = algbw).
    #[test]
    fn bus_factors_are_nccl_tests_own() {
        let want = [
            (CollectiveKind::AllReduce, 1.5),
            (CollectiveKind::AllGather, 0.75),
            (CollectiveKind::ReduceScatter, 0.75),
            (CollectiveKind::AllToAll, 0.75),
            (CollectiveKind::Gather, 0.75),
            (CollectiveKind::Scatter, 0.75),
            (CollectiveKind::Broadcast, 1.0),
            (CollectiveKind::Reduce, 1.0),
        ];
        for (kind, factor) in want {
            assert_eq!(kind.bus_factor(4), factor, "{kind:?}");
        }
    }
}
