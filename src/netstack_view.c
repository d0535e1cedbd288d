// SPDX-License-Identifier: GPL-2.0
/*
 * plumb netstack: a live table of the network stack's components (samples/s, p50, p99, mean
 * against the baseline) with the bottleneck marked and explained. Loads the netstack module
 * itself; the analysis is the agent's (analysis/bottleneck.h, docs/netstack.md).
 */
#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "cli.h"
#include "clock.h"
#include "host.h"
#include "log.h"
#include "netstack_view.h"
#include "plumb.h"
#include "modules/netstack_module.h"

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

static bool shown(const struct netstack_options *o, const struct netstack_series *x)
{
	return (!o->dev[0] || !strcmp(o->dev, x->device)) &&
	       (!o->netns[0] || !strcmp(o->netns, x->netns_name));
}

/*
 * Whether --netns can name anything: the series name a namespace "host", by its name under
 * /run/netns, or by its inode number (src/modules/netstack.c).
 */
static bool netns_nameable(const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	if (!strcmp(name, "host") || strspn(name, "0123456789") == strlen(name))
		return true;
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	return !strchr(name, '/') && !stat(path, &st);
}

/* "58.7ms", "812ns": a latency in ns, in the unit that fits. */
static void fmt_ns(double ns, char *out, size_t len)
{
	if (ns < 1e3)
		snprintf(out, len, "%.0fns", ns);
	else if (ns < 1e6)
		snprintf(out, len, "%.1fus", ns / 1e3);
	else if (ns < 1e9)
		snprintf(out, len, "%.1fms", ns / 1e6);
	else
		snprintf(out, len, "%.2fs", ns / 1e9);
}

static struct json_object *interval_json(const struct netstack_options *o,
					 const struct netstack_series *x, size_t n, int bottleneck,
					 long interval)
{
	struct json_object *doc = json_object_new_object(), *list = json_object_new_array();

	json_object_object_add(doc, "interval", json_object_new_int64(interval));
	json_object_object_add(doc, "interval_s", json_object_new_double(o->interval_ms / 1e3));
	for (size_t i = 0; i < n; i++) {
		struct json_object *c;

		if (!shown(o, &x[i]))
			continue;
		c = json_object_new_object();
		json_object_object_add(
			c, "component",
			json_object_new_string(netstack_component_names[x[i].component]));
		json_object_object_add(
			c, "direction",
			json_object_new_string(netstack_component_direction[x[i].component]));
		json_object_object_add(c, "device", json_object_new_string(x[i].device));
		json_object_object_add(c, "netns", json_object_new_string(x[i].netns_name));
		json_object_object_add(c, "workload", json_object_new_string(x[i].workload));
		json_object_object_add(c, "samples_per_s", json_object_new_double(x[i].rate));
		json_object_object_add(c, "p50_s", json_object_new_double(x[i].bn.p50 / 1e9));
		json_object_object_add(c, "p99_s", json_object_new_double(x[i].bn.p99 / 1e9));
		json_object_object_add(c, "mean_s", json_object_new_double(x[i].bn.cur_mean / 1e9));
		json_object_object_add(c, "baseline_ready", json_object_new_boolean(x[i].bn.ready));
		json_object_object_add(c, "baseline_mean_s",
				       json_object_new_double(x[i].bn.base_mean / 1e9));
		json_object_object_add(c, "effect", json_object_new_double(x[i].bn.a));
		json_object_object_add(c, "z", json_object_new_double(x[i].bn.z));
		json_object_object_add(c, "sigmas", json_object_new_double(x[i].bn.sigmas));
		json_object_object_add(c, "baseline_spread",
				       json_object_new_double(sqrt(x[i].bn.spread_var)));
		json_object_object_add(c, "mean_sigmas",
				       json_object_new_double(x[i].bn.mean_sigmas));
		json_object_object_add(c, "baseline_mean_spread",
				       json_object_new_double(sqrt(x[i].bn.mspread_var)));
		json_object_object_add(c, "departed", json_object_new_boolean(x[i].bn.departed));
		json_object_object_add(c, "bottleneck",
				       json_object_new_boolean(x[i].bn.bottleneck));
		json_object_object_add(c, "share", json_object_new_double(x[i].bn.share));
		json_object_array_add(list, c);
	}
	json_object_object_add(doc, "components", list);
	json_object_object_add(doc, "host_factor",
			       json_object_new_double(n ? x[0].bn.host_factor : 1));
	if (bottleneck >= 0) {
		const struct netstack_series *b = &x[bottleneck];
		struct json_object *o2 = json_object_new_object();

		json_object_object_add(
			o2, "component",
			json_object_new_string(netstack_component_names[b->component]));
		json_object_object_add(
			o2, "direction",
			json_object_new_string(netstack_component_direction[b->component]));
		json_object_object_add(o2, "device", json_object_new_string(b->device));
		json_object_object_add(o2, "netns", json_object_new_string(b->netns_name));
		json_object_object_add(o2, "workload", json_object_new_string(b->workload));
		json_object_object_add(o2, "share", json_object_new_double(b->bn.share));
		json_object_object_add(doc, "bottleneck", o2);
	} else {
		json_object_object_add(doc, "bottleneck", NULL);
	}
	return doc;
}

