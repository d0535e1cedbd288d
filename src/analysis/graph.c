// SPDX-License-Identifier: GPL-2.0
/*
 * plumb graph's model: ends read from agents (docs/graph.md §1) or Prometheus (§2), joined
 * into edges (§3), projected (§4) and written as a table, JSON or Graphviz dot.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <search.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "analysis/graph.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define JSON_DEPTH    32 /* both documents nest 5 deep */
#define MAX_PROTOCOLS 16
#define NO_PROC	      UINT32_MAX /* an end's peer_pid 0 */
#define EXTERNAL      0x80000000u /* a vertex reference's flag: an index into the externals */

const char *const graph_projection_names[3] = { "process", "type", "host" };
const char *const graph_format_names[4] = { "table", "json", "dot", "svg" };

const struct graph_prom_query_def graph_prom_queries[GRAPH_PROM_QUERIES] = {
	[GRAPH_PROM_BYTES_NOW] = { "plumb_flow_bytes_total", false },
	[GRAPH_PROM_BYTES_THEN] = { "plumb_flow_bytes_total", true },
	[GRAPH_PROM_CONNS_NOW] = { "plumb_flow_connections_total", false },
	[GRAPH_PROM_CONNS_THEN] = { "plumb_flow_connections_total", true },
	[GRAPH_PROM_HOST_INFO] = { "plumb_host_info", false },
	[GRAPH_PROM_HOST_ADDRESS] = { "plumb_host_address", false },
};

/*
 * An address as inet_pton reads it, IPv4 stored IPv4-mapped so that "10.0.0.1" and
 * "::ffff:10.0.0.1" compare equal; family 0 is unknown (an empty local_addr, and every
 * Prometheus end's). A unix socket's address ("unix:/run/x.sock", "unix:@name", "unix:") is
 * family ADDR_UNIX, its string interned in graph.unix_addrs and a[0..3] its index. memcmp
 * orders it: no padding.
 */
struct graph_addr {
	uint8_t family; /* 0, 4, 6 or ADDR_UNIX */
	uint8_t a[16];
};

#define ADDR_UNIX     'u'
#define UNIX_ADDR_MAX 512 /* "unix:" and a path: 108 bytes at most in the kernel */

enum end_role {
	ROLE_CLIENT = 0,
	ROLE_SERVER,
};

struct graph_host {
	char *name;
	struct graph_addr *addrs; /* sorted, unique */
	size_t naddrs;
};

struct graph_process {
	uint32_t host;
	uint32_t pid;
	bool by_cgroup; /* Prometheus: (host, cgroup, comm) */
	char *comm, *exe, *cgroup, *workload;
};

struct graph_end {
	uint32_t proc;
	uint32_t peer_proc; /* NO_PROC: peer_pid 0 */
	uint8_t role;
	uint8_t protocol; /* index into graph.protocols */
	uint16_t port;
	struct graph_addr local, peer;
	uint64_t tx, rx, conns;
};

enum source_kind {
	SOURCE_NONE = 0,
	SOURCE_AGENTS,
	SOURCE_PROMETHEUS,
};

struct graph {
	enum source_kind kind;
	unsigned int window_s;
	struct graph_host *hosts;
	size_t nhosts, hosts_cap;
	struct graph_process *procs;
	size_t nprocs, procs_cap;
	struct graph_end *ends;
	size_t nends, ends_cap;
	char protocols[MAX_PROTOCOLS][8];
	size_t nprotocols;
	char **unix_addrs; /* interned; kept when an add is rolled back (nothing refers to them) */
	size_t nunix, unix_cap;
	void *unix_tree; /* of struct unix_node */
};

/* ---- small helpers ---- */

struct parse_ctx {
	const char *source;
	char *err;
	size_t errlen;
};

/* "source: message" in err, one line whatever the names in it hold; returns ret. */
static int __attribute__((format(printf, 3, 4)))
fail(struct parse_ctx *c, int ret, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!c->errlen)
		return ret;
	snprintf(c->err, c->errlen, "%s: %s", c->source, msg);
	for (char *p = c->err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return ret;
}

static int grow(void **p, size_t *cap, size_t need, size_t size, size_t max)
{
	size_t n;
	void *q;

	if (need <= *cap)
		return 0;
	if (need > max)
		return -E2BIG;
	n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	if (n > max)
		n = max;
	q = reallocarray(*p, n, size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* An IP address (a host's own addresses are no unix sockets). */
static int addr_parse_ip(const char *s, struct graph_addr *out)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct in_addr v4;

	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, s, &v4) == 1) {
		out->family = 4;
		memcpy(out->a, mapped, sizeof(mapped));
		memcpy(out->a + 12, &v4, 4);
		return 0;
	}
	if (inet_pton(AF_INET6, s, out->a) == 1) {
		out->family = memcmp(out->a, mapped, sizeof(mapped)) ? 6 : 4;
		return 0;
	}
	return -EINVAL;
}

struct unix_node {
	const char *addr; /* first: strcmp-able through the node */
	uint32_t index;
};

static int unix_node_cmp(const void *a, const void *b)
{
	return strcmp(((const struct unix_node *)a)->addr, ((const struct unix_node *)b)->addr);
}

/* An end's address: an IP address or a unix socket's; -ENOMEM when interning failed. */
static int addr_parse(struct graph *g, const char *s, struct graph_addr *out)
{
	struct unix_node key = { s, 0 }, *node, **found;
	uint32_t index;
	int ret;

	if (strncmp(s, "unix:", 5))
		return addr_parse_ip(s, out);
	if (strlen(s) >= UNIX_ADDR_MAX)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->family = ADDR_UNIX;
	found = tfind(&key, &g->unix_tree, unix_node_cmp);
	if (found) {
		memcpy(out->a, &(*found)->index, sizeof(index));
		return 0;
	}
	ret = grow((void **)&g->unix_addrs, &g->unix_cap, g->nunix + 1, sizeof(*g->unix_addrs),
		   UINT32_MAX);
	if (ret)
		return -ENOMEM;
	node = malloc(sizeof(*node));
	g->unix_addrs[g->nunix] = strdup(s);
	if (!node || !g->unix_addrs[g->nunix]) {
		free(node);
		free(g->unix_addrs[g->nunix]);
		return -ENOMEM;
	}
	index = (uint32_t)g->nunix;
	*node = (struct unix_node){ g->unix_addrs[g->nunix], index };
	if (!tsearch(node, &g->unix_tree, unix_node_cmp)) {
		free(node);
		free(g->unix_addrs[g->nunix]);
		return -ENOMEM;
	}
	g->nunix++;
	memcpy(out->a, &index, sizeof(index));
	return 0;
}

/*
 * An end's peer: as addr_parse(), but for UDP "" and the unspecified addresses (0.0.0.0, ::)
 * are an unknown peer (family 0): a datagram read without asking its source (recv() on an
 * unconnected socket), which the agent writes "" in /api/v1/graph and 0.0.0.0 or :: in its
 * metrics (docs/metrics.md), and Prometheus keeps no empty label of. Any other protocol's
 * peer is always known: -EINVAL.
 */
static int peer_parse(struct graph *g, const char *s, const char *protocol, struct graph_addr *out)
{
	static const uint8_t zero[16];
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (*s)
		ret = addr_parse(g, s, out);
	if (!ret && out->family == 4 && !memcmp(out->a + 12, zero, 4))
		memset(out, 0, sizeof(*out));
	else if (!ret && out->family == 6 && !memcmp(out->a, zero, 16))
		memset(out, 0, sizeof(*out));
	if (!ret && !out->family && strcmp(protocol, "udp"))
		ret = -EINVAL;
	return ret;
}

/* As the agent prints it: inet_ntop, IPv4-mapped addresses as IPv4; a unix one as it was. */
static const char *addr_text(const struct graph *g, const struct graph_addr *x, char *buf,
			     size_t len)
{
	uint32_t index;

	if (x->family == ADDR_UNIX) {
		memcpy(&index, x->a, sizeof(index));
		return g->unix_addrs[index];
	}
	if (x->family == 4)
		inet_ntop(AF_INET, x->a + 12, buf, len);
	else if (x->family == 6)
		inet_ntop(AF_INET6, x->a, buf, len);
	else
		snprintf(buf, len, "%s", "");
	return buf;
}

static bool addr_is_loopback(const struct graph_addr *x)
{
	static const uint8_t v6_loopback[16] = { [15] = 1 };

	if (x->family == 4)
		return x->a[12] == 127;
	return x->family == 6 && !memcmp(x->a, v6_loopback, 16);
}

static int addr_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct graph_addr));
}

/* Sorts and drops duplicates; returns the new count. */
static size_t addr_sort_unique(struct graph_addr *v, size_t n)
{
	size_t k = 0;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), addr_cmp);
	for (size_t i = 1; i < n; i++)
		if (addr_cmp(&v[k], &v[i]))
			v[++k] = v[i];
	return k + 1;
}

