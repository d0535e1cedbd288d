// SPDX-License-Identifier: GPL-2.0
/*
 * plumb top: one live view of the host, per workload: CPU, run queue, blocked time, waits by
 * kind, file I/O, network bytes to peers, and the network stack's bottleneck. It loads the
 * wait (with sched), io, flow and netstack modules itself, like the other views, and shows
 * each interval's change of their counters: ncurses on a terminal, plain lines otherwise
 * (docs/top.md).
 */
#include <errno.h>
#include <json-c/json.h>
#include <ncurses.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"
#include "cli.h"
#include "clock.h"
#include "host.h"
#include "identity/netns.h"
#include "identity/workload.h"
#include "log.h"
#include "modules/io_module.h"
#include "modules/netstack_module.h"
#include "modules/sched_module.h"
#include "plumb.h"
#include "top.h"

#define TOP_TICK_MS 250 /* the modules' housekeeping, as in the agent */
#define TOP_KEY_MS  50 /* how long a key waits at most before the next tick check */

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

/* One workload (cgroup) over the last interval: thread-seconds and bytes per second. */
struct top_row {
	char cgroup[256];
	char workload[160];
	uint64_t cgroup_id; /* 0 when the sched module has not seen it */
	double cpu, runq, steal, block, wait[WAIT_KINDS];
	double sched_secs; /* the interval of those: between its threads' reads (row_secs) */
	double read, write, tx, rx;
};

struct top_thread {
	struct sched_thread_sample s; /* cumulative, for the next interval */
	double cpu, runq, steal, block, wait[WAIT_KINDS];
	struct wait_key top; /* the resource it waited on longest this interval */
	double top_s;
};

/* One process's end of its connections (flow's graph), cumulative and this interval. */
struct top_end {
	char key[200]; /* tells the ends apart across intervals */
	char cgroup[256];
	char peer[96];
	char role[8];
	uint32_t port;
	uint64_t tx_bytes, rx_bytes;
	double tx, rx;
};

/* The modules whose reads a frame times apart (struct top, src_secs). */
enum top_src { TOP_SRC_SCHED, TOP_SRC_IO, TOP_SRC_FLOW, TOP_SRCS };

/* The state one frame needs, and the previous frame's counters. */
struct top {
	bool tty;
	bool io_up, wait_up, flow_up, netstack_up;
	bool steal; /* the sched module measures steal (else it is inside CPU%) */
	char off[256]; /* modules that could not load, and why */

	/* previous counters */
	struct sched_cgroup_sample *pcg;
	size_t npcg;
	struct io_row *pio;
	size_t npio;
	struct top_thread *pth;
	size_t npth;
	struct sched_wait_sample *pwait;
	size_t npwait;
	struct top_end *pend;
	size_t npend;
	double t_prev;

	/* this frame */
	struct top_row *rows;
	size_t nrows;
	struct io_row *io_delta; /* per (cgroup, mount), this interval's bytes */
	size_t nio;
	struct top_thread *th;
	size_t nth;
	struct top_end *ends;
	size_t nends;
	double secs; /* the interval */
	/*
	 * Each source's own interval, between the middles of its last two reads: an open wait
	 * or a running thread is counted up to the moment of the read, and in a slow guest the
	 * read came up to 100 ms after the frame's start (a pipe wait of 1.111 s/s, then 0.895).
	 * The sched columns go further, per row (row_secs); this one is their fallback.
	 */
	double src_prev[TOP_SRCS], src_secs[TOP_SRCS];
	time_t when;
	char net[320]; /* the netstack line */

	/* what is shown */
	enum top_col sort;
	char filter[128];
	char drill[256]; /* the workload (cgroup) drilled into; "" for the host view */
	char selected[256]; /* the selected workload (cgroup), kept across frames */
	bool paused;
	bool editing; /* typing a filter */
	char edit[128];
	size_t first; /* the first row shown */
};

/* ---- numbers ---- */

static void fmt_pct(double thread_s_per_s, char *out, size_t len)
{
	snprintf(out, len, "%.0f", thread_s_per_s * 100);
}

