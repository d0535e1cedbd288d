// SPDX-License-Identifier: GPL-2.0
/* plumb: what a Linux host's plumbing is doing, per workload. */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "cli.h"
#include "diagnose.h"
#include "netstack_view.h"
#include "graph_cmd.h"
#include "io_view.h"
#include "log.h"
#include "place_view.h"
#include "top.h"
#include "plumb.h"

struct cmd {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
	void (*usage)(FILE *out);
};

static void agent_usage(FILE *out)
{
	fprintf(out,
		"Usage: plumb agent [--listen ADDR:PORT] [--modules LIST] [-v] [options]\n"
		"\n"
		"Run the agent in the foreground: load the modules and serve Prometheus metrics.\n"
		"\n"
		"  -l, --listen ADDR:PORT   where to serve /metrics and /healthz (default %s:%u)\n"
		"  -m, --modules LIST       comma-separated modules to load (default: all)\n"
		"      --check              load the modules, print what is available, exit\n"
		"      --cgroup-grace DUR   keep a removed cgroup's counts this long, whole "
		"seconds (5m)\n"
		"      --io-capacity N      (cgroup, mount) pairs the io module keeps (default "
		"4096)\n"
		"      --io-latency-sample N  time read/write/fsync calls in windows, 1/N of each\n"
		"                           second (a power of two; default %u; 1 times every "
		"call)\n"
		"      --no-io-latency      no latency histogram: no sys_enter programs at all\n"
		"      --flow-capacity N    TCP connections the flow module follows at once\n"
		"                           (default 131072)\n"
		"      --wait-capacity N    (thread, resource) pairs the wait module keeps;\n"
		"                           above 3/4 the oldest go (default 65536)\n"
		"      --flow-bytes MODE    where TCP byte counts come from: calls (each send and\n"
		"                           receive, 6.3+), counters (TCP's own, read at close\n"
		"                           and on each scrape), off; default auto: calls where\n"
		"                           the kernel can, else counters\n"
		"      --netstack-sample N  netstack follows the packets of 1 in N flows (by\n"
		"                           flow hash; default %u: every flow)\n"
		"      --netstack-window N  netstack's programs are attached for 1 s in every\n"
		"                           N s (default %u; 1: always attached)\n"
		"      --netns NAME         observe only this network namespace (a name under\n"
		"                           /run/netns, or a path such as /proc/PID/ns/net);\n"
		"                           the HTTP server stays in the agent's own namespace\n"
		"      --host NAME          the host name in plumb_host_info and /api/v1/graph\n"
		"                           (default: the --netns name, else the host name)\n"
		"      --web-config FILE    TLS and basic auth for the HTTP server, in the\n"
		"                           Prometheus exporter-toolkit's format "
		"(docs/security.md)\n"
		"      --seccomp MODE       syscalls outside the agent's list: enforce (EPERM,\n"
		"                           the default), log (allowed, the kernel logs them),\n"
		"                           off (docs/security.md)\n"
		"      --pin DIR            carry every counter over a restart: at a clean exit\n"
		"                           their values go into a map pinned in DIR (on a bpf\n"
		"                           file system), the next agent continues from them;\n"
		"                           io, blk and sched programs stay attached and the\n"
		"                           next agent takes them over (docs/continuity.md)\n"
		"      --pin-capacity N     counter series carried at most (default %u)\n"
		"  -v, --verbose            more log output (twice: libbpf's too)\n"
		"  -h, --help               this help\n"
		"\n"
		"Examples:\n"
		"  plumb agent\n"
		"  plumb agent --listen 0.0.0.0:9977 --web-config /etc/plumb/web.yml\n"
		"  plumb agent --netns pod1 --listen 127.0.0.1:9978\n"
		"  plumb agent --pin /sys/fs/bpf/plumb\n"
		"  curl -s localhost:9977/api/v1/graph\n"
		"  plumb agent --listen 0.0.0.0:9977 --modules io\n"
		"  curl -s localhost:9977/metrics | grep plumb_io_write_bytes_total\n",
		PLUMB_DEFAULT_ADDR, PLUMB_DEFAULT_PORT, PLUMB_DEFAULT_LATENCY_SAMPLE,
		PLUMB_DEFAULT_NETSTACK_SAMPLE, PLUMB_DEFAULT_NETSTACK_WINDOW,
		PLUMB_DEFAULT_PIN_CAPACITY);
}

