// SPDX-License-Identifier: GPL-2.0
/*
 * plumb place: reading the graph and the hosts (docs/graph.md §4, §5), and the placement
 * itself (docs/place.md): METIS for a k-way start, parts mapped to hosts by the Hungarian
 * method, then a repair and a refinement that keep every host within its capacity.
 */
#include <errno.h>
#include <fnmatch.h>
#include <json-c/json.h>
#include <math.h>
#include <metis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/place.h"
#include "log.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* cpu and memory beyond these are typing errors, and keep every sum far from overflow */
#define CPU_MAX_CORES	 1e9
#define MEMORY_MAX_BYTES (1ull << 60)
#define BYTES_MAX	 (1ull << 62) /* all edges' bytes together: gains stay in int64_t */
#define TOTAL_MAX	 (1ull << 62) /* all millicores, all memory: sums stay in int64_t */

#define EXTERNAL_PREFIX "external/"

#define SWAP_TOP 16 /* vertices per side of a host pair that refine_swaps() tries */

/* ---- reading the input ---- */

struct edge {
	uint32_t u, v;
	uint64_t bytes;
};

static int json_parse_text(const char *text, const char *what, struct json_object **out, char *err,
			   size_t errlen)
{
	struct json_tokener *tok = json_tokener_new();
	size_t len = strlen(text), line = 1, col = 1, off;
	struct json_object *obj;
	const char *why = NULL;

	if (!tok) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* trailing data is checked below, to say so */
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS |
					    JSON_TOKENER_VALIDATE_UTF8);
	obj = json_tokener_parse_ex(tok, text, (int)len);
	off = json_tokener_get_parse_end(tok);
	if (obj && strspn(text + off, " \t\r\n") != len - off) {
		json_object_put(obj);
		obj = NULL;
		off += strspn(text + off, " \t\r\n");
		why = "trailing data";
	} else if (!obj) {
		enum json_tokener_error e = json_tokener_get_error(tok);

		why = e == json_tokener_continue ? "unexpected end of input" :
						   json_tokener_error_desc(e);
	}
	json_tokener_free(tok);
	if (!obj) {
		for (size_t i = 0; i < off && i < len; i++) {
			if (text[i] == '\n') {
				line++;
				col = 1;
			} else {
				col++;
			}
		}
		snprintf(err, errlen, "%s: not JSON: %s at line %zu, column %zu", what, why, line,
			 col);
		return -EINVAL;
	}
	*out = obj;
	return 0;
}

/* A non-negative number under max, present or not; doubles are rounded to the nearest. */
static int json_get_amount(struct json_object *o, const char *key, double max, double *out,
			   bool *present)
{
	struct json_object *v;

	*present = json_object_object_get_ex(o, key, &v) && !json_object_is_type(v, json_type_null);
	if (!*present)
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		if (json_object_get_int64(v) < 0)
			return -EINVAL;
		*out = (double)json_object_get_uint64(v);
	} else if (json_object_is_type(v, json_type_double)) {
		*out = json_object_get_double(v);
	} else {
		return -EINVAL;
	}
	if (!isfinite(*out) || *out < 0 || *out > max)
		return -EINVAL;
	return 0;
}

/* An unsigned integer under max; exact for integers, doubles rounded. */
static int json_get_count(struct json_object *o, const char *key, uint64_t max, uint64_t *out,
			  bool *present)
{
	struct json_object *v;
	double d;
	int ret;

	*out = 0;
	if (json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int) &&
	    json_object_get_int64(v) >= 0) {
		*present = true;
		*out = json_object_get_uint64(v);
		return *out > max ? -EINVAL : 0;
	}
	ret = json_get_amount(o, key, (double)max, &d, present);
	if (!ret && *present)
		*out = (uint64_t)llround(d);
	return ret;
}

static const char *json_get_string(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static int host_index(const struct place_problem *p, const char *name)
{
	for (size_t i = 0; i < p->nhosts; i++)
		if (!strcmp(p->hosts[i].name, name))
			return (int)i;
	return PLACE_OUTSIDE;
}

static int parse_hosts(struct place_problem *p, const char *text, char *err, size_t errlen)
{
	uint64_t cpu_total = 0, mem_total = 0;
	struct json_object *root;
	size_t n;
	int ret;

	ret = json_parse_text(text, "hosts", &root, err, errlen);
	if (ret)
		return ret;
	ret = -EINVAL;
	if (!json_object_is_type(root, json_type_array)) {
		snprintf(err, errlen, "hosts: expected an array of {\"name\", \"cpu\"}");
		goto out_put;
	}
	n = json_object_array_length(root);
	if (!n) {
		snprintf(err, errlen, "hosts: no hosts");
		goto out_put;
	}
	p->hosts = calloc(n, sizeof(*p->hosts));
	if (!p->hosts) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_put;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *h = json_object_array_get_idx(root, i);
		struct place_host *host = &p->hosts[i];
		const char *name;
		bool present;
		double cpu;

		name = json_object_is_type(h, json_type_object) ? json_get_string(h, "name") : NULL;
		if (!name || !*name) {
			snprintf(err, errlen, "hosts: entry %zu has no \"name\"", i);
			goto out_put;
		}
		if (host_index(p, name) != PLACE_OUTSIDE) {
			snprintf(err, errlen, "hosts: host '%s' is listed twice", name);
			goto out_put;
		}
		if (json_get_amount(h, "cpu", CPU_MAX_CORES, &cpu, &present) || !present) {
			snprintf(err, errlen,
				 "hosts: host '%s': \"cpu\" must be a number of cores, 0 or more",
				 name);
			goto out_put;
		}
		if (json_get_count(h, "memory_bytes", MEMORY_MAX_BYTES, &host->memory_bytes,
				   &host->memory_limited)) {
			snprintf(err, errlen,
				 "hosts: host '%s': \"memory_bytes\" must be a byte count, 0 or "
				 "more",
				 name);
			goto out_put;
		}
		host->cpu_milli = llround(cpu * 1000);
		host->name = strdup(name);
		if (!host->name) {
			ret = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			goto out_put;
		}
		p->nhosts++;
		cpu_total += (uint64_t)host->cpu_milli;
		mem_total += host->memory_bytes;
		if (cpu_total > TOTAL_MAX || mem_total > TOTAL_MAX) {
			snprintf(err, errlen, "hosts: more than 2^62 millicores or bytes in all");
			goto out_put;
		}
	}
	ret = 0;
out_put:
	json_object_put(root);
	return ret;
}

static int cmp_vertex_id(const void *a, const void *b, void *arg)
{
	const struct place_vertex *v = arg;

	return strcmp(v[*(const uint32_t *)a].id, v[*(const uint32_t *)b].id);
}

