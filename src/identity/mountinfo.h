/* SPDX-License-Identifier: GPL-2.0 */
/* /proc/<pid>/mountinfo parser and mount lookups: mount id -> mount point and filesystem. */
#ifndef PLUMB_IDENTITY_MOUNTINFO_H
#define PLUMB_IDENTITY_MOUNTINFO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One line of mountinfo (proc(5)); all strings are unescaped and owned by the table. */
struct mount_entry {
	uint32_t mnt_id, parent_id;
	unsigned int major, minor;
	char *root; /* field 4: root of the mount within its filesystem */
	char *mount_point; /* field 5, unescaped (\040 -> space, \011, \012, \134) */
	char *fstype; /* after the " - " separator */
	char *source;
};

struct mount_table {
	struct mount_entry *v;
	size_t n;
};

/*
 * Parses a whole mountinfo file into t (which need not be initialised). 0, or -errno: -EINVAL
 * on a malformed line (the whole table is rejected and left empty), -ENOMEM.
 */
int mountinfo_parse(FILE *f, struct mount_table *t);
/* Opens path (e.g. "/proc/1234/mountinfo") and parses it; 0 or -errno. */
int mountinfo_load(const char *path, struct mount_table *t);
void mount_table_free(struct mount_table *t);
const struct mount_entry *mount_table_find(const struct mount_table *t, uint32_t mnt_id);
/*
 * The mount whose mount point is the longest component-wise prefix of abs_path (which must be
 * canonical, absolute). "/mnt/a" is a prefix of "/mnt/a/b" and of "/mnt/a" but not of "/mnt/ab".
 * When several mounts share the mount point (over-mounting), the one listed LAST wins (it is
 * on top). NULL when no mount matches (no "/" in the table).
 */
const struct mount_entry *mount_table_longest_prefix(const struct mount_table *t,
						     const char *abs_path);
/*
 * Lexical canonicalisation of an absolute path: collapses "//", "." and ".." (".." at "/" stays
 * "/"), no trailing slash except for "/". Symlinks are not looked at. Returns 0, or
 * -ENAMETOOLONG when out is too small, -EINVAL if in is not absolute.
 */
int path_canonicalize(const char *in, char *out, size_t outlen);

#endif
