// SPDX-License-Identifier: GPL-2.0
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/diagnose.h"

const char *const diag_cause_names[DIAG_CAUSES] = {
	"CPU contention",  "lock contention", "disk contention",
	"slow dependency", "pipeline stage",  "epoll wait",
};

static int double_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double diag_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), double_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct ranked {
	double v;
	int from_b;
};

static int ranked_cmp(const void *a, const void *b)
{
	return double_cmp(&((const struct ranked *)a)->v, &((const struct ranked *)b)->v);
}

double diag_mann_whitney_z(const double *a, size_t na, const double *b, size_t nb)
{
	size_t n = na + nb;
	struct ranked *r = calloc(n, sizeof(*r));
	double rank_b = 0, ties = 0, u, mean, var;

	if (!r || !na || !nb) {
		free(r);
		return 0;
	}
	for (size_t i = 0; i < na; i++)
		r[i] = (struct ranked){ a[i], 0 };
	for (size_t i = 0; i < nb; i++)
		r[na + i] = (struct ranked){ b[i], 1 };
	qsort(r, n, sizeof(*r), ranked_cmp);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		double avg, t;

		while (j + 1 < n && r[j + 1].v == r[i].v)
			j++;
		avg = (i + j) / 2.0 + 1; /* ranks from 1 */
		for (size_t k = i; k <= j; k++)
			if (r[k].from_b)
				rank_b += avg;
		t = j - i + 1;
		ties += t * t * t - t;
		i = j + 1;
	}
	free(r);
	u = rank_b - nb * (nb + 1) / 2.0;
	mean = na * nb / 2.0;
	var = na * nb / 12.0 * ((n + 1) - ties / ((double)n * (n - 1)));
	return var > 0 ? (u - mean) / sqrt(var) : 0;
}

void diag_compare(const double *base, size_t nbase, const double *obs, size_t nobs,
		  struct diag_result *r)
{
	double *b = malloc(nbase * sizeof(*b)), *o = malloc(nobs * sizeof(*o));

	memset(r, 0, sizeof(*r));
	if (!b || !o || !nbase || !nobs) {
		free(b);
		free(o);
		return;
	}
	memcpy(b, base, nbase * sizeof(*b));
	memcpy(o, obs, nobs * sizeof(*o));
	r->z = diag_mann_whitney_z(base, nbase, obs, nobs);
	r->base = diag_median(b, nbase);
	r->obs = diag_median(o, nobs);
	r->change = r->obs - r->base;
	r->significant = r->change >= DIAG_MIN_CHANGE && r->change >= DIAG_MIN_RISE * r->base &&
			 r->z >= DIAG_MIN_Z;
	free(b);
	free(o);
}
