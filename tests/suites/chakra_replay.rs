//! An independent reader and replayer of Chakra execution traces as ASTRA-sim's custom-collective
//! path runs them (../shared/notes/chakra-et.md): a hand-written protobuf decoder (no prost, no
//! code shared with the exporter), the feeder's load-time rules, and an event replay in the
//! analytical congestion-aware backend's model (eager sends, (tag, src, dst, size) matching,
//! store-and-forward hops, FIFO links, floor(bytes/bw) and floor(latency + bytes/bw)). Besides the
//! time and deadlock freedom, the replay checks that every SEND is issued only after the schedule
//! has produced what it sends: the producers of each chunk are derived from the schedule's own
//! transfers, independently of the exporter's dependencies.

use ccsynth::schedule::{Op, Schedule};
use ccsynth::topology::Topology;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

/// A decoded node: what the custom path reads.
#[derive(Clone, Debug, Default)]
pub struct Node {
    pub id: u64,
    pub name: String,
    pub kind: u64,
    /// `data_deps`: what the feeder waits for.
    pub deps: Vec<u64>,
    /// `ctrl_deps`: read, not waited for (the feeder ignores them).
    pub ctrl_deps: Vec<u64>,
    pub duration_micros: u64,
    pub attrs: BTreeMap<String, i128>,
}

/// One file: its metadata version and its nodes, in file order.
#[derive(Clone, Debug)]
pub struct EtFile {
    pub version: String,
    pub nodes: Vec<Node>,
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

fn varint(b: &[u8], at: &mut usize, max_bytes: usize) -> Result<u64, String> {
    let mut v: u64 = 0;
    for i in 0..max_bytes {
        let byte = *b.get(*at).ok_or("truncated varint")?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(format!("varint longer than {max_bytes} bytes"))
}

/// The fields of one message: (field number, wire type, varint value or bytes).
enum Field<'a> {
    Varint(u64, u64),
    Bytes(u64, &'a [u8]),
}

fn fields(msg: &[u8]) -> Result<Vec<Field<'_>>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < msg.len() {
        let key = varint(msg, &mut at, 10)?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push(Field::Varint(field, varint(msg, &mut at, 10)?)),
            2 => {
                let len = varint(msg, &mut at, 10)? as usize;
                let bytes = msg.get(at..at + len).ok_or("truncated length-delimited field")?;
                at += len;
                out.push(Field::Bytes(field, bytes));
            }
            1 => at += 8,
            5 => at += 4,
            w => return Err(format!("wire type {w} in field {field}")),
        }
    }
    Ok(out)
}

fn attribute(msg: &[u8]) -> Result<(String, Option<i128>), String> {
    let mut name = String::new();
    let mut value = None;
    for f in fields(msg)? {
        match f {
            Field::Bytes(1, b) => name = String::from_utf8(b.to_vec()).map_err(|e| e.to_string())?,
            // int32 (7), int64 (9), uint32 (11), uint64 (13), bool (27): varints. int32 and int64
            // negatives are ten-byte two's complement.
            Field::Varint(7 | 9, v) => value = Some(v as i64 as i128),
            Field::Varint(11 | 13 | 27, v) => value = Some(v as i128),
            Field::Varint(n, _) | Field::Bytes(n, _) if n != 2 => {
                return Err(format!("attribute {name:?}: value in field {n}, not an integer member"));
            }
            _ => {}
        }
    }
    Ok((name, value))
}

fn packed_or_single(f: &Field<'_>, out: &mut Vec<u64>) -> Result<(), String> {
    match f {
        Field::Varint(_, v) => out.push(*v),
        Field::Bytes(_, b) => {
            let mut at = 0;
            while at < b.len() {
                out.push(varint(b, &mut at, 10)?);
            }
        }
    }
    Ok(())
}

