// SPDX-License-Identifier: GPL-2.0
/*
 * plumb graph's model (docs/graph.md): agent documents and Prometheus results in, the join,
 * the projections and the writers out. Fixtures are JSON written with ' for " (see json()).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <json-c/json.h>

#include "analysis/graph.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ERR_LEN	      512
#define MAX_DOCS      4
#define MAX_EDGES     16

/* ---- fixtures ---- */

/* The fixture with each ' turned into ": JSON in C strings without a wall of backslashes. */
static char *json(const char *fixture)
{
	char *s = strdup(fixture);

	assert_non_null(s);
	for (char *p = s; *p; p++)
		if (*p == '\'')
			*p = '"';
	return s;
}

/* The fixtures, laid out as the JSON they make. */
/* clang-format off */
#define DOC(host, addrs, procs, ends) \
	"{'version': 1, 'host': '" host "', 'addresses': [" addrs "], " \
	"'processes': [" procs "], 'ends': [" ends "]}"
#define PROC(pid, comm, workload) \
	"{'pid': " #pid ", 'comm': '" comm "', 'exe': '/usr/bin/" comm "', " \
	"'cgroup': '/system.slice/" comm ".service', 'workload': '" workload "'}"
#define END(pid, role, local, peer, port, tx, rx, conns, peer_pid) \
	ENDP("tcp", pid, role, local, peer, port, tx, rx, conns, peer_pid)
#define ENDP(proto, pid, role, local, peer, port, tx, rx, conns, peer_pid) \
	"{'pid': " #pid ", 'role': '" role "', 'protocol': '" proto "', " \
	"'local_addr': '" local "', 'peer_addr': '" peer "', 'port': " #port ", " \
	"'tx_bytes': " #tx ", 'rx_bytes': " #rx ", 'connections': " #conns ", " \
	"'peer_pid': " #peer_pid "}"
#define LONG_PATH /* 512 characters */ \
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
/* two items of a list */
#define TWO(a, b) a ", " b

/* hostA (10.77.0.1, fd77::1) runs curl; hostB (10.77.0.2, fd77::2) nginx and nginx2 */
#define HOST_A(ends) \
	DOC("hostA", "'10.77.0.1', 'fd77::1'", PROC(4242, "curl", "job"), ends)
#define HOST_B(ends) \
	DOC("hostB", "'10.77.0.2', 'fd77:0:0::2'", \
	    PROC(77, "nginx", "systemd/nginx.service") ", " PROC(78, "nginx2", "web"), ends)
/* one host: psql and postgres, app and redis */
#define LOCAL(ends) \
	DOC("hostA", "'10.77.0.1'", \
	    PROC(5000, "psql", "") ", " PROC(5001, "postgres", "db") ", " \
	    PROC(6000, "app", "") ", " PROC(6001, "redis", ""), ends)
/* clang-format on */

struct want_edge {
	const char *source, *target;
	const char *port; /* as the table writes it: "80" (tcp), "53/udp", "unix" (no port) */
	uint64_t tx, rx, conns;
};

struct graph_case {
	const char *name;
	const char *docs[MAX_DOCS];
	enum graph_projection projection;
	struct want_edge edges[MAX_EDGES]; /* all of them: no other edge may be there */
};

/* ---- helpers ---- */

static struct graph *graph_of(const char *const *docs, size_t n)
{
	struct graph *g = graph_new();
	char err[ERR_LEN] = "", source[32];

	assert_non_null(g);
	for (size_t i = 0; i < n && docs[i]; i++) {
		char *text = json(docs[i]);
		int ret;

		snprintf(source, sizeof(source), "doc%zu", i);
		ret = graph_add_agent(g, text, strlen(text), source, err, sizeof(err));
		free(text);
		if (ret)
			fail_msg("fixture doc %zu refused: %d %s", i, ret, err);
	}
	return g;
}

static struct graph_view *build(const struct graph *g, enum graph_projection p)
{
	struct graph_view *v = NULL;
	char err[ERR_LEN] = "";
	int ret = graph_build(g, p, &v, err, sizeof(err));

	if (ret || !v)
		fail_msg("graph_build: %d %s", ret, err);
	return v;
}

static const struct graph_vertex *vertex_by_id(const struct graph_view *v, const char *id)
{
	for (size_t i = 0; i < v->nvertices; i++)
		if (!strcmp(v->vertices[i].id, id))
			return &v->vertices[i];
	return NULL;
}

/* An edge's port as docs/graph.md §6 says the table writes it. */
static const char *port_of(const struct graph_edge *e)
{
	static char buf[32];

	if (!strcmp(e->protocol, "tcp"))
		snprintf(buf, sizeof(buf), "%u", e->port);
	else if (e->port)
		snprintf(buf, sizeof(buf), "%u/%s", e->port, e->protocol);
	else
		snprintf(buf, sizeof(buf), "%s", e->protocol);
	return buf;
}

static void print_edges(const struct graph_view *v)
{
	for (size_t i = 0; i < v->nedges; i++) {
		const struct graph_edge *e = &v->edges[i];

		print_error("    %s -> %s :%u %s tx %llu rx %llu conns %llu\n",
			    v->vertices[e->source].id, v->vertices[e->target].id, e->port,
			    e->protocol, (unsigned long long)e->tx_bytes,
			    (unsigned long long)e->rx_bytes, (unsigned long long)e->connections);
	}
}

/* Whether v has exactly the edges of want (up to the first with no source); says how not. */
static bool edges_are(const struct graph_view *v, const struct want_edge *want, const char *name)
{
	size_t n = 0;
	bool ok = true;

	while (n < MAX_EDGES && want[n].source)
		n++;
	for (size_t i = 0; i < n; i++) {
		const struct want_edge *w = &want[i];
		const struct graph_edge *found = NULL;

		for (size_t k = 0; k < v->nedges && !found; k++) {
			const struct graph_edge *e = &v->edges[k];

			if (!strcmp(v->vertices[e->source].id, w->source) &&
			    !strcmp(v->vertices[e->target].id, w->target) &&
			    !strcmp(port_of(e), w->port))
				found = e;
		}
		if (!found) {
			print_error("%s: no edge %s -> %s :%s\n", name, w->source, w->target,
				    w->port);
			ok = false;
		} else if (found->tx_bytes != w->tx || found->rx_bytes != w->rx ||
			   found->connections != w->conns) {
			print_error("%s: edge %s -> %s :%s: expected tx %llu rx %llu conns %llu, "
				    "got tx %llu rx %llu conns %llu\n",
				    name, w->source, w->target, w->port, (unsigned long long)w->tx,
				    (unsigned long long)w->rx, (unsigned long long)w->conns,
				    (unsigned long long)found->tx_bytes,
				    (unsigned long long)found->rx_bytes,
				    (unsigned long long)found->connections);
			ok = false;
		}
	}
	if (v->nedges != n) {
		print_error("%s: expected %zu edges, got %zu\n", name, n, v->nedges);
		ok = false;
	}
	if (!ok)
		print_edges(v);
	return ok;
}

static int run_cases(const struct graph_case *cases, size_t n)
{
	int failures = 0;

	for (size_t i = 0; i < n; i++) {
		struct graph *g = graph_of(cases[i].docs, MAX_DOCS);
		struct graph_view *v = build(g, cases[i].projection);

		if (!edges_are(v, cases[i].edges, cases[i].name))
			failures++;
		/* every edge's ends are vertices; every vertex has an edge */
		for (size_t k = 0; k < v->nedges; k++)
			assert_true(v->edges[k].source < v->nvertices &&
				    v->edges[k].target < v->nvertices);
		for (size_t k = 0; k < v->nvertices; k++) {
			bool used = false;

			for (size_t e = 0; e < v->nedges; e++)
				used |= v->edges[e].source == k || v->edges[e].target == k;
			if (!used) {
				print_error("%s: vertex %s has no edge\n", cases[i].name,
					    v->vertices[k].id);
				failures++;
			}
		}
		graph_view_free(v);
		graph_free(g);
	}
	return failures;
}

static char *write_to_string(int (*writer)(const struct graph_view *, FILE *),
			     const struct graph_view *v)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(writer(v, f), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static bool one_printable_line(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isprint((unsigned char)*s))
			return false;
	return true;
}

/* ---- the join (§3) ---- */

