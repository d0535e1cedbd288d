// SPDX-License-Identifier: GPL-2.0
/*
 * The agent: loads the requested modules, serves /metrics, and between scrapes lets each
 * module do its housekeeping. A module that fails to load is reported and left out; the
 * others keep running.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "clock.h"
#include "detach.h"
#include "agent.h"
#include "cli.h"
#include "log.h"
#include "probe.h"
#include "plumb.h"
#include "host.h"
#include "privileges.h"
#include "sandbox.h"
#include "adopt.h"
#include "export/carry.h"
#include "export/http.h"
#include "export/prom.h"
#include "export/webconfig.h"
#include "identity/cgroup.h"
#include "identity/netns.h"
#include <json-c/json.h>

#define AGENT_TICK_MS	    250
#define AGENT_ADDRESSES_MAX 64
/* the observed namespace's addresses are read again at most this often */
#define AGENT_ADDRESSES_MS 5000

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

struct agent {
	pthread_mutex_t lock; /* modules' state: ticks and scrapes take turns */
	uint32_t requested; /* bit i: plumb_modules[i] */
	char host[256]; /* --host, the --netns name, or gethostname() */
	struct netns netns;
	char addrs[AGENT_ADDRESSES_MAX][INET6_ADDRSTRLEN];
	int naddrs;
	uint64_t addrs_ms; /* when they were read; 0: never */
	struct carry *carry; /* --pin: counters carried over a restart; NULL without */
};

/* The observed network namespace's addresses (docs/graph.md), read at most every 5 s. */
static void agent_addresses(struct agent *a)
{
	int n;

	if (a->addrs_ms && monotonic_ms() - a->addrs_ms < AGENT_ADDRESSES_MS)
		return;
	n = netns_addresses(&a->netns, a->addrs, AGENT_ADDRESSES_MAX);
	a->naddrs = n < 0 ? 0 : n;
	if (n < 0)
		pr_warn("cannot read the addresses of the network namespace: %s\n", strerror(-n));
	a->addrs_ms = monotonic_ms();
}

static void write_host_metrics(struct agent *a, struct prom_writer *w)
{
	struct prom_label l[2] = { { "host", a->host } };

	agent_addresses(a);
	prom_family(w, "plumb_host_info", PROM_GAUGE,
		    "The name this agent reports its host by (--host, --netns or the host name).");
	prom_sample(w, l, 1, 1);
	prom_family(w, "plumb_host_address", PROM_GAUGE,
		    "Addresses of the network namespace the agent observes, loopback left out.");
	for (int i = 0; i < a->naddrs; i++) {
		l[1] = (struct prom_label){ "addr", a->addrs[i] };
		prom_sample(w, l, 2, 1);
	}
}

static int json_reply(struct json_object *doc, char **body, size_t *len)
{
	const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);

	*body = text ? strdup(text) : NULL;
	*len = *body ? strlen(*body) : 0;
	return *body ? 0 : -ENOMEM;
}

/* A module's own endpoint (api_path): {"version": 1, "host": ..., and what the module adds}. */
static int module_api(struct agent *a, const char *url, char **body, size_t *len)
{
	struct plumb_module *m = NULL;
	struct json_object *doc;
	int err;

	for (size_t i = 0; i < plumb_module_count; i++)
		if (plumb_modules[i]->api_path && !strcmp(url, plumb_modules[i]->api_path))
			m = plumb_modules[i];
	if (!m)
		return -ENOENT;
	if (!m->up)
		return -ENODEV;
	doc = json_object_new_object();
	if (!doc)
		return -ENOMEM;
	json_object_object_add(doc, "version", json_object_new_int(1));
	json_object_object_add(doc, "host", json_object_new_string(a->host));
	pthread_mutex_lock(&a->lock);
	err = m->api(m, doc);
	pthread_mutex_unlock(&a->lock);
	if (!err)
		err = json_reply(doc, body, len);
	json_object_put(doc);
	return err;
}

