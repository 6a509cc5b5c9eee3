#!/usr/bin/env python3
"""Fuzzing for ccsynth (a search for bugs, not a test: nothing here runs in CI). Three targets:

  cli    random `synth` requests (every generator, collective, algorithm, failures, groups,
         roots, switch models, time limits), each result validated, exported in a random
         format and sometimes regenerated after a random link failure;
  files  valid schedules mutated (fields, transfers, the topology) through `validate`,
         `simulate`, `export` and `plot timeline`;
  api    mutated requests to a running `ccsynth serve` (syntheses, batches, topologies,
         schedules, exports, regenerations);
  compare  random `compare` runs (baseline subsets, `--with-synth`, failures, groups, roots);
  tenants  random multi-tenant `synth --tenants` lists (standard and `custom` collectives, some
         malformed), each result validated and sometimes exported.

A finding is a line on stdout: a panic, an exit code docs/CLI.md does not list for the verb, a
time limit overrun by more than 10 s, an invalid schedule, a 5xx, or a 4xx that is not
problem+json. Runs are reproducible from --seed (the API's ids aside). Run the service under a
memory limit so that a request that allocates without bound is found, not the machine's OOM
killer: `bash -c 'ulimit -v 8000000; exec ccsynth serve --database-url sqlite:/tmp/f.db'`.

Usage: scripts/fuzz.py cli|files|compare|tenants [--bin target/release/ccsynth] [--seed 0] [--seconds 600]
       scripts/fuzz.py api --url http://127.0.0.1:8080 [--seed 0] [--seconds 600]

Found with it on 2026-11-28 (docs/BENCHMARKS.md): the ILP's unbounded models (nonzeros, an
allocation before any size check, grids too fine), a grid baseline on a group of the first
NPUs, looping routes over unwound switches, and a schedule file's chunk count wrapping.
"""
import argparse
import copy
import json
import os
import random
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("target", choices=["cli", "files", "api", "compare", "tenants"])
parser.add_argument("--bin", default="target/release/ccsynth")
parser.add_argument("--url", default="http://127.0.0.1:8080")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--seconds", type=float, default=600)
args = parser.parse_args()
R = random.Random(args.seed)
TMP = tempfile.mkdtemp(prefix="ccsynth-fuzz-")
COLLECTIVES = ["all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce", "scatter", "gather", "all_to_all"]
ALGORITHMS = ["auto", "auto", "greedy", "ilp", "ring", "ring-bidir", "direct", "recursive-doubling", "rabenseifner",
              "bde", "swing-latency", "swing-bandwidth", "bucket", "traff", "kolmakov", "kolmakov-r1", "mst",
              "pairwise", "bruck", "dimension-ordered", "pxn"]
WEIRD = [None, -1, 0, 1, 2, 2**31, 2**32, 2**63, 1e308, -0.0, 1.5, "x", "", "NaN", "1MiB", [], {}, True,
         [0], [0, 0], [0, 99]]
found = 0
exits = {}  # per verb and exit code, how many runs: whether the fuzz reached past the argument checks


def report(what):
    global found
    found += 1
    print(what[:1500], flush=True)


def run(argv, timeout):
    start = time.time()
    try:
        p = subprocess.run([args.bin] + argv, capture_output=True, text=True, timeout=timeout)
        key = f"{argv[0]} {p.returncode}"
        exits[key] = exits.get(key, 0) + 1
        return p.returncode, p.stdout, p.stderr, time.time() - start
    except subprocess.TimeoutExpired:
        return None, "", "", time.time() - start


