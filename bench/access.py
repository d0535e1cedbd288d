#!/usr/bin/env python3
"""What one memory access costs a BPF program here: bench/access.bpf.c's programs on
sched_switch, each alone beside a context-switch storm (stress-ng --switch on the last CPU),
kernel.bpf_stats_enabled=1 (restored); ns per run over PLUMB_BENCH_ACCESS_ROUNDS (default 7)
rounds, the programs' order alternating: the median of the rounds and the median of each
round's difference from the empty program. Writes bench/results/access.md.

Where the kernel flushes the TLB at every entry (page-table isolation without PCID: the
`pti` and `pcid` flags in the machine line), the first touch of each non-global page after an
entry should be a page walk, nested under a hypervisor: a per-event cost that follows the
pages touched rather than the instructions. The rows tell such a machine kind from others;
the last two (two dependent reads, one page or two) tell a page's cost from a cache line's.
"""

import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab import RESULTS, hold_off, hold_on, machine  # noqa: E402
from benchlib import prog_stats  # noqa: E402

BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build")
OBJ = os.path.join(BUILD, "access.bpf.o")
ROUNDS = int(os.environ.get("PLUMB_BENCH_ACCESS_ROUNDS", "7"))
SECONDS = 3
PROGRAMS = [
    ("access_none", "nothing (an empty program: the floor)"),
    ("access_task", "a field of `prev` (task_struct)"),
    ("access_rodata", "a global in .rodata"),
    ("access_bss", "a global in .bss"),
    ("access_per_cpu", "a per-CPU array's value (the handover gate's first read)"),
    ("access_by_cpu", "a plain array's value at the CPU's index"),
    ("access_gate", "the handover gate (its per-CPU value and a .rodata global)"),
    ("access_data", "a global in .data (the first of the next two rows' reads)"),
    ("access_line", "two dependent reads of .data, 2048 bytes apart (the same page)"),
    ("access_page", "two dependent reads of .data, 4096 bytes apart (two pages)"),
]


def one(name, cpu):
    hold = hold_on([os.path.join(BUILD, "hold"), OBJ, name])
    try:
        t0, n0 = prog_stats(hold.pid, {name}).get(name, (0, 0))
        subprocess.run(["taskset", "-c", cpu, "stress-ng", "--switch", "1", "--timeout",
                        f"{SECONDS}s", "--quiet"], check=True)
        t1, n1 = prog_stats(hold.pid, {name}).get(name, (0, 0))
    finally:
        hold_off(hold)
    if n1 <= n0:
        raise RuntimeError(f"{name} did not run")
    return (t1 - t0) / (n1 - n0)


def main():
    if os.geteuid() != 0:
        sys.exit("access.py: needs root (BPF, sysctl)")
    missing = [t for t in ("bpftool", "stress-ng", "taskset", "sysctl") if not shutil.which(t)]
    missing += [f for f in (OBJ, os.path.join(BUILD, "hold")) if not os.path.exists(f)]
    if missing:
        sys.exit(f"access.py: missing {', '.join(missing)}: scripts/install-deps.sh, then "
                 "make build/hold build/access.bpf.o")
    cpu = str(os.cpu_count() - 1)
    old = subprocess.run(["sysctl", "-n", "kernel.bpf_stats_enabled"], check=True,
                         capture_output=True, text=True).stdout.strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    runs = {name: [] for name, _ in PROGRAMS}
    try:
        for r in range(ROUNDS):
            order = PROGRAMS if r % 2 == 0 else PROGRAMS[::-1]
            for name, _ in order:
                runs[name].append(one(name, cpu))
            print(f"round {r + 1}: " + ", ".join(f"{n} {v[-1]:.0f}" for n, v in runs.items()),
                  flush=True)
    finally:
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={old}"], check=True)
    lines = [
        "# What one memory access costs a BPF program here", "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in machine().items()) + ".", "",
        "bench/access.bpf.c: programs on `sched_switch` that each read one thing and return, "
        f"each attached alone (build/hold) beside `stress-ng --switch 1` on CPU {cpu} for "
        f"{SECONDS} s, `kernel.bpf_stats_enabled=1` (restored): ns per run (the statistics' two "
        f"clock reads included, as in the empty program's), {ROUNDS} rounds, the order "
        "alternating; the median of the rounds, and the median of each round's difference "
        "from the empty program.", "",
        "| the program reads | ns per run (median) | over the empty program | rounds |",
        "|---|---|---|---|",
    ]
    for name, what in PROGRAMS:
        m = statistics.median(runs[name])
        d = statistics.median(v - e for v, e in zip(runs[name], runs["access_none"]))
        lines.append(f"| {what} | {m:.0f} | {round(d):+d} | "
                     + ", ".join(f"{v:.0f}" for v in runs[name]) + " |")
    lines.append("")
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "access.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