static int protocol_index(struct graph *g, const char *name)
{
	size_t len = strlen(name);

	if (!len || len >= sizeof(g->protocols[0]) ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789") != len)
		return -EINVAL;
	for (size_t i = 0; i < g->nprotocols; i++)
		if (!strcmp(g->protocols[i], name))
			return (int)i;
	if (g->nprotocols == MAX_PROTOCOLS)
		return -E2BIG;
	memcpy(g->protocols[g->nprotocols], name, len + 1);
	return (int)g->nprotocols++;
}

/* ---- the graph's tables ---- */

struct graph *graph_new(void)
{
	return calloc(1, sizeof(struct graph));
}

static void process_free(struct graph_process *p)
{
	free(p->comm);
	free(p->exe);
	free(p->cgroup);
	free(p->workload);
}

/* What graph_rollback() returns the graph to when an add fails part-way. */
struct graph_mark {
	size_t nhosts, nprocs, nends, nprotocols;
};

static struct graph_mark graph_mark(const struct graph *g)
{
	return (struct graph_mark){ g->nhosts, g->nprocs, g->nends, g->nprotocols };
}

static void graph_rollback(struct graph *g, const struct graph_mark *m)
{
	for (size_t i = m->nhosts; i < g->nhosts; i++) {
		free(g->hosts[i].name);
		free(g->hosts[i].addrs);
	}
	for (size_t i = m->nprocs; i < g->nprocs; i++)
		process_free(&g->procs[i]);
	g->nhosts = m->nhosts;
	g->nprocs = m->nprocs;
	g->nends = m->nends;
	g->nprotocols = m->nprotocols;
}

void graph_free(struct graph *g)
{
	if (!g)
		return;
	graph_rollback(g, &(struct graph_mark){ 0 });
	tdestroy(g->unix_tree, free);
	for (size_t i = 0; i < g->nunix; i++)
		free(g->unix_addrs[i]);
	free(g->unix_addrs);
	free(g->hosts);
	free(g->procs);
	free(g->ends);
	free(g);
}

static int host_add(struct graph *g, struct parse_ctx *c, const char *name)
{
	struct graph_host *h;

	if (g->nhosts == GRAPH_MAX_HOSTS || grow((void **)&g->hosts, &g->hosts_cap, g->nhosts + 1,
						 sizeof(*g->hosts), GRAPH_MAX_HOSTS))
		return fail(c, g->nhosts == GRAPH_MAX_HOSTS ? -E2BIG : -ENOMEM,
			    "more than %d hosts, or out of memory", GRAPH_MAX_HOSTS);
	h = &g->hosts[g->nhosts];
	memset(h, 0, sizeof(*h));
	h->name = strdup(name);
	if (!h->name)
		return fail(c, -ENOMEM, "out of memory");
	g->nhosts++;
	return 0;
}

static int host_add_addr(struct graph_host *h, size_t *cap, const struct graph_addr *x,
			 struct parse_ctx *c)
{
	int ret = grow((void **)&h->addrs, cap, h->naddrs + 1, sizeof(*h->addrs),
		       GRAPH_MAX_ADDRESSES);

	if (ret)
		return fail(c, ret,
			    ret == -E2BIG ? "host \"%s\" has more than %d addresses" :
					    "out of memory (host \"%s\", %d addresses)",
			    h->name, GRAPH_MAX_ADDRESSES);
	h->addrs[h->naddrs++] = *x;
	return 0;
}

static int process_add(struct graph *g, struct parse_ctx *c, uint32_t host, uint32_t pid,
		       bool by_cgroup, const char *comm, const char *exe, const char *cgroup,
		       const char *workload)
{
	struct graph_process *p;
	int ret;

	ret = grow((void **)&g->procs, &g->procs_cap, g->nprocs + 1, sizeof(*g->procs),
		   GRAPH_MAX_PROCESSES);
	if (ret)
		return fail(c, ret,
			    ret == -E2BIG ? "more than %d processes in all" :
					    "out of memory (%d processes)",
			    GRAPH_MAX_PROCESSES);
	p = &g->procs[g->nprocs];
	*p = (struct graph_process){ .host = host, .pid = pid, .by_cgroup = by_cgroup };
	p->comm = strdup(comm);
	p->exe = strdup(exe);
	p->cgroup = strdup(cgroup);
	p->workload = strdup(workload);
	if (!p->comm || !p->exe || !p->cgroup || !p->workload) {
		process_free(p);
		return fail(c, -ENOMEM, "out of memory");
	}
	g->nprocs++;
	return 0;
}

static int end_reserve(struct graph *g, struct parse_ctx *c, size_t more)
{
	int ret;

	if (more > GRAPH_MAX_ENDS - g->nends)
		return fail(c, -E2BIG, "more than %d ends in all sources", GRAPH_MAX_ENDS);
	ret = grow((void **)&g->ends, &g->ends_cap, g->nends + more, sizeof(*g->ends),
		   GRAPH_MAX_ENDS);
	return ret ? fail(c, ret, "out of memory (%zu ends)", g->nends + more) : 0;
}

/* ---- JSON input ---- */

static struct json_object *json_parse(struct parse_ctx *c, const char *text, size_t len, int *ret)
{
	struct json_tokener *tok;
	struct json_object *root;
	enum json_tokener_error jerr;
	size_t end;

	*ret = -EINVAL;
	if (len > GRAPH_MAX_BODY) {
		*ret = fail(c, -E2BIG, "document over the limit of %u MiB", GRAPH_MAX_BODY >> 20);
		return NULL;
	}
	tok = json_tokener_new_ex(JSON_DEPTH);
	if (!tok) {
		*ret = fail(c, -ENOMEM, "out of memory");
		return NULL;
	}
	root = json_tokener_parse_ex(tok, text, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (!root && jerr == json_tokener_continue && len) {
		/* a number at the end may go on: a blank ends it, and only it */
		root = json_tokener_parse_ex(tok, " ", 1);
		jerr = json_tokener_get_error(tok);
		end = len;
	}
	json_tokener_free(tok);
	if (!root || jerr != json_tokener_success) {
		json_object_put(root);
		if (jerr == json_tokener_continue || jerr == json_tokener_success)
			fail(c, -EINVAL,
			     len ? "not JSON: the document ends early" :
				   "not JSON: the document is empty");
		else
			fail(c, -EINVAL, "not JSON: %s at byte %zu", json_tokener_error_desc(jerr),
			     end);
		return NULL;
	}
	while (end < len && strchr(" \t\r\n", text[end]) && text[end])
		end++;
	if (end < len) {
		json_object_put(root);
		fail(c, -EINVAL, "not JSON: trailing data at byte %zu", end);
		return NULL;
	}
	*ret = 0;
	return root;
}

/* o's member key; NULL when absent or null */
static struct json_object *member(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
		return NULL;
	return v;
}

/* A string member; def when absent (NULL: required). */
static int get_string(struct parse_ctx *c, struct json_object *o, const char *where,
		      const char *key, const char *def, const char **out)
{
	struct json_object *v = member(o, key);

	if (!v) {
		if (!def)
			return fail(c, -EINVAL, "%s has no \"%s\"", where, key);
		*out = def;
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return fail(c, -EINVAL, "%s.%s is not a string", where, key);
	*out = json_object_get_string(v);
	return 0;
}

/* An integer member in 0..max; def when absent unless required. */
static int get_uint(struct parse_ctx *c, struct json_object *o, const char *where, const char *key,
		    bool required, uint64_t def, uint64_t max, uint64_t *out)
{
	struct json_object *v = member(o, key);

	if (!v) {
		if (required)
			return fail(c, -EINVAL, "%s has no \"%s\"", where, key);
		*out = def;
		return 0;
	}
	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
	    json_object_get_uint64(v) > max)
		return fail(c, -EINVAL, "%s.%s is not an integer in 0..%llu", where, key,
			    (unsigned long long)max);
	*out = json_object_get_uint64(v);
	return 0;
}

static int get_array(struct parse_ctx *c, struct json_object *o, const char *key,
		     struct json_object **out)
{
	*out = member(o, key);
	if (!*out)
		return fail(c, -EINVAL, "the document has no \"%s\"", key);
	if (!json_object_is_type(*out, json_type_array))
		return fail(c, -EINVAL, "\"%s\" is not an array", key);
	return 0;
}

/* ---- agents: GET /api/v1/graph ---- */

struct pid_map {
	uint32_t pid;
	uint32_t proc;
};

static int pid_map_cmp(const void *a, const void *b)
{
	const struct pid_map *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static const struct pid_map *pid_find(const struct pid_map *m, size_t n, uint32_t pid)
{
	return bsearch(&(struct pid_map){ .pid = pid }, m, n, sizeof(*m), pid_map_cmp);
}

struct agent_parse {
	struct graph *g;
	struct parse_ctx *c;
	uint32_t host;
	struct pid_map *pids;
	size_t npids, pids_cap;
};

static int agent_host(struct agent_parse *a, struct json_object *root)
{
	struct parse_ctx *c = a->c;
	struct json_object *addrs;
	struct graph_host *h;
	const char *name;
	uint64_t version;
	size_t cap = 0, n;
	int ret;

	if (!json_object_is_type(root, json_type_object))
		return fail(c, -EINVAL, "the document is not a JSON object");
	ret = get_uint(c, root, "the document", "version", true, 0, UINT32_MAX, &version);
	if (ret)
		return ret;
	if (version != 1)
		return fail(c, -EINVAL, "version %llu is not supported (this plumb reads 1)",
			    (unsigned long long)version);
	ret = get_string(c, root, "the document", "host", NULL, &name);
	if (ret)
		return ret;
	if (!*name)
		return fail(c, -EINVAL, "\"host\" is empty");
	for (size_t i = 0; i < a->g->nhosts; i++)
		if (!strcmp(a->g->hosts[i].name, name))
			return fail(c, -EINVAL, "host \"%s\" is already in another source", name);
	ret = get_array(c, root, "addresses", &addrs);
	if (ret)
		return ret;
	n = json_object_array_length(addrs);
	if (n > GRAPH_MAX_ADDRESSES)
		return fail(c, -E2BIG, "more than %d addresses", GRAPH_MAX_ADDRESSES);
	ret = host_add(a->g, c, name);
	if (ret)
		return ret;
	a->host = (uint32_t)(a->g->nhosts - 1);
	h = &a->g->hosts[a->host];
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(addrs, i);
		struct graph_addr x;

		if (!json_object_is_type(v, json_type_string) ||
		    addr_parse_ip(json_object_get_string(v), &x))
			return fail(c, -EINVAL, "addresses[%zu] is not an IP address", i);
		ret = host_add_addr(h, &cap, &x, c);
		if (ret)
			return ret;
	}
	h->naddrs = addr_sort_unique(h->addrs, h->naddrs);
	return 0;
}

static int agent_pid_add(struct agent_parse *a, uint32_t pid)
{
	int ret = grow((void **)&a->pids, &a->pids_cap, a->npids + 1, sizeof(*a->pids),
		       (size_t)GRAPH_MAX_PROCESSES + GRAPH_MAX_ENDS * 2);

	if (ret)
		return fail(a->c, ret, "out of memory");
	a->pids[a->npids++] = (struct pid_map){ pid, (uint32_t)(a->g->nprocs - 1) };
	return 0;
}

static int agent_processes(struct agent_parse *a, struct json_object *root)
{
	struct parse_ctx *c = a->c;
	struct json_object *procs;
	size_t n;
	int ret;

	ret = get_array(c, root, "processes", &procs);
	if (ret)
		return ret;
	n = json_object_array_length(procs);
	if (n > GRAPH_MAX_PROCESSES - a->g->nprocs)
		return fail(c, -E2BIG, "more than %d processes in all sources",
			    GRAPH_MAX_PROCESSES);
	for (size_t i = 0; i < n; i++) {
		struct json_object *p = json_object_array_get_idx(procs, i);
		const char *comm, *exe, *cgroup, *workload;
		char where[40];
		uint64_t pid;

		snprintf(where, sizeof(where), "processes[%zu]", i);
		if (!json_object_is_type(p, json_type_object))
			return fail(c, -EINVAL, "%s is not an object", where);
		ret = get_uint(c, p, where, "pid", true, 0, INT32_MAX, &pid);
		ret = ret ?: get_string(c, p, where, "comm", "", &comm);
		ret = ret ?: get_string(c, p, where, "exe", "", &exe);
		ret = ret ?: get_string(c, p, where, "cgroup", "", &cgroup);
		ret = ret ?: get_string(c, p, where, "workload", "", &workload);
		if (ret)
			return ret;
		ret = process_add(a->g, c, a->host, (uint32_t)pid, false, comm, exe, cgroup,
				  workload);
		ret = ret ?: agent_pid_add(a, (uint32_t)pid);
		if (ret)
			return ret;
	}
	qsort(a->pids, a->npids, sizeof(*a->pids), pid_map_cmp);
	for (size_t i = 1; i < a->npids; i++)
		if (a->pids[i].pid == a->pids[i - 1].pid)
			return fail(c, -EINVAL, "processes: pid %u is listed twice",
				    a->pids[i].pid);
	return 0;
}

static int agent_end(struct agent_parse *a, struct json_object *e, size_t i, struct graph_end *out)
{
	struct parse_ctx *c = a->c;
	const char *role, *protocol, *local, *peer;
	uint64_t pid, port, tx, rx, conns, peer_pid;
	char where[40];
	int ret, proto;

	snprintf(where, sizeof(where), "ends[%zu]", i);
	if (!json_object_is_type(e, json_type_object))
		return fail(c, -EINVAL, "%s is not an object", where);
	ret = get_uint(c, e, where, "pid", true, 0, INT32_MAX, &pid);
	ret = ret ?: get_string(c, e, where, "role", NULL, &role);
	ret = ret ?: get_string(c, e, where, "protocol", "tcp", &protocol);
	ret = ret ?: get_string(c, e, where, "local_addr", "", &local);
	ret = ret ?: get_string(c, e, where, "peer_addr", NULL, &peer);
	ret = ret ?: get_uint(c, e, where, "port", true, 0, UINT16_MAX, &port);
	ret = ret ?: get_uint(c, e, where, "tx_bytes", true, 0, UINT64_MAX, &tx);
	ret = ret ?: get_uint(c, e, where, "rx_bytes", true, 0, UINT64_MAX, &rx);
	ret = ret ?: get_uint(c, e, where, "connections", true, 0, UINT64_MAX, &conns);
	ret = ret ?: get_uint(c, e, where, "peer_pid", false, 0, INT32_MAX, &peer_pid);
	if (ret)
		return ret;
	memset(out, 0, sizeof(*out));
	if (!strcmp(role, "client"))
		out->role = ROLE_CLIENT;
	else if (!strcmp(role, "server"))
		out->role = ROLE_SERVER;
	else
		return fail(c, -EINVAL, "%s.role is \"%s\", not client or server", where, role);
	proto = protocol_index(a->g, protocol);
	if (proto < 0)
		return fail(c, -EINVAL, "%s.protocol \"%s\": %s", where, protocol,
			    proto == -E2BIG ? "too many protocols" : "not a protocol name");
	ret = *local ? addr_parse(a->g, local, &out->local) : 0;
	if (ret)
		return fail(c, ret, "%s.local_addr \"%.80s\" is not an IP or unix: address", where,
			    local);
	ret = peer_parse(a->g, peer, protocol, &out->peer);
	if (ret)
		return fail(c, ret, "%s.peer_addr \"%.80s\" is not an IP or unix: address", where,
			    peer);
	out->protocol = (uint8_t)proto;
	out->port = (uint16_t)port;
	out->tx = tx;
	out->rx = rx;
	out->conns = conns;
	/* pids for now; agent_resolve() turns them into process indexes */
	out->proc = (uint32_t)pid;
	out->peer_proc = peer_pid ? (uint32_t)peer_pid : NO_PROC;
	return 0;
}

/*
 * A pid an end names that "processes" does not list (it should not happen: §1) still gets a
 * vertex, with comm "?" and the other strings empty.
 */
static int agent_placeholder(struct agent_parse *a, uint32_t pid)
{
	int ret;

	if (pid_find(a->pids, a->npids, pid))
		return 0;
	ret = process_add(a->g, a->c, a->host, pid, false, "?", "", "", "");
	ret = ret ?: agent_pid_add(a, pid);
	if (!ret)
		qsort(a->pids, a->npids, sizeof(*a->pids), pid_map_cmp);
	return ret;
}

static int agent_ends(struct agent_parse *a, struct json_object *root)
{
	struct graph *g = a->g;
	struct json_object *ends;
	size_t n, first = g->nends;
	int ret;

	ret = get_array(a->c, root, "ends", &ends);
	if (ret)
		return ret;
	n = json_object_array_length(ends);
	ret = end_reserve(g, a->c, n);
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++) {
		ret = agent_end(a, json_object_array_get_idx(ends, i), i, &g->ends[g->nends]);
		if (ret)
			return ret;
		g->nends++;
	}
	for (size_t i = first; i < g->nends; i++) {
		ret = agent_placeholder(a, g->ends[i].proc);
		if (!ret && g->ends[i].peer_proc != NO_PROC)
			ret = agent_placeholder(a, g->ends[i].peer_proc);
		if (ret)
			return ret;
	}
	for (size_t i = first; i < g->nends; i++) {
		struct graph_end *e = &g->ends[i];

		e->proc = pid_find(a->pids, a->npids, e->proc)->proc;
		if (e->peer_proc != NO_PROC)
			e->peer_proc = pid_find(a->pids, a->npids, e->peer_proc)->proc;
	}
	return 0;
}

int graph_add_agent(struct graph *g, const char *text, size_t len, const char *source, char *err,
		    size_t errlen)
{
	struct parse_ctx c = { source, err, errlen };
	struct agent_parse a = { .g = g, .c = &c };
	struct graph_mark mark = graph_mark(g);
	struct json_object *root;
	int ret;

	if (g->kind == SOURCE_PROMETHEUS)
		return fail(&c, -EINVAL, "agents and Prometheus cannot be merged");
	root = json_parse(&c, text, len, &ret);
	if (!root)
		return ret;
	ret = agent_host(&a, root);
	ret = ret ?: agent_processes(&a, root);
	ret = ret ?: agent_ends(&a, root);
	json_object_put(root);
	free(a.pids);
	if (ret) {
		graph_rollback(g, &mark);
		return ret;
	}
	g->kind = SOURCE_AGENTS;
	return 0;
}

/* ---- Prometheus: /api/v1/query results ---- */

enum prom_label {
	PL_INSTANCE = 0,
	PL_CGROUP,
	PL_WORKLOAD,
	PL_COMM,
	PL_PEER_ADDR,
	PL_PEER_PORT,
	PL_ROLE,
	PL_DIRECTION,
	PL_PROTOCOL,
	PL_HOST,
	PL_ADDR,
	PL_COUNT,
};

static const char *const prom_label_names[PL_COUNT] = {
	"instance", "cgroup",	 "workload", "comm", "peer_addr", "peer_port",
	"role",	    "direction", "protocol", "host", "addr",
};

/* One series of a result: its label set (less __name__) as a key, the labels plumb reads. */
struct prom_sample {
	char *key;
	char *label[PL_COUNT]; /* NULL: absent */
	uint64_t value;
};

struct prom_result {
	struct prom_sample *s;
	size_t n;
};

static void prom_result_free(struct prom_result *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->s[i].key);
		for (int l = 0; l < PL_COUNT; l++)
			free(r->s[i].label[l]);
	}
	free(r->s);
	r->s = NULL;
	r->n = 0;
}

