#!/usr/bin/env python3
"""The Grafana dashboards (deploy/grafana/*.json) and the scrape config example
(deploy/prometheus/prometheus.yml), against a real Prometheus scraping a real agent.

Workloads in one cgroup give every panel data: file I/O on a loop-mounted ext4 (buffered,
O_DIRECT, metadata, failing calls), threads that block on a pipe, a socket, a futex, epoll and
poll, TCP clients and a server on loopback, and iperf3 between network namespaces on a bridge
(lib.Hosts): UDP h1 -> h2 and TCP h3 -> h2. Once the netstack module has learnt its
baselines, a TBF rate limit on h1's eth0 makes its qdisc the bottleneck, so the bottleneck
panels have something to show. Then every expression of every panel and every variable query
of every dashboard is run, with Grafana's variables replaced as Grafana would: first with
"All" selected, then with the test's own workload, mount, disk and instance. Each must answer
without error and with at least one series holding a finite value other than 0 (the "Events
lost" panels excepted: a healthy agent loses nothing, and 0 is their data).
"""
# plumb-module: io

import json
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (EMULATED, ROOT, Agent, Cleanup, Hosts, Prometheus, Runner, free_port,  # noqa: E402
                 make_cgroup, mount_image, require_root, sh)

GRAFANA = os.path.join(ROOT, "deploy", "grafana")
PROM_CONFIG = os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")
DASHBOARDS = ["plumb-io.json", "plumb-waits.json", "plumb-netstack.json", "plumb-traffic.json"]
# s, also Prometheus's scrape timeout. 5 in emulated guests, where a scrape of every module
# takes seconds: the agent's own work in a scrape, 2-30 ms here, took up to 2.7 s there and
# Prometheus saw up to 3.9 s with both CI guests at once (each guest's two CPUs are one host
# thread, shared with the test's workloads), so a 3 s timeout failed scrapes and a failed
# scrape makes every series stale until the next one (the first 6.1 guest run, at 1 s, timed
# out every scrape)
SCRAPE = 5 if EMULATED else 1
# Grafana's $__rate_interval: max($__interval + scrape interval, 4 x scrape interval), with the
# data source's scrape interval set to the server's and $__interval at most that
RATE_INTERVAL = f"{4 * SCRAPE}s"
# Panels whose healthy value is 0: there, a series of zeros is the data
ZERO_IS_DATA = {"Events lost"}
# The UDP flow and the TBF rate that makes h1's qdisc the bottleneck, as in test_netstack's
# scenario (a); a quarter in emulated guests, whose sender cannot keep up
UDP_RATE, TBF_RATE = ("4M", "2.5mbit") if EMULATED else ("16M", "10mbit")
# PLUMB_DASH_VERBOSE=N prints each query's answer, its first N series
VERBOSE = int(os.environ.get("PLUMB_DASH_VERBOSE", "0"))

IO_WORK = r"""
import mmap, os, sys, time
with open("/proc/self/comm", "w") as f:
    f.write("dash-io")
d = sys.argv[1]
chunk = b"x" * 65536
aligned = mmap.mmap(-1, 65536)  # page-aligned, as O_DIRECT needs
aligned.write(b"d" * 65536)
while True:
    for i in range(2):
        path = f"{d}/data{i}"
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        for _ in range(4):
            os.write(fd, chunk)
        try:
            os.read(fd, 16)  # a write-only fd: a failed read on this mount
        except OSError:
            pass
        os.fsync(fd)
        os.close(fd)
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, 65536):
            pass
        try:
            os.write(fd, b"x")  # a read-only fd: a failed write
        except OSError:
            pass
        os.close(fd)
    fd = os.open(f"{d}/direct", os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
    for off in range(0, 1 << 19, 65536):
        os.pwrite(fd, aligned, off)
    for off in range(0, 1 << 19, 65536):
        os.preadv(fd, [aligned], off)
    os.close(fd)
    os.mkdir(f"{d}/dir")
    os.rmdir(f"{d}/dir")
    fd = os.open(f"{d}/tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.close(fd)
    os.unlink(f"{d}/tmp")
    for fail in (lambda: os.open(f"{d}/missing", os.O_RDONLY), lambda: os.unlink(f"{d}/missing")):
        try:
            fail()
        except OSError:
            pass
    time.sleep(0.1)
"""

