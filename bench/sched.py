#!/usr/bin/env python3
"""Overhead of the sched module (issue 5 §6, the scheduling part): A/B alternating runs.

  context-switch storm: `stress-ng --switch 1` pinned to one CPU; the metric is context
      switches per second of the whole host (/proc/stat ctxt); the added nanoseconds per
      switch are 1e9/B - 1e9/A per pair (that CPU does nothing but switch)
  the floor: the same storm with empty programs on sched_switch and sched_wakeup
      (build/hold build/sched_floor.bpf.o, no agent)
  redis: redis-server pinned to CPU 1, redis-benchmark (GET and SET, 50 clients) on CPU 0;
      requests per second
  per-event cost: bpf_stats run time / run count of each sched program under the storm

Targets (issue 5 §6): <= 150 ns per context switch with the scheduling metrics on; redis
throughput ratio >= 0.97 (with all 16 metrics: only the scheduling ones exist yet).
PLUMB_BENCH_PAIRS (default 5) pairs of PLUMB_BENCH_RUNTIME (default 8) seconds each.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from ab import Bench, hold_off, hold_on  # noqa: E402
from lib import Agent, Cleanup, free_port  # noqa: E402

RUNTIME = int(os.environ.get("PLUMB_BENCH_RUNTIME", "8"))
PAIRS = int(os.environ.get("PLUMB_BENCH_PAIRS", "5"))
BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build")
PROGRAMS = ("sched_switch", "sched_wakeup", "sched_exit")


def need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        sys.exit(f"sched.py: missing {', '.join(missing)}: run scripts/install-deps.sh")


def ctxt():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    raise RuntimeError("no ctxt in /proc/stat")


def storm():
    """Context switches per second, host-wide, while stress-ng switches on CPU 1."""
    c0, t0 = ctxt(), time.monotonic()
    subprocess.run(["taskset", "-c", "1", "stress-ng", "--switch", "1", "--timeout",
                    f"{RUNTIME}s", "--quiet"], check=True)
    return (ctxt() - c0) / (time.monotonic() - t0)


class Redis:
    def __init__(self, cleanup):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="plumb-bench-redis-", dir="/tmp")
        cleanup.add(shutil.rmtree, self.dir, True)
        self.proc = subprocess.Popen(
            ["taskset", "-c", "1", "redis-server", "--port", str(self.port), "--bind",
             "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cleanup.add(self.stop)
        deadline = time.time() + 10
        while subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            if time.time() > deadline:
                raise RuntimeError("redis-server did not come up")
            time.sleep(0.1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def run(self):
        """GET and SET requests per second (the mean of the two), 50 clients."""
        out = subprocess.run(
            ["taskset", "-c", "0", "redis-benchmark", "-p", str(self.port), "-c", "50",
             "-t", "get,set", "-n", str(20000 * RUNTIME), "--csv", "-q"],
            capture_output=True, text=True, check=True).stdout
        rates = [float(line.split(",")[1].strip('"')) for line in out.splitlines()
                 if line.startswith('"GET"') or line.startswith('"SET"')]
        if len(rates) != 2:
            raise RuntimeError("redis-benchmark: " + out)
        return statistics.mean(rates)


def prog_stats(pid):
    progs = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], check=True,
                                      capture_output=True, text=True).stdout)
    out = {}
    for p in progs:
        pids = [x.get("pid") for x in p.get("pids", [])]
        if p.get("name") not in PROGRAMS or (pids and pid not in pids):
            continue  # (bpftool lists the holders' pids where it can)
        t, n = out.get(p["name"], (0, 0))
        out[p["name"]] = (t + p.get("run_time_ns", 0), n + p.get("run_cnt", 0))
    return out


def per_event():
    """ns per run of each sched program under the storm, kernel.bpf_stats_enabled=1."""
    old = subprocess.run(["sysctl", "-n", "kernel.bpf_stats_enabled"], check=True,
                         capture_output=True, text=True).stdout.strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    cleanup = Cleanup()
    try:
        agent = Agent(cleanup, "--modules", "sched", wait_for_module=False)
        before = prog_stats(agent.proc.pid)
        c0 = ctxt()
        storm()
        switches = ctxt() - c0
        after = prog_stats(agent.proc.pid)
    finally:
        cleanup.run()
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={old}"], check=True)
    rows = []
    for name in PROGRAMS:
        t = after.get(name, (0, 0))[0] - before.get(name, (0, 0))[0]
        n = after.get(name, (0, 0))[1] - before.get(name, (0, 0))[1]
        rows.append((name, n, t / n if n else 0.0, t / switches if switches else 0.0))
    return rows


def main():
    if os.geteuid() != 0:
        sys.exit("sched.py: needs root (it loads BPF programs)")
    need("stress-ng", "redis-server", "redis-benchmark", "redis-cli", "taskset", "bpftool")
    cleanup = Cleanup()
    bench = Bench("sched", "Overhead of plumb's sched module: context switches and redis",
                  f"""{PAIRS} pairs of {RUNTIME} s runs per case, each pair without (A) and with
