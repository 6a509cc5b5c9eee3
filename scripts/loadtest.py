#!/usr/bin/env python3
"""Load check for `ccsynth serve` (a benchmark, not a test): N concurrent clients submit small
syntheses for D seconds, half of them repeats of a few requests (cache hits) and half new ones
(a fresh seed each: solved). Prints throughput, latency percentiles and errors as JSON.

Usage: scripts/loadtest.py http://127.0.0.1:8080 [--clients 200] [--seconds 60]
"""
import argparse
import http.client
import json
import random
import threading
import time
import urllib.parse

parser = argparse.ArgumentParser()
parser.add_argument("url")
parser.add_argument("--clients", type=int, default=200)
parser.add_argument("--seconds", type=float, default=60)
args = parser.parse_args()
target = urllib.parse.urlparse(args.url)

HITS = [
    {"spec": f"ring:{p}", "collective": {"kind": "all_gather", "size_bytes": 1024 * p}} for p in (4, 6, 8, 12)
] + [{"spec": "torus:4x4", "collective": {"kind": "all_reduce", "size_bytes": 65536}}]

lock = threading.Lock()
latencies = {"hit": [], "miss": []}
statuses = {}
errors = []
stop_at = time.monotonic() + args.seconds


def client(index: int) -> None:
    rng = random.Random(index)
    conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
    while time.monotonic() < stop_at:
        if rng.random() < 0.5:
            kind, body = "hit", rng.choice(HITS)
        else:
            kind = "miss"
            body = {"spec": "ring:8", "collective": {"kind": "all_gather", "size_bytes": 8192},
                    "options": {"seed": rng.getrandbits(48)}}
        data = json.dumps(body)
        started = time.monotonic()
        try:
            conn.request("POST", "/v1/syntheses", data, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except Exception as e:  # noqa: BLE001 - every failure counts as an error
            with lock:
                errors.append(repr(e))
            conn.close()
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
            continue
        elapsed = time.monotonic() - started
        with lock:
            latencies[kind].append(elapsed)
            statuses[status] = statuses.get(status, 0) + 1
            if status not in (200, 201, 202):
                errors.append(f"HTTP {status}")


threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
began = time.monotonic()
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.monotonic() - began


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3, 2)


every = latencies["hit"] + latencies["miss"]
print(json.dumps({
    "clients": args.clients,
    "seconds": round(wall, 1),
    "requests": len(every),
    "throughput_per_s": round(len(every) / wall, 1),
    "errors": len(errors),
    "first_errors": errors[:5],
    "statuses": statuses,
    "p50_ms": pct(every, 0.50),
    "p99_ms": pct(every, 0.99),
    "hit_p50_ms": pct(latencies["hit"], 0.50),
    "hit_p99_ms": pct(latencies["hit"], 0.99),
    "miss_p50_ms": pct(latencies["miss"], 0.50),
    "miss_p99_ms": pct(latencies["miss"], 0.99),
}, indent=2))
