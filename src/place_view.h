/* SPDX-License-Identifier: GPL-2.0 */
/* plumb place: read, solve, print (table, JSON or Kubernetes affinity). */
#ifndef PLUMB_PLACE_VIEW_H
#define PLUMB_PLACE_VIEW_H

#include <stdio.h>

#include "analysis/place.h"
#include "cli.h"

/* The exit status: 0, or 1 after one line on stderr (bad input, no feasible placement). */
int place_view_run(const struct place_options *o);

void place_write_table(FILE *out, const struct place_problem *p, const struct place_plan *plan);
/* Returns 0, or -ENOMEM. */
int place_write_json(FILE *out, const struct place_problem *p, const struct place_plan *plan);
/* YAML: for each moved workload, its nodeAffinity and podAffinity for its heaviest peers. */
void place_write_k8s(FILE *out, const struct place_problem *p, const struct place_plan *plan,
		     unsigned int peers);

#endif
