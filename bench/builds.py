#!/usr/bin/env python3
"""Two builds of plumb against each other under a storm (a developer's tool, not in make bench).

  bench/builds.py OLD NEW [--modules sched] [--stressor switch] [--pairs 30]

OLD and NEW are plumb binaries (e.g. one built in a git worktree), or `floor`: build/hold with
build/sched_floor.bpf.o, empty programs on sched_switch and sched_migrate_task, and no agent.
`stress-ng --STRESSOR 1` runs on CPU 1 throughout; windows alternate between OLD's agent on and
NEW's agent on (order alternating pair by pair), each 1.5 s of the host's context-switch rate
from 1 s after the agent came up. Prints the geometric mean of the pairs' ratios NEW/OLD with
its 95% interval, and what that makes per context switch (1e9/OLD x (1/r - 1): + is NEW
slower). Comparing two agents directly takes the drift between separate bench/sched.py runs
out: a change of 15 ns per switch is resolved here, where two sched.py runs differ by more than
that.

  bench/builds.py OLD NEW --stats PROGRAM [--pairs 8] [--window 3]

The same alternation, measuring instead PROGRAM's run time per run (kernel.bpf_stats_enabled
on for the run, restored after; bpftool's run_time_ns / run_cnt over each window): the
program's own nanoseconds, where the storm's rate also moves with what the kernel pays around
it. Prints each side's median and the mean of the pairs' differences NEW - OLD with its 95%
interval. bpf_stats brackets every run with two clock reads: an empty program reads ~45 ns
per run here, so compare builds, never read one number as the program's cost. With OLD
`floor`: that empty program on PROGRAM's tracepoint (build/sched_floor.bpf.o's floor_switch
for sched_switch, floor_migrate for sched_migrate_task), so NEW - OLD is what the program adds
to the kernel's price of running any program there.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import lib  # noqa: E402
from ab import _row, hold_off, hold_on  # noqa: E402
from benchlib import prog_stats  # noqa: E402
from lib import Agent, Cleanup  # noqa: E402
from sched import ctxt, storm_load  # noqa: E402

WINDOW_S, SETTLE_S = 1.5, 1.0
BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build")
# build/sched_floor.bpf.o's empty program on the tracepoint of each program --stats can compare
FLOOR = {"sched_switch": "floor_switch", "sched_migrate_task": "floor_migrate"}


def measure():
    time.sleep(SETTLE_S)
    c0, t0 = ctxt(), time.monotonic()
    time.sleep(WINDOW_S)
    return (ctxt() - c0) / (time.monotonic() - t0)


def per_run(ns, runs, program):
    if not runs:
        sys.exit(f"builds.py: {program} did not run in the window: a stressor that reaches it "
                 "(--stressor affinity migrates)")
    return ns / runs


def stats_window(binary, modules, program, seconds):
    """ns per run of program in binary's agent (or the floor's) over seconds, from 1 s after
    it came up."""
    if binary == "floor":
        p = hold_on([os.path.join(BUILD, "hold"), os.path.join(BUILD, "sched_floor.bpf.o")])
        try:
            time.sleep(SETTLE_S)
            t0, n0 = prog_stats(p.pid, (FLOOR[program],))[FLOOR[program]]
            time.sleep(seconds)
            t1, n1 = prog_stats(p.pid, (FLOOR[program],))[FLOOR[program]]
            return per_run(t1 - t0, n1 - n0, program)
        finally:
            hold_off(p)
    lib.PLUMB = binary
    c = Cleanup()
    try:
        a = Agent(c, "--modules", modules, wait_for_module=False)
        deadline = time.time() + 60
        while program not in prog_stats(a.proc.pid, (program,)):
            if time.time() > deadline:
                sys.exit(f"builds.py: {binary}'s agent has no program {program}")
            time.sleep(0.2)
        time.sleep(SETTLE_S)
        t0, n0 = prog_stats(a.proc.pid, (program,))[program]
        time.sleep(seconds)
        t1, n1 = prog_stats(a.proc.pid, (program,))[program]
        return per_run(t1 - t0, n1 - n0, program)
    finally:
        c.run()


def sysctl(name, value=None):
    path = "/proc/sys/" + name.replace(".", "/")
    with open(path) as f:
        old = f.read().strip()
    if value is not None:
        with open(path, "w") as f:
            f.write(value)
    return old


def window(binary, modules):
    if binary == "floor":
        p = hold_on([os.path.join(BUILD, "hold"), os.path.join(BUILD, "sched_floor.bpf.o")])
        try:
            return measure()
        finally:
            hold_off(p)
    lib.PLUMB = binary
    c = Cleanup()
    try:
        Agent(c, "--modules", modules, wait_for_module=False)
        return measure()
    finally:
        c.run()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--modules", default="sched")
    ap.add_argument("--stressor", default="switch")
    ap.add_argument("--pairs", type=int, default=None)
    ap.add_argument("--stats", metavar="PROGRAM")
    ap.add_argument("--window", type=float, default=3.0)
    args = ap.parse_args()
    if args.pairs is None:
        args.pairs = 8 if args.stats else 30
    if args.stats and (args.new == "floor" or
                       (args.old == "floor" and args.stats not in FLOOR)):
        sys.exit(f"builds.py: --stats with a floor: OLD only, and PROGRAM one of "
                 f"{', '.join(FLOOR)}")
    if os.geteuid() != 0:
        sys.exit("builds.py: needs root (it loads BPF programs)")
    for b in (args.old, args.new):
        if b != "floor" and not os.access(b, os.X_OK):
            sys.exit(f"builds.py: {b}: not an executable")
    load = Cleanup()
    old, new = [], []
    try:
        if args.stats:
            saved = sysctl("kernel.bpf_stats_enabled", "1")
            load.add(sysctl, "kernel.bpf_stats_enabled", saved)
        storm_load(load, args.stressor)
        for i in range(args.pairs):
            for side in ("old", "new") if i % 2 == 0 else ("new", "old"):
                binary = args.old if side == "old" else args.new
                (old if side == "old" else new).append(
                    stats_window(binary, args.modules, args.stats, args.window) if args.stats
                    else window(binary, args.modules))
    finally:
        load.run()
    if args.stats:
        d = [n - o for o, n in zip(old, new)]
        half = 1.96 * statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
        print(f"--modules {args.modules}, stress-ng --{args.stressor}, {args.pairs} pairs of "
              f"{args.window:g} s: {args.stats} ns per run, OLD median "
              f"{statistics.median(old):.1f}, NEW median {statistics.median(new):.1f}; NEW - "
              f"OLD {statistics.mean(d):+.1f} ns (95% {statistics.mean(d) - half:+.1f} to "
              f"{statistics.mean(d) + half:+.1f})")
        return
    row = _row("new/old", "switches/s", old, new, True, interval=True)
    per = [1e9 / row["ma"] * (1 / r - 1) for r in (row["gmean"], row["ci"][1], row["ci"][0])]
    print(f"--modules {args.modules}, stress-ng --{args.stressor}, {args.pairs} pairs: rate "
          f"NEW/OLD {row['gmean']:.4f} (95% {row['ci'][0]:.4f}-{row['ci'][1]:.4f}); per context "
          f"switch NEW - OLD {per[0]:+.1f} ns (95% {per[1]:+.1f} to {per[2]:+.1f}); OLD's median "
          f"{row['ma']:.0f} switches/s")


if __name__ == "__main__":
    main()
