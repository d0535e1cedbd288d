/* SPDX-License-Identifier: GPL-2.0 */
/* cgroup path -> workload name, the bounded-cardinality label the agent exports. */
#ifndef PLUMB_IDENTITY_WORKLOAD_H
#define PLUMB_IDENTITY_WORKLOAD_H

#include <stddef.h>

/*
 * Writes the workload of a cgroup v2 path (or v1 path; starting with '/') into out
 * (NUL-terminated, truncated to outlen) and returns out. The rules are at the top of workload.c:
 * "slurm/<job>", "k8s/<pod-uid>", "container/<id-or-name>", "vm/<name>", "systemd/<unit>", or
 * the path itself.
 */
const char *workload_from_cgroup(const char *cgroup_path, char *out, size_t outlen);

/*
 * Writes the container id (64 lowercase hex digits) of a container-ish path (k8s or plain
 * containers) into out, or an empty string when the path has none; returns out. When containers
 * nest, the deepest one is the one whose processes these are.
 */
const char *workload_container_id(const char *cgroup_path, char *out, size_t outlen);

#endif