def spec():
    kind = R.choice(["ring", "mesh", "torus", "fc", "switch", "hypercube", "hyperx", "dragonfly", "hammingmesh",
                     "hier", "rail"])
    s = {
        "ring": lambda: f"ring:{R.randint(2, 24)}",
        "mesh": lambda: "mesh:" + "x".join(str(R.randint(2, 6)) for _ in range(R.choice([1, 2, 2, 3]))),
        "torus": lambda: "torus:" + "x".join(str(R.randint(2, 6)) for _ in range(R.choice([1, 2, 2, 3]))),
        "fc": lambda: f"fc:{R.randint(2, 12)}",
        "switch": lambda: f"switch:{R.randint(2, 16)}",
        "hypercube": lambda: f"hypercube:{R.randint(1, 5)}",
        "hyperx": lambda: f"hyperx:{R.randint(2, 5)}x{R.randint(2, 5)}",
        "dragonfly": lambda: f"dragonfly:{R.randint(2, 4)}:{R.randint(2, 5)}",
        "hammingmesh": lambda: f"hammingmesh:{R.randint(1, 3)}x{R.randint(1, 3)}:{R.randint(1, 3)}x{R.randint(1, 3)}",
        "hier": lambda: "hier:" + ",".join(R.choice(["ring", "fc", "switch", "mesh"]) + str(R.randint(2, 4))
                                           for _ in range(R.randint(1, 3))),
        "rail": lambda: f"rail:{R.randint(1, 5)}x{R.randint(1, 6)}",
    }[kind]()
    if R.random() < 0.3:
        bws = ",".join(str(R.choice([25, 50, 100, 200])) for _ in range(R.randint(1, 2)))
        s += f"@bw={bws};lat={R.choice([0, 100, 500, 2000])}"
    return s


def synthesized(label, argv, limit, what, name):
    """Runs a synthesis (`argv`, `--time-limit` `limit` or the default 60 s) and reports a
    panic, an unlisted exit or an overrun; a schedule it wrote is validated (reported when
    invalid) and left in TMP/`name`, whose path is returned (None when there is none)."""
    rc, out, err, took = run(argv, (limit or 60) + 60)
    if os.environ.get("FUZZ_DEBUG") and rc == 2:
        print("DEBUG", err.strip()[:200])
    if rc is None or "panicked" in err or rc not in (0, 2, 3, 4):
        report(f"{label} exit {rc} after {took:.1f} s: {what} | {err[-400:]}")
        return None
    if took > (limit or 60) + 10:
        report(f"OVERRUN {took:.1f} s of {limit or 60}: {what}")
    if rc != 0:
        return None
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(out)
    vrc, vout, _, _ = run(["validate", path], 120)
    if vrc != 0:
        report(f"INVALID {what} | {vout[:300]}")
    return path


def fuzz_cli(until):
    runs = 0
    while time.time() < until:
        topo = spec()
        rc, out, err, _ = run(["topology", topo], 20)
        if rc != 0:
            if rc is None or "panicked" in err:
                report(f"TOPOLOGY {rc} {topo} {err[-300:]}")
            continue
        t = json.loads(out)
        n = t["npus"]
        argv = ["synth", "--topology", topo, "--collective", R.choice(COLLECTIVES), "--size",
                R.choice(["1", "7", "48", "4096", "65537", "1MiB", "16MiB", "256MiB", "1GiB"]),
                "--algo", R.choice(ALGORITHMS), "--seed", str(R.randint(0, 5)), "--json"]
        if R.random() < 0.3:
            argv += ["--chunks-per-npu", str(R.choice([1, 2, 3, 5, 8]))]
        for _ in range(R.choice([0, 0, 0, 1, 2])):
            link = R.choice(t["links"])
            if link["src"] < n and link["dst"] < n:
                argv += ["--fail-link", f"{link['src']}-{link['dst']}"]
        if R.random() < 0.2 and n > 3:
            argv += ["--fail-npu", str(R.randrange(n))]
        if R.random() < 0.25 and n > 3:
            group = R.choice([sorted(R.sample(range(n), R.randint(2, n))), list(range(n - 1))])
            argv += ["--group", ",".join(map(str, group))]
        if wants_root(argv):
            argv += ["--root", root(argv, n)]
        if R.random() < 0.3:
            argv += ["--switch-model", R.choice(["native", "unwind:1", "unwind:2", "unwind:bi"])]
        if R.random() < 0.1:
            argv += ["--discretization", str(R.choice([1, 10, 1000, 1e6]))]
        limit = R.choice([None, None, 2, 5, 20])
        if limit:
            argv += ["--time-limit", str(limit)]
        runs += 1
        what = " ".join(argv)
        path = synthesized("SYNTH", argv, limit, what, "s.json")
        if path is None:
            continue
        fmt = R.choice(["msccl-xml", "mscclpp-json", "chakra-et", "json"])
        erc, _, eerr, _ = run(["export", "--format", fmt, path, "--out", os.path.join(TMP, "export-" + fmt)], 120)
        if erc not in (0, 3) or "panicked" in eerr:
            report(f"EXPORT {fmt} exit {erc}: {what} | {eerr[-300:]}")
        if R.random() < 0.3:
            link = R.choice(t["links"])
            if link["src"] < n and link["dst"] < n:
                regen = ["regenerate", path, "--fail-link", f"{link['src']}-{link['dst']}", "--json", "--time-limit", "10"]
                grc, _, gerr, gtook = run(regen, 120)
                if grc is None or grc not in (0, 2, 3, 4) or "panicked" in gerr:
                    report(f"REGENERATE exit {grc}: {what} then {' '.join(regen)} | {gerr[-300:]}")
                elif gtook > 20:
                    report(f"REGENERATE OVERRUN {gtook:.1f} s of 10: {what}")
    return runs


