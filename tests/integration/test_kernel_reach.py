#!/usr/bin/env python3
"""Kernel reach: feature probes, fallbacks, and `plumb agent --check` against what is attached.

The kernels of the test matrix (6.1, 6.12, 6.18) all have every feature io can use, so the
fallbacks are driven with PLUMB_TEST_HIDE, a test-only switch that makes the probes report a
feature or tracepoint as absent. Each fallback must give the same exact numbers as the normal
path; where a kernel cannot provide a metric the metric must be absent, not zero.
"""
# plumb-module: io

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (Agent, Cleanup, IOWORK, PLUMB, Runner, iowork, make_cgroup, require_root,  # noqa: E402
                 select, settle, sh, value)
import test_io  # noqa: E402


class hidden:
    """Runs a block with PLUMB_TEST_HIDE (and friends) set for the processes it starts."""

    def __init__(self, **env):
        self.env = env

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check_table(*args, **env):
    """Runs `plumb agent --check` (with args); returns (exit status, {point: (program,
    status)}, verdicts)."""
    with hidden(**env):
        r = sh(PLUMB, "agent", "--check", *args, check=False)
    rows, verdicts = {}, {}
    for line in r.stdout.splitlines():
        f = line.split(None, 3)
        if len(f) == 4 and f[0].isalpha() and f[1].split("/")[0] in ("syscalls", "tp_btf"):
            rows[f[1]] = (f[2], f[3])
        elif len(f) >= 2 and f[1] in ("available", "unavailable"):
            verdicts[f[0]] = line
    return r.returncode, rows, verdicts, r.stdout


def attached_points(pid):
    """The tracepoints the kernel has BPF programs of this process attached to (bpftool)."""
    out = json.loads(sh("bpftool", "perf", "show", "-j").stdout or "[]")
    kinds = {"tracepoint": "syscalls", "raw_tracepoint": "tp_btf"}
    return {f"{kinds[e['fd_type']]}/{e['tracepoint']}" for e in out
            if e.get("pid") == pid and e.get("fd_type") in kinds}


def test_check_matches_attached(cleanup):
    """--check's table is what the agent really attaches, in every mode the probes can pick:
    all modules as found, then each hidden feature with the modules that choose by it (the
    modules' sources that read it: src/modules/*.c), which halves the test's time in the
    emulated guests."""
    every = [line.split()[0] for line in sh(PLUMB, "--help").stdout.split("Modules:")[1]
             .split("\n\n")[0].strip().splitlines()]
    for modules, env in ((",".join(every), {}),
                         ("io,flow,sched,wait", {"PLUMB_TEST_HIDE": "task_pt_regs"}),
                         ("io,sched,wait", {"PLUMB_TEST_HIDE": "task_storage"}),
                         ("io", {"PLUMB_TEST_HIDE": "syscalls/sys_exit_creat"}),
                         ("flow", {"PLUMB_TEST_HIDE": "sock_send_length,tcp_destroy_sock"}),
                         ("flow", {"PLUMB_TEST_HIDE": "sock_send_length"})):
        rc, rows, verdicts, out = check_table("--modules", modules, **env)
        # 1 when a requested module is unavailable (sched without task storage)
        down = [m for m, v in verdicts.items() if v.split()[1] == "unavailable"]
        assert rc == (1 if down else 0) and "io" not in down and "flow" not in down, \
            f"{env}: --check exited {rc}:\n{out}"
        # the points bpftool lists (cgroup hooks are links, not perf events)
        said = {p for p, (_, status) in rows.items()
                if (status == "attached" or status.startswith("attached:"))
                and p.split("/")[0] in ("syscalls", "tp_btf")}
        # io's read/write enter program (one, on raw sys_enter) is attached 1/16 of the time
        # (latency windows): bpftool may or may not see it at a given moment
        windowed = {p for p, (_, status) in rows.items() if status.endswith("latency windows")}
        assert windowed <= {"tp_btf/sys_enter"}, windowed
        assert not windowed or "task_pt_regs" not in env.get("PLUMB_TEST_HIDE", ""), \
            f"{env}: windows where the enter programs run on every call: {sorted(windowed)}"
        said -= windowed
        with hidden(**env):
            a = Agent(cleanup, "--modules", modules, wait_for_module=False)
        deadline = time.time() + 120
        while not all(f"module {m}: " in a.output() for m in modules.split(",")):
            assert time.time() < deadline, f"{env}: modules not up: {a.output()}"
            time.sleep(0.2)
        real = attached_points(a.proc.pid) - windowed
        a.stop()
        assert said == real, f"{env}: --check says {sorted(said - real)} extra, " \
                             f"{sorted(real - said)} missing"
        assert len(real) >= (18 if env == {} else 5), \
            f"{env}: only {len(real)} attach points"
        assert "flow" not in modules or "tp_btf/inet_sock_set_state" in real, \
            f"{env}: flow not attached"


