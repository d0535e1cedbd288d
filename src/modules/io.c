// SPDX-License-Identifier: GPL-2.0
/*
 * io module, user space: loads bpf/io.bpf.c, reads its per-CPU (cgroup, mount) counters,
 * resolves path operations that BPF could not place, names cgroups and mounts, and exports.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "adopt.h"
#include "clock.h"
#include "detach.h"
#include "plumb.h"
#include "log.h"
#include "probe.h"
#include "window.h"
#include "export/prom.h"
#include "identity/cgroup.h"
#include "identity/mounts.h"
#include "identity/workload.h"
#include "modules/io_module.h"
#include "io.skel.h"

const char *const io_op_names[IO_OPS] = { "open",  "create", "mkdir", "unlink",
					  "rmdir", "fsync",  "rename" };
const char *const io_dir_names[IO_DIRS] = { "read", "write" };
const char *const io_lat_names[IO_LAT_KINDS] = { "read", "write", "fsync" };

#define IO_RESOLVE_RESCAN_MS 250
/*
 * An entry whose cgroup or mount has no name yet is held back from the output this long:
 * exporting it as unknown:<id> and then under its name would split one counter in two
 * series, and the named one would start at its full value (Prometheus would see no increase).
 */
#define IO_UNRESOLVED_HOLD_MS 5000
/* How often removed cgroups are looked for: a stat per cgroup; the grace period is in seconds */
#define IO_EXPIRY_CHECK_MS 1000
/* io_slots is walked when BPF added a key or the agent removed one, and at least this often */
#define IO_SLOTS_WALK_MS    5000
#define IO_MOUNT_NAMESPACES 256
/*
 * The cgroup name cache holds four times --io-capacity cgroups, and at least this many: it
 * holds the host's tree (a scan keeps the first it meets, in directory order), not only the
 * cgroups with keys, so a small --io-capacity must not leave the workloads' own unnamed on a
 * host with a few hundred cgroups (--io-capacity 16 named 64: a test's new cgroups went
 * unnamed beside 200 siblings). flow's cache holds as many. A host with more cgroups than
 * the cache leaves some unnamed still (counted: cgroup_cache_full).
 */
#define IO_CGROUPS_MIN 4096
/*
 * Latency sampled 1 in N (N > 1): the read/write enter programs are attached for 1/N of each
 * period and time every call meanwhile; a window is at least IO_WINDOW_MIN_NS, so the period
 * grows past IO_WINDOW_PERIOD_NS for N above 100 (docs/architecture.md, "Latency windows").
 */
#define IO_WINDOW_PERIOD_NS 1000000000ull
#define IO_WINDOW_MIN_NS    10000000ull

/* What user space knows of one (cgroup id, mount id) key. */
struct io_entry {
	struct io_key key;
	struct io_stats kernel; /* the BPF map's counts, summed over CPUs, at the last read */
	struct io_stats user; /* path operations placed by user space */
	char cgroup[256]; /* "" until resolved */
	char mount[256]; /* "" until resolved */
	char fstype[32];
	uint64_t gone_since_ms; /* when its cgroup was first seen removed; 0 while it exists */
	uint64_t first_seen_ms;
	uint32_t slot; /* its counts' index in io_stats, when in_map */
	bool in_map; /* io_slots held the key at the last read */
};

struct io_state {
	struct io_bpf *skel;
	struct ring_buffer *events;
	struct cgroup_cache *cgroups;
	struct mount_cache *mounts;
	void *entries; /* tsearch tree of struct io_entry */
	size_t nentries;
	int ncpus;
	unsigned int grace_s;
	uint32_t capacity;
	uint64_t in_map; /* keys in the kernel map at the last read */
	struct io_stats
		*percpu; /* one io_stats slot's values, ncpus of them; zeroed to give back */
	/*
	 * each slot's entry (capacity of them), and one past the highest slot a key has, as the
	 * last walk of io_slots found them; the BPF count of added keys then, and when
	 */
	struct io_entry **by_slot;
	uint32_t slots_used;
	uint64_t walked_added, walked_ms;
	bool walk; /* walk at the next read: a key was removed, or none walked yet */
	/* batches of io_stats: batch_slots slots' indices and per-CPU values */
	uint32_t *batch_keys;
	struct io_stats *batch_values;
	uint32_t batch_slots;
	uint64_t slots_kept; /* removed keys' slots that could not be zeroed: not given back */
	uint64_t last_expiry_ms;
	uint64_t unresolved_paths, entries_full;
	/* io_uring path operations in flight (uring_paths) at the last check, and those
	 * dropped as stale there */
	uint64_t uring_paths, uring_paths_stale;
	uint64_t uring_stale_ns; /* how old an entry is dropped at (URING_PATH_STALE_S) */
	struct adopt adopt; /* --pin: the maps and links over a restart */
	/* latency sampled by time: the read/write enter programs attached for window_ns of
	 * every period_ns (src/window.h); NULL when every call is timed or latency is off */
	struct attach_window *windows;
	uint64_t window_ns, period_ns;
	bool window_warned; /* the windows' thread could not start (said once) */
};

static int key_cmp(const void *a, const void *b)
{
	const struct io_key *x = a, *y = b;

	if (x->cgroup_id != y->cgroup_id)
		return x->cgroup_id < y->cgroup_id ? -1 : 1;
	if (x->mnt_id != y->mnt_id)
		return x->mnt_id < y->mnt_id ? -1 : 1;
	return 0;
}

static struct io_entry *entry_get(struct io_state *s, const struct io_key *key)
{
	struct io_entry *e, **found;

	found = tfind(key, &s->entries, key_cmp);
	if (found)
		return *found;
	/* user-space entries are bounded like the map: the map's capacity plus as many again */
	if (s->nentries >= 2 * (size_t)s->capacity)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key = *key;
	e->key.pad = 0;
	e->first_seen_ms = monotonic_ms();
	if (!tsearch(e, &s->entries, key_cmp)) {
		free(e);
		return NULL;
	}
	s->nentries++;
	return e;
}

double io_latency_bound(int k)
{
	return ldexp(1.0, IO_LAT_MIN_SHIFT + k) / 1e9;
}

