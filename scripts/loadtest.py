#!/usr/bin/env python3
"""Load check for `ccsynth serve` (a benchmark, not a test): N concurrent clients submit small
syntheses for D seconds, half of them repeats of a few requests (cache hits) and half new ones
(a fresh seed each: solved). Prints throughput, latency percentiles and errors as JSON.

Usage: scripts/loadtest.py http://127.0.0.1:8080 [--clients 200] [--seconds 60]

With --outage DOWN_CMD UP_CMD (shell commands, e.g. `pg_ctlcluster 15 main stop` and `... start`):
DOWN_CMD runs at --outage-at seconds and UP_CMD --outage-for seconds later, while the clients
go on; prints besides when the first 503 came after the database went away, the slowest answer
during the outage, what else clients got then (no 500s, no hangs), when the first request after
the restore succeeded, and what became of every job accepted (each found, each ending once).

With --probe BODY (a POST /v1/syntheses body as JSON, e.g. a greedy run with a 10 s time limit):
posts it --probe-at seconds into the run, waits for its job while the clients go on, and prints
how long it took from the POST and from the job's creation to its end (a time limit under load).

With --fairness HEAVY_TOKEN LIGHT_TOKEN (a server with --tokens-file; tokens may be empty
strings for a server without tokens, where both clients are one): the heavy client queues
--heavy-jobs ILP runs of --heavy-seconds each at once, then the light client submits a small
new synthesis every 2 s for --seconds and waits for each; prints the light client's latencies.
"""
import argparse
import http.client
import json
import random
import subprocess
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
parser.add_argument("--outage", nargs=2, metavar=("DOWN_CMD", "UP_CMD"))
parser.add_argument("--outage-at", type=float, default=None, help="seconds into the run (default: a third)")
parser.add_argument("--outage-for", type=float, default=None, help="seconds (default: a third of the run)")
parser.add_argument("--probe", metavar="BODY")
parser.add_argument("--probe-at", type=float, default=5.0, help="seconds into the run")
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
answers = []  # (sent, answered, status) of every request, for the outage report
accepted = set()  # ids of the jobs answered 201 or 202
outage = {}
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
            raw = resp.read()
            status = resp.status
        except Exception as e:  # noqa: BLE001 - every failure counts as an error
            with lock:
                errors.append(repr(e))
                answers.append((started, time.monotonic(), "exception"))
            conn.close()
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
            continue
        elapsed = time.monotonic() - started
        with lock:
            latencies[kind].append(elapsed)
            statuses[status] = statuses.get(status, 0) + 1
            answers.append((started, started + elapsed, status))
            if status in (201, 202):
                accepted.add(json.loads(raw)["id"])
            elif status != 503 or not args.outage:
                errors.append(f"HTTP {status}")


def controller() -> None:
    """Takes the database away and back (--outage), noting when."""
    down_cmd, up_cmd = args.outage
    at = args.outage_at if args.outage_at is not None else args.seconds / 3
    span = args.outage_for if args.outage_for is not None else args.seconds / 3
    time.sleep(max(0.0, stop_at - args.seconds + at - time.monotonic()))
    outage["down"] = time.monotonic()
    subprocess.run(down_cmd, shell=True, check=True)
    outage["down_done"] = time.monotonic()
    time.sleep(span)
    outage["up"] = time.monotonic()
    subprocess.run(up_cmd, shell=True, check=True)
    outage["up_done"] = time.monotonic()


def job_fates(timeout_s: float = 180.0) -> dict:
    """Every accepted job asked for until none is queued or running: how many each way."""
    ends = {}
    deadline = time.monotonic() + timeout_s
    conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
    for job in sorted(accepted):
        while True:
            conn.request("GET", f"/v1/jobs/{job}?wait_ms=10000")
            resp = conn.getresponse()
            body = json.loads(resp.read() or b"null")
            state = body.get("status") if resp.status == 200 else f"HTTP {resp.status}"
            if state not in ("queued", "running") or time.monotonic() > deadline:
                break
        ends[state] = ends.get(state, 0) + 1
    return ends


def outage_report() -> dict:
    down, up = outage["down"], outage["up"]
    during = [a for a in answers if down <= a[0] < up]
    after = [a for a in answers if a[0] >= outage["up_done"]]
    first_503 = min((a[1] for a in during if a[2] == 503), default=None)
    first_ok = min((a[1] for a in after if a[2] in (200, 201, 202)), default=None)
    other = {}
    for a in during:
        if a[2] not in (200, 201, 202, 503):
            other[str(a[2])] = other.get(str(a[2]), 0) + 1
    return {
        "down_after_s": round(down - began, 1),
        "down_for_s": round(up - down, 1),
        "first_503_after_down_s": None if first_503 is None else round(first_503 - down, 2),
        "answers_during": len(during),
        "slowest_answer_during_s": round(max((a[1] - a[0] for a in during), default=0.0), 2),
        "statuses_during": {str(k): sum(1 for a in during if a[2] == k) for k in sorted({a[2] for a in during}, key=str)},
        "neither_2xx_nor_503_during": other,
        "first_success_after_up_s": None if first_ok is None else round(first_ok - outage["up_done"], 2),
        "jobs_accepted": len(accepted),
        "jobs_ended": job_fates(),
    }


probe_report = {}


def probe() -> None:
    """One job posted into the load (--probe): its status and how long it took, from its POST,
    its creation and its claim by a worker (its time limit starts once its rows are read)."""
    time.sleep(args.probe_at)
    began = time.monotonic()
    status, body = post("", {**json.loads(args.probe), "wait_ms": 0})
    job = body.get("id") if isinstance(body, dict) else None
    conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
    give_up = began + 1800
    while job and time.monotonic() < give_up:
        try:
            conn.request("GET", f"/v1/jobs/{job}?wait_ms=1000")
            resp = conn.getresponse()
            got = json.loads(resp.read() or b"null")
        except (OSError, http.client.HTTPException, ValueError):
            conn.close()
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
            time.sleep(0.5)
            continue
        if resp.status == 200 and isinstance(got, dict):
            body = got
            if body.get("status") in ("succeeded", "failed", "cancelled"):
                break
        else:
            time.sleep(0.5)
    conn.close()
    ms = lambda key: body.get(key) if isinstance(body, dict) else None
    ended, made, started = ms("finished_at_ms"), ms("created_at_ms"), ms("started_at_ms")
    since = lambda t: None if ended is None or t is None else round((ended - t) / 1e3, 2)
    probe_report.update({
        "post_status": status, "status": ms("status"), "error": ms("error"),
        "from_post_s": round(time.monotonic() - began, 2),
        "from_creation_s": since(made), "from_claim_s": since(started),
    })


threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
if args.outage:
    threads.append(threading.Thread(target=controller))
prober = threading.Thread(target=probe) if args.probe else None
began = time.monotonic()
for t in threads + ([prober] if prober else []):
    t.start()
for t in threads:
    t.join()
wall = time.monotonic() - began
if prober:
    prober.join()


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
    **({"outage": outage_report()} if args.outage else {}),
    **({"probe": probe_report} if args.probe else {}),
}, indent=2))
