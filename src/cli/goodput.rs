//! `ccsynth plot goodput`'s input: the size sweep's or `compare`'s JSON read into charts.

use crate::engine;

/// The charts of a goodput input: the JSON of `bench --suite sizes --json` (per topology and
/// collective, the series auto, greedy, best baseline and lower bound), or `compare --json`
/// outputs at several sizes, one after another or in a JSON array (per collective, NPU count
/// and topology digest, one series per algorithm and the lower bound).
pub(super) fn goodput_charts(text: &str) -> Result<Vec<engine::GoodputChart>, String> {
    const BOUND: &str = engine::GOODPUT_BOUND_SERIES;
    const EXPECTED: &str =
        "expected the JSON of `ccsynth bench --suite sizes --json` or of `ccsynth compare --json` runs";
    let mut values = Vec::new();
    for v in serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>() {
        match v.map_err(|e| format!("{EXPECTED}: {e}"))? {
            serde_json::Value::Array(items) => values.extend(items),
            other => values.push(other),
        }
    }
    let mut charts: Vec<engine::GoodputChart> = Vec::new();
    // Each chart's key: its title, and for `compare` runs the topology's digest (runs on two
    // fabrics of one NPU count were drawn as one line).
    let mut keys: Vec<(String, Option<String>)> = Vec::new();
    // Runs that took no time (one NPU) have no goodput: left out, not drawn at 0.
    let mut timeless = 0usize;
    // busbw over algbw, from the collective's name and NPU count (when the input gives them).
    let factor = |kind: &str, npus: Option<u64>| {
        let npus = npus.filter(|&n| n > 0)?;
        Some(crate::collective::CollectiveKind::parse(kind)?.bus_factor(npus as usize))
    };
    let mut add = |title: String, digest: Option<&str>, bus_factor: Option<f64>, series: &str, size: u64, ns: f64| {
        if !(ns > 0.0 && ns.is_finite()) {
            timeless += 1;
            return;
        }
        let key = (title, digest.map(str::to_string));
        let at = match keys.iter().position(|k| *k == key) {
            Some(at) => at,
            None => {
                charts.push(engine::GoodputChart { title: key.0.clone(), series: Vec::new(), bus_factor });
                keys.push(key);
                charts.len() - 1
            }
        };
        let chart = &mut charts[at];
        let s = match chart.series.iter().position(|s| s.name == series) {
            Some(i) => i,
            None => {
                chart.series.push(engine::Series { name: series.to_string(), points: Vec::new() });
                chart.series.len() - 1
            }
        };
        chart.series[s].points.push((size, ns));
    };
    for (i, v) in values.iter().enumerate() {
        if let (Some(topology), Some(kind), Some(size)) =
            (v["case"]["topology"].as_str(), v["case"]["collective"].as_str(), v["case"]["size_bytes"].as_u64())
        {
            let title = format!("{kind} on {topology}");
            let bus = factor(kind, v["npus"].as_u64());
            for (series, field) in [
                ("auto", "auto_us"),
                ("greedy", "greedy_us"),
                ("best baseline", "best_baseline_us"),
                (BOUND, "lower_bound_us"),
            ] {
                if let Some(us) = v[field].as_f64() {
                    add(title.clone(), None, bus, series, size, us * 1e3);
                }
            }
        } else if let (Some(kind), Some(size), Some(npus), Some(rows)) =
            (v["collective"].as_str(), v["size_bytes"].as_u64(), v["npus"].as_u64(), v["rows"].as_array())
        {
            let title = format!("{kind} on {npus} NPUs");
            let bus = factor(kind, Some(npus));
            let digest = v["topology_digest"].as_str();
            for r in rows {
                if let (Some(name), Some(ns)) = (r["algorithm"].as_str(), r["collective_time_ns"].as_f64()) {
                    add(title.clone(), digest, bus, name, size, ns);
                }
            }
            if let Some(ns) = v["lower_bound_ns"].as_f64() {
                add(title, digest, bus, BOUND, size, ns);
            }
        } else {
            return Err(format!("item {i}: {EXPECTED}"));
        }
    }
    if charts.is_empty() && timeless > 0 {
        return Err("every run took no time (one NPU has nothing to send): no goodput to draw".into());
    }
    if charts.is_empty() {
        return Err(format!("no rows: {EXPECTED}"));
    }
    // Charts of one title on several fabrics are told apart by the topology's digest.
    for (i, (title, digest)) in keys.iter().enumerate() {
        if let Some(d) = digest.as_deref().filter(|_| keys.iter().filter(|k| k.0 == *title).count() > 1) {
            charts[i].title = format!("{title}, topology {}", &d[..d.len().min(8)]);
        }
    }
    Ok(charts)
}
