#!/usr/bin/env python3
"""The netstack module: per-component latency of sampled packets, by device and netns.

Topology (lib.Hosts): two "pods" (network namespaces h1, h2) with a veth each into a bridge
in a "node" namespace; traffic never leaves the machine. Ground truth: a TBF qdisc with a
known rate and queue limit, saturated by a UDP sender, delays each packet it admits by the
bytes ahead of it divided by the rate.
"""
# plumb-module: netstack

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (PLUMB, Agent, Cleanup, Hosts, Runner, free_port, require_root,  # noqa: E402
                 select, settle, sh)

RATE = 1_000_000  # bytes/s: tbf rate 8mbit
LIMIT = 60_000  # bytes
PAYLOAD = 1400
FRAME = PAYLOAD + 8 + 20 + 14  # UDP, IPv4, Ethernet: what the qdisc counts


def iperf(hosts, cleanup, client_args, seconds, during=None):
    """iperf3 from h1 to h2 for seconds; during() is called while it runs (1.5 s in)."""
    port = free_port()
    srv = subprocess.Popen(["ip", "netns", "exec", hosts.names[1], "iperf3", "-s", "-1", "-p",
                            str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cleanup.add(lambda: srv.poll() is None and (srv.kill(), srv.wait()))
    time.sleep(0.5)
    cli = subprocess.Popen(["ip", "netns", "exec", hosts.names[0], "iperf3", "-c",
                            hosts.addrs[1], "-p", str(port), "-t", str(seconds), *client_args],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cleanup.add(lambda: cli.poll() is None and (cli.kill(), cli.wait()))
    if during:
        time.sleep(1.5)
        during()
    out, _ = cli.communicate(timeout=seconds + 30)
    assert cli.returncode == 0, f"iperf3 {client_args}: {out}"
    srv.wait(10)


def test_path(agent, hosts, cleanup):
    """TCP from h1 to h2: every component of the path, on its device and namespace."""
    iperf(hosts, cleanup, ["-b", "50M"], 2)
    h1, h2, sw = hosts.names[0], hosts.names[1], hosts.switch
    want = [("qdisc", "eth0", h1), ("crossing", "eth0", h1), ("backlog", "port1", sw),
            ("forward", "port1", sw), ("qdisc", "port2", sw), ("crossing", "port2", sw),
            ("backlog", "eth0", h2), ("protocol", "eth0", h2), ("socket", "eth0", h2)]

    def seen(m):
        return all(select(m, "plumb_netstack_latency_seconds_count", component=c, device=d,
                          netns=n) for c, d, n in want)
    m = settle(agent, seen, timeout=5)
    missing = [w for w in want if not select(m, "plumb_netstack_latency_seconds_count",
                                             component=w[0], device=w[1], netns=w[2])]
    assert not missing, f"components not seen: {missing}; seen: " + str(sorted(
        (dict(k)["component"], dict(k)["device"], dict(k)["netns"]) for k in
        select(m, "plumb_netstack_latency_seconds_count")))


def test_tbf(agent, hosts, cleanup):
    """A TBF queue saturated by UDP: the qdisc time is the queue's bytes over the rate. The
    window is the saturated middle of the run: from 1.5 s in (the queue filled in 60 ms) to
    1.5 s before the end."""
    h1 = hosts.names[0]
    sh("ip", "netns", "exec", h1, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
       "8mbit", "burst", "5kb", "limit", str(LIMIT))
    cleanup.add(lambda: sh("ip", "netns", "exec", h1, "tc", "qdisc", "del", "dev", "eth0",
                           "root", check=False))
    snap = []
    qdisc = dict(component="qdisc", device="eth0", netns=h1)

    def window():
        for _ in range(2):
            m = agent.metrics()
            snap.append((sum(select(m, "plumb_netstack_latency_seconds_count", **qdisc).values()),
                         sum(select(m, "plumb_netstack_latency_seconds_sum", **qdisc).values())))
            if len(snap) == 1:
                time.sleep(3)
    iperf(hosts, cleanup, ["-u", "-b", "16M", "-l", str(PAYLOAD)], 6, during=window)
    n, s = snap[1][0] - snap[0][0], snap[1][1] - snap[0][1]
    assert n > 1000, f"{n} packets sampled at the qdisc"
    mean = s / n
    # Admitted into a full queue, a packet has between LIMIT - 2 FRAME and LIMIT - FRAME bytes
    # ahead of it; the head of the queue has paid for half of itself on average, and the
    # packet leaves when its own bytes are paid for.
    lo, hi = (LIMIT - 1.5 * FRAME) / RATE, (LIMIT - 0.5 * FRAME) / RATE
    print(f"  qdisc: {n} packets, mean {mean * 1e3:.2f} ms (theory {lo * 1e3:.2f}-"
          f"{hi * 1e3:.2f} ms)")
    assert 0.98 * lo <= mean <= 1.02 * hi, \
        f"mean qdisc time {mean * 1e3:.2f} ms, theory {lo * 1e3:.2f}-{hi * 1e3:.2f} ms"


def test_view(hosts, cleanup):
    """plumb netstack --json: a table per interval with the path's components; --record
    writes the baselines, --baseline reads them back (the series ready at once)."""
    rec = f"/tmp/plumb-netstack-{os.getpid()}.json"
    cleanup.add(lambda: os.path.exists(rec) and os.unlink(rec))
    h2 = hosts.names[1]
    for args in (["--record", rec], ["--baseline", rec]):
        v = subprocess.Popen([PLUMB, "netstack", "--interval", "500ms", "--count", "6", "--json",
                              "--netns", h2, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        cleanup.add(lambda: v.poll() is None and (v.kill(), v.wait()))
        iperf(hosts, cleanup, ["-b", "20M"], 2)
        out, err = v.communicate(timeout=60)
        assert v.returncode == 0, f"plumb netstack {args}: exit {v.returncode}: {err}"
        docs = [json.loads(line) for line in out.splitlines()]
        assert len(docs) == 6, f"{len(docs)} intervals: {out}"
        comps = {(c["component"], c["device"]) for d in docs for c in d["components"]}
        assert {("backlog", "eth0"), ("protocol", "eth0"), ("socket", "eth0")} <= comps, comps
        assert all(c["netns"] == h2 for d in docs for c in d["components"]), "--netns ignored"
        if args[0] == "--baseline":
            ready = [c for d in docs[:2] for c in d["components"] if c["samples_per_s"] > 0]
            assert ready and all(c["baseline_ready"] for c in ready), \
                f"recorded baselines not applied: {ready}"
    with open(rec) as f:
        names = {(x["component"], x["device"], x["netns"]) for x in json.load(f)["series"]}
    assert ("socket", "eth0", h2) in names, names


def test_view_errors():
    """Bad usage: exit 2 and one line; a file that is no recording: exit 1."""
    r = subprocess.run([PLUMB, "netstack", "--sample", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "--sample: '0' is not in 1..65536" in r.stderr, r
    r = subprocess.run([PLUMB, "netstack", "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2, r
    r = subprocess.run([PLUMB, "netstack", "--baseline", "/etc/hostname", "--count", "1"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip() == \
        "plumb netstack: --baseline /etc/hostname: not a recording of plumb netstack --record", r


def main():
    require_root()
    runner = Runner()
    cleanup = Cleanup()
    try:
        hosts = Hosts(cleanup, 2)
        agent = Agent(cleanup, "--modules", "netstack", wait_for_module=False)
        settle(agent, lambda m: select(m, "plumb_module_up", module="netstack"), timeout=10)
        assert "module netstack: up" in agent.output(), agent.output()
        runner.run("netstack: every component of a pod-to-pod TCP path", test_path, agent,
                   hosts, cleanup)
        runner.run("netstack: plumb netstack --json, --record and --baseline", test_view,
                   hosts, cleanup)
        runner.run("netstack: plumb netstack usage errors", test_view_errors)
        runner.run("netstack: qdisc time under TBF is the queue over the rate", test_tbf,
                   agent, hosts, cleanup)
    except Exception as e:
        runner.failed += 1
        print(f"FAIL setup: {e}")
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