double io_latency_quantile(const uint64_t *buckets, double q)
{
	uint64_t total = 0, seen = 0;
	double lo, hi, rank;

	for (int k = 0; k < IO_LAT_BUCKETS; k++)
		total += buckets[k];
	if (!total)
		return 0;
	rank = q * total;
	for (int k = 0; k < IO_LAT_BUCKETS; k++) {
		if (seen + buckets[k] >= rank && buckets[k]) {
			if (k == IO_LAT_BUCKETS - 1)
				return io_latency_bound(k - 1); /* above the last bound */
			/* linear within the bucket, as Prometheus' histogram_quantile does */
			lo = k ? io_latency_bound(k - 1) : 0;
			hi = io_latency_bound(k);
			return lo + (hi - lo) * (rank - seen) / buckets[k];
		}
		seen += buckets[k];
	}
	return io_latency_bound(IO_LAT_BUCKETS - 2);
}

/* Join the start directory's names (innermost first) into a path below its mount. */
static void start_dir_path(const struct io_path_event *e, char *out, size_t len)
{
	size_t n = 0;
	int depth = e->depth > IO_DENTRY_DEPTH ? IO_DENTRY_DEPTH : e->depth;

	out[0] = '\0';
	for (int i = depth - 1; i >= 0 && n < len; i--)
		n += snprintf(out + n, len - n, "/%.*s", IO_DENTRY_NAME, e->start_names[i]);
}

/*
 * The mount a path operation touched: the mount holding the parent of its last component,
 * found lexically (symlinks inside the path are not followed) in the caller's namespace.
 */
static uint32_t place_path_event(struct io_state *s, const struct io_path_event *e)
{
	char joined[PATH_MAX * 2], canon[PATH_MAX], below[PATH_MAX];
	const struct mount_table *t = mount_cache_namespace(s->mounts, e->mntns_inum);
	const struct mount_entry *start, *m;
	char *slash;

	if (!t || e->depth > IO_DENTRY_DEPTH)
		goto unresolved;
	if (e->path[0] == '/') {
		snprintf(joined, sizeof(joined), "%.*s", IO_PATH_MAX, e->path);
	} else {
		start = mount_table_find(t, e->start_mnt_id);
		if (!start)
			goto unresolved;
		start_dir_path(e, below, sizeof(below));
		snprintf(joined, sizeof(joined), "%s%s/%.*s", start->mount_point, below,
			 IO_PATH_MAX, e->path);
	}
	if (path_canonicalize(joined, canon, sizeof(canon)))
		goto unresolved;
	slash = strrchr(canon, '/');
	if (slash && slash != canon)
		*slash = '\0'; /* the parent directory */
	else
		canon[1] = '\0';
	m = mount_table_longest_prefix(t, canon);
	if (!m)
		goto unresolved;
	return m->mnt_id;

unresolved:
	s->unresolved_paths++;
	return e->start_mnt_id;
}

static int handle_path_event(void *ctx, void *data, size_t size)
{
	struct io_state *s = ctx;
	const struct io_path_event *e = data;
	struct io_key key = { .cgroup_id = e->cgroup_id };
	struct io_entry *entry;

	if (size < offsetof(struct io_path_event, start_names) || e->op >= IO_OPS ||
	    size < offsetof(struct io_path_event, start_names) +
			    (e->depth < IO_DENTRY_DEPTH ? e->depth : IO_DENTRY_DEPTH) *
				    IO_DENTRY_NAME)
		return 0;
	key.mnt_id = place_path_event(s, e);
	entry = entry_get(s, &key);
	if (!entry) {
		s->entries_full++;
		return 0;
	}
	if (e->ret < 0)
		entry->user.op_errors[e->op]++;
	else
		entry->user.ops[e->op]++;
	return 0;
}

static void stats_add(struct io_stats *dst, const struct io_stats *src)
{
	const uint64_t *a = (const uint64_t *)src;
	uint64_t *d = (uint64_t *)dst;

	for (size_t i = 0; i < sizeof(*dst) / sizeof(uint64_t); i++)
		d[i] += a[i];
}

static int read_entry(void *ctx, const void *key, const void *value)
{
	struct io_state *s = ctx;
	uint32_t slot = *(const uint32_t *)value;
	struct io_entry *e;

	s->in_map++;
	e = entry_get(s, key);
	if (!e) {
		s->entries_full++; /* counted again at each read while it lasts */
		return 0;
	}
	e->slot = slot;
	e->in_map = true;
	if (slot >= s->capacity)
		return 0;
	s->by_slot[slot] = e;
	if (slot >= s->slots_used)
		s->slots_used = slot + 1;
	return 0;
}

/*
 * Which key has which slot: a walk of io_slots, only when it may have changed (BPF counts the
 * keys it adds in io_keys_added; the agent alone removes keys), or IO_SLOTS_WALK_MS after the
 * last. The count is taken before the walk: a key added meanwhile makes the next read walk.
 */
static void walk_slots(struct io_state *s, uint64_t now_ms)
{
	uint64_t added = __atomic_load_n(&s->skel->bss->io_keys_added, __ATOMIC_ACQUIRE);

	if (!s->walk && added == s->walked_added && now_ms - s->walked_ms < IO_SLOTS_WALK_MS)
		return;
	memset(s->by_slot, 0, s->slots_used * sizeof(*s->by_slot));
	s->in_map = 0;
	s->slots_used = 0;
	if (map_read_all(s->skel->maps.io_slots, read_entry, s) < 0)
		return; /* s->walk stays: again at the next read */
	s->walk = false;
	s->walked_added = added;
	s->walked_ms = now_ms;
}

/*
 * Copy the BPF counts into the entries, summing the CPUs: the array up to the highest slot a
 * key has, in batches (io_free hands out the lowest slots first). A batch that cannot be read
 * leaves its entries with the last read's counts. Only for a snapshot (a scrape, a view):
 * nothing else reads the counts, and the array is large (808 bytes a slot per possible CPU:
 * 6.6 MB at 4,096 keys on 2 CPUs, 212 MB on 64), so the tick does not read it.
 */
