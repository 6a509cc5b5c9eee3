//! SVG pictures, written by hand (rectangles, lines and text need no plotting crate, and no
//! fonts are embedded): a timeline of link use for one replayed schedule, and goodput against
//! message size for the synthesizer and the baselines.

use crate::schedule::{Op, Schedule};
use crate::sim::TransferTime;
use std::fmt::Write;

/// Most slices a timeline draws; beyond, the picture is refused (and unreadable anyway).
pub const MAX_TIMELINE_SLICES: usize = 200_000;

/// Rows a timeline draws: beyond, the busiest links (by time carrying data) are drawn and the
/// rest counted in a note (a torus:8x8x8 all-gather uses 3,072 links: 43,000 px of rows).
pub const MAX_TIMELINE_ROWS: usize = 256;

const LEFT: f64 = 170.0;
const WIDTH: f64 = 1000.0;
const ROW: f64 = 14.0;
const TOP: f64 = 40.0;
/// Rows start below the top axis.
const ROWS_TOP: f64 = TOP + 16.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// "Nice" tick values covering 0..=max: 1, 2 or 5 times a power of ten.
fn ticks(max: f64, n: usize) -> Vec<f64> {
    if max <= 0.0 || !max.is_finite() {
        return vec![0.0];
    }
    let raw = max / n as f64;
    let p = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|&s| s >= raw).unwrap_or(10.0 * p);
    (0..).map(|i| i as f64 * step).take_while(|&v| v <= max * 1.0001).collect()
}

