#!/usr/bin/env python3
"""Deployment (issue 7 §4): the Debian package (make deb: lintian, reproducible, contents,
installed into a throwaway root, the installed binary run), the systemd unit (systemd-analyze
verify and security; the agent run under the unit's capabilities, no_new_privs, read-only file
system, MemoryDenyWriteExecute, its syscalls, address families and namespaces compared with the
unit's filters), and the Kubernetes DaemonSet (its fields, Kubernetes' schemas, unknown fields).
"""
# plumb-module: io

import ctypes
import errno
import gzip
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (EMULATED, IOWORK, PLUMB, REFUSED, ROOT, Agent, Cleanup, Runner,  # noqa: E402
                 free_port, make_cgroup, mount_tmpfs, read_log, refused_syscalls, require_root,
                 select, settle, sh, value)

import yaml  # noqa: E402

UNIT = os.path.join(ROOT, "deploy", "plumb.service")
DAEMONSET = os.path.join(ROOT, "deploy", "kubernetes", "plumb-daemonset.yaml")
K8S_VALIDATOR = os.path.join(ROOT, "tests", "integration", "k8s")
# the exposure systemd-analyze security gives the unit, as docs/deploy.md states it
EXPOSURE = 3.0
MODULES = ("io", "flow", "sched", "wait", "blk", "netstack")
KEPT = {"CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"}


def version():
    out = sh(PLUMB, "--version").stdout.split()
    assert out[0] == "plumb", out
    return out[1] + "-1"