def fuzz_files(until):
    seeds = []
    for topo, kind, size, extra in [("torus:3x3", "all_reduce", "1MiB", []), ("switch:5", "all_gather", "64KiB", []),
                                    ("ring:6", "reduce_scatter", "4096", []), ("mesh:2x3", "all_to_all", "48", []),
                                    ("hier:ring2,fc2", "broadcast", "1MiB", ["--root", "1"])]:
        rc, out, err, _ = run(["synth", "--topology", topo, "--collective", kind, "--size", size, "--json",
                               "--algo", "greedy"] + extra, 60)
        seeds.append(json.loads(out))
    values = WEIRD + ["reduce", "copy", [[0, 0]], [[0, 1], [1, 0]]]
    runs = 0
    while time.time() < until:
        s = copy.deepcopy(R.choice(seeds))
        tr = s["transfers"]
        for _ in range(R.randint(1, 4)):
            r = R.random()
            if r < 0.6 and tr:
                t = R.choice(tr)
                if isinstance(t, list):  # a transfer row [step, src, dst, chunks, op(, path)]
                    i = R.randrange(len(t) + 2)
                    if i < len(t):
                        t[i] = R.choice(values)
                    else:
                        t.append(R.choice(values))
                else:
                    t[R.choice(["step", "src", "dst", "chunks", "op", "path", "dst_chunks", "extra"])] = R.choice(values)
            elif r < 0.7 and tr:
                tr.insert(R.randrange(len(tr) + 1), copy.deepcopy(R.choice(tr)))
            elif r < 0.8 and tr:
                tr.pop(R.randrange(len(tr)))
            elif r < 0.9:
                s[R.choice(["num_chunks", "chunk_size_bytes", "combining", "scratch", "collective_time_ns", "format",
                            "precondition", "postcondition"])] = R.choice(values)
            else:
                s["topology"] = R.choice([{"npus": 2, "switches": 0, "links": []}, {}, "x"])
        text = json.dumps(s)
        if R.random() < 0.1:
            text = text[:R.randint(0, len(text))]
        path = os.path.join(TMP, "f.json")
        with open(path, "w") as f:
            f.write(text)
        runs += 1
        for argv, ok in [(["validate", path], (0, 1, 2)), (["simulate", path], (0, 1, 2)),
                         (["export", "--format", R.choice(["msccl-xml", "mscclpp-json", "json"]), path, "--out",
                           os.path.join(TMP, "f.out")], (0, 2, 3)),
                         (["plot", "timeline", path, "--out", os.path.join(TMP, "f.svg")], (0, 2, 3))]:
            rc, _, err, _ = run(argv, 60)
            if rc not in ok or "panicked" in err:
                report(f"{argv[0].upper()} exit {rc}: {err[-300:]} | {text[:600]}")
    return runs


