//! Pictures of a replay through the engine's doors: per-transfer times from the simulator, the
//! Chrome/Perfetto trace (checked against the Trace Event Format's rules), the SVG timeline and
//! the goodput chart (parsed as XML, with the expected rows and series).

use crate::common::*;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, GoodputChart, Series};
use ccsynth::schedule::Schedule;
use ccsynth::sim;

fn run(spec: &str, c: CollectiveSpec, algorithm: &str) -> Schedule {
    let rs = engine::RequestSpec {
        target: engine::Target::One(c),
        algorithm: algorithm.parse().unwrap(),
        options: engine::Options { seed: Some(1), ..Default::default() },
    };
    let req = engine::Request::new(topo(spec), rs, &engine::Limits::default()).unwrap();
    engine::run(&req, engine::Control::none()).unwrap().schedule
}

#[test]
fn the_simulator_reports_each_transfers_start_and_end() {
    // Ring all-reduce on a uniform ring: 6 rounds, each transfer α + chunk/β, back to back.
    let s = run("ring:4@bw=50;lat=400", CollectiveSpec::new(K::AllReduce, 4 << 20).with_chunks_per_npu(1), "ring");
    let (timing, times) = sim::simulate_with_times(&s).unwrap();
    assert_eq!(times.len(), s.transfers.len());
    let hop = 400.0 + (1 << 20) as f64 / 50.0;
    for (t, tm) in s.transfers.iter().zip(&times) {
        assert!(close(tm.end_ns - tm.start_ns, hop), "{tm:?}");
        assert!(close(tm.start_ns, t.step as f64 * hop), "step {}: {tm:?}", t.step);
    }
    let last = times.iter().map(|t| t.end_ns).fold(0.0, f64::max);
    assert!(close(last, timing.collective_time_ns) && close(last, 6.0 * hop));
    assert_eq!(engine::transfer_times(&s).unwrap(), times);
}

/// The Trace Event Format's rules for the JSON object form, as Perfetto and chrome://tracing
/// read it, and the trace's own promises: one slice per transfer and link of its path, the
/// slices of one link never overlapping, the last ending at the collective time.
fn check_trace(s: &Schedule, text: &str) {
    let v: serde_json::Value = serde_json::from_str(text).expect("the trace is JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents is an array");
    assert_eq!(v["displayTimeUnit"], "ns");
    let mut named = std::collections::HashSet::new();
    let mut slices: Vec<(u64, u64, f64, f64)> = Vec::new();
    for e in events {
        let ph = e["ph"].as_str().expect("ph is a string");
        let pid = e["pid"].as_u64().expect("pid is a non-negative integer");
        let tid = e["tid"].as_u64().expect("tid is a non-negative integer");
        assert!(e["name"].is_string(), "{e}");
        match ph {
            "M" => {
                assert!(
                    ["process_name", "thread_name", "thread_sort_index"].contains(&e["name"].as_str().unwrap()),
                    "{e}"
                );
                assert!(e["args"].is_object(), "{e}");
                if e["name"] == "thread_name" {
                    assert!(e["args"]["name"].is_string());
                    named.insert((pid, tid));
                }
            }
            "X" => {
                let ts = e["ts"].as_f64().expect("ts is a number");
                let dur = e["dur"].as_f64().expect("dur is a number");
                assert!(ts >= 0.0 && dur >= 0.0, "{e}");
                let i = e["args"]["transfer"].as_u64().expect("args.transfer") as usize;
                let t = s.transfers.at(i);
                assert_eq!(e["args"]["step"], t.step);
                assert_eq!(e["args"]["chunk_count"], t.chunks.len());
                assert!(e["cat"] == "copy" || e["cat"] == "reduce");
                slices.push((pid, tid, ts, ts + dur));
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    assert_eq!(slices.len(), ccsynth::export::trace::slices(s));
    for &(pid, tid, ..) in &slices {
        assert!(named.contains(&(pid, tid)), "track {pid}/{tid} has no name");
    }
    // A link carries one transfer at a time in the α-β model.
    slices.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)).then(a.2.total_cmp(&b.2)));
    for w in slices.windows(2) {
        if (w[0].0, w[0].1) == (w[1].0, w[1].1) && w[0].0 == 1 {
            assert!(w[1].2 >= w[0].3 - 1e-9, "overlap on link {}: {w:?}", w[0].1);
        }
    }
    let end = slices.iter().map(|x| x.3).fold(0.0, f64::max);
    assert!(close(end, s.collective_time_ns.unwrap() / 1e3), "{end}");
}