static long vertex_lookup(const struct place_problem *p, const uint32_t *by_id, const char *id)
{
	size_t lo = 0, hi = p->nvertices;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(p->vertices[by_id[mid]].id, id);

		if (!c)
			return by_id[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int parse_vertex(struct place_problem *p, struct json_object *o, size_t i, char *err,
			size_t errlen)
{
	struct place_vertex *v = &p->vertices[i];
	const char *id, *host, *label;
	bool present;
	double cpu;

	id = json_object_is_type(o, json_type_object) ? json_get_string(o, "id") : NULL;
	if (!id || !*id) {
		snprintf(err, errlen, "graph: vertex %zu has no \"id\"", i);
		return -EINVAL;
	}
	host = json_get_string(o, "host");
	if (!host || !*host) {
		snprintf(err, errlen,
			 "graph: vertex '%s' has no \"host\" (plumb place needs the process "
			 "projection, or another whose vertices have one)",
			 id);
		return -EINVAL;
	}
	v->external = !strncmp(id, EXTERNAL_PREFIX, strlen(EXTERNAL_PREFIX));
	v->host = host_index(p, host);
	if (v->host == PLACE_OUTSIDE && !v->external) {
		snprintf(err, errlen, "graph: vertex '%s': host '%s' is not among the hosts", id,
			 host);
		return -EINVAL;
	}
	v->pinned = v->external;
	/* an external vertex is no workload of ours: it takes nothing unless it says so */
	cpu = v->external ? 0 : 1;
	if (json_get_amount(o, "cpu", CPU_MAX_CORES, &cpu, &present)) {
		snprintf(err, errlen,
			 "graph: vertex '%s': \"cpu\" must be a number of cores, 0 or more", id);
		return -EINVAL;
	}
	v->cpu_milli = llround(cpu * 1000);
	if (json_get_count(o, "memory_bytes", MEMORY_MAX_BYTES, &v->memory_bytes, &present)) {
		snprintf(err, errlen,
			 "graph: vertex '%s': \"memory_bytes\" must be a byte count, 0 or more",
			 id);
		return -EINVAL;
	}
	label = json_get_string(o, "workload");
	if (!label || !*label)
		label = json_get_string(o, "comm");
	if (!label || !*label || !strcmp(label, "?"))
		label = id;
	v->id = strdup(id);
	v->label = strdup(label);
	v->host_name = strdup(host);
	if (!v->id || !v->label || !v->host_name) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int parse_edge(struct place_problem *p, const uint32_t *by_id, struct json_object *o,
		      size_t i, struct edge *e, char *err, size_t errlen)
{
	const char *src, *dst;
	uint64_t tx, rx;
	bool present;
	long u, v;

	src = json_object_is_type(o, json_type_object) ? json_get_string(o, "source") : NULL;
	dst = src ? json_get_string(o, "target") : NULL;
	if (!src || !dst) {
		snprintf(err, errlen, "graph: edge %zu needs \"source\" and \"target\"", i);
		return -EINVAL;
	}
	u = vertex_lookup(p, by_id, src);
	v = vertex_lookup(p, by_id, dst);
	if (u < 0 || v < 0) {
		snprintf(err, errlen, "graph: edge %zu: no vertex '%s'", i, u < 0 ? src : dst);
		return -EINVAL;
	}
	if (json_get_count(o, "tx_bytes", BYTES_MAX, &tx, &present) ||
	    json_get_count(o, "rx_bytes", BYTES_MAX, &rx, &present)) {
		snprintf(err, errlen,
			 "graph: edge %zu ('%s' -> '%s'): tx_bytes and rx_bytes must be byte "
			 "counts, 0 or more",
			 i, src, dst);
		return -EINVAL;
	}
	e->u = (uint32_t)u;
	e->v = (uint32_t)v;
	e->bytes = tx + rx;
	return 0;
}

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->u != y->u)
		return x->u < y->u ? -1 : 1;
	if (x->v != y->v)
		return x->v < y->v ? -1 : 1;
	return 0;
}

/* Both directions of every edge between placed vertices, merged into the CSR arrays. */
static int build_adjacency(struct place_problem *p, const struct edge *edges, size_t nedges,
			   char *err, size_t errlen)
{
	struct edge *half = malloc((2 * nedges + 1) * sizeof(*half));
	uint64_t total = 0;
	size_t n = 0, m = 0;

	p->adj_start = calloc(p->nvertices + 1, sizeof(*p->adj_start));
	if (!half || !p->adj_start)
		goto out_nomem;
	for (size_t i = 0; i < nedges; i++) {
		const struct edge *e = &edges[i];

		total += e->bytes;
		if (total > BYTES_MAX) {
			free(half);
			snprintf(err, errlen, "graph: more than 2^62 bytes of traffic in all");
			return -ERANGE;
		}
		if (e->u == e->v || !e->bytes)
			continue;
		if (p->vertices[e->u].host == PLACE_OUTSIDE ||
		    p->vertices[e->v].host == PLACE_OUTSIDE) {
			p->external_bytes += e->bytes;
			continue;
		}
		half[n++] = *e;
		half[n++] = (struct edge){ e->v, e->u, e->bytes };
	}
	qsort(half, n, sizeof(*half), cmp_edge);
	for (size_t i = 0; i < n; i++) { /* merge parallel edges in place */
		if (m && !cmp_edge(&half[m - 1], &half[i]))
			half[m - 1].bytes += half[i].bytes;
		else
			half[m++] = half[i];
	}
	p->adj = malloc((m + 1) * sizeof(*p->adj));
	p->adj_bytes = malloc((m + 1) * sizeof(*p->adj_bytes));
	if (!p->adj || !p->adj_bytes)
		goto out_nomem;
	for (size_t i = 0; i < m; i++) {
		p->adj_start[half[i].u + 1]++;
		p->adj[i] = half[i].v;
		p->adj_bytes[i] = half[i].bytes;
	}
	for (size_t v = 0; v < p->nvertices; v++)
		p->adj_start[v + 1] += p->adj_start[v];
	free(half);
	return 0;
out_nomem:
	free(half);
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

static int parse_graph(struct place_problem *p, const char *text, char *err, size_t errlen)
{
	struct json_object *root, *vertices, *edges, *version;
	uint64_t cpu_total = 0, mem_total = 0;
	struct edge *list = NULL;
	uint32_t *by_id = NULL;
	size_t n, nedges;
	int ret;

	ret = json_parse_text(text, "graph", &root, err, errlen);
	if (ret)
		return ret;
	ret = -EINVAL;
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "vertices", &vertices) ||
	    !json_object_is_type(vertices, json_type_array) ||
	    !json_object_object_get_ex(root, "edges", &edges) ||
	    !json_object_is_type(edges, json_type_array)) {
		snprintf(err, errlen,
			 "graph: expected an object with \"vertices\" and \"edges\" arrays "
			 "(plumb graph --format json)");
		goto out_put;
	}
	if (json_object_object_get_ex(root, "version", &version) &&
	    (!json_object_is_type(version, json_type_int) || json_object_get_int64(version) != 1)) {
		snprintf(err, errlen, "graph: version %s: only version 1 is known",
			 json_object_to_json_string(version));
		goto out_put;
	}
	n = json_object_array_length(vertices);
	nedges = json_object_array_length(edges);
	if (n > UINT32_MAX / 2) {
		snprintf(err, errlen, "graph: %zu vertices: too many", n);
		goto out_put;
	}
	p->vertices = calloc(n + 1, sizeof(*p->vertices));
	by_id = malloc((n + 1) * sizeof(*by_id));
	list = malloc((nedges + 1) * sizeof(*list));
	if (!p->vertices || !by_id || !list) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_put;
	}
	for (size_t i = 0; i < n; i++) {
		ret = parse_vertex(p, json_object_array_get_idx(vertices, i), i, err, errlen);
		p->nvertices += p->vertices[i].id != NULL;
		if (ret)
			goto out_put;
		by_id[i] = (uint32_t)i;
		cpu_total += (uint64_t)p->vertices[i].cpu_milli;
		mem_total += p->vertices[i].memory_bytes;
		if (cpu_total > TOTAL_MAX || mem_total > TOTAL_MAX) {
			ret = -ERANGE;
			snprintf(err, errlen, "graph: more than 2^62 millicores or bytes in all");
			goto out_put;
		}
	}
	qsort_r(by_id, n, sizeof(*by_id), cmp_vertex_id, p->vertices);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(p->vertices[by_id[i]].id, p->vertices[by_id[i - 1]].id)) {
			ret = -EINVAL;
			snprintf(err, errlen, "graph: vertex '%s' is listed twice",
				 p->vertices[by_id[i]].id);
			goto out_put;
		}
	}
	for (size_t i = 0; i < nedges; i++) {
		ret = parse_edge(p, by_id, json_object_array_get_idx(edges, i), i, &list[i], err,
				 errlen);
		if (ret)
			goto out_put;
	}
	ret = build_adjacency(p, list, nedges, err, errlen);
out_put:
	free(list);
	free(by_id);
	json_object_put(root);
	return ret;
}

int place_problem_parse(struct place_problem *p, const char *graph_json, const char *hosts_json,
			char *err, size_t errlen)
{
	int ret;

	memset(p, 0, sizeof(*p));
	ret = parse_hosts(p, hosts_json, err, errlen);
	if (!ret)
		ret = parse_graph(p, graph_json, err, errlen);
	if (ret)
		place_problem_free(p);
	return ret;
}

