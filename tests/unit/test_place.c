// SPDX-License-Identifier: GPL-2.0
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "analysis/place.h"
#include "log.h"
#include "place_view.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ERR_LEN	      512
#define NO_LIMIT      (-1)
#define DEFAULT	      (-1.0) /* a vertex's cpu or memory left out of the JSON */
#define GiB	      (1024.0 * 1024 * 1024)

/*
 * The tests describe graphs as these arrays, write them as docs/graph.md JSON, and check
 * plans against the arrays themselves: cut and loads are recomputed here, not taken from
 * place.c.
 */
struct tvertex {
	const char *id, *host;
	double cpu; /* cores, DEFAULT: absent (1) */
	double memory; /* bytes, DEFAULT: absent (0) */
};

struct tedge {
	const char *source, *target;
	uint64_t tx, rx;
};

struct thost {
	const char *name;
	double cpu;
	double memory; /* DEFAULT: no limit */
};

struct tgraph {
	const struct tvertex *v;
	size_t nv;
	const struct tedge *e;
	size_t ne;
	const struct thost *h;
	size_t nh;
};

#define TGRAPH(V, E, H)                                              \
	{                                                            \
		V, ARRAY_SIZE(V), E, ARRAY_SIZE(E), H, ARRAY_SIZE(H) \
	}

/* a JSON string: the test's ids have quotes in them, nothing that needs more */
static const char *js(const char *s)
{
	static char bufs[4][128];
	static int next;
	char *out = bufs[next++ % 4];
	size_t n = 0;

	out[n++] = '"';
	for (; *s && n < sizeof(bufs[0]) - 3; s++) {
		if (*s == '"' || *s == '\\')
			out[n++] = '\\';
		out[n++] = *s;
	}
	out[n++] = '"';
	out[n] = '\0';
	return out;
}

static char *graph_json(const struct tgraph *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	fprintf(f, "{\"version\": 1, \"projection\": \"process\", \"window_seconds\": null,\n"
		   " \"vertices\": [");
	for (size_t i = 0; i < g->nv; i++) {
		fprintf(f, "%s\n  {\"id\": %s, \"host\": %s, \"comm\": \"c%zu\"", i ? "," : "",
			js(g->v[i].id), js(g->v[i].host), i);
		if (g->v[i].cpu != DEFAULT)
			fprintf(f, ", \"cpu\": %g", g->v[i].cpu);
		if (g->v[i].memory != DEFAULT)
			fprintf(f, ", \"memory_bytes\": %.0f", g->v[i].memory);
		fprintf(f, "}");
	}
	fprintf(f, "],\n \"edges\": [");
	for (size_t i = 0; i < g->ne; i++)
		fprintf(f,
			"%s\n  {\"source\": %s, \"target\": %s, \"protocol\": \"tcp\", "
			"\"port\": 80, \"tx_bytes\": %llu, \"rx_bytes\": %llu, \"connections\": 1}",
			i ? "," : "", js(g->e[i].source), js(g->e[i].target),
			(unsigned long long)g->e[i].tx, (unsigned long long)g->e[i].rx);
	fprintf(f, "]}\n");
	fclose(f);
	return buf;
}

static char *hosts_json(const struct tgraph *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	fprintf(f, "[");
	for (size_t i = 0; i < g->nh; i++) {
		fprintf(f, "%s{\"name\": \"%s\", \"cpu\": %g", i ? ", " : "", g->h[i].name,
			g->h[i].cpu);
		if (g->h[i].memory != DEFAULT)
			fprintf(f, ", \"memory_bytes\": %.0f", g->h[i].memory);
		fprintf(f, "}");
	}
	fprintf(f, "]\n");
	fclose(f);
	return buf;
}

static void load(const struct tgraph *g, struct place_problem *p)
{
	char *graph = graph_json(g), *hosts = hosts_json(g), err[ERR_LEN] = "";
	int ret = place_problem_parse(p, graph, hosts, err, sizeof(err));

	if (ret)
		fail_msg("parse: %d %s\n%s\n%s", ret, err, graph, hosts);
	free(graph);
	free(hosts);
	assert_int_equal(p->nvertices, g->nv);
	assert_int_equal(p->nhosts, g->nh);
}

static int thost_index(const struct tgraph *g, const char *name)
{
	for (size_t h = 0; h < g->nh; h++)
		if (!strcmp(g->h[h].name, name))
			return (int)h;
	return -1;
}

static int tvertex_index(const struct tgraph *g, const char *id)
{
	for (size_t v = 0; v < g->nv; v++)
		if (!strcmp(g->v[v].id, id))
			return (int)v;
	fail_msg("no vertex %s", id);
	return -1;
}

/* the test's own count of cross-host bytes, from its edge list (host -1: outside) */
static uint64_t tcut(const struct tgraph *g, const int *host)
{
	uint64_t cut = 0;

	for (size_t i = 0; i < g->ne; i++) {
		int a = host[tvertex_index(g, g->e[i].source)];
		int b = host[tvertex_index(g, g->e[i].target)];

		if (a >= 0 && b >= 0 && a != b)
			cut += g->e[i].tx + g->e[i].rx;
	}
	return cut;
}

static double tcpu(const struct tvertex *v)
{
	if (v->cpu != DEFAULT)
		return v->cpu;
	return strncmp(v->id, "external/", 9) ? 1 : 0;
}

/* NULL when every host is within capacity under host[]; else which one is not */
static const char *tover(const struct tgraph *g, const int *host)
{
	static char why[128];

	for (size_t h = 0; h < g->nh; h++) {
		double cpu = 0, mem = 0;

		for (size_t v = 0; v < g->nv; v++) {
			if (host[v] != (int)h)
				continue;
			cpu += tcpu(&g->v[v]);
			mem += g->v[v].memory == DEFAULT ? 0 : g->v[v].memory;
		}
		if (cpu > g->h[h].cpu + 1e-9 ||
		    (g->h[h].memory != DEFAULT && mem > g->h[h].memory)) {
			snprintf(why, sizeof(why), "%s: cpu %g of %g, memory %.0f of %.0f",
				 g->h[h].name, cpu, g->h[h].cpu, mem, g->h[h].memory);
			return why;
		}
	}
	return NULL;
}

static void tcurrent(const struct tgraph *g, int *host)
{
	for (size_t v = 0; v < g->nv; v++)
		host[v] = thost_index(g, g->v[v].host);
}

/*
 * The optimum by exhaustion: every assignment of the movable vertices (not external, not
 * in pinned[]) with at most max_moves moves; UINT64_MAX when none fits.
 */
