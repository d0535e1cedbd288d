#!/usr/bin/env python3
"""Records a communication graph from a real test topology for bench/place.py.

Three "hosts" (network namespaces on one bridge, tests/integration/lib.Hosts), one agent per
host (--netns), and a small service deployment of tests/integration/flowwork.py processes,
each in its own cgroup (its workload): five servers (two api, a database, a cache, a queue)
and five clients that each talk to several of them (a web tier to both api, two workers to
database, cache and queue, a batch job, a scraper). Then
`plumb graph --from <the three agents> --format json` is written to
bench/data/recorded-graph.json, with each process's cpu and memory demand added (servers 1
cpu, clients 0.5; 512 MiB each) and bench/data/recorded-hosts.json (4 cpu and 4 GiB each:
7.5 cpu of demand on 12). Needs root (BPF, namespaces). Takes ~20 s.
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from lib import PLUMB, Agent, Cleanup, Hosts, make_cgroup, settle, value  # noqa: E402

FLOWWORK = os.path.join(HERE, "..", "tests", "integration", "flowwork.py")
# servers: name -> (host index, port, reply bytes per connection)
SERVERS = {"api-a": (1, 8001, 40_000), "api-b": (2, 8001, 40_000), "db": (2, 5432, 900_000),
           "cache": (2, 6379, 2_000), "queue": (0, 5672, 100)}
# clients: name -> (host index, [(server, connections, bytes sent per connection)])
CLIENTS = {"web": (0, [("api-a", 40, 3_000), ("api-b", 40, 3_000)]),
           "worker-a": (1, [("db", 20, 1_000), ("cache", 200, 300), ("queue", 50, 20_000)]),
           "worker-b": (2, [("cache", 200, 300), ("queue", 50, 20_000), ("db", 5, 1_000)]),
           "batch": (1, [("db", 30, 500), ("queue", 5, 100)]),
           "scraper": (0, [("api-a", 10, 200), ("api-b", 10, 200), ("db", 10, 200)])}


def main():
    if os.geteuid() != 0:
        sys.exit("record-graph.py: needs root (BPF programs, network namespaces)")
    cleanup = Cleanup()
    try:
        hosts = Hosts(cleanup, 3)
        agents = [Agent(cleanup, "--modules", "flow", "--netns", name, "--host",
                        f"host{i + 1}", wait_for_module=False)
                  for i, name in enumerate(hosts.names)]
        for a in agents:
            settle(a, lambda m: value(m, "plumb_module_up", module="flow") == 1, timeout=15)
        tag = f"plumb-record-{os.getpid()}"
        procs = []
        for name, (h, port, reply) in SERVERS.items():
            cg, _ = make_cgroup(cleanup, f"{tag}/{name}")
            p = hosts.run(h, cg, sys.executable, FLOWWORK, "-", "server", hosts.addrs[h],
                          str(port), str(reply), stdout=subprocess.PIPE, text=True)
            cleanup.add(p.kill)
            assert p.stdout.readline().strip() == "listening"
            procs.append(p)
        for name, (h, targets) in CLIENTS.items():
            cg, _ = make_cgroup(cleanup, f"{tag}/{name}")
            spec = ",".join(f"{hosts.addrs[SERVERS[t][0]]}/{SERVERS[t][1]}/{n}/{size}"
                            for t, n, size in targets)
            p = hosts.run(h, cg, sys.executable, FLOWWORK, "-", "mix", spec, "-",
                          stdout=subprocess.PIPE, text=True)
            out, _ = p.communicate(timeout=120)
            assert out.strip() == "done", out
        time.sleep(2)  # closed connections' ends paired and applied
        urls = ",".join(f"http://127.0.0.1:{a.port}" for a in agents)
        r = subprocess.run([PLUMB, "graph", "--from", urls, "--format", "json"],
                           capture_output=True, text=True, check=True)
        graph = json.loads(r.stdout)
        servers = {p.pid for p in procs}
        for v in graph["vertices"]:
            if not v["id"].startswith("external/"):
                v["cpu"] = 1 if v["pid"] in servers else 0.5
                v["memory_bytes"] = 512 << 20
        with open(os.path.join(HERE, "data", "recorded-graph.json"), "w") as f:
            json.dump(graph, f, indent=1)
            f.write("\n")
        with open(os.path.join(HERE, "data", "recorded-hosts.json"), "w") as f:
            json.dump([{"name": f"host{i + 1}", "cpu": 4, "memory_bytes": 4 << 30}
                       for i in range(3)], f, indent=1)
            f.write("\n")
        print(f"recorded {len(graph['vertices'])} vertices, {len(graph['edges'])} edges")
    finally:
        cleanup.run()


if __name__ == "__main__":
    main()
