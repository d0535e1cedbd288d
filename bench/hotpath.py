#!/usr/bin/env python3
"""Runs build/hotpath for each configuration and writes bench/results/hotpath.md.

Configurations: the floor (empty programs on the same tracepoints: exit only, and enter +
exit), and the io module without latency, with latency in windows of 1/16 of each second
(the default since 2026-12-03: an enter program attached only then, since 2026-12-05 one on
raw sys_enter), the exits between windows alone (--no-enter) and with the idle perf events
the windows kept open before 2026-12-05 (--idle-events), with the enter programs
always attached and timing a random one call in 16 (the default before; what the
args-at-enter fallback still does), and with every call timed. Each is a separate process that attaches and detaches its programs
between batches, pinned to one CPU. Then the handover gate's price: exit programs that only
check the gate against empty ones, their bpf_stats run time, in alternating runs.
"""

import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from ab import RESULTS, machine  # noqa: E402
from lib import Cleanup, mount_tmpfs  # noqa: E402

HOTPATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "hotpath")
PAIRS = os.environ.get("PLUMB_BENCH_HOTPATH_PAIRS", "9")
GATE_ROUNDS = 7
CONFIGS = [
    ("floor: empty exit programs", ["--floor", "--no-latency"]),
    ("floor: empty enter + exit programs", ["--floor"]),
    ("io module, no latency (--no-io-latency)", ["--no-latency"]),
    ("io module, latency in windows, 1/16 of the time (default)",
     ["--windows", "16"]),
    ("io module, latency in windows: the exits between windows alone (no enter program)",
     ["--no-enter"]),
    ("io module, latency in windows: the exits between windows, and idle perf events on the "
     "ten enter tracepoints (what the windows kept open before 2026-12-05)",
     ["--no-enter", "--idle-events"]),
    ("io module, latency 1 call in 16, enter programs always attached (the default before "
     "2026-12-03)", ["--sample", "16"]),
    ("io module, every call timed (--io-latency-sample 1)", ["--sample", "1"]),
]


def main():
    cleanup = Cleanup()
    try:
        d = tempfile.mkdtemp(prefix="plumb-hotpath-", dir="/tmp")
        cleanup.add(os.rmdir, d)
        mount_tmpfs(cleanup, os.path.join(d, "t"), size_mb=16)
        f = os.path.join(d, "t", "f")
        with open(f, "wb") as fh:
            fh.write(os.urandom(4096))
        cpu = str(os.cpu_count() - 1)
        out = ["# Hot path: what the io module adds to a syscall", "",
               "Machine: " + "; ".join(f"{k} {v}" for k, v in machine().items()) + ".", "",
               "bench/hotpath.c: one process alternates batches with the programs attached "
               f"and detached ({PAIRS} pairs of 200,000 calls, pinned to CPU {cpu}); each "
               "number is the median of the pairs. The floor rows load empty programs on the "
               "same tracepoints: what any BPF program there costs. The bpf_stats tables are "
               "the programs' own run time (precise; they include the statistics' two clock "
               "reads, visible in the floor's run time).", ""]
        for title, args in CONFIGS:
            print(f"== {title}", flush=True)
            r = subprocess.run(["taskset", "-c", cpu, HOTPATH, "--pairs", PAIRS] + args + [f],
                               capture_output=True, text=True)
            print(r.stdout, r.stderr, flush=True)
            if r.returncode:
                raise SystemExit(f"hotpath failed: {r.stderr}")
            out += [f"## {title}", "", r.stdout.strip(), ""]
            # --windows: the share of each row's time the windows were open
            out += [f"- {line}" for line in r.stderr.splitlines() if "windows open" in line]
            if "--windows" in args:
                out += ["", "Batches of 3 s here (whole seconds from the attach: the "
                        "window falls in each exactly once); in the bpf_stats table the "
                        "enter program's runs are those in the windows (every syscall of "
                        "the process then), the exits' all.", ""]
        out += gate_price(cpu, f)
        os.makedirs(RESULTS, exist_ok=True)
        path = os.path.join(RESULTS, "hotpath.md")
        with open(path, "w") as fh:
            fh.write("\n".join(out) + "\n")
        print(f"wrote {path}")
    finally:
        cleanup.run()


def run_times(cpu, args, f):
    """{program: ns per run} from hotpath's bpf_stats table."""
    r = subprocess.run(["taskset", "-c", cpu, HOTPATH, "--pairs", "5"] + args + [f],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"hotpath failed: {r.stderr}")
    rows = [line.strip("|").split("|") for line in r.stdout.splitlines()
            if line.startswith("| exit_")]
    return {name.strip(): float(ns) for name, _, ns in rows}


def gate_price(cpu, f):
    """The handover gate (bpf/gate.bpf.h, first in every io, blk, sched and flow program):
    exit programs that only check it against empty ones, alternating runs, bpf_stats."""
    empty, gated = [], []
    for i in range(GATE_ROUNDS):
        print(f"== gate round {i + 1} of {GATE_ROUNDS}", flush=True)
        empty.append(run_times(cpu, ["--floor", "--no-latency"], f))
        gated.append(run_times(cpu, ["--floor", "--no-latency", "--gate"], f))
    out = ["## The handover gate's price", "",
           "Every program of every module first checks the handover gate (bpf/gate.bpf.h: "
           "one per-CPU array lookup of a constant key, which the verifier inlines, and two "
           "compares with a read-only constant). Exit programs that only check "
           f"it against empty ones on the same tracepoints, {GATE_ROUNDS} alternating runs "
           "(each 1,000,000 calls per program after 5 pairs of wall-time batches), the "
           "programs' own run time by bpf_stats: medians, and the median of the paired "
           "differences.", "",
           "| program | empty (ns/run) | gate only (ns/run) | the gate (ns/run) |",
           "|---|---|---|---|"]
    for prog in sorted(empty[0]):
        e = [r[prog] for r in empty]
        g = [r[prog] for r in gated]
        d = [b - a for a, b in zip(e, g)]
        out.append(f"| {prog} | {statistics.median(e):.0f} | {statistics.median(g):.0f} | "
                   f"{statistics.median(d):+.1f} |")
    return out + [""]


if __name__ == "__main__":
    main()
