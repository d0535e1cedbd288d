// SPDX-License-Identifier: GPL-2.0
/*
 * Counters carried over an agent restart: see carry.h. The store is a BPF hash map because
 * a bpf file system holds nothing else, and it outlives the process like the programs' maps
 * do; it is read and written only at start and at exit, never per event or per scrape.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "export/carry.h"
#include "hashtab.h"
#include "plumb.h"

/* 128 bits: two series share a key with probability ~n^2 / 2^129, nil for any real n */
struct carry_key {
	uint64_t h1, h2;
};

/* the previous agent's count of series that did not fit (not a series: both hashes 0) */
static const struct carry_key meta_key = { 0, 0 };

struct carry_entry {
	struct hnode node; /* first */
	struct carry_key key;
	double value;
	bool seen; /* a restored series the final collect wrote (else it is handed on as is) */
};

/*
 * DIR/counters_<module>, for a module whose maps can be handed to the next agent (src/adopt.h):
 * each of its series' value less what the maps hold, the part only user space knows. The next
 * agent uses it in place of the whole value when it takes the maps over (their counts go on
 * in them), and the whole value when it does not.
 */
struct carry_part {
	char module[32];
	int fd;
	struct carry_entry *taken; /* what the previous agent left */
	size_t ntaken;
	struct carry_entry *saved; /* at exit: the values less the maps' part */
	size_t nsaved;
	bool used; /* this agent took the module's maps over */
};

#define CARRY_MAX_PARTS 8

struct carry {
	int fd;
	unsigned int capacity;
	struct carry_part parts[CARRY_MAX_PARTS];
	size_t nparts;
	struct carry_part *subtracting; /* between carry_part_begin and carry_part_end */
	bool maps_hold_all; /* the module subtracting: its maps hold all of every series */
	struct hashtab saved_index; /* the saved series by key, while subtracting */
	struct hashtab offsets; /* restored at open */
	struct carry_entry *restored;
	size_t nrestored;
	uint64_t prev_dropped; /* what the previous agent said it dropped */
	uint64_t overflow; /* entries beyond capacity in the map found at start */
	bool recording;
	struct carry_entry *saved; /* recorded for carry_save, at most capacity */
	size_t nsaved;
	uint64_t dropped;
};

/* FNV-1a, 64 bits, then a finaliser: independent of hash_bytes, the key's other half */
static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	h ^= h >> 31;
	h *= 0x7fb5d329728ea185ull;
	return h ^ (h >> 27);
}

static struct carry_key series_key(const char *series, size_t len)
{
	struct carry_key k = { hash_bytes(series, len), fnv1a(series, len) };

	if (!k.h1 && !k.h2)
		k.h2 = 1; /* never the meta key */
	return k;
}

/* DIR, or the directory it would be made in, is on a bpf file system; DIR is made then. */
static int on_bpffs(const char *dir, char *err, size_t errlen)
{
	char parent[4096];
	struct statfs st;
	const char *where = dir;
	char *slash;

	if (access(dir, F_OK)) {
		snprintf(parent, sizeof(parent), "%s", dir);
		slash = strrchr(parent, '/');
		if (slash && slash != parent)
			*slash = '\0';
		else
			snprintf(parent, sizeof(parent), slash ? "/" : ".");
		where = parent;
	}
	if (statfs(where, &st)) {
		int e = errno;

		snprintf(err, errlen, "--pin: %.200s: %s", where, strerror(e));
		return -e;
	}
	if (st.f_type != BPF_FS_MAGIC) {
		snprintf(err, errlen,
			 "--pin: %.200s is not on a bpf file system (mount -t bpf bpf /sys/fs/bpf)",
			 dir);
		return -EINVAL;
	}
	if (where != dir && mkdir(dir, 0700) && errno != EEXIST) {
		int e = errno;

		snprintf(err, errlen, "--pin: cannot create %.200s: %s", dir, strerror(e));
		return -e;
	}
	return 0;
}

/*
 * The pinned map: *max_entries of the one found (0 when none), which must have our key and
 * value; a missing one is made and pinned. Anything else at path is refused.
 */
