"""Pieces the benchmarks share beyond tests/integration/lib.py: running a command inside a
cgroup, and checking that the tools a benchmark needs are there.

The agent, the Prometheus server, cgroups, loop mounts and the Cleanup stack come from
tests/integration/lib.py, so that benchmarks and tests start and undo them the same way.
"""

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
