#!/usr/bin/env python3
"""Two builds of plumb against each other under a storm (a developer's tool, not in make bench).

  bench/builds.py OLD NEW [--modules sched] [--stressor switch] [--pairs 30]

OLD and NEW are plumb binaries (e.g. one built in a git worktree), or `floor`: build/hold with
build/sched_floor.bpf.o, an empty program on sched_switch and no agent. `stress-ng --STRESSOR 1` runs
on CPU 1 throughout; windows alternate between OLD's agent on and NEW's agent on (order
alternating pair by pair), each 1.5 s of the host's context-switch rate from 1 s after the
agent came up. Prints the geometric mean of the pairs' ratios NEW/OLD with its 95% interval,
and what that makes per context switch (1e9/OLD x (1/r - 1): + is NEW slower). Comparing two
agents directly takes the drift between separate bench/sched.py runs out: a change of 15 ns per
switch is resolved here, where two sched.py runs differ by more than that.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import lib  # noqa: E402
from ab import _row, hold_off, hold_on  # noqa: E402
from lib import Agent, Cleanup  # noqa: E402
from sched import ctxt, storm_load  # noqa: E402

WINDOW_S, SETTLE_S = 1.5, 1.0
BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build")


def measure():
    time.sleep(SETTLE_S)
    c0, t0 = ctxt(), time.monotonic()
    time.sleep(WINDOW_S)
    return (ctxt() - c0) / (time.monotonic() - t0)


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
    ap.add_argument("--pairs", type=int, default=30)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("builds.py: needs root (it loads BPF programs)")
    for b in (args.old, args.new):
        if b != "floor" and not os.access(b, os.X_OK):
            sys.exit(f"builds.py: {b}: not an executable")
    load = Cleanup()
    old, new = [], []
    try:
        storm_load(load, args.stressor)
        for i in range(args.pairs):
            for side in ("old", "new") if i % 2 == 0 else ("new", "old"):
                binary = args.old if side == "old" else args.new
                (old if side == "old" else new).append(window(binary, args.modules))
    finally:
        load.run()
    row = _row("new/old", "switches/s", old, new, True, interval=True)
    per = [1e9 / row["ma"] * (1 / r - 1) for r in (row["gmean"], row["ci"][1], row["ci"][0])]
    print(f"--modules {args.modules}, stress-ng --{args.stressor}, {args.pairs} pairs: rate "
          f"NEW/OLD {row['gmean']:.4f} (95% {row['ci'][0]:.4f}-{row['ci'][1]:.4f}); per context "
          f"switch NEW - OLD {per[0]:+.1f} ns (95% {per[1]:+.1f} to {per[2]:+.1f}); OLD's median "
          f"{row['ma']:.0f} switches/s")


if __name__ == "__main__":
    main()
