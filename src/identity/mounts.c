// SPDX-License-Identifier: GPL-2.0
/*
 * Mount ids are global, but a mount point is only meaningful in the namespace that sees it:
 * a container's /data is the host's /var/lib/.../merged/data. So the cache holds one mount
 * table per mount namespace, each read from /proc/<pid>/mountinfo of a process inside it, and
 * a mount id is answered from the namespace that has it (the agent's own first).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "identity/mounts.h"
#include "log.h"

struct mount_ns {
	uint32_t inum;
	struct mount_table table;
};

struct mount_cache {
	struct mount_ns *ns; /* ns[0] is the agent's own namespace */
	size_t nns, max_ns;
	int self_fd; /* /proc/self/mountinfo, polled for changes of the host's mounts */
	bool stale; /* the tables may be out of date: rescan at the next chance */
	unsigned int min_rescan_ms;
	uint64_t last_scan_ms;
	uint64_t rescans, dropped;
};

static int mntns_of(const char *pid, uint32_t *inum)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%s/ns/mnt", pid);
	if (stat(path, &st))
		return -errno;
	*inum = (uint32_t)st.st_ino;
	return 0;
}

static void clear_namespaces(struct mount_cache *c)
{
	for (size_t i = 0; i < c->nns; i++)
		mount_table_free(&c->ns[i].table);
	c->nns = 0;
}

static int has_namespace(const struct mount_cache *c, uint32_t inum)
{
	for (size_t i = 0; i < c->nns; i++)
		if (c->ns[i].inum == inum)
			return 1;
	return 0;
}

static void add_namespace(struct mount_cache *c, const char *pid)
{
	char path[64];
	uint32_t inum = 0;
	struct mount_ns *ns;

	if (mntns_of(pid, &inum) || has_namespace(c, inum))
		return;
	if (c->nns == c->max_ns) {
		c->dropped++;
		return;
	}
	ns = &c->ns[c->nns];
	memset(ns, 0, sizeof(*ns));
	snprintf(path, sizeof(path), "/proc/%s/mountinfo", pid);
	if (mountinfo_load(path, &ns->table))
		return; /* the process exited meanwhile */
	ns->inum = inum;
	c->nns++;
}

static void rescan(struct mount_cache *c)
{
	struct dirent *d;
	DIR *proc;

	c->last_scan_ms = monotonic_ms();
	c->rescans++;
	c->stale = false; /* whatever changed before this point is in the new tables */
	clear_namespaces(c);
	add_namespace(c, "self");
	proc = opendir("/proc");
	if (!proc) {
		pr_warn("mounts: cannot read /proc: %s\n", strerror(errno));
		return;
	}
	while ((d = readdir(proc)))
		if (d->d_name[0] >= '1' && d->d_name[0] <= '9')
			add_namespace(c, d->d_name);
	closedir(proc);
}

static int may_rescan(const struct mount_cache *c)
{
	return c->rescans == 0 || monotonic_ms() - c->last_scan_ms >= c->min_rescan_ms;
}

/*
 * A mount or umount in the agent's namespace makes its mountinfo poll with POLLPRI (and the
 * poll itself clears it). Mount ids are reused and a path event is placed by the mount
 * points of its namespace, so tables are rebuilt after any change: on a host, volume mounts
 * for containers are made in this namespace and propagate to theirs.
 */
static void check_changes(struct mount_cache *c)
{
	struct pollfd p = { .fd = c->self_fd, .events = POLLPRI };

	if (c->self_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLPRI | POLLERR)))
		c->stale = true;
	if (c->stale && may_rescan(c)) {
		rescan(c);
		c->stale = false;
	}
}

struct mount_cache *mount_cache_new(size_t max_ns, unsigned int min_rescan_ms)
{
	struct mount_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ns = calloc(max_ns ? max_ns : 1, sizeof(*c->ns));
	if (!c->ns) {
		free(c);
		return NULL;
	}
	c->max_ns = max_ns ? max_ns : 1;
	c->min_rescan_ms = min_rescan_ms;
	c->self_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	return c;
}

void mount_cache_free(struct mount_cache *c)
{
	if (!c)
		return;
	clear_namespaces(c);
	if (c->self_fd >= 0)
		close(c->self_fd);
	free(c->ns);
	free(c);
}

static const struct mount_entry *find_any(const struct mount_cache *c, uint32_t mnt_id)
{
	const struct mount_entry *e;

	for (size_t i = 0; i < c->nns; i++) {
		e = mount_table_find(&c->ns[i].table, mnt_id);
		if (e)
			return e;
	}
	return NULL;
}

bool mount_cache_fresh(struct mount_cache *c)
{
	check_changes(c);
	return !c->stale;
}

const struct mount_entry *mount_cache_lookup(struct mount_cache *c, uint32_t mnt_id)
{
	const struct mount_entry *e;

	check_changes(c);
	e = find_any(c, mnt_id);

	if (!e && may_rescan(c)) {
		rescan(c);
		e = find_any(c, mnt_id);
	}
	return e;
}

const struct mount_table *mount_cache_namespace(struct mount_cache *c, uint32_t mntns_inum)
{
	check_changes(c);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < c->nns; i++)
			if (c->ns[i].inum == mntns_inum)
				return &c->ns[i].table;
		if (pass == 0 && may_rescan(c))
			rescan(c);
		else
			break;
	}
	return NULL;
}

void mount_cache_stats(const struct mount_cache *c, struct mount_cache_stats *out)
{
	out->namespaces = c->nns;
	out->capacity = c->max_ns;
	out->rescans = c->rescans;
	out->namespaces_dropped = c->dropped;
}