static uint64_t brute_force(const struct tgraph *g, const bool *pinned, long max_moves)
{
	int host[32], origin[32], movable[32];
	size_t nm = 0, combos = 1;
	uint64_t best = UINT64_MAX;

	assert_true(g->nv <= 32);
	tcurrent(g, origin);
	for (size_t v = 0; v < g->nv; v++)
		if (origin[v] >= 0 && strncmp(g->v[v].id, "external/", 9) && !(pinned && pinned[v]))
			movable[nm++] = (int)v;
	for (size_t i = 0; i < nm; i++)
		combos *= g->nh;
	assert_true(combos <= 1u << 22);
	for (size_t c = 0; c < combos; c++) {
		size_t x = c;
		long moves = 0;

		memcpy(host, origin, sizeof(origin));
		for (size_t i = 0; i < nm; i++, x /= g->nh) {
			host[movable[i]] = (int)(x % g->nh);
			moves += host[movable[i]] != origin[movable[i]];
		}
		if ((max_moves >= 0 && moves > max_moves) || tover(g, host))
			continue;
		if (tcut(g, host) < best)
			best = tcut(g, host);
	}
	return best;
}

/* Solves, then checks the plan against the test's own arrays; returns the cut. */
static uint64_t solve_and_check(const struct tgraph *g, const struct place_params *params,
				struct place_plan *plan_out)
{
	struct place_problem p;
	struct place_plan plan;
	char err[ERR_LEN] = "";
	int origin[64];
	long moves = 0;
	uint64_t cut;
	int ret;

	assert_true(g->nv <= ARRAY_SIZE(origin));
	load(g, &p);
	ret = place_solve(&p, params, &plan, err, sizeof(err));
	if (ret)
		fail_msg("place_solve: %d %s", ret, err);
	if (tover(g, plan.host))
		fail_msg("capacity exceeded: %s", tover(g, plan.host));
	assert_int_equal(plan.cut_after, tcut(g, plan.host));
	tcurrent(g, origin);
	assert_int_equal(plan.cut_before, tcut(g, origin));
	for (size_t v = 0; v < g->nv; v++)
		moves += plan.host[v] != origin[v];
	assert_int_equal(plan.moves, moves);
	if (params->max_moves >= 0)
		assert_true(moves <= params->max_moves);
	if (!tover(g, origin))
		assert_true(plan.cut_after <= plan.cut_before);
	cut = plan.cut_after;
	if (plan_out)
		*plan_out = plan;
	else
		place_plan_free(&plan);
	place_problem_free(&p);
	return cut;
}

static const struct place_params unlimited = { .max_moves = NO_LIMIT };

#define V(id, host)                        \
	{                                  \
		id, host, DEFAULT, DEFAULT \
	}
#define E(a, b, tx, rx)      \
	{                    \
		a, b, tx, rx \
	}
#define H(name, cpu)               \
	{                          \
		name, cpu, DEFAULT \
	}
#define HM(name, cpu, mem)     \
	{                      \
		name, cpu, mem \
	}

/* Two 4-cliques (100 bytes an edge) joined by one 1-byte edge, placed crosswise. */
static const struct tvertex cliques_v[] = {
	V("a0", "A"), V("a1", "A"), V("a2", "B"), V("a3", "B"),
	V("b0", "A"), V("b1", "A"), V("b2", "B"), V("b3", "B"),
};
static const struct tedge cliques_e[] = {
	E("a0", "a1", 60, 40), E("a0", "a2", 60, 40), E("a0", "a3", 60, 40), E("a1", "a2", 60, 40),
	E("a1", "a3", 60, 40), E("a2", "a3", 60, 40), E("b0", "b1", 60, 40), E("b0", "b2", 60, 40),
	E("b0", "b3", 60, 40), E("b1", "b2", 60, 40), E("b1", "b3", 60, 40), E("b2", "b3", 60, 40),
	E("a0", "b0", 1, 0),
};
static const struct thost two_of_4[] = { H("A", 4), H("B", 4) };

/* A chain v0 - v5, one light link in the middle, placed alternately on two hosts of 3. */
static const struct tvertex chain_v[] = {
	V("v0", "A"), V("v1", "B"), V("v2", "A"), V("v3", "B"), V("v4", "A"), V("v5", "B"),
};
static const struct tedge chain_e[] = {
	E("v0", "v1", 10, 0), E("v1", "v2", 10, 0), E("v2", "v3", 1, 0),
	E("v3", "v4", 10, 0), E("v4", "v5", 10, 0),
};
static const struct thost two_of_3[] = { H("A", 3), H("B", 3) };

/*
 * A 5-clique (10 bytes an edge; k3-k4 40) and z, tied to k0 by 5 bytes, on two hosts of 3:
 * the clique cannot stay whole. Best: {k0, k1, z} | {k2, k3, k4}, 60 bytes.
 */
static const struct tvertex split_v[] = {
	V("k0", "A"), V("k3", "A"), V("z", "A"), V("k1", "B"), V("k2", "B"), V("k4", "B"),
};
static const struct tedge split_e[] = {
	E("k0", "k1", 10, 0), E("k0", "k2", 10, 0),  E("k0", "k3", 10, 0), E("k0", "k4", 10, 0),
	E("k1", "k2", 10, 0), E("k1", "k3", 10, 0),  E("k1", "k4", 10, 0), E("k2", "k3", 10, 0),
	E("k2", "k4", 10, 0), E("k3", "k4", 30, 10), E("z", "k0", 5, 0),
};

/*
 * Memory binds: four 3 GiB workloads, hosts of 16 cpu and 6 GiB. By cpu all four would go
 * on one host (cut 0); by memory two per host, the heavy pairs together: 22 bytes.
 */
static const struct tvertex memory_v[] = {
	{ "m0", "A", 0.5, 3 * GiB },
	{ "m2", "A", 0.5, 3 * GiB },
	{ "m1", "B", 0.5, 3 * GiB },
	{ "m3", "B", 0.5, 3 * GiB },
};
static const struct tedge memory_e[] = {
	E("m0", "m1", 100, 0), E("m2", "m3", 100, 0), E("m0", "m2", 10, 0),
	E("m1", "m3", 10, 0),  E("m0", "m3", 1, 0),   E("m1", "m2", 1, 0),
};
static const struct thost memory_h[] = { HM("A", 16, 6 * GiB), HM("B", 16, 6 * GiB) };

/* Over capacity now (three on A, of 2): the plan must move one, the cheapest. */
static const struct tvertex over_v[] = {
	V("x0", "A"),
	V("x1", "A"),
	V("x2", "A"),
	V("y0", "B"),
};
static const struct tedge over_e[] = {
	E("x0", "x1", 10, 0),
	E("x1", "x2", 10, 0),
	E("x2", "y0", 3, 0),
};
static const struct thost two_of_2[] = { H("A", 2), H("B", 2) };

