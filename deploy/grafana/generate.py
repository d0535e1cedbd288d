#!/usr/bin/env python3
"""Writes plumb's Grafana dashboards (plumb-*.json, next to this file).

The JSON files are generated so that every panel has the same shape, the same datasource
variable and the same filters; edit this file and run it again (`python3
deploy/grafana/generate.py`), never the JSON by hand: tests/integration/test_dashboards.py
fails when the files differ from what this writes. Every metric and label used here is in
docs/metrics.md; the test runs every expression against a real Prometheus scraping a real
agent.
"""

import json
import os
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}
HERE = os.path.dirname(os.path.abspath(__file__))
RI = "$__rate_interval"


def sel(metric, *matchers):
    """metric{m1,m2,...}: matchers are strings such as 'instance=~"$instance"'."""
    return f"{metric}{{{','.join(matchers)}}}" if matchers else metric


def eq(label, value):
    return f'{label}="{value}"'


def rx(label, value):
    return f'{label}=~"{value}"'


def rate(metric, *matchers, window=RI):
    return f"rate({sel(metric, *matchers)}[{window}])"


def quantile(q, metric, by, *matchers):
    return f"histogram_quantile({q}, sum by (le, {by}) ({rate(metric + '_bucket', *matchers)}))"


def mean(metric, by, *matchers):
    return (f"sum by ({by}) ({rate(metric + '_sum', *matchers)})\n/\n"
            f"sum by ({by}) ({rate(metric + '_count', *matchers)})")


