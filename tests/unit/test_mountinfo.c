// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "identity/mountinfo.h"

/*
 * A host's mountinfo, trimmed: optional fields (one, several, none), a bind mount of a
 * subdirectory with an escaped space, an over-mount of /mnt/a, /mnt/ab next to it, ext4 nested
 * under tmpfs, an nsfs root that is not a path, every kind of escape, and an empty source.
 */
static const char mountinfo_text[] =
	"22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro\n"
	"23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
	"24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw\n"
	"25 24 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
	"rw,nsdelegate,memory_recursiveprot\n"
	"26 22 0:5 / /dev rw,nosuid,relatime shared:7 master:1 - devtmpfs udev "
	"rw,size=8123456k,nr_inodes=2030864,mode=755\n"
	"30 22 0:30 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=1024k\n"
	"31 30 7:0 / /tmp/scratch rw,relatime - ext4 /dev/loop0 rw\n"
	"32 22 254:1 /srv/data /mnt/data\\040dir rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
	"33 22 0:31 / /mnt/a rw,relatime shared:20 - tmpfs first rw\n"
	"34 33 0:32 / /mnt/a rw,relatime shared:21 - tmpfs second rw\n"
	"35 22 0:33 / /mnt/ab rw - tmpfs ab rw\n"
	"36 22 0:4 net:[4026532008] /run/netns/test rw shared:5 - nsfs nsfs rw\n"
	"37 22 0:35 / /mnt/tab\\011nl\\012bs\\134 rw - tmpfs tmpfs\\040x rw\n"
	"38 22 0:36 / /var/lib/docker/overlay2/x/merged rw,relatime shared:30 master:2 "
	"propagate_from:2 unbindable - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
	"39 22 0:37 / /mnt/empty rw - tmpfs  rw\n";

#define N_MOUNTS 15

static FILE *open_text(const char *text)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	assert_non_null(f);
	return f;
}

static int parse_text(const char *text, struct mount_table *t)
{
	FILE *f = open_text(text);
	int err = mountinfo_parse(f, t);

	fclose(f);
	return err;
}

static void assert_entry(const struct mount_entry *e, uint32_t id, uint32_t parent,
			 unsigned int major, unsigned int minor, const char *root, const char *mp,
			 const char *fstype, const char *source)
{
	assert_non_null(e);
	assert_int_equal(e->mnt_id, id);
	assert_int_equal(e->parent_id, parent);
	assert_int_equal(e->major, major);
	assert_int_equal(e->minor, minor);
	assert_string_equal(e->root, root);
	assert_string_equal(e->mount_point, mp);
	assert_string_equal(e->fstype, fstype);
	assert_string_equal(e->source, source);
}

static void test_parse(void **state)
{
	struct mount_table t;

	(void)state;
	assert_int_equal(parse_text(mountinfo_text, &t), 0);
	assert_int_equal(t.n, N_MOUNTS);
	assert_entry(&t.v[0], 22, 1, 254, 1, "/", "/", "ext4", "/dev/vda1");
	assert_entry(&t.v[3], 25, 24, 0, 23, "/", "/sys/fs/cgroup", "cgroup2", "cgroup2");
	assert_entry(&t.v[4], 26, 22, 0, 5, "/", "/dev", "devtmpfs", "udev");
	assert_entry(&t.v[5], 30, 22, 0, 30, "/", "/tmp", "tmpfs", "tmpfs");
	assert_entry(&t.v[6], 31, 30, 7, 0, "/", "/tmp/scratch", "ext4", "/dev/loop0");
	assert_entry(&t.v[7], 32, 22, 254, 1, "/srv/data", "/mnt/data dir", "ext4", "/dev/vda1");
	assert_entry(&t.v[9], 34, 33, 0, 32, "/", "/mnt/a", "tmpfs", "second");
	assert_entry(&t.v[11], 36, 22, 0, 4, "net:[4026532008]", "/run/netns/test", "nsfs", "nsfs");
	assert_entry(&t.v[12], 37, 22, 0, 35, "/", "/mnt/tab\tnl\nbs\\", "tmpfs", "tmpfs x");
	assert_entry(&t.v[13], 38, 22, 0, 36, "/", "/var/lib/docker/overlay2/x/merged", "overlay",
		     "overlay");
	assert_entry(&t.v[14], 39, 22, 0, 37, "/", "/mnt/empty", "tmpfs", "");
	mount_table_free(&t);
	assert_null(t.v);
	assert_int_equal(t.n, 0);
}