/* GET /api/v1/graph: this host's ends of its connections (docs/graph.md, section 1). */
static int agent_api(void *ctx, const char *url, char **body, size_t *len)
{
	struct agent *a = ctx;
	struct plumb_module *flow = NULL;
	struct json_object *doc, *addrs;
	int err = 0;

	if (strcmp(url, "/api/v1/graph"))
		return module_api(a, url, body, len);
	for (size_t i = 0; i < plumb_module_count; i++)
		if (plumb_modules[i]->graph && plumb_modules[i]->up)
			flow = plumb_modules[i];
	if (!flow)
		return -ENODEV;
	doc = json_object_new_object();
	addrs = json_object_new_array();
	if (!doc || !addrs) {
		json_object_put(doc);
		json_object_put(addrs);
		return -ENOMEM;
	}
	pthread_mutex_lock(&a->lock);
	agent_addresses(a);
	json_object_object_add(doc, "version", json_object_new_int(1));
	json_object_object_add(doc, "host", json_object_new_string(a->host));
	for (int i = 0; i < a->naddrs; i++)
		json_object_array_add(addrs, json_object_new_string(a->addrs[i]));
	json_object_object_add(doc, "addresses", addrs);
	err = flow->graph(flow, doc);
	pthread_mutex_unlock(&a->lock);
	if (!err)
		err = json_reply(doc, body, len);
	json_object_put(doc);
	return err;
}

static int bpf_stats_enabled(void)
{
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "r");
	int on = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%d", &on) != 1)
		on = 0;
	fclose(f);
	return on;
}

/* The kernel's figures of a loaded program; false when it is not loaded or they cannot be read. */
static bool prog_info(const struct bpf_program *prog, struct bpf_prog_info *info)
{
	__u32 len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	return bpf_program__fd(prog) >= 0 &&
	       !bpf_obj_get_info_by_fd(bpf_program__fd(prog), info, &len);
}

static void write_program_stats(struct prom_writer *w, struct module_health *health)
{
	struct bpf_prog_info info;
	struct bpf_program *prog;
	struct prom_label l[2];
	int pass;

	/* two families, each over every program of every module */
	for (pass = 0; pass < 2; pass++) {
		if (pass == 0)
			prom_family(
				w, "plumb_bpf_program_run_seconds_total", PROM_COUNTER,
				"Time the module's BPF programs ran (kernel.bpf_stats_enabled).");
		else
			prom_family(
				w, "plumb_bpf_program_runs_total", PROM_COUNTER,
				"Runs of the module's BPF programs (kernel.bpf_stats_enabled).");
		for (size_t i = 0; i < plumb_module_count; i++) {
			if (!plumb_modules[i]->up || !health[i].obj)
				continue;
			bpf_object__for_each_program (prog, health[i].obj) {
				if (!prog_info(prog, &info))
					continue;
				l[0] = (struct prom_label){ "module", plumb_modules[i]->name };
				l[1] = (struct prom_label){ "program", bpf_program__name(prog) };
				prom_sample(w, l, 2,
					    pass == 0 ? info.run_time_ns / 1e9 :
							(double)info.run_cnt);
			}
		}
	}
}

/*
 * Runs of the object's programs the kernel skipped (its recursion guard: for tp_btf programs
 * the same program already running on that CPU, for classic tracepoint programs any kprobe,
 * tracepoint or perf-event program; docs/metrics.md): events the module never saw. Counted by
 * the kernel whether or not bpf_stats is on; -1 when none could be read.
 */
static double recursion_misses(struct bpf_object *obj)
{
	struct bpf_prog_info info;
	struct bpf_program *prog;
	double sum = -1;

	bpf_object__for_each_program (prog, obj)
		if (prog_info(prog, &info))
			sum = (sum < 0 ? 0 : sum) + (double)info.recursion_misses;
	return sum;
}

/*
 * plumb_events_lost_total: of every module, or of module only (< plumb_module_count: its part
 * of a handover, which holds what its maps hold; the programs' recursion misses are not in
 * them, and the next agent's programs count theirs from 0, so they are carried whole)
 */
static void write_lost(struct prom_writer *w, const struct module_health *health, size_t only)
{
	struct prom_label l[2];
	double misses;

	prom_family(w, "plumb_events_lost_total", PROM_COUNTER,
		    "Events a module could not count, by reason.");
	for (size_t i = 0; i < plumb_module_count; i++) {
		if (only < plumb_module_count && i != only)
			continue;
		l[0] = (struct prom_label){ "module", plumb_modules[i]->name };
		for (size_t j = 0; j < health[i].nlost; j++) {
			l[1] = (struct prom_label){ "reason", health[i].lost[j].reason };
			prom_sample(w, l, 2, (double)health[i].lost[j].count);
		}
		if (only < plumb_module_count || !plumb_modules[i]->up || !health[i].obj ||
		    (misses = recursion_misses(health[i].obj)) < 0)
			continue;
		l[1] = (struct prom_label){ "reason", "recursion" };
		prom_sample(w, l, 2, misses);
	}
}

