"""Shared pieces of plumb's integration tests: the agent, scraping, cgroups, mounts.

Every resource a test makes (cgroups, mounts, loop devices, processes) is registered in a
Cleanup and undone in reverse order when the test ends, also when it fails or is interrupted.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request

# SIGTERM (a CI or harness timeout, a kill) unwinds like Ctrl-C: SystemExit passes every
# `finally`, so the Cleanups of the test under way and of its file run (the benchmarks that
# import this module too); the process still ends with 143, as SIGTERM's default would.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUMB = os.path.join(ROOT, "build", "plumb")
IOWORK = os.path.join(ROOT, "build", "iowork")


class Cleanup:
    def __init__(self):
        self.steps = []

    def add(self, fn, *args):
        self.steps.append((fn, args))

    def run(self):
        while self.steps:
            fn, args = self.steps.pop()
            try:
                fn(*args)
            except Exception as e:  # keep undoing the rest
                print(f"  cleanup: {fn.__name__}{args}: {e}", file=sys.stderr)


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def cgroup2_root():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                return fields[4].replace("\\040", " ")
    raise RuntimeError("no cgroup2 mount in /proc/self/mountinfo")


def make_cgroup(cleanup, rel):
    """Creates <cgroup2 root>/<rel> (and parents); returns (absolute dir, path label)."""
    root = cgroup2_root()
    parts = rel.strip("/").split("/")
    for i in range(len(parts)):
        d = os.path.join(root, *parts[: i + 1])
        if not os.path.isdir(d):
            os.mkdir(d)
            cleanup.add(remove_cgroup, d)
    return os.path.join(root, *parts), "/" + "/".join(parts)


def remove_cgroup(d):
    if not os.path.isdir(d):
        return
    # move stragglers out first: a cgroup with processes cannot be removed
    try:
        with open(os.path.join(d, "cgroup.procs")) as f:
            pids = f.read().split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    except FileNotFoundError:
        return
    for _ in range(50):
        try:
            os.rmdir(d)
            return
        except OSError:
            time.sleep(0.1)
    os.rmdir(d)


def mount_image(cleanup, mountpoint, fstype="ext4", size_mb=64):
    """A loop-mounted image of fstype at mountpoint."""
    img = tempfile.mktemp(prefix="plumb-it-", suffix=".img", dir="/var/tmp")
    with open(img, "wb") as f:
        f.truncate(size_mb << 20)
    cleanup.add(os.unlink, img)
    sh("mkfs." + fstype, "-q", "-F", img) if fstype == "ext4" else sh("mkfs." + fstype, img)
    os.makedirs(mountpoint, exist_ok=True)
    sh("mount", "-o", "loop", img, mountpoint)
    cleanup.add(umount, mountpoint)


def loop_device(cleanup, size_mb=8):
    """A loop device over a fresh image of size_mb (zeros), detached and removed at cleanup."""
    fd, img = tempfile.mkstemp(prefix="plumb-it-", suffix=".img", dir="/tmp")
    os.close(fd)
    cleanup.add(os.unlink, img)
    os.truncate(img, size_mb << 20)
    dev = sh("losetup", "-f", "--show", img).stdout.strip()
    cleanup.add(lambda: sh("losetup", "-d", dev, check=False))
    return dev


def mount_tmpfs(cleanup, mountpoint, size_mb=128):
    os.makedirs(mountpoint, exist_ok=True)
    sh("mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", mountpoint)
    cleanup.add(umount, mountpoint)


def umount(mountpoint):
    for _ in range(50):
        if sh("umount", mountpoint, check=False).returncode == 0:
            break
        time.sleep(0.1)
    else:
        sh("umount", "-l", mountpoint)
    os.rmdir(mountpoint)


def free_port():
    """A port free for TCP and for UDP alike: the kernel's pick for TCP alone was once a port
    an earlier test's UDP server still held (test_flow: EADDRINUSE at its UDP bind)."""
    while True:
        with socket.socket() as s, socket.socket(type=socket.SOCK_DGRAM) as u:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            try:
                u.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port


def read_log(f):
    """All of a child's log file, read without moving its offset: the child's stdout is this
    same open file, so a seek(0) here made the child's next write land at 0, over the start
    of what it had written (seen once: a warning line cut in half, test_webconfig)."""
    fd = f.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


