#!/usr/bin/env python3
"""Runs build/hotpath for each configuration and writes bench/results/hotpath.md.

Configurations: the floor (empty programs on the same tracepoints: exit only, exit only
checking the handover gate, and enter + exit), and the io module without latency, with
latency sampled 1 in 16 (the default) and with every call timed. Each is a separate process
that attaches and detaches its programs between batches, pinned to one CPU.
"""

import os
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
CONFIGS = [
    ("floor: empty exit programs", ["--floor", "--no-latency"]),
    ("floor: exit programs that only check the handover gate", ["--floor", "--no-latency",
                                                                 "--gate"]),
    ("floor: empty enter + exit programs", ["--floor"]),
    ("io module, no latency (--no-io-latency)", ["--no-latency"]),
    ("io module, latency 1 in 16 (default)", ["--sample", "16"]),
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
               "same tracepoints: what any BPF program there costs; the gate row's programs "
               "only check the handover gate (bpf/gate.bpf.h, first in every io, blk, sched "
               "and flow program): above the floor, the gate's price. The bpf_stats tables are "
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
        os.makedirs(RESULTS, exist_ok=True)
        path = os.path.join(RESULTS, "hotpath.md")
        with open(path, "w") as fh:
            fh.write("\n".join(out) + "\n")
        print(f"wrote {path}")
    finally:
        cleanup.run()


if __name__ == "__main__":
    main()
