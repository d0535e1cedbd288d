// SPDX-License-Identifier: GPL-2.0
/*
 * A genetic algorithm for plumb place's problem, the baseline bench/place.py compares with:
 * in the manner of Neves, Vilaça and Pereira (SAC 2020), who placed containers with a GA
 * over the process graph. Parameters are ours, not the paper's.
 *
 *   chromosome  the host of each movable vertex (external and pinned ones stay)
 *   fitness     cross-host bytes, plus a capacity penalty larger than all the traffic
 *               there is: any overloaded placement ranks below every feasible one, and
 *               among overloaded ones the smaller excess ranks first
 *   population  the current placement and POPULATION - 1 random ones
 *   selection   tournaments of 3; the best ELITES carried over unchanged
 *   crossover   uniform, with probability 0.9
 *   mutation    each gene to a random host with probability 1 / (movable vertices)
 *
 * It reads the same files as plumb place, with place.c's parser and cut, and runs for
 * --seconds; it prints one JSON object: the best feasible placement found, and the best
 * feasible cut at each --checkpoint (seconds), so that the bench can read it at plumb's own
 * run time too.
 *
 *   place_ga GRAPH.json HOSTS.json --seconds S [--seed N] [--checkpoint T]...
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/place.h"

#define POPULATION	100
#define ELITES		2
#define TOURNAMENT	3
#define CROSSOVER_RATE	0.9
#define MAX_CHECKPOINTS 8

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static double rng_unit(void)
{
	return (double)(rng_next() >> 11) / (double)(1ull << 53);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct ga {
	const struct place_problem *p;
	size_t n, k, nmovable;
	uint32_t *movable;
	int64_t *cpu;
	uint64_t *mem;
	double total_bytes, cap_cpu, cap_mem;
};

/* the excess over capacity, each resource in shares of its total capacity; 0: feasible */
static double overload(const struct ga *ga, const int *host)
{
	const struct place_problem *p = ga->p;
	double over = 0;

	place_loads(p, host, ga->cpu, ga->mem);
	for (size_t h = 0; h < ga->k; h++) {
		if (ga->cpu[h] > p->hosts[h].cpu_milli)
			over += (double)(ga->cpu[h] - p->hosts[h].cpu_milli) / ga->cap_cpu;
		if (p->hosts[h].memory_limited && ga->mem[h] > p->hosts[h].memory_bytes)
			over += (double)(ga->mem[h] - p->hosts[h].memory_bytes) / ga->cap_mem;
	}
	return over;
}

static double fitness(const struct ga *ga, const int *host, uint64_t *cut, bool *feasible)
{
	double over = overload(ga, host);

	*cut = place_cut(ga->p, host);
	*feasible = over == 0;
	return (double)*cut + (over > 0 ? (ga->total_bytes + 1) * (1 + over) : 0);
}

static size_t tournament(const double *fit)
{
	size_t best = rng_next() % POPULATION;

	for (int i = 1; i < TOURNAMENT; i++) {
		size_t c = rng_next() % POPULATION;

		if (fit[c] < fit[best])
			best = c;
	}
	return best;
}