static int sample_key_cmp(const void *a, const void *b)
{
	return strcmp(((const struct prom_sample *)a)->key, ((const struct prom_sample *)b)->key);
}

struct label_pair {
	const char *name, *value;
};

static int label_pair_cmp(const void *a, const void *b)
{
	return strcmp(((const struct label_pair *)a)->name, ((const struct label_pair *)b)->name);
}

/* The label set in one string, names sorted, each value length-prefixed (any byte may be in
 * a value). */
static char *label_key(struct json_object *metric)
{
	struct label_pair *pairs;
	size_t n = 0, len = 1, k = 0;
	char *key;

	pairs = calloc((size_t)json_object_object_length(metric) + 1, sizeof(*pairs));
	if (!pairs)
		return NULL;
	json_object_object_foreach(metric, name, v)
	{
		if (!strcmp(name, "__name__"))
			continue;
		pairs[n].name = name;
		pairs[n].value = json_object_get_string(v);
		len += strlen(name) + strlen(pairs[n].value) + 24;
		n++;
	}
	qsort(pairs, n, sizeof(*pairs), label_pair_cmp);
	key = malloc(len);
	if (key) {
		key[0] = '\0';
		for (size_t i = 0; i < n; i++)
			k += snprintf(key + k, len - k, "%s=%zu:%s,", pairs[i].name,
				      strlen(pairs[i].value), pairs[i].value);
	}
	free(pairs);
	return key;
}

/* A sample value: Prometheus prints floats; a counter is an integer in 0..2^64-1. */
static int sample_value(const char *s, uint64_t *out)
{
	char *end;
	double d;

	if (*s && strspn(s, "0123456789") == strlen(s)) {
		errno = 0;
		*out = strtoull(s, &end, 10);
		return errno ? -ERANGE : 0;
	}
	d = strtod(s, &end);
	if (end == s || *end || !isfinite(d) || d < 0 || d >= 18446744073709551616.0)
		return -EINVAL;
	*out = (uint64_t)(d + 0.5);
	return 0;
}

static int prom_sample_parse(struct parse_ctx *c, struct json_object *item, const char *where,
			     bool labels, struct prom_sample *s)
{
	struct json_object *metric, *value, *v;

	if (!json_object_is_type(item, json_type_object))
		return fail(c, -EINVAL, "%s is not an object", where);
	metric = member(item, "metric");
	value = member(item, "value");
	if (!metric || !json_object_is_type(metric, json_type_object))
		return fail(c, -EINVAL, "%s has no \"metric\" object", where);
	if (!value || !json_object_is_type(value, json_type_array) ||
	    json_object_array_length(value) != 2)
		return fail(c, -EINVAL, "%s.value is not [time, \"value\"]", where);
	v = json_object_array_get_idx(value, 1);
	if (!json_object_is_type(v, json_type_string) ||
	    sample_value(json_object_get_string(v), &s->value))
		return fail(c, -EINVAL, "%s.value is not a counter value (an integer >= 0)", where);
	json_object_object_foreach(metric, name, lv)
	{
		(void)name;
		if (!json_object_is_type(lv, json_type_string))
			return fail(c, -EINVAL, "%s.metric.%s is not a string", where, name);
	}
	s->key = label_key(metric);
	if (!s->key)
		return fail(c, -ENOMEM, "out of memory");
	if (!labels)
		return 0;
	for (int l = 0; l < PL_COUNT; l++) {
		v = member(metric, prom_label_names[l]);
		if (!v)
			continue;
		s->label[l] = strdup(json_object_get_string(v));
		if (!s->label[l])
			return fail(c, -ENOMEM, "out of memory");
	}
	return 0;
}

/* One /api/v1/query body into r; labels: keep the labels plumb reads, not just the key. */
static int prom_result_parse(struct parse_ctx *c, const char *body, size_t len,
			     enum graph_prom_query q, bool labels, struct prom_result *r)
{
	const struct graph_prom_query_def *d = &graph_prom_queries[q];
	struct json_object *root, *data, *v, *result;
	const char *status, *type;
	size_t n;
	int ret;

	if (!body)
		return fail(c, -EINVAL, "no result for %s", d->metric);
	root = json_parse(c, body, len, &ret);
	if (!root)
		return ret;
	if (!json_object_is_type(root, json_type_object)) {
		ret = fail(c, -EINVAL, "%s: the response is not a JSON object", d->metric);
		goto out_put;
	}
	v = member(root, "status");
	status = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
	if (strcmp(status, "success")) {
		v = member(root, "error");
		ret = fail(c, -EINVAL, "%s: query failed: %s", d->metric,
			   v && json_object_is_type(v, json_type_string) ?
				   json_object_get_string(v) :
				   "no \"status\": \"success\"");
		goto out_put;
	}
	data = member(root, "data");
	v = data ? member(data, "resultType") : NULL;
	type = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
	result = data ? member(data, "result") : NULL;
	if (strcmp(type, "vector") || !result || !json_object_is_type(result, json_type_array)) {
		ret = fail(c, -EINVAL, "%s: data is not a vector result", d->metric);
		goto out_put;
	}
	n = json_object_array_length(result);
	if (n > GRAPH_MAX_SERIES) {
		ret = fail(c, -E2BIG, "%s: more than %d series", d->metric, GRAPH_MAX_SERIES);
		goto out_put;
	}
	r->s = calloc(n ? n : 1, sizeof(*r->s));
	if (!r->s) {
		ret = fail(c, -ENOMEM, "out of memory (%zu series)", n);
		goto out_put;
	}
	for (size_t i = 0; i < n; i++) {
		char where[96];

		snprintf(where, sizeof(where), "%s%s: result[%zu]", d->metric,
			 d->then ? " at t - window" : "", i);
		r->n++;
		ret = prom_sample_parse(c, json_object_array_get_idx(result, i), where, labels,
					&r->s[i]);
		if (ret)
			goto out_put;
	}
	ret = 0;
out_put:
	json_object_put(root);
	return ret;
}

/* The end of a flow series: its labels less direction, and what it counted in the window. */
struct prom_end {
	char *key; /* instance, cgroup, comm, peer_addr, peer_port, role */
	const struct prom_sample *s;
	uint32_t host;
	uint64_t tx, rx, conns;
};