/* bytes per second in at most 6 characters: 0, 512, 12.3K, 123K, 1.2M, 45G */
static void fmt_rate(double v, char *out, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	if (v < 1) {
		snprintf(out, len, "0");
		return;
	}
	while (v >= 1000 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(out, len, "%.0f", v);
	else
		snprintf(out, len, v < 100 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

static void fmt_ns(double ns, char *out, size_t len)
{
	if (ns < 1e3)
		snprintf(out, len, "%.0fns", ns);
	else if (ns < 1e6)
		snprintf(out, len, "%.0fus", ns / 1e3);
	else if (ns < 1e9)
		snprintf(out, len, "%.1fms", ns / 1e6);
	else
		snprintf(out, len, "%.2fs", ns / 1e9);
}

static double wait_sum(const double *w)
{
	double s = 0;

	for (int k = 0; k < WAIT_KINDS; k++)
		s += w[k];
	return s;
}

static int wait_top(const double *w)
{
	int best = -1;

	for (int k = 0; k < WAIT_KINDS; k++)
		if (w[k] > 0 && (best < 0 || w[k] > w[best]))
			best = k;
	return best;
}

/* "futex 180%", or "-" */
static void fmt_wait(const double *w, char *out, size_t len)
{
	int k = wait_top(w);

	if (k < 0)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%s %.0f%%", wait_kind_names[k], w[k] * 100);
}

/* bsearch and qsort, for arrays that may be empty (and NULL: glibc declares them nonnull) */
static const void *lookup(const void *key, const void *base, size_t n, size_t size,
			  int (*cmp)(const void *, const void *))
{
	return n ? bsearch(key, base, n, size, cmp) : NULL;
}

static void sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

static uint64_t delta(uint64_t cur, uint64_t prev)
{
	/*
	 * Lower: an entry expired (a flow end evicted, one of the io module's merged entries gone
	 * after its grace) and what is left is not this interval's: nothing rather than a
	 * history shown as one interval's.
	 */
	return cur >= prev ? cur - prev : 0;
}

/* ---- rows: one per cgroup, merged from every module ---- */

static int row_cmp_cgroup(const void *a, const void *b)
{
	return strcmp(((const struct top_row *)a)->cgroup, ((const struct top_row *)b)->cgroup);
}

static struct top_row *row_add(struct top *t, size_t *cap, const char *cgroup)
{
	struct top_row *r;

	if (t->nrows == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		struct top_row *n = realloc(t->rows, ncap * sizeof(*n));

		if (!n)
			return NULL;
		t->rows = n;
		*cap = ncap;
	}
	r = &t->rows[t->nrows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->cgroup, sizeof(r->cgroup), "%s", cgroup);
	return r;
}

/* Sorts the partial rows by cgroup and adds up those of one cgroup. */
static void rows_merge(struct top *t)
{
	size_t out = 0;

	sort(t->rows, t->nrows, sizeof(*t->rows), row_cmp_cgroup);
	for (size_t i = 0; i < t->nrows; i++) {
		struct top_row *r = &t->rows[i], *o;

		if (out && !strcmp(t->rows[out - 1].cgroup, r->cgroup)) {
			o = &t->rows[out - 1];
			o->cpu += r->cpu;
			o->runq += r->runq;
			o->steal += r->steal;
			o->block += r->block;
			for (int k = 0; k < WAIT_KINDS; k++)
				o->wait[k] += r->wait[k];
			o->read += r->read;
			o->write += r->write;
			o->tx += r->tx;
			o->rx += r->rx;
			if (!o->cgroup_id)
				o->cgroup_id = r->cgroup_id;
			if (!o->sched_secs) /* the sched part's interval, whichever part sorted first */
				o->sched_secs = r->sched_secs;
			continue;
		}
		if (out != i)
			t->rows[out] = *r;
		workload_from_cgroup(t->rows[out].cgroup, t->rows[out].workload,
				     sizeof(t->rows[out].workload));
		out++;
	}
	t->nrows = out;
}

static bool row_active(const struct top_row *r)
{
	return r->cpu > 0 || r->runq > 0 || r->block > 0 || wait_sum(r->wait) > 0 || r->read > 0 ||
	       r->write > 0 || r->tx > 0 || r->rx > 0;
}

static bool row_matches(const struct top *t, const struct top_row *r)
{
	return !t->filter[0] || strcasestr(r->workload, t->filter) ||
	       strcasestr(r->cgroup, t->filter);
}

static double row_key(const struct top_row *r, enum top_col c)
{
	switch (c) {
	case TOP_COL_CPU:
		return r->cpu;
	case TOP_COL_RUNQ:
		return r->runq;
	case TOP_COL_BLOCK:
		return r->block;
	case TOP_COL_WAIT:
		return wait_sum(r->wait);
	case TOP_COL_READ:
		return r->read;
	case TOP_COL_WRITE:
		return r->write;
	case TOP_COL_NET:
		return r->tx + r->rx;
	default:
		return 0;
	}
}

static enum top_col sort_col; /* qsort has no context argument */

static int row_cmp_sort(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;
	double kx = row_key(x, sort_col), ky = row_key(y, sort_col);

	if (sort_col != TOP_COL_NAME && kx != ky)
		return kx < ky ? 1 : -1;
	return strcmp(x->workload, y->workload) ?: strcmp(x->cgroup, y->cgroup);
}

/* ---- this interval from each module ---- */

static int cg_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct sched_cgroup_sample *)a)->cgroup_id;
	uint64_t y = ((const struct sched_cgroup_sample *)b)->cgroup_id;

	return x < y ? -1 : x > y;
}

static int thread_cmp(const void *a, const void *b)
{
	const struct sched_thread_sample *x = &((const struct top_thread *)a)->s;
	const struct sched_thread_sample *y = &((const struct top_thread *)b)->s;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static int wait_cmp(const void *a, const void *b)
{
	return memcmp(&((const struct sched_wait_sample *)a)->key,
		      &((const struct sched_wait_sample *)b)->key, sizeof(struct wait_key));
}

/* Source src was read from a to b (monotonic seconds): its interval since its last read. */
static void src_read(struct top *t, enum top_src src, double a, double b)
{
	double mid = (a + b) / 2, d = t->src_prev[src] ? mid - t->src_prev[src] : t->secs;

	t->src_prev[src] = mid;
	t->src_secs[src] = d > 1e-3 ? d : 1e-3;
}

/*
 * The interval between two reads of a thread, or of a cgroup's threads (their mean), on the
 * clock their open waits were counted to: the sched read visits thread after thread, and in
 * an emulated guest its visits spread over ~170 ms, which the interval between the reads'
 * middles moved from one frame to the next (1.097 s/s of waiting, then 0.831). secs when
 * either read did not see it.
 */
static double row_secs(uint64_t now_ns, uint64_t prev_ns, double secs)
{
	double d;

	if (!now_ns || !prev_ns || now_ns <= prev_ns)
		return secs;
	d = (double)(now_ns - prev_ns) / 1e9;
	return d > 1e-3 ? d : 1e-3;
}

/* CPU, run queue, blocked and waits: per cgroup (exited threads included) and per thread. */
static int frame_sched(struct top *t, size_t *cap)
{
	struct sched_cgroup_sample *cg;
	struct sched_thread_sample *ts;
	struct sched_wait_sample *ws;
	size_t ncg, nts, nws;
	double a = monotonic_s(), secs;
	int err;

	err = sched_snapshot(&wait_module, &ts, &nts, &ws, &nws);
	if (err)
		return err;
	src_read(t, TOP_SRC_SCHED, a, monotonic_s()); /* the cgroups' totals: from that read */
	secs = t->src_secs[TOP_SRC_SCHED];
	err = sched_cgroup_snapshot(&wait_module, &cg, &ncg);
	if (err) {
		free(ts);
		free(ws);
		return err;
	}
	for (size_t i = 0; i < ncg; i++) {
		const struct sched_cgroup_sample *p =
			lookup(&cg[i], t->pcg, t->npcg, sizeof(*cg), cg_cmp);
		struct top_row *r;

		if (!cg[i].path[0])
			continue; /* not named yet: next frame */
		r = row_add(t, cap, cg[i].path);
		if (!r)
			break;
		r->cgroup_id = cg[i].cgroup_id;
		r->sched_secs = row_secs(cg[i].read_ns, p ? p->read_ns : 0, secs);
#define CG_D(x) (delta(cg[i].q[x], p ? p->q[x] : 0) / 1e9 / r->sched_secs)
		r->cpu = CG_D(Q_RUN);
		r->runq = CG_D(Q_RQ);
		r->steal = CG_D(Q_STEAL);
		r->block = CG_D(Q_BLOCK);
		for (int k = 0; k < WAIT_KINDS; k++)
			r->wait[k] = CG_D(Q_WAIT_NS + k);
#undef CG_D
	}
	free(t->pcg);
	t->pcg = cg;
	t->npcg = ncg;

	/* threads: this interval's counts, and the resource each waited on longest */
	t->th = calloc(nts ? nts : 1, sizeof(*t->th));
	if (!t->th) {
		free(ts);
		free(ws);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nts; i++)
		t->th[i].s = ts[i];
	t->nth = nts;
	free(ts);
	sort(t->th, t->nth, sizeof(*t->th), thread_cmp);
	for (size_t i = 0; i < t->nth; i++) {
		struct top_thread *x = &t->th[i];
		const struct top_thread *p = lookup(x, t->pth, t->npth, sizeof(*x), thread_cmp);

		double xs = row_secs(x->s.read_ns, p ? p->s.read_ns : 0, secs);

#define TH_D(y) (delta(x->s.q[y], p ? p->s.q[y] : 0) / 1e9 / xs)
		x->cpu = TH_D(Q_RUN);
		x->runq = TH_D(Q_RQ);
		x->steal = TH_D(Q_STEAL);
		x->block = TH_D(Q_BLOCK);
		for (int k = 0; k < WAIT_KINDS; k++)
			x->wait[k] = TH_D(Q_WAIT_NS + k);
#undef TH_D
		x->top.kind = WAIT_NONE;
	}
	for (size_t i = 0; i < nws; i++) {
		const struct sched_wait_sample *p =
			lookup(&ws[i], t->pwait, t->npwait, sizeof(*ws), wait_cmp);
		double s = delta(ws[i].val.ns, p ? p->val.ns : 0) / 1e9 / secs;
		struct top_thread *x = NULL;

		/* the thread: by tid, the last of equal tids (a reused tid's newest start) */
		size_t lo = 0, hi = t->nth;

		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (t->th[mid].s.tid <= ws[i].key.tid)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo && t->th[lo - 1].s.tid == ws[i].key.tid)
			x = &t->th[lo - 1];
		if (x && s > x->top_s) {
			x->top = ws[i].key;
			x->top_s = s;
		}
	}
	free(t->pwait);
	t->pwait = ws;
	t->npwait = nws;
	return 0;
}

