//! Named topology generators (`ring:8`, `torus:8x8x8@bw=50`, `rail:4x8`, ...) with
//! per-dimension link parameters.

use super::{Link, LinkParams, Topology};
use crate::error::InputError;
use crate::limits;

/// Generator names, for help texts and for telling a spec from a file name.
pub const GENERATORS: &[&str] =
    &["ring", "mesh", "torus", "fc", "switch", "hypercube", "hyperx", "dragonfly", "hammingmesh", "hier", "rail"];

fn err(spec: &str, msg: impl std::fmt::Display) -> InputError {
    // A long spec is echoed in part, so the reason after it is not clipped away with it (a
    // spec of 877 characters filled the message's 300 and named nothing).
    const ECHOED: usize = 80;
    match spec.char_indices().nth(ECHOED) {
        None => InputError::new("spec", format!("{spec:?}: {msg}")),
        Some((at, _)) => {
            InputError::new("spec", format!("{:?}… ({} characters): {msg}", &spec[..at], spec.chars().count()))
        }
    }
}

/// Parses a generator spec `NAME:ARGS[@bw=B0,B1,..;lat=L0,L1,..]`.
///
/// Bandwidths are GB/s and latencies ns, one value per dimension (a single value applies to
/// every dimension); the default is 100 GB/s and 500 ns. Dimension 0 varies fastest in the
/// node id. See docs/CLI.md, "Generators", for every generator's dimensions.
pub fn parse_spec(spec: &str) -> Result<Topology, InputError> {
    parse_spec_capped(spec, limits::MAX_NODES, limits::MAX_LINKS)
}

/// `parse_spec`, refusing a generator of more than `max_npus` NPUs or `max_links` links from
/// its arguments alone, before anything is built (a server's limits: `hypercube:20` is a million
/// nodes, `fc:4096` 16.8 million links).
pub fn parse_spec_capped(spec: &str, max_npus: usize, max_links: usize) -> Result<Topology, InputError> {
    let spec = spec.trim();
    let (body, params) = match spec.split_once('@') {
        Some((b, p)) => (b, Some(p)),
        None => (spec, None),
    };
    let (name, args) = body
        .split_once(':')
        .ok_or_else(|| err(spec, format!("expected NAME:ARGS with NAME one of {}", GENERATORS.join(", "))))?;
    let (bw, lat) = parse_params(spec, params)?;
    let cx = GenCtx { spec, bw, lat, max_npus, max_links: max_links.min(limits::MAX_LINKS) };
    let b = match name {
        "ring" => ring(&cx, args)?,
        "mesh" | "torus" => mesh_torus(&cx, args, name == "torus")?,
        "hypercube" => hypercube(&cx, args)?,
        "fc" => fc(&cx, args)?,
        "switch" => switch(&cx, args)?,
        "hyperx" => hyperx(&cx, args)?,
        "dragonfly" => dragonfly(&cx, args)?,
        "hammingmesh" => hammingmesh(&cx, args)?,
        "hier" => hier(&cx, args)?,
        "rail" => rail(&cx, args)?,
        other => {
            return Err(err(spec, format!("unknown generator {other:?}; expected one of {}", GENERATORS.join(", "))));
        }
    };
    Ok(b.finish())
}

/// What every generator needs besides its arguments: the whole spec (for messages), the link
/// parameters after `@` and the NPU cap.
struct GenCtx<'a> {
    spec: &'a str,
    bw: Vec<f64>,
    lat: Vec<f64>,
    max_npus: usize,
    max_links: usize,
}

impl GenCtx<'_> {
    /// Link parameters of each of `n` dimensions.
    fn dims(&self, n: usize) -> Result<Vec<LinkParams>, InputError> {
        per_dim(self.spec, n, &self.bw, &self.lat)
    }
    fn builder(&self, npus: usize, switches: usize) -> Result<Builder, InputError> {
        Builder::new(self.spec, npus, switches, self.max_npus, self.max_links)
    }
}

/// `ring:N` (bidirectional) or `ring:N:uni`.
fn ring(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let (n, uni) = match args.split_once(':') {
        Some((n, "uni")) => (n, true),
        Some((_, other)) => {
            return Err(err(cx.spec, format!("unknown ring option {other:?}; expected \"uni\"")));
        }
        None => (args, false),
    };
    let n = count(cx.spec, n, 1)?;
    let p = cx.dims(1)?;
    let mut b = cx.builder(n, 0)?;
    for i in 0..n {
        let j = (i + 1) % n;
        if uni {
            b.uni(i, j, p[0]);
        } else {
            b.bi(i, j, p[0]);
        }
    }
    Ok(b)
}

