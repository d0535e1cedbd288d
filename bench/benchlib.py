"""Pieces the benchmarks share beyond tests/integration/lib.py: running a command inside a
cgroup, checking that the tools a benchmark needs are there, and reading the BPF programs'
run statistics.

The agent, the Prometheus server, cgroups, loop mounts and the Cleanup stack come from
tests/integration/lib.py, so that benchmarks and tests start and undo them the same way.
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from lib import (PLUMB, Agent, Cleanup, Prometheus, free_port, make_cgroup,  # noqa: E402,F401
                 mount_image, sh)


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


def bpf_stats_on(cleanup):
    """kernel.bpf_stats_enabled=1 until cleanup runs, which puts back what it was."""
    old = subprocess.run(["sysctl", "-n", "kernel.bpf_stats_enabled"], check=True,
                         capture_output=True, text=True).stdout.strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    cleanup.add(subprocess.run, ["sysctl", "-q", f"kernel.bpf_stats_enabled={old}"])


def programs_during(pid, names, work):
    """work()'s result, and {name: (run time ns, runs)} of those of the programs called names
    that process pid holds which ran meanwhile (with bpf_stats_on())."""
    before = prog_stats(pid, names)
    result = work()
    after = prog_stats(pid, names)
    ran = {}
    for name in names:
        t0, n0 = before.get(name, (0, 0))
        t1, n1 = after.get(name, (0, 0))
        if n1 > n0:
            ran[name] = (t1 - t0, n1 - n0)
    return result, ran


def prog_stats(pid, names):
    """{program name: (run time ns, run count)} of the programs called names that process pid
    holds (bpftool lists the holders' pids where it can), from kernel.bpf_stats_enabled."""
    progs = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], check=True,
                                      capture_output=True, text=True).stdout)
    out = {}
    for p in progs:
        pids = [x.get("pid") for x in p.get("pids", [])]
        if p.get("name") not in names or (pids and pid not in pids):
            continue
        t, n = out.get(p["name"], (0, 0))
        out[p["name"]] = (t + p.get("run_time_ns", 0), n + p.get("run_cnt", 0))
    return out
