// SPDX-License-Identifier: GPL-2.0
/*
 * The true optimum of plumb place's problem by exhaustive search (branch and bound), for
 * graphs small enough: bench/place.py runs it on the hand-made topology, to say how far
 * plumb place and the GA are from the best placement there is.
 *
 *   place_exact GRAPH.json HOSTS.json [--max-moves N]
 *
 * Prints {"cross_host_bytes_after": best or null, "nodes": search nodes visited}.
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/place.h"

#define MAX_MOVABLE 24

static const struct place_problem *p;
static int *host, *origin;
static bool *placed;
static uint32_t movable[MAX_MOVABLE];
static size_t nmovable;
static int64_t *cpu;
static uint64_t *mem, best = UINT64_MAX, nodes;
static long max_moves = -1;

/* bytes from v to the vertices already placed elsewhere than h */
static uint64_t cost_on(size_t v, int h)
{
	uint64_t c = 0;

	for (size_t e = p->adj_start[v]; e < p->adj_start[v + 1]; e++)
		if (placed[p->adj[e]] && host[p->adj[e]] != h)
			c += p->adj_bytes[e];
	return c;
}

static void search(size_t i, uint64_t cut, long moves)
{
	nodes++;
	if (cut >= best)
		return;
	if (i == nmovable) {
		best = cut;
		return;
	}
	for (size_t h = 0; h < p->nhosts; h++) {
		const struct place_vertex *pv = &p->vertices[movable[i]];
		long m = moves + ((int)h != origin[movable[i]]);

		if (cpu[h] + pv->cpu_milli > p->hosts[h].cpu_milli ||
		    (p->hosts[h].memory_limited &&
		     mem[h] + pv->memory_bytes > p->hosts[h].memory_bytes) ||
		    (max_moves >= 0 && m > max_moves))
			continue;
		host[movable[i]] = (int)h;
		placed[movable[i]] = true;
		cpu[h] += pv->cpu_milli;
		mem[h] += pv->memory_bytes;
		search(i + 1, cut + cost_on(movable[i], (int)h), m);
		cpu[h] -= pv->cpu_milli;
		mem[h] -= pv->memory_bytes;
		placed[movable[i]] = false;
	}
}

int main(int argc, char **argv)
{
	struct place_problem problem;
	struct json_object *out;
	char err[512];

	if (argc == 5 && !strcmp(argv[3], "--max-moves"))
		max_moves = atol(argv[4]);
	else if (argc != 3) {
		fprintf(stderr, "usage: place_exact GRAPH.json HOSTS.json [--max-moves N]\n");
		return 2;
	}
	if (place_problem_load(&problem, argv[1], argv[2], err, sizeof(err))) {
		fprintf(stderr, "place_exact: %s\n", err);
		return 1;
	}
	p = &problem;
	host = calloc(p->nvertices + 1, sizeof(*host));
	origin = calloc(p->nvertices + 1, sizeof(*origin));
	placed = calloc(p->nvertices + 1, sizeof(*placed));
	cpu = calloc(p->nhosts, sizeof(*cpu));
	mem = calloc(p->nhosts, sizeof(*mem));
	if (!host || !origin || !placed || !cpu || !mem)
		return 1;
	place_current(p, origin);
	place_current(p, host);
	/* the pinned ones are placed from the start; the others, heaviest traffic first */
	for (size_t v = 0; v < p->nvertices; v++) {
		if (p->vertices[v].pinned) {
			placed[v] = true;
			if (host[v] != PLACE_OUTSIDE) {
				cpu[host[v]] += p->vertices[v].cpu_milli;
				mem[host[v]] += p->vertices[v].memory_bytes;
			}
		} else if (nmovable == MAX_MOVABLE) {
			fprintf(stderr, "place_exact: more than %d movable vertices\n",
				MAX_MOVABLE);
			return 1;
		} else {
			movable[nmovable++] = (uint32_t)v;
		}
	}
	for (size_t i = 1; i < nmovable; i++) {
		for (size_t j = i; j > 0; j--) {
			uint32_t a = movable[j - 1], b = movable[j];
			uint64_t wa = 0, wb = 0;

			for (size_t e = p->adj_start[a]; e < p->adj_start[a + 1]; e++)
				wa += p->adj_bytes[e];
			for (size_t e = p->adj_start[b]; e < p->adj_start[b + 1]; e++)
				wb += p->adj_bytes[e];
			if (wa >= wb)
				break;
			movable[j - 1] = b;
			movable[j] = a;
		}
	}
	/* traffic between pinned vertices on different hosts is there in any placement */
	{
		uint64_t fixed = 0;

		for (size_t v = 0; v < p->nvertices; v++)
			for (size_t e = p->adj_start[v]; e < p->adj_start[v + 1]; e++)
				if (p->adj[e] > v && p->vertices[v].pinned &&
				    p->vertices[p->adj[e]].pinned && host[v] != host[p->adj[e]])
					fixed += p->adj_bytes[e];
		search(0, fixed, 0);
	}
	out = json_object_new_object();
	json_object_object_add(out, "cross_host_bytes_after",
			       best == UINT64_MAX ? NULL : json_object_new_uint64(best));
	json_object_object_add(out, "nodes", json_object_new_uint64(nodes));
	printf("%s\n", json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN));
	json_object_put(out);
	place_problem_free(&problem);
	return 0;
}