def test_args_at_enter_fallback(world, cleanup):
    """Without bpf_task_pt_regs (kernels before 5.15) the arguments come from the enter
    programs: the same exact bytes, calls, errors, path operations, fsyncs and renames,
    transfers and latency (reads' and fsyncs')."""
    rc, rows, verdicts, out = check_table(PLUMB_TEST_HIDE="task_pt_regs")
    assert "arguments stored at enter" in verdicts["io"], out
    assert rows["syscalls/sys_enter_unlinkat"] == ("enter_unlinkat", "attached"), out
    with hidden(PLUMB_TEST_HIDE="task_pt_regs"):
        agent = Agent(cleanup, "--io-latency-sample", "1")
    assert "arguments stored at enter" in agent.output(), agent.output()
    test_io.test_rw_exact(world, agent, cleanup)
    test_io.test_errors(world, agent, cleanup)
    test_io.test_path_ops(world, agent, cleanup)
    test_io.test_fsync_rename(world, agent, cleanup)
    test_io.test_transfers(world, agent, cleanup)
    test_io.test_latency_value(world, agent, cleanup)
    test_io.test_fsync_latency(world, agent, cleanup)
    m = agent.metrics()
    lost = value(m, "plumb_events_lost_total", module="io", reason="args_unknown")
    assert select(m, "plumb_events_lost_total", module="io", reason="args_unknown"), \
        "args_unknown is not exported"
    # only calls that entered before the programs attached can miss their arguments
    assert lost < 100, f"{lost} calls lost their arguments"
    agent.stop()


def test_no_task_storage(world, cleanup):
    """Without task storage (kernels before 5.11) latency cannot be timed: the histogram is
    absent (not zeros), and every counter is still exact."""
    with hidden(PLUMB_TEST_HIDE="task_storage"):
        agent = Agent(cleanup, "--io-latency-sample", "1")
    assert "latency off (unsupported: no task_storage)" in agent.output(), agent.output()
    cg, label = make_cgroup(cleanup, f"plumb-it-{os.getpid()}/no-storage")
    d = world.dir_of(world.tmpfs)
    iowork(cg, f"write:{d}/ns:100000:1000", f"read:{d}/ns:100000:4096")
    m = settle(agent, lambda m: value(m, "plumb_io_read_calls_total", cgroup=label,
                                      mount=world.tmpfs) == 25)
    assert value(m, "plumb_io_write_bytes_total", cgroup=label, mount=world.tmpfs) == 100000
    assert value(m, "plumb_io_write_calls_total", cgroup=label, mount=world.tmpfs) == 100
    assert value(m, "plumb_io_read_bytes_total", cgroup=label, mount=world.tmpfs) == 100000
    assert value(m, "plumb_io_read_calls_total", cgroup=label, mount=world.tmpfs) == 25
    assert not [k for k in m if k[0].startswith("plumb_io_latency")], "latency exported"
    agent.stop()


def test_absent_syscall(cleanup):
    """A syscall this kernel does not have (arm64 has no creat, open, mkdir...) switches off its
    programs alone; a required one that is missing disables the module, with the reason."""
    rc, rows, verdicts, out = check_table(PLUMB_TEST_HIDE="syscalls/sys_exit_creat")
    assert rc == 0, out
    assert rows["syscalls/sys_exit_creat"][1].startswith("off: no such syscall"), out
    assert "1 syscalls absent" in verdicts["io"], out
    rc, rows, verdicts, out = check_table(PLUMB_TEST_HIDE="syscalls/sys_exit_pread64")
    assert rc == 1, out
    assert "unavailable" in verdicts["io"] and "sys_exit_pread64 not found" in verdicts["io"], out
    rc, rows, verdicts, out = check_table(
        PLUMB_TEST_REQUIRE_TRACEPOINT="sys_exit_plumb_no_such_call")
    assert rc == 1, out
    assert rows["syscalls/sys_exit_plumb_no_such_call"][1].startswith("missing: required"), out


