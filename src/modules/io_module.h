/* SPDX-License-Identifier: GPL-2.0 */
/* What the io module offers its views (plumb io) beyond the module interface. */
#ifndef PLUMB_IO_MODULE_H
#define PLUMB_IO_MODULE_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

#include "io.h"

struct plumb_module;

/* The counters of one (cgroup, mount) label set, identities resolved. */
struct io_row {
	char cgroup[256];
	char workload[160];
	char mount[256];
	char fstype[32];
	uint64_t bytes[IO_DIRS];
	uint64_t calls[IO_DIRS];
	uint64_t errors[IO_DIRS];
	uint64_t lat_sum_ns[IO_LAT_KINDS];
	uint64_t lat[IO_LAT_KINDS][IO_LAT_BUCKETS];
	uint64_t ops[IO_OPS];
	uint64_t op_errors[IO_OPS];
};

extern const char *const io_op_names[IO_OPS];
extern const char *const io_dir_names[IO_DIRS];
/* the op label of each latency kind: read, write, fsync */
extern const char *const io_lat_names[IO_LAT_KINDS];

/* Upper bound in seconds of latency bucket k (k < IO_LAT_BUCKETS - 1; the last is +Inf). */
double io_latency_bound(int k);

/*
 * All label sets now, merged (two mount ids with one mount point, a cgroup re-created under
 * the same path) and sorted by cgroup, then mount. The caller frees *rows.
 */
int io_snapshot(struct plumb_module *m, struct io_row **rows, size_t *nrows);

/* Estimated latency quantile q (0..1) from a histogram, in seconds; 0 when empty. */
double io_latency_quantile(const uint64_t *buckets, double q);

#endif