static void write_self_metrics(struct agent *a, struct prom_writer *w)
{
	struct module_health health[32];
	struct prom_label l[3];
	size_t i, j;

	memset(health, 0, sizeof(health));
	for (i = 0; i < plumb_module_count; i++)
		if (plumb_modules[i]->up && plumb_modules[i]->health) {
			double start = monotonic_s();

			plumb_modules[i]->health(plumb_modules[i], &health[i]);
			plumb_modules[i]->scrape_seconds += monotonic_s() - start;
		}

	prom_family(w, "plumb_build_info", PROM_GAUGE, "plumb's version; always 1.");
	l[0] = (struct prom_label){ "version", PLUMB_VERSION };
	prom_sample(w, l, 1, 1);

	prom_family(w, "plumb_module_up", PROM_GAUGE,
		    "1 when the module is loaded and attached, 0 when it failed (see the log).");
	for (i = 0; i < plumb_module_count; i++) {
		if (!(a->requested & (1u << i)))
			continue;
		l[0] = (struct prom_label){ "module", plumb_modules[i]->name };
		prom_sample(w, l, 1, plumb_modules[i]->up);
	}

	prom_family(w, "plumb_module_scrape_seconds", PROM_GAUGE,
		    "Time the module's part of this scrape took: reading its maps, writing its "
		    "series and its health figures.");
	for (i = 0; i < plumb_module_count; i++) {
		if (!plumb_modules[i]->up)
			continue;
		l[0] = (struct prom_label){ "module", plumb_modules[i]->name };
		prom_sample(w, l, 1, plumb_modules[i]->scrape_seconds);
	}

	write_lost(w, health, plumb_module_count);

	prom_family(w, "plumb_map_entries", PROM_GAUGE,
		    "Entries in a module's BPF map or user-space cache.");
	for (i = 0; i < plumb_module_count; i++)
		for (j = 0; j < health[i].nmaps; j++) {
			l[0] = (struct prom_label){ "module", plumb_modules[i]->name };
			l[1] = (struct prom_label){ "map", health[i].maps[j].name };
			prom_sample(w, l, 2, (double)health[i].maps[j].entries);
		}
	prom_family(w, "plumb_map_capacity", PROM_GAUGE,
		    "Most entries a module's BPF map or user-space cache can hold.");
	for (i = 0; i < plumb_module_count; i++)
		for (j = 0; j < health[i].nmaps; j++) {
			l[0] = (struct prom_label){ "module", plumb_modules[i]->name };
			l[1] = (struct prom_label){ "map", health[i].maps[j].name };
			prom_sample(w, l, 2, (double)health[i].maps[j].capacity);
		}

	if (a->carry) {
		prom_family(w, "plumb_pin_restored_series", PROM_GAUGE,
			    "Counter series this agent took over from the one before it (--pin).");
		prom_sample(w, NULL, 0, (double)carry_restored(a->carry));
		prom_family(w, "plumb_pin_previous_dropped_series", PROM_GAUGE,
			    "Counter series the agent before could not hand over: more than "
			    "--pin-capacity (they restart from 0).");
		prom_sample(w, NULL, 0, (double)carry_previous_dropped(a->carry));
		prom_family(w, "plumb_pin_capacity", PROM_GAUGE,
			    "Most counter series carried over a restart (--pin-capacity).");
		prom_sample(w, NULL, 0, carry_capacity(a->carry));
	}
	if (bpf_stats_enabled())
		write_program_stats(w, health);
}

static int agent_metrics(void *ctx, struct prom_writer *w)
{
	struct agent *a = ctx;
	double start = monotonic_s();

	if (a->carry) {
		w->adjust = carry_adjust;
		w->adjust_ctx = a->carry;
	}
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < plumb_module_count; i++) {
		struct plumb_module *m = plumb_modules[i];
		double t = monotonic_s();

		if (m->up && m->collect(m, w))
			pr_warn("%s: collect failed: %s\n", m->name, strerror(-w->err));
		m->scrape_seconds = monotonic_s() - t;
	}
	write_self_metrics(a, w);
	write_host_metrics(a, w);
	pthread_mutex_unlock(&a->lock);

	prom_family(w, "plumb_scrape_duration_seconds", PROM_GAUGE,
		    "Time this scrape took to write the metrics above.");
	prom_sample(w, NULL, 0, monotonic_s() - start);
	return w->err;
}

