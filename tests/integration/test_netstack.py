#!/usr/bin/env python3
"""The netstack module: per-component latency of sampled packets, by device and netns.

Topology (lib.Hosts): two "pods" (network namespaces h1, h2) with a veth each into a bridge
in a "node" namespace, and a second node reached over a veth "wire" with one pod of its own
(Hosts.wire_node); traffic never leaves the machine. Ground truth: a TBF qdisc with a known
rate and queue limit, saturated by a UDP sender, delays each packet it admits by the bytes
ahead of it divided by the rate; bpftrace's timestamps of each message's send and copy give
its end-to-end time.
"""
# plumb-module: netstack

import collections
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (EMULATED, PLUMB, Agent, Cleanup, Hosts, Runner, Void,  # noqa: E402
                 assert_privileges_dropped, attempts, free_port, make_cgroup,
                 netstack_windows, require_root, select, settle, sh, steal_seconds, value)

# bytes/s: the tbf rate, 8mbit, and the UDP flow that saturates it. Emulated guests get a
# quarter: with a second guest beside it a guest's sender could not keep the queue full at
# 16 Mbit/s (the mean fell 3-9% under the theory).
RATE, TBF_OFFER = (250_000, "4M") if EMULATED else (1_000_000, "16M")
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
    if send_component():
        want.append(("send", "eth0", h1))  # 6.18+: the sender's TCP/IP and write queue
    else:
        print("  (no send component: this kernel lacks tcp_sendmsg_locked, 6.18)")

    def seen(m):
        return all(select(m, "plumb_netstack_latency_seconds_count", component=c, device=d,
                          netns=n) for c, d, n in want)
    m = settle(agent, seen, timeout=5)
    missing = [w for w in want if not select(m, "plumb_netstack_latency_seconds_count",
                                             component=w[0], device=w[1], netns=w[2])]
    assert not missing, f"components not seen: {missing}; seen: " + str(sorted(
        (dict(k)["component"], dict(k)["device"], dict(k)["netns"]) for k in
        select(m, "plumb_netstack_latency_seconds_count")))
    # the per-packet and per-socket maps' fill is exported (LRU: at capacity they evict)
    for name, cap in (("ns_pkts", 65536), ("ns_sends", 16384), ("ns_recvs", 16384),
                      ("ns_hists", 4096)):
        got = value(m, "plumb_map_capacity", module="netstack", map=name)
        entries = value(m, "plumb_map_entries", module="netstack", map=name)
        assert got == cap and 0 <= entries <= cap, f"{name}: {entries} of {got}"


UDP_RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
s.recv(2048)
n = 1
s.settimeout(2)  # after the first: the sender starts late under emulation
try:
    while True:
        s.recv(2048)
        n += 1
except socket.timeout:
    print(n)
"""

UDP_SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(1000):
    s.sendto(b"x" * 500, (sys.argv[1], int(sys.argv[2])))
    time.sleep(0.001)
"""


