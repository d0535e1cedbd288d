#!/usr/bin/env python3
"""Accuracy of plumb's write bandwidth as Prometheus sees it, against what the workload reports.

The metric of the unified VFS I/O monitoring paper: ratio = bandwidth the workload reports /
mean of the monitor's instantaneous bandwidth over the workload's run. Target: 1 ± 0.01 for
transfer sizes 1, 2, 4, 8 and 16 MiB, for two workloads, each in its own cgroup, writing to a
loop-mounted ext4:

  fio     sequential write, ioengine=psync, bs = transfer size, time_based; fio's bw_bytes
  MPI-IO  bench/mpiio_write.c on 4 ranks, MPI_File_write_at of one block per call, each rank
          in its own region of one shared file; the program's aggregate bandwidth

One agent (`plumb agent --modules io`) and one Prometheus server scraping it every 2 s serve
all the runs; each run has a fresh cgroup, so its series starts from zero. Instantaneous
bandwidth is sum(irate(plumb_io_write_bytes_total{cgroup=..., mount=...}[4s])) from
/api/v1/query_range with step 2 s, evaluated half-way between scrapes so that every step
takes exactly one pair of adjacent scrapes. The window is the scrapes strictly inside the
workload's own timed interval: the intervals that hold the start and the end, with partial
activity, are left out. The per-step values are checked against the raw samples.

Also reported: all bytes plumb counted for the run / the workload's own duration, which
compares byte totals over exactly the workload's interval (no window choice involved).

  python3 bench/accuracy.py        # as root, from anywhere; writes bench/results/accuracy.md

PLUMB_ACCURACY_RUNTIME (seconds, default 20) sets each run's length.
Exit status: 0 all within target, 1 some ratio outside it, 2 could not run.
"""

import json
import os
import statistics
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ab import RESULTS, machine  # noqa: E402
from benchlib import (Agent, Cleanup, Prometheus, in_cgroup, make_cgroup,  # noqa: E402
                      mount_image, require, sh)

MIB = 1 << 20
SIZES_MIB = (1, 2, 4, 8, 16)
RUNTIME = int(os.environ.get("PLUMB_ACCURACY_RUNTIME", "20"))
INTERVAL = 2           # scrape interval and query step, seconds
TOLERANCE = 0.01
EDGE_MARGIN = 0.25     # a scrape this close to the workload's start or end counts as an edge
IMAGE_MB = 2048
FIO_FILE_MB = 1024     # fio wraps around in this file (time_based)
MPI_RANKS = 4
MPI_REGION_MB = 256    # each rank's region of the shared file; it wraps around inside it


def run_fio(cgroup_dir, mnt, size_mib, scratch):
    """Returns the run as the workload reports it: bw, bytes, seconds, start, end (epoch s)."""
    out = os.path.join(scratch, "fio.json")
    sh(*in_cgroup(cgroup_dir, [
        "fio", "--name=accuracy", f"--filename={mnt}/fio.dat", "--rw=write",
        "--ioengine=psync", f"--bs={size_mib}M", f"--size={FIO_FILE_MB}M", "--time_based",
        f"--runtime={RUNTIME}", "--output-format=json", f"--output={out}"]))
    with open(out) as f:
        report = json.load(f)
    os.unlink(out)
    os.unlink(f"{mnt}/fio.dat")
    write = report["jobs"][0]["write"]
    # fio stamps its report when it writes it, just after the job ended; runtime is the time
    # it measured the job's I/O over, in ms
    seconds = write["runtime"] / 1000
    end = report["timestamp_ms"] / 1000
    return {"bw": write["bw_bytes"], "bytes": write["io_bytes"], "seconds": seconds,
            "start": end - seconds, "end": end}


