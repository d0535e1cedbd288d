/* SPDX-License-Identifier: GPL-2.0 */
/* What the sched and wait modules offer their views (plumb diagnose) beyond the interface. */
#ifndef PLUMB_SCHED_MODULE_H
#define PLUMB_SCHED_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

#include "plumb_sched.h"

struct plumb_module;

/* The per-thread quantities, in this order: ns except the wait counts and the wakes. */
enum sched_quantity {
	Q_RUN,
	Q_RQ,
	Q_SLEEP,
	Q_BLOCK,
	Q_IOWAIT,
	Q_STEAL, /* hypervisor steal while on a CPU (kernels that keep it apart: FEAT_STEAL) */
	Q_WAIT_NS, /* + enum wait_kind */
	Q_WAIT_N = Q_WAIT_NS + WAIT_KINDS,
	Q_FUTEX_WAKES = Q_WAIT_N + WAIT_KINDS,
	SCHED_QUANTITIES,
};

/* One live thread's counts, cumulative (compare two snapshots). */
struct sched_thread_sample {
	uint32_t tid, pid, ppid;
	uint64_t start_ns;
	uint64_t cgroup_id;
	char comm[16];
	uint64_t q[SCHED_QUANTITIES];
	uint64_t read_ns; /* the run-queue clock its counts are as of (struct sched_record) */
};

/* One live thread's waits on one resource (key.tid), cumulative. */
struct sched_wait_sample {
	struct wait_key key;
	struct wait_val val;
};

extern const char *const wait_kind_names[WAIT_KINDS];

/*
 * Reads every thread now: the live threads' counts and their waits per resource (the wait
 * module's, when it is on). The caller frees both arrays.
 */
int sched_snapshot(struct plumb_module *m, struct sched_thread_sample **threads, size_t *n,
		   struct sched_wait_sample **waits, size_t *nwaits);

/* One cgroup's counts, cumulative since the attach, its exited threads' included. */
struct sched_cgroup_sample {
	uint64_t cgroup_id;
	char path[256]; /* under the cgroup2 mount; "" while it cannot be named */
	uint64_t q[SCHED_QUANTITIES];
	uint64_t read_ns; /* the mean of its live threads' read_ns in the last read; 0: none */
};

/*
 * Every cgroup the module counts now, in id order (the threads read unless sched_snapshot just
 * did). The caller frees *out.
 */
int sched_cgroup_snapshot(struct plumb_module *m, struct sched_cgroup_sample **out, size_t *n);

/*
 * Whether Q_STEAL is measured: the kernel keeps steal out of the CPU time (FEAT_STEAL).
 * Elsewhere it is 0 and any steal is inside Q_RUN.
 */
bool sched_steal_measured(struct plumb_module *m);

/* The cgroup path of an id the module has seen ("" when it cannot be named). */
const char *sched_cgroup_path(struct plumb_module *m, uint64_t cgroup_id);

#endif
