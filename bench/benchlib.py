"""Pieces the benchmarks share beyond tests/integration/lib.py: a Prometheus server, running a
command inside a cgroup, and checking that the tools a benchmark needs are there.

The agent, cgroups, loop mounts and the Cleanup stack come from tests/integration/lib.py, so
that benchmarks and tests start and undo them the same way.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from lib import (PLUMB, Agent, Cleanup, free_port, make_cgroup, mount_image,  # noqa: E402,F401
                 sh)


def require(tools, exit_code=2):
    """Exits with exit_code, saying what is missing, unless root and every tool are there."""
    missing = [t for t in tools if not shutil.which(t)]
    if not os.path.exists(PLUMB):
        missing.append(f"{PLUMB} (run make)")
    problems = ([] if os.geteuid() == 0 else ["root"]) + missing
    if problems:
        print("cannot run: missing " + ", ".join(problems), file=sys.stderr)
        sys.exit(exit_code)


def in_cgroup(cgroup_dir, argv):
    """argv wrapped so that it runs in cgroup_dir: the shell moves itself, then execs."""
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup_dir, *argv]


class Prometheus:
    """Debian's prometheus on loopback, scraping job `plumb` at target every interval seconds."""

    def __init__(self, cleanup, target_port, interval=2):
        self.interval = interval
        self.dir = tempfile.mkdtemp(prefix="plumb-prom-")
        cleanup.add(shutil.rmtree, self.dir)
        self.port = free_port()
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(f"""global:
  scrape_interval: {interval}s
  scrape_timeout: {interval}s
  evaluation_interval: {interval}s
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
        while not self._ready():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("prometheus did not become ready: " + self.output())
            time.sleep(0.2)

    def _ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def output(self):
        self.log.seek(0)
        return self.log.read()[-2000:]

    def _api(self, endpoint, **params):
        url = (f"http://127.0.0.1:{self.port}/api/v1/{endpoint}?" +
               urllib.parse.urlencode(params))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        if body["status"] != "success":
            raise RuntimeError(f"{endpoint} {params}: {body}")
        return body["data"]["result"]

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._api("query", **params)

    def query_range(self, expr, start, end, step):
        return self._api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}",
                         step=f"{step}")

    def samples(self, selector, since):
        """The raw (timestamp, value) samples of the one series selector names, from since."""
        now = time.time()
        got = self.query(f"{selector}[{int(now - since) + 1}s]", at=now)
        if len(got) != 1:
            raise RuntimeError(f"{selector}: {len(got)} series")
        return [(float(t), float(v)) for t, v in got[0]["values"] if float(t) >= since]

    def wait_scrapes(self, n, timeout=30):
        """Waits until Prometheus holds n scrapes of the agent's own metrics."""
        deadline = time.time() + timeout
        while True:
            got = self.query("count_over_time(plumb_build_info[5m])")
            if got and float(got[0]["value"][1]) >= n:
                return
            if time.time() > deadline:
                raise RuntimeError(f"fewer than {n} scrapes of the agent after {timeout} s")
            time.sleep(0.5)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