/* Three hosts, unequal, with parallel edges (summed) and both directions. */
static const struct tvertex three_v[] = {
	V("p0", "A"), V("p1", "B"), V("p2", "C"),
	V("q0", "C"), V("q1", "A"), V("q2", "B"),
	V("r0", "B"), V("r1", "C"), { "big", "A", 2, DEFAULT },
};
static const struct tedge three_e[] = {
	E("p0", "p1", 20, 5), E("p1", "p2", 20, 5),  E("p2", "p0", 20, 5), E("p0", "p1", 7, 0),
	E("q0", "q1", 30, 0), E("q1", "q2", 30, 0),  E("q2", "q0", 30, 0), E("q1", "q0", 3, 0),
	E("r0", "r1", 50, 0), E("r1", "big", 40, 0), E("p0", "q0", 2, 0),  E("big", "r0", 1, 1),
};
static const struct thost three_h[] = { H("A", 4), H("B", 3), H("C", 4) };

struct optimum_case {
	const char *name;
	struct tgraph g;
	uint64_t optimum; /* also found by brute_force() */
	unsigned int may_miss; /* starts that, alone, are known to stop short here */
};

static const struct optimum_case optimum_cases[] = {
	{ "two cliques crosswise", TGRAPH(cliques_v, cliques_e, two_of_4), 1, 0 },
	{ "chain", TGRAPH(chain_v, chain_e, two_of_3), 1, 0 },
	{ "capacity splits a clique", TGRAPH(split_v, split_e, two_of_3), 60, 0 },
	{ "memory binds", TGRAPH(memory_v, memory_e, memory_h), 22, 0 },
	{ "over capacity now", TGRAPH(over_v, over_e, two_of_2), 10, 0 },
	/*
	 * packing alone stops at 54 ({p0, p1, p2, r0} {r1, big} {q0, q1, q2}): the optimum
	 * exchanges three vertices for three between full hosts, beyond its local search
	 */
	{ "three unequal hosts", TGRAPH(three_v, three_e, three_h), 2, PLACE_FROM_PACKING },
};

/* The strategies one at a time, and together: each must reach the optimum on these. */
static const struct {
	unsigned int strategies;
	const char *name;
} strategy_sets[] = {
	{ PLACE_FROM_ALL, "all" },
	{ PLACE_FROM_CURRENT, "current + refinement" },
	{ PLACE_FROM_METIS_KWAY, "metis-kway + refinement" },
	{ PLACE_FROM_METIS_RECURSIVE, "metis-recursive + refinement" },
	{ PLACE_FROM_PACKING, "packing + refinement" },
};

static void test_known_optimum(void **state)
{
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(optimum_cases); i++) {
		const struct optimum_case *c = &optimum_cases[i];
		uint64_t brute = brute_force(&c->g, NULL, NO_LIMIT);

		/* the case's stated optimum is the true one */
		if (brute != c->optimum)
			fail_msg("%s: exhaustive optimum %llu, the case says %llu", c->name,
				 (unsigned long long)brute, (unsigned long long)c->optimum);
		for (size_t s = 0; s < ARRAY_SIZE(strategy_sets); s++) {
			struct place_params params = { .max_moves = NO_LIMIT,
						       .strategies = strategy_sets[s].strategies };
			uint64_t cut = solve_and_check(&c->g, &params, NULL);

			if (params.strategies == (params.strategies & c->may_miss))
				continue; /* its plan was still checked: feasible, exact counts */
			if (cut != c->optimum) {
				print_error("%s, %s: cut %llu, optimum %llu\n", c->name,
					    strategy_sets[s].name, (unsigned long long)cut,
					    (unsigned long long)c->optimum);
				failures++;
			}
		}
	}
	if (failures)
		fail_msg("%d cases missed the optimum", failures);
}

/* The crosswise cliques' plan itself: each clique whole on one host, four moves. */
static void test_cliques_plan(void **state)
{
	const struct tgraph g = TGRAPH(cliques_v, cliques_e, two_of_4);
	struct place_plan plan;
	int origin[8];

	(void)state;
	tcurrent(&g, origin);
	assert_int_equal(solve_and_check(&g, &unlimited, &plan), 1);
	assert_true(plan.feasible_before);
	assert_int_equal(plan.cut_before, 800);
	assert_int_equal(plan.moves, 4);
	for (size_t v = 1; v < 4; v++) {
		assert_int_equal(plan.host[v], plan.host[0]);
		assert_int_equal(plan.host[4 + v], plan.host[4]);
	}
	assert_int_not_equal(plan.host[0], plan.host[4]);
	place_plan_free(&plan);
}

/* --max-moves: the best plan with at most N moves, by exhaustion. */
static void test_max_moves(void **state)
{
	const struct tgraph cliques = TGRAPH(cliques_v, cliques_e, two_of_4);
	const struct tgraph three = TGRAPH(three_v, three_e, three_h);
	const struct tgraph chain = TGRAPH(chain_v, chain_e, two_of_3);
	const struct tgraph *graphs[] = { &cliques, &three, &chain };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(graphs); i++) {
		for (long n = 0; n <= 4; n++) {
			struct place_params params = { .max_moves = n };
			uint64_t want = brute_force(graphs[i], NULL, n);
			uint64_t got = solve_and_check(graphs[i], &params, NULL);

			if (got != want)
				fail_msg("graph %zu, --max-moves %ld: cut %llu, best %llu", i, n,
					 (unsigned long long)got, (unsigned long long)want);
		}
	}
}

/*
 * External vertices: one at an address outside the hosts (its traffic the same in any
 * plan), one on host B; both heavy. Neither moves; the workloads follow the one on B.
 */
static const struct tvertex external_v[] = {
	V("w0", "A"),
	V("w1", "A"),
	V("w2", "B"),
	V("external/10.0.0.9", "10.0.0.9"),
	V("external/10.0.0.2", "B"),
};
static const struct tedge external_e[] = {
	E("w0", "w1", 10, 0),
	E("w2", "w0", 5, 0),
	E("w0", "external/10.0.0.9", 600, 400),
	E("external/10.0.0.2", "w1", 500, 0),
	E("w2", "external/10.0.0.2", 50, 0),
};