/*
 * --pin, at a clean exit: one last collect, after the last scrape, records every counter
 * series' value; they go into the pinned map for the next agent.
 */
static void carry_hand_over(struct agent *a, const char *dir, const bool *handed)
{
	struct module_health health[32];
	struct prom_writer w;
	uint64_t dropped;
	size_t saved;
	char err[256];

	prom_init(&w);
	carry_record(a->carry);
	if (agent_metrics(a, &w))
		pr_warn("pin: the last collect failed: %s\n", strerror(-w.err));
	/*
	 * A module whose maps go to the next agent: what they hold goes on in them, so its
	 * series carry only the rest. The same state written again as far as the maps hold it.
	 */
	for (size_t i = 0; i < plumb_module_count; i++) {
		struct plumb_module *m = plumb_modules[i];
		struct prom_writer part;
		int e;

		if (!handed[i])
			continue;
		e = carry_part_begin(a->carry, m->name, m->maps_hold_all);
		if (e) {
			pr_warn("pin: %s: %s\n", m->name, strerror(-e));
			continue;
		}
		prom_init(&part);
		part.adjust = carry_adjust;
		part.adjust_ctx = a->carry;
		m->maps_only = true;
		if (m->collect(m, &part))
			pr_warn("pin: %s: the maps' collect failed: %s\n", m->name,
				strerror(-part.err));
		memset(health, 0, sizeof(health));
		if (m->health) {
			m->health(m, &health[i]);
			write_lost(&part, health, i);
		}
		m->maps_only = false;
		carry_part_end(a->carry);
		prom_free(&part);
	}
	if (carry_save(a->carry, &saved, &dropped, err, sizeof(err)))
		pr_warn("%s\n", err);
	if (dropped)
		pr_warn("pin: %llu counter series did not fit in --pin-capacity %u: they will "
			"restart from 0\n",
			(unsigned long long)dropped, carry_capacity(a->carry));
	pr_info("pin: %zu counter series handed over in %s\n", saved, dir);
	prom_free(&w);
	carry_close(a->carry);
	a->carry = NULL;
}

/* DIR/counters_<module> of every module that can hand its maps over. 0 or -errno. */
static int carry_open_parts(struct carry *c, const char *dir, char *err, size_t errlen)
{
	for (size_t i = 0; i < plumb_module_count; i++)
		if (plumb_modules[i]->hand_over) {
			int e = carry_open_part(c, dir, plumb_modules[i]->name, err, errlen);

			if (e)
				return e;
		}
	return 0;
}

/*
 * After the modules loaded: a module that took its maps over carries only the part of its
 * series they do not hold; what an agent left for a module that is not up here goes (its
 * programs, still attached, detach).
 */
static void adopt_settle(struct agent *a, const char *dir)
{
	for (size_t i = 0; i < plumb_module_count; i++) {
		struct plumb_module *m = plumb_modules[i];

		if (!m->hand_over)
			continue;
		if (m->up && m->adopted) {
			carry_use_part(a->carry, m->name);
			pr_info("pin: %s: maps and counting taken over, no gap\n", m->name);
		} else if (!m->up) {
			adopt_discard(dir, m->name);
		}
	}
}

/* A start that failed after taking the counters: they go back for the next agent. */
static void carry_give_back(struct carry *c)
{
	if (c && carry_put_back(c))
		pr_warn("pin: the counters taken over could not be put back: the next agent "
			"starts from 0\n");
	carry_close(c);
}

static void load_modules(struct agent *a, const struct plumb_config *cfg)
{
	for (size_t i = 0; i < plumb_module_count; i++) {
		struct plumb_module *m = plumb_modules[i];

		if (!(a->requested & (1u << i)))
			continue;
		m->error[0] = '\0';
		if (m->load(m, cfg)) {
			pr_warn("module %s: disabled: %s\n", m->name,
				m->error[0] ? m->error : "load failed");
			m->up = false;
			continue;
		}
		m->up = true;
		pr_info("module %s: up: %s\n", m->name, m->choice[0] ? m->choice : m->summary);
	}
}