static void io_usage(FILE *out)
{
	fprintf(out,
		"Usage: plumb io [--interval DUR] [--count N] [--json]\n"
		"\n"
		"Live file I/O per workload and mount: bytes/s, calls/s, errors, operations/s,\n"
		"p50/p99 read and write latency and p99 fsync latency, over each interval.\n"
		"Needs no running agent.\n"
		"\n"
		"  -i, --interval DUR   refresh interval, e.g. 1s, 500ms, 2m (default 1s)\n"
		"  -c, --count N        stop after N intervals (default: until Ctrl-C)\n"
		"  -j, --json           one JSON object per interval instead of a table\n"
		"      --io-latency-sample N  time calls 1/N of the time for p50/p99 (default %u)\n"
		"      --no-io-latency  no latency histogram (p50/p99 shown as -)\n"
		"  -v, --verbose        say when the programs are attached (twice: libbpf's log)\n"
		"  -h, --help           this help\n"
		"\n"
		"On a terminal the table refreshes in place; otherwise each interval is appended.\n"
		"\n"
		"Examples:\n"
		"  plumb io\n"
		"  plumb io --interval 2s --count 5\n"
		"  plumb io --json --count 1 | jq '.rows[] | {workload, mount, "
		"write_bytes_per_second}'\n",
		PLUMB_DEFAULT_LATENCY_SAMPLE);
}

static void top_usage(FILE *out)
{
	fprintf(out,
		"Usage: plumb top [--interval DUR] [--sort COLUMN] [--filter TEXT] [--batch | "
		"--json]\n"
		"                 [--count N]\n"
		"\n"
		"One live view of the host, per workload (cgroup): CPU, run-queue and blocked "
		"time,\n"
		"the longest wait by kind, file I/O, network bytes to peers, and the network\n"
		"stack's bottleneck. Loads the wait, io, flow and netstack modules itself: needs "
		"no\n"
		"running agent. Times are percent of one CPU (thread-seconds per second, summed\n"
		"over the workload's threads), rates per second over the interval.\n"
		"\n"
		"  -i, --interval DUR   refresh interval, at least 250ms (default 1s)\n"
		"  -s, --sort COLUMN    cpu (default), runq, block, wait, read, write, net, name\n"
		"  -f, --filter TEXT    only workloads whose name or cgroup contains TEXT (any "
		"case)\n"
		"  -b, --batch          plain lines, also on a terminal (the default when stdout "
		"is\n"
		"                       not one)\n"
		"  -j, --json           one JSON object per interval: every active workload, the\n"
		"                       numbers unrounded (thread-seconds and bytes per second)\n"
		"  -c, --count N        stop after N intervals (default: until q or Ctrl-C)\n"
		"  -v, --verbose        say which modules loaded (twice: libbpf's log)\n"
		"  -h, --help           this help\n"
		"\n"
		"Keys: q quit; < > or Left Right: sort column; c r b w i o n s: sort by cpu, "
		"runq,\n"
		"block, wait, read, write (o: output), net, name; / filter (Enter applies, Esc\n"
		"cancels, empty clears); Up Down PgUp PgDn Home End: select; Enter: drill into "
		"the\n"
		"workload (its mounts, peers, netstack components, threads and what each waits "
		"on);\n"
		"Esc or Backspace: back; p or Space: pause.\n"
		"\n"
		"Examples:\n"
		"  plumb top\n"
		"  plumb top --sort wait --filter slurm\n"
		"  plumb top --batch --count 3 --sort net\n");
}