class Dashboard:
    def __init__(self, uid, title, description):
        self.uid, self.title, self.description = uid, title, description
        self.panels, self.variables = [], []
        self.x = self.y = self.row_h = 0
        self.next_id = 1

    def variable(self, name, label, query, all_value=".*", multi=True):
        """A query variable from label_values(); "All" selects everything (regex all_value)."""
        self.variables.append({
            "name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "definition": query, "refresh": 2, "sort": 1, "regex": "",
            "multi": multi, "includeAll": True, "allValue": all_value,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "options": [], "hide": 0,
        })

    def row(self, title):
        self._newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "panels": [], "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}})
        self.y += 1

    def panel(self, kind, title, description, targets, w=12, h=8, unit=None, options=None,
              field_custom=None, transformations=None, overrides=None):
        if self.x + w > 24:
            self._newline()
        defaults = {}
        if unit:
            defaults["unit"] = unit
        if field_custom is not None:
            defaults["custom"] = field_custom
        p = {"type": kind, "title": title, "description": description, "id": self._id(),
             "datasource": DS, "gridPos": {"h": h, "w": w, "x": self.x, "y": self.y},
             "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
             "options": options or {}, "targets": []}
        for ref, t in zip("ABCDEFGHIJ", targets):
            t = dict(t)
            ref = t.pop("refId", ref)
            instant = t.pop("instant", False)
            target = {"datasource": DS, "refId": ref, "editorMode": "code", "expr": t.pop("expr"),
                      "range": not instant, "instant": instant}
            if instant:
                target["format"] = "table"
            target["legendFormat"] = t.pop("legend", "__auto")
            assert not t, f"unknown target keys {t}"
            p["targets"].append(target)
        if transformations:
            p["transformations"] = transformations
        self.panels.append(p)
        self.x += w
        self.row_h = max(self.row_h, h)

    def timeseries(self, title, description, targets, unit, stack=False, **kw):
        custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 20 if stack else 5,
                  "showPoints": "never", "spanNulls": False,
                  "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
        options = {"legend": {"displayMode": "table", "placement": "bottom",
                              "calcs": ["mean", "max", "lastNotNull"], "showLegend": True},
                   "tooltip": {"mode": "multi", "sort": "desc"}}
        self.panel("timeseries", title, description, targets, unit=unit, options=options,
                   field_custom=custom, **kw)

    def table(self, title, description, targets, unit=None, hide=("Time",), **kw):
        organize = {"id": "organize", "options": {
            "excludeByName": {name: True for name in hide}, "renameByName": {}}}
        self.panel("table", title, description, [dict(t, instant=True) for t in targets],
                   unit=unit, options={"showHeader": True, "cellHeight": "sm"},
                   transformations=[organize], **kw)

    def _newline(self):
        if self.x:
            self.y += self.row_h
        self.x = self.row_h = 0

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def json(self):
        templating = [{"name": "datasource", "label": "Data source", "type": "datasource",
                       "query": "prometheus", "current": {}, "hide": 0, "refresh": 1,
                       "regex": "", "options": [], "includeAll": False, "multi": False}]
        return {
            "title": self.title, "uid": self.uid, "description": self.description,
            "tags": ["plumb"], "editable": True, "graphTooltip": 1, "schemaVersion": 39,
            "version": 1, "refresh": "30s", "time": {"from": "now-1h", "to": "now"},
            "timepicker": {}, "timezone": "", "fiscalYearStartMonth": 0, "liveNow": False,
            "annotations": {"list": []},
            "links": [{"title": "plumb dashboards", "type": "dashboards", "tags": ["plumb"],
                       "asDropdown": True, "includeVars": True, "keepTime": True,
                       "icon": "external link", "targetBlank": False, "tooltip": "",
                       "url": ""}],
            "templating": {"list": templating + self.variables},
            "panels": self.panels,
        }

    def health(self, modules):
        """The agent's own view of the modules: up, events lost, map fill."""
        mods = "|".join(modules)
        inst = 'instance=~"$instance"'
        mod = rx("module", mods)
        self.row(f"Agent health ({', '.join(modules)})")
        self.timeseries(
            "Modules up", "1 while the module is loaded and attached (plumb_module_up); 0 when "
            "it failed to load: the agent's log says why.",
            [{"expr": "min by (instance, module) (" + sel("plumb_module_up", inst, mod) + ")",
              "legend": "{{instance}} {{module}}"}], "none", w=8)
        self.timeseries(
            "Events lost", "What the agent could not count, by module and reason "
            "(plumb_events_lost_total, docs/metrics.md): 0 on a healthy agent.",
            [{"expr": 'sum by (instance, module, reason) '
                      "(" + rate("plumb_events_lost_total", inst, mod) + ")",
              "legend": "{{instance}} {{module}} {{reason}}"}], "cps", w=8)
        self.timeseries(
            "Map fill", "Entries over capacity of each bounded map and table "
            "(plumb_map_entries / plumb_map_capacity): what is beyond 100% is counted as lost.",
            [{"expr": "max by (instance, module, map) (" + sel("plumb_map_entries", inst, mod)
                      + " / " + sel("plumb_map_capacity", inst, mod) + ")",
              "legend": "{{instance}} {{module}} {{map}}"}], "percentunit", w=8)