def unit_settings(path=UNIT):
    """{key: [values...]} of the unit file (every assignment of a key, in order)."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "[")):
                k, v = line.split("=", 1)
                out.setdefault(k, []).append(v)
    return out


class Package:
    """build/plumb_VERSION_ARCH.deb, built by make deb."""

    def __init__(self):
        self.version = version()
        self.arch = sh("dpkg", "--print-architecture").stdout.strip()
        self.path = os.path.join(ROOT, "build", f"plumb_{self.version}_{self.arch}.deb")
        self.epoch = int(sh("git", "-C", ROOT, "log", "-1", "--format=%ct").stdout)

    def build(self, env=None, umask=0o022):
        if os.path.exists(self.path):
            os.unlink(self.path)
        r = subprocess.run(["make", "-s", "-C", ROOT, "deb"], capture_output=True, text=True,
                           env=env, preexec_fn=lambda: os.umask(umask))
        assert r.returncode == 0, f"make deb failed: {r.stdout}{r.stderr}"
        assert os.path.exists(self.path), f"make deb wrote no {self.path}: {r.stdout}"
        with open(self.path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()


def test_build_reproducible(pkg):
    """Two builds, the second with another umask, time zone and locale: the same bytes."""
    first = pkg.build()
    env = dict(os.environ, TZ="Pacific/Kiritimati", LC_ALL="C.UTF-8", LANG="de_DE.UTF-8")
    second = pkg.build(env=env, umask=0o027)
    assert first == second, f"two builds differ: {first} and {second}"
    print(f"  {os.path.basename(pkg.path)}: sha256 {first} (twice)")


def test_lintian(pkg):
    """No error, no warning that is not overridden (with its reason) in the package."""
    r = sh("lintian", "--pedantic", "--display-info", "--display-experimental",
           "--fail-on", "none", pkg.path, check=False)
    assert r.returncode == 0, f"lintian itself failed: {r.stderr}"
    tags = [line for line in r.stdout.splitlines() if re.match(r"^[EWIPX]: ", line)]
    bad = [t for t in tags if t[0] in "EW"]
    assert not bad, "lintian: " + "; ".join(bad)
    for t in tags:
        print(f"  lintian (not an error or warning): {t}")


def test_contents(pkg):
    """Files, modes, owners, dates; control fields; Depends covers every linked library."""
    listing = sh("dpkg-deb", "--contents", pkg.path).stdout.splitlines()
    files = {}
    for line in listing:
        mode, owner, size, day, clock, name = line.split(None, 5)
        files[name] = (mode, owner)
        stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(pkg.epoch))
        assert f"{day} {clock}" == stamp, f"{name}: dated {day} {clock}, not the commit's {stamp}"
        assert owner == "root/root", f"{name}: owned by {owner}"
    want = {
        "./usr/sbin/plumb": "-rwxr-xr-x",
        "./usr/share/man/man8/plumb.8.gz": "-rw-r--r--",
        "./lib/systemd/system/plumb.service": "-rw-r--r--",
        "./etc/default/plumb": "-rw-r--r--",
        "./usr/share/doc/plumb/copyright": "-rw-r--r--",
        "./usr/share/doc/plumb/changelog.Debian.gz": "-rw-r--r--",
        "./usr/share/lintian/overrides/plumb": "-rw-r--r--",
    }
    regular = {n: m for n, (m, _) in files.items() if not m.startswith("d")}
    assert regular == want, f"files: {sorted(regular.items())}"

    with tempfile.TemporaryDirectory(prefix="plumb-deb-") as d:
        sh("dpkg-deb", "--extract", pkg.path, d)
        sh("dpkg-deb", "--control", pkg.path, os.path.join(d, "DEBIAN"))
        with open(os.path.join(d, "lib/systemd/system/plumb.service"), "rb") as a, \
                open(UNIT, "rb") as b:
            assert a.read() == b.read(), "the packaged unit is not deploy/plumb.service"
        for gz in ("usr/share/man/man8/plumb.8.gz", "usr/share/doc/plumb/changelog.Debian.gz"):
            with open(os.path.join(d, gz), "rb") as f:
                head = f.read(10)
            assert head[4:8] == b"\0\0\0\0" and head[3] & 0x08 == 0, f"{gz}: gzip without -n"
        with gzip.open(os.path.join(d, "usr/share/man/man8/plumb.8.gz"), "rt") as f, \
                open(os.path.join(ROOT, "docs", "plumb.8")) as g:
            assert f.read() == g.read(), "the man page is not docs/plumb.8"
        with open(os.path.join(d, "DEBIAN", "conffiles")) as f:
            assert f.read().split() == ["/etc/default/plumb"], "conffiles"
        control = {}
        with open(os.path.join(d, "DEBIAN", "control")) as f:
            for line in f:
                if not line.startswith(" ") and ":" in line:
                    k, v = line.split(":", 1)
                    control[k] = v.strip()
        assert control["Package"] == "plumb" and control["Version"] == pkg.version, control
        assert control["Architecture"] == pkg.arch, control
        depends = {c.split()[0] for c in control["Depends"].split(",")}
        # every library the binary needs, by the package that has it on this host
        plumb = os.path.join(d, "usr/sbin/plumb")
        needed = re.findall(r"NEEDED\s+(\S+)", sh("objdump", "-p", plumb).stdout)
        assert needed, "the binary needs no library?"
        paths = dict(re.findall(r"^\s*(\S+) => (/\S+)", sh("ldd", plumb).stdout, re.M))
        for lib in needed:
            path = paths[lib]
            alt = path[4:] if path.startswith("/usr/") else "/usr" + path  # merged /usr
            owner = sh("dpkg", "-S", path, alt, check=False).stdout.split(":")[0]
            assert owner in depends, f"{lib} ({owner}) is not in Depends: {control['Depends']}"
        # stripped as dh_strip does: no debug sections
        sections = sh("objdump", "-h", plumb).stdout
        assert ".debug_info" not in sections, "the packaged binary has debug sections"
        print(f"  Depends: {control['Depends']}")


def dpkg_root(cleanup, status):
    """A throwaway root with a dpkg database whose status file is status's content."""
    d = tempfile.mkdtemp(prefix="plumb-root-")
    cleanup.add(sh, "rm", "-rf", d)
    os.makedirs(os.path.join(d, "var/lib/dpkg/info"))
    os.makedirs(os.path.join(d, "var/lib/dpkg/updates"))
    with open(os.path.join(d, "var/lib/dpkg/status"), "w") as f:
        f.write(status)
    return d


