#!/usr/bin/env python3
"""Load check for `ccsynth serve` (a benchmark, not a test): N concurrent clients submit small
syntheses for D seconds, half of them repeats of a few requests (cache hits) and half new ones
(a fresh seed each: solved). Prints throughput, latency percentiles and errors as JSON.

Usage: scripts/loadtest.py http://127.0.0.1:8080 [--clients 200] [--seconds 60]

With --fairness HEAVY_TOKEN LIGHT_TOKEN (a server with --tokens-file; tokens may be empty
strings for a server without tokens, where both clients are one): the heavy client queues
--heavy-jobs ILP runs of --heavy-seconds each at once, then the light client submits a small
new synthesis every 2 s for --seconds and waits for each; prints the light client's latencies.
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
parser.add_argument("--fairness", nargs=2, metavar=("HEAVY_TOKEN", "LIGHT_TOKEN"))
parser.add_argument("--heavy-jobs", type=int, default=10)
parser.add_argument("--heavy-seconds", type=float, default=6)
args = parser.parse_args()
target = urllib.parse.urlparse(args.url)


def post(token: str, body: dict):
    conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", "/v1/syntheses", json.dumps(body), headers)
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read() or b"null")


def fairness(heavy: str, light: str) -> None:
    rng = random.Random(1)
    for i in range(args.heavy_jobs):
        status, _ = post(heavy, {
            "spec": "hier:ring2,fc4,switch4@bw=200,100,50;lat=500",
            "collective": {"kind": "all_gather", "size_bytes": 67108864}, "algorithm": "ilp",
            "options": {"time_limit_s": args.heavy_seconds, "seed": rng.getrandbits(48)}, "wait_ms": 0})
        assert status == 202, status
    waits = []
    stop = time.monotonic() + args.seconds
    while time.monotonic() < stop:
        started = time.monotonic()
        status, job = post(light, {
            "spec": "ring:4", "collective": {"kind": "all_gather", "size_bytes": 4096}, "algorithm": "greedy",
            "options": {"seed": rng.getrandbits(48), "time_limit_s": 5}, "wait_ms": 300000})
        assert status == 201 and job["status"] == "succeeded", (status, job)
        waits.append(time.monotonic() - started)
        time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
    print(json.dumps({
        "heavy_jobs": args.heavy_jobs, "heavy_seconds": args.heavy_seconds, "light_requests": len(waits),
        "light_p50_s": round(sorted(waits)[len(waits) // 2], 2), "light_max_s": round(max(waits), 2),
        "light_first_s": round(waits[0], 2),
    }, indent=2))


if args.fairness:
    fairness(*args.fairness)
    raise SystemExit(0)

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
