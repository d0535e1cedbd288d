#!/usr/bin/env python3
"""Does this kernel count a sleep as run delay? A check of the kernel, not of plumb.

A thread spins on CPU 0 beside a spinner pinned there (so that its lag is negative and EEVDF
delays its dequeue when it sleeps), is then allowed on every CPU, and sleeps 0.3 s; its own
/proc/thread-self/schedstat tells how much run delay the kernel added across each sleep.
Debian's 6.12 moves such a sleeper to the idle CPU while its dequeue is delayed and stamps
it queued there; the stamp is never cleared, so its wakeup keeps it and the whole sleep
becomes run delay (3 and 9 of 30 sleeps in two runs, 0.2998-0.2999 s each). 6.1 (no delayed dequeue) and
6.18: 0 of 30. bpf/sched.bpf.c's open_end() says what plumb does about it.

  tests/vm/run.sh build/kernels/6.12.118+deb12-amd64 python3 tests/vm/delayed-dequeue.py 30
"""
import os
import subprocess
import sys
import time


def schedstat():
    with open("/proc/thread-self/schedstat") as f:
        return [int(x) for x in f.read().split()]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    spinner = subprocess.Popen([sys.executable, "-c",
                                "import os\nos.sched_setaffinity(0, {0})\nwhile True: pass"])
    try:
        time.sleep(0.3)
        gains = []
        for _ in range(n):
            os.sched_setaffinity(0, {0})
            t = time.thread_time() + 0.1
            while time.thread_time() < t:
                pass
            os.sched_setaffinity(0, set(range(os.cpu_count())))
            before = schedstat()[1]
            time.sleep(0.3)
            gains.append((schedstat()[1] - before) / 1e9)
    finally:
        spinner.kill()
    print("run delay added across each 0.3 s sleep (s): " +
          " ".join(f"{g:.4f}" for g in gains))
    print(f"{os.uname().release}: {sum(g > 0.1 for g in gains)} of {n} sleeps counted as run "
          "delay")


if __name__ == "__main__":
    main()