def udp_receiver(hosts, cleanup, script):
    """script in h2 on a free port, once it prints "ready": (port, its process)."""
    port = free_port()
    rv = subprocess.Popen(["ip", "netns", "exec", hosts.names[1], sys.executable, "-c", script,
                           str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cleanup.add(lambda: rv.poll() is None and (rv.kill(), rv.wait()))
    assert rv.stdout.readline().strip() == "ready"
    return port, rv


def udp_deltas(m, before, lost0, keys):
    """Since before and lost0: the protocol and socket samples of keys, and each lost reason."""
    after = series_totals(m)
    protocol, socket = (after.get(k, (0, 0))[0] - before.get(k, (0, 0))[0] for k in keys)
    return protocol, socket, {r: value(m, "plumb_events_lost_total", module="netstack",
                                       reason=r) - v for r, v in lost0.items()}


def test_udp(agent, hosts, cleanup):
    """UDP from h1 to h2, 1,000 datagrams: on 6.6+ each received one passes protocol (to
    sk_data_ready) and socket (to the copy) on h2's eth0, like TCP."""
    h1, h2 = hosts.names[:2]
    port, rv = udp_receiver(hosts, cleanup, UDP_RECEIVER)
    keys = [("protocol", "eth0", h2), ("socket", "eth0", h2)]
    m = agent.metrics()
    before = series_totals(m)
    full0 = value(m, "plumb_events_lost_total", module="netstack", reason="socket_slots_full")
    sh("ip", "netns", "exec", h1, sys.executable, "-c", UDP_SENDER, hosts.addrs[1], str(port))
    got = int(rv.communicate(timeout=30)[0].strip())
    m = settle(agent, lambda m: False, timeout=2.5)
    after = series_totals(m)
    counts = [after.get(k, (0, 0))[0] - before.get(k, (0, 0))[0] for k in keys]
    # a reader more than the socket's 8 slots behind (the sends are 1 ms apart) leaves those
    # datagrams unmeasured, counted as socket_slots_full (a 6.12 guest beside another one
    # measured 995 of 1000; this count was not read then)
    full = value(m, "plumb_events_lost_total", module="netstack",
                 reason="socket_slots_full") - full0
    print(f"  {got} datagrams received; protocol {counts[0]:.0f}, socket {counts[1]:.0f} "
          f"+ {full:.0f} beyond the socket's slots")
    counts[1] += full
    assert got >= 900 and all(got <= c <= got + 20 for c in counts), \
        f"{got} datagrams received, protocol and socket (+ slots full) counted {counts}"


# Two threads read one socket as fast as they can until it has been quiet for 3 s; prints how
# many datagrams they read.
UDP_BUSY_READERS = """
import socket, sys, threading
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
# the first datagram without a timeout (a 6.12 guest's two senders started more than 3 s
# after the readers: 0 read), then 3 s without one ends the reading
s.recv(2048)
s.settimeout(3)
n = [1, 0]
def read(i):
    try:
        while True:
            s.recv(2048)
            n[i] += 1
    except socket.timeout:
        pass
threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sum(n), flush=True)
"""

# Sends argv[3] datagrams 20 us apart (a spin: sleep's granularity is coarser).
UDP_FAST_SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(int(sys.argv[3])):
    s.sendto(b"x" * 200, (sys.argv[1], int(sys.argv[2])))
    t = time.perf_counter() + 20e-6
    while time.perf_counter() < t:
        pass
"""


def test_udp_races(agent, hosts, cleanup):
    """Datagrams from two senders on two CPUs while two threads read the socket: every one
    read had its protocol stage, and each of those is measured at the socket or counted as
    beyond its slots, none left out. The arrivals and the reads change the socket's samples
    on two CPUs at once (before they took its lock, bpf/netstack.bpf.c's ns_udp, this host
    left 1-8 of 20,000 in neither); two CPUs' arrivals find each other's datagram at the
    tail, and a reader can take a datagram before its arrival's program runs (before
    udp_claim and udp_claim_read, 13-15 of 20,000 went without a protocol stage here; with
    the tail taken before each CPU's own datagram, a 6.12 guest lost one in 5,000 in CI,
    and its own datagram looked for within four of the tail, 1-4 in 20,000 in 9 of 16 runs
    of a guest: bpf/netstack.bpf.c, udp_claim_own)."""
    h1, h2 = hosts.names[:2]
    port, rv = udp_receiver(hosts, cleanup, UDP_BUSY_READERS)
    keys = [("protocol", "eth0", h2), ("socket", "eth0", h2)]
    reasons = ("socket_slots_full", "socket_storage", "socket_closed", "unmatched",
               "udp_unclaimed")
    m = agent.metrics()
    before = series_totals(m)
    lost0 = {r: value(m, "plumb_events_lost_total", module="netstack", reason=r)
             for r in reasons}
    sent = 5000 if EMULATED else 20000
    cpus = sorted(os.sched_getaffinity(0))[:2]
    senders = [subprocess.Popen(["ip", "netns", "exec", h1, "taskset", "-c", str(cpu),
                                 sys.executable, "-c", UDP_FAST_SENDER, hosts.addrs[1],
                                 str(port), str(sent // len(cpus))]) for cpu in cpus]
    for p in senders:
        cleanup.add(lambda p=p: p.poll() is None and (p.kill(), p.wait()))
    assert all(p.wait(timeout=120) == 0 for p in senders), "a sender failed"
    sent = sent // len(cpus) * len(cpus)
    got = int(rv.communicate(timeout=120)[0].strip())
    m = settle(agent, lambda m: False, timeout=2.5)  # the last interval's reads exported
    protocol, socket, lost = udp_deltas(m, before, lost0, keys)
    print(f"  {sent} sent from CPUs {cpus}, {got} read; protocol {protocol:.0f}, socket "
          f"{socket:.0f} + {lost['socket_slots_full']:.0f} beyond the slots, "
          f"{lost['socket_storage']:.0f} without storage, {lost['socket_closed']:.0f} closed "
          f"unread; {lost['unmatched']:.0f} unmatched (the host's, any packet), "
          f"{lost['udp_unclaimed']:.0f} unclaimed")
    # the reader reads every datagram queued (it stops 3 s after the last): those the
    # socket's buffer refused had no protocol stage, and none is left unread
    assert got >= sent // 2 and protocol == got, f"{got} read, protocol {protocol:.0f}"
    assert protocol == (socket + lost["socket_slots_full"] + lost["socket_storage"]
                        + lost["socket_closed"]), \
        f"protocol {protocol:.0f}: socket {socket:.0f} + {lost}"



def vxlan_rx(ns):
    """Packets the namespace's VXLAN device has decapsulated (and dropped after) so far."""
    out = json.loads(subprocess.run(["ip", "-n", ns, "-j", "-s", "link", "show", "plumbvx"],
                                    check=True, capture_output=True, text=True).stdout)
    rx = out[0]["stats64"]["rx"]
    return rx["packets"] + rx["dropped"] + rx["errors"]


def test_udp_tunnel(agent, hosts, cleanup):
    """1,000 datagrams from h1 to h2 through a VXLAN tunnel between them: each outer datagram
    is taken by the tunnel (its kernel socket's encap_rcv; no sk_data_ready), which goes on
    with the inner packet in the same skb, so its sample ends untaken at the socket's door:
    counted as udp_unclaimed, one for each packet the tunnels decapsulated (their rx counts,
    ARP's included), exactly; the inner datagrams, read by a socket in h2, are not."""
    (h1, h2), (a1, a2) = hosts.names[:2], hosts.addrs[:2]
    tunnels = Cleanup()  # the devices go at the test's end, the hosts stay for the others
    try:
        for ns, local, remote, inner in ((h1, a1, a2, "10.213.0.1/24"),
                                         (h2, a2, a1, "10.213.0.2/24")):
            tunnels.add(sh, "ip", "-n", ns, "link", "del", "plumbvx")
            sh("ip", "-n", ns, "link", "add", "plumbvx", "type", "vxlan", "id", "4242",
               "dstport", "4789", "local", local, "remote", remote, "dev", "eth0")
            # no IPv6 link-local address: no router solicitations or MLD through the tunnel
            sh("ip", "-n", ns, "link", "set", "plumbvx", "addrgenmode", "none")
            sh("ip", "-n", ns, "addr", "add", inner, "dev", "plumbvx")
            sh("ip", "-n", ns, "link", "set", "plumbvx", "up")
        port, rv = udp_receiver(hosts, tunnels, UDP_RECEIVER)
        m = agent.metrics()
        unclaimed0 = value(m, "plumb_events_lost_total", module="netstack",
                           reason="udp_unclaimed")
        rx0 = vxlan_rx(h1) + vxlan_rx(h2)
        sh("ip", "netns", "exec", h1, sys.executable, "-c", UDP_SENDER, "10.213.0.2",
           str(port))
        got = int(rv.communicate(timeout=30)[0].strip())
        rx = vxlan_rx(h1) + vxlan_rx(h2) - rx0
        m = settle(agent, lambda m: value(m, "plumb_events_lost_total", module="netstack",
                                          reason="udp_unclaimed") - unclaimed0 >= rx,
                   timeout=5)
        unclaimed = value(m, "plumb_events_lost_total", module="netstack",
                          reason="udp_unclaimed") - unclaimed0
        print(f"  1000 sent through the tunnel, {got} read; the tunnels decapsulated {rx}; "
              f"udp_unclaimed {unclaimed:.0f}")
        assert got == 1000 and rx >= 1000, f"{got} read, {rx} decapsulated"
        assert unclaimed == rx, f"udp_unclaimed {unclaimed:.0f}, decapsulated {rx}"
    finally:
        tunnels.run()



def test_udp_nat(agent, hosts, cleanup):
    """1,000 datagrams from h1 to a service address that the second node rewrites (DNAT, as
    a Kubernetes service's) to its pod: the node's forwarding of each, its headers rewritten,
    is measured on the wire it came in by (forward: the same packet, received last on that
    device, with what NAT leaves unchanged) and each reaches the pod's socket; none is
    counted as unclaimed (before, each one's entry was dropped at the rewrite, uncounted, and
    with udp_unclaimed counted so). A datagram NAT rewrites between its receive and its
    socket (a port redirect in the pod) is still lost, counted: docs/netstack.md section 2."""
    node1, node2, pod = hosts.switch, hosts.node2, hosts.names[-1]
    service, port = "10.77.9.9", free_port()
    nat = Cleanup()
    try:
        sh("ip", "-n", node1, "route", "add", f"{service}/32", "via", "10.77.255.2")
        nat.add(sh, "ip", "-n", node1, "route", "del", f"{service}/32")
        for ns, rule in ((node2, f"ip daddr {service} udp dport {port} "
                                 f"dnat to {hosts.addrs[-1]}"),):
            sh("ip", "netns", "exec", ns, "nft", "-f", "-", input=(
                "table ip plumbnat {\n chain pre {\n  type nat hook prerouting priority "
                f"-100;\n  {rule}\n }}\n}}\n"))
            nat.add(sh, "ip", "netns", "exec", ns, "nft", "delete", "table", "ip", "plumbnat")
        keys = [("forward", "wire0", node2), ("protocol", "eth0", pod)]
        for dest, dport in ((service, port),):
            rv = subprocess.Popen(["ip", "netns", "exec", pod, sys.executable, "-c",
                                   UDP_RECEIVER, str(port)], stdout=subprocess.PIPE, text=True)
            nat.add(lambda rv=rv: rv.poll() is None and (rv.kill(), rv.wait()))
            assert rv.stdout.readline().strip() == "ready"
            m = agent.metrics()
            before = series_totals(m)
            unclaimed0 = value(m, "plumb_events_lost_total", module="netstack",
                               reason="udp_unclaimed")
            sh("ip", "netns", "exec", hosts.names[0], sys.executable, "-c", UDP_SENDER, dest,
               str(dport))
            got = int(rv.communicate(timeout=30)[0].strip())
            m = settle(agent, lambda m: all(series_totals(m).get(k, (0, 0))[0]
                                            - before.get(k, (0, 0))[0] >= got for k in keys),
                       timeout=5)
            after = series_totals(m)
            forward, protocol = (after.get(k, (0, 0))[0] - before.get(k, (0, 0))[0]
                                 for k in keys)
            unclaimed = value(m, "plumb_events_lost_total", module="netstack",
                              reason="udp_unclaimed") - unclaimed0
            print(f"  1000 sent to {dest}:{dport}, rewritten to the pod's {port}: {got} read; "
                  f"forward on the second node's wire0 {forward:.0f}, protocol at the pod "
                  f"{protocol:.0f}, udp_unclaimed {unclaimed:.0f}")
            assert got == 1000 and forward == got and protocol == got and unclaimed == 0, \
                f"{got} read: forward {forward:.0f}, protocol {protocol:.0f}, " \
                f"unclaimed {unclaimed:.0f}"
    finally:
        nat.run()


# Waits for a line on stdin, then reads what is queued and prints how many datagrams.
UDP_LATE_READER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
if sys.stdin.readline().strip() == "close":
    s.close()
    print("closed", flush=True)
    sys.exit(0)
s.setblocking(False)
n = 0
try:
    while True:
        s.recv(2048)
        n += 1
except BlockingIOError:
    print(n, flush=True)
"""
QUEUED = 100


def send_queued(hosts, port):
    """QUEUED datagrams of 500 bytes from h1 to port in h2, at once."""
    sh("ip", "netns", "exec", hosts.names[0], sys.executable, "-c",
       f"import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
       f"for _ in range({QUEUED}):\n    s.sendto(b'x' * 500, ('{hosts.addrs[1]}', {port}))")


def test_udp_slots(agent, hosts, cleanup):
    """100 datagrams queued at a socket nobody reads yet: the first eight take the socket's
    slots and are measured when read; the other 92 are counted as socket_slots_full (9-64
    found the slots taken, 65-100 were more than 64 deep), none silently left out. They wait
    1.5 s: a socket's queue waits on its reader, and its samples are kept as long as the
    histograms reach (a 6.12 guest's waits of just over 1 s, then the limit, went uncounted
    in CI: 0 measured). Sends
    beyond their slots are counted apart (send_slots_full): with one reason for both, a
    host run of make test-kernels counted 96 (which sockets made the other 4 was not found;
    30 scrapes of an agent made none)."""
    h2 = hosts.names[1]
    port, rv = udp_receiver(hosts, cleanup, UDP_LATE_READER)
    socket_key = ("socket", "eth0", h2)
    m = agent.metrics()
    before = series_totals(m).get(socket_key, (0, 0))[0]
    full = value(m, "plumb_events_lost_total", module="netstack", reason="socket_slots_full")
    send_queued(hosts, port)
    time.sleep(1.5)
    rv.stdin.write("go\n")
    rv.stdin.flush()
    got = int(rv.communicate(timeout=30)[0].strip())
    # the histograms are exported as the last interval's read left them (once a second,
    # later in a busy guest: a 6.12 guest's scrape 1 s after the reads showed none of them)
    m = settle(agent, lambda m: series_totals(m).get(socket_key, (0, 0))[0] - before >= 8,
               timeout=10)
    measured = series_totals(m).get(socket_key, (0, 0))[0] - before
    lost = value(m, "plumb_events_lost_total", module="netstack",
                 reason="socket_slots_full") - full
    print(f"  {got} datagrams read; socket stage measured for {measured:.0f}, "
          f"socket_slots_full {lost:.0f}")
    assert got == QUEUED and measured == 8 and lost == QUEUED - 8, \
        f"{got} read, {measured:.0f} measured, {lost:.0f} counted socket_slots_full"


def test_udp_closed(agent, hosts, cleanup):
    """100 datagrams queued at a socket closed without reading them: the eight in the
    socket's slots are counted as socket_closed when it closes (its storage goes with it),
    the other 92 as socket_slots_full; none is measured at the socket, none left out."""
    h2 = hosts.names[1]
    port, rv = udp_receiver(hosts, cleanup, UDP_LATE_READER)
    keys = [("protocol", "eth0", h2), ("socket", "eth0", h2)]
    reasons = ("socket_slots_full", "socket_closed")
    m = agent.metrics()
    before = series_totals(m)
    lost0 = {r: value(m, "plumb_events_lost_total", module="netstack", reason=r)
             for r in reasons}
    send_queued(hosts, port)
    time.sleep(0.5)
    rv.stdin.write("close\n")
    rv.stdin.flush()
    assert rv.communicate(timeout=30)[0].strip() == "closed"
    # the histograms are exported as the last interval left them (once a second)
    m = settle(agent, lambda m: series_totals(m).get(keys[0], (0, 0))[0]
               - before.get(keys[0], (0, 0))[0] >= QUEUED and value(
                   m, "plumb_events_lost_total", module="netstack",
                   reason="socket_closed") - lost0["socket_closed"] >= 8, timeout=10)
    protocol, socket, lost = udp_deltas(m, before, lost0, keys)
    print(f"  {QUEUED} queued and closed unread: protocol {protocol:.0f}, socket "
          f"{socket:.0f}, socket_closed {lost['socket_closed']:.0f}, socket_slots_full "
          f"{lost['socket_slots_full']:.0f}")
    assert protocol == QUEUED and socket == 0, f"protocol {protocol:.0f}, socket {socket:.0f}"
    assert lost["socket_closed"] == 8 and lost["socket_slots_full"] == QUEUED - 8, lost


def test_tbf(agent, hosts, cleanup):
    """A TBF queue saturated by UDP: the qdisc time is the queue's bytes over the rate. The
    window is the saturated middle of the run: from 1.5 s in (the queue filled in 60 ms) to
    1.5 s before the end."""
    h1 = hosts.names[0]
    sh("ip", "netns", "exec", h1, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
       f"{RATE * 8}bit", "burst", "5kb", "limit", str(LIMIT))
    snap = []
    qdisc = dict(component="qdisc", device="eth0", netns=h1)
    try:
        tbf_window(agent, hosts, cleanup, snap, qdisc)
    finally:
        sh("ip", "netns", "exec", h1, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
    n, s = snap[1][0] - snap[0][0], snap[1][1] - snap[0][1]
    assert n > 0.5 * 3 * RATE / FRAME, f"{n} packets sampled at the qdisc in 3 s"
    mean = s / n
    # Admitted into a full queue, a packet has between LIMIT - 2 FRAME and LIMIT - FRAME bytes
    # ahead of it; the head of the queue has paid for half of itself on average, and the
    # packet leaves when its own bytes are paid for.
    lo, hi = (LIMIT - 1.5 * FRAME) / RATE, (LIMIT - 0.5 * FRAME) / RATE
    print(f"  qdisc: {n} packets, mean {mean * 1e3:.2f} ms (theory {lo * 1e3:.2f}-"
          f"{hi * 1e3:.2f} ms)")
    assert 0.98 * lo <= mean <= 1.02 * hi, \
        f"mean qdisc time {mean * 1e3:.2f} ms, theory {lo * 1e3:.2f}-{hi * 1e3:.2f} ms"


def tbf_window(agent, hosts, cleanup, snap, qdisc):
    """The qdisc series' count and sum at 1.5 s and 4.5 s into a 6 s saturating UDP flow."""

    def window():
        for _ in range(2):
            m = agent.metrics()
            snap.append((sum(select(m, "plumb_netstack_latency_seconds_count", **qdisc).values()),
                         sum(select(m, "plumb_netstack_latency_seconds_sum", **qdisc).values())))
            if len(snap) == 1:
                time.sleep(3)
    iperf(hosts, cleanup, ["-u", "-b", TBF_OFFER, "-l", str(PAYLOAD)], 6, during=window)


HELD = 90_000  # datagrams held in a qdisc: more than ns_pkts' 65,536 entries
HOLD_SENDER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 32, 1 << 30)  # SO_SNDBUFFORCE: each held skb is charged here
for _ in range(int(sys.argv[2])):
    s.sendto(b"x", (sys.argv[1], 9))
"""


# Sends argv[4] datagrams a second for argv[3] seconds (a sleep to each one's due time: no
# drift), saying "go" as it starts; then prints each send's CLOCK_MONOTONIC time (JSON).
UDP_PACED = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
print("go", flush=True)
rate, until, sent = float(sys.argv[4]), time.monotonic() + float(sys.argv[3]), []
start = time.monotonic()
while time.monotonic() < until:
    sent.append(time.monotonic())
    s.sendto(b"x" * 200, (sys.argv[1], int(sys.argv[2])))
    time.sleep(max(0.0, start + len(sent) / rate - time.monotonic()))
print(json.dumps(sent))
"""


