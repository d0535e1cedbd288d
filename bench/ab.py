"""A/B benchmark harness: alternating runs, medians, ratios, Markdown with the machine.

    from ab import Bench
    b = Bench("overhead", "fio and the io module")
    b.compare("4 KiB randread, tmpfs", run=lambda: fio(...), metric="IOPS",
              setup_b=start_agent, teardown_b=stop_agent, pairs=5)
    b.write()   # bench/results/overhead.md

Each pair runs A (without) then B (with), alternating the order every other pair so a slow
drift of the machine does not favour either side. The table reports the median of each side,
the median of the per-pair ratios B/A, and every pair's values, so that the noise is visible.
The machine is shared and noisy: read ratios from one run, never an absolute number alone.
compare_windows() does the same for a load that runs throughout, in many short windows.
"""

import datetime
import math
import os
import platform
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def _read(path, default="?"):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def hold_on(cmd):
    """Starts a program that attaches BPF programs and holds them (build/hold, hotpath --hold):
    returns the process once it has printed "attached"; for Bench.compare's setup_b."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    if line != "attached":
        p.kill()
        raise SystemExit(f"{' '.join(cmd)}: {line!r} instead of 'attached'")
    return p


def hold_off(p):
    """Detaches what hold_on started (SIGTERM); for Bench.compare's teardown_b."""
    p.terminate()
    if p.wait(timeout=30):
        raise SystemExit(f"{p.args[0]} exited {p.returncode}")


def machine():
    """A description of the machine, for the results file."""
    cpu, flags = "?", None
    for line in _read("/proc/cpuinfo", "").splitlines():
        if line.startswith("model name") and cpu == "?":
            cpu = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and flags is None:
            flags = set(line.split(":", 1)[1].split())
    mem_kb = 0
    for line in _read("/proc/meminfo", "").splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain", "--", ".."],
                           capture_output=True, text=True).stdout.strip()
    # x86: with page-table isolation and no PCID every kernel entry flushes the kernel's
    # non-global TLB entries, so the first touch of each such page after it is a page walk
    # (bench/access.py measures what a program's reads cost)
    pti = "?" if flags is None else (("on" if "pti" in flags else "off")
                                     + (", pcid" if "pcid" in flags else ", no pcid"))
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "kernel": platform.release(),
        "cpu": f"{cpu}, {os.cpu_count()} CPUs",
        "memory": f"{mem_kb / 1048576:.1f} GiB",
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "page-table isolation": pti,
        "os": _read("/etc/debian_version"),
        "plumb": rev + (" (uncommitted changes)" if dirty else ""),
    }


def _row(label, metric, a, b, higher_is_better, interval=False):
    """Medians and the median of the pairs' ratios B/A; with interval (or from 20 pairs on),
    also the geometric mean of the ratios and its 95% interval (normal, from the spread of
    their logarithms)."""
    row = {
        "label": label, "metric": metric, "a": a, "b": b,
        "ma": statistics.median(a), "mb": statistics.median(b),
        "ratio": statistics.median(y / x for x, y in zip(a, b)), "higher": higher_is_better,
    }
    if interval or len(a) >= 20:
        logs = [math.log(y / x) for x, y in zip(a, b)]
        mean = statistics.mean(logs)
        half = 1.96 * statistics.stdev(logs) / math.sqrt(len(logs))
        row["gmean"] = math.exp(mean)
        row["ci"] = (math.exp(mean - half), math.exp(mean + half))
    return row


def verdict(value, worst, best, bound):
    """Against an upper bound: met when even the interval's worst end is within it, not met
    when even its best end is beyond, otherwise not shown either way by this run. (For a
    lower bound, pass everything negated.)"""
    if worst <= bound:
        return "met"
    if best > bound:
        return "**not met**"
    return ("met by the median, not by the whole interval" if value <= bound
            else "**not met** by the median, within the interval")


