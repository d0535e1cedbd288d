// SPDX-License-Identifier: GPL-2.0
/*
 * netstack module, user space: loads bpf/netstack.bpf.c, reads the per-component latency
 * histograms of sampled packets, names devices and network namespaces, and every second
 * judges each component against its baseline (analysis/bottleneck.h). Exports
 * plumb_netstack_latency_seconds and plumb_netstack_bottleneck.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <json-c/json.h>
#include <linux/types.h>

#include "adopt.h"
#include "clock.h"
#include "detach.h"
#include "host.h"
#include "log.h"
#include "plumb.h"
#include "probe.h"
#include "window.h"
#include "export/prom.h"
#include "identity/cgroup.h"
#include "identity/netns.h"
#include "identity/workload.h"
#include "netstack.h"
#include "modules/netstack_module.h"
#include "netstack.skel.h"

#define NETSTACK_INTERVAL_MS 1000
#define NETSTACK_NAMES_MAX   1024 /* (netns, ifindex) names kept */
#define NETSTACK_RENAME_MS   5000 /* an unnamed device is looked up again this often */
#define NETSTACK_RESCAN_MS   1000 /* an unknown cgroup rescans the tree at most this often */
/*
 * Attach windows (cfg->netstack_window > 1): the programs follow new packets for
 * NETSTACK_WINDOW_NS, then those already followed for NETSTACK_DRAIN_NS more, then go.
 */
#define NETSTACK_WINDOW_NS    1000000000ull
#define NETSTACK_DRAIN_NS     100000000ull
#define NETSTACK_WINDOWED_MAX 16

const char *const netstack_component_names[NS_COMPONENTS] = {
	"send",	   "qdisc",   "driver",	  "crossing", "softirq",
	"backlog", "forward", "protocol", "socket",
};

const char *const netstack_component_direction[NS_COMPONENTS] = {
	"tx", "tx", "tx", "tx", "rx", "rx", "forward", "rx", "rx",
};

struct netstack_name {
	uint32_t netns, ifindex;
	char device[32], netns_name[64];
	bool named;
	uint64_t tried_ms;
};

/* A recorded baseline, applied to the series of that name when it appears. */
struct netstack_recorded {
	char component[16], device[32], netns[64], workload[128];
	struct bn_hist base;
	double samples;
	struct bn_spread p50, mean; /* absent in a recording: 0 (unknown) */
};

struct netstack_state {
	struct netstack_bpf *skel;
	int ncpus;
	uint32_t own_netns;
	struct netstack_series *series;
	size_t nseries;
	struct netstack_name names[NETSTACK_NAMES_MAX];
	size_t nnames;
	int bottleneck;
	uint64_t last_interval_ms;
	struct netstack_recorded *recorded;
	size_t nrecorded;
	struct bn_config cfg;
	struct cgroup_cache *cgroups; /* NULL: workloads not named */
	unsigned int grace_s; /* a removed cgroup's series stay this long */
	/*
	 * The LRU maps' entries and evictions (enum netstack_lru_map), counted at most every
	 * count_every_ms (NETSTACK_COUNT_MS; tests only: PLUMB_TEST_LRU_COUNT_MS)
	 */
	uint64_t counted_ms, count_every_ms, entries[NS_MAPS], evicted[NS_MAPS];
	bool steal; /* the kernel keeps hypervisor steal apart (FEAT_STEAL) */
	uint64_t steal_checked_ms;
	struct adopt adopt; /* --pin: the maps and links over a restart */
	struct netstack_window *win; /* NULL: the programs stay attached */
	uint64_t windows_seen; /* the last window the tick closed an interval for */
	uint64_t loaded_ns; /* when the programs were first attached */
};

/*
 * The programs attached for a window of every period, from a thread of their own
 * (docs/netstack.md section 5): every tracepoint program, the release hook staying. A window
 * attaches the programs with window_closing set and clears it once all are attached; after
 * NETSTACK_WINDOW_NS it sets it again, so that only packets already followed go on, and after
 * NETSTACK_DRAIN_NS detaches them all, advances window_gen and empties the maps, counting
 * what was still on its way as window_edge. The module's tick then closes an interval, and
 * the next window waits for it. The counts that outlive an agent are in .bss (window_*).
 */
struct netstack_window {
	pthread_t thread;
	bool started; /* at the first tick: after the agent dropped its capabilities */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* stop was set, or the tick took a window */
	bool stop;
	struct netstack_bpf *skel;
	uint64_t period_ns, rng;
	size_t n;
	struct bpf_program *progs[NETSTACK_WINDOWED_MAX];
	struct bpf_link **links[NETSTACK_WINDOWED_MAX]; /* their places in the skeleton */
	/* under lock */
	uint64_t open_since; /* the current window's follow began (monotonic ns); 0: none */
	uint64_t closing_at; /* and when it stopped following new packets (0: not yet) */
	uint64_t last_ns; /* the last ended window's time following new packets */
	uint64_t taken; /* window_ended when the tick last closed an interval */
};

/*
 * Counting reads every entry (in batches: 65,536 of ns_pkts are ~2 MB), so the counts are
 * refreshed at most this often, not at every scrape. Tests only: PLUMB_TEST_LRU_COUNT_MS sets
 * another period (test_netstack's eviction test, which would otherwise wait 10 s for it).
 */
#define NETSTACK_COUNT_MS 10000

static uint32_t netns_inode(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (uint32_t)st.st_ino;
}

struct name_job {
	uint32_t ifindex;
	char *out;
};

static int name_in_netns(void *arg)
{
	struct name_job *j = arg;
	char buf[IF_NAMESIZE];

	if (!if_indextoname(j->ifindex, buf))
		return -errno;
	snprintf(j->out, 32, "%s", buf);
	return 0;
}

