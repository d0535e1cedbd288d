// SPDX-License-Identifier: GPL-2.0
/*
 * src/hashtab.h: entries are found after the table grows from its first buckets to its bound,
 * removals keep the count, the buckets stop growing at the bound (longer chains, still found),
 * and iteration visits every entry once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "hashtab.h"

struct item {
	struct hnode node; /* first, as hashtab.h wants */
	uint64_t key;
	int visits;
};

static struct item *find(const struct hashtab *h, uint64_t key)
{
	return (struct item *)hashtab_find(h, hash_bytes(&key, sizeof(key)), &key,
					   offsetof(struct item, key), sizeof(key));
}

static void add(struct hashtab *h, struct item *it, uint64_t key)
{
	it->key = key;
	hashtab_insert(h, &it->node, hash_bytes(&key, sizeof(key)));
}

static void test_grows_and_finds(void **state)
{
	enum { N = 5000 };
	struct item *items = calloc(N, sizeof(*items));
	struct hashtab h;

	(void)state;
	assert_non_null(items);
	assert_int_equal(hashtab_init(&h, 8192), 0);
	assert_int_equal(h.mask + 1, HASHTAB_MIN_BUCKETS);
	for (uint64_t i = 0; i < N; i++) {
		add(&h, &items[i], i * 7919);
		/* every entry so far is still found after each growth */
		if (i % 997 == 0)
			for (uint64_t j = 0; j <= i; j++)
				assert_ptr_equal(find(&h, j * 7919), &items[j]);
	}
	assert_int_equal(h.entries, N);
	assert_true(h.mask + 1 >= N / 2 && h.mask + 1 <= 8192);
	assert_null(find(&h, 3));
	for (uint64_t i = 0; i < N; i += 2)
		hashtab_remove(&h, &items[i].node);
	assert_int_equal(h.entries, N / 2);
	for (uint64_t i = 0; i < N; i++)
		assert_ptr_equal(find(&h, i * 7919), i % 2 ? &items[i] : NULL);
	free(h.buckets);
	free(items);
}

static void test_bounded_buckets(void **state)
{
	enum { N = 1000 };
	struct item *items = calloc(N, sizeof(*items));
	struct hashtab h;
	struct hnode *n;
	size_t b;

	(void)state;
	assert_non_null(items);
	assert_int_equal(hashtab_init(&h, 100), 0); /* a bound of 100: 128 buckets at most */
	for (uint64_t i = 0; i < N; i++)
		add(&h, &items[i], i);
	assert_int_equal(h.mask + 1, 128);
	hashtab_for_each(&h, b, n)((struct item *)n)->visits++;
	for (uint64_t i = 0; i < N; i++) {
		assert_int_equal(items[i].visits, 1);
		assert_ptr_equal(find(&h, i), &items[i]);
	}
	hashtab_remove(&h, &items[0].node);
	hashtab_remove(&h, &items[0].node); /* not in the table any more: nothing changes */
	assert_int_equal(h.entries, N - 1);
	free(h.buckets);
	free(items);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grows_and_finds),
		cmocka_unit_test(test_bounded_buckets),
	};

	return cmocka_run_group_tests_name("hashtab", tests, NULL, NULL);
}