static int prom_end_cmp(const void *a, const void *b)
{
	return strcmp(((const struct prom_end *)a)->key, ((const struct prom_end *)b)->key);
}

/* Ends sorted by (host, cgroup, comm) make each process's ends a run. */
static int prom_end_process_cmp(const void *a, const void *b)
{
	const struct prom_end *x = a, *y = b;
	int d;

	if (x->host != y->host)
		return x->host < y->host ? -1 : 1;
	d = strcmp(x->s->label[PL_CGROUP], y->s->label[PL_CGROUP]);
	d = d ?: strcmp(x->s->label[PL_COMM], y->s->label[PL_COMM]);
	return d ?: strcmp(x->key, y->key);
}

/* value at t less value at t - window (§2) */
static uint64_t prom_delta(const struct prom_sample *now, const struct prom_result *then)
{
	const struct prom_sample *old =
		bsearch(now, then->s, then->n, sizeof(*then->s), sample_key_cmp);

	if (!old || old->value > now->value)
		return now->value;
	return now->value - old->value;
}

/*
 * instance -> host name: plumb_host_info's host label, else plumb_host_address's, else the
 * instance itself. Between two rows of one instance, info's wins, then the smaller host name.
 */
struct instance_host {
	const char *instance, *host;
	int from_address;
};

static int instance_host_cmp(const void *a, const void *b)
{
	const struct instance_host *x = a, *y = b;

	return strcmp(x->instance, y->instance);
}

static int instance_host_order(const void *a, const void *b)
{
	const struct instance_host *x = a, *y = b;
	int d = strcmp(x->instance, y->instance);

	if (d)
		return d;
	if (x->from_address != y->from_address)
		return x->from_address - y->from_address;
	return strcmp(x->host, y->host);
}

struct prom_build {
	struct graph *g;
	struct parse_ctx *c;
	struct prom_result r[GRAPH_PROM_QUERIES];
	struct instance_host *inst; /* sorted by instance, unique */
	size_t ninst;
	struct prom_end *ends;
	size_t nends;
	const char **names; /* host names, sorted, unique: the hosts' order in the graph */
	size_t nnames;
};