class Bench:
    def __init__(self, name, title, intro=""):
        self.name, self.title, self.intro = name, title, intro
        self.sections = []

    def compare(self, label, run, metric, setup_b=None, teardown_b=None, pairs=5,
                higher_is_better=True, interval=False):
        """Runs run() alternately without (A) and with (B) setup_b; returns the median ratio.
        run() may return (value, second): the row's "second" is then the second quantity's
        row, from the same runs (redis-benchmark's rate and its p50 latency)."""
        assert pairs >= 5, "at least five pairs"
        a, b = [], []
        for i in range(pairs):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            for side in order:
                if side == "A":
                    a.append(run())
                else:
                    ctx = setup_b() if setup_b else None
                    try:
                        b.append(run())
                    finally:
                        if teardown_b:
                            teardown_b(ctx)
        second = None
        if isinstance(a[0], tuple):
            second = _row(label, "", [x[1] for x in a], [y[1] for y in b], False, interval)
            a, b = [x[0] for x in a], [y[0] for y in b]
        row = _row(label, metric, a, b, higher_is_better, interval)
        row["second"] = second
        self.sections.append(("ab", row))
        print(f"  {label}: without {row['ma']:.1f} with {row['mb']:.1f} {metric}, "
              f"ratio {row['ratio']:.3f}" + (f", geometric mean {row['gmean']:.3f} (95% "
                                             f"{row['ci'][0]:.3f}-{row['ci'][1]:.3f})"
                                             if "ci" in row else ""), flush=True)
        return row["ratio"]

    def compare_windows(self, label, sample, metric, setup_b, teardown_b, pairs=40,
                        window=1.5, settle=0.5):
        """compare() for a load that runs throughout (the caller starts and stops it): each
        side is a window of `window` s of its rate, d sample() / dt (sample() is a counter that
        only grows), measured `settle` s after plumb started or stopped. The machine's speed
        drifts by 10% within seconds here: pairs of short windows follow it closely, and many
        of them narrow what noise is left, so the row also has the geometric mean of the pairs'
        ratios with its 95% interval (normal, from the spread of their logarithms)."""
        assert pairs >= 5, "at least five pairs"

        def rate():
            time.sleep(settle)
            c0, t0 = sample(), time.monotonic()
            time.sleep(window)
            return (sample() - c0) / (time.monotonic() - t0)

        a, b = [], []
        for i in range(pairs):
            for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
                if side == "A":
                    a.append(rate())
                    continue
                ctx = setup_b()
                try:
                    b.append(rate())
                finally:
                    teardown_b(ctx)
        row = _row(label, metric, a, b, True, interval=True)
        row["windows"] = (pairs, window, settle)
        self.sections.append(("ab", row))
        print(f"  {label}: without {row['ma']:.1f} with {row['mb']:.1f} {metric}, ratio "
              f"{row['ratio']:.3f}, geometric mean {row['gmean']:.3f} (95% "
              f"{row['ci'][0]:.3f}-{row['ci'][1]:.3f})", flush=True)
        return row["ratio"]

    def text(self, markdown):
        self.sections.append(("text", markdown))

    def write(self):
        os.makedirs(RESULTS, exist_ok=True)
        path = os.path.join(RESULTS, self.name + ".md")
        m = machine()
        with open(path, "w") as f:
            f.write(f"# {self.title}\n\n")
            if self.intro:
                f.write(self.intro.strip() + "\n\n")
            f.write("Machine: " + "; ".join(f"{k} {v}" for k, v in m.items()) + ".\n\n")
            ab_rows = [r for kind, r in self.sections if kind == "ab"]
            if ab_rows:
                f.write("| case | metric | without plumb (median) | with plumb (median) "
                        "| ratio with/without (median of pairs) |\n|---|---|---|---|---|\n")
                for r in ab_rows:
                    ci = ""
                    if "ci" in r:
                        ci = (f" (geometric mean {r['gmean']:.3f}, 95% {r['ci'][0]:.3f}-"
                              f"{r['ci'][1]:.3f}; {len(r['a'])} pairs"
                              + (f" of {r['windows'][1]} s windows" if "windows" in r else "")
                              + ")")
                    f.write(f"| {r['label']} | {r['metric']} | {r['ma']:.1f} | {r['mb']:.1f} "
                            f"| {r['ratio']:.3f}{ci} |\n")
                f.write("\nEvery pair (without, with):\n\n")
                for r in ab_rows:
                    pairs = ", ".join(f"({x:.1f}, {y:.1f})" for x, y in zip(r["a"], r["b"]))
                    f.write(f"- {r['label']}: {pairs}\n")
                f.write("\n")
            for kind, t in self.sections:
                if kind == "text":
                    f.write(t.strip() + "\n\n")
        print(f"wrote {path}")
        return path