static void read_stats(struct io_state *s)
{
	int fd = bpf_map__fd(s->skel->maps.io_stats);
	uint32_t next = 0, batch = 0;

	while (next < s->slots_used) {
		__u32 count = s->slots_used - next;

		if (count > s->batch_slots)
			count = s->batch_slots;
		/* in_batch is the last index read (NULL: from the start), out_batch the new last */
		if (bpf_map_lookup_batch(fd, next ? &batch : NULL, &batch, s->batch_keys,
					 s->batch_values, &count, NULL) &&
		    errno != ENOENT)
			return;
		for (uint32_t i = 0; i < count; i++) {
			struct io_entry *e = s->batch_keys[i] < s->capacity ?
						     s->by_slot[s->batch_keys[i]] :
						     NULL;

			if (!e)
				continue;
			memset(&e->kernel, 0, sizeof(e->kernel));
			for (int cpu = 0; cpu < s->ncpus; cpu++)
				stats_add(&e->kernel, &s->batch_values[i * s->ncpus + cpu]);
		}
		if (!count)
			return;
		next = s->batch_keys[count - 1] + 1;
	}
}

static void resolve_entry(struct io_state *s, struct io_entry *e)
{
	const struct mount_entry *m;
	const char *path;

	if (!e->cgroup[0]) {
		path = cgroup_cache_resolve(s->cgroups, e->key.cgroup_id, IO_RESOLVE_RESCAN_MS);
		if (path)
			snprintf(e->cgroup, sizeof(e->cgroup), "%s", path);
	}
	if (!e->mount[0]) {
		if (e->key.mnt_id == 0) {
			/* a call on an fd that was not open (EBADF): no file, no mount */
			snprintf(e->mount, sizeof(e->mount), "none");
			snprintf(e->fstype, sizeof(e->fstype), "none");
		} else if ((m = mount_cache_lookup(s->mounts, e->key.mnt_id))) {
			snprintf(e->mount, sizeof(e->mount), "%s", m->mount_point);
			snprintf(e->fstype, sizeof(e->fstype), "%s", m->fstype);
		}
	}
}

/*
 * A removed key's slot, zeroed, for the next new key (bpf/io.bpf.c, io_slots). Nothing counts
 * into it meanwhile: its cgroup is gone and its id is never used again. A slot that cannot be
 * zeroed is not given back (a smaller capacity, never a wrong count).
 */
static void slot_give_back(struct io_state *s, uint32_t slot)
{
	memset(s->percpu, 0, s->ncpus * sizeof(*s->percpu));
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.io_stats), &slot, s->percpu, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(s->skel->maps.io_free), NULL, &slot, BPF_ANY))
		s->slots_kept++;
}

/* Remove a cgroup's entries grace_s after the cgroup itself is gone. */
static int expire_entry(struct io_state *s, struct io_entry *e, int cgroup_exists, uint64_t now_ms)
{
	if (cgroup_exists) {
		e->gone_since_ms = 0;
		return 0;
	}
	if (!grace_over(&e->gone_since_ms, now_ms, s->grace_s))
		return 0;
	if (e->in_map && !bpf_map_delete_elem(bpf_map__fd(s->skel->maps.io_slots), &e->key))
		slot_give_back(s, e->slot);
	/* the entry is freed: no read may find it by its slot, and the next one walks again */
	if (e->in_map && e->slot < s->capacity)
		s->by_slot[e->slot] = NULL;
	s->walk = true;
	return 1;
}

struct walk_ctx {
	struct io_state *s;
	struct io_entry **list;
	size_t n;
};

static void collect_entry(const void *node, VISIT which, void *arg)
{
	struct walk_ctx *w = arg;

	if (which == postorder || which == leaf)
		w->list[w->n++] = *(struct io_entry *const *)node;
}

/* A flat list of the entries (the tree cannot change while it is walked). */
static struct io_entry **entry_list(struct io_state *s, size_t *n)
{
	struct walk_ctx w = { .s = s };

	w.list = calloc(s->nentries ? s->nentries : 1, sizeof(*w.list));
	if (!w.list)
		return NULL;
	twalk_r(s->entries, collect_entry, &w);
	*n = w.n;
	return w.list;
}

/*
 * io_uring path operations submitted more than URING_PATH_STALE_S ago and still in
 * uring_paths: their completion was not posted (IOSQE_CQE_SKIP_SUCCESS, a ring torn down
 * first) or not traced (an overflowed one), or they still wait (an open of a FIFO nobody
 * writes to): dropped, counted as uring_path_stale, so that the table does not fill with
 * them. Counts what is left. Tests only: PLUMB_TEST_URING_STALE_S sets another age.
 */
#define URING_PATH_STALE_S 300
static void uring_paths_prune(struct io_state *s)
{
	int fd = bpf_map__fd(s->skel->maps.uring_paths);
	uint64_t key, next, now = monotonic_ns(), n = 0;
	struct uring_path p;
	bool more;

	/*
	 * The next key is taken before this one may be deleted: a hash walk from a key no longer
	 * there starts again from the first. One that completed meanwhile does that too, so the
	 * walk is bounded; the count is the entries seen, as of this walk.
	 */
	more = !bpf_map_get_next_key(fd, NULL, &key);
	for (int i = 0; more && i < 2 * URING_PATHS_MAX; i++) {
		more = !bpf_map_get_next_key(fd, &key, &next);
		if (!bpf_map_lookup_elem(fd, &key, &p)) {
			if (now > p.submitted_ns && now - p.submitted_ns > s->uring_stale_ns &&
			    !bpf_map_delete_elem(fd, &key))
				s->uring_paths_stale++;
			else
				n++;
		}
		key = next;
	}
	s->uring_paths = n < URING_PATHS_MAX ? n : URING_PATHS_MAX;
}