WAIT_WORK = r"""
import os, select, socket, threading, time
with open("/proc/self/comm", "w") as f:
    f.write("dash-wait")

def ticker(write, period):
    def run():
        while True:
            time.sleep(period)
            write()
    threading.Thread(target=run, daemon=True).start()

def pipe(period):
    r, w = os.pipe()
    ticker(lambda: os.write(w, b"x"), period)
    return r

def pipe_reader(r):
    while True:
        os.read(r, 1)

def epoller(r):
    ep = select.epoll()
    ep.register(r, select.EPOLLIN)
    while True:
        for fd, _ in ep.poll(1):
            os.read(fd, 1)

def poller(r):
    p = select.poll()
    p.register(r, select.POLLIN)
    while True:
        for fd, _ in p.poll(1000):
            os.read(fd, 1)

a, b = socket.socketpair()
ticker(lambda: b.send(b"x"), 0.02)

def socket_reader():
    while True:
        a.recv(1)

cond = threading.Condition()

def notify():
    with cond:
        cond.notify()

ticker(notify, 0.02)

def futex_waiter():
    while True:
        with cond:
            cond.wait()

def spinner():  # on a CPU half the time: with the rest of the test, some run-queue time
    while True:
        end = time.monotonic() + 0.02
        while time.monotonic() < end:
            pass
        time.sleep(0.02)

threads = [(pipe_reader, (pipe(0.02),)), (epoller, (pipe(0.03),)), (poller, (pipe(0.03),)),
           (socket_reader, ()), (futex_waiter, ())]
for fn, args in threads:
    threading.Thread(target=fn, args=args, daemon=True).start()
spinner()
"""

TCP_SERVER = r"""
import socket, sys, threading
with open("/proc/self/comm", "w") as f:
    f.write("dash-server")
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1])))
l.listen(64)
u = socket.socket(socket.AF_UNIX)
u.bind(sys.argv[2])
u.listen(64)

def serve(c):
    with c:
        while True:
            data = c.recv(65536)  # blocks: socket waits
            if not data:
                break
            c.sendall(data)

def accept(listener):
    while True:
        c, _ = listener.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()

threading.Thread(target=accept, args=(u,), daemon=True).start()
accept(l)
"""

TCP_CLIENT = r"""
import socket, sys, time
with open("/proc/self/comm", "w") as f:
    f.write("dash-client")
msg = b"y" * 32768
while True:  # short connections: connections and (at close) segments move too
    for family, address in ((socket.AF_INET, ("127.0.0.1", int(sys.argv[1]))),
                            (socket.AF_UNIX, sys.argv[2])):
        s = socket.socket(family)
        s.connect(address)
        s.sendall(msg)
        got = 0
        while got < len(msg):
            got += len(s.recv(65536))
        s.close()
    time.sleep(0.05)
"""


def spawn(cleanup, cgroup_dir, cmd):
    """Popen of cmd in cgroup_dir (joined before exec), killed at cleanup."""
    def join():
        with open(f"{cgroup_dir}/cgroup.procs", "w") as f:
            f.write("0")
    p = subprocess.Popen(cmd, preexec_fn=join, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    cleanup.add(stop, p)
    return p


def stop(p):
    if p.poll() is None:
        p.kill()
    p.wait()


def api(prom, endpoint, **params):
    """GET /api/v1/<endpoint>; returns (data, None) or (None, error text)."""
    url = f"http://127.0.0.1:{prom.port}/api/v1/{endpoint}?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        body = json.load(e)
    if body.get("status") != "success":
        return None, f"{body.get('errorType')}: {body.get('error')}"
    return body["data"], None


def load(name):
    with open(os.path.join(GRAFANA, name)) as f:
        return json.load(f)


def panels(dash):
    """Every panel, those inside collapsed rows included."""
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])


def variables(dash):
    return [v for v in dash["templating"]["list"] if v["type"] == "query"]


def var_query(v):
    q = v["query"]
    return q["query"] if isinstance(q, dict) else q


VAR = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|([A-Za-z_]\w*))|\[\[(\w+)\]\]")