# Reads in bursts: everything queued, every 0.3 s, until 2 s pass without a datagram; prints
# the bursts' spans (CLOCK_MONOTONIC, JSON), then how many it read.
UDP_BURSTY = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
s.setblocking(False)
n, last, bursts = 0, None, []
while last is None or time.monotonic() - last < 2:
    time.sleep(0.3)
    start = time.monotonic()
    try:
        while True:
            s.recv(2048)
            n += 1
            last = time.monotonic()
    except BlockingIOError:
        pass
    bursts.append((start, time.monotonic()))
print(json.dumps(bursts))
print(n)
"""


def netstack_links(ids):
    """How many links of the netstack programs with these ids are attached now; None when
    bpftool failed (a link it listed went before it read it)."""
    out = sh("bpftool", "-j", "link", "list", check=False)
    if out.returncode:
        return None
    return sum(1 for link in json.loads(out.stdout or "[]") if link.get("prog_id") in ids)


def test_windows(hosts, cleanup):
    """--netstack-window 2: the programs attached 1 s of every 2 s and detached between
    (bpftool's links, polled every 50 ms, show both); a UDP flow h1 -> h2 has as many samples
    (h1's qdisc) as datagrams it sent while the programs followed new packets (the agent's
    log gives each window's span, the sender each send's time, both CLOCK_MONOTONIC), within
    2 a window (a send's way to the qdisc across a window's edge); and
    plumb_netstack_followed_seconds_total grows by those spans; on 6.6+ (UDP's
    protocol and socket stages) every datagram that passed protocol ends in socket or is
    counted, exactly: the reader takes what is
    queued every 0.3 s, so a window's last datagrams are read after its programs went
    (window_edge_udp, counted at the socket's next sampled datagram or its close) and most
    wait behind the socket's 8 slots (socket_slots_full); and none of those left at a
    window's end is matched in a later one (no socket wait above 2^29 ns, 0.54 s: the windows
    are 0.9 s or more apart); each window is one interval (plumb_netstack_windows_total)."""
    h1, h2 = hosts.names[:2]
    agent = Agent(cleanup, "--modules", "netstack", "--netstack-window", "2", "-v",
                  wait_for_module=False)
    settle(agent, lambda m: select(m, "plumb_module_up", module="netstack"), timeout=10)
    progs = json.loads(sh("bpftool", "-j", "prog", "show").stdout)
    ids = {p["id"] for p in progs if p.get("name", "").startswith("ns_")
           and p.get("type") == "tracing"}
    assert len(ids) >= 11, f"netstack's tracing programs: {sorted(ids)}"
    port, rv = udp_receiver(hosts, cleanup, UDP_BURSTY)
    keys = [("protocol", "eth0", h2), ("socket", "eth0", h2)]
    udp = attached("sk_data_ready", "ns_data_ready")
    reasons = ("window_edge_udp", "socket_slots_full", "socket_closed", "socket_storage",
               "unmatched")
    seconds, rate = (8, 200) if EMULATED else (8, 1000)
    slow = {"component": "socket", "device": "eth0", "netns": h2, "le": "0.536870912"}

    def socket_waits(m):
        """h2's socket waits: all, and those of 2^29 ns or less."""
        return (sum(select(m, "plumb_netstack_latency_seconds_count", component="socket",
                           device="eth0", netns=h2).values()),
                sum(select(m, "plumb_netstack_latency_seconds_bucket", **slow).values()))
    m = agent.metrics()
    before = series_totals(m)
    lost0 = {r: value(m, "plumb_events_lost_total", module="netstack", reason=r)
             for r in reasons}
    windows0 = value(m, "plumb_netstack_windows_total")
    waits0 = socket_waits(m)
    seen, done = collections.Counter(), threading.Event()

    def watch():
        while not done.is_set():
            seen[netstack_links(ids)] += 1
            time.sleep(0.05)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        sender = subprocess.Popen(["ip", "netns", "exec", h1, sys.executable, "-c", UDP_PACED,
                                   hosts.addrs[1], str(port), str(seconds), str(rate)],
                                  stdout=subprocess.PIPE, text=True)
        cleanup.add(lambda: sender.poll() is None and (sender.kill(), sender.wait()))
        assert sender.stdout.readline().strip() == "go"
        # each scrape's time: the middle of its request (an emulated guest's take 0.1 s+)
        ta = time.monotonic()
        followed0 = value(agent.metrics(), "plumb_netstack_followed_seconds_total")
        ta = (ta + time.monotonic()) / 2
        times = json.loads(sender.stdout.readline())
        sent = len(times)
        sender.wait(10)
        tb = time.monotonic()
        followed = value(agent.metrics(), "plumb_netstack_followed_seconds_total") - followed0
        tb = (tb + time.monotonic()) / 2
    finally:
        done.set()
        watcher.join()
    out = rv.communicate(timeout=30)[0].splitlines()  # it exits 2 s after the last datagram
    bursts, got = json.loads(out[-2]), int(out[-1])
    time.sleep(2.5)  # the window after it: its interval closed
    m = agent.metrics()
    protocol, socket_, lost = udp_deltas(m, before, lost0, keys)
    qdisc = series_totals(m).get(("qdisc", "eth0", h1), (0, 0))[0] - \
        before.get(("qdisc", "eth0", h1), (0, 0))[0]
    windows = value(m, "plumb_netstack_windows_total") - windows0
    spans = netstack_windows(agent.output())["spans"]
    during = [(a, b) for a, b in spans if b >= times[0] and a <= times[-1]]
    expected = sum(1 for t in times if any(a <= t <= b for a, b in during))
    in_spans = sum(min(b, times[-1]) - max(a, times[0]) for a, b in during)
    # the metric counts a window open at a scrape so far: the spans between the scrapes
    scraped = sum(max(0.0, min(b, tb) - max(a, ta)) for a, b in spans)
    waits = [x - x0 for x, x0 in zip(socket_waits(m), waits0)]
    print(f"  links attached, by 50 ms polls: {dict(seen)}; {sent} datagrams sent, {got} "
          f"read; followed {followed:.2f} s of the {tb - ta:.2f} s between the scrapes, the "
          f"spans {scraped:.2f} s of that; gaps between windows "
          f"{[round(b[0] - a[1], 2) for a, b in zip(spans, spans[1:])]} s; "
          f"{len(during)} windows' spans {in_spans:.2f} s of the flow, {expected} sent in "
          f"them; qdisc {qdisc:.0f}, protocol {protocol:.0f}, socket {socket_:.0f} "
          f"({waits[1]:.0f} within 0.54 s); lost {lost}; {windows:.0f} windows")
    assert seen[0] and seen[len(ids)] and seen[None] < sum(seen.values()) / 2, \
        f"attached counts seen (None: bpftool failed): {dict(seen)}"
    # each window follows for 1 s, then drains for 0.1 s, detaches, and the next attaches after
    # a gap drawn from 0 to 1.8 s (2 x the period less both), later when the tick has not yet
    # taken the interval before (up to a tick, 1 s). Not a share of the time between the
    # scrapes: with gaps drawn afresh, 4 windows in 8 s followed 0.67 of it in a 6.1 guest.
    ours = [k for k, (a, b) in enumerate(spans) if b >= ta and a <= tb]
    long_ = [(a, b) for a, b in (spans[k] for k in ours)
             if not 1.0 <= b - a <= 1.0 + (0.3 if EMULATED else 0.05)]
    assert ours and not long_, f"windows not following for 1 s: {long_} of {spans}"
    gaps = [spans[k + 1][0] - spans[k][1] for k in ours if k + 1 < len(spans)]
    assert all(0.1 <= g <= 0.1 + 1.8 + 1.0 + (0.5 if EMULATED else 0.1) for g in gaps), \
        f"gaps between windows {[round(g, 3) for g in gaps]} s"
    assert windows >= seconds // 2 - 1, f"{windows:.0f} windows in {seconds + 3} s"
    assert got == sent, f"{sent} sent, {got} read"
    assert during and abs(followed - scraped) <= (0.3 if EMULATED else 0.1), \
        f"followed {followed:.2f} s between the scrapes, the windows' spans {scraped:.2f} s " \
        f"of that time: {during}"
    # the window thread, running now, started after the capabilities went (the first tick)
    assert_privileges_dropped(agent.proc.pid)
    assert abs(qdisc - expected) <= 2 * len(during), \
        f"qdisc {qdisc:.0f} samples, {expected} sent while followed ({len(during)} windows)"
    if not udp:  # not a pass of what follows: this kernel cannot show it, and says so
        print("  NOT RUN: UDP's protocol and socket stages across windows: this kernel lacks "
              "the sk_data_ready tracepoint (6.6)")
        return
    assert protocol == socket_ + lost["window_edge_udp"] + lost["socket_slots_full"] + \
        lost["socket_closed"], f"protocol {protocol:.0f}, socket {socket_:.0f}, lost {lost}"
    # that a window's end leaves datagrams behind: where a datagram was sent after the
    # reader's last read before the window stopped following new packets, and no read
    # touched its drain (to its detach; 5 ms margins), that datagram was still queued when
    # the window went. A read in every drain leaves none (the reader reads every 0.3 s, a
    # drain to its detach takes 0.1 s and more: three host runs had 2, 3 and 1 of their 4
    # windows end unread; one make test run had none, and failed before this check).
    e = 0.005

    def unread(to, gone):
        if any(a <= gone + e and b >= to - e for a, b in bursts):
            return False
        ends = [b for _, b in bursts if b < to - e]
        return bool(ends) and any(max(ends) + e < t < to - e for t in times)
    detached = netstack_windows(agent.output())["detached"]
    left = [(to, gone) for (_, to), gone in zip(spans, detached) if unread(to, gone)]
    print(f"  {len(left)} of the flow's windows ended with no read in their drain")
    if left:
        assert lost["window_edge_udp"] > 0, \
            f"no datagram was left at a window's end: {lost}; windows ending unread: {left}"
    else:
        print("  NOT SHOWN in this run: a datagram left at a window's end (the reader read "
              "in every window's drain)")
    assert waits[0] == socket_ and waits[1] == waits[0], \
        f"socket waits of h2's eth0 {waits[0]:.0f}, {waits[1]:.0f} of them within 0.54 s"
    assert lost["unmatched"] == 0 and lost["socket_storage"] == 0, lost


def test_windows_bottleneck(hosts, cleanup):
    """The agent with attach windows (--netstack-window 2 here: the default's 20 s period
    would make this test ten times as long; each window is one interval either way) names an
    injected bottleneck in plumb_netstack_bottleneck: a UDP flow h1 -> h2 learns its
    baselines over the first 10 windows, at least 9 of the next 10 flag nothing, then a TBF
    on h1's eth0 is flagged (qdisc, eth0, h1, and nothing else) within 5 windows, and
    cleared within 5 after the TBF goes."""
    h1 = hosts.names[0]
    agent = Agent(cleanup, "--modules", "netstack", "--netstack-window", "2",
                  wait_for_module=False)
    settle(agent, lambda m: select(m, "plumb_module_up", module="netstack"), timeout=10)
    background(cleanup, hosts, "-u", "-b", UDP_RATE, "-l", "1000")
    tc = ["ip", "netns", "exec", h1, "tc", "qdisc"]
    cleanup.add(lambda: sh(*tc, "del", "dev", "eth0", "root", check=False))
    want = {"component": "qdisc", "device": "eth0", "netns": h1}
    log = []

    def flagged(m):
        return sorted((k["component"], k["device"], k["netns"]) for k, v in (
            (dict(key[1]), v) for key, v in m.items()
            if key[0] == "plumb_netstack_bottleneck") if v == 1)

    def windows_then(n, stop=None):
        """Scrapes until n more windows have ended (or stop(flags) holds): each window's
        flags, as the scrape after its end shows them."""
        start = value(agent.metrics(), "plumb_netstack_windows_total")
        seen, last = [], start
        deadline = time.time() + n * 2 * (3 if EMULATED else 1.5) + 10
        while time.time() < deadline:
            m = agent.metrics()
            done = value(m, "plumb_netstack_windows_total")
            if done > last:
                last = done
                seen.append(flagged(m))
                if stop and stop(seen[-1]) or done - start >= n:
                    return seen
            time.sleep(0.3)
        raise AssertionError(f"{n} windows did not end in time: {len(seen)} did, {seen}")

    warm = windows_then(10)
    clean = windows_then(10)
    log.append(f"warm-up {warm}, clean {clean}")
    sh(*tc, "add", "dev", "eth0", "root", "tbf", "rate", TBF_RATE, "burst", "10kb", "limit",
       "30000")
    goal = [(want["component"], want["device"], want["netns"])]
    try:
        injected = windows_then(5, stop=lambda f: f == goal)
    finally:
        sh(*tc, "del", "dev", "eth0", "root")
    log.append(f"TBF: {injected}")
    cleared = windows_then(5, stop=lambda f: not f)
    log.append(f"TBF gone: {cleared}")
    print("  windows' flags: " + "; ".join(log))
    # the standard for clean runs, 9 of 10 (a 6.12 guest beside another flagged
    # h2's socket in one clean window: its iperf3 reader descheduled, a real slow reader)
    assert sum(1 for f in clean if f) <= 1, f"clean windows flagged {clean}"
    assert injected[-1] == goal, f"the TBF not named alone within 5 windows: {injected}"
    assert not cleared[-1], f"not cleared within 5 windows of the TBF's removal: {cleared}"

def icmp_sent(names):
    """ICMP and ICMPv6 messages the namespaces sent (OutMsgs): packets of their own, inserted
    beside a test's (h2's port unreachables for datagrams to its port 9, IPv6's neighbour
    discovery and MLD)."""
    n = 0
    for ns in names:
        snmp = sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").stdout.splitlines()
        head, vals = [line.split() for line in snmp if line.startswith("Icmp:")][:2]
        n += int(vals[head.index("OutMsgs")])
        snmp6 = sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp6").stdout
        n += int(re.search(r"^Icmp6OutMsgs\s+(\d+)", snmp6, re.M).group(1))
    return n


LRU_COUNT_S = 2  # test_evictions: the agent's LRU count period (10 s by default)


def test_evictions(hosts, cleanup):
    """90,000 sampled datagrams held at once in a TBF queue (8 kbit/s: a few leave): ns_pkts,
    an LRU map of 65,536, evicts the oldest, and the count exported is what was inserted, not
    deleted and not there. Ground truth: the qdisc's own backlog, and the map's entries. An
    agent of its own, scraped twice: once before (its first scrape counts the map) and once
    after the count is redone (at most every 10 s; every LRU_COUNT_S here, test-only
    PLUMB_TEST_LRU_COUNT_MS: the count is the same, only its period is shorter). With a shared
    agent scraped every second, whose count could be 10 s old when the test began, a 6.1
    guest counted 83 more than the held ones."""
    h1 = hosts.names[0]
    agent = Agent(cleanup, "--modules", "netstack", "--netstack-window", "1",
                  wait_for_module=False,
                  env={**os.environ, "PLUMB_TEST_LRU_COUNT_MS": str(int(LRU_COUNT_S * 1000))})
    deadline = time.time() + 15
    while "module netstack: up" not in agent.output() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # the last /healthz's connection is gone

    def counts():
        m = agent.metrics()
        return (value(m, "plumb_events_lost_total", module="netstack", reason="ns_pkts_evicted"),
                value(m, "plumb_map_entries", module="netstack", map="ns_pkts"))
    evicted0, entries0 = counts()
    icmp0 = icmp_sent(hosts.names + [hosts.switch])
    sh("ip", "netns", "exec", h1, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
       "8kbit", "burst", "1600", "limit", "100000000")
    try:
        sh("ip", "netns", "exec", h1, sys.executable, "-c", HOLD_SENDER, hosts.addrs[1],
           str(HELD))
        out = sh("ip", "netns", "exec", h1, "tc", "-s", "qdisc", "show", "dev", "eth0").stdout
        held = int(re.search(r"backlog \S+ (\d+)p", out).group(1))
        assert held > 65536 + 10_000, f"only {held} datagrams held: {out}"
        time.sleep(LRU_COUNT_S + 1)  # the agent counts its LRU maps at most this often
        evicted, entries = counts()
        icmp = icmp_sent(hosts.names + [hosts.switch]) - icmp0
    finally:
        sh("ip", "netns", "exec", h1, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
    # inserted - deleted - present: the held ones, and those in the map before, less the
    # entries now; short of it by the few sent on meanwhile (8 kbit/s of 43-byte frames);
    # above it by the ICMP the namespaces sent meanwhile (h2's port unreachables for the
    # ones that left, IPv6's own: a 6.12 guest, slow to send, was 52 over without them) and
    # the agent's two scrapes on lo
    want = held + entries0 - entries
    print(f"  {held} datagrams held; ns_pkts {entries:.0f} entries (before {entries0:.0f}); "
          f"evicted {evicted - evicted0:.0f}, expected {want:.0f}, ICMP sent meanwhile {icmp}")
    assert 60_000 <= entries <= 65536, f"ns_pkts: {entries} entries"
    assert want - 200 <= evicted - evicted0 <= want + icmp + 50, \
        f"evicted {evicted - evicted0}, expected {want} (held {held}, entries {entries0} -> " \
        f"{entries}; ICMP sent {icmp})"
    agent.stop()


WORKLOAD_READER = """
import socket
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", PORT))
l.listen(1)
print("ready", flush=True)
c, _ = l.accept()
while c.recv(1 << 16):
    pass
"""

WORKLOAD_SENDER = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], PORT))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(int(sys.argv[2])):
    s.sendall(b"x" * 1000)
    time.sleep(0.002)
