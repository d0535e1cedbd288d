/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The communication graph (docs/graph.md): ends parsed from agents' /api/v1/graph or from
 * Prometheus query results, joined into edges, projected and written. No network or process
 * I/O here: the sources are strings, the writers take a FILE.
 */
#ifndef PLUMB_ANALYSIS_GRAPH_H
#define PLUMB_ANALYSIS_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Bounds on what one run reads; past them the input is refused with an error. */
#define GRAPH_MAX_BODY	    (64u << 20) /* bytes of one JSON document */
#define GRAPH_MAX_ENDS	    1000000 /* ends, all sources together */
#define GRAPH_MAX_PROCESSES 1000000 /* processes (vertices before projection) */
#define GRAPH_MAX_HOSTS	    65536
#define GRAPH_MAX_ADDRESSES 1024 /* addresses of one host */
#define GRAPH_MAX_SERIES    2000000 /* series of one Prometheus query result */
#define GRAPH_MAX_EDGES	    4000000 /* edges after the join, before projection */

enum graph_projection {
	GRAPH_PROJECT_PROCESS = 0,
	GRAPH_PROJECT_TYPE,
	GRAPH_PROJECT_HOST,
};

enum graph_format {
	GRAPH_FORMAT_TABLE = 0,
	GRAPH_FORMAT_JSON,
	GRAPH_FORMAT_DOT,
	GRAPH_FORMAT_SVG, /* dot's output: the command runs Graphviz on graph_write_dot() */
};

extern const char *const graph_projection_names[3];
extern const char *const graph_format_names[4];

struct graph;

struct graph *graph_new(void);
void graph_free(struct graph *g);

/*
 * Adds one agent's GET /api/v1/graph document (docs/graph.md §1). source names it in errors
 * (the URL). On a malformed or oversized document, or a host already added, returns -EINVAL
 * (-E2BIG past a limit, -ENOMEM) with one line in err, and g is unchanged.
 */
int graph_add_agent(struct graph *g, const char *text, size_t len, const char *source, char *err,
		    size_t errlen);

/* The Prometheus instant queries graph_add_prometheus() needs (§2). */
enum graph_prom_query {
	GRAPH_PROM_BYTES_NOW = 0, /* plumb_flow_bytes_total at t */
	GRAPH_PROM_BYTES_THEN, /* plumb_flow_bytes_total at t - window */
	GRAPH_PROM_CONNS_NOW, /* plumb_flow_connections_total at t */
	GRAPH_PROM_CONNS_THEN, /* plumb_flow_connections_total at t - window */
	GRAPH_PROM_HOST_INFO, /* plumb_host_info at t */
	GRAPH_PROM_HOST_ADDRESS, /* plumb_host_address at t */
	GRAPH_PROM_QUERIES,
};

/* The metric each query asks for (the query is the bare name) and whether it is at t - window. */
extern const struct graph_prom_query_def {
	const char *metric;
	bool then;
} graph_prom_queries[GRAPH_PROM_QUERIES];

/*
 * Adds the ends of the Prometheus query bodies (the JSON of /api/v1/query, one per
 * enum graph_prom_query; NULL is refused) over a window of window_s seconds: per series the
 * value at t less the value at t - window, 0 at t - window when absent there, the value at t
 * when lower at t (a restart). Errors as graph_add_agent(); source names the server.
 */
int graph_add_prometheus(struct graph *g, const char *const body[GRAPH_PROM_QUERIES],
			 const size_t len[GRAPH_PROM_QUERIES], unsigned int window_s,
			 const char *source, char *err, size_t errlen);

enum graph_vertex_kind {
	GRAPH_VERTEX_PROCESS = 0, /* an agent's (host, pid) or Prometheus's (host, cgroup, comm) */
	GRAPH_VERTEX_TYPE,
	GRAPH_VERTEX_HOST,
	GRAPH_VERTEX_EXTERNAL, /* a peer address no source owns */
};

/* A vertex after projection; its strings belong to the view. */
struct graph_vertex {
	enum graph_vertex_kind kind;
	char *id; /* docs/graph.md §4 */
	char *label; /* for people: comm/pid@host, the type, the host, external/<addr> */
	/* process and external vertices (host: the address for external ones); host for host
	 * vertices; NULL where the kind has none */
	char *host, *comm, *exe, *cgroup, *workload;
	uint32_t pid;
	bool by_cgroup; /* a Prometheus process: (host, cgroup, comm), no pid */
};

struct graph_edge {
	size_t source, target; /* indexes into vertices */
	char protocol[8];
	uint16_t port;
	uint64_t tx_bytes; /* client to server */
	uint64_t rx_bytes; /* server to client */
	uint64_t connections;
};

/* The joined, projected graph: vertices sorted by id, edges by (source, target, protocol,
 * port); only vertices that have an edge. */
struct graph_view {
	enum graph_projection projection;
	long window_seconds; /* -1: totals since each agent started (json null) */
	struct graph_vertex *vertices;
	size_t nvertices;
	struct graph_edge *edges;
	size_t nedges;
};

/* Joins the ends (§3) and projects the edges (§4). */
int graph_build(const struct graph *g, enum graph_projection projection, struct graph_view **out,
		char *err, size_t errlen);
void graph_view_free(struct graph_view *v);

/* Writers; each returns 0 or -EIO when out failed. */
int graph_write_table(const struct graph_view *v, FILE *out);
int graph_write_json(const struct graph_view *v, FILE *out);
int graph_write_dot(const struct graph_view *v, FILE *out);

/*
 * Shares total among n parts in proportion to weight (all 0: evenly), each rounded so that
 * the parts add up to total exactly. -ENOMEM, or -EINVAL when n is 0.
 */
int graph_split(uint64_t total, const uint64_t *weight, size_t n, uint64_t *part);

/* "512 B", "1.2 KiB", "3.0 MiB", ... (1024-based, one decimal) */
void graph_human_bytes(uint64_t bytes, char *buf, size_t len);

#endif