(B) `plumb agent --modules sched` started for that run (or, for the floor, empty programs on
the same two tracepoints), order alternating. Storm: `taskset -c 1 stress-ng --switch 1`, the
metric is the host's context switches per second from /proc/stat (CPU 1 does nothing but
switch, so 1e9 / rate is the time of one switch there). redis: `redis-server` on CPU 1,
`redis-benchmark -c 50 -t get,set` on CPU 0, the metric is the mean of GET's and SET's
requests per second. Targets (issue 5 §6): <= 150 ns added per context switch with the
scheduling metrics; redis ratio >= 0.97.""")
    try:
        if subprocess.run(["sysctl", "-n", "kernel.bpf_stats_enabled"], capture_output=True,
                          text=True).stdout.strip() != "0":
            sys.exit("sched.py: kernel.bpf_stats_enabled is on: it would inflate B; turn it off")
        storm()  # warm-up, not measured

        def agent_on():
            c = Cleanup()
            Agent(c, "--modules", "sched", wait_for_module=False)
            return c

        def agent_off(c):
            c.run()

        def floor_on():
            return hold_on([os.path.join(BUILD, "hold"),
                            os.path.join(BUILD, "sched_floor.bpf.o")])


        added = {}
        for label, on, off in (("sched module", agent_on, agent_off),
                               ("floor: empty programs, no agent", floor_on, hold_off)):
            bench.compare(f"context-switch storm, {label}", storm, "switches/s", on, off, PAIRS)
            row = bench.sections[-1][1]
            added[label] = statistics.median(1e9 / b - 1e9 / a
                                             for a, b in zip(row["a"], row["b"]))
        redis = Redis(cleanup)
        redis.run()  # warm-up
        r_redis = bench.compare("redis GET/SET, 50 clients, sched module", redis.run,
                                "requests/s", agent_on, agent_off, PAIRS)
        rows = per_event()
        mod, floor = added["sched module"], added["floor: empty programs, no agent"]
        bench.text("Added time per context switch (median over pairs of 1e9/B - 1e9/A):\n\n"
                   f"- sched module: {mod:+.0f} ns (target <= 150: "
                   f"{'met' if mod <= 150 else '**not met**'})\n"
                   f"- floor, empty programs on sched_switch and sched_wakeup: {floor:+.0f} ns"
                   f"\n- the module's own work above the floor: {mod - floor:+.0f} ns")
        bench.text(f"redis: ratio {r_redis:.3f} (target >= 0.97: "
                   f"{'met' if r_redis >= 0.97 else '**not met**'}).")
        bench.text("Per-event cost under the storm (`kernel.bpf_stats_enabled=1`, restored "
                   "afterwards; the statistics add two clock reads to every run):\n\n"
                   "| program | runs | ns per run | ns per context switch |\n|---|---|---|---|\n"
                   + "\n".join(f"| {n} | {c} | {r:.0f} | {s:.0f} |" for n, c, r, s in rows))
        bench.write()
    finally:
        cleanup.run()


if __name__ == "__main__":
    main()