#[test]
fn traces_follow_the_trace_event_format() {
    // A 4x4 torus all-reduce from the greedy, a switch fabric (paths through the switch),
    // a latency planner's schedule with scratch slots and local moves, and messages relayed
    // through NPUs (Swing's distant peers, dimension-ordered routes): each hop drawn on its own
    // links for its own span, so a link's slices never overlap.
    let cases = [
        run("torus:4x4", CollectiveSpec::new(K::AllReduce, 1 << 20), "greedy"),
        run("switch:6", CollectiveSpec::new(K::AllGather, 1 << 20), "greedy"),
        run("ring:7", CollectiveSpec::new(K::AllReduce, 64), "greedy"),
        run("fc:6", CollectiveSpec::new(K::AllReduce, 6 << 20), "kolmakov-r1"),
        run("torus:8x8", CollectiveSpec::new(K::AllReduce, 1 << 20), "swing-latency"),
        run("torus:4x4", CollectiveSpec::new(K::AllToAll, 2 << 20), "dimension-ordered"),
    ];
    for s in &cases {
        check_trace(s, &engine::export_trace(s, engine::MAX_TRACE_SLICES).unwrap());
    }
}

#[test]
fn a_trace_beyond_its_slice_limit_is_refused_before_the_replay() {
    let s = run("torus:4x4", CollectiveSpec::new(K::AllReduce, 1 << 20), "greedy");
    let n = ccsynth::export::trace::slices(&s);
    assert!(engine::export_trace(&s, n).is_ok());
    let e = engine::export_trace(&s, n - 1).unwrap_err().to_string();
    // A trace is named as one, not as a picture.
    assert!(
        e.contains(&format!("the trace would hold {n} slices")) && e.contains(&format!("at most {}", n - 1)),
        "{e}"
    );
}

