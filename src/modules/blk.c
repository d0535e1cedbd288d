// SPDX-License-Identifier: GPL-2.0
/*
 * blk module, user space: loads bpf/blk.bpf.c, reads the sectors each cgroup submitted to
 * each disk and each disk's request latency, names cgroups and disks, and exports them.
 * Counts live in the kernel's per-CPU maps (cumulative); a removed cgroup's entries leave
 * the map and the output after the grace period.
 */
#include <errno.h>
#include <math.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "adopt.h"
#include "clock.h"
#include "detach.h"
#include "plumb.h"
#include "probe.h"
#include "export/prom.h"
#include "identity/cgroup.h"
#include "identity/workload.h"
#include "blk.h"
#include "modules/blk_module.h"
#include "blk.skel.h"

#define BLK_CGROUPS_MAX	      16384
#define BLK_RESOLVE_RESCAN_MS 250
#define BLK_EXPIRY_CHECK_MS   1000
/* An entry whose cgroup has no name yet is held back this long (see io.c's same rule). */
#define BLK_UNNAMED_MS 5000
#define BLK_DISKS_MAX  256

static const char *const blk_op_names[BLK_OPS] = { "read", "write", "discard", "flush", "other" };

struct blk_entry {
	struct blk_key key;
	uint64_t sectors; /* summed over CPUs at the last read */
	char cgroup[256]; /* "" until resolved */
	uint64_t first_seen_ms, gone_since_ms;
};

struct blk_disk {
	uint32_t dev;
	char name[32];
};

struct blk_state {
	struct blk_bpf *skel;
	struct cgroup_cache *cgroups;
	void *entries; /* tsearch tree of struct blk_entry */
	size_t nentries, in_map;
	struct blk_disk disks[BLK_DISKS_MAX];
	size_t ndisks;
	unsigned int grace_s;
	int ncpus;
	uint64_t last_expiry_ms;
	struct adopt adopt; /* --pin: the maps and links over a restart */
};

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct blk_key));
}

/* "loop0" for the kernel's dev_t of a disk (/sys/dev/block/M:m/uevent), else "M:m". */
static const char *disk_name(struct blk_state *s, uint32_t dev)
{
	unsigned int major = dev >> 20, minor = dev & 0xfffff;
	struct blk_disk *d = NULL;
	char path[64], line[128];
	FILE *f;

	for (size_t i = 0; i < s->ndisks; i++)
		if (s->disks[i].dev == dev)
			return s->disks[i].name;
	if (s->ndisks == BLK_DISKS_MAX)
		s->ndisks = 0; /* start over: names are cheap to read again */
	d = &s->disks[s->ndisks++];
	d->dev = dev;
	snprintf(d->name, sizeof(d->name), "%u:%u", major, minor);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/uevent", major, minor);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "DEVNAME=", 8)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(d->name, sizeof(d->name), "%.*s", (int)sizeof(d->name) - 1,
				 line + 8);
		}
	if (f)
		fclose(f);
	return d->name;
}

static struct blk_entry *entry_get(struct blk_state *s, const struct blk_key *key)
{
	struct blk_entry *e, **found = tfind(key, &s->entries, key_cmp);

	if (found)
		return *found;
	if (s->nentries >= BLK_SECTORS_MAX)
		return NULL; /* cannot happen: the map holds no more */
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key = *key;
	e->first_seen_ms = monotonic_ms();
	if (!tsearch(e, &s->entries, key_cmp)) {
		free(e);
		return NULL;
	}
	s->nentries++;
	return e;
}

static int read_entry(void *ctx, const void *key, const void *value)
{
	struct blk_state *s = ctx;
	const __u64 *percpu = value;
	struct blk_entry *e;
	uint64_t sum = 0;

	for (int c = 0; c < s->ncpus; c++)
		sum += percpu[c];
	e = entry_get(s, key);
	if (e && sum > e->sectors)
		e->sectors = sum;
	return 0;
}

static int blk_read(struct blk_state *s)
{
	long n = map_read_all(s->skel->maps.blk_sectors, read_entry, s);

	if (n < 0)
		return n;
	s->in_map = n;
	return 0;
}

/* Entries of cgroups removed longer than the grace period leave the map and the output. */
static struct blk_entry *expiry_victims[256];
static size_t expiry_n;
static struct blk_state *expiry_state;
static uint64_t expiry_now;