static int map_get(const char *path, unsigned int capacity, __u32 *max_entries, char *err,
		   size_t errlen)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	int fd = bpf_obj_get(path);

	*max_entries = 0;
	if (fd >= 0) {
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) && info.type == BPF_MAP_TYPE_HASH &&
		    info.key_size == sizeof(struct carry_key) &&
		    info.value_size == sizeof(double)) {
			*max_entries = info.max_entries;
			return fd;
		}
		close(fd);
		snprintf(err, errlen, "--pin: %.200s is not plumb's counters map", path);
		return -EEXIST;
	}
	if (errno != ENOENT) {
		int e = errno;

		snprintf(err, errlen, "--pin: %.200s: %s", path, strerror(e));
		return -e;
	}
	/* not preallocated: written once, at exit; it holds only what is in it meanwhile */
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, "plumb_counters", sizeof(struct carry_key),
			    sizeof(double), capacity + 1, &opts);
	if (fd < 0) {
		int e = errno;

		snprintf(err, errlen, "--pin: cannot create the counters map: %s", strerror(e));
		return -e;
	}
	if (bpf_obj_pin(fd, path)) {
		int e = errno;

		close(fd);
		snprintf(err, errlen, "--pin: cannot pin %.200s: %s", path, strerror(e));
		return -e;
	}
	return fd;
}

/* Takes every entry out of the map into c->restored (at most capacity; the rest counted). */
static int take_all(struct carry *c)
{
	struct carry_key key, next;
	bool first = true;
	double v;

	while (!bpf_map_get_next_key(c->fd, first ? NULL : &key, &next)) {
		first = false;
		key = next;
		if (bpf_map_lookup_elem(c->fd, &key, &v))
			continue;
		if (!memcmp(&key, &meta_key, sizeof(key))) {
			c->prev_dropped = (uint64_t)v;
			continue;
		}
		if (c->nrestored == c->capacity) {
			c->overflow++;
			continue;
		}
		c->restored[c->nrestored].key = key;
		c->restored[c->nrestored].value = v;
		hashtab_insert(&c->offsets, &c->restored[c->nrestored].node,
			       c->restored[c->nrestored].key.h1);
		c->nrestored++;
	}
	/* then empty it: what is taken must not be taken again after a crash */
	for (size_t i = 0; i < c->nrestored; i++)
		if (bpf_map_delete_elem(c->fd, &c->restored[i].key) && errno != ENOENT)
			return -errno;
	bpf_map_delete_elem(c->fd, &meta_key);
	while (!bpf_map_get_next_key(c->fd, NULL, &next)) /* any left over (beyond capacity) */
		if (bpf_map_delete_elem(c->fd, &next))
			return -errno;
	return 0;
}

/* A map of another size than capacity + 1 (an earlier --pin-capacity): made again. */
static int map_resize(struct carry *c, const char *path, char *err, size_t errlen)
{
	__u32 max_entries;

	close(c->fd);
	if (unlink(path)) {
		int e = errno;

		snprintf(err, errlen, "--pin: cannot remove %.200s to resize it: %s", path,
			 strerror(e));
		return -e;
	}
	c->fd = map_get(path, c->capacity, &max_entries, err, errlen);
	return c->fd < 0 ? c->fd : 0;
}

int carry_open(const char *dir, unsigned int capacity, struct carry **out, char *err, size_t errlen)
{
	char path[4096 + 16];
	struct carry *c;
	__u32 max_entries;
	int ret;

	*out = NULL;
	ret = on_bpffs(dir, err, errlen);
	if (ret)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c || hashtab_init(&c->offsets, capacity)) {
		free(c);
		snprintf(err, errlen, "--pin: out of memory");
		return -ENOMEM;
	}
	c->capacity = capacity;
	c->restored = calloc(capacity, sizeof(*c->restored));
	c->saved = calloc(capacity, sizeof(*c->saved));
	if (!c->restored || !c->saved) {
		snprintf(err, errlen, "--pin: out of memory");
		ret = -ENOMEM;
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, CARRY_MAP_NAME);
	c->fd = map_get(path, capacity, &max_entries, err, errlen);
	if (c->fd < 0) {
		ret = c->fd;
		goto fail;
	}
	if (max_entries) {
		ret = take_all(c);
		if (ret) {
			snprintf(err, errlen, "--pin: emptying %.200s: %s", path, strerror(-ret));
			close(c->fd);
			goto fail;
		}
		if (max_entries != capacity + 1 && (ret = map_resize(c, path, err, errlen)))
			goto fail;
	}
	*out = c;
	return 0;