def test_install(pkg, cleanup, installed):
    """dpkg installs it in a throwaway root whose database is this host's (Depends must be
    met by the installed Debian packages), the installed binary runs, purge removes all."""
    with open("/var/lib/dpkg/status") as f:
        host_status = f.read()
    # an empty database refuses it: the Depends are real
    empty = dpkg_root(cleanup, "")
    r = sh("dpkg", f"--root={empty}", "-i", pkg.path, check=False)
    assert r.returncode != 0 and "dependency problems" in r.stderr, \
        f"installed without its dependencies: {r.stdout}{r.stderr}"

    root = dpkg_root(cleanup, host_status)
    r = sh("dpkg", f"--root={root}", "-i", pkg.path, check=False)
    assert r.returncode == 0, f"dpkg -i: {r.stdout}{r.stderr}"
    status = sh("dpkg", f"--root={root}", "-s", "plumb").stdout
    assert "Status: install ok installed" in status, status
    r = sh("dpkg", f"--root={root}", "--verify", "plumb", check=False)
    assert r.returncode == 0 and not r.stdout, f"dpkg --verify: {r.stdout}{r.stderr}"
    out = sh(os.path.join(root, "usr/sbin/plumb"), "--version").stdout.strip()
    assert out == "plumb " + pkg.version.rsplit("-", 1)[0], f"installed plumb --version: {out}"
    installed["root"] = root

    # purge in a second root, so the first stays for the unit's checks
    other = dpkg_root(cleanup, host_status)
    sh("dpkg", f"--root={other}", "-i", pkg.path)
    r = sh("dpkg", f"--root={other}", "--purge", "plumb", check=False)
    assert r.returncode == 0, f"dpkg --purge: {r.stdout}{r.stderr}"
    left = [os.path.join(p, n) for p, ds, fs in os.walk(other) for n in ds + fs
            if not os.path.join(p, n).startswith(os.path.join(other, "var"))]
    assert not left, f"left after purge: {left}"


def test_unit_verify(installed):
    """systemd-analyze verify: no complaint (it exits 0 on unknown keys: any output fails)."""
    root = installed.get("root")
    assert root, "no installed package (the install test failed)"
    d = tempfile.mkdtemp(prefix="plumb-unit-")
    try:
        unit = os.path.join(d, "plumb.service")
        with open(os.path.join(root, "lib/systemd/system/plumb.service")) as f:
            text = f.read()
        # the unit as installed, its ExecStart in the throwaway root; man finds the page there
        with open(unit, "w") as f:
            f.write(text.replace("ExecStart=/usr/sbin/plumb",
                                 f"ExecStart={root}/usr/sbin/plumb"))
        env = dict(os.environ, MANPATH=os.path.join(root, "usr/share/man"))
        r = sh("systemd-analyze", "verify", unit, check=False, env=env)
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), \
            f"systemd-analyze verify: {r.stdout}{r.stderr}"
    finally:
        sh("rm", "-rf", d)


def test_unit_security():
    """systemd-analyze security --offline: the exposure docs/deploy.md states, or lower."""
    r = sh("systemd-analyze", "security", "--offline=yes", f"--threshold={int(EXPOSURE * 10)}",
           "--no-pager", UNIT, check=False)
    m = re.search(r"Overall exposure level for plumb.service: ([0-9.]+)", r.stdout + r.stderr)
    assert m, f"no exposure level: {r.stdout}{r.stderr}"
    print(f"  exposure {m.group(1)} (docs/deploy.md: {EXPOSURE})")
    assert r.returncode == 0 and float(m.group(1)) <= EXPOSURE, \
        f"exposure {m.group(1)} is over {EXPOSURE}"
    # the capabilities: exactly those the agent keeps (src/privileges.c), none other
    s = unit_settings()
    assert set(s["CapabilityBoundingSet"][-1].split()) == KEPT, s["CapabilityBoundingSet"]
    with open(os.path.join(ROOT, "src", "privileges.c")) as f:
        kept = re.search(r"keep\[\] = \{(.*?)\};", f.read(), re.S).group(1)
    assert set(re.findall(r"\b(CAP_[A-Z_]+),", kept)) == KEPT, "src/privileges.c keeps others"
    assert "AmbientCapabilities" not in s and "User" not in s and "DynamicUser" not in s


# --- the agent under the unit's restrictions, without systemd ---------------------------

PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1


