//! Property tests: randomly generated valid schedules on random connected graphs always
//! validate (and never beat the lower bounds); randomly corrupted ones never validate; and on
//! schedules with their data flow scrambled, the validator reports exactly what a naive
//! replay over `BTreeSet`s (the oracle, written from docs/FORMAT.md) finds.

use ccsynth::collective::{Collective, CollectiveKind as K, CollectiveSpec};
use ccsynth::engine;
use ccsynth::schedule::{Op, Schedule, Transfer};
use ccsynth::topology::{LinkInput, Topology, TopologyInput};
use ccsynth::validate::ViolationKind;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

pub(crate) struct Rng(pub(crate) u64);
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// A random graph whose NPUs are strongly connected: a random spanning tree of bidirectional
/// links, extra random directed links, and maybe a switch joined to some NPUs. Returns the
/// topology and the tree's parent of every NPU but 0.
pub(crate) fn random_topology(rng: &mut Rng) -> (Topology, Vec<(usize, usize)>) {
    let npus = 2 + rng.below(7);
    let switches = rng.below(2);
    let mut links: BTreeMap<(usize, usize), (f64, f64)> = BTreeMap::new();
    let param = |rng: &mut Rng| (100.0 * rng.below(5) as f64, 10.0 * (1 + rng.below(10)) as f64);
    let mut tree = Vec::new();
    for v in 1..npus {
        let u = rng.below(v);
        tree.push((u, v));
        let p = param(rng);
        links.insert((u, v), p);
        links.insert((v, u), p);
    }
    for _ in 0..rng.below(2 * npus) {
        let (a, b) = (rng.below(npus), rng.below(npus));
        if a != b {
            let p = param(rng);
            links.entry((a, b)).or_insert(p);
        }
    }
    if switches == 1 {
        let p = param(rng);
        for v in 0..npus {
            if rng.coin() {
                links.insert((v, npus), p);
                links.insert((npus, v), p);
            }
        }
    }
    let input = TopologyInput {
        npus,
        switches,
        links: links
            .into_iter()
            .map(|((src, dst), (lat, bw))| LinkInput {
                src,
                dst,
                latency_ns: Some(lat),
                bandwidth_gb_per_s: Some(bw),
                bidirectional: false,
            })
            .collect(),
        ..Default::default()
    };
    (Topology::from_input(input).unwrap(), tree)
}

/// Routes from u: direct links, and two-hop paths through any node.
fn routes(t: &Topology, u: usize) -> Vec<(usize, Option<Vec<u32>>)> {
    let mut out = Vec::new();
    for l in &t.links()[t.out_links(u)] {
        if t.is_npu(l.dst) {
            out.push((l.dst, None));
        }
        for l2 in &t.links()[t.out_links(l.dst)] {
            if t.is_npu(l2.dst) && l2.dst != u {
                out.push((l2.dst, Some(vec![u as u32, l.dst as u32, l2.dst as u32])));
            }
        }
    }
    out
}