static const char *instance_host(const struct prom_build *b, const char *instance)
{
	const struct instance_host *ih =
		bsearch(&(struct instance_host){ instance, NULL, 0 }, b->inst, b->ninst,
			sizeof(*b->inst), instance_host_cmp);

	return ih ? ih->host : instance;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static uint32_t host_index(const struct prom_build *b, const char *name)
{
	const char **p = bsearch(&name, b->names, b->nnames, sizeof(*b->names), str_cmp);

	return (uint32_t)(p - b->names);
}

static int prom_instances(struct prom_build *b)
{
	static const enum graph_prom_query from[2] = { GRAPH_PROM_HOST_INFO,
						       GRAPH_PROM_HOST_ADDRESS };
	size_t n = b->r[from[0]].n + b->r[from[1]].n, k = 0;

	b->inst = calloc(n + 1, sizeof(*b->inst));
	if (!b->inst)
		return fail(b->c, -ENOMEM, "out of memory");
	for (int pass = 0; pass < 2; pass++) {
		const struct prom_result *r = &b->r[from[pass]];

		for (size_t i = 0; i < r->n; i++) {
			const struct prom_sample *s = &r->s[i];

			if (!s->label[PL_INSTANCE] || !s->label[PL_HOST] || !*s->label[PL_HOST])
				return fail(b->c, -EINVAL,
					    "%s: result[%zu] has no instance or no host label",
					    graph_prom_queries[from[pass]].metric, i);
			b->inst[b->ninst++] = (struct instance_host){ s->label[PL_INSTANCE],
								      s->label[PL_HOST], pass };
		}
	}
	qsort(b->inst, b->ninst, sizeof(*b->inst), instance_host_order);
	for (size_t i = 0; i < b->ninst; i++)
		if (!k || strcmp(b->inst[k - 1].instance, b->inst[i].instance))
			b->inst[k++] = b->inst[i];
	b->ninst = k;
	return 0;
}

/* Before plumb 0.1's flow module counted udp and unix, its series had no protocol: tcp. */
static const char *prom_protocol(const struct prom_sample *s)
{
	return s->label[PL_PROTOCOL] ? s->label[PL_PROTOCOL] : "tcp";
}

/* Prometheus keeps no label whose value is empty: a series without peer_addr had "" */
static const char *prom_peer(const struct prom_sample *s)
{
	return s->label[PL_PEER_ADDR] ? s->label[PL_PEER_ADDR] : "";
}

/* A flow series' labels, checked, and the key of its end in *key. */
static int prom_flow_key(struct prom_build *b, const struct prom_sample *s, const char *metric,
			 size_t i, bool bytes, char **key)
{
	static const enum prom_label need[] = { PL_INSTANCE, PL_CGROUP, PL_COMM, PL_PEER_PORT,
						PL_ROLE };

	for (size_t k = 0; k < ARRAY_SIZE(need); k++)
		if (!s->label[need[k]])
			return fail(b->c, -EINVAL, "%s: result[%zu] has no %s label", metric, i,
				    prom_label_names[need[k]]);
	if (bytes && (!s->label[PL_DIRECTION] || (strcmp(s->label[PL_DIRECTION], "tx") &&
						  strcmp(s->label[PL_DIRECTION], "rx"))))
		return fail(b->c, -EINVAL, "%s: result[%zu]: direction is not tx or rx", metric, i);
	if (asprintf(key, "%zu:%s,%zu:%s,%zu:%s,%zu:%s,%zu:%s,%s,%s", strlen(s->label[PL_INSTANCE]),
		     s->label[PL_INSTANCE], strlen(s->label[PL_CGROUP]), s->label[PL_CGROUP],
		     strlen(s->label[PL_COMM]), s->label[PL_COMM], strlen(prom_peer(s)),
		     prom_peer(s), strlen(s->label[PL_PEER_PORT]), s->label[PL_PEER_PORT],
		     s->label[PL_ROLE], prom_protocol(s)) < 0) {
		*key = NULL;
		return fail(b->c, -ENOMEM, "out of memory");
	}
	return 0;
}

/* The flow series at t, differenced and gathered into ends (one per label set less
 * direction). */
static int prom_flow_ends(struct prom_build *b)
{
	const struct prom_result *bytes = &b->r[GRAPH_PROM_BYTES_NOW];
	const struct prom_result *conns = &b->r[GRAPH_PROM_CONNS_NOW];
	size_t n = bytes->n + conns->n, k = 0;

	if (n > (size_t)GRAPH_MAX_ENDS * 3)
		return fail(b->c, -E2BIG, "more than %d ends", GRAPH_MAX_ENDS);
	b->ends = calloc(n + 1, sizeof(*b->ends));
	if (!b->ends)
		return fail(b->c, -ENOMEM, "out of memory");
	for (int pass = 0; pass < 2; pass++) {
		const struct prom_result *now = pass ? conns : bytes;
		const struct prom_result *then =
			&b->r[pass ? GRAPH_PROM_CONNS_THEN : GRAPH_PROM_BYTES_THEN];
		const char *metric =
			graph_prom_queries[pass ? GRAPH_PROM_CONNS_NOW : GRAPH_PROM_BYTES_NOW]
				.metric;

		for (size_t i = 0; i < now->n; i++) {
			const struct prom_sample *s = &now->s[i];
			struct prom_end *e = &b->ends[b->nends];
			uint64_t d = prom_delta(s, then);
			int ret = prom_flow_key(b, s, metric, i, !pass, &e->key);

			if (ret)
				return ret;
			e->s = s;
			b->nends++;
			if (pass)
				e->conns = d;
			else if (!strcmp(s->label[PL_DIRECTION], "tx"))
				e->tx = d;
			else
				e->rx = d;
		}
	}
	qsort(b->ends, b->nends, sizeof(*b->ends), prom_end_cmp);
	for (size_t i = 0; i < b->nends; i++) {
		if (k && !strcmp(b->ends[k - 1].key, b->ends[i].key)) {
			struct prom_end *e = &b->ends[k - 1];

			e->tx = add_sat(e->tx, b->ends[i].tx);
			e->rx = add_sat(e->rx, b->ends[i].rx);
			e->conns = add_sat(e->conns, b->ends[i].conns);
			free(b->ends[i].key);
			continue;
		}
		b->ends[k++] = b->ends[i];
	}
	b->nends = k;
	if (k > GRAPH_MAX_ENDS)
		return fail(b->c, -E2BIG, "more than %d ends", GRAPH_MAX_ENDS);
	return 0;
}

static int prom_hosts(struct prom_build *b)
{
	const struct prom_result *addr = &b->r[GRAPH_PROM_HOST_ADDRESS];
	size_t n = 0, k = 0, *caps;
	int ret = 0;

	b->names = calloc(b->ninst + b->nends + 1, sizeof(*b->names));
	if (!b->names)
		return fail(b->c, -ENOMEM, "out of memory");
	for (size_t i = 0; i < b->ninst; i++)
		b->names[n++] = b->inst[i].host;
	for (size_t i = 0; i < b->nends; i++)
		b->names[n++] = instance_host(b, b->ends[i].s->label[PL_INSTANCE]);
	qsort(b->names, n, sizeof(*b->names), str_cmp);
	for (size_t i = 0; i < n; i++)
		if (!k || strcmp(b->names[k - 1], b->names[i]))
			b->names[k++] = b->names[i];
	b->nnames = k;
	if (k > GRAPH_MAX_HOSTS)
		return fail(b->c, -E2BIG, "more than %d hosts", GRAPH_MAX_HOSTS);
	for (size_t i = 0; i < k && !ret; i++)
		ret = host_add(b->g, b->c, b->names[i]);
	if (ret)
		return ret;
	caps = calloc(k + 1, sizeof(*caps));
	if (!caps)
		return fail(b->c, -ENOMEM, "out of memory");
	for (size_t i = 0; i < addr->n && !ret; i++) {
		const struct prom_sample *s = &addr->s[i];
		uint32_t h = host_index(b, instance_host(b, s->label[PL_INSTANCE]));
		struct graph_addr x;

		if (!s->label[PL_ADDR] || addr_parse_ip(s->label[PL_ADDR], &x))
			ret = fail(b->c, -EINVAL,
				   "plumb_host_address: result[%zu]: addr is not an IP address", i);
		else
			ret = host_add_addr(&b->g->hosts[h], &caps[h], &x, b->c);
	}
	free(caps);
	for (size_t i = 0; i < k; i++)
		b->g->hosts[i].naddrs =
			addr_sort_unique(b->g->hosts[i].addrs, b->g->hosts[i].naddrs);
	return ret;
}

static int prom_end_add(struct prom_build *b, const struct prom_end *pe)
{
	const struct prom_sample *s = pe->s;
	struct graph_end *e = &b->g->ends[b->g->nends];
	unsigned long port;
	int ret, proto;
	char *end;

	memset(e, 0, sizeof(*e));
	if (!strcmp(s->label[PL_ROLE], "client"))
		e->role = ROLE_CLIENT;
	else if (!strcmp(s->label[PL_ROLE], "server"))
		e->role = ROLE_SERVER;
	else
		return fail(b->c, -EINVAL,
			    "flow series of %s, comm %s: role \"%s\" is not client or server",
			    s->label[PL_INSTANCE], s->label[PL_COMM], s->label[PL_ROLE]);
	ret = peer_parse(b->g, prom_peer(s), prom_protocol(s), &e->peer);
	if (ret)
		return fail(b->c, ret,
			    "flow series of %s, comm %s: peer_addr \"%.80s\" is not an IP or unix: "
			    "address",
			    s->label[PL_INSTANCE], s->label[PL_COMM], prom_peer(s));
	proto = protocol_index(b->g, prom_protocol(s));
	if (proto < 0)
		return fail(b->c, -EINVAL, "flow series of %s, comm %s: protocol \"%s\": %s",
			    s->label[PL_INSTANCE], s->label[PL_COMM], prom_protocol(s),
			    proto == -E2BIG ? "too many protocols" : "not a protocol name");
	errno = 0;
	port = strtoul(s->label[PL_PEER_PORT], &end, 10);
	if (!*s->label[PL_PEER_PORT] || *end || errno || port > UINT16_MAX ||
	    strspn(s->label[PL_PEER_PORT], "0123456789") != strlen(s->label[PL_PEER_PORT]))
		return fail(b->c, -EINVAL,
			    "flow series of %s, comm %s: peer_port \"%s\" is not a port",
			    s->label[PL_INSTANCE], s->label[PL_COMM], s->label[PL_PEER_PORT]);
	e->port = (uint16_t)port;
	e->protocol = (uint8_t)proto;
	e->proc = (uint32_t)(b->g->nprocs - 1);
	e->peer_proc = NO_PROC;
	e->tx = pe->tx;
	e->rx = pe->rx;
	e->conns = pe->conns;
	b->g->nends++;
	return 0;
}

static int prom_processes(struct prom_build *b)
{
	int ret;

	for (size_t i = 0; i < b->nends; i++)
		b->ends[i].host = host_index(b, instance_host(b, b->ends[i].s->label[PL_INSTANCE]));
	qsort(b->ends, b->nends, sizeof(*b->ends), prom_end_process_cmp);
	ret = end_reserve(b->g, b->c, b->nends);
	if (ret)
		return ret;
	for (size_t i = 0; i < b->nends; i++) {
		const struct prom_end *e = &b->ends[i];
		const struct prom_sample *s = e->s;

		if (!i || e->host != b->ends[i - 1].host ||
		    strcmp(s->label[PL_CGROUP], b->ends[i - 1].s->label[PL_CGROUP]) ||
		    strcmp(s->label[PL_COMM], b->ends[i - 1].s->label[PL_COMM])) {
			ret = process_add(b->g, b->c, e->host, 0, true, s->label[PL_COMM], "",
					  s->label[PL_CGROUP],
					  s->label[PL_WORKLOAD] ? s->label[PL_WORKLOAD] : "");
			if (ret)
				return ret;
		}
		ret = prom_end_add(b, e);
		if (ret)
			return ret;
	}
	return 0;
}

int graph_add_prometheus(struct graph *g, const char *const body[GRAPH_PROM_QUERIES],
			 const size_t len[GRAPH_PROM_QUERIES], unsigned int window_s,
			 const char *source, char *err, size_t errlen)
{
	struct parse_ctx c = { source, err, errlen };
	struct prom_build b = { .g = g, .c = &c };
	struct graph_mark mark = graph_mark(g);
	int ret = 0;

	if (g->kind != SOURCE_NONE)
		return fail(&c, -EINVAL, "a graph takes one Prometheus source and no agents");
	if (!window_s)
		return fail(&c, -EINVAL, "the window is 0 seconds");
	for (int q = 0; q < GRAPH_PROM_QUERIES && !ret; q++)
		ret = prom_result_parse(&c, body[q], len[q], (enum graph_prom_query)q,
					!graph_prom_queries[q].then, &b.r[q]);
	for (int q = 0; q < GRAPH_PROM_QUERIES && !ret; q++)
		if (graph_prom_queries[q].then)
			qsort(b.r[q].s, b.r[q].n, sizeof(*b.r[q].s), sample_key_cmp);
	ret = ret ?: prom_instances(&b);
	ret = ret ?: prom_flow_ends(&b);
	ret = ret ?: prom_hosts(&b);
	ret = ret ?: prom_processes(&b);
	for (size_t i = 0; i < b.nends; i++)
		free(b.ends[i].key);
	free(b.ends);
	free(b.names);
	free(b.inst);
	for (int q = 0; q < GRAPH_PROM_QUERIES; q++)
		prom_result_free(&b.r[q]);
	if (ret) {
		graph_rollback(g, &mark);
		return ret;
	}
	g->kind = SOURCE_PROMETHEUS;
	g->window_s = window_s;
	return 0;
}

/* ---- the join (§3) ---- */

/* Which host owns an address: hosts' addresses, sorted by address. */
struct addr_owner {
	struct graph_addr addr;
	uint32_t host;
};

static int addr_owner_cmp(const void *a, const void *b)
{
	const struct addr_owner *x = a, *y = b;
	int d = addr_cmp(&x->addr, &y->addr);

	return d ?: (x->host > y->host) - (x->host < y->host);
}

/* A server end that rule 2 may match, sorted by (port, protocol, host, peer address). */
struct server_key {
	uint16_t port;
	uint8_t protocol;
	uint32_t host;
	struct graph_addr peer;
	uint32_t end;
};

static int server_tuple_cmp(const struct server_key *x, const struct server_key *y)
{
	if (x->port != y->port)
		return x->port < y->port ? -1 : 1;
	if (x->protocol != y->protocol)
		return x->protocol < y->protocol ? -1 : 1;
	if (x->host != y->host)
		return x->host < y->host ? -1 : 1;
	return addr_cmp(&x->peer, &y->peer);
}

static int server_key_cmp(const void *a, const void *b)
{
	const struct server_key *x = a, *y = b;

	return server_tuple_cmp(x, y) ?: (x->end > y->end) - (x->end < y->end);
}

/* The first key whose tuple is not below probe's (upper: above it). */
static size_t server_bound(const struct server_key *k, size_t n, const struct server_key *probe,
			   bool upper)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int d = server_tuple_cmp(&k[mid], probe);

		if (d < 0 || (upper && !d))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* An edge between process-level vertices: a process index, or EXTERNAL | external index. */
struct raw_edge {
	uint32_t src, dst;
	uint16_t port;
	uint8_t protocol;
	uint64_t tx, rx, conns;
};

static int raw_edge_cmp(const void *a, const void *b)
{
	const struct raw_edge *x = a, *y = b;

	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	if (x->dst != y->dst)
		return x->dst < y->dst ? -1 : 1;
	if (x->protocol != y->protocol)
		return x->protocol < y->protocol ? -1 : 1;
	return (x->port > y->port) - (x->port < y->port);
}

struct edge_set {
	struct raw_edge *e;
	size_t n, cap;
};

/* Sorts the edges and sums those that coincide. */
static void edge_set_merge(struct edge_set *s)
{
	size_t k = 0;

	if (!s->n)
		return;
	qsort(s->e, s->n, sizeof(*s->e), raw_edge_cmp);
	for (size_t i = 1; i < s->n; i++) {
		if (!raw_edge_cmp(&s->e[k], &s->e[i])) {
			s->e[k].tx = add_sat(s->e[k].tx, s->e[i].tx);
			s->e[k].rx = add_sat(s->e[k].rx, s->e[i].rx);
			s->e[k].conns = add_sat(s->e[k].conns, s->e[i].conns);
		} else {
			s->e[++k] = s->e[i];
		}
	}
	s->n = k + 1;
}

/* Adds an edge; one that counted nothing is no edge. When full, merges before growing. */
static int edge_set_add(struct edge_set *s, const struct raw_edge *e)
{
	int ret;

	if (!e->tx && !e->rx && !e->conns)
		return 0;
	if (s->n == s->cap) {
		edge_set_merge(s);
		if (s->n > s->cap / 2 || !s->cap) {
			ret = grow((void **)&s->e, &s->cap, s->cap + 1, sizeof(*s->e),
				   GRAPH_MAX_EDGES);
			if (ret && s->n == s->cap)
				return ret;
		}
	}
	s->e[s->n++] = *e;
	return 0;
}

struct external_node {
	struct graph_addr addr; /* first: addr_cmp() compares nodes */
	uint32_t index;
};

/* A server vertex's part of a client end when several match (rule 2). */
struct share {
	uint32_t proc;
	uint64_t tx, rx, conns; /* what the server ends counted */
	size_t key; /* its end's index in servers[] (one end per share for unknown peers) */
};

struct join {
	const struct graph *g;
	struct addr_owner *owners;
	size_t nowners;
	struct server_key *servers;
	size_t nservers;
	bool *matched; /* per servers[] */
	/* per servers[]: what client ends have taken of an end with an unknown peer (matched by
	 * any client: what is left comes from an unknown one), in the server's direction */
	struct taken {
		uint64_t rx, tx, conns;
	} * taken;
	bool any_peer; /* the candidates are server ends with an unknown peer (rule 2's last) */
	struct graph_addr *ext;
	size_t next, ext_cap;
	void *ext_tree;
	struct edge_set edges;
	size_t *cand; /* indexes into servers[] */
	size_t ncand, cand_cap;
	uint32_t *bhosts; /* hosts owning the client's peer address */
	size_t nbhosts, bhosts_cap;
	struct share *shares;
	size_t nshares, shares_cap;
	uint64_t *weight, *part; /* scratch for graph_split(), per share */
	size_t scratch_cap;
};

static void join_free(struct join *j)
{
	free(j->owners);
	free(j->servers);
	free(j->matched);
	free(j->taken);
	free(j->ext);
	tdestroy(j->ext_tree, free);
	free(j->edges.e);
	free(j->cand);
	free(j->bhosts);
	free(j->shares);
	free(j->weight);
	free(j->part);
}

static int external_ref(struct join *j, const struct graph_addr *x, uint32_t *ref)
{
	struct external_node *node, **found;
	int ret;

	ret = grow((void **)&j->ext, &j->ext_cap, j->next + 1, sizeof(*j->ext), EXTERNAL - 1);
	if (ret)
		return ret;
	node = malloc(sizeof(*node));
	if (!node)
		return -ENOMEM;
	node->addr = *x;
	node->index = (uint32_t)j->next;
	found = tsearch(node, &j->ext_tree, addr_cmp);
	if (!found) {
		free(node);
		return -ENOMEM;
	}
	if (*found != node)
		free(node);
	else
		j->ext[j->next++] = *x;
	*ref = EXTERNAL | (*found)->index;
	return 0;
}

static int join_index(struct join *j)
{
	const struct graph *g = j->g;
	size_t n = 0;

	for (size_t h = 0; h < g->nhosts; h++)
		n += g->hosts[h].naddrs;
	j->owners = calloc(n + 1, sizeof(*j->owners));
	j->servers = calloc(g->nends + 1, sizeof(*j->servers));
	j->matched = calloc(g->nends + 1, sizeof(*j->matched));
	j->taken = calloc(g->nends + 1, sizeof(*j->taken));
	if (!j->owners || !j->servers || !j->matched || !j->taken)
		return -ENOMEM;
	for (size_t h = 0; h < g->nhosts; h++)
		for (size_t i = 0; i < g->hosts[h].naddrs; i++)
			j->owners[j->nowners++] =
				(struct addr_owner){ g->hosts[h].addrs[i], (uint32_t)h };
	qsort(j->owners, j->nowners, sizeof(*j->owners), addr_owner_cmp);
	/* server ends with a peer_pid are their client end's connections again (rule 1) */
	for (size_t i = 0; i < g->nends; i++) {
		const struct graph_end *e = &g->ends[i];

		if (e->role != ROLE_SERVER || e->peer_proc != NO_PROC)
			continue;
		j->servers[j->nservers++] = (struct server_key){
			.port = e->port,
			.protocol = e->protocol,
			.host = g->procs[e->proc].host,
			.peer = e->peer,
			.end = (uint32_t)i,
		};
	}
	qsort(j->servers, j->nservers, sizeof(*j->servers), server_key_cmp);
	return 0;
}

/* Adds the server ends on host with the client's port and protocol and a peer in lo..hi. */
static int join_range(struct join *j, const struct graph_end *c, uint32_t host,
		      const struct graph_addr *lo, const struct graph_addr *hi)
{
	struct server_key probe = { .port = c->port, .protocol = c->protocol, .host = host };
	size_t first, last;
	int ret;

	probe.peer = *lo;
	first = server_bound(j->servers, j->nservers, &probe, false);
	probe.peer = *hi;
	last = server_bound(j->servers, j->nservers, &probe, true);
	if (first >= last)
		return 0;
	ret = grow((void **)&j->cand, &j->cand_cap, j->ncand + (last - first), sizeof(*j->cand),
		   SIZE_MAX / sizeof(*j->cand));
	if (ret)
		return ret;
	for (size_t i = first; i < last; i++)
		j->cand[j->ncand++] = i;
	return 0;
}

static int size_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return (x > y) - (x < y);
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Rule 2's server ends for client end c on host a, in j->cand, sorted and unique. */
static int join_candidates(struct join *j, const struct graph_end *c, uint32_t a)
{
	static const struct graph_addr v4_loopback_lo = {
		4, { [10] = 0xff, [11] = 0xff, [12] = 127 }
	};
	static const struct graph_addr v4_loopback_hi = {
		4, { [10] = 0xff, [11] = 0xff, [12] = 127, [13] = 255, [14] = 255, [15] = 255 }
	};
	static const struct graph_addr v6_loopback = { 6, { [15] = 1 } };
	static const struct graph_addr unknown;
	const struct graph_host *ha = &j->g->hosts[a];
	struct addr_owner probe = { .addr = c->peer };
	size_t i, k = 0;
	int ret = 0;

	j->ncand = 0;
	j->nbhosts = 0;
	j->any_peer = false;
	/* B owns the client's peer address, or it is a loopback address and B is A */
	i = 0;
	for (size_t hi = j->nowners; i < hi;) {
		size_t mid = i + (hi - i) / 2;

		if (addr_owner_cmp(&j->owners[mid], &probe) < 0)
			i = mid + 1;
		else
			hi = mid;
	}
	for (; i < j->nowners && !addr_cmp(&j->owners[i].addr, &c->peer); i++) {
		ret = grow((void **)&j->bhosts, &j->bhosts_cap, j->nbhosts + 2, sizeof(*j->bhosts),
			   GRAPH_MAX_HOSTS + 2);
		if (ret)
			return ret;
		j->bhosts[j->nbhosts++] = j->owners[i].host;
	}
	if (addr_is_loopback(&c->peer)) {
		ret = grow((void **)&j->bhosts, &j->bhosts_cap, j->nbhosts + 1, sizeof(*j->bhosts),
			   GRAPH_MAX_HOSTS + 2);
		if (ret)
			return ret;
		j->bhosts[j->nbhosts++] = a;
	}
	qsort(j->bhosts, j->nbhosts, sizeof(*j->bhosts), u32_cmp);
	for (i = 0; i < j->nbhosts && !ret; i++) {
		uint32_t b = j->bhosts[i];

		if (i && b == j->bhosts[i - 1])
			continue;
		/* the server saw the client's address: its local one, or one A owns */
		if (c->local.family) {
			ret = join_range(j, c, b, &c->local, &c->local);
			continue;
		}
		for (size_t x = 0; x < ha->naddrs && !ret; x++)
			ret = join_range(j, c, b, &ha->addrs[x], &ha->addrs[x]);
		if (b == a && !ret)
			ret = join_range(j, c, b, &v4_loopback_lo, &v4_loopback_hi);
		if (b == a && !ret)
			ret = join_range(j, c, b, &v6_loopback, &v6_loopback);
	}
	/* none saw the client's address: the server ends that saw no address at all */
	if (!ret && !j->ncand) {
		for (i = 0; i < j->nbhosts && !ret; i++)
			if (!i || j->bhosts[i] != j->bhosts[i - 1])
				ret = join_range(j, c, j->bhosts[i], &unknown, &unknown);
		j->any_peer = j->ncand > 0;
	}
	if (ret)
		return ret;
	qsort(j->cand, j->ncand, sizeof(*j->cand), size_cmp);
	for (i = 0; i < j->ncand; i++)
		if (!k || j->cand[k - 1] != j->cand[i])
			j->cand[k++] = j->cand[i];
	j->ncand = k;
	return 0;
}

static int share_cmp(const void *a, const void *b)
{
	const struct share *x = a, *y = b;

	return (x->proc > y->proc) - (x->proc < y->proc);
}

/*
 * The matched server ends gathered per server vertex (process), in j->shares; ends with an
 * unknown peer one by one (what each is given is taken from it, for the rest of rule 3).
 */
static int join_shares(struct join *j)
{
	size_t k = 0;
	int ret;

	ret = grow((void **)&j->shares, &j->shares_cap, j->ncand, sizeof(*j->shares),
		   SIZE_MAX / sizeof(*j->shares));
	if (ret)
		return ret;
	for (size_t i = 0; i < j->ncand; i++) {
		const struct graph_end *s = &j->g->ends[j->servers[j->cand[i]].end];

		j->matched[j->cand[i]] = true;
		j->shares[i] = (struct share){ s->proc, s->tx, s->rx, s->conns, j->cand[i] };
	}
	if (j->any_peer) {
		j->nshares = j->ncand;
		return 0;
	}
	qsort(j->shares, j->ncand, sizeof(*j->shares), share_cmp);
	for (size_t i = 0; i < j->ncand; i++) {
		struct share *to;

		if (!k || j->shares[k - 1].proc != j->shares[i].proc) {
			j->shares[k++] = j->shares[i];
			continue;
		}
		to = &j->shares[k - 1];
		to->tx = add_sat(to->tx, j->shares[i].tx);
		to->rx = add_sat(to->rx, j->shares[i].rx);
		to->conns = add_sat(to->conns, j->shares[i].conns);
	}
	j->nshares = k;
	return 0;
}

/*
 * One of a client end's counters shared among the server vertices: in proportion to the
 * share's counter at field (an offsetof), else to their connections, else evenly.
 */
static int join_split(struct join *j, uint64_t total, size_t field, uint64_t *part)
{
	uint64_t any = 0;

	for (size_t i = 0; i < j->nshares; i++) {
		j->weight[i] = *(const uint64_t *)((const char *)&j->shares[i] + field);
		any |= j->weight[i];
	}
	/* none: by connections; all 0 again, graph_split() shares evenly */
	for (size_t i = 0; !any && i < j->nshares; i++)
		j->weight[i] = j->shares[i].conns;
	return graph_split(total, j->weight, j->nshares, part);
}

/* An edge given from a server end with an unknown peer: taken from what it counted. */
static void join_take(struct join *j, const struct share *s, const struct raw_edge *e)
{
	struct taken *t = &j->taken[s->key];

	if (!j->any_peer)
		return;
	t->rx = add_sat(t->rx, e->tx); /* the client's tx: the server's rx */
	t->tx = add_sat(t->tx, e->rx);
	t->conns = add_sat(t->conns, e->conns);
}

static int join_client(struct join *j, const struct graph_end *c)
{
	struct raw_edge e = {
		.src = c->proc,
		.port = c->port,
		.protocol = c->protocol,
		.tx = c->tx,
		.rx = c->rx,
		.conns = c->conns,
	};
	uint64_t *tx, *rx, *conns;
	int ret;

	if (c->peer_proc != NO_PROC) { /* rule 1 */
		e.dst = c->peer_proc;
		return edge_set_add(&j->edges, &e);
	}
	ret = join_candidates(j, c, j->g->procs[c->proc].host);
	if (ret)
		return ret;
	if (!j->ncand) { /* rule 3 */
		ret = external_ref(j, &c->peer, &e.dst);
		return ret ?: edge_set_add(&j->edges, &e);
	}
	ret = join_shares(j);
	if (ret)
		return ret;
	if (j->nshares == 1) {
		e.dst = j->shares[0].proc;
		join_take(j, &j->shares[0], &e);
		return edge_set_add(&j->edges, &e);
	}
	if (j->nshares > j->scratch_cap) {
		free(j->weight);
		free(j->part);
		j->weight = calloc(j->nshares, sizeof(*j->weight));
		j->part = calloc(j->nshares * 3, sizeof(*j->part));
		j->scratch_cap = j->weight && j->part ? j->nshares : 0;
		if (!j->scratch_cap)
			return -ENOMEM;
	}
	/* the client's tx is what the servers received, its rx what they sent */
	tx = j->part;
	rx = j->part + j->nshares;
	conns = j->part + 2 * j->nshares;
	ret = join_split(j, c->tx, offsetof(struct share, rx), tx);
	ret = ret ?: join_split(j, c->rx, offsetof(struct share, tx), rx);
	ret = ret ?: join_split(j, c->conns, offsetof(struct share, conns), conns);
	for (size_t i = 0; i < j->nshares && !ret; i++) {
		e.dst = j->shares[i].proc;
		e.tx = tx[i];
		e.rx = rx[i];
		e.conns = conns[i];
		join_take(j, &j->shares[i], &e);
		ret = edge_set_add(&j->edges, &e);
	}
	return ret;
}

struct split_rest {
	unsigned __int128 rest;
	size_t i;
};

static int split_rest_cmp(const void *a, const void *b)
{
	const struct split_rest *x = a, *y = b;

	if (x->rest != y->rest)
		return x->rest > y->rest ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/*
 * The largest remainder method: each part rounded down, then the units left over (fewer than
 * n) one each to the parts with the largest remainders, the earlier part first on a tie.
 */
int graph_split(uint64_t total, const uint64_t *weight, size_t n, uint64_t *part)
{
	unsigned __int128 sum = 0, given = 0;
	struct split_rest *rest;
	uint64_t left;

	if (!n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		sum += weight[i];
	rest = calloc(n, sizeof(*rest));
	if (!rest)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned __int128 share = (unsigned __int128)total * (sum ? weight[i] : 1);
		unsigned __int128 whole = sum ? sum : n;

		part[i] = (uint64_t)(share / whole);
		rest[i] = (struct split_rest){ share % whole, i };
		given += part[i];
	}
	left = total - (uint64_t)given;
	qsort(rest, n, sizeof(*rest), split_rest_cmp);
	for (uint64_t k = 0; k < left; k++)
		part[rest[k].i]++;
	free(rest);
	return 0;
}

static int join_run(struct join *j)
{
	const struct graph *g = j->g;
	int ret = join_index(j);

	for (size_t i = 0; i < g->nends && !ret; i++)
		if (g->ends[i].role == ROLE_CLIENT)
			ret = join_client(j, &g->ends[i]);
	/* rule 3 the other way: a server end no client end matched, tx still client to server */
	for (size_t i = 0; i < j->nservers && !ret; i++) {
		const struct graph_end *s = &g->ends[j->servers[i].end];
		struct raw_edge e = {
			.dst = s->proc,
			.port = s->port,
			.protocol = s->protocol,
			.tx = s->rx,
			.rx = s->tx,
			.conns = s->conns,
		};

		if (!s->peer.family) { /* unknown peer: what the client ends did not take */
			const struct taken *t = &j->taken[i];

			/* e is client to server: its tx is the server's rx */
			e.tx = e.tx > t->rx ? e.tx - t->rx : 0;
			e.rx = e.rx > t->tx ? e.rx - t->tx : 0;
			e.conns = e.conns > t->conns ? e.conns - t->conns : 0;
			if (j->matched[i] && !e.tx && !e.rx && !e.conns)
				continue;
		} else if (j->matched[i]) {
			continue;
		}
		ret = external_ref(j, &s->peer, &e.src);
		ret = ret ?: edge_set_add(&j->edges, &e);
	}
	if (!ret)
		edge_set_merge(&j->edges);
	return ret;
}

/* ---- projections (§4) ---- */

#define UNSET UINT32_MAX

struct type_node {
	const char *name;
	uint32_t vertex;
};

static int type_node_cmp(const void *a, const void *b)
{
	return strcmp(((const struct type_node *)a)->name, ((const struct type_node *)b)->name);
}

struct projector {
	const struct graph *g;
	const struct join *j;
	enum graph_projection projection;
	struct graph_vertex *v;
	size_t n, cap;
	uint32_t *proc_v, *host_v, *ext_v; /* vertex of each, or UNSET */
	void *types;
};

static char *__attribute__((format(printf, 1, 2))) string_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int ret;

	va_start(ap, fmt);
	ret = vasprintf(&s, fmt, ap);
	va_end(ap);
	return ret < 0 ? NULL : s;
}

/* A process's type: its workload, else its comm. */
static const char *process_type(const struct graph_process *p)
{
	return *p->workload ? p->workload : *p->comm ? p->comm : "?";
}

static void vertex_free(struct graph_vertex *v)
{
	free(v->id);
	free(v->label);
	free(v->host);
	free(v->comm);
	free(v->exe);
	free(v->cgroup);
	free(v->workload);
}

static int vertex_fill_process(struct graph_vertex *v, const struct graph *g,
			       const struct graph_process *p)
{
	const char *host = g->hosts[p->host].name;

	v->kind = GRAPH_VERTEX_PROCESS;
	v->pid = p->pid;
	v->by_cgroup = p->by_cgroup;
	if (!p->by_cgroup) {
		v->id = string_printf("%s/%u", host, p->pid);
		v->label = string_printf("%s/%u@%s", p->comm, p->pid, host);
	} else {
		v->id = string_printf("%s/%s/%s", host, p->cgroup, p->comm);
		if (*p->workload || *p->cgroup)
			v->label = string_printf("%s(%s)@%s", p->comm,
						 *p->workload ? p->workload : p->cgroup, host);
		else
			v->label = string_printf("%s@%s", p->comm, host);
	}
	v->host = strdup(host);
	v->comm = strdup(p->comm);
	v->exe = strdup(p->exe);
	v->cgroup = strdup(p->cgroup);
	v->workload = strdup(p->workload);
	return v->id && v->label && v->host && v->comm && v->exe && v->cgroup && v->workload ?
		       0 :
		       -ENOMEM;
}

/* {host: <peer_addr>, comm: "?", pid: 0} (§3), the other strings empty */
static int vertex_fill_external(struct graph_vertex *v, const struct graph *g,
				const struct graph_addr *x)
{
	char buf[INET6_ADDRSTRLEN];
	const char *addr = x->family ? addr_text(g, x, buf, sizeof(buf)) : "unknown";

	v->kind = GRAPH_VERTEX_EXTERNAL;
	v->id = string_printf("external/%s", addr);
	v->label = strdup(v->id ? v->id : "");
	v->host = strdup(addr);
	v->comm = strdup("?");
	v->exe = strdup("");
	v->cgroup = strdup("");
	v->workload = strdup("");
	return v->id && v->label && v->host && v->comm && v->exe && v->cgroup && v->workload ?
		       0 :
		       -ENOMEM;
}

static int vertex_fill_named(struct graph_vertex *v, enum graph_vertex_kind kind, const char *name)
{
	v->kind = kind;
	v->id = strdup(name);
	v->label = strdup(name);
	if (kind == GRAPH_VERTEX_HOST)
		v->host = strdup(name);
	return v->id && v->label && (kind != GRAPH_VERTEX_HOST || v->host) ? 0 : -ENOMEM;
}

static int projector_new_vertex(struct projector *pr, uint32_t *out)
{
	int ret = grow((void **)&pr->v, &pr->cap, pr->n + 1, sizeof(*pr->v), UNSET - 1);

	if (ret)
		return ret;
	memset(&pr->v[pr->n], 0, sizeof(*pr->v));
	*out = (uint32_t)pr->n++;
	return 0;
}

static int project_type(struct projector *pr, const struct graph_process *p, uint32_t *out)
{
	struct type_node key = { process_type(p), 0 }, *node, **found;
	int ret;

	found = tfind(&key, &pr->types, type_node_cmp);
	if (found) {
		*out = (*found)->vertex;
		return 0;
	}
	ret = projector_new_vertex(pr, out);
	ret = ret ?: vertex_fill_named(&pr->v[*out], GRAPH_VERTEX_TYPE, key.name);
	if (ret)
		return ret;
	node = malloc(sizeof(*node));
	if (!node)
		return -ENOMEM;
	*node = (struct type_node){ pr->v[*out].id, *out };
	if (!tsearch(node, &pr->types, type_node_cmp)) {
		free(node);
		return -ENOMEM;
	}
	return 0;
}

/* The projected vertex of a process-level vertex reference, made when first needed. */
static int project_ref(struct projector *pr, uint32_t ref, uint32_t *out)
{
	const struct graph *g = pr->g;
	const struct graph_process *p = ref & EXTERNAL ? NULL : &g->procs[ref];
	uint32_t *slot;
	int ret;

	if (!p)
		slot = &pr->ext_v[ref & ~EXTERNAL];
	else if (pr->projection == GRAPH_PROJECT_HOST)
		slot = &pr->host_v[p->host];
	else
		slot = &pr->proc_v[ref]; /* for types too: a cache of the name lookup */
	if (*slot != UNSET) {
		*out = *slot;
		return 0;
	}
	if (p && pr->projection == GRAPH_PROJECT_TYPE) {
		ret = project_type(pr, p, out);
	} else {
		ret = projector_new_vertex(pr, out);
		if (ret)
			return ret;
		if (!p)
			ret = vertex_fill_external(&pr->v[*out], g, &pr->j->ext[ref & ~EXTERNAL]);
		else if (pr->projection == GRAPH_PROJECT_HOST)
			ret = vertex_fill_named(&pr->v[*out], GRAPH_VERTEX_HOST,
						g->hosts[p->host].name);
		else
			ret = vertex_fill_process(&pr->v[*out], g, p);
	}
	if (!ret)
		*slot = *out;
	return ret;
}

static int vertex_id_cmp(const void *a, const void *b, void *arg)
{
	const struct graph_vertex *v = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int d = strcmp(v[x].id, v[y].id);

	return d ?: (int)v[x].kind - (int)v[y].kind;
}

static int view_edge_cmp(const void *a, const void *b)
{
	const struct graph_edge *x = a, *y = b;
	int d;

	if (x->source != y->source)
		return x->source < y->source ? -1 : 1;
	if (x->target != y->target)
		return x->target < y->target ? -1 : 1;
	d = strcmp(x->protocol, y->protocol);
	return d ?: (x->port > y->port) - (x->port < y->port);
}

/* The projected edges: vertices kept only when an edge has them, sorted by id. */
static int project(struct projector *pr, struct graph_view *view)
{
	const struct edge_set *raw = &pr->j->edges;
	struct graph_edge *edges;
	uint32_t *order = NULL, *renumber = NULL;
	size_t n = 0, k = 0, nv = 0;
	int ret = 0;

	edges = calloc(raw->n + 1, sizeof(*edges));
	if (!edges)
		return -ENOMEM;
	for (size_t i = 0; i < raw->n && !ret; i++) {
		const struct raw_edge *r = &raw->e[i];
		uint32_t src, dst;

		ret = project_ref(pr, r->src, &src);
		ret = ret ?: project_ref(pr, r->dst, &dst);
		if (ret || (pr->projection == GRAPH_PROJECT_HOST && src == dst))
			continue; /* the host projection drops edges within one host */
		edges[n] = (struct graph_edge){ .source = src,
						.target = dst,
						.port = r->port,
						.tx_bytes = r->tx,
						.rx_bytes = r->rx,
						.connections = r->conns };
		snprintf(edges[n].protocol, sizeof(edges[n].protocol), "%s",
			 pr->g->protocols[r->protocol]);
		n++;
	}
	order = calloc(pr->n + 1, sizeof(*order));
	renumber = calloc(pr->n + 1, sizeof(*renumber));
	if (ret || !order || !renumber) {
		ret = ret ?: -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < pr->n; i++)
		renumber[i] = UNSET;
	for (size_t i = 0; i < n; i++)
		renumber[edges[i].source] = renumber[edges[i].target] = 0;
	for (size_t i = 0; i < pr->n; i++)
		if (!renumber[i])
			order[nv++] = (uint32_t)i;
	qsort_r(order, nv, sizeof(*order), vertex_id_cmp, pr->v);
	view->vertices = calloc(nv + 1, sizeof(*view->vertices));
	if (!view->vertices) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < nv; i++) {
		view->vertices[i] = pr->v[order[i]];
		memset(&pr->v[order[i]], 0, sizeof(pr->v[order[i]])); /* moved */
		renumber[order[i]] = (uint32_t)i;
	}
	view->nvertices = nv;
	for (size_t i = 0; i < n; i++) {
		edges[i].source = renumber[edges[i].source];
		edges[i].target = renumber[edges[i].target];
	}
	qsort(edges, n, sizeof(*edges), view_edge_cmp);
	for (size_t i = 0; i < n; i++) {
		struct graph_edge *to;

		if (!k || view_edge_cmp(&edges[k - 1], &edges[i])) {
			edges[k++] = edges[i];
			continue;
		}
		to = &edges[k - 1];
		to->tx_bytes = add_sat(to->tx_bytes, edges[i].tx_bytes);
		to->rx_bytes = add_sat(to->rx_bytes, edges[i].rx_bytes);
		to->connections = add_sat(to->connections, edges[i].connections);
	}
	view->edges = edges;
	view->nedges = k;
	edges = NULL;
out_free:
	free(edges);
	free(order);
	free(renumber);
	return ret;
}

