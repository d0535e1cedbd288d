// SPDX-License-Identifier: GPL-2.0
/*
 * sched module, user space: loads bpf/sched.bpf.c, reads every thread's counts with its
 * iterator and the exiting threads' final counts from its ring buffer, and adds what each
 * thread did since it was last read to its cgroup. Exported per workload, never per thread.
 *
 * A thread's counts are cumulative in the kernel, so per cgroup this keeps the sum of the
 * differences between reads: a thread that moves to another cgroup takes its later time there,
 * and a cgroup's counters never go down. Time on a CPU and runnable time of threads that
 * existed before the agent count from the agent's first read; threads started since count
 * from their start (the kernel's counts begin at fork).
 *
 * The wait module shares this: one BPF object, one read. Its programs are the same (the
 * blocking switch-out also says what the thread waits on, when the wait module is requested),
 * so a context switch pays one program, not two. Whichever of the two modules loads first
 * loads the object; the other one uses it.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "hashtab.h"
#include "log.h"
#include "host.h"
#include "plumb.h"
#include "probe.h"
#include "export/prom.h"
#include "identity/cgroup.h"
#include "identity/sockets.h"
#include "identity/workload.h"
#include <json-c/json.h>

#include "plumb_sched.h"
#include "modules/sched_module.h"
#include "sched.skel.h"

/* Threads followed at once (each ~64 bytes here); more are counted as threads_full. */
#define SCHED_THREADS_MAX (1u << 18)
/* cgroups with counts (each ~600 bytes); a new one beyond it is counted as cgroups_full. */
#define SCHED_CGROUPS_MAX 16384
/* Every live thread is read at most this often by the ticks (and at every scrape). */
#define SCHED_READ_MS		1000
#define SCHED_RESOLVE_RESCAN_MS 250
#define SCHED_EXPIRY_CHECK_MS	1000
/* A cgroup still without a name this long after its first counts is treated as removed. */
#define SCHED_UNNAMED_MS 5000

/* the quantities of sched_module.h, by their metrics' names */
enum sched_metric {
	M_RUN = Q_RUN,
	M_RQ = Q_RQ,
	M_SLEEP = Q_SLEEP,
	M_BLOCK = Q_BLOCK,
	M_IOWAIT = Q_IOWAIT,
	M_STEAL = Q_STEAL,
	M_WAIT_NS = Q_WAIT_NS,
	M_WAIT_N = Q_WAIT_N,
	M_FUTEX_WAKES = Q_FUTEX_WAKES,
	SCHED_METRICS = SCHED_QUANTITIES,
};
#define SCHED_TIME_METRICS (M_STEAL + 1)

const char *const wait_kind_names[WAIT_KINDS] = { "pipe", "socket", "futex", "epoll", "poll" };

static const struct {
	const char *name, *help;
} sched_metrics[SCHED_METRICS] = {
	{ "plumb_sched_run_seconds_total", "Time the workload's threads ran on a CPU." },
	{ "plumb_sched_runqueue_seconds_total",
	  "Time the workload's threads were runnable, waiting for a CPU." },
	{ "plumb_sched_sleep_seconds_total",
	  "Time the workload's threads slept interruptibly (waiting for an event, a timer, a "
	  "lock; also stopped)." },
	{ "plumb_sched_block_seconds_total",
	  "Time the workload's threads were blocked uninterruptibly (plumb_sched_iowait_seconds"
	  "_total included)." },
	{ "plumb_sched_iowait_seconds_total",
	  "The part of plumb_sched_block_seconds_total spent waiting for I/O (io_schedule)." },
	{ "plumb_sched_steal_seconds_total",
	  "Time the workload's threads were on a CPU that the hypervisor gave to something else "
	  "(steal; not in plumb_sched_run_seconds_total)." },
};

struct sched_tid {
	struct hnode hnode; /* first: the hash table's link */
	uint32_t tid;
	uint32_t gen; /* the read that last saw it */
	uint64_t start_ns;
	uint64_t last[SCHED_METRICS]; /* its counts at the last read */
	uint64_t read_ns; /* and the instant they are as of (struct sched_record) */
	uint32_t pid, ppid;
	uint64_t cgroup_id;
	char comm[16];
	struct wait_key slot; /* the wait module: its resource not yet in wait_bri */
	struct wait_val slot_val;
};

struct sched_cgroup {
	uint64_t id;
	uint64_t ns[SCHED_METRICS];
	char path[256]; /* "" until resolved */
	uint64_t gone_since_ms;
	uint64_t first_seen_ms;
	uint32_t read_gen, read_n; /* its live threads in the read read_gen, */
	double read_mean; /* and the mean of their read_ns */
};

struct sched_state {
	struct sched_bpf *skel;
	struct ring_buffer *exits;
	struct cgroup_cache *cgroups;
	struct hashtab tids;
	size_t ntids;
	void *cgroup_tree; /* tsearch tree of struct sched_cgroup */
	size_t ncgroups;
	uint64_t attach_ns; /* CLOCK_MONOTONIC when the programs were attached */
	uint32_t gen;
	uint64_t last_read_ms, last_expiry_ms;
	unsigned int grace_s;
	bool run_delay; /* the kernel keeps sched_info (CONFIG_SCHED_INFO) */
	bool steal; /* the kernel keeps steal out of CPU time (FEAT_STEAL), so it is measured */
	bool wait_on; /* the programs classify waits (the wait module was requested) */
	bool remainder; /* sleep is the rest of a thread's time (sleep_remainder, bpf) */
	uint64_t tids_full, cgroups_full, exit_missed;
	uint64_t unnamed; /* cgroups dropped without a name: their time was in no series */
	int ncpus;
	int users; /* the modules using it: sched, wait */
	struct plumb_module *owner; /* the one that loaded it: its health carries the programs */
	uint64_t last_prune_ms;
	size_t nbri; /* entries in wait_bri at the last prune */
	uint64_t bri_inserted; /* the programs' count of entries made, at the last prune */
	size_t bri_capacity; /* wait_bri's max_entries (--wait-capacity) */
	uint64_t bri_evicted; /* live threads' entries removed to keep wait_bri below 3/4 */
	struct adopt adopt; /* --pin: the maps and links over a restart */
	int baselines_fd; /* --pin: DIR/sched_baselines, or -1 */
};

/*
 * --pin: what user space hands to the next agent beside the maps, in DIR/sched_baselines:
 * each followed thread's counts at the last read (so the next agent adds only what came
 * after), and under BASELINE_META the attach time the threads' first counts date from.
 */
struct sched_baseline {
	uint64_t start_ns;
	uint64_t last[SCHED_METRICS];
};

#define BASELINE_META 0xffffffffu

/* The one instance the sched and wait modules share. */
static struct sched_state *sched_shared;

static int cgroup_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct sched_cgroup *)a)->id, y = ((const struct sched_cgroup *)b)->id;

	return x < y ? -1 : x > y;
}

