/* SPDX-License-Identifier: GPL-2.0 */
/*
 * plumb diagnose's statistics: is a signal's observation window significantly above its
 * baseline, and by how much (docs/diagnose.md). No kernel, no I/O: unit-tested.
 */
#ifndef PLUMB_ANALYSIS_DIAGNOSE_H
#define PLUMB_ANALYSIS_DIAGNOSE_H

#include <stdbool.h>
#include <stddef.h>

/* What a rise of a signal means. */
enum diag_cause {
	DIAG_CPU = 0, /* run-queue time: waiting for a CPU */
	DIAG_LOCK, /* futex wait on one key */
	DIAG_DISK, /* blocked, uninterruptibly (I/O wait included) */
	DIAG_DEPENDENCY, /* socket wait on one socket */
	DIAG_PIPE, /* pipe wait on one pipe: a pipeline stage */
	DIAG_EPOLL, /* epoll wait on one instance */
	DIAG_CAUSES,
};

extern const char *const diag_cause_names[DIAG_CAUSES];

/* A rise must pass all three to count (docs/diagnose.md, "When a change is significant"). */
#define DIAG_MIN_CHANGE 0.1 /* thread-seconds per second: 100 ms of each second */
#define DIAG_MIN_RISE	0.5 /* and half the baseline's median */
#define DIAG_MIN_Z	2.5 /* Mann-Whitney U, normal approximation: one-sided p < 0.0062 */

struct diag_result {
	double base, obs; /* medians of the two windows */
	double change; /* obs - base */
	double z; /* > 0: the observation window ranks above the baseline */
	bool significant;
};

/* The median of v (n > 0); v is reordered. */
double diag_median(double *v, size_t n);

/* Mann-Whitney U of b against a as a z-score (ties averaged, tie-corrected variance). */
double diag_mann_whitney_z(const double *a, size_t na, const double *b, size_t nb);

/* Compares a signal's baseline values with its observation values (each window non-empty). */
void diag_compare(const double *base, size_t nbase, const double *obs, size_t nobs,
		  struct diag_result *r);

#endif