static void test_external_vertices_stay(void **state)
{
	const struct tgraph g = TGRAPH(external_v, external_e, two_of_3);
	struct place_problem p;
	struct place_plan plan;
	int origin[5];

	(void)state;
	load(&g, &p);
	assert_int_equal(p.external_bytes, 1000);
	assert_true(p.vertices[3].external && p.vertices[3].pinned);
	assert_int_equal(p.vertices[3].host, PLACE_OUTSIDE);
	assert_true(p.vertices[4].external && p.vertices[4].pinned);
	assert_int_equal(p.vertices[4].host, 1);
	/* an external vertex takes no cpu unless it says so */
	assert_int_equal(p.vertices[4].cpu_milli, 0);
	place_problem_free(&p);

	tcurrent(&g, origin);
	assert_int_equal(solve_and_check(&g, &unlimited, &plan), brute_force(&g, NULL, NO_LIMIT));
	assert_int_equal(plan.cut_after, 0);
	assert_int_equal(plan.cut_before, 505);
	assert_int_equal(plan.host[3], PLACE_OUTSIDE);
	assert_int_equal(plan.host[4], origin[4]);
	for (size_t v = 0; v < 3; v++)
		assert_int_equal(plan.host[v], 1);
	place_plan_free(&plan);
}

/* --pin: a0 pinned on A and a2 on B split clique a; the plan keeps them and is optimal. */
static void test_pinned_vertices_stay(void **state)
{
	const struct tgraph g = TGRAPH(cliques_v, cliques_e, two_of_4);
	const bool pinned[8] = { [0] = true, [2] = true };
	struct place_problem p;
	struct place_plan plan;
	char err[ERR_LEN];
	int origin[8];

	(void)state;
	tcurrent(&g, origin);
	load(&g, &p);
	assert_int_equal(place_problem_pin(&p, "a0", err, sizeof(err)), 1);
	assert_int_equal(place_problem_pin(&p, "a[2]", err, sizeof(err)), 1);
	assert_int_equal(place_problem_pin(&p, "nothing*", err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "--pin 'nothing*' matches no vertex");
	assert_int_equal(place_solve(&p, &unlimited, &plan, err, sizeof(err)), 0);
	assert_int_equal(plan.host[0], origin[0]);
	assert_int_equal(plan.host[2], origin[2]);
	assert_null(tover(&g, plan.host));
	assert_int_equal(plan.cut_after, tcut(&g, plan.host));
	assert_int_equal(plan.cut_after, brute_force(&g, pinned, NO_LIMIT));
	/* clique a split 1 | 3 (300 bytes), so clique b 3 | 1 for room (300 more) */
	assert_int_equal(plan.cut_after, 600);
	place_plan_free(&plan);
	place_problem_free(&p);

	/* a glob over several: every b stays, so only a's vertices can move */
	load(&g, &p);
	assert_int_equal(place_problem_pin(&p, "b*", err, sizeof(err)), 4);
	assert_int_equal(place_solve(&p, &unlimited, &plan, err, sizeof(err)), 0);
	for (size_t v = 4; v < 8; v++)
		assert_int_equal(plan.host[v], origin[v]);
	assert_null(tover(&g, plan.host));
	place_plan_free(&plan);
	place_problem_free(&p);
}

struct infeasible_case {
	const char *name;
	struct tgraph g;
	long max_moves;
	const char *err; /* a part of the message */
};

static const struct tvertex three_of_1_v[] = { V("u0", "A"), V("u1", "A"), V("u2", "B") };
static const struct tvertex too_big_v[] = { V("u0", "A"), { "big", "B", 3, DEFAULT } };
static const struct tvertex too_much_memory_v[] = { { "u0", "A", 1, 5 * GiB },
						    { "u1", "B", 1, 5 * GiB } };
static const struct tvertex pinned_over_v[] = { V("u0", "B"), { "external/x", "A", 5, DEFAULT } };
static const struct tvertex no_packing_v[] = { { "u0", "A", 2, DEFAULT },
					       { "u1", "A", 2, DEFAULT },
					       { "u2", "B", 2, DEFAULT } };
static const struct tedge u_e[] = { E("u0", "u1", 1, 0) };
static const struct tedge big_e[] = { E("u0", "big", 1, 0) };
static const struct tedge pinned_e[] = { E("u0", "external/x", 1, 0) };
static const struct thost one_each[] = { H("A", 1), H("B", 1) };
static const struct thost memory_8[] = { HM("A", 4, 4 * GiB), HM("B", 4, 4 * GiB) };
static const struct thost three_each[] = { H("A", 3), H("B", 3) };

static const struct infeasible_case infeasible_cases[] = {
	{ "more cpu than all hosts", TGRAPH(three_of_1_v, u_e, one_each), NO_LIMIT,
	  "no feasible placement: the workloads need 3.000 cpu, the hosts have 2.000" },
	{ "a vertex larger than any host", TGRAPH(too_big_v, big_e, two_of_2), NO_LIMIT,
	  "no host has room for 'big' (cpu 3.000" },
	{ "more memory than all hosts", TGRAPH(too_much_memory_v, u_e, memory_8), NO_LIMIT,
	  "the workloads need 10737418240 bytes of memory, the hosts have 8589934592" },
	{ "pinned load over a host", TGRAPH(pinned_over_v, pinned_e, two_of_4), NO_LIMIT,
	  "the pinned vertices on A need more cpu than it has" },
	{ "no packing, totals fit", TGRAPH(no_packing_v, u_e, three_each), NO_LIMIT,
	  "no feasible placement found (the current one: A: cpu 4.000 > capacity 3.000" },
	{ "over capacity, no moves allowed", TGRAPH(over_v, over_e, two_of_2), 0,
	  "no feasible placement found within 0 moves" },
};

static bool one_printable_line(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isprint((unsigned char)*s))
			return false;
	return true;
}

static void test_infeasible(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(infeasible_cases); i++) {
		const struct infeasible_case *c = &infeasible_cases[i];
		struct place_params params = { .max_moves = c->max_moves };
		struct place_problem p;
		struct place_plan plan;
		char err[ERR_LEN] = "";
		int ret;

		/* truly infeasible: exhaustion finds nothing either */
		assert_int_equal(brute_force(&c->g, NULL, c->max_moves), UINT64_MAX);
		load(&c->g, &p);
		ret = place_solve(&p, &params, &plan, err, sizeof(err));
		place_problem_free(&p);
		if (ret != -ENOSPC || !strstr(err, c->err) || !one_printable_line(err))
			fail_msg("%s: expected -ENOSPC and \"%s\", got %d \"%s\"", c->name, c->err,
				 ret, err);
		assert_null(plan.host);
	}
}

/* A planted-partition graph, like bench/place.py's, from a fixed linear congruential seed. */
struct random_graph {
	char *graph, *hosts;
	size_t n, k;
};