fn node(msg: &[u8]) -> Result<Node, String> {
    let mut n = Node::default();
    for f in fields(msg)? {
        match &f {
            Field::Varint(1, v) => n.id = *v,
            Field::Bytes(2, b) => n.name = String::from_utf8(b.to_vec()).map_err(|e| e.to_string())?,
            Field::Varint(3, v) => n.kind = *v,
            // ASTRA-sim's feeder resolves `data_deps` (5) alone; `ctrl_deps` (4) are read and kept
            // aside, never waited for.
            Field::Varint(4, _) | Field::Bytes(4, _) => packed_or_single(&f, &mut n.ctrl_deps)?,
            Field::Varint(5, _) | Field::Bytes(5, _) => packed_or_single(&f, &mut n.deps)?,
            Field::Varint(7, v) => n.duration_micros = *v,
            Field::Bytes(10, b) => {
                let (name, value) = attribute(b)?;
                let value = value.ok_or(format!("node {}: attribute {name:?} has no value", n.id))?;
                if n.attrs.insert(name.clone(), value).is_some() {
                    return Err(format!("node {}: attribute {name:?} twice", n.id));
                }
            }
            _ => {}
        }
    }
    Ok(n)
}

/// Reads a file as the feeder does: LEB128 lengths of at most 5 bytes, a metadata message first,
/// then nodes to the end.
pub fn decode(bytes: &[u8]) -> Result<EtFile, String> {
    let mut at = 0;
    let mut messages = Vec::new();
    while at < bytes.len() {
        let len = varint(bytes, &mut at, 5)? as usize;
        let msg = bytes.get(at..at + len).ok_or("truncated message")?;
        at += len;
        messages.push(msg);
    }
    let (meta, rest) = messages.split_first().ok_or("empty file: no metadata")?;
    let mut version = String::new();
    for f in fields(meta)? {
        if let Field::Bytes(1, b) = f {
            version = String::from_utf8(b.to_vec()).map_err(|e| e.to_string())?;
        }
    }
    if version.is_empty() {
        return Err("metadata without a version (chakra's Python reader stops at an empty message)".into());
    }
    let nodes = rest.iter().map(|m| node(m)).collect::<Result<Vec<_>, _>>()?;
    Ok(EtFile { version, nodes })
}

// ---------------------------------------------------------------------------------------------
// Load-time rules
// ---------------------------------------------------------------------------------------------

const COMP: u64 = 4;
const SEND: u64 = 5;
const RECV: u64 = 6;

fn attr(n: &Node, name: &str, file: &str) -> Result<i128, String> {
    n.attrs.get(name).copied().ok_or(format!("{file}: node {}: attribute {name} not found", n.id))
}

