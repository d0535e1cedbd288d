#!/usr/bin/env python3
"""plumb place against a genetic algorithm like the paper's (Neves, Vilaça, Pereira, SAC 2020).

Graphs: planted-partition graphs of 100, 500, 1000 and 2000 vertices (applications of 5-20
processes that talk mostly among themselves, some traffic between applications), placed at
random on n/25 hosts whose cpu and memory are 1.1x the fair share; and the hand-made topology
in bench/data (3 hosts, web, api, cache, database, queue; docs/place.md).

For each graph: cross-host bytes before; after `plumb place` (its wall time, the median of
three runs, the process included) and after the GA (bench/place_ga.c, a fixed time budget of
PLUMB_BENCH_GA_SECONDS, default 20, with its best at plumb's own run time, at 1 s and at 5 s
too); on graphs of at most 24 movable vertices, the optimum by exhaustive search
(bench/place_exact.c). Every plan is checked here, independently of plumb: its cut recomputed
from the graph file, its hosts' loads against their capacities. Writes bench/results/place.md.

CPU only: no root, no BPF, no agent. About 2 minutes with the default budget.
"""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from ab import Bench  # noqa: E402

PLUMB = os.path.join(ROOT, "build", "plumb")
GA = os.path.join(ROOT, "build", "place_ga")
EXACT = os.path.join(ROOT, "build", "place_exact")
EXACT_MAX_MOVABLE = 24
SIZES = [int(s) for s in os.environ.get("PLUMB_BENCH_PLACE_SIZES", "100,500,1000,2000").split(",")]
GA_SECONDS = float(os.environ.get("PLUMB_BENCH_GA_SECONDS", "20"))
SEED = 20200330
MiB = 1 << 20