/// `mesh:AxBx..`, or `torus:AxBx..` with `wrap`.
fn mesh_torus(cx: &GenCtx, args: &str, wrap: bool) -> Result<Builder, InputError> {
    let dims = dims_list(cx.spec, args)?;
    let p = cx.dims(dims.len())?;
    let mut b = cx.builder(product(cx.spec, &dims)?, 0)?;
    b.check_links(grid_links(&dims, wrap))?;
    grid(&mut b, &dims, &p, wrap);
    Ok(b)
}

/// `hypercube:D`: 2^D NPUs.
fn hypercube(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let d = count(cx.spec, args, 0)?;
    if d > 20 {
        return Err(err(cx.spec, "hypercube dimension must be at most 20"));
    }
    let dims = vec![2; d];
    let p = cx.dims(d.max(1))?;
    let mut b = cx.builder(1 << d, 0)?;
    b.check_links(grid_links(&dims, false))?;
    grid(&mut b, &dims, &p, false);
    Ok(b)
}

/// `fc:N`: fully connected.
fn fc(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let n = count(cx.spec, args, 1)?;
    let p = cx.dims(1)?;
    let mut b = cx.builder(n, 0)?;
    b.check_links(n.saturating_mul(n))?;
    for i in 0..n {
        for j in i + 1..n {
            b.bi(i, j, p[0]);
        }
    }
    Ok(b)
}

/// `switch:N`: N NPUs on one switch.
fn switch(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let n = count(cx.spec, args, 1)?;
    let p = cx.dims(1)?;
    let mut b = cx.builder(n, 1)?;
    for i in 0..n {
        b.bi(i, n, p[0]);
    }
    Ok(b)
}

/// `hyperx:AxBx..`: every line of the grid fully connected.
fn hyperx(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let dims = dims_list(cx.spec, args)?;
    let p = cx.dims(dims.len())?;
    let n = product(cx.spec, &dims)?;
    let mut b = cx.builder(n, 0)?;
    b.check_links(n.saturating_mul(dims.iter().sum::<usize>()))?;
    for_each_line(&dims, |d, members| {
        for (x, &u) in members.iter().enumerate() {
            for &v in &members[x + 1..] {
                b.bi(u, v, p[d]);
            }
        }
    });
    Ok(b)
}

/// `dragonfly:A:G`: G fully connected groups of A NPUs, one global link between each two groups.
fn dragonfly(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let (a, g) =
        args.split_once(':').ok_or_else(|| err(cx.spec, "expected dragonfly:A:G (A NPUs per group, G groups)"))?;
    let (a, g) = (count(cx.spec, a, 1)?, count(cx.spec, g, 1)?);
    let p = cx.dims(2)?;
    let mut b = cx.builder(a.saturating_mul(g), 0)?;
    b.check_links(a.saturating_mul(a).saturating_mul(g).saturating_add(g.saturating_mul(g)))?;
    for grp in 0..g {
        for x in 0..a {
            for y in x + 1..a {
                b.bi(grp * a + x, grp * a + y, p[0]);
            }
        }
    }
    // Group g's global link to group h leaves from router (index of h among g's peers) mod A,
    // which spreads the G-1 global links of a group evenly over its routers.
    let peer_index = |from: usize, to: usize| if to < from { to } else { to - 1 };
    for g1 in 0..g {
        for g2 in g1 + 1..g {
            let r1 = peer_index(g1, g2) % a;
            let r2 = peer_index(g2, g1) % a;
            b.bi(g1 * a + r1, g2 * a + r2, p[1]);
        }
    }
    Ok(b)
}