static void place_usage(FILE *out)
{
	fprintf(out,
		"Usage: plumb place --graph GRAPH.json --hosts HOSTS.json\n"
		"                   [--format table|json|k8s] [--max-moves N] [--pin GLOB]...\n"
		"                   [--peers N] [-v]\n"
		"\n"
		"Placement advice: which workloads to move to which hosts so that less traffic\n"
		"crosses hosts, without exceeding any host's cpu or memory. The graph is what\n"
		"'plumb graph --format json' writes; a vertex may add \"cpu\" (cores, default 1)\n"
		"and \"memory_bytes\" (default 0). HOSTS.json is a list of hosts:\n"
		"  [{\"name\": \"hostA\", \"cpu\": 8, \"memory_bytes\": 17179869184},\n"
		"   {\"name\": \"hostB\", \"cpu\": 8}]     (no memory_bytes: no memory limit)\n"
		"External vertices stay where they are. Needs no agent and no root.\n"
		"\n"
		"  -g, --graph FILE     the communication graph (docs/graph.md §4, §5)\n"
		"  -H, --hosts FILE     the hosts and their capacities\n"
		"  -f, --format FMT     table (default); json: the plan as one object; k8s: YAML\n"
		"                       node and pod affinity for each moved workload\n"
		"      --max-moves N    move at most N workloads (default: no limit)\n"
		"      --pin GLOB       workloads whose vertex id matches GLOB stay (repeatable,\n"
		"                       up to %d; e.g. 'db-*/*')\n"
		"      --peers N        k8s: podAffinity terms for the N heaviest peers that end\n"
		"                       up on the same host (default %d, 0 for none)\n"
		"  -v, --verbose        what each start of the search gave, on stderr\n"
		"  -h, --help           this help\n"
		"\n"
		"Exit status: 0 with a plan (maybe no moves), 1 on bad input or when no placement\n"
		"fits the capacities, 2 on a usage error.\n"
		"\n"
		"Examples:\n"
		"  plumb graph --format json > graph.json\n"
		"  plumb place --graph graph.json --hosts hosts.json\n"
		"  plumb place -g graph.json -H hosts.json --format json | jq '.moves[]'\n"
		"  plumb place -g graph.json -H hosts.json --max-moves 3 --pin 'db*' -f k8s\n",
		PLACE_MAX_PINS, PLACE_DEFAULT_PEERS);
}

static void graph_usage(FILE *out)
{
	fprintf(out,
		"Usage: plumb graph [--projection process|type|host]\n"
		"                   [--format table|json|dot|svg] [-o FILE]\n"
		"                   [--from URL,... | --prometheus URL [--window DUR]]\n"
		"\n"
		"Who talks to whom: the ends of TCP, UDP and unix connections the agents saw,\n"
		"joined into edges from client to server (docs/graph.md). Asks running agents,\n"
		"or a Prometheus that scrapes them.\n"
		"\n"
		"  -p, --projection P  process (default): a vertex per process; type: one per\n"
		"                      workload, else comm, across hosts; host: one per host,\n"
		"                      edges within a host dropped\n"
		"  -f, --format F      table (default), json, dot (Graphviz), svg (runs dot)\n"
		"  -o, --output FILE   write there instead of standard output\n"
		"      --from URL,...  agents to ask, comma-separated, repeatable (default\n"
		"                      http://%s:%u); a URL without a path gets %s\n"
		"      --prometheus URL  a Prometheus that scrapes the agents (base URL)\n"
		"      --window DUR    with --prometheus: the traffic of the last DUR, in whole\n"
		"                      seconds (default 5m); agents only have totals since\n"
		"                      each started\n"
		"  -h, --help          this help\n"
		"\n"
		"Exit status: 0 done; 1 a source could not be read, sent a malformed document\n"
		"or more than plumb's limits, or the output failed; 2 usage error.\n"
		"\n"
		"Examples:\n"
		"  plumb graph\n"
		"  plumb graph --from http://10.0.0.1:9977,http://10.0.0.2:9977 -p type\n"
		"  plumb graph --prometheus http://127.0.0.1:9090 --window 15m --format json\n"
		"  plumb graph --projection host --format svg -o hosts.svg\n",
		PLUMB_DEFAULT_ADDR, PLUMB_DEFAULT_PORT, CLI_GRAPH_PATH);
}