def fuzz_api(until):
    def call(method, path, body=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(args.url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=180) as resp:
                return resp.status, resp.headers.get("content-type", ""), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("content-type", ""), e.read()

    specs = ["torus:4x4", "mesh:3x3", "ring:8", "switch:6", "hier:ring2,fc2,switch2", "rail:2x3", "fc:4",
             "torus:3x3x2", "dragonfly:2:3", "hypercube:3"]
    options = ["time_limit_s", "seeds", "seed", "threads", "chunks_per_npu", "discretization", "switch_model",
               "window", "work_limit_s", "solve_time_limit_s"]

    def synthesis():
        b = {"spec": R.choice(specs), "wait_ms": R.choice([0, 2000, 5000]),
             "collective": {"kind": R.choice(COLLECTIVES), "size_bytes": R.choice([1, 48, 4096, 1 << 20, 1 << 28])}}
        algorithm = R.choice(ALGORITHMS + ["nope", None])
        if algorithm:
            b["algorithm"] = algorithm
        if R.random() < 0.5:
            b["options"] = {R.choice(options): copy.deepcopy(R.choice(WEIRD + [1, 5, "unwind:bi", "native"]))}
        for key in ["root", "group", "chunks_per_npu"]:
            if R.random() < 0.3:
                b["collective"][key] = copy.deepcopy(R.choice(WEIRD + [0, 1, 3, [0, 1, 2, 3]]))
        for _ in range(R.choice([0, 0, 1, 2])):
            t = R.choice([b, b["collective"]]) if isinstance(b.get("collective"), dict) else b
            key = R.choice(list(t.keys()) + ["extra"])
            if R.random() < 0.3:
                t.pop(key, None)
            else:
                t[key] = copy.deepcopy(R.choice(WEIRD))
        return b

    schedules = []
    runs = 0
    while time.time() < until:
        runs += 1
        r = R.random()
        try:
            if r < 0.5:
                status, ctype, out = call("POST", "/v1/syntheses", synthesis())
                if status in (200, 201) and json.loads(out).get("schedule_id"):
                    schedules.append(json.loads(out)["schedule_id"])
            elif r < 0.6:
                raw = R.choice([b"{", b"null", b"[]", b'{"spec":', b"\xff\xfe", json.dumps(synthesis()).encode()[:60],
                                b'{"spec":"torus:4x4","collective":{"kind":"all_gather","size_bytes":1e400}}'])
                status, ctype, out = call("POST", R.choice(["/v1/syntheses", "/v1/topologies", "/v1/validate",
                                                            "/v1/batches"]), raw=raw)
            elif r < 0.7:
                status, ctype, out = call("POST", "/v1/topologies", {"spec": R.choice(
                    specs + ["torus:0x4", "mesh:99999x99999", "ring:1", "x:1", ""])})
            elif r < 0.8 and schedules:
                sid = R.choice(schedules)
                fmt = R.choice(["msccl-xml", "mscclpp-json", "chrome-trace", "timeline-svg", "chakra-et", "x"])
                status, ctype, out = call("GET", R.choice([
                    f"/v1/schedules/{sid}", f"/v1/schedules/{sid}/summary", f"/v1/schedules/{sid}/comparison",
                    f"/v1/schedules/{sid}/export?format={fmt}" + R.choice(["", "&protocol=LL128", "&protocol=zz",
                                                                           "&in_place=maybe", "&min_bytes=-1"]),
                    f"/v1/schedules/{sid}x", "/v1/jobs/zzz"]))
            elif r < 0.9 and schedules:
                status, ctype, out = call("POST", f"/v1/schedules/{R.choice(schedules)}/regenerate", R.choice([
                    {"failed_links": [[0, 1]]}, {"failed_npus": [1]}, {"failed_links": [[0, 0]]},
                    {"failed_links": [[0, 99]]}, {"failed_npus": [-1]}, {"failed_links": "x"}, {}]))
            else:
                status, ctype, out = call("POST", "/v1/batches", R.choice([
                    # A batch's items take no wait_ms (a 422 that would keep the rest unfuzzed).
                    {"requests": [{k: v for k, v in synthesis().items() if k != "wait_ms"}
                                  for _ in range(R.randint(0, 3))]},
                    {"regenerations": [{"schedule_id": R.choice(schedules or ["x"]), "failed_links": [[0, 1]]}]}]))
        except Exception as e:  # the service is down, or a connection was cut
            report(f"EXCEPTION {type(e).__name__}: {e}")
            time.sleep(1)
            continue
        if status >= 500 or (status >= 400 and "problem+json" not in ctype):
            report(f"STATUS {status} {ctype}: {out[:300]!r}")
    return runs


def root(argv, n):
    """A root: mostly one of the group's NPUs (when there is a group), sometimes any id up to n."""
    if "--group" in argv and R.random() < 0.9:
        return R.choice(argv[argv.index("--group") + 1].split(","))
    return str(R.randrange(n + 1))


def wants_root(argv):
    """A root for the rooted collectives, and one time in twenty the wrong way round (a root
    where none is taken, none where one is needed): most runs get past the argument checks."""
    rooted = argv[argv.index("--collective") + 1] in ("broadcast", "reduce", "scatter", "gather")
    return rooted != (R.random() < 0.05)


def failures_and_group(t, argv):
    """Random failed links and NPUs, a group and a root for the topology `t` (its JSON)."""
    n = t["npus"]
    for _ in range(R.choice([0, 0, 0, 1, 2])):
        link = R.choice(t["links"])
        if link["src"] < n and link["dst"] < n:
            argv += ["--fail-link", f"{link['src']}-{link['dst']}"]
    if R.random() < 0.2 and n > 3:
        argv += ["--fail-npu", str(R.randrange(n))]
    if R.random() < 0.25 and n > 3:
        group = R.choice([sorted(R.sample(range(n), R.randint(2, n))), list(range(n - 1))])
        argv += ["--group", ",".join(map(str, group))]
    if wants_root(argv):
        argv += ["--root", root(argv, n)]


def topology():
    """A random spec that `ccsynth topology` accepts, and its JSON; None when refused."""
    topo = spec()
    rc, out, err, _ = run(["topology", topo], 20)
    if rc != 0:
        if rc is None or "panicked" in err:
            report(f"TOPOLOGY {rc} {topo} {err[-300:]}")
        return None, None
    return topo, json.loads(out)


def fuzz_compare(until):
    runs = 0
    while time.time() < until:
        topo, t = topology()
        if t is None:
            continue
        argv = ["compare", "--topology", topo, "--collective", R.choice(COLLECTIVES), "--size",
                R.choice(["1", "7", "48", "4096", "65537", "1MiB", "16MiB", "256MiB", "1GiB"])]
        if R.random() < 0.3:
            argv += ["--chunks-per-npu", str(R.choice([1, 2, 3, 5, 8]))]
        failures_and_group(t, argv)
        if R.random() < 0.4:
            argv += ["--algos", ",".join(R.sample(ALGORITHMS[4:] + ["nope", "kolmakov-r3"], R.randint(1, 4)))]
        if R.random() < 0.3:
            argv += ["--with-synth"]
        if R.random() < 0.5:
            argv += ["--json"]
        runs += 1
        rc, out, err, took = run(argv, 180)
        what = " ".join(argv)
        if rc is None or "panicked" in err or rc not in (0, 2, 3, 4):
            report(f"COMPARE exit {rc} after {took:.1f} s: {what} | {err[-400:]}")
        elif rc == 0 and "--json" in argv:
            try:
                json.loads(out)
            except ValueError:
                report(f"COMPARE JSON unreadable: {what} | {out[:300]}")
        if took > 90:
            report(f"COMPARE SLOW {took:.1f} s: {what}")
    return runs


def tenant(n, chunk):
    """One collective object for a topology of n NPUs, mostly of `chunk` bytes a chunk (tenants
    must agree): standard, custom, or malformed."""
    r = R.random()
    if r < 0.6:
        c = {"kind": R.choice(COLLECTIVES), "chunks_per_npu": 1}
        if c["kind"] in ("broadcast", "reduce", "scatter", "gather") or R.random() < 0.05:
            c["root"] = R.randrange(n + (1 if R.random() < 0.1 else 0))
        size = n
        if R.random() < 0.2 and n > 2:
            c["group"] = sorted(R.sample(range(n), R.randint(2, n)))
            size = len(c["group"])
            if "root" in c and c["root"] not in c["group"] and R.random() < 0.9:
                c["root"] = c["group"][0]
        c["size_bytes"] = chunk * (1 if c["kind"] in ("broadcast", "reduce") else size)
        if R.random() < 0.1:
            c["size_bytes"] += R.randint(1, 3)
    else:
        k = R.randint(1, 6)
        # Pairs are [npu, chunk].
        pre = sorted({(R.randrange(n), R.randrange(k)) for _ in range(R.randint(0, 2 * k))})
        post = sorted({(R.randrange(n), R.randrange(k)) for _ in range(R.randint(0, 2 * k))})
        if R.random() < 0.8:  # mostly satisfiable: each needed chunk held somewhere
            held = {c for _, c in pre}
            pre += [(R.randrange(n), c) for c in sorted({c for _, c in post} - held)]
        c = {"kind": "custom", "size_bytes": chunk * k, "num_chunks": k,
             "precondition": [list(x) for x in pre], "postcondition": [list(x) for x in post],
             "combining": R.random() < 0.5}
    if R.random() < 0.15:
        c[R.choice(list(c.keys()) + ["extra"])] = copy.deepcopy(R.choice(WEIRD))
    return c


def fuzz_tenants(until):
    runs = 0
    while time.time() < until:
        topo, t = topology()
        if t is None or t["npus"] > 64:
            continue
        chunk = R.choice([1, 48, 4096, 65536, 1 << 20])
        tenants = [tenant(t["npus"], chunk) for _ in range(R.randint(1, 4))]
        path = os.path.join(TMP, "tenants.json")
        with open(path, "w") as f:
            json.dump(tenants if R.random() > 0.05 else R.choice([{}, [], "x", [[]]]), f)
        argv = ["synth", "--topology", topo, "--tenants", path, "--json", "--algo",
                R.choice(["auto", "auto", "greedy", "greedy", "ilp", "ring"]), "--seed", str(R.randint(0, 5))]
        if R.random() < 0.2:
            link = R.choice(t["links"])
            if link["src"] < t["npus"] and link["dst"] < t["npus"]:
                argv += ["--fail-link", f"{link['src']}-{link['dst']}"]
        limit = R.choice([None, 2, 10])
        if limit:
            argv += ["--time-limit", str(limit)]
        runs += 1
        what = " ".join(argv) + " " + json.dumps(tenants)
        spath = synthesized("TENANTS", argv, limit, what, "t.json")
        if spath is None:
            continue
        if R.random() < 0.5:
            fmt = R.choice(["msccl-xml", "mscclpp-json", "chakra-et"])
            erc, _, eerr, _ = run(["export", "--format", fmt, spath, "--out", os.path.join(TMP, "texport-" + fmt)], 120)
            if erc not in (0, 3) or "panicked" in eerr:
                report(f"EXPORT {fmt} exit {erc}: {what} | {eerr[-300:]}")
    return runs


until = time.time() + args.seconds
runs = {"cli": fuzz_cli, "files": fuzz_files, "api": fuzz_api, "compare": fuzz_compare,
        "tenants": fuzz_tenants}[args.target](until)
print(json.dumps({"target": args.target, "seed": args.seed, "runs": runs, "findings": found, "exits": exits}))