static struct sched_cgroup *cgroup_get(struct sched_state *s, uint64_t id)
{
	struct sched_cgroup probe = { .id = id }, *c, **found;

	found = tfind(&probe, &s->cgroup_tree, cgroup_cmp);
	if (found)
		return *found;
	if (s->ncgroups >= SCHED_CGROUPS_MAX) {
		s->cgroups_full++;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = id;
	c->first_seen_ms = monotonic_ms();
	if (!tsearch(c, &s->cgroup_tree, cgroup_cmp)) {
		free(c);
		return NULL;
	}
	s->ncgroups++;
	return c;
}

static struct sched_tid *tid_find(struct sched_state *s, uint32_t tid)
{
	return (struct sched_tid *)hashtab_find(&s->tids, hash_bytes(&tid, sizeof(tid)), &tid,
						offsetof(struct sched_tid, tid), sizeof(tid));
}

static void tid_drop(struct sched_state *s, struct sched_tid *t)
{
	hashtab_remove(&s->tids, &t->hnode);
	free(t);
	s->ntids--;
}

static void record_values(const struct sched_record *r, uint64_t v[SCHED_METRICS])
{
	v[M_RUN] = r->run_ns;
	v[M_RQ] = r->rq_ns;
	v[M_SLEEP] = r->off_ns[SCHED_SLEEP];
	v[M_BLOCK] = r->off_ns[SCHED_BLOCK];
	v[M_IOWAIT] = r->off_ns[SCHED_IOWAIT];
	v[M_STEAL] = r->steal_ns;
	for (int k = 0; k < WAIT_KINDS; k++) {
		v[M_WAIT_NS + k] = r->wait_ns[k];
		v[M_WAIT_N + k] = r->wait_n[k];
	}
	v[M_FUTEX_WAKES] = r->futex_wakes;
}

/*
 * Adds what the thread did since its last read to its cgroup now. A thread seen for the first
 * time counts from the attach (its off-CPU counts begin there) or, for its CPU and runnable
 * time, from its start when it started after the attach.
 */
static void record_apply(struct sched_state *s, const struct sched_record *r)
{
	uint64_t v[SCHED_METRICS], base[SCHED_METRICS] = { 0 };
	struct sched_tid *t = tid_find(s, r->tid);
	struct sched_cgroup *c;

	if (r->kind == SCHED_REC_EXITING) {
		/*
		 * Its exit record is yet to come: dropped now as unseen, the thread would be new
		 * to it and counted again from its start (a 6.1 guest's writer, whose python took
		 * long to unmap, came out at twice its CPU time).
		 */
		if (t && t->start_ns == r->start_ns)
			t->gen = s->gen;
		return;
	}
	record_values(r, v);
	if (t && t->start_ns != r->start_ns) {
		tid_drop(s, t); /* the tid was reused: the old thread's exit went missing */
		s->exit_missed++;
		t = NULL;
	}
	if (t) {
		memcpy(base, t->last, sizeof(base));
	} else if (r->start_ns < s->attach_ns) {
		base[M_RUN] = v[M_RUN];
		base[M_RQ] = v[M_RQ];
	}
	c = cgroup_get(s, r->cgroup_id);
	for (int i = 0; c && i < SCHED_METRICS; i++)
		if (v[i] > base[i])
			c->ns[i] += v[i] - base[i];
	if (c && r->kind == SCHED_REC_LIVE) {
		if (c->read_gen != s->gen) {
			c->read_gen = s->gen;
			c->read_n = 0;
			c->read_mean = 0;
		}
		c->read_n++;
		c->read_mean += ((double)r->read_ns - c->read_mean) / c->read_n;
	}
	if (r->kind == SCHED_REC_EXIT) {
		if (t)
			tid_drop(s, t);
		return;
	}
	if (!t) {
		if (s->ntids >= SCHED_THREADS_MAX) {
			s->tids_full++; /* read again next time as new: its time since is lost */
			return;
		}
		t = calloc(1, sizeof(*t));
		if (!t)
			return;
		t->tid = r->tid;
		t->start_ns = r->start_ns;
		hashtab_insert(&s->tids, &t->hnode, hash_bytes(&t->tid, sizeof(t->tid)));
		s->ntids++;
	}
	/*
	 * Each count only grows: a record lower than the last read (its storage lookup refused
	 * for a moment, the read then says 0; or an open episode read on a CPU whose clock was
	 * behind) keeps the last value, and the next read adds only what is new. Taken as the
	 * new base, a 0 made the next read add the thread's whole sleep again (a 6.12 guest's
	 * sleeper counted twice over an agent restart).
	 */
	for (int i = 0; i < SCHED_METRICS; i++)
		t->last[i] = v[i] > t->last[i] ? v[i] : t->last[i];
	t->read_ns = r->read_ns;
	t->gen = s->gen;
	t->pid = r->pid;
	t->ppid = r->ppid;
	t->cgroup_id = r->cgroup_id;
	memcpy(t->comm, r->comm, sizeof(t->comm));
	t->slot = r->slot;
	t->slot_val = r->slot_val;
}

/*
 * A start that took the maps over: the threads the agent before followed, with their counts
 * at its last read, and its attach time; the map is left empty.
 */
static int baseline_take(void *ctx, const void *key, const void *value)
{
	struct sched_state *s = ctx;
	struct sched_baseline b;
	struct sched_tid *t;
	__u32 tid;

	memcpy(&tid, key, sizeof(tid));
	memcpy(&b, value, sizeof(b));
	if (tid == BASELINE_META) {
		s->attach_ns = b.start_ns;
		return 0;
	}
	/* the map holds no more threads than the table: none is left out */
	if (s->ntids >= SCHED_THREADS_MAX || !(t = calloc(1, sizeof(*t))))
		return 0;
	t->tid = tid;
	t->start_ns = b.start_ns;
	memcpy(t->last, b.last, sizeof(t->last));
	hashtab_insert(&s->tids, &t->hnode, hash_bytes(&t->tid, sizeof(t->tid)));
	s->ntids++;
	return 0;
}

static void baselines_take(struct sched_state *s)
{
	map_read_fd(s->baselines_fd, BPF_MAP_TYPE_HASH, sizeof(__u32),
		    sizeof(struct sched_baseline), MAP_BATCH_BYTES, baseline_take, s);
	map_empty(s->baselines_fd, sizeof(__u32));
}

/*
 * At a clean exit that handed the maps over: every followed thread's counts, for the next,
 * and last, when all were written, BASELINE_META: without it (an agent killed midway) the
 * next agent does not take the maps over.
 */
static void baselines_save(struct sched_state *s)
{
	struct sched_baseline b = { 0 };
	__u32 key;
	struct hnode *n;
	size_t saved = 0;

	for (size_t i = 0; i <= s->tids.mask; i++)
		for (n = s->tids.buckets[i]; n; n = n->next) {
			struct sched_tid *t = (struct sched_tid *)n;

			b.start_ns = t->start_ns;
			memcpy(b.last, t->last, sizeof(b.last));
			key = t->tid;
			saved += !bpf_map_update_elem(s->baselines_fd, &key, &b, BPF_ANY);
		}
	key = BASELINE_META;
	memset(&b, 0, sizeof(b));
	b.start_ns = s->attach_ns;
	if (saved == s->ntids && !bpf_map_update_elem(s->baselines_fd, &key, &b, BPF_ANY))
		pr_info("pin: sched: %zu threads' counts handed over\n", saved);
	else
		pr_warn("pin: sched: %zu of %zu threads' counts handed over: the next agent counts "
			"sched and wait from its own start\n",
			saved, s->ntids);
}

static int handle_exit(void *ctx, void *data, size_t len)
{
	if (len >= sizeof(struct sched_record))
		record_apply(ctx, data);
	return 0;
}

/*
 * Every live thread, then the exits that came meanwhile; a thread neither read nor exited
 * in the last two reads ended without its exit record (the ring buffer was full: counted
 * there) and leaves the table. One read is not enough: an exiting thread leaves the task list
 * (exit_notify(), or its parent's reaping of the zombie) before its last switch sends the
 * record, and a parent woken by the exit can preempt it there; dropped then, its record
 * would come for a thread new to the table, counted again from its start.
 */
static int sched_read(struct sched_state *s)
{
	struct sched_record recs[64];
	struct hnode *n, *next;
	ssize_t got;
	size_t b;
	int fd, err;

	ring_buffer__consume(s->exits);
	s->gen++;
	fd = bpf_iter_create(bpf_link__fd(s->skel->links.sched_read));
	if (fd < 0)
		return -errno;
	while ((got = read(fd, recs, sizeof(recs))) > 0)
		for (size_t i = 0; i < (size_t)got / sizeof(recs[0]); i++)
			record_apply(s, &recs[i]);
	err = got < 0 ? -errno : 0;
	close(fd);
	ring_buffer__consume(s->exits);
	/*
	 * Threads the last two reads did not see have exited unseen, unless this read stopped
	 * early: then they stay (dropped, a thread still alive would be new at the next read and
	 * counted again from its start).
	 */
	for (b = 0; !err && b <= s->tids.mask; b++)
		for (n = s->tids.buckets[b]; n; n = next) {
			next = n->next;
			if (s->gen - ((struct sched_tid *)n)->gen >= 2) {
				tid_drop(s, (struct sched_tid *)n);
				s->exit_missed++;
			}
		}
	s->last_read_ms = monotonic_ms();
	return err;
}

/* cgroups removed longer than the grace period leave the output. */
static struct sched_cgroup *expiry_victims[256];
static size_t expiry_n;
static struct sched_state *expiry_state;
static uint64_t expiry_now;

static void expiry_visit(const void *node, VISIT which, int depth)
{
	struct sched_cgroup *c = *(struct sched_cgroup *const *)node;

	(void)depth;
	if ((which != postorder && which != leaf) || expiry_n == 256)
		return;
	if (!c->path[0]) {
		const char *path =
			cgroup_cache_resolve(expiry_state->cgroups, c->id, SCHED_RESOLVE_RESCAN_MS);

		if (path)
			snprintf(c->path, sizeof(c->path), "%s", path);
	}
	/* a cgroup not named yet is not in the cache, which would call it gone: not for a while */
	if (cgroup_cache_exists(expiry_state->cgroups, c->id) ||
	    (!c->path[0] && expiry_now - c->first_seen_ms < SCHED_UNNAMED_MS)) {
		c->gone_since_ms = 0;
		return;
	}
	if (grace_over(&c->gone_since_ms, expiry_now, expiry_state->grace_s)) {
		expiry_victims[expiry_n++] = c;
		expiry_state->unnamed += !c->path[0];
	}
}

static void sched_expire(struct sched_state *s, uint64_t now)
{
	expiry_state = s;
	expiry_now = now;
	do {
		expiry_n = 0;
		twalk(s->cgroup_tree, expiry_visit);
		for (size_t i = 0; i < expiry_n; i++) {
			tdelete(expiry_victims[i], &s->cgroup_tree, cgroup_cmp);
			free(expiry_victims[i]);
			s->ncgroups--;
		}
	} while (expiry_n == 256);
	s->last_expiry_ms = now;
}

struct wait_entry {
	struct wait_key key;
	struct wait_val val;
};

_Static_assert(sizeof(struct wait_entry) == sizeof(struct sched_wait_sample) &&
		       offsetof(struct wait_entry, val) == offsetof(struct sched_wait_sample, val),
	       "sched_snapshot hands wait entries out as samples");

struct wait_entries {
	struct wait_entry *e;
	size_t n, cap;
};

static int wait_entry_add(void *ctx, const void *key, const void *value)
{
	struct wait_entries *w = ctx;

	w->e[w->n].key = *(const struct wait_key *)key;
	w->e[w->n].val = *(const struct wait_val *)value;
	return ++w->n == w->cap;
}

static int last_ns_cmp(const void *a, const void *b)
{
	const struct wait_entry *x = a, *y = b;

	return (x->val.last_ns > y->val.last_ns) - (x->val.last_ns < y->val.last_ns);
}

/*
 * Above 3/4 full, the live threads' entries flushed longest ago leave wait_bri until half of
 * it is left (counted as bri_evicted): a long-lived thread that waits on one short-lived
 * socket after another (a server's worker) adds an entry per connection, and would fill the
 * map with sockets long closed, leaving none for the ones it waits on now.
 */
static void wait_evict(struct sched_state *s)
{
	const struct bpf_map *map = s->skel->maps.wait_bri;
	struct wait_entries a = { .cap = s->nbri ? s->nbri : 1 };
	size_t keep = s->bri_capacity / 2;

	a.e = calloc(a.cap, sizeof(*a.e));
	if (!a.e)
		return;
	map_read_all(map, wait_entry_add, &a);
	qsort(a.e, a.n, sizeof(*a.e), last_ns_cmp);
	for (size_t i = 0; i + keep < a.n; i++)
		if (!bpf_map_delete_elem(bpf_map__fd(map), &a.e[i].key)) {
			s->bri_evicted++;
			s->nbri--;
		}
	free(a.e);
}

struct bri_gone {
	struct sched_state *s;
	struct wait_key *keys;
	size_t n, cap;
};

static int bri_gone_add(void *ctx, const void *key, const void *value)
{
	struct bri_gone *g = ctx;
	const struct wait_key *k = key;

	(void)value;
	if (tid_find(g->s, k->tid))
		return 0;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		struct wait_key *keys = realloc(g->keys, cap * sizeof(*keys));

		if (!keys)
			return 1;
		g->keys = keys;
		g->cap = cap;
	}
	g->keys[g->n++] = *k;
	return 0;
}