static void diagnose_help(FILE *out)
{
	fprintf(out,
		"Usage: plumb diagnose (--pid P | --cgroup PATH | --comm REGEX)\n"
		"                      [--duration 30s] [--interval 1s]\n"
		"                      [--baseline-duration 10s | --baseline FILE]\n"
		"                      [--record FILE] [--json] [--explain-tracking]\n"
		"\n"
		"Why did it slow down? Follows the target's threads and the threads they share a\n"
		"pipe, a local socket or a futex with (or fork), measures where their time goes\n"
		"each interval (CPU, run queue, blocked, and waits per pipe, socket, futex and\n"
		"epoll instance), and compares the run after the baseline with the baseline. It\n"
		"prints the likely causes, ranked, with their evidence, or 'no significant "
		"change'.\n"
		"Loads its own BPF programs: needs no agent (docs/diagnose.md).\n"
		"\n"
		"  -p, --pid P               the target: a process (all its threads)\n"
		"  -g, --cgroup PATH         the target: the threads of a cgroup and its children\n"
		"  -c, --comm REGEX          the target: processes whose name matches\n"
		"  -d, --duration DUR        the whole run, baseline included (default 30s)\n"
		"  -i, --interval DUR        one sample every DUR (default 1s)\n"
		"      --baseline-duration DUR  the run's first DUR is the baseline (default 10s)\n"
		"      --baseline FILE       compare with a recording (--record) instead: the\n"
		"                            whole run is then observed\n"
		"      --record FILE         write this run's samples to FILE (JSON)\n"
		"  -j, --json                the report as JSON\n"
		"      --explain-tracking    list each tracked thread and what brought it in\n"
		"  -h, --help                this help\n"
		"\n"
		"Exit status: 0 a report was printed (partial when the target exited); 1 the\n"
		"target does not exist, the programs cannot run, or --record cannot be\n"
		"written (a failed write at the end still prints the report); 2 usage error.\n"
		"\n"
		"Examples:\n"
		"  plumb diagnose --pid $(pidof redis-server)\n"
		"  plumb diagnose --cgroup /system.slice/nginx.service --duration 1m\n"
		"  plumb diagnose --comm '^postgres' --record normal.json --duration 20s\n"
		"  plumb diagnose --comm '^postgres' --baseline normal.json --json\n");
}

static int usage_error(const char *cmd, const char *err, void (*usage)(FILE *))
{
	fprintf(stderr, "plumb%s%s: %s\n", cmd ? " " : "", cmd ? cmd : "", err);
	usage(stderr);
	return 2;
}

static int run_agent(int argc, char **argv)
{
	struct agent_options o;
	char err[256];

	switch (cli_parse_agent(argc, argv, &o, err, sizeof(err))) {
	case CLI_HELP:
		agent_usage(stdout);
		return 0;
	case CLI_ERROR:
		return usage_error("agent", err, agent_usage);
	case CLI_OK:
		break;
	}
	log_level = o.verbose ? LOG_DEBUG : LOG_INFO;
	log_setup_libbpf();
	return agent_run(&o);
}

static int run_io(int argc, char **argv)
{
	struct io_options o;
	char err[256];

	switch (cli_parse_io(argc, argv, &o, err, sizeof(err))) {
	case CLI_HELP:
		io_usage(stdout);
		return 0;
	case CLI_ERROR:
		return usage_error("io", err, io_usage);
	case CLI_OK:
		break;
	}
	log_level = o.verbose > 1 ? LOG_DEBUG : o.verbose ? LOG_INFO : LOG_WARN;
	log_setup_libbpf();
	return io_view_run(&o);
}

static int run_top(int argc, char **argv)
{
	struct top_options o;
	char err[256];

	switch (cli_parse_top(argc, argv, &o, err, sizeof(err))) {
	case CLI_HELP:
		top_usage(stdout);
		return 0;
	case CLI_ERROR:
		return usage_error("top", err, top_usage);
	case CLI_OK:
		break;
	}
	log_level = o.verbose > 1 ? LOG_DEBUG : o.verbose ? LOG_INFO : LOG_WARN;
	log_setup_libbpf();
	return top_run(&o);
}

static int run_place(int argc, char **argv)
{
	struct place_options o;
	char err[256];

	switch (cli_parse_place(argc, argv, &o, err, sizeof(err))) {
	case CLI_HELP:
		place_usage(stdout);
		return 0;
	case CLI_ERROR:
		return usage_error("place", err, place_usage);
	case CLI_OK:
		break;
	}
	log_level = o.verbose ? LOG_DEBUG : LOG_WARN;
	return place_view_run(&o);
}

static int run_graph(int argc, char **argv)
{
	static struct graph_options o; /* 64 KiB of URLs: not on the stack */
	char err[256];

	switch (cli_parse_graph(argc, argv, &o, err, sizeof(err))) {
	case CLI_HELP:
		graph_usage(stdout);
		return 0;
	case CLI_ERROR:
		return usage_error("graph", err, graph_usage);
	case CLI_OK:
		break;
	}
	return graph_cmd_run(&o);
}