def io_dashboard():
    d = Dashboard("plumb-io", "plumb / I/O per workload and mount",
                  "File I/O per workload (cgroup) and file system (mount): the io module.")
    d.variable("instance", "Instance", "label_values(plumb_build_info, instance)")
    d.variable("workload", "Workload",
               'label_values(plumb_io_read_calls_total{instance=~"$instance"}, workload)')
    d.variable("mount", "Mount", 'label_values(plumb_io_read_calls_total{instance=~"$instance", '
               'workload=~"$workload"}, mount)')
    f = ('instance=~"$instance"', 'workload=~"$workload"', 'mount=~"$mount"')
    d.row("Bandwidth")
    for op in ("write", "read"):
        d.timeseries(f"{op.capitalize()} bandwidth per workload",
                     f"Bytes per second the workload's {op} calls moved "
                     f"(plumb_io_{op}_bytes_total), all selected mounts.",
                     [{"expr": f"sum by (workload) ({rate(f'plumb_io_{op}_bytes_total', *f)})",
                       "legend": "{{workload}}"}], "Bps")
    for op in ("write", "read"):
        d.timeseries(f"{op.capitalize()} bandwidth per mount",
                     f"Bytes per second {op} to each file system by the selected workloads.",
                     [{"expr": f"sum by (mount, fstype) ({rate(f'plumb_io_{op}_bytes_total', *f)})",
                       "legend": "{{mount}} ({{fstype}})"}], "Bps")
    d.row("Calls and errors")
    d.timeseries("Read and write calls", "Calls per second, failed ones included "
                 "(plumb_io_read_calls_total, plumb_io_write_calls_total).",
                 [{"expr": f"sum by (workload, mount) ({rate(f'plumb_io_{op}_calls_total', *f)})",
                   "legend": "{{workload}} " + op + " {{mount}}"} for op in ("read", "write")],
                 "ops")
    d.timeseries("Failed reads and writes", "Calls per second that returned an error. "
                 "mount=\"none\": calls on an fd that was not open (EBADF).",
                 [{"expr": f"sum by (workload, mount) ({rate(f'plumb_io_{op}_errors_total', *f)})",
                   "legend": "{{workload}} " + op + " {{mount}}"} for op in ("read", "write")],
                 "ops")
    d.timeseries("File operations", "Successful open, create, mkdir, unlink, rmdir, fsync, "
                 "rename per second (plumb_io_ops_total): is the workload hammering metadata, "
                 "or waiting on durability (fsync)?",
                 [{"expr": f"sum by (workload, op) ({rate('plumb_io_ops_total', *f)})",
                   "legend": "{{workload}} {{op}}"}], "ops")
    d.timeseries("Failed file operations", "Operations per second that failed "
                 "(plumb_io_op_errors_total; a failed open counts as open).",
                 [{"expr": f"sum by (workload, op) ({rate('plumb_io_op_errors_total', *f)})",
                   "legend": "{{workload}} {{op}}"}], "ops")
    d.row("Latency (calls in sampling windows, --io-latency-sample)")
    for op, calls in (("read", "read"), ("write", "write"), ("fsync", "fsync and fdatasync")):
        d.timeseries(f"{op.capitalize()} latency per mount, p50 and p99",
                     f"Entry-to-exit time of sampled {calls} calls "
                     "(histogram_quantile over plumb_io_latency_seconds_bucket).",
                     [{"expr": quantile(q, "plumb_io_latency_seconds", "mount", *f, f'op="{op}"'),
                       "legend": f"p{int(q * 100)} " + "{{mount}}"} for q in (0.5, 0.99)], "s")
    d.timeseries("Mean latency per workload", "Mean time of a sampled call, per workload and "
                 "call family (plumb_io_latency_seconds_sum / _count).",
                 [{"expr": mean("plumb_io_latency_seconds", "workload, op", *f),
                   "legend": "{{workload}} {{op}}"}], "s")
    d.timeseries("Bytes per call", "Mean bytes per read and write call: small calls cost "
                 "more per byte.",
                 [{"expr": "sum by (workload, mount) (" + rate(f"plumb_io_{op}_bytes_total", *f)
                           + ")\n/\nsum by (workload, mount) ("
                           + rate(f"plumb_io_{op}_calls_total", *f) + ")",
                   "legend": "{{workload}} " + op + " {{mount}}"} for op in ("read", "write")],
                 "bytes")
    d.row("Largest in the time range")
    d.table("Top workloads and mounts by bytes", "Bytes read and written in the selected "
            "time range, the 15 largest (workload, mount) pairs.",
            [{"expr": "topk(15,\n  sum by (instance, workload, mount, fstype) "
                      f"(increase({sel('plumb_io_read_bytes_total', *f)}[$__range]))\n"
                      "+ sum by (instance, workload, mount, fstype) "
                      f"(increase({sel('plumb_io_write_bytes_total', *f)}[$__range]))\n)"}],
            unit="bytes", w=24)
    d.health(["io"])
    return d