s.close()
"""

# Nagle on and no pause: sends gather in the unsent tail skb until it is full, and a send
# that does not fit goes on into a new one (tcp_sendmsg_locked's tracepoint fires for each)
BURST_SENDER = """
import socket, sys
s = socket.create_connection((sys.argv[1], PORT))
for _ in range(int(sys.argv[2])):
    s.sendall(b"x" * 1000)
s.close()
"""


def send_through(hosts, cleanup, send_dir, recv_dir, sender, n):
    """The reader in h2 and recv_dir, then sender (its n messages) in h1 and send_dir, to
    their end."""
    port = free_port()
    rd = hosts.run(1, recv_dir, sys.executable, "-c", f"PORT = {port}" + WORKLOAD_READER,
                   stdout=subprocess.PIPE, text=True)
    cleanup.add(lambda: rd.poll() is None and (rd.kill(), rd.wait()))
    assert rd.stdout.readline().strip() == "ready"
    snd = hosts.run(0, send_dir, sys.executable, "-c", f"PORT = {port}" + sender,
                    hosts.addrs[1], str(n))
    assert snd.wait(30) == 0 and rd.wait(10) == 0


def burst_sends(agent, hosts, cleanup, tag):
    """Sends that fill several skbs each are each one send: sampled or counted as beyond the
    socket's slots, once (the tracepoint fires once per skb a send goes into)."""
    n = 2000
    send_dir, _ = make_cgroup(cleanup, f"plumbns{tag}/slurm/job_{tag}3")
    recv_dir, _ = make_cgroup(cleanup, f"plumbns{tag}/burst")
    wl, h1 = f"slurm/{tag}3", hosts.names[0]

    def counts(m):
        return (value(m, "plumb_netstack_latency_seconds_count", component="send",
                      device="eth0", netns=h1, workload=wl),
                value(m, "plumb_events_lost_total", module="netstack", reason="send_slots_full"))
    slots = counts(agent.metrics())[1]
    send_through(hosts, cleanup, send_dir, recv_dir, BURST_SENDER, n)
    m = settle(agent, lambda m: sum(counts(m)) - slots >= n, timeout=5)
    got, full = counts(m)
    full -= slots
    print(f"  {n} sends in bursts: {got:.0f} sampled, {full:.0f} beyond the slots")
    assert got + full == n, f"{n} sends: {got:.0f} sampled + {full:.0f} beyond the slots"
    for d in (send_dir, recv_dir):
        os.rmdir(d)


def test_workloads(hosts, cleanup):
    """A sender and a reader in cgroups of their own (SLURM jobs by their paths): the
    components where the socket's process is known (the send, 6.18+, and the socket queue)
    carry its workload, the others none; the series go, from the kernel's map too, after the
    cgroup is removed and the grace period (2 s here) has passed."""
    agent = Agent(cleanup, "--modules", "netstack", "--netstack-window", "1",
                  "--cgroup-grace", "2", wait_for_module=False)
    settle(agent, lambda m: select(m, "plumb_module_up", module="netstack"), timeout=10)
    tag, n = os.getpid() % 100000, 300
    send_dir, _ = make_cgroup(cleanup, f"plumbns{tag}/slurm/job_{tag}1")
    recv_dir, _ = make_cgroup(cleanup, f"plumbns{tag}/slurm/job_{tag}2")
    sender_wl, reader_wl = f"slurm/{tag}1", f"slurm/{tag}2"
    send_through(hosts, cleanup, send_dir, recv_dir, WORKLOAD_SENDER, n)
    h1, h2 = hosts.names[:2]
    want = [("socket", "eth0", h2, reader_wl)]
    if send_component():
        want.append(("send", "eth0", h1, sender_wl))

    def count(m, c, d, ns, wl):
        return sum(select(m, "plumb_netstack_latency_seconds_count", component=c, device=d,
                          netns=ns, workload=wl).values())
    m = settle(agent, lambda m: all(count(m, *w) >= n for w in want), timeout=5)
    for w in want:
        got = count(m, *w)
        print(f"  {w[0]} on {w[1]} in {w[2][-2:]}: {got:.0f} samples of {n} messages, "
              f"workload {w[3]}")
        assert n * 0.97 <= got <= n, f"{w}: {got} samples for {n} messages"
        assert not count(m, w[0], w[1], w[2], ""), f"{w[:3]} samples without a workload"
    if send_component():
        burst_sends(agent, hosts, cleanup, tag)
    # the packets' components (no process of theirs) carry none
    assert select(m, "plumb_netstack_latency_seconds_count", component="backlog",
                  netns=h2, workload="")
    # the kernel's keys carry the cgroups' ids (the inodes of their directories)
    ids = {os.stat(d).st_ino for d in (send_dir, recv_dir)[2 - len(want):]}
    assert ids <= hist_cgroups(), f"cgroups {ids} not in ns_hists' keys {hist_cgroups()}"
    for d in (send_dir, recv_dir):
        os.rmdir(d)
    m = settle(agent, lambda m: not any(count(m, *w) for w in want), timeout=10)
    assert not any(count(m, *w) for w in want), "series of removed cgroups still exported"
    assert not ids & hist_cgroups(), "removed cgroups' series still in ns_hists"
    agent.stop()


def hist_cgroups():
    """The cgroup ids in the keys of the (one) agent's ns_hists: struct netstack_key's u64 at
    byte 16."""
    maps = json.loads(sh("bpftool", "-j", "map", "dump", "name", "ns_hists").stdout)
    return {int.from_bytes(bytes(int(b, 16) for b in e["key"][16:24]), "little")
            for e in maps}


NETWORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                       "network")
MESSAGES = 2000