def substitute(expr, values, range_s):
    """expr with Grafana's built-in and template variables replaced."""
    builtin = {"__rate_interval": RATE_INTERVAL, "__interval": f"{SCRAPE}s",
               "__interval_ms": str(SCRAPE * 1000), "__range": f"{range_s}s",
               "__range_s": str(range_s), "__range_ms": str(range_s * 1000)}

    def one(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in builtin:
            return builtin[name]
        if name in values:
            return values[name]
        raise KeyError(f"variable ${name} is not defined by the dashboard")
    return VAR.sub(one, expr)


def test_static():
    """Each dashboard parses, is what deploy/grafana/generate.py writes, has a datasource
    variable, and each panel a title, a gridPos and the datasource; every variable an
    expression uses is defined."""
    sys.path.insert(0, GRAFANA)
    import generate  # noqa: E402
    fresh = generate.render()
    assert sorted(fresh) == sorted(DASHBOARDS), f"generate.py writes {sorted(fresh)}"
    problems, uids, count = [], set(), 0
    for name in DASHBOARDS:
        with open(os.path.join(GRAFANA, name)) as f:
            text = f.read()
        if text != fresh[name]:
            problems.append(f"{name}: differs from what generate.py writes (run it)")
        dash = json.loads(text)
        for key in ("title", "uid", "schemaVersion", "panels", "templating"):
            if key not in dash:
                problems.append(f"{name}: no {key}")
        if dash["uid"] in uids:
            problems.append(f"{name}: uid {dash['uid']} used twice")
        uids.add(dash["uid"])
        if not any(v["type"] == "datasource" and v["query"] == "prometheus"
                   for v in dash["templating"]["list"]):
            problems.append(f"{name}: no Prometheus datasource variable")
        defined = {v["name"] for v in dash["templating"]["list"]}
        cells, overlaps = {}, set()
        for p in panels(dash):
            g = p.get("gridPos", {})
            for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
                for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                    if (x, y) in cells:
                        overlaps.add(f"{name}: {p.get('title')!r} overlaps {cells[x, y]!r}")
                    cells[x, y] = p.get("title")
        problems += sorted(overlaps)
        for p in panels(dash):
            count += 1
            title = p.get("title")
            grid = p.get("gridPos", {})
            if not title:
                problems.append(f"{name}: panel {p.get('id')} has no title")
            if not all(k in grid for k in ("h", "w", "x", "y")) or grid["x"] + grid["w"] > 24:
                problems.append(f"{name}: {title!r}: bad gridPos {grid}")
            if p["type"] == "row":
                continue
            if p.get("datasource", {}).get("uid") != "${datasource}":
                problems.append(f"{name}: {title!r}: datasource {p.get('datasource')}")
            if not p.get("targets"):
                problems.append(f"{name}: {title!r}: no targets")
            for t in p.get("targets", []):
                if t.get("datasource", {}).get("uid") != "${datasource}" or not t.get("expr"):
                    problems.append(f"{name}: {title!r}: target {t.get('refId')} lacks an expr "
                                    "or the datasource")
                used = {a or b or c for a, b, c in VAR.findall(t.get("expr", ""))}
                for u in sorted(used - defined):
                    if not u.startswith("__"):
                        problems.append(f"{name}: {title!r}: ${u} is not a dashboard variable")
        for v in variables(dash):
            used = {a or b or c for a, b, c in VAR.findall(var_query(v))}
            for u in sorted(used - defined):
                problems.append(f"{name}: variable {v['name']}: ${u} is not defined")
    assert not problems, "\n  " + "\n  ".join(problems)
    print(f"  {len(DASHBOARDS)} dashboards, {count} panels and rows")


def test_prometheus_config():
    """promtool accepts the example, and its commented TLS/basic-auth variant uncommented."""
    r = sh("promtool", "check", "config", PROM_CONFIG, check=False)
    assert r.returncode == 0, f"promtool check config: {r.stdout}{r.stderr}"
    with open(PROM_CONFIG) as f:
        lines = f.read().splitlines()
    start = lines.index("  # BEGIN web-config variant")
    end = lines.index("  # END web-config variant")
    block = [re.sub(r"^(\s*)#", r"\1", line) for line in lines[start + 1:end]]
    assert any("basic_auth:" in b for b in block) and any("tls_config:" in b for b in block)
    with tempfile.TemporaryDirectory() as tmp:
        text = "\n".join(lines[:start] + block + lines[end + 1:]) + "\n"
        # the files it names must exist for promtool: stand-ins in a temporary directory
        for path in sorted(set(re.findall(r"(/etc/prometheus/[\w.-]+)", text))):
            stand_in = os.path.join(tmp, os.path.basename(path))
            with open(stand_in, "w") as f:
                f.write("secret\n")
            text = text.replace(path, stand_in)
        variant = os.path.join(tmp, "prometheus.yml")
        with open(variant, "w") as f:
            f.write(text)
        r = sh("promtool", "check", "config", variant, check=False)
        assert r.returncode == 0, f"the web-config variant: {r.stdout}{r.stderr}"
        assert "job_name: plumb-tls" in text


class Live:
    """The agent, Prometheus and the workloads, running until cleanup."""

    def __init__(self, cleanup):
        tag = os.getpid()
        base = tempfile.mkdtemp(prefix="plumb-dash-", dir="/tmp")
        cleanup.add(os.rmdir, base)
        self.mount = os.path.join(base, "ext4")
        mount_image(cleanup, self.mount, size_mb=96)
        self.disk = os.path.basename(os.path.realpath(
            sh("findmnt", "-n", "-o", "SOURCE", self.mount).stdout.strip()))
        self.cg, self.workload = make_cgroup(cleanup, f"plumb-dash-{tag}/work")
        self.hosts = Hosts(cleanup, 3)
        # an address of the agent's own namespace for plumb_host_address (an emulated
        # guest's root namespace has only lo): a veth end of the test's own
        dev = f"pdash{tag % 100000}"
        sh("ip", "link", "add", dev, "type", "veth", "peer", "name", dev + "p")
        cleanup.add(lambda: sh("ip", "link", "del", dev, check=False))
        sh("ip", "addr", "add", "198.18.77.1/32", "dev", dev)
        sh("ip", "link", "set", dev, "up")
        # every netstack interval judged, and every read, write and fsync timed: with the
        # default 1 in 16 an emulated guest's few fsyncs a second (ext4 on a loop device) left
        # the fsync latency panel without data once in a 6.12 guest (make test-kernels,
        # 2026-12-07): its histogram was there but did not grow over the test's range
        self.agent = Agent(cleanup, "--netstack-window", "1", "--io-latency-sample", "1")
        self.instance = f"127.0.0.1:{self.agent.port}"
        self.prom = Prometheus(cleanup, self.agent.port, interval=SCRAPE)
        self.prom.wait_scrapes(2)
        self.started = time.time()
        py = sys.executable
        self.procs = [spawn(cleanup, self.cg, [py, "-c", IO_WORK, self.mount]),
                      spawn(cleanup, self.cg, [py, "-c", WAIT_WORK])]
        self.port = free_port()
        self.unix_path = os.path.join(base, "server.sock")
        cleanup.add(lambda: os.path.exists(self.unix_path) and os.unlink(self.unix_path))
        self.procs.append(spawn(cleanup, self.cg, [py, "-c", TCP_SERVER, str(self.port),
                                                   self.unix_path]))
        # the client starts once the server listens on both (seconds in an emulated guest)
        deadline = time.time() + 60
        while not os.path.exists(self.unix_path) or \
                socket.socket().connect_ex(("127.0.0.1", self.port)):
            assert time.time() < deadline, "the test's TCP server never listened"
            time.sleep(0.2)
        self.procs.append(spawn(cleanup, self.cg, [py, "-c", TCP_CLIENT, str(self.port),
                                                   self.unix_path]))
        # the netstack module's traffic: UDP h1 -> h2 and TCP h3 -> h2, through the bridge
        h = self.hosts
        udp, tcp = free_port(), free_port()
        self.iperf_port = tcp
        for p in (udp, tcp):
            self.procs.append(self.netns_proc(cleanup, 1, "iperf3", "-s", "-p", str(p)))
        time.sleep(0.5)
        self.procs.append(self.netns_proc(cleanup, 0, "iperf3", "-c", h.addrs[1], "-p",
                                          str(udp), "-t", "600", "-u", "-b", UDP_RATE,
                                          "-l", "1000"))
        self.procs.append(self.netns_proc(cleanup, 2, "iperf3", "-c", h.addrs[1], "-p",
                                          str(tcp), "-t", "600", "-b", "20M"))

    def netns_proc(self, cleanup, i, *cmd):
        p = self.hosts.run(i, self.cg, *cmd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        cleanup.add(stop, p)
        return p

    def check_running(self):
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"workload {p.args[:3]} exited with {p.returncode}: "
                                   f"{p.stderr.read().decode()[-500:]}")

    def bottleneck(self):
        """Lets the netstack module learn its baselines (10 intervals of samples), then
        rate-limits h1's eth0 and waits until Prometheus holds the agent's verdict."""
        time.sleep(max(0.0, self.started + 14 - time.time()))
        self.check_running()
        sh("ip", "netns", "exec", self.hosts.names[0], "tc", "qdisc", "add", "dev", "eth0",
           "root", "tbf", "rate", TBF_RATE, "burst", "10kb", "limit", "30000")
        t0 = time.time()
        while time.time() < t0 + (30 if EMULATED else 20):
            at = time.time()
            # the sample's own time, not the query's: a scrape that began before `at` and
            # ends after it adds a sample stamped before `at`, and a later query at `at` finds
            # that one instead (the 6.1 guest: named here, 'no series' at the same instant).
            # timestamp() of a selector, not of `x == 1`: Prometheus 2.42 gives the
            # evaluation time for any other expression (seen: the 6.1 guest at 3790cd4
            # named the qdisc, then found every series 0 at that instant)
            got = self.prom.query("timestamp(plumb_netstack_bottleneck) and "
                                  "plumb_netstack_bottleneck == 1", at=at)
            if got:
                m = got[0]["metric"]
                self.named, self.named_at = True, float(got[0]["value"][1])
                print(f"  bottleneck named {time.time() - t0:.1f} s after the TBF: "
                      f"{m['component']} on {m['device']} in {m['netns']}")
                return
            time.sleep(0.5)
        self.named = False
        print("  no bottleneck named in time after the TBF (the bottleneck panels will say)")

    def settle(self):
        """Enough scrapes of every workload for rates over $__rate_interval and the range."""
        time.sleep(max(0.0, self.started + (30 if EMULATED else 22) - time.time()))
        time.sleep(2 * SCRAPE)
        self.check_running()


def node_graph_shape(title, answers):
    """Grafana's node graph reads the frames of refId nodes and edges by field name: nodes need
    id (and title), edges id, source and target, and every edge's ends must be nodes (the
    panel fails to draw otherwise). The value becomes mainStat (calculateField)."""
    nodes, edges = answers.get("nodes", []), answers.get("edges", [])
    ids = {r["metric"].get("id") for r in nodes}
    problems = [f"node {r['metric']} lacks {k}" for r in nodes for k in ("id", "title")
                if not r["metric"].get(k)]
    problems += [f"edge {r['metric']} lacks {k}" for r in edges for k in ("id", "source", "target")
                 if not r["metric"].get(k)]
    problems += [f"edge {r['metric'].get('id')}: {end} {r['metric'].get(end)!r} is not a node"
                 for r in edges for end in ("source", "target") if r["metric"].get(end) not in ids]
    if len({r["metric"].get("id") for r in edges}) != len(edges):
        problems.append("edge ids are not unique")
    if len(ids) != len(nodes):
        problems.append("node ids are not unique")
    return [f"panel {title!r}: {x}" for x in problems]


def node_graph_edges(title, answers, live):
    """The test's own conversations are edges of the graph, with bytes on them."""
    def proc(comm):
        return f"{live.instance}|{live.workload}|{comm}"
    tcp, unix = f"127.0.0.1:{live.port}", f"unix:{live.unix_path}"
    want = [(proc("dash-client"), tcp), ("127.0.0.1", proc("dash-server")),
            (proc("dash-client"), unix), (unix, proc("dash-server")),
            (proc("iperf3"), f"{live.hosts.addrs[1]}:{live.iperf_port}")]
    got = {(r["metric"].get("source"), r["metric"].get("target")): float(r["value"][1])
           for r in answers.get("edges", [])}
    return [f"panel {title!r}: no edge {s} -> {t} with bytes (edges: {sorted(got)})"
            for s, t in want if not got.get((s, t))]


def last_good_scrape(live):
    """The instant every query of a dashboard is evaluated at: the start of a successful scrape
    of the agent with another within $__rate_interval before it, as a rate needs. In a loaded
    emulated guest a scrape can outlast the timeout (the 6.1 CI guest failed 3 of 12 and 5 of
    20, at 5 s), and a failed scrape writes stale markers for every series at its own start:
    an instant query at or after that start finds no series, and a rate window holding
    failed scrapes may hold fewer than two samples. A scrape's samples are stamped with its
    start, so at such an instant later scrapes change nothing. Waits up to eight scrapes for
    one; then the last successful scrape (the failures will show the scrapes)."""
    deadline = time.time() + 8 * SCRAPE
    sel = f'up{{instance="{live.instance}"}}'
    window = 4 * SCRAPE
    while True:
        got = live.prom.query(f"{sel}[{12 * SCRAPE}s]")
        samples = [(float(t), v == "1") for t, v in got[0]["values"]] if got else []
        good = [t for t, ok in samples if ok]
        for t in reversed(good):
            if sum(ok for u, ok in samples if t - window < u <= t) >= 2:
                return t
        if time.time() > deadline:
            return good[-1] if good else time.time()
        time.sleep(SCRAPE / 2)


def check_dashboard(live, name, values, what):
    """Runs every expression and variable query of dashboard name with values for its
    variables; raises naming each that failed."""
    dash = load(name)
    at = last_good_scrape(live)
    range_s = int(at - live.started)
    now = f"{at:.3f}"
    failures, zero_ok, n = [], [], 0
    for v in variables(dash):
        n += 1
        q = substitute(var_query(v), values, range_s)
        m = re.fullmatch(r"label_values\((?:(.*),\s*)?(\w+)\)", q.strip(), re.S)
        if not m:
            failures.append(f"variable {v['name']}: not label_values(): {q}")
            continue
        params = {"start": f"{live.started - 60:.3f}", "end": now}
        if m.group(1):
            params["match[]"] = m.group(1)
        data, err = api(live.prom, f"label/{m.group(2)}/values", **params)
        if err or not data:
            failures.append(f"variable {v['name']}: {q}: {err or 'no values'}")
            continue
        # the values the test picks must be among those the variable offers
        picked = values.get(v["name"], ".*")
        picked = [] if picked in (".*", ".+") else picked.strip("()").split("|")
        for value in picked:
            if value not in data:
                failures.append(f"variable {v['name']}: {q}: {value!r} not among {data}")
    for p in panels(dash):
        answers = {}
        for t in p.get("targets", []):
            n += 1
            expr = substitute(t["expr"], values, range_s)
            where = f"panel {p['title']!r} ({t['refId']}): {expr}"
            # the bottleneck panels at the instant Prometheus first held the verdict: a TBF
            # held long becomes the baseline, and a slow guest's later checks (the 6.1 guest
            # in CI: 'All' passed, the workload's, 16 s later, found the verdict gone) would
            # ask after it ended
            bn = live.named and "plumb_netstack_bottleneck" in expr
            data, err = api(live.prom, "query", query=expr,
                            time=f"{live.named_at:.3f}" if bn else now)
            if err:
                failures.append(f"{where}\n    error: {err}")
                continue
            result = data["result"] if data["resultType"] == "vector" else [
                {"value": data["result"]}]
            finite = [float(r["value"][1]) for r in result
                      if math.isfinite(float(r["value"][1]))]
            if VERBOSE:
                print(f"    {len(result)} series, max {max(finite, default=None)}: {where}")
                for r in result[:VERBOSE]:
                    print(f"      {r.get('metric')} {r['value'][1]}")
            answers[t["refId"]] = result
            if EMULATED and not live.named and "plumb_netstack_bottleneck" in expr:
                # the 6.1 guest under this test's whole load named no bottleneck in 90 s (the test
                # now waits 30 s there: guest time is close to make test-kernels' 30 min limit);
                # (test_netstack's scenario (a) names it there 9 times in 10, alone); the
                # host run checks these panels. Said, not counted as checked.
                print(f"    NOT CHECKED in this guest (no bottleneck named): {where}")
                continue
            if not result:
                failures.append(f"{where}\n    no series")
            elif not finite:
                failures.append(f"{where}\n    {len(result)} series, none with a finite value")
            elif not any(finite):
                if p["title"] in ZERO_IS_DATA:
                    zero_ok.append(p["title"])
                else:
                    failures.append(f"{where}\n    {len(result)} series, all 0")
        if p["type"] == "nodeGraph":
            failures += node_graph_shape(p["title"], answers)
            if values.get("workload") == live.workload:
                failures += node_graph_edges(p["title"], answers, live)
    print(f"  {name} ({what}): {n} queries, {len(failures)} failed"
          + (f"; all 0, accepted, in {sorted(set(zero_ok))}" if zero_ok else ""))
    if failures:
        failures.insert(0, scrape_health(live, range_s))
    assert not failures, f"{name} ({what}):\n  " + "\n  ".join(failures)


def scrape_health(live, range_s):
    """Prometheus's scrapes of the agent over the test: a panel without data may be the agent's
    or the scrapes' (a scrape slower than the timeout in a loaded guest keeps nothing)."""
    parts = []
    for label, expr in (("scrapes", f"count_over_time(up[{range_s}s])"),
                        ("failed", f"count_over_time((up == 0)[{range_s}s:])"),
                        ("slowest s", f"max_over_time(scrape_duration_seconds[{range_s}s])"),
                        ("agent's slowest s",
                         f"max_over_time(plumb_scrape_duration_seconds[{range_s}s])")):
        data, err = api(live.prom, "query", query=expr)
        parts.append(f"{label} {err or ' '.join(r['value'][1] for r in data['result']) or '-'}")
    data, err = api(live.prom, "query", query="max by (module) (max_over_time("
                    f"plumb_module_scrape_seconds[{range_s}s]))")
    parts.append("slowest module parts s " + (err or ", ".join(
        f"{r['metric'].get('module')} {float(r['value'][1]):.3f}" for r in data["result"])))
    targets, err = api(live.prom, "targets")
    for t in (targets or {}).get("activeTargets", []):
        parts.append(f"target {t['health']}, last error {t['lastError'] or '-'}")
    return "Prometheus: " + "; ".join(parts) + (f"; targets: {err}" if err else "")


def main():
    require_root()
    runner = Runner()
    runner.run("dashboards: JSON, panels, datasource and variables", test_static)
    runner.run("prometheus.yml: promtool check config, TLS variant too", test_prometheus_config)
    cleanup = Cleanup()
    try:
        live = None

        def start():
            nonlocal live
            live = Live(cleanup)
            live.bottleneck()
            live.settle()
            print("  " + scrape_health(live, int(time.time() - live.started)))
        runner.run("dashboards: agent, Prometheus and workloads running", start)
        if live:
            mine = {"instance": live.instance, "workload": live.workload,
                    "mount": live.mount, "protocol": "(tcp|unix)"}
            # netstack first: its bottleneck panels show the verdict the TBF brought, which a
            # long TBF becomes the baseline of; a 6.12 guest checking it after io's and waits'
            # (a minute and more there) found the bottleneck named, then no longer flagged
            for name in sorted(DASHBOARDS, key=lambda d: d != "plumb-netstack.json"):
                every = {v["name"]: v.get("allValue") or ".*" for v in variables(load(name))}
                picked = dict(every, **{k: v for k, v in mine.items() if k in every})
                if name == "plumb-waits.json":
                    picked["device"] = live.disk
                runner.run(f"dashboards: {name}, every query returns data, All selected",
                           check_dashboard, live, name, every, "All")
                runner.run_host("the variables' filtering is PromQL, the same on every "
                                "kernel; 'All selected' checks each query's data here",
                                f"dashboards: {name}, every query returns data, the test's "
                                "workload selected", check_dashboard, live, name, picked,
                                ", ".join(f"{k}={v}" for k, v in picked.items() if v != ".*"))
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