/// `hammingmesh:AxB:RxC`: R×C boards of A×B NPUs, with row and column switches.
fn hammingmesh(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let (board, grid_) =
        args.split_once(':').ok_or_else(|| err(cx.spec, "expected hammingmesh:AxB:RxC (A×B boards, R×C of them)"))?;
    let bd = dims_list(cx.spec, board)?;
    let gd = dims_list(cx.spec, grid_)?;
    if bd.len() != 2 || gd.len() != 2 {
        return Err(err(cx.spec, "expected two-dimensional boards and board grid, e.g. hammingmesh:2x2:4x4"));
    }
    let p = cx.dims(2)?;
    let (a, bb, r, c) = (bd[0], bd[1], gd[0], gd[1]);
    let width = a.saturating_mul(c);
    let height = bb.saturating_mul(r);
    let n = width.saturating_mul(height);
    let mut b = cx.builder(n, width.saturating_add(height))?;
    let id = |x: usize, y: usize| y * width + x;
    // On-board 2D mesh links.
    for y in 0..height {
        for x in 0..width {
            if x % a + 1 < a {
                b.bi(id(x, y), id(x + 1, y), p[0]);
            }
            if y % bb + 1 < bb {
                b.bi(id(x, y), id(x, y + 1), p[0]);
            }
        }
    }
    // One switch per global row joins the west and east edge NPUs of every board on it,
    // one per global column the north and south edges (HammingMesh's row/column networks).
    for y in 0..height {
        let sw = n + y;
        for bc in 0..c {
            b.bi(id(bc * a, y), sw, p[1]);
            b.bi(id(bc * a + a - 1, y), sw, p[1]);
        }
    }
    for x in 0..width {
        let sw = n + height + x;
        for br in 0..r {
            b.bi(id(x, br * bb), sw, p[1]);
            b.bi(id(x, br * bb + bb - 1), sw, p[1]);
        }
    }
    Ok(b)
}

/// `hier:ringN,fcM,switchK,meshL,..`: one network kind per dimension.
fn hier(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let mut kinds = Vec::new();
    let mut dims = Vec::new();
    for part in args.split(',') {
        let part = part.trim();
        let k = ["ring", "fc", "switch", "mesh"]
            .into_iter()
            .find(|k| part.starts_with(k))
            .ok_or_else(|| err(cx.spec, format!("hier dimension {part:?}: expected ringN, fcN, switchN or meshN")))?;
        kinds.push(k);
        dims.push(count(cx.spec, &part[k.len()..], 1)?);
    }
    let p = cx.dims(dims.len())?;
    let n = product(cx.spec, &dims)?;
    let mut switches = 0usize;
    for (d, k) in kinds.iter().enumerate() {
        if *k == "switch" {
            switches = switches.saturating_add(n / dims[d]);
        }
    }
    let mut b = cx.builder(n, switches)?;
    // The links of each dimension's n / size lines, counted before any is built (an fc
    // dimension grows with its size squared: `hier:fc2048` is fc:2048's 4.2 M links).
    let per_line = |k: &str, s: usize| match k {
        "ring" if s > 2 => 2 * s,
        "ring" | "mesh" => 2 * s.saturating_sub(1),
        "fc" => s.saturating_mul(s - 1),
        _ => 2 * s,
    };
    b.check_links(
        kinds.iter().zip(&dims).fold(0usize, |sum, (k, &s)| sum.saturating_add((n / s).saturating_mul(per_line(k, s)))),
    )?;
    let mut next_switch = n;
    for_each_line(&dims, |d, members| match kinds[d] {
        "ring" => {
            if members.len() > 1 {
                for i in 0..members.len() {
                    b.bi(members[i], members[(i + 1) % members.len()], p[d]);
                }
            }
        }
        "mesh" => {
            for w in members.windows(2) {
                b.bi(w[0], w[1], p[d]);
            }
        }
        "fc" => {
            for (x, &u) in members.iter().enumerate() {
                for &v in &members[x + 1..] {
                    b.bi(u, v, p[d]);
                }
            }
        }
        _ => {
            for &u in members {
                b.bi(u, next_switch, p[d]);
            }
            next_switch += 1;
        }
    });
    Ok(b)
}

/// `rail:NxG`: N nodes of G GPUs, a switch per node and one per rail (GPU index).
fn rail(cx: &GenCtx, args: &str) -> Result<Builder, InputError> {
    let dims = dims_list(cx.spec, args)?;
    if dims.len() != 2 {
        return Err(err(cx.spec, "expected rail:NxG (N nodes of G GPUs)"));
    }
    let (nodes, gpus) = (dims[0], dims[1]);
    let p = cx.dims(2)?;
    let n = nodes.saturating_mul(gpus);
    let mut b = cx.builder(n, nodes.saturating_add(gpus))?;
    for node in 0..nodes {
        for g in 0..gpus {
            b.bi(node * gpus + g, n + node, p[0]);
            b.bi(node * gpus + g, n + nodes + g, p[1]);
        }
    }
    Ok(b)
}