/*
 * wait_bri entries of threads that are gone (not in the last read) leave the map: the
 * threads' waits stay in their cgroups' totals; per resource, only live threads are shown.
 */
static void wait_prune(struct sched_state *s, uint64_t now)
{
	int fd = bpf_map__fd(s->skel->maps.wait_bri);
	struct bri_gone g = { .s = s };
	long n;

	s->bri_inserted = __atomic_load_n(&s->skel->bss->bri_inserted, __ATOMIC_RELAXED);
	n = map_read_all(s->skel->maps.wait_bri, bri_gone_add, &g);
	for (size_t i = 0; i < g.n; i++)
		bpf_map_delete_elem(fd, &g.keys[i]);
	free(g.keys);
	if (n >= 0)
		s->nbri = (size_t)n > g.n ? n - g.n : 0;
	if (s->nbri > s->bri_capacity / 4 * 3)
		wait_evict(s);
	s->last_prune_ms = now;
}

/*
 * wait_bri may be above 3/4 full: the entries left at the last prune and those made since. A
 * prune then, not a second later, keeps up with a quarter of the map per tick (a server making
 * connections that fast, or the test's 500 sockets a second into --wait-capacity 1024, whose
 * prune a guest delayed past a second: bri_full in CI).
 */
static bool bri_filling(const struct sched_state *s)
{
	uint64_t made = __atomic_load_n(&s->skel->bss->bri_inserted, __ATOMIC_RELAXED);

	return s->nbri + (made - s->bri_inserted) > s->bri_capacity / 4 * 3;
}

