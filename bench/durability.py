#!/usr/bin/env python3
"""What counting fsync and rename costs: fio writes with an fdatasync after each one, with and
without the io module, and the run time of the programs that count them.

  4 KiB sequential writes on an ext4 loop image, fdatasync after each (a database's commit)
  4 KiB sequential writes on tmpfs, fdatasync after each (tmpfs has nothing to flush: the
      syscalls' own cost, the worst case for the programs); also with the fsync programs
      hidden (PLUMB_TEST_HIDE), which leaves what the writes' counting costs

Each pair runs fio (pinned to CPU 1) without (A) and with (B) `plumb agent --modules io`,
order alternating: the geometric mean of the pairs' ratios with its 95% interval. Then, with
kernel.bpf_stats_enabled=1 (restored after), the exit programs' run time per call: fdatasync
under the ext4 fio run, and renames of one file back and forth by absolute path on tmpfs
(each sends its path to user space, which finds the mount: io's path-operation route).
No target in the issue; the io module's syscall targets are overhead.py's.
Writes bench/results/durability.md.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab import Bench  # noqa: E402
from benchlib import Agent, Cleanup, bpf_stats_on, programs_during, require  # noqa: E402
from lib import mount_image, mount_tmpfs  # noqa: E402

RUNTIME = int(os.environ.get("PLUMB_BENCH_RUNTIME", "2"))
PAIRS = int(os.environ.get("PLUMB_BENCH_PAIRS", "10"))
RENAMES = 20000
PROGRAMS = ("exit_fsync", "exit_fdatasync", "exit_rename", "exit_renameat", "exit_renameat2")


def fio(directory):
    out = subprocess.run(["taskset", "-c", "1", "fio", "--output-format=json", "--time_based",
                          f"--runtime={RUNTIME}", "--name=commit", f"--directory={directory}",
                          "--size=32M", "--rw=write", "--bs=4k", "--ioengine=psync",
                          "--fdatasync=1"], check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]


def renames(directory):
    """RENAMES renames of one file between two absolute names; their count."""
    a, b = os.path.join(directory, "ren-a"), os.path.join(directory, "ren-b")
    open(a, "w").close()
    for i in range(RENAMES // 2):
        os.rename(a, b)
        os.rename(b, a)
    os.unlink(a)
    return RENAMES


def main():
    require(["fio", "bpftool"])
    cleanup = Cleanup()
    bench = Bench("durability", "What counting fsync and rename costs",
                  f"""fio {RUNTIME} s per run (pinned to CPU 1), {PAIRS} pairs, each without and
with `plumb agent --modules io` (default settings), order alternating; the geometric mean of
the pairs' ratios with its 95% interval. 4 KiB sequential writes with `--fdatasync=1` (an
fdatasync after each write, as a database's commit), psync engine, one job: on an ext4 loop
image (the flush reaches the loop device's file), and on tmpfs (nothing to flush: the
syscalls' own cost, the worst case for the programs); on tmpfs also with the fsync and
fdatasync exit programs hidden (`PLUMB_TEST_HIDE`, test-only): what the io module's other
programs (the writes') cost the same run, so the difference is what counting the fdatasyncs
costs. Then with `kernel.bpf_stats_enabled=1`
(restored): the exit programs' run time a call (bpf_stats brackets each run with two clock
reads, ~45 ns here, included), fdatasync in the ext4 run, and {RENAMES} renames of one file
between two absolute names on tmpfs (io's path-operation route: each sends its path to user
space, which finds the mount). No target in issue 2 for these.""")
    try:
        base = tempfile.mkdtemp(prefix="plumb-bench-", dir="/tmp")
        cleanup.add(os.rmdir, base)
        ext4, tmpfs = os.path.join(base, "ext4"), os.path.join(base, "tmpfs")
        mount_image(cleanup, ext4, size_mb=256)
        mount_tmpfs(cleanup, tmpfs, size_mb=128)

        def agent_on(env=None):
            c = Cleanup()
            c.agent = Agent(c, "--modules", "io", env=env)
            return c

        def agent_on_no_fsync():
            return agent_on(dict(os.environ, PLUMB_TEST_HIDE="syscalls/sys_exit_fsync,"
                                 "syscalls/sys_exit_fdatasync"))

        def agent_off(c):
            c.run()

        def commits(directory):
            return lambda: fio(directory)["write"]["iops"]

        ratios = {}
        for name, d in (("ext4", ext4), ("tmpfs", tmpfs)):
            ratios[name] = bench.compare(f"4 KiB writes, fdatasync after each, {name}",
                                         commits(d), "IOPS", agent_on, agent_off, PAIRS,
                                         interval=True)
        ratios["tmpfs, the fsync programs hidden"] = bench.compare(
            "4 KiB writes, fdatasync after each, tmpfs, the fsync programs hidden",
            commits(tmpfs), "IOPS", agent_on_no_fsync, agent_off, PAIRS, interval=True)

        bpf_stats_on(cleanup)
        rows = ["| workload | program | runs | ns per run |", "|---|---|---|---|"]
        for what, work in (("fio on ext4, fdatasync=1", lambda: fio(ext4)),
                           (f"{RENAMES} renames on tmpfs", lambda: renames(tmpfs))):
            c = agent_on()
            try:
                _, ran = programs_during(c.agent.proc.pid, PROGRAMS, work)
            finally:
                agent_off(c)
            for name, (t, n) in ran.items():
                rows.append(f"| {what} | {name} | {n} | {t / n:.0f} |")
                print(f"  {what} {name}: {n} runs, {t / n:.0f} ns per run", flush=True)
        bench.text("Program run time (bpf_stats):\n\n" + "\n".join(rows))
        bench.text("Ratios: " + ", ".join(f"{e} {r:.3f}" for e, r in ratios.items()) +
                   " (no target).")
        bench.write()
    finally:
        cleanup.run()


if __name__ == "__main__":
    main()
