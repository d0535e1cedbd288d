#!/usr/bin/env python3
"""make soak: the agent, every module on, under churn for a bounded time (default 10 min).

bench/soak.c makes the load in a cgroup of its own: short-lived processes (each writes 64
bytes to a file on a tmpfs and exits), short TCP connections on loopback (100 bytes each way
one), and cgroups made and removed (each with a process forking four). Every SOAK_SAMPLE
seconds the benchmark scrapes the agent (timing the scrape) and records its RSS, every map's
fill, the lost-event counters and the load's achieved rates. At the end it holds the agent's
counts against the load's own (exact: the io module's bytes of the load's cgroup, the flow
module's client connections; any difference must be in a lost-event counter), and writes the
curve to bench/results/soak.md with the machine's description.

Environment: SOAK_SECONDS (600), SOAK_PROCS (10000/s), SOAK_TCP (5000/s), SOAK_CGROUPS
(20/s), SOAK_SAMPLE (10 s). Exit status 0 when every check held, 1 otherwise.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ab import machine
from benchlib import ROOT, Agent, Cleanup, make_cgroup, require

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from lib import mount_tmpfs, parse_metrics, select, value  # noqa: E402

SOAK = os.path.join(ROOT, "build", "soak")
SECONDS = int(os.environ.get("SOAK_SECONDS", "600"))
PROCS = int(os.environ.get("SOAK_PROCS", "10000"))
TCP = int(os.environ.get("SOAK_TCP", "5000"))
CGROUPS = int(os.environ.get("SOAK_CGROUPS", "20"))
SAMPLE = int(os.environ.get("SOAK_SAMPLE", "10"))
RESULTS = os.path.join(ROOT, "bench", "results", "soak.md")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def scrape(agent):
    t0 = time.monotonic()
    status, _, body = agent.get("/metrics")
    took = time.monotonic() - t0
    assert status == 200, f"/metrics answered {status}"
    return parse_metrics(body), took


class Load:
    """bench/soak.c, its per-second lines read as they come."""

    def __init__(self, cleanup, cgdir, cgroup_parent, file):
        self.last = {}
        self.proc = subprocess.Popen(
            [SOAK, "--seconds", str(SECONDS), "--procs", str(PROCS), "--file", file,
             "--tcp", str(TCP), "--cgroups", str(CGROUPS), "--cgroup-dir", cgroup_parent],
            stdout=subprocess.PIPE, text=True,
            preexec_fn=lambda: open(os.path.join(cgdir, "cgroup.procs"), "w").write("0"))
        cleanup.add(lambda: self.proc.poll() is None and (self.proc.kill(), self.proc.wait()))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            last = {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", line)}
            if "done" in last:
                last["t"] = last["done"]
            self.last = last


def main():
    require([])
    # SIGTERM (a CI timeout, kill) undoes the mounts and cgroups like an exception would
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not os.path.exists(SOAK):
        sys.exit(f"{SOAK} missing: make soak builds it")
    cleanup = Cleanup()
    rows, failures = [], []
    try:
        base = tempfile.mkdtemp(prefix="plumb-soak-", dir="/tmp")
        cleanup.add(os.rmdir, base)
        mnt = os.path.join(base, "tmpfs")
        mount_tmpfs(cleanup, mnt, size_mb=64)
        gen_dir, gen = make_cgroup(cleanup, f"plumb-soak-{os.getpid()}/gen")
        churn_dir, _ = make_cgroup(cleanup, f"plumb-soak-{os.getpid()}/churn")
        agent = Agent(cleanup)
        pid = agent.proc.pid
        m0, _ = scrape(agent)
        load = Load(cleanup, gen_dir, churn_dir, os.path.join(mnt, "data"))
        t0 = time.monotonic()
        prev = {}
        while load.proc.poll() is None:
            time.sleep(SAMPLE)
            m, took = scrape(agent)
            t = time.monotonic() - t0
            cur = dict(load.last)
            rates = {k: (cur.get(k, 0) - prev.get(k, 0)) / max(cur.get("t", 0) -
                                                                 prev.get("t", 0), 1e-9)
                     for k in ("procs", "conns", "cgroups")} if cur else {}
            prev = cur
            fills = {f"{dict(k)['module']}/{dict(k)['map']}": v
                     for k, v in select(m, "plumb_map_entries").items()}
            caps = {f"{dict(k)['module']}/{dict(k)['map']}": v
                    for k, v in select(m, "plumb_map_capacity").items()}
            lost = {f"{dict(k)['module']}/{dict(k)['reason']}": v
                    for k, v in select(m, "plumb_events_lost_total").items() if v}
            row = {"t": t, "rss": rss_kib(pid), "scrape": took,
                   "scrape_self": value(m, "plumb_scrape_duration_seconds"),
                   "rates": rates, "fills": fills, "caps": caps, "lost": lost}
            rows.append(row)
            print(f"t={t:5.0f}s rss={row['rss'] / 1024:6.1f}MiB scrape={took * 1e3:6.1f}ms "
                  f"procs/s={rates.get('procs', 0):6.0f} conns/s={rates.get('conns', 0):5.0f} "
                  f"cgroups/s={rates.get('cgroups', 0):4.1f} lost={sum(lost.values()):.0f}",
                  flush=True)
        assert load.proc.wait() == 0, "the load failed"
        done = load.last
        time.sleep(3)  # the flow module's last connections, the io module's last reads
        m, took = scrape(agent)
        # exact counts: the io module's bytes and the flow module's client connections of the
        # load's own cgroup, against the load's; a difference only with a lost-event count
        io_got = value(m, "plumb_io_write_bytes_total", cgroup=gen, mount=mnt)
        io_lost = sum(v for k, v in select(m, "plumb_events_lost_total", module="io").items())
        conn_got = sum(v for k, v in select(m, "plumb_flow_connections_total", cgroup=gen,
                                             role="client").items())
        flow_lost = sum(v for k, v in select(m, "plumb_events_lost_total",
                                             module="flow").items())
        checks = [
            ("io bytes of the load's cgroup", io_got, done["proc_bytes"], io_lost),
            ("flow client connections of the load's cgroup", conn_got, done["conns"],
             flow_lost + done["errors"]),
        ]
        for what, got, want, lost in checks:
            ok = got == want or (got < want and want - got <= lost)
            print(f"{what}: agent {got:.0f}, load {want:.0f}, counted lost {lost:.0f}: "
                  f"{'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{what}: agent {got:.0f} vs load {want:.0f} "
                                f"(counted lost {lost:.0f})")
        # flat: the last third's RSS and map fill against the middle third's
        third = max(len(rows) // 3, 1)
        mid, end = rows[third:2 * third], rows[2 * third:]
        rss_mid = max(r["rss"] for r in mid) if mid else rows[0]["rss"]
        rss_end = max(r["rss"] for r in end)
        growth = (rss_end - rss_mid) / 1024
        print(f"RSS: middle third max {rss_mid / 1024:.1f} MiB, last third max "
              f"{rss_end / 1024:.1f} MiB ({growth:+.1f} MiB)")
        if growth > 4:
            failures.append(f"RSS grew {growth:+.1f} MiB from the middle third to the end")
        over = [k for k, v in rows[-1]["fills"].items()
                if rows[-1]["caps"].get(k) and v > rows[-1]["caps"][k]]
        if over:
            failures.append(f"maps over capacity: {over}")
        for k in rows[-1]["fills"]:
            mx_mid = max((r["fills"].get(k, 0) for r in mid), default=0)
            mx_end = max(r["fills"].get(k, 0) for r in end)
            cap = rows[-1]["caps"].get(k, 0)
            if mx_end > 1.5 * mx_mid + 64 and mx_end < cap:
                failures.append(f"map {k} still growing: {mx_mid:.0f} -> {mx_end:.0f} "
                                f"(capacity {cap:.0f})")
        # what the last scrape carried: series per family prefix, and its size
        status, _, body = agent.get("/metrics")
        fams = {}
        for k in m:
            fam = "_".join(k[0].split("_")[:2])
            fams[fam] = fams.get(fam, 0) + 1
        sizes = f"{len(body) / 1048576:.1f} MiB, {len(m)} series: " + ", ".join(
            f"{f} {n}" for f, n in sorted(fams.items(), key=lambda x: -x[1]))
        print(f"last scrape: {sizes}")
        print(f"last scrape {took * 1e3:.1f} ms (agent's own {value(m, 'plumb_scrape_duration_seconds') * 1e3:.1f} ms)")
        if took >= 0.1:
            failures.append(f"the last scrape took {took * 1e3:.0f} ms (bound 100 ms)")
        write_results(rows, done, checks, m0, m, took, failures, sizes)
    finally:
        cleanup.run()
    print("soak: " + ("every check held" if not failures else "FAILED: " + "; ".join(failures)))
    return 1 if failures else 0


def write_results(rows, done, checks, m0, m, took, failures, sizes):
    mach = machine()
    keys = sorted({k for r in rows for k in r["fills"]})
    out = ["# Soak: the agent under churn", "",
           "`make soak` (bench/soak.py, bench/soak.c). Every module on, default options.", "",
           "| | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in mach.items()]
    out += ["", f"Asked: {PROCS} processes/s, {TCP} TCP connections/s, {CGROUPS} cgroups/s "
            f"(made and removed), {SECONDS} s. Done: {done.get('procs', 0):.0f} processes, "
            f"{done.get('conns', 0):.0f} connections, {done.get('cgroups', 0):.0f} cgroups, "
            f"{done.get('errors', 0):.0f} errors, in {done.get('done', 0) and SECONDS} s "
            f"(achieved: {done.get('procs', 0) / SECONDS:.0f}/s, "
            f"{done.get('conns', 0) / SECONDS:.0f}/s, {done.get('cgroups', 0) / SECONDS:.1f}/s).",
            "", "## The curve", "",
            "| t (s) | RSS (MiB) | scrape (ms) | procs/s | conns/s | cgroups/s | lost events | " +
            " | ".join(keys) + " |",
            "|" + "---|" * (7 + len(keys))]
    for r in rows:
        out.append(f"| {r['t']:.0f} | {r['rss'] / 1024:.1f} | {r['scrape'] * 1e3:.1f} | "
                   f"{r['rates'].get('procs', 0):.0f} | {r['rates'].get('conns', 0):.0f} | "
                   f"{r['rates'].get('cgroups', 0):.1f} | {sum(r['lost'].values()):.0f} | " +
                   " | ".join(f"{r['fills'].get(k, 0):.0f}" for k in keys) + " |")
    out += ["", "Capacities: " + ", ".join(f"{k} {rows[-1]['caps'].get(k, 0):.0f}"
                                           for k in keys if rows[-1]['caps'].get(k)), "",
            "## Lost events at the end (counted)", ""]
    lost = {f"{dict(k)['module']}/{dict(k)['reason']}": v
            for k, v in select(m, "plumb_events_lost_total").items() if v}
    out += [f"- {k}: {v:.0f}" for k, v in sorted(lost.items())] or ["- none"]
    out += ["", "## Exact counts", ""]
    out += [f"- {what}: agent {got:.0f}, load {want:.0f}, counted lost {lost:.0f}"
            for what, got, want, lost in checks]
    out += ["", f"Last scrape: {took * 1e3:.1f} ms (bound 100 ms); {sizes}.", "",
            "Result: " + ("every check held." if not failures else
                          "FAILED: " + "; ".join(failures)), ""]
    with open(RESULTS, "w") as f:
        f.write("\n".join(out))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    sys.exit(main())
