"""Turns `ccsynth compare --json` outputs into the markdown tables of docs/BASELINES.md.

Usage: python3 docs/data/table.py TOPOLOGY-LABEL FILE...   (one file per size, in order)
"""
import json
import sys

label, files = sys.argv[1], sys.argv[2:]
sizes = [f.rsplit("-", 1)[1].removesuffix(".json") for f in files]
data = [json.load(open(f)) for f in files]
algos = sorted({r["algorithm"] for d in data for r in d["rows"]})
print(f"| {label}: time (µs) | " + " | ".join(sizes) + " |")
print("|---|" + "---|" * len(sizes))
for a in algos:
    cells = []
    for d in data:
        row = next((r for r in d["rows"] if r["algorithm"] == a), None)
        if row is None:
            cells.append("–")
        else:
            t = row["collective_time_ns"] / 1e3
            cells.append(("**%.1f**" if row["best"] else "%.1f") % t)
    print(f"| {a} | " + " | ".join(cells) + " |")
gains, winners = [], []
for d in data:
    rows = {r["algorithm"]: r["collective_time_ns"] for r in d["rows"]}
    swing = min(rows.get("swing-latency", float("inf")), rows.get("swing-bandwidth", float("inf")))
    others = {a: t for a, t in rows.items() if not a.startswith("swing")}
    best_other = min(others, key=others.get)
    winners.append(min(rows, key=rows.get))
    gains.append("%+.0f%% (vs %s)" % ((others[best_other] / swing - 1) * 100, best_other))
print("| winner | " + " | ".join(winners) + " |")
print("| Swing's gain over the best other | " + " | ".join(gains) + " |")