static void expiry_visit(const void *node, VISIT which, int depth)
{
	struct blk_entry *e = *(struct blk_entry *const *)node;
	struct blk_state *s = expiry_state;

	(void)depth;
	if ((which != postorder && which != leaf) || expiry_n == 256)
		return;
	if (!e->cgroup[0]) {
		const char *path =
			cgroup_cache_resolve(s->cgroups, e->key.cgroup_id, BLK_RESOLVE_RESCAN_MS);

		if (path)
			snprintf(e->cgroup, sizeof(e->cgroup), "%s", path);
	}
	if (cgroup_cache_exists(s->cgroups, e->key.cgroup_id) ||
	    (!e->cgroup[0] && expiry_now - e->first_seen_ms < BLK_UNNAMED_MS)) {
		e->gone_since_ms = 0;
		return;
	}
	if (grace_over(&e->gone_since_ms, expiry_now, s->grace_s))
		expiry_victims[expiry_n++] = e;
}

static int blk_tick(struct plumb_module *m)
{
	struct blk_state *s = m->priv;
	uint64_t now = monotonic_ms();
	int fd = bpf_map__fd(s->skel->maps.blk_sectors);

	if (now - s->last_expiry_ms < BLK_EXPIRY_CHECK_MS)
		return 0;
	blk_read(s);
	expiry_state = s;
	expiry_now = now;
	do {
		expiry_n = 0;
		twalk(s->entries, expiry_visit);
		for (size_t i = 0; i < expiry_n; i++) {
			bpf_map_delete_elem(fd, &expiry_victims[i]->key);
			tdelete(expiry_victims[i], &s->entries, key_cmp);
			free(expiry_victims[i]);
			s->nentries--;
		}
	} while (expiry_n == 256);
	s->last_expiry_ms = now;
	return 0;
}

static struct blk_entry **collect_list;
static size_t collect_n;

static void collect_visit(const void *node, VISIT which, int depth)
{
	(void)depth;
	if (which == postorder || which == leaf)
		collect_list[collect_n++] = *(struct blk_entry *const *)node;
}

struct latency_write {
	struct blk_state *s;
	struct prom_writer *w;
	double bounds[BLK_LAT_BUCKETS - 1];
};

static int latency_entry(void *ctx, const void *k, const void *value)
{
	struct latency_write *lw = ctx;
	const struct blk_lat_key *key = k;
	const struct blk_lat *percpu = value;
	uint64_t counts[BLK_LAT_BUCKETS] = { 0 }, sum_ns = 0;
	struct prom_label l[2];

	if (key->op >= BLK_OPS)
		return 0;
	for (int c = 0; c < lw->s->ncpus; c++) {
		for (int k = 0; k < BLK_LAT_BUCKETS; k++)
			counts[k] += percpu[c].count[k];
		sum_ns += percpu[c].sum_ns;
	}
	l[0] = (struct prom_label){ "device", disk_name(lw->s, key->dev) };
	l[1] = (struct prom_label){ "op", blk_op_names[key->op] };
	prom_histogram(lw->w, l, 2, lw->bounds, counts, BLK_LAT_BUCKETS - 1, sum_ns / 1e9);
	return 0;
}

static void collect_latency(struct blk_state *s, struct prom_writer *w)
{
	struct latency_write lw = { .s = s, .w = w };

	for (int k = 0; k < BLK_LAT_BUCKETS - 1; k++)
		lw.bounds[k] = ldexp(1.0, BLK_LAT_MIN_SHIFT + k) / 1e9;
	prom_family(w, "plumb_blk_latency_seconds", PROM_HISTOGRAM,
		    "Latency of the disk's requests, from when the block layer made each one to "
		    "its completion, by op.");
	map_read_all(s->skel->maps.blk_latency, latency_entry, &lw);
}