/// What the feeder refuses at load time, and what the custom path cannot run.
pub fn check_file(f: &EtFile, npu: usize, npus: usize, file: &str) -> Result<(), String> {
    let mut ids = std::collections::HashSet::new();
    for n in &f.nodes {
        if !ids.insert(n.id) {
            return Err(format!("{file}: node id {} twice", n.id));
        }
    }
    if f.nodes.is_empty() || f.nodes.iter().all(|n| !n.deps.is_empty()) {
        return Err(format!("{file}: no node free of dependencies"));
    }
    for n in &f.nodes {
        if let Some(d) = n.deps.iter().find(|d| !ids.contains(d)) {
            return Err(format!("{file}: node {} depends on {d}, not in the file", n.id));
        }
        match n.kind {
            COMP => {}
            SEND | RECV => {
                let peer = attr(n, if n.kind == SEND { "comm_dst" } else { "comm_src" }, file)?;
                let size = attr(n, "comm_size", file)?;
                let tag = attr(n, "comm_tag", file)?;
                if !(0..npus as i128).contains(&peer) || peer == npu as i128 {
                    return Err(format!("{file}: node {}: peer {peer} (own NPU {npu}, {npus} NPUs)", n.id));
                }
                if size <= 0 {
                    return Err(format!("{file}: node {}: comm_size {size}", n.id));
                }
                if !(0..500_000_000).contains(&tag) {
                    return Err(format!("{file}: node {}: comm_tag {tag} (read modulo 5e8)", n.id));
                }
            }
            k => return Err(format!("{file}: node {}: type {k}, which the custom path never finishes", n.id)),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The replay
// ---------------------------------------------------------------------------------------------

/// The network: per directed NPU pair, the route as a list of (link src, link dst), bytes per ns
/// and latency per link.
#[derive(Clone)]
pub struct Network {
    pub bytes_per_ns: f64,
    pub latency_ns: f64,
    routes: HashMap<(usize, usize), Vec<(usize, usize)>>,
    /// Per message tag (transfer index), a route that overrides the pair's: the schedule's own.
    by_tag: HashMap<i128, Vec<(usize, usize)>>,
}

impl Network {
    /// Routes over the schedule's topology by fewest hops (lowest ids first), with ASTRA-sim's
    /// bandwidth from the exported network file (GB/s of 2^30 B) and its latency.
    pub fn new(t: &Topology, network_yaml: &str) -> Result<Network, String> {
        let value = |key: &str| -> Result<f64, String> {
            let line = network_yaml.lines().find(|l| l.starts_with(key)).ok_or(format!("no {key}"))?;
            let inner = line.split('[').nth(1).and_then(|r| r.split(']').next()).ok_or(format!("bad {key}"))?;
            inner.trim().parse::<f64>().map_err(|e| format!("{key}: {e}"))
        };
        let gb = value("bandwidth:")?;
        let latency_ns = value("latency:")?;
        let n = t.nodes();
        let mut routes = HashMap::new();
        for s in 0..t.npus() {
            let mut prev = vec![usize::MAX; n];
            let mut seen = vec![false; n];
            seen[s] = true;
            let mut q = VecDeque::from([s]);
            while let Some(v) = q.pop_front() {
                for l in t.out_links(v) {
                    let w = t.links()[l].dst;
                    if !seen[w] {
                        seen[w] = true;
                        prev[w] = v;
                        q.push_back(w);
                    }
                }
            }
            for (d, &reached) in seen.iter().enumerate().take(t.npus()) {
                if d == s || !reached {
                    continue;
                }
                let mut hops = Vec::new();
                let mut v = d;
                while v != s {
                    hops.push((prev[v], v));
                    v = prev[v];
                }
                hops.reverse();
                routes.insert((s, d), hops);
            }
        }
        Ok(Network { bytes_per_ns: gb * (1u64 << 30) as f64 / 1e9, latency_ns, routes, by_tag: HashMap::new() })
    }

    /// Each message along its transfer's own path in `s` (as ccsynth's simulator routes it),
    /// as ASTRA-sim does when its network description carries the schedule's routes.
    pub fn routed_as(mut self, s: &Schedule) -> Result<Network, String> {
        for i in 0..s.transfers.len() {
            let links = ccsynth::sim::links_of(s, i).map_err(|e| e.to_string())?;
            let hops = links.iter().map(|&l| (s.topology.links()[l].src, s.topology.links()[l].dst)).collect();
            self.by_tag.insert(i as i128, hops);
        }
        Ok(self)
    }

    /// The route message `msg` takes: with the schedule's routes, the part of its transfer's
    /// path from the message's source to its destination (a relayed transfer is one message a
    /// hop between the NPUs it visits).
    fn route(&self, msg: &Message) -> Result<&[(usize, usize)], String> {
        if let Some(path) = self.by_tag.get(&msg.tag) {
            let from = path.iter().position(|l| l.0 == msg.src);
            let to = path.iter().position(|l| l.1 == msg.dst);
            return match (from, to) {
                (Some(a), Some(b)) if a <= b => Ok(&path[a..=b]),
                _ => Err(format!("message {} -> {} (tag {}) is not on its transfer's path", msg.src, msg.dst, msg.tag)),
            };
        }
        self.routes.get(&(msg.src, msg.dst)).map(|r| &r[..]).ok_or(format!("no route {} -> {}", msg.src, msg.dst))
    }
}

/// The outcome of a replay.
#[derive(Debug)]
pub struct Replayed {
    /// The time the last NPU finished, ns (ASTRA-sim's largest `finished, N cycles`).
    pub finish_ns: u64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Node (npu, index in file) finished.
    Done(usize, usize),
    /// Message m reached the end of hop h.
    Hop(usize, usize),
}

/// What pairs a send with a receive: (tag, src, dst, size).
type MatchKey = (i128, usize, usize, i128);

struct Message {
    src: usize,
    dst: usize,
    tag: i128,
    size: i128,
    send: (usize, usize),
}

/// Replays the files (indexed by NPU) over `net`. `jitter` (a seed) adds up to 50% of a hop's
/// time to each hop's delivery, to try other orders; None is ASTRA-sim's own timing. Checks
/// every SEND against the schedule: transfer `comm_tag` is issued only once every transfer that
/// produced its chunks at the sender (in an earlier step, through local moves too) has
/// completed there.
pub fn replay(s: &Schedule, files: &[EtFile], net: &Network, jitter: Option<u64>) -> Result<Replayed, String> {
    replay_issuing(s, files, net, jitter, Issue::AsReady)
}

/// The order a runtime issues the nodes that are ready at one time in.
#[derive(Clone, Copy, Debug)]
pub enum Issue {
    /// Each as it becomes ready, event by event (the replay's own order).
    AsReady,
    /// Every event at a time handled first, then all the ready nodes issued in an order
    /// shuffled by the seed: as ASTRA-sim walks an unordered set of them, but adversarially.
    Shuffled(u64),
}

/// `replay`, issuing ready nodes as `issue` says.
pub fn replay_issuing(
    s: &Schedule,
    files: &[EtFile],
    net: &Network,
    jitter: Option<u64>,
    issue: Issue,
) -> Result<Replayed, String> {
    let producers = producers(s);
    let mut links = Links::new(jitter);
    let npus = files.len();
    let index: Vec<HashMap<u64, usize>> =
        files.iter().map(|f| f.nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect()).collect();
    let mut waiting: Vec<Vec<usize>> = files.iter().map(|f| f.nodes.iter().map(|n| n.deps.len()).collect()).collect();
    let mut children: Vec<Vec<Vec<usize>>> = files.iter().map(|f| vec![Vec::new(); f.nodes.len()]).collect();
    for (v, f) in files.iter().enumerate() {
        for (i, n) in f.nodes.iter().enumerate() {
            for d in &n.deps {
                children[v][index[v][d]].push(i);
            }
        }
    }
    let mut done_at: Vec<Vec<Option<u64>>> = files.iter().map(|f| vec![None; f.nodes.len()]).collect();
    // When each transfer completed at its destination (the RECV of a copy, the COMP after the
    // RECV of a reduce).
    let mut transfer_done: HashMap<usize, u64> = HashMap::new();
    let mut recv_tag: HashMap<(usize, usize), usize> = HashMap::new();
    let mut clock = Clock::default();
    let mut messages: Vec<Message> = Vec::new();
    // Per matching key: arrived messages not yet received, and posted receives not yet matched.
    let mut arrived: HashMap<MatchKey, VecDeque<(u64, usize)>> = HashMap::new();
    let mut posted: HashMap<MatchKey, VecDeque<(usize, usize, u64)>> = HashMap::new();
    let mut ready: Vec<(usize, usize)> = Vec::new();
    for (v, w) in waiting.iter().enumerate() {
        for (i, &c) in w.iter().enumerate() {
            if c == 0 {
                ready.push((v, i));
            }
        }
    }
    let mut now = 0u64;
    let mut finished = 0usize;
    let total: usize = files.iter().map(|f| f.nodes.len()).sum();
    let mut rng = match issue {
        Issue::Shuffled(seed) => seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        Issue::AsReady => 0,
    };
    loop {
        // Shuffled: nothing is issued while events at `now` remain; then all that is ready, in a
        // shuffled order.
        let shuffled = matches!(issue, Issue::Shuffled(_));
        let held = shuffled && clock.peek_time() == Some(now);
        if shuffled && !held {
            for k in (1..ready.len()).rev() {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                ready.swap(k, (rng % (k as u64 + 1)) as usize);
            }
        }
        // Issue every ready node at `now`.
        while !held && let Some((v, i)) = ready.pop() {
            let n = &files[v].nodes[i];
            match n.kind {
                COMP => {
                    let d = if n.duration_micros == 0 { 1 } else { n.duration_micros * 1000 };
                    clock.at(now + d, Event::Done(v, i));
                }
                SEND => {
                    let tag = n.attrs["comm_tag"];
                    let ti = tag as usize;
                    for (c, p) in producers.get(&ti).into_iter().flatten() {
                        let at = transfer_done.get(p).copied();
                        if at.is_none_or(|t| t > now) {
                            return Err(format!(
                                "npu {v}: SEND of transfer {ti} issued at {now} ns before transfer {p}, which produced chunk {c} it sends, completed ({at:?})"
                            ));
                        }
                    }
                    let dst = n.attrs["comm_dst"] as usize;
                    let m = messages.len();
                    messages.push(Message { src: v, dst, tag, size: n.attrs["comm_size"], send: (v, i) });
                    links.start_hop(net, &messages[m], m, 0, now, &mut clock)?;
                }
                RECV => {
                    let key = (n.attrs["comm_tag"], n.attrs["comm_src"] as usize, v, n.attrs["comm_size"]);
                    recv_tag.insert((v, i), n.attrs["comm_tag"] as usize);
                    match arrived.get_mut(&key).and_then(VecDeque::pop_front) {
                        Some((t, _)) => {
                            clock.at(now.max(t), Event::Done(v, i));
                        }
                        None => posted.entry(key).or_default().push_back((v, i, now)),
                    }
                }
                _ => unreachable!("checked at load"),
            }
        }
        let Some((t, ev)) = clock.next() else { break };
        now = t;
        match ev {
            Event::Done(v, i) => {
                done_at[v][i] = Some(now);
                finished += 1;
                let n = &files[v].nodes[i];
                // A copy completes with its RECV; a reduce with its own COMP (the node right after
                // its RECV in the file, depending on it), or with its RECV when it has none (a
                // reduce of 0 µs). Another transfer's COMP that also waits for the RECV does not
                // count.
                let own_comp = |v: usize, recv: usize| {
                    files[v]
                        .nodes
                        .get(recv + 1)
                        .is_some_and(|c| c.kind == COMP && c.deps.contains(&files[v].nodes[recv].id))
                };
                if n.kind == RECV && (s.transfers.at(recv_tag[&(v, i)]).op == Op::Copy || !own_comp(v, i)) {
                    transfer_done.insert(recv_tag[&(v, i)], now);
                }
                if n.kind == COMP && i > 0 && files[v].nodes[i - 1].kind == RECV && own_comp(v, i - 1) {
                    transfer_done.insert(recv_tag[&(v, i - 1)], now);
                }
                for &c in &children[v][i] {
                    waiting[v][c] -= 1;
                    if waiting[v][c] == 0 {
                        ready.push((v, c));
                    }
                }
            }
            Event::Hop(m, h) => {
                let hops = net.route(&messages[m])?;
                if h + 1 < hops.len() {
                    links.start_hop(net, &messages[m], m, h + 1, now, &mut clock)?;
                    continue;
                }
                // Arrived: the SEND completes; the matching RECV too if it is posted.
                let msg = &messages[m];
                clock.at(now, Event::Done(msg.send.0, msg.send.1));
                let key = (msg.tag, msg.src, msg.dst, msg.size);
                match posted.get_mut(&key).and_then(VecDeque::pop_front) {
                    Some((v, i, _)) => {
                        clock.at(now, Event::Done(v, i));
                    }
                    None => arrived.entry(key).or_default().push_back((now, m)),
                }
            }
        }
    }
    if finished != total {
        let stuck: Vec<String> = (0..npus)
            .flat_map(|v| (0..files[v].nodes.len()).map(move |i| (v, i)))
            .filter(|&(v, i)| done_at[v][i].is_none())
            .take(4)
            .map(|(v, i)| format!("npu {v} node {} ({})", files[v].nodes[i].id, files[v].nodes[i].name))
            .collect();
        return Err(format!("deadlock: {} of {total} nodes finished; unfinished: {}", finished, stuck.join(", ")));
    }
    let finish_ns = done_at.iter().flatten().flatten().copied().max().unwrap_or(0);
    Ok(Replayed { finish_ns })
}

/// Events in time order (ties in the order they were scheduled).
#[derive(Default)]
struct Clock {
    heap: BinaryHeap<std::cmp::Reverse<(u64, u64, Event)>>,
    seq: u64,
}

impl Clock {
    fn at(&mut self, t: u64, ev: Event) {
        self.seq += 1;
        self.heap.push(std::cmp::Reverse((t, self.seq, ev)));
    }
    fn next(&mut self) -> Option<(u64, Event)> {
        self.heap.pop().map(|std::cmp::Reverse((t, _, ev))| (t, ev))
    }
    fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|std::cmp::Reverse((t, _, _))| *t)
    }
}

/// The links' FIFO state, and the jitter's generator (xorshift from the seed).
struct Links {
    free: HashMap<(usize, usize), u64>,
    rng: Option<u64>,
}

impl Links {
    fn new(jitter: Option<u64>) -> Links {
        Links { free: HashMap::new(), rng: jitter.map(|seed| seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1) }
    }

    /// Message `m` takes hop `h` of its route from `now`: it waits for the link, holds it for
    /// floor(bytes/bw), and reaches the hop's end floor(latency + bytes/bw) after it starts
    /// (plus up to half that again with jitter).
    fn start_hop(
        &mut self,
        net: &Network,
        msg: &Message,
        m: usize,
        h: usize,
        now: u64,
        clock: &mut Clock,
    ) -> Result<(), String> {
        let hops = net.route(msg)?;
        let link = hops[h];
        let serialize = (msg.size as f64 / net.bytes_per_ns).floor() as u64;
        // A hold of 0 ns schedules the link's release at the current time, and ASTRA-sim's event
        // queue asserts that it never does (`EventQueue::proceed`): the run aborts.
        if serialize == 0 {
            return Err(format!(
                "message {m} of {} bytes holds its link 0 ns (below one ns at {} B/ns): ASTRA-sim aborts",
                msg.size, net.bytes_per_ns
            ));
        }
        let start = now.max(self.free.get(&link).copied().unwrap_or(0));
        self.free.insert(link, start + serialize);
        let mut deliver = (net.latency_ns + msg.size as f64 / net.bytes_per_ns).floor() as u64;
        if let Some(rng) = &mut self.rng {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            deliver += (deliver as f64 * 0.5 * ((*rng % 1000) as f64 / 1000.0)) as u64;
        }
        clock.at(start + deliver, Event::Hop(m, h));
        Ok(())
    }
}

/// Per network transfer, the (chunk, transfer) pairs whose completion at the sender produced
/// what it sends: the last network writes of each slot it reads, in earlier steps, followed
/// through local moves (which are instantaneous in ASTRA-sim: they have no node).
fn producers(s: &Schedule) -> HashMap<usize, Vec<(u32, usize)>> {
    let mut last: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
    let mut out: HashMap<usize, Vec<(u32, usize)>> = HashMap::new();
    let order = s.replay_order();
    for steps in order.steps(&s.transfers) {
        let mut updates: Vec<((u32, u32), Vec<usize>)> = Vec::new();
        for k in steps {
            let ti = order.get(k);
            let t = s.transfers.at(ti);
            let get = |v: u32, c: u32| last.get(&(v, c)).cloned().unwrap_or_default();
            if t.is_local() {
                for (i, &c) in t.chunks.iter().enumerate() {
                    let w = t.written()[i];
                    let mut p = get(t.src, c);
                    if t.op == Op::Reduce {
                        p.extend(get(t.src, w));
                    }
                    updates.push(((t.src, w), p));
                }
                continue;
            }
            let list: Vec<(u32, usize)> =
                t.chunks.iter().flat_map(|&c| get(t.src, c).into_iter().map(move |p| (c, p))).collect();
            out.insert(ti, list);
            for &w in t.written() {
                // A reduce combines with what the receiver held.
                let mut p = vec![ti];
                if t.op == Op::Reduce {
                    p.extend(get(t.dst, w));
                }
                updates.push(((t.dst, w), p));
            }
        }
        let mut merged: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
        for (key, p) in updates {
            merged.entry(key).or_default().extend(p);
        }
        last.extend(merged);
    }
    out
}