static const struct netstack_series *sort_base;

/* Rows by namespace, device, then the component's place on the path. */
static int row_cmp(const void *a, const void *b)
{
	const struct netstack_series *x = &sort_base[*(const size_t *)a];
	const struct netstack_series *y = &sort_base[*(const size_t *)b];
	int c = strcmp(x->netns_name, y->netns_name);

	if (!c)
		c = strcmp(x->device, y->device);
	if (!c)
		c = (int)x->component - (int)y->component;
	return c ? c : strcmp(x->workload, y->workload);
}

/* A series' rise of its mean beyond the host-wide factor, ns. */
static double rise(const struct netstack_series *x)
{
	return x->bn.cur_mean - x->bn.host_factor * x->bn.base_mean;
}

/*
 * Why none is the bottleneck: none slower than its baseline, or the slower ones (the one with
 * the largest rise named) not carrying the largest rise, which is within its own norm.
 */
static void no_bottleneck(const struct netstack_series *x, size_t n, size_t learning)
{
	const struct netstack_series *big = NULL, *dep = NULL;
	char a[16], b[16];

	for (size_t i = 0; i < n; i++) {
		if (x[i].bn.largest)
			big = &x[i];
		if (x[i].bn.departed && (!dep || rise(&x[i]) > rise(dep)))
			dep = &x[i];
	}
	if (!dep || !big) {
		printf("no bottleneck: no component is significantly slower than its baseline%s\n",
		       learning ? " (some are still learning theirs)" : "");
		return;
	}
	fmt_ns(rise(dep), a, sizeof(a));
	fmt_ns(rise(big), b, sizeof(b));
	printf("no bottleneck: %s (%s) on %s in %s is significantly slower (mean +%s), but the "
	       "largest rise, %s (%s) on %s in %s (+%s), is within its own variation\n",
	       netstack_component_names[dep->component],
	       netstack_component_direction[dep->component], dep->device, dep->netns_name, a,
	       netstack_component_names[big->component],
	       netstack_component_direction[big->component], big->device, big->netns_name, b);
}