static int io_cmp(const void *a, const void *b)
{
	const struct io_row *x = a, *y = b;

	return strcmp(x->cgroup, y->cgroup)	  ?:
		       strcmp(x->mount, y->mount) ?:
						    strcmp(x->fstype, y->fstype);
}

static int frame_io(struct top *t, size_t *cap)
{
	struct io_row *cur;
	size_t n;
	double a = monotonic_s();
	int err = io_snapshot(&io_module, &cur, &n);

	if (err)
		return err;
	src_read(t, TOP_SRC_IO, a, monotonic_s());
	t->io_delta = calloc(n ? n : 1, sizeof(*t->io_delta));
	if (!t->io_delta) {
		free(cur);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct io_row *p = lookup(&cur[i], t->pio, t->npio, sizeof(*cur), io_cmp);
		struct io_row *d = &t->io_delta[i];
		struct top_row *r;

		*d = cur[i];
		d->bytes[IO_READ] = delta(cur[i].bytes[IO_READ], p ? p->bytes[IO_READ] : 0);
		d->bytes[IO_WRITE] = delta(cur[i].bytes[IO_WRITE], p ? p->bytes[IO_WRITE] : 0);
		if (!d->bytes[IO_READ] && !d->bytes[IO_WRITE])
			continue;
		r = row_add(t, cap, cur[i].cgroup);
		if (!r)
			break;
		r->read = d->bytes[IO_READ] / t->src_secs[TOP_SRC_IO];
		r->write = d->bytes[IO_WRITE] / t->src_secs[TOP_SRC_IO];
	}
	t->nio = n;
	free(t->pio);
	t->pio = cur;
	t->npio = n;
	return 0;
}

static int end_cmp(const void *a, const void *b)
{
	return strcmp(((const struct top_end *)a)->key, ((const struct top_end *)b)->key);
}

static const char *json_str(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "";
}

static uint64_t json_u64(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_uint64(v) : 0;
}

/* The graph's processes by pid, for its ends' lookups (sorted once per frame) */
struct proc_ref {
	uint64_t pid;
	struct json_object *o;
};

static int proc_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct proc_ref *)a)->pid, y = ((const struct proc_ref *)b)->pid;

	return x < y ? -1 : x > y;
}

static struct json_object *process_find(const struct proc_ref *procs, size_t n, uint64_t pid)
{
	const struct proc_ref key = { .pid = pid },
			      *p = lookup(&key, procs, n, sizeof(key), proc_cmp);

	return p ? p->o : NULL;
}

/* The flow module's ends (docs/graph.md), each with its process's cgroup and its peer named. */
static int frame_flow(struct top *t, size_t *cap)
{
	struct json_object *doc = json_object_new_object(), *procs, *ends;
	struct proc_ref *refs;
	size_t n = 0, np;
	double t0;
	int err;

	if (!doc)
		return -ENOMEM;
	t0 = monotonic_s();
	err = flow_module.graph(&flow_module, doc);
	src_read(t, TOP_SRC_FLOW, t0, monotonic_s());
	if (err || !json_object_object_get_ex(doc, "processes", &procs) ||
	    !json_object_object_get_ex(doc, "ends", &ends)) {
		json_object_put(doc);
		return err ? err : -EINVAL;
	}
	np = json_object_array_length(procs);
	refs = calloc(np ? np : 1, sizeof(*refs));
	n = json_object_array_length(ends);
	t->ends = calloc(n ? n : 1, sizeof(*t->ends));
	if (!t->ends || !refs) {
		free(refs);
		json_object_put(doc);
		return -ENOMEM;
	}
	for (size_t i = 0; i < np; i++) {
		refs[i].o = json_object_array_get_idx(procs, i);
		refs[i].pid = json_u64(refs[i].o, "pid");
	}
	sort(refs, np, sizeof(*refs), proc_cmp);
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(ends, i), *proc, *peer;
		struct top_end *x = &t->ends[t->nends];
		uint64_t pid = json_u64(e, "pid"), peer_pid = json_u64(e, "peer_pid");
		const char *paddr = json_str(e, "peer_addr");

		proc = process_find(refs, np, pid);
		if (!proc)
			continue;
		snprintf(x->key, sizeof(x->key), "%llu|%s|%s|%s|%s|%llu|%llu",
			 (unsigned long long)pid, json_str(e, "role"), json_str(e, "protocol"),
			 json_str(e, "local_addr"), paddr, (unsigned long long)json_u64(e, "port"),
			 (unsigned long long)peer_pid);
		snprintf(x->cgroup, sizeof(x->cgroup), "%s", json_str(proc, "cgroup"));
		snprintf(x->role, sizeof(x->role), "%s", json_str(e, "role"));
		x->port = (uint32_t)json_u64(e, "port");
		peer = peer_pid ? process_find(refs, np, peer_pid) : NULL;
		if (peer)
			snprintf(x->peer, sizeof(x->peer), "%s[%llu]", json_str(peer, "comm"),
				 (unsigned long long)peer_pid);
		else
			snprintf(x->peer, sizeof(x->peer), "%s", paddr[0] ? paddr : "?");
		x->tx_bytes = json_u64(e, "tx_bytes");
		x->rx_bytes = json_u64(e, "rx_bytes");
		t->nends++;
	}
	free(refs);
	json_object_put(doc);
	sort(t->ends, t->nends, sizeof(*t->ends), end_cmp);
	for (size_t i = 0; i < t->nends; i++) {
		struct top_end *x = &t->ends[i];
		const struct top_end *p = lookup(x, t->pend, t->npend, sizeof(*x), end_cmp);
		struct top_row *r;

		x->tx = delta(x->tx_bytes, p ? p->tx_bytes : 0) / t->src_secs[TOP_SRC_FLOW];
		x->rx = delta(x->rx_bytes, p ? p->rx_bytes : 0) / t->src_secs[TOP_SRC_FLOW];
		if (!x->cgroup[0] || (x->tx <= 0 && x->rx <= 0))
			continue;
		r = row_add(t, cap, x->cgroup);
		if (!r)
			break;
		r->tx = x->tx;
		r->rx = x->rx;
	}
	return 0;
}