def run_mpiio(cgroup_dir, mnt, size_mib, binary):
    r = sh(*in_cgroup(cgroup_dir, [
        "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(MPI_RANKS), binary,
        "--file", f"{mnt}/mpiio.dat", "--block", str(size_mib * MIB),
        "--region", str(MPI_REGION_MB * MIB), "--seconds", str(RUNTIME)]))
    os.unlink(f"{mnt}/mpiio.dat")
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if len(lines) != 1:
        raise RuntimeError(f"mpiio_write printed no report: {r.stdout!r} {r.stderr!r}")
    report = json.loads(lines[0])
    return {"bw": report["bw_bytes"], "bytes": report["bytes"], "seconds": report["seconds"],
            "start": report["start"], "end": report["end"]}


def measure(prom, label, mnt, run):
    """plumb's side of one run, from Prometheus."""
    sel = f'plumb_io_write_bytes_total{{cgroup="{label}",mount="{mnt}"}}'
    deadline = time.time() + 3 * INTERVAL + 10
    while True:  # a scrape after the end holds every byte of the run
        last = prom.query(f"timestamp({sel})")
        if last and float(last[0]["value"][1]) > run["end"]:
            break
        if time.time() > deadline:
            raise RuntimeError(f"Prometheus has no scrape of {sel} after the run")
        time.sleep(0.5)
    samples = prom.samples(sel, since=run["start"] - 4 * INTERVAL)
    inside = [(t, v) for t, v in samples
              if run["start"] + EDGE_MARGIN < t < run["end"] - EDGE_MARGIN]
    if len(inside) < 3:
        raise RuntimeError(f"only {len(inside)} scrapes inside the run: make it longer")

    half = INTERVAL / 2
    got = prom.query_range(f"sum(irate({sel}[{2 * INTERVAL}s]))",
                           inside[1][0] + half, inside[-1][0] + half, INTERVAL)
    irate = [float(v) for _, v in got[0]["values"]] if got else []
    raw = [(v1 - v0) / (t1 - t0) for (t0, v0), (t1, v1) in zip(inside, inside[1:])]
    if len(irate) != len(raw) or any(abs(a - b) > 1e-9 * max(b, 1) for a, b in zip(irate, raw)):
        raise RuntimeError(f"irate steps {irate} do not match the scrape pairs {raw}")

    total = samples[-1][1]
    return {
        "label": label,
        "irate": irate,
        "mean": statistics.mean(irate),
        "window": inside[-1][0] - inside[0][0],
        "total": total,
        "total_rate": total / run["seconds"],
    }


def mibs(x):
    return x / MIB


def report(rows):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "accuracy.md")
    m = machine()
    ok = sum(r["within"] for r in rows)
    with open(path, "w") as f:
        f.write("# Accuracy of plumb's write bandwidth through Prometheus\n\n")
        f.write("Machine: " + "; ".join(f"{k} {v}" for k, v in m.items()) + ".\n\n")
        f.write(f"""Method. Each run writes for {RUNTIME} s on a loop-mounted ext4 ({IMAGE_MB} MiB
sparse image under /var/tmp) from its own new cgroup, while `plumb agent --modules io` is
scraped every {INTERVAL} s by a Prometheus server (Debian's 2.42). fio: `--rw=write
--ioengine=psync --bs=<size> --size={FIO_FILE_MB}M --time_based`, bandwidth `write.bw_bytes` of
its JSON report. MPI-IO: `bench/mpiio_write.c` on {MPI_RANKS} ranks (`mpirun --oversubscribe`),
each rank writing blocks of the transfer size with `MPI_File_write_at` into its own
{MPI_REGION_MB} MiB region of one shared file, bandwidth = all ranks' bytes / the slowest
rank's time between a barrier before the first write and one after the last. plumb's
instantaneous bandwidth is `sum(irate(plumb_io_write_bytes_total{{cgroup="<run's
cgroup>",mount="<mount point>"}}[{2 * INTERVAL}s]))` from `/api/v1/query_range`, step
{INTERVAL} s, evaluated half-way between scrapes so that each step is exactly one pair of
adjacent scrapes (checked against the raw samples). The window is the scrapes strictly inside
the workload's own timed interval (fio: its runtime, ending at its report's timestamp;
MPI-IO: the barriers' wall-clock times), so the two intervals holding the start and the end,
with partial activity, are left out; the headline ratio is the workload's bandwidth / the
mean of those steps (the paper's metric). Second table: all bytes plumb counted for the run
(the counter's last value: the cgroup is new) / the workload's own duration, which compares
the two over exactly the same interval.

""")
        f.write("| workload | transfer size | workload-reported MiB/s "
                "| mean of plumb's instantaneous MiB/s | ratio | within 1±0.01? |\n"
                "|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['workload']} | {r['size']} MiB | {mibs(r['bw']):.1f} "
                    f"| {mibs(r['mean']):.1f} | {r['ratio']:.4f} "
                    f"| {'yes' if r['within'] else 'NO'} |\n")
        f.write(f"\n{ok} of {len(rows)} within 1 ± {TOLERANCE}.\n\n")
        f.write("| workload | transfer size | workload bytes | plumb bytes "
                "| plumb bytes / workload's duration, MiB/s | ratio | window, s (steps) "
                "| instantaneous min–max, MiB/s |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['workload']} | {r['size']} MiB | {r['bytes']} | {r['total']:.0f} "
                    f"| {mibs(r['total_rate']):.1f} | {r['bw'] / r['total_rate']:.4f} "
                    f"| {r['window']:.1f} ({len(r['irate'])}) "
                    f"| {mibs(min(r['irate'])):.0f}–{mibs(max(r['irate'])):.0f} |\n")
        f.write("\nEvery instantaneous value (MiB/s), in order:\n\n")
        for r in rows:
            f.write(f"- {r['workload']} {r['size']} MiB: "
                    + ", ".join(f"{mibs(x):.0f}" for x in r["irate"]) + "\n")
    print(f"wrote {path}")