struct Builder {
    /// The spec and the link cap, for `check_links`.
    spec: String,
    max_links: usize,
    npus: usize,
    switches: usize,
    /// In the order made; a pair made twice keeps its first (`finish`: `from_links` sorts
    /// stably and drops later duplicates, as a set of pairs seen did at a quarter of the time
    /// of `fc:1448`'s 2.1 M links, 2026-12-05).
    links: Vec<Link>,
}

impl Builder {
    fn new(spec: &str, npus: usize, switches: usize, max_npus: usize, max_links: usize) -> Result<Builder, InputError> {
        if npus.saturating_add(switches) > limits::MAX_NODES {
            return Err(err(spec, format!("more than {} nodes", limits::MAX_NODES)));
        }
        if npus > max_npus {
            return Err(err(spec, format!("{npus} NPUs: at most {max_npus} are accepted")));
        }
        Ok(Builder { spec: spec.to_string(), max_links, npus, switches, links: Vec::new() })
    }
    /// Refuses a generator of about `n` links beyond the cap, before building any.
    fn check_links(&self, n: usize) -> Result<(), InputError> {
        if n > self.max_links {
            return Err(err(&self.spec, format!("about {n} links: at most {} are accepted", self.max_links)));
        }
        Ok(())
    }
    fn uni(&mut self, u: usize, v: usize, p: LinkParams) {
        if u != v {
            self.links.push(Link {
                src: u,
                dst: v,
                latency_ns: p.latency_ns,
                bandwidth_gb_per_s: p.bandwidth_gb_per_s,
            });
        }
    }
    fn bi(&mut self, u: usize, v: usize, p: LinkParams) {
        self.uni(u, v, p);
        self.uni(v, u, p);
    }
    fn finish(self) -> Topology {
        Topology::from_links(self.npus, self.switches, self.links, Vec::new())
    }
}

/// Calls `f(dim, members)` for every line of the grid: the nodes that differ only in `dim`.
fn for_each_line(dims: &[usize], mut f: impl FnMut(usize, &[usize])) {
    let n: usize = dims.iter().product();
    let mut stride = 1;
    for (d, &size) in dims.iter().enumerate() {
        let mut members = Vec::with_capacity(size);
        for base in 0..n {
            if (base / stride) % size != 0 {
                continue;
            }
            members.clear();
            members.extend((0..size).map(|k| base + k * stride));
            f(d, &members);
        }
        stride *= size;
    }
}

/// The directed links `grid` makes: each line of side n has n − 1 pairs, one more wrapped
/// when n > 2 (`hypercube:20` and `torus:4x..x4` of ten sides made 21 M, past the cap, and
/// their own output could not be read back).
fn grid_links(dims: &[usize], wrap: bool) -> usize {
    let npus = dims.iter().fold(1usize, |a, &n| a.saturating_mul(n));
    let pairs = |n: usize| if wrap && n > 2 { n } else { n.saturating_sub(1) };
    dims.iter()
        .filter(|&&n| n > 0)
        .map(|&n| (npus / n).saturating_mul(pairs(n)).saturating_mul(2))
        .fold(0, usize::saturating_add)
}

fn grid(b: &mut Builder, dims: &[usize], p: &[LinkParams], wrap: bool) {
    for_each_line(dims, |d, m| {
        for w in m.windows(2) {
            b.bi(w[0], w[1], p[d]);
        }
        if wrap && m.len() > 2 {
            b.bi(m[m.len() - 1], m[0], p[d]);
        }
    });
}

fn count(spec: &str, s: &str, min: usize) -> Result<usize, InputError> {
    let t = s.trim();
    let n: usize = t.parse().map_err(|_| {
        // A whole number past usize is a count, too large ("is not a count" read as a typo).
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            err(spec, format!("{t} exceeds the limit of {} nodes", limits::MAX_NODES))
        } else {
            err(spec, format!("{s:?} is not a count: expected a whole number"))
        }
    })?;
    if n < min {
        return Err(err(spec, format!("{n} is too small: expected at least {min}")));
    }
    if n > limits::MAX_NODES {
        return Err(err(spec, format!("{n} exceeds the limit of {} nodes", limits::MAX_NODES)));
    }
    Ok(n)
}

fn dims_list(spec: &str, s: &str) -> Result<Vec<usize>, InputError> {
    s.split('x').map(|d| count(spec, d, 1)).collect()
}