# The end-to-end time of each message's packet, from the sender's TCP send (6.18; before it,
# the packet's net_dev_queue in the sender's namespace) to the receiver's copy: sums of both
# events' times, taken by bpftrace, not plumb. Messages are one packet each and arrive in
# order, so the mean difference is the mean one-way time between those two events, and the
# n-th start and n-th copy are one message's (@each: their histogram, printed on a failure).
SPAN = """
FIRST
tracepoint:skb:skb_copy_datagram_iovec /comm == "network"/ {
  $c = nsecs; @last = sum($c); @nlast = count();
  @n2 = @n2 + 1; @each = hist($c - @start[@n2]); delete(@start[@n2]);
  @cdur = sum(nsecs - $c);
}
RETRANS
END {
  print(@first); print(@nfirst); print(@last); print(@nlast); print(@retransmitted);
  print(@qdur); print(@cdur); print(@each);
  clear(@start); clear(@n1); clear(@n2); CLEAR
}
"""
RETRANS = """tracepoint:net:net_dev_queue {
  $skb = (struct sk_buff *)args->skbaddr;
  if ($skb->dev->nd_net.net->ns.inum == NETNS && args->len > 100) {
    $seq = ((struct tcphdr *)($skb->head + $skb->transport_header))->seq;
    if (@sent[$seq]) { @retransmitted = count(); }
    @sent[$seq] = 1;
  }
}"""
FIRST_SEND = """tracepoint:tcp:tcp_sendmsg_locked /comm == "network"/ {
  $t = nsecs; @first = sum($t); @nfirst = count(); @n1 = @n1 + 1; @start[@n1] = $t;
  @qdur = sum(nsecs - $t);
}"""
# Before 6.18: the data packet's net_dev_queue in the sender's namespace (its only device
# there; the ACKs coming back are shorter), in whichever context TCP sends it; a
# retransmission (same sequence number) is not a new message, but is counted. One program
# (the retransmission count in it): plumb's start comes after all of bpftrace's programs on
# this event, its end after only the copy's, and in a 6.1 guest a second program here made
# the components several percent short.
FIRST_QUEUE = """tracepoint:net:net_dev_queue {
  $t = nsecs;  /* first thing: plumb's program on the same event runs after this one */
  $skb = (struct sk_buff *)args->skbaddr;
  if ($skb->dev->nd_net.net->ns.inum == NETNS && args->len > 100) {
    $seq = ((struct tcphdr *)($skb->head + $skb->transport_header))->seq;
    if (@seen[$seq] == 0) {
      @seen[$seq] = 1; @first = sum($t); @nfirst = count(); @n1 = @n1 + 1; @start[@n1] = $t;
      @qdur = sum(nsecs - $t);
    } else { @retransmitted = count(); }
  }
}"""


def data_path(hosts, pod):
    """The (component, device, netns) a TCP segment from h1 to the other node's pod passes,
    in order; the ACKs coming back use the other components of the same devices."""
    h1, sw, n2, r1 = hosts.names[0], hosts.switch, hosts.node2, hosts.names[pod]
    return [("send", "eth0", h1), ("qdisc", "eth0", h1), ("crossing", "eth0", h1),
            ("softirq", "port1", sw), ("backlog", "port1", sw), ("forward", "port1", sw),
            ("forward", "br0", sw), ("qdisc", "wire0", sw), ("crossing", "wire0", sw),
            ("softirq", "wire0", n2), ("backlog", "wire0", n2), ("forward", "wire0", n2),
            ("qdisc", "br0", n2), ("driver", "br0", n2), ("qdisc", "port1", n2),
            ("crossing", "port1", n2), ("softirq", "eth0", r1), ("backlog", "eth0", r1),
            ("protocol", "eth0", r1), ("socket", "eth0", r1)]


def series_totals(m):
    """{(component, device, netns): (count, sum in seconds)} of the latency histograms."""
    out = {}
    for name, i in (("plumb_netstack_latency_seconds_count", 0),
                    ("plumb_netstack_latency_seconds_sum", 1)):
        for k, v in select(m, name).items():
            d = dict(k)
            out.setdefault((d["component"], d["device"], d["netns"]), [0, 0])[i] = v
    return out


def accuracy_script(hosts):
    """The bpftrace program of the truth (SPAN) for this kernel; whether plumb's send
    component is on it."""
    send_on = send_component()
    netns = os.stat(f"/run/netns/{hosts.names[0]}").st_ino
    script = SPAN.replace("FIRST", FIRST_SEND if send_on else FIRST_QUEUE)
    script = script.replace("RETRANS", RETRANS if send_on else "")
    script = script.replace("CLEAR", "clear(@sent);" if send_on else "clear(@seen);")
    return script.replace("NETNS", str(netns)), send_on


def accuracy(hosts, cleanup, pod, **run):
    """accuracy_once(**run) until a run had no retransmission and no shared packet (up to 3)."""
    script, send_on = accuracy_script(hosts)
    # A message whose packet was lost waits for TCP's retransmission, which no component
    # is: the measurement counts only when nothing was retransmitted (up to 3 attempts).
    # TCP autocorking appends a message to the previous one's packet while that packet is
    # still in the qdisc (a 6.1 guest did it to 7 of 2000 messages): off in the sender's netns
    sysctl = ["ip", "netns", "exec", hosts.names[0], "sysctl"]
    was = sh(*sysctl, "-n", "net.ipv4.tcp_autocorking").stdout.strip()
    sh(*sysctl, "-qw", "net.ipv4.tcp_autocorking=0")
    # The receiver ACKs each segment at once (the route's quickack): a reader that stalls
    # sends no ACK from its reads, delayed ACKs wait for 64-byte segments to fill an MSS or
    # for the 40 ms timer, and ~20 segments in flight passed the sender's congestion window
    # (not grown: it never was the limit before), which put the next messages into one
    # packet (a 6.1 guest: 9 or 10 of 1000 in each of 3 attempts).
    routes = sh("ip", "-n", hosts.names[pod], "-o", "route", "show").stdout.splitlines()
    for r in routes:
        sh("ip", "-n", hosts.names[pod], "route", "change", *r.split(), "quickack", "1")
    try:
        for attempt in range(3):
            if accuracy_once(hosts, cleanup, pod, script, send_on, **run):
                return
    finally:
        sh(*sysctl, "-qw", f"net.ipv4.tcp_autocorking={was}")
        for r in routes:
            sh("ip", "-n", hosts.names[pod], "route", "change", *r.split())
    raise AssertionError("a segment was retransmitted, two messages shared a packet or "
                         "bpftrace did not end, in each of 3 attempts")


def test_accuracy(hosts, cleanup, pod):
    """Small TCP messages from h1 to the pod on the second node, one every 2 ms: the mean of
    the per-packet sums of the components on the data path equals the mean time from the
    send to the receiver's copy (bpftrace's timestamps) within 5%, each series on the path
    seeing each packet once."""
    accuracy(hosts, cleanup, pod)


def test_stalled_reader(hosts, cleanup, pod):
    """The same, with a reader that sleeps 100 ms after every 200 messages (one every 2 ms):
    ~50 segments wait in its socket's queue at once, more than the 8 slots a socket has
    (struct netstack_recv): merged slots still count each segment once, and the socket
    stage's time, nearly all of the end-to-end time here, within 5%."""
    accuracy(hosts, cleanup, pod, messages=1000, stall="200:100")


