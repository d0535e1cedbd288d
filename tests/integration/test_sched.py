#!/usr/bin/env python3
"""The sched module: per-workload time on a CPU, runnable, asleep, blocked and in I/O wait.

Ground truth: build/schedwork, in a fresh cgroup, sleeps, spins, waits for a vfork child and
reads a loop device with O_DIRECT for known durations, and reports its own CPU clock,
/proc/thread-self/schedstat and monotonic clock at the start of main and at the end.
"""
# plumb-module: sched

import json
import os
import subprocess
import sys
import threading
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (EMULATED, Agent, Cleanup, Runner, SwitchWitness, Void, attempts,  # noqa: E402
                 cpu_usage_s, loop_device, make_cgroup, remove_cgroup, require_root, schedstat,
                 select, settle, steal_seconds, value)

SCHEDWORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                         "schedwork")
METRICS = {"run": "plumb_sched_run_seconds_total", "rq": "plumb_sched_runqueue_seconds_total",
           "sleep": "plumb_sched_sleep_seconds_total", "block": "plumb_sched_block_seconds_total",
           "iowait": "plumb_sched_iowait_seconds_total", "steal": "plumb_sched_steal_seconds_total"}
SLEEP_MS, SPIN_MS, VFORK_MS, DIO_MS = 400, 300, 300, 400


def cache_schedwork():
    """An exec that reads the binary from disk blocks before main, where the worker cannot
    see it (the tests/vm guests' root is not in their page cache): read it first."""
    with open(SCHEDWORK, "rb") as f:
        while f.read(1 << 20):
            pass