static void test_parse_empty_and_blank(void **state)
{
	struct mount_table t;

	(void)state;
	assert_int_equal(parse_text("", &t), 0);
	assert_int_equal(t.n, 0);
	mount_table_free(&t);
	assert_int_equal(parse_text("\n23 22 0:21 / /proc rw - proc proc rw\n\n", &t), 0);
	assert_int_equal(t.n, 1);
	assert_entry(&t.v[0], 23, 22, 0, 21, "/", "/proc", "proc", "proc");
	mount_table_free(&t);
	/* No newline at the end of the last line. */
	assert_int_equal(parse_text("23 22 0:21 / /proc rw - proc proc rw", &t), 0);
	assert_int_equal(t.n, 1);
	assert_string_equal(t.v[0].source, "proc");
	mount_table_free(&t);
}

static void test_parse_malformed(void **state)
{
	static const char *const bad[] = {
		"22 1 254:1 / / rw,relatime shared:1 ext4 /dev/vda1 rw\n", /* no separator */
		"22 1 254:1 / / rw - ext4\n", /* no source */
		"22 1 254:1 / / rw - ext4 /dev/vda1\n", /* no super options */
		"22 1 254:1 / / rw -  /dev/vda1 rw\n", /* empty fstype */
		"22 1 254:1 /\n", /* short */
		"x 1 254:1 / / rw - ext4 /dev/vda1 rw\n",
		"-1 1 254:1 / / rw - ext4 /dev/vda1 rw\n",
		"+22 1 254:1 / / rw - ext4 /dev/vda1 rw\n",
		"4294967296 1 254:1 / / rw - ext4 /dev/vda1 rw\n",
		"22 1 254 / / rw - ext4 /dev/vda1 rw\n",
		"22 1 254:x / / rw - ext4 /dev/vda1 rw\n",
		"22 1 :1 / / rw - ext4 /dev/vda1 rw\n",
		"22  1 254:1 / / rw - ext4 /dev/vda1 rw\n", /* two spaces: empty parent id */
		"22 1 254:1 / relative rw - ext4 /dev/vda1 rw\n",
		"22 1 254:1  / rw - ext4 /dev/vda1 rw\n", /* empty root */
		/* a good line, then a bad one: the whole table is rejected */
		"22 1 254:1 / / rw - ext4 /dev/vda1 rw\n23 22 0:21 / /proc rw proc proc rw\n",
	};
	struct mount_table t;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = parse_text(bad[i], &t);

		if (err != -EINVAL)
			fail_msg("expected -EINVAL for \"%s\", got %d", bad[i], err);
		assert_null(t.v);
		assert_int_equal(t.n, 0);
	}
}