static uint32_t lcg(uint64_t *state)
{
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*state >> 33);
}

static void random_graph(struct random_graph *r, size_t n, size_t k, uint64_t seed)
{
	size_t len = 0, hlen = 0, per = (n + k - 1) / k;
	FILE *f = open_memstream(&r->graph, &len), *h = open_memstream(&r->hosts, &hlen);
	bool first = true;

	assert_non_null(f);
	assert_non_null(h);
	r->n = n;
	r->k = k;
	fprintf(f, "{\"vertices\": [");
	/* vertex i on host (i * 7) % k: every host gets n / k, the communities scattered */
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s{\"id\": \"v%zu\", \"host\": \"h%zu\", \"cpu\": %u}", i ? ", " : "",
			i, (i * 7) % k, 1 + lcg(&seed) % 2);
	fprintf(f, "], \"edges\": [");
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++) {
			bool same = i / 10 == j / 10; /* communities of 10 */
			uint32_t x = lcg(&seed) % 1000;

			if ((same && x < 500) || (!same && x < 4)) {
				fprintf(f,
					"%s{\"source\": \"v%zu\", \"target\": \"v%zu\", "
					"\"tx_bytes\": %u, \"rx_bytes\": 0}",
					first ? "" : ", ", i, j, 1 + lcg(&seed) % 100000);
				first = false;
			}
		}
	}
	fprintf(f, "]}");
	fclose(f);
	fprintf(h, "[");
	for (size_t i = 0; i < k; i++)
		fprintf(h, "%s{\"name\": \"h%zu\", \"cpu\": %zu}", i ? ", " : "", i,
			(size_t)(per * 1.5 * 1.1) + 2);
	fprintf(h, "]");
	fclose(h);
}

static void test_deterministic_and_feasible(void **state)
{
	struct random_graph r;
	int *first = NULL;

	(void)state;
	random_graph(&r, 300, 6, 42);
	for (int run = 0; run < 3; run++) {
		struct place_problem p;
		struct place_plan plan;
		char err[ERR_LEN] = "";

		assert_int_equal(place_problem_parse(&p, r.graph, r.hosts, err, sizeof(err)), 0);
		assert_int_equal(place_solve(&p, &unlimited, &plan, err, sizeof(err)), 0);
		assert_int_equal(place_check_capacity(&p, plan.host, err, sizeof(err)), 0);
		assert_true(plan.feasible_before);
		assert_int_equal(plan.cut_after, place_cut(&p, plan.host));
		/* the communities are there to find: far less than half the traffic is left */
		assert_true(plan.cut_after * 4 < plan.cut_before);
		if (!first) {
			first = malloc(p.nvertices * sizeof(*first));
			assert_non_null(first);
			memcpy(first, plan.host, p.nvertices * sizeof(*first));
		} else if (memcmp(first, plan.host, p.nvertices * sizeof(*first))) {
			fail_msg("run %d: a different plan from the same input", run);
		}
		place_plan_free(&plan);
		place_problem_free(&p);
	}
	free(first);
	free(r.graph);
	free(r.hosts);
}

/*
 * Never worse than the current placement, which is feasible here, whenever the current
 * placement is among the starts (the default); any start's plan fits the capacities.
 */
static void test_never_worse_than_current(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 5; seed++) {
		struct random_graph r;

		random_graph(&r, 120, 4, seed);
		for (size_t s = 0; s < ARRAY_SIZE(strategy_sets); s++) {
			struct place_params params = { .max_moves = (long)seed * 3 - 4,
						       .strategies = strategy_sets[s].strategies };
			bool with_current = params.strategies & PLACE_FROM_CURRENT;
			struct place_problem p;
			struct place_plan plan;
			char err[ERR_LEN] = "";
			int ret;

			assert_int_equal(
				place_problem_parse(&p, r.graph, r.hosts, err, sizeof(err)), 0);
			ret = place_solve(&p, &params, &plan, err, sizeof(err));
			if (ret &&
			    !with_current) { /* a lone start may find nothing in the budget */
				assert_int_equal(ret, -ENOSPC);
				place_problem_free(&p);
				continue;
			}
			assert_int_equal(ret, 0);
			assert_int_equal(place_check_capacity(&p, plan.host, err, sizeof(err)), 0);
			if (with_current && plan.cut_after > plan.cut_before)
				fail_msg("seed %llu, %s: cut %llu after, %llu before",
					 (unsigned long long)seed, strategy_sets[s].name,
					 (unsigned long long)plan.cut_after,
					 (unsigned long long)plan.cut_before);
			if (params.max_moves >= 0)
				assert_true((long)plan.moves <= params.max_moves);
			place_plan_free(&plan);
			place_problem_free(&p);
		}
		free(r.graph);
		free(r.hosts);
	}
}

/* Input errors: one line each, naming what is wrong. */
struct input_case {
	const char *name, *graph, *hosts, *err;
};

#define GOOD_GRAPH                                                                              \
	"{\"vertices\": [{\"id\": \"a\", \"host\": \"A\"}, {\"id\": \"b\", \"host\": \"B\"}], " \
	"\"edges\": [{\"source\": \"a\", \"target\": \"b\", \"tx_bytes\": 1, \"rx_bytes\": 2}]}"
#define GOOD_HOSTS  "[{\"name\": \"A\", \"cpu\": 2}, {\"name\": \"B\", \"cpu\": 2}]"
#define VERTICES(v) "{\"vertices\": [" v "], \"edges\": []}"
#define EDGES(e)                                                                                \
	"{\"vertices\": [{\"id\": \"a\", \"host\": \"A\"}, {\"id\": \"b\", \"host\": \"B\"}], " \
	"\"edges\": [" e "]}"