static void netstack_help(FILE *out)
{
	fprintf(out,
		"Usage: plumb netstack [--interval 1s] [--count N] [--dev DEV] [--netns NAME]\n"
		"                      [--record FILE] [--baseline FILE] [--sample N] [--json]\n"
		"\n"
		"Where do packets spend their time in this host's network stack? Follows sampled\n"
		"packets through the qdisc, the driver, veth crossings, the softirq, the backlog,\n"
		"bridge forwarding, the protocol and the socket's receive queue, and prints each\n"
		"component's samples/s, p50, p99 and mean against its baseline every interval,\n"
		"with the bottleneck marked and explained. Baselines are learned over the first\n"
		"10 intervals with samples, or read from a recording (docs/netstack.md).\n"
		"Loads its own BPF programs: needs no agent.\n"
		"\n"
		"  -i, --interval DUR   one table every DUR (default 1s)\n"
		"  -n, --count N        N tables, then exit (default: until interrupted)\n"
		"      --dev DEV        show only this device's components\n"
		"      --netns NAME     show only this namespace's (a name under /run/netns,\n"
		"                       'host', or an inode number)\n"
		"      --record FILE    at exit, write the baselines to FILE (JSON)\n"
		"      --baseline FILE  start from a recording's baselines\n"
		"      --sample N       follow 1 in N flows (default %u)\n"
		"  -j, --json           one JSON object per interval\n"
		"  -h, --help           this help\n"
		"\n"
		"Exit status: 0 done; 1 the programs cannot run, or a bad --baseline; 2 usage "
		"error.\n"
		"\n"
		"Examples:\n"
		"  plumb netstack\n"
		"  plumb netstack --netns pod1 --count 30 --record quiet.json\n"
		"  plumb netstack --baseline quiet.json --json\n",
		PLUMB_DEFAULT_NETSTACK_SAMPLE);
}

static int run_netstack(int argc, char **argv)
{
	struct netstack_options o;
	char err[256];

	switch (cli_parse_netstack(argc, argv, &o, err, sizeof(err))) {
	case CLI_HELP:
		netstack_help(stdout);
		return 0;
	case CLI_ERROR:
		return usage_error("netstack", err, netstack_help);
	case CLI_OK:
		break;
	}
	log_level = o.verbose > 1 ? LOG_DEBUG : o.verbose ? LOG_INFO : LOG_WARN;
	log_setup_libbpf();
	return netstack_view_run(&o);
}

static int run_diagnose(int argc, char **argv)
{
	struct diagnose_options o;
	char err[256];

	switch (cli_parse_diagnose(argc, argv, &o, err, sizeof(err))) {
	case CLI_HELP:
		diagnose_help(stdout);
		return 0;
	case CLI_ERROR:
		return usage_error("diagnose", err, diagnose_help);
	case CLI_OK:
		break;
	}
	log_level = o.verbose > 1 ? LOG_DEBUG : o.verbose ? LOG_INFO : LOG_WARN;
	log_setup_libbpf();
	return diagnose_run(&o);
}

static const struct cmd cmds[] = {
	{ "agent", "run the agent: Prometheus metrics for every module", run_agent, agent_usage },
	{ "top", "one live view of the host: every workload's CPU, waits, I/O, network", run_top,
	  top_usage },
	{ "io", "live file I/O per workload and mount", run_io, io_usage },
	{ "diagnose", "why a service slowed down: its threads' waits, ranked causes", run_diagnose,
	  diagnose_help },
	{ "netstack", "where packets spend their time in the network stack, the bottleneck",
	  run_netstack, netstack_help },
	{ "graph", "who talks to whom: the communication graph", run_graph, graph_usage },
	{ "place", "placement advice: workloads to hosts, less cross-host traffic", run_place,
	  place_usage },
};

static void usage(FILE *out)
{
	fprintf(out, "Usage: plumb <command> [options]\n       plumb --help | --version\n\n"
		     "Commands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(out, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
	fprintf(out, "\nModules:\n");
	for (size_t i = 0; i < plumb_module_count; i++)
		fprintf(out, "  %-8s %s\n", plumb_modules[i]->name, plumb_modules[i]->summary);
	fprintf(out, "\n'plumb <command> --help' shows a command's options and examples.\n");
}

static const struct cmd *cmd_select(const char *name)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmds[i].name, name))
			return &cmds[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const struct cmd *cmd;
	char err[128];

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("plumb %s\n", PLUMB_VERSION);
		return 0;
	}
	cmd = cmd_select(argv[1]);
	if (!cmd) {
		snprintf(err, sizeof(err), "unknown command '%s'", argv[1]);
		return usage_error(NULL, err, usage);
	}
	return cmd->run(argc - 1, argv + 1);
}