static int blk_collect(struct plumb_module *m, struct prom_writer *w)
{
	struct blk_state *s = m->priv;
	struct prom_label l[4];
	char workload[256];
	int err = blk_read(s);

	if (err)
		return err;
	collect_list = calloc(s->nentries ? s->nentries : 1, sizeof(*collect_list));
	if (!collect_list)
		return -ENOMEM;
	collect_n = 0;
	twalk(s->entries, collect_visit);
	prom_family(w, "plumb_blk_sectors_total", PROM_COUNTER,
		    "Sectors (512 bytes) the workload's threads submitted to the disk, by op "
		    "(block_bio_queue, in the submitting thread).");
	for (size_t i = 0; i < collect_n; i++) {
		struct blk_entry *e = collect_list[i];
		const char *path;

		if (!e->cgroup[0] && (path = cgroup_cache_resolve(s->cgroups, e->key.cgroup_id,
								  BLK_RESOLVE_RESCAN_MS)))
			snprintf(e->cgroup, sizeof(e->cgroup), "%s", path);
		if (!e->cgroup[0] || e->key.op >= BLK_OPS)
			continue; /* held back until named (or gone unnamed: in no series) */
		workload_from_cgroup(e->cgroup, workload, sizeof(workload));
		l[0] = (struct prom_label){ "cgroup", e->cgroup };
		l[1] = (struct prom_label){ "workload", workload };
		l[2] = (struct prom_label){ "device", disk_name(s, e->key.dev) };
		l[3] = (struct prom_label){ "op", blk_op_names[e->key.op] };
		prom_sample(w, l, 4, e->sectors);
	}
	free(collect_list);
	collect_list = NULL;
	collect_latency(s, w);
	return w->err;
}

int blk_snapshot(struct plumb_module *m, struct blk_sample **out, size_t *n)
{
	struct blk_state *s = m->priv;
	struct blk_sample *v;
	size_t k = 0;
	int err = blk_read(s);

	*out = NULL;
	*n = 0;
	if (err)
		return err;
	collect_list = calloc(s->nentries ? s->nentries : 1, sizeof(*collect_list));
	v = calloc(s->nentries ? s->nentries : 1, sizeof(*v));
	if (!collect_list || !v) {
		free(collect_list);
		free(v);
		collect_list = NULL;
		return -ENOMEM;
	}
	collect_n = 0;
	twalk(s->entries, collect_visit); /* by (cgroup, disk, op): ops of one pair adjacent */
	for (size_t i = 0; i < collect_n; i++) {
		struct blk_entry *e = collect_list[i];
		const char *path;

		if (!e->cgroup[0] && (path = cgroup_cache_resolve(s->cgroups, e->key.cgroup_id,
								  BLK_RESOLVE_RESCAN_MS)))
			snprintf(e->cgroup, sizeof(e->cgroup), "%s", path);
		if (k && v[k - 1].cgroup_id == e->key.cgroup_id &&
		    !strcmp(v[k - 1].device, disk_name(s, e->key.dev))) {
			v[k - 1].sectors += e->sectors;
			continue;
		}
		v[k].cgroup_id = e->key.cgroup_id;
		snprintf(v[k].cgroup, sizeof(v[k].cgroup), "%s", e->cgroup);
		snprintf(v[k].device, sizeof(v[k].device), "%s", disk_name(s, e->key.dev));
		v[k++].sectors = e->sectors;
	}
	free(collect_list);
	collect_list = NULL;
	*out = v;
	*n = k;
	return 0;
}

int blk_thread_snapshot(struct plumb_module *m, struct blk_thread_sample **out, size_t *n)
{
	struct blk_state *s = m->priv;
	struct blk_thread_record recs[64];
	struct blk_thread_sample *v = NULL, *t;
	size_t cap = 0, k = 0;
	ssize_t got;
	int fd, err;

	*out = NULL;
	*n = 0;
	fd = bpf_iter_create(bpf_link__fd(s->skel->links.blk_threads_read));
	if (fd < 0)
		return -errno;
	while ((got = read(fd, recs, sizeof(recs))) > 0)
		for (size_t i = 0; i < (size_t)got / sizeof(recs[0]); i++) {
			if (k == cap) {
				t = realloc(v, (cap = cap ? 2 * cap : 256) * sizeof(*v));
				if (!t) {
					free(v);
					close(fd);
					return -ENOMEM;
				}
				v = t;
			}
			t = &v[k++];
			t->tid = recs[i].tid;
			t->pid = recs[i].pid;
			t->start_ns = recs[i].start_ns;
			snprintf(t->device, sizeof(t->device), "%s", disk_name(s, recs[i].dev));
			t->read = recs[i].read;
			t->write = recs[i].write;
		}
	err = got < 0 ? -errno : 0;
	close(fd);
	if (err) {
		free(v);
		return err;
	}
	*out = v;
	*n = k;
	return 0;
}