void graph_view_free(struct graph_view *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->nvertices; i++)
		vertex_free(&v->vertices[i]);
	free(v->vertices);
	free(v->edges);
	free(v);
}

int graph_build(const struct graph *g, enum graph_projection projection, struct graph_view **out,
		char *err, size_t errlen)
{
	struct parse_ctx c = { "the join", err, errlen };
	struct join j = { .g = g };
	struct projector pr = { .g = g, .j = &j, .projection = projection };
	struct graph_view *view;
	int ret;

	*out = NULL;
	view = calloc(1, sizeof(*view));
	if (!view)
		return fail(&c, -ENOMEM, "out of memory");
	view->projection = projection;
	view->window_seconds = g->kind == SOURCE_PROMETHEUS ? (long)g->window_s : -1;
	ret = join_run(&j);
	if (ret) {
		fail(&c, ret, ret == -E2BIG ? "more than %d edges" : "out of memory",
		     GRAPH_MAX_EDGES);
		goto out_free;
	}
	pr.proc_v = malloc((g->nprocs + 1) * sizeof(*pr.proc_v));
	pr.host_v = malloc((g->nhosts + 1) * sizeof(*pr.host_v));
	pr.ext_v = malloc((j.next + 1) * sizeof(*pr.ext_v));
	if (!pr.proc_v || !pr.host_v || !pr.ext_v) {
		ret = fail(&c, -ENOMEM, "out of memory");
		goto out_free;
	}
	memset(pr.proc_v, 0xff, (g->nprocs + 1) * sizeof(*pr.proc_v));
	memset(pr.host_v, 0xff, (g->nhosts + 1) * sizeof(*pr.host_v));
	memset(pr.ext_v, 0xff, (j.next + 1) * sizeof(*pr.ext_v));
	ret = project(&pr, view);
	if (ret)
		fail(&c, ret, "out of memory");
out_free:
	for (size_t i = 0; i < pr.n; i++)
		vertex_free(&pr.v[i]);
	free(pr.v);
	free(pr.proc_v);
	free(pr.host_v);
	free(pr.ext_v);
	tdestroy(pr.types, free);
	join_free(&j);
	if (ret) {
		graph_view_free(view);
		return ret;
	}
	*out = view;
	return 0;
}

