//! `ccsynth plot goodput`'s input: the size sweep's or `compare`'s JSON read into charts.

use crate::engine;

/// The charts of a goodput input: the JSON of `bench --suite sizes --json` (per topology and
/// collective, the series auto, greedy, best baseline and lower bound), or `compare --json`
/// outputs at several sizes, one after another or in a JSON array (per collective and NPU
/// count, one series per algorithm and the lower bound).
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
    // busbw over algbw, from the collective's name and NPU count (when the input gives them).
    let factor = |kind: &str, npus: Option<u64>| {
        let npus = npus.filter(|&n| n > 0)?;
        Some(crate::collective::CollectiveKind::parse(kind)?.bus_factor(npus as usize))
    };
    let mut add = |title: String, bus_factor: Option<f64>, series: &str, size: u64, ns: f64| {
        let at = match charts.iter().position(|c| c.title == title) {
            Some(at) => at,
            None => {
                charts.push(engine::GoodputChart { title, series: Vec::new(), bus_factor });
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
                    add(title.clone(), bus, series, size, us * 1e3);
                }
            }
        } else if let (Some(kind), Some(size), Some(npus), Some(rows)) =
            (v["collective"].as_str(), v["size_bytes"].as_u64(), v["npus"].as_u64(), v["rows"].as_array())
        {
            let title = format!("{kind} on {npus} NPUs");
            let bus = factor(kind, Some(npus));
            for r in rows {
                if let (Some(name), Some(ns)) = (r["algorithm"].as_str(), r["collective_time_ns"].as_f64()) {
                    add(title.clone(), bus, name, size, ns);
                }
            }
            if let Some(ns) = v["lower_bound_ns"].as_f64() {
                add(title, bus, BOUND, size, ns);
            }
        } else {
            return Err(format!("item {i}: {EXPECTED}"));
        }
    }
    if charts.is_empty() {
        return Err(format!("no rows: {EXPECTED}"));
    }
    Ok(charts)
}