static int io_tick(struct plumb_module *m)
{
	struct io_state *s = m->priv;
	struct io_entry **list;
	uint64_t now = monotonic_ms(), last_id = 0;
	int check = now - s->last_expiry_ms >= IO_EXPIRY_CHECK_MS, exists = 1;
	size_t n;
	char err[160];

	if (s->windows && attach_window_run(s->windows, err, sizeof(err)) && !s->window_warned) {
		pr_warn("io: %s (no latency until it starts; tried again each tick)\n", err);
		s->window_warned = true;
	}
	/* path events wait in the ring buffer while a new mount is not in the tables yet */
	if (mount_cache_fresh(s->mounts))
		ring_buffer__consume(s->events);
	/* new keys are named while their cgroup is there; their counts are read at snapshots */
	walk_slots(s, now);
	list = entry_list(s, &n);
	if (!list)
		return -ENOMEM;
	if (check) {
		s->last_expiry_ms = now;
		uring_paths_prune(s);
	}
	for (size_t i = 0; i < n; i++) {
		resolve_entry(s, list[i]);
		if (!check)
			continue;
		/* the list is sorted by cgroup id: one stat per cgroup, not per (cgroup, mount) */
		if (i == 0 || list[i]->key.cgroup_id != last_id)
			exists = cgroup_cache_exists(s->cgroups, list[i]->key.cgroup_id);
		last_id = list[i]->key.cgroup_id;
		/*
		 * A cgroup not named yet is not in the cache, which calls it gone: its grace
		 * would start before it was removed (seen: a cgroup removed 0.5 s after its first
		 * I/O went 2.5 s later). Unnamed, it counts as there while it is held back.
		 */
		if (!list[i]->cgroup[0] && now - list[i]->first_seen_ms < IO_UNRESOLVED_HOLD_MS) {
			list[i]->gone_since_ms = 0;
			continue;
		}
		if (expire_entry(s, list[i], exists, now)) {
			tdelete(list[i], &s->entries, key_cmp);
			free(list[i]);
			s->nentries--;
		}
	}
	free(list);
	return 0;
}

static int row_cmp(const void *a, const void *b)
{
	const struct io_row *x = a, *y = b;
	int c = strcmp(x->cgroup, y->cgroup);

	if (c)
		return c;
	c = strcmp(x->mount, y->mount);
	return c ? c : strcmp(x->fstype, y->fstype);
}

static void row_add(struct io_row *r, const struct io_stats *st)
{
	for (int d = 0; d < IO_DIRS; d++) {
		r->bytes[d] += st->bytes[d];
		r->calls[d] += st->calls[d];
		r->errors[d] += st->errors[d];
	}
	for (int d = 0; d < IO_LAT_KINDS; d++) {
		r->lat_sum_ns[d] += st->lat_sum_ns[d];
		for (int k = 0; k < IO_LAT_BUCKETS; k++)
			r->lat[d][k] += st->lat[d][k];
	}
	for (int o = 0; o < IO_OPS; o++) {
		r->ops[o] += st->ops[o];
		r->op_errors[o] += st->op_errors[o];
	}
}

static void entry_names(const struct io_entry *e, struct io_row *r)
{
	if (e->cgroup[0])
		snprintf(r->cgroup, sizeof(r->cgroup), "%s", e->cgroup);
	else
		snprintf(r->cgroup, sizeof(r->cgroup), "unknown:%llu",
			 (unsigned long long)e->key.cgroup_id);
	if (e->mount[0]) {
		snprintf(r->mount, sizeof(r->mount), "%s", e->mount);
		snprintf(r->fstype, sizeof(r->fstype), "%s", e->fstype);
	} else {
		snprintf(r->mount, sizeof(r->mount), "unknown:%u", e->key.mnt_id);
		snprintf(r->fstype, sizeof(r->fstype), "unknown");
	}
}

static void row_merge(struct io_row *dst, const struct io_row *src)
{
	size_t first = offsetof(struct io_row, bytes) / sizeof(uint64_t);
	const uint64_t *a = (const uint64_t *)src;
	uint64_t *d = (uint64_t *)dst;

	for (size_t i = first; i < sizeof(*dst) / sizeof(uint64_t); i++)
		d[i] += a[i];
}

int io_snapshot(struct plumb_module *m, struct io_row **rows, size_t *nrows)
{
	struct io_state *s = m->priv;
	struct io_entry **list;
	struct io_row *out;
	uint64_t now;
	size_t n, nout = 0, i, j, k = 0;

	/* the maps-only collect at exit writes the state the collect before it wrote */
	if (!m->maps_only) {
		io_tick(m);
		read_stats(s);
	}
	list = entry_list(s, &n);
	if (!list)
		return -ENOMEM;
	out = calloc(n ? n : 1, sizeof(*out));
	if (!out) {
		free(list);
		return -ENOMEM;
	}
	now = monotonic_ms();
	for (i = 0; i < n; i++) {
		if ((!list[i]->cgroup[0] || !list[i]->mount[0]) &&
		    now - list[i]->first_seen_ms < IO_UNRESOLVED_HOLD_MS)
			continue;
		entry_names(list[i], &out[nout]);
		row_add(&out[nout], &list[i]->kernel);
		if (!m->maps_only)
			row_add(&out[nout], &list[i]->user);
		nout++;
	}
	free(list);
	/* sort by names, then sum rows whose names are equal */
	qsort(out, nout, sizeof(*out), row_cmp);
	for (i = 0; i < nout; i = j) {
		if (k != i)
			out[k] = out[i];
		for (j = i + 1; j < nout && !row_cmp(&out[k], &out[j]); j++)
			row_merge(&out[k], &out[j]);
		workload_from_cgroup(out[k].cgroup, out[k].workload, sizeof(out[k].workload));
		k++;
	}
	*rows = out;
	*nrows = k;
	return 0;
}

static void row_labels(const struct io_row *r, struct prom_label *l)
{
	l[0] = (struct prom_label){ "cgroup", r->cgroup };
	l[1] = (struct prom_label){ "workload", r->workload };
	l[2] = (struct prom_label){ "mount", r->mount };
	l[3] = (struct prom_label){ "fstype", r->fstype };
}

static void emit_dir_counter(struct prom_writer *w, const struct io_row *rows, size_t n,
			     const char *what, const char *help, size_t offset)
{
	char name[64], full_help[160];
	struct prom_label l[4];

	for (int d = 0; d < IO_DIRS; d++) {
		snprintf(name, sizeof(name), "plumb_io_%s_%s_total", io_dir_names[d], what);
		snprintf(full_help, sizeof(full_help), help, io_dir_names[d]);
		prom_family(w, name, PROM_COUNTER, full_help);
		for (size_t i = 0; i < n; i++) {
			const uint64_t *v = (const void *)((const char *)&rows[i] + offset);

			row_labels(&rows[i], l);
			prom_sample(w, l, 4, (double)v[d]);
		}
	}
}