static int cmp_fitness(const void *a, const void *b, void *arg)
{
	const double *fit = arg;
	double x = fit[*(const size_t *)a], y = fit[*(const size_t *)b];

	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr, "usage: place_ga GRAPH.json HOSTS.json --seconds S [--seed N] "
			"[--checkpoint T]...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	double seconds = 0, checkpoints[MAX_CHECKPOINTS], start, elapsed;
	uint64_t best_cut = UINT64_MAX, cut_before, cp_cut[MAX_CHECKPOINTS];
	size_t ncheckpoints = 0, next_cp = 0, order[POPULATION];
	int *pop, *next, *best, *tmp;
	double fit[POPULATION], next_fit[POPULATION];
	struct json_object *out, *cps, *placement;
	unsigned long generations = 0;
	struct place_problem p;
	struct ga ga = { 0 };
	char err[512];
	bool feasible;
	uint64_t cut;

	rng_state = 1;
	if (argc < 3)
		usage();
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			rng_state = strtoull(argv[++i], NULL, 10) * 0x9e3779b97f4a7c15ull | 1;
		else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc &&
			 ncheckpoints < MAX_CHECKPOINTS)
			checkpoints[ncheckpoints++] = atof(argv[++i]);
		else
			usage();
	}
	if (seconds <= 0)
		usage();
	if (place_problem_load(&p, argv[1], argv[2], err, sizeof(err))) {
		fprintf(stderr, "place_ga: %s\n", err);
		return 1;
	}
	ga.p = &p;
	ga.n = p.nvertices;
	ga.k = p.nhosts;
	ga.movable = calloc(ga.n + 1, sizeof(*ga.movable));
	ga.cpu = calloc(ga.k, sizeof(*ga.cpu));
	ga.mem = calloc(ga.k, sizeof(*ga.mem));
	pop = calloc(POPULATION * ga.n + 1, sizeof(int));
	next = calloc(POPULATION * ga.n + 1, sizeof(int));
	best = calloc(ga.n + 1, sizeof(int));
	if (!ga.movable || !ga.cpu || !ga.mem || !pop || !next || !best) {
		fprintf(stderr, "place_ga: out of memory\n");
		return 1;
	}
	for (size_t v = 0; v < ga.n; v++)
		if (!p.vertices[v].pinned)
			ga.movable[ga.nmovable++] = (uint32_t)v;
	for (size_t v = 0; v < ga.n; v++)
		for (size_t e = p.adj_start[v]; e < p.adj_start[v + 1]; e++)
			ga.total_bytes += p.adj[e] > v ? (double)p.adj_bytes[e] : 0;
	for (size_t h = 0; h < ga.k; h++) {
		ga.cap_cpu += (double)p.hosts[h].cpu_milli;
		ga.cap_mem += p.hosts[h].memory_limited ? (double)p.hosts[h].memory_bytes : 0;
	}
	ga.cap_cpu = ga.cap_cpu > 0 ? ga.cap_cpu : 1;
	ga.cap_mem = ga.cap_mem > 0 ? ga.cap_mem : 1;

	start = now();
	for (size_t i = 0; i < POPULATION; i++) {
		int *ind = pop + i * ga.n;

		place_current(&p, ind);
		for (size_t j = 0; i && j < ga.nmovable; j++)
			ind[ga.movable[j]] = (int)(rng_next() % ga.k);
		fit[i] = fitness(&ga, ind, &cut, &feasible);
		if (feasible && cut < best_cut) {
			best_cut = cut;
			memcpy(best, ind, ga.n * sizeof(int));
		}
	}
	cut_before = place_cut(&p, pop);
	do {
		double mutation = ga.nmovable ? 1.0 / ga.nmovable : 0;

		for (size_t i = 0; i < POPULATION; i++)
			order[i] = i;
		qsort_r(order, POPULATION, sizeof(order[0]), cmp_fitness, fit);
		for (size_t i = 0; i < ELITES; i++) {
			memcpy(next + i * ga.n, pop + order[i] * ga.n, ga.n * sizeof(int));
			next_fit[i] = fit[order[i]];
		}
		for (size_t i = ELITES; i < POPULATION; i++) {
			const int *a = pop + tournament(fit) * ga.n,
				  *b = pop + tournament(fit) * ga.n;
			int *child = next + i * ga.n;
			bool cross = rng_unit() < CROSSOVER_RATE;

			memcpy(child, a, ga.n * sizeof(int));
			for (size_t j = 0; j < ga.nmovable; j++) {
				uint32_t v = ga.movable[j];

				if (cross && (rng_next() & 1))
					child[v] = b[v];
				if (rng_unit() < mutation)
					child[v] = (int)(rng_next() % ga.k);
			}
			next_fit[i] = fitness(&ga, child, &cut, &feasible);
			if (feasible && cut < best_cut) {
				best_cut = cut;
				memcpy(best, child, ga.n * sizeof(int));
			}
		}
		tmp = pop;
		pop = next;
		next = tmp;
		memcpy(fit, next_fit, sizeof(fit));
		generations++;
		elapsed = now() - start;
		for (; next_cp < ncheckpoints && elapsed >= checkpoints[next_cp]; next_cp++)
			cp_cut[next_cp] = best_cut;
	} while (elapsed < seconds);
	for (; next_cp < ncheckpoints; next_cp++)
		cp_cut[next_cp] = best_cut;

	out = json_object_new_object();
	cps = json_object_new_array();
	placement = json_object_new_array();
	json_object_object_add(out, "cross_host_bytes_before", json_object_new_uint64(cut_before));
	json_object_object_add(out, "cross_host_bytes_after",
			       best_cut == UINT64_MAX ? NULL : json_object_new_uint64(best_cut));
	json_object_object_add(out, "generations", json_object_new_uint64(generations));
	json_object_object_add(out, "seconds", json_object_new_double(elapsed));
	for (size_t i = 0; i < ncheckpoints; i++) {
		struct json_object *c = json_object_new_object();

		json_object_object_add(c, "seconds", json_object_new_double(checkpoints[i]));
		json_object_object_add(c, "cut",
				       cp_cut[i] == UINT64_MAX ? NULL :
								 json_object_new_uint64(cp_cut[i]));
		json_object_array_add(cps, c);
	}
	json_object_object_add(out, "checkpoints", cps);
	for (size_t v = 0; v < ga.n && best_cut != UINT64_MAX; v++) {
		struct json_object *a = json_object_new_object();

		json_object_object_add(a, "vertex", json_object_new_string(p.vertices[v].id));
		json_object_object_add(a, "host",
				       json_object_new_string(best[v] == PLACE_OUTSIDE ?
								      p.vertices[v].host_name :
								      p.hosts[best[v]].name));
		json_object_array_add(placement, a);
	}
	json_object_object_add(out, "placement", placement);
	printf("%s\n", json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN |
								   JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(out);
	free(ga.movable);
	free(ga.cpu);
	free(ga.mem);
	free(pop);
	free(next);
	free(best);
	place_problem_free(&p);
	return 0;
}