def test_completion_programs(cleanup):
    """AIO's completions need bpf_task_pt_regs and bpf_loop, io_uring's a tracepoint with its
    request in BTF (and its overflows' and submissions' programs go with it; the submissions'
    tracepoint has one of two names, io_uring_submit_sqe before 6.2): without them those
    programs alone are off, with the reason, and io is up."""
    submit = ("tp_btf/io_uring_submit_req", "tp_btf/io_uring_submit_sqe")
    aio = ("syscalls/sys_exit_io_getevents", "syscalls/sys_exit_io_pgetevents")
    rc, rows, verdicts, out = check_table("--modules", "io")
    assert rc == 0, out
    for p in aio:
        assert rows[p][1] == "attached: AIO completions", out
    assert rows["tp_btf/io_uring_complete"] == ("uring_complete",
                                                "attached: io_uring reads, writes, fsyncs"), out
    # overflowed completions, counted as lost (test_io's test_uring_overflow)
    assert rows["tp_btf/io_uring_cqe_overflow"] == (
        "uring_overflow", "attached: overflowed io_uring completions, as lost"), out
    assert "4 for AIO/io_uring completions, 1 for io_uring submissions" in verdicts["io"], out
    assert sorted(rows[p][1] for p in submit) == [
        "attached: io_uring path operations' paths", "off: not this kernel's name for it"], out
    for hide, why in (("bpf_loop", "off: needs bpf_loop"),
                      ("task_pt_regs", "off: needs task_pt_regs")):
        rc, rows, verdicts, out = check_table("--modules", "io", PLUMB_TEST_HIDE=hide)
        assert rc == 0, out
        for p in aio:
            assert rows[p][1] == why, f"{hide}: {out}"
        assert rows["tp_btf/io_uring_complete"][1].startswith("attached"), out
    rc, rows, verdicts, out = check_table("--modules", "io", PLUMB_TEST_HIDE="io_uring_complete")
    assert rc == 0, out
    assert rows["tp_btf/io_uring_complete"][1] == "off: no io_uring tracepoints here", out
    assert rows["tp_btf/io_uring_cqe_overflow"][1].startswith("off"), out
    assert "2 for AIO/io_uring completions, 0 for io_uring submissions" in verdicts["io"], out
    for p in submit:
        assert rows[p][1] == "off: no io_uring tracepoints here", out


def test_features_table(cleanup):
    """--check starts with the kernel and one line per probed feature."""
    rc, rows, verdicts, out = check_table()
    assert out.startswith("kernel "), out
    for feature in ("btf", "syscall_tracepoints", "raw_tp", "tp_btf", "iter_task", "ringbuf",
                    "task_storage", "current_task_btf", "task_pt_regs", "bpf_stats",
                    "steal", "bpf_loop", "delayed_dequeue"):
        assert any(l.split()[:1] == [feature] for l in out.splitlines()), f"no {feature}: {out}"
    rc, rows, verdicts, out = check_table(PLUMB_TEST_HIDE="ringbuf")
    assert any(l.split()[:2] == ["ringbuf", "no"] for l in out.splitlines()), out
    assert rc == 1 and "needs ringbuf" in verdicts["io"], out


def main():
    require_root()
    if not os.path.exists(IOWORK):
        print(f"{IOWORK} missing: run make first\n0 passed, 1 failed")
        return 1
    runner = Runner()
    cleanup = Cleanup()
    try:
        world = test_io.World(cleanup)
        runner.run("reach: --check table of features", test_features_table, cleanup)
        runner.run("reach: absent and missing syscalls", test_absent_syscall, cleanup)
        runner.run("reach: AIO and io_uring programs chosen by what the kernel has",
                   test_completion_programs, cleanup)
        runner.run("reach: --check matches what is attached", test_check_matches_attached,
                   cleanup)
        runner.run("reach: arguments at enter (no task_pt_regs), exact",
                   test_args_at_enter_fallback, world, cleanup)
        runner.run("reach: no task storage, latency absent, counts exact",
                   test_no_task_storage, world, cleanup)
    except Exception as e:
        runner.failed += 1
        print(f"FAIL setup: {e}")
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