/* The netstack line: the bottleneck now, or why there is none. */
static void frame_netstack(struct top *t)
{
	const struct netstack_series *x;
	char p50[16], base[16];
	int bn;
	size_t n, learning = 0, live = 0;

	if (!t->netstack_up) {
		snprintf(t->net, sizeof(t->net), "net: the netstack module is off");
		return;
	}
	n = netstack_series(&netstack_module, &x, &bn);
	for (size_t i = 0; i < n; i++)
		if (x[i].bn.n > 0) {
			live++;
			learning += !x[i].bn.ready;
		}
	if (bn >= 0) {
		fmt_ns(x[bn].bn.p50, p50, sizeof(p50));
		fmt_ns(x[bn].bn.base_p50, base, sizeof(base));
		snprintf(t->net, sizeof(t->net),
			 "net: BOTTLENECK %s (%s) on %s in %.32s: p50 %s, baseline %s%s%.80s",
			 netstack_component_names[x[bn].component],
			 netstack_component_direction[x[bn].component], x[bn].device,
			 x[bn].netns_name, p50, base, x[bn].workload[0] ? ", " : "",
			 x[bn].workload);
	} else if (!live) {
		snprintf(t->net, sizeof(t->net), "net: no sampled packets this interval");
	} else {
		snprintf(t->net, sizeof(t->net),
			 "net: no bottleneck (%zu components with packets, %zu learning their "
			 "baseline)",
			 live, learning);
	}
}

static void frame_free(struct top *t)
{
	free(t->rows);
	free(t->io_delta);
	free(t->pth);
	t->pth = t->th; /* the threads' counters are the next frame's previous */
	t->npth = t->nth;
	free(t->pend);
	t->pend = t->ends;
	t->npend = t->nends;
	t->rows = NULL;
	t->io_delta = NULL;
	t->th = NULL;
	t->ends = NULL;
	t->nrows = t->nio = t->nth = t->nends = 0;
}

/* Reads every module and makes the frame: the change since the last one, per second. */
static int frame_take(struct top *t)
{
	size_t cap = 0;
	double now = monotonic_s();
	int err = 0;

	frame_free(t);
	t->secs = now - t->t_prev > 1e-3 ? now - t->t_prev : 1e-3;
	t->t_prev = now;
	t->when = time(NULL);
	if (t->wait_up)
		err = frame_sched(t, &cap);
	if (!err && t->io_up)
		err = frame_io(t, &cap);
	if (!err && t->flow_up)
		err = frame_flow(t, &cap);
	if (err)
		return err;
	frame_netstack(t);
	rows_merge(t);
	return 0;
}

/* ---- the rows shown, in order ---- */

static size_t rows_shown(struct top *t, struct top_row ***out)
{
	size_t n = 0;

	*out = calloc(t->nrows ? t->nrows : 1, sizeof(**out));
	if (!*out)
		return 0;
	sort_col = t->sort;
	sort(t->rows, t->nrows, sizeof(*t->rows), row_cmp_sort);
	for (size_t i = 0; i < t->nrows; i++)
		if (row_active(&t->rows[i]) && row_matches(t, &t->rows[i]))
			(*out)[n++] = &t->rows[i];
	return n;
}

#define COLS_FIXED 56 /* every column but the workload's, with their spaces */

static void row_format(const struct top *t, const struct top_row *r, int namew, char *out,
		       size_t len)
{
	char cpu[16], rq[16], blk[16], wait[32], rd[16], wr[16], net[16];

	if (t->wait_up) {
		fmt_pct(r->cpu, cpu, sizeof(cpu));
		fmt_pct(r->runq, rq, sizeof(rq));
		fmt_pct(r->block, blk, sizeof(blk));
		fmt_wait(r->wait, wait, sizeof(wait));
	} else {
		snprintf(cpu, sizeof(cpu), "-");
		snprintf(rq, sizeof(rq), "-");
		snprintf(blk, sizeof(blk), "-");
		snprintf(wait, sizeof(wait), "-");
	}
	fmt_rate(r->read, rd, sizeof(rd));
	fmt_rate(r->write, wr, sizeof(wr));
	fmt_rate(r->tx + r->rx, net, sizeof(net));
	if (!t->io_up) {
		snprintf(rd, sizeof(rd), "-");
		snprintf(wr, sizeof(wr), "-");
	}
	if (!t->flow_up)
		snprintf(net, sizeof(net), "-");
	snprintf(out, len, "%-*.*s %5s %5s %5s %-12.12s %7s %7s %7s", namew, namew, r->workload,
		 cpu, rq, blk, wait, rd, wr, net);
}

static void header_format(int namew, char *out, size_t len)
{
	snprintf(out, len, "%-*s %5s %5s %5s %-12s %7s %7s %7s", namew, "WORKLOAD", "CPU%", "RUNQ%",
		 "BLK%", "TOP WAIT", "READ/s", "WRITE/s", "NET/s");
}

static void title_format(const struct top *t, size_t nshown, char *out, size_t len)
{
	char tbuf[16];
	int k;

	strftime(tbuf, sizeof(tbuf), "%H:%M:%S", localtime(&t->when));
	k = nshown ? snprintf(out, len, "plumb top  %s  %.1fs  %zu workload%s  sort %s", tbuf,
			      t->secs, nshown, nshown == 1 ? "" : "s", top_col_names[t->sort]) :
		     snprintf(out, len, "plumb top  %s  %.1fs  sort %s", tbuf, t->secs,
			      top_col_names[t->sort]);
	if (t->filter[0] && k > 0 && (size_t)k < len)
		k += snprintf(out + k, len - k, "  filter '%s'", t->filter);
	if (t->paused && k > 0 && (size_t)k < len)
		snprintf(out + k, len - k, "  PAUSED");
}

