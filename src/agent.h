/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_AGENT_H
#define PLUMB_AGENT_H

#include <stddef.h>

struct agent_options;
struct plumb_config;

/* Runs the agent until SIGINT/SIGTERM; returns the process exit status. */
int agent_run(const struct agent_options *o);
/* The parts of the configuration found on the host (cgroup2 mount). 0 or -errno. */
int agent_config(struct plumb_config *cfg, char *cgroup_root, size_t len);

#endif
