// SPDX-License-Identifier: GPL-2.0
/*
 * map_read_fd (src/modules.c), the modules' whole-map reader, against real hash maps: every
 * entry once with its value, per-CPU values per CPU, batches down to one entry (a bucket of
 * several then needs a larger batch: -ENOSPC, retried), and a walk stopped early.
 * Needs CAP_BPF (make test runs as root).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cmocka.h>

#include "plumb.h"

#define ENTRIES 5000

struct seen {
	unsigned int count[ENTRIES];
	int ncpus;
	bool percpu;
	long bad; /* entries whose value is not the one written */
	long stop_after; /* visit returns 1 at this many entries (0: never) */
	long visited;
};

static __u64 value_of(__u32 key, int cpu)
{
	return (__u64)key * 1000 + (__u64)cpu;
}

static int visit(void *ctx, const void *key, const void *value)
{
	struct seen *s = ctx;
	__u32 k = *(const __u32 *)key;
	const __u64 *v = value;

	if (k < ENTRIES)
		s->count[k]++;
	for (int c = 0; c < (s->percpu ? s->ncpus : 1); c++)
		if (k >= ENTRIES || v[c] != value_of(k, s->percpu ? c : 0))
			s->bad++;
	return ++s->visited == s->stop_after;
}

/* A hash map of ENTRIES keys (the buckets: a power of two above, so some hold several). */
static int make_map(enum bpf_map_type type, int ncpus)
{
	__u64 *values = calloc(ncpus, sizeof(*values));
	int fd = bpf_map_create(type, NULL, sizeof(__u32), sizeof(__u64), ENTRIES, NULL);

	if (fd < 0 || !values) {
		free(values);
		return fd < 0 ? fd : -ENOMEM;
	}
	for (__u32 k = 0; k < ENTRIES; k++) {
		for (int c = 0; c < ncpus; c++)
			values[c] = value_of(k, type == BPF_MAP_TYPE_HASH ? 0 : c);
		assert_int_equal(bpf_map_update_elem(fd, &k, values, BPF_NOEXIST), 0);
	}
	free(values);
	return fd;
}

static void read_whole(enum bpf_map_type type, size_t batch_bytes)
{
	struct seen *s = calloc(1, sizeof(*s));
	int ncpus = libbpf_num_possible_cpus(), fd;
	long n;

	assert_non_null(s);
	fd = make_map(type, type == BPF_MAP_TYPE_HASH ? 1 : ncpus);
	if (fd == -EPERM) {
		free(s);
		print_message("skipped: bpf_map_create refused (needs CAP_BPF)\n");
		skip();
	}
	assert_true(fd >= 0);
	s->ncpus = ncpus;
	s->percpu = type != BPF_MAP_TYPE_HASH;
	n = map_read_fd(fd, type, sizeof(__u32), sizeof(__u64), batch_bytes, visit, s);
	assert_int_equal(n, ENTRIES);
	assert_int_equal(s->bad, 0);
	for (int k = 0; k < ENTRIES; k++)
		assert_int_equal(s->count[k], 1);
	close(fd);
	free(s);
}

static void test_hash(void **state)
{
	(void)state;
	read_whole(BPF_MAP_TYPE_HASH, MAP_BATCH_BYTES);
}

/* one entry a batch: every bucket of two or more is -ENOSPC first */
static void test_hash_tiny_batches(void **state)
{
	(void)state;
	read_whole(BPF_MAP_TYPE_HASH, 1);
}

static void test_percpu(void **state)
{
	(void)state;
	read_whole(BPF_MAP_TYPE_PERCPU_HASH, MAP_BATCH_BYTES);
}

static void test_percpu_tiny_batches(void **state)
{
	(void)state;
	read_whole(BPF_MAP_TYPE_PERCPU_HASH, 64);
}

static void test_stop(void **state)
{
	struct seen *s = calloc(1, sizeof(*s));
	int fd = make_map(BPF_MAP_TYPE_HASH, 1);
	long n;

	(void)state;
	assert_non_null(s);
	if (fd == -EPERM) {
		free(s);
		print_message("skipped: bpf_map_create refused (needs CAP_BPF)\n");
		skip();
	}
	assert_true(fd >= 0);
	s->stop_after = 10;
	n = map_read_fd(fd, BPF_MAP_TYPE_HASH, sizeof(__u32), sizeof(__u64), MAP_BATCH_BYTES, visit,
			s);
	assert_int_equal(n, 10);
	assert_int_equal(s->visited, 10);
	close(fd);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash),   cmocka_unit_test(test_hash_tiny_batches),
		cmocka_unit_test(test_percpu), cmocka_unit_test(test_percpu_tiny_batches),
		cmocka_unit_test(test_stop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