def waits_dashboard():
    d = Dashboard("plumb-waits", "plumb / Where time goes: CPU, waits, disks",
                  "Where each workload's threads spend their time (sched), what they wait on "
                  "(wait), what they ask of the disks (blk), and the signals `plumb diagnose` "
                  "ranks (docs/diagnose.md).")
    d.variable("instance", "Instance", "label_values(plumb_build_info, instance)")
    d.variable("workload", "Workload",
               'label_values(plumb_sched_run_seconds_total{instance=~"$instance"}, workload)')
    d.variable("device", "Disk",
               'label_values(plumb_blk_latency_seconds_count{instance=~"$instance"}, device)')
    f = ('instance=~"$instance"', 'workload=~"$workload"')
    def kind(k):
        return (eq("kind", k),) if k else ()

    ts = "Thread-seconds per second: 100% is one thread's whole time."
    d.row("Where the time goes (sched)")
    d.timeseries("On a CPU", "Time the workload's threads ran (plumb_sched_run_seconds_total). "
                 + ts, [{"expr": f"sum by (workload) ({rate('plumb_sched_run_seconds_total', *f)})",
                         "legend": "{{workload}}"}], "percentunit", w=8)
    d.timeseries("Waiting for a CPU (run queue)", "Time runnable but not running "
                 "(plumb_sched_runqueue_seconds_total): CPU contention. " + ts,
                 [{"expr": f"sum by (workload) ({rate('plumb_sched_runqueue_seconds_total', *f)})",
                   "legend": "{{workload}}"}], "percentunit", w=8)
    d.timeseries("Blocked and in I/O wait", "Uninterruptible sleep "
                 "(plumb_sched_block_seconds_total) and its part in io_schedule() "
                 "(plumb_sched_iowait_seconds_total). " + ts,
                 [{"expr": f"sum by (workload) ({rate('plumb_sched_block_seconds_total', *f)})",
                   "legend": "{{workload}} blocked"},
                  {"expr": f"sum by (workload) ({rate('plumb_sched_iowait_seconds_total', *f)})",
                   "legend": "{{workload}} iowait"}], "percentunit", w=8)
    d.timeseries("Time breakdown of the selected workloads", "Run + run queue + sleep + "
                 "blocked is the threads' whole time (stacked). " + ts,
                 [{"expr": f"sum({rate(f'plumb_sched_{m}_seconds_total', *f)})", "legend": name}
                  for m, name in (("run", "on CPU"), ("runqueue", "run queue"),
                                  ("block", "blocked"), ("sleep", "asleep"))],
                 "percentunit", stack=True)
    d.timeseries("Asleep (interruptible)", "Timers, futexes, pipes, sockets, poll: voluntary "
                 "waits (plumb_sched_sleep_seconds_total). " + ts,
                 [{"expr": f"sum by (workload) ({rate('plumb_sched_sleep_seconds_total', *f)})",
                   "legend": "{{workload}}"}], "percentunit")
    d.row("What threads wait on (wait)")
    d.timeseries("Blocked time by kind of wait", "Time blocked inside pipe, socket, futex, "
                 "epoll and poll/select calls (plumb_wait_seconds_total). " + ts,
                 [{"expr": f"sum by (workload, kind) ({rate('plumb_wait_seconds_total', *f)})",
                   "legend": "{{workload}} {{kind}}"}], "percentunit")
    d.timeseries("Blocking waits per second", "Each time a thread blocked inside such a call "
                 "(plumb_wait_calls_total); a call that finds its data ready does not block.",
                 [{"expr": f"sum by (workload, kind) ({rate('plumb_wait_calls_total', *f)})",
                   "legend": "{{workload}} {{kind}}"}], "ops")
    d.timeseries("Mean time per blocking wait", "Blocked time over blocking waits, per kind.",
                 [{"expr": f"sum by (workload, kind) ({rate('plumb_wait_seconds_total', *f)})\n/\n"
                           f"sum by (workload, kind) ({rate('plumb_wait_calls_total', *f)})",
                   "legend": "{{workload}} {{kind}}"}], "s")
    d.timeseries("Futex wakes", "Futex wakes that woke a waiting thread "
                 "(plumb_futex_wakes_total): who releases the locks others wait on.",
                 [{"expr": f"sum by (workload) ({rate('plumb_futex_wakes_total', *f)})",
                   "legend": "{{workload}}"}], "ops")
    d.row("Diagnosis signals (docs/diagnose.md: a rise of one is a likely cause)")
    signals = [("plumb_sched_runqueue_seconds_total", None, "run queue: CPU contention"),
               ("plumb_wait_seconds_total", "futex", "futex: lock contention"),
               ("plumb_sched_block_seconds_total", None, "blocked: disk contention"),
               ("plumb_wait_seconds_total", "socket", "socket: a slow dependency"),
               ("plumb_wait_seconds_total", "pipe", "pipe: a slow pipeline stage"),
               ("plumb_wait_seconds_total", "epoll", "epoll: waiting in epoll"),
               ("plumb_wait_seconds_total", "poll", "poll: waiting in poll/select")]
    d.timeseries("Diagnosis signals", "The per-workload totals of the signals `plumb "
                 "diagnose` compares against a baseline (per resource and thread there; "
                 "per workload here). " + ts,
                 [{"expr": "sum by (workload) (" + rate(m, *f, *kind(k)) + ")",
                   "legend": "{{workload}} " + name} for m, k, name in signals],
                 "percentunit", w=14, h=10)
    parts = ["label_replace(sum by (instance, workload) ("
             + rate(m, *f, *kind(k), window="$__range") + f'), "signal", "{name}", "", "")'
             for m, k, name in signals]
    d.table("Largest signals in the time range", "Mean over the selected range of each "
            "signal, the 15 largest (workload, signal) pairs. " + ts,
            [{"expr": "topk(15,\n  " + "\n  or ".join(parts) + "\n)"}],
            unit="percentunit", w=10, h=10)
    d.row("Disks (blk)")
    fb = ('instance=~"$instance"', 'device=~"$device"')
    d.timeseries("Disk bandwidth by device and op", "Sectors submitted to each disk, as bytes "
                 "(plumb_blk_sectors_total x 512), all workloads.",
                 [{"expr": f"512 * sum by (device, op) ({rate('plumb_blk_sectors_total', *fb)})",
                   "legend": "{{device}} {{op}}"}], "Bps")
    d.timeseries("Disk bandwidth by workload", "Bytes each workload submitted to each disk. "
                 "Buffered writes reach the disk from the kernel's flusher threads (cgroup /).",
                 [{"expr": "512 * sum by (workload, device) ("
                           + rate("plumb_blk_sectors_total", *fb, rx("workload", "$workload"))
                           + ")",
                   "legend": "{{workload}} {{device}}"}], "Bps")
    d.timeseries("Disk request latency, p50 and p99", "From the request's start to its "
                 "completion (plumb_blk_latency_seconds).",
                 [{"expr": quantile(q, "plumb_blk_latency_seconds", "device, op", *fb),
                   "legend": f"p{int(q * 100)} " + "{{device}} {{op}}"} for q in (0.5, 0.99)],
                 "s")
    d.timeseries("Disk requests per second", "Completed requests per disk and op "
                 "(plumb_blk_latency_seconds_count).",
                 [{"expr": f"sum by (device, op) ({rate('plumb_blk_latency_seconds_count', *fb)})",
                   "legend": "{{device}} {{op}}"}], "ops")
    d.health(["sched", "wait", "blk"])
    return d