def as_unit(port, trace_fd, args):
    """Runs in a new mount, UTS and IPC namespace (unshare): makes the file system the unit
    gives, then execs plumb under strace with the unit's bounding set and no_new_privs."""
    def mount(*a):
        subprocess.run(["mount", *a], check=True)

    # PrivateTmp=
    for d in ("/tmp", "/var/tmp"):
        mount("-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", d)
    # PrivateDevices=: null, zero, full, random, urandom, tty and nothing else
    mount("-t", "tmpfs", "-o", "mode=755,nosuid,noexec", "tmpfs", "/dev")
    for name, minor in (("null", 3), ("zero", 5), ("full", 7), ("random", 8), ("urandom", 9)):
        os.mknod(f"/dev/{name}", 0o20666, os.makedev(1, minor))
    os.mknod("/dev/tty", 0o20666, os.makedev(5, 0))
    os.symlink("/proc/self/fd", "/dev/fd")
    # ProtectKernelTunables=: /proc/sys read-only (and /sys, with everything else, below)
    mount("--bind", "/proc/sys", "/proc/sys")
    # ProtectHome=yes: empty and inaccessible
    for d in ("/home", "/root", "/run/user"):
        if os.path.isdir(d):
            mount("-t", "tmpfs", "-o", "ro,mode=000", "tmpfs", d)
    # ProtectSystem=strict, ProtectKernelTunables=, ProtectControlGroups=: every mount
    # read-only but /dev, /proc (/proc/sys is), /tmp and /var/tmp
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    writable = ("/dev", "/proc", "/tmp", "/var/tmp")
    for p in points:
        if p == "/proc/sys" or not any(p == w or p.startswith(w + "/") for w in writable):
            subprocess.run(["mount", "-o", "remount,bind,ro", p], capture_output=True)
    # MemoryDenyWriteExecute=: the kernel's own form of it (6.3+), kept across exec
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0):
        if ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_MDWE)")
        print("as-unit: MemoryDenyWriteExecute not emulated (PR_SET_MDWE is 6.3+)", flush=True)
    bounding = unit_settings()["CapabilityBoundingSet"][-1].split()
    caps = "-all," + ",".join("+" + c[4:].lower() for c in sorted(bounding))
    os.execvp("setpriv", ["setpriv", f"--bounding-set={caps}", "--inh-caps=-all",
                          "--no-new-privs", "strace", "-f", "-qq",
                          "-o", f"/proc/self/fd/{trace_fd}",
                          PLUMB, "agent", "--listen", f"127.0.0.1:{port}", *args])


class UnitAgent(Agent):
    """lib.Agent's life cycle for an agent started by as_unit()."""

    def __init__(self, cleanup, trace):
        self.port = free_port()
        self.log = tempfile.TemporaryFile(mode="w+")
        self.started = time.monotonic()
        self.child = None
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "slave", "--uts", "--ipc",
             sys.executable, os.path.abspath(__file__), "--as-unit", str(self.port),
             # netstack names a device in another namespace (setns, checked below) when it
             # closes an interval: every second, not at the end of a window in 20 s
             str(trace.fileno()), "--netstack-window", "1"],
            stdout=self.log, stderr=subprocess.STDOUT, pass_fds=(trace.fileno(),))
        cleanup.add(self.stop)
        # under strace -f, in a 6.1 guest alone, every module's load took over 30 s (lib.Agent
        # allows emulated guests 180 s)
        deadline = time.time() + (180 if EMULATED else 30)
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"agent exited with {self.proc.returncode}: {self.output()}")
            try:
                if self.get("/healthz")[0] == 200 and "serving metrics" in self.output():
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            raise RuntimeError("agent did not come up: " + self.output())
        # self.proc is strace (unshare, python and setpriv exec'd into it); its child is plumb
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            self.child = int(f.read().split()[0])

    def stop(self):
        """SIGTERM to plumb (to strace it would detach and leave plumb running); strace exits
        with plumb's status."""
        if self.child is None and self.proc.poll() is None:  # it did not come up
            try:
                with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                    self.child = int(f.read().split()[0])
            except (OSError, IndexError, ValueError):
                self.proc.kill()  # strace's child not there yet (or gone)
                self.proc.wait()
        if self.child is None:
            return self.proc.returncode
        if self.proc.poll() is None:
            try:
                os.kill(self.child, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.child, signal.SIGKILL)
                self.proc.wait()
        refused = refused_syscalls(self.child, self.started)
        if refused:
            REFUSED[self.child] = refused
        return self.proc.returncode


def syscall_groups():
    """{"@group": [syscalls or @groups]} from systemd-analyze syscall-filter."""
    groups, cur = {}, None
    for line in sh("systemd-analyze", "syscall-filter", "--no-pager").stdout.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if line.startswith("@"):
            cur = groups.setdefault(s, [])
        elif cur is not None:
            cur.append(s)
    return groups


def expand(names, groups):
    out = set()
    for n in names:
        out |= expand(groups[n], groups) if n.startswith("@") else {n}
    return out


TALK = """
import socket, time
srv = socket.create_server(("127.0.0.1", 0))
cli = socket.create_connection(srv.getsockname())
peer, _ = srv.accept()
cli.sendall(b"x" * 100000)
got = 0
while got < 100000:
    got += len(peer.recv(65536))
print("connected", flush=True)
time.sleep(2)
"""