/* host totals: CPU of all workloads, bytes */
static void totals_format(const struct top *t, char *out, size_t len)
{
	struct top_row s = { 0 };
	char rd[16], wr[16], net[16];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int k;

	for (size_t i = 0; i < t->nrows; i++) {
		s.cpu += t->rows[i].cpu;
		s.runq += t->rows[i].runq;
		s.steal += t->rows[i].steal;
		s.read += t->rows[i].read;
		s.write += t->rows[i].write;
		s.tx += t->rows[i].tx;
	}
	fmt_rate(s.read, rd, sizeof(rd));
	fmt_rate(s.write, wr, sizeof(wr));
	fmt_rate(s.tx, net, sizeof(net));
	k = snprintf(out, len, "host: cpu %.0f%%/%ld00%%  runq %.0f%%", s.cpu * 100, ncpu,
		     s.runq * 100);
	if (t->steal && k > 0 && (size_t)k < len)
		k += snprintf(out + k, len - k, "  steal %.0f%%", s.steal * 100);
	if (k > 0 && (size_t)k < len)
		k += snprintf(out + k, len - k, "  read %s/s  write %s/s  sent %s/s", rd, wr, net);
	if (t->off[0] && k > 0 && (size_t)k < len)
		snprintf(out + k, len - k, "  off: %s", t->off);
}

/* ---- plain lines (not a terminal, or --batch) ---- */

static void print_plain(struct top *t)
{
	struct top_row **rows;
	size_t n = rows_shown(t, &rows);
	char line[1024];
	int namew = 32;

	title_format(t, n, line, sizeof(line));
	printf("%s\n", line);
	totals_format(t, line, sizeof(line));
	printf("%s\n%s\n", line, t->net);
	header_format(namew, line, sizeof(line));
	printf("%s\n", line);
	for (size_t i = 0; i < n; i++) {
		row_format(t, rows[i], namew, line, sizeof(line));
		printf("%s\n", line);
	}
	printf("\n");
	fflush(stdout);
	free(rows);
}

/* One JSON object per interval (--json): every active workload, unrounded. */
static void print_json(struct top *t)
{
	struct json_object *doc = json_object_new_object(), *arr = json_object_new_array();
	struct top_row **rows;
	size_t n = rows_shown(t, &rows);

	if (!doc || !arr) {
		json_object_put(doc);
		json_object_put(arr);
		free(rows);
		return;
	}
	json_object_object_add(doc, "time", json_object_new_int64(t->when));
	json_object_object_add(doc, "interval_seconds", json_object_new_double(t->secs));
	/* each module's columns are per its own read's interval (struct top, src_secs) */
	json_object_object_add(doc, "sched_interval_seconds",
			       json_object_new_double(t->src_secs[TOP_SRC_SCHED]));
	json_object_object_add(doc, "io_interval_seconds",
			       json_object_new_double(t->src_secs[TOP_SRC_IO]));
	json_object_object_add(doc, "flow_interval_seconds",
			       json_object_new_double(t->src_secs[TOP_SRC_FLOW]));
	json_object_object_add(doc, "netstack", json_object_new_string(t->net));
	json_object_object_add(doc, "modules_off", json_object_new_string(t->off));
	for (size_t i = 0; i < n; i++) {
		const struct top_row *r = rows[i];
		struct json_object *o = json_object_new_object(), *w = json_object_new_object();

		if (!o || !w) {
			json_object_put(o);
			json_object_put(w);
			break;
		}
		json_object_object_add(o, "cgroup", json_object_new_string(r->cgroup));
		json_object_object_add(o, "workload", json_object_new_string(r->workload));
		json_object_object_add(
			o, "sched_interval_seconds",
			json_object_new_double(r->sched_secs ?: t->src_secs[TOP_SRC_SCHED]));
		json_object_object_add(o, "cpu", json_object_new_double(r->cpu));
		json_object_object_add(o, "runq", json_object_new_double(r->runq));
		if (t->steal)
			json_object_object_add(o, "steal", json_object_new_double(r->steal));
		json_object_object_add(o, "block", json_object_new_double(r->block));
		for (int k = 0; k < WAIT_KINDS; k++)
			json_object_object_add(w, wait_kind_names[k],
					       json_object_new_double(r->wait[k]));
		json_object_object_add(o, "wait", w);
		json_object_object_add(o, "read_bytes_per_second", json_object_new_double(r->read));
		json_object_object_add(o, "write_bytes_per_second",
				       json_object_new_double(r->write));
		json_object_object_add(o, "sent_bytes_per_second", json_object_new_double(r->tx));
		json_object_object_add(o, "received_bytes_per_second",
				       json_object_new_double(r->rx));
		json_object_array_add(arr, o);
	}
	json_object_object_add(doc, "workloads", arr);
	printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
	fflush(stdout);
	json_object_put(doc);
	free(rows);
}

/* ---- the terminal ---- */

static void put_line(int y, attr_t attr, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void put_line(int y, attr_t attr, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (y >= LINES)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	attrset(attr);
	mvaddnstr(y, 0, buf, COLS);
	if (attr & A_REVERSE) /* a bar: to the right edge */
		for (int x = (int)strlen(buf); x < COLS; x++)
			mvaddch(y, x, ' ');
	attrset(A_NORMAL);
}

static int name_width(void)
{
	return COLS - COLS_FIXED > 12 ? COLS - COLS_FIXED : 12;
}

static void draw_host(struct top *t)
{
	struct top_row **rows;
	size_t n = rows_shown(t, &rows), sel = 0;
	int namew = name_width(), body = LINES - 5, y = 4;
	char line[1024];

	title_format(t, n, line, sizeof(line));
	put_line(0, A_BOLD, "%s", line);
	totals_format(t, line, sizeof(line));
	put_line(1, A_NORMAL, "%s", line);
	put_line(2, strstr(t->net, "BOTTLENECK") ? A_BOLD : A_NORMAL, "%s", t->net);
	header_format(namew, line, sizeof(line));
	put_line(3, A_REVERSE, "%s", line);
	/* the selection follows its workload; the first row when it is gone */
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i]->cgroup, t->selected))
			sel = i;
	if (n)
		snprintf(t->selected, sizeof(t->selected), "%s", rows[sel]->cgroup);
	if (body < 1)
		body = 1;
	if (sel < t->first)
		t->first = sel;
	if (sel >= t->first + (size_t)body)
		t->first = sel - body + 1;
	if (t->first > sel)
		t->first = 0;
	for (size_t i = t->first; i < n && y < LINES - 1; i++, y++) {
		row_format(t, rows[i], namew, line, sizeof(line));
		put_line(y, i == sel ? A_REVERSE | A_BOLD : A_NORMAL, "%s", line);
	}
	if (!n)
		put_line(y, A_NORMAL, "%s",
			 t->filter[0] ? "(no active workload matches the filter)" :
					"(no activity this interval)");
	free(rows);
}

