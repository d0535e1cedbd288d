// SPDX-License-Identifier: GPL-2.0
/* plumb place: the command around src/analysis/place.c, and its three outputs. */
#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "place_view.h"

/* the label a podAffinity term selects peers by; docs/place.md says what it assumes */
#define K8S_NAME_LABEL	   "app.kubernetes.io/name"
#define K8S_HOSTNAME_LABEL "kubernetes.io/hostname"
#define K8S_LABEL_MAX	   63

static void human_bytes(double v, char *out, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, len, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

/* the change from before to after, in percent of before: "-75.0%", or "n/a" from 0 */
static void change_percent(uint64_t before, uint64_t after, char *out, size_t len)
{
	if (!before)
		snprintf(out, len, after ? "n/a" : "0.0%%");
	else
		snprintf(out, len, "%+.1f%%", 100.0 * ((double)after - (double)before) / before);
}

static const char *host_of(const struct place_problem *p, const int *host, size_t v)
{
	return host[v] == PLACE_OUTSIDE ? p->vertices[v].host_name : p->hosts[host[v]].name;
}

void place_write_table(FILE *out, const struct place_problem *p, const struct place_plan *plan)
{
	int64_t *cpu_before = calloc(p->nhosts, sizeof(int64_t));
	int64_t *cpu_after = calloc(p->nhosts, sizeof(int64_t));
	uint64_t *mem_before = calloc(p->nhosts, sizeof(uint64_t));
	uint64_t *mem_after = calloc(p->nhosts, sizeof(uint64_t));
	int *origin = calloc(p->nvertices + 1, sizeof(int));
	size_t workloads = 0, pinned = 0, external = 0, idw = 8, hostw = 4;
	char before[32], after[32], change[32], ext[32], why[256];

	if (!cpu_before || !cpu_after || !mem_before || !mem_after || !origin) {
		fprintf(out, "plumb place: out of memory\n");
		goto out_free;
	}
	place_current(p, origin);
	place_loads(p, origin, cpu_before, mem_before);
	place_loads(p, plan->host, cpu_after, mem_after);
	for (size_t v = 0; v < p->nvertices; v++) {
		const struct place_vertex *pv = &p->vertices[v];

		external += pv->external;
		workloads += !pv->external;
		pinned += pv->pinned && !pv->external;
		if (plan->host[v] != origin[v] && strlen(pv->id) > idw)
			idw = strlen(pv->id);
	}
	for (size_t h = 0; h < p->nhosts; h++)
		if (strlen(p->hosts[h].name) > hostw)
			hostw = strlen(p->hosts[h].name);

	human_bytes((double)plan->cut_before, before, sizeof(before));
	human_bytes((double)plan->cut_after, after, sizeof(after));
	change_percent(plan->cut_before, plan->cut_after, change, sizeof(change));
	fprintf(out,
		"plumb place: %zu workloads (%zu pinned), %zu external, on %zu hosts; plan from "
		"%s\n",
		workloads, pinned, external, p->nhosts, plan->strategy);
	fprintf(out, "cross-host traffic: %s before, %s after (%s), %zu move%s\n", before, after,
		change, plan->moves, plan->moves == 1 ? "" : "s");
	if (p->external_bytes) {
		human_bytes((double)p->external_bytes, ext, sizeof(ext));
		fprintf(out,
			"traffic with addresses outside these hosts: %s (the same in any "
			"placement)\n",
			ext);
	}
	if (!plan->feasible_before && place_check_capacity(p, origin, why, sizeof(why)))
		fprintf(out, "the current placement is over capacity: %s\n", why);

	if (plan->moves) {
		fprintf(out, "\n%-*s  %-*s  %-*s  %8s  %9s\n", (int)idw, "MOVE", (int)hostw, "FROM",
			(int)hostw, "TO", "CPU", "MEMORY");
		for (size_t v = 0; v < p->nvertices; v++) {
			char mem[32];

			if (plan->host[v] == origin[v])
				continue;
			human_bytes((double)p->vertices[v].memory_bytes, mem, sizeof(mem));
			fprintf(out, "%-*s  %-*s  %-*s  %8.3f  %9s\n", (int)idw, p->vertices[v].id,
				(int)hostw, host_of(p, origin, v), (int)hostw,
				host_of(p, plan->host, v), p->vertices[v].cpu_milli / 1000.0, mem);
		}
	} else {
		fprintf(out, "\nno moves: the current placement is the best found\n");
	}

	fprintf(out, "\n%-*s  %10s  %10s  %10s  %10s  %10s  %10s\n", (int)hostw, "HOST",
		"CPU BEFORE", "CPU AFTER", "CPU CAP", "MEM BEFORE", "MEM AFTER", "MEM CAP");
	for (size_t h = 0; h < p->nhosts; h++) {
		const struct place_host *ph = &p->hosts[h];
		char mb[32], ma[32], mc[32];

		human_bytes((double)mem_before[h], mb, sizeof(mb));
		human_bytes((double)mem_after[h], ma, sizeof(ma));
		if (ph->memory_limited)
			human_bytes((double)ph->memory_bytes, mc, sizeof(mc));
		else
			snprintf(mc, sizeof(mc), "-");
		fprintf(out, "%-*s  %10.3f  %10.3f  %10.3f  %10s  %10s  %10s\n", (int)hostw,
			ph->name, cpu_before[h] / 1000.0, cpu_after[h] / 1000.0,
			ph->cpu_milli / 1000.0, mb, ma, mc);
	}
out_free:
	free(cpu_before);
	free(cpu_after);
	free(mem_before);
	free(mem_after);
	free(origin);
}

/* json_object_object_add and _array_add, taking v (NULL from a failed new: -ENOMEM) */
static int json_add(struct json_object *o, const char *key, struct json_object *v)
{
	if (!v)
		return -ENOMEM;
	if (json_object_object_add(o, key, v)) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static int json_add_null(struct json_object *o, const char *key)
{
	return json_object_object_add(o, key, NULL) ? -ENOMEM : 0;
}

static int json_append(struct json_object *array, struct json_object *v)
{
	if (!v)
		return -ENOMEM;
	if (json_object_array_add(array, v)) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static struct json_object *json_cpu(int64_t milli)
{
	return json_object_new_double(milli / 1000.0);
}

static int json_add_moves(struct json_object *root, const struct place_problem *p,
			  const struct place_plan *plan, const int *origin)
{
	struct json_object *moves = json_object_new_array(), *placement;
	int err = json_add(root, "moves", moves);

	placement = json_object_new_array();
	err = err ?: json_add(root, "placement", placement);
	for (size_t v = 0; v < p->nvertices && !err; v++) {
		const struct place_vertex *pv = &p->vertices[v];
		struct json_object *a = json_object_new_object(), *m;

		err = json_append(placement, a);
		err = err ?: json_add(a, "vertex", json_object_new_string(pv->id));
		err = err ?: json_add(a, "host", json_object_new_string(host_of(p, plan->host, v)));
		if (err || plan->host[v] == origin[v])
			continue;
		m = json_object_new_object();
		err = json_append(moves, m);
		err = err ?: json_add(m, "vertex", json_object_new_string(pv->id));
		err = err ?: json_add(m, "from", json_object_new_string(host_of(p, origin, v)));
		err = err ?: json_add(m, "to", json_object_new_string(host_of(p, plan->host, v)));
		err = err ?: json_add(m, "cpu", json_cpu(pv->cpu_milli));
		err = err ?: json_add(m, "memory_bytes", json_object_new_uint64(pv->memory_bytes));
	}
	return err;
}

static int json_add_hosts(struct json_object *root, const struct place_problem *p,
			  const struct place_plan *plan, const int *origin)
{
	int64_t *cpu_before = calloc(p->nhosts, sizeof(int64_t));
	int64_t *cpu_after = calloc(p->nhosts, sizeof(int64_t));
	uint64_t *mem_before = calloc(p->nhosts, sizeof(uint64_t));
	uint64_t *mem_after = calloc(p->nhosts, sizeof(uint64_t));
	struct json_object *hosts = json_object_new_array();
	int err = json_add(root, "hosts", hosts);

	if (!cpu_before || !cpu_after || !mem_before || !mem_after)
		err = -ENOMEM;
	if (!err) {
		place_loads(p, origin, cpu_before, mem_before);
		place_loads(p, plan->host, cpu_after, mem_after);
	}
	for (size_t h = 0; h < p->nhosts && !err; h++) {
		const struct place_host *ph = &p->hosts[h];
		struct json_object *o = json_object_new_object();

		err = json_append(hosts, o);
		err = err ?: json_add(o, "name", json_object_new_string(ph->name));
		err = err ?: json_add(o, "cpu_capacity", json_cpu(ph->cpu_milli));
		err = err ?: json_add(o, "cpu_before", json_cpu(cpu_before[h]));
		err = err ?: json_add(o, "cpu_after", json_cpu(cpu_after[h]));
		if (ph->memory_limited)
			err = err   ?:
				      json_add(o, "memory_capacity",
					       json_object_new_uint64(ph->memory_bytes));
		else
			err = err ?: json_add_null(o, "memory_capacity");
		err = err ?: json_add(o, "memory_before", json_object_new_uint64(mem_before[h]));
		err = err ?: json_add(o, "memory_after", json_object_new_uint64(mem_after[h]));
	}
	free(cpu_before);
	free(cpu_after);
	free(mem_before);
	free(mem_after);
	return err;
}

int place_write_json(FILE *out, const struct place_problem *p, const struct place_plan *plan)
{
	struct json_object *root = json_object_new_object();
	int *origin = calloc(p->nvertices + 1, sizeof(int));
	double before = (double)plan->cut_before, after = (double)plan->cut_after;
	int err = -ENOMEM;

	if (!root || !origin)
		goto out_free;
	place_current(p, origin);
	err = json_add(root, "version", json_object_new_int(1));
	err = err ?: json_add(root, "strategy", json_object_new_string(plan->strategy));
	err = err   ?:
		      json_add(root, "feasible_before",
			       json_object_new_boolean(plan->feasible_before));
	err = err ?: json_add(root, "moved", json_object_new_uint64(plan->moves));
	err = err   ?:
		      json_add(root, "cross_host_bytes_before",
			       json_object_new_uint64(plan->cut_before));
	err = err   ?:
		      json_add(root, "cross_host_bytes_after",
			       json_object_new_uint64(plan->cut_after));
	if (plan->cut_before)
		err = err   ?:
			      json_add(root, "reduction_percent",
				       json_object_new_double(100.0 * (before - after) / before));
	else
		err = err ?: json_add_null(root, "reduction_percent");
	err = err ?: json_add(root, "external_bytes", json_object_new_uint64(p->external_bytes));
	err = err ?: json_add_moves(root, p, plan, origin);
	err = err ?: json_add_hosts(root, p, plan, origin);
	if (!err)
		fprintf(out, "%s\n",
			json_object_to_json_string_ext(
				root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					      JSON_C_TO_STRING_NOSLASHESCAPE));
out_free:
	json_object_put(root);
	free(origin);
	return err;
}

/* A YAML double-quoted scalar: backslash, quote and control characters escaped. */
static void yaml_quoted(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\x%02x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

/*
 * A Kubernetes label value from a workload's name: 63 characters at most, [A-Za-z0-9._-],
 * alphanumeric at both ends; anything else becomes '-'. Empty when nothing is left.
 */
static void k8s_label_value(const char *in, char *out)
{
	size_t n = 0;

	for (; *in && !isalnum((unsigned char)*in); in++)
		;
	for (; *in && n < K8S_LABEL_MAX; in++) {
		unsigned char c = (unsigned char)*in;

		out[n++] = isalnum(c) || c == '.' || c == '_' || c == '-' ? (char)c : '-';
	}
	while (n && !isalnum((unsigned char)out[n - 1]))
		n--;
	out[n] = '\0';
}

struct peer {
	char label[K8S_LABEL_MAX + 1];
	uint64_t bytes;
};

static int cmp_peer(const void *x, const void *y)
{
	const struct peer *a = x, *b = y;

	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return strcmp(a->label, b->label);
}

/* v's peers that the plan puts on its host, by label, heaviest first; how many */
static size_t colocated_peers(const struct place_problem *p, const struct place_plan *plan,
			      size_t v, struct peer *peers)
{
	size_t n = 0;

	for (size_t e = p->adj_start[v]; e < p->adj_start[v + 1]; e++) {
		const struct place_vertex *pu = &p->vertices[p->adj[e]];
		char label[K8S_LABEL_MAX + 1];
		size_t i;

		if (pu->external || plan->host[p->adj[e]] != plan->host[v])
			continue;
		k8s_label_value(pu->label, label);
		if (!*label)
			continue;
		for (i = 0; i < n && strcmp(peers[i].label, label); i++)
			;
		if (i == n) {
			memcpy(peers[n].label, label, sizeof(label));
			peers[n++].bytes = 0;
		}
		peers[i].bytes += p->adj_bytes[e];
	}
	qsort(peers, n, sizeof(*peers), cmp_peer);
	return n;
}

void place_write_k8s(FILE *out, const struct place_problem *p, const struct place_plan *plan,
		     unsigned int max_peers)
{
	size_t maxdeg = 0;
	char before[32], after[32], change[32];
	struct peer *peers;
	int *origin;

	for (size_t v = 0; v < p->nvertices; v++)
		if (p->adj_start[v + 1] - p->adj_start[v] > maxdeg)
			maxdeg = p->adj_start[v + 1] - p->adj_start[v];
	peers = calloc(maxdeg + 1, sizeof(*peers));
	origin = calloc(p->nvertices + 1, sizeof(*origin));
	if (!peers || !origin) {
		fprintf(out, "# plumb place: out of memory\n");
		goto out_free;
	}
	place_current(p, origin);
	human_bytes((double)plan->cut_before, before, sizeof(before));
	human_bytes((double)plan->cut_after, after, sizeof(after));
	change_percent(plan->cut_before, plan->cut_after, change, sizeof(change));
	fprintf(out,
		"# plumb place: %zu move%s; cross-host traffic %s -> %s (%s)\n"
		"# Each affinity goes into its workload's pod template "
		"(spec.template.spec.affinity).\n"
		"# Peers are selected by the label " K8S_NAME_LABEL
		", assumed to hold each workload's name.\n",
		plan->moves, plan->moves == 1 ? "" : "s", before, after, change);
	fprintf(out, "moves:%s\n", plan->moves ? "" : " []");
	for (size_t v = 0; v < p->nvertices; v++) {
		const struct place_vertex *pv = &p->vertices[v];
		const char *to = host_of(p, plan->host, v);
		char label[K8S_LABEL_MAX + 1];
		size_t npeers;

		if (plan->host[v] == origin[v])
			continue;
		fprintf(out, "  - workload: ");
		yaml_quoted(out, pv->id);
		k8s_label_value(pv->label, label);
		fprintf(out, "\n    name: ");
		yaml_quoted(out, label);
		fprintf(out, "\n    from: ");
		yaml_quoted(out, host_of(p, origin, v));
		fprintf(out, "\n    to: ");
		yaml_quoted(out, to);
		fprintf(out, "\n    affinity:\n"
			     "      nodeAffinity:\n"
			     "        requiredDuringSchedulingIgnoredDuringExecution:\n"
			     "          nodeSelectorTerms:\n"
			     "            - matchExpressions:\n"
			     "                - key: " K8S_HOSTNAME_LABEL "\n"
			     "                  operator: In\n"
			     "                  values:\n"
			     "                    - ");
		yaml_quoted(out, to);
		fputc('\n', out);
		npeers = colocated_peers(p, plan, v, peers);
		if (npeers > max_peers)
			npeers = max_peers;
		if (!npeers)
			continue;
		fprintf(out, "      podAffinity:\n"
			     "        preferredDuringSchedulingIgnoredDuringExecution:\n");
		for (size_t i = 0; i < npeers; i++) {
			/* 1..100 in proportion to the heaviest peer's bytes */
			long weight =
				lround(100.0 * (double)peers[i].bytes / (double)peers[0].bytes);

			fprintf(out,
				"          - weight: %ld\n"
				"            podAffinityTerm:\n"
				"              labelSelector:\n"
				"                matchLabels:\n"
				"                  " K8S_NAME_LABEL ": ",
				weight < 1 ? 1 : weight);
			yaml_quoted(out, peers[i].label);
			fprintf(out, "\n              topologyKey: " K8S_HOSTNAME_LABEL "\n");
		}
	}
out_free:
	free(peers);
	free(origin);
}

int place_view_run(const struct place_options *o)
{
	struct place_params params = { .max_moves = o->max_moves };
	struct place_problem p;
	struct place_plan plan;
	char err[512];
	int ret;

	if (place_problem_load(&p, o->graph, o->hosts, err, sizeof(err))) {
		fprintf(stderr, "plumb place: %s\n", err);
		return 1;
	}
	for (size_t i = 0; i < o->npins; i++) {
		if (place_problem_pin(&p, o->pins[i], err, sizeof(err)) < 0) {
			fprintf(stderr, "plumb place: %s\n", err);
			place_problem_free(&p);
			return 1;
		}
	}
	if (place_solve(&p, &params, &plan, err, sizeof(err))) {
		fprintf(stderr, "plumb place: %s\n", err);
		place_problem_free(&p);
		return 1;
	}
	ret = 0;
	switch (o->format) {
	case PLACE_FORMAT_TABLE:
		place_write_table(stdout, &p, &plan);
		break;
	case PLACE_FORMAT_JSON:
		ret = place_write_json(stdout, &p, &plan);
		break;
	case PLACE_FORMAT_K8S:
		place_write_k8s(stdout, &p, &plan, o->peers);
		break;
	}
	if (ret || fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "plumb place: cannot write the plan: %s\n",
			strerror(ret ? -ret : errno));
		ret = 1;
	}
	place_plan_free(&plan);
	place_problem_free(&p);
	return ret;
}