static void test_load(void **state)
{
	char path[] = "/tmp/plumb-test-mountinfo-XXXXXX";
	struct mount_table t;
	FILE *f;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(fputs(mountinfo_text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(mountinfo_load(path, &t), 0);
	unlink(path);
	assert_int_equal(t.n, N_MOUNTS);
	assert_string_equal(t.v[7].mount_point, "/mnt/data dir");
	mount_table_free(&t);

	assert_int_equal(mountinfo_load("/nonexistent/plumb/mountinfo", &t), -ENOENT);
	assert_int_equal(t.n, 0);

	/* This process's own mount table always has a mount that covers "/". */
	assert_int_equal(mountinfo_load("/proc/self/mountinfo", &t), 0);
	assert_true(t.n > 0);
	assert_non_null(mount_table_longest_prefix(&t, "/"));
	mount_table_free(&t);
}

static void test_find(void **state)
{
	struct mount_table t;

	(void)state;
	assert_int_equal(parse_text(mountinfo_text, &t), 0);
	assert_entry(mount_table_find(&t, 33), 33, 22, 0, 31, "/", "/mnt/a", "tmpfs", "first");
	assert_entry(mount_table_find(&t, 22), 22, 1, 254, 1, "/", "/", "ext4", "/dev/vda1");
	assert_entry(mount_table_find(&t, 39), 39, 22, 0, 37, "/", "/mnt/empty", "tmpfs", "");
	assert_null(mount_table_find(&t, 1));
	assert_null(mount_table_find(&t, 999));
	mount_table_free(&t);
	assert_null(mount_table_find(&t, 22));
}

static void test_longest_prefix(void **state)
{
	static const struct {
		const char *path;
		uint32_t mnt_id;
	} cases[] = {
		{ "/", 22 },
		{ "/etc/passwd", 22 },
		{ "/proc", 23 },
		{ "/proc/self/mountinfo", 23 },
		{ "/procx", 22 },
		{ "/sys/fs/cgroup", 25 },
		{ "/sys/fs/cgroup/system.slice", 25 },
		{ "/sys/fs/cgroupx", 24 },
		{ "/tmp", 30 },
		{ "/tmp/scratch", 31 },
		{ "/tmp/scratch/lost+found/f", 31 },
		{ "/tmp/scratchy", 30 },
		{ "/mnt/a", 34 }, /* over-mounted: the later mount is on top */
		{ "/mnt/a/b", 34 },
		{ "/mnt/ab", 35 },
		{ "/mnt/ab/c", 35 },
		{ "/mnt/abc", 22 },
		{ "/mnt", 22 },
		{ "/mnt/data dir/x", 32 },
		{ "/mnt/data", 22 },
		{ "/mnt/tab\tnl\nbs\\/f", 37 },
		{ "/run/netns/test", 36 },
		{ "/var/lib/docker/overlay2/x/merged/etc", 38 },
	};
	struct mount_table t, empty = { NULL, 0 };

	(void)state;
	assert_int_equal(parse_text(mountinfo_text, &t), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct mount_entry *e = mount_table_longest_prefix(&t, cases[i].path);

		if (!e || e->mnt_id != cases[i].mnt_id)
			fail_msg("longest_prefix(\"%s\"): expected mount %u, got %d", cases[i].path,
				 cases[i].mnt_id, e ? (int)e->mnt_id : -1);
	}
	mount_table_free(&t);

	/* Without "/" in the table, a path outside every mount has none. */
	assert_int_equal(parse_text("30 22 0:30 / /tmp rw - tmpfs tmpfs rw\n", &t), 0);
	assert_null(mount_table_longest_prefix(&t, "/etc"));
	assert_non_null(mount_table_longest_prefix(&t, "/tmp/x"));
	mount_table_free(&t);
	assert_null(mount_table_longest_prefix(&empty, "/"));
}

static void test_canonicalize(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "/", "/" },
		{ "//", "/" },
		{ "/.", "/" },
		{ "/..", "/" },
		{ "/../..", "/" },
		{ "/../a", "/a" },
		{ "/a", "/a" },
		{ "/a/", "/a" },
		{ "//a//", "/a" },
		{ "/a/b/..", "/a" },
		{ "/a/b/../", "/a" },
		{ "/a/./b//c/", "/a/b/c" },
		{ "/a/b/../../..", "/" },
		{ "/a/../../b", "/b" },
		{ "/usr/lib/../bin/./x", "/usr/bin/x" },
		{ "/a/b/c/../../d/../e", "/a/e" },
		{ "/a/.../b", "/a/.../b" },
		{ "/a/..b/.c/c.", "/a/..b/.c/c." },
		{ "/mnt/data dir/./f", "/mnt/data dir/f" },
	};
	char out[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int err = path_canonicalize(cases[i].in, out, sizeof(out));

		if (err || strcmp(out, cases[i].out))
			fail_msg("canonicalize(\"%s\"): expected \"%s\", got %d \"%s\"",
				 cases[i].in, cases[i].out, err, err ? "" : out);
	}

	assert_int_equal(path_canonicalize("a/b", out, sizeof(out)), -EINVAL);
	assert_int_equal(path_canonicalize("", out, sizeof(out)), -EINVAL);
	assert_int_equal(path_canonicalize(NULL, out, sizeof(out)), -EINVAL);
	/* out sizes count the NUL; only the result's length matters, not the input's. */
	assert_int_equal(path_canonicalize("/abc", out, 4), -ENAMETOOLONG);
	assert_int_equal(path_canonicalize("/abc", out, 5), 0);
	assert_string_equal(out, "/abc");
	assert_int_equal(path_canonicalize("/", out, 1), -ENAMETOOLONG);
	assert_int_equal(path_canonicalize("/", out, 2), 0);
	assert_string_equal(out, "/");
	assert_int_equal(path_canonicalize("/averylongname/../b", out, 3), 0);
	assert_string_equal(out, "/b");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_empty_and_blank),
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_longest_prefix),
		cmocka_unit_test(test_canonicalize),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