static uint64_t latency_count(const uint64_t *buckets)
{
	uint64_t n = 0;

	for (int k = 0; k < IO_LAT_BUCKETS; k++)
		n += buckets[k];
	return n;
}

/* A count of stamps out, a global the BPF programs change atomically. */
static void emit_stamps(struct prom_writer *w, const char *name, const char *help,
			const __u64 *count)
{
	prom_family(w, name, PROM_GAUGE, help);
	prom_sample(w, NULL, 0, (double)__atomic_load_n(count, __ATOMIC_RELAXED));
}

static int io_collect(struct plumb_module *m, struct prom_writer *w)
{
	struct io_state *s = m->priv;
	double bounds[IO_LAT_BUCKETS - 1];
	struct prom_label l[5];
	struct io_row *rows;
	uint64_t counts[IO_LAT_BUCKETS];
	size_t n;
	int err;

	err = io_snapshot(m, &rows, &n);
	if (err)
		return err;

	emit_dir_counter(w, rows, n, "bytes", "Bytes transferred by %s-family syscalls.",
			 offsetof(struct io_row, bytes));
	emit_dir_counter(w, rows, n, "calls",
			 "Completed %s-family syscalls on regular files and block devices.",
			 offsetof(struct io_row, calls));
	emit_dir_counter(w, rows, n, "errors", "%s-family syscalls that returned an error.",
			 offsetof(struct io_row, errors));

	prom_family(w, "plumb_io_ops_total", PROM_COUNTER,
		    "File-system operations that succeeded, by op.");
	for (size_t i = 0; i < n; i++)
		for (int o = 0; o < IO_OPS; o++) {
			row_labels(&rows[i], l);
			l[4] = (struct prom_label){ "op", io_op_names[o] };
			prom_sample(w, l, 5, (double)rows[i].ops[o]);
		}
	prom_family(w, "plumb_io_op_errors_total", PROM_COUNTER,
		    "File-system operations that returned an error, by op.");
	for (size_t i = 0; i < n; i++)
		for (int o = 0; o < IO_OPS; o++) {
			row_labels(&rows[i], l);
			l[4] = (struct prom_label){ "op", io_op_names[o] };
			prom_sample(w, l, 5, (double)rows[i].op_errors[o]);
		}

	if (s->skel->rodata->latency_enabled) {
		struct attach_window_stats ws;

		prom_family(w, "plumb_io_latency_sample_period", PROM_GAUGE,
			    "plumb_io_latency_seconds times calls during 1/N of the time (in "
			    "windows) or, when the kernel makes the agent keep enter programs "
			    "attached, a random one in N calls.");
		prom_sample(w, NULL, 0,
			    s->windows ? (double)(s->period_ns / s->window_ns) :
					 s->skel->rodata->latency_sample_period);
		if (s->windows) {
			attach_window_stats(s->windows, &ws);
			prom_family(w, "plumb_io_latency_windows_total", PROM_COUNTER,
				    "Latency windows: spans in which every read, write and fsync "
				    "call was timed.");
			prom_sample(w, NULL, 0, (double)ws.windows);
			prom_family(w, "plumb_io_latency_windows_failed_total", PROM_COUNTER,
				    "Latency windows that could not attach their programs (not "
				    "timed).");
			prom_sample(w, NULL, 0, (double)ws.failed);
			prom_family(w, "plumb_io_latency_window_seconds_total", PROM_COUNTER,
				    "Time the latency windows' enter program was attached (one for "
				    "every read, write and fsync syscall): the calls that entered "
				    "then are the ones timed.");
			prom_sample(w, NULL, 0, ws.attached_ns[0] / 1e9);
			emit_stamps(w, "plumb_io_latency_stamps",
				    "Timed read and write calls not returned yet: stamps the "
				    "latency windows' enter program set that no exit has cleared. "
				    "0 between windows; while above 0 every counted read and "
				    "write exit looks up its stamp (slower, not wrong).",
				    &s->skel->bss->io_stamps);
			emit_stamps(w, "plumb_io_latency_fsync_stamps",
				    "Timed fsync and fdatasync calls not returned yet (a slow "
				    "disk's can last seconds); while above 0 every fsync exit "
				    "looks up its stamp.",
				    &s->skel->bss->io_fsync_stamps);
		}
		for (int k = 0; k < IO_LAT_BUCKETS - 1; k++)
			bounds[k] = io_latency_bound(k);
		prom_family(w, "plumb_io_latency_seconds", PROM_HISTOGRAM,
			    "Latency of read- and write-family syscalls and of fsync and "
			    "fdatasync (op fsync), entry to exit, of a sample of calls (see "
			    "plumb_io_latency_sample_period).");
		for (size_t i = 0; i < n; i++)
			for (int d = 0; d < IO_LAT_KINDS; d++) {
				/*
				 * A (row, op) without a timed call has no histogram yet: 28 series
				 * of zeros each, most of a churning host's output (a cgroup that
				 * wrote a few times, or only wrote, or only read)
				 */
				if (!latency_count(rows[i].lat[d]))
					continue;
				row_labels(&rows[i], l);
				l[4] = (struct prom_label){ "op", io_lat_names[d] };
				memcpy(counts, rows[i].lat[d], sizeof(counts));
				prom_histogram(w, l, 5, bounds, counts, IO_LAT_BUCKETS - 1,
					       rows[i].lat_sum_ns[d] / 1e9);
			}
	}
	free(rows);
	return w->err;
}