/*
 * Steal is followed from the load, or from the first tick that finds the host has had some
 * (see steal_on): /proc/stat once a second until then, never at a scrape.
 */
static void steal_check(struct sched_state *s)
{
	if (s->steal && !s->skel->bss->steal_on && host_stolen())
		__atomic_store_n(&s->skel->bss->steal_on, 1, __ATOMIC_RELAXED);
}

static int sched_tick(struct plumb_module *m)
{
	struct sched_state *s = m->priv;
	uint64_t now = monotonic_ms();

	ring_buffer__consume(s->exits);
	if (now - s->last_read_ms >= SCHED_READ_MS) {
		steal_check(s);
		sched_read(s);
	}
	if (now - s->last_expiry_ms >= SCHED_EXPIRY_CHECK_MS)
		sched_expire(s, now);
	if (s->wait_on && (now - s->last_prune_ms >= SCHED_EXPIRY_CHECK_MS || bri_filling(s)))
		wait_prune(s, now);
	return 0;
}

static struct sched_cgroup **collect_list;
static size_t collect_n;

static void collect_visit(const void *node, VISIT which, int depth)
{
	(void)depth;
	if (which == postorder || which == leaf)
		collect_list[collect_n++] = *(struct sched_cgroup *const *)node;
}

/*
 * A scrape reads every thread once: the second module's collect uses the first one's read
 * (live threads up to this old; the exit records are always taken).
 */
#define SCHED_FRESH_MS 100

/* The cgroups with counts, in id order, named where they can be (collect_list). */
static int collect_begin(struct sched_state *s)
{
	int err = 0;

	if (monotonic_ms() - s->last_read_ms >= SCHED_FRESH_MS)
		err = sched_read(s);
	else /* threads that exited since that read: a scrape holds a finished workload whole */
		ring_buffer__consume(s->exits);
	if (err)
		return err;
	collect_list = calloc(s->ncgroups ? s->ncgroups : 1, sizeof(*collect_list));
	if (!collect_list)
		return -ENOMEM;
	collect_n = 0;
	twalk(s->cgroup_tree, collect_visit); /* in cgroup id order */
	for (size_t i = 0; i < collect_n; i++) {
		struct sched_cgroup *c = collect_list[i];
		const char *path;

		if (!c->path[0] &&
		    (path = cgroup_cache_resolve(s->cgroups, c->id, SCHED_RESOLVE_RESCAN_MS)))
			snprintf(c->path, sizeof(c->path), "%s", path);
	}
	return 0;
}

/*
 * One family: metric m of every named cgroup (a cgroup gone before it was named has its time
 * in no series: counted as cgroup_unnamed when it is dropped), with the kind label when kind is
 * set; scale turns ns into seconds.
 */
static void collect_family(struct prom_writer *w, int m, const char *kind, double scale)
{
	struct prom_label l[3];
	char workload[256];

	for (size_t i = 0; i < collect_n; i++) {
		struct sched_cgroup *c = collect_list[i];

		if (!c->path[0])
			continue;
		workload_from_cgroup(c->path, workload, sizeof(workload));
		l[0] = (struct prom_label){ "cgroup", c->path };
		l[1] = (struct prom_label){ "workload", workload };
		l[2] = (struct prom_label){ "kind", kind };
		prom_sample(w, l, kind ? 3 : 2, c->ns[m] * scale);
	}
}

static void collect_end(void)
{
	free(collect_list);
	collect_list = NULL;
}

/* Host-wide, once: from the module that loaded the object (sched, or wait alone). */
static void recovered_collect(struct plumb_module *m, struct sched_state *s, struct prom_writer *w)
{
	uint64_t n[SCHED_LOST_REASONS];

	if (s->owner != m || !s->run_delay)
		return;
	percpu_counters_sum(bpf_map__fd(s->skel->maps.sched_lost), SCHED_LOST_REASONS, n);
	prom_family(w, "plumb_sched_episodes_recovered_total", PROM_COUNTER,
		    "Off-CPU episodes whose switch-in closed nothing, ended at the thread's next "
		    "switch from its sched_info, host-wide (docs/metrics.md).");
	prom_sample(w, NULL, 0, (double)n[SCHED_RECOVERED]);
	prom_family(w, "plumb_sched_stale_enqueues_total", PROM_COUNTER,
		    "Sleepers whose enqueue stamp was left by a move while their dequeue was "
		    "delayed (EEVDF), not taken as their wakeup, host-wide (docs/metrics.md).");
	prom_sample(w, NULL, 0, (double)n[SCHED_STALE_QUEUED]);
}

static int sched_collect(struct plumb_module *m, struct prom_writer *w)
{
	struct sched_state *s = m->priv;
	int err;

	if (m->maps_only)
		return 0; /* the next agent adds only what came after this read: all is carried */
	err = collect_begin(s);
	if (err)
		return err;
	for (int k = 0; k < SCHED_TIME_METRICS; k++) {
		if ((k == M_RQ && !s->run_delay) || (k == M_STEAL && !s->steal))
			continue;
		prom_family(w, sched_metrics[k].name, PROM_COUNTER, sched_metrics[k].help);
		collect_family(w, k, NULL, 1e-9);
	}
	collect_end();
	recovered_collect(m, s, w);
	return w->err;
}