/// Random store-and-forward flooding for a non-combining collective.
fn random_plain(t: &Topology, c: &Collective, rng: &mut Rng) -> Vec<Transfer> {
    let mut held = vec![vec![false; c.num_chunks]; t.npus()];
    for [v, ch] in c.precondition.iter() {
        held[v as usize][ch as usize] = true;
    }
    let done = |held: &Vec<Vec<bool>>| c.postcondition.iter().all(|[v, ch]| held[v as usize][ch as usize]);
    let mut out = Vec::new();
    let mut step = 0u32;
    while !done(&held) {
        let mut cand = Vec::new();
        for u in 0..t.npus() {
            for (v, path) in routes(t, u) {
                for (ch, (&at_u, &at_v)) in held[u].iter().zip(&held[v]).enumerate() {
                    if at_u && !at_v {
                        cand.push((u, v, path.clone(), ch));
                    }
                }
            }
        }
        assert!(!cand.is_empty(), "flooding is stuck on a connected graph");
        for i in (1..cand.len()).rev() {
            let j = rng.below(i + 1);
            cand.swap(i, j);
        }
        let mut targeted = std::collections::HashSet::new();
        // (src, dst, path) -> chunks of one message.
        type Messages = BTreeMap<(usize, usize, Option<Vec<u32>>), Vec<u32>>;
        let mut msgs = Messages::new();
        for (i, (u, v, path, ch)) in cand.into_iter().enumerate() {
            if (i == 0 || rng.coin()) && targeted.insert((v, ch)) {
                msgs.entry((u, v, path)).or_default().push(ch as u32);
            }
        }
        for ((u, v, path), chunks) in msgs {
            for &ch in &chunks {
                held[v][ch as usize] = true;
            }
            let mut tr = Transfer::copy(step, u, v, chunks);
            tr.path = path.map(Into::into);
            out.push(tr);
        }
        step += 1;
    }
    // Present the transfers in a shuffled order: only (step, position) matters.
    for i in (1..out.len()).rev() {
        let j = rng.below(i + 1);
        out.swap(i, j);
    }
    out
}

/// Random reduction trees: every chunk is reduced to a random root (or its owner) along a
/// BFS tree of the spanning tree, then copied back out where the postcondition wants it.
fn random_combining(t: &Topology, tree: &[(usize, usize)], c: &Collective, rng: &mut Rng) -> Vec<Transfer> {
    let n = t.npus();
    let mut adj = vec![Vec::new(); n];
    for &(u, v) in tree {
        adj[u].push(v);
        adj[v].push(u);
    }
    let mut msgs: BTreeMap<(u32, usize, usize, bool), Vec<u32>> = BTreeMap::new();
    for ch in 0..c.num_chunks {
        let wants: Vec<usize> = c.postcondition.iter().filter(|p| p[1] as usize == ch).map(|p| p[0] as usize).collect();
        let root = if wants.len() == 1 { wants[0] } else { rng.below(n) };
        let mut parent = vec![usize::MAX; n];
        let mut depth = vec![0usize; n];
        let mut order = vec![root];
        parent[root] = root;
        let mut i = 0;
        while i < order.len() {
            let u = order[i];
            for &v in &adj[u] {
                if parent[v] == usize::MAX {
                    parent[v] = u;
                    depth[v] = depth[u] + 1;
                    order.push(v);
                }
            }
            i += 1;
        }
        let maxd = *depth.iter().max().unwrap();
        for &v in &order[1..] {
            msgs.entry(((maxd - depth[v]) as u32, v, parent[v], true)).or_default().push(ch as u32);
        }
        if wants.len() > 1 {
            for &v in &order[1..] {
                msgs.entry(((maxd + depth[v] - 1) as u32, parent[v], v, false)).or_default().push(ch as u32);
            }
        }
    }
    msgs.into_iter()
        .map(
            |((step, u, v, red), chunks)| {
                if red { Transfer::reduce(step, u, v, chunks) } else { Transfer::copy(step, u, v, chunks) }
            },
        )
        .collect()
}

pub(crate) fn build(seed: u64, kind: K) -> (Schedule, Rng) {
    let mut rng = Rng(seed);
    let (t, tree) = random_topology(&mut rng);
    let k = 1 + rng.below(2) as u32;
    let mut spec = CollectiveSpec::new(kind, 1000 + rng.below(100_000) as u64).with_chunks_per_npu(k);
    if kind.needs_root() {
        spec.root = Some(rng.below(t.npus()));
    }
    let c = Collective::build(&spec, &t).unwrap();
    let transfers =
        if kind.combining() { random_combining(&t, &tree, &c, &mut rng) } else { random_plain(&t, &c, &mut rng) };
    let mut s = Schedule::new(t, &c, "random");
    s.transfers = transfers.into();
    (s, rng)
}