class Agent:
    def __init__(self, cleanup, *args, wait_for_module=True, port=None, env=None):
        self.port = port or free_port()
        self.log = tempfile.TemporaryFile(mode="w+")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [PLUMB, "agent", "--listen", f"127.0.0.1:{self.port}", *args],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        cleanup.add(self.stop)
        # an emulated guest's agent taking maps over (--pin) took 15.8 s to serve in a 6.1
        # guest under the test's writers with three modules, over 60 s with all five: its
        # load, and the old links' release (a tracepoint's unregistering waits for RCU grace
        # periods, per link)
        deadline = time.time() + (180 if EMULATED else 15)
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"agent exited with {self.proc.returncode}: {self.output()}")
            try:
                if self.get("/healthz")[0] == 200 and (
                        not wait_for_module or "module io: up" in self.output()):
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("agent did not come up: " + self.output())

    def output(self):
        return read_log(self.log)

    def get(self, path, method="GET"):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def metrics(self):
        status, _, body = self.get("/metrics")
        assert status == 200, f"/metrics answered {status}"
        return parse_metrics(body)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        refused = refused_syscalls(self.proc.pid, self.started)
        if refused and self.proc.pid not in REFUSED:
            REFUSED[self.proc.pid] = refused
        return self.proc.returncode


# Agents whose seccomp filter refused a syscall: {pid: ["syscall=N", ...]}. Runner.finish()
# fails the file on any: a refused call is a path the filter's list lacks (src/sandbox.c).
REFUSED = {}


def refused_syscalls(pid, since):
    """The syscalls the kernel's audit records (type 1326, action errno) say seccomp refused
    to the agent process pid since the monotonic time since (printk's clock, to a second),
    from the kernel log."""
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    pattern = re.compile(rf"^\[\s*([0-9.]+)\] .*type=1326 .* pid={pid} .*comm=\"plumb\" .* "
                         rf"(syscall=\d+) .* code=0x5[0-9a-f]{{4}}\b")
    return sorted({m.group(2) for m in map(pattern.match, r.stdout.splitlines())
                   if m and float(m.group(1)) >= since - 1})


# What the running agent keeps (src/privileges.c, docs/security.md): CAP_DAC_READ_SEARCH (2),
# CAP_SYS_PTRACE (19), CAP_SYS_ADMIN (21), CAP_PERFMON (38), CAP_BPF (39).
KEPT_CAPS = (1 << 2) | (1 << 19) | (1 << 21) | (1 << 38) | (1 << 39)


def assert_privileges_dropped(pid):
    """Every thread of the agent pid holds only the kept capabilities (effective, permitted,
    bounding; nothing inheritable or ambient), no_new_privs and the seccomp filter; the
    thread names seen."""
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        except FileNotFoundError:
            continue  # a thread that ended since (netns_run's, at a tick)
        names.append(st.get("Name"))
        for field, want in (("CapEff", KEPT_CAPS), ("CapPrm", KEPT_CAPS), ("CapBnd", KEPT_CAPS),
                            ("CapInh", 0), ("CapAmb", 0)):
            got = int(st[field], 16)
            assert got == want, f"thread {tid} {st.get('Name')}: {field} {got:#x}, want " \
                f"{want:#x} (extra: {got & ~want:#x})"
        assert st["NoNewPrivs"].strip() == "1", f"thread {tid}: NoNewPrivs {st['NoNewPrivs']}"
        # 2: a seccomp filter (src/sandbox.c; tests/unit/test_sandbox.c shows what it refuses)
        assert st["Seccomp"].strip() == "2" and int(st["Seccomp_filters"]) >= 1, \
            f"thread {tid}: Seccomp {st['Seccomp']}, filters {st.get('Seccomp_filters')}"
    return names


# netstack's attach windows in an agent's -v log (src/modules/netstack.c), CLOCK_MONOTONIC s
WINDOW_OPENED = re.compile(r"netstack: window opened: attaching from ([0-9.]+) s, .*; "
                           r"following new packets from ([0-9.]+) s")
WINDOW_CLOSED = re.compile(r"netstack: window followed new packets from ([0-9.]+) to ([0-9.]+) "
                           r"s; detached at ([0-9.]+) s")
WINDOW_HANDED = re.compile(r"netstack: handed over at ([0-9.]+) s, following new packets")
WINDOW_RESUMED = re.compile(r"netstack: followed new packets from the hand-over at ([0-9.]+) s "
                            r"to ([0-9.]+) s")