static int wait_collect(struct plumb_module *m, struct prom_writer *w)
{
	struct sched_state *s = m->priv;
	int err;

	if (m->maps_only)
		return 0; /* as sched_collect */
	err = collect_begin(s);
	if (err)
		return err;
	prom_family(w, "plumb_wait_seconds_total", PROM_COUNTER,
		    "Time the workload's threads were blocked inside a pipe, socket, futex, epoll "
		    "or poll/select call, by kind (docs/metrics.md).");
	for (int k = 0; k < WAIT_KINDS; k++)
		collect_family(w, M_WAIT_NS + k, wait_kind_names[k], 1e-9);
	prom_family(w, "plumb_wait_calls_total", PROM_COUNTER,
		    "Blocking waits of the workload's threads by kind: each time a thread blocked "
		    "inside such a call (a call that did not block is not counted).");
	for (int k = 0; k < WAIT_KINDS; k++)
		collect_family(w, M_WAIT_N + k, wait_kind_names[k], 1);
	prom_family(w, "plumb_futex_wakes_total", PROM_COUNTER,
		    "Futex wakes by the workload's threads that woke a waiting thread.");
	collect_family(w, M_FUTEX_WAKES, NULL, 1);
	collect_end();
	recovered_collect(m, s, w);
	return w->err;
}

/* Losses of the shared programs and tables: under sched, or under wait when it runs alone. */
static void shared_health(struct plumb_module *m, struct sched_state *s, struct module_health *h,
			  const uint64_t *lost)
{
	health_add_lost(h, "ringbuf_full", lost[SCHED_LOST_RINGBUF_FULL]);
	health_add_lost(h, "storage_full", lost[SCHED_LOST_STORAGE]);
	health_add_lost(h, "wakeup_unseen", lost[SCHED_LOST_UNCLOSED]);
	health_add_lost(h, "switch_unseen", lost[SCHED_LOST_SWITCH]);
	/* the maps-only collect at exit: what user space counts is carried whole */
	health_add_lost(h, "threads_full", m->maps_only ? 0 : s->tids_full);
	health_add_lost(h, "cgroups_full", m->maps_only ? 0 : s->cgroups_full);
	health_add_lost(h, "exit_missed", m->maps_only ? 0 : s->exit_missed);
}

static void sched_health(struct plumb_module *m, struct module_health *h)
{
	struct sched_state *s = m->priv;
	uint64_t lost[SCHED_LOST_REASONS];

	percpu_counters_sum(bpf_map__fd(s->skel->maps.sched_lost), SCHED_LOST_REASONS, lost);
	h->nmaps = h->nlost = 0;
	health_add_map(h, "threads", s->ntids, SCHED_THREADS_MAX);
	health_add_map(h, "cgroups", s->ncgroups, SCHED_CGROUPS_MAX);
	shared_health(m, s, h, lost);
	health_add_lost(h, "cgroup_unnamed", m->maps_only ? 0 : s->unnamed);
	h->obj = s->owner == m ? s->skel->obj : NULL;
}

static void wait_health(struct plumb_module *m, struct module_health *h)
{
	struct sched_state *s = m->priv;
	uint64_t lost[SCHED_LOST_REASONS];

	percpu_counters_sum(bpf_map__fd(s->skel->maps.sched_lost), SCHED_LOST_REASONS, lost);
	h->nmaps = h->nlost = 0;
	health_add_map(h, "wait_bri", s->nbri, s->bri_capacity);
	health_add_lost(h, "bri_full", lost[WAIT_LOST_BRI_FULL]);
	health_add_lost(h, "bri_evicted", m->maps_only ? 0 : s->bri_evicted);
	health_add_lost(h, "futex_key_unresolved", lost[WAIT_LOST_FUTEX_KEY]);
	health_add_lost(h, "cgroup_unnamed", m->maps_only ? 0 : s->unnamed);
	if (sched_module.priv != s) /* no sched module to report them */
		shared_health(m, s, h, lost);
	h->obj = s->owner == m ? s->skel->obj : NULL;
}

static void free_cgroup(void *p)
{
	free(p);
}

static void sched_unload(struct plumb_module *m)
{
	struct sched_state *s = m->priv;
	struct hnode *n, *next;

	if (!s)
		return;
	m->priv = NULL;
	if (--s->users > 0) {
		if (s->owner == m)
			s->owner = NULL; /* its programs' run time goes unreported from now on */
		return;
	}
	sched_shared = NULL;
	if (s->adopt.handed)
		baselines_save(s);
	if (s->baselines_fd >= 0)
		close(s->baselines_fd);
	ring_buffer__free(s->exits);
	if (s->skel)
		links_destroy_parallel((struct bpf_link **)&s->skel->links,
				       sizeof(s->skel->links) / sizeof(struct bpf_link *));
	sched_bpf__destroy(s->skel);
	cgroup_cache_free(s->cgroups);
	for (size_t b = 0; s->tids.buckets && b <= s->tids.mask; b++)
		for (n = s->tids.buckets[b]; n; n = next) {
			next = n->next;
			free(n);
		}
	free(s->tids.buckets);
	tdestroy(s->cgroup_tree, free_cgroup);
	free(s);
}

static const struct {
	enum kernel_feature f;
	const char *why;
} sched_needs[] = {
	{ FEAT_TP_BTF, "tp_btf programs (5.5)" },
	{ FEAT_TASK_STORAGE, "task storage (5.11)" },
	{ FEAT_ITER_TASK, "iter/task (5.8)" },
	{ FEAT_RINGBUF, "ring buffer (5.8)" },
};

/* The attach points of m's part of the shared object, for --check. */
static void shared_notes(struct plumb_module *m, struct sched_state *s, bool wait)
{
	const char *how =
		s->owner && s->owner != m ? "chosen: shared with the sched module" : "chosen";

	if (wait && s->owner && s->owner != m && !s->wait_on) {
		snprintf(m->error, sizeof(m->error),
			 "internal: the sched object was loaded "
			 "without waits");
		return;
	}
	module_attach_note(m, "tp_btf/sched_switch", "sched_switch", "%s", how);
	if (s->run_delay)
		module_attach_note(m, "tp_btf/sched_wakeup", "sched_wakeup",
				   "not needed: episodes end at the switch-in (last_queued)");
	else
		module_attach_note(m, "tp_btf/sched_wakeup", "sched_wakeup", "%s", how);
	if (bpf_program__autoload(s->skel->progs.sched_migrate_task))
		module_attach_note(m, "tp_btf/sched_migrate_task", "sched_migrate_task", "%s", how);
	else
		module_attach_note(m, "tp_btf/sched_migrate_task", "sched_migrate_task",
				   "not needed: no delayed dequeue, or no sched_info");
	if (wait) {
		module_attach_note(m, "tp_btf/sched_waking", "wait_waking", "%s", how);
		snprintf(m->choice, sizeof(m->choice),
			 "waits named at the blocking switch-out (the thread's syscall and its "
			 "file or futex), futex wakes at sched_waking; no syscall tracepoint");
		return;
	}
	module_attach_note(m, "tp_btf/sched_process_fork", "sched_fork", "%s", how);
	if (s->remainder)
		module_attach_note(m, "tp_btf/sched_wakeup_new", "sched_wakeup_new", "%s", how);
	else
		module_attach_note(m, "tp_btf/sched_wakeup_new", "sched_wakeup_new",
				   "not needed: sleeps are timed at their switches");
	module_attach_note(m, "iter/task", "sched_read", "%s", how);
	snprintf(m->choice, sizeof(m->choice),
		 "%s; CPU and run-queue time from the kernel's counters%s; %s",
		 s->remainder ?
			 "blocks from sched_switch, sleep the rest of each thread's time" :
			 "off-CPU time from sched_switch (and sched_wakeup without sched_info)",
		 s->run_delay ? "" :
				" (run-queue time: not kept by this kernel, CONFIG_SCHED_INFO)",
		 s->steal ? "steal per thread at each switch, once the host has had some" :
			    "steal, if any, is in the CPU time (so this kernel counts it)");
}