static void unload_modules(void)
{
	for (size_t i = 0; i < plumb_module_count; i++)
		if (plumb_modules[i]->up) {
			plumb_modules[i]->unload(plumb_modules[i]);
			plumb_modules[i]->up = false;
		}
}

/*
 * `plumb agent --check`: the kernel's features, then each requested module's choice per attach
 * point and its verdict. 0 when every requested module is up (loaded and attached for real).
 */
static int agent_check_print(const struct agent *a)
{
	int ret = 0;

	kernel_features_print(stdout);
	printf("\n%-8s %-34s %-18s %s\n", "MODULE", "ATTACH POINT", "PROGRAM", "STATUS");
	for (size_t i = 0; i < plumb_module_count; i++) {
		const struct plumb_module *m = plumb_modules[i];

		if (!(a->requested & (1u << i)))
			continue;
		for (size_t k = 0; k < m->nattach; k++)
			printf("%-8s %-34s %-18s %s\n", m->name, m->attach[k].point,
			       m->attach[k].program[0] ? m->attach[k].program : "-",
			       m->attach[k].status);
	}
	printf("\n");
	for (size_t i = 0; i < plumb_module_count; i++) {
		const struct plumb_module *m = plumb_modules[i];

		if (!(a->requested & (1u << i)))
			continue;
		printf("%-8s %-12s %s\n", m->name, m->up ? "available" : "unavailable",
		       m->up ? m->choice : m->error);
		if (!m->up)
			ret = 1;
	}
	return ret;
}

int agent_config(struct plumb_config *cfg, char *cgroup_root, size_t len)
{
	if (cgroup2_mount_point(cgroup_root, len)) {
		pr_warn("no cgroup2 file system is mounted (see /proc/self/mountinfo)\n");
		return -ENOENT;
	}
	cfg->cgroup_root = cgroup_root;
	return 0;
}

