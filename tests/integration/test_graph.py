#!/usr/bin/env python3
"""The communication graph: each agent's /api/v1/graph, and the graph across hosts.

Three "hosts" are network namespaces on one bridge (lib.Hosts), each with its own agent scoped
to it (--netns), all scraped by one real Prometheus. Clients on hosts 1 and 3 send known byte
counts to a server on host 2. Ground truth is what the test's workloads sent and received.
"""
# plumb-module: flow

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (PLUMB, Agent, Cleanup, Hosts, Prometheus, Runner, free_port,  # noqa: E402
                 make_cgroup, require_root, settle, value)

FLOWWORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flowwork.py")
PORT = 8080
REPLY = 65432
# (host index, connections, bytes sent per connection)
CLIENTS = ((0, 4, 3_000_000), (2, 7, 123_457))


def graph_of(agent):
    status, _, body = agent.get("/api/v1/graph")
    assert status == 200, f"/api/v1/graph answered {status}: {body}"
    return json.loads(body)


def ends_of(doc, pid):
    return [e for e in doc["ends"] if e["pid"] == pid]


def plumb_graph(*args):
    r = subprocess.run([PLUMB, "graph", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"plumb graph {' '.join(args)}: exit {r.returncode}: {r.stderr}"
    return r.stdout


class Topology:
    def __init__(self, cleanup):
        self.hosts = Hosts(cleanup, 3)
        self.agents = [Agent(cleanup, "--modules", "flow", "--netns", name, "--host",
                             f"host{i + 1}", wait_for_module=False)
                       for i, name in enumerate(self.hosts.names)]
        for a in self.agents:
            settle(a, lambda m: value(m, "plumb_module_up", module="flow") == 1, timeout=15)
            assert "module flow: up" in a.output(), a.output()
        tag = f"plumb-it-{os.getpid()}"
        self.cg = [make_cgroup(cleanup, f"{tag}/graph-h{i + 1}") for i in range(3)]
        self.prom = Prometheus(cleanup, [a.port for a in self.agents], interval=1)
        self.server = self.hosts.run(1, self.cg[1][0], sys.executable, FLOWWORK, "-", "server",
                                     self.hosts.addrs[1], str(PORT), str(REPLY),
                                     stdout=subprocess.PIPE, text=True)
        cleanup.add(self.kill, self.server)
        line = self.server.stdout.readline().strip()
        assert line == "listening", f"server said {line!r}"
        self.clients = {}
        for host, n, size in CLIENTS:
            p = self.hosts.run(host, self.cg[host][0], sys.executable, FLOWWORK, "-", "client",
                               self.hosts.addrs[1], str(PORT), str(n), str(size),
                               stdout=subprocess.PIPE, text=True)
            cleanup.add(self.kill, p)
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0 and out.strip() == "done", f"client on host {host}: {out}"
            self.clients[host] = p.pid

    @staticmethod
    def kill(p):
        if p.poll() is None:
            p.kill()
            p.wait()


def check_agent_ends(t, docs):
    for i, doc in enumerate(docs):
        assert doc["host"] == f"host{i + 1}", doc["host"]
        assert doc["addresses"] == [t.hosts.addrs[i]], doc["addresses"]
        for e in doc["ends"]:  # the test's own and Prometheus's connections are elsewhere
            assert e["local_addr"] == t.hosts.addrs[i], f"host{i + 1} reports {e}"
    for host, n, size in CLIENTS:
        want = {"pid": t.clients[host], "role": "client", "protocol": "tcp",
                "local_addr": t.hosts.addrs[host], "peer_addr": t.hosts.addrs[1], "port": PORT,
                "tx_bytes": n * size, "rx_bytes": n * REPLY, "connections": n, "peer_pid": 0}
        got = ends_of(docs[host], t.clients[host])
        assert got == [want], f"host{host + 1} client: expected [{want}], got {got}"
        procs = [p for p in docs[host]["processes"] if p["pid"] == t.clients[host]]
        assert len(procs) == 1 and procs[0]["comm"] == "python3" and \
            procs[0]["cgroup"] == t.cg[host][1], procs
        want_s = {"pid": t.server.pid, "role": "server", "protocol": "tcp",
                  "local_addr": t.hosts.addrs[1], "peer_addr": t.hosts.addrs[host],
                  "port": PORT, "tx_bytes": n * REPLY, "rx_bytes": n * size,
                  "connections": n, "peer_pid": 0}
        got = [e for e in ends_of(docs[1], t.server.pid)
               if e["peer_addr"] == t.hosts.addrs[host]]
        assert got == [want_s], f"server end for host{host + 1}: expected {want_s}, got {got}"


def test_agent_ends(t):
    """Each agent reports its own host's ends, exact, and nothing of the other namespaces.

    A connection's end is made when its track is retired: 1 s after close when no local peer
    pairs it, so each agent reaches its final counts at its own time; wait for all of them.
    """
    deadline = time.time() + 15
    while True:
        docs = [graph_of(a) for a in t.agents]
        try:
            check_agent_ends(t, docs)
            return
        except AssertionError:
            if time.time() > deadline:
                raise
        time.sleep(0.5)


def edges_by(doc, key):
    return {key(e): e for e in doc["edges"]}


def check_edges(doc, source_of, target, exact):
    """The graph holds one edge per client with its bytes; exact, or within 0.5%."""
    edges = edges_by(doc, lambda e: (e["source"], e["target"], e["port"]))
    for host, n, size in CLIENTS:
        key = (source_of(host), target, PORT)
        assert key in edges, f"no edge {key} in {sorted(edges)}"
        e = edges[key]
        for field, want in (("tx_bytes", n * size), ("rx_bytes", n * REPLY)):
            off = abs(e[field] - want) / want
            assert (e[field] == want) if exact else off <= 0.005, \
                f"{key} {field}: {e[field]}, sent {want} ({off:.4%} off)"
        assert e["connections"] == n, f"{key}: {e['connections']} connections, expected {n}"


def test_graph_from_agents(t):
    """plumb graph --from the three agents: process edges client -> server, exact."""
    urls = ",".join(f"http://127.0.0.1:{a.port}" for a in t.agents)
    doc = json.loads(plumb_graph("--from", urls, "--format", "json"))
    assert doc["projection"] == "process", doc["projection"]
    check_edges(doc, lambda h: f"host{h + 1}/{t.clients[h]}", f"host2/{t.server.pid}", True)
    hosts = json.loads(plumb_graph("--from", urls, "--format", "json", "--projection", "host"))
    check_edges(hosts, lambda h: f"host{h + 1}", "host2", True)


def test_graph_from_prometheus(t):
    """plumb graph --prometheus: the same edges from the Prometheus server, within 0.5%."""
    want = sum(n * size for _, n, size in CLIENTS)
    deadline = time.time() + 30
    while True:  # until Prometheus has scraped the final counts of both sides
        got = t.prom.query('sum(plumb_flow_bytes_total{role="client",direction="tx"})')
        srv = t.prom.query('sum(plumb_flow_bytes_total{role="server",direction="rx"})')
        if got and srv and float(got[0]["value"][1]) == want == float(srv[0]["value"][1]):
            break
        assert time.time() < deadline, f"Prometheus has {got} {srv}, expected {want}"
        time.sleep(0.5)
    url = f"http://127.0.0.1:{t.prom.port}"
    doc = json.loads(plumb_graph("--prometheus", url, "--window", "5m", "--format", "json"))
    comm = "python3"
    check_edges(doc, lambda h: f"host{h + 1}/{t.cg[h][1]}/{comm}",
                f"host2/{t.cg[1][1]}/{comm}", False)
    hosts = json.loads(plumb_graph("--prometheus", url, "--format", "json",
                                   "--projection", "host"))
    check_edges(hosts, lambda h: f"host{h + 1}", "host2", False)


def test_bad_netns():
    """--netns naming no namespace, or a file that is not one: one line, exit 1."""
    for arg, want in (("plumb-no-such-ns", "cannot open /run/netns/plumb-no-such-ns"),
                      ("/etc/hostname", "is not a network namespace")):
        r = subprocess.run([PLUMB, "agent", "--modules", "flow", "--netns", arg,
                            "--listen", f"127.0.0.1:{free_port()}"], capture_output=True, text=True,
                           timeout=30)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and want in lines[0], \
            f"--netns {arg}: exit {r.returncode}, stderr {r.stderr!r}"


def main():
    require_root()
    runner = Runner()
    cleanup = Cleanup()
    try:
        runner.run("graph: --netns with no such namespace", test_bad_netns)
        t = Topology(cleanup)
        runner.run("graph: each agent's ends (--netns), exact", test_agent_ends, t)
        runner.run("graph: plumb graph --from three agents", test_graph_from_agents, t)
        runner.run("graph: plumb graph --prometheus, across hosts", test_graph_from_prometheus,
                   t)
    except Exception as e:
        runner.failed += 1
        print(f"FAIL setup: {e}")
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
