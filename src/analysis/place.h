/* SPDX-License-Identifier: GPL-2.0 */
/*
 * plumb place: assign workloads to hosts so that less traffic crosses hosts, within each
 * host's CPU and memory. The input is docs/graph.md §4/§5; docs/place.md has the algorithm.
 */
#ifndef PLUMB_ANALYSIS_PLACE_H
#define PLUMB_ANALYSIS_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the host of an external vertex whose address is none of HOSTS.json's names */
#define PLACE_OUTSIDE (-1)

/* conn (bytes from each vertex to each host) is a vertices x hosts table: this bounds it */
#define PLACE_MAX_CELLS (1u << 24)

struct place_host {
	char *name;
	int64_t cpu_milli; /* capacity, millicores */
	uint64_t memory_bytes; /* capacity when memory_limited */
	bool memory_limited;
};

struct place_vertex {
	char *id;
	char *label; /* workload, else comm, else id: what a Kubernetes selector would name */
	char *host_name; /* as the graph has it (an external vertex's: its address) */
	int host; /* index in hosts, or PLACE_OUTSIDE */
	bool external; /* id "external/..." */
	bool pinned; /* never moved: external, or --pin */
	int64_t cpu_milli; /* demand, millicores */
	uint64_t memory_bytes; /* demand */
};

struct place_problem {
	struct place_host *hosts;
	size_t nhosts;
	struct place_vertex *vertices;
	size_t nvertices;
	/*
	 * Undirected adjacency in CSR form: the neighbours of v are adj[adj_start[v] ..
	 * adj_start[v + 1]), sorted, each once (parallel edges and both directions summed
	 * into adj_bytes), no self-loops, no PLACE_OUTSIDE vertex.
	 */
	size_t *adj_start;
	uint32_t *adj;
	uint64_t *adj_bytes;
	uint64_t external_bytes; /* to and from PLACE_OUTSIDE vertices: the same in any plan */
};

enum place_strategy {
	PLACE_FROM_CURRENT = 1 << 0, /* the graph's own placement */
	/* METIS_PartGraphKway, parts mapped to hosts; twice, two balance tolerances */
	PLACE_FROM_METIS_KWAY = 1 << 1,
	PLACE_FROM_METIS_RECURSIVE = 1 << 2, /* METIS_PartGraphRecursive, likewise */
	PLACE_FROM_PACKING = 1 << 3, /* first fit decreasing, each vertex near its peers */
	PLACE_FROM_ALL = 0xf,
};

struct place_params {
	long max_moves; /* < 0: no limit */
	unsigned int strategies; /* PLACE_FROM_*; 0: all */
};

struct place_plan {
	int *host; /* per vertex, after the plan (PLACE_OUTSIDE stays) */
	uint64_t cut_before, cut_after; /* bytes between vertices on different hosts */
	size_t moves;
	bool feasible_before;
	const char *strategy; /* the start the plan came from */
};

/* Parse GRAPH.json and HOSTS.json texts. Returns 0 or -errno; err says why, on one line. */
int place_problem_parse(struct place_problem *p, const char *graph_json, const char *hosts_json,
			char *err, size_t errlen);
/* The same from files; err names the file. */
int place_problem_load(struct place_problem *p, const char *graph_path, const char *hosts_path,
		       char *err, size_t errlen);
/* Pins the vertices whose id matches glob (fnmatch); returns how many, or -errno. */
int place_problem_pin(struct place_problem *p, const char *glob, char *err, size_t errlen);
void place_problem_free(struct place_problem *p);

/* The graph's own placement: each vertex's host. */
void place_current(const struct place_problem *p, int *host);
uint64_t place_cut(const struct place_problem *p, const int *host);
/* Per host load; memory counts only what vertices declare. */
void place_loads(const struct place_problem *p, const int *host, int64_t *cpu_milli,
		 uint64_t *memory_bytes);
/* 0 if every host is within capacity under host[]; else -ENOSPC and err names one excess. */
int place_check_capacity(const struct place_problem *p, const int *host, char *err, size_t errlen);

/*
 * The plan: the least cross-host traffic the strategies find, capacities never exceeded,
 * never worse than the current placement when that one fits. Deterministic.
 * Returns 0, -ENOSPC when no feasible placement was found (err says why), -E2BIG, -ENOMEM.
 */
int place_solve(const struct place_problem *p, const struct place_params *params,
		struct place_plan *plan, char *err, size_t errlen);
void place_plan_free(struct place_plan *plan);

#endif