fail:
	free(c->restored);
	free(c->saved);
	free(c->offsets.buckets);
	free(c);
	return ret;
}

/* While subtracting: the series' saved value less value (what the maps hold) into the part. */
static double subtract(struct carry *c, struct carry_key k, double value)
{
	struct carry_part *p = c->subtracting;
	struct carry_entry *e = (struct carry_entry *)hashtab_find(
		&c->saved_index, k.h1, &k, offsetof(struct carry_entry, key), sizeof(k));

	if (e && p->nsaved < c->capacity) {
		p->saved[p->nsaved].key = k;
		p->saved[p->nsaved].value = c->maps_hold_all ? 0 : e->value - value;
		p->nsaved++;
	}
	return value;
}

double carry_adjust(void *ctx, const char *series, size_t len, double value)
{
	struct carry *c = ctx;
	struct carry_key k = series_key(series, len);
	struct carry_entry *e;

	if (c->subtracting)
		return subtract(c, k, value);
	e = (struct carry_entry *)hashtab_find(&c->offsets, k.h1, &k,
					       offsetof(struct carry_entry, key), sizeof(k));

	if (e) {
		value += e->value;
		if (c->recording)
			e->seen = true;
	}
	if (c->recording) {
		if (c->nsaved < c->capacity) {
			c->saved[c->nsaved].key = k;
			c->saved[c->nsaved].value = value;
			c->nsaved++;
		} else {
			c->dropped++;
		}
	}
	return value;
}

void carry_record(struct carry *c)
{
	c->recording = true;
	c->nsaved = 0;
	c->dropped = 0;
}

static void put_fd(struct carry *c, int fd, const struct carry_key *k, double v, size_t *saved,
		   int *ret, char *err, size_t errlen)
{
	if (!bpf_map_update_elem(fd, k, &v, BPF_ANY)) {
		(*saved)++;
		return;
	}
	if (errno == E2BIG || errno == ENOMEM) {
		c->dropped++; /* the map is full */
		return;
	}
	if (!*ret) {
		*ret = -errno;
		snprintf(err, errlen, "--pin: saving the counters: %s", strerror(errno));
	}
}

static void put(struct carry *c, const struct carry_key *k, double v, size_t *saved, int *ret,
		char *err, size_t errlen)
{
	put_fd(c, c->fd, k, v, saved, ret, err, errlen);
}

int carry_save(struct carry *c, size_t *saved, uint64_t *dropped, char *err, size_t errlen)
{
	size_t part_saved = 0;

	double d;
	int ret = 0;

	*saved = 0;
	for (size_t i = 0; i < c->nsaved; i++)
		put(c, &c->saved[i].key, c->saved[i].value, saved, &ret, err, errlen);
	/* restored series this agent never wrote (idle all along): handed on as they came */
	for (size_t i = 0; i < c->nrestored; i++)
		if (!c->restored[i].seen)
			put(c, &c->restored[i].key, c->restored[i].value, saved, &ret, err, errlen);
	/* the parts: not counted in *saved, each is a second value of a series saved above */
	for (size_t i = 0; i < c->nparts; i++)
		for (size_t j = 0; j < c->parts[i].nsaved; j++)
			put_fd(c, c->parts[i].fd, &c->parts[i].saved[j].key,
			       c->parts[i].saved[j].value, &part_saved, &ret, err, errlen);
	*dropped = c->dropped;
	d = (double)c->dropped;
	if (bpf_map_update_elem(c->fd, &meta_key, &d, BPF_ANY) && !ret) {
		ret = -errno;
		snprintf(err, errlen, "--pin: saving the counters: %s", strerror(errno));
	}
	c->recording = false;
	return ret;
}

int carry_put_back(struct carry *c)
{
	size_t saved = 0;
	char err[256];
	int ret = 0;

	for (size_t i = 0; i < c->nrestored; i++)
		put(c, &c->restored[i].key, c->restored[i].value, &saved, &ret, err, sizeof(err));
	for (size_t i = 0; i < c->nparts; i++)
		for (size_t j = 0; j < c->parts[i].ntaken; j++)
			put_fd(c, c->parts[i].fd, &c->parts[i].taken[j].key,
			       c->parts[i].taken[j].value, &saved, &ret, err, sizeof(err));
	return ret;
}

