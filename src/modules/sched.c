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
 */
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "clock.h"
#include "detach.h"
#include "hashtab.h"
#include "plumb.h"
#include "probe.h"
#include "export/prom.h"
#include "identity/cgroup.h"
#include "identity/workload.h"
#include "plumb_sched.h"
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

enum sched_metric { M_RUN, M_RQ, M_SLEEP, M_BLOCK, M_IOWAIT, SCHED_METRICS };

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
};

struct sched_tid {
	struct hnode hnode; /* first: the hash table's link */
	uint32_t tid;
	uint32_t gen; /* the read that last saw it */
	uint64_t start_ns;
	uint64_t last[SCHED_METRICS]; /* its counts at the last read */
};

struct sched_cgroup {
	uint64_t id;
	uint64_t ns[SCHED_METRICS];
	char path[256]; /* "" until resolved */
	uint64_t gone_since_ms;
	uint64_t first_seen_ms;
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
	uint64_t tids_full, cgroups_full, exit_missed;
	int ncpus;
};

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
	memcpy(t->last, v, sizeof(t->last));
	t->gen = s->gen;
}

static int handle_exit(void *ctx, void *data, size_t len)
{
	if (len >= sizeof(struct sched_record))
		record_apply(ctx, data);
	return 0;
}

/*
 * Every live thread, then the exits that came meanwhile; a thread neither read nor exited
 * since the last read ended without its exit record (the ring buffer was full: counted there)
 * and leaves the table.
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
	for (b = 0; b <= s->tids.mask; b++)
		for (n = s->tids.buckets[b]; n; n = next) {
			next = n->next;
			if (((struct sched_tid *)n)->gen != s->gen) {
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
	if (!c->gone_since_ms)
		c->gone_since_ms = expiry_now;
	if (expiry_now - c->gone_since_ms >= (uint64_t)expiry_state->grace_s * 1000)
		expiry_victims[expiry_n++] = c;
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

static int sched_tick(struct plumb_module *m)
{
	struct sched_state *s = m->priv;
	uint64_t now = monotonic_ms();

	ring_buffer__consume(s->exits);
	if (now - s->last_read_ms >= SCHED_READ_MS)
		sched_read(s);
	if (now - s->last_expiry_ms >= SCHED_EXPIRY_CHECK_MS)
		sched_expire(s, now);
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

static int sched_collect(struct plumb_module *m, struct prom_writer *w)
{
	struct sched_state *s = m->priv;
	char workload[256];
	struct prom_label l[2];
	int err;

	err = sched_read(s);
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
	for (int k = 0; k < SCHED_METRICS; k++) {
		if (k == M_RQ && !s->run_delay)
			continue;
		prom_family(w, sched_metrics[k].name, PROM_COUNTER, sched_metrics[k].help);
		for (size_t i = 0; i < collect_n; i++) {
			struct sched_cgroup *c = collect_list[i];

			if (!c->path[0])
				continue; /* gone before it was named: its time is in no series */
			workload_from_cgroup(c->path, workload, sizeof(workload));
			l[0] = (struct prom_label){ "cgroup", c->path };
			l[1] = (struct prom_label){ "workload", workload };
			prom_sample(w, l, 2, c->ns[k] / 1e9);
		}
	}
	free(collect_list);
	collect_list = NULL;
	return w->err;
}

static void sched_health(struct plumb_module *m, struct module_health *h)
{
	struct sched_state *s = m->priv;
	static const char *const reasons[SCHED_LOST_REASONS] = { "ringbuf_full", "storage_full",
								 "wakeup_unseen" };
	uint64_t lost[SCHED_LOST_REASONS] = { 0 };
	__u64 *percpu = calloc(s->ncpus, sizeof(__u64));
	int fd = bpf_map__fd(s->skel->maps.sched_lost);

	for (__u32 r = 0; percpu && r < SCHED_LOST_REASONS; r++)
		if (!bpf_map_lookup_elem(fd, &r, percpu))
			for (int cpu = 0; cpu < s->ncpus; cpu++)
				lost[r] += percpu[cpu];
	free(percpu);
	h->nmaps = 0;
	h->maps[h->nmaps].name = "threads";
	h->maps[h->nmaps].entries = s->ntids;
	h->maps[h->nmaps++].capacity = SCHED_THREADS_MAX;
	h->maps[h->nmaps].name = "cgroups";
	h->maps[h->nmaps].entries = s->ncgroups;
	h->maps[h->nmaps++].capacity = SCHED_CGROUPS_MAX;
	h->nlost = 0;
	for (int r = 0; r < SCHED_LOST_REASONS; r++) {
		h->lost[h->nlost].reason = reasons[r];
		h->lost[h->nlost++].count = lost[r];
	}
	h->lost[h->nlost].reason = "threads_full";
	h->lost[h->nlost++].count = s->tids_full;
	h->lost[h->nlost].reason = "cgroups_full";
	h->lost[h->nlost++].count = s->cgroups_full;
	h->lost[h->nlost].reason = "exit_missed";
	h->lost[h->nlost++].count = s->exit_missed;
	h->obj = s->skel->obj;
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
	m->priv = NULL;
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

static int sched_load(struct plumb_module *m, const struct plumb_config *cfg)
{
	struct sched_state *s;
	int err;

	m->nattach = 0;
	m->choice[0] = '\0';
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
	s->run_delay = access("/proc/self/schedstat", R_OK) == 0;

	s->skel = sched_bpf__open();
	if (!s->skel) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open BPF object: %s", strerror(-err));
		goto out_unload;
	}
	module_attach_note(m, "tp_btf/sched_switch", "sched_switch", "chosen");
	module_attach_note(m, "tp_btf/sched_wakeup", "sched_wakeup", "chosen");
	module_attach_note(m, "tp_btf/sched_process_fork", "sched_fork", "chosen");
	module_attach_note(m, "tp_btf/sched_process_exit", "sched_exit", "chosen");
	module_attach_note(m, "iter/task", "sched_read", "chosen");
	snprintf(m->choice, sizeof(m->choice),
		 "off-CPU time from sched_switch/sched_wakeup; "
		 "CPU and run-queue time from the kernel's counters%s",
		 s->run_delay ? "" :
				" (run-queue time: not kept by this kernel, CONFIG_SCHED_INFO)");
	err = sched_bpf__load(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot load BPF programs: %s",
			 strerror(-err));
		goto out_unload;
	}
	s->attach_ns = monotonic_ns();
	err = sched_bpf__attach(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot attach to sched tracepoints: %s",
			 strerror(-err));
		goto out_unload;
	}
	s->exits = ring_buffer__new(bpf_map__fd(s->skel->maps.sched_exits), handle_exit, s, NULL);
	if (!s->exits) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open ring buffer: %s", strerror(-err));
		goto out_unload;
	}
	module_attach_settle(m, true);
	err = sched_read(s); /* the baseline of every thread that is already there */
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot read threads: %s", strerror(-err));
		goto out_unload;
	}
	s->last_expiry_ms = monotonic_ms();
	return 0;

out_unload:
	module_attach_settle(m, false);
	sched_unload(m);
	return err;
}

struct plumb_module sched_module = {
	.name = "sched",
	.summary = "per workload: time on a CPU, waiting for one, blocked, in I/O wait, asleep",
	.load = sched_load,
	.tick = sched_tick,
	.collect = sched_collect,
	.health = sched_health,
	.unload = sched_unload,
};