static void io_health(struct plumb_module *m, struct module_health *h)
{
	struct io_state *s = m->priv;
	static const char *const reasons[IO_LOST_REASONS] = {
		"stats_map_full",  "ringbuf_full",     "args_unknown",	"aio_unreadable",
		"aio_fd_closed",   "uring_no_file",    "aio_batch_cap", "uring_overflow",
		"uring_path_full", "uring_path_stale",
	};
	uint64_t lost[IO_LOST_REASONS];
	struct cgroup_cache_stats cg;
	struct mount_cache_stats mnt;

	percpu_counters_sum(bpf_map__fd(s->skel->maps.io_lost), IO_LOST_REASONS, lost);

	h->nmaps = 0;
	h->maps[h->nmaps].name = "io_stats";
	h->maps[h->nmaps].entries = s->in_map;
	h->maps[h->nmaps++].capacity = s->capacity;
	h->maps[h->nmaps].name = "entries";
	h->maps[h->nmaps].entries = s->nentries;
	h->maps[h->nmaps++].capacity = 2 * (uint64_t)s->capacity;
	h->nlost = 0;
	/* stale entries: replaced in the kernel, or dropped here after URING_PATH_STALE_S */
	lost[IO_LOST_URING_PATH_STALE] += m->maps_only ? 0 : s->uring_paths_stale;
	for (int r = 0; r < IO_LOST_REASONS; r++) {
		h->lost[h->nlost].reason = reasons[r];
		h->lost[h->nlost++].count = lost[r];
	}
	h->maps[h->nmaps].name = "uring_paths";
	h->maps[h->nmaps].entries = s->uring_paths;
	h->maps[h->nmaps++].capacity = URING_PATHS_MAX;
	h->lost[h->nlost].reason = "path_unresolved";
	h->lost[h->nlost++].count = m->maps_only ? 0 : s->unresolved_paths;
	h->lost[h->nlost].reason = "entries_full";
	h->lost[h->nlost++].count = m->maps_only ? 0 : s->entries_full;
	/* capacity, not events: gone keys' slots that could not be zeroed, so not reused */
	h->lost[h->nlost].reason = "slot_kept";
	h->lost[h->nlost++].count = m->maps_only ? 0 : s->slots_kept;

	cgroup_cache_stats(s->cgroups, &cg);
	mount_cache_stats(s->mounts, &mnt);
	h->maps[h->nmaps].name = "cgroup_cache";
	h->maps[h->nmaps].entries = cg.entries;
	h->maps[h->nmaps++].capacity = cg.capacity;
	h->maps[h->nmaps].name = "mount_namespaces";
	h->maps[h->nmaps].entries = mnt.namespaces;
	h->maps[h->nmaps++].capacity = mnt.capacity;
	/* cgroups left out of the cache when the tree had more than its capacity (per rescan) */
	h->lost[h->nlost].reason = "cgroup_cache_full";
	h->lost[h->nlost++].count = m->maps_only ? 0 : cg.evictions;
	h->lost[h->nlost].reason = "mount_namespaces_full";
	h->lost[h->nlost++].count = m->maps_only ? 0 : mnt.namespaces_dropped;
	h->obj = s->skel->obj;
}

static void free_entry(void *p)
{
	free(p);
}

static void io_unload(struct plumb_module *m)
{
	struct io_state *s = m->priv;

	if (!s)
		return;
	ring_buffer__free(s->events);
	attach_window_stop(s->windows);
	/* the skeleton's links are one bpf_link pointer per program, in a struct */
	if (s->skel)
		links_destroy_parallel((struct bpf_link **)&s->skel->links,
				       sizeof(s->skel->links) / sizeof(struct bpf_link *));
	io_bpf__destroy(s->skel);
	cgroup_cache_free(s->cgroups);
	mount_cache_free(s->mounts);
	tdestroy(s->entries, free_entry);
	free(s->percpu);
	free(s->by_slot);
	free(s->batch_keys);
	free(s->batch_values);
	free(s);
	m->priv = NULL;
}

/* Syscalls every kernel with syscall tracepoints has: without one of them io cannot count. */
static const char *const io_core_syscalls[] = { "read",	  "write",  "pread64", "pwrite64", "readv",
						"writev", "openat", "mkdirat", "unlinkat" };

static bool io_core_syscall(const char *name)
{
	for (size_t i = 0; i < sizeof(io_core_syscalls) / sizeof(io_core_syscalls[0]); i++)
		if (!strcmp(name, io_core_syscalls[i]))
			return true;
	return false;
}

/*
 * The syscalls whose calls are timed, as bpf/io.bpf.c's timed_syscall() lists them: the read
 * and write families, fsync and fdatasync.
 */
static bool io_timed_syscall(const char *name)
{
	static const char *const timed[] = { "read",	"readv",    "pread64", "preadv",
					     "preadv2", "write",    "writev",  "pwrite64",
					     "pwritev", "pwritev2", "fsync",   "fdatasync" };

	for (size_t i = 0; i < sizeof(timed) / sizeof(timed[0]); i++)
		if (!strcmp(name, timed[i]))
			return true;
	return false;
}

/*
 * Chooses, from what the kernel offers, how io runs: where syscall arguments come from, whether
 * latency can be timed, and which of its programs to load. Records every choice in m->attach
 * and m->choice; on a kernel that cannot run io, says why in m->error and returns -EOPNOTSUPP.
 */
