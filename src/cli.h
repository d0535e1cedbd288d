/* SPDX-License-Identifier: GPL-2.0 */
/* Command-line parsing, kept apart from main() so that it can be tested. */
#ifndef PLUMB_CLI_H
#define PLUMB_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plumb.h"
#include "analysis/graph.h"

#define PLUMB_DEFAULT_ADDR	      "127.0.0.1"
#define PLUMB_DEFAULT_PORT	      9977
#define PLUMB_DEFAULT_LATENCY_SAMPLE  16
#define PLUMB_DEFAULT_NETSTACK_SAMPLE 1 /* every flow, until the benchmark says otherwise */
/* the agent's netstack programs: a 1 s window in every 20 s (bench/results/netstack.md) */
#define PLUMB_DEFAULT_NETSTACK_WINDOW 20
#define PLUMB_DEFAULT_PIN_CAPACITY    131072 /* counter series carried over a restart */
#define PLUMB_DEFAULT_WAIT_CAPACITY   65536 /* the wait module's (thread, resource) pairs */

/* --seccomp: what a syscall outside the agent's list meets once it runs (src/sandbox.h) */
enum seccomp_mode {
	SECCOMP_ENFORCE = 0, /* EPERM */
	SECCOMP_LOG, /* allowed, and logged by the kernel (audit) */
	SECCOMP_OFF, /* no filter */
};

struct agent_options {
	char addr[64];
	uint16_t port;
	uint32_t modules; /* bit i: plumb_modules[i] */
	int verbose;
	bool check;
	unsigned int grace_s;
	unsigned int io_capacity;
	bool io_latency;
	unsigned int io_latency_sample;
	unsigned int flow_capacity;
	enum flow_bytes_mode flow_bytes;
	unsigned int netstack_sample; /* follow 1 in this many flows */
	unsigned int netstack_window; /* attached 1 s in every this many; 1: always */
	unsigned int wait_capacity; /* wait_bri's (thread, resource) pairs */
	char host[64]; /* --host; "" = the --netns name, else gethostname() */
	char netns[256]; /* --netns: a name under /run/netns, or a path; "" = every netns */
	char web_config[4096]; /* --web-config: TLS and basic auth (export/webconfig.h) */
	enum seccomp_mode seccomp;
	char pin[4096]; /* --pin DIR: counters carried over a restart (export/carry.h) */
	unsigned int pin_capacity;
};

struct io_options {
	unsigned int interval_ms;
	long count; /* 0: until interrupted */
	bool json;
	int verbose;
	unsigned int io_capacity;
	bool io_latency;
	unsigned int io_latency_sample;
};

/* plumb top's columns: what it sorts by (--sort NAME, keys) */
enum top_col {
	TOP_COL_CPU = 0,
	TOP_COL_RUNQ,
	TOP_COL_BLOCK,
	TOP_COL_WAIT,
	TOP_COL_READ,
	TOP_COL_WRITE,
	TOP_COL_NET,
	TOP_COL_NAME,
	TOP_COLS,
};

extern const char *const top_col_names[TOP_COLS];

struct top_options {
	unsigned int interval_ms;
	long count; /* 0: until interrupted (or q) */
	enum top_col sort;
	char filter[128]; /* workloads whose name or cgroup contains it (any case) */
	bool batch; /* plain lines even on a terminal */
	bool json; /* one JSON object per interval (implies batch) */
	int verbose;
};

enum place_format {
	PLACE_FORMAT_TABLE = 0,
	PLACE_FORMAT_JSON,
	PLACE_FORMAT_K8S,
};

#define PLACE_MAX_PINS	    16
#define PLACE_DEFAULT_PEERS 3

struct place_options {
	char graph[4096]; /* GRAPH.json: plumb graph --format json */
	char hosts[4096]; /* HOSTS.json */
	enum place_format format;
	long max_moves; /* < 0: no limit */
	unsigned int peers; /* k8s: podAffinity terms per moved workload, its heaviest peers */
	char pins[PLACE_MAX_PINS][256]; /* globs of vertex ids that stay where they are */
	size_t npins;
	int verbose;
};

/* plumb graph's sources: up to this many agents, each URL shorter than CLI_URL_MAX */
#define CLI_GRAPH_MAX_SOURCES 256
#define CLI_URL_MAX	      256
#define CLI_GRAPH_PATH	      "/api/v1/graph"

struct graph_options {
	enum graph_projection projection;
	enum graph_format format;
	char from[CLI_GRAPH_MAX_SOURCES][CLI_URL_MAX]; /* agents' graph URLs, path added */
	size_t nfrom; /* 0 with --prometheus */
	char prometheus[CLI_URL_MAX]; /* base URL, no trailing '/'; "" without --prometheus */
	unsigned int window_s;
	bool window_set; /* --window given (with --from it has no effect: a note says so) */
	char output[4096]; /* -o; "": standard output */
};

struct diagnose_options {
	int pid; /* --pid; 0: not given */
	char cgroup[4096]; /* --cgroup: a path under the cgroup2 mount, or a full path */
	char comm[256]; /* --comm: an extended regular expression */
	unsigned int duration_ms; /* the whole run, baseline included unless --baseline */
	unsigned int interval_ms;
	unsigned int baseline_ms; /* --baseline-duration: the first part of the run */
	char baseline[4096]; /* --baseline FILE: a --record of an earlier run */
	char record[4096]; /* --record FILE */
	bool json;
	bool explain; /* --explain-tracking */
	int verbose;
};

struct netstack_options {
	unsigned int interval_ms;
	long count; /* 0: until interrupted */
	char dev[32]; /* --dev: show only this device's components */
	char netns[64]; /* --netns: only this namespace's (a /run/netns name, "host", an inode) */
	char record[4096]; /* --record FILE: the baselines, written at exit */
	char baseline[4096]; /* --baseline FILE: a --record of an earlier run */
	bool json;
	int verbose;
	unsigned int sample; /* --sample N: 1 in N flows */
};

enum cli_result {
	CLI_OK = 0,
	CLI_HELP = 1, /* --help: print usage to stdout, exit 0 */
	CLI_ERROR = -1, /* err says why: print it and usage to stderr, exit 2 */
};

int cli_parse_duration_ms(const char *s, unsigned int *ms);
int cli_parse_listen(const char *s, char *addr, size_t addrlen, uint16_t *port);
int cli_parse_modules(const char *s, uint32_t *mask, char *err, size_t errlen);
enum cli_result cli_parse_agent(int argc, char **argv, struct agent_options *o, char *err,
				size_t errlen);
enum cli_result cli_parse_io(int argc, char **argv, struct io_options *o, char *err, size_t errlen);
enum cli_result cli_parse_top(int argc, char **argv, struct top_options *o, char *err,
			      size_t errlen);
enum cli_result cli_parse_place(int argc, char **argv, struct place_options *o, char *err,
				size_t errlen);

/*
 * An http:// or https:// URL into out; when its path is empty or "/", default_path is
 * appended (NULL: trailing slashes dropped instead, for a base URL).
 */
int cli_parse_url(const char *s, const char *default_path, char *out, size_t outlen);
enum cli_result cli_parse_diagnose(int argc, char **argv, struct diagnose_options *o, char *err,
				   size_t errlen);
enum cli_result cli_parse_netstack(int argc, char **argv, struct netstack_options *o, char *err,
				   size_t errlen);
enum cli_result cli_parse_graph(int argc, char **argv, struct graph_options *o, char *err,
				size_t errlen);
#endif