def test_agent_as_unit(cleanup):
    """The agent as the unit runs it: every module up, the io module's exact bytes of a
    workload on a host mount its private /tmp hides; and what strace saw it call is inside
    the unit's SystemCallFilter, RestrictAddressFamilies and RestrictNamespaces."""
    assert not ROOT.startswith(("/tmp/", "/var/tmp/")), \
        f"the tree is at {ROOT}, which the unit's private /tmp hides: clone it elsewhere"
    netns = f"plumb-deploy-{os.getpid()}"
    sh("ip", "netns", "add", netns)
    cleanup.add(sh, "ip", "netns", "del", netns)
    sh("ip", "-n", netns, "link", "set", "lo", "up")
    base = tempfile.mkdtemp(prefix="plumb-deploy-", dir="/tmp")
    cleanup.add(os.rmdir, base)
    mnt = os.path.join(base, "tmpfs")
    mount_tmpfs(cleanup, mnt, size_mb=16)
    cg, label = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/unit")
    trace = tempfile.TemporaryFile(mode="w+")

    agent = UnitAgent(cleanup, trace)
    status = {}
    with open(f"/proc/{agent.child}/status") as f:
        for line in f:
            k, v = line.split(":", 1)
            status[k] = v.strip()
    numbers = {"CAP_BPF": 39, "CAP_PERFMON": 38, "CAP_SYS_ADMIN": 21, "CAP_SYS_PTRACE": 19,
               "CAP_DAC_READ_SEARCH": 2}
    want = sum(1 << numbers[c] for c in unit_settings()["CapabilityBoundingSet"][-1].split())
    assert int(status["CapBnd"], 16) == want, f"CapBnd {status['CapBnd']}"
    assert int(status["CapEff"], 16) == want, f"CapEff {status['CapEff']}"
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2", status
    m = agent.metrics()
    down = [x for x in MODULES if value(m, "plumb_module_up", module=x) != 1]
    assert not down, f"modules down under the unit's restrictions: {down}: {agent.output()}"

    r = sh(IOWORK, "--cgroup", cg, f"write:{mnt}/f:12345:1000", check=False)
    assert r.returncode == 0, r.stderr
    if EMULATED:
        # the guests run the tests chrooted into /newroot: the agent, in a mount namespace
        # of its own, reads the workload's mountinfo from outside that root, and the kernel
        # prints the path from the namespace's root ("/newroot/tmp/..."); no host agent is
        # chrooted. Measured in the 6.1 guest: exactly 12345 bytes on
        # /newroot/tmp/plumb-deploy-.../tmpfs.
        def on_mnt(m):
            return {dict(k)["mount"]: v for k, v in
                    select(m, "plumb_io_write_bytes_total", cgroup=label).items()
                    if dict(k)["mount"].endswith(mnt)}
        m = settle(agent, lambda m: list(on_mnt(m).values()) == [12345], timeout=30)
        print(f"  io under the unit in this guest: {on_mnt(m)}")
        assert list(on_mnt(m).values()) == [12345], \
            f"io: {select(m, 'plumb_io_write_bytes_total', cgroup=label)}"
        mnt_seen = next(iter(on_mnt(m)))
    else:
        mnt_seen = mnt
    m = settle(agent, lambda m: value(m, "plumb_io_write_bytes_total", cgroup=label,
                                      mount=mnt_seen) == 12345)
    assert value(m, "plumb_io_write_bytes_total", cgroup=label, mount=mnt_seen) == 12345, \
        f"io: {value(m, 'plumb_io_write_bytes_total', cgroup=label, mount=mnt)} bytes on {mnt}; " \
        f"the cgroup's io series: {select(m, 'plumb_io_write_bytes_total', cgroup=label)}; " \
        f"module up: {value(m, 'plumb_module_up', module='io')}; lost: " \
        f"{select(m, 'plumb_events_lost_total', module='io')}; log: {agent.output()[-1500:]}"
    # a TCP connection inside the other namespace, alive across two scrapes: the flow module
    # enters that namespace to walk its sockets, netstack to name its device
    talk = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", TALK],
                            stdout=subprocess.PIPE, text=True)
    cleanup.add(talk.kill)
    assert talk.stdout.readline().strip() == "connected", "the workload did not connect"
    for _ in range(2):
        agent.metrics()
        time.sleep(0.3)
    agent.get("/api/v1/graph")
    talk.stdout.close()
    assert talk.wait(10) == 0, "the workload failed"
    assert agent.stop() == 0, f"agent exit status {agent.proc.returncode}: {agent.output()}"

    trace.seek(0)
    calls, pending = [], {}
    for line in trace.read().splitlines():
        m = re.match(r"^(\d+) +([a-z_0-9]+)\((.*)", line)
        if m and line.endswith("<unfinished ...>"):
            pending[(m.group(1), m.group(2))] = line[:-len("<unfinished ...>")]
            continue
        r = re.match(r"^(\d+) +<\.\.\. ([a-z_0-9]+) resumed>(.*)", line)
        if r and (r.group(1), r.group(2)) in pending:
            calls.append(pending.pop((r.group(1), r.group(2))) + r.group(3))
        elif m:
            calls.append(line)
    assert calls, "strace saw nothing"
    names = {re.match(r"^\d+ +([a-z_0-9]+)\(", c).group(1) for c in calls}
    s = unit_settings()
    allowed = expand(" ".join(s["SystemCallFilter"]).split(), syscall_groups())
    assert names <= allowed, f"called, not in SystemCallFilter: {sorted(names - allowed)}"
    families = {m.group(1) for m in (re.search(r" socket\((AF_[A-Z0-9]+)", c) for c in calls)
                if m}
    assert families <= set(s["RestrictAddressFamilies"][-1].split()), \
        f"address families {families}, unit: {s['RestrictAddressFamilies']}"
    entered = [c for c in calls if re.search(r" (setns|unshare)\(", c)]
    assert entered, "no setns() seen: the namespace walk was not exercised"
    assert s["RestrictNamespaces"] == ["net"]
    bad = [c for c in entered if "CLONE_NEWNET" not in c or " = 0" not in c]
    assert not bad, f"namespace calls the unit refuses or that failed: {bad[:3]}"
    print(f"  {len(names)} distinct syscalls, families {sorted(families)}, "
          f"{len(entered)} setns(CLONE_NEWNET), all inside the unit's filters")