static int io_choose(struct plumb_module *m, struct io_state *s, const struct plumb_config *cfg)
{
	static const enum kernel_feature required[] = { FEAT_SYSCALL_TRACEPOINTS, FEAT_RINGBUF,
							FEAT_CURRENT_TASK_BTF };
	const char *test_tp = getenv("PLUMB_TEST_REQUIRE_TRACEPOINT");
	bool args_at_enter = false, latency = cfg->io_latency, windows, uring;
	unsigned int nexit = 0, nenter = 0, nabsent = 0, ncompletion = 0, nsubmit = 0;
	const char *why_latency = "";
	struct bpf_program *prog;

	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (!kernel_has(required[i])) {
			snprintf(m->error, sizeof(m->error), "needs %s, which this kernel lacks",
				 kernel_feature_name(required[i]));
			return -EOPNOTSUPP;
		}
	if (!kernel_has(FEAT_TASK_PT_REGS)) {
		if (!kernel_has(FEAT_TASK_STORAGE)) {
			snprintf(m->error, sizeof(m->error),
				 "needs task_pt_regs or task_storage, this kernel has neither");
			return -EOPNOTSUPP;
		}
		args_at_enter = true;
	}
	if (latency && !kernel_has(FEAT_TASK_STORAGE)) {
		latency = false;
		why_latency = " (unsupported: no task_storage)";
	}
	/*
	 * with args_at_enter every enter program runs on every call anyway: sampled per call;
	 * and so without tp_btf, which the windows' one enter program is (bpf/io.bpf.c)
	 */
	windows =
		latency && !args_at_enter && cfg->io_latency_sample > 1 && kernel_has(FEAT_TP_BTF);
	/*
	 * io_uring: its completion tracepoint passing the request as argument 1 (6.1 has it; 5.15
	 * had user_data there), the request holding its result in cqe
	 */
	uring = kernel_has(FEAT_TP_BTF) && tracepoint_btf_arg_is_ptr("io_uring_complete", 1) &&
		btf_struct_has("io_kiocb", "cqe") && btf_struct_has("io_kiocb", "cmd");
	/* test-only: a required tracepoint that no kernel has */
	if (test_tp && *test_tp) {
		char point[64];

		snprintf(point, sizeof(point), "syscalls/%s", test_tp);
		if (!tracepoint_exists("syscalls", test_tp)) {
			module_attach_note(m, point, NULL, "missing: required, not in tracefs");
			snprintf(m->error, sizeof(m->error), "tracepoint %s not found", point);
			return -EOPNOTSUPP;
		}
	}

	bpf_object__for_each_program (prog, s->skel->obj) {
		const char *name = bpf_program__name(prog), *sec = bpf_program__section_name(prog);
		bool enter = !strncmp(name, "enter_", 6);
		const char *syscall = strchr(name, '_') + 1, *point = strchr(sec, '/') + 1;
		char exit_tp[64];

		if (!strcmp(name, "uring_sub_req") || !strcmp(name, "uring_sub_sqe")) {
			/* the submissions' tracepoint: renamed in 6.2, the request first in both */
			if (!uring || tracepoint_btf_args(point) < 0) {
				bpf_program__set_autoload(prog, false);
				module_attach_note(m, sec, name,
						   uring ? "off: not this kernel's name for it" :
							   "off: no io_uring tracepoints here");
			} else {
				module_attach_note(m, sec, name,
						   "chosen: io_uring path operations' paths");
				nsubmit++;
			}
			continue;
		}
		if (!strcmp(name, "uring_complete") || !strcmp(name, "uring_overflow")) {
			/* the overflows' tracepoint has no request: only beside uring_complete */
			bool overflow = !strcmp(name, "uring_overflow");

			if (!uring || (overflow && tracepoint_btf_args(point) < 0)) {
				bpf_program__set_autoload(prog, false);
				module_attach_note(m, sec, name,
						   "off: no io_uring tracepoints here");
			} else {
				module_attach_note(
					m, sec, name, "chosen: %s",
					overflow ? "overflowed io_uring completions, as lost" :
						   "io_uring reads, writes, fsyncs");
				ncompletion++;
			}
			continue;
		}
		if (!strcmp(name, "enter_rw")) { /* the windows' program, on raw sys_enter */
			if (windows) {
				bpf_program__set_autoattach(prog, false);
				module_attach_note(m, sec, name, "chosen: in latency windows");
				nenter++;
			} else {
				bpf_program__set_autoload(prog, false);
				module_attach_note(m, sec, name, "off: windows not used");
			}
			continue;
		}
		snprintf(exit_tp, sizeof(exit_tp), "sys_exit_%s", syscall);
		/* an enter program goes with its exit: no exit, nothing to count */
		if (!tracepoint_exists("syscalls", exit_tp) ||
		    !tracepoint_exists("syscalls", point + strlen("syscalls/"))) {
			if (io_core_syscall(syscall)) {
				module_attach_note(m, point, name,
						   "missing: required, not in tracefs");
				snprintf(m->error, sizeof(m->error),
					 "tracepoint syscalls/%s not found",
					 tracepoint_exists("syscalls", exit_tp) ?
						 point + strlen("syscalls/") :
						 exit_tp);
				return -EOPNOTSUPP;
			}
			/* every SYSCALL_DEFINE has its tracepoints: none means no such syscall
			 * on this kernel or architecture (arm64 has no open, mkdir, ...) */
			bpf_program__set_autoload(prog, false);
			module_attach_note(m, point, name,
					   "off: no such syscall here, nothing to count");
			nabsent += !enter;
			continue;
		}
		if (!strncmp(syscall, "io_", 3)) { /* AIO's completions: events at exit */
			if (args_at_enter || !kernel_has(FEAT_BPF_LOOP)) {
				bpf_program__set_autoload(prog, false);
				module_attach_note(m, point, name, "off: needs %s",
						   args_at_enter ? "task_pt_regs" : "bpf_loop");
			} else {
				module_attach_note(m, point, name, "chosen: AIO completions");
				ncompletion++;
			}
			continue;
		}
		if (enter && !args_at_enter && !(latency && io_timed_syscall(syscall))) {
			bpf_program__set_autoload(prog, false);
			module_attach_note(m, point, name, "off: %s",
					   io_timed_syscall(syscall) ?
						   "latency off" :
						   "not needed, arguments read at exit");
			continue;
		}
		if (enter && windows) {
			bpf_program__set_autoload(prog, false);
			module_attach_note(m, point, name, "off: timed by tp_btf/sys_enter");
			continue;
		}
		module_attach_note(m, point, name, "chosen");
		if (enter)
			nenter++;
		else
			nexit++;
	}
	if (!latency && !args_at_enter)
		bpf_map__set_autocreate(s->skel->maps.io_start, false);
	s->skel->rodata->args_at_enter = args_at_enter;
	s->skel->rodata->latency_enabled = latency;
	s->skel->rodata->latency_sample_period = windows ? 1 : cfg->io_latency_sample;
	s->skel->rodata->stamps_counted = windows;
	if (windows) {
		s->window_ns = IO_WINDOW_PERIOD_NS / cfg->io_latency_sample;
		if (s->window_ns < IO_WINDOW_MIN_NS)
			s->window_ns = IO_WINDOW_MIN_NS;
		s->period_ns = s->window_ns * cfg->io_latency_sample;
	}

	snprintf(m->choice, sizeof(m->choice),
		 "%u exit + %u enter tracepoints, %u for AIO/io_uring completions, %u for io_uring "
		 "submissions; arguments %s; ",
		 nexit, nenter, ncompletion, nsubmit,
		 args_at_enter ? "stored at enter (fallback: no task_pt_regs)" :
				 "read at exit (task_pt_regs)");
	if (windows)
		snprintf(m->choice + strlen(m->choice), sizeof(m->choice) - strlen(m->choice),
			 "latency of every call in a %.1f ms window of each %.2f s (1/%u of the "
			 "time)",
			 s->window_ns / 1e6, s->period_ns / 1e9, cfg->io_latency_sample);
	else if (latency)
		snprintf(m->choice + strlen(m->choice), sizeof(m->choice) - strlen(m->choice),
			 "latency on 1 in %u calls", cfg->io_latency_sample);
	else
		snprintf(m->choice + strlen(m->choice), sizeof(m->choice) - strlen(m->choice),
			 "latency off%s", why_latency);
	if (nabsent)
		snprintf(m->choice + strlen(m->choice), sizeof(m->choice) - strlen(m->choice),
			 "; %u syscalls absent", nabsent);
	return 0;
}