/* The fork and iterator programs (first), or the switch (and exit) and wakeup ones. */
static int sched_attach(struct sched_state *s, bool switches)
{
	struct sched_bpf *k = s->skel;
	struct {
		struct bpf_program *prog;
		struct bpf_link **link;
		bool switches;
	} order[] = {
		{ k->progs.sched_fork, &k->links.sched_fork, false },
		{ k->progs.sched_wakeup_new, &k->links.sched_wakeup_new, false },
		{ k->progs.sched_read, &k->links.sched_read, false },
		/* wakeups before switches: a wait that starts is always seen to end */
		{ k->progs.sched_wakeup, &k->links.sched_wakeup, true },
		{ k->progs.wait_waking, &k->links.wait_waking, true },
		{ k->progs.sched_migrate_task, &k->links.sched_migrate_task, true },
		{ k->progs.sched_switch, &k->links.sched_switch, true },
	};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (order[i].switches != switches || !bpf_program__autoload(order[i].prog))
			continue;
		*order[i].link = bpf_program__attach(order[i].prog);
		if (!*order[i].link)
			return -errno;
	}
	return 0;
}

/*
 * --pin: the maps of the agent before, if it left them (its programs still count into them
 * until this one's attach), and its threads' counts at its last read, which the first read
 * here continues from; then a fresh DIR/sched_baselines for this agent's exit.
 */
static int sched_adopt(struct plumb_module *m, struct sched_state *s,
		       const struct plumb_config *cfg)
{
	struct sched_baseline b;
	__u32 meta = BASELINE_META;
	int err;

	if (cfg->pin) {
		s->baselines_fd = adopt_side_map(cfg->pin, "sched_baselines", sizeof(__u32),
						 sizeof(struct sched_baseline),
						 SCHED_THREADS_MAX + 1, m->error, sizeof(m->error));
		if (s->baselines_fd < 0)
			return s->baselines_fd;
		/* the maps go on only with every thread's counts (BASELINE_META, written last) */
		if (bpf_map_lookup_elem(s->baselines_fd, &meta, &b))
			adopt_refuse(cfg->pin, "sched", "their threads' counts");
	}
	err = adopt_maps(&s->adopt, cfg->pin, "sched", s->skel->skeleton, s->skel->maps.plumb_gate,
			 &s->skel->rodata->plumb_generation, m->error, sizeof(m->error));
	if (err || !cfg->pin)
		return err;
	if (s->adopt.adopted)
		baselines_take(s);
	else /* another agent's, or none: nothing to continue */
		map_empty(s->baselines_fd, sizeof(__u32));
	return 0;
}

/*
 * Loads the object the sched and wait modules share, or joins it when the other one did;
 * wait_on is fixed by the first load: the waits are classified when the wait module is
 * among the requested ones (cfg->wait).
 */
static int shared_load(struct plumb_module *m, const struct plumb_config *cfg, bool wait)
{
	struct sched_state *s;
	const char *fault;
	int err;

	m->nattach = 0;
	m->choice[0] = '\0';
	if (wait && !kernel_has(FEAT_TASK_PT_REGS)) {
		snprintf(m->error, sizeof(m->error),
			 "the kernel lacks bpf_task_pt_regs() in tracing programs (5.15)");
		return -EOPNOTSUPP;
	}
	if (sched_shared) {
		s = sched_shared;
		shared_notes(m, s, wait);
		if (m->error[0])
			return -EINVAL;
		s->users++;
		m->priv = s;
		m->adopted = s->adopt.adopted;
		module_attach_settle(m, true);
		return 0;
	}
	for (size_t i = 0; i < sizeof(sched_needs) / sizeof(sched_needs[0]); i++)
		if (!kernel_has(sched_needs[i].f)) {
			snprintf(m->error, sizeof(m->error), "the kernel lacks %s",
				 sched_needs[i].why);
			return -EOPNOTSUPP;
		}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	m->priv = s;
	s->users = 1;
	s->owner = m;
	s->baselines_fd = -1;
	sched_shared = s;
	s->wait_on = (wait || cfg->wait) && kernel_has(FEAT_TASK_PT_REGS);
	s->grace_s = cfg->cgroup_grace_s;
	s->ncpus = libbpf_num_possible_cpus();
	s->cgroups = cgroup_cache_new(cfg->cgroup_root, SCHED_CGROUPS_MAX);
	err = hashtab_init(&s->tids, SCHED_THREADS_MAX);
	if (s->ncpus <= 0 || !s->cgroups || err) {
		err = -ENOMEM;
		snprintf(m->error, sizeof(m->error), "out of memory");
		goto out_unload;
	}
	/* task_struct has sched_info, and /proc/<tid>/schedstat exists, with CONFIG_SCHED_INFO */
	s->run_delay = faccessat(AT_FDCWD, "/proc/self/schedstat", R_OK, AT_EACCESS) == 0;
	s->steal = kernel_has(FEAT_STEAL);
	s->remainder = !s->wait_on && s->run_delay && kernel_has(FEAT_SLEEP_REMAINDER);

	s->skel = sched_bpf__open();
	if (!s->skel) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open BPF object: %s", strerror(-err));
		goto out_unload;
	}
	s->skel->rodata->wait_on = s->wait_on;
	s->bri_capacity = cfg->wait_capacity ? cfg->wait_capacity : WAIT_BRI_MAX;
	if (s->bri_capacity < 64) /* room for the pruning's three quarters and half */
		s->bri_capacity = 64;
	bpf_map__set_max_entries(s->skel->maps.wait_bri, s->bri_capacity);
	s->skel->rodata->close_at_switch_in = s->run_delay;
	/* tests only: bpf/sched.bpf.c fault_thread() (docs/architecture.md) */
	fault = getenv("PLUMB_TEST_MISS_SWITCH_IN");
	s->skel->rodata->fault_miss_switch_in = fault && strcmp(fault, "hide");
	s->skel->rodata->fault_hide_switch_in = fault && !strcmp(fault, "hide");
	s->skel->rodata->sleep_remainder = s->remainder;
	bpf_program__set_autoload(s->skel->progs.sched_wakeup_new, s->remainder);
	bpf_program__set_autoload(s->skel->progs.wait_waking, s->wait_on);
	bpf_program__set_autoload(s->skel->progs.sched_wakeup, !s->run_delay);
	bpf_program__set_autoload(s->skel->progs.sched_migrate_task,
				  s->run_delay && kernel_has(FEAT_DELAYED_DEQUEUE));
	shared_notes(m, s, wait);
	err = sched_adopt(m, s, cfg);
	if (err)
		goto out_unload;
	err = sched_bpf__load(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot load BPF programs: %s",
			 strerror(-err));
		goto out_unload;
	}
	if (!s->adopt.adopted || !s->attach_ns)
		s->attach_ns = monotonic_ns();
	if (s->adopt.adopted) /* the maps' count of wait_bri entries made goes on from the agent before */
		s->bri_inserted = __atomic_load_n(&s->skel->bss->bri_inserted, __ATOMIC_RELAXED);
	/*
	 * Fork and the iterator first, and one read, which makes every existing thread's task
	 * storage; then the switch and wakeup programs, which only look it up: no thread blocks
	 * without storage in between (each would count as storage_full). The exits ride on the
	 * switch, and the gate opens after both.
	 */
	s->exits = ring_buffer__new(bpf_map__fd(s->skel->maps.sched_exits), handle_exit, s, NULL);
	if (!s->exits) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open ring buffer: %s", strerror(-err));
		goto out_unload;
	}
	steal_check(s);
	err = sched_attach(s, false);
	if (!err) {
		err = sched_read(s); /* the baseline of every thread that is already there */
		if (err)
			snprintf(m->error, sizeof(m->error), "cannot read threads: %s",
				 strerror(-err));
	}
	if (!err)
		err = sched_attach(s, true);
	if (err) {
		if (!m->error[0])
			snprintf(m->error, sizeof(m->error),
				 "cannot attach to sched tracepoints: %s", strerror(-err));
		goto out_unload;
	}
	module_attach_settle(m, true);
	/* the programs count from here (with --pin: the old ones stop in the same write) */
	err = adopt_activate(&s->adopt, s->skel->maps.plumb_gate, m->error, sizeof(m->error));
	if (err)
		goto out_unload;
	m->adopted = s->adopt.adopted;
	s->last_expiry_ms = s->last_prune_ms = monotonic_ms();
	return 0;