def netstack_dashboard():
    d = Dashboard("plumb-netstack", "plumb / Network stack: components and bottleneck",
                  "Time sampled packets spend in each component of the host's network stack, "
                  "per device and network namespace, and the component the agent names as the "
                  "bottleneck (docs/netstack.md).")
    d.variable("instance", "Instance", "label_values(plumb_build_info, instance)")
    m = "plumb_netstack_latency_seconds_count"
    d.variable("netns", "Network namespace",
               f'label_values({m}{{instance=~"$instance"}}, netns)')
    d.variable("device", "Device",
               f'label_values({m}{{instance=~"$instance", netns=~"$netns"}}, device)')
    d.variable("component", "Component", f'label_values({m}{{instance=~"$instance", '
               'netns=~"$netns", device=~"$device"}, component)')
    d.variable("workload", "Workload (send and socket stages)",
               f'label_values({m}{{instance=~"$instance", workload!=""}}, workload)')
    f = ('instance=~"$instance"', 'netns=~"$netns"', 'device=~"$device"',
         'component=~"$component"')
    key = "netns, device, component, direction"
    d.row("The bottleneck")
    d.table("Bottleneck now", "The series the agent judges the bottleneck at its last "
            "second (plumb_netstack_bottleneck == 1): significantly slower than its baseline, "
            "beyond the host-wide factor, and carrying most of the increase. Empty: none.",
            [{"expr": f"{sel('plumb_netstack_bottleneck', *f)} == 1"}],
            hide=("Time", "__name__", "job", "Value"), w=12, h=6)
    d.table("Bottlenecks in the time range", "Each series that was the bottleneck at some "
            "scrape in the selected range.",
            [{"expr": f"max by (instance, {key}) "
                      f"(max_over_time({sel('plumb_netstack_bottleneck', *f)}[$__range])) > 0"}],
            hide=("Time", "Value"), w=12, h=6)
    d.panel("state-timeline", "Bottleneck over time", "1 (red) while the series is the "
            "bottleneck.",
            [{"expr": f"max by ({key}) ({sel('plumb_netstack_bottleneck', *f)})",
              "legend": "{{netns}} {{device}} {{component}}"}], w=24, h=8, unit="none",
            options={"showValue": "never", "mergeValues": True, "rowHeight": 0.8,
                     "alignValue": "left", "legend": {"showLegend": False},
                     "tooltip": {"mode": "single"}},
            field_custom={"fillOpacity": 80, "lineWidth": 0},
            overrides=[], transformations=None)
    d.panels[-1]["fieldConfig"]["defaults"]["color"] = {"mode": "thresholds"}
    d.panels[-1]["fieldConfig"]["defaults"]["thresholds"] = {
        "mode": "absolute", "steps": [{"color": "green", "value": None},
                                      {"color": "red", "value": 1}]}
    d.row("Time per component")
    d.timeseries("Mean time per packet", "Mean time a sampled packet spent in each component "
                 "(plumb_netstack_latency_seconds_sum / _count).",
                 [{"expr": mean("plumb_netstack_latency_seconds", key, *f),
                   "legend": "{{netns}} {{device}} {{component}}"}], "s")
    d.timeseries("p99 per component", "99th percentile of the time in each component "
                 "(histogram_quantile over plumb_netstack_latency_seconds_bucket).",
                 [{"expr": quantile(0.99, "plumb_netstack_latency_seconds", key, *f),
                   "legend": "{{netns}} {{device}} {{component}}"}], "s")
    # per second the programs followed packets: with the agent's attach windows (the first
    # second of each, docs/netstack.md section 5) a plain rate would be that share of it
    followed = ("on (instance) group_left () "
                + rate("plumb_netstack_followed_seconds_total", 'instance=~"$instance"'))
    d.timeseries("Packet time by component", "Seconds of sampled packets' time per second "
                 "the programs followed packets (plumb_netstack_followed_seconds_total: with "
                 "the agent's attach windows, the first second of each), stacked by "
                 "component: where the host's packets wait, in total.",
                 [{"expr": f"sum by (component) ({rate('plumb_netstack_latency_seconds_sum', *f)}"
                           f" / {followed})",
                   "legend": "{{component}}"}], "s", stack=True)
    d.timeseries("Sampled packets per second", "Packets followed through each component "
                 "(1 in --netstack-sample flows), per second the programs followed packets "
                 "(plumb_netstack_followed_seconds_total: with the agent's attach windows, "
                 "the first second of each).",
                 [{"expr": f"sum by ({key}) ({rate('plumb_netstack_latency_seconds_count', *f)}"
                           f" / {followed})",
                   "legend": "{{netns}} {{device}} {{component}}"}], "pps")
    d.timeseries("p50 per component", "Median time in each component.",
                 [{"expr": quantile(0.5, "plumb_netstack_latency_seconds", key, *f),
                   "legend": "{{netns}} {{device}} {{component}}"}], "s", w=24)
    d.row("Per workload (the sender's send stage, the reader's socket stage)")
    fw = f + ('workload=~"$workload"', 'workload!=""')
    d.timeseries("p99 per workload", "The stages that run in the workload's own context: "
                 "send (its TCP send until the packet is queued, 6.18+) and socket (the "
                 "receive queue until it reads).",
                 [{"expr": quantile(0.99, "plumb_netstack_latency_seconds",
                                    "workload, component", *fw),
                   "legend": "{{workload}} {{component}}"}], "s")
    d.timeseries("Mean per workload", "Mean time of those stages per workload.",
                 [{"expr": mean("plumb_netstack_latency_seconds", "workload, component", *fw),
                   "legend": "{{workload}} {{component}}"}], "s")
    d.health(["netstack"])
    return d