static void blk_health(struct plumb_module *m, struct module_health *h)
{
	struct blk_state *s = m->priv;
	static const char *const reasons[BLK_LOST_REASONS] = {
		"sectors_full",	     "latency_full",	    "no_start_time",
		"thread_disks_full", "thread_storage_full",
	};
	uint64_t lost[BLK_LOST_REASONS];

	h->nmaps = h->nlost = 0;
	percpu_counters_sum(bpf_map__fd(s->skel->maps.blk_lost), BLK_LOST_REASONS, lost);
	for (__u32 r = 0; r < BLK_LOST_REASONS; r++)
		health_add_lost(h, reasons[r], lost[r]);
	health_add_map(h, "blk_sectors", s->in_map, BLK_SECTORS_MAX);
	health_add_map(h, "blk_latency", map_count(s->skel->maps.blk_latency), BLK_LAT_MAX);
	h->obj = s->skel->obj;
}

static void free_entry(void *p)
{
	free(p);
}

static void blk_unload(struct plumb_module *m)
{
	struct blk_state *s = m->priv;

	if (!s)
		return;
	if (s->skel)
		links_destroy_parallel((struct bpf_link **)&s->skel->links,
				       sizeof(s->skel->links) / sizeof(struct bpf_link *));
	blk_bpf__destroy(s->skel);
	cgroup_cache_free(s->cgroups);
	tdestroy(s->entries, free_entry);
	free(s);
	m->priv = NULL;
}

static int blk_load(struct plumb_module *m, const struct plumb_config *cfg)
{
	struct blk_state *s;
	int err;

	m->nattach = 0;
	m->choice[0] = '\0';
	if (!kernel_has(FEAT_TP_BTF) || !kernel_has(FEAT_CURRENT_TASK_BTF)) {
		snprintf(m->error, sizeof(m->error),
			 "the kernel lacks tp_btf programs or bpf_get_current_task_btf() (5.11)");
		return -EOPNOTSUPP;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	m->priv = s;
	s->grace_s = cfg->cgroup_grace_s;
	s->ncpus = libbpf_num_possible_cpus();
	s->cgroups = cgroup_cache_new(cfg->cgroup_root, BLK_CGROUPS_MAX);
	if (s->ncpus <= 0 || !s->cgroups) {
		err = -ENOMEM;
		snprintf(m->error, sizeof(m->error), "out of memory");
		goto out_unload;
	}
	s->skel = blk_bpf__open();
	if (!s->skel) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open BPF object: %s", strerror(-err));
		goto out_unload;
	}
	module_attach_note(m, "tp_btf/block_bio_queue", "blk_bio_queue", "chosen");
	module_attach_note(m, "tp_btf/block_rq_complete", "blk_rq_complete", "chosen");
	module_attach_note(m, "iter/task", "blk_threads_read", "chosen");
	snprintf(m->choice, sizeof(m->choice),
		 "sectors at block_bio_queue (the submitting thread's cgroup); request latency "
		 "at block_rq_complete from the request's start time");
	err = adopt_maps(&s->adopt, cfg->pin, m->name, s->skel->skeleton, s->skel->maps.plumb_gate,
			 &s->skel->rodata->plumb_generation, m->error, sizeof(m->error));
	if (err)
		goto out_unload;
	err = blk_bpf__load(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot load BPF programs: %s",
			 strerror(-err));
		goto out_unload;
	}
	err = blk_bpf__attach(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot attach to block tracepoints: %s",
			 strerror(-err));
		goto out_unload;
	}
	module_attach_settle(m, true);
	err = adopt_activate(&s->adopt, s->skel->maps.plumb_gate, m->error, sizeof(m->error));
	if (err)
		goto out_unload;
	m->adopted = s->adopt.adopted;
	s->last_expiry_ms = monotonic_ms();
	return 0;

out_unload:
	module_attach_settle(m, false);
	blk_unload(m);
	return err;
}

static int blk_hand_over(struct plumb_module *m)
{
	struct blk_state *s = m->priv;

	return adopt_hand_over(&s->adopt, s->skel->skeleton);
}

struct plumb_module blk_module = {
	.name = "blk",
	.summary = "per workload and disk: sectors submitted; per disk: request latency",
	.load = blk_load,
	.tick = blk_tick,
	.collect = blk_collect,
	.health = blk_health,
	.unload = blk_unload,
	.hand_over = blk_hand_over,
	.maps_hold_all = true,
};