static const struct input_case input_cases[] = {
	{ "empty graph text", "", GOOD_HOSTS,
	  "graph: not JSON: unexpected end of input at line 1, column 1" },
	{ "cut short", "{\"vertices\": [", GOOD_HOSTS,
	  "graph: not JSON: unexpected end of input at line 1, column 15" },
	{ "bad token on line 2", "{\"vertices\":\n [nope]}", GOOD_HOSTS, "at line 2, column " },
	{ "trailing data", GOOD_GRAPH " x", GOOD_HOSTS, "graph: not JSON: trailing data" },
	{ "trailing comma", "{\"vertices\": [1,]}", GOOD_HOSTS, "graph: not JSON" },
	{ "not UTF-8", VERTICES("{\"id\": \"\xff\", \"host\": \"A\"}"), GOOD_HOSTS,
	  "graph: not JSON" },
	{ "graph an array", "[]", GOOD_HOSTS,
	  "graph: expected an object with \"vertices\" and \"edges\" arrays" },
	{ "no edges", "{\"vertices\": []}", GOOD_HOSTS, "\"vertices\" and \"edges\"" },
	{ "version 2", "{\"version\": 2, \"vertices\": [], \"edges\": []}", GOOD_HOSTS,
	  "graph: version 2: only version 1 is known" },
	{ "vertex without id", VERTICES("{\"host\": \"A\"}"), GOOD_HOSTS,
	  "graph: vertex 0 has no \"id\"" },
	{ "type projection: no host", VERTICES("{\"id\": \"nginx\"}"), GOOD_HOSTS,
	  "graph: vertex 'nginx' has no \"host\"" },
	{ "unknown host", VERTICES("{\"id\": \"a\", \"host\": \"Z\"}"), GOOD_HOSTS,
	  "graph: vertex 'a': host 'Z' is not among the hosts" },
	{ "duplicate vertex",
	  VERTICES("{\"id\": \"a\", \"host\": \"A\"}, {\"id\": \"a\", \"host\": \"B\"}"),
	  GOOD_HOSTS, "graph: vertex 'a' is listed twice" },
	{ "negative vertex cpu", VERTICES("{\"id\": \"a\", \"host\": \"A\", \"cpu\": -1}"),
	  GOOD_HOSTS, "graph: vertex 'a': \"cpu\" must be a number of cores, 0 or more" },
	{ "cpu a string", VERTICES("{\"id\": \"a\", \"host\": \"A\", \"cpu\": \"1\"}"), GOOD_HOSTS,
	  "\"cpu\" must be" },
	{ "negative memory", VERTICES("{\"id\": \"a\", \"host\": \"A\", \"memory_bytes\": -5}"),
	  GOOD_HOSTS, "graph: vertex 'a': \"memory_bytes\" must be a byte count, 0 or more" },
	{ "edge to nowhere", EDGES("{\"source\": \"a\", \"target\": \"c\"}"), GOOD_HOSTS,
	  "graph: edge 0: no vertex 'c'" },
	{ "edge without target", EDGES("{\"source\": \"a\"}"), GOOD_HOSTS,
	  "graph: edge 0 needs \"source\" and \"target\"" },
	{ "negative bytes",
	  EDGES("{\"source\": \"a\", \"target\": \"b\", \"tx_bytes\": -1, \"rx_bytes\": 0}"),
	  GOOD_HOSTS, "graph: edge 0 ('a' -> 'b'): tx_bytes and rx_bytes must be byte counts" },
	{ "hosts not JSON", GOOD_GRAPH, "[{\"name\": \"A\",", "hosts: not JSON" },
	{ "hosts an object", GOOD_GRAPH, "{\"A\": 2}",
	  "hosts: expected an array of {\"name\", \"cpu\"}" },
	{ "no hosts", GOOD_GRAPH, "[]", "hosts: no hosts" },
	{ "host without name", GOOD_GRAPH, "[{\"cpu\": 2}]", "hosts: entry 0 has no \"name\"" },
	{ "host listed twice", GOOD_GRAPH,
	  "[{\"name\": \"A\", \"cpu\": 2}, {\"name\": \"A\", \"cpu\": 2}]",
	  "hosts: host 'A' is listed twice" },
	{ "host without cpu", GOOD_GRAPH, "[{\"name\": \"A\"}]",
	  "hosts: host 'A': \"cpu\" must be a number of cores, 0 or more" },
	{ "negative capacity", GOOD_GRAPH, "[{\"name\": \"A\", \"cpu\": -4}]",
	  "hosts: host 'A': \"cpu\" must be a number of cores, 0 or more" },
	{ "negative memory capacity", GOOD_GRAPH,
	  "[{\"name\": \"A\", \"cpu\": 4, \"memory_bytes\": -1}]",
	  "hosts: host 'A': \"memory_bytes\" must be a byte count, 0 or more" },
	{ "infinite capacity", GOOD_GRAPH, "[{\"name\": \"A\", \"cpu\": 1e999}]",
	  "hosts: host 'A': \"cpu\" must be" },
};

static void test_input_errors(void **state)
{
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(input_cases); i++) {
		const struct input_case *c = &input_cases[i];
		struct place_problem p;
		char err[ERR_LEN] = "";
		int ret = place_problem_parse(&p, c->graph, c->hosts, err, sizeof(err));

		if (ret >= 0 || !strstr(err, c->err) || !one_printable_line(err)) {
			print_error("%s: expected an error with \"%s\", got %d \"%s\"\n", c->name,
				    c->err, ret, err);
			failures++;
		}
		/* nothing left allocated, nothing to free twice */
		assert_null(p.vertices);
		assert_null(p.hosts);
	}
	if (failures)
		fail_msg("%d of %zu input cases failed", failures, ARRAY_SIZE(input_cases));
}

/* The good input parses: edge weight tx + rx, defaults cpu 1 and memory 0, no memory limit */
static void test_input_defaults(void **state)
{
	struct place_problem p;
	char err[ERR_LEN] = "";

	(void)state;
	assert_int_equal(place_problem_parse(&p, GOOD_GRAPH, GOOD_HOSTS, err, sizeof(err)), 0);
	assert_int_equal(p.nvertices, 2);
	assert_int_equal(p.vertices[0].cpu_milli, 1000);
	assert_int_equal(p.vertices[0].memory_bytes, 0);
	assert_int_equal(p.hosts[0].cpu_milli, 2000);
	assert_false(p.hosts[0].memory_limited);
	assert_int_equal(p.adj_start[1] - p.adj_start[0], 1);
	assert_int_equal(p.adj_bytes[p.adj_start[0]], 3);
	place_problem_free(&p);
}