static void test_join(void **state)
{
	static const struct graph_case cases[] = {
		{ "two hosts, the addresses match",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1200, 53000, 3, 0)),
		    HOST_B(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 53001, 1199, 3, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  /* the client end's counts, not the server's */
		  { { "hostA/4242", "hostB/77", "80", 1200, 53000, 3 } } },
		{ "two hosts, the server saw the client IPv4-mapped",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1200, 53000, 3, 0)),
		    HOST_B(END(77, "server", "10.77.0.2", "::ffff:10.77.0.1", 80, 53000, 1200, 3,
			       0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "80", 1200, 53000, 3 } } },
		{ "two hosts over IPv6, addresses written differently",
		  { HOST_A(END(4242, "client", "fd77::1", "fd77::2", 443, 10, 20, 1, 0)),
		    HOST_B(END(77, "server", "fd77::2", "fd77:0::1", 443, 20, 10, 1, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "443", 10, 20, 1 } } },
		{ "the agents listed the other way round",
		  { HOST_B(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 53000, 1200, 3, 0)),
		    HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1200, 53000, 3, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "80", 1200, 53000, 3 } } },
		{ "another port: external vertices both ways",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 8080, 5, 6, 1, 0)),
		    HOST_B(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 53000, 1200, 3, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "external/10.77.0.2", "8080", 5, 6, 1 },
		    /* the server's tx is the server-to-client direction: the edge's rx */
		    { "external/10.77.0.1", "hostB/77", "80", 1200, 53000, 3 } } },
		{ "a peer no agent owns, a client no agent saw",
		  { HOST_A(END(4242, "client", "10.77.0.1", "93.184.216.34", 443, 700, 4000000, 1,
			       0)),
		    HOST_B(END(77, "server", "10.77.0.2", "10.9.9.9", 80, 100, 20, 1, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "external/93.184.216.34", "443", 700, 4000000, 1 },
		    { "external/10.9.9.9", "hostB/77", "80", 20, 100, 1 } } },
		{ "the server saw another client address: no match",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1, 2, 1, 0)),
		    HOST_B(END(77, "server", "10.77.0.2", "10.77.0.3", 80, 2, 1, 1, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "external/10.77.0.2", "80", 1, 2, 1 },
		    { "external/10.77.0.3", "hostB/77", "80", 1, 2, 1 } } },
		{ "the server saw another address of the client's host: not this end",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1, 2, 1, 0)),
		    HOST_B(END(77, "server", "fd77::2", "fd77::1", 80, 2, 1, 1, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "external/10.77.0.2", "80", 1, 2, 1 },
		    { "external/fd77::1", "hostB/77", "80", 1, 2, 1 } } },
		{ "a server on the client's own host is not the peer's",
		  { HOST_A(TWO(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1, 2, 1, 0),
			       END(4242, "server", "10.77.0.1", "10.77.0.1", 80, 4, 3, 1, 0))),
		    HOST_B(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 2, 1, 1, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "80", 1, 2, 1 },
		    { "external/10.77.0.1", "hostA/4242", "80", 3, 4, 1 } } },
		{ "same host, paired by peer_pid",
		  { LOCAL(TWO(
			  END(5000, "client", "127.0.0.1", "127.0.0.1", 5432, 300, 9000, 2, 5001),
			  END(5001, "server", "127.0.0.1", "127.0.0.1", 5432, 9001, 299, 2,
			      5000))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/5000", "hostA/5001", "5432", 300, 9000, 2 } } },
		{ "a server end with a peer_pid adds nothing",
		  { LOCAL(END(5001, "server", "127.0.0.1", "127.0.0.1", 5432, 9001, 299, 2,
			      5000)) },
		  GRAPH_PROJECT_PROCESS,
		  { { 0 } } },
		{ "same host, loopback, no peer_pid",
		  { LOCAL(TWO(END(6000, "client", "127.0.0.1", "127.0.0.1", 6379, 10, 20, 1, 0),
			      END(6001, "server", "127.0.0.1", "127.0.0.1", 6379, 20, 10, 1, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/6000", "hostA/6001", "6379", 10, 20, 1 } } },
		{ "same host, to its own non-loopback address",
		  { LOCAL(TWO(END(6000, "client", "10.77.0.1", "10.77.0.1", 6379, 10, 20, 1, 0),
			      END(6001, "server", "10.77.0.1", "10.77.0.1", 6379, 20, 10, 1, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/6000", "hostA/6001", "6379", 10, 20, 1 } } },
		{ "loopback does not reach another host",
		  { HOST_A(END(4242, "client", "127.0.0.1", "127.0.0.1", 6379, 10, 20, 1, 0)),
		    HOST_B(END(77, "server", "127.0.0.1", "127.0.0.1", 6379, 20, 10, 1, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "external/127.0.0.1", "6379", 10, 20, 1 },
		    { "external/127.0.0.1", "hostB/77", "6379", 10, 20, 1 } } },
		{ "two servers share a port: proportional split",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1001, 2002, 7, 0)),
		    HOST_B(TWO(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 300, 100, 1, 0),
			       END(78, "server", "10.77.0.2", "10.77.0.1", 80, 100, 200, 2, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  /* tx 1001 by rx 100:200 = 333.7 + 667.3; rx 2002 by tx 300:100 = 1501.5 +
		   * 500.5 (a tie: the first); conns 7 by 1:2 = 2.3 + 4.7 */
		  { { "hostA/4242", "hostB/77", "80", 334, 1502, 2 },
		    { "hostA/4242", "hostB/78", "80", 667, 500, 5 } } },
		{ "servers without byte counts: the split goes by connections",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 9, 0, 3, 0)),
		    HOST_B(TWO(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 0, 0, 1, 0),
			       END(78, "server", "10.77.0.2", "10.77.0.1", 80, 0, 0, 2, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "80", 3, 0, 1 },
		    { "hostA/4242", "hostB/78", "80", 6, 0, 2 } } },
		{ "servers that counted nothing: an even split",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 5, 2, 2, 0)),
		    HOST_B(TWO(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 0, 0, 0, 0),
			       END(78, "server", "10.77.0.2", "10.77.0.1", 80, 0, 0, 0, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "80", 3, 1, 1 },
		    { "hostA/4242", "hostB/78", "80", 2, 1, 1 } } },
		{ "unix, paired by peer_pid",
		  { LOCAL(TWO(ENDP("unix", 6000, "client", "", "unix:/run/redis.sock", 0, 10, 20, 1,
				   6001),
			      ENDP("unix", 6001, "server", "", "unix:/run/redis.sock", 0, 20, 10, 1,
				   6000))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/6000", "hostA/6001", "unix", 10, 20, 1 } } },
		{ "unix without a peer_pid: external vertices by the socket's address",
		  { LOCAL(TWO(ENDP("unix", 6000, "client", "", "unix:@bus", 0, 1, 2, 1, 0),
			      ENDP("unix", 6001, "server", "", "unix:", 0, 3, 4, 1, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/6000", "external/unix:@bus", "unix", 1, 2, 1 },
		    { "external/unix:", "hostA/6001", "unix", 4, 3, 1 } } },
		{ "unix addresses, each its own external vertex",
		  { LOCAL(TWO(TWO(ENDP("unix", 6000, "client", "", "unix:@a", 0, 1, 1, 1, 0),
				  ENDP("unix", 6000, "client", "", "unix:@b", 0, 2, 2, 1, 0)),
			      ENDP("unix", 5000, "client", "", "unix:@b", 0, 3, 3, 1, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/6000", "external/unix:@a", "unix", 1, 1, 1 },
		    { "hostA/6000", "external/unix:@b", "unix", 2, 2, 1 },
		    { "hostA/5000", "external/unix:@b", "unix", 3, 3, 1 } } },
		{ "udp across hosts, the client's local address unspecified",
		  { HOST_A(ENDP("udp", 4242, "client", "", "10.77.0.2", 53, 100, 200, 1, 0)),
		    HOST_B(ENDP("udp", 77, "server", "10.77.0.2", "10.77.0.1", 53, 200, 100, 1,
				0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "53/udp", 100, 200, 1 } } },
		{ "tcp and udp on one port do not match",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 53, 1, 2, 1, 0)),
		    HOST_B(ENDP("udp", 77, "server", "10.77.0.2", "10.77.0.1", 53, 2, 1, 1, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "external/10.77.0.2", "53", 1, 2, 1 },
		    { "external/10.77.0.1", "hostB/77", "53/udp", 1, 2, 1 } } },
		/* a UDP server end with peer_addr "": datagrams read without their source */
		{ "udp read without its source: the client's, the rest from an unknown peer",
		  { HOST_A(ENDP("udp", 4242, "client", "", "10.77.0.2", 514, 100, 0, 1, 0)),
		    HOST_B(ENDP("udp", 77, "server", "10.77.0.2", "", 514, 0, 150, 2, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "514/udp", 100, 0, 1 },
		    { "external/unknown", "hostB/77", "514/udp", 50, 0, 1 } } },
		{ "udp read without its source, no client seen",
		  { HOST_B(ENDP("udp", 77, "server", "10.77.0.2", "", 514, 5, 150, 2, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "external/unknown", "hostB/77", "514/udp", 150, 5, 2 } } },
		{ "a server end that saw the client's address comes before one that saw none",
		  { HOST_A(ENDP("udp", 4242, "client", "", "10.77.0.2", 514, 100, 0, 1, 0)),
		    HOST_B(TWO(
			    ENDP("udp", 77, "server", "10.77.0.2", "10.77.0.1", 514, 0, 100, 1, 0),
			    ENDP("udp", 78, "server", "10.77.0.2", "", 514, 0, 40, 1, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "514/udp", 100, 0, 1 },
		    { "external/unknown", "hostB/78", "514/udp", 40, 0, 1 } } },
		{ "two clients take all a source-less server end counted",
		  { LOCAL(TWO(TWO(ENDP("udp", 5000, "client", "", "127.0.0.1", 9000, 10, 0, 1, 0),
				  ENDP("udp", 6000, "client", "", "127.0.0.1", 9000, 20, 0, 1, 0)),
			      ENDP("udp", 5001, "server", "127.0.0.1", "", 9000, 0, 30, 2, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/5000", "hostA/5001", "9000/udp", 10, 0, 1 },
		    { "hostA/6000", "hostA/5001", "9000/udp", 20, 0, 1 } } },
		{ "two source-less server processes share a client by what each read",
		  { HOST_A(ENDP("udp", 4242, "client", "", "10.77.0.2", 514, 20, 0, 2, 0)),
		    HOST_B(TWO(ENDP("udp", 77, "server", "10.77.0.2", "", 514, 0, 30, 1, 0),
			       ENDP("udp", 78, "server", "10.77.0.2", "", 514, 0, 10, 1, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  /* 20 split 3:1; what each read beyond its part came from an unknown client */
		  { { "hostA/4242", "hostB/77", "514/udp", 15, 0, 1 },
		    { "hostA/4242", "hostB/78", "514/udp", 5, 0, 1 },
		    { "external/unknown", "hostB/77", "514/udp", 15, 0, 0 },
		    { "external/unknown", "hostB/78", "514/udp", 5, 0, 0 } } },
		{ "the unspecified addresses, as the agent's metrics write an unknown peer",
		  { HOST_A(TWO(ENDP("udp", 4242, "client", "", "10.77.0.2", 514, 100, 0, 1, 0),
			       ENDP("udp", 4242, "client", "", "fd77::2", 515, 10, 0, 1, 0))),
		    HOST_B(TWO(ENDP("udp", 77, "server", "10.77.0.2", "0.0.0.0", 514, 0, 100, 1, 0),
			       ENDP("udp", 77, "server", "fd77::2", "::", 515, 0, 10, 1, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "514/udp", 100, 0, 1 },
		    { "hostA/4242", "hostB/77", "515/udp", 10, 0, 1 } } },
		{ "a client end whose peer is unknown",
		  { HOST_A(ENDP("udp", 4242, "client", "", "", 53, 7, 0, 1, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "external/unknown", "53/udp", 7, 0, 1 } } },
		{ "two server ends of one process are one server vertex",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1001, 2002, 7, 0)),
		    HOST_B(TWO(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 300, 100, 1, 0),
			       END(77, "server", "fd77::2", "10.77.0.1", 80, 100, 200, 2, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "80", 1001, 2002, 7 } } },
		{ "an end that counted nothing is no edge",
		  { HOST_A(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 0, 0, 0, 0)),
		    HOST_B(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 0, 0, 0, 0)) },
		  GRAPH_PROJECT_PROCESS,
		  { { 0 } } },
		{ "ends of one process and peer sum into one edge",
		  { HOST_A(TWO(END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1, 2, 1, 0),
			       END(4242, "client", "fd77::1", "fd77::2", 80, 10, 20, 1, 0))),
		    HOST_B(TWO(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 2, 1, 1, 0),
			       END(77, "server", "fd77::2", "fd77::1", 80, 20, 10, 1, 0))) },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/4242", "hostB/77", "80", 11, 22, 2 } } },
	};
	int failures;

	(void)state;
	failures = run_cases(cases, ARRAY_SIZE(cases));
	if (failures)
		fail_msg("%d of %zu join cases failed", failures, ARRAY_SIZE(cases));
}

/* A pid that "processes" does not list still gets a vertex, comm "?". */
static void test_unlisted_pid(void **state)
{
	static const char *const docs[] = { DOC(
		"hostA", "'10.77.0.1'", PROC(5000, "psql", ""),
		END(5000, "client", "127.0.0.1", "127.0.0.1", 5432, 1, 2, 1, 5999)) };
	struct graph *g = graph_of(docs, 1);
	struct graph_view *v = build(g, GRAPH_PROJECT_PROCESS);
	const struct graph_vertex *x = vertex_by_id(v, "hostA/5999");

	(void)state;
	assert_int_equal(v->nedges, 1);
	assert_non_null(x);
	assert_string_equal(x->comm, "?");
	assert_string_equal(x->label, "?/5999@hostA");
	assert_int_equal(x->pid, 5999);
	graph_view_free(v);
	graph_free(g);
}

/* ---- graph_split: the rounding of the proportional split ---- */

static void test_split(void **state)
{
	static const struct {
		uint64_t total;
		size_t n;
		uint64_t weight[4], part[4];
	} cases[] = {
		{ 10, 3, { 1, 1, 1 }, { 4, 3, 3 } },
		{ 1001, 2, { 100, 200 }, { 334, 667 } },
		{ 2002, 2, { 300, 100 }, { 1502, 500 } },
		{ 7, 2, { 1, 2 }, { 2, 5 } },
		{ 0, 2, { 5, 5 }, { 0, 0 } },
		{ 5, 2, { 0, 0 }, { 3, 2 } }, /* all 0: evenly */
		{ 5, 2, { 0, 1 }, { 0, 5 } },
		{ 3, 4, { 1, 1, 1, 1 }, { 1, 1, 1, 0 } },
		{ 1, 1, { 0 }, { 1 } },
		{ 100, 3, { 1, 0, 1 }, { 50, 0, 50 } },
		{ 2, 3, { 1, 1, 1 }, { 1, 1, 0 } },
		{ UINT64_MAX, 2, { UINT64_MAX, UINT64_MAX }, { 1ull << 63, (1ull << 63) - 1 } },
		{ UINT64_MAX, 3, { UINT64_MAX, 1, 0 }, { UINT64_MAX - 1, 1, 0 } },
		{ 1000, 3, { UINT64_MAX, UINT64_MAX, UINT64_MAX }, { 334, 333, 333 } },
	};
	uint64_t part[4], x = 88172645463325252ull;
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_int_equal(graph_split(cases[i].total, cases[i].weight, cases[i].n, part), 0);
		if (memcmp(part, cases[i].part, cases[i].n * sizeof(*part))) {
			print_error("split case %zu: total %llu: got", i,
				    (unsigned long long)cases[i].total);
			for (size_t k = 0; k < cases[i].n; k++)
				print_error(" %llu", (unsigned long long)part[k]);
			print_error("\n");
			failures++;
		}
	}
	/* random cases: the parts add up exactly, each its exact share rounded down or up (in
	 * integers: long double is a double under valgrind); weights below 2^62, so that the
	 * sum of 4 stays below 2^64 */
	for (int round = 0; round < 2000; round++) {
		uint64_t weight[4], total, sum = 0;
		unsigned __int128 wsum = 0;
		size_t n;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64: the same cases each run */
		n = 1 + x % 4;
		total = x >> (x % 64);
		for (size_t k = 0; k < n; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			weight[k] = x >> (2 + x % 62);
			wsum += weight[k];
		}
		assert_int_equal(graph_split(total, weight, n, part), 0);
		for (size_t k = 0; k < n; k++) {
			unsigned __int128 floor =
				wsum ? (unsigned __int128)total * weight[k] / wsum : total / n;

			sum += part[k];
			if (part[k] != floor && part[k] != floor + 1) {
				print_error("split round %d: part %llu, exact share rounded down "
					    "%llu\n",
					    round, (unsigned long long)part[k],
					    (unsigned long long)floor);
				failures++;
			}
		}
		if (sum != total) {
			print_error("split round %d: parts add up to %llu, not %llu\n", round,
				    (unsigned long long)sum, (unsigned long long)total);
			failures++;
		}
	}
	assert_int_equal(graph_split(1, part, 0, part), -EINVAL);
	if (failures)
		fail_msg("%d split checks failed", failures);
}

/* ---- projections (§4) ---- */

/* hostA: two workers (one workload), psql paired with postgres; hostB: nginx */
/* clang-format off */
#define PROJ_A \
	DOC("hostA", "'10.0.0.1'", \
	    PROC(10, "worker", "systemd/worker.service") ", " \
	    PROC(11, "worker", "systemd/worker.service") ", " \
	    PROC(12, "psql", "") ", " \
	    PROC(13, "postgres", "systemd/postgresql.service"), \
	    END(10, "client", "10.0.0.1", "10.0.0.2", 80, 100, 1000, 1, 0) ", " \
	    END(11, "client", "10.0.0.1", "10.0.0.2", 80, 200, 2000, 2, 0) ", " \
	    END(10, "client", "10.0.0.1", "8.8.8.8", 53, 1, 2, 1, 0) ", " \
	    END(12, "client", "127.0.0.1", "127.0.0.1", 5432, 5, 50, 1, 13))
#define PROJ_B \
	DOC("hostB", "'10.0.0.2'", PROC(77, "nginx", "systemd/nginx.service"), \
	    END(77, "server", "10.0.0.2", "10.0.0.1", 80, 3000, 300, 3, 0))
/* clang-format on */

static void test_projections(void **state)
{
	static const struct graph_case cases[] = {
		{ "process",
		  { PROJ_A, PROJ_B },
		  GRAPH_PROJECT_PROCESS,
		  { { "hostA/10", "hostB/77", "80", 100, 1000, 1 },
		    { "hostA/11", "hostB/77", "80", 200, 2000, 2 },
		    { "hostA/10", "external/8.8.8.8", "53", 1, 2, 1 },
		    { "hostA/12", "hostA/13", "5432", 5, 50, 1 } } },
		{ "type: workload, else comm; coinciding edges summed",
		  { PROJ_A, PROJ_B },
		  GRAPH_PROJECT_TYPE,
		  { { "systemd/worker.service", "systemd/nginx.service", "80", 300, 3000, 3 },
		    { "systemd/worker.service", "external/8.8.8.8", "53", 1, 2, 1 },
		    { "psql", "systemd/postgresql.service", "5432", 5, 50, 1 } } },
		{ "host: edges within a host dropped",
		  { PROJ_A, PROJ_B },
		  GRAPH_PROJECT_HOST,
		  { { "hostA", "hostB", "80", 300, 3000, 3 },
		    { "hostA", "external/8.8.8.8", "53", 1, 2, 1 } } },
	};
	struct graph *g = graph_of(cases[0].docs, 2);
	struct graph_view *v;
	int failures;

	(void)state;
	failures = run_cases(cases, ARRAY_SIZE(cases));
	if (failures)
		fail_msg("%d of %zu projection cases failed", failures, ARRAY_SIZE(cases));

	/* what each kind of vertex carries */
	v = build(g, GRAPH_PROJECT_PROCESS);
	assert_int_equal(v->vertices[0].kind, GRAPH_VERTEX_EXTERNAL); /* sorted by id */
	assert_string_equal(v->vertices[0].id, "external/8.8.8.8");
	assert_string_equal(v->vertices[0].host, "8.8.8.8");
	assert_string_equal(v->vertices[0].comm, "?");
	assert_int_equal(v->vertices[0].pid, 0);
	assert_string_equal(vertex_by_id(v, "hostA/13")->workload, "systemd/postgresql.service");
	assert_string_equal(vertex_by_id(v, "hostA/13")->exe, "/usr/bin/postgres");
	assert_string_equal(vertex_by_id(v, "hostA/13")->cgroup, "/system.slice/postgres.service");
	assert_string_equal(vertex_by_id(v, "hostA/13")->label, "postgres/13@hostA");
	assert_int_equal(v->window_seconds, -1);
	for (size_t i = 1; i < v->nvertices; i++)
		assert_true(strcmp(v->vertices[i - 1].id, v->vertices[i].id) < 0);
	graph_view_free(v);
	v = build(g, GRAPH_PROJECT_TYPE);
	assert_int_equal(vertex_by_id(v, "psql")->kind, GRAPH_VERTEX_TYPE);
	assert_null(vertex_by_id(v, "psql")->host);
	graph_view_free(v);
	v = build(g, GRAPH_PROJECT_HOST);
	assert_int_equal(vertex_by_id(v, "hostB")->kind, GRAPH_VERTEX_HOST);
	assert_string_equal(vertex_by_id(v, "hostB")->host, "hostB");
	graph_view_free(v);
	graph_free(g);
}

/* ---- agent documents: what is refused, and that a refusal leaves the graph as it was ---- */

static void test_agent_malformed(void **state)
{
	static const struct {
		const char *doc;
		const char *err;
	} cases[] = {
		{ "", "not JSON: the document is empty" },
		{ "{", "not JSON: the document ends early" },
		{ "{'version': 1,", "not JSON" },
		{ "{]", "not JSON" },
		{ "[]", "not a JSON object" },
		{ "42", "not a JSON object" },
		{ "{} x", "trailing data" },
		{ "{'host': 'hostA'}", "has no \"version\"" },
		{ DOC("hostA", "", "", "") "{}", "trailing data" },
		{ "{'version': 2, 'host': 'hostA', 'addresses': [], 'processes': [], 'ends': []}",
		  "version 2 is not supported" },
		{ "{'version': '1', 'host': 'hostA'}", "version is not an integer" },
		{ "{'version': 1, 'addresses': [], 'processes': [], 'ends': []}",
		  "has no \"host\"" },
		{ DOC("", "", "", ""), "\"host\" is empty" },
		{ "{'version': 1, 'host': 7, 'addresses': [], 'processes': [], 'ends': []}",
		  "host is not a string" },
		{ "{'version': 1, 'host': 'hostA', 'processes': [], 'ends': []}",
		  "has no \"addresses\"" },
		{ "{'version': 1, 'host': 'hostA', 'addresses': {}, 'processes': [], 'ends': []}",
		  "\"addresses\" is not an array" },
		{ DOC("hostA", "'nope'", "", ""), "addresses[0] is not an IP address" },
		{ DOC("hostA", "'10.0.0.1', 7", "", ""), "addresses[1] is not an IP address" },
		{ DOC("hostA", "'fe80::1%eth0'", "", ""), "addresses[0] is not an IP address" },
		{ DOC("hostA", "'unix:/run/x.sock'", "", ""), "addresses[0] is not an IP address" },
		{ DOC("hostA", "", "", ENDP("unix", 1, "client", "", "unix", 0, 1, 1, 1, 0)),
		  "ends[0].peer_addr \"unix\" is not an IP or unix: address" },
		{ DOC("hostA", "", "",
		      ENDP("unix", 1, "client", "", "unix:/" LONG_PATH, 0, 1, 1, 1, 0)),
		  "ends[0].peer_addr \"unix://aaaaaaaaaaaaaaaa" },
		{ "{'version': 1, 'host': 'hostA', 'addresses': [], 'ends': []}",
		  "has no \"processes\"" },
		{ DOC("hostA", "", "7", ""), "processes[0] is not an object" },
		{ DOC("hostA", "", "{'comm': 'x'}", ""), "processes[0] has no \"pid\"" },
		{ DOC("hostA", "", "{'pid': -1}", ""), "processes[0].pid is not an integer" },
		{ DOC("hostA", "", "{'pid': '12'}", ""), "processes[0].pid is not an integer" },
		{ DOC("hostA", "", "{'pid': 1.5}", ""), "processes[0].pid is not an integer" },
		{ DOC("hostA", "", "{'pid': 4294967296}", ""), "processes[0].pid" },
		{ DOC("hostA", "", "{'pid': 1, 'comm': 5}", ""),
		  "processes[0].comm is not a string" },
		{ DOC("hostA", "", PROC(1, "a", "") ", " PROC(1, "b", ""), ""),
		  "pid 1 is listed twice" },
		{ "{'version': 1, 'host': 'hostA', 'addresses': [], 'processes': []}",
		  "has no \"ends\"" },
		{ DOC("hostA", "", "", "[]"), "ends[0] is not an object" },
		{ DOC("hostA", "", "", "{'pid': 1}"), "ends[0] has no \"role\"" },
		{ DOC("hostA", "", "", END(1, "peer", "", "10.0.0.2", 80, 1, 1, 1, 0)),
		  "ends[0].role is \"peer\", not client or server" },
		{ DOC("hostA", "", "", END(1, "client", "", "10.0.0.2", 65536, 1, 1, 1, 0)),
		  "ends[0].port is not an integer in 0..65535" },
		{ DOC("hostA", "", "", END(1, "client", "", "10.0.0.2", -1, 1, 1, 1, 0)),
		  "ends[0].port" },
		{ DOC("hostA", "", "", END(1, "client", "", "10.0.0.2", 80, 1.5, 1, 1, 0)),
		  "ends[0].tx_bytes is not an integer" },
		{ DOC("hostA", "", "", END(1, "client", "", "10.0.0.2", 80, 1, -2, 1, 0)),
		  "ends[0].rx_bytes is not an integer" },
		{ DOC("hostA", "", "", END(1, "client", "", "10.0.0.2", 80, 1, 1, '3', 0)),
		  "ends[0].connections is not an integer" },
		{ DOC("hostA", "", "", END(1, "client", "", "10.0.0.2", 80, 1, 1, [], 0)),
		  "ends[0].connections is not an integer" },
		{ DOC("hostA", "", "", END(1, "client", "", "10.0.0.2", 80, 1, 1, 1, -1)),
		  "ends[0].peer_pid is not an integer" },
		{ DOC("hostA", "", "", END(1, "client", "", "10.0.0.300", 80, 1, 1, 1, 0)),
		  "ends[0].peer_addr \"10.0.0.300\" is not an IP or unix: address" },
		/* only UDP peers may be unknown */
		{ DOC("hostA", "", "", END(1, "client", "", "", 80, 1, 1, 1, 0)),
		  "ends[0].peer_addr \"\" is not an IP or unix: address" },
		{ DOC("hostA", "", "", END(1, "server", "", "0.0.0.0", 80, 1, 1, 1, 0)),
		  "ends[0].peer_addr \"0.0.0.0\" is not an IP or unix: address" },
		{ DOC("hostA", "", "", END(1, "client", "here", "10.0.0.2", 80, 1, 1, 1, 0)),
		  "ends[0].local_addr \"here\" is not an IP or unix: address" },
		{ DOC("hostA", "", "",
		      "{'pid': 1, 'role': 'client', 'protocol': 'TCP', 'peer_addr': '10.0.0.2', "
		      "'port': 80, 'tx_bytes': 1, 'rx_bytes': 1, 'connections': 1}"),
		  "ends[0].protocol \"TCP\": not a protocol name" },
		{ DOC("hostA", "", "",
		      "{'pid': 1, 'role': 'client', 'peer_addr': '10.0.0.2', 'port': 80, "
		      "'rx_bytes': 1, 'connections': 1}"),
		  "ends[0] has no \"tx_bytes\"" },
		{ DOC("hostA", "", "",
		      TWO(TWO(END(1, "client", "", "10.0.0.2", 80, 1, 1, 1, 0),
			      END(1, "server", "", "10.0.0.2", 80, 1, 1, 1, 0)),
			  "5")),
		  "ends[2] is not an object" },
		{ "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
		  "]"
		  "]]]]]]]]]]]]]]]]]]]]]",
		  "not JSON: nesting too deep" },
		{ DOC("hostA", "", "", END(1, "a\\nb\\u0001", "", "10.0.0.2", 80, 1, 1, 1, 0)),
		  "ends[0].role is \"a?b?\"" }, /* one line whatever the document holds */
	};
	static const char *const good[] = { HOST_A(
		END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1, 2, 3, 0)) };
	struct graph *g = graph_new();
	int failures = 0;

	(void)state;
	assert_non_null(g);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[ERR_LEN] = "", *text = json(cases[i].doc);
		int ret = graph_add_agent(g, text, strlen(text), "http://a:9977/api/v1/graph", err,
					  sizeof(err));

		if (ret != -EINVAL || !one_printable_line(err) ||
		    strncmp(err, "http://a:9977/api/v1/graph: ", 28) ||
		    !strstr(err, cases[i].err)) {
			print_error("malformed case %zu (%s): expected -EINVAL and an error "
				    "containing \"%s\", got %d \"%s\"\n",
				    i, text, cases[i].err, ret, err);
			failures++;
		}
		free(text);
	}
	/* nothing of the refused documents stayed: hostA is still free, the only edges good's */
	{
		struct graph *g2 = graph_of(good, 1);
		struct graph_view *v2 = build(g2, GRAPH_PROJECT_PROCESS);
		char err[ERR_LEN] = "", *text = json(good[0]);
		struct graph_view *v;

		assert_int_equal(graph_add_agent(g, text, strlen(text), "good", err, sizeof(err)),
				 0);
		free(text);
		v = build(g, GRAPH_PROJECT_PROCESS);
		assert_int_equal(v->nedges, 1);
		assert_int_equal(v->nvertices, 2);
		assert_int_equal(v2->nedges, 1);
		assert_string_equal(v->vertices[v->edges[0].target].id, "external/10.77.0.2");
		graph_view_free(v);
		graph_view_free(v2);
		graph_free(g2);
	}
	graph_free(g);
	if (failures)
		fail_msg("%d of %zu malformed documents were not refused as expected", failures,
			 ARRAY_SIZE(cases));
}

/* A document that is not text: NUL bytes within its length. */
static void test_agent_nul_bytes(void **state)
{
	static const char doc[] = "{\"version\": 1,\0\"host\": \"x\"}";
	struct graph *g = graph_new();
	char err[ERR_LEN] = "";

	(void)state;
	assert_int_equal(graph_add_agent(g, doc, sizeof(doc) - 1, "s", err, sizeof(err)), -EINVAL);
	assert_true(one_printable_line(err));
	graph_free(g);
}

static void test_duplicate_host_and_mixed_sources(void **state)
{
	static const char *const a[] = { HOST_A(
		END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1, 2, 3, 0)) };
	struct graph *g = graph_of(a, 1);
	const char *body[GRAPH_PROM_QUERIES];
	size_t len[GRAPH_PROM_QUERIES];
	char err[ERR_LEN] = "", *text = json(a[0]);

	(void)state;
	assert_int_equal(graph_add_agent(g, text, strlen(text), "second", err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "second: host \"hostA\" is already in another source");
	for (int q = 0; q < GRAPH_PROM_QUERIES; q++) {
		body[q] = "{\"status\": \"success\", \"data\": {\"resultType\": \"vector\", "
			  "\"result\": []}}";
		len[q] = strlen(body[q]);
	}
	assert_int_equal(graph_add_prometheus(g, body, len, 300, "prom", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "one Prometheus source and no agents"));
	graph_free(g);

	g = graph_new();
	assert_int_equal(graph_add_prometheus(g, body, len, 300, "prom", err, sizeof(err)), 0);
	assert_int_equal(graph_add_agent(g, text, strlen(text), "agent", err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "agent: agents and Prometheus cannot be merged");
	graph_free(g);
	free(text);
}

/* Past the documented bounds the input is refused, before it costs more memory. */
static void test_limits(void **state)
{
	struct graph *g = graph_new();
	char err[ERR_LEN] = "", *doc;
	size_t n, len;

	(void)state;
	/* a body over 64 MiB is not parsed */
	len = GRAPH_MAX_BODY + 1;
	doc = malloc(len);
	assert_non_null(doc);
	memset(doc, ' ', len);
	doc[0] = '{';
	doc[len - 1] = '}';
	assert_int_equal(graph_add_agent(g, doc, len, "big", err, sizeof(err)), -E2BIG);
	assert_string_equal(err, "big: document over the limit of 64 MiB");
	assert_int_equal(graph_add_agent(g, doc, len - 1, "big", err, sizeof(err)), -EINVAL);
	free(doc);

	/* more ends than GRAPH_MAX_ENDS (the array's length is checked first) */
	n = GRAPH_MAX_ENDS + 1;
	doc = malloc(n * 2 + 256);
	assert_non_null(doc);
	len = (size_t)sprintf(doc, "{\"version\": 1, \"host\": \"h\", \"addresses\": [], "
				   "\"processes\": [], \"ends\": [0");
	for (size_t i = 1; i < n; i++) {
		doc[len++] = ',';
		doc[len++] = '0';
	}
	len += (size_t)sprintf(doc + len, "]}");
	assert_int_equal(graph_add_agent(g, doc, len, "many", err, sizeof(err)), -E2BIG);
	assert_string_equal(err, "many: more than 1000000 ends in all sources");
	/* and processes */
	len = (size_t)sprintf(doc, "{\"version\": 1, \"host\": \"h\", \"addresses\": [], "
				   "\"ends\": [], \"processes\": [0");
	for (size_t i = 1; i < n; i++) {
		doc[len++] = ',';
		doc[len++] = '0';
	}
	len += (size_t)sprintf(doc + len, "]}");
	assert_int_equal(graph_add_agent(g, doc, len, "many", err, sizeof(err)), -E2BIG);
	assert_string_equal(err, "many: more than 1000000 processes in all sources");
	free(doc);

	/* more addresses than GRAPH_MAX_ADDRESSES */
	doc = malloc(GRAPH_MAX_ADDRESSES * 16 + 256);
	assert_non_null(doc);
	len = (size_t)sprintf(doc, "{\"version\": 1, \"host\": \"h\", \"processes\": [], "
				   "\"ends\": [], \"addresses\": [\"10.0.0.0\"");
	for (int i = 1; i <= GRAPH_MAX_ADDRESSES; i++)
		len += (size_t)sprintf(doc + len, ",\"10.0.%d.%d\"", i / 256, i % 256);
	len += (size_t)sprintf(doc + len, "]}");
	assert_int_equal(graph_add_agent(g, doc, len, "addrs", err, sizeof(err)), -E2BIG);
	assert_string_equal(err, "addrs: more than 1024 addresses");
	free(doc);
	graph_free(g);
}

/* ---- Prometheus (§2) ---- */

/* clang-format off */
#define VECTOR(samples) \
	"{'status': 'success', 'data': {'resultType': 'vector', 'result': [" samples "]}}"
#define SAMPLE(labels, value) \
	"{'metric': {" labels "}, 'value': [1700000000.5, '" value "']}"
/* a flow series' labels, less __name__ and direction; comm x runs in x.service */
#define F(inst, comm, peer, port, role) \
	"'instance': '" inst "', 'job': 'plumb', 'cgroup': '/system.slice/" comm ".service', " \
	"'workload': 'systemd/" comm ".service', 'comm': '" comm "', " \
	"'peer_addr': '" peer "', 'peer_port': '" #port "', 'role': '" role "'"
#define TX(labels, value) \
	SAMPLE("'__name__': 'plumb_flow_bytes_total', " labels ", 'direction': 'tx'", value)
#define RX(labels, value) \
	SAMPLE("'__name__': 'plumb_flow_bytes_total', " labels ", 'direction': 'rx'", value)
#define CONNS(labels, value) \
	SAMPLE("'__name__': 'plumb_flow_connections_total', " labels, value)
#define INFO(inst, host) \
	SAMPLE("'__name__': 'plumb_host_info', 'instance': '" inst "', 'host': '" host "'", "1")
#define ADDR(inst, host, addr) \
	SAMPLE("'__name__': 'plumb_host_address', 'instance': '" inst "', " \
	       "'host': '" host "', 'addr': '" addr "'", "1")

/* a:9977 is hostA (10.0.0.1); b:9977 is hostB (10.0.0.2), named by its address only;
 * c:9977 has neither */
#define CURL	 F("a:9977", "curl", "10.0.0.2", 80, "client")
#define NGINX	 F("b:9977", "nginx", "10.0.0.1", 80, "server")
#define BATCH	 F("a:9977", "batch", "10.0.0.2", 5432, "client")
#define POSTGRES F("b:9977", "postgres", "10.0.0.1", 5432, "server")
#define CRON	 F("b:9977", "cron", "198.51.100.7", 443, "client")
#define IDLE	 F("a:9977", "idle", "10.0.0.2", 22, "client")
#define SSHD	 F("b:9977", "sshd", "10.0.0.1", 22, "server")
#define APP	 F("a:9977", "app", "127.0.0.1", 6379, "client")
#define REDIS	 F("a:9977", "redis", "127.0.0.1", 6379, "server")
#define LONE	 F("c:9977", "lone", "10.0.0.2", 80, "client")
#define GONE	 F("a:9977", "gone", "10.0.0.2", 80, "client")
#define WEB	 F("a:9977", "web", "10.0.0.2", 6380, "client")
/* with a protocol label (without one, a series is tcp's) */
#define FP(inst, comm, peer, port, role, proto) \
	F(inst, comm, peer, port, role) ", 'protocol': '" proto "'"
#define DNS_TCP	 FP("a:9977", "resolver", "10.0.0.2", 53, "client", "tcp")
#define DNS_UDP	 FP("a:9977", "resolver", "10.0.0.2", 53, "client", "udp")
#define NAMED	 FP("b:9977", "named", "10.0.0.1", 53, "server", "udp")
#define SOCK	 FP("a:9977", "app", "unix:/run/x.sock", 0, "client", "unix")
#define CACHE	 F("b:9977", "cache", "127.0.0.1", 6380, "server")
/* peer_addr "" (a UDP server that reads without asking the source): Prometheus keeps no label */
#define SYSLOG \
	"'instance': 'b:9977', 'job': 'plumb', 'cgroup': '/system.slice/syslog.service', " \
	"'workload': 'systemd/syslog.service', 'comm': 'syslog', 'peer_port': '514', " \
	"'role': 'server', 'protocol': 'udp'"
#define LOGGER	 FP("a:9977", "logger", "10.0.0.2", 514, "client", "udp")

static const char *const prom_fixture[GRAPH_PROM_QUERIES] = {
	[GRAPH_PROM_BYTES_NOW] = VECTOR(
		TX(CURL, "5000") ", " RX(CURL, "90000") ", "
		TX(NGINX, "9e4") ", " RX(NGINX, "5000") ", "
		TX(BATCH, "700") ", " RX(BATCH, "7000") ", "
		TX(POSTGRES, "7000") ", " RX(POSTGRES, "700") ", "
		TX(CRON, "300") ", " RX(CRON, "1000") ", "
		TX(IDLE, "10") ", " RX(SSHD, "10") ", "
		TX(APP, "10") ", " RX(APP, "20") ", "
		TX(REDIS, "20") ", " RX(REDIS, "10") ", "
		TX(LONE, "4") ", "
		TX(WEB, "3") ", " TX(CACHE, "6") ", "
		TX(DNS_TCP, "11") ", " TX(DNS_UDP, "22") ", " RX(DNS_UDP, "44") ", "
		TX(NAMED, "44") ", " RX(NAMED, "22") ", " TX(SOCK, "5") ", "
		TX(LOGGER, "50") ", " RX(SYSLOG, "70")),
	[GRAPH_PROM_BYTES_THEN] = VECTOR(
		TX(CURL, "1000") ", " RX(CURL, "10000") ", "
		TX(NGINX, "10000") ", " RX(NGINX, "1000") ", "
		/* cron restarted: its tx fell from 5000 to 300 */
		TX(CRON, "5000") ", " RX(CRON, "800") ", "
		TX(IDLE, "10") ", " RX(SSHD, "10") ", "
		/* gone by t: not counted */
		TX(GONE, "99")),
	[GRAPH_PROM_CONNS_NOW] = VECTOR(
		CONNS(CURL, "10") ", " CONNS(NGINX, "10") ", "
		CONNS(BATCH, "1") ", " CONNS(POSTGRES, "1") ", "
		CONNS(CRON, "1") ", "
		CONNS(IDLE, "1") ", " CONNS(SSHD, "1") ", "
		CONNS(APP, "1") ", " CONNS(REDIS, "1") ", "
		CONNS(LONE, "1") ", "
		CONNS(DNS_TCP, "1") ", " CONNS(DNS_UDP, "2") ", " CONNS(NAMED, "2") ", "
		CONNS(SOCK, "1") ", " CONNS(LOGGER, "1") ", " CONNS(SYSLOG, "2")),
	[GRAPH_PROM_CONNS_THEN] = VECTOR(
		CONNS(CURL, "4") ", " CONNS(NGINX, "4") ", "
		CONNS(CRON, "3") ", "
		CONNS(IDLE, "1") ", " CONNS(SSHD, "1")),
	[GRAPH_PROM_HOST_INFO] = VECTOR(INFO("a:9977", "hostA")),
	[GRAPH_PROM_HOST_ADDRESS] = VECTOR(
		ADDR("a:9977", "hostA", "10.0.0.1") ", " ADDR("b:9977", "hostB", "10.0.0.2")),
};
/* clang-format on */

static struct graph *prom_graph(const char *const *fixture, unsigned int window, int *ret,
				char *err)
{
	struct graph *g = graph_new();
	char *text[GRAPH_PROM_QUERIES];
	const char *body[GRAPH_PROM_QUERIES];
	size_t len[GRAPH_PROM_QUERIES];

	assert_non_null(g);
	for (int q = 0; q < GRAPH_PROM_QUERIES; q++) {
		text[q] = fixture[q] ? json(fixture[q]) : NULL;
		body[q] = text[q];
		len[q] = text[q] ? strlen(text[q]) : 0;
	}
	*ret = graph_add_prometheus(g, body, len, window, "http://prom:9090", err, ERR_LEN);
	for (int q = 0; q < GRAPH_PROM_QUERIES; q++)
		free(text[q]);
	return g;
}

#define PV(host, comm) host "//system.slice/" comm ".service/" comm

static void test_prometheus(void **state)
{
	static const struct want_edge want[] = {
		{ PV("hostA", "curl"), PV("hostB", "nginx"), "80", 4000, 80000, 6 },
		/* absent at t - window: counted from 0 */
		{ PV("hostA", "batch"), PV("hostB", "postgres"), "5432", 700, 7000, 1 },
		/* lower at t than at t - window: a restart, counted from 0 */
		{ PV("hostB", "cron"), "external/198.51.100.7", "443", 300, 200, 1 },
		/* loopback, local address unknown: B is A */
		{ PV("hostA", "app"), PV("hostA", "redis"), "6379", 10, 20, 1 },
		/* no host_info, no address: the instance names the host, which owns nothing */
		{ PV("c:9977", "lone"), "external/10.0.0.2", "80", 4, 0, 1 },
		/* a server's loopback peer is on its own host, not on the client's */
		{ PV("hostA", "web"), "external/10.0.0.2", "6380", 3, 0, 0 },
		{ "external/127.0.0.1", PV("hostB", "cache"), "6380", 0, 6, 0 },
		/* protocols apart: the tcp end finds no tcp server on 53 */
		{ PV("hostA", "resolver"), "external/10.0.0.2", "53", 11, 0, 1 },
		{ PV("hostA", "resolver"), PV("hostB", "named"), "53/udp", 22, 44, 2 },
		{ PV("hostA", "app"), "external/unix:/run/x.sock", "unix", 5, 0, 1 },
		/* no peer_addr label: an unknown peer, matched by port; the rest from "unknown" */
		{ PV("hostA", "logger"), PV("hostB", "syslog"), "514/udp", 50, 0, 1 },
		{ "external/unknown", PV("hostB", "syslog"), "514/udp", 20, 0, 1 },
		{ 0 },
	};
	char err[ERR_LEN] = "";
	struct graph_view *v;
	const struct graph_vertex *x;
	struct graph *g;
	int ret;

	(void)state;
	g = prom_graph(prom_fixture, 300, &ret, err);
	if (ret)
		fail_msg("graph_add_prometheus: %d %s", ret, err);
	v = build(g, GRAPH_PROJECT_PROCESS);
	if (!edges_are(v, want, "prometheus"))
		fail_msg("the Prometheus fixture's edges differ");
	assert_int_equal(v->window_seconds, 300);
	x = vertex_by_id(v, PV("hostA", "curl"));
	assert_non_null(x);
	assert_true(x->by_cgroup);
	assert_int_equal(x->pid, 0);
	assert_string_equal(x->exe, "");
	assert_string_equal(x->host, "hostA");
	assert_string_equal(x->cgroup, "/system.slice/curl.service");
	assert_string_equal(x->workload, "systemd/curl.service");
	assert_string_equal(x->label, "curl(systemd/curl.service)@hostA");
	graph_view_free(v);

	v = build(g, GRAPH_PROJECT_HOST);
	if (!edges_are(v,
		       (const struct want_edge[]){
			       { "hostA", "hostB", "80", 4000, 80000, 6 },
			       { "hostA", "hostB", "5432", 700, 7000, 1 },
			       { "hostB", "external/198.51.100.7", "443", 300, 200, 1 },
			       { "c:9977", "external/10.0.0.2", "80", 4, 0, 1 },
			       { "hostA", "external/10.0.0.2", "6380", 3, 0, 0 },
			       { "external/127.0.0.1", "hostB", "6380", 0, 6, 0 },
			       { "hostA", "external/10.0.0.2", "53", 11, 0, 1 },
			       { "hostA", "hostB", "53/udp", 22, 44, 2 },
			       { "hostA", "external/unix:/run/x.sock", "unix", 5, 0, 1 },
			       { "hostA", "hostB", "514/udp", 50, 0, 1 },
			       { "external/unknown", "hostB", "514/udp", 20, 0, 1 },
			       { 0 } },
		       "prometheus, host projection"))
		fail_msg("the Prometheus fixture's host edges differ");
	graph_view_free(v);
	graph_free(g);
}

static void test_prometheus_malformed(void **state)
{
	static const char *const ok = VECTOR("");
	static const struct {
		enum graph_prom_query q;
		const char *body; /* NULL: the body is missing */
		const char *err;
	} cases[] = {
		{ GRAPH_PROM_BYTES_NOW, NULL, "no result for plumb_flow_bytes_total" },
		{ GRAPH_PROM_BYTES_NOW, "", "not JSON: the document is empty" },
		{ GRAPH_PROM_CONNS_NOW, "<html>", "not JSON" },
		{ GRAPH_PROM_BYTES_NOW, "[]",
		  "plumb_flow_bytes_total: the response is not a JSON object" },
		{ GRAPH_PROM_BYTES_THEN,
		  "{'status': 'error', 'errorType': 'bad_data', 'error': 'invalid time'}",
		  "plumb_flow_bytes_total: query failed: invalid time" },
		{ GRAPH_PROM_HOST_INFO, "{'data': {}}", "plumb_host_info: query failed" },
		{ GRAPH_PROM_BYTES_NOW,
		  "{'status': 'success', 'data': {'resultType': 'matrix', 'result': []}}",
		  "data is not a vector result" },
		{ GRAPH_PROM_BYTES_NOW, "{'status': 'success', 'data': {'resultType': 'vector'}}",
		  "data is not a vector result" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR("7"), "result[0] is not an object" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR("{'value': [1, '2']}"),
		  "result[0] has no \"metric\" object" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR("{'metric': {}, 'value': [1]}"),
		  "result[0].value is not [time, \"value\"]" },
		{ GRAPH_PROM_BYTES_THEN, VECTOR(SAMPLE("'a': 'b'", "abc")),
		  "plumb_flow_bytes_total at t - window: result[0].value is not a counter value" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR(SAMPLE("'a': 'b'", "-1")), "not a counter value" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR(SAMPLE("'a': 'b'", "NaN")), "not a counter value" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR(SAMPLE("'a': 'b'", "+Inf")), "not a counter value" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR(SAMPLE("'a': 'b'", "1e20")), "not a counter value" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR(SAMPLE("'a': 'b'", "")), "not a counter value" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR("{'metric': {}, 'value': [1, 2]}"),
		  "not a counter value" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR(SAMPLE("'a': 5", "1")),
		  "result[0].metric.a is not a string" },
		{ GRAPH_PROM_BYTES_NOW, VECTOR(SAMPLE("'instance': 'a:1'", "1")),
		  "plumb_flow_bytes_total: result[0] has no cgroup label" },
		{ GRAPH_PROM_CONNS_NOW,
		  VECTOR(SAMPLE("'instance': 'a:1', 'cgroup': '/', 'comm': 'x', 'peer_addr': "
				"'10.0.0.1', 'peer_port': '80'",
				"1")),
		  "plumb_flow_connections_total: result[0] has no role label" },
		{ GRAPH_PROM_BYTES_NOW,
		  VECTOR(SAMPLE(F("a:1", "x", "10.0.0.1", 80, "client") ", 'direction': 'up'",
				"1")),
		  "direction is not tx or rx" },
		{ GRAPH_PROM_BYTES_NOW,
		  VECTOR(SAMPLE(F("a:1", "x", "10.0.0.1", 80, "client"), "1")),
		  "direction is not tx or rx" },
		{ GRAPH_PROM_CONNS_NOW, VECTOR(CONNS(F("a:1", "x", "10.0.0.1", 80, "peer"), "1")),
		  "flow series of a:1, comm x: role \"peer\" is not client or server" },
		{ GRAPH_PROM_CONNS_NOW, VECTOR(CONNS(F("a:1", "x", "nowhere", 80, "client"), "1")),
		  "peer_addr \"nowhere\" is not an IP or unix: address" },
		/* a tcp series without peer_addr (an empty one, or relabelled away): refused */
		{ GRAPH_PROM_CONNS_NOW,
		  VECTOR(CONNS("'instance': 'a:1', 'cgroup': '/', 'comm': 'x', 'peer_port': '80', "
			       "'role': 'client'",
			       "1")),
		  "flow series of a:1, comm x: peer_addr \"\" is not an IP or unix: address" },
		{ GRAPH_PROM_CONNS_NOW,
		  VECTOR(CONNS(F("a:1", "x", "10.0.0.1", 65536, "client"), "1")),
		  "peer_port \"65536\" is not a port" },
		{ GRAPH_PROM_CONNS_NOW,
		  VECTOR(CONNS(F("a:1", "x", "10.0.0.1", -80, "client"), "1")),
		  "peer_port \"-80\" is not a port" },
		{ GRAPH_PROM_CONNS_NOW,
		  VECTOR(CONNS(FP("a:1", "x", "10.0.0.1", 80, "client", "TCP"), "1")),
		  "flow series of a:1, comm x: protocol \"TCP\": not a protocol name" },
		{ GRAPH_PROM_CONNS_NOW,
		  VECTOR(CONNS(FP("a:1", "x", "unix", 0, "client", "unix"), "1")),
		  "peer_addr \"unix\" is not an IP or unix: address" },
		{ GRAPH_PROM_HOST_INFO, VECTOR(SAMPLE("'instance': 'a:1'", "1")),
		  "plumb_host_info: result[0] has no instance or no host label" },
		{ GRAPH_PROM_HOST_ADDRESS, VECTOR(SAMPLE("'instance': 'a:1', 'host': 'h'", "1")),
		  "plumb_host_address: result[0]: addr is not an IP address" },
		{ GRAPH_PROM_HOST_ADDRESS,
		  VECTOR(SAMPLE("'instance': 'a:1', 'host': 'h', 'addr': '1.2.3'", "1")),
		  "addr is not an IP address" },
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *fixture[GRAPH_PROM_QUERIES];
		char err[ERR_LEN] = "";
		struct graph_view *v;
		struct graph *g;
		int ret;

		for (int q = 0; q < GRAPH_PROM_QUERIES; q++)
			fixture[q] = ok;
		fixture[cases[i].q] = cases[i].body;
		g = prom_graph(fixture, 60, &ret, err);
		if (ret != -EINVAL || !one_printable_line(err) ||
		    strncmp(err, "http://prom:9090: ", 18) || !strstr(err, cases[i].err)) {
			print_error("Prometheus case %zu: expected -EINVAL and an error containing "
				    "\"%s\", got %d \"%s\"\n",
				    i, cases[i].err, ret, err);
			failures++;
		}
		/* refused: the graph is empty */
		v = build(g, GRAPH_PROJECT_PROCESS);
		assert_int_equal(v->nedges, 0);
		graph_view_free(v);
		graph_free(g);
	}
	if (failures)
		fail_msg("%d of %zu malformed Prometheus results were not refused as expected",
			 failures, ARRAY_SIZE(cases));
}

static void test_prometheus_window_zero(void **state)
{
	char err[ERR_LEN] = "";
	struct graph *g;
	int ret;

	(void)state;
	g = prom_graph(prom_fixture, 0, &ret, err);
	assert_int_equal(ret, -EINVAL);
	assert_string_equal(err, "http://prom:9090: the window is 0 seconds");
	graph_free(g);
}

/* ---- writers ---- */

static void test_human_bytes(void **state)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
		{ 0, "0 B" },
		{ 1, "1 B" },
		{ 1023, "1023 B" },
		{ 1024, "1.0 KiB" },
		{ 1536, "1.5 KiB" },
		{ 53000, "51.8 KiB" },
		{ 1048524, "1023.9 KiB" },
		{ 1048575, "1.0 MiB" }, /* 1023.999 KiB would round to 1024.0 KiB */
		{ 1258291, "1.2 MiB" },
		{ 4000000, "3.8 MiB" },
		{ 1ull << 30, "1.0 GiB" },
		{ 5ull << 40, "5.0 TiB" },
		{ 1ull << 50, "1.0 PiB" },
		{ UINT64_MAX, "16.0 EiB" },
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char buf[32];

		graph_human_bytes(cases[i].bytes, buf, sizeof(buf));
		if (strcmp(buf, cases[i].text)) {
			print_error("%llu bytes: expected \"%s\", got \"%s\"\n",
				    (unsigned long long)cases[i].bytes, cases[i].text, buf);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu human byte cases failed", failures, ARRAY_SIZE(cases));
}

/* hostA's curl talks to nginx on hostB and to an outside address; psql to postgres */
/* clang-format off */
static const char *const writer_docs[] = {
	DOC("hostA", "'10.77.0.1'",
	    PROC(4242, "curl", "job") ", " PROC(5000, "psql", "") ", " PROC(5001, "postgres", ""),
	    END(4242, "client", "10.77.0.1", "10.77.0.2", 80, 1200, 53000, 3, 0) ", "
	    END(4242, "client", "10.77.0.1", "93.184.216.34", 443, 700, 4000000, 1, 0) ", "
	    END(5000, "client", "127.0.0.1", "127.0.0.1", 5432, 300, 9000, 2, 5001)),
	HOST_B(END(77, "server", "10.77.0.2", "10.77.0.1", 80, 53000, 1200, 3, 0)),
};
/* clang-format on */

static void test_table(void **state)
{
	static const char want[] =
		"SOURCE           TARGET                  PORT       TX        RX  CONNS\n"
		"curl/4242@hostA  external/93.184.216.34   443    700 B   3.8 MiB      1\n"
		"curl/4242@hostA  nginx/77@hostB            80  1.2 KiB  51.8 KiB      3\n"
		"psql/5000@hostA  postgres/5001@hostA     5432    300 B   8.8 KiB      2\n";
	struct graph *g = graph_of(writer_docs, 2);
	struct graph_view *v = build(g, GRAPH_PROJECT_PROCESS);
	char *out = write_to_string(graph_write_table, v);

	(void)state;
	if (strcmp(out, want))
		fail_msg("table: expected\n%s\ngot\n%s", want, out);
	free(out);
	graph_view_free(v);
	graph_free(g);
}

static void test_table_empty(void **state)
{
	struct graph *g = graph_new();
	struct graph_view *v = build(g, GRAPH_PROJECT_PROCESS);
	char *out = write_to_string(graph_write_table, v);

	(void)state;
	assert_string_equal(out, "SOURCE  TARGET  PORT  TX  RX  CONNS\n");
	free(out);
	out = write_to_string(graph_write_json, v);
	assert_string_equal(out, "{\n  \"version\": 1,\n  \"projection\": \"process\",\n"
				 "  \"window_seconds\": null,\n  \"vertices\": [],\n"
				 "  \"edges\": []\n}\n");
	free(out);
	graph_view_free(v);
	graph_free(g);
}

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		fail_msg("json: no string \"%s\" in %s", key, json_object_to_json_string(o));
	return json_object_get_string(v);
}

static uint64_t juint(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		fail_msg("json: no integer \"%s\" in %s", key, json_object_to_json_string(o));
	return json_object_get_uint64(v);
}

static bool jhas(struct json_object *o, const char *key)
{
	return json_object_object_get_ex(o, key, NULL);
}

/* The JSON writer's output, parsed back, is the view. */
static void expect_json_round_trip(const struct graph_view *v, const char *const *strings_want)
{
	char *out = write_to_string(graph_write_json, v);
	struct json_object *root = json_tokener_parse(out), *w, *vs, *es;

	if (!root)
		fail_msg("the JSON output does not parse:\n%s", out);
	assert_int_equal(juint(root, "version"), 1);
	assert_string_equal(jstr(root, "projection"), graph_projection_names[v->projection]);
	assert_true(json_object_object_get_ex(root, "window_seconds", &w));
	if (v->window_seconds < 0)
		assert_null(w);
	else
		assert_int_equal(json_object_get_int64(w), v->window_seconds);
	assert_true(json_object_object_get_ex(root, "vertices", &vs));
	assert_true(json_object_object_get_ex(root, "edges", &es));
	assert_int_equal(json_object_array_length(vs), v->nvertices);
	assert_int_equal(json_object_array_length(es), v->nedges);
	for (size_t i = 0; i < v->nvertices; i++) {
		const struct graph_vertex *x = &v->vertices[i];
		struct json_object *o = json_object_array_get_idx(vs, i);
		const char *want_comm = strings_want && x->comm ? strings_want[i] : x->comm;

		assert_string_equal(jstr(o, "id"), x->id);
		if (x->kind == GRAPH_VERTEX_PROCESS || x->kind == GRAPH_VERTEX_EXTERNAL) {
			assert_string_equal(jstr(o, "host"), x->host);
			assert_int_equal(juint(o, "pid"), x->pid);
			assert_string_equal(jstr(o, "comm"), want_comm);
			assert_string_equal(jstr(o, "exe"), x->exe);
			assert_string_equal(jstr(o, "cgroup"), x->cgroup);
			assert_string_equal(jstr(o, "workload"), x->workload);
			assert_int_equal(json_object_object_length(o), 7);
		} else if (x->kind == GRAPH_VERTEX_HOST) {
			assert_string_equal(jstr(o, "host"), x->host);
			assert_int_equal(json_object_object_length(o), 2);
		} else {
			assert_false(jhas(o, "host"));
			assert_int_equal(json_object_object_length(o), 1);
		}
	}
	for (size_t i = 0; i < v->nedges; i++) {
		const struct graph_edge *e = &v->edges[i];
		struct json_object *o = json_object_array_get_idx(es, i);

		assert_string_equal(jstr(o, "source"), v->vertices[e->source].id);
		assert_string_equal(jstr(o, "target"), v->vertices[e->target].id);
		assert_string_equal(jstr(o, "protocol"), e->protocol);
		assert_int_equal(juint(o, "port"), e->port);
		assert_true(juint(o, "tx_bytes") == e->tx_bytes);
		assert_true(juint(o, "rx_bytes") == e->rx_bytes);
		assert_true(juint(o, "connections") == e->connections);
		assert_int_equal(json_object_object_length(o), 7);
	}
	json_object_put(root);
	free(out);
}

static void test_json_round_trip(void **state)
{
	struct graph *g = graph_of(writer_docs, 2);
	char err[ERR_LEN];
	int ret;

	(void)state;
	for (int p = 0; p < 3; p++) {
		struct graph_view *v = build(g, (enum graph_projection)p);

		assert_true(v->nedges > 0);
		expect_json_round_trip(v, NULL);
		graph_view_free(v);
	}
	graph_free(g);

	g = prom_graph(prom_fixture, 300, &ret, err);
	assert_int_equal(ret, 0);
	for (int p = 0; p < 3; p++) {
		struct graph_view *v = build(g, (enum graph_projection)p);

		assert_true(v->nedges > 0);
		expect_json_round_trip(v, NULL);
		graph_view_free(v);
	}
	graph_free(g);
}

/* Names may hold anything: quotes, backslashes, control characters, bytes that are not UTF-8
 * (written as U+FFFD); the largest counters are exact. */
static void test_json_strings_and_big_counters(void **state)
{
	static const char doc[] =
		"{'version': 1, 'host': 'h\\\"q', 'addresses': ['10.0.0.1'], 'processes': ["
		"{'pid': 1, 'comm': 'a\\\\b\\n\\t\\u0001', 'exe': '/x\\u00fc', 'cgroup': '/', "
		"'workload': ''}, {'pid': 2, 'comm': 'bad\xff\xc3(', 'exe': '', 'cgroup': '', "
		"'workload': ''}], 'ends': ["
		"{'pid': 1, 'role': 'client', 'local_addr': '10.0.0.1', 'peer_addr': '10.0.0.9', "
		"'port': 1, 'tx_bytes': 18446744073709551615, 'rx_bytes': 9007199254740993, "
		"'connections': 18446744073709551614}, "
		"{'pid': 2, 'role': 'client', 'local_addr': '10.0.0.1', 'peer_addr': '10.0.0.9', "
		"'port': 2, 'tx_bytes': 1, 'rx_bytes': 1, 'connections': 1}]}";
	static const char *const docs[] = { doc };
	/* the comms as they read back, vertices in id order: external/10.0.0.9, h"q/1, h"q/2 */
	static const char *const comms[] = { "?", "a\\b\n\t\x01", "bad\xef\xbf\xbd\xef\xbf\xbd(" };
	struct graph *g = graph_of(docs, 1);
	struct graph_view *v = build(g, GRAPH_PROJECT_PROCESS);
	char *out;

	(void)state;
	assert_int_equal(v->nvertices, 3);
	assert_string_equal(v->vertices[1].id, "h\"q/1");
	assert_string_equal(v->vertices[1].exe, "/x\xc3\xbc");
	expect_json_round_trip(v, comms);
	out = write_to_string(graph_write_json, v);
	assert_non_null(strstr(out, "\"tx_bytes\": 18446744073709551615, "
				    "\"rx_bytes\": 9007199254740993, "
				    "\"connections\": 18446744073709551614"));
	assert_non_null(strstr(out, "\"comm\": \"a\\\\b\\n\\t\\u0001\""));
	free(out);
	graph_view_free(v);
	graph_free(g);
}

/* The PORT column: the port for tcp, port/protocol for another, the protocol alone when there is
 * no port (unix). */
static void test_table_protocols(void **state)
{
	static const char *const docs[] = {
		HOST_A(TWO(ENDP("udp", 4242, "client", "", "10.77.0.2", 53, 100, 200, 1, 0),
			   ENDP("unix", 4242, "client", "", "unix:/run/a.sock", 0, 1, 2, 1, 0))),
		HOST_B(ENDP("udp", 77, "server", "10.77.0.2", "10.77.0.1", 53, 200, 100, 1, 0)),
	};
	static const char want[] =
		"SOURCE           TARGET                       PORT     TX     RX  CONNS\n"
		"curl/4242@hostA  nginx/77@hostB             53/udp  100 B  200 B      1\n"
		"curl/4242@hostA  external/unix:/run/a.sock    unix    1 B    2 B      1\n";
	struct graph *g = graph_of(docs, 2);
	struct graph_view *v = build(g, GRAPH_PROJECT_PROCESS);
	char *out = write_to_string(graph_write_table, v);

	(void)state;
	if (strcmp(out, want))
		fail_msg("table: expected\n%s\ngot\n%s", want, out);
	free(out);
	out = write_to_string(graph_write_dot, v);
	assert_non_null(strstr(out, "\t\"hostA/4242\" -> \"external/unix:/run/a.sock\" "
				    "[label=\":unix 3 B\""));
	assert_non_null(strstr(out, "[label=\":53/udp 300 B\""));
	free(out);
	expect_json_round_trip(v, NULL);
	graph_view_free(v);
	graph_free(g);
}

static void test_dot(void **state)
{
	static const char *const want[] = {
		"digraph plumb {\n",
		"\t\"hostA/4242\" -> \"hostB/77\" [label=\":80 52.9 KiB\", penwidth=",
		"\t\"hostA/4242\" -> \"external/93.184.216.34\" [label=\":443 3.8 MiB\", "
		"penwidth=5.00];\n",
		"\t\"hostA/5000\" -> \"hostA/5001\" [label=\":5432 9.1 KiB\", penwidth=",
		"\t\"external/93.184.216.34\" [label=\"external/93.184.216.34\", shape=ellipse, "
		"style=dashed];\n",
		"\t\tlabel=\"hostA\";\n\t\t\"hostA/4242\" [label=\"curl/4242@hostA\"];\n"
		"\t\t\"hostA/5000\" [label=\"psql/5000@hostA\"];\n"
		"\t\t\"hostA/5001\" [label=\"postgres/5001@hostA\"];\n\t}\n",
		"\t\tlabel=\"hostB\";\n\t\t\"hostB/77\" [label=\"nginx/77@hostB\"];\n\t}\n",
	};
	struct graph *g = graph_of(writer_docs, 2);
	struct graph_view *v = build(g, GRAPH_PROJECT_PROCESS);
	char *out = write_to_string(graph_write_dot, v);
	size_t arrows = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		if (!strstr(out, want[i]))
			fail_msg("dot output lacks\n%s\nin\n%s", want[i], out);
	for (const char *p = out; (p = strstr(p, " -> ")); p++)
		arrows++;
	assert_int_equal(arrows, 3);
	assert_int_equal(out[strlen(out) - 2], '}');
	free(out);
	graph_view_free(v);
	graph_free(g);
}

/* Quotes and backslashes in names stay inside their DOT strings. */
static void test_dot_escaping(void **state)
{
	static const char *const docs[] = {
		"{'version': 1, 'host': 'h\\\\', 'addresses': [], 'processes': [{'pid': 1, "
		"'comm': 'x\\\"];evil\\n'}], 'ends': [{'pid': 1, 'role': 'client', "
		"'peer_addr': '10.0.0.9', 'port': 1, 'tx_bytes': 1, 'rx_bytes': 1, "
		"'connections': 1}]}",
	};
	struct graph *g = graph_of(docs, 1);
	struct graph_view *v = build(g, GRAPH_PROJECT_PROCESS);
	char *out = write_to_string(graph_write_dot, v);

	(void)state;
	if (!strstr(out, "\"h\\\\/1\" [label=\"x\\\"];evil?/1@h\\\\\"];\n"))
		fail_msg("dot escaping:\n%s", out);
	free(out);
	graph_view_free(v);
	graph_free(g);
}

/* Graphviz itself reads what graph_write_dot() writes (skipped where dot is not installed). */
static void test_dot_parses(void **state)
{
	struct graph *g = graph_of(writer_docs, 2);
	struct graph_view *v = build(g, GRAPH_PROJECT_PROCESS);
	FILE *p;
	int status;

	(void)state;
	if (system("command -v dot >/dev/null 2>&1")) {
		graph_view_free(v);
		graph_free(g);
		skip();
	}
	p = popen("dot -Tsvg >/dev/null", "w");
	assert_non_null(p);
	assert_int_equal(graph_write_dot(v, p), 0);
	status = pclose(p);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	graph_view_free(v);
	graph_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join),
		cmocka_unit_test(test_unlisted_pid),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_projections),
		cmocka_unit_test(test_agent_malformed),
		cmocka_unit_test(test_agent_nul_bytes),
		cmocka_unit_test(test_duplicate_host_and_mixed_sources),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_prometheus),
		cmocka_unit_test(test_prometheus_malformed),
		cmocka_unit_test(test_prometheus_window_zero),
		cmocka_unit_test(test_human_bytes),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_table_protocols),
		cmocka_unit_test(test_table_empty),
		cmocka_unit_test(test_json_round_trip),
		cmocka_unit_test(test_json_strings_and_big_counters),
		cmocka_unit_test(test_dot),
		cmocka_unit_test(test_dot_escaping),
		cmocka_unit_test(test_dot_parses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