/// A number for an axis label: at most 3 significant decimals, no trailing zeros.
fn label(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A power of ten for a log axis: plain down to 0.001, then as 1e-4, 1e-5, ...
fn decade(v: f64) -> String {
    if v >= 1e-3 { label(v) } else { format!("1e{}", v.log10().round() as i32) }
}

/// The timeline: one row per link that carries something (then one per NPU with local
/// moves), at most `MAX_TIMELINE_ROWS` (the busiest, the rest counted in a note), one
/// rectangle per transfer on each link of its path, copies blue and reduces orange (a
/// legend says so), time in µs along the top and the bottom. `times` and `links` are the
/// replay's; `warning`, where given, is written in red under the title (an invalid schedule
/// is drawn as it replays, and the picture says it is not valid).
pub(crate) fn timeline_svg(
    s: &Schedule,
    times: &[TransferTime],
    links: &[Vec<(usize, TransferTime)>],
    warning: Option<&str>,
) -> String {
    let total_ns = times.iter().map(|t| t.end_ns).fold(0.0, f64::max).max(1e-9);
    let mut rows = Rows::assign(s, links);
    // At scale, the busiest rows only (in their order), the others counted.
    let hidden = rows.labels.len().saturating_sub(MAX_TIMELINE_ROWS);
    if hidden > 0 {
        rows.keep_busiest(s, times, links);
    }
    let mut out = String::new();
    timeline_header(&mut out, s, total_ns, rows.labels.len(), hidden, warning);
    timeline_row_bands(&mut out, &rows.labels);
    timeline_transfers(&mut out, s, times, links, &rows, total_ns);
    timeline_time_axis(&mut out, total_ns, rows.labels.len());
    out.push_str("</svg>\n");
    out
}

/// Each link's and each NPU's local-moves row on the timeline (`None`: not drawn), and their labels.
struct Rows {
    of_link: Vec<Option<usize>>,
    of_npu: Vec<Option<usize>>,
    labels: Vec<String>,
}

impl Rows {
    /// One row per link that carries something, then one per NPU with local moves.
    fn assign(s: &Schedule, links: &[Vec<(usize, TransferTime)>]) -> Rows {
        let topo = &s.topology;
        // Rows: used links in link order, then NPUs with local moves.
        let mut of_link = vec![None; topo.links().len()];
        let mut of_npu = vec![None; topo.npus()];
        let mut labels: Vec<String> = Vec::new();
        for (l, _) in links.iter().flatten() {
            of_link[*l] = Some(0);
        }
        for (l, r) in of_link.iter_mut().enumerate() {
            if r.is_some() {
                *r = Some(labels.len());
                let link = &topo.links()[l];
                labels.push(format!("link {}→{}", link.src, link.dst));
            }
        }
        for (i, t) in s.transfers.iter().enumerate() {
            if links[i].is_empty() && of_npu[t.dst as usize].is_none() {
                of_npu[t.dst as usize] = Some(usize::MAX);
            }
        }
        for (v, r) in of_npu.iter_mut().enumerate() {
            if r.is_some() {
                *r = Some(labels.len());
                labels.push(format!("NPU {v} local"));
            }
        }
        Rows { of_link, of_npu, labels }
    }

    /// The rows a transfer to NPU `dst` is drawn on, each with its span there: those of its
    /// `path`'s links (each for its hop), or `dst`'s local row for the transfer's `whole` span.
    fn of_transfer(&self, dst: u32, path: &[(usize, TransferTime)], whole: TransferTime) -> Vec<(usize, TransferTime)> {
        if path.is_empty() {
            self.of_npu[dst as usize].into_iter().map(|r| (r, whole)).collect()
        } else {
            path.iter().filter_map(|&(l, span)| self.of_link[l].map(|r| (r, span))).collect()
        }
    }

    /// Keeps the `MAX_TIMELINE_ROWS` busiest rows (by time carrying data); needs more rows than that.
    fn keep_busiest(&mut self, s: &Schedule, times: &[TransferTime], links: &[Vec<(usize, TransferTime)>]) {
        let mut busy = vec![0.0f64; self.labels.len()];
        for (i, t) in s.transfers.iter().enumerate() {
            for (r, span) in self.of_transfer(t.dst, &links[i], times[i]) {
                busy[r] += span.end_ns - span.start_ns;
            }
        }
        let mut order: Vec<usize> = (0..self.labels.len()).collect();
        order.sort_by(|&a, &b| busy[b].total_cmp(&busy[a]).then(a.cmp(&b)));
        let mut kept = vec![None; self.labels.len()];
        let mut chosen: Vec<usize> = order[..MAX_TIMELINE_ROWS].to_vec();
        chosen.sort_unstable();
        for (new, &old) in chosen.iter().enumerate() {
            kept[old] = Some(new);
        }
        for r in self.of_link.iter_mut().chain(self.of_npu.iter_mut()) {
            *r = r.and_then(|old| kept[old]);
        }
        self.labels = chosen.iter().map(|&old| self.labels[old].clone()).collect();
    }
}

/// The timeline's opening tag, its title, the legend, and under the title the `warning` and
/// the note counting `hidden` rows.
fn timeline_header(out: &mut String, s: &Schedule, total_ns: f64, n_rows: usize, hidden: usize, warning: Option<&str>) {
    let height = TOP + 16.0 + n_rows as f64 * ROW + 50.0;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="11">"#,
        LEFT + WIDTH + 20.0
    );
    let title = format!(
        "{} {} of {} on {} NPUs: {} µs",
        s.algorithm.as_deref().unwrap_or("schedule"),
        s.collective.kind.name(),
        crate::units::format_size(s.collective.size_bytes),
        s.topology.npus(),
        label(total_ns / 1e3)
    );
    let _ = writeln!(out, r#"<text x="{LEFT}" y="20" font-size="14">{}</text>"#, escape(&title));
    // The legend, top right.
    for (i, (name, fill)) in [("copy", "#4e79a7"), ("reduce", "#f28e2b")].into_iter().enumerate() {
        let x = LEFT + WIDTH - 140.0 + i as f64 * 70.0;
        let _ = writeln!(out, r##"<rect x="{x}" y="10" width="12" height="10" fill="{fill}"/>"##);
        let _ = writeln!(out, r#"<text x="{}" y="19">{name}</text>"#, x + 16.0);
    }
    // One line under the title: the warning in red first, then the note on hidden rows.
    let mut line = String::new();
    if let Some(w) = warning {
        let _ = write!(line, r##"<tspan fill="#c00">{}</tspan>"##, escape(w));
    }
    if hidden > 0 {
        let sep = if line.is_empty() { "" } else { "; " };
        let _ = write!(
            line,
            "{sep}the {} busiest of {} rows; {hidden} less busy rows not drawn",
            MAX_TIMELINE_ROWS,
            MAX_TIMELINE_ROWS + hidden
        );
    }
    if !line.is_empty() {
        let _ = writeln!(out, r#"<text x="{LEFT}" y="34" font-size="11">{line}</text>"#);
    }
}

/// Each row's label on the left and its grey band across the plot.
fn timeline_row_bands(out: &mut String, labels: &[String]) {
    for (r, name) in labels.iter().enumerate() {
        let y = ROWS_TOP + r as f64 * ROW;
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + ROW - 3.0,
            escape(name)
        );
        let _ = writeln!(out, r##"<rect x="{LEFT}" y="{y}" width="{WIDTH}" height="{}" fill="#f4f4f4"/>"##, ROW - 2.0);
    }
}

/// One rectangle, with a tooltip, per transfer on each of its rows.
fn timeline_transfers(
    out: &mut String,
    s: &Schedule,
    times: &[TransferTime],
    links: &[Vec<(usize, TransferTime)>],
    rows: &Rows,
    total_ns: f64,
) {
    let _ = writeln!(out, r#"<g class="transfers">"#);
    for (i, t) in s.transfers.iter().enumerate() {
        let fill = if t.op == Op::Reduce { "#f28e2b" } else { "#4e79a7" };
        for (r, tm) in rows.of_transfer(t.dst, &links[i], times[i]) {
            let x = LEFT + tm.start_ns / total_ns * WIDTH;
            let w = ((tm.end_ns - tm.start_ns) / total_ns * WIDTH).max(0.5);
            let y = ROWS_TOP + r as f64 * ROW;
            let _ = writeln!(
                out,
                r##"<rect x="{x:.2}" y="{y}" width="{w:.2}" height="{}" fill="{fill}" stroke="#ffffff" stroke-width="0.5"><title>transfer {i}, step {}: {}→{}, {} chunk(s), {}–{} µs</title></rect>"##,
                ROW - 2.0,
                t.step,
                t.src,
                t.dst,
                t.chunks.len(),
                label(tm.start_ns / 1e3),
                label(tm.end_ns / 1e3)
            );
        }
    }
    let _ = writeln!(out, "</g>");
}

/// The time axis in µs under `n_rows` rows: gridlines, tick labels top and bottom, its title.
fn timeline_time_axis(out: &mut String, total_ns: f64, n_rows: usize) {
    let axis_y = ROWS_TOP + n_rows as f64 * ROW + 4.0;
    for v in ticks(total_ns / 1e3, 8) {
        let x = LEFT + v * 1e3 / total_ns * WIDTH;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.2}" y1="{ROWS_TOP}" x2="{x:.2}" y2="{axis_y}" stroke="#bbb" stroke-width="0.5"/>"##
        );
        // The axis at the top too: a tall timeline is read from either end.
        let _ = writeln!(out, r#"<text x="{x:.2}" y="{}" text-anchor="middle">{}</text>"#, ROWS_TOP - 4.0, label(v));
        let _ = writeln!(out, r#"<text x="{x:.2}" y="{}" text-anchor="middle">{}</text>"#, axis_y + 14.0, label(v));
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">time (µs)</text>"#,
        LEFT + WIDTH / 2.0,
        axis_y + 30.0
    );
}

/// One line of a goodput chart: (message size in bytes, collective time in ns) points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(u64, f64)>,
}

/// One chart: a topology and collective, its series.
#[derive(Clone, Debug, PartialEq)]
pub struct GoodputChart {
    pub title: String,
    pub series: Vec<Series>,
    /// Bus bandwidth over goodput (algbw) for the chart's collective and NPU count, as
    /// nccl-tests computes busbw (`CollectiveKind::bus_factor`): given, a second axis on the
    /// right reads the lines as busbw.
    pub bus_factor: Option<f64>,
}

/// Charts side by side in the goodput picture's grid.
const GRID_COLUMNS: usize = 2;

/// Tableau's ten colours; past ten series the lines are also dashed.
const COLORS: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

/// The series of a chart drawn as the best achievable: grey and dashed.
pub const BOUND_SERIES: &str = "bound";
/// The series drawn last and thickest, over the others: the schedule the chart is about
/// (`bench --suite sizes` and `goodput` name `auto`'s line so; under the baselines' lines it
/// was hidden where it met them, which is where it matters).
pub const LEAD_SERIES: &str = "auto";
const CHART_H: f64 = 260.0;
const CHART_W: f64 = 640.0;

/// Goodput (message size / collective time, GB/s, on a log scale: from bytes to gigabytes it
/// spans decades, and a linear axis put everything under a few MiB on zero) against message
/// size (log scale), one chart per entry in a grid of `GRID_COLUMNS` columns (18 charts
/// stacked made a picture 6,300 px tall), one coloured line per series with a legend; a series
/// keeps its colour in every chart (by its name's first appearance); the series named
/// `BOUND_SERIES` (size over the lower bound on time: no schedule does better) grey and
/// dashed; the series named `LEAD_SERIES` drawn last and thicker. A chart with a `bus_factor`
/// has a second axis on the right in bus bandwidth, with its own whole decades (the goodput
/// axis's decades times the factor gave ticks at 1968.75 and 196.875).
pub fn goodput_svg(charts: &[GoodputChart]) -> String {
    let names = series_names(charts);
    let block = CHART_H + 90.0;
    // A chart's cell: the left axis, the plot, the busbw axis, the legend.
    let cell = 70.0 + CHART_W + 70.0 + 180.0;
    let columns = charts.len().clamp(1, GRID_COLUMNS);
    let rows = charts.len().div_ceil(columns).max(1);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">"#,
        cell * columns as f64,
        block * rows as f64
    );
    for (ci, chart) in charts.iter().enumerate() {
        let left = (ci % columns) as f64 * cell + 70.0;
        let top = (ci / columns) as f64 * block + 40.0;
        let scale = Scale::fit(chart, left, top);
        let _ = writeln!(out, r#"<g class="chart" data-title="{}">"#, escape(&chart.title));
        chart_frame(&mut out, chart, &scale);
        busbw_axis(&mut out, chart, &scale);
        size_axis(&mut out, chart, &scale);
        chart_series(&mut out, chart, &scale, &names);
        let _ = writeln!(out, "</g>");
    }
    out.push_str("</svg>\n");
    out
}

/// Series names by first appearance over all charts, `BOUND_SERIES` left out: the colour order.
fn series_names(charts: &[GoodputChart]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for s in charts.iter().flat_map(|c| c.series.iter()) {
        if s.name != BOUND_SERIES && !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    names
}

/// A series name's place in the colour order (0 for a name not in it, such as `BOUND_SERIES`).
fn colour_index(names: &[&str], name: &str) -> usize {
    names.iter().position(|&n| n == name).unwrap_or(0)
}

/// Goodput in GB/s (bytes per ns) of `size` bytes in `ns`; zero when no time passed.
fn goodput(size: u64, ns: f64) -> f64 {
    if ns > 0.0 { size as f64 / ns } else { 0.0 }
}

/// A chart's plot corner in px, its log2 message-size span `lo..hi` and goodput decades `dlo..dhi`.
struct Scale {
    left: f64,
    top: f64,
    lo: f64,
    hi: f64,
    dlo: f64,
    dhi: f64,
}

impl Scale {
    /// The scale fitting a chart's points into the plot with its top left corner at `left`, `top`.
    fn fit(chart: &GoodputChart, left: f64, top: f64) -> Scale {
        let pts = chart.series.iter().flat_map(|s| s.points.iter());
        let (mut lo, mut hi, mut ymin, mut ymax) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, 0.0f64);
        for &(size, ns) in pts {
            let x = (size.max(1) as f64).log2();
            lo = lo.min(x);
            hi = hi.max(x);
            let g = goodput(size, ns);
            ymax = ymax.max(g);
            if g > 0.0 {
                ymin = ymin.min(g);
            }
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if hi - lo < 1.0 {
            hi = lo + 1.0;
        }
        // Whole decades from below the least goodput to above the most.
        let (dlo, dhi) = if ymin.is_finite() && ymax > 0.0 {
            let (a, b) = (ymin.log10().floor(), ymax.log10().ceil());
            (a, if b > a { b } else { a + 1.0 })
        } else {
            (0.0, 1.0)
        };
        Scale { left, top, lo, hi, dlo, dhi }
    }

    /// The x in px of a message size in bytes (log scale).
    fn px(&self, size: u64) -> f64 {
        self.left + ((size.max(1) as f64).log2() - self.lo) / (self.hi - self.lo) * CHART_W
    }

    /// The y in px of a goodput in GB/s (log scale, clamped to the chart's decades).
    fn py(&self, g: f64) -> f64 {
        // A goodput of zero (no time) sits on the axis.
        let d = if g > 0.0 { g.log10().clamp(self.dlo, self.dhi) } else { self.dlo };
        self.top + CHART_H - (d - self.dlo) / (self.dhi - self.dlo) * CHART_H
    }
}

/// A chart's title, its frame, and the goodput axis: a gridline and a label per decade.
fn chart_frame(out: &mut String, chart: &GoodputChart, scale: &Scale) {
    let (left, top) = (scale.left, scale.top);
    let _ = writeln!(out, r#"<text x="{left}" y="{}" font-size="14">{}</text>"#, top - 14.0, escape(&chart.title));
    let _ = writeln!(
        out,
        r##"<rect x="{left}" y="{top}" width="{CHART_W}" height="{CHART_H}" fill="none" stroke="#888"/>"##
    );
    for v in (scale.dlo as i32..=scale.dhi as i32).map(|d| 10f64.powi(d)) {
        let y = scale.py(v);
        let _ = writeln!(out, r##"<line x1="{left}" y1="{y:.2}" x2="{}" y2="{y:.2}" stroke="#ddd"/>"##, left + CHART_W);
        let _ = writeln!(out, r#"<text x="{}" y="{:.2}" text-anchor="end">{}</text>"#, left - 6.0, y + 4.0, decade(v));
    }
}

/// The busbw axis on the right of a chart with a `bus_factor`: its ticks and its title.
fn busbw_axis(out: &mut String, chart: &GoodputChart, scale: &Scale) {
    // The busbw axis: whole decades of bus bandwidth within the goodput axis's span, each at
    // the goodput it stands for (busbw / factor), with a tick.
    // No busbw at all where the factor is 0 (one NPU moves nothing over a bus: "× 0" was drawn).
    let Some(f) = chart.bus_factor.filter(|f| *f > 0.0 && f.is_finite()) else {
        return;
    };
    {
        let (blo, bhi) = ((scale.dlo + f.log10() - 1e-9).ceil() as i32, (scale.dhi + f.log10() + 1e-9).floor() as i32);
        for d in blo..=bhi {
            let b = 10f64.powi(d);
            let y = scale.py(b / f);
            let x = scale.left + CHART_W;
            let _ = writeln!(out, r##"<line x1="{x}" y1="{y:.2}" x2="{}" y2="{y:.2}" stroke="#888"/>"##, x + 4.0);
            let _ = writeln!(
                out,
                r#"<text class="busbw" x="{}" y="{:.2}" text-anchor="start">{}</text>"#,
                x + 6.0,
                y + 4.0,
                decade(b)
            );
        }
    }
    {
        let (x, y) = (scale.left + CHART_W + 56.0, scale.top + CHART_H / 2.0);
        let _ = writeln!(
            out,
            r#"<text x="{x}" y="{y}" transform="rotate(90 {x} {y})" text-anchor="middle">busbw (GB/s, × {})</text>"#,
            label(f)
        );
    }
}

/// The message-size axis (a label under each size some series has) and both axes' titles.
fn size_axis(out: &mut String, chart: &GoodputChart, scale: &Scale) {
    let (left, top) = (scale.left, scale.top);
    let mut sizes: Vec<u64> = chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for &size in &sizes {
        let x = scale.px(size);
        let _ = writeln!(
            out,
            r#"<text x="{x:.2}" y="{}" text-anchor="middle">{}</text>"#,
            top + CHART_H + 16.0,
            crate::units::format_size(size)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">message size</text><text x="{}" y="{}" transform="rotate(-90 {} {})" text-anchor="middle">goodput (GB/s)</text>"#,
        left + CHART_W / 2.0,
        top + CHART_H + 34.0,
        left - 48.0,
        top + CHART_H / 2.0,
        left - 48.0,
        top + CHART_H / 2.0
    );
}

/// How a series' lines are stroked: colour, width in px, and the dash attribute (or nothing).
#[derive(Clone, Copy)]
struct Stroke {
    color: &'static str,
    width: u32,
    dash: &'static str,
}

impl Stroke {
    /// The stroke of `series`, whose name is at `ci` in the colour order.
    fn of(series: &Series, ci: usize) -> Stroke {
        let bound = series.name == BOUND_SERIES;
        let width = if series.name == LEAD_SERIES { 3 } else { 2 };
        let color = if bound { "#555555" } else { COLORS[ci % COLORS.len()] };
        let dash = if bound {
            r#" stroke-dasharray="6 4""#
        } else if ci >= COLORS.len() {
            r#" stroke-dasharray="2 2""#
        } else {
            ""
        };
        Stroke { color, width, dash }
    }
}

/// Every series of a chart in its own group: its line, its dots and its legend entry.
fn chart_series(out: &mut String, chart: &GoodputChart, scale: &Scale, names: &[&str]) {
    // The lead series last, over the others; the legend keeps the chart's order.
    let mut order: Vec<usize> = (0..chart.series.len()).collect();
    order.sort_by_key(|&i| chart.series[i].name == LEAD_SERIES);
    for si in order {
        let series = &chart.series[si];
        let stroke = Stroke::of(series, colour_index(names, &series.name));
        let _ = writeln!(out, r#"<g class="series" data-name="{}">"#, escape(&series.name));
        series_line(out, series, scale, stroke);
        legend_entry(out, series, si, scale, stroke);
        let _ = writeln!(out, "</g>");
    }
}

/// A series' polyline by increasing message size, and a dot with a tooltip at each point.
fn series_line(out: &mut String, series: &Series, scale: &Scale, stroke: Stroke) {
    let Stroke { color, width, dash } = stroke;
    let mut points: Vec<(u64, f64)> = series.points.clone();
    points.sort_by_key(|p| p.0);
    let coords: Vec<String> =
        points.iter().map(|&(size, ns)| format!("{:.2},{:.2}", scale.px(size), scale.py(goodput(size, ns)))).collect();
    let _ = writeln!(
        out,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="{width}"{dash}/>"#,
        coords.join(" ")
    );
    for &(size, ns) in &points {
        let _ = writeln!(
            out,
            r#"<circle cx="{:.2}" cy="{:.2}" r="3" fill="{color}"><title>{}: {} at {}, {} µs</title></circle>"#,
            scale.px(size),
            scale.py(goodput(size, ns)),
            escape(&series.name),
            label(goodput(size, ns)),
            crate::units::format_size(size),
            label(ns / 1e3)
        );
    }
}

/// A series' entry in the chart's legend, on line `si` (the chart's order of series).
fn legend_entry(out: &mut String, series: &Series, si: usize, scale: &Scale, stroke: Stroke) {
    let Stroke { color, width, dash } = stroke;
    let ly = scale.top + 10.0 + si as f64 * 18.0;
    let lx = scale.left + CHART_W + 86.0;
    let _ = writeln!(
        out,
        r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="{width}"{dash}/>"#,
        lx + 20.0
    );
    let _ = writeln!(out, r#"<text x="{}" y="{}">{}</text>"#, lx + 26.0, ly + 4.0, escape(&series.name));
}