def accuracy_once(hosts, cleanup, pod, script, send_on, messages=MESSAGES, stall=None):
    """One measurement; False when a data segment was retransmitted during it, two
    messages left in one packet, or bpftrace did not end.

    bpftrace attaches before the agent that is measured: on each event its program runs
    first, and the truth's stamps come before plumb's programs, not after them (after, the
    truth's end came a whole ns_copy later than plumb's, its start a shorter ns_queue later:
    in a 6.1 guest, where programs run tens of times slower, the components came out 6.5%
    short)."""
    bt = subprocess.Popen(["bpftrace", "-e", script], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    cleanup.add(lambda: bt.poll() is None and (bt.kill(), bt.wait()))
    while not (line := bt.stdout.readline()).startswith("Attaching"):
        assert line and "ERROR" not in line or "RLIMIT_MEMLOCK" in line, f"bpftrace: {line}"
    agent = Agent(cleanup, "--modules", "netstack", "--netstack-window", "1",
                  wait_for_module=False)
    settle(agent, lambda m: select(m, "plumb_module_up", module="netstack"), timeout=10)
    port = free_port()
    rv = subprocess.Popen(["ip", "netns", "exec", hosts.names[pod], NETWORK, "recv", str(port),
                           str(messages), "64", *([stall] if stall else [])],
                          stdout=subprocess.PIPE, text=True)
    cleanup.add(lambda: rv.poll() is None and (rv.kill(), rv.wait()))
    assert rv.stdout.readline().strip() == "ready"
    time.sleep(1)  # the connection's handshake stays out of the window
    before = series_totals(agent.metrics())
    sh("ip", "netns", "exec", hosts.names[0], NETWORK, "send", hosts.addrs[pod], str(port),
       str(messages), "64", "2000")
    out = rv.communicate(timeout=60)[0]
    bt.send_signal(signal.SIGINT)
    try:
        report = bt.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        # the truth's tool, not plumb: once in a 6.12 guest bpftrace did not end within 30 s
        # of its SIGINT (the run before and after it ended in a second)
        bt.kill()
        print(f"  bpftrace did not end within 60 s of SIGINT (it printed: "
              f"{bt.communicate()[0][-300:]!r}): measuring again")
        agent.stop()
        return False
    span = {k: int(v) for k, v in re.findall(r"@(\w+): (\d+)", report)}
    last = settle(agent, lambda m: False, timeout=2.5)
    after = series_totals(last)
    agent.stop()
    app = dict(kv.split("=") for kv in out.split())
    assert int(app["count"]) == messages and app["split"] == "0", out
    if span.get("retransmitted"):
        print(f"  {span['retransmitted']} data segments retransmitted: measuring again")
        return False
    if span.get("nlast") == messages and span.get("nfirst", 0) < messages:
        print(f"  {messages - span.get('nfirst', 0)} messages shared a packet with the one "
              "before: measuring again")
        return False
    assert span.get("nfirst") == messages and span.get("nlast") == messages, span
    # bpftrace's programs run first on each event: plumb's start comes after the start
    # program's own run, its end after the copy program's; both measured, both taken out
    truth = (span["last"] - span["first"] - span["qdur"] + span.get("cdur", 0)) / messages
    path = data_path(hosts, pod) if send_on else data_path(hosts, pod)[1:]
    delta = {k: [a - b for a, b in zip(after.get(k, (0, 0)), before.get(k, (0, 0)))]
             for k in path}
    parts = [(k, delta[k][1] * 1e9 / messages) for k in path]
    total = sum(ns for _, ns in parts)
    print("  us per packet (packets): " + ", ".join(
        f"{c}@{d}/{n[-2:]} {ns / 1e3:.2f} ({delta[(c, d, n)][0]:.0f})" for (c, d, n), ns in parts))
    # every packet passes each of these once (a softirq segment exists only when the
    # softirq started after the packet was queued: not on every hop)
    few = [(k, delta[k][0]) for k in path if k[0] != "softirq" and
           not 0.97 * messages <= delta[k][0] <= 1.03 * messages]
    assert not few, f"series not seeing each packet once: {few}"
    print(f"  per packet: components {total / 1e3:.2f} us, end to end {truth / 1e3:.2f} us "
          f"({(total / truth - 1) * 100:+.1f}%); the applications' one-way time "
          f"{float(app['mean_ns']) / 1e3:.2f} us adds the syscalls' edges")
    if abs(total / truth - 1) > 0.05:  # where the time went: both sides' distributions
        print("  each message's end-to-end time (bpftrace):\n" +
              report[report.find("@each:"):].split("\n\n")[0])
        print("  plumb's packets by bucket since the agent started (upper bound in us: n):")
        for k in path:
            cum = sorted((float(dict(lab)["le"]), v) for lab, v in select(
                last, "plumb_netstack_latency_seconds_bucket", component=k[0], device=k[1],
                netns=k[2]).items())
            each = [(le, n - (cum[i - 1][1] if i else 0)) for i, (le, n) in enumerate(cum)]
            print(f"    {k[0]}@{k[1]}/{k[2][-2:]}: " +
                  ", ".join(f"{le * 1e6:g}: {n:.0f}" for le, n in each if n))
        print("  lost: " + ", ".join(f"{dict(lab)['reason']} {v:.0f}" for lab, v in select(
            last, "plumb_events_lost_total", module="netstack").items()))
    assert abs(total / truth - 1) <= 0.05, \
        f"components sum to {total:.0f} ns per packet, end to end {truth:.0f} ns"
    return True


def attached(tracepoint, program):
    """Whether plumb attaches program to tracepoint on this kernel (plumb agent --check)."""
    check = subprocess.run([PLUMB, "agent", "--check"], capture_output=True, text=True).stdout
    return re.search(rf"{tracepoint}\s+{program}\s+attached", check) is not None


def send_component():
    return attached("tcp_sendmsg_locked", "ns_sendmsg")


SHORT_FLOWS = """
import socket, sys
for _ in range(32):
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    s.sendall(b"x" * 20000)
    s.close()
"""


def test_sampling(hosts, cleanup):
    """--netstack-sample 2 beside an agent following every flow: some flows followed, not
    all, and each followed packet whole along its path (the same decision at every event)."""
    h2 = hosts.names[1]
    port = free_port()
    sink = subprocess.Popen(["ip", "netns", "exec", h2, sys.executable, "-c",
                             "import socket\nl = socket.socket()\n"
                             "l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                             f"l.bind(('0.0.0.0', {port}))\nl.listen(64)\n"
                             "while True:\n    c, _ = l.accept()\n"
                             "    while c.recv(65536):\n        pass\n    c.close()\n"])
    cleanup.add(lambda: sink.poll() is None and (sink.kill(), sink.wait()))
    agents = {n: Agent(cleanup, "--modules", "netstack", "--netstack-window", "1",
                       "--netstack-sample", str(n), wait_for_module=False) for n in (1, 2)}
    try:
        sampled_path(hosts, port, agents)
    finally:  # not left to the end: beside the scenarios' view they double its work
        for a in agents.values():
            a.stop()
        sink.kill()
        sink.wait()


def sampled_path(hosts, port, agents):
    """test_sampling's measurement, with its agents and sink running."""
    h1, h2, sw = hosts.names[0], hosts.names[1], hosts.switch
    for a in agents.values():
        settle(a, lambda m: select(m, "plumb_module_up", module="netstack"), timeout=10)
    time.sleep(1)
    path = [("qdisc", "eth0", h1), ("crossing", "eth0", h1), ("backlog", "port1", sw),
            ("forward", "port1", sw), ("qdisc", "port2", sw), ("crossing", "port2", sw),
            ("backlog", "eth0", h2), ("protocol", "eth0", h2)]

    def counts(m):
        return [sum(select(m, "plumb_netstack_latency_seconds_count", component=c, device=d,
                           netns=n).values()) for c, d, n in path]
    before = {k: counts(a.metrics()) for k, a in agents.items()}
    lost = {k: value(a.metrics(), "plumb_events_lost_total", module="netstack",
                     reason="unmatched") for k, a in agents.items()}
    sh("ip", "netns", "exec", h1, sys.executable, "-c", SHORT_FLOWS, hosts.addrs[1], str(port),
       timeout=60)
    time.sleep(2)
    got = {k: [x - y for x, y in zip(counts(a.metrics()), before[k])]
           for k, a in agents.items()}
    full, half = got[1], got[2]
    print(f"  packets along the path, every flow: {full}; 1 in 2 flows: {half}")
    assert 0 < half[0] < full[0], f"1 in 2 of 32 flows followed {half[0]} of {full[0]} packets"
    # a followed packet is seen at every event of its path: equal counts along it (up to
    # protocol, which tcp_probe ends only for established sockets: not handshakes, FINs)
    assert len(set(half[:-1])) == 1 and 0 < half[-1] <= half[0], \
        f"1 in 2: counts along the path differ: {half}"
    assert value(agents[2].metrics(), "plumb_events_lost_total", module="netstack",
                 reason="unmatched") == lost[2], "1 in 2: packets lost mid-path"


def test_view(hosts, cleanup):
    """plumb netstack --json: a table per interval with the path's components; --record
    writes the baselines, --baseline reads them back (the series ready at once)."""
    rec = f"/tmp/plumb-netstack-{os.getpid()}.json"
    cleanup.add(lambda: os.path.exists(rec) and os.unlink(rec))
    h2 = hosts.names[1]
    for args in (["--record", rec], ["--baseline", rec]):
        v = subprocess.Popen([PLUMB, "netstack", "--interval", "500ms", "--count", "8", "--json",
                              "--netns", h2, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        cleanup.add(lambda: v.poll() is None and (v.kill(), v.wait()))
        # the traffic starts once the view prints its first interval: attached (an emulated
        # guest takes seconds to attach, longer than the flow lasted)
        first = v.stdout.readline()
        iperf(hosts, cleanup, ["-b", "20M"], 2)
        out, err = v.communicate(timeout=60)
        assert v.returncode == 0, f"plumb netstack {args}: exit {v.returncode}: {err}"
        docs = [json.loads(line) for line in (first + out).splitlines()]
        assert len(docs) == 8, f"{len(docs)} intervals: {first + out}"
        comps = {(c["component"], c["device"]) for d in docs for c in d["components"]}
        assert {("backlog", "eth0"), ("protocol", "eth0"), ("socket", "eth0")} <= comps, comps
        assert all(c["netns"] == h2 for d in docs for c in d["components"]), "--netns ignored"
        if args[0] == "--record":
            with open(rec) as f:
                names = {(x["component"], x["device"], x["netns"])
                         for x in json.load(f)["series"]}
            assert ("socket", "eth0", h2) in names, names
            # each series' interval-to-interval spread goes with it: set here to 0.5, a
            # recording made in fewer than 10 intervals has none learned (0)
            with open(rec) as f:
                doc = json.load(f)
            assert all(x["spread_sd"] == 0 for x in doc["series"]), doc["series"]
            for x in doc["series"]:
                x["spread_sd"] = 0.5
            with open(rec, "w") as f:
                json.dump(doc, f)
        else:  # the recorded series have their baselines from their first samples on (a
            # learned baseline needs 10 intervals with samples: more than the view runs)
            ready = [c for d in docs for c in d["components"] if c["samples_per_s"] > 0
                     and (c["component"], c["device"], c["netns"]) in names]
            assert ready and all(c["baseline_ready"] for c in ready), \
                f"recorded baselines not applied: {ready}"
            # and their spreads: 0.5, moved at most a little by one interval's learning
            # (weight 0.02), not the 0 of a series without one
            first = {}
            for c in ready:
                first.setdefault((c["component"], c["device"]), c["baseline_spread"])
            assert all(0.48 <= v <= 0.6 for v in first.values()), \
                f"recorded spreads not applied: {first}"


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
    # a --netns filter that can name nothing is a typo, not a quiet network: one line, exit 2
    r = subprocess.run([PLUMB, "netstack", "--netns", "plumb-no-such-ns", "--count", "1"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == (
        "plumb netstack: --netns: no network namespace 'plumb-no-such-ns' (a name under "
        "/run/netns, 'host', or an inode number)"), r
    # an interval with nothing to show says so, not "no component is slower"
    r = subprocess.run([PLUMB, "netstack", "--dev", "plumb-nodev", "--count", "1", "--interval",
                        "500ms"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.splitlines()[0] == \
        "no sampled packets this interval on what is shown: --dev plumb-nodev", r


TRIALS, NEED = 10, 9  # issue 6 §3: the injected component first in at least 9 of 10
VIEW_INTERVAL = 0.3  # s
# intervals per trial window; the verdict is the majority of its last 3. Under emulation
# (tests/vm) a queue built while the cause was on takes longer to drain after it is gone.
WINDOW = 10 if EMULATED else 5
# (b) on a host whose hypervisor takes the NAPI thread's CPU for more than STEAL_VOID of the
# time while the baselines are learned, or of the injected windows (median): the softirq
# wait is then the hypervisor's as much as the hog's. make test saw 0.3-0.8 s of each 1.5 s
# window stolen, softirq's baseline at 1-2 ms, and nothing named; and a run whose warm-up
# alone had the steal learned a 1.3-1.5 ms baseline, above the hog's own 0.9 ms in windows
# with no steal. A failed attempt under that much steal says nothing of plumb: it is void and
# the scenario runs again, ATTEMPTS in all; a passed one counts under any steal, a failed
# one under less steal fails, and so do ATTEMPTS voids. The other scenarios the same with
# the host's steal per CPU: in (e) under load CI saw the reader's socket queue rise above
# the forwarding it waited behind in 4 of 10 trials (the reader starved of CPU), where a
# quieter host names forwarding in 9-10 of 10.
STEAL_VOID, ATTEMPTS = 0.15, 3
# The scenarios' UDP flow, and (a)'s rate limit under it. Emulated guests get a quarter: at
# 16 Mbit/s a 6.12 guest's CPU, busy with the 3,000-rule chain, made the receiver read late,
# and its socket queue (UDP's socket stage, 6.6+) outgrew the forwarding it was behind.
UDP_RATE, TBF_RATE = ("4M", "2.5mbit") if EMULATED else ("16M", "10mbit")


class View:
    """plumb netstack --json in the background: its intervals, as they come."""

    def __init__(self, cleanup, interval=None, cpus=None):
        self.interval = interval or VIEW_INTERVAL
        self.p = subprocess.Popen([PLUMB, "netstack", "--json", "--interval",
                                   f"{int(self.interval * 1000)}ms"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True,
                                  preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus
                                  else None)
        cleanup.add(lambda: self.p.poll() is None and (self.p.kill(), self.p.wait()))
        self.docs, self.cv = [], threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            with self.cv:
                self.docs.append(json.loads(line))
                self.cv.notify_all()

    def next(self, n):
        """The next n intervals."""
        with self.cv:
            start = len(self.docs)
            ok = self.cv.wait_for(lambda: len(self.docs) >= start + n or self.p.poll() is not None,
                                  timeout=n * self.interval * 20 + 10)
            assert ok and len(self.docs) >= start + n, \
                f"plumb netstack stopped: {self.p.poll()} {self.p.stderr.read() if self.p.poll() is not None else ''}"
            return self.docs[start:start + n]

    def wait_ready(self, want, timeout=30):
        """Until the series want (component, device, netns) have their baselines."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            d = self.next(1)[0]
            if any(c["baseline_ready"] for c in d["components"]
                   if (c["component"], c["device"], c["netns"]) == want):
                return
        raise AssertionError(f"{want}: no baseline after {timeout} s; last interval: "
                             + json.dumps(d["components"]))


def verdict(docs):
    """The bottleneck most of the intervals name (None: none), as (component, device, netns)."""
    names = [(d["bottleneck"]["component"], d["bottleneck"]["device"], d["bottleneck"]["netns"])
             if d["bottleneck"] else None for d in docs]
    top, n = collections.Counter(names).most_common(1)[0]
    return top if n * 2 > len(names) else None


def debug_windows(want, w, c, v_in, v_out):
    """PLUMB_NETSTACK_DEBUG: a missed injected window's and a flagged clean window's
    intervals: the departed series, the wanted one, and those with >10% of the increase"""
    for tag, docs in (("injected", w) if v_in != want else (None, [])), \
                     (("clean", c) if v_out else (None, [])):
        for d in docs:
            up = [x["mean_s"] - d["host_factor"] * x["baseline_mean_s"] for x in d["components"]]
            total = sum(u for u in up if u > 0) or 1
            print("   ", tag, round(d["host_factor"], 2),
                  [(x["component"], x["device"], x["netns"][-2:], round(x["mean_s"] * 1e6, 2),
                    round(x["baseline_mean_s"] * 1e6, 2), round(x["effect"], 2),
                    round(x["sigmas"], 1), round(x["baseline_spread"], 2),
                    round(x["share"], 2), round(x["samples_per_s"]))
                   for x, u in zip(d["components"], up) if x["departed"] or u > 0.1 * total
                   or (x["component"], x["device"], x["netns"]) == want])


def wanted_state(want, docs):
    """The wanted series in a window's intervals, for a failure message: its p50 and mean
    against its baseline mean (us), samples a second, how many of its deviations out (and
    the deviation), departed, and the host factor."""
    out = []
    for d in docs:
        x = next((x for x in d["components"]
                  if (x["component"], x["device"], x["netns"]) == want), None)
        out.append("absent" if x is None else
                   f"p50 {x['p50_s'] * 1e6:.0f} mean {x['mean_s'] * 1e6:.0f} baseline "
                   f"{x['baseline_mean_s'] * 1e6:.0f} us {x['samples_per_s']:.0f}/s"
                   f" {x['sigmas']:.1f} deviations of {x['baseline_spread']:.2f}"
                   f"{' departed' if x['departed'] else ''} factor {d['host_factor']:.2f}")
    return "; ".join(out)


def norm(want, docs):
    """The wanted series' norm at the end of a window: the deviation of its interval medians
    (ln) and its baseline's mean (us), or None before it has one."""
    x = next((x for x in docs[-1]["components"]
              if (x["component"], x["device"], x["netns"]) == want), None)
    if x is None or not x["baseline_ready"]:
        return None
    return round(x["baseline_spread"], 2), round(x["baseline_mean_s"] * 1e6, 1)


def p50s(want, docs):
    """The wanted series' median p50 over intervals, in us (those with samples)."""
    v = [x["p50_s"] for d in docs for x in d["components"]
         if (x["component"], x["device"], x["netns"]) == want and x["samples_per_s"] > 0]
    return f"{statistics.median(v) * 1e6:.0f} us" if v else "none"


def trials(view, inject, remove, want, steal_cpu=None):
    """TRIALS rounds of: inject, a window, remove, a window, or fewer once the rounds left
    cannot change the outcome (9 of 9 named and clean: the 10th is not run). The hypervisor's
    steal is measured meanwhile: of CPU steal_cpu, or of the host per CPU."""
    ncpu = 1 if steal_cpu is not None else os.cpu_count()
    t0, s0 = time.monotonic(), steal_seconds(steal_cpu)
    view.wait_ready(want)
    norms = [norm(want, view.next(WINDOW))]  # settled
    # the baselines were learned meanwhile
    warm = (steal_seconds(steal_cpu) - s0) / (time.monotonic() - t0) / ncpu
    where = f"cpu{steal_cpu}" if steal_cpu is not None else "each CPU"
    hits, clean, seen, stolen_all, windows = 0, 0, [], [], ([], [])
    for n in range(TRIALS):
        left = TRIALS - n
        if min(hits, clean) >= NEED or min(hits, clean) + left < NEED:
            break
        s0 = steal_seconds(steal_cpu)
        inject()
        try:
            w = view.next(WINDOW)
        finally:
            remove()
        stolen = (steal_seconds(steal_cpu) - s0) / ncpu
        stolen_all.append(stolen)
        c = view.next(WINDOW)
        norms.append(norm(want, c))
        v_in, v_out = verdict(w[-3:]), verdict(c[-3:])
        if os.environ.get("PLUMB_NETSTACK_DEBUG"):
            debug_windows(want, w[-3:], c[-3:], v_in, v_out)
        if os.environ.get("PLUMB_NETSTACK_DUMP"):  # the windows, for replaying the rules
            with open(os.environ["PLUMB_NETSTACK_DUMP"], "a") as f:
                f.write(json.dumps({"want": want, "injected": w[-3:], "clean": c[-3:],
                                    "stolen": stolen,
                                    "start": view.docs[:20] if not seen else []}) + "\n")
        windows[0].extend(w[-3:])
        windows[1].extend(c[-3:])
        hits += v_in == want
        clean += v_out is None
        seen.append((v_in, v_out, f"{where} stolen {stolen:.2f} s")
                    + ((wanted_state(want, w[-3:]),) if v_in != want else ()))
    ran = len(seen)
    print(f"  {want}: named in {hits}/{ran} trials, clean in {clean}/{ran}"
          f"{f' (of {TRIALS}: the rest could not change the outcome)' if ran < TRIALS else ''}"
          f"; its p50 "
          f"(median of the windows' last 3 intervals) injected {p50s(want, windows[0])}, "
          f"clean {p50s(want, windows[1])}")
    if hits < NEED or clean < NEED:
        share = statistics.median(stolen_all) / (WINDOW * VIEW_INTERVAL)
        if max(share, warm) > STEAL_VOID:
            raise Void(f"named in {hits}/{ran}, clean in {clean}/{ran} with the "
                       f"hypervisor taking {where} {warm:.0%} of the time while the "
                       f"baselines were learned and {share:.0%} of the injected windows "
                       f"(median; void above {STEAL_VOID:.0%}): {seen}")
    assert hits >= NEED and clean >= NEED, \
        f"want {want} in >= {NEED}/{TRIALS} and clean >= {NEED}/{TRIALS}: (injected, clean) " \
        f"verdicts of {ran} trials {seen}; its norm (deviation of ln p50, baseline mean) " \
        f"before the trials and after each {norms}"


def background(cleanup, hosts, *client_args, cpus=None):
    """A steady iperf3 flow h1 -> h2 for the scenario (stopped at cleanup), on cpus if given."""
    port = free_port()
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    srv = subprocess.Popen(["ip", "netns", "exec", hosts.names[1], "iperf3", "-s", "-p",
                            str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           preexec_fn=pin)
    cleanup.add(lambda: srv.poll() is None and (srv.kill(), srv.wait()))
    time.sleep(0.5)
    cli = subprocess.Popen(["ip", "netns", "exec", hosts.names[0], "iperf3", "-c",
                            hosts.addrs[1], "-p", str(port), "-t", "600", *client_args],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pin)
    cleanup.add(lambda: cli.poll() is None and (cli.kill(), cli.wait()))


def scenario_qdisc(hosts, cleanup):
    """(a) A TBF rate limit on the sending pod's eth0: the qdisc there."""
    h1 = hosts.names[0]
    view = View(cleanup)
    background(cleanup, hosts, "-u", "-b", UDP_RATE, "-l", "1000")
    tc = ["ip", "netns", "exec", h1, "tc", "qdisc"]
    cleanup.add(lambda: sh(*tc, "del", "dev", "eth0", "root", check=False))
    trials(view, lambda: sh(*tc, "add", "dev", "eth0", "root", "tbf", "rate", TBF_RATE, "burst",
                            "10kb", "limit", "30000"),
           lambda: sh(*tc, "del", "dev", "eth0", "root"), ("qdisc", "eth0", h1))


SLOW_READER = """
import signal, socket, time
slow = [False]
signal.signal(signal.SIGUSR1, lambda *a: slow.__setitem__(0, True))
signal.signal(signal.SIGUSR2, lambda *a: slow.__setitem__(0, False))
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", PORT))
l.listen(1)
print("ready", flush=True)
c, _ = l.accept()
while True:
    if slow[0]:
        time.sleep(0.02)  # the application reads late: its queue fills
    if not c.recv(1 << 20):
        break
"""

SENDER = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], PORT))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg = b"x" * 1000
while True:
    s.sendall(msg)
    time.sleep(0.0005)
"""


def scenario_slow_reader(hosts, cleanup):
    """(c) The receiving application reads late: the socket's receive queue."""
    signalled_pair(hosts, cleanup, SLOW_READER, SENDER, ("socket", "eth0", hosts.names[1]))


def signalled_pair(hosts, cleanup, reader, sender, want):
    """A TCP reader in h2 (SIGUSR1 injects, SIGUSR2 removes) and a sender in h1: trials."""
    h1, h2 = hosts.names[:2]
    port = free_port()
    rd = subprocess.Popen(["ip", "netns", "exec", h2, sys.executable, "-c",
                           f"PORT = {port}" + reader], stdout=subprocess.PIPE, text=True)
    cleanup.add(lambda: rd.poll() is None and (rd.kill(), rd.wait()))
    assert rd.stdout.readline().strip() == "ready"
    snd = subprocess.Popen(["ip", "netns", "exec", h1, sys.executable, "-c",
                            f"PORT = {port}" + sender, hosts.addrs[1]])
    cleanup.add(lambda: snd.poll() is None and (snd.kill(), snd.wait()))
    view = View(cleanup)
    trials(view, lambda: rd.send_signal(signal.SIGUSR1), lambda: rd.send_signal(signal.SIGUSR2),
           want)


DELAYLINE = os.path.join(os.path.dirname(NETWORK), "delayline")
# (d)'s round trip: what h2 sends to h1 (the ACKs) goes by the delay line
DELAY = 0.002  # s


def delay_acks(hosts, cleanup):
    """h2's packets to h1 by build/delayline, DELAY s: a round trip of a wide-area path."""
    h1, h2 = hosts.names[:2]
    line = subprocess.Popen([DELAYLINE, h2, h1, str(int(DELAY * 1e6))], stdout=subprocess.PIPE,
                            text=True)
    cleanup.add(lambda: line.poll() is None and (line.kill(), line.wait()))
    assert line.stdout.readline().strip() == "ready"
    sh("ip", "-n", h1, "link", "set", "dly1", "up")
    sh("ip", "netns", "exec", h1, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0",
       "net.ipv4.conf.dly1.rp_filter=0")
    sh("ip", "-n", h2, "link", "set", "dly0", "up")
    # the route goes with the device when the line stops
    sh("ip", "-n", h2, "route", "add", f"{hosts.addrs[0]}/32", "dev", "dly0")
    return line


def line_dropped(line):
    """Stops the delay line: how many packets it dropped (its ring of 4096 full)."""
    line.terminate()
    m = re.search(r"dropped=(\d+)", line.communicate(timeout=10)[0])
    assert m, "the delay line did not say what it dropped"
    return int(m.group(1))


SMALL_BUFFER_READER = """
import signal, socket
SO_RCVBUFFORCE = 33
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", PORT))
l.listen(1)
print("ready", flush=True)
c, _ = l.accept()
# 4 MiB, fixed from the start (a size set is never tuned again): a window far above the
# 100 KB the flow keeps in flight over the delay line
c.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20)
# SIGUSR1: a 16 KiB buffer (the kernel doubles what is asked), a window of a few segments;
# SIGUSR2: as before
signal.signal(signal.SIGUSR1, lambda *a: c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192))
signal.signal(signal.SIGUSR2, lambda *a: c.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20))
while c.recv(1 << 20):
    pass
"""

PACED_SENDER = """
import socket, sys, time
SO_SNDBUFFORCE = 32
s = socket.create_connection((sys.argv[1], PORT))
s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 128 << 10)
msg = b"x" * 4000
next_t = time.monotonic()
# 10 MB/s
while True:
    s.sendall(msg)
    # no catching up after a blocked stretch: the burst would be a load of its own
    now = time.monotonic()
    next_t = max(next_t + 0.0004, now)
    time.sleep(next_t - now)
"""


def scenario_small_buffer(hosts, cleanup):
    """(d) Over a path with a round trip of 2 ms, the receiver's buffer shrinks to 16 KiB
    while a sender paces 10 MB/s: the window holds the bytes in the sender's write queue, the
    send component (6.18). The delay line must drop nothing: a lost ACK is a delay of its own."""
    line = delay_acks(hosts, cleanup)
    signalled_pair(hosts, cleanup, SMALL_BUFFER_READER, PACED_SENDER,
                   ("send", "eth0", hosts.names[0]))
    dropped = line_dropped(line)
    print(f"  the delay line dropped {dropped} packets")
    assert dropped == 0, f"the delay line dropped {dropped} packets"


# A real-time thread that holds its CPU (argv[1]) for argv[2] s at a time, then lets go for
# argv[3] s.
RT_HOG = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
busy, idle = float(sys.argv[2]), float(sys.argv[3])
while True:
    t = time.monotonic() + busy
    while time.monotonic() < t:
        pass
    time.sleep(idle)
"""
# 2 ms of 2.5: most packets wait, so the component's median moves (at 4 of 8 it did not on
# the host: half the packets waited 2 ms on average, half not at all, and the detector judges
# medians). PLUMB_RT_HOG=BUSY,IDLE (seconds) for experiments.
RT_HOG_BUSY, RT_HOG_IDLE = os.environ.get("PLUMB_RT_HOG", "0.002,0.0005").split(",")
# Why (b) does not run in the emulated guests of make test-kernels: there both virtual CPUs
# take turns on one host thread, so a CPU held by the hog is not beside an idle one. Measured:
# 6.12 guest at 2 of 2.5 the reader on the other CPU waited too (socket 0.28 -> 1.3-1.8 ms,
# softirq 0.24 -> 1.0-1.7): named 8 of 10; at 4 of 8 10 of 10. 6.1 guest: the softirq
# baseline itself wanders (p50 spread 0.28 -> 0.65 over the trials): 5 of 10 at 4 of 8, 0 of
# 10 at 2 of 3.
SOFTIRQ_NOT_EMULATED = ("both virtual CPUs of an emulated guest take turns on one host "
                        "thread, so no CPU is idle beside the hogged one (tests/"
                        "integration/test_netstack.py says what was measured)")


def napi_threads():
    """PIDs of the threaded-NAPI kthreads ("napi/<dev>-<id>")."""
    out = sh("ps", "-e", "-o", "pid=,comm=").stdout
    return {int(p) for p, c in (line.split(None, 1) for line in out.splitlines())
            if c.strip().startswith("napi/")}


def scenario_softirq(hosts, cleanup):
    """(b) h2's eth0 receives by NAPI in a kthread (GRO on, threaded), pinned to the last CPU,
    where a real-time thread takes the CPU 2 ms at a time: the wait for that processing,
    softirq on h2's eth0. Everything else runs on CPU 0. On this project's hosts hogs of the
    normal class did not delay the kthread (it preempts them on waking: 3-4 us of run delay
    with four hogs at nice 0 or -10), and a NET_RX softirq runs at the interrupt's exit ahead
    of any task (docs/netstack.md, (b))."""
    h1, h2 = hosts.names[:2]
    sw, last = hosts.switch, os.cpu_count() - 1
    assert last >= 1, "needs two CPUs"
    ns2 = ["ip", "netns", "exec", h2]
    before = napi_threads()

    def feature(ns, dev, name):
        out = sh("ip", "netns", "exec", ns, "ethtool", "-k", dev).stdout
        return re.search(rf"^{name}: (on|off)", out, re.M).group(1)
    tso = feature(sw, "port2", "tcp-segmentation-offload")
    gro = feature(h2, "eth0", "generic-receive-offload")
    # veth hands a packet to its peer's NAPI when GRO is on there and the sending side does
    # not segment (a forwarded skb from a TSO device goes the netif_rx way)
    cleanup.add(lambda: sh("ip", "netns", "exec", sw, "ethtool", "-K", "port2", "tso", tso,
                           check=False))
    sh("ip", "netns", "exec", sw, "ethtool", "-K", "port2", "tso", "off")
    cleanup.add(lambda: sh(*ns2, "ethtool", "-K", "eth0", "gro", gro, check=False))
    sh(*ns2, "ethtool", "-K", "eth0", "gro", "on")
    cleanup.add(lambda: sh(*ns2, "sh", "-c", "echo 0 > /sys/class/net/eth0/threaded",
                           check=False))
    sh(*ns2, "sh", "-c", "echo 1 > /sys/class/net/eth0/threaded")
    ours = napi_threads() - before
    assert ours, "no napi/ kthread appeared for h2's eth0"
    for pid in ours:
        os.sched_setaffinity(pid, {last})
    view = View(cleanup, cpus={0})
    background(cleanup, hosts, "-u", "-b", UDP_RATE, "-l", "1000", cpus={0})
    hog = [None]

    def inject():
        hog[0] = subprocess.Popen([sys.executable, "-c", RT_HOG, str(last), RT_HOG_BUSY,
                                   RT_HOG_IDLE])
        time.sleep(0.1)
        assert hog[0].poll() is None, f"the real-time thread exited ({hog[0].returncode}): " \
            "SCHED_FIFO refused?"

    def remove():
        hog[0].kill()
        hog[0].wait()
    cleanup.add(lambda: hog[0] and hog[0].poll() is None and remove())
    trials(view, inject, remove, ("softirq", "eth0", h2), steal_cpu=last)


def scenario_netfilter(hosts, cleanup):
    """(e) A long rule chain on the bridge's forward hook: forwarding on the bridge port."""
    sw = hosts.switch
    rules = "\n".join(f"    ip saddr 192.0.2.{i % 250 + 1} ip daddr 198.51.100.{i // 250 + 1} "
                      "counter" for i in range(3000))
    path = f"/tmp/plumb-nft-{os.getpid()}.nft"
    with open(path, "w") as f:
        f.write("table bridge plumbtest {\n  chain plumbfwd {\n    type filter hook forward "
                f"priority 0; policy accept;\n{rules}\n  }}\n}}\n")
    cleanup.add(os.unlink, path)
    nft = ["ip", "netns", "exec", sw, "nft"]
    cleanup.add(lambda: sh(*nft, "delete", "table", "bridge", "plumbtest", check=False))
    view = View(cleanup)
    background(cleanup, hosts, "-u", "-b", UDP_RATE, "-l", "1000")
    trials(view, lambda: sh(*nft, "-f", path),
           lambda: sh(*nft, "delete", "table", "bridge", "plumbtest"), ("forward", "port1", sw))


def isolated(fn, hosts):
    """fn(hosts, cleanup) with a Cleanup of its own, run when fn returns or fails: a failed
    test's agent does not outlive it (a 6.12 guest's failed eviction count left its agent
    running, and the next test's bpftool found two ns_hists maps)."""
    c = Cleanup()
    try:
        fn(hosts, c)
    finally:
        c.run()


def run_scenario(fn, hosts):
    attempts(ATTEMPTS, lambda cleanup: fn(hosts, cleanup), pause=10)


def main():
    require_root()
    runner = Runner()
    cleanup = Cleanup()
    try:
        hosts = Hosts(cleanup, 2)
        pod = hosts.wire_node(cleanup)
        agent = Agent(cleanup, "--modules", "netstack", "--netstack-window", "1",
                      wait_for_module=False)
        settle(agent, lambda m: select(m, "plumb_module_up", module="netstack"), timeout=10)
        assert "module netstack: up" in agent.output(), agent.output()
        runner.run("netstack: every component of a pod-to-pod TCP path", test_path, agent,
                   hosts, cleanup)
        if attached("sk_data_ready", "ns_data_ready"):
            runner.run("netstack: UDP's protocol and socket stages", test_udp, agent, hosts,
                       cleanup)
            runner.run("netstack: UDP datagrams beyond a socket's slots, counted", test_udp_slots,
                       agent, hosts, cleanup)
            runner.run("netstack: UDP datagrams never read, counted when the socket closes",
                       test_udp_closed, agent, hosts, cleanup)
            runner.run("netstack: UDP from two CPUs, read by two threads, each datagram "
                       "accounted for",
                       test_udp_races, agent, hosts, cleanup)
            runner.run("netstack: UDP datagrams a VXLAN tunnel takes, counted as unclaimed",
                       test_udp_tunnel, agent, hosts, cleanup)
            runner.run("netstack: UDP through a node's DNAT: its forwarding measured, none "
                       "unclaimed", test_udp_nat, agent, hosts, cleanup)
        else:  # not a pass: it cannot be shown on this kernel, and says so
            print("NOT RUN netstack: UDP's protocol and socket stages: this kernel lacks "
                  "the sk_data_ready tracepoint (6.6)")
        runner.run("netstack: qdisc time under TBF is the queue over the rate", test_tbf,
                   agent, hosts, cleanup)
        # From here on the tests start their own plumb: the accuracy test its agent after
        # bpftrace, the scenarios `plumb netstack` alone, as an operator would (the agent's
        # programs beside the view's double each packet's work, and in a 6.1 guest that made
        # the receiver's socket stage 4 ms against 0.35: the slow reader only 3x that)
        agent.stop()
        runner.run("netstack: LRU evictions counted, exact", isolated, test_evictions, hosts)
        runner.run("netstack: attach windows: detached between, samples of the time "
                   "followed, every datagram accounted for", isolated, test_windows, hosts)
        runner.run("netstack: attach windows: a TBF named by the agent's bottleneck metric, "
                   "and cleared", isolated, test_windows_bottleneck, hosts)
        runner.run("netstack: workloads of the send and socket components, and their removal",
                   isolated, test_workloads, hosts)
        runner.run("netstack: components sum to the end-to-end time, across two nodes",
                   test_accuracy, hosts, cleanup, pod)
        runner.run("netstack: a reader lagging 50 segments behind: each counted once, its "
                   "wait exact", test_stalled_reader, hosts, cleanup, pod)
        runner.run("netstack: plumb netstack --json, --record and --baseline", test_view,
                   hosts, cleanup)
        runner.run("netstack: 1 in 2 flows, each followed packet whole", test_sampling, hosts,
                   cleanup)
        runner.run("netstack: plumb netstack usage errors", test_view_errors)
        scenarios = [("(a) a TBF rate limit: the qdisc", scenario_qdisc),
                     ("(c) a slow receiver: the socket queue", scenario_slow_reader),
                     ("(d) a tiny receive buffer: the sender's write queue",
                      scenario_small_buffer),
                     ("(e) a long netfilter chain: bridge forwarding", scenario_netfilter),
                     ("(b) receive processing starved of its CPU: the softirq wait",
                      scenario_softirq)]
        if not send_component():
            # not a pass: the scenario cannot be shown on this kernel, and says so
            print("NOT RUN netstack bottleneck (d) a tiny receive buffer: this kernel lacks "
                  "tcp_sendmsg_locked (6.18), the send component where its delay shows")
            del scenarios[2]
        if EMULATED:
            # not a pass: the scenario cannot be shown under emulation, and says so
            print("NOT RUN netstack bottleneck (b) receive processing starved of its CPU: "
                  + SOFTIRQ_NOT_EMULATED)
            scenarios = [x for x in scenarios if x[1] is not scenario_softirq]
        for name, fn in scenarios:
            title = f"netstack bottleneck: {name}, {NEED} of {TRIALS} trials, clean too"
            if fn in (scenario_qdisc, scenario_slow_reader):
                # the guests keep (e), whose path (bridge, netfilter) differs most by kernel
                runner.run_host("the verdict is user-space analysis of stages whose data the "
                                "tests above check on every kernel (qdisc under TBF, a "
                                "lagging reader)", title, run_scenario, fn, hosts)
            else:
                runner.run(title, run_scenario, fn, hosts)
    except Exception as e:
        runner.failed += 1
        print(f"FAIL setup: {e}")
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