#[test]
fn the_timeline_draws_one_bar_per_transfer_and_link() {
    let s = run("torus:4x4", CollectiveSpec::new(K::AllReduce, 1 << 20), "greedy");
    let t = engine::plot_timeline(&s).unwrap();
    assert!(t.invalid.is_none() && !t.svg.contains("not valid"));
    let svg = t.svg;
    let doc = roxmltree::Document::parse(&svg).expect("the timeline is XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let bars = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("transfers"))
        .expect("a transfers group")
        .children()
        .filter(|n| n.has_tag_name("rect"))
        .count();
    assert_eq!(bars, ccsynth::export::trace::slices(&s));
    let used: std::collections::HashSet<usize> =
        (0..s.transfers.len()).flat_map(|i| sim::links_of(&s, i).unwrap()).collect();
    let rows = doc
        .descendants()
        .filter(|n| n.has_tag_name("text") && n.text().is_some_and(|t| t.starts_with("link ")))
        .count();
    assert_eq!(rows, used.len(), "one row per link used");
    // A schedule that cannot be simulated is refused, naming the problem.
    let mut broken = s.clone();
    broken.transfers.edit(|ts| ts[0].src = 999);
    let e = engine::plot_timeline(&broken).unwrap_err();
    assert!(e.to_string().contains("cannot be simulated"), "{e}");
}

/// A schedule that simulates but is not valid is drawn as it replays (that is when one looks),
/// and the picture says so in red under its title, counting the violations.
#[test]
fn an_invalid_timeline_is_drawn_and_says_so() {
    let mut s = run("ring:4", CollectiveSpec::new(K::AllGather, 1 << 20), "ring");
    // The first transfer dropped: chunks it carried never reach their NPUs.
    s.transfers.edit(|ts| {
        ts.remove(0);
    });
    let report = ccsynth::validate::validate(&s);
    assert!(!report.valid);
    let t = engine::plot_timeline(&s).unwrap();
    let why = t.invalid.expect("the timeline says the schedule is not valid");
    let count = ccsynth::units::counted(report.violation_count, "violation");
    assert!(why.starts_with(&format!("not valid: {count}, the first: ")), "{why}");
    let doc = roxmltree::Document::parse(&t.svg).expect("the timeline is XML");
    let red =
        doc.descendants().find(|n| n.has_tag_name("tspan") && n.attribute("fill") == Some("#c00")).expect("a red note");
    assert_eq!(red.text(), Some(why.as_str()));
}

/// At scale (issue 30, rough edge 6) the timeline draws the busiest rows only and says how many
/// it left out; it has a legend, the time axis at the top and the bottom, and human sizes.
#[test]
fn a_large_timeline_keeps_its_busiest_rows_and_says_so() {
    let s = run("torus:8x8x8", CollectiveSpec::new(K::AllGather, 1 << 30), "bucket");
    let svg = engine::plot_timeline(&s).unwrap().svg;
    let doc = roxmltree::Document::parse(&svg).expect("the timeline is XML");
    let texts: Vec<&str> = doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect();
    let rows = texts.iter().filter(|t| t.starts_with("link ")).count();
    assert_eq!(rows, ccsynth::export::plot::MAX_TIMELINE_ROWS);
    let used: std::collections::HashSet<usize> =
        (0..s.transfers.len()).flat_map(|i| sim::links_of(&s, i).unwrap()).collect();
    let note = format!("{} less busy rows not drawn", used.len() - rows);
    assert!(texts.iter().any(|t| t.contains(&note)), "{note}");
    assert!(texts.contains(&"copy") && texts.contains(&"reduce"), "a legend");
    assert!(texts.iter().any(|t| t.contains("of 1 GiB on 512 NPUs")), "{:?}", &texts[..3]);
    // Every tick label twice: above the rows and below them.
    let zero = texts.iter().filter(|t| **t == "0").count();
    assert_eq!(zero, 2);
    let height: f64 = doc.root_element().attribute("height").unwrap().parse().unwrap();
    assert!(height < 4000.0, "{height}");
}

#[test]
fn the_goodput_chart_has_one_line_per_series() {
    let charts = vec![
        GoodputChart {
            title: "all_reduce on torus:4x4".into(),
            bus_factor: None,
            series: vec![
                Series { name: "auto".into(), points: vec![(32, 2000.0), (32 << 10, 3000.0), (2 << 20, 40_000.0)] },
                Series { name: "best baseline".into(), points: vec![(32, 2500.0), (2 << 20, 45_000.0)] },
            ],
        },
        GoodputChart {
            title: "all_gather on <ring>".into(),
            bus_factor: None,
            series: vec![Series { name: "greedy".into(), points: vec![(1024, 10.0)] }],
        },
    ];
    let svg = engine::plot_goodput(&charts);
    let doc = roxmltree::Document::parse(&svg).expect("the chart is XML");
    let titles: Vec<&str> = doc.descendants().filter_map(|n| n.attribute("data-title")).collect();
    assert_eq!(titles, ["all_reduce on torus:4x4", "all_gather on <ring>"]);
    let series: Vec<(&str, usize)> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("series"))
        .map(|g| (g.attribute("data-name").unwrap(), g.children().filter(|c| c.has_tag_name("circle")).count()))
        .collect();
    // auto is drawn last, over the lines it meets, and thicker; its legend keeps its place.
    assert_eq!(series, [("best baseline", 2), ("auto", 3), ("greedy", 1)]);
    let series_el = |name: &str| doc.descendants().find(|n| n.attribute("data-name") == Some(name)).unwrap();
    let width = |name: &str, tag: &str| -> String {
        let el = series_el(name).descendants().find(|n| n.has_tag_name(tag)).unwrap();
        el.attribute("stroke-width").unwrap().to_string()
    };
    assert_eq!((width("auto", "polyline"), width("best baseline", "polyline")), ("3".into(), "2".into()));
    let legend_y = |name: &str| -> f64 {
        series_el(name)
            .descendants()
            .find(|n| n.has_tag_name("line"))
            .unwrap()
            .attribute("y1")
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(legend_y("auto") < legend_y("best baseline"), "auto's legend stays first");
    // Goodput is size / time: auto at 2 MiB in 40 µs is 52.4288 GB/s.
    assert!(svg.contains("auto: 52.429 at 2 MiB, 40 µs"), "{svg}");
}

/// The goodput chart's y axis is logarithmic (goodput spans decades from bytes to gigabytes:
/// on a linear axis everything under a few MiB sat on zero), in whole decades; a series keeps
/// its colour in every chart, whatever other series a chart has.
#[test]
fn the_goodput_chart_is_logarithmic_and_keeps_colours() {
    let charts = vec![
        GoodputChart {
            title: "one".into(),
            bus_factor: None,
            series: vec![
                Series { name: "auto".into(), points: vec![(1 << 10, 1000.0), (1 << 20, 1000.0)] },
                Series { name: "ring".into(), points: vec![(1 << 10, 2000.0), (1 << 20, 2000.0)] },
            ],
        },
        GoodputChart {
            title: "two".into(),
            bus_factor: None,
            series: vec![
                Series { name: "bucket".into(), points: vec![(1 << 10, 1000.0)] },
                Series { name: "ring".into(), points: vec![(1 << 10, 1000.0)] },
            ],
        },
    ];
    let svg = engine::plot_goodput(&charts);
    let doc = roxmltree::Document::parse(&svg).expect("the chart is XML");
    let stroke = |chart: &str, name: &str| -> String {
        let c = doc.descendants().find(|n| n.attribute("data-title") == Some(chart)).unwrap();
        let s = c.descendants().find(|n| n.attribute("data-name") == Some(name)).unwrap();
        s.descendants().find(|n| n.has_tag_name("polyline")).unwrap().attribute("stroke").unwrap().to_string()
    };
    assert_eq!(stroke("one", "ring"), stroke("two", "ring"));
    let all = [stroke("one", "auto"), stroke("one", "ring"), stroke("two", "bucket")];
    assert!(all[0] != all[1] && all[1] != all[2] && all[0] != all[2], "{all:?}");
    // Chart one: 1 KiB in 2 µs is 0.512 GB/s, 1 MiB in 1 µs 1048.576 GB/s: decades 0.1 to 10^4.
    let one = doc.descendants().find(|n| n.attribute("data-title") == Some("one")).unwrap();
    let labels: Vec<&str> = one
        .descendants()
        .filter(|n| n.has_tag_name("text") && n.attribute("text-anchor") == Some("end"))
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(labels, ["0.1", "1", "10", "100", "1000", "10000"]);
    // Equal ratios, equal distances: auto's two points (1000× apart) and ring's (the same
    // sizes at half the goodput) rise by the same height, ring below auto by log10(2) of a decade.
    let ys = |name: &str| -> Vec<f64> {
        let s = one.descendants().find(|n| n.attribute("data-name") == Some(name)).unwrap();
        s.descendants()
            .filter(|n| n.has_tag_name("circle"))
            .map(|c| c.attribute("cy").unwrap().parse().unwrap())
            .collect()
    };
    let (a, r) = (ys("auto"), ys("ring"));
    let decade_px = 260.0 / 5.0;
    assert!(((a[0] - a[1]) - (r[0] - r[1])).abs() < 0.02, "{a:?} {r:?}");
    assert!(((r[0] - a[0]) - 2f64.log10() * decade_px).abs() < 0.02, "{a:?} {r:?}");
    assert!(((a[0] - a[1]) - 1024f64.log10() * decade_px).abs() < 0.02, "{a:?}");
}

/// Many goodput charts make a grid (18 stacked made a picture 6,300 px tall), and a chart that
/// knows its collective reads its lines as bus bandwidth too, on a second axis (nccl-tests'
/// busbw: algbw × 2(p−1)/p for an all-reduce).
#[test]
fn goodput_charts_form_a_grid_with_a_busbw_axis() {
    let chart = |title: &str, bus_factor| GoodputChart {
        title: title.into(),
        series: vec![Series { name: "auto".into(), points: vec![(1 << 10, 1000.0), (1 << 20, 1000.0)] }],
        bus_factor,
    };
    let p = 8usize;
    let ar = ccsynth::collective::CollectiveKind::AllReduce.bus_factor(p);
    assert!((ar - 2.0 * 7.0 / 8.0).abs() < 1e-12);
    let charts = vec![chart("a", Some(ar)), chart("b", None), chart("c", Some(0.5))];
    let svg = engine::plot_goodput(&charts);
    let doc = roxmltree::Document::parse(&svg).expect("the chart is XML");
    let size = |k: &str| -> f64 { doc.root_element().attribute(k).unwrap().parse().unwrap() };
    // Two columns, two rows.
    let one: GoodputChart = chart("alone", None);
    let single = roxmltree::Document::parse(&engine::plot_goodput(std::slice::from_ref(&one)))
        .unwrap()
        .root_element()
        .attribute("width")
        .unwrap()
        .parse::<f64>()
        .unwrap();
    assert!((size("width") - 2.0 * single).abs() < 1e-9, "{svg}");
    let frame = |t: &str| -> (f64, f64) {
        let g = doc.descendants().find(|n| n.attribute("data-title") == Some(t)).unwrap();
        let r = g.descendants().find(|n| n.has_tag_name("rect")).unwrap();
        (r.attribute("x").unwrap().parse().unwrap(), r.attribute("y").unwrap().parse().unwrap())
    };
    let (a, b, c) = (frame("a"), frame("b"), frame("c"));
    assert!(a.1 == b.1 && b.0 > a.0, "a and b side by side: {a:?} {b:?}");
    assert!(c.0 == a.0 && c.1 > a.1, "c below a: {a:?} {c:?}");
    // busbw labels: the whole decades of bus bandwidth the goodput axis spans (not its
    // decades times the factor, which gave ticks at 1968.75), on the right of a and c only.
    let labels = |t: &str, class: Option<&str>| -> Vec<(String, f64)> {
        let g = doc.descendants().find(|n| n.attribute("data-title") == Some(t)).unwrap();
        g.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter(|n| match class {
                Some(c) => n.attribute("class") == Some(c),
                None => n.attribute("text-anchor") == Some("end"),
            })
            .map(|n| (n.text().unwrap().to_string(), n.attribute("y").unwrap().parse().unwrap()))
            .collect()
    };
    let names = |v: Vec<(String, f64)>| v.into_iter().map(|(t, _)| t).collect::<Vec<_>>();
    // 1 KiB and 1 MiB in 1 µs: 1.024 and 1048.576 GB/s, goodput decades 1 to 10^4; busbw
    // spans 1.75 to 17500 on chart a, 0.5 to 5000 on chart c.
    assert_eq!(names(labels("a", None)), ["1", "10", "100", "1000", "10000"]);
    assert_eq!(names(labels("a", Some("busbw"))), ["10", "100", "1000", "10000"]);
    assert!(labels("b", Some("busbw")).is_empty());
    assert_eq!(names(labels("c", Some("busbw"))), ["1", "10", "100", "1000"]);
    // Each at the goodput it stands for: busbw 10 on chart a is goodput 10 / 1.75.
    let left = labels("a", None);
    let (y1, y10) = (left[0].1, left[1].1);
    let at = labels("a", Some("busbw"))[0].1;
    let want = y1 - (10.0f64 / ar).log10() * (y1 - y10);
    assert!((at - want).abs() < 0.02, "busbw 10 at y {at}, want {want}");
    // One NPU's factor is 0: no busbw axis at all (its title read "busbw (GB/s, × 0)").
    assert!(svg.contains("busbw (GB/s, × 1.75)"), "{svg}");
    let zero = ccsynth::collective::CollectiveKind::AllReduce.bus_factor(1);
    assert_eq!(zero, 0.0);
    let lone = engine::plot_goodput(&[chart("one", Some(zero))]);
    assert!(!lone.contains("busbw"), "{lone}");
}