/* A path to a namespace file with that inode: /run/netns/NAME, or some process's. */
static bool netns_find(uint32_t ino, char *path, size_t len, char *label, size_t labellen)
{
	DIR *d = opendir("/run/netns");
	struct dirent *e;
	bool found = false;

	while (d && (e = readdir(d)) && !found) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, len, "/run/netns/%s", e->d_name);
		if (netns_inode(path) == ino) {
			snprintf(label, labellen, "%.63s", e->d_name);
			found = true;
		}
	}
	if (d)
		closedir(d);
	d = found ? NULL : opendir("/proc");
	while (d && (e = readdir(d)) && !found) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, len, "/proc/%s/ns/net", e->d_name);
		if (netns_inode(path) == ino) {
			snprintf(label, labellen, "%u", ino);
			found = true;
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* Names (netns, ifindex) once; an unnamed one is tried again every NETSTACK_RENAME_MS. */
static struct netstack_name *name_of(struct netstack_state *s, uint32_t netns, uint32_t ifindex)
{
	struct netstack_name *n = NULL;
	char path[300], label[64] = "", err[256];
	struct netns ns;
	struct name_job job;
	uint64_t now = monotonic_ms();

	for (size_t i = 0; i < s->nnames && !n; i++)
		if (s->names[i].netns == netns && s->names[i].ifindex == ifindex)
			n = &s->names[i];
	if (!n) {
		if (s->nnames == NETSTACK_NAMES_MAX)
			s->nnames = 0; /* start over: names are cheap to find again */
		n = &s->names[s->nnames++];
		memset(n, 0, sizeof(*n));
		n->netns = netns;
		n->ifindex = ifindex;
	}
	if (n->named || (n->tried_ms && now - n->tried_ms < NETSTACK_RENAME_MS))
		return n;
	n->tried_ms = now;
	snprintf(n->device, sizeof(n->device), "%u", ifindex);
	snprintf(n->netns_name, sizeof(n->netns_name), "%u", netns);
	job.ifindex = ifindex;
	job.out = n->device;
	if (netns == s->own_netns) {
		snprintf(n->netns_name, sizeof(n->netns_name), "host");
		n->named = !name_in_netns(&job);
		return n;
	}
	if (!netns_find(netns, path, sizeof(path), label, sizeof(label)))
		return n;
	snprintf(n->netns_name, sizeof(n->netns_name), "%s", label);
	if (netns_open(path, &ns, err, sizeof(err)))
		return n;
	n->named = !netns_run(&ns, name_in_netns, &job);
	netns_close(&ns);
	return n;
}

static struct netstack_series *series_get(struct netstack_state *s, const struct netstack_key *k)
{
	struct netstack_series *x;

	for (size_t i = 0; i < s->nseries; i++)
		if (s->series[i].netns == k->netns && s->series[i].ifindex == k->ifindex &&
		    s->series[i].component == k->component && s->series[i].cgroup == k->cgroup)
			return &s->series[i];
	if (s->nseries == NETSTACK_HISTS_MAX)
		return NULL; /* the kernel map holds no more */
	x = &s->series[s->nseries++];
	memset(x, 0, sizeof(*x));
	x->netns = k->netns;
	x->ifindex = k->ifindex;
	x->component = k->component;
	x->cgroup = k->cgroup;
	return x;
}

/* The series' workload, once its cgroup resolves. */
static void series_name_workload(struct netstack_state *s, struct netstack_series *x)
{
	const char *path;

	if (!x->cgroup || x->cgroup_path[0] || !s->cgroups)
		return;
	path = cgroup_cache_resolve(s->cgroups, x->cgroup, NETSTACK_RESCAN_MS);
	if (!path)
		return;
	snprintf(x->cgroup_path, sizeof(x->cgroup_path), "%s", path);
	workload_from_cgroup(x->cgroup_path, x->workload, sizeof(x->workload));
}

/*
 * A removed cgroup's series go after the grace period, from the kernel's map too (else
 * workloads that come and go would fill its 4,096 entries); a sample after that starts a new
 * series.
 */
static void series_expire(struct netstack_state *s, uint64_t now)
{
	int fd = bpf_map__fd(s->skel->maps.ns_hists);

	for (size_t i = 0; i < s->nseries; i++) {
		struct netstack_series *x = &s->series[i];
		struct netstack_key k = { .netns = x->netns,
					  .ifindex = x->ifindex,
					  .component = x->component,
					  .cgroup = x->cgroup };

		if (!x->cgroup || !s->cgroups)
			continue;
		if (cgroup_cache_exists(s->cgroups, x->cgroup) == 1) {
			x->gone_since_ms = 0;
			continue;
		}
		if (!grace_over(&x->gone_since_ms, now, s->grace_s))
			continue;
		bpf_map_delete_elem(fd, &k);
		bn_component_free(&x->bn);
		*x = s->series[--s->nseries];
		i--;
	}
}

/* A series that has no baseline yet takes the recording's of the same name, if any. */
static void recorded_apply(struct netstack_state *s, struct netstack_series *x)
{
	if (x->bn.ready || x->bn.warm_intervals)
		return;
	for (size_t i = 0; i < s->nrecorded; i++) {
		const struct netstack_recorded *r = &s->recorded[i];

		if (!strcmp(netstack_component_names[x->component], r->component) &&
		    !strcmp(x->device, r->device) && !strcmp(x->netns_name, r->netns) &&
		    !strcmp(x->workload, r->workload)) {
			bn_component_load(&x->bn, &r->base, r->samples, r->p50, r->mean);
			return;
		}
	}
}

struct interval_read {
	struct netstack_state *s;
	struct bn_hist *cur;
};

/* One series' histogram: its interval is what was added since the last read. */
static int interval_entry(void *ctx, const void *k, const void *value)
{
	struct interval_read *r = ctx;
	struct netstack_state *s = r->s;
	const struct netstack_hist *percpu = value;
	const struct netstack_key *key = k;
	struct bn_hist now_total = { 0 }, *cur;
	const struct netstack_name *n;
	struct netstack_series *x;

	if (key->component >= NS_COMPONENTS)
		return 0;
	x = series_get(s, key);
	if (!x)
		return 0;
	for (int c = 0; c < s->ncpus; c++) {
		for (int b = 0; b < NETSTACK_BUCKETS; b++)
			now_total.count[b] += percpu[c].count[b];
		now_total.sum_ns += percpu[c].sum_ns;
	}
	/* counters only grow */
	cur = &r->cur[x - s->series];
	for (int b = 0; b < NETSTACK_BUCKETS; b++)
		cur->count[b] = fmax(0, now_total.count[b] - x->total.count[b]);
	cur->sum_ns = fmax(0, now_total.sum_ns - x->total.sum_ns);
	x->total = now_total;
	n = name_of(s, key->netns, key->ifindex);
	snprintf(x->device, sizeof(x->device), "%s", n->device);
	snprintf(x->netns_name, sizeof(x->netns_name), "%s", n->netns_name);
	series_name_workload(s, x);
	recorded_apply(s, x);
	return 0;
}

/* An interval of secs seconds of the programs' time (0: the first read, which judges nothing). */
static int interval_close(struct plumb_module *m, double secs)
{
	struct netstack_state *s = m->priv;
	struct bn_hist *cur;
	uint64_t now = monotonic_ms();

	cur = calloc(NETSTACK_HISTS_MAX, sizeof(*cur));
	if (!cur)
		return -ENOMEM;
	series_expire(s, now);
	map_read_all(s->skel->maps.ns_hists, interval_entry, &(struct interval_read){ s, cur });
	for (size_t i = 0; i < s->nseries; i++) {
		s->series[i].last = cur[i];
		s->series[i].rate = secs > 0 ? bn_hist_total(&cur[i]) / secs : 0;
	}
	/* the first read only sets the totals: its interval began before the programs */
	if (s->last_interval_ms) {
		struct bn_component *bn = calloc(s->nseries ? s->nseries : 1, sizeof(*bn));

		if (bn) {
			for (size_t i = 0; i < s->nseries; i++)
				bn[i] = s->series[i].bn;
			s->bottleneck = bn_interval(bn, cur, s->nseries, &s->cfg);
			for (size_t i = 0; i < s->nseries; i++)
				s->series[i].bn = bn[i];
			free(bn);
		}
	}
	s->last_interval_ms = now;
	free(cur);
	return 0;
}

int netstack_interval(struct plumb_module *m)
{
	struct netstack_state *s = m->priv;

	return interval_close(
		m, s->last_interval_ms ? (monotonic_ms() - s->last_interval_ms) / 1e3 : 0);
}

size_t netstack_series(struct plumb_module *m, const struct netstack_series **out, int *bottleneck)
{
	struct netstack_state *s = m->priv;

	*out = s->series;
	*bottleneck = s->bottleneck;
	return s->nseries;
}

/*
 * Steal inside receive processing (the BPF side's steal_on) is followed from the first check
 * that finds the host has had some: /proc/stat once a second until then.
 */
static void steal_check(struct netstack_state *s, uint64_t now)
{
	if (!s->steal || s->skel->bss->steal_on || now - s->steal_checked_ms < 1000)
		return;
	s->steal_checked_ms = now;
	if (host_stolen())
		__atomic_store_n(&s->skel->bss->steal_on, 1, __ATOMIC_RELAXED);
}

/* Waits until monotonic time t (ns) or stop; true when stopped. */
static bool window_wait(struct netstack_window *w, uint64_t t)
{
	return window_wait_until(&w->lock, &w->cond, &w->stop, t);
}

/* Waits until the tick has closed the last window's interval, or stop; true when stopped. */
static bool window_wait_taken(struct netstack_window *w)
{
	bool stop;

	pthread_mutex_lock(&w->lock);
	while (!w->stop &&
	       w->taken != __atomic_load_n(&w->skel->bss->window_ended, __ATOMIC_RELAXED))
		pthread_cond_wait(&w->cond, &w->lock);
	stop = w->stop;
	pthread_mutex_unlock(&w->lock);
	return stop;
}

struct sweep {
	int fd;
	uint32_t map;
	__u64 *swept; /* .bss's count for the map */
	uint64_t edge;
};

/*
 * An entry left when its window's programs went: deleted, a sample on its way counted. The
 * delete is counted before it is made, so that an eviction count meanwhile (lru_count) never
 * takes it for an eviction (it may miss one for that instant instead).
 */
static int sweep_entry(void *ctx, const void *k, const void *value)
{
	struct sweep *sw = ctx;

	if (sw->map == NS_MAP_PKTS) {
		const struct netstack_pkt *p = value;

		/*
		 * as pkt_drop(): past these stages a packet has had its last component, but for a
		 * UDP datagram on its way to its socket's sk_data_ready
		 */
		if ((p->stage == NS_ST_RECEIVE && p->udp) ||
		    (p->stage != NS_ST_PROBE && p->stage != NS_ST_RECEIVE &&
		     p->stage != NS_ST_SENT))
			sw->edge++;
	} else if (sw->map == NS_MAP_SENDS) {
		sw->edge += ((const struct netstack_send *)value)->n;
	} else {
		const struct netstack_recv *r = value;

		for (uint32_t i = 0; i < r->n && i < NETSTACK_SEND_SLOTS; i++)
			sw->edge += r->weight[i];
	}
	__atomic_add_fetch(sw->swept, 1, __ATOMIC_RELAXED);
	if (bpf_map_delete_elem(sw->fd, k))
		__atomic_sub_fetch(sw->swept, 1, __ATOMIC_RELAXED);
	return 0;
}

static void window_detach(struct netstack_window *w)
{
	struct bpf_link *links[NETSTACK_WINDOWED_MAX];

	for (size_t i = 0; i < w->n; i++)
		links[i] = *w->links[i];
	links_destroy_parallel(links, w->n);
	for (size_t i = 0; i < w->n; i++)
		*w->links[i] = NULL;
}

/*
 * Detaches the window's programs and empties the maps (nothing runs that could add to them;
 * the release hook touches socket storage only). window_gen advances before any program runs
 * again: a UDP socket's slots of this window are stale from now (their reads go unseen).
 */
static void window_close(struct netstack_window *w)
{
	struct bpf_map *maps[NS_MAPS] = { w->skel->maps.ns_pkts, w->skel->maps.ns_sends,
					  w->skel->maps.ns_recvs };
	struct netstack_bpf__bss *bss = w->skel->bss;
	uint64_t edge = 0, followed, from, t0 = monotonic_ns(), t1;

	window_detach(w);
	t1 = monotonic_ns();
	__atomic_add_fetch(&bss->window_gen, 1, __ATOMIC_RELAXED);
	for (uint32_t m = 0; m < NS_MAPS; m++) {
		struct sweep sw = { .fd = bpf_map__fd(maps[m]),
				    .map = m,
				    .swept = &bss->window_swept[m] };

		if (map_read_all(maps[m], sweep_entry, &sw) < 0)
			pr_debug("netstack: cannot empty %s after a window\n",
				 bpf_map__name(maps[m]));
		edge += sw.edge;
	}
	pthread_mutex_lock(&w->lock);
	followed = w->closing_at - w->open_since;
	from = w->open_since;
	w->last_ns = followed;
	w->open_since = w->closing_at = 0;
	pthread_mutex_unlock(&w->lock);
	__atomic_add_fetch(&bss->window_edge, edge, __ATOMIC_RELAXED);
	__atomic_add_fetch(&bss->window_followed_ns, followed, __ATOMIC_RELAXED);
	__atomic_add_fetch(&bss->window_ended, 1, __ATOMIC_RELAXED); /* last: the tick's cue */
	/* the span in CLOCK_MONOTONIC seconds: test_netstack's ground truth reads it */
	pr_debug("netstack: window followed new packets from %.6f to %.6f s; detached at %.6f s "
		 "(in %.1f ms), maps emptied in %.1f ms (%llu samples on their way)\n",
		 from / 1e9, (from + followed) / 1e9, t1 / 1e9, (t1 - t0) / 1e6,
		 (monotonic_ns() - t1) / 1e6, (unsigned long long)edge);
}

/*
 * A new window's programs attached, window_closing set until all are (so that no sample
 * starts before the rest are there): false, nothing left attached, when one cannot be.
 */
static bool window_open(struct netstack_window *w, bool *warned)
{
	struct netstack_bpf__bss *bss = w->skel->bss;
	uint64_t t0 = monotonic_ns(), since;
	size_t i;
	int err = 0;

	for (i = 0; i < w->n && !err; i++) {
		*w->links[i] = bpf_program__attach(w->progs[i]);
		if (!*w->links[i])
			err = -errno;
	}
	if (err) {
		if (!*warned)
			pr_warn("netstack: a window cannot attach %s: %s (counted in "
				"plumb_netstack_windows_failed_total)\n",
				bpf_program__name(w->progs[i - 1]), strerror(-err));
		*warned = true;
		window_detach(w);
		__atomic_add_fetch(&bss->window_failed, 1, __ATOMIC_RELAXED);
		return false;
	}
	pthread_mutex_lock(&w->lock);
	w->open_since = since = monotonic_ns();
	pthread_mutex_unlock(&w->lock);
	__atomic_store_n(&bss->window_closing, 0, __ATOMIC_RELAXED);
	/* CLOCK_MONOTONIC: bench/netstack.py's attached share reads it, test_pin the second */
	pr_debug("netstack: window opened: attaching from %.6f s, %zu programs in %.1f ms; "
		 "following new packets from %.6f s\n",
		 t0 / 1e9, w->n, (since - t0) / 1e6, since / 1e9);
	return true;
}

/*
 * A window a period on average, each after a random gap (a workload that repeats on a beat
 * is seen at every phase of it alike); the first is the load's attach.
 */
static void *window_thread(void *arg)
{
	struct netstack_window *w = arg;
	uint64_t start, opened;
	bool warned = false, open = true;

	pthread_mutex_lock(&w->lock);
	start = opened = w->open_since;
	pthread_mutex_unlock(&w->lock);
	for (;;) {
		if (open) {
			if (window_wait(w, opened + NETSTACK_WINDOW_NS))
				break;
			__atomic_store_n(&w->skel->bss->window_closing, 1, __ATOMIC_RELAXED);
			pthread_mutex_lock(&w->lock);
			w->closing_at = monotonic_ns();
			pthread_mutex_unlock(&w->lock);
			if (window_wait(w, monotonic_ns() + NETSTACK_DRAIN_NS))
				break;
			window_close(w);
		}
		/*
		 * A gap drawn afresh after each window (window_next_start). One offset drawn
		 * inside each period of a fixed grid left a phase near the grid's edges seldom
		 * in a window, and the last drain of each period never.
		 */
		start = window_next_start(start, w->period_ns, NETSTACK_WINDOW_NS,
					  NETSTACK_DRAIN_NS, window_random(&w->rng));
		if (window_wait_taken(w))
			break;
		/* late (the tick took the interval after that, or the process was stopped): now */
		if (monotonic_ns() > start)
			start = monotonic_ns();
		if (window_wait(w, start))
			break;
		open = window_open(w, &warned);
		pthread_mutex_lock(&w->lock);
		opened = w->open_since;
		pthread_mutex_unlock(&w->lock);
	}
	return NULL;
}

/*
 * Stops the thread: the programs stay as they are (attached, and still following packets
 * when stopped inside a window), for unload to destroy or hand_over to pin.
 */
static void window_stop(struct netstack_state *s)
{
	struct netstack_window *w = s->win;

	if (!w)
		return;
	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
	s->win = NULL;
}

/*
 * The windows, once every program is attached: the first is from now. The thread starts at
 * the first tick (window_run), after the agent has dropped its capabilities: a thread keeps
 * those it was started with.
 */
static int window_prepare(struct netstack_state *s, unsigned int every, char *err, size_t errlen)
{
	struct netstack_window *w = calloc(1, sizeof(*w));
	const struct bpf_object_skeleton *sk = s->skel->skeleton;
	pthread_condattr_t attr;

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	w->skel = s->skel;
	w->period_ns = (uint64_t)every * NETSTACK_WINDOW_NS;
	w->rng = (monotonic_ns() ^ ((uint64_t)getpid() << 32)) | 1;
	w->open_since = s->loaded_ns;
	w->taken = s->skel->bss->window_ended; /* --pin: the agent before's */
	for (int i = 0; i < sk->prog_cnt; i++) {
		const struct bpf_prog_skeleton *p =
			(const void *)((const char *)sk->progs + (size_t)i * sk->prog_skel_sz);

		if (!*p->link || p->link == &s->skel->links.ns_udp_release)
			continue;
		if (w->n == NETSTACK_WINDOWED_MAX) {
			snprintf(err, errlen, "more programs than a window takes");
			free(w);
			return -E2BIG;
		}
		w->progs[w->n] = *p->prog;
		w->links[w->n++] = p->link;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &attr);
	pthread_condattr_destroy(&attr);
	s->win = w;
	s->windows_seen = w->taken;
	return 0;
}

/*
 * The tick's part: the thread started (once), and an interval closed for a window that has
 * ended (its samples per second over the time it followed new packets); the next window
 * waits for that.
 */
static int window_run(struct plumb_module *m)
{
	struct netstack_state *s = m->priv;
	struct netstack_window *w = s->win;
	uint64_t ended = __atomic_load_n(&s->skel->bss->window_ended, __ATOMIC_RELAXED), last_ns;
	int rc, err = 0;

	if (!w->started) {
		rc = pthread_create(&w->thread, NULL, window_thread, w);
		if (rc) {
			pr_warn("netstack: cannot start the window thread: %s (the programs stay "
				"attached)\n",
				strerror(rc));
			window_stop(s);
			return 0;
		}
		w->started = true;
	}
	if (ended == s->windows_seen)
		return 0;
	pthread_mutex_lock(&w->lock);
	last_ns = w->last_ns;
	pthread_mutex_unlock(&w->lock);
	s->windows_seen = ended;
	err = interval_close(m, last_ns / 1e9);
	pthread_mutex_lock(&w->lock);
	w->taken = ended;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return err;
}

static int netstack_tick(struct plumb_module *m)
{
	struct netstack_state *s = m->priv;
	uint64_t now = monotonic_ms();

	steal_check(s, now);
	if (s->win) /* with windows an interval is a window: closed once its programs are gone */
		return window_run(m);
	if (now - s->last_interval_ms < NETSTACK_INTERVAL_MS)
		return 0;
	return netstack_interval(m);
}

/*
 * A series' labels: component, direction, device, netns, and the workload and its cgroup
 * where the socket's process is known ("" where not; a cgroup not resolved, gone before it
 * could be, by its id: two series must never share their labels).
 */
static size_t series_labels(const struct netstack_series *x, struct prom_label *l, char *id,
			    size_t idlen)
{
	l[0] = (struct prom_label){ "component", netstack_component_names[x->component] };
	l[1] = (struct prom_label){ "direction", netstack_component_direction[x->component] };
	l[2] = (struct prom_label){ "device", x->device };
	l[3] = (struct prom_label){ "netns", x->netns_name };
	if (x->cgroup && !x->cgroup_path[0])
		snprintf(id, idlen, "id:%llu", (unsigned long long)x->cgroup);
	else
		snprintf(id, idlen, "%s", x->cgroup_path);
	l[4] = (struct prom_label){ "cgroup", id };
	l[5] = (struct prom_label){ "workload", x->workload };
	return 6;
}

/* How long the programs have followed new packets, and the windows. */
static void netstack_collect_windows(struct netstack_state *s, struct prom_writer *w)
{
	const struct netstack_bpf__bss *bss = s->skel->bss;
	uint64_t followed = __atomic_load_n(&bss->window_followed_ns, __ATOMIC_RELAXED);

	if (s->win) {
		struct netstack_window *x = s->win;

		pthread_mutex_lock(&x->lock);
		if (x->open_since) /* the window open now, so far */
			followed +=
				(x->closing_at ? x->closing_at : monotonic_ns()) - x->open_since;
		pthread_mutex_unlock(&x->lock);
	} else {
		followed += monotonic_ns() - s->loaded_ns;
	}
	prom_family(w, "plumb_netstack_followed_seconds_total", PROM_COUNTER,
		    "Time the netstack programs have followed new packets: the latency "
		    "histograms count the packets of this time only (--netstack-window N: the "
		    "first second of a window in every N s).");
	prom_sample(w, NULL, 0, followed / 1e9);
	prom_family(w, "plumb_netstack_windows_total", PROM_COUNTER,
		    "Attach windows ended (their programs detached, each an interval of the "
		    "bottleneck analysis); 0 when the programs stay attached.");
	prom_sample(w, NULL, 0, (double)__atomic_load_n(&bss->window_ended, __ATOMIC_RELAXED));
	prom_family(w, "plumb_netstack_windows_failed_total", PROM_COUNTER,
		    "Attach windows whose programs could not all be attached (the first "
		    "failure is logged).");
	prom_sample(w, NULL, 0, (double)__atomic_load_n(&bss->window_failed, __ATOMIC_RELAXED));
}

static int netstack_collect(struct plumb_module *m, struct prom_writer *w)
{
	struct netstack_state *s = m->priv;
	double bounds[NETSTACK_OCTAVES];
	uint64_t counts[NETSTACK_OCTAVES + 1];
	struct prom_label l[6];
	char id[sizeof(s->series[0].cgroup_path)];
	size_t nl;

	/* exported per octave: le = 2^(7 + k) ns */
	for (int k = 0; k < NETSTACK_OCTAVES; k++)
		bounds[k] = ldexp(1.0, NETSTACK_MIN_SHIFT + k) / 1e9;
	prom_family(w, "plumb_netstack_latency_seconds", PROM_HISTOGRAM,
		    "Time sampled packets spent in a component of the host's network stack "
		    "(docs/netstack.md), by direction, device, network namespace and, where the "
		    "socket's process is known, workload.");
	for (size_t i = 0; i < s->nseries; i++) {
		const struct netstack_series *x = &s->series[i];

		memset(counts, 0, sizeof(counts));
		counts[0] = (uint64_t)x->total.count[0];
		for (int b = 1; b < NETSTACK_BUCKETS; b++)
			counts[(b - 1) / 4 + 1] += (uint64_t)x->total.count[b];
		nl = series_labels(x, l, id, sizeof(id));
		prom_histogram(w, l, nl, bounds, counts, NETSTACK_OCTAVES, x->total.sum_ns / 1e9);
	}
	netstack_collect_windows(s, w);
	prom_family(w, "plumb_netstack_bottleneck", PROM_GAUGE,
		    "1 while the component is the bottleneck: significantly slower than its "
		    "baseline, with the largest share of the increase (docs/netstack.md).");
	for (size_t i = 0; i < s->nseries; i++) {
		nl = series_labels(&s->series[i], l, id, sizeof(id));
		prom_sample(w, l, nl, s->series[i].bn.bottleneck ? 1 : 0);
	}
	return w->err;
}

/*
 * An LRU map full drops its least recently used entries to make room without telling the
 * program; what was inserted, not deleted and is not there was evicted. The counters are read
 * before and after the count, which entries come and go during: inserted before it, minus
 * deleted after it, minus the count, is a bound the evictions have reached (never above them;
 * short of them by at most the deletes during the count), kept rising. The count goes bucket
 * by bucket (map_count): a walk by get_next_key starts over whenever the key it stands on is
 * deleted, which on these busy maps keyed by pointers counts entries twice or never ends.
 */
static void lru_count(struct netstack_state *s)
{
	struct bpf_map *maps[NS_MAPS] = { s->skel->maps.ns_pkts, s->skel->maps.ns_sends,
					  s->skel->maps.ns_recvs };
	int fd = bpf_map__fd(s->skel->maps.ns_churn);
	uint64_t before[NS_MAPS * 2], after[NS_MAPS * 2], swept;

	for (int m = 0; m < NS_MAPS; m++) {
		int64_t evicted;

		percpu_counters_sum(fd, NS_MAPS * 2, before);
		s->entries[m] = map_count(maps[m]);
		percpu_counters_sum(fd, NS_MAPS * 2, after);
		/* user space's deletes after a window, read after the count like the programs' */
		swept = __atomic_load_n(&s->skel->bss->window_swept[m], __ATOMIC_RELAXED);
		evicted = (int64_t)(before[NS_CHURN_INSERT(m)] - after[NS_CHURN_DELETE(m)] - swept -
				    s->entries[m]);
		if (evicted > (int64_t)s->evicted[m])
			s->evicted[m] = (uint64_t)evicted;
	}
}

static void netstack_health(struct plumb_module *m, struct module_health *h)
{
	struct netstack_state *s = m->priv;
	static const char *const reasons[NS_LOST_REASONS] = {
		"unmatched",	   "dropped",		"hists_full",
		"send_slots_full", "socket_slots_full", "socket_storage",
		"socket_closed",   "window_edge_udp",	"udp_unclaimed"
	};
	static const char *const maps[NS_MAPS] = { "ns_pkts", "ns_sends", "ns_recvs" };
	static const char *const evicted[NS_MAPS] = { "ns_pkts_evicted", "ns_sends_evicted",
						      "ns_recvs_evicted" };
	static const uint32_t capacity[NS_MAPS] = { NETSTACK_PKTS_MAX, NETSTACK_SENDS_MAX,
						    NETSTACK_RECVS_MAX };
	uint64_t lost[NS_LOST_REASONS];

	h->nmaps = h->nlost = 0;
	percpu_counters_sum(bpf_map__fd(s->skel->maps.ns_lost), NS_LOST_REASONS, lost);
	for (__u32 r = 0; r < NS_LOST_REASONS; r++)
		health_add_lost(h, reasons[r], lost[r]);
	health_add_lost(h, "window_edge",
			__atomic_load_n(&s->skel->bss->window_edge, __ATOMIC_RELAXED));
	health_add_map(h, "ns_hists", s->nseries, NETSTACK_HISTS_MAX);
	if (!s->counted_ms || monotonic_ms() - s->counted_ms >= s->count_every_ms) {
		lru_count(s);
		s->counted_ms = monotonic_ms();
	}
	for (int i = 0; i < NS_MAPS; i++) {
		health_add_map(h, maps[i], s->entries[i], capacity[i]);
		health_add_lost(h, evicted[i], s->evicted[i]);
	}
	h->obj = s->skel->obj;
}

/* A recording: per series, its baseline distribution (bucket weights), mean and samples. */
int netstack_baseline_write(struct plumb_module *m, const char *path)
{
	struct netstack_state *s = m->priv;
	struct json_object *doc = json_object_new_object(), *list = json_object_new_array();
	int err;

	json_object_object_add(doc, "version", json_object_new_int(1));
	for (size_t i = 0; i < s->nseries; i++) {
		const struct netstack_series *x = &s->series[i];
		struct json_object *o = json_object_new_object(), *v = json_object_new_array();
		const struct bn_hist *h = x->bn.ready ? &x->bn.base : &x->total;
		double t = bn_hist_total(h);

		if (t <= 0) {
			json_object_put(o);
			json_object_put(v);
			continue;
		}
		json_object_object_add(
			o, "component",
			json_object_new_string(netstack_component_names[x->component]));
		json_object_object_add(o, "device", json_object_new_string(x->device));
		json_object_object_add(o, "netns", json_object_new_string(x->netns_name));
		json_object_object_add(o, "workload", json_object_new_string(x->workload));
		json_object_object_add(o, "mean_ns", json_object_new_double(h->sum_ns / t));
		json_object_object_add(
			o, "samples", json_object_new_double(x->bn.ready ? x->bn.base_samples : t));
		/* the intervals' spread around the baseline: learned only (0: not known) */
		json_object_object_add(o, "spread_mu",
				       json_object_new_double(x->bn.ready ? x->bn.spread_mu : 0));
		json_object_object_add(
			o, "spread_sd",
			json_object_new_double(x->bn.ready ? sqrt(x->bn.spread_var) : 0));
		json_object_object_add(o, "mean_spread_mu",
				       json_object_new_double(x->bn.ready ? x->bn.mspread_mu : 0));
		json_object_object_add(
			o, "mean_spread_sd",
			json_object_new_double(x->bn.ready ? sqrt(x->bn.mspread_var) : 0));
		for (int b = 0; b < NETSTACK_BUCKETS; b++)
			json_object_array_add(v, json_object_new_double(h->count[b] / t));
		json_object_object_add(o, "buckets", v);
		json_object_array_add(list, o);
	}
	json_object_object_add(doc, "series", list);
	err = json_object_to_file_ext(path, doc, JSON_C_TO_STRING_PLAIN) ? -EIO : 0;
	json_object_put(doc);
	return err;
}

/*
 * Series are matched by (component, device, network namespace name): a recording's
 * baselines apply to the devices and namespaces of the same names, when they appear.
 */
int netstack_baseline_load(struct plumb_module *m, const char *path, char *err, size_t errlen)
{
	struct netstack_state *s = m->priv;
	struct json_object *doc = json_object_from_file(path), *list;
	size_t n;

	if (!doc || !json_object_object_get_ex(doc, "series", &list) ||
	    !json_object_is_type(list, json_type_array)) {
		snprintf(err, errlen,
			 "--baseline %.200s: not a recording of plumb netstack --record", path);
		json_object_put(doc);
		return -EINVAL;
	}
	n = json_object_array_length(list);
	free(s->recorded);
	s->nrecorded = 0;
	s->recorded = calloc(n ? n : 1, sizeof(*s->recorded));
	if (!s->recorded) {
		json_object_put(doc);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(list, i), *v;
		const char *comp = json_object_get_string(json_object_object_get(o, "component"));
		const char *dev = json_object_get_string(json_object_object_get(o, "device"));
		const char *ns = json_object_get_string(json_object_object_get(o, "netns"));
		const char *wl = json_object_get_string(json_object_object_get(o, "workload"));
		struct netstack_recorded *r = &s->recorded[s->nrecorded];

		if (!comp || !dev || !ns || !json_object_object_get_ex(o, "buckets", &v) ||
		    json_object_array_length(v) != NETSTACK_BUCKETS)
			continue;
		snprintf(r->component, sizeof(r->component), "%s", comp);
		snprintf(r->device, sizeof(r->device), "%s", dev);
		snprintf(r->netns, sizeof(r->netns), "%s", ns);
		snprintf(r->workload, sizeof(r->workload), "%s", wl ? wl : "");
		for (int b = 0; b < NETSTACK_BUCKETS; b++)
			r->base.count[b] = json_object_get_double(json_object_array_get_idx(v, b));
		r->base.sum_ns = json_object_get_double(json_object_object_get(o, "mean_ns"));
		r->samples = json_object_get_double(json_object_object_get(o, "samples"));
		r->p50.mu = json_object_get_double(json_object_object_get(o, "spread_mu"));
		r->p50.sd = fmax(0, json_object_get_double(json_object_object_get(o, "spread_sd")));
		r->mean.mu = json_object_get_double(json_object_object_get(o, "mean_spread_mu"));
		r->mean.sd = fmax(
			0, json_object_get_double(json_object_object_get(o, "mean_spread_sd")));
		if (bn_hist_total(&r->base) > 0 && r->samples > 0)
			s->nrecorded++;
	}
	json_object_put(doc);
	if (!s->nrecorded) {
		snprintf(err, errlen, "--baseline %.200s: the recording has no series", path);
		return -EINVAL;
	}
	return 0;
}

static void netstack_unload(struct plumb_module *m)
{
	struct netstack_state *s = m->priv;

	if (!s)
		return;
	window_stop(s);
	if (s->skel)
		links_destroy_parallel((struct bpf_link **)&s->skel->links,
				       sizeof(s->skel->links) / sizeof(struct bpf_link *));
	netstack_bpf__destroy(s->skel);
	for (size_t i = 0; s->series && i < s->nseries; i++)
		bn_component_free(&s->series[i].bn);
	free(s->series);
	free(s->recorded);
	cgroup_cache_free(s->cgroups);
	free(s);
	m->priv = NULL;
}

static int netstack_load(struct plumb_module *m, const struct plumb_config *cfg)
{
	static const char *const points[][2] = {
		{ "tp_btf/net_dev_queue", "ns_queue" },
		{ "tp_btf/net_dev_start_xmit", "ns_start_xmit" },
		{ "tp_btf/net_dev_xmit", "ns_xmit" },
		{ "tp_btf/netif_rx", "ns_rx" },
		{ "tp_btf/napi_gro_receive_entry", "ns_gro" },
		{ "tp_btf/softirq_entry", "ns_softirq" },
		{ "tp_btf/sched_switch", "ns_switch" },
		{ "tp_btf/netif_receive_skb", "ns_receive" },
		{ "tp_btf/tcp_probe", "ns_probe" },
		{ "tp_btf/skb_copy_datagram_iovec", "ns_copy" },
		{ "tp_btf/kfree_skb", "ns_kfree" },
	};
	struct netstack_state *s;
	bool udp_on;
	int err;

	m->nattach = 0;
	m->choice[0] = '\0';
	if (!kernel_has(FEAT_TP_BTF)) {
		snprintf(m->error, sizeof(m->error), "the kernel lacks tp_btf programs (5.5)");
		return -EOPNOTSUPP;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	m->priv = s;
	s->bottleneck = -1;
	s->cfg = bn_default_config;
	s->ncpus = libbpf_num_possible_cpus();
	s->own_netns = netns_inode("/proc/self/ns/net");
	s->series = calloc(NETSTACK_HISTS_MAX, sizeof(*s->series));
	s->grace_s = cfg->cgroup_grace_s;
	s->count_every_ms = NETSTACK_COUNT_MS;
	if (getenv("PLUMB_TEST_LRU_COUNT_MS")) {
		const char *v = getenv("PLUMB_TEST_LRU_COUNT_MS");
		char *end;
		unsigned long long ms = strtoull(v, &end, 10);

		if (*v >= '0' && *v <= '9' && !*end && ms > 0 && ms <= NETSTACK_COUNT_MS)
			s->count_every_ms = ms; /* else ignored: a test's typo counts as usual */
	}
	if (cfg->cgroup_root)
		s->cgroups = cgroup_cache_new(cfg->cgroup_root, NETSTACK_HISTS_MAX);
	if (s->ncpus <= 0 || !s->series || (cfg->cgroup_root && !s->cgroups)) {
		err = -ENOMEM;
		snprintf(m->error, sizeof(m->error), "out of memory");
		goto out_unload;
	}
	s->skel = netstack_bpf__open();
	if (!s->skel) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open BPF object: %s", strerror(-err));
		goto out_unload;
	}
	s->skel->rodata->sample_every = cfg->netstack_sample ? cfg->netstack_sample : 1;
	s->skel->rodata->send_on = tracepoint_btf_args("tcp_sendmsg_locked") >= 3;
	bpf_program__set_autoload(s->skel->progs.ns_sendmsg, s->skel->rodata->send_on);
	udp_on = tracepoint_btf_args("sk_data_ready") >= 1 &&
		 tracepoint_btf_args("sock_recv_length") >= 3;
	s->skel->rodata->udp_claims = udp_on;
	bpf_program__set_autoload(s->skel->progs.ns_data_ready, udp_on);
	bpf_program__set_autoload(s->skel->progs.ns_recv_length, udp_on);
	bpf_program__set_autoload(s->skel->progs.ns_udp_release, udp_on && cfg->cgroup_root);
	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
		module_attach_note(m, points[i][0], points[i][1], "chosen");
	if (s->skel->rodata->send_on)
		module_attach_note(m, "tp_btf/tcp_sendmsg_locked", "ns_sendmsg", "chosen");
	else
		module_attach_note(m, "tp_btf/tcp_sendmsg_locked", "ns_sendmsg",
				   "missing: no send component (the tracepoint came in 6.18)");
	if (udp_on) {
		module_attach_note(m, "tp_btf/sk_data_ready", "ns_data_ready", "chosen");
		module_attach_note(m, "tp_btf/sock_recv_length", "ns_recv_length", "chosen");
		module_attach_note(m, "cgroup/sock_release", "ns_udp_release",
				   cfg->cgroup_root ? "chosen" :
						      "missing: no cgroup2 mount (samples of "
						      "datagrams never read go uncounted)");
	} else {
		module_attach_note(
			m, "tp_btf/sk_data_ready", "ns_data_ready",
			"missing: UDP ends at netif_receive_skb (the tracepoint came in 6.6)");
	}
	snprintf(m->choice, sizeof(m->choice),
		 "sampled packets (1 in %u flows) followed by skb pointer from net_dev_queue to "
		 "the application's copy%s",
		 s->skel->rodata->sample_every,
		 cfg->netstack_window > 1 ? ", in a 1 s window of every period" : "");
	/* --pin: the maps of the agent before, its programs still following packets in them */
	err = adopt_maps(&s->adopt, cfg->pin, m->name, s->skel->skeleton, s->skel->maps.plumb_gate,
			 &s->skel->rodata->plumb_generation, m->error, sizeof(m->error));
	if (err)
		goto out_unload;
	err = netstack_bpf__load(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot load BPF programs: %s",
			 strerror(-err));
		goto out_unload;
	}
	s->steal = kernel_has(FEAT_STEAL);
	steal_check(s, monotonic_ms());
	if (s->skel->bss->window_closing) {
		/*
		 * --pin: the agent before stopped between its windows or in a drain (its .bss is
		 * this one's): follow new packets again; what its sockets' slots hold is stale
		 */
		s->skel->bss->window_closing = 0;
		s->skel->bss->window_gen++;
	}
	err = netstack_bpf__attach(s->skel);
	if (!err && udp_on && cfg->cgroup_root) {
		s->skel->links.ns_udp_release =
			attach_root_cgroup(s->skel->progs.ns_udp_release, cfg->cgroup_root);
		if (!s->skel->links.ns_udp_release)
			err = -errno;
	}
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot attach its programs: %s",
			 strerror(-err));
		goto out_unload;
	}
	s->loaded_ns = monotonic_ns();
	if (s->skel->bss->window_handed_at) {
		/* --pin: the agent before's programs followed new packets until this attach */
		s->skel->bss->window_followed_ns += s->loaded_ns - s->skel->bss->window_handed_at;
		pr_debug("netstack: followed new packets from the hand-over at %.6f s to %.6f s\n",
			 s->skel->bss->window_handed_at / 1e9, s->loaded_ns / 1e9);
		s->skel->bss->window_handed_at = 0;
	}
	module_attach_settle(m, true);
	/* the programs follow packets from here (with --pin: the old ones stop in this write) */
	err = adopt_activate(&s->adopt, s->skel->maps.plumb_gate, m->error, sizeof(m->error));
	if (!err && cfg->netstack_window > 1)
		err = window_prepare(s, cfg->netstack_window, m->error, sizeof(m->error));
	if (err)
		goto out_unload;
	m->adopted = s->adopt.adopted;
	netstack_interval(m); /* the totals at attach: the first interval starts here */
	return 0;

