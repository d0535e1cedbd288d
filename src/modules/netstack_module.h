/* SPDX-License-Identifier: GPL-2.0 */
/* What the netstack module offers its view (plumb netstack) beyond the module interface. */
#ifndef PLUMB_NETSTACK_MODULE_H
#define PLUMB_NETSTACK_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/bottleneck.h"

struct plumb_module;

extern const char *const netstack_component_names[NS_COMPONENTS];
extern const char *const netstack_component_direction[NS_COMPONENTS];

/* One (network namespace, device, component): its samples and the analysis's judgement. */
struct netstack_series {
	uint32_t netns, ifindex, component;
	uint64_t cgroup; /* the workload's, where the socket's process is known (else 0) */
	char cgroup_path[256]; /* under the cgroup2 mount; "" when 0 or not resolved yet */
	char workload[128]; /* identity/workload.h's name of it */
	uint64_t gone_since_ms; /* the cgroup removed: since when (the grace period) */
	char device[32]; /* "vethA", or the ifindex when it cannot be named */
	char netns_name[64]; /* a name under /run/netns, "host" (the agent's own), or the inode */
	struct bn_hist total; /* every sample so far */
	struct bn_hist last; /* the last interval's */
	double rate; /* samples per second in the last interval */
	struct bn_component bn;
};

/*
 * Closes an interval: reads the histograms, takes each series' interval from the previous
 * read, and judges them (analysis/bottleneck.h). Called every second by the agent's tick,
 * or by the view at its own cadence.
 */
int netstack_interval(struct plumb_module *m);

/* The series as of the last interval (owned by the module), and the bottleneck's index. */
size_t netstack_series(struct plumb_module *m, const struct netstack_series **out, int *bottleneck);

/* Seeds the baselines from a recording (plumb netstack --baseline): 0 or -errno. */
int netstack_baseline_load(struct plumb_module *m, const char *path, char *err, size_t errlen);
/* Writes each series' baseline (or, before it has one, its samples so far). */
int netstack_baseline_write(struct plumb_module *m, const char *path);

#endif
