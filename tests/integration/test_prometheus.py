#!/usr/bin/env python3
"""End to end through a real Prometheus server (Debian's package), scraping the agent every 1 s.

A workload of known size runs in its own cgroup on a loop-mounted ext4; the test then asks
Prometheus' HTTP API for increase(plumb_io_write_bytes_total{...}[...]) and compares.

Prometheus extrapolates increase() to the edges of the range. The test evaluates the query at
the timestamp of the last sample (nothing to extrapolate at the end) and starts the range
before the series' first sample, which is 0: Prometheus does not extrapolate a counter below
zero, so the answer is the true increase and the 1% tolerance is only for what could differ.
"""
# plumb-module: io

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (Agent, Cleanup, Prometheus, Runner, iowork, make_cgroup,  # noqa: E402
                 mount_image, require_root)

MIB = 1 << 20


def test_increase_matches(cleanup):
    base = tempfile.mkdtemp(prefix="plumb-prom-it-", dir="/tmp")
    cleanup.add(os.rmdir, base)
    mnt = os.path.join(base, "ext4")
    mount_image(cleanup, mnt, size_mb=256)
    agent = Agent(cleanup)
    prom = Prometheus(cleanup, agent.port, interval=1)
    # Prometheus holds new targets back for ~5 s (its discovery throttle): wait until it has
    # scraped the agent twice, so the series' first samples come before the workload
    prom.wait_scrapes(2)
    cg, label = make_cgroup(cleanup, f"plumb-prom-{os.getpid()}/job")
    size = 96 * MIB + 12345
    t0 = time.time()
    # create the file first, so the series exists at 0 for a few scrapes before the writes
    iowork(cg, f"creat:{mnt}/data", "sleep:3000", f"write:{mnt}/data:{size}:{MIB}", "sleep:3000")
    sel = f'plumb_io_write_bytes_total{{cgroup="{label}",mount="{mnt}"}}'
    deadline = time.time() + 10
    while True:
        last = prom.query(f"timestamp({sel})")
        if last and float(prom.query(sel)[0]["value"][1]) == size:
            break
        assert time.time() < deadline, f"Prometheus never saw {sel} reach {size}"
        time.sleep(0.5)
    t_last = float(last[0]["value"][1])
    window = int(t_last - t0) + 5
    got = prom.query(f"increase({sel}[{window}s])", at=t_last)
    assert len(got) == 1, f"increase() returned {got}"
    inc = float(got[0]["value"][1])
    err = abs(inc - size) / size
    print(f"  increase over {window}s: {inc:.0f} bytes, workload wrote {size} ({err:.4%} off)")
    assert err <= 0.01, f"increase {inc:.0f} vs {size} written: {err:.3%} off"


def main():
    require_root()
    runner = Runner()
    cleanup = Cleanup()
    try:
        runner.run_host("Prometheus and PromQL over io's counters, which test_io checks exactly"
                        " on every kernel", "prometheus: increase() of write bytes matches the"
                        " workload", test_increase_matches, cleanup)
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