static char *read_file(const char *path, char *err, size_t errlen)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	FILE *f;

	if (!buf) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		free(buf);
		return NULL;
	}
	for (;;) {
		size_t got = fread(buf + len, 1, cap - len - 1, f);
		char *bigger;

		len += got;
		if (len < cap - 1)
			break;
		cap *= 2;
		bigger = realloc(buf, cap);
		if (!bigger) {
			snprintf(err, errlen, "out of memory");
			goto out_close;
		}
		buf = bigger;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out_close;
	}
	if (memchr(buf, '\0', len)) {
		snprintf(err, errlen, "%s: not JSON: a NUL byte", path);
		goto out_close;
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
out_close:
	fclose(f);
	free(buf);
	return NULL;
}

int place_problem_load(struct place_problem *p, const char *graph_path, const char *hosts_path,
		       char *err, size_t errlen)
{
	char *graph, *hosts, msg[512];
	int ret;

	memset(p, 0, sizeof(*p));
	graph = read_file(graph_path, err, errlen);
	if (!graph)
		return -EIO;
	hosts = read_file(hosts_path, err, errlen);
	if (!hosts) {
		free(graph);
		return -EIO;
	}
	ret = place_problem_parse(p, graph, hosts, msg, sizeof(msg));
	if (ret) {
		/* "graph: ..." or "hosts: ...": name the file instead */
		if (!strncmp(msg, "graph: ", 7))
			snprintf(err, errlen, "%s: %s", graph_path, msg + 7);
		else if (!strncmp(msg, "hosts: ", 7))
			snprintf(err, errlen, "%s: %s", hosts_path, msg + 7);
		else
			snprintf(err, errlen, "%s", msg);
	}
	free(graph);
	free(hosts);
	return ret;
}

int place_problem_pin(struct place_problem *p, const char *glob, char *err, size_t errlen)
{
	int n = 0;

	for (size_t i = 0; i < p->nvertices; i++) {
		if (fnmatch(glob, p->vertices[i].id, 0))
			continue;
		p->vertices[i].pinned = true;
		n++;
	}
	if (!n) {
		snprintf(err, errlen, "--pin '%s' matches no vertex", glob);
		return -ENOENT;
	}
	return n;
}

void place_problem_free(struct place_problem *p)
{
	for (size_t i = 0; i < p->nhosts; i++)
		free(p->hosts[i].name);
	for (size_t i = 0; i < p->nvertices; i++) {
		free(p->vertices[i].id);
		free(p->vertices[i].label);
		free(p->vertices[i].host_name);
	}
	free(p->hosts);
	free(p->vertices);
	free(p->adj_start);
	free(p->adj);
	free(p->adj_bytes);
	memset(p, 0, sizeof(*p));
}

/* ---- what a placement costs ---- */

void place_current(const struct place_problem *p, int *host)
{
	for (size_t i = 0; i < p->nvertices; i++)
		host[i] = p->vertices[i].host;
}

uint64_t place_cut(const struct place_problem *p, const int *host)
{
	uint64_t cut = 0;

	for (size_t u = 0; u < p->nvertices; u++)
		for (size_t e = p->adj_start[u]; e < p->adj_start[u + 1]; e++)
			if (p->adj[e] > u && host[p->adj[e]] != host[u])
				cut += p->adj_bytes[e];
	return cut;
}

void place_loads(const struct place_problem *p, const int *host, int64_t *cpu_milli,
		 uint64_t *memory_bytes)
{
	memset(cpu_milli, 0, p->nhosts * sizeof(*cpu_milli));
	memset(memory_bytes, 0, p->nhosts * sizeof(*memory_bytes));
	for (size_t i = 0; i < p->nvertices; i++) {
		if (host[i] == PLACE_OUTSIDE)
			continue;
		cpu_milli[host[i]] += p->vertices[i].cpu_milli;
		memory_bytes[host[i]] += p->vertices[i].memory_bytes;
	}
}