out_unload:
	module_attach_settle(m, false);
	sched_unload(m);
	return err;
}

static int wait_entry_cmp(const void *a, const void *b)
{
	return memcmp(&((const struct wait_entry *)a)->key, &((const struct wait_entry *)b)->key,
		      sizeof(struct wait_key));
}

/*
 * Kernel addresses (an mm, an eventpoll) are not shown: they become ids that tell resources
 * apart, the same for the agent's lifetime, keyed by a secret of this agent.
 */
static uint64_t opaque_id(uint64_t ptr)
{
	static uint64_t secret;
	uint64_t z;

	if (!secret && getentropy(&secret, sizeof(secret)))
		secret = monotonic_ns() | 1;
	z = ptr ^ secret;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL; /* splitmix64's finalizer */
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void json_add_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static void json_add_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static void json_add_hex(struct json_object *o, const char *k, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)v);
	json_add_str(o, k, buf);
}

/* The kernel's dev_t (MKDEV: major << 20 | minor) as "major:minor". */
static void json_add_dev(struct json_object *o, const char *k, uint64_t dev)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu:%llu", (unsigned long long)(dev >> 20),
		 (unsigned long long)(dev & 0xfffff));
	json_add_str(o, k, buf);
}

/*
 * A socket's ends: a unix socket's peer inode (from BPF); a TCP or UDP socket's addresses and
 * local peer from /proc/<pid>/net (at most *budget lookups per request: each reads the tables).
 */
static void wait_socket(struct json_object *r, const struct wait_key *k, uint32_t pid, int *budget)
{
	struct socket_ends e;

	if (k->c) {
		json_add_str(r, "family", "unix");
		json_add_u64(r, "peer_inode", k->c);
		return;
	}
	if (*budget <= 0 || socket_ends(pid, k->a, &e)) {
		(*budget)--;
		return;
	}
	(*budget)--;
	json_add_str(r, "family", e.proto);
	json_add_str(r, "local", e.local);
	json_add_str(r, "remote", e.remote);
	if (e.peer_inode)
		json_add_u64(r, "peer_inode", e.peer_inode);
}

static struct json_object *wait_resource(const struct wait_key *k, const struct sched_tid *t,
					 int *budget)
{
	struct json_object *r = json_object_new_object();

	if (!r)
		return NULL;
	switch (k->bri) {
	case BRI_INODE:
		json_add_str(r, "type", k->kind == WAIT_PIPE ? "pipe" : "socket");
		json_add_u64(r, "inode", k->a);
		json_add_dev(r, "dev", k->b);
		if (k->kind == WAIT_SOCKET)
			wait_socket(r, k, t->pid, budget);
		break;
	case BRI_FUTEX_PRIVATE: /* the address space is the thread's process */
		json_add_str(r, "type", "futex");
		json_add_str(r, "scope", "private");
		json_add_u64(r, "pid", t->pid);
		json_add_hex(r, "address", k->a);
		json_add_hex(r, "mm", opaque_id(k->b));
		break;
	case BRI_FUTEX_SHARED:
		json_add_str(r, "type", "futex");
		json_add_str(r, "scope", "shared");
		json_add_dev(r, "dev", k->c);
		json_add_u64(r, "inode", k->a);
		json_add_u64(r, "offset", k->b);
		break;
	case BRI_EPOLL:
		json_add_str(r, "type", "epoll");
		json_add_hex(r, "instance", opaque_id(k->a));
		json_add_u64(r, "pid", t->pid);
		json_add_u64(r, "fd", k->b);
		break;
	default:
		json_add_str(r, "type", "none");
	}
	return r;
}

/*
 * Every (thread, resource) with waits: wait_bri's entries and each thread's slot, sorted by
 * key and merged. The caller frees *out.
 */
static int wait_entries(struct sched_state *s, struct wait_entry **out, size_t *nout)
{
	size_t n = 0, m = 0, cap = s->bri_capacity + s->ntids;
	struct wait_entries w = { .cap = cap };
	struct wait_entry *e;
	struct hnode *node;

	*out = NULL;
	*nout = 0;
	if (!s->wait_on)
		return 0;
	e = w.e = calloc(cap, sizeof(*e));
	if (!e)
		return -ENOMEM;
	map_read_all(s->skel->maps.wait_bri, wait_entry_add, &w);
	n = w.n;
	for (size_t b = 0; b <= s->tids.mask; b++)
		for (node = s->tids.buckets[b]; node && n < cap; node = node->next) {
			struct sched_tid *t = (struct sched_tid *)node;

			if (t->slot.kind < WAIT_KINDS && t->slot_val.n)
				e[n++] = (struct wait_entry){ t->slot, t->slot_val };
		}
	qsort(e, n, sizeof(*e), wait_entry_cmp);
	for (size_t i = 0; i < n; i++) {
		if (m && !wait_entry_cmp(&e[m - 1], &e[i])) {
			e[m - 1].val.ns += e[i].val.ns;
			e[m - 1].val.n += e[i].val.n;
			e[m - 1].val.wakes += e[i].val.wakes;
			continue;
		}
		e[m++] = e[i];
	}
	*out = e;
	*nout = m;
	return 0;
}

