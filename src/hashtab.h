/* SPDX-License-Identifier: GPL-2.0 */
/*
 * An intrusive chained hash table with a fixed number of buckets, for the agent's tables that
 * take an insert and a delete per event (the flow module's connections: thousands a second).
 * The caller embeds struct hnode as the first member of its entries and bounds their number
 * itself. Buckets start few and double with the entries, up to the bound: a table sized to
 * its bound from the start (1 MiB of buckets for 131,072 connections) spreads a few hundred
 * entries over a megabyte, and each lookup missed the cache (bench/results/flow.md). No
 * insert while hashtab_for_each runs: a growth moves every entry.
 */
#ifndef PLUMB_HASHTAB_H
#define PLUMB_HASHTAB_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct hnode {
	struct hnode *next;
	uint64_t hash;
};

struct hashtab {
	struct hnode **buckets;
	size_t mask;
	size_t entries; /* in the table now */
	size_t max_buckets; /* for the bound given to hashtab_init */
};

#define HASHTAB_MIN_BUCKETS 64

/* 8 bytes at a time with multiply-xorshift mixing (murmur3's finaliser constants): keys are
 * short fixed-size structs, hashed once or twice per event. */
static inline uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n, v;

	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&v, b, 8);
		h = (h ^ v) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	if (n) {
		v = 0;
		memcpy(&v, b, n);
		h = (h ^ v) * 0xff51afd7ed558ccdull;
	}
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

/*
 * A table for up to capacity entries: HASHTAB_MIN_BUCKETS buckets now, growing to a power of
 * two at least capacity. 0 or -ENOMEM.
 */
static inline int hashtab_init(struct hashtab *h, size_t capacity)
{
	size_t n = HASHTAB_MIN_BUCKETS;

	h->max_buckets = n;
	while (h->max_buckets < capacity)
		h->max_buckets <<= 1;
	h->buckets = calloc(n, sizeof(*h->buckets));
	h->mask = n - 1;
	h->entries = 0;
	return h->buckets ? 0 : -ENOMEM;
}

/* Twice the buckets, every entry moved; without memory, the chains just grow longer. */
static inline void hashtab_grow(struct hashtab *h)
{
	size_t n = (h->mask + 1) * 2;
	struct hnode **b = calloc(n, sizeof(*b)), *node, *next;

	if (!b)
		return;
	for (size_t i = 0; i <= h->mask; i++)
		for (node = h->buckets[i]; node; node = next) {
			next = node->next;
			node->next = b[node->hash & (n - 1)];
			b[node->hash & (n - 1)] = node;
		}
	free(h->buckets);
	h->buckets = b;
	h->mask = n - 1;
}

static inline void hashtab_insert(struct hashtab *h, struct hnode *node, uint64_t hash)
{
	struct hnode **b;

	if (h->entries > h->mask && h->mask + 1 < h->max_buckets)
		hashtab_grow(h); /* more entries than buckets */
	b = &h->buckets[hash & h->mask];
	node->hash = hash;
	node->next = *b;
	*b = node;
	h->entries++;
}

static inline void hashtab_remove(struct hashtab *h, struct hnode *node)
{
	struct hnode **p = &h->buckets[node->hash & h->mask];

	while (*p && *p != node)
		p = &(*p)->next;
	if (*p) {
		*p = node->next;
		h->entries--;
	}
}

/* The first entry with this hash whose key (at key_offset, key_size bytes) equals key. */
static inline struct hnode *hashtab_find(const struct hashtab *h, uint64_t hash, const void *key,
					 size_t key_offset, size_t key_size)
{
	for (struct hnode *n = h->buckets[hash & h->mask]; n; n = n->next)
		if (n->hash == hash && !memcmp((const char *)n + key_offset, key, key_size))
			return n;
	return NULL;
}

#define hashtab_for_each(h, i, n)              \
	for ((i) = 0; (i) <= (h)->mask; (i)++) \
		for ((n) = (h)->buckets[i]; (n); (n) = (n)->next)

#endif