fn product(spec: &str, dims: &[usize]) -> Result<usize, InputError> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d).filter(|&n| n <= limits::MAX_NODES))
        .ok_or_else(|| err(spec, format!("more than {} NPUs", limits::MAX_NODES)))
}

fn parse_params(spec: &str, params: Option<&str>) -> Result<(Vec<f64>, Vec<f64>), InputError> {
    let (mut bw, mut lat) = (Vec::new(), Vec::new());
    let Some(params) = params else {
        return Ok((bw, lat));
    };
    if params.trim().trim_matches(';').trim().is_empty() {
        return Err(err(spec, "nothing after '@': expected bw=GBPS[,..] and/or lat=NS[,..], or no '@'"));
    }
    let mut seen: Vec<&str> = Vec::new();
    for part in params.split(';').filter(|p| !p.trim().is_empty()) {
        if let Some((k, _)) = part.split_once('=') {
            let k = k.trim();
            if seen.contains(&k) {
                return Err(err(spec, format!("{k} is given twice")));
            }
            seen.push(k);
        }
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| err(spec, format!("parameter {part:?}: expected bw=GBPS[,..] or lat=NS[,..]")))?;
        let vals: Vec<f64> = v
            .split(',')
            .map(|x| x.trim().parse::<f64>().map_err(|_| err(spec, format!("{x:?} is not a number"))))
            .collect::<Result<_, _>>()?;
        match k.trim() {
            "bw" => {
                let least = crate::limits::MIN_BANDWIDTH_GB_PER_S;
                if let Some(x) = vals.iter().find(|&&x| !crate::limits::bandwidth_ok(x)) {
                    let x = crate::units::short(*x);
                    return Err(err(
                        spec,
                        format!("bandwidth {x} is invalid: expected a finite value of at least {least:e} GB/s"),
                    ));
                }
                bw = vals;
            }
            "lat" => {
                let most = crate::limits::MAX_LATENCY_NS;
                if let Some(x) = vals.iter().find(|&&x| !crate::limits::latency_ok(x)) {
                    let x = crate::units::short(*x);
                    return Err(err(spec, format!("latency {x} is invalid: expected a value from 0 to {most:e} ns")));
                }
                lat = vals;
            }
            other => {
                return Err(err(spec, format!("unknown parameter {other:?}: expected bw or lat")));
            }
        }
    }
    Ok((bw, lat))
}

fn per_dim(spec: &str, n: usize, bw: &[f64], lat: &[f64]) -> Result<Vec<LinkParams>, InputError> {
    let pick = |vals: &[f64], i: usize, default: f64, what: &str| -> Result<f64, InputError> {
        match vals.len() {
            0 => Ok(default),
            1 => Ok(vals[0]),
            k if k == n => Ok(vals[i]),
            k if n == 1 => Err(err(spec, format!("{k} {what} values for 1 dimension: expected 1"))),
            k => Err(err(spec, format!("{k} {what} values for {n} dimensions: expected 1 or {n}"))),
        }
    };
    let d = LinkParams::default();
    (0..n)
        .map(|i| {
            Ok(LinkParams {
                bandwidth_gb_per_s: pick(bw, i, d.bandwidth_gb_per_s, "bw")?,
                latency_ns: pick(lat, i, d.latency_ns, "lat")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_s_links_are_counted_before_it_is_built() {
        for (spec, wrap) in [("mesh:2x3", false), ("torus:2x3", true), ("torus:3x4x5", true), ("mesh:7", false)] {
            let dims = dims_list(spec, spec.split_once(':').unwrap().1).unwrap();
            assert_eq!(grid_links(&dims, wrap), parse_spec(spec).unwrap().links().len(), "{spec}");
        }
        assert_eq!(grid_links(&[2; 5], false), parse_spec("hypercube:5").unwrap().links().len());
        // At the cap and one past it; then the generators that made 21 M links.
        assert!(parse_spec_capped("torus:4x4", 64, 64).is_ok());
        let e = parse_spec_capped("torus:4x4", 64, 63).unwrap_err().to_string();
        assert!(e.contains("about 64 links: at most 63 are accepted"), "{e}");
        for spec in ["hypercube:20", "torus:4x4x4x4x4x4x4x4x4x4"] {
            let e = parse_spec(spec).unwrap_err().to_string();
            assert!(e.contains("about 20971520 links: at most 16777216 are accepted"), "{spec}: {e}");
        }
    }
}