pub(crate) const KINDS: [K; 7] =
    [K::AllGather, K::Broadcast, K::Scatter, K::Gather, K::AllToAll, K::AllReduce, K::ReduceScatter];

pub(crate) fn corrupt(s: &mut Schedule, rng: &mut Rng) -> &'static str {
    let mut ts = s.transfers.to_vec();
    let what = corrupt_in(s, &mut ts, rng);
    s.transfers = ts.into();
    what
}

fn corrupt_in(s: &Schedule, ts: &mut Vec<Transfer>, rng: &mut Rng) -> &'static str {
    let n = ts.len();
    let i = rng.below(n);
    match rng.below(5) {
        0 => {
            // Only deliveries into a postcondition pair are certainly needed: the generators
            // never deliver a pair twice, but flooding also feeds NPUs that only forward.
            let post: std::collections::HashSet<[u32; 2]> = s.postcondition.iter().collect();
            let needed: Vec<usize> =
                (0..n).filter(|&j| ts[j].chunks.iter().any(|&c| post.contains(&[ts[j].dst, c]))).collect();
            ts.remove(needed[rng.below(needed.len())]);
            "removed a needed transfer"
        }
        1 => {
            ts[i].chunks.push(s.num_chunks as u32);
            "chunk out of range"
        }
        2 if !s.combining => {
            ts[i].op = Op::Reduce;
            "reduce in a non-combining collective"
        }
        2 => {
            // Replaying a reduce later counts its contributions twice.
            let reduces: Vec<usize> = (0..n).filter(|&j| ts[j].op == Op::Reduce).collect();
            let mut t = ts[reduces[rng.below(reduces.len())]].clone();
            t.step += 1 + rng.below(3) as u32;
            ts.push(t);
            "a reduce replayed"
        }
        3 => {
            let t = &ts[i];
            let src = t.src as usize;
            let missing = (0..s.topology.npus()).find(|&w| w != src && s.topology.link_index(src, w).is_none());
            match missing {
                Some(w) => {
                    ts[i].dst = w as u32;
                    ts[i].path = None;
                    "dst without a link"
                }
                None => {
                    ts[i].chunks.clear();
                    "emptied a transfer"
                }
            }
        }
        _ => {
            ts[i].dst = ts[i].src;
            "self transfer"
        }
    }
}

/// The data-flow rules of docs/FORMAT.md, replayed naively: one `BTreeSet` of contributors per
/// (npu, chunk). Returns the violation kinds, sorted.
fn oracle(s: &Schedule) -> Vec<ViolationKind> {
    use ViolationKind::*;
    type Slot = Option<BTreeSet<u32>>;
    let mut state: BTreeMap<(u32, u32), BTreeSet<u32>> = BTreeMap::new();
    for [v, c] in s.precondition.iter() {
        state.insert((v, c), [if s.combining { v } else { 0 }].into());
    }
    let mut found = Vec::new();
    let ts = s.transfers.to_vec();
    let mut order: Vec<usize> = (0..ts.len()).collect();
    order.sort_by_key(|&i| (ts[i].step, i));
    for group in order.chunk_by(|&a, &b| ts[a].step == ts[b].step) {
        // (npu, slot) -> the step's writes to it: (transfer, op, contributions).
        type Writes = BTreeMap<(u32, u32), Vec<(usize, Op, BTreeSet<u32>)>>;
        let mut writes = Writes::new();
        for &i in group {
            let t = &ts[i];
            // Entry j reads slot chunks[j] at src and writes slot dst_chunks[j] at dst.
            let dst = t.dst_chunks.as_deref().cloned().unwrap_or_else(|| t.chunks.clone());
            for (&c, &d) in t.chunks.iter().zip(dst.iter()) {
                match state.get(&(t.src, c)) {
                    None => found.push(SourceMissingChunk),
                    Some(v) => writes.entry((t.dst, d)).or_default().push((i, t.op, v.clone())),
                }
            }
        }
        for (slot, ws) in writes {
            let copies = ws.iter().filter(|w| w.1 == Op::Copy).count();
            let old: Slot = state.get(&slot).cloned();
            if copies > 1 || (copies == 1 && ws.len() > 1) {
                found.push(WriteConflict);
                let mut all = old.unwrap_or_default();
                for w in &ws {
                    all.extend(w.2.iter().copied());
                }
                state.insert(slot, all);
                continue;
            }
            let mut acc = old.clone();
            for (_, op, v) in ws {
                match (op, &mut acc) {
                    (Op::Copy, _) => {
                        if old.as_ref().is_some_and(|o| !o.is_subset(&v)) {
                            found.push(CopyDropsContribution);
                        }
                        acc = Some(v);
                    }
                    (Op::Reduce, None) => {
                        found.push(ReduceWithoutPartial);
                        acc = Some(v);
                    }
                    (Op::Reduce, Some(a)) => {
                        if !a.is_disjoint(&v) {
                            found.push(DoubleCount);
                        }
                        a.extend(v);
                    }
                }
            }
            state.insert(slot, acc.expect("a write happened"));
        }
    }
    let mut holders: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for [v, c] in s.precondition.iter() {
        holders.entry(c).or_default().insert(v);
    }
    for [v, c] in s.postcondition.iter() {
        match state.get(&(v, c)) {
            None => found.push(PostconditionUnmet),
            Some(have) if s.combining && Some(have) != holders.get(&c) => found.push(IncompleteReduction),
            Some(_) => {}
        }
    }
    found.sort_by_key(|k| format!("{k:?}"));
    found
}