/* One resource of a wait, short: "futex 7f3a...", "pipe ino 1234", "epoll fd 5". */
static void fmt_resource(const struct wait_key *k, char *out, size_t len)
{
	switch (k->bri) {
	case BRI_INODE:
		snprintf(out, len, "%s ino %llu", k->kind == WAIT_PIPE ? "pipe" : "socket",
			 (unsigned long long)k->a);
		break;
	case BRI_FUTEX_PRIVATE:
		snprintf(out, len, "futex %llx", (unsigned long long)k->a);
		break;
	case BRI_FUTEX_SHARED:
		snprintf(out, len, "futex ino %llu+%llu", (unsigned long long)k->a,
			 (unsigned long long)k->b);
		break;
	case BRI_EPOLL:
		snprintf(out, len, "epoll fd %llu", (unsigned long long)k->b);
		break;
	default:
		snprintf(out, len, "%s", k->kind < WAIT_KINDS ? wait_kind_names[k->kind] : "-");
	}
}

static double thread_key(const struct top_thread *x, enum top_col c)
{
	switch (c) {
	case TOP_COL_RUNQ:
		return x->runq;
	case TOP_COL_BLOCK:
		return x->block;
	case TOP_COL_WAIT:
		return wait_sum(x->wait);
	default:
		return x->cpu;
	}
}

static int thread_cmp_sort(const void *a, const void *b)
{
	const struct top_thread *x = *(const struct top_thread *const *)a;
	const struct top_thread *y = *(const struct top_thread *const *)b;
	double kx = thread_key(x, sort_col) + 1e-3 * wait_sum(x->wait);
	double ky = thread_key(y, sort_col) + 1e-3 * wait_sum(y->wait);

	if (kx != ky)
		return kx < ky ? 1 : -1;
	return x->s.tid < y->s.tid ? -1 : x->s.tid > y->s.tid;
}

struct top_peer {
	char peer[96];
	char role[8];
	uint32_t port;
	double tx, rx;
};

static int peer_cmp(const void *a, const void *b)
{
	const struct top_peer *x = a, *y = b;

	return (x->tx + x->rx < y->tx + y->rx) - (x->tx + x->rx > y->tx + y->rx);
}

/* A workload's mounts, threads, peers and netstack components. */
static void draw_drill(struct top *t)
{
	const struct top_row *r = NULL;
	const struct netstack_series *ns = NULL;
	struct top_thread **th = NULL;
	struct top_peer *peers = NULL;
	size_t nth = 0, npeers = 0, nmounts = 0, nns = 0, nseries = 0, show;
	uint64_t id = 0;
	int y = 4, rest, bn = -1;
	char line[1024], a[16], b[16], c[16], d[32], e[48], f[24];

	for (size_t i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i].cgroup, t->drill))
			r = &t->rows[i];
	title_format(t, 0, line, sizeof(line));
	put_line(0, A_BOLD, "%s  [Esc: back]", line);
	put_line(1, A_BOLD, "%s  (cgroup %s)", r ? r->workload : t->drill, t->drill);
	put_line(2, strstr(t->net, "BOTTLENECK") ? A_BOLD : A_NORMAL, "%s", t->net);
	if (r) {
		fmt_rate(r->read, a, sizeof(a));
		fmt_rate(r->write, b, sizeof(b));
		fmt_rate(r->tx, c, sizeof(c));
		fmt_rate(r->rx, d, sizeof(d));
		if (t->steal)
			snprintf(f, sizeof(f), "  steal %.0f%%", r->steal * 100);
		put_line(3, A_NORMAL,
			 "cpu %.0f%%  runq %.0f%%%s  blk %.0f%%  wait %.0f%%  rd %s/s  wr %s/s  tx "
			 "%s/s  rx %s/s",
			 r->cpu * 100, r->runq * 100, t->steal ? f : "", r->block * 100,
			 wait_sum(r->wait) * 100, a, b, c, d);
	} else {
		put_line(3, A_NORMAL, "(no activity this interval)");
	}

	/* what there is to show */
	for (size_t i = 0; i < t->nio; i++)
		if (!strcmp(t->io_delta[i].cgroup, t->drill) &&
		    (t->io_delta[i].bytes[IO_READ] || t->io_delta[i].bytes[IO_WRITE]))
			nmounts++;
	th = calloc(t->nth ? t->nth : 1, sizeof(*th));
	peers = calloc(t->nends ? t->nends : 1, sizeof(*peers));
	if (!th || !peers)
		goto out;
	for (size_t i = 0; i < t->npcg; i++)
		if (!strcmp(t->pcg[i].path, t->drill))
			id = t->pcg[i].cgroup_id;
	for (size_t i = 0; id && i < t->nth; i++)
		if (t->th[i].s.cgroup_id == id)
			th[nth++] = &t->th[i];
	sort_col = t->sort;
	sort(th, nth, sizeof(*th), thread_cmp_sort);
	for (size_t i = 0; i < t->nends; i++) {
		const struct top_end *x = &t->ends[i];
		size_t k;

		if (strcmp(x->cgroup, t->drill) || (x->tx <= 0 && x->rx <= 0))
			continue;
		for (k = 0; k < npeers; k++)
			if (!strcmp(peers[k].peer, x->peer) && !strcmp(peers[k].role, x->role) &&
			    peers[k].port == x->port)
				break;
		if (k == npeers) {
			snprintf(peers[k].peer, sizeof(peers[k].peer), "%s", x->peer);
			snprintf(peers[k].role, sizeof(peers[k].role), "%s", x->role);
			peers[k].port = x->port;
			npeers++;
		}
		peers[k].tx += x->tx;
		peers[k].rx += x->rx;
	}
	sort(peers, npeers, sizeof(*peers), peer_cmp);
	if (t->netstack_up) {
		size_t n = nseries = netstack_series(&netstack_module, &ns, &bn);

		for (size_t i = 0; i < n; i++)
			nns += ns[i].bn.n > 0 && !strcmp(ns[i].cgroup_path, t->drill);
	}

	/* the lines: mounts, peers and netstack a few each, the threads the rest */
	if (nmounts) {
		show = nmounts < 3 ? nmounts : 3;
		put_line(y++, A_REVERSE, "%-40s %9s %9s", "MOUNT", "READ/s", "WRITE/s");
		for (size_t i = 0; i < t->nio && show; i++) {
			const struct io_row *m = &t->io_delta[i];

			if (strcmp(m->cgroup, t->drill) ||
			    (!m->bytes[IO_READ] && !m->bytes[IO_WRITE]))
				continue;
			fmt_rate(m->bytes[IO_READ] / t->src_secs[TOP_SRC_IO], a, sizeof(a));
			fmt_rate(m->bytes[IO_WRITE] / t->src_secs[TOP_SRC_IO], b, sizeof(b));
			put_line(y++, A_NORMAL, "%-40.40s %9s %9s", m->mount, a, b);
			show--;
		}
	}
	if (npeers) {
		show = npeers < 4 ? npeers : 4;
		put_line(y++, A_REVERSE, "%-40s %-6s %5s %9s %9s", "PEER", "ROLE", "PORT", "SENT/s",
			 "RECV/s");
		for (size_t i = 0; i < show; i++) {
			fmt_rate(peers[i].tx, a, sizeof(a));
			fmt_rate(peers[i].rx, b, sizeof(b));
			put_line(y++, A_NORMAL, "%-40.40s %-6s %5u %9s %9s", peers[i].peer,
				 peers[i].role, peers[i].port, a, b);
		}
	}
	if (nns) {
		show = nns < 3 ? nns : 3;
		put_line(y++, A_REVERSE, "%-22s %-12s %-16s %9s %10s", "NETSTACK COMPONENT",
			 "DEVICE", "NETNS", "P50", "SAMPLES/s");
		for (int i = 0; ns && show && (size_t)i < nseries; i++) {
			if (ns[i].bn.n <= 0 || strcmp(ns[i].cgroup_path, t->drill))
				continue;
			fmt_ns(ns[i].bn.p50, a, sizeof(a));
			snprintf(e, sizeof(e), "%s (%s)%s",
				 netstack_component_names[ns[i].component],
				 netstack_component_direction[ns[i].component],
				 i == bn ? " *" : "");
			put_line(y++, i == bn ? A_BOLD : A_NORMAL,
				 "%-22.22s %-12.12s %-16.16s %9s %10.0f", e, ns[i].device,
				 ns[i].netns_name, a, ns[i].rate);
			show--;
		}
	}
	rest = LINES - 1 - y;
	if (rest > 1) {
		put_line(y++, A_REVERSE, "%7s %-15s %5s %5s %5s %5s %-12s %s", "TID", "COMM",
			 "CPU%", "RUNQ%", "STL%", "BLK%", "TOP WAIT", "ON");
		for (size_t i = 0; i < nth && y < LINES - 1; i++) {
			const struct top_thread *x = th[i];

			fmt_pct(x->cpu, a, sizeof(a));
			fmt_pct(x->runq, b, sizeof(b));
			if (t->steal)
				fmt_pct(x->steal, f, sizeof(f));
			else
				snprintf(f, sizeof(f), "-");
			fmt_pct(x->block, c, sizeof(c));
			fmt_wait(x->wait, d, sizeof(d));
			if (x->top_s > 0)
				fmt_resource(&x->top, e, sizeof(e));
			else
				snprintf(e, sizeof(e), "-");
			put_line(y++, A_NORMAL, "%7u %-15.15s %5s %5s %5s %5s %-12.12s %s",
				 x->s.tid, x->s.comm, a, b, f, c, d, e);
		}
		if (!nth)
			put_line(y++, A_NORMAL, "(no live thread)");
	}