def main():
    require(["fio", "mpicc", "mpirun", "prometheus", "mkfs.ext4", "mount", "umount"])
    cleanup = Cleanup()
    rows = []
    try:
        scratch = tempfile.mkdtemp(prefix="plumb-accuracy-", dir="/tmp")
        cleanup.add(os.rmdir, scratch)
        binary = os.path.join(scratch, "mpiio_write")
        sh("mpicc", "-O2", "-Wall", "-Wextra", "-o", binary, os.path.join(HERE, "mpiio_write.c"))
        cleanup.add(os.unlink, binary)
        mnt = os.path.realpath(os.path.join(scratch, "ext4"))
        mount_image(cleanup, mnt, size_mb=IMAGE_MB)
        agent = Agent(cleanup, "--modules", "io")
        prom = Prometheus(cleanup, agent.port, INTERVAL)
        prom.wait_scrapes(2)
        workloads = (("fio", lambda cg, size: run_fio(cg, mnt, size, scratch)),
                     ("MPI-IO", lambda cg, size: run_mpiio(cg, mnt, size, binary)))
        for workload, run_workload in workloads:
            for size in SIZES_MIB:
                cg, label = make_cgroup(cleanup, f"plumb-accuracy-{os.getpid()}/"
                                        f"{workload.lower()}-{size}m")
                run = run_workload(cg, size)
                row = {"workload": workload, "size": size, **run,
                       **measure(prom, label, mnt, run)}
                row["ratio"] = row["bw"] / row["mean"]
                row["within"] = abs(row["ratio"] - 1) <= TOLERANCE
                rows.append(row)
                print(f"  {workload} {size} MiB: workload {mibs(row['bw']):.1f} MiB/s, "
                      f"plumb mean {mibs(row['mean']):.1f} MiB/s, ratio {row['ratio']:.4f}; "
                      f"bytes {row['bytes']} vs {row['total']:.0f}", flush=True)
    except Exception:
        traceback.print_exc()
        print("accuracy: could not run to the end", file=sys.stderr)
        return 2
    finally:
        cleanup.run()
    report(rows)
    ok = sum(r["within"] for r in rows)
    ratios = [r["ratio"] for r in rows]
    print(f"accuracy: {ok}/{len(rows)} within 1 ± {TOLERANCE} "
          f"(ratios {min(ratios):.4f} to {max(ratios):.4f})")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