def netstack_windows(output):
    """The windows an agent's -v output tells of: spans [(following from, to)] and detached
    [time] of those closed; attaching and following [time] of those opened (the first
    window, the load's, has no such line); open: one is open now; handed [time] (handed
    over while following) and resumed [(hand-over, attach)]."""
    opened = [(float(a), float(b)) for a, b in WINDOW_OPENED.findall(output)]
    closed = [(float(a), float(b), float(c)) for a, b, c in WINDOW_CLOSED.findall(output)]
    return {"spans": [(a, b) for a, b, _ in closed], "detached": [c for _, _, c in closed],
            "attaching": [a for a, _ in opened], "following": [b for _, b in opened],
            "open": len(opened) == len(closed),
            "handed": [float(x) for x in WINDOW_HANDED.findall(output)],
            "resumed": [(float(a), float(b)) for a, b in WINDOW_RESUMED.findall(output)]}


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def schedstat(tid):
    """A thread's (or process's main thread's) time on a CPU and runnable, waiting for one, so
    far, seconds: /proc/TID/schedstat, the kernel's own."""
    with open(f"/proc/{tid}/schedstat") as f:
        run, delay = f.read().split()[:2]
    return int(run) / 1e9, int(delay) / 1e9


def cpu_usage_s(cgdir):
    """A cgroup's CPU time so far (cpu.stat's usage_usec), seconds: the kernel's own."""
    with open(os.path.join(cgdir, "cpu.stat")) as f:
        for line in f:
            k, v = line.split()
            if k == "usage_usec":
                return int(v) / 1e6
    raise RuntimeError("no usage_usec in cpu.stat")


def steal_seconds(cpu=None):
    """The hypervisor's steal so far, s, of the whole host or of CPU cpu: /proc/stat's 8th
    number on its cpu line (USER_HZ ticks)"""
    tag = "cpu " if cpu is None else f"cpu{cpu} "
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(tag):
                return int(line.split()[8]) / os.sysconf("SC_CLK_TCK")
    raise AssertionError(f"no {tag.strip()} line in /proc/stat")


class SwitchWitness:
    """The kernel's own tracer on context switches: a tracefs instance of the test's own, its
    sched_switch event filtered to the threads named `name`, or every switch (name None). On
    the machines this project is built on (a Firecracker guest, kernel 6.18.44-fc), no
    switch away from the machine's own PID 1 threads (tokio-rt-worker) is traced, to ftrace,
    perf or BPF alike: the thread switched in then has no switch-in event (ftrace, 50 s with
    two CPUs busy: 126 of 19,297 switches, 124 of them from tokio-rt-worker). Such a
    switch-in of a thread shows in its trace as two switch-outs in a row, and on its CPU as
    a switch whose leaving thread is not the one the CPU's last switch brought in. The
    trace's clock is CLOCK_MONOTONIC (time.monotonic())."""

    LINE = re.compile(r" (\d+\.\d+): sched_switch: .* prev_pid=(\d+) prev_prio=-?\d+ "
                      r"prev_state=\S+ ==> next_comm=.* next_pid=(\d+) next_prio=-?\d+$")

    made = 0  # instances made by this process: each its own name

    def __init__(self, cleanup, name=None, buffer_kb=1024):
        self.name, self.dir, self.mounted = name, None, False
        base = "/sys/kernel/tracing"
        if not os.path.isdir(f"{base}/instances"):
            self.mounted = subprocess.run(["mount", "-t", "tracefs", "nodev", base],
                                          capture_output=True).returncode == 0
        cleanup.add(self.close)
        try:
            SwitchWitness.made += 1
            self.dir = f"{base}/instances/plumb-test-{os.getpid()}-{SwitchWitness.made}"
            os.mkdir(self.dir)
            event = f"{self.dir}/events/sched/sched_switch"
            # one clock for every CPU: the trace merges their buffers by it
            settings = [(f"{self.dir}/trace_clock", "mono"),
                        (f"{self.dir}/buffer_size_kb", str(buffer_kb))]
            if name:
                settings.append((f"{event}/filter",
                                 f'prev_comm == "{name}" || next_comm == "{name}"'))
            for path, text in settings + [(f"{event}/enable", "1")]:
                with open(path, "w") as f:
                    f.write(text)
        except OSError as e:  # no tracefs here: nothing is known to be hidden
            print(f"  no switch witness: {e}")
            self.close()

    def hidden_switch_ins(self):
        """Switch-ins of the traced threads the tracer did not see (after their first seen)."""
        if not self.dir:
            return 0
        last, hidden = {}, 0
        with open(f"{self.dir}/trace") as f:
            for line in f:
                fields = dict(x.split("=", 1) for x in line.split() if "=" in x)
                if "sched_switch:" not in line or "prev_pid" not in fields:
                    continue
                for side, way in (("prev", "out"), ("next", "in")):
                    if fields[f"{side}_comm"] != self.name:
                        continue  # the other side of the switch: its switches are not all here
                    tid = fields[f"{side}_pid"]
                    if way == "out" and last.get(tid) == "out":
                        hidden += 1
                    if way == "in" or tid in last:
                        last[tid] = way
        return hidden

    def stop(self):
        """Stops tracing (the trace stays readable until close)."""
        with open(f"{self.dir}/tracing_on", "w") as f:
            f.write("0")

    def overrun(self):
        """Events the instance's buffers lost (overwritten or dropped), over every CPU."""
        n = 0
        for cpu in os.listdir(f"{self.dir}/per_cpu"):
            with open(f"{self.dir}/per_cpu/{cpu}/stats") as f:
                for line in f:
                    key, _, count = line.partition(":")
                    if key in ("overrun", "commit overrun", "dropped events"):
                        n += int(count)
        return n

    def unseen_switches(self, since, until):
        """(unseen, first): with every switch traced (name None), the switches traced between
        since and until (monotonic s) whose leaving thread is not the one their CPU's last
        traced switch brought in (at least one switch on that CPU was not traced before
        them), and the CPUs whose first traced switch falls between the two: whether a switch
        was hidden before that one cannot be told."""
        unseen = first = 0
        for cpu in os.listdir(f"{self.dir}/per_cpu"):
            last = None
            with open(f"{self.dir}/per_cpu/{cpu}/trace") as f:
                for line in f:
                    m = self.LINE.search(line.rstrip("\n"))
                    if not m:
                        continue
                    ts, prev, nxt = float(m.group(1)), m.group(2), m.group(3)
                    if since < ts < until:
                        if last is None:
                            first += 1
                        elif last != prev:
                            unseen += 1
                    last = nxt
        return unseen, first

    def close(self):
        try:
            if self.dir and os.path.isdir(self.dir):
                with open(f"{self.dir}/events/sched/sched_switch/enable", "w") as f:
                    f.write("0")
        finally:
            if self.dir and os.path.isdir(self.dir):
                os.rmdir(self.dir)  # removes the instance, events enabled or not
            self.dir = None
            if self.mounted:
                subprocess.run(["umount", "/sys/kernel/tracing"], capture_output=True)
                self.mounted = False