def traffic_dashboard():
    d = Dashboard("plumb-traffic", "plumb / Traffic: who talks to whom",
                  "TCP, UDP and unix-socket traffic per process and peer: the flow module. "
                  "The cross-host join by address is `plumb graph --prometheus` "
                  "(docs/graph.md); this graph shows each agent's own ends.")
    d.variable("instance", "Instance", "label_values(plumb_build_info, instance)")
    d.variable("workload", "Workload",
               'label_values(plumb_flow_bytes_total{instance=~"$instance"}, workload)')
    d.variable("protocol", "Protocol",
               'label_values(plumb_flow_bytes_total{instance=~"$instance"}, protocol)')
    f = ('instance=~"$instance"', 'workload=~"$workload"', 'protocol=~"$protocol"')
    client = f + ('role="client"',)
    server = f + ('role="server"',)

    def bytes_in_range(*matchers):
        return f"rate({sel('plumb_flow_bytes_total', *matchers)}[$__range])"

    def copy(expr, dst, src):
        return f'label_replace({expr}, "{dst}", "$1", "{src}", "(.*)")'

    def const(expr, dst, value):
        return f'label_replace({expr}, "{dst}", "{value}", "", "")'

    def join(expr, dst, sep, *srcs):
        return f'label_join({expr}, "{dst}", "{sep}", ' + ", ".join(f'"{x}"' for x in srcs) + ")"

    def process(expr):  # a process node: instance, workload, command
        return join(expr, "pid_", "|", "instance", "workload", "comm")

    def service(expr):  # the peer address and the server's port; unix peers have no port
        return f'label_replace({join(expr, "svc_", ":", "peer_addr", "peer_port")}, ' \
               '"svc_", "$1", "svc_", "(.*):")'

    def edge(expr, source, target):
        return join(copy(copy(expr, "source", source), "target", target),
                    "id", " -> ", "source", "target")

    def node(expr, id_from, title_from, subtitle):
        expr = copy(copy(expr, "id", id_from), "title", title_from)
        # a process that exited before its command was read has an empty comm: the node
        # still needs a title (label_replace's regex is anchored: "" matches only "")
        expr = f'label_replace({expr}, "title", "(exited)", "title", "")'
        if subtitle.startswith("label:"):
            return copy(expr, "subtitle", subtitle[6:])
        return const(expr, "subtitle", subtitle)

    # For TCP and UDP a server end's peer is its client's address; for unix sockets
    # peer_addr is always the server's address (docs/metrics.md), so a unix server end is
    # fed by the service its clients name.
    unix_server = server + ('protocol="unix"',)
    inet_server = server + ('protocol!="unix"',)
    edges = ("sum by (id, source, target) (\n  "
             + edge(service(process(bytes_in_range(*client))), "pid_", "svc_")
             + "\n  or\n  "
             + edge(service(process(bytes_in_range(*unix_server))), "svc_", "pid_")
             + "\n  or\n  "
             + edge(process(bytes_in_range(*inet_server)), "peer_addr", "pid_") + "\n)")
    nodes = "\nor\n".join(
        "sum by (id, title, subtitle) (\n  " + n + "\n)" for n in (
            node(process(bytes_in_range(*f)), "pid_", "comm", "label:workload"),
            node(service(bytes_in_range(*client)) + "\n  or\n  "
                 + service(bytes_in_range(*unix_server)), "svc_", "svc_", "service"),
            node(bytes_in_range(*inet_server), "peer_addr", "peer_addr", "client address")))
    d.row("Who talks to whom")
    d.panel("nodeGraph", "Traffic graph",
            "Processes (title: command, subtitle: workload) and the services they are clients "
            "of (peer address:server port, or a unix socket's address), and the client "
            "addresses of the TCP and UDP connections they serve. Edges: bytes per second "
            "both ways over the selected range (plumb_flow_bytes_total). Built from two table "
            "queries, refId nodes (id, title, subtitle) and edges (id, source, target); the "
            "value becomes mainStat.",
            [{"refId": "nodes", "expr": nodes, "instant": True},
             {"refId": "edges", "expr": edges, "instant": True}], w=24, h=16,
            options={"nodes": {"mainStatUnit": "Bps"}, "edges": {"mainStatUnit": "Bps"}},
            transformations=[{"id": "calculateField", "options": {
                "mode": "reduceRow", "reduce": {"reducer": "sum"}, "alias": "mainStat",
                "timeSeries": False, "replaceFields": False}}])
    for t in d.panels[-1]["targets"]:
        t["format"] = "table"
    d.table("Top talkers in the time range", "Bytes each process moved to and from each peer "
            "in the selected range, the 20 largest.",
            [{"expr": "topk(20, sum by (instance, workload, comm, role, protocol, peer_addr, "
                      f"peer_port) (increase({sel('plumb_flow_bytes_total', *f)}[$__range])))"}],
            unit="bytes", w=24)
    d.row("Bytes")
    for direction, verb in (("tx", "sent"), ("rx", "received")):
        d.timeseries(f"Bytes {verb} per process and peer", f"Payload bytes per second {verb} "
                     "by each process to and from each peer (address:server port).",
                     [{"expr": "sum by (comm, peer_addr, peer_port) ("
                               + rate("plumb_flow_bytes_total", *f, eq("direction", direction))
                               + ")",
                       "legend": "{{comm}} " + ("->" if direction == "tx" else "<-") +
                                 " {{peer_addr}}:{{peer_port}}"}], "Bps")
    d.timeseries("Bytes per workload", "Payload bytes per second per workload, each way.",
                 [{"expr": f"sum by (workload, direction) ({rate('plumb_flow_bytes_total', *f)})",
                   "legend": "{{workload}} {{direction}}"}], "Bps")
    d.timeseries("Bytes per service", "Payload bytes per second per server port, from the "
                 "clients' side and the servers' side.",
                 [{"expr": "sum by (role, peer_port, protocol) ("
                           + rate("plumb_flow_bytes_total", *f) + ")",
                   "legend": "{{role}} {{protocol}} port {{peer_port}}"}], "Bps")
    d.row("Connections and segments")
    d.timeseries("New connections per second", "TCP connections established, UDP flows and "
                 "unix sockets seen (plumb_flow_connections_total), per process and service.",
                 [{"expr": f"sum by (comm, role, protocol, peer_addr, peer_port) "
                           f"({rate('plumb_flow_connections_total', *f)})",
                   "legend": "{{comm}} {{role}} {{protocol}} {{peer_addr}}:{{peer_port}}"}],
                 "cps")
    d.timeseries("TCP segments per second", "Segments sent and received, every segment "
                 "(plumb_flow_segments_total); with --flow-bytes calls they are added when a "
                 "connection closes.",
                 [{"expr": f"sum by (comm, direction, peer_port) "
                           f"({rate('plumb_flow_segments_total', *f)})",
                   "legend": "{{comm}} {{direction}} port {{peer_port}}"}], "pps")
    d.table("Hosts and their addresses", "The name each agent reports its host by and its "
            "addresses (plumb_host_address): what `plumb graph` joins peer addresses to.",
            [{"expr": sel("plumb_host_address", rx("instance", "$instance"))}],
            hide=("Time", "__name__", "Value"), w=24, h=6)
    d.health(["flow"])
    return d


DASHBOARDS = {"plumb-io.json": io_dashboard, "plumb-waits.json": waits_dashboard,
              "plumb-netstack.json": netstack_dashboard, "plumb-traffic.json": traffic_dashboard}


def render():
    """{file name: JSON text} of every dashboard."""
    return {name: json.dumps(fn().json(), indent=2) + "\n" for name, fn in DASHBOARDS.items()}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    for name, text in render().items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
