/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_EXPORT_PROM_H
#define PLUMB_EXPORT_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Writer for the Prometheus text exposition format 0.0.4.
 *
 * Errors are sticky: the first one is kept in err and every later call writes nothing, so a
 * scrape handler checks err once at the end. A failing call leaves buf as it was before that
 * call, so buf always holds whole lines. Formatting assumes the "C" LC_NUMERIC locale (the
 * default unless the program calls setlocale()).
 */

enum prom_type { PROM_COUNTER, PROM_GAUGE, PROM_HISTOGRAM };

struct prom_label {
	const char *name;
	const char *value;
};

struct prom_writer {
	char *buf; /* NUL-terminated output; NULL only if prom_init() failed to allocate */
	size_t len, cap;
	int err; /* first error (negative errno), sticky; 0 if none */

	/* private */
	char *names; /* names of the families started, each NUL-terminated */
	size_t names_len, names_cap;
	size_t family; /* offset of the current family's name in names */
	bool has_family;
	enum prom_type type;
	/* realloc() unless a test swaps it to make allocations fail */
	void *(*realloc_fn)(void *ptr, size_t size);

	/*
	 * Optional (NULL: none), kept by prom_reset(): called for every sample of a counter
	 * family and every line of a histogram with the series as written (the name, its suffix
	 * and the labels in braces, escaped: the line up to the space before the value) and the
	 * value; returns the value to write. Counters carried over a restart (export/carry.h).
	 */
	double (*adjust)(void *ctx, const char *series, size_t len, double value);
	void *adjust_ctx;
};

void prom_init(struct prom_writer *w);
void prom_free(struct prom_writer *w);
/* Empties the output and the family list and clears err; keeps the memory. */
void prom_reset(struct prom_writer *w);

/*
 * Starts a metric family: "# HELP name help" (help escaped: \\ and \n) and "# TYPE name type".
 * A name already started since init/reset: -EEXIST. A name that is not [a-zA-Z_:][a-zA-Z0-9_:]*,
 * or a NULL help: -EINVAL. Returns 0 or the writer's (sticky) error.
 */
int prom_family(struct prom_writer *w, const char *name, enum prom_type type, const char *help);

/*
 * One sample of the current counter or gauge family: name{l1="v1",...} value. Label names must
 * be [a-zA-Z_][a-zA-Z0-9_]* and values non-NULL (else -EINVAL); values are escaped (\\, \", \n).
 * Integral values up to 2^53 print as integers, others as the shortest of %.15g..%.17g that
 * reads back to the same double; NaN, +Inf, -Inf as such. No current family, or a histogram
 * family: -EINVAL.
 */
void prom_sample(struct prom_writer *w, const struct prom_label *labels, size_t nlabels,
		 double value);

/*
 * One histogram of the current family, which must be PROM_HISTOGRAM. counts has nbounds + 1
 * NON-cumulative entries: counts[i] observations v with bounds[i-1] < v <= bounds[i], and
 * counts[nbounds] those above the last bound. Writes the cumulative name_bucket{...,le="b"}
 * lines, le="+Inf" (the total), name_sum and name_count. bounds must be finite and strictly
 * increasing, and labels must not include "le" (else -EINVAL).
 */
void prom_histogram(struct prom_writer *w, const struct prom_label *labels, size_t nlabels,
		    const double *bounds, const uint64_t *counts, size_t nbounds, double sum);

#endif