# --- Kubernetes ---------------------------------------------------------------------------

def daemonset_docs():
    with open(DAEMONSET) as f:
        return list(yaml.safe_load_all(f))


def test_daemonset_fields():
    """The privileges, mounts, probes, scrape annotations and limits the docs describe."""
    docs = daemonset_docs()
    kinds = [(d["apiVersion"], d["kind"]) for d in docs]
    assert kinds == [("v1", "Namespace"), ("v1", "ServiceAccount"), ("apps/v1", "DaemonSet")]
    ns, sa, ds = docs
    assert sa["metadata"]["namespace"] == ds["metadata"]["namespace"] == ns["metadata"]["name"]
    assert sa["automountServiceAccountToken"] is False, "the service account's token"
    pod = ds["spec"]["template"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    spec = pod["spec"]
    assert spec["serviceAccountName"] == sa["metadata"]["name"]
    assert spec["automountServiceAccountToken"] is False, "the pod mounts a token"
    assert spec["hostPID"] is True and spec["hostNetwork"] is True, \
        f"hostPID {spec['hostPID']!r}, hostNetwork {spec['hostNetwork']!r}"
    assert spec["tolerations"] == [{"operator": "Exists"}], "not on every node"
    (c,) = spec["containers"]
    sc = c["securityContext"]
    for key, want in (("privileged", False), ("readOnlyRootFilesystem", True),
                      ("allowPrivilegeEscalation", False), ("runAsUser", 0)):
        assert sc.get(key) == want, f"securityContext.{key}: {sc.get(key)!r}, not {want!r}"
    assert sc["capabilities"]["drop"] == ["ALL"], sc["capabilities"]
    assert {"CAP_" + x for x in sc["capabilities"]["add"]} == KEPT, sc["capabilities"]
    # the API server refuses allowPrivilegeEscalation: false with a literal "CAP_SYS_ADMIN"
    assert "CAP_SYS_ADMIN" not in sc["capabilities"]["add"]
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    for path in ("/sys/fs/cgroup", "/sys/kernel/tracing", "/run/netns"):
        assert path in mounts and volumes[mounts[path]["name"]] == path, f"{path} not mounted"
    assert all(m.get("readOnly") is True for m in mounts.values()), "a writable host mount"
    assert mounts["/run/netns"]["mountPropagation"] == "HostToContainer"
    # the port: the one the agent listens on, probed, scraped
    (port,) = c["ports"]
    listen = [a for a in c["args"] if a.startswith("--listen=")]
    assert listen == [f"--listen=$(HOST_IP):{port['containerPort']}"], c["args"]
    assert c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": port["name"]}, c[probe]
    ann = pod["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true"
    assert ann["prometheus.io/port"] == str(port["containerPort"])
    assert ann["prometheus.io/path"] == "/metrics"
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= c["resources"][kind].keys(), f"resources.{kind}"
    assert c["command"][:2] == ["nsenter", "--cgroup=/proc/1/ns/cgroup"]
    assert c["command"][-2:] == ["/usr/sbin/plumb", "agent"], "not the package's binary"


def k8s_validator():
    """tests/integration/k8s installed (npm ci, pinned by its package-lock.json) under
    build/k8s-validate, once."""
    d = os.path.join(ROOT, "build", "k8s-validate")
    os.makedirs(d, exist_ok=True)
    for name in ("package.json", "package-lock.json", "validate.mjs"):
        with open(os.path.join(K8S_VALIDATOR, name)) as a, open(os.path.join(d, name), "w") as b:
            b.write(a.read())
    # npm ci writes node_modules/.package-lock.json: the same packages as the lock, or reinstall
    stamp = os.path.join(d, "node_modules", ".package-lock.json")
    with open(os.path.join(d, "package-lock.json")) as f:
        want = json.load(f)["packages"].keys() - {""}
    have = set()
    if os.path.exists(stamp):
        with open(stamp) as f:
            have = json.load(f)["packages"].keys()
    if have != want:
        r = sh("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error",
               cwd=d, check=False)
        assert r.returncode == 0, f"npm ci (kubernetes-models): {r.stdout}{r.stderr}"
    return d


def k8s_validate(d, docs):
    return subprocess.run(["node", "validate.mjs"], cwd=d, input=json.dumps(docs),
                          capture_output=True, text=True)


def test_daemonset_schema(cleanup):
    """Kubernetes' own OpenAPI schemas (kubernetes-models, offline): types, required fields,
    enums. A broken copy is refused, so the check is not empty."""
    d = k8s_validator()
    r = k8s_validate(d, daemonset_docs())
    assert r.returncode == 0, f"schema: {r.stdout}{r.stderr}"
    print("  " + r.stdout.strip().replace("\n", "; "))
    broken = daemonset_docs()
    broken[2]["spec"]["template"]["spec"]["hostPID"] = "yes"
    r = k8s_validate(d, broken)
    assert r.returncode == 1 and "hostPID must be boolean" in r.stdout, \
        f"a broken DaemonSet passed: {r.stdout}{r.stderr}"


# every key must be a field of its object's Kubernetes type (the API server's strict field
# validation); runs under Debian's python3 with Debian's python3-kubernetes
STRICT = r"""
import json, re, sys
import kubernetes.client.models as models

def check(obj, typ, path, errors):
    if obj is None:
        return
    m = re.fullmatch(r"list\[(.+)\]", typ)
    if m:
        for i, x in enumerate(obj):
            check(x, m.group(1), f"{path}[{i}]", errors)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", typ)
    if m:
        for k, x in obj.items():
            check(x, m.group(1), f"{path}.{k}", errors)
        return
    cls = getattr(models, typ, None)
    if cls is None:
        return  # str, int, bool, object, datetime
    fields = {v: k for k, v in cls.attribute_map.items()}
    if not isinstance(obj, dict):
        errors.append(f"{path}: not an object ({typ})")
        return
    for k, x in obj.items():
        if k not in fields:
            errors.append(f"{path}.{k}: no such field in {typ}")
        else:
            check(x, cls.openapi_types[fields[k]], f"{path}.{k}", errors)

errors = []
for doc in json.load(sys.stdin):
    check(doc, "V1" + doc["kind"], doc["kind"], errors)
print("\n".join(errors))
sys.exit(1 if errors else 0)
"""


def strict_fields(docs):
    return subprocess.run(["/usr/bin/python3", "-c", STRICT], input=json.dumps(docs),
                          capture_output=True, text=True)


def test_daemonset_unknown_fields():
    """No key Kubernetes does not know (a misspelt one would be dropped, not refused, by a
    lenient client); a misspelt copy is caught, so the check is not empty."""
    r = strict_fields(daemonset_docs())
    assert r.returncode == 0, f"unknown fields: {r.stdout}{r.stderr}"
    broken = daemonset_docs()
    sc = broken[2]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    sc["readOnlyRootFileSystem"] = sc.pop("readOnlyRootFilesystem")
    r = strict_fields(broken)
    assert r.returncode == 1 and "readOnlyRootFileSystem: no such field" in r.stdout, \
        f"a misspelt field passed: {r.stdout}{r.stderr}"


def test_agent_unprivileged_uid(cleanup):
    """Not root: uid 65534 with the five capabilities ambient (what a unit with User= or
    DynamicUser= and AmbientCapabilities= gives): every module up, exact io bytes."""
    base = tempfile.mkdtemp(prefix="plumb-deploy-", dir="/tmp")
    cleanup.add(os.rmdir, base)
    mnt = os.path.join(base, "tmpfs")
    mount_tmpfs(cleanup, mnt, size_mb=16)
    cg, label = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/uid")
    caps = ",".join("+" + c[4:].lower() for c in sorted(KEPT))
    port = free_port()
    log = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          f"--inh-caps={caps}", f"--ambient-caps={caps}", PLUMB, "agent",
                          "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    cleanup.add(lambda: p.poll() is None and (p.terminate(), p.wait()))
    agent = Agent.__new__(Agent)  # lib.Agent's scrapes, for a process started here
    agent.port = port
    deadline = time.time() + 30
    while True:
        out = read_log(log)
        if "serving metrics" in out:
            break
        assert p.poll() is None and time.time() < deadline, f"agent as uid 65534: {out}"
        time.sleep(0.2)
    with open(f"/proc/{p.pid}/status") as f:
        uid = next(line.split()[1] for line in f if line.startswith("Uid:"))
    assert uid == "65534", f"the agent runs as uid {uid}"
    m = agent.metrics()
    down = [x for x in MODULES if value(m, "plumb_module_up", module=x) != 1]
    assert not down, f"modules down as uid 65534: {down}: {out}"
    r = sh(IOWORK, "--cgroup", cg, f"write:{mnt}/f:54321:1000", check=False)
    assert r.returncode == 0, r.stderr
    m = settle(agent, lambda m: value(m, "plumb_io_write_bytes_total", cgroup=label,
                                      mount=mnt) == 54321)
    assert value(m, "plumb_io_write_bytes_total", cgroup=label, mount=mnt) == 54321
    p.terminate()
    assert p.wait(10) == 0, "the agent as uid 65534 did not exit cleanly"


# in make test-kernels' guests only what depends on the kernel runs: the package, the unit's
# text and the manifest are the same on every kernel (lib.Runner.run_host)
SAME = "the package, the unit's text and the manifest are the same on every kernel"


def all_tests(runner, cleanup):
    """The package, the unit, the agent under it, the manifest."""
    installed = {}
    pkg = None if EMULATED else Package()  # not made where its tests do not run
    for name, fn, *args in (
            ("deb: make deb twice gives the same bytes", test_build_reproducible, pkg),
            ("deb: lintian, no error or unexplained warning", test_lintian, pkg),
            ("deb: contents, control, Depends", test_contents, pkg),
            ("deb: installs in a throwaway root, runs, purges", test_install, pkg, cleanup,
             installed),
            ("systemd: systemd-analyze verify", test_unit_verify, installed),
            ("systemd: systemd-analyze security, capabilities", test_unit_security)):
        runner.run_host(SAME, name, fn, *args)
    runner.run("systemd: the agent under the unit's restrictions", test_agent_as_unit,
               cleanup)
    runner.run_host("ambient capabilities (4.3) act alike on every kernel here; the agent "
                    "under the unit's restrictions runs in the guests",
                    "the agent as uid 65534 with its five capabilities ambient",
                    test_agent_unprivileged_uid, cleanup)
    for name, fn, *args in (("kubernetes: DaemonSet fields", test_daemonset_fields),
                            ("kubernetes: DaemonSet against Kubernetes' schemas",
                             test_daemonset_schema, cleanup),
                            ("kubernetes: no unknown field", test_daemonset_unknown_fields)):
        runner.run_host(SAME, name, fn, *args)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--as-unit":
        as_unit(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
        return 1  # as_unit execs
    require_root()
    runner = Runner()
    cleanup = Cleanup()
    try:
        all_tests(runner, cleanup)
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