static char *temp_file(const char *text)
{
	char *path = strdup("/tmp/plumb-test-place-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* From files, errors name the file. */
static void test_load_errors(void **state)
{
	char *graph = temp_file(GOOD_GRAPH), *hosts = temp_file(GOOD_HOSTS);
	char *bad = temp_file("{\"vertices\": [}"), want[ERR_LEN], err[ERR_LEN] = "";
	struct place_problem p;

	(void)state;
	assert_int_equal(place_problem_load(&p, graph, hosts, err, sizeof(err)), 0);
	place_problem_free(&p);

	assert_true(place_problem_load(&p, "/nonexistent/graph.json", hosts, err, sizeof(err)) < 0);
	assert_string_equal(err, "/nonexistent/graph.json: No such file or directory");
	assert_true(place_problem_load(&p, graph, "/nonexistent/hosts.json", err, sizeof(err)) < 0);
	assert_string_equal(err, "/nonexistent/hosts.json: No such file or directory");
	assert_true(place_problem_load(&p, bad, hosts, err, sizeof(err)) < 0);
	snprintf(want, sizeof(want), "%s: not JSON: ", bad);
	assert_true(!strncmp(err, want, strlen(want)));
	assert_true(place_problem_load(&p, graph, bad, err, sizeof(err)) < 0);
	snprintf(want, sizeof(want), "%s: not JSON: ", bad);
	assert_true(!strncmp(err, want, strlen(want)));
	assert_true(place_problem_load(&p, "/", hosts, err, sizeof(err)) < 0);
	assert_true(one_printable_line(err));

	unlink(graph);
	unlink(hosts);
	unlink(bad);
	free(graph);
	free(hosts);
	free(bad);
}

struct output {
	char *buf;
	size_t len;
	FILE *f;
};

static void output_open(struct output *o)
{
	o->buf = NULL;
	o->len = 0;
	o->f = open_memstream(&o->buf, &o->len);
	assert_non_null(o->f);
}

static void output_close(struct output *o)
{
	assert_int_equal(fclose(o->f), 0);
}

static struct json_object *json_get(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("no \"%s\" in the JSON output", key);
	return v;
}

static void test_json_output(void **state)
{
	const struct tgraph g = TGRAPH(external_v, external_e, two_of_3);
	struct place_problem p;
	struct place_plan plan;
	struct json_object *root, *moves, *hosts, *placement;
	char err[ERR_LEN];
	struct output out;

	(void)state;
	load(&g, &p);
	assert_int_equal(place_solve(&p, &unlimited, &plan, err, sizeof(err)), 0);
	output_open(&out);
	assert_int_equal(place_write_json(out.f, &p, &plan), 0);
	output_close(&out);
	root = json_tokener_parse(out.buf);
	if (!root)
		fail_msg("not JSON:\n%s", out.buf);
	assert_int_equal(json_object_get_int(json_get(root, "version")), 1);
	assert_int_equal(json_object_get_uint64(json_get(root, "cross_host_bytes_before")), 505);
	assert_int_equal(json_object_get_uint64(json_get(root, "cross_host_bytes_after")), 0);
	assert_true(fabs(json_object_get_double(json_get(root, "reduction_percent")) - 100) < 1e-9);
	assert_int_equal(json_object_get_uint64(json_get(root, "external_bytes")), 1000);
	assert_true(json_object_get_boolean(json_get(root, "feasible_before")));
	moves = json_get(root, "moves");
	assert_int_equal(json_object_array_length(moves), 2);
	assert_int_equal(json_object_get_uint64(json_get(root, "moved")), 2);
	for (size_t i = 0; i < 2; i++) {
		struct json_object *m = json_object_array_get_idx(moves, i);

		assert_string_equal(json_object_get_string(json_get(m, "vertex")), i ? "w1" : "w0");
		assert_string_equal(json_object_get_string(json_get(m, "from")), "A");
		assert_string_equal(json_object_get_string(json_get(m, "to")), "B");
		assert_true(fabs(json_object_get_double(json_get(m, "cpu")) - 1) < 1e-9);
	}
	hosts = json_get(root, "hosts");
	assert_int_equal(json_object_array_length(hosts), 2);
	for (size_t i = 0; i < 2; i++) {
		struct json_object *h = json_object_array_get_idx(hosts, i);

		assert_true(json_object_get_double(json_get(h, "cpu_after")) <=
			    json_object_get_double(json_get(h, "cpu_capacity")));
		assert_true(json_object_is_type(json_get(h, "memory_capacity"), json_type_null));
	}
	assert_true(fabs(json_object_get_double(
				 json_get(json_object_array_get_idx(hosts, 1), "cpu_after")) -
			 3) < 1e-9);
	placement = json_get(root, "placement");
	assert_int_equal(json_object_array_length(placement), 5);
	assert_string_equal(
		json_object_get_string(json_get(json_object_array_get_idx(placement, 3), "host")),
		"10.0.0.9");
	json_object_put(root);
	free(out.buf);
	place_plan_free(&plan);
	place_problem_free(&p);
}

static void test_table_output(void **state)
{
	const struct tgraph g = TGRAPH(cliques_v, cliques_e, two_of_4);
	struct place_problem p;
	struct place_plan plan;
	char err[ERR_LEN];
	struct output out;

	(void)state;
	load(&g, &p);
	assert_int_equal(place_solve(&p, &unlimited, &plan, err, sizeof(err)), 0);
	output_open(&out);
	place_write_table(out.f, &p, &plan);
	output_close(&out);
	if (!strstr(out.buf, "cross-host traffic: 800B before, 1B after (-99.9%), 4 moves\n") ||
	    !strstr(out.buf, "\nA          4.000       4.000       4.000") ||
	    !strstr(out.buf, "\nMOVE"))
		fail_msg("unexpected table:\n%s", out.buf);
	free(out.buf);
	place_plan_free(&plan);
	place_problem_free(&p);
}

static size_t count(const char *haystack, const char *needle)
{
	size_t n = 0;

	for (const char *s = strstr(haystack, needle); s; s = strstr(s + 1, needle))
		n++;
	return n;
}

/*
 * The YAML, checked by PyYAML when python3 has it: a list of moves, each with the node
 * affinity to its new host and podAffinity terms (weights 1..100) for peers there.
 */
static const char yaml_check[] =
	"import sys, yaml\n"
	"d = yaml.safe_load(open(sys.argv[1]))\n"
	"moves = d['moves']\n"
	"assert len(moves) == int(sys.argv[2]), moves\n"
	"for m in moves:\n"
	"    a = m['affinity']\n"
	"    t = a['nodeAffinity']['requiredDuringSchedulingIgnoredDuringExecution']\n"
	"    e = t['nodeSelectorTerms'][0]['matchExpressions'][0]\n"
	"    assert e == {'key': 'kubernetes.io/hostname', 'operator': 'In',\n"
	"                 'values': [m['to']]}, e\n"
	"    for p in a.get('podAffinity', {}).get(\n"
	"            'preferredDuringSchedulingIgnoredDuringExecution', []):\n"
	"        assert 1 <= p['weight'] <= 100\n"
	"        assert p['podAffinityTerm']['topologyKey'] == 'kubernetes.io/hostname'\n"
	"        assert p['podAffinityTerm']['labelSelector']['matchLabels']\n"
	"print(m['workload'], m['name'])\n";

static void test_k8s_output(void **state)
{
	/* ids and labels that YAML would misread unquoted, and one a label must rewrite */
	static const struct tvertex v[] = {
		V("a0: x", "A"), V("a1 \"q\"", "A"), V("a2", "B"), V("a3", "B"),
		V("b0", "A"),	 V("b1", "A"),	     V("b2", "B"), V("b3", "B"),
	};
	static const struct tedge e[] = {
		E("a0: x", "a1 \"q\"", 60, 40), E("a0: x", "a2", 60, 40),
		E("a0: x", "a3", 60, 40),	E("a1 \"q\"", "a2", 60, 40),
		E("a1 \"q\"", "a3", 60, 40),	E("a2", "a3", 60, 40),
		E("b0", "b1", 60, 40),		E("b0", "b2", 60, 40),
		E("b0", "b3", 60, 40),		E("b1", "b2", 60, 40),
		E("b1", "b3", 60, 40),		E("b2", "b3", 60, 40),
		E("a0: x", "b0", 1, 0),
	};
	const struct tgraph g = TGRAPH(v, e, two_of_4);
	char err[ERR_LEN], *path, cmd[256];
	struct place_problem p;
	struct place_plan plan;
	struct output out;

	(void)state;
	load(&g, &p);
	assert_int_equal(place_solve(&p, &unlimited, &plan, err, sizeof(err)), 0);
	assert_int_equal(plan.moves, 4);
	output_open(&out);
	place_write_k8s(out.f, &p, &plan, 2);
	output_close(&out);
	/* the structure, without a YAML parser */
	assert_int_equal(count(out.buf, "\n  - workload: "), 4);
	assert_int_equal(count(out.buf, "requiredDuringSchedulingIgnoredDuringExecution:"), 4);
	assert_int_equal(count(out.buf, "preferredDuringSchedulingIgnoredDuringExecution:"), 4);
	/* two peers each (--peers 2), by the comm label c0..c7 */
	assert_int_equal(count(out.buf, "            podAffinityTerm:\n"), 8);
	assert_int_equal(count(out.buf, "          - weight: 100\n"), 8);
	assert_null(strchr(out.buf, '\t'));

	path = temp_file(out.buf);
	if (system("python3 -c 'import yaml' 2>/dev/null") == 0) {
		char *script = temp_file(yaml_check);

		snprintf(cmd, sizeof(cmd), "python3 %s %s %zu >/dev/null", script, path,
			 plan.moves);
		if (system(cmd))
			fail_msg("PyYAML rejects the k8s output:\n%s", out.buf);
		unlink(script);
		free(script);
	} else {
		print_message("python3-yaml missing: the YAML is checked by structure only\n");
	}
	unlink(path);
	free(path);
	free(out.buf);

	/* no moves: an empty list */
	place_plan_free(&plan);
	plan = (struct place_plan){ 0 };
	plan.host = calloc(p.nvertices, sizeof(int));
	assert_non_null(plan.host);
	place_current(&p, plan.host);
	output_open(&out);
	place_write_k8s(out.f, &p, &plan, 2);
	output_close(&out);
	assert_non_null(strstr(out.buf, "\nmoves: []\n"));
	free(out.buf);
	place_plan_free(&plan);
	place_problem_free(&p);
}

/* The command's exit status: 0 with a plan, 1 on bad input or no feasible placement. */
static void test_view_exit_status(void **state)
{
	char *graph = temp_file(GOOD_GRAPH), *hosts = temp_file(GOOD_HOSTS);
	char *tiny = temp_file("[{\"name\": \"A\", \"cpu\": 1}, {\"name\": \"B\", \"cpu\": 0.5}]");
	char *bad = temp_file("{\"vertices\": [}");
	struct {
		const char *graph, *hosts, *pin;
		enum place_format format;
		int status;
	} cases[] = {
		{ graph, hosts, NULL, PLACE_FORMAT_TABLE, 0 },
		{ graph, hosts, NULL, PLACE_FORMAT_JSON, 0 },
		{ graph, hosts, "a", PLACE_FORMAT_K8S, 0 },
		{ graph, hosts, "nothing", PLACE_FORMAT_TABLE, 1 },
		{ "/nonexistent/graph.json", hosts, NULL, PLACE_FORMAT_TABLE, 1 },
		{ bad, hosts, NULL, PLACE_FORMAT_TABLE, 1 },
		{ graph, bad, NULL, PLACE_FORMAT_TABLE, 1 },
		{ graph, tiny, NULL, PLACE_FORMAT_TABLE, 1 }, /* 2 cpu needed, 1.5 there */
	};
	int out, err, devnull = open("/dev/null", O_WRONLY);

	(void)state;
	assert_true(devnull >= 0);
	fflush(stdout);
	fflush(stderr);
	out = dup(STDOUT_FILENO);
	err = dup(STDERR_FILENO);
	assert_true(out >= 0 && err >= 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct place_options o = { .format = cases[i].format, .max_moves = NO_LIMIT };
		int status;

		snprintf(o.graph, sizeof(o.graph), "%s", cases[i].graph);
		snprintf(o.hosts, sizeof(o.hosts), "%s", cases[i].hosts);
		if (cases[i].pin) {
			snprintf(o.pins[0], sizeof(o.pins[0]), "%s", cases[i].pin);
			o.npins = 1;
		}
		dup2(devnull, STDOUT_FILENO);
		dup2(devnull, STDERR_FILENO);
		status = place_view_run(&o);
		fflush(stdout);
		fflush(stderr);
		dup2(out, STDOUT_FILENO);
		dup2(err, STDERR_FILENO);
		if (status != cases[i].status)
			fail_msg("case %zu: exit status %d, expected %d", i, status,
				 cases[i].status);
	}
	close(out);
	close(err);
	close(devnull);
	for (char **f = (char *[]){ graph, hosts, tiny, bad, NULL }; *f; f++) {
		unlink(*f);
		free(*f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_optimum),
		cmocka_unit_test(test_cliques_plan),
		cmocka_unit_test(test_max_moves),
		cmocka_unit_test(test_external_vertices_stay),
		cmocka_unit_test(test_pinned_vertices_stay),
		cmocka_unit_test(test_infeasible),
		cmocka_unit_test(test_deterministic_and_feasible),
		cmocka_unit_test(test_never_worse_than_current),
		cmocka_unit_test(test_input_errors),
		cmocka_unit_test(test_input_defaults),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_json_output),
		cmocka_unit_test(test_table_output),
		cmocka_unit_test(test_k8s_output),
		cmocka_unit_test(test_view_exit_status),
	};

	log_level = LOG_WARN; /* place_solve's -v lines */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
