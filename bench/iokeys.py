#!/usr/bin/env python3
"""What the io module's reads cost the agent as its map fills: the agent's own CPU time while
it holds N (cgroup, mount) keys and nothing else happens, and a scrape's duration, before the
keys exist and at N = CGROUPS x MOUNTS (default 40 x 90 = 3,600 keys on the mounts, and each
cgroup's process makes two more, on / and cgroupfs: ~3,700 of --io-capacity's 4,096).

The agent read its BPF maps every 250 ms (docs/architecture.md): with one bpf() lookup per
key that read grew with the keys; io_stats is now read in batches up to the highest slot in
use and only at scrapes, and io_slots walked only when a key was added or removed.
`--compare PATH` runs a second agent binary beside this one (e.g. an older commit's, built in
a git worktree), both seeing the same keys, measured in turns: PAIRS rounds, medians.
Results in bench/results/iokeys.md with the machine.
"""

import argparse
import os
import statistics
import sys
import time

from ab import RESULTS, machine
from benchlib import Agent, Cleanup, in_cgroup, make_cgroup, require, sh

import lib  # noqa: E402  (tests/integration, on the path through benchlib)


def cpu_seconds(pid):
    """The time process pid's threads have run, s (schedstat: ns, not clock ticks)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def io_keys(agent):
    m = agent.metrics()
    return lib.value(m, "plumb_map_entries", module="io", map="io_stats")


def make_keys(cleanup, tag, cgroups, mounts):
    """cgroups x mounts keys: each cgroup's process reads a byte of a file on each mount."""
    dirs = []
    for j in range(mounts):
        d = f"/tmp/plumb-iokeys-{tag}-{j}"
        lib.mount_tmpfs(cleanup, d, size_mb=1)
        with open(f"{d}/f", "w") as f:
            f.write("x")
        dirs.append(f"{d}/f")
    reader = "import sys\nfor p in sys.argv[1:]:\n    open(p).read(1)\n"
    for i in range(cgroups):
        cg, _ = make_cgroup(cleanup, f"plumb-iokeys-{tag}/c{i}")
        sh(*in_cgroup(cg, [sys.executable, "-c", reader, *dirs]))


def exact(agent, tag, want, name):
    """Every key's series is there with its one byte read: the reads are right, not only fast
    (4,000 keys take several batches of io_stats)."""
    deadline = time.time() + 10
    while True:
        got = [v for labels, v in lib.select(agent.metrics(), "plumb_io_read_bytes_total").items()
               if dict(labels).get("mount", "").startswith(f"/tmp/plumb-iokeys-{tag}-")
               and dict(labels).get("cgroup", "").startswith(f"/plumb-iokeys-{tag}/")]
        if (len(got) == want and all(v == 1 for v in got)) or time.time() > deadline:
            break
        time.sleep(0.5)
    if len(got) != want or any(v != 1 for v in got):
        raise SystemExit(f"{name}: {len(got)} series of {want}, "
                         f"{sum(v == 1 for v in got)} with the one byte read")


def measure(agent, seconds):
    """The agent's CPU share over seconds of quiet, and the median of 10 scrapes, ms."""
    pid = agent.proc.pid
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    share = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    scrapes = []
    for _ in range(10):
        s0 = time.monotonic()
        agent.get("/metrics")
        scrapes.append((time.monotonic() - s0) * 1000)
    return share, statistics.median(scrapes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cgroups", type=int, default=40)
    ap.add_argument("--mounts", type=int, default=90)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--compare", help="another plumb binary, measured beside this one")
    ap.add_argument("--out", default=os.path.join(RESULTS, "iokeys.md"))
    a = ap.parse_args()
    require(["mount"])
    cleanup = Cleanup()
    binaries = [lib.PLUMB] + ([os.path.abspath(a.compare)] if a.compare else [])
    rows = {}  # (binary, phase) -> [(cpu share, scrape ms)]
    want = a.cgroups * a.mounts
    try:
        agents = []
        for b in binaries:
            lib.PLUMB = b  # Agent starts lib.PLUMB
            agents.append(Agent(cleanup, "--modules", "io"))
        lib.PLUMB = binaries[0]
        base = io_keys(agents[0])
        for phase, n in (("before", base), ("keys", None)):
            if n is None:
                make_keys(cleanup, str(os.getpid()), a.cgroups, a.mounts)
                deadline = time.time() + 30
                while io_keys(agents[0]) - base < want and time.time() < deadline:  # at least
                    time.sleep(0.5)
                have = io_keys(agents[0])
                if have - base < want:
                    raise SystemExit(f"only {have - base:.0f} of {want} keys appeared")
                for b, agent in zip(binaries, agents):
                    exact(agent, str(os.getpid()), want, b)
            for _ in range(a.pairs):
                for b, agent in zip(binaries, agents):
                    r = measure(agent, a.seconds)
                    rows.setdefault((b, phase), []).append(r)
                    print(f"  {b} {phase}: cpu {r[0] * 100:.2f}% scrape {r[1]:.1f} ms",
                          flush=True)
    finally:
        cleanup.run()
    m = machine()
    out = [f"# The io module's reads: agent CPU at {have:.0f} keys", "",
           "`python3 bench/iokeys.py" + (" --compare OTHER" if a.compare else "") +
           "` (its docstring says what it does): agents with `--modules io` and nothing "
           f"else, quiet, before and after {a.cgroups} cgroups x {a.mounts} tmpfs mounts "
           f"made keys; {a.pairs} rounds of {a.seconds:.0f} s each, medians.", "",
           "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in m.items()] + [
           "", "| agent | keys | agent CPU | scrape (ms) |", "|---|---|---|---|"]
    for b in binaries:
        for phase, n in (("before", base), ("keys", have)):
            v = rows[(b, phase)]
            out.append(f"| `{os.path.relpath(b, lib.ROOT)}` | {n:.0f} | "
                       f"{statistics.median(r[0] for r in v) * 100:.2f}% | "
                       f"{statistics.median(r[1] for r in v):.1f} |")
    out.append("")
    with open(a.out, "w") as f:
        f.write("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
