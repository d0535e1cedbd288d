#!/usr/bin/env python3
"""What counting asynchronous I/O costs: fio's io_uring and libaio engines with and without
the io module, and the run time of the programs that count their completions.

  4 KiB random read on tmpfs through io_uring, queue depth 16
  4 KiB random read on tmpfs through libaio (buffered: each request completes inside
      io_submit(), and io_getevents() returns it), queue depth 16

Each pair runs fio (pinned to CPU 1) without (A) and with (B) `plumb agent --modules io`,
order alternating, many short runs (this machine's speed drifts ~10% within seconds): the
geometric mean of the pairs' ratios with its 95% interval. Each engine also with the agent's
programs for it hidden (PLUMB_TEST_HIDE, test-only): what the io module's syscall
tracepoints alone cost it, so the difference is what counting its completions costs.
Then one more run of each with kernel.bpf_stats_enabled=1 (restored after): the counting
programs' run time per run and per completion (fio's request count).
No target in the issue; the io module's syscall targets are overhead.py's.
Writes bench/results/async.md.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab import Bench  # noqa: E402
from benchlib import Agent, Cleanup, bpf_stats_on, programs_during, require  # noqa: E402
from lib import mount_tmpfs  # noqa: E402

RUNTIME = int(os.environ.get("PLUMB_BENCH_RUNTIME", "2"))
PAIRS = int(os.environ.get("PLUMB_BENCH_PAIRS", "20"))
PROGRAMS = ("uring_complete", "uring_sub_req", "uring_sub_sqe", "exit_io_getevents",
            "exit_io_pgetevents")


def fio(args):
    out = subprocess.run(["taskset", "-c", "1", "fio", "--output-format=json", "--time_based", f"--runtime={RUNTIME}",
                          "--numjobs=1", "--group_reporting"] + args,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]


def main():
    require(["fio", "bpftool"])
    cleanup = Cleanup()
    bench = Bench("async", "What counting AIO and io_uring completions costs fio",
                  f"""fio {RUNTIME} s per run (pinned to CPU 1), {PAIRS} pairs, each without and
with `plumb agent --modules io` (default settings), order alternating; the geometric mean of
the pairs' ratios with its 95% interval (this machine's speed drifts ~10% within seconds).
4 KiB random reads of a 512 MiB file on tmpfs, queue depth 16, one job. Each engine also
with the agent's programs for it hidden (`PLUMB_TEST_HIDE`, test-only: `io_uring_complete`;
`syscalls/sys_exit_io_getevents,syscalls/sys_exit_io_pgetevents`): what the io module's
syscall tracepoints alone cost it; the difference is what counting the completions costs. libaio without O_DIRECT (tmpfs): each request completes
inside `io_submit()`, and `io_getevents()` returns it, where the io module counts it.
Then one more run of each with `kernel.bpf_stats_enabled=1` (restored): the counting
programs' run time (bpf_stats brackets each run with two clock reads, ~45 ns here, included).
No target in issue 2 for these; its syscall targets are in [overhead.md](overhead.md).""")
    try:
        base = tempfile.mkdtemp(prefix="plumb-bench-", dir="/tmp")
        cleanup.add(os.rmdir, base)
        tmpfs = os.path.join(base, "tmpfs")
        mount_tmpfs(cleanup, tmpfs, size_mb=600)
        fio(["--name=prep", f"--filename={tmpfs}/f", "--size=512M", "--rw=write", "--bs=1M",
             "--runtime=60", "--io_size=512M"])

        def agent_on(env=None):
            c = Cleanup()
            c.agent = Agent(c, "--modules", "io", env=env)
            return c

        def agent_on_no_uring():
            return agent_on(dict(os.environ, PLUMB_TEST_HIDE="io_uring_complete"))

        def agent_on_no_aio():
            return agent_on(dict(os.environ, PLUMB_TEST_HIDE="syscalls/sys_exit_io_getevents,"
                                 "syscalls/sys_exit_io_pgetevents"))

        def agent_off(c):
            c.run()

        def engine_run(engine):
            def run():
                j = fio(["--name=rr", f"--filename={tmpfs}/f", "--size=512M",
                         "--rw=randread", "--bs=4k", f"--ioengine={engine}", "--iodepth=16"])
                return j["read"]["iops"]
            return run

        ratios = {}
        for engine in ("io_uring", "libaio"):
            ratios[engine] = bench.compare(f"4 KiB randread, tmpfs, {engine}, depth 16",
                                           engine_run(engine), "IOPS", agent_on, agent_off,
                                           PAIRS, interval=True)
        ratios["io_uring, its program hidden"] = bench.compare(
            "4 KiB randread, tmpfs, io_uring, depth 16, the io_uring program hidden",
            engine_run("io_uring"), "IOPS", agent_on_no_uring, agent_off, PAIRS, interval=True)
        ratios["libaio, its programs hidden"] = bench.compare(
            "4 KiB randread, tmpfs, libaio, depth 16, the AIO programs hidden",
            engine_run("libaio"), "IOPS", agent_on_no_aio, agent_off, PAIRS, interval=True)

        bpf_stats_on(cleanup)
        rows = ["| engine | program | runs | completions (fio) | ns per run | ns per completion |",
                "|---|---|---|---|---|---|"]
        for engine in ("io_uring", "libaio"):
            c = agent_on()
            try:
                j, ran = programs_during(
                    c.agent.proc.pid, PROGRAMS,
                    lambda: fio(["--name=rr", f"--filename={tmpfs}/f", "--size=512M",
                                 "--rw=randread", "--bs=4k", f"--ioengine={engine}",
                                 "--iodepth=16"]))
            finally:
                agent_off(c)
            ios = j["read"]["total_ios"]
            for name, (t, n) in ran.items():
                rows.append(f"| {engine} | {name} | {n} | {ios} | {t / n:.0f} | "
                            f"{t / ios:.0f} |")
                print(f"  {engine} {name}: {n} runs, {t / n:.0f} ns per run, {t / ios:.0f} ns "
                      f"per completion", flush=True)
        bench.text("Program run time (bpf_stats):\n\n" + "\n".join(rows))
        bench.text("Ratios: " + ", ".join(f"{e} {r:.3f}" for e, r in ratios.items()) +
                   " (no target).")
        bench.write()
    finally:
        cleanup.run()


if __name__ == "__main__":
    main()