/* TCP/UDP sockets whose addresses one /api/v1/waits request looks up in /proc */
#define WAIT_API_SOCKETS 256

/*
 * GET /api/v1/waits: each live thread's waits per resource (docs/metrics.md, "wait"):
 * what wait_bri holds and each thread's slot, which is not in it yet.
 */
static int wait_api(struct plumb_module *m, struct json_object *doc)
{
	struct sched_state *s = m->priv;
	struct json_object *list = json_object_new_array();
	struct wait_entry *e = NULL;
	int err, budget = WAIT_API_SOCKETS;
	size_t n = 0;

	err = sched_read(s);
	if (!err)
		err = wait_entries(s, &e, &n);
	if (err || !list) {
		json_object_put(list);
		return err ? err : -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct sched_tid *t = tid_find(s, e[i].key.tid);
		struct sched_cgroup *c = NULL, probe, **found;
		struct json_object *o;
		char workload[256];

		if (!t || e[i].key.kind >= WAIT_KINDS || !(o = json_object_new_object()))
			continue;
		probe.id = t->cgroup_id;
		found = tfind(&probe, &s->cgroup_tree, cgroup_cmp);
		c = found ? *found : NULL;
		json_add_u64(o, "tid", t->tid);
		json_add_u64(o, "pid", t->pid);
		json_object_object_add(
			o, "comm",
			json_object_new_string_len(t->comm, strnlen(t->comm, sizeof(t->comm))));
		if (c && c->path[0]) {
			workload_from_cgroup(c->path, workload, sizeof(workload));
			json_add_str(o, "cgroup", c->path);
			json_add_str(o, "workload", workload);
		}
		json_add_str(o, "kind", wait_kind_names[e[i].key.kind]);
		json_object_object_add(o, "resource", wait_resource(&e[i].key, t, &budget));
		json_object_object_add(o, "seconds", json_object_new_double(e[i].val.ns / 1e9));
		json_add_u64(o, "waits", e[i].val.n);
		json_add_u64(o, "wakes", e[i].val.wakes);
		json_object_array_add(list, o);
	}
	free(e);
	json_object_object_add(doc, "waits", list);
	return 0;
}

bool sched_steal_measured(struct plumb_module *m)
{
	return ((struct sched_state *)m->priv)->steal;
}

int sched_snapshot(struct plumb_module *m, struct sched_thread_sample **threads, size_t *n,
		   struct sched_wait_sample **waits, size_t *nwaits)
{
	struct sched_state *s = m->priv;
	struct sched_thread_sample *t;
	struct wait_entry *e = NULL;
	struct hnode *node;
	size_t k = 0, ne = 0;
	int err = sched_read(s);

	*threads = NULL;
	*waits = NULL;
	*n = *nwaits = 0;
	if (err)
		return err;
	t = calloc(s->ntids ? s->ntids : 1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t b = 0; b <= s->tids.mask; b++)
		for (node = s->tids.buckets[b]; node && k < s->ntids; node = node->next) {
			struct sched_tid *x = (struct sched_tid *)node;

			t[k] = (struct sched_thread_sample){ .tid = x->tid,
							     .pid = x->pid,
							     .ppid = x->ppid,
							     .start_ns = x->start_ns,
							     .cgroup_id = x->cgroup_id };
			memcpy(t[k].comm, x->comm, sizeof(t[k].comm));
			memcpy(t[k].q, x->last, sizeof(t[k].q));
			t[k].read_ns = x->read_ns;
			k++;
		}
	err = wait_entries(s, &e, &ne);
	if (err) {
		free(t);
		return err;
	}
	/* struct wait_entry and struct sched_wait_sample are the same two members */
	*threads = t;
	*n = k;
	*waits = (struct sched_wait_sample *)e;
	*nwaits = ne;
	return 0;
}

int sched_cgroup_snapshot(struct plumb_module *m, struct sched_cgroup_sample **out, size_t *n)
{
	struct sched_state *s = m->priv;
	int err = collect_begin(s);

	*out = NULL;
	*n = 0;
	if (err)
		return err;
	*out = calloc(collect_n ? collect_n : 1, sizeof(**out));
	if (!*out) {
		collect_end();
		return -ENOMEM;
	}
	for (size_t i = 0; i < collect_n; i++) {
		(*out)[i].cgroup_id = collect_list[i]->id;
		snprintf((*out)[i].path, sizeof((*out)[i].path), "%s", collect_list[i]->path);
		memcpy((*out)[i].q, collect_list[i]->ns, sizeof((*out)[i].q));
		if (collect_list[i]->read_gen == s->gen && collect_list[i]->read_n)
			(*out)[i].read_ns = (uint64_t)collect_list[i]->read_mean;
	}
	*n = collect_n;
	collect_end();
	return 0;
}

const char *sched_cgroup_path(struct plumb_module *m, uint64_t cgroup_id)
{
	struct sched_state *s = m->priv;
	struct sched_cgroup probe = { .id = cgroup_id }, **found;
	const char *path;

	found = tfind(&probe, &s->cgroup_tree, cgroup_cmp);
	if (found && (*found)->path[0])
		return (*found)->path;
	path = cgroup_cache_resolve(s->cgroups, cgroup_id, SCHED_RESOLVE_RESCAN_MS);
	if (path && found)
		snprintf((*found)->path, sizeof((*found)->path), "%s", path);
	return path ? path : "";
}

static int sched_load(struct plumb_module *m, const struct plumb_config *cfg)
{
	return shared_load(m, cfg, false);
}

static int wait_load(struct plumb_module *m, const struct plumb_config *cfg)
{
	return shared_load(m, cfg, true);
}

static int sched_hand_over(struct plumb_module *m)
{
	struct sched_state *s = m->priv;

	return adopt_hand_over(&s->adopt, s->skel->skeleton);
}

struct plumb_module sched_module = {
	.name = "sched",
	.summary = "per workload: time on a CPU, waiting for one, blocked, in I/O wait, asleep",
	.load = sched_load,
	.tick = sched_tick,
	.collect = sched_collect,
	.health = sched_health,
	.unload = sched_unload,
	.hand_over = sched_hand_over,
};

struct plumb_module wait_module = {
	.name = "wait",
	.summary = "per workload: time blocked on pipes, sockets, futexes, epoll, poll/select",
	.load = wait_load,
	.tick = sched_tick,
	.collect = wait_collect,
	.health = wait_health,
	.api_path = "/api/v1/waits",
	.api = wait_api,
	.unload = sched_unload,
	.hand_over = sched_hand_over,
};