def planted_partition(n, seed):
    """Graph and hosts: communities of 5-20 vertices, ~4 neighbours inside, 0.5 outside."""
    rng = random.Random(seed)
    sizes = []
    while sum(sizes) < n:
        sizes.append(min(rng.randint(5, 20), n - sum(sizes)))
    community = []
    for c, size in enumerate(sizes):
        community += [c] * size
    members = {}
    for v, c in enumerate(community):
        members.setdefault(c, []).append(v)
    vertices = [{"id": f"v{v}", "host": None, "comm": f"app{community[v]}",
                 "cpu": rng.choice([0.25, 0.5, 1, 2]),
                 "memory_bytes": rng.choice([256, 512, 1024, 2048]) * MiB} for v in range(n)]
    weights = {}
    for c, vs in members.items():
        p = min(1.0, 4.0 / max(1, len(vs) - 1))
        for i, u in enumerate(vs):
            for w in vs[i + 1:]:
                if rng.random() < p:
                    weights[(u, w)] = int(rng.lognormvariate(13, 1.5))  # ~440 kB median
    for u in range(n):
        if rng.random() < 0.5:
            w = rng.randrange(n)
            if community[w] != community[u]:
                key = (min(u, w), max(u, w))
                weights[key] = weights.get(key, 0) + int(rng.lognormvariate(10, 1.5))
    edges = [{"source": f"v{u}", "target": f"v{w}", "protocol": "tcp", "port": 80,
              "tx_bytes": b // 3, "rx_bytes": b - b // 3, "connections": 1}
             for (u, w), b in sorted(weights.items())]

    k = max(2, n // 25)
    cpu_cap = round(1.1 * sum(v["cpu"] for v in vertices) / k, 3)
    mem_cap = int(1.1 * sum(v["memory_bytes"] for v in vertices) / k)
    hosts = [{"name": f"host{h}", "cpu": cpu_cap, "memory_bytes": mem_cap} for h in range(k)]
    # a random placement that fits: each vertex to a random host with room for it
    for attempt in range(100):
        cpu, mem, ok = [0.0] * k, [0] * k, True
        for v in rng.sample(range(n), n):
            room = [h for h in range(k) if cpu[h] + vertices[v]["cpu"] <= cpu_cap
                    and mem[h] + vertices[v]["memory_bytes"] <= mem_cap]
            if not room:
                ok = False
                break
            h = rng.choice(room)
            cpu[h] += vertices[v]["cpu"]
            mem[h] += vertices[v]["memory_bytes"]
            vertices[v]["host"] = f"host{h}"
        if ok:
            break
    else:
        sys.exit(f"place.py: no random feasible placement for n={n}")
    graph = {"version": 1, "projection": "process", "window_seconds": 300,
             "vertices": vertices, "edges": edges}
    return graph, hosts


def check(graph, hosts, placement):
    """(cut, violations) of a placement {vertex: host}, computed here from the files."""
    names = {h["name"] for h in hosts}
    assert set(placement) == {v["id"] for v in graph["vertices"]}, "placement misses vertices"
    for v in graph["vertices"]:
        if v["id"].startswith("external/"):
            assert placement[v["id"]] == v["host"], f"external {v['id']} moved"
    cut = 0
    for e in graph["edges"]:
        a, b = placement[e["source"]], placement[e["target"]]
        if a in names and b in names and a != b:
            cut += e["tx_bytes"] + e["rx_bytes"]
    violations = 0
    for h in hosts:
        on = [v for v in graph["vertices"] if placement[v["id"]] == h["name"]]
        cpu = sum(v.get("cpu", 0 if v["id"].startswith("external/") else 1) for v in on)
        mem = sum(v.get("memory_bytes", 0) for v in on)
        if cpu > h["cpu"] + 1e-9 or ("memory_bytes" in h and mem > h["memory_bytes"]):
            violations += 1
    return cut, violations


def run_plumb(gpath, hpath):
    times, plans = [], []
    for _ in range(3):
        t = time.perf_counter()
        out = subprocess.run([PLUMB, "place", "--graph", gpath, "--hosts", hpath,
                              "--format", "json"], capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if out.returncode:
            sys.exit(f"plumb place failed: {out.stderr.strip()}")
        plans.append(json.loads(out.stdout))
    assert all(p == plans[0] for p in plans), "plumb place gave different plans"
    return plans[0], statistics.median(times)


def run_ga(gpath, hpath, plumb_seconds):
    checkpoints = [max(plumb_seconds, 0.001), 1.0, 5.0]
    cmd = [GA, gpath, hpath, "--seconds", str(GA_SECONDS), "--seed", "1"]
    for c in checkpoints:
        cmd += ["--checkpoint", f"{c:.6f}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"place_ga failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def run_exact(gpath, hpath, graph):
    """The optimum by exhaustive search, where the graph is small enough; else None."""
    movable = [v for v in graph["vertices"] if not v["id"].startswith("external/")]
    if len(movable) > EXACT_MAX_MOVABLE:
        return None
    out = subprocess.run([EXACT, gpath, hpath], capture_output=True, text=True, timeout=300)
    if out.returncode:
        sys.exit(f"place_exact failed: {out.stderr.strip()}")
    return json.loads(out.stdout)["cross_host_bytes_after"]


def human(b):
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(b) < 1000 or unit == "TB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1000


def pct(before, after):
    return f"{100 * (before - after) / before:.1f}%" if before else "-"


def bench_one(label, graph, hosts, tmp):
    gpath, hpath = os.path.join(tmp, "graph.json"), os.path.join(tmp, "hosts.json")
    with open(gpath, "w") as f:
        json.dump(graph, f)
    with open(hpath, "w") as f:
        json.dump(hosts, f)
    plan, plumb_s = run_plumb(gpath, hpath)
    p_cut, p_viol = check(graph, hosts, {a["vertex"]: a["host"] for a in plan["placement"]})
    before, _ = check(graph, hosts, {v["id"]: v["host"] for v in graph["vertices"]})
    assert p_cut == plan["cross_host_bytes_after"], (p_cut, plan["cross_host_bytes_after"])
    assert before == plan["cross_host_bytes_before"]
    ga = run_ga(gpath, hpath, plumb_s)
    optimum = run_exact(gpath, hpath, graph)
    g_cut, g_viol = None, 0
    if ga["placement"]:
        g_cut, g_viol = check(graph, hosts, {a["vertex"]: a["host"] for a in ga["placement"]})
        assert g_cut == ga["cross_host_bytes_after"]
    cps = [c["cut"] for c in ga["checkpoints"]]
    row = {
        "label": label, "n": len(graph["vertices"]), "m": len(graph["edges"]), "k": len(hosts),
        "before": before, "plumb": p_cut, "plumb_s": plumb_s, "moves": plan["moved"],
        "strategy": plan["strategy"], "plumb_viol": p_viol,
        "ga_at_plumb": cps[0], "ga_1s": cps[1], "ga_5s": cps[2], "ga": g_cut,
        "ga_s": ga["seconds"], "generations": ga["generations"], "ga_viol": g_viol,
        "optimum": optimum,
    }
    print(f"  {label}: before {human(before)}, plumb {human(p_cut)} ({pct(before, p_cut)}) in "
          f"{plumb_s * 1000:.0f} ms, {p_viol} over; GA {human(g_cut or 0)} "
          f"({pct(before, g_cut or before)}) in {ga['seconds']:.0f} s, {g_viol} over",
          flush=True)
    return row


def table(rows):
    def cell(cut, before):
        return "none feasible" if cut is None else f"{human(cut)} ({pct(before, cut)})"

    lines = [
        "| graph | vertices / edges / hosts | cross-host before | plumb place after "
        "(reduction) | plumb time | moves | GA at plumb's time | GA at 1 s | GA at 5 s "
        f"| GA at {GA_SECONDS:.0f} s (reduction) | GA generations | hosts over capacity "
        "(plumb / GA) | optimum (exhaustive search) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['n']} / {r['m']} / {r['k']} | {human(r['before'])} "
            f"| {cell(r['plumb'], r['before'])} | {r['plumb_s'] * 1000:.0f} ms "
            f"| {r['moves']} | {cell(r['ga_at_plumb'], r['before'])} "
            f"| {cell(r['ga_1s'], r['before'])} | {cell(r['ga_5s'], r['before'])} "
            f"| {cell(r['ga'], r['before'])} | {r['generations']} "
            f"| {r['plumb_viol']} / {r['ga_viol']} "
            f"| {'-' if r['optimum'] is None else cell(r['optimum'], r['before'])} |")
    return "\n".join(lines)


def main():
    for path, how in ((PLUMB, "make"), (GA, "make build/place_ga"),
                      (EXACT, "make build/place_exact")):
        if not os.path.exists(path):
            sys.exit(f"place.py: {path} missing: run {how}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in SIZES:
            graph, hosts = planted_partition(n, SEED + n)
            rows.append(bench_one(f"planted partition, {n}", graph, hosts, tmp))
        with open(os.path.join(HERE, "data", "topology-graph.json")) as f:
            graph = json.load(f)
        with open(os.path.join(HERE, "data", "topology-hosts.json")) as f:
            hosts = json.load(f)
        rows.append(bench_one("topology (bench/data, hand-made)", graph, hosts, tmp))
        with open(os.path.join(HERE, "data", "recorded-graph.json")) as f:
            graph = json.load(f)
        with open(os.path.join(HERE, "data", "recorded-hosts.json")) as f:
            hosts = json.load(f)
        rows.append(bench_one("recorded (bench/record-graph.py, three namespaces)", graph,
                              hosts, tmp))

    bench = Bench("place", "plumb place against a genetic algorithm", intro=f"""
`bench/place.py`. Graphs: planted-partition graphs (applications of 5-20 processes with ~4
neighbours each inside, ~0.5 edges per process to other applications, lognormal byte counts,
heavier inside; cpu 0.25-2 and memory 256 MiB-2 GiB per process) placed at random on n/25
hosts of 1.1x the fair share of cpu and memory; and the hand-made topology of bench/data (3
hosts, 15 processes, 3 external clients). plumb place: wall time of the whole process
(`plumb place --format json`, reading and writing JSON included), median of 3 identical runs.
The GA (`bench/place_ga.c`: population 100, tournaments of 3, uniform crossover 0.9, mutation
1/n per gene, 2 elites, fitness = cut + a penalty above all traffic for any overload; seeded
with the current placement, the rest random) has a fixed time budget of {GA_SECONDS:.0f} s,
one thread, seed 1; its columns are its best feasible cut at plumb's own run time, at 1 s, at
5 s and at the end. Where a graph has at most 24 movable processes, `bench/place_exact.c`
finds the true optimum by exhaustive search (branch and bound). Every plan was checked by the
bench itself: cut recomputed from the graph file, loads against capacities. Reduction =
(before - after) / before.
""")
    bench.text(table(rows))
    bench.write()


if __name__ == "__main__":
    main()
