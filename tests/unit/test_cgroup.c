// SPDX-License-Identifier: GPL-2.0
/*
 * Needs root and a real cgroup2fs: it creates plumb-test-<pid>/a/b under the cgroup2 mount and
 * removes them in the group teardown, which cmocka runs also when a test fails.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>
#include <cmocka.h>

#include "identity/cgroup.h"

static char root[PATH_MAX];
/* Relative to root, as the cache names them; "c" is created and removed by single tests. */
static char rel_top[64], rel_a[64], rel_b[64], rel_c[64];

static void abs_path(char *out, size_t outlen, const char *rel)
{
	snprintf(out, outlen, "%s%s", root, rel);
}

static int make_cgroup(const char *rel)
{
	char path[PATH_MAX];

	abs_path(path, sizeof(path), rel);
	if (mkdir(path, 0755) && errno != EEXIST) {
		print_error("mkdir %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int remove_cgroup(const char *rel)
{
	char path[PATH_MAX];

	abs_path(path, sizeof(path), rel);
	if (rmdir(path) && errno != ENOENT) {
		print_error("rmdir %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static uint64_t cgroup_id(const char *rel)
{
	char path[PATH_MAX];
	struct stat st;

	abs_path(path, sizeof(path), rel);
	assert_int_equal(stat(path, &st), 0);
	return st.st_ino;
}

static int group_teardown(void **state)
{
	int err = 0;

	(void)state;
	if (!rel_top[0])
		return 0;
	err |= remove_cgroup(rel_c);
	err |= remove_cgroup(rel_b);
	err |= remove_cgroup(rel_a);
	err |= remove_cgroup(rel_top);
	return err ? -1 : 0;
}

static int group_setup(void **state)
{
	int err;

	(void)state;
	if (geteuid() != 0) {
		print_error("test_cgroup must run as root: it creates cgroups under the cgroup2 "
			    "mount (run: sudo %s)\n",
			    program_invocation_name);
		return -1;
	}
	err = cgroup2_mount_point(root, sizeof(root));
	if (err) {
		print_error("no cgroup2 mount found in /proc/self/mountinfo: %s\n", strerror(-err));
		return -1;
	}
	snprintf(rel_top, sizeof(rel_top), "/plumb-test-%d", (int)getpid());
	snprintf(rel_a, sizeof(rel_a), "/plumb-test-%d/a", (int)getpid());
	snprintf(rel_b, sizeof(rel_b), "/plumb-test-%d/a/b", (int)getpid());
	snprintf(rel_c, sizeof(rel_c), "/plumb-test-%d/c", (int)getpid());
	/* cmocka runs the group teardown even when this fails: it removes what was made. */
	if (make_cgroup(rel_top) || make_cgroup(rel_a) || make_cgroup(rel_b))
		return -1;
	return 0;
}

static void test_mount_point(void **state)
{
	char small[4];
	struct statfs sfs;

	(void)state;
	assert_int_equal(statfs(root, &sfs), 0);
	if (sfs.f_type != CGROUP2_SUPER_MAGIC)
		fail_msg("%s is not a cgroup2fs (f_type 0x%lx)", root, (unsigned long)sfs.f_type);
	assert_int_equal(cgroup2_mount_point(small, sizeof(small)), -ENAMETOOLONG);
}

static void test_resolve(void **state)
{
	struct cgroup_cache *c = cgroup_cache_new(root, 1 << 20);
	struct cgroup_cache_stats st;
	struct stat root_st;

	(void)state;
	assert_non_null(c);
	assert_int_equal(stat(root, &root_st), 0);
	assert_string_equal(cgroup_cache_resolve(c, cgroup_id(rel_b), 0), rel_b);
	assert_string_equal(cgroup_cache_resolve(c, cgroup_id(rel_a), 0), rel_a);
	assert_string_equal(cgroup_cache_resolve(c, cgroup_id(rel_top), 0), rel_top);
	assert_string_equal(cgroup_cache_resolve(c, root_st.st_ino, 0), "/");
	cgroup_cache_stats(c, &st);
	/* All four were there at the first scan: one rescan, no misses. */
	assert_int_equal(st.rescans, 1);
	assert_int_equal(st.misses, 0);
	assert_true(st.entries >= 4);
	assert_int_equal(st.evictions, 0);
	assert_int_equal(st.capacity, 1 << 20);

	assert_null(cgroup_cache_resolve(c, UINT64_MAX, 0));
	cgroup_cache_stats(c, &st);
	assert_int_equal(st.rescans, 2);
	assert_int_equal(st.misses, 1);
	/* The rescan kept the known ones. */
	assert_string_equal(cgroup_cache_resolve(c, cgroup_id(rel_b), 0), rel_b);
	cgroup_cache_free(c);
	assert_null(cgroup_cache_new(root, 0));
}

static void test_rate_limit(void **state)
{
	struct cgroup_cache *c = cgroup_cache_new(root, 1 << 20);
	struct cgroup_cache_stats st;
	uint64_t id_c;

	(void)state;
	assert_non_null(c);
	assert_string_equal(cgroup_cache_resolve(c, cgroup_id(rel_top), 60000), rel_top);
	assert_int_equal(make_cgroup(rel_c), 0);
	id_c = cgroup_id(rel_c);

	/* Scanned just now: a miss within min_rescan_ms does not scan again. */
	assert_null(cgroup_cache_resolve(c, id_c, 60000));
	assert_null(cgroup_cache_resolve(c, UINT64_MAX, 60000));
	cgroup_cache_stats(c, &st);
	assert_int_equal(st.rescans, 1);
	assert_int_equal(st.misses, 2);

	assert_string_equal(cgroup_cache_resolve(c, id_c, 0), rel_c);
	cgroup_cache_stats(c, &st);
	assert_int_equal(st.rescans, 2);
	assert_int_equal(st.misses, 2);

	/* Removed after the scan: still named (cgroup2 cannot rename), but no longer there. */
	assert_int_equal(remove_cgroup(rel_c), 0);
	assert_string_equal(cgroup_cache_resolve(c, id_c, 60000), rel_c);
	assert_int_equal(cgroup_cache_exists(c, id_c), 0);
	/* The next rescan forgets it. */
	assert_null(cgroup_cache_resolve(c, UINT64_MAX, 0));
	assert_null(cgroup_cache_resolve(c, id_c, 60000));
	cgroup_cache_free(c);
}

static void test_exists(void **state)
{
	struct cgroup_cache *c = cgroup_cache_new(root, 1 << 20);
	uint64_t id_b = cgroup_id(rel_b), id_b2;

	(void)state;
	assert_non_null(c);
	/* Not resolved yet, so not known. */
	assert_int_equal(cgroup_cache_exists(c, id_b), 0);
	assert_string_equal(cgroup_cache_resolve(c, id_b, 0), rel_b);
	assert_int_equal(cgroup_cache_exists(c, id_b), 1);
	assert_int_equal(cgroup_cache_exists(c, cgroup_id(rel_a)), 1);

	assert_int_equal(remove_cgroup(rel_b), 0);
	assert_int_equal(cgroup_cache_exists(c, id_b), 0);
	assert_int_equal(cgroup_cache_exists(c, cgroup_id(rel_a)), 1);

	/* A new cgroup of the same name is another cgroup, with another id. */
	assert_int_equal(make_cgroup(rel_b), 0);
	id_b2 = cgroup_id(rel_b);
	assert_int_not_equal(id_b2, id_b);
	assert_int_equal(cgroup_cache_exists(c, id_b), 0);
	assert_string_equal(cgroup_cache_resolve(c, id_b2, 0), rel_b);
	assert_int_equal(cgroup_cache_exists(c, id_b2), 1);
	assert_null(cgroup_cache_resolve(c, id_b, 0));
	cgroup_cache_free(c);
}

/* How many cgroups a full walk finds now. */
static size_t count_cgroups(void)
{
	struct cgroup_cache *c = cgroup_cache_new(root, 1 << 20);
	struct cgroup_cache_stats st;

	assert_non_null(c);
	assert_null(cgroup_cache_resolve(c, UINT64_MAX, 0));
	cgroup_cache_stats(c, &st);
	assert_int_equal(st.evictions, 0);
	cgroup_cache_free(c);
	return st.entries;
}

static void test_capacity(void **state)
{
	struct cgroup_cache *two = cgroup_cache_new(root, 2);
	struct cgroup_cache_stats st;
	struct stat root_st;
	size_t before, after;

	(void)state;
	assert_non_null(two);
	assert_int_equal(stat(root, &root_st), 0);
	before = count_cgroups();
	/* The walk is pre-order: the root is the first found, so it is kept. */
	assert_string_equal(cgroup_cache_resolve(two, root_st.st_ino, 0), "/");
	after = count_cgroups();
	assert_true(before >= 4);

	cgroup_cache_stats(two, &st);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.capacity, 2);
	assert_int_equal(st.rescans, 1);
	/* Everything not kept is counted; other cgroups may come and go between the walks. */
	assert_in_range(st.entries + st.evictions, before < after ? before : after,
			before > after ? before : after);
	cgroup_cache_free(two);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mount_point), cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_rate_limit),  cmocka_unit_test(test_exists),
		cmocka_unit_test(test_capacity),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