out:
	free(th);
	free(peers);
}

static void draw(struct top *t)
{
	erase();
	if (t->drill[0])
		draw_drill(t);
	else
		draw_host(t);
	if (t->editing)
		put_line(LINES - 1, A_BOLD, "filter: %s_   (Enter: apply, Esc: cancel)", t->edit);
	else
		put_line(LINES - 1, A_REVERSE, "%s",
			 t->drill[0] ? "q quit  Esc back  c/r/b/w sort threads  p pause" :
				       "q quit  </> sort  c r b w i o n s  / filter  Up/Dn  Enter "
				       "drill  p pause");
	refresh();
}

/* The selection moves by delta rows (clamped); it is kept by workload, so find it first. */
static void select_move(struct top *t, long delta)
{
	struct top_row **rows;
	size_t n = rows_shown(t, &rows);
	long sel = 0;

	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i]->cgroup, t->selected))
			sel = (long)i;
	sel += delta;
	if (sel >= (long)n)
		sel = (long)n - 1;
	if (sel < 0)
		sel = 0;
	if (n)
		snprintf(t->selected, sizeof(t->selected), "%s", rows[sel]->cgroup);
	free(rows);
}

/* Whether the workload of this cgroup is a row on screen now (active, matching the filter). */
static bool row_shown(struct top *t, const char *cgroup)
{
	struct top_row **rows;
	size_t n = rows_shown(t, &rows);
	bool found = false;

	for (size_t i = 0; i < n && !found; i++)
		found = !strcmp(rows[i]->cgroup, cgroup);
	free(rows);
	return found;
}

/* One key; returns 1 when the view changed, -1 to quit. */
static int on_key(struct top *t, int ch)
{
	if (t->editing) {
		size_t len = strlen(t->edit);

		if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
			snprintf(t->filter, sizeof(t->filter), "%s", t->edit);
			t->editing = false;
			t->first = 0;
		} else if (ch == 27) {
			t->editing = false;
		} else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && len) {
			t->edit[len - 1] = '\0';
		} else if (ch >= 32 && ch < 127 && len + 1 < sizeof(t->edit)) {
			t->edit[len] = (char)ch;
			t->edit[len + 1] = '\0';
		}
		return 1;
	}
	switch (ch) {
	case 'q':
	case 'Q':
		return -1;
	case 'p':
	case ' ':
		t->paused = !t->paused;
		return 1;
	case 27:
	case KEY_BACKSPACE:
	case 127:
		t->drill[0] = '\0';
		return 1;
	case '\n':
	case '\r':
	case KEY_ENTER:
		if (!t->drill[0] && row_shown(t, t->selected))
			snprintf(t->drill, sizeof(t->drill), "%s", t->selected);
		return 1;
	case '/':
		if (t->drill[0])
			return 0;
		t->editing = true;
		snprintf(t->edit, sizeof(t->edit), "%s", t->filter);
		return 1;
	case '<':
	case KEY_LEFT:
		t->sort = (t->sort + TOP_COLS - 1) % TOP_COLS;
		return 1;
	case '>':
	case KEY_RIGHT:
		t->sort = (t->sort + 1) % TOP_COLS;
		return 1;
	case 'c':
		t->sort = TOP_COL_CPU;
		return 1;
	case 'r':
		t->sort = TOP_COL_RUNQ;
		return 1;
	case 'b':
		t->sort = TOP_COL_BLOCK;
		return 1;
	case 'w':
		t->sort = TOP_COL_WAIT;
		return 1;
	case 'i':
		t->sort = TOP_COL_READ;
		return 1;
	case 'o':
		t->sort = TOP_COL_WRITE;
		return 1;
	case 'n':
		t->sort = TOP_COL_NET;
		return 1;
	case 's':
		t->sort = TOP_COL_NAME;
		return 1;
	case KEY_UP:
	case 'k':
		select_move(t, -1);
		return 1;
	case KEY_DOWN:
	case 'j':
		select_move(t, 1);
		return 1;
	case KEY_PPAGE:
		select_move(t, -(LINES - 5));
		return 1;
	case KEY_NPAGE:
		select_move(t, LINES - 5);
		return 1;
	case KEY_HOME:
		select_move(t, -(1L << 30));
		return 1;
	case KEY_END:
		select_move(t, 1L << 30);
		return 1;
	case KEY_RESIZE:
		return 1;
	default:
		return 0;
	}
}

