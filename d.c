#include <stdlib.h>
#include <stdio.h>
#include "analysis/place.h"
#include "log.h"
int main(int argc, char **argv)
{
	struct place_problem p; struct place_plan plan; char err[512];
	struct place_params pa = { .max_moves = atol(argv[3]), .strategies = atoi(argv[4]) };
	log_level = LOG_DEBUG;
	if (place_problem_load(&p, argv[1], argv[2], err, sizeof(err))) { puts(err); return 1; }
	if (place_solve(&p, &pa, &plan, err, sizeof(err))) { puts(err); return 1; }
	for (size_t v = 0; v < p.nvertices; v++) printf("%s:%s ", p.vertices[v].id, p.hosts[plan.host[v]].name);
	printf("\ncut %llu moves %zu\n", (unsigned long long)plan.cut_after, plan.moves);
	return 0;
}