/* ---- writers ---- */

void graph_human_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	size_t u = 0;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return;
	}
	v /= 1024;
	/* 1023.96 KiB would print as 1024.0 KiB: the next unit says it better */
	while (v >= 1023.95 && u + 1 < ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* The length of the valid UTF-8 sequence at p, 0 when it is not one. */
static size_t utf8_length(const unsigned char *p)
{
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		return (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (p[0] >= 0xe0 && p[0] <= 0xef) {
		if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
			return 0;
		if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))
			return 0; /* overlong, or a surrogate */
		return 3;
	}
	if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
			return 0;
		if ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
			return 0; /* overlong, or past U+10FFFF */
		return 4;
	}
	return 0;
}

/* A JSON string; bytes that are not UTF-8 (a comm may hold any) become U+FFFD. */
static void json_put_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', out);
	while (*p) {
		size_t n = *p >= 0x80 ? utf8_length(p) : 1;

		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p == '\n' || *p == '\t' || *p == '\r')
			fputs(*p == '\n' ? "\\n" : *p == '\t' ? "\\t" : "\\r", out);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(out, "\\u%04x", *p);
		else if (n)
			fwrite(p, 1, n, out);
		else
			fputs("\\ufffd", out);
		p += n ? n : 1;
	}
	fputc('"', out);
}