/* ---- modules ---- */

static void tick(struct top *t)
{
	if (t->wait_up)
		wait_module.tick(&wait_module);
	if (t->io_up && io_module.tick)
		io_module.tick(&io_module);
	if (t->flow_up)
		flow_module.tick(&flow_module);
	if (t->netstack_up)
		netstack_module.tick(&netstack_module);
}

static bool module_load(struct top *t, struct plumb_module *m, const struct plumb_config *cfg)
{
	size_t len = strlen(t->off);

	if (!m->load(m, cfg)) {
		m->up = true;
		pr_info("top: module %s: up\n", m->name);
		return true;
	}
	pr_warn("top: module %s: off: %s\n", m->name, m->error);
	snprintf(t->off + len, sizeof(t->off) - len, "%s%s", len ? ", " : "", m->name);
	return false;
}

static void modules_unload(struct top *t)
{
	if (t->netstack_up)
		netstack_module.unload(&netstack_module);
	if (t->flow_up)
		flow_module.unload(&flow_module);
	if (t->io_up)
		io_module.unload(&io_module);
	if (t->wait_up)
		wait_module.unload(&wait_module);
}

/*
 * While the screen is drawn, what the modules log would scribble over it: stderr goes to a
 * memory file, printed once the terminal is given back.
 */
static int log_hold(void)
{
	int saved = dup(STDERR_FILENO), mfd = memfd_create("plumb-top-log", MFD_CLOEXEC);

	if (saved < 0 || mfd < 0 || dup2(mfd, STDERR_FILENO) < 0) {
		if (saved >= 0)
			close(saved);
		if (mfd >= 0)
			close(mfd);
		return -1;
	}
	close(mfd);
	return saved;
}

static void log_release(int saved)
{
	char buf[4096];
	ssize_t n;
	int mfd;

	if (saved < 0)
		return;
	fflush(stderr);
	mfd = dup(STDERR_FILENO);
	dup2(saved, STDERR_FILENO);
	close(saved);
	if (mfd < 0)
		return;
	lseek(mfd, 0, SEEK_SET);
	while ((n = read(mfd, buf, sizeof(buf))) > 0)
		if (write(STDERR_FILENO, buf, n) != n)
			break;
	close(mfd);
}

int top_run(const struct top_options *o)
{
	struct netns netns;
	struct plumb_config cfg = { .cgroup_grace_s = 10,
				    .io_capacity = 4096,
				    .io_latency = false,
				    .flow_capacity = 131072,
				    .flow_bytes = FLOW_BYTES_AUTO,
				    .netns = &netns,
				    .wait = true,
				    .netstack_sample = PLUMB_DEFAULT_NETSTACK_SAMPLE };
	struct sigaction sa = { .sa_handler = on_signal };
	struct top t = { .sort = o->sort };
	char cgroup_root[4096];
	double next_tick, next_frame;
	SCREEN *screen = NULL;
	int ret = 1, err = 0, held = -1;
	long shown = 0;

	snprintf(t.filter, sizeof(t.filter), "%s", o->filter);
	t.tty = !o->batch && !o->json && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	if (privileges_check("plumb top") || tracefs_ensure() ||
	    agent_config(&cfg, cgroup_root, sizeof(cgroup_root)))
		return 1;
	netns_all(&netns);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	t.wait_up = module_load(&t, &wait_module, &cfg);
	t.steal = t.wait_up && sched_steal_measured(&wait_module);
	t.io_up = module_load(&t, &io_module, &cfg);
	t.flow_up = module_load(&t, &flow_module, &cfg);
	t.netstack_up = module_load(&t, &netstack_module, &cfg);
	if (!t.wait_up && !t.io_up && !t.flow_up && !t.netstack_up) {
		fprintf(stderr, "plumb top: no module could load (plumb agent --check says why)\n");
		goto out;
	}
	t.t_prev = monotonic_s();
	err = frame_take(&t); /* the first counters: the first frame shows the change from here */
	if (err)
		goto out;
	if (t.tty) {
		if (!getenv("ESCDELAY"))
			set_escdelay(25);
		screen = newterm(NULL, stdout, stdin);
		if (!screen) {
			fprintf(stderr,
				"plumb top: cannot drive this terminal (TERM=%s); --batch "
				"prints plain lines\n",
				getenv("TERM") ? getenv("TERM") : "");
			goto out;
		}
		held = log_hold();
		cbreak();
		noecho();
		nonl();
		keypad(stdscr, TRUE);
		curs_set(0);
		timeout(TOP_KEY_MS);
		erase();
		put_line(0, A_BOLD, "plumb top: attached; the first interval ends in %.1fs",
			 o->interval_ms / 1e3);
		refresh();
	}
	ret = 0;
	next_tick = monotonic_s() + TOP_TICK_MS / 1e3;
	next_frame = t.t_prev + o->interval_ms / 1e3;
	while (!exiting) {
		double now = monotonic_s();
		int ch, changed = 0, keys = 0;

		if (now >= next_tick) {
			tick(&t);
			next_tick = now + TOP_TICK_MS / 1e3;
		}
		if (now >= next_frame) {
			next_frame += o->interval_ms / 1e3;
			if (next_frame < now)
				next_frame = now + o->interval_ms / 1e3;
			if (!t.paused) {
				err = frame_take(&t);
				if (err) {
					ret = 1;
					break;
				}
				shown++;
				changed = 1;
				if (o->json)
					print_json(&t);
				else if (!t.tty)
					print_plain(&t);
			}
		}
		if (t.tty) {
			/* a held key does not stop the ticks: at most 32 keys a pass */
			while (keys++ < 32 && (ch = getch()) != ERR) {
				int r = on_key(&t, ch);

				if (r < 0) {
					exiting = 1;
					break;
				}
				changed |= r;
			}
			if (changed && shown)
				draw(&t);
		} else {
			double wait =
				(next_tick < next_frame ? next_tick : next_frame) - monotonic_s();

			if (wait > 0)
				usleep((useconds_t)(wait * 1e6));
		}
		if (o->count && shown >= o->count && !t.paused)
			break;
	}
out:
	if (screen) {
		endwin();
		delscreen(screen);
	}
	log_release(held);
	if (err)
		fprintf(stderr, "plumb top: reading the modules: %s\n", strerror(-err));
	frame_free(&t);
	frame_free(&t);
	free(t.pcg);
	free(t.pio);
	free(t.pwait);
	modules_unload(&t);
	netns_close(&netns);
	return ret;
}