out_unload:
	module_attach_settle(m, false);
	netstack_unload(m);
	return err;
}

static int netstack_hand_over(struct plumb_module *m)
{
	struct netstack_state *s = m->priv;
	uint64_t since = s->loaded_ns, until = monotonic_ns();
	bool following = true;

	if (s->win) { /* the window open now, if any, so far */
		pthread_mutex_lock(&s->win->lock);
		following = s->win->open_since && !s->win->closing_at;
		since = s->win->open_since ? s->win->open_since : until;
		until = s->win->closing_at ? s->win->closing_at : until;
		pthread_mutex_unlock(&s->win->lock);
	}
	window_stop(s); /* the links as they are now are what is handed */
	/* the time followed so far, for the next agent's count; and from when they go on */
	__atomic_add_fetch(&s->skel->bss->window_followed_ns, until - since, __ATOMIC_RELAXED);
	s->skel->bss->window_handed_at = following ? until : 0;
	pr_debug("netstack: handed over at %.6f s, %s\n", until / 1e9,
		 following ? "following new packets (until the next agent's attach)" :
			     "between windows");
	return adopt_hand_over(&s->adopt, s->skel->skeleton);
}

struct plumb_module netstack_module = {
	.name = "netstack",
	.summary = "per component of the network stack, device and netns: packet latency, "
		   "and the bottleneck",
	.load = netstack_load,
	.tick = netstack_tick,
	.collect = netstack_collect,
	.health = netstack_health,
	.unload = netstack_unload,
	.hand_over = netstack_hand_over,
	/* the histograms and every loss are the maps' counts (evictions from their counters) */
	.maps_hold_all = true,
};
