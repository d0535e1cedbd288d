/* SPDX-License-Identifier: GPL-2.0 */
/* Mount id -> mount point and fs type, across every mount namespace on the host. */
#ifndef PLUMB_MOUNTS_H
#define PLUMB_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "identity/mountinfo.h"

struct mount_cache;

struct mount_cache_stats {
	size_t namespaces, capacity;
	uint64_t rescans, namespaces_dropped;
};

/* max_ns bounds the namespaces kept; rescans on a miss happen at most every min_rescan_ms. */
struct mount_cache *mount_cache_new(size_t max_ns, unsigned int min_rescan_ms);
void mount_cache_free(struct mount_cache *c);
/*
 * Whether the tables are current: a mount change seen in the agent's namespace is rescanned
 * at once when the rate limit allows, else false until it does (callers that place paths by
 * mount point wait rather than use a table that lacks the new mount).
 */
bool mount_cache_fresh(struct mount_cache *c);
/* The mount with this id in any namespace (the agent's own first), or NULL. */
const struct mount_entry *mount_cache_lookup(struct mount_cache *c, uint32_t mnt_id);
/* The mount table of one mount namespace (by its inode number), or NULL. */
const struct mount_table *mount_cache_namespace(struct mount_cache *c, uint32_t mntns_inum);
void mount_cache_stats(const struct mount_cache *c, struct mount_cache_stats *out);

#endif