/*
 * The windows' enter program (enter_rw, on raw sys_enter), which io_choose() left
 * unattached; the windows start at the first tick (io_tick), after the agent has dropped its
 * capabilities, which a thread keeps from its start.
 */
static int io_windows_open(struct io_state *s, char *err, size_t errlen)
{
	int fd = bpf_program__fd(s->skel->progs.enter_rw);
	const char *point = NULL; /* a tp_btf program: no perf event */

	s->windows = attach_window_open(&fd, &point, &s->skel->bss->rw_window_gate, 1, s->window_ns,
					s->period_ns, err, errlen);
	return s->windows ? 0 : -EINVAL;
}

static int io_load(struct plumb_module *m, const struct plumb_config *cfg)
{
	struct io_state *s;
	size_t names;
	int err;

	m->nattach = 0;
	m->choice[0] = '\0';
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	m->priv = s;
	s->grace_s = cfg->cgroup_grace_s;
	s->capacity = cfg->io_capacity;
	s->uring_stale_ns = URING_PATH_STALE_S * 1000000000ull;
	if (getenv("PLUMB_TEST_URING_STALE_S"))
		s->uring_stale_ns =
			strtoull(getenv("PLUMB_TEST_URING_STALE_S"), NULL, 10) * 1000000000ull;
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0) {
		err = s->ncpus ? s->ncpus : -EINVAL;
		snprintf(m->error, sizeof(m->error), "cannot count CPUs");
		goto out_unload;
	}
	names = 4 * (size_t)s->capacity;
	s->cgroups =
		cgroup_cache_new(cfg->cgroup_root, names > IO_CGROUPS_MIN ? names : IO_CGROUPS_MIN);
	s->mounts = mount_cache_new(IO_MOUNT_NAMESPACES, IO_RESOLVE_RESCAN_MS);
	if (!s->cgroups || !s->mounts) {
		err = -ENOMEM;
		snprintf(m->error, sizeof(m->error), "out of memory");
		goto out_unload;
	}

	s->skel = io_bpf__open();
	if (!s->skel) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open BPF object: %s", strerror(-err));
		goto out_unload;
	}
	s->percpu = calloc(s->ncpus, sizeof(*s->percpu));
	s->by_slot = calloc(s->capacity, sizeof(*s->by_slot));
	s->walk = true;
	/* a batch of io_stats values within MAP_BATCH_BYTES */
	s->batch_slots = MAP_BATCH_BYTES / (s->ncpus * sizeof(struct io_stats) + sizeof(uint32_t));
	if (!s->batch_slots)
		s->batch_slots = 1;
	s->batch_keys = calloc(s->batch_slots, sizeof(*s->batch_keys));
	s->batch_values = calloc((size_t)s->batch_slots * s->ncpus, sizeof(*s->batch_values));
	if (!s->percpu || !s->by_slot || !s->batch_keys || !s->batch_values) {
		err = -ENOMEM;
		snprintf(m->error, sizeof(m->error), "out of memory");
		goto out_unload;
	}
	bpf_map__set_max_entries(s->skel->maps.io_stats, s->capacity);
	bpf_map__set_max_entries(s->skel->maps.io_slots, s->capacity);
	bpf_map__set_max_entries(s->skel->maps.io_free, s->capacity);
	err = io_choose(m, s, cfg);
	if (err)
		goto out_unload;
	err = adopt_maps(&s->adopt, cfg->pin, m->name, s->skel->skeleton, s->skel->maps.plumb_gate,
			 &s->skel->rodata->plumb_generation, m->error, sizeof(m->error));
	if (err)
		goto out_unload;

	err = io_bpf__load(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot load BPF programs: %s",
			 strerror(-err));
		goto out_unload;
	}
	/* every slot free, slot 0 on top (adopted maps keep the last agent's) */
	for (uint32_t slot = s->capacity; !s->adopt.adopted && slot-- > 0;) {
		if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.io_free), NULL, &slot, BPF_ANY)) {
			err = -errno;
			snprintf(m->error, sizeof(m->error), "cannot fill io_free: %s",
				 strerror(-err));
			goto out_unload;
		}
	}
	err = io_bpf__attach(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot attach to syscall tracepoints: %s",
			 strerror(-err));
		goto out_unload;
	}
	module_attach_settle(m, true);
	/* the programs count from here (with --pin: the old ones stop in the same write) */
	err = adopt_activate(&s->adopt, s->skel->maps.plumb_gate, m->error, sizeof(m->error));
	if (err)
		goto out_unload;
	m->adopted = s->adopt.adopted;
	if (s->period_ns) {
		err = io_windows_open(s, m->error, sizeof(m->error));
		if (err)
			goto out_unload;
	}
	s->events = ring_buffer__new(bpf_map__fd(s->skel->maps.io_path_events), handle_path_event,
				     s, NULL);
	if (!s->events) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open ring buffer: %s", strerror(-err));
		goto out_unload;
	}
	return 0;

out_unload:
	module_attach_settle(m, false);
	io_unload(m);
	return err;
}

static int io_hand_over(struct plumb_module *m)
{
	struct io_state *s = m->priv;

	return adopt_hand_over(&s->adopt, s->skel->skeleton);
}

struct plumb_module io_module = {
	.name = "io",
	.summary = "file I/O per workload and mount: bytes, calls, errors, latency, fs ops",
	.load = io_load,
	.tick = io_tick,
	.collect = io_collect,
	.health = io_health,
	.unload = io_unload,
	.hand_over = io_hand_over,
};