/* map_read_fd's visit: one entry of the part being opened (the last one), up to capacity. */
static int take_part(void *ctx, const void *key, const void *value)
{
	struct carry *c = ctx;
	struct carry_part *p = &c->parts[c->nparts - 1];

	if (p->ntaken == c->capacity)
		return 1;
	memcpy(&p->taken[p->ntaken].key, key, sizeof(struct carry_key));
	memcpy(&p->taken[p->ntaken].value, value, sizeof(double));
	p->ntaken++;
	return 0;
}

int carry_open_part(struct carry *c, const char *dir, const char *module, char *err, size_t errlen)
{
	struct carry_part *p = &c->parts[c->nparts];
	char path[4096 + 64];
	__u32 max_entries;

	if (c->nparts == CARRY_MAX_PARTS)
		return -ENOSPC;
	memset(p, 0, sizeof(*p));
	snprintf(p->module, sizeof(p->module), "%s", module);
	snprintf(path, sizeof(path), "%s/%s_%s", dir, CARRY_MAP_NAME,
		 module); /* no dots on bpffs */
	p->fd = map_get(path, c->capacity, &max_entries, err, errlen);
	if (p->fd < 0)
		return p->fd;
	p->taken = calloc(c->capacity, sizeof(*p->taken));
	if (!p->taken) {
		close(p->fd);
		snprintf(err, errlen, "--pin: out of memory");
		return -ENOMEM;
	}
	c->nparts++; /* before the read: take_part finds it there */
	map_read_fd(p->fd, BPF_MAP_TYPE_HASH, sizeof(struct carry_key), sizeof(double),
		    MAP_BATCH_BYTES, take_part, c);
	map_empty(p->fd, sizeof(struct carry_key)); /* as the counters map is */
	return 0;
}

static struct carry_part *part_of(struct carry *c, const char *module)
{
	for (size_t i = 0; i < c->nparts; i++)
		if (!strcmp(c->parts[i].module, module))
			return &c->parts[i];
	return NULL;
}

void carry_use_part(struct carry *c, const char *module)
{
	struct carry_part *p = part_of(c, module);
	struct carry_entry *e;

	if (!p)
		return;
	p->used = true;
	for (size_t i = 0; i < p->ntaken; i++) {
		e = (struct carry_entry *)hashtab_find(
			&c->offsets, p->taken[i].key.h1, &p->taken[i].key,
			offsetof(struct carry_entry, key), sizeof(p->taken[i].key));
		if (e)
			e->value = p->taken[i].value;
	}
}

int carry_part_begin(struct carry *c, const char *module, bool maps_hold_all)
{
	struct carry_part *p = part_of(c, module);

	if (!p)
		return -ENOENT;
	if (!p->saved && !(p->saved = calloc(c->capacity, sizeof(*p->saved))))
		return -ENOMEM;
	if (!c->saved_index.buckets) {
		if (hashtab_init(&c->saved_index, c->nsaved ? c->nsaved : 1))
			return -ENOMEM;
		for (size_t i = 0; i < c->nsaved; i++)
			hashtab_insert(&c->saved_index, &c->saved[i].node, c->saved[i].key.h1);
	}
	p->nsaved = 0;
	c->subtracting = p;
	c->maps_hold_all = maps_hold_all;
	return 0;
}

void carry_part_end(struct carry *c)
{
	c->subtracting = NULL;
}

size_t carry_restored(const struct carry *c)
{
	return c->nrestored;
}

uint64_t carry_previous_dropped(const struct carry *c)
{
	return c->prev_dropped + c->overflow;
}

unsigned int carry_capacity(const struct carry *c)
{
	return c->capacity;
}

void carry_close(struct carry *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nparts; i++) {
		close(c->parts[i].fd);
		free(c->parts[i].taken);
		free(c->parts[i].saved);
	}
	free(c->saved_index.buckets);
	close(c->fd);
	free(c->restored);
	free(c->saved);
	free(c->offsets.buckets);
	free(c);
}
