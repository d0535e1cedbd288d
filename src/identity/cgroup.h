/* SPDX-License-Identifier: GPL-2.0 */
/* cgroup id (what bpf_get_current_cgroup_id() returns) -> cgroup path, with a bounded cache. */
#ifndef PLUMB_IDENTITY_CGROUP_H
#define PLUMB_IDENTITY_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/*
 * The cgroup2 mount point, found in /proc/self/mountinfo (never hard-coded). 0, -ENOENT when
 * there is no cgroup2 mount, -ENAMETOOLONG when out is too small, or the -errno of reading
 * mountinfo.
 */
int cgroup2_mount_point(char *out, size_t outlen);

struct cgroup_cache;

/* root: the cgroup2 mount point; capacity: max entries kept (bound on memory), at least 1. */
struct cgroup_cache *cgroup_cache_new(const char *root, size_t capacity);
void cgroup_cache_free(struct cgroup_cache *c);
/*
 * The path of cgroup `id` under the cgroup2 root ("/" for the root cgroup, "/a/b" otherwise),
 * or NULL when no such cgroup exists now. The cgroup id that BPF's bpf_get_current_cgroup_id()
 * returns is the inode number of the cgroup's directory in cgroup2fs (64-bit kernfs id). On a
 * miss, the whole tree is rescanned and the lookup retried; rescans after a miss happen at most
 * once per min_rescan_ms, so a flood of unknown ids cannot cost a scan each. A cgroup removed
 * since the last scan still resolves until the next one (its name cannot have changed: cgroup2
 * has no rename). The returned pointer stays valid until the next call that may rescan.
 */
const char *cgroup_cache_resolve(struct cgroup_cache *c, uint64_t id, unsigned int min_rescan_ms);
/*
 * Whether the cgroup still exists now (a stat of its directory), for the agent's grace period:
 * 1 or 0. An id the cache does not hold counts as gone; this never rescans.
 */
int cgroup_cache_exists(struct cgroup_cache *c, uint64_t id);

/*
 * Self-metrics. entries and capacity are gauges; the rest are counters since creation:
 * rescans done, cgroups not kept because the cache was full (counted again by every rescan
 * that finds them), and resolves that returned NULL.
 */
struct cgroup_cache_stats {
	size_t entries, capacity;
	uint64_t rescans, evictions, misses;
};
void cgroup_cache_stats(const struct cgroup_cache *c, struct cgroup_cache_stats *out);

#endif