/// Moves, duplicates, drops or flips transfers, or routes them through scratch slots (one per
/// chunk, slot c + num_chunks), keeping each one well formed.
pub(crate) fn scramble(s: &mut Schedule, rng: &mut Rng) {
    let mut ts = s.transfers.to_vec();
    scramble_in(s, &mut ts, rng);
    s.transfers = ts.into();
}

fn scramble_in(s: &mut Schedule, ts: &mut Vec<Transfer>, rng: &mut Rng) {
    let nc = s.num_chunks as u32;
    let twin = |c: u32| if c < nc { c + nc } else { c - nc };
    for _ in 0..1 + rng.below(3) {
        let n = ts.len();
        if n == 0 {
            return;
        }
        let i = rng.below(n);
        let last = ts.iter().map(|t| t.step).max().unwrap_or(0) as usize;
        if rng.below(3) == 0 {
            s.scratch = (0..nc).collect();
            let t = &mut ts[i];
            let mut dst: Vec<u32> = t.written().to_vec();
            // A local move stays one: redirecting it could make it write the slot it reads.
            match if t.src == t.dst { 2 } else { rng.below(3) } {
                // Some entries land in the other slot of their chunk.
                0 => {
                    for j in 0..dst.len() {
                        if rng.coin() && !dst.contains(&twin(dst[j])) {
                            dst[j] = twin(dst[j]);
                        }
                    }
                }
                // One entry also feeds the other slot (fan-out), unless that slot is written.
                1 if !dst.contains(&twin(dst[0])) => {
                    let (c, d) = (t.chunks[0], twin(dst[0]));
                    let mut chunks = t.chunks.to_vec();
                    chunks.push(c);
                    dst.push(d);
                    t.chunks = chunks.into();
                }
                // A local move between the slots of one chunk.
                _ => {
                    let v = if rng.coin() { t.src } else { t.dst } as usize;
                    let c = if rng.coin() { t.chunks[0] } else { dst[0] };
                    let op = if s.combining && rng.coin() { Op::Reduce } else { Op::Copy };
                    let mv = Transfer { op, ..Transfer::copy(rng.below(last + 2) as u32, v, v, vec![c]) };
                    ts.push(mv.into_slots(vec![twin(c)]));
                    continue;
                }
            }
            t.dst_chunks = Some(Box::new(dst.into()));
            continue;
        }
        match rng.below(4) {
            0 => ts[i].step = rng.below(last + 2) as u32,
            1 => {
                let mut t = ts[i].clone();
                t.step = rng.below(last + 2) as u32;
                ts.push(t);
            }
            2 => {
                ts.remove(i);
            }
            _ if s.combining => {
                let t = &mut ts[i];
                t.op = if t.op == Op::Copy { Op::Reduce } else { Op::Copy };
            }
            _ => ts[i].step = 0,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_validator_agrees_with_a_naive_replay(seed in any::<u64>(), kind in 0usize..KINDS.len()) {
        let (mut s, mut rng) = build(seed, KINDS[kind]);
        scramble(&mut s, &mut rng);
        let r = ccsynth::validate::validate(&s);
        let want = oracle(&s);
        prop_assert!(want.len() < ccsynth::limits::MAX_REPORTED_VIOLATIONS);
        let mut got = r.kinds();
        got.sort_by_key(|k| format!("{k:?}"));
        prop_assert_eq!(got, want);
        prop_assert_eq!(r.valid, r.violation_count == 0);
        // The replay split into groups of chunks (as large schedules are) finds the same.
        let groups = 2 + rng.below(s.num_chunks.max(1));
        same_violations(&ccsynth::validate::validate_in_groups(&s, groups), &r)?;
    }

    #[test]
    fn random_valid_schedules_validate(seed in any::<u64>(), kind in 0usize..KINDS.len()) {
        let (s, _) = build(seed, KINDS[kind]);
        let r = engine::check(&s);
        prop_assert!(r.valid, "{:?}", r.violations);
        let time = r.collective_time_ns.unwrap();
        let bound = r.lower_bound_ns.unwrap();
        prop_assert!(time >= bound * (1.0 - 1e-9), "time {time} beats the lower bound {bound}: {:?}", r.lower_bounds);
        // The JSON round trip is lossless in either form, and the columns write rows that read
        // back as the structs.
        let back = Schedule::from_json(&serde_json::to_string(&s).unwrap()).unwrap();
        prop_assert_eq!(&back, &s);
        let explicit = serde_json::to_string(&s.written(ccsynth::schedule::Form::Explicit)).unwrap();
        prop_assert_eq!(&Schedule::from_json(&explicit).unwrap(), &s);
        let rows = serde_json::to_string(&s.transfers).unwrap();
        prop_assert_eq!(serde_json::from_str::<Vec<ccsynth::schedule::Transfer>>(&rows).unwrap(), s.transfers.to_vec());
        prop_assert!(ccsynth::validate::validate_in_groups(&s, 1 + seed as usize % 7).valid);
    }

    #[test]
    fn the_replays_on_ranges_agree_with_those_on_slots(seed in any::<u64>(), kind in 0usize..KINDS.len(), corrupted: bool) {
        let (mut s, mut rng) = build(seed, KINDS[kind]);
        if corrupted && !s.transfers.is_empty() {
            corrupt(&mut s, &mut rng);
        } else {
            scramble(&mut s, &mut rng);
        }
        let valid = ccsynth::validate::validate(&s).valid;
        match ccsynth::validate::valid_on_ranges(&s) {
            Some(v) => prop_assert_eq!(v, valid, "on ranges"),
            // Declined: destination or scratch slots, contributors that differ by chunk.
            None => prop_assert!(!valid || s.transfers.has_dst_slots() || !s.scratch.is_empty() || s.combining),
        }
        if let Some(on_ranges) = ccsynth::sim::simulate_on_ranges(&s) {
            prop_assert_eq!(on_ranges, ccsynth::sim::simulate_on_slots(&s));
        } else {
            prop_assert!(s.transfers.has_dst_slots() || s.transfers.iter().any(|t| t.chunks.iter().any(|&c| c as usize >= s.slots())));
        }
    }

    #[test]
    fn random_corrupted_schedules_never_validate(seed in any::<u64>(), kind in 0usize..KINDS.len()) {
        let (mut s, mut rng) = build(seed, KINDS[kind]);
        prop_assume!(!s.transfers.is_empty());
        let what = corrupt(&mut s, &mut rng);
        let r = engine::check(&s);
        prop_assert!(!r.valid, "{what} went unnoticed");
        let grouped = ccsynth::validate::validate_in_groups(&s, 1 + rng.below(s.num_chunks.max(1)));
        same_violations(&grouped, &ccsynth::validate::validate(&s))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A valid replay stamps the schedule's data flow, and routes change no data flow: a
    /// stamped schedule given other routes (through links it has or lacks, or none) is checked
    /// without a second replay, and gets exactly the verdict, count and violations of the same
    /// schedule checked from scratch; its data flow edited instead, it is replayed again.
    #[test]
    fn a_stamp_vouches_for_routes_changed_and_nothing_else(seed in any::<u64>(), kind in 0usize..KINDS.len()) {
        let (s, mut rng) = build(seed, KINDS[kind]);
        prop_assume!(!s.transfers.is_empty());
        prop_assert!(ccsynth::validate::validate_stamping_from(&s, 0).valid);
        prop_assert!(ccsynth::validate::flow_vouched(&s), "a valid replay stamps the schedule");
        let mut t = s.clone();
        prop_assert!(ccsynth::validate::flow_vouched(&t), "a clone keeps the stamp");
        let nodes = t.topology.nodes() as u32;
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(t.transfers.len());
            let x = t.transfers.at(i);
            let (src, dst) = (x.src, x.dst);
            let route = match rng.below(3) {
                0 => None,
                1 => Some(ccsynth::schedule::Route::from(vec![src, rng.below(nodes as usize) as u32, dst])),
                _ => routes(&t.topology, src as usize)
                    .into_iter()
                    .find_map(|(w, p)| (w == dst as usize).then_some(p).flatten())
                    .map(ccsynth::schedule::Route::from),
            };
            t.transfers.set_path(i, route);
        }
        prop_assert!(ccsynth::validate::flow_vouched(&t), "routes keep the stamp");
        let mut fresh = t.clone();
        fresh.transfers = fresh.transfers.to_vec().into();
        prop_assert!(!ccsynth::validate::flow_vouched(&fresh));
        same_violations(&ccsynth::validate::validate_stamping_from(&t, 0), &ccsynth::validate::validate(&fresh))?;
        // An edit of the data flow drops the stamp, and the replay finds what it finds from
        // scratch.
        let mut u = s.clone();
        let i = rng.below(u.transfers.len());
        if s.combining && rng.below(2) == 0 {
            let op = if u.transfers.at(i).op == Op::Copy { Op::Reduce } else { Op::Copy };
            u.transfers.set_op(i, op);
        } else {
            let step = u.transfers.at(i).step;
            u.transfers.set_step(i, if step == 0 { 1 } else { step - 1 });
        }
        prop_assert!(!ccsynth::validate::flow_vouched(&u));
        let mut fresh = u.clone();
        fresh.transfers = fresh.transfers.to_vec().into();
        same_violations(&ccsynth::validate::validate_stamping_from(&u, 0), &ccsynth::validate::validate(&fresh))?;
    }
}

/// Two reports with the same verdict, count and violations, in any order.
fn same_violations(a: &ccsynth::validate::Report, b: &ccsynth::validate::Report) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.valid, b.valid);
    prop_assert_eq!(a.violation_count, b.violation_count);
    let sorted = |r: &ccsynth::validate::Report| {
        let mut v: Vec<String> = r.violations.iter().map(|x| format!("{x:?}")).collect();
        v.sort();
        v
    };
    if a.violation_count <= ccsynth::limits::MAX_REPORTED_VIOLATIONS {
        prop_assert_eq!(sorted(a), sorted(b));
    }
    Ok(())
}