def run_in(cgroup_dir, *args):
    """Runs schedwork, which moves itself into the cgroup first thing (its time before main,
    exec's, goes there too unless the agent read the thread before the move)."""
    cache_schedwork()
    r = subprocess.run([SCHEDWORK, "--cgroup", cgroup_dir, *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, f"schedwork {args}: exit {r.returncode}: {r.stderr}"
    w = {k: int(v) / 1e9 for k, v in (f.split("=") for f in r.stdout.split())}
    w["move_block"] = w["move_wall"] - w["move_cpu"]  # the move waits for an RCU grace period
    return w


# After the worker's last read of itself it prints, exits and its memory is torn down: time
# the agent counts and the worker cannot report. Emulated guests (tests/vm) take ~10x longer.
AFTER = 0.03 if EMULATED else 0.003


def within(got, want, rel, what, floor=0.0, after=0.0, before=0.0):
    """got within rel of want (or floor), plus up to `after` more that came after want was
    read, or up to `before` less that may have been charged to the cgroup the worker left"""
    assert -max(rel * want, floor) - before <= got - want <= max(rel * want, floor) + after, \
        f"{what}: {got:.4f} s, expected {want:.4f} s ({(got - want) / want:+.2%})"


def unclosed(m):
    """Host-wide: episodes recovered after a switch-in that closed nothing, and lost."""
    return (value(m, "plumb_sched_episodes_recovered_total"),
            value(m, "plumb_events_lost_total", module="sched", reason="wakeup_unseen"))


def got(m, cg):
    return {k: value(m, name, cgroup=cg) for k, name in METRICS.items()}


def sched_lost(m):
    """The sched module's loss counts, by reason."""
    return {dict(k[1])["reason"]: v for k, v in m.items()
            if k[0] == "plumb_events_lost_total" and dict(k[1]).get("module") == "sched"}


def test_accuracy(agent, cleanup):
    """Each kind of time, against the thread's own CPU clock and schedstat and known durations."""
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched")
    steal0 = steal_seconds()
    unclosed0 = unclosed(agent.metrics())
    w = run_in(cg_dir, f"sleep:{SLEEP_MS}", f"spin:{SPIN_MS}", f"vfork:{VFORK_MS}")
    # the worker and its child have exited: one scrape holds their exit records (waiting
    # for a count to come near its truth once took a read from inside the vfork, 2% short)
    m = agent.metrics()
    g = got(m, cg)
    # host-wide, for a miss's message: episodes whose switch-in closed nothing, recovered
    # and lost (blocks 4.44% and 3.57% short in guests, 2026-12-06, were schedwork's: its
    # vfork phase's wall time held its first, slow read of /proc/stat, 7.5 ms in a 6.1 guest)
    recovered, lost = (b - a for a, b in zip(unclosed0, unclosed(m)))
    # the kernel's own counts, read at exit: the ones the worker and its vfork child read of
    # themselves at their ends (the agent's also hold their exits after those reads)
    # (what the worker ran before its move is charged to the cgroup it left when the agent
    # happened to read the thread in between: `before`)
    within(g["run"], w["run"] + w["child_run"], 0.02, "run", after=AFTER, before=w["run0"])
    within(g["rq"], w["rq"] + w["child_rq"], 0.02, "runqueue", floor=0.002, after=AFTER,
           before=w["rq0"])
    # off the CPU, from the scheduler: the worker's sleep and its vfork child's
    within(g["sleep"], (SLEEP_MS + VFORK_MS) / 1000, 0.02, "sleep")
    # the vfork's wall time less the parent's own CPU and run delay in it: woken by the
    # child's exit, it waited for a CPU, runnable, not blocked (18 ms of it, in a 6.12 guest
    # the whole vfork_wall was expected: -5.2%)
    # Where plumb measures steal (kernels that keep it apart), the parent's steal in the vfork
    # (while it ran: the call, and after its wake) is steal, not block, and in none of the
    # parent's own counts: at most the host's steal in that phase, in whole /proc/stat ticks,
    # so one tick more (make test once had block 2.9% short under steal)
    vfork_steal = w["vfork_steal"] + 1 / os.sysconf("SC_CLK_TCK") if g["steal"] > 0 else 0
    within(g["block"], w["vfork_wall"] - w["vfork_cpu"] + w["move_block"], 0.02,
           f"block (the vfork parent's wait and the move's, {w['move_block']:.4f} s; host "
           f"steal in the vfork {w['vfork_steal']:.3f} s; host-wide episodes recovered "
           f"{recovered:.0f}, lost {lost:.0f})", after=AFTER, before=vfork_steal)
    assert g["iowait"] < 0.002, f"iowait {g['iowait']:.4f} s without any I/O"
    # every moment of each thread's life is in exactly one kind (iowait is inside block): the
    # worker's from main on (plus what it ran before main), its child's the vfork wait
    # (steal: on a CPU the hypervisor gave to another guest; kernels with FEAT_STEAL take it
    # out of the CPU time: a CI run came out 1.6% short here before it was counted; it is no
    # more than the whole host's, one tick of /proc/stat's rounding aside)
    life = (w["end"] - w["main"]) + w["run0"] + w["rq0"] + w["vfork_wall"]
    total = g["run"] + g["rq"] + g["sleep"] + g["block"] + g["steal"]
    stolen = steal_seconds() - steal0
    within(total, life, 0.01,
           "run + runqueue + sleep + block + steal against the threads' lives ("
           + ", ".join(f"{k} {g[k]:.4f}" for k in ("run", "rq", "sleep", "block", "steal"))
           + f"; host steal {stolen:.4f})",
           after=2 * AFTER, before=w["run0"] + w["rq0"])
    assert g["steal"] <= stolen + 0.01, \
        f"steal {g['steal']:.4f} s, more than the host's in the test, {stolen:.4f} s"


def test_steal(agent, cleanup):
    """While every CPU is busy, the workloads' steal adds up to the host's (/proc/stat).

    Where the kernel keeps steal apart (plumb agent --check: steal yes) and the hypervisor
    takes some; elsewhere, as in Debian's kernels (no CONFIG_PARAVIRT_TIME_ACCOUNTING), both
    are 0. The idle task's steal is no workload's: with every CPU busy it has none."""
    cg_dir, _ = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/steal")

    def plumb_steal():
        return sum(select(agent.metrics(), METRICS["steal"]).values())

    p0, h0 = plumb_steal(), steal_seconds()
    busy = [subprocess.Popen(["sh", "-c", f"echo $$ > {cg_dir}/cgroup.procs; "
                              "exec timeout 3 sh -c 'while :; do :; done'"])
            for _ in range(os.cpu_count())]
    for b in busy:
        b.wait(timeout=60)
    h1 = steal_seconds()
    time.sleep(1)  # the loops' exit records, on the agent's next tick
    p1 = plumb_steal()
    print(f"  steal while busy: plumb {p1 - p0:.4f} s, the host's {h1 - h0:.4f} s")
    assert abs((p1 - p0) - (h1 - h0)) <= 0.01 + 0.05 * (h1 - h0), \
        f"steal {p1 - p0:.4f} s, the host's {h1 - h0:.4f} s"


def switches_unseen(agent, cleanup):
    """(plumb's count over 5 s, the tracer's count strictly inside its two reads, over them,
    CPUs first traced inside)"""
    witness = SwitchWitness(cleanup, buffer_kb=8192)
    assert witness.dir, "no tracefs instance for the switch witness"
    time.sleep(1)  # a CPU first traced after the first read allows one more (below)

    def unseen():
        t0 = time.monotonic()
        n = value(agent.metrics(), "plumb_events_lost_total", module="sched",
                  reason="switch_unseen")
        return t0, n, time.monotonic()

    try:
        a0, n0, b0 = unseen()
        time.sleep(5)
        a1, n1, b1 = unseen()
        witness.stop()
        lost = witness.overrun()
        assert lost == 0, f"the witness lost {lost} trace events: raise its buffer"
        inside, _ = witness.unseen_switches(b0, a1)
        over, first = witness.unseen_switches(a0, b1)
    finally:
        witness.close()
    print(f"  switches not traced in 5 s: plumb {n1 - n0:.0f}, the tracer {inside} "
          f"({over} with the reads; {first} CPUs first traced inside)")
    return n1 - n0, inside, over, first


def test_switches_unseen(agent, cleanup):
    """Switches the kernel did not trace, counted: the agent's count of switches whose leaving
    thread is not the one its CPU's last traced switch brought in, against the same count
    over the kernel's own tracer (every switch, SwitchWitness) in the same interval.

    This project's machines hide ~2 a second (a Firecracker guest's kernel: no switch away
    from its PID 1 threads is traced); Debian's kernels in the tests/vm guests none: both
    counts 0 there. The count is read between two moments on the trace's clock: never more
    than the tracer's count over the two reads (one more for each CPU the tracer first saw
    switch between them): plumb invents no gap. Alone, it equalled the tracer's count
    strictly inside the reads in every run (~30); inside make test, in bursts at three to five
    times the usual rate, it was a few short four times (57/62, 35/36, 37/39, 44/48), the
    tracer reporting no overrun: which side missed what is not known (docs/metrics.md). So
    at least 90% of the tracer's count, not all of it."""
    n, inside, over, first = switches_unseen(agent, cleanup)
    assert 0.9 * inside <= n <= over + first, \
        f"plumb counted {n:.0f} switches not traced, the tracer {inside} to {over + first}"


def test_iowait(agent, cleanup):
    """O_DIRECT reads of a loop device: blocked in I/O wait, all of it.

    The ground truth here is only a bound: the reads' wall time less the thread's CPU and
    run-queue time was 3-4% (up to 14% under load) above the blocked time measured, while
    the vfork wait above matches to 0.1%: some of the reads' wall time is in none of the
    kernel's per-thread counts (interrupt time taken out of the thread's CPU time is the likely
    part; not settled)."""
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched-dio")
    dev = loop_device(cleanup)
    steal0 = steal_seconds()
    w = run_in(cg_dir, f"dio:{dev}:{DIO_MS}")
    g = got(agent.metrics(), cg)  # the worker has exited: one scrape holds it whole
    # on a CPU the hypervisor took (steal) the worker was neither running, runnable nor
    # blocked: the reads' wall time less that too (no more than the whole host's)
    stolen = steal_seconds() - steal0
    assert g["steal"] <= stolen + 0.01, \
        f"steal {g['steal']:.4f} s, more than the host's in the test, {stolen:.4f} s"
    bound = w["dio_wall"] - w["dio_cpu"] - g["steal"] + w["move_block"]
    assert 0.8 * bound <= g["block"] <= 1.01 * bound + AFTER, \
        f"block {g['block']:.4f} s, the reads' off-CPU wall time {bound:.4f} s (wall " \
        f"{w['dio_wall']:.4f}, on a CPU or runnable {w['dio_cpu']:.4f}, steal {g['steal']:.4f})"
    # (the exit after the worker's last read may block outside I/O wait: `before`)
    within(g["iowait"], g["block"] - w["move_block"], 0.02,
           "iowait (all of the block time but the move's)", before=AFTER)


def test_cgroup_grace(agent, cleanup):
    """A removed cgroup keeps its counts for the grace period (3 s here), then disappears."""
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched-gone")
    run_in(cg_dir, "sleep:100")
    m = settle(agent, lambda m: value(m, METRICS["sleep"], cgroup=cg) >= 0.098)
    sleep = value(m, METRICS["sleep"], cgroup=cg)
    assert sleep >= 0.098, f"sleep {sleep:.4f} s"
    os.rmdir(cg_dir)
    t0 = time.time()
    time.sleep(1)
    m = agent.metrics()
    assert value(m, METRICS["sleep"], cgroup=cg) == sleep, "dropped or changed before grace"
    m = settle(agent, lambda m: not select(m, METRICS["sleep"], cgroup=cg), 10)
    assert not select(m, METRICS["sleep"], cgroup=cg), "still there after grace"
    assert time.time() - t0 >= 3, "removed before the 3 s grace period"


def short_lived(cg_dir):
    """A process that joins cg_dir, spins 20 ms and exits; then the cgroup is removed: it
    lives tens of milliseconds (a fork, not an exec, also in the emulated guests)."""
    pid = os.fork()
    if pid == 0:
        try:
            with open(os.path.join(cg_dir, "cgroup.procs"), "w") as f:
                f.write("0")
            end = time.monotonic() + 0.02
            while time.monotonic() < end:
                pass
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    remove_cgroup(cg_dir)


def test_cgroup_unnamed(agent, cleanup):
    """A cgroup removed before the agent could name it (its path read from cgroupfs) has its
    time in no series: counted as lost (reason cgroup_unnamed) when it is dropped."""
    lost = "plumb_events_lost_total"
    before = value(agent.metrics(), lost, module="sched", reason="cgroup_unnamed")
    unnamed = 0
    for i in range(5):
        cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched-brief-{i}")
        short_lived(cg_dir)
        # removed already: a scrape cannot name it now, only show it if it was named before
        unnamed += not select(agent.metrics(), METRICS["run"], cgroup=cg)
    print(f"  {unnamed} of 5 short-lived cgroups removed before the agent named them")
    assert unnamed, "every short-lived cgroup was named: nothing to show"
    # dropped 5 s after first seen (never named) plus the 3 s grace, checked every second
    m = settle(agent, lambda m: value(m, lost, module="sched", reason="cgroup_unnamed") -
               before >= unnamed, timeout=20)
    got = value(m, lost, module="sched", reason="cgroup_unnamed") - before
    assert got >= unnamed, f"{got:.0f} unnamed cgroups counted lost, {unnamed} removed"


# A process that touches MIB of memory, says so, and exits at a byte on stdin without
# freeing it: do_exit tears it down after PF_EXITING. The kernel faults the pages in
# (MADV_POPULATE_WRITE, 5.14): a memset is 13 s of CPU for 450 MiB in an emulated guest.
BIG_EXIT = r"""
import mmap, os, sys
n = int(sys.argv[1]) << 20
m = mmap.mmap(-1, n)
try:
    m.madvise(23)  # MADV_POPULATE_WRITE
except OSError:
    for i in range(0, n, mmap.PAGESIZE):
        m[i] = 1
print("ready", flush=True)
sys.stdin.read(1)
os._exit(0)
"""


def mem_available_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def slow_exit(cleanup, agent):
    """One attempt: the exit's window, the scrapes in it, and the cgroup's CPU time."""
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched-exit")
    mib = min(2048, mem_available_mib() // 4)
    lost = "plumb_events_lost_total"
    missed0 = value(agent.metrics(), lost, module="sched", reason="exit_missed")

    def join():
        with open(os.path.join(cg_dir, "cgroup.procs"), "w") as f:
            f.write("0")
    p = subprocess.Popen([sys.executable, "-c", BIG_EXIT, str(mib)], preexec_fn=join,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cleanup.add(lambda: p.poll() is None and p.kill())
    assert p.stdout.readline().strip() == "ready", "the worker did not start"
    agent.metrics()  # a read that knows the thread
    scrapes, done = [], threading.Event()

    def scrape():
        while not done.is_set():
            a = time.monotonic()
            agent.metrics()
            scrapes.append((a, time.monotonic()))
    t = threading.Thread(target=scrape)
    t.start()
    try:
        p.stdin.write("x")
        p.stdin.flush()
        exiting = zombie = None
        while zombie is None:  # PF_EXITING (stat's 9th field), then the zombie
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            now = time.monotonic()
            if exiting is None and int(fields[6]) & 0x4:
                exiting = now
            if fields[0] in "ZX":
                zombie = now
    finally:
        done.set()
        t.join()
    p.wait()
    # the scrape reads the threads as it starts (when the last read is 100 ms old)
    inside = sum(exiting <= a < zombie for a, _ in scrapes)
    print(f"  {mib} MiB torn down in {(zombie - exiting) * 1e3:.0f} ms (PF_EXITING to zombie, "
          f"seen); {inside} scrapes began inside")
    if not inside:
        raise Void(f"no scrape began inside the exit's {(zombie - exiting) * 1e3:.0f} ms")
    m = agent.metrics()
    run, usage = value(m, METRICS["run"], cgroup=cg), cpu_usage_s(cg_dir)
    # what the exit runs after its record (files, the parent's notice) is in cpu.stat only
    print(f"  run {run:.4f} s, the cgroup's cpu.stat {usage:.4f} s")
    within(run, usage, 0.02, "run against the cgroup's cpu.stat", before=AFTER)
    missed = value(m, lost, module="sched", reason="exit_missed") - missed0
    assert missed == 0, f"{missed:.0f} exits counted missed"


def test_slow_exit(agent):
    """A process whose exit takes long (its memory torn down between PF_EXITING, when the
    iterator stops reading its counts, and its exit record) is counted once."""
    attempts(5, slow_exit, agent)


def test_threads_before_agent(cleanup):
    """A thread older than the agent counts from the agent's start, not from its own."""
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched-old")

    def join():
        with open(os.path.join(cg_dir, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    # the agent must be up before the spin ends (a wait that began before it is not counted):
    # under emulation the agent takes seconds to load (5.4 s seen in a 6.1 guest)
    spin_ms = 12000 if EMULATED else 2500
    p = subprocess.Popen([SCHEDWORK, f"spin:{spin_ms}", f"sleep:{SLEEP_MS}"], preexec_fn=join,
                         stdout=subprocess.PIPE, text=True)
    cleanup.add(lambda: p.poll() is None and p.kill())
    time.sleep(0.5)
    before = schedstat(p.pid)[0]
    agent = Agent(cleanup, "--modules", "sched", wait_for_module=False)
    after = schedstat(p.pid)[0]
    assert after < spin_ms / 1000 * 0.9, \
        f"the agent came up {after:.1f} s into a {spin_ms / 1000} s spin: too late to see the sleep"
    out, _ = p.communicate(timeout=60)
    w = {k: int(v) / 1e9 for k, v in (f.split("=") for f in out.split())}
    m = agent.metrics()  # the worker has exited: one scrape holds it whole
    run = value(m, METRICS["run"], cgroup=cg)
    # attached between the two reads: counted from then on, up to the end (+ its exit)
    assert w["run"] - after - 0.005 <= run <= w["run"] - before + 0.005, \
        f"run {run:.3f} s: expected {w['run'] - after:.3f}..{w['run'] - before:.3f}"
    within(value(m, METRICS["sleep"], cgroup=cg), SLEEP_MS / 1000, 0.02, "sleep")


def test_hidden_sleep(cleanup):
    """Sleep as the remainder counts from a base, a moment at which all of a thread's counts
    are known: a new thread's first enqueue; for one older than the agent, a read while it is
    off a CPU, or while on one since a switch-in the agent saw. A thread older than the agent
    whose switch-ins are not traced (PLUMB_TEST_MISS_SWITCH_IN=hide: none to a thread named
    miss-switch-in, as this project's machines trace none after their PID 1 threads), which
    spins (SCHED_FIFO, seldom off its CPU) and then sleeps, gets its base at its first
    switch-out instead. Its sleep is whole: before, it counted from the first read after the
    sleep began, or not at all (a make test run: 0.1431 s of 0.4 s)."""
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched-hidden")
    link = os.path.join(tempfile.mkdtemp(prefix="plumb-it-", dir="/tmp"), "miss-switch-in")
    os.symlink(os.path.abspath(SCHEDWORK), link)  # exec'd by this name: its comm
    cleanup.add(lambda: (os.unlink(link), os.rmdir(os.path.dirname(link))))
    cache_schedwork()
    spin_ms = 12000 if EMULATED else 2500  # the agent up before the spin ends
    p = subprocess.Popen(["chrt", "-f", "1", link, "--cgroup", cg_dir, f"spin:{spin_ms}",
                          f"sleep:{SLEEP_MS}"], stdout=subprocess.PIPE, text=True)
    cleanup.add(lambda: p.poll() is None and p.kill())
    time.sleep(0.3)
    env = {**os.environ, "PLUMB_TEST_MISS_SWITCH_IN": "hide"}
    agent = Agent(cleanup, "--modules", "sched", wait_for_module=False, env=env)
    settle(agent, lambda m: value(m, "plumb_module_up", module="sched") == 1, timeout=10)
    up = schedstat(p.pid)[0]
    assert up < spin_ms / 1000 * 0.9, \
        f"the agent came up {up:.1f} s into a {spin_ms / 1000} s spin: too late"
    unseen0 = value(agent.metrics(), "plumb_events_lost_total", module="sched",
                    reason="switch_unseen")
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, f"schedwork: exit {p.returncode}"
    # its exit's switch, the one most sure to be counted unseen, may follow the first scrape
    m = settle(agent, lambda m: value(m, "plumb_events_lost_total", module="sched",
                                      reason="switch_unseen") > unseen0, timeout=5)
    unseen = value(m, "plumb_events_lost_total", module="sched", reason="switch_unseen")
    assert unseen > unseen0, "no switch unseen: nothing hidden"
    within(value(m, METRICS["sleep"], cgroup=cg), SLEEP_MS / 1000, 0.02, "sleep", after=AFTER)
    agent.stop()


def test_live(agent, cleanup):
    """Read every ~0.1 s while it spins, then while it sleeps: a running thread gains no sleep
    (where sleep is the rest of its time, a read must not take the kernel's CPU time, up to a
    tick behind on a running thread, for the whole of it), a sleeping one's grows as it
    sleeps, and the end is exact."""
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched-live")
    spin_ms, sleep_ms = 1000, 1500
    cache_schedwork()
    p = subprocess.Popen([SCHEDWORK, "--cgroup", cg_dir, f"spin:{spin_ms}", f"sleep:{sleep_ms}"],
                         stdout=subprocess.PIPE, text=True)
    cleanup.add(lambda: p.poll() is None and p.kill())
    lost0 = sched_lost(agent.metrics())
    start, seen = time.monotonic(), []
    while p.poll() is None:
        seen.append((time.monotonic(), value(agent.metrics(), METRICS["sleep"], cgroup=cg)))
        time.sleep(0.1)
    end = time.monotonic()
    out, _ = p.communicate(timeout=60)
    w = {k: int(v) / 1e9 for k, v in (f.split("=") for f in out.split())}
    # the spin from its start, by the worker's clock (main, then its move into the cgroup),
    # for spin_ms; the sleep runs to the end
    spun = w["main"] + w["move_wall"]
    spinning = [v for t, v in seen if spun <= t < spun + 0.8 * spin_ms / 1000]
    asleep = [v for t, v in seen if end - 0.8 * sleep_ms / 1000 < t < end - 0.3]
    assert spinning and asleep, f"too few reads: {len(seen)} in {end - start:.1f} s"
    # no growth while it spins, from the first read inside the spin: the time before it may
    # hold sleep of its own where sleep is the rest of the time (the move's wait for a grace
    # period, 10-36 ms in the guests, when the agent did not read the thread before it; exec's
    # page faults; a 6.1 guest once had 1.5 ms of sleep in a read while it spun, when the test
    # took every read from the worker's start)
    print(f"  {len(spinning)} reads while it spun: sleep {spinning[0] * 1e3:.3f} ms at the "
          f"first, up to {max(spinning) * 1e3:.3f} ms")
    assert max(spinning) - spinning[0] < 0.001, \
        f"sleep grew while it spun: {[round(v * 1e3, 3) for v in spinning]} ms"
    m = agent.metrics()
    g = got(m, cg)
    # what a failure needs to be understood: every read (seconds before the exit was seen),
    # the end, and the losses counted meanwhile
    reads = " ".join(f"{t - end:+.2f}:{v:.4f}" for t, v in seen)
    lost = {k: v - lost0.get(k, 0) for k, v in sched_lost(m).items() if v > lost0.get(k, 0)}
    assert any(0.1 < v < 0.9 * sleep_ms / 1000 for v in asleep), \
        f"sleep not growing while it slept: reads {reads}; at the end {g['sleep']:.4f} s; " \
        f"lost meanwhile {lost}"
    within(g["sleep"], sleep_ms / 1000, 0.02, f"sleep after {len(seen)} reads")
    within(g["run"], w["run"], 0.02, "run", after=AFTER, before=w["run0"])


MOVED_WORKER = """
import json, os, sys, time
def schedstat():
    with open("/proc/thread-self/schedstat") as f:
        return [int(x) / 1e9 for x in f.read().split()[:2]]
sleeps = []
for _ in range(int(sys.argv[1])):
    os.sched_setaffinity(0, {0})
    t = time.thread_time() + 0.1
    while time.thread_time() < t:
        pass
    os.sched_setaffinity(0, set(range(os.cpu_count())))
    (run0, rq0), t0 = schedstat(), time.monotonic()
    time.sleep(0.3)
    (run1, rq1), t1 = schedstat(), time.monotonic()
    sleeps.append((t1 - t0, run1 - run0, rq1 - rq0))
os.kill(int(sys.argv[2]), 9)  # the spinner: nothing keeps this one from its CPU at its exit
print(json.dumps({"sleeps": sleeps, "run": schedstat()[0], "rq": schedstat()[1]}))
"""


def test_moved_sleeper(agent, cleanup):
    """A sleeper moved to another CPU while EEVDF delays its dequeue: Debian's 6.12 stamps it
    queued there and its wakeup keeps the stamp, so the kernel counts the whole sleep as run
    delay (tests/vm/delayed-dequeue.py; bpf/sched.bpf.c sched_migrate_task). The worker's
    pattern is that script's: it spins on CPU 0 beside a spinner pinned there (its lag
    negative), is allowed on every CPU, and sleeps 0.3 s, 10 times. plumb's sleep must be the
    sleeps whole and its run queue the kernel's less what the kernel took of them (a sleep
    that gained more than half its length of run delay: 0.2998-0.2999 s each when seen). On
    kernels without the bug (6.1, 6.18) none is taken and the check is the plain one. The
    worker kills the spinner before its last read: once, in a 6.12 guest with no sleep taken,
    plumb's runqueue came out 0.129 s above that read, most likely a wait for a CPU behind
    the spinner between the read and the exit."""
    cg_dir, cg = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/sched-moved-{time.time_ns()}")
    spinner = subprocess.Popen([sys.executable, "-c",
                                "import os\nos.sched_setaffinity(0, {0})\nwhile True: pass"])
    cleanup.add(lambda: spinner.poll() is None and (spinner.kill(), spinner.wait()))
    stale0 = value(agent.metrics(), "plumb_sched_stale_enqueues_total")
    procs = os.path.join(cg_dir, "cgroup.procs")
    p = subprocess.run([sys.executable, "-c", MOVED_WORKER, "10", str(spinner.pid)],
                       capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: open(procs, "w").write(str(os.getpid())))
    spinner.kill()
    spinner.wait()
    assert p.returncode == 0, f"worker: exit {p.returncode}: {p.stderr}"
    w = json.loads(p.stdout)
    m = agent.metrics()
    g = got(m, cg)
    stale = [rq for _, _, rq in w["sleeps"] if rq > 0.15]
    want_sleep = sum(wall - run - (rq if rq <= 0.15 else 0) for wall, run, rq in w["sleeps"])
    seen = value(m, "plumb_sched_stale_enqueues_total") - stale0
    print(f"  the kernel counted {len(stale)} of {len(w['sleeps'])} sleeps as run delay "
          f"({' '.join(f'{x:.4f}' for x in stale)} s); stale enqueues seen {seen:.0f}")
    within(g["sleep"], want_sleep, 0.02, f"sleep ({len(stale)} counted by the kernel as run "
           f"delay; stale enqueues seen {seen:.0f})", after=0.02)
    within(g["rq"], w["rq"] - sum(stale), 0.02, "runqueue, less the sleeps the kernel took",
           floor=0.005, after=AFTER)
    assert seen >= len(stale), f"{len(stale)} sleeps taken by the kernel, {seen:.0f} seen"


def check_mode(agent, remainder):
    """The agent took sleep as the rest of the threads' time (remainder) or timed each sleep."""
    out = agent.output()
    said = "sleep the rest of each thread's time" in out
    assert said == remainder, f"expected sleep {'as the rest' if remainder else 'timed'}: {out}"


def sleep_remainder_available():
    r = subprocess.run([os.path.join(os.path.dirname(SCHEDWORK), "plumb"), "agent", "--check",
                        "--modules", "sched"], capture_output=True, text=True, timeout=120)
    rows = [line.split() for line in r.stdout.splitlines()]
    return any(row[:2] == ["sleep_remainder", "yes"] for row in rows)


def episodes_pass(runner, cleanup):
    """The accuracy tests again with every sleep timed (the wait module's way, and kernels'
    without the remainder's needs): PLUMB_TEST_HIDE=sleep_remainder."""
    os.environ["PLUMB_TEST_HIDE"] = "sleep_remainder"
    try:
        agent = Agent(cleanup, "--modules", "sched", wait_for_module=False)
    finally:
        del os.environ["PLUMB_TEST_HIDE"]
    settle(agent, lambda m: value(m, "plumb_module_up", module="sched") == 1, timeout=10)
    check_mode(agent, False)
    runner.run("sched (sleeps timed): each kind of time, exact", test_accuracy, agent, cleanup)
    runner.run("sched (sleeps timed): read while running, asleep", test_live, agent, cleanup)
    runner.run("sched (sleeps timed): a sleeper moved while its dequeue was delayed",
               test_moved_sleeper, agent, cleanup)
    agent.stop()


def main():
    require_root()
    runner = Runner()
    cleanup = Cleanup()
    try:
        remainder = sleep_remainder_available()
        print(f"  this kernel: sleep {'as the rest of the time' if remainder else 'timed'}")
        agent = Agent(cleanup, "--modules", "sched", "--cgroup-grace", "3s",
                      wait_for_module=False)
        settle(agent, lambda m: value(m, "plumb_module_up", module="sched") == 1, timeout=10)
        assert "module sched: up" in agent.output(), agent.output()
        check_mode(agent, remainder)
        runner.run("sched: each kind of time, exact", test_accuracy, agent, cleanup)
        runner.run("sched: read while running, asleep", test_live, agent, cleanup)
        runner.run("sched: a sleeper moved while its dequeue was delayed", test_moved_sleeper,
                   agent, cleanup)
        runner.run("sched: O_DIRECT reads are I/O wait", test_iowait, agent, cleanup)
        runner.run("sched: steal, the host's", test_steal, agent, cleanup)
        runner.run("sched: switches the kernel did not trace, counted", test_switches_unseen,
                   agent, cleanup)
        runner.run("sched: removed cgroup kept for the grace period", test_cgroup_grace, agent,
                   cleanup)
        runner.run("sched: a cgroup removed before it was named, counted lost",
                   test_cgroup_unnamed, agent, cleanup)
        runner.run("sched: a process slow to exit, counted once", test_slow_exit, agent)
        runner.run("sched: threads older than the agent", test_threads_before_agent, cleanup)
        if remainder:
            agent.stop()
            runner.run("sched: a thread whose switch-ins are not traced, its sleep whole",
                       test_hidden_sleep, cleanup)
            episodes_pass(runner, cleanup)
    except Exception as e:
        runner.failed += 1
        print(f"FAIL setup: {e}")
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