int place_check_capacity(const struct place_problem *p, const int *host, char *err, size_t errlen)
{
	int64_t *cpu = calloc(p->nhosts, sizeof(*cpu));
	uint64_t *mem = calloc(p->nhosts, sizeof(*mem));
	int ret = 0;

	if (!cpu || !mem) {
		free(cpu);
		free(mem);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	place_loads(p, host, cpu, mem);
	for (size_t h = 0; h < p->nhosts && !ret; h++) {
		const struct place_host *ph = &p->hosts[h];

		if (cpu[h] > ph->cpu_milli) {
			snprintf(err, errlen, "%s: cpu %.3f > capacity %.3f", ph->name,
				 cpu[h] / 1000.0, ph->cpu_milli / 1000.0);
			ret = -ENOSPC;
		} else if (ph->memory_limited && mem[h] > ph->memory_bytes) {
			snprintf(err, errlen, "%s: memory %llu > capacity %llu bytes", ph->name,
				 (unsigned long long)mem[h], (unsigned long long)ph->memory_bytes);
			ret = -ENOSPC;
		}
	}
	free(cpu);
	free(mem);
	return ret;
}

/* ---- the placement ---- */

/*
 * A placement being improved: the host of each vertex, each host's load, and conn, the
 * bytes from each vertex to each host, so that the gain of a move is two lookups.
 */
struct placer {
	const struct place_problem *p;
	size_t n, k;
	int *host;
	int *origin; /* the graph's placement */
	uint64_t *conn; /* n x k */
	int64_t *cpu; /* per host */
	uint64_t *mem;
	uint64_t cut;
	long moves; /* vertices not on their origin host */
	long max_moves; /* < 0: no limit */
	/* scratch for the refinement */
	unsigned char *mark;
	struct fm_step {
		uint32_t v;
		int from;
	} * log;
	struct swap_candidate {
		int a, b;
		uint32_t v;
		int64_t gain;
	} * swaps;
	int64_t *score;
	uint32_t *cheap; /* k x SWAP_TOP */
	size_t *ncheap;
};

static uint64_t *conn_row(const struct placer *pl, size_t v)
{
	return pl->conn + v * pl->k;
}

static bool movable(const struct placer *pl, size_t v)
{
	return !pl->p->vertices[v].pinned;
}

static int64_t move_gain(const struct placer *pl, size_t v, int b)
{
	const uint64_t *row = conn_row(pl, v);

	return (int64_t)row[b] - (int64_t)row[pl->host[v]];
}

static bool fits(const struct placer *pl, size_t v, int b)
{
	const struct place_vertex *pv = &pl->p->vertices[v];
	const struct place_host *h = &pl->p->hosts[b];

	if (pl->cpu[b] + pv->cpu_milli > h->cpu_milli)
		return false;
	return !h->memory_limited || pl->mem[b] + pv->memory_bytes <= h->memory_bytes;
}

/* how the count of moved vertices changes when v goes to b */
static long moves_delta(const struct placer *pl, size_t v, int b)
{
	return (pl->host[v] == pl->origin[v]) - (b == pl->origin[v]);
}

static bool within_budget(const struct placer *pl, long delta)
{
	return pl->max_moves < 0 || pl->moves + delta <= pl->max_moves;
}

static void placer_move(struct placer *pl, size_t v, int b)
{
	const struct place_problem *p = pl->p;
	const struct place_vertex *pv = &p->vertices[v];
	uint64_t *row = conn_row(pl, v);
	int a = pl->host[v];

	pl->cut = pl->cut - row[b] + row[a];
	pl->moves += moves_delta(pl, v, b);
	pl->cpu[a] -= pv->cpu_milli;
	pl->cpu[b] += pv->cpu_milli;
	pl->mem[a] -= pv->memory_bytes;
	pl->mem[b] += pv->memory_bytes;
	for (size_t e = p->adj_start[v]; e < p->adj_start[v + 1]; e++) {
		uint64_t *nrow = conn_row(pl, p->adj[e]);

		nrow[a] -= p->adj_bytes[e];
		nrow[b] += p->adj_bytes[e];
	}
	pl->host[v] = b;
}

static void placer_reset(struct placer *pl, const int *assign)
{
	const struct place_problem *p = pl->p;

	memcpy(pl->host, assign, pl->n * sizeof(*pl->host));
	place_loads(p, pl->host, pl->cpu, pl->mem);
	memset(pl->conn, 0, pl->n * pl->k * sizeof(*pl->conn));
	pl->moves = 0;
	for (size_t v = 0; v < pl->n; v++) {
		uint64_t *row = conn_row(pl, v);

		for (size_t e = p->adj_start[v]; e < p->adj_start[v + 1]; e++)
			row[pl->host[p->adj[e]]] += p->adj_bytes[e];
		pl->moves += pl->host[v] != pl->origin[v];
	}
	pl->cut = place_cut(p, pl->host);
}

static void placer_free(struct placer *pl)
{
	free(pl->host);
	free(pl->origin);
	free(pl->conn);
	free(pl->cpu);
	free(pl->mem);
	free(pl->mark);
	free(pl->log);
	free(pl->swaps);
	free(pl->score);
	free(pl->cheap);
	free(pl->ncheap);
}

static int placer_init(struct placer *pl, const struct place_problem *p, long max_moves)
{
	size_t n = p->nvertices, k = p->nhosts;

	memset(pl, 0, sizeof(*pl));
	pl->p = p;
	pl->n = n;
	pl->k = k;
	pl->max_moves = max_moves;
	pl->host = calloc(n + 1, sizeof(*pl->host));
	pl->origin = calloc(n + 1, sizeof(*pl->origin));
	pl->conn = calloc(n * k + 1, sizeof(*pl->conn));
	pl->cpu = calloc(k, sizeof(*pl->cpu));
	pl->mem = calloc(k, sizeof(*pl->mem));
	pl->mark = calloc(n + 1, 1);
	pl->log = calloc(n + 1, sizeof(*pl->log));
	/* a vertex is a swap candidate towards each host it has a neighbour on: one per edge */
	pl->swaps = calloc(p->adj_start[n] + 1, sizeof(*pl->swaps));
	pl->score = calloc(k, sizeof(*pl->score));
	pl->cheap = calloc(k * SWAP_TOP, sizeof(*pl->cheap));
	pl->ncheap = calloc(k, sizeof(*pl->ncheap));
	if (!pl->host || !pl->origin || !pl->conn || !pl->cpu || !pl->mem || !pl->mark ||
	    !pl->log || !pl->swaps || !pl->score || !pl->cheap || !pl->ncheap) {
		placer_free(pl);
		return -ENOMEM;
	}
	place_current(p, pl->origin);
	return 0;
}

/* v's best host by a positive gain that fits and is within budget, or -1 */
static int best_move_of(const struct placer *pl, size_t v, int64_t *best_gain)
{
	int best = -1;

	*best_gain = 0;
	for (size_t b = 0; b < pl->k; b++) {
		int64_t g;

		if ((int)b == pl->host[v])
			continue;
		g = move_gain(pl, v, (int)b);
		if (g > *best_gain && fits(pl, v, (int)b) &&
		    within_budget(pl, moves_delta(pl, v, (int)b))) {
			*best_gain = g;
			best = (int)b;
		}
	}
	return best;
}

/*
 * Single moves with a positive gain until none is left: sweeps that move each vertex to its
 * best host; under --max-moves, where moves are scarce, the best move of all each time.
 */
static bool refine_greedy(struct placer *pl)
{
	bool any = false, changed = true;

	while (changed) {
		int64_t top_gain = 0, g;
		size_t top_v = 0;
		int top = -1, b;

		changed = false;
		for (size_t v = 0; v < pl->n; v++) {
			if (!movable(pl, v))
				continue;
			b = best_move_of(pl, v, &g);
			if (b < 0)
				continue;
			if (pl->max_moves < 0) {
				placer_move(pl, v, b);
				changed = any = true;
			} else if (g > top_gain) {
				top_gain = g;
				top_v = v;
				top = b;
			}
		}
		if (top >= 0) {
			placer_move(pl, top_v, top);
			changed = any = true;
		}
	}
	return any;
}

static uint64_t edge_bytes(const struct place_problem *p, size_t u, uint32_t v)
{
	size_t lo = p->adj_start[u], hi = p->adj_start[u + 1];

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->adj[mid] == v)
			return p->adj_bytes[mid];
		if (p->adj[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int cmp_swap(const void *x, const void *y)
{
	const struct swap_candidate *a = x, *b = y;

	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	if (a->gain != b->gain)
		return a->gain > b->gain ? -1 : 1;
	return a->v < b->v ? -1 : a->v > b->v;
}

/* the first candidate moving from host a to host b, or n when there is none */
static size_t swap_group(const struct swap_candidate *c, size_t n, int a, int b)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (c[mid].a < a || (c[mid].a == a && c[mid].b < b))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && c[lo].a == a && c[lo].b == b ? lo : n;
}

static bool swap_fits(const struct placer *pl, size_t u, size_t v)
{
	const struct place_vertex *pu = &pl->p->vertices[u], *pv = &pl->p->vertices[v];
	int a = pl->host[u], b = pl->host[v];
	const struct place_host *ha = &pl->p->hosts[a], *hb = &pl->p->hosts[b];

	if (pl->cpu[a] - pu->cpu_milli + pv->cpu_milli > ha->cpu_milli ||
	    pl->cpu[b] - pv->cpu_milli + pu->cpu_milli > hb->cpu_milli)
		return false;
	if (ha->memory_limited &&
	    pl->mem[a] - pu->memory_bytes + pv->memory_bytes > ha->memory_bytes)
		return false;
	return !hb->memory_limited ||
	       pl->mem[b] - pv->memory_bytes + pu->memory_bytes <= hb->memory_bytes;
}

#define SWAP_ROUNDS 64

/* (a, b, gain, v) for every movable vertex v on a with traffic to b, sorted: how many */
static size_t collect_swap_candidates(struct placer *pl)
{
	size_t nc = 0;

	for (size_t v = 0; v < pl->n; v++) {
		const uint64_t *row = conn_row(pl, v);

		pl->mark[v] = 0;
		if (!movable(pl, v))
			continue;
		for (size_t b = 0; b < pl->k; b++) {
			if ((int)b == pl->host[v] || !row[b])
				continue;
			pl->swaps[nc++] =
				(struct swap_candidate){ .a = pl->host[v],
							 .b = (int)b,
							 .v = (uint32_t)v,
							 .gain = move_gain(pl, v, (int)b) };
		}
	}
	qsort(pl->swaps, nc, sizeof(*pl->swaps), cmp_swap);
	return nc;
}

/* the SWAP_TOP movable vertices of each host that keep least traffic there: cheap to evict */
static void find_cheap(struct placer *pl)
{
	memset(pl->ncheap, 0, pl->k * sizeof(*pl->ncheap));
	for (size_t v = 0; v < pl->n; v++) {
		int h = pl->host[v];
		uint32_t *cheap;
		size_t i;

		if (!movable(pl, v))
			continue;
		cheap = pl->cheap + (size_t)h * SWAP_TOP;
		i = pl->ncheap[h];
		if (i == SWAP_TOP) {
			if (conn_row(pl, cheap[i - 1])[h] <= conn_row(pl, v)[h])
				continue;
			i--;
		} else {
			pl->ncheap[h]++;
		}
		for (; i && conn_row(pl, cheap[i - 1])[h] > conn_row(pl, v)[h]; i--)
			cheap[i] = cheap[i - 1];
		cheap[i] = (uint32_t)v;
	}
}

struct swap_best {
	int64_t gain;
	size_t u, v;
};

static void consider_swap(const struct placer *pl, size_t u, size_t v, int a, int b,
			  struct swap_best *best)
{
	int64_t g;

	if (pl->mark[u] || pl->mark[v] || pl->host[u] != a || pl->host[v] != b)
		return;
	g = move_gain(pl, u, b) + move_gain(pl, v, a) -
	    2 * (int64_t)edge_bytes(pl->p, u, (uint32_t)v);
	if (g > best->gain && swap_fits(pl, u, v) &&
	    within_budget(pl, moves_delta(pl, u, b) + moves_delta(pl, v, a)))
		*best = (struct swap_best){ g, u, v };
}

/*
 * Exchanges of two vertices between two hosts: what full hosts need. For each host pair
 * (a, b), the SWAP_TOP vertices of a that gain most from going to b are paired with those
 * of b that gain most from going to a and with b's cheapest to evict; the best positive
 * exchange is made (Kernighan-Lin's step, capacity-checked). Vertices swapped in a round
 * wait for the next.
 */
static bool refine_swaps(struct placer *pl)
{
	const struct swap_candidate *c = pl->swaps;
	bool any = false;

	for (int round = 0; round < SWAP_ROUNDS; round++) {
		size_t nc = collect_swap_candidates(pl), end;
		bool improved = false;

		find_cheap(pl);
		for (size_t i = 0; i < nc; i = end) {
			int a = c[i].a, b = c[i].b;
			size_t j = swap_group(c, nc, b, a), jend = j;
			const uint32_t *cheap = pl->cheap + (size_t)b * SWAP_TOP;
			struct swap_best best = { 0, 0, 0 };

			for (end = i; end < nc && c[end].a == a && c[end].b == b; end++)
				;
			for (; jend < nc && c[jend].a == b && c[jend].b == a; jend++)
				;
			for (size_t x = i; x < end && x < i + SWAP_TOP; x++) {
				for (size_t y = j; y < jend && y < j + SWAP_TOP; y++)
					consider_swap(pl, c[x].v, c[y].v, a, b, &best);
				for (size_t y = 0; y < pl->ncheap[b]; y++)
					consider_swap(pl, c[x].v, cheap[y], a, b, &best);
			}
			if (best.gain > 0) {
				placer_move(pl, best.u, b);
				placer_move(pl, best.v, a);
				pl->mark[best.u] = pl->mark[best.v] = 1;
				improved = any = true;
			}
		}
		if (!improved)
			break;
	}
	return any;
}

#define FM_PATIENCE 64 /* moves past the best point before a pass gives up */

static bool host_over(const struct placer *pl, int h)
{
	const struct place_host *ph = &pl->p->hosts[h];

	return pl->cpu[h] > ph->cpu_milli || (ph->memory_limited && pl->mem[h] > ph->memory_bytes);
}

/* the FM move of an unlocked vertex with the best gain, given whether a host is over now */
static int fm_best_move(const struct placer *pl, bool ejecting, size_t *best_v, int64_t *best_gain)
{
	int best_b = -1;

	for (size_t v = 0; v < pl->n; v++) {
		const uint64_t *row = conn_row(pl, v);
		int a = pl->host[v];

		if (pl->mark[v] || !movable(pl, v) || (ejecting && !host_over(pl, a)))
			continue;
		for (size_t b = 0; b < pl->k; b++) {
			int64_t g;

			/* in balance, only towards a neighbour; ejecting, anywhere */
			if ((int)b == a || (!ejecting && !row[b]))
				continue;
			g = move_gain(pl, v, (int)b);
			if (best_b >= 0 && g <= *best_gain)
				continue;
			if (!fits(pl, v, (int)b) && host_over(pl, (int)b))
				continue;
			if (!within_budget(pl, moves_delta(pl, v, (int)b)))
				continue;
			*best_gain = g;
			*best_v = v;
			best_b = (int)b;
		}
	}
	return best_b;
}

/*
 * A Fiduccia-Mattheyses pass with ejection chains: the best move of an unlocked vertex,
 * even a losing one, then lock it. A move may push a full host over its capacity; the next
 * moves then come off the hosts that are over, until none is. Only points where every host
 * is within capacity count: after FM_PATIENCE moves without a better one, the pass undoes
 * back to the best. Climbs out of the local minima that single positive moves and swaps
 * stop in, full hosts included.
 */
static bool refine_fm(struct placer *pl)
{
	int64_t total = 0, best_total = 0;
	size_t len = 0, best_len = 0;
	bool ejecting = false;

	memset(pl->mark, 0, pl->n);
	while (len < pl->n) {
		int64_t gain = 0;
		size_t v = 0;
		int b = fm_best_move(pl, ejecting, &v, &gain);

		if (b < 0)
			break;
		pl->log[len++] = (struct fm_step){ (uint32_t)v, pl->host[v] };
		placer_move(pl, v, b);
		pl->mark[v] = 1;
		total += gain;
		ejecting = false;
		for (size_t h = 0; h < pl->k && !ejecting; h++)
			ejecting = host_over(pl, (int)h);
		if (!ejecting && total > best_total) {
			best_total = total;
			best_len = len;
		} else if (len - best_len >= FM_PATIENCE) {
			break;
		}
	}
	while (len > best_len) {
		len--;
		placer_move(pl, pl->log[len].v, pl->log[len].from);
	}
	return best_total > 0;
}

/* Moved vertices go home when that costs no traffic: the same cut with fewer moves. */
static void refine_unmove(struct placer *pl)
{
	bool changed = true;

	while (changed) {
		changed = false;
		for (size_t v = 0; v < pl->n; v++) {
			int o = pl->origin[v];

			if (pl->host[v] == o || !movable(pl, v))
				continue;
			if (move_gain(pl, v, o) >= 0 && fits(pl, v, o)) {
				placer_move(pl, v, o);
				changed = true;
			}
		}
	}
}

#define REFINE_ROUNDS 32

static void refine(struct placer *pl)
{
	for (int round = 0; round < REFINE_ROUNDS; round++) {
		bool better = refine_greedy(pl);

		better |= refine_swaps(pl);
		better |= refine_fm(pl);
		if (!better)
			break;
	}
	refine_unmove(pl);
}

static bool overloaded(const struct placer *pl, int h, bool *cpu, bool *mem)
{
	const struct place_host *ph = &pl->p->hosts[h];

	*cpu = pl->cpu[h] > ph->cpu_milli;
	*mem = ph->memory_limited && pl->mem[h] > ph->memory_bytes;
	return *cpu || *mem;
}

/*
 * Moves vertices off hosts over capacity, each time the move that adds least cross-host
 * traffic, to a host with room. Every move lowers an excess and creates none, so this ends;
 * -ENOSPC when a host is still over and no single move helps.
 */
static int repair(struct placer *pl)
{
	for (;;) {
		int64_t best_delta = 0;
		bool any_over = false;
		size_t best_v = 0;
		int best_b = -1;

		for (size_t v = 0; v < pl->n; v++) {
			const struct place_vertex *pv = &pl->p->vertices[v];
			int a = pl->host[v];
			bool cpu, mem;

			if (a == PLACE_OUTSIDE || !overloaded(pl, a, &cpu, &mem))
				continue;
			any_over = true;
			if (!movable(pl, v) ||
			    !((cpu && pv->cpu_milli) || (mem && pv->memory_bytes)))
				continue;
			for (size_t b = 0; b < pl->k; b++) {
				int64_t delta;

				if ((int)b == a || !fits(pl, v, (int)b) ||
				    !within_budget(pl, moves_delta(pl, v, (int)b)))
					continue;
				delta = -move_gain(pl, v, (int)b);
				if (best_b < 0 || delta < best_delta ||
				    (delta == best_delta && (int)b == pl->origin[v] &&
				     best_b != pl->origin[best_v])) {
					best_delta = delta;
					best_v = v;
					best_b = (int)b;
				}
			}
		}
		if (!any_over)
			return 0;
		if (best_b < 0)
			return -ENOSPC;
		placer_move(pl, best_v, best_b);
	}
}

/* Sends moved vertices home, those that cost least first, until within --max-moves. */
static void revert_to_budget(struct placer *pl)
{
	while (pl->max_moves >= 0 && pl->moves > pl->max_moves) {
		int64_t best_delta = 0;
		bool best_fits = false;
		long best_v = -1;

		for (size_t v = 0; v < pl->n; v++) {
			int o = pl->origin[v];
			int64_t delta;
			bool f;

			if (pl->host[v] == o)
				continue;
			delta = -move_gain(pl, v, o);
			f = fits(pl, v, o);
			if (best_v < 0 || (f && !best_fits) ||
			    (f == best_fits && delta < best_delta)) {
				best_delta = delta;
				best_fits = f;
				best_v = (long)v;
			}
		}
		placer_move(pl, (size_t)best_v, pl->origin[best_v]);
	}
}

/* what each host has left for the movable vertices */
static void room_for_movable(const struct placer *pl, int64_t *cpu, int64_t *mem)
{
	const struct place_problem *p = pl->p;

	for (size_t h = 0; h < pl->k; h++) {
		cpu[h] = p->hosts[h].cpu_milli;
		mem[h] = (int64_t)p->hosts[h].memory_bytes;
	}
	for (size_t v = 0; v < pl->n; v++) {
		const struct place_vertex *pv = &p->vertices[v];

		if (!pv->pinned || pv->host == PLACE_OUTSIDE)
			continue;
		cpu[pv->host] -= pv->cpu_milli;
		mem[pv->host] -= (int64_t)pv->memory_bytes;
	}
}

/*
 * Minimum-cost perfect matching of an m x m cost matrix (the Hungarian method with
 * potentials, O(m^3)): row_to_col[i] is the column row i gets.
 */
static int assign_min_cost(const double *cost, size_t m, int *row_to_col)
{
	double *u = calloc(m + 1, sizeof(double)), *w = calloc(m + 1, sizeof(double));
	double *minv = calloc(m + 1, sizeof(double));
	size_t *match = calloc(m + 1, sizeof(size_t)), *way = calloc(m + 1, sizeof(size_t));
	bool *used = calloc(m + 1, sizeof(bool));
	int ret = -ENOMEM;

	if (!u || !w || !minv || !match || !way || !used)
		goto out_free;
	for (size_t i = 1; i <= m; i++) {
		size_t j0 = 0;

		match[0] = i;
		for (size_t j = 0; j <= m; j++) {
			minv[j] = INFINITY;
			used[j] = false;
		}
		do {
			size_t i0 = match[j0], j1 = 0;
			double delta = INFINITY;

			used[j0] = true;
			for (size_t j = 1; j <= m; j++) {
				double cur;

				if (used[j])
					continue;
				cur = cost[(i0 - 1) * m + (j - 1)] - u[i0] - w[j];
				if (cur < minv[j]) {
					minv[j] = cur;
					way[j] = j0;
				}
				if (minv[j] < delta) {
					delta = minv[j];
					j1 = j;
				}
			}
			for (size_t j = 0; j <= m; j++) {
				if (used[j]) {
					u[match[j]] += delta;
					w[j] -= delta;
				} else {
					minv[j] -= delta;
				}
			}
			j0 = j1;
		} while (match[j0]);
		do {
			size_t j1 = way[j0];

			match[j0] = match[j1];
			j0 = j1;
		} while (j0);
	}
	for (size_t j = 1; j <= m; j++)
		row_to_col[match[j] - 1] = (int)(j - 1);
	ret = 0;
out_free:
	free(u);
	free(w);
	free(minv);
	free(match);
	free(way);
	free(used);
	return ret;
}

/* METIS weights are 32-bit: a divisor that keeps a total under 2^28 */
static uint64_t metis_divisor(uint64_t total)
{
	return total / (1ull << 28) + 1;
}

struct metis_input {
	idx_t nvtxs, ncon, nparts;
	idx_t *xadj, *adjncy, *adjwgt, *vwgt, *part;
	real_t *tpwgts, ubvec[2];
	uint32_t *vertex; /* METIS vertex -> ours */
	int *part_host; /* part -> the host whose share tpwgts gave it */
};

static void metis_input_free(struct metis_input *m)
{
	free(m->xadj);
	free(m->adjncy);
	free(m->adjwgt);
	free(m->vwgt);
	free(m->part);
	free(m->tpwgts);
	free(m->vertex);
	free(m->part_host);
}

/*
 * The movable vertices and the edges among them; vertex weights millicores (and MiB, as a
 * second constraint, when memory binds somewhere); one part per host with room, its target
 * weight the host's share of the room. Returns 1 when there is nothing for METIS to do.
 */
static int metis_input_build(const struct placer *pl, struct metis_input *m, int64_t *room_cpu,
			     int64_t *room_mem, double slack_share)
{
	const struct place_problem *p = pl->p;
	uint64_t cpu_total = 0, mem_total = 0, w_total = 0, room_total[2] = { 0, 0 };
	uint64_t cpu_div, mem_div, w_div;
	int32_t *index = malloc((pl->n + 1) * sizeof(*index));
	bool mem_binds = false;
	size_t ne = 0;

	memset(m, 0, sizeof(*m));
	if (!index)
		return -ENOMEM;
	for (size_t v = 0; v < pl->n; v++) {
		index[v] = -1;
		if (!movable(pl, v))
			continue;
		index[v] = m->nvtxs++;
		cpu_total += p->vertices[v].cpu_milli;
		mem_total += (p->vertices[v].memory_bytes + (1 << 20) - 1) >> 20;
		for (size_t e = p->adj_start[v]; e < p->adj_start[v + 1]; e++)
			if (movable(pl, p->adj[e])) {
				ne++;
				w_total += p->adj_bytes[e];
			}
	}
	room_for_movable(pl, room_cpu, room_mem);
	m->part_host = calloc(pl->k + 1, sizeof(*m->part_host));
	if (!m->part_host)
		goto out_nomem;
	for (size_t h = 0; h < pl->k; h++) {
		if (p->hosts[h].memory_limited && mem_total)
			mem_binds = true;
		if (room_cpu[h] <= 0 ||
		    (p->hosts[h].memory_limited && mem_total && room_mem[h] < (1 << 20)))
			continue;
		m->part_host[m->nparts++] = (int)h;
	}
	if (m->nvtxs == 0 || m->nparts < 2) {
		free(index);
		return 1;
	}
	m->ncon = mem_binds ? 2 : 1;
	m->xadj = calloc(m->nvtxs + 1, sizeof(idx_t));
	m->adjncy = calloc(ne + 1, sizeof(idx_t));
	m->adjwgt = calloc(ne + 1, sizeof(idx_t));
	m->vwgt = calloc(m->nvtxs * m->ncon, sizeof(idx_t));
	m->part = calloc(m->nvtxs, sizeof(idx_t));
	m->tpwgts = calloc(m->nparts * m->ncon, sizeof(real_t));
	m->vertex = calloc(m->nvtxs, sizeof(uint32_t));
	if (!m->xadj || !m->adjncy || !m->adjwgt || !m->vwgt || !m->part || !m->tpwgts ||
	    !m->vertex)
		goto out_nomem;
	cpu_div = metis_divisor(cpu_total);
	mem_div = metis_divisor(mem_total);
	w_div = metis_divisor(w_total);
	ne = 0;
	for (size_t v = 0; v < pl->n; v++) {
		const struct place_vertex *pv = &p->vertices[v];
		idx_t i = index[v];

		if (i < 0)
			continue;
		m->vertex[i] = (uint32_t)v;
		/* all-zero weights would let METIS put everything in one part */
		m->vwgt[i * m->ncon] = cpu_total ? (idx_t)(pv->cpu_milli / cpu_div) : 1;
		if (m->ncon == 2)
			m->vwgt[i * 2 + 1] =
				(idx_t)(((pv->memory_bytes + (1 << 20) - 1) >> 20) / mem_div);
		for (size_t e = p->adj_start[v]; e < p->adj_start[v + 1]; e++) {
			uint64_t w;

			if (index[p->adj[e]] < 0)
				continue;
			w = (p->adj_bytes[e] + w_div / 2) / w_div;
			m->adjncy[ne] = index[p->adj[e]];
			m->adjwgt[ne++] = (idx_t)(w ? w : 1);
		}
		m->xadj[i + 1] = (idx_t)ne;
	}
	/* a host with no memory limit has room for all the memory there is */
	for (idx_t j = 0; j < m->nparts; j++) {
		int h = m->part_host[j];

		room_total[0] += (uint64_t)room_cpu[h];
		room_total[1] +=
			p->hosts[h].memory_limited ? (uint64_t)room_mem[h] >> 20 : mem_total;
	}
	for (idx_t c = 0; c < m->ncon; c++) {
		uint64_t demand = c ? mem_total : cpu_total;
		double sum = 0, slack;

		for (idx_t j = 0; j < m->nparts; j++) {
			int h = m->part_host[j];
			uint64_t room =
				c ? (p->hosts[h].memory_limited ? (uint64_t)room_mem[h] >> 20 :
								  mem_total) :
				    (uint64_t)room_cpu[h];

			m->tpwgts[j * m->ncon + c] = (real_t)((double)room / room_total[c]);
			sum += m->tpwgts[j * m->ncon + c];
		}
		/* METIS wants each constraint's targets to add up to 1 */
		m->tpwgts[(m->nparts - 1) * m->ncon + c] += (real_t)(1.0 - sum);
		/*
		 * Part j may weigh up to tpwgts * demand * ubvec = its host's room when ubvec is
		 * room / demand: METIS's balance then stands for the capacity, but only within
		 * METIS's own tolerance, and repair() may then have to break groups up. A share
		 * of the slack below 1 leaves METIS that much headroom.
		 */
		slack = demand ? (double)room_total[c] / demand - 1 : 0.5;
		m->ubvec[c] = (real_t)fmin(fmax(1 + slack * slack_share, 1.001), 10);
	}
	free(index);
	return 0;
out_nomem:
	free(index);
	metis_input_free(m);
	return -ENOMEM;
}

/*
 * A start from METIS: the k-way partition of the movable vertices, each part given to the
 * host that takes it with the fewest moves among those it fits (Hungarian method on parts x
 * hosts: cost = vertices that leave their host, plus, dominating, any excess over the room).
 */
static int start_metis(struct placer *pl, bool kway, double slack_share, int *start)
{
	const struct place_problem *p = pl->p;
	int64_t *room_cpu = calloc(pl->k, sizeof(*room_cpu));
	int64_t *room_mem = calloc(pl->k, sizeof(*room_mem));
	idx_t options[METIS_NOPTIONS], objval;
	double *cost = NULL, *load_cpu = NULL, *load_mem = NULL, mean_cpu, mean_mem;
	int *part_to = NULL, ret;
	struct metis_input m;

	place_current(p, start);
	if (!room_cpu || !room_mem) {
		ret = -ENOMEM;
		goto out_free_room;
	}
	ret = metis_input_build(pl, &m, room_cpu, room_mem, slack_share);
	if (ret < 0)
		goto out_free_room;
	if (ret == 1) { /* nothing to split: everything movable to the one host with room */
		ret = 0;
		for (size_t v = 0; v < pl->n && m.nparts == 1; v++)
			if (movable(pl, v))
				start[v] = m.part_host[0];
		free(m.part_host);
		goto out_free_room;
	}
	METIS_SetDefaultOptions(options);
	options[METIS_OPTION_SEED] = 1;
	options[METIS_OPTION_NUMBERING] = 0;
	options[METIS_OPTION_NCUTS] = 2;
	ret = kway ? METIS_PartGraphKway(&m.nvtxs, &m.ncon, m.xadj, m.adjncy, m.vwgt, NULL,
					 m.adjwgt, &m.nparts, m.tpwgts, m.ubvec, options, &objval,
					 m.part) :
		     METIS_PartGraphRecursive(&m.nvtxs, &m.ncon, m.xadj, m.adjncy, m.vwgt, NULL,
					      m.adjwgt, &m.nparts, m.tpwgts, m.ubvec, options,
					      &objval, m.part);
	if (ret != METIS_OK) {
		pr_debug("place: METIS_PartGraph%s returned %d\n", kway ? "Kway" : "Recursive",
			 ret);
		ret = -EIO;
		goto out_free_metis;
	}
	cost = calloc((size_t)m.nparts * m.nparts, sizeof(*cost));
	load_cpu = calloc(m.nparts, sizeof(*load_cpu));
	load_mem = calloc(m.nparts, sizeof(*load_mem));
	part_to = calloc(m.nparts, sizeof(*part_to));
	ret = -ENOMEM;
	if (!cost || !load_cpu || !load_mem || !part_to)
		goto out_free_metis;
	mean_cpu = mean_mem = 0;
	for (idx_t i = 0; i < m.nvtxs; i++) {
		const struct place_vertex *pv = &p->vertices[m.vertex[i]];
		idx_t part = m.part[i];

		load_cpu[part] += (double)pv->cpu_milli;
		load_mem[part] += (double)pv->memory_bytes;
		mean_cpu += (double)pv->cpu_milli / m.nvtxs;
		mean_mem += (double)pv->memory_bytes / m.nvtxs;
		/* a vertex of this part whose host is not the column's moves */
		for (idx_t j = 0; j < m.nparts; j++)
			if (pl->origin[m.vertex[i]] != m.part_host[j])
				cost[part * m.nparts + j] += 1;
	}
	for (idx_t i = 0; i < m.nparts; i++) {
		for (idx_t j = 0; j < m.nparts; j++) {
			const struct place_host *h = &p->hosts[m.part_host[j]];
			double over = fmax(0, load_cpu[i] - (double)room_cpu[m.part_host[j]]) /
				      fmax(mean_cpu, 1);

			if (h->memory_limited)
				over += fmax(0, load_mem[i] - (double)room_mem[m.part_host[j]]) /
					fmax(mean_mem, 1);
			/* an excess of one average vertex outweighs moving all of them */
			cost[i * m.nparts + j] += over * (m.nvtxs + 1);
		}
	}
	ret = assign_min_cost(cost, (size_t)m.nparts, part_to);
	if (ret)
		goto out_free_metis;
	for (idx_t i = 0; i < m.nvtxs; i++)
		start[m.vertex[i]] = m.part_host[part_to[m.part[i]]];
out_free_metis:
	free(cost);
	free(load_cpu);
	free(load_mem);
	free(part_to);
	metis_input_free(&m);
out_free_room:
	free(room_cpu);
	free(room_mem);
	return ret;
}

struct by_size {
	double size;
	uint32_t v;
};

static int cmp_by_size(const void *x, const void *y)
{
	const struct by_size *a = x, *b = y;

	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	return a->v < b->v ? -1 : a->v > b->v;
}

/*
 * A start that packs: the movable vertices, largest first, each to the host it fits on
 * where most of its already-placed peers' traffic is (then its own host, then the host with
 * most room). Finds a feasible placement where the others start far from one.
 */
static int start_packing(struct placer *pl, int *start)
{
	const struct place_problem *p = pl->p;
	int64_t *room_cpu = calloc(pl->k, sizeof(*room_cpu));
	int64_t *room_mem = calloc(pl->k, sizeof(*room_mem));
	struct by_size *order = calloc(pl->n + 1, sizeof(*order));
	double cap_cpu = 0, cap_mem = 0;
	size_t norder = 0;
	int ret = -ENOMEM;

	if (!room_cpu || !room_mem || !order)
		goto out_free;
	room_for_movable(pl, room_cpu, room_mem);
	for (size_t h = 0; h < pl->k; h++) {
		cap_cpu += (double)p->hosts[h].cpu_milli;
		if (p->hosts[h].memory_limited)
			cap_mem += (double)p->hosts[h].memory_bytes;
	}
	place_current(p, start);
	for (size_t v = 0; v < pl->n; v++) {
		const struct place_vertex *pv = &p->vertices[v];

		if (!movable(pl, v))
			continue;
		start[v] = -2; /* not yet placed */
		order[norder++] =
			(struct by_size){ (double)pv->cpu_milli / fmax(cap_cpu, 1) +
						  (double)pv->memory_bytes / fmax(cap_mem, 1),
					  (uint32_t)v };
	}
	qsort(order, norder, sizeof(*order), cmp_by_size);
	ret = -ENOSPC;
	for (size_t i = 0; i < norder; i++) {
		const struct place_vertex *pv = &p->vertices[order[i].v];
		size_t v = order[i].v;
		double best_room = 0;
		int best = -1;

		memset(pl->score, 0, pl->k * sizeof(*pl->score));
		for (size_t e = p->adj_start[v]; e < p->adj_start[v + 1]; e++)
			if (start[p->adj[e]] >= 0)
				pl->score[start[p->adj[e]]] += (int64_t)p->adj_bytes[e];
		for (size_t h = 0; h < pl->k; h++) {
			const struct place_host *ph = &p->hosts[h];
			double room;

			if (room_cpu[h] < pv->cpu_milli ||
			    (ph->memory_limited && room_mem[h] < (int64_t)pv->memory_bytes))
				continue;
			room = (double)(room_cpu[h] - pv->cpu_milli) / fmax(cap_cpu, 1);
			if (best < 0 || pl->score[h] > pl->score[best] ||
			    (pl->score[h] == pl->score[best] &&
			     ((int)h == pl->origin[v]) > (best == pl->origin[v])) ||
			    (pl->score[h] == pl->score[best] &&
			     ((int)h == pl->origin[v]) == (best == pl->origin[v]) &&
			     room > best_room)) {
				best = (int)h;
				best_room = room;
			}
		}
		if (best < 0)
			goto out_free;
		start[v] = best;
		room_cpu[best] -= pv->cpu_milli;
		room_mem[best] -= (int64_t)pv->memory_bytes;
	}
	ret = 0;
out_free:
	free(room_cpu);
	free(room_mem);
	free(order);
	return ret;
}

/* Reasons that no placement can exist, whatever the algorithm; 0 when there is none. */
static int prove_infeasible(const struct placer *pl, char *err, size_t errlen)
{
	const struct place_problem *p = pl->p;
	int64_t *room_cpu = calloc(pl->k, sizeof(*room_cpu));
	int64_t *room_mem = calloc(pl->k, sizeof(*room_mem));
	int64_t cpu_demand = 0, cpu_cap = 0;
	uint64_t mem_demand = 0, mem_cap = 0;
	bool mem_unlimited = false;
	int ret = -ENOSPC;

	if (!room_cpu || !room_mem) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	for (size_t v = 0; v < pl->n; v++) {
		if (pl->origin[v] == PLACE_OUTSIDE)
			continue;
		cpu_demand += p->vertices[v].cpu_milli;
		mem_demand += p->vertices[v].memory_bytes;
	}
	for (size_t h = 0; h < pl->k; h++) {
		cpu_cap += p->hosts[h].cpu_milli;
		mem_cap += p->hosts[h].memory_bytes;
		mem_unlimited |= !p->hosts[h].memory_limited;
	}
	if (cpu_demand > cpu_cap) {
		snprintf(err, errlen,
			 "no feasible placement: the workloads need %.3f cpu, the hosts have %.3f",
			 cpu_demand / 1000.0, cpu_cap / 1000.0);
		goto out_free;
	}
	if (!mem_unlimited && mem_demand > mem_cap) {
		snprintf(err, errlen,
			 "no feasible placement: the workloads need %llu bytes of memory, the "
			 "hosts have %llu",
			 (unsigned long long)mem_demand, (unsigned long long)mem_cap);
		goto out_free;
	}
	room_for_movable(pl, room_cpu, room_mem);
	for (size_t h = 0; h < pl->k; h++) {
		const struct place_host *ph = &p->hosts[h];

		if (room_cpu[h] < 0 || (ph->memory_limited && room_mem[h] < 0)) {
			snprintf(err, errlen,
				 "no feasible placement: the pinned vertices on %s need more %s "
				 "than "
				 "it has",
				 ph->name, room_cpu[h] < 0 ? "cpu" : "memory");
			goto out_free;
		}
	}
	for (size_t v = 0; v < pl->n; v++) {
		const struct place_vertex *pv = &p->vertices[v];
		bool somewhere = false;

		if (!movable(pl, v))
			continue;
		for (size_t h = 0; h < pl->k && !somewhere; h++)
			somewhere = room_cpu[h] >= pv->cpu_milli &&
				    (!p->hosts[h].memory_limited ||
				     room_mem[h] >= (int64_t)pv->memory_bytes);
		if (!somewhere) {
			snprintf(err, errlen,
				 "no feasible placement: no host has room for '%s' (cpu %.3f, "
				 "memory %llu bytes)",
				 pv->id, pv->cpu_milli / 1000.0,
				 (unsigned long long)pv->memory_bytes);
			goto out_free;
		}
	}
	ret = 0;
out_free:
	free(room_cpu);
	free(room_mem);
	return ret;
}

/*
 * The starts, in order of preference on a tie. METIS runs twice each way: with a balance
 * tolerance that is the capacity itself, and with half the slack, so that its imprecision
 * leaves less to repair (neither is better everywhere: bench/place.py's graphs).
 */
static const struct {
	enum place_strategy strategy;
	const char *name;
	double slack_share; /* METIS: the share of the room above the demand it may use */
} strategies[] = {
	{ PLACE_FROM_CURRENT, "current", 0 },
	{ PLACE_FROM_METIS_KWAY, "metis-kway", 1 },
	{ PLACE_FROM_METIS_KWAY, "metis-kway-tight", 0.5 },
	{ PLACE_FROM_METIS_RECURSIVE, "metis-recursive", 1 },
	{ PLACE_FROM_METIS_RECURSIVE, "metis-recursive-tight", 0.5 },
	{ PLACE_FROM_PACKING, "packing", 0 },
};

static int strategy_start(struct placer *pl, size_t i, int *start)
{
	switch (strategies[i].strategy) {
	case PLACE_FROM_CURRENT:
		memcpy(start, pl->origin, pl->n * sizeof(*start));
		return 0;
	case PLACE_FROM_METIS_KWAY:
		return start_metis(pl, true, strategies[i].slack_share, start);
	case PLACE_FROM_METIS_RECURSIVE:
		return start_metis(pl, false, strategies[i].slack_share, start);
	case PLACE_FROM_PACKING:
		return start_packing(pl, start);
	default:
		return -EINVAL;
	}
}

int place_solve(const struct place_problem *p, const struct place_params *params,
		struct place_plan *plan, char *err, size_t errlen)
{
	unsigned int which = params->strategies ? params->strategies : PLACE_FROM_ALL;
	uint64_t best_cut = 0;
	size_t best_moves = 0;
	struct placer pl;
	int *start, ret;
	char why[256];

	memset(plan, 0, sizeof(*plan));
	if (p->nvertices && p->nhosts > PLACE_MAX_CELLS / p->nvertices) {
		snprintf(err, errlen,
			 "%zu vertices x %zu hosts: more than plumb place handles (%u)",
			 p->nvertices, p->nhosts, PLACE_MAX_CELLS);
		return -E2BIG;
	}
	if (placer_init(&pl, p, params->max_moves)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	start = calloc(p->nvertices + 1, sizeof(*start));
	plan->host = calloc(p->nvertices + 1, sizeof(*plan->host));
	if (!start || !plan->host) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	plan->cut_before = place_cut(p, pl.origin);
	plan->feasible_before = !place_check_capacity(p, pl.origin, why, sizeof(why));
	ret = prove_infeasible(&pl, err, errlen);
	if (ret)
		goto out_free;
	for (size_t i = 0; i < ARRAY_SIZE(strategies); i++) {
		if (!(which & strategies[i].strategy))
			continue;
		ret = strategy_start(&pl, i, start);
		if (ret == -ENOMEM)
			goto out_nomem;
		if (ret) {
			pr_debug("place: %s: no start (%d)\n", strategies[i].name, ret);
			continue;
		}
		placer_reset(&pl, start);
		pr_debug("place: %s: start cut %llu, %ld moves\n", strategies[i].name,
			 (unsigned long long)pl.cut, pl.moves);
		revert_to_budget(&pl);
		if (repair(&pl)) {
			pr_debug("place: %s: no feasible repair\n", strategies[i].name);
			continue;
		}
		refine(&pl);
		pr_info("place: %s: cut %llu, %ld moves\n", strategies[i].name,
			(unsigned long long)pl.cut, pl.moves);
		if (!plan->strategy || pl.cut < best_cut ||
		    (pl.cut == best_cut && (size_t)pl.moves < best_moves)) {
			memcpy(plan->host, pl.host, p->nvertices * sizeof(*plan->host));
			best_cut = pl.cut;
			best_moves = (size_t)pl.moves;
			plan->strategy = strategies[i].name;
		}
	}
	if (!plan->strategy) {
		ret = -ENOSPC;
		if (params->max_moves >= 0)
			snprintf(err, errlen,
				 "no feasible placement found within %ld moves (the current one: "
				 "%s)",
				 params->max_moves, why);
		else
			snprintf(err, errlen,
				 "no feasible placement found (the current one: %s; packing, METIS "
				 "and repair found none)",
				 why);
		goto out_free;
	}
	plan->cut_after = best_cut;
	plan->moves = best_moves;
	ret = 0;
	goto out_free;
out_nomem:
	snprintf(err, errlen, "out of memory");
out_free:
	free(start);
	placer_free(&pl);
	if (ret)
		place_plan_free(plan);
	return ret;
}

void place_plan_free(struct place_plan *plan)
{
	free(plan->host);
	memset(plan, 0, sizeof(*plan));
}
