#!/usr/bin/env python3
"""End to end through a real Prometheus server (Debian's package), scraping the agent every 1 s.

A workload of known size runs in its own cgroup on a loop-mounted ext4; the test then asks
Prometheus' HTTP API for increase(plumb_io_write_bytes_total{...}[...]) and compares.

Prometheus extrapolates increase() to the edges of the range. The test evaluates the query at
the timestamp of the last sample (nothing to extrapolate at the end) and starts the range
before the series' first sample, which is 0: Prometheus does not extrapolate a counter below
zero, so the answer is the true increase and the 1% tolerance is only for what could differ.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (Agent, Cleanup, Runner, free_port, iowork, make_cgroup, mount_image,  # noqa: E402
                 require_root)

MIB = 1 << 20


class Prometheus:
    def __init__(self, cleanup, target_port):
        self.dir = tempfile.mkdtemp(prefix="plumb-prom-")
        cleanup.add(shutil.rmtree, self.dir)
        self.port = free_port()
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: plumb
    static_configs:
      - targets: ['127.0.0.1:{target_port}']
""")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        cleanup.add(self.stop)
        deadline = time.time() + 30
        while time.time() < deadline:
            assert self.proc.poll() is None, "prometheus exited: " + self.output()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus not ready: " + self.output())

    def output(self):
        self.log.seek(0)
        return self.log.read()[-2000:]

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def test_increase_matches(cleanup):
    base = tempfile.mkdtemp(prefix="plumb-prom-it-", dir="/tmp")
    cleanup.add(os.rmdir, base)
    mnt = os.path.join(base, "ext4")
    mount_image(cleanup, mnt, size_mb=256)
    agent = Agent(cleanup)
    prom = Prometheus(cleanup, agent.port)
    # Prometheus holds new targets back for ~5 s (its discovery throttle): wait until it has
    # scraped the agent twice, so the series' first samples come before the workload
    deadline = time.time() + 30
    while not prom.query("count_over_time(up[1m]) >= 2"):
        assert time.time() < deadline, "Prometheus did not scrape the agent: " + prom.output()
        time.sleep(0.5)
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
        runner.run("prometheus: increase() of write bytes matches the workload", test_increase_matches,
                   cleanup)
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