/* 127.0.0.0/8 and ::1 */
static bool loopback(const char *addr)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (inet_pton(AF_INET, addr, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* --web-config: TLS and basic auth for the server. 0, or 1 with the reason printed. */
static int agent_web_config(const struct agent_options *o, struct http_server *http, bool *tls)
{
	struct web_config *web = calloc(1, sizeof(*web));
	char err[512];
	int ret = 0;

	if (!web)
		return 1;
	if (web_config_load(o->web_config, web, err, sizeof(err)) ||
	    http_secure(http, web, err, sizeof(err))) {
		pr_warn("--web-config %s\n", err);
		ret = 1;
	} else if (!web->tls && !loopback(o->addr)) {
		pr_warn("listening on %s without TLS: %s\n", o->addr,
			web->nusers ? "passwords and metrics travel in clear text" :
				      "metrics and APIs travel in clear text");
	}
	*tls = !ret && web->tls;
	free(web);
	return ret;
}

int agent_run(const struct agent_options *o)
{
	struct agent a = { .lock = PTHREAD_MUTEX_INITIALIZER, .requested = o->modules };
	struct plumb_config cfg = {
		.cgroup_grace_s = o->grace_s,
		.io_capacity = o->io_capacity,
		.io_latency = o->io_latency,
		.io_latency_sample = o->io_latency_sample,
		.flow_capacity = o->flow_capacity,
		.wait_capacity = o->wait_capacity,
		.flow_bytes = o->flow_bytes,
		.netstack_sample = o->netstack_sample,
		.netstack_window = o->netstack_window,
	};
	struct sigaction sa = { .sa_handler = on_signal };
	char cgroup_root[4096], err[256];
	struct http_server *http = NULL;
	bool tls = false;
	int ret = 0;

	if (privileges_check("plumb agent") || tracefs_ensure() ||
	    agent_config(&cfg, cgroup_root, sizeof(cgroup_root)))
		return 1;
	/*
	 * No transparent huge pages, before any thread or table exists: the agent's memory is
	 * sparse (tables allocated for their limits, 8 MiB thread stacks), and with THP "always"
	 * (RHEL's default, Debian's kernels in the test guests) khugepaged makes a 2 MiB range
	 * with a page in use 2 MiB resident: 2 MiB more RSS at a time, for nothing
	 * (docs/architecture.md).
	 */
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
		pr_debug("transparent huge pages left as they are: %s\n", strerror(errno));
	netns_all(&a.netns);
	if (o->netns[0] && netns_open(o->netns, &a.netns, err, sizeof(err))) {
		pr_warn("%s\n", err);
		return 1;
	}
	cfg.netns = &a.netns;
	for (size_t i = 0; i < plumb_module_count; i++)
		if (plumb_modules[i] == &wait_module && (o->modules & (1u << i)))
			cfg.wait = true;
	if (o->host[0])
		snprintf(a.host, sizeof(a.host), "%s", o->host);
	else if (o->netns[0] && !strchr(o->netns, '/'))
		snprintf(a.host, sizeof(a.host), "%s", o->netns);
	else if (gethostname(a.host, sizeof(a.host) - 1))
		snprintf(a.host, sizeof(a.host), "localhost");
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (!o->check) {
		/* the port and the web config first: they fail before any BPF is loaded */
		http = http_bind(o->addr, o->port, err, sizeof(err));
		if (!http || (o->web_config[0] && agent_web_config(o, http, &tls))) {
			if (!http)
				pr_warn("%s\n", err);
			http_stop(http);
			netns_close(&a.netns);
			return 1;
		}
		if (!o->web_config[0] && !loopback(o->addr))
			pr_warn("listening on %s without TLS: metrics and APIs travel in clear "
				"text to anyone who can reach it (--web-config, "
				"docs/security.md)\n",
				o->addr);
	}
	/* the counters a previous agent handed over: before any BPF, a bad --pin fails first */
	if (!o->check && o->pin[0] &&
	    (carry_open(o->pin, o->pin_capacity, &a.carry, err, sizeof(err)) ||
	     carry_open_parts(a.carry, o->pin, err, sizeof(err)))) {
		pr_warn("%s\n", err);
		carry_give_back(a.carry);
		http_stop(http);
		netns_close(&a.netns);
		return 1;
	}
	if (a.carry) {
		pr_info("pin: %zu counter series taken over from %s\n", carry_restored(a.carry),
			o->pin);
		cfg.pin = o->pin;
	}
	load_modules(&a, &cfg);
	if (a.carry)
		adopt_settle(&a, o->pin);
	if (o->check) {
		ret = agent_check_print(&a);
		perf_events_handoff();
		unload_modules();
		return ret;
	}

	/*
	 * Every program is attached and no thread runs yet: the capabilities nothing after this
	 * uses go, in this thread and so in every thread started from it; then every syscall
	 * not on the agent's list.
	 */
	if (privileges_drop(err, sizeof(err)) ||
	    sandbox_syscalls(o->seccomp, a.carry != NULL, err, sizeof(err))) {
		pr_warn("%s\n", err);
		http_stop(http);
		unload_modules();
		carry_give_back(a.carry);
		return 1;
	}
	if (http_serve(http, agent_metrics, agent_api, &a, err, sizeof(err))) {
		pr_warn("%s\n", err);
		http_stop(http);
		unload_modules();
		carry_give_back(a.carry);
		return 1;
	}
	pr_info("serving metrics at http%s://%s%s%s:%u/metrics\n", tls ? "s" : "",
		strchr(o->addr, ':') ? "[" : "", o->addr, strchr(o->addr, ':') ? "]" : "", o->port);
	while (!exiting) {
		usleep(AGENT_TICK_MS * 1000);
		pthread_mutex_lock(&a.lock);
		for (size_t i = 0; i < plumb_module_count; i++)
			if (plumb_modules[i]->up && plumb_modules[i]->tick)
				plumb_modules[i]->tick(plumb_modules[i]);
		pthread_mutex_unlock(&a.lock);
	}
	pr_info("exiting\n");
	http_stop(http);
	if (a.carry) {
		bool handed[32] = { false };

		/* the maps and links first: the counters saved depend on which were handed */
		for (size_t i = 0; i < plumb_module_count; i++)
			handed[i] = plumb_modules[i]->up && plumb_modules[i]->hand_over &&
				    !plumb_modules[i]->hand_over(plumb_modules[i]);
		carry_hand_over(&a, o->pin, handed);
	}
	pthread_mutex_lock(&a.lock);
	perf_events_handoff();
	unload_modules();
	pthread_mutex_unlock(&a.lock);
	return 0;
}