static void interval_print(const struct netstack_options *o, const struct netstack_series *x,
			   size_t n, int bottleneck)
{
	size_t *order = calloc(n ? n : 1, sizeof(*order));
	size_t learning = 0, rows = 0;
	char p50[16], p99[16], mean[16], base[16];

	for (size_t i = 0; i < n; i++) {
		if (!shown(o, &x[i]) || x[i].bn.n <= 0)
			continue;
		learning += !x[i].bn.ready;
		rows++;
	}
	if (isatty(STDOUT_FILENO))
		printf("\033[H\033[2J");
	if (bottleneck >= 0) {
		const struct netstack_series *b = &x[bottleneck];

		fmt_ns(b->bn.cur_mean, mean, sizeof(mean));
		fmt_ns(b->bn.base_mean, base, sizeof(base));
		printf("bottleneck: %s (%s) on %s in %s%s%s: mean %s against %s in its baseline, "
		       "%.0f%% "
		       "of the increase; %.0f%% of its packets slower than the baseline's (z "
		       "%.1f), its median %.1f and its mean %.1f deviations above its intervals' "
		       "norms%s\n",
		       netstack_component_names[b->component],
		       netstack_component_direction[b->component], b->device, b->netns_name,
		       b->workload[0] ? ", workload " : "", b->workload, mean, base,
		       100 * b->bn.share, 100 * b->bn.a, b->bn.z, b->bn.sigmas, b->bn.mean_sigmas,
		       shown(o, b) ? "" : " [not among the rows shown]");
	} else if (!rows) {
		/* nothing to judge: not "no component is slower" */
		printf("no sampled packets this interval%s%s%s%s%s\n",
		       o->dev[0] || o->netns[0] ? " on what is shown:" : "",
		       o->dev[0] ? " --dev " : "", o->dev, o->netns[0] ? " --netns " : "",
		       o->netns);
	} else {
		no_bottleneck(x, n, learning);
	}
	if (n && x[0].bn.host_factor > 1.2)
		printf("the whole host is slower: the median component takes %.1fx its baseline; "
		       "each is judged against its baseline scaled so\n",
		       x[0].bn.host_factor);
	printf("%-9s %-7s %-16s %-16s %9s %9s %9s %9s %9s  %s\n", "COMPONENT", "DIR", "DEVICE",
	       "NETNS", "SAMPLES/S", "P50", "P99", "MEAN", "BASELINE", "WORKLOAD");
	for (size_t i = 0; i < n && order; i++)
		order[i] = i;
	sort_base = x;
	if (order)
		qsort(order, n, sizeof(*order), row_cmp);
	for (size_t k = 0; k < n && order; k++) {
		const struct netstack_series *c = &x[order[k]];

		if (!shown(o, c) || c->bn.n <= 0)
			continue;
		fmt_ns(c->bn.p50, p50, sizeof(p50));
		fmt_ns(c->bn.p99, p99, sizeof(p99));
		fmt_ns(c->bn.cur_mean, mean, sizeof(mean));
		if (c->bn.ready)
			fmt_ns(c->bn.base_mean, base, sizeof(base));
		else
			snprintf(base, sizeof(base), "learning");
		printf("%-9s %-7s %-16.16s %-16.16s %9.0f %9s %9s %9s %9s  %s%s\n",
		       netstack_component_names[c->component],
		       netstack_component_direction[c->component], c->device, c->netns_name,
		       c->rate, p50, p99, mean, base, c->workload,
		       c->bn.bottleneck ? "  <- bottleneck" :
		       c->bn.departed	? "  (slower)" :
					  "");
	}
	free(order);
	fflush(stdout);
}

int netstack_view_run(const struct netstack_options *o)
{
	struct plumb_config cfg = { .cgroup_grace_s = 60, .netstack_sample = o->sample };
	struct sigaction sa = { .sa_handler = on_signal };
	char cgroup_root[4096], err[512];
	const struct netstack_series *x;
	int bottleneck, ret = 1;
	double start;
	size_t n;

	if (o->netns[0] && !netns_nameable(o->netns)) {
		fprintf(stderr,
			"plumb netstack: --netns: no network namespace '%s' (a name under "
			"/run/netns, 'host', or an inode number)\n",
			o->netns);
		return 2;
	}
	if (privileges_check("plumb netstack") ||
	    agent_config(&cfg, cgroup_root, sizeof(cgroup_root)))
		return 1;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (netstack_module.load(&netstack_module, &cfg)) {
		fprintf(stderr, "plumb netstack: the netstack module cannot run: %s\n",
			netstack_module.error);
		return 1;
	}
	netstack_module.up = true;
	if (o->baseline[0] &&
	    netstack_baseline_load(&netstack_module, o->baseline, err, sizeof(err))) {
		fprintf(stderr, "plumb netstack: %s\n", err);
		goto out_unload;
	}
	pr_info("netstack: attached\n");
	start = monotonic_s();
	for (long i = 1; !exiting && (!o->count || i <= o->count); i++) {
		double wait = start + i * o->interval_ms / 1e3 - monotonic_s();

		if (wait > 0)
			usleep((useconds_t)(wait * 1e6));
		if (exiting)
			break;
		if (netstack_interval(&netstack_module)) {
			fprintf(stderr, "plumb netstack: cannot read the histograms\n");
			goto out_unload;
		}
		n = netstack_series(&netstack_module, &x, &bottleneck);
		if (o->json) {
			struct json_object *doc = interval_json(o, x, n, bottleneck, i);

			printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
			fflush(stdout);
			json_object_put(doc);
		} else {
			interval_print(o, x, n, bottleneck);
		}
	}
	ret = 0;
	if (o->record[0] && netstack_baseline_write(&netstack_module, o->record)) {
		fprintf(stderr, "plumb netstack: cannot write --record %s\n", o->record);
		ret = 1;
	}
out_unload:
	netstack_module.unload(&netstack_module);
	return ret;
}
