#!/usr/bin/env python3
"""The blk module: sectors per workload and disk, request latency per disk, and per thread
(plumb diagnose's sector_count).

Ground truth: dd, in a fresh cgroup, writes and then reads known amounts with O_DIRECT on a
loop device of the test's own (no page cache: every byte becomes a bio at once, submitted by
dd itself); for the per-thread count, a Python writer does the same while diagnose follows it.
"""
# plumb-module: blk

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (EMULATED, PLUMB, Agent, Cleanup, Runner, loop_device, make_cgroup,  # noqa: E402
                 require_root, select, settle, value)

BS, WRITES, READS = 64 << 10, 16, 8


def dd_in(cg_dir, *args):
    def join():
        with open(os.path.join(cg_dir, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    r = subprocess.run(["dd", *args, "status=none"], preexec_fn=join, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, f"dd {args}: {r.stderr}"


def sectors(m, cg, dev, op):
    return value(m, "plumb_blk_sectors_total", cgroup=cg, device=dev, op=op)


def test_sectors(agent, cleanup):
    """O_DIRECT writes and reads: the sectors, exactly, on the disk and in the workload."""
    dev = loop_device(cleanup)
    name = os.path.basename(dev)
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/blk")
    dd_in(cg_dir, "if=/dev/zero", f"of={dev}", f"bs={BS}", f"count={WRITES}", "oflag=direct")
    dd_in(cg_dir, f"if={dev}", "of=/dev/null", f"bs={BS}", f"count={READS}", "iflag=direct")
    want_w, want_r = WRITES * BS // 512, READS * BS // 512
    m = settle(agent, lambda m: sectors(m, cg, name, "read") >= want_r, timeout=10)
    got_w, got_r = sectors(m, cg, name, "write"), sectors(m, cg, name, "read")
    assert (got_w, got_r) == (want_w, want_r), \
        f"{name}: {got_w} sectors written, {got_r} read; dd wrote {want_w}, read {want_r}"
    other = {k: v for k, v in select(m, "plumb_blk_sectors_total", cgroup=cg, device=name).items()
             if v and ("op", "write") not in k and ("op", "read") not in k}
    assert not other, f"other ops: {other}"
    # every write request to the device was ours: at most one per dd block (merged: fewer)
    n = value(m, "plumb_blk_latency_seconds_count", device=name, op="write")
    total = value(m, "plumb_blk_latency_seconds_sum", device=name, op="write")
    assert 1 <= n <= WRITES and total > 0, f"write latency: {n} requests, {total} s"
    inf = value(m, "plumb_blk_latency_seconds_bucket", device=name, op="write", le="+Inf")
    assert inf == n, f"+Inf bucket {inf} != count {n}"


WRITER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, BS)  # page-aligned, as O_DIRECT wants
print("ready", flush=True)
sys.stdin.readline()
for i in range(WRITES):
    assert os.pwrite(fd, buf, i * BS) == BS
for i in range(READS):
    assert os.preadv(fd, [buf], i * BS) == BS
print("done", flush=True)
sys.stdin.readline()
"""


def test_thread_sectors(cleanup):
    """plumb diagnose --pid: the writer thread's sectors on the disk, exactly (its tracking
    entry), submitted while diagnose ran."""
    dev = loop_device(cleanup)
    name = os.path.basename(dev)
    w = subprocess.Popen([sys.executable, "-c", f"BS, WRITES, READS = {BS}, {WRITES}, {READS}"
                          + WRITER, dev], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    cleanup.add(lambda: w.poll() is None and (w.kill(), w.wait()))
    assert w.stdout.readline().strip() == "ready"
    run = ["--duration", "6s", "--interval", "1s", "--baseline-duration", "3s"] if EMULATED \
        else ["--duration", "3s", "--interval", "500ms", "--baseline-duration", "1500ms"]
    d = subprocess.Popen([PLUMB, "diagnose", "--pid", str(w.pid), *run, "--json", "-v"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cleanup.add(lambda: d.poll() is None and (d.kill(), d.wait()))
    for line in d.stderr:
        if "attached" in line:
            break
    w.stdin.write("go\n")
    w.stdin.flush()
    assert w.stdout.readline().strip() == "done"
    out, err = d.communicate(timeout=120)
    assert d.returncode == 0, f"diagnose: exit {d.returncode}: {err}"
    report = json.loads(out)
    mine = [t for t in report["tracking"] if t["tid"] == w.pid]
    assert mine, f"the writer (tid {w.pid}) is not tracked: {report['tracking']}"
    got = [s for s in mine[0]["sectors"] if s["device"] == name]
    want = {"device": name, "read": READS * BS // 512, "write": WRITES * BS // 512}
    assert got == [want], f"writer's sectors {mine[0]['sectors']}, it did {want}"


def main():
    require_root()
    runner = Runner()
    cleanup = Cleanup()
    try:
        agent = Agent(cleanup, "--modules", "blk", wait_for_module=False)
        settle(agent, lambda m: value(m, "plumb_module_up", module="blk") == 1, timeout=10)
        assert "module blk: up" in agent.output(), agent.output()
        runner.run("blk: O_DIRECT sectors per workload and disk, exact", test_sectors, agent,
                   cleanup)
        runner.run("blk: sectors per thread (diagnose), exact", test_thread_sectors, cleanup)
    except Exception as e:
        runner.failed += 1
        print(f"FAIL setup: {e}")
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
