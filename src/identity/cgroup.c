// SPDX-License-Identifier: GPL-2.0
/*
 * cgroup id -> cgroup path. bpf_get_current_cgroup_id() returns the kernfs node id of the
 * task's cgroup2 directory, which on 64-bit kernels is also that directory's inode number
 * (kernfs_id_ino() in include/linux/kernfs.h), so a walk of the cgroup2 tree that stats each
 * directory sees every id. The cache is a sorted array rebuilt by each walk: cgroups come and go,
 * and a rebuild drops the removed ones without any bookkeeping. Not thread-safe: one caller (the
 * agent's refresh loop) owns a cache.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "identity/cgroup.h"
#include "identity/mountinfo.h"
#include "log.h"

struct cgroup_entry {
	uint64_t id;
	char *path;
};

struct cgroup_cache {
	char *root;
	size_t capacity;
	struct cgroup_entry *v; /* sorted by id */
	size_t n;
	bool scanned;
	uint64_t last_scan_ns;
	uint64_t rescans, evictions, misses;
};

/* State of one walk of the tree. */
struct scan {
	struct cgroup_entry *v;
	size_t n, alloc, capacity;
	uint64_t dropped;
	dev_t dev;
	char path[PATH_MAX]; /* of the directory being walked, relative to the root */
};

int cgroup2_mount_point(char *out, size_t outlen)
{
	const struct mount_entry *found = NULL;
	struct mount_table t;
	int err;

	err = mountinfo_load("/proc/self/mountinfo", &t);
	if (err)
		return err;
	/*
	 * Prefer a mount of the whole hierarchy: under a bind mount of a sub-cgroup (root not
	 * "/"), paths would be relative to that sub-cgroup.
	 */
	for (size_t i = 0; i < t.n; i++) {
		if (strcmp(t.v[i].fstype, "cgroup2"))
			continue;
		if (!found || (strcmp(found->root, "/") && !strcmp(t.v[i].root, "/")))
			found = &t.v[i];
	}
	if (!found)
		err = -ENOENT;
	else if (strlen(found->mount_point) >= outlen)
		err = -ENAMETOOLONG;
	else
		strcpy(out, found->mount_point);
	mount_table_free(&t);
	return err;
}

struct cgroup_cache *cgroup_cache_new(const char *root, size_t capacity)
{
	struct cgroup_cache *c;

	if (!capacity) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->root = strdup(root);
	if (!c->root) {
		free(c);
		return NULL;
	}
	c->capacity = capacity;
	return c;
}

static void entries_free(struct cgroup_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

void cgroup_cache_free(struct cgroup_cache *c)
{
	if (!c)
		return;
	entries_free(c->v, c->n);
	free(c->root);
	free(c);
}

/*
 * Keeps the first `capacity` cgroups the walk finds and counts the rest: simple and bounded.
 * Which ones are kept then depends on directory order, but the counter shows the cache is too
 * small. An allocation failure is counted the same way: the cgroup is not kept.
 */
static void scan_add(struct scan *s, uint64_t id, const char *path)
{
	struct cgroup_entry *v;
	char *p;

	if (s->n == s->capacity) {
		s->dropped++;
		return;
	}
	if (s->n == s->alloc) {
		size_t n = s->alloc ? 2 * s->alloc : 64;

		if (n > s->capacity)
			n = s->capacity;
		v = realloc(s->v, n * sizeof(*v));
		if (!v) {
			s->dropped++;
			return;
		}
		s->v = v;
		s->alloc = n;
	}
	p = strdup(path);
	if (!p) {
		s->dropped++;
		return;
	}
	s->v[s->n++] = (struct cgroup_entry){ id, p };
}

/*
 * Adds the directory open as fd (whose path is s->path[0..path_len)) and everything below it,
 * then closes fd. O_NOFOLLOW and the st_dev check keep the walk on the one cgroup2fs; a
 * directory that vanishes mid-walk (rmdir races us) is simply skipped.
 */
static void scan_dir(struct scan *s, int fd, size_t path_len)
{
	struct dirent *de;
	struct stat st;
	DIR *dir;

	if (fstat(fd, &st) || st.st_dev != s->dev) {
		close(fd);
		return;
	}
	scan_add(s, st.st_ino, path_len ? s->path : "/");
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	while ((de = readdir(dir))) {
		size_t len = strlen(de->d_name);
		int child;

		/* cgroup2fs fills d_type; DT_UNKNOWN is left to O_DIRECTORY to sort out. */
		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (path_len + 1 + len >= sizeof(s->path)) {
			pr_debug("cgroup: path too long under %s, skipped\n",
				 path_len ? s->path : "/");
			continue;
		}
		child = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (child < 0)
			continue;
		s->path[path_len] = '/';
		memcpy(s->path + path_len + 1, de->d_name, len + 1);
		scan_dir(s, child, path_len + 1 + len);
		s->path[path_len] = '\0';
	}
	closedir(dir);
}

static int cmp_entry_id(const void *a, const void *b)
{
	const struct cgroup_entry *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Replaces the cache with a fresh walk of the tree; the old table survives a failed one. */
static int rescan(struct cgroup_cache *c)
{
	struct scan *s;
	struct stat st;
	int fd, err;

	c->rescans++;
	fd = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		pr_debug("cgroup: cannot open %s: %s\n", c->root, strerror(-err));
		return err;
	}
	/* PATH_MAX bytes of path: not for the stack. */
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		free(s);
		return err;
	}
	s->capacity = c->capacity;
	s->dev = st.st_dev;
	scan_dir(s, fd, 0);
	qsort(s->v, s->n, sizeof(*s->v), cmp_entry_id);

	entries_free(c->v, c->n);
	c->v = s->v;
	c->n = s->n;
	c->evictions += s->dropped;
	free(s);
	return 0;
}

static const struct cgroup_entry *lookup(const struct cgroup_cache *c, uint64_t id)
{
	const struct cgroup_entry key = { id, NULL };

	if (!c->n)
		return NULL;
	return bsearch(&key, c->v, c->n, sizeof(*c->v), cmp_entry_id);
}

const char *cgroup_cache_resolve(struct cgroup_cache *c, uint64_t id, unsigned int min_rescan_ms)
{
	const struct cgroup_entry *e = lookup(c, id);

	if (!e) {
		uint64_t now = monotonic_ns();

		/* A failed scan counts too: a broken root must not be retried on every miss. */
		if (!c->scanned || now - c->last_scan_ns >= min_rescan_ms * 1000000ull) {
			c->scanned = true;
			c->last_scan_ns = now;
			if (!rescan(c))
				e = lookup(c, id);
		}
	}
	if (!e) {
		c->misses++;
		return NULL;
	}
	return e->path;
}

int cgroup_cache_exists(struct cgroup_cache *c, uint64_t id)
{
	const struct cgroup_entry *e = lookup(c, id);
	char path[PATH_MAX];
	struct stat st;
	int len;

	if (!e)
		return 0;
	len = snprintf(path, sizeof(path), "%s%s", c->root, e->path);
	if (len < 0 || (size_t)len >= sizeof(path))
		return 0;
	/* The inode check tells a re-created cgroup of the same name from the one we know. */
	return !stat(path, &st) && S_ISDIR(st.st_mode) && st.st_ino == id;
}

void cgroup_cache_stats(const struct cgroup_cache *c, struct cgroup_cache_stats *out)
{
	out->entries = c->n;
	out->capacity = c->capacity;
	out->rescans = c->rescans;
	out->evictions = c->evictions;
	out->misses = c->misses;
}