static void json_put_vertex(FILE *out, const struct graph_vertex *v)
{
	fputs("{\"id\": ", out);
	json_put_string(out, v->id);
	switch (v->kind) {
	case GRAPH_VERTEX_PROCESS:
	case GRAPH_VERTEX_EXTERNAL:
		fputs(", \"host\": ", out);
		json_put_string(out, v->host);
		fprintf(out, ", \"pid\": %u, \"comm\": ", v->pid);
		json_put_string(out, v->comm);
		fputs(", \"exe\": ", out);
		json_put_string(out, v->exe);
		fputs(", \"cgroup\": ", out);
		json_put_string(out, v->cgroup);
		fputs(", \"workload\": ", out);
		json_put_string(out, v->workload);
		break;
	case GRAPH_VERTEX_HOST:
		fputs(", \"host\": ", out);
		json_put_string(out, v->host);
		break;
	case GRAPH_VERTEX_TYPE:
		break;
	}
	fputc('}', out);
}

int graph_write_json(const struct graph_view *v, FILE *out)
{
	fprintf(out, "{\n  \"version\": 1,\n  \"projection\": \"%s\",\n",
		graph_projection_names[v->projection]);
	if (v->window_seconds < 0)
		fputs("  \"window_seconds\": null,\n", out);
	else
		fprintf(out, "  \"window_seconds\": %ld,\n", v->window_seconds);
	fputs("  \"vertices\": [", out);
	for (size_t i = 0; i < v->nvertices; i++) {
		fputs(i ? ",\n    " : "\n    ", out);
		json_put_vertex(out, &v->vertices[i]);
	}
	fputs(v->nvertices ? "\n  ],\n" : "],\n", out);
	fputs("  \"edges\": [", out);
	for (size_t i = 0; i < v->nedges; i++) {
		const struct graph_edge *e = &v->edges[i];

		fputs(i ? ",\n    {\"source\": " : "\n    {\"source\": ", out);
		json_put_string(out, v->vertices[e->source].id);
		fputs(", \"target\": ", out);
		json_put_string(out, v->vertices[e->target].id);
		fputs(", \"protocol\": ", out);
		json_put_string(out, e->protocol);
		fprintf(out,
			", \"port\": %u, \"tx_bytes\": %llu, \"rx_bytes\": %llu, "
			"\"connections\": %llu}",
			e->port, (unsigned long long)e->tx_bytes, (unsigned long long)e->rx_bytes,
			(unsigned long long)e->connections);
	}
	fputs(v->nedges ? "\n  ]\n}\n" : "]\n}\n", out);
	return ferror(out) ? -EIO : 0;
}

static uint64_t edge_bytes(const struct graph_edge *e)
{
	return add_sat(e->tx_bytes, e->rx_bytes);
}

/* Busiest first: bytes, then connections, then by name. */
static int table_order(const void *a, const void *b, void *arg)
{
	const struct graph_view *v = arg;
	const struct graph_edge *x = &v->edges[*(const size_t *)a];
	const struct graph_edge *y = &v->edges[*(const size_t *)b];
	uint64_t bx = edge_bytes(x), by = edge_bytes(y);
	int d;

	if (bx != by)
		return bx > by ? -1 : 1;
	if (x->connections != y->connections)
		return x->connections > y->connections ? -1 : 1;
	d = strcmp(v->vertices[x->source].label, v->vertices[y->source].label);
	d = d ?: strcmp(v->vertices[x->target].label, v->vertices[y->target].label);
	return d ?: view_edge_cmp(x, y);
}

/* "80" for tcp, "53/udp" for another protocol, "unix" where there is no port */
static void table_port(const struct graph_edge *e, char *buf, size_t len)
{
	if (!strcmp(e->protocol, "tcp"))
		snprintf(buf, len, "%u", e->port);
	else if (e->port)
		snprintf(buf, len, "%u/%s", e->port, e->protocol);
	else
		snprintf(buf, len, "%s", e->protocol);
}

int graph_write_table(const struct graph_view *v, FILE *out)
{
	int w_src = 6, w_dst = 6, w_port = 4, w_tx = 2, w_rx = 2, w_conns = 5;
	char tx[32], rx[32], port[24], conns[24];
	size_t *order;

	order = calloc(v->nedges + 1, sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < v->nedges; i++) {
		const struct graph_edge *e = &v->edges[i];
		int n;

		order[i] = i;
		n = (int)strlen(v->vertices[e->source].label);
		w_src = n > w_src ? n : w_src;
		n = (int)strlen(v->vertices[e->target].label);
		w_dst = n > w_dst ? n : w_dst;
		table_port(e, port, sizeof(port));
		w_port = (int)strlen(port) > w_port ? (int)strlen(port) : w_port;
		graph_human_bytes(e->tx_bytes, tx, sizeof(tx));
		w_tx = (int)strlen(tx) > w_tx ? (int)strlen(tx) : w_tx;
		graph_human_bytes(e->rx_bytes, rx, sizeof(rx));
		w_rx = (int)strlen(rx) > w_rx ? (int)strlen(rx) : w_rx;
		n = snprintf(conns, sizeof(conns), "%llu", (unsigned long long)e->connections);
		w_conns = n > w_conns ? n : w_conns;
	}
	qsort_r(order, v->nedges, sizeof(*order), table_order, (void *)v);
	fprintf(out, "%-*s  %-*s  %*s  %*s  %*s  %*s\n", w_src, "SOURCE", w_dst, "TARGET", w_port,
		"PORT", w_tx, "TX", w_rx, "RX", w_conns, "CONNS");
	for (size_t i = 0; i < v->nedges; i++) {
		const struct graph_edge *e = &v->edges[order[i]];

		table_port(e, port, sizeof(port));
		graph_human_bytes(e->tx_bytes, tx, sizeof(tx));
		graph_human_bytes(e->rx_bytes, rx, sizeof(rx));
		fprintf(out, "%-*s  %-*s  %*s  %*s  %*s  %*llu\n", w_src,
			v->vertices[e->source].label, w_dst, v->vertices[e->target].label, w_port,
			port, w_tx, tx, w_rx, rx, w_conns, (unsigned long long)e->connections);
	}
	free(order);
	return ferror(out) ? -EIO : 0;
}

/* A DOT quoted string: quotes and backslashes escaped, control bytes and bytes that are not
 * UTF-8 as '?' (dot reads UTF-8). */
static void dot_put_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', out);
	while (*p) {
		size_t n = *p >= 0x80 ? utf8_length(p) : 1;

		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f || !n)
			fputc('?', out);
		else
			fwrite(p, 1, n, out);
		p += n ? n : 1;
	}
	fputc('"', out);
}

static void dot_put_vertex(FILE *out, const struct graph_vertex *v, const char *indent)
{
	fputs(indent, out);
	dot_put_string(out, v->id);
	fputs(" [label=", out);
	dot_put_string(out, v->label);
	if (v->kind == GRAPH_VERTEX_EXTERNAL)
		fputs(", shape=ellipse, style=dashed", out);
	fputs("];\n", out);
}

static bool same_host_process(const struct graph_vertex *a, const struct graph_vertex *b)
{
	return a->kind == GRAPH_VERTEX_PROCESS && b->kind == GRAPH_VERTEX_PROCESS &&
	       !strcmp(a->host, b->host);
}

/*
 * Process vertices are grouped in a cluster per host; an edge's width grows with the log of
 * its bytes, from 1 to 5 for the busiest.
 */
int graph_write_dot(const struct graph_view *v, FILE *out)
{
	double top = 0;

	fputs("digraph plumb {\n\tgraph [rankdir=LR];\n\tnode [shape=box];\n", out);
	for (size_t i = 0; i < v->nvertices; i++) {
		const struct graph_vertex *x = &v->vertices[i];
		bool first, last;

		if (x->kind != GRAPH_VERTEX_PROCESS) {
			dot_put_vertex(out, x, "\t");
			continue;
		}
		/* sorted by id, which starts with the host: a host's vertices are a run */
		first = !i || !same_host_process(&v->vertices[i - 1], x);
		last = i + 1 == v->nvertices || !same_host_process(&v->vertices[i + 1], x);
		if (first) {
			fprintf(out, "\tsubgraph cluster_%zu {\n\t\tlabel=", i);
			dot_put_string(out, x->host);
			fputs(";\n", out);
		}
		dot_put_vertex(out, x, "\t\t");
		if (last)
			fputs("\t}\n", out);
	}
	for (size_t i = 0; i < v->nedges; i++)
		top = fmax(top, (double)edge_bytes(&v->edges[i]));
	for (size_t i = 0; i < v->nedges; i++) {
		const struct graph_edge *e = &v->edges[i];
		double bytes = (double)edge_bytes(e);
		char human[32], label[64], port[24];

		graph_human_bytes(edge_bytes(e), human, sizeof(human));
		table_port(e, port, sizeof(port));
		snprintf(label, sizeof(label), ":%s %s", port, human);
		fputc('\t', out);
		dot_put_string(out, v->vertices[e->source].id);
		fputs(" -> ", out);
		dot_put_string(out, v->vertices[e->target].id);
		fputs(" [label=", out);
		dot_put_string(out, label);
		fprintf(out, ", penwidth=%.2f];\n",
			top > 0 ? 1 + 4 * log1p(bytes) / log1p(top) : 1);
	}
	fputs("}\n", out);
	return ferror(out) ? -EIO : 0;
}