def parse_metrics(text):
    """{(name, frozenset(labels.items())): value} of a text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"unparsable metrics line: {line!r}"
        labels = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for k, v in LABEL.findall(m.group(3) or "")}
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(4))
    return out


def select(metrics, name, **labels):
    """Values of name whose labels include all of labels, as {frozenset: value}."""
    want = set(labels.items())
    return {k[1]: v for k, v in metrics.items() if k[0] == name and want <= k[1]}


def value(metrics, name, **labels):
    """The single value of name with exactly these labels present (others ignored); 0 if none."""
    found = select(metrics, name, **labels)
    assert len(found) <= 1, f"{name}{labels}: {len(found)} series match"
    return next(iter(found.values()), 0.0)


def iowork(cgroup_dir, *ops):
    """Runs iowork in cgroup_dir; returns what it printed."""
    r = sh(IOWORK, "--cgroup", cgroup_dir, *ops, check=False)
    assert r.returncode == 0, f"iowork failed: {r.stderr.strip()}"
    return r.stdout


class Void(Exception):
    """An attempt whose ground truth the host itself spoiled (its hypervisor's steal, say),
    raised by a test that measured so; attempts() runs it again."""


def attempts(n, fn, *args, pause=0):
    """fn(cleanup, *args) with a fresh Cleanup, up to n times while it raises Void; n voids
    fail. Any other outcome, pass or fail, is the result."""
    for attempt in range(1, n + 1):
        cleanup = Cleanup()
        try:
            return fn(cleanup, *args)
        except Void as e:
            if attempt == n:
                raise AssertionError(f"{n} attempts, each void; the last: {e}")
            print(f"  attempt {attempt} void: {e}" + (f"; again in {pause} s" if pause else ""))
        finally:
            cleanup.run()
        time.sleep(pause)


class Runner:
    """Runs test functions, prints one line each and the closing `N passed, N failed`."""

    def __init__(self):
        self.passed = self.failed = self.host = 0

    def run(self, name, fn, *args):
        t0 = time.time()
        try:
            fn(*args)
        except Exception as e:
            self.failed += 1
            print(f"FAIL {name} ({time.time() - t0:.1f}s): {e}")
            if os.environ.get("PLUMB_TEST_TRACE"):
                traceback.print_exc()
        else:
            self.passed += 1
            print(f"PASS {name} ({time.time() - t0:.1f}s)")
        sys.stdout.flush()

    def run_host(self, reason, name, fn, *args):
        """A test whose code is the same on every kernel (user space only, or what the
        kernel-dependent tests check already): in make test-kernels' guests, where the
        emulated CPUs make it cost minutes, it is listed with its reason and left to the host's
        make test, which CI runs first; everywhere else it runs."""
        if not EMULATED:
            return self.run(name, fn, *args)
        self.host += 1
        print(f"HOST {name}: {reason}")
        sys.stdout.flush()

    def finish(self):
        for pid, calls in REFUSED.items():
            self.failed += 1
            print(f"FAIL agent {pid}: its seccomp filter refused {', '.join(calls)} "
                  "(src/sandbox.c's list lacks them; the kernel log has the records)")
        if self.host:
            print(f"{self.host} on the host only (make test)")
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


def settle(agent, predicate, timeout=5.0):
    """Scrapes until predicate(metrics) holds or timeout; returns the last metrics."""
    deadline = time.time() + timeout
    while True:
        m = agent.metrics()
        if predicate(m) or time.time() > deadline:
            return m
        time.sleep(0.2)


# Set by tests/vm (qemu without KVM): the guest's CPUs are emulated, 10-20x slower than the
# host for kernel work, so a wall-clock bound the product promises on real hardware is
# measured and printed there, not asserted; the same run asserts it on the host kernel.
EMULATED = os.environ.get("PLUMB_TEST_EMULATED", "")


def assert_within(seconds, bound, what):
    """Asserts a wall-clock bound, except under emulation where it prints the time."""
    if EMULATED:
        print(f"  {what}: {seconds:.3f} s (bound {bound} s not asserted under {EMULATED})")
        return
    assert seconds < bound, f"{what}: took {seconds:.3f} s, bound {bound} s"


def require_root():
    if os.geteuid() != 0:
        print("integration tests need root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN): run with sudo")
        print("0 passed, 1 failed")
        sys.exit(1)


class Prometheus:
    """Debian's prometheus on loopback, scraping job `plumb` at target every interval seconds
    (target_port: one port, or a list of ports on 127.0.0.1)."""

    def __init__(self, cleanup, target_port, interval=2):
        ports = target_port if isinstance(target_port, (list, tuple)) else [target_port]
        targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
        self.interval = interval
        self.dir = tempfile.mkdtemp(prefix="plumb-prom-")
        cleanup.add(shutil.rmtree, self.dir)
        self.port = free_port()
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(f"""global:
  scrape_interval: {interval}s
  scrape_timeout: {interval}s
  evaluation_interval: {interval}s
scrape_configs:
  - job_name: plumb
    static_configs:
      - targets: [{targets}]
""")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        cleanup.add(self.stop)
        deadline = time.time() + 30
        while not self._ready():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("prometheus did not become ready: " + self.output())
            time.sleep(0.2)

    def _ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def output(self):
        return read_log(self.log)[-2000:]

    def _api(self, endpoint, **params):
        url = (f"http://127.0.0.1:{self.port}/api/v1/{endpoint}?" +
               urllib.parse.urlencode(params))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        if body["status"] != "success":
            raise RuntimeError(f"{endpoint} {params}: {body}")
        return body["data"]["result"]

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._api("query", **params)

    def query_range(self, expr, start, end, step):
        return self._api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}",
                         step=f"{step}")

    def samples(self, selector, since):
        """The raw (timestamp, value) samples of the one series selector names, from since."""
        now = time.time()
        got = self.query(f"{selector}[{int(now - since) + 1}s]", at=now)
        if len(got) != 1:
            raise RuntimeError(f"{selector}: {len(got)} series")
        return [(float(t), float(v)) for t, v in got[0]["values"] if float(t) >= since]

    def wait_scrapes(self, n, timeout=30, targets=1):
        """Waits until Prometheus holds n scrapes of each of targets agents' own metrics."""
        deadline = time.time() + timeout
        while True:
            got = self.query("count_over_time(plumb_build_info[5m])")
            if len(got) >= targets and all(float(g["value"][1]) >= n for g in got):
                return
            if time.time() > deadline:
                raise RuntimeError(f"fewer than {n} scrapes of the agent after {timeout} s")
            time.sleep(0.5)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Hosts:
    """Test "hosts": network namespaces, each with a veth into a bridge that lives in a namespace
    of its own, so nothing of the machine's own network is touched. Host i (from 1) has
    10.77.0.i/24. Everything goes with the namespaces at cleanup."""

    def __init__(self, cleanup, count):
        tag = os.getpid() % 100000
        self.switch = f"plumb{tag}sw"
        self.names = [f"plumb{tag}h{i}" for i in range(1, count + 1)]
        self.addrs = [f"10.77.0.{i}" for i in range(1, count + 1)]
        sh("ip", "netns", "add", self.switch)
        cleanup.add(sh, "ip", "netns", "del", self.switch)
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")
        for i, (name, addr) in enumerate(zip(self.names, self.addrs), start=1):
            sh("ip", "netns", "add", name)
            cleanup.add(sh, "ip", "netns", "del", name)
            sh("ip", "link", "add", "eth0", "netns", name, "type", "veth", "peer", "name",
               f"port{i}", "netns", self.switch)
            sh("ip", "-n", self.switch, "link", "set", f"port{i}", "master", "br0", "up")
            sh("ip", "-n", name, "addr", "add", f"{addr}/24", "dev", "eth0")
            sh("ip", "-n", name, "link", "set", "eth0", "up")
            sh("ip", "-n", name, "link", "set", "lo", "up")

    def wire_node(self, cleanup):
        """A second "node": a namespace reached from the first node's namespace over a veth
        "wire" (wire0 at both ends, 10.77.255.1-2/30), with a bridge of its own and one pod
        (10.77.1.1/24, appended to names and addrs). Both nodes route between the pod subnets
        (their bridges are the pods' gateways, .254). Returns the pod's index."""
        tag = os.getpid() % 100000
        self.node2 = f"plumb{tag}n2"
        pod = f"plumb{tag}r1"
        sh("ip", "netns", "add", self.node2)
        cleanup.add(sh, "ip", "netns", "del", self.node2)
        sh("ip", "netns", "add", pod)
        cleanup.add(sh, "ip", "netns", "del", pod)
        sh("ip", "link", "add", "wire0", "netns", self.switch, "type", "veth", "peer", "name",
           "wire0", "netns", self.node2)
        sh("ip", "-n", self.node2, "link", "add", "br0", "type", "bridge")
        sh("ip", "link", "add", "eth0", "netns", pod, "type", "veth", "peer", "name", "port1",
           "netns", self.node2)
        sh("ip", "-n", self.node2, "link", "set", "port1", "master", "br0", "up")
        for ns, wire, br, local, remote in ((self.switch, "10.77.255.1", "10.77.0.254",
                                             "10.77.0.0/24", "10.77.1.0/24"),
                                            (self.node2, "10.77.255.2", "10.77.1.254",
                                             "10.77.1.0/24", "10.77.0.0/24")):
            peer = "10.77.255.2" if ns == self.switch else "10.77.255.1"
            sh("ip", "-n", ns, "addr", "add", f"{wire}/30", "dev", "wire0")
            sh("ip", "-n", ns, "addr", "add", f"{br}/24", "dev", "br0")
            for dev in ("wire0", "br0", "lo"):
                sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "route", "add", remote, "via", peer)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "-n", pod, "addr", "add", "10.77.1.1/24", "dev", "eth0")
        sh("ip", "-n", pod, "link", "set", "eth0", "up")
        sh("ip", "-n", pod, "link", "set", "lo", "up")
        sh("ip", "-n", pod, "route", "add", "default", "via", "10.77.1.254")
        for name in self.names:
            sh("ip", "-n", name, "route", "add", "default", "via", "10.77.0.254")
        self.names.append(pod)
        self.addrs.append("10.77.1.1")
        return len(self.names) - 1

    def run(self, i, cgroup_dir, *cmd, **kw):
        """Popen of cmd inside host i (from 0) and cgroup_dir, joined before `ip netns exec`
        (which mounts a sysfs of the namespace over /sys, hiding the cgroup mounts); it execs
        cmd: same pid."""
        def join():
            with open(f"{cgroup_dir}/cgroup.procs", "w") as f:
                f.write("0")
        return subprocess.Popen(["ip", "netns", "exec", self.names[i], *cmd], preexec_fn=join,
                                **kw)
