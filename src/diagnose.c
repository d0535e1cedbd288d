// SPDX-License-Identifier: GPL-2.0
/*
 * plumb diagnose: why did a service slow down? It loads the sched, wait and blk modules
 * itself, follows the target's threads and the threads they share resources with, samples
 * the per-thread metrics every interval, and compares the observation window with a baseline
 * (the run's first part, or a recording): a rise of run-queue time is CPU contention, of
 * futex waits on one key lock contention, of blocked time disk contention, of socket waits on
 * one socket a slow dependency, of pipe waits on one pipe a slow pipeline stage. The method
 * and its statistics: docs/diagnose.md.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "analysis/diagnose.h"
#include "cli.h"
#include "clock.h"
#include "diagnose.h"
#include "host.h"
#include "log.h"
#include "plumb.h"
#include "modules/blk_module.h"
#include "modules/sched_module.h"
#include "identity/epoll.h"
#include "identity/sockets.h"

#define DIAG_MAX_TRACKED 4096
#define DIAG_MAX_SERIES	 4096
#define DIAG_MAX_EPOLL	 4096 /* files read from one epoll instance's fdinfo */
#define DIAG_MAX_INODES	 256 /* pipes and sockets whose holders are looked up */
#define DIAG_EVIDENCE	 3 /* threads or processes named per finding */

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

struct tracked {
	uint32_t tid, pid;
	uint64_t start_ns;
	char comm[16];
	char why[200];
	bool seed;
	bool counted; /* since is set: the thread has had an interval counted */
	size_t since; /* its first counted interval */
	double sum[2][SCHED_QUANTITIES]; /* per window (0 baseline, 1 observation): totals */
};

/* Part of a resource's series: the threads that joined in one interval (series_part_add). */
struct series_part {
	size_t since; /* the interval they joined in: their first counted one */
	double *v; /* per interval: their thread-seconds per second */
};

#define SERIES_PARTS 4

struct series {
	enum diag_cause cause;
	char key[96]; /* stable name: matched against a --baseline file */
	char resource[200]; /* for people */
	struct wait_key wkey; /* the resource, for the waits' series */
	uint32_t pid; /* a process that waits on it (for /proc lookups) */
	bool total; /* the sum of a cause's resources */
	bool file; /* epoll_file_wait: a file registered in an instance (evidence, no finding) */
	double *v; /* per interval: thread-seconds per second */
	struct series_part part[SERIES_PARTS]; /* a resource's: its threads by join */
	size_t nparts;
	double *file_base; /* --baseline: the recording's values */
	size_t nfile;
};

struct diag {
	const struct diagnose_options *o;
	regex_t comm_re;
	char cgroup_path[4096]; /* --cgroup, as the modules name cgroups ("/a/b") */
	struct tracked *tracked;
	size_t ntracked;
	struct series *series;
	size_t nseries;
	size_t nint, max_int, nbase; /* intervals so far, room, baseline intervals */
	double *int_s; /* each interval's length */
	struct sched_thread_sample *prev;
	size_t nprev;
	struct sched_wait_sample *prev_waits;
	size_t nprev_waits;
	/* snapshots at the observation's start and at the end: who else ran, and wrote */
	struct sched_thread_sample *mark_threads[2];
	size_t nmark_threads[2];
	struct blk_sample *mark_blk[3];
	size_t nmark_blk[3];
	struct blk_thread_sample *mark_blk_threads[3];
	size_t nmark_blk_threads[3];
	double mark_s[3];
	uint64_t scanned[DIAG_MAX_INODES]; /* inodes whose holders were looked up */
	size_t nscanned;
	struct epoll_file *epoll_buf; /* room for one instance's fdinfo */
	bool partial, tracked_full, series_full;
	double started, ended; /* CLOCK_MONOTONIC s of the first and the last snapshot */
	double observed; /* and of the one that starts the observation window */
	uint32_t self;
};

/* ---- /proc lookups: sockets' addresses, who holds a pipe or a socket ---- */

/* Processes that hold a file whose link reads "<type>:[ino]", up to max, into pids. */
static size_t fd_holders(const char *type, uint64_t ino, uint32_t *pids, size_t max)
{
	DIR *proc = opendir("/proc"), *fds;
	struct dirent *p, *f;
	char want[64], path[600], link[64];
	size_t n = 0;

	snprintf(want, sizeof(want), "%s:[%llu]", type, (unsigned long long)ino);
	while (proc && (p = readdir(proc)) && n < max) {
		if (!isdigit((unsigned char)p->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
		fds = opendir(path);
		while (fds && (f = readdir(fds))) {
			ssize_t len;

			snprintf(path, sizeof(path), "/proc/%s/fd/%s", p->d_name, f->d_name);
			len = readlink(path, link, sizeof(link) - 1);
			if (len <= 0)
				continue;
			link[len] = '\0';
			if (!strcmp(link, want)) {
				pids[n++] = (uint32_t)atoi(p->d_name);
				break;
			}
		}
		if (fds)
			closedir(fds);
	}
	if (proc)
		closedir(proc);
	return n;
}

static void proc_comm(uint32_t pid, char *out, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "r");
	if (!f || !fgets(out, len, f))
		snprintf(out, len, "?");
	else
		out[strcspn(out, "\n")] = '\0';
	if (f)
		fclose(f);
}

/* ---- tracking ---- */

static struct tracked *tracked_find(struct diag *d, uint32_t tid, uint64_t start_ns)
{
	for (size_t i = 0; i < d->ntracked; i++)
		if (d->tracked[i].tid == tid && d->tracked[i].start_ns == start_ns)
			return &d->tracked[i];
	return NULL;
}

static bool pid_tracked(struct diag *d, uint32_t pid)
{
	for (size_t i = 0; i < d->ntracked; i++)
		if (d->tracked[i].pid == pid)
			return true;
	return false;
}

static void track(struct diag *d, const struct sched_thread_sample *t, bool seed, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));

static void track(struct diag *d, const struct sched_thread_sample *t, bool seed, const char *fmt,
		  ...)
{
	struct tracked *x;
	va_list ap;

	if (t->pid == d->self || tracked_find(d, t->tid, t->start_ns))
		return;
	if (d->ntracked == DIAG_MAX_TRACKED) {
		d->tracked_full = true;
		return;
	}
	x = &d->tracked[d->ntracked++];
	memset(x, 0, sizeof(*x));
	x->tid = t->tid;
	x->pid = t->pid;
	x->start_ns = t->start_ns;
	x->seed = seed;
	memcpy(x->comm, t->comm, sizeof(x->comm));
	va_start(ap, fmt);
	vsnprintf(x->why, sizeof(x->why), fmt, ap);
	va_end(ap);
}

static bool is_seed(struct diag *d, struct plumb_module *m, const struct sched_thread_sample *t)
{
	char comm[17];

	if (d->o->pid)
		return (int)t->pid == d->o->pid;
	if (d->o->comm[0]) {
		memcpy(comm, t->comm, 16);
		comm[16] = '\0';
		return !regexec(&d->comm_re, comm, 0, NULL, 0);
	}
	const char *path = sched_cgroup_path(m, t->cgroup_id);
	size_t n = strlen(d->cgroup_path);

	return !strncmp(path, d->cgroup_path, n) &&
	       (path[n] == '\0' || path[n] == '/' || !strcmp(d->cgroup_path, "/"));
}

static bool wait_same_resource(const struct wait_key *a, const struct wait_key *b)
{
	return a->kind == b->kind && a->bri == b->bri && a->a == b->a && a->b == b->b &&
	       a->c == b->c;
}

/* The inode of the socket at the other end of a local socket: unix (BPF), TCP or UDP. */
static uint64_t socket_peer(const struct wait_key *k, uint32_t pid)
{
	struct socket_ends e;

	if (k->c)
		return k->c; /* a unix socket's peer, read by the BPF program */
	return socket_ends(pid, k->a, &e) ? 0 : e.peer_inode;
}

static void resource_name(const struct wait_key *k, uint32_t pid, char *out, size_t len)
{
	struct socket_ends e;

	switch (k->bri) {
	case BRI_INODE:
		if (k->kind == WAIT_SOCKET && !socket_ends(pid, k->a, &e)) {
			snprintf(out, len, "socket:[%llu] %s %s -> %s", (unsigned long long)k->a,
				 e.proto, e.local, e.remote);
		} else if (k->kind == WAIT_SOCKET && k->c) {
			snprintf(out, len, "socket:[%llu] unix, peer socket:[%u]",
				 (unsigned long long)k->a, k->c);
		} else {
			snprintf(out, len, "%s:[%llu]", k->kind == WAIT_PIPE ? "pipe" : "socket",
				 (unsigned long long)k->a);
		}
		return;
	case BRI_FUTEX_PRIVATE:
		snprintf(out, len, "futex 0x%llx in pid %u", (unsigned long long)k->a, pid);
		return;
	case BRI_FUTEX_SHARED:
		snprintf(out, len, "shared futex: inode %llu offset %llu (dev %u:%u)",
			 (unsigned long long)k->a, (unsigned long long)k->b, k->c >> 20,
			 k->c & 0xfffff);
		return;
	case BRI_EPOLL:
		snprintf(out, len, "epoll instance fd %llu in pid %u", (unsigned long long)k->b,
			 pid);
		return;
	}
	snprintf(out, len, "%s", wait_kind_names[k->kind < WAIT_KINDS ? k->kind : 0]);
}

/*
 * The other end of a tracked thread's pipe or local socket: every thread of the processes
 * holding it joins. Each inode is looked up once (a walk of every process's fds).
 */
static void track_holders(struct diag *d, const struct sched_wait_sample *w, uint32_t pid,
			  const struct sched_thread_sample *all, size_t n)
{
	uint32_t pids[16];
	uint64_t ino = w->key.a;
	const char *type = w->key.kind == WAIT_PIPE ? "pipe" : "socket";
	char name[240];
	size_t np;

	if (w->key.bri != BRI_INODE || (w->key.kind != WAIT_PIPE && w->key.kind != WAIT_SOCKET))
		return;
	for (size_t i = 0; i < d->nscanned; i++)
		if (d->scanned[i] == ino)
			return;
	if (d->nscanned == DIAG_MAX_INODES)
		return;
	d->scanned[d->nscanned++] = ino;
	if (w->key.kind == WAIT_SOCKET) {
		ino = socket_peer(&w->key, pid);
		if (!ino)
			return; /* its peer is not on this host */
	}
	resource_name(&w->key, pid, name, sizeof(name));
	np = fd_holders(type, ino, pids, 16);
	for (size_t k = 0; k < np; k++)
		for (size_t i = 0; i < n; i++)
			if (all[i].pid == pids[k] && pids[k] != pid)
				track(d, &all[i], false, "holds the %s of %s (tracked pid %u)",
				      w->key.kind == WAIT_PIPE ? "other end" : "peer", name, pid);
}

static void tracking_update(struct diag *d, struct plumb_module *m,
			    const struct sched_thread_sample *t, size_t n,
			    const struct sched_wait_sample *w, size_t nw)
{
	size_t before;

	for (size_t i = 0; i < n; i++)
		if (is_seed(d, m, &t[i]))
			track(d, &t[i], true, "%s",
			      d->o->pid	    ? "--pid" :
			      d->o->comm[0] ? "--comm" :
					      "--cgroup");
	do {
		before = d->ntracked;
		for (size_t i = 0; i < n; i++)
			if (!pid_tracked(d, t[i].pid) && pid_tracked(d, t[i].ppid))
				track(d, &t[i], false, "forked by tracked pid %u", t[i].ppid);
		/* threads waiting on a resource a tracked thread waits on */
		for (size_t i = 0; i < nw; i++) {
			bool mine = false;

			for (size_t k = 0; k < d->ntracked && !mine; k++)
				mine = d->tracked[k].tid == w[i].key.tid;
			if (!mine)
				continue;
			for (size_t j = 0; j < nw; j++) {
				char name[240];

				if (j == i || !wait_same_resource(&w[i].key, &w[j].key))
					continue;
				for (size_t k = 0; k < n; k++)
					if (t[k].tid == w[j].key.tid &&
					    !tracked_find(d, t[k].tid, t[k].start_ns)) {
						resource_name(&w[j].key, t[k].pid, name,
							      sizeof(name));
						track(d, &t[k], false,
						      "waits on %s too (tracked tid %u)", name,
						      w[i].key.tid);
					}
			}
			for (size_t k = 0; k < n; k++)
				if (t[k].tid == w[i].key.tid) {
					track_holders(d, &w[i], t[k].pid, t, n);
					break;
				}
		}
	} while (d->ntracked != before);
}

/* ---- series ---- */

static struct series *series_get(struct diag *d, enum diag_cause cause, const char *key,
				 const char *resource)
{
	struct series *s;

	for (size_t i = 0; i < d->nseries; i++)
		if (d->series[i].cause == cause && !strcmp(d->series[i].key, key))
			return &d->series[i];
	if (d->nseries == DIAG_MAX_SERIES) {
		d->series_full = true;
		return NULL;
	}
	s = &d->series[d->nseries];
	memset(s, 0, sizeof(*s));
	s->v = calloc(d->max_int, sizeof(*s->v));
	if (!s->v)
		return NULL;
	d->nseries++;
	s->cause = cause;
	snprintf(s->key, sizeof(s->key), "%s", key);
	snprintf(s->resource, sizeof(s->resource), "%s", resource);
	return s;
}

/*
 * A thread's wait on a resource, in its series and in the series' part for the interval the
 * thread joined in: that part's baseline starts there (before, the thread's waits were not
 * looked for), and a thread that joins later leaves the earlier threads' baseline whole. A
 * baseline cut at the latest join of any thread left a 6.12 guest's pipeline run, whose stage
 * joined in the baseline window's last intervals, too few to name the pipe its consumer (the
 * target, tracked from the start) waited on; the total named nothing. Past SERIES_PARTS
 * join intervals, a thread of another one goes into the part of the latest, whose baseline
 * starts at the latest join of its threads.
 * Not for a total over every tracked thread (cpu, disk, poll, "kind:*"), which keeps its
 * whole baseline: a thread's join adds its part from then on, and cutting the baseline at
 * each join left the totals of a run with a late helper thread too few intervals to find
 * anything (a 6.12 guest's disk run).
 */
static void series_part_add(struct diag *d, struct series *s, const struct tracked *x, double v)
{
	struct series_part *p = NULL;

	s->v[d->nint] += v;
	for (size_t i = 0; i < s->nparts && !p; i++)
		if (s->part[i].since == x->since)
			p = &s->part[i];
	if (!p && s->nparts < SERIES_PARTS) {
		p = &s->part[s->nparts];
		p->v = calloc(d->max_int, sizeof(*p->v));
		if (!p->v)
			return;
		p->since = x->since;
		s->nparts++;
	}
	if (!p) { /* full: the latest part, from the latest join */
		p = &s->part[0];
		for (size_t i = 1; i < s->nparts; i++)
			if (s->part[i].since > p->since)
				p = &s->part[i];
		if (p->since < x->since)
			p->since = x->since;
	}
	p->v[d->nint] += v;
}

static void series_add(struct diag *d, enum diag_cause cause, const char *key, const char *resource,
		       double v)
{
	struct series *s = series_get(d, cause, key, resource);

	if (s)
		s->v[d->nint] += v;
}

static const enum diag_cause kind_cause[WAIT_KINDS] = {
	[WAIT_PIPE] = DIAG_PIPE,   [WAIT_SOCKET] = DIAG_DEPENDENCY, [WAIT_FUTEX] = DIAG_LOCK,
	[WAIT_EPOLL] = DIAG_EPOLL, [WAIT_POLL] = DIAG_CAUSES,
};

static const struct sched_thread_sample *sample_find(const struct sched_thread_sample *v, size_t n,
						     uint32_t tid, uint64_t start_ns)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].tid == tid && v[i].start_ns == start_ns)
			return &v[i];
	return NULL;
}

static const struct sched_wait_sample *wait_find(const struct sched_wait_sample *v, size_t n,
						 const struct wait_key *k)
{
	for (size_t i = 0; i < n; i++)
		if (!memcmp(&v[i].key, k, sizeof(*k)))
			return &v[i];
	return NULL;
}

/* A file registered in an epoll instance, for people: "fd 5 socket:[123] tcp a -> b". */
static void epoll_file_name(uint32_t pid, const struct epoll_file *f, char *out, size_t len)
{
	char path[64], link[160], want[40];
	struct socket_ends e;
	struct stat st;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, f->tfd);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof(want), ":[%llu]", (unsigned long long)f->ino);
	if (!strncmp(link, "socket:", 7) && strstr(link, want) && !socket_ends(pid, f->ino, &e))
		snprintf(out, len, "fd %d %.40s %s %s -> %s", f->tfd, link, e.proto, e.local,
			 e.remote);
	else if (n > 0 && (strstr(link, want) || (!stat(path, &st) && st.st_ino == f->ino)))
		snprintf(out, len, "fd %d %s", f->tfd, link);
	else /* the fd was closed or reused since: the registration outlives it */
		snprintf(out, len, "fd %d (closed) inode %llu dev %u:%u", f->tfd,
			 (unsigned long long)f->ino, f->sdev >> 20, f->sdev & 0xfffff);
}

/*
 * epoll_file_wait: an interval's wait on an epoll instance (v, thread-seconds per second) is
 * charged to every file registered in it at the interval's end, read from the waiting
 * process's fdinfo (so registrations older than plumb count too). A registration that
 * changed within the interval is seen at the next snapshot: its time is exact to an interval.
 */
static void epoll_files_charge(struct diag *d, const struct wait_key *k, uint32_t pid, double v)
{
	char key[96], name[240];
	int n = epoll_files(pid, (int)k->b, d->epoll_buf, DIAG_MAX_EPOLL);

	for (int i = 0; i < n && i < DIAG_MAX_EPOLL; i++) {
		const struct epoll_file *f = &d->epoll_buf[i];
		struct series *s;

		snprintf(key, sizeof(key), "epoll-file:%llx:%d:%llx:%x", (unsigned long long)k->a,
			 f->tfd, (unsigned long long)f->ino, f->sdev);
		s = series_get(d, DIAG_EPOLL, key, "");
		if (!s)
			return;
		if (!s->resource[0]) {
			epoll_file_name(pid, f, name, sizeof(name));
			snprintf(s->resource, sizeof(s->resource), "%.199s", name);
			s->wkey = *k;
			s->wkey.tid = 0;
			s->pid = pid;
			s->file = true;
		}
		s->v[d->nint] += v;
	}
	if (n > DIAG_MAX_EPOLL)
		d->series_full = true;
}

/*
 * A thread tracked from the observation window on (it joined the set then: it began to wait
 * on what a tracked thread waits on, or to hold its other end) has no baseline in this run:
 * counted in no series, it would be a rise from zero (a clean pipeline run named the stage
 * that joined late, waiting on its full output pipe as it always had). It stays in the
 * tracking list. With a --baseline recording the baseline is the recording's: all count.
 */
static bool late(const struct diag *d, const struct tracked *x)
{
	return !d->o->baseline[0] && x->since >= d->nbase;
}

/* One interval: the tracked threads' changes since the last snapshot, as signals. */
static void interval_add(struct diag *d, const struct sched_thread_sample *t, size_t n,
			 const struct sched_wait_sample *w, size_t nw, double secs)
{
	int window = d->nint >= d->nbase;

	for (size_t i = 0; i < d->ntracked; i++) {
		struct tracked *x = &d->tracked[i];
		const struct sched_thread_sample *cur = sample_find(t, n, x->tid, x->start_ns);
		const struct sched_thread_sample *old =
			sample_find(d->prev, d->nprev, x->tid, x->start_ns);
		double q[SCHED_QUANTITIES];

		if (!cur || !old)
			continue; /* gone, or new in this interval: from the next one on */
		if (!x->counted) {
			x->counted = true;
			x->since = d->nint;
		}
		if (late(d, x))
			continue;
		for (int k = 0; k < SCHED_QUANTITIES; k++) {
			q[k] = cur->q[k] > old->q[k] ? (double)(cur->q[k] - old->q[k]) : 0;
			x->sum[window][k] += q[k];
		}
		series_add(d, DIAG_CPU, "cpu", "run-queue wait (runnable, no CPU)",
			   q[Q_RQ] / 1e9 / secs);
		series_add(d, DIAG_DISK, "disk", "blocked (uninterruptible, I/O wait included)",
			   q[Q_BLOCK] / 1e9 / secs);
		/* poll and select name no resource the module could read: per thread only */
		series_add(d, DIAG_EPOLL, "poll", "poll/select waits",
			   q[Q_WAIT_NS + WAIT_POLL] / 1e9 / secs);
	}
	for (size_t i = 0; i < nw; i++) {
		const struct sched_wait_sample *old;
		const struct sched_thread_sample *cur = NULL;
		const struct tracked *x = NULL;
		struct series *s;
		char key[96], name[240];
		enum diag_cause cause;
		double v;

		if (w[i].key.kind >= WAIT_KINDS || kind_cause[w[i].key.kind] == DIAG_CAUSES)
			continue;
		for (size_t k = 0; k < d->ntracked && !cur; k++)
			if (d->tracked[k].tid == w[i].key.tid) {
				x = &d->tracked[k];
				cur = sample_find(t, n, w[i].key.tid, x->start_ns);
			}
		if (!cur || !x->counted || late(d, x))
			continue;
		old = wait_find(d->prev_waits, d->nprev_waits, &w[i].key);
		if (!sample_find(d->prev, d->nprev, cur->tid, cur->start_ns))
			continue; /* new thread: from the next interval on, as above */
		v = (w[i].val.ns - (old ? old->val.ns : 0)) / 1e9 / secs;
		cause = kind_cause[w[i].key.kind];
		snprintf(key, sizeof(key), "%s:%u:%llx:%llx:%x", wait_kind_names[w[i].key.kind],
			 w[i].key.bri, (unsigned long long)w[i].key.a,
			 (unsigned long long)w[i].key.b, w[i].key.c);
		s = series_get(d, cause, key, "");
		if (s && !s->resource[0]) {
			resource_name(&w[i].key, cur->pid, name, sizeof(name));
			snprintf(s->resource, sizeof(s->resource), "%.199s", name);
			s->wkey = w[i].key;
			s->pid = cur->pid;
		}
		if (s)
			series_part_add(d, s, x, v);
		if (w[i].key.bri == BRI_EPOLL && v > 0)
			epoll_files_charge(d, &w[i].key, cur->pid, v);
		snprintf(key, sizeof(key), "%s:*", wait_kind_names[w[i].key.kind]);
		snprintf(name, sizeof(name), "all %s waits", wait_kind_names[w[i].key.kind]);
		s = series_get(d, cause, key, name);
		if (s) {
			s->total = true;
			s->v[d->nint] += v;
		}
	}
	d->int_s[d->nint] = secs;
	d->nint++;
}

/* ---- findings ---- */

struct finding {
	struct series *s;
	struct diag_result r;
};

static int finding_cmp(const void *a, const void *b)
{
	const struct finding *x = a, *y = b;

	if (x->r.significant != y->r.significant)
		return y->r.significant - x->r.significant;
	/*
	 * More time in epoll is a server with less to do: its requests come slower, the cause is
	 * upstream. It ranks after every other significant rise, which would explain it.
	 */
	if ((x->s->cause == DIAG_EPOLL) != (y->s->cause == DIAG_EPOLL))
		return (x->s->cause == DIAG_EPOLL) - (y->s->cause == DIAG_EPOLL);
	return x->r.change < y->r.change ? 1 : x->r.change > y->r.change ? -1 : 0;
}

/* Which of two comparisons ranks first, as finding_cmp ranks findings. */
static bool result_better(const struct diag_result *a, const struct diag_result *b)
{
	return a->significant != b->significant ? a->significant : a->change > b->change;
}

/* Values v's observation window against its baseline from interval since on. */
static void compare_since(struct diag *d, const double *v, size_t since, struct diag_result *r)
{
	diag_compare(v + since, since < d->nbase ? d->nbase - since : 0, v + d->nbase,
		     d->nint - d->nbase, r);
}

/*
 * A series' observation window against its baseline: the recording's, or this run's start.
 * A resource's series with threads that joined in different intervals: whichever ranks first
 * of each part against the baseline from its threads' join, and the whole series against the
 * baseline from the latest join (what one part alone would miss: a rise spread over parts).
 */
static void series_compare(struct diag *d, struct series *s, struct diag_result *r)
{
	double zero = 0;
	struct diag_result pr;
	size_t latest = 0;

	if (d->o->baseline[0]) {
		diag_compare(s->nfile ? s->file_base : &zero, s->nfile ? s->nfile : 1, s->v,
			     d->nint, r);
		return;
	}
	if (!s->nparts) {
		compare_since(d, s->v, 0, r);
		return;
	}
	for (size_t i = 0; i < s->nparts; i++) {
		compare_since(d, s->part[i].v, s->part[i].since, &pr);
		if (!i || result_better(&pr, r))
			*r = pr;
		if (latest < s->part[i].since)
			latest = s->part[i].since;
	}
	if (s->nparts > 1) { /* one part is the whole series */
		compare_since(d, s->v, latest, &pr);
		if (result_better(&pr, r))
			*r = pr;
	}
}

static size_t findings_make(struct diag *d, struct finding **out)
{
	struct finding *f = calloc(d->nseries ? d->nseries : 1, sizeof(*f));
	size_t n = 0, nsig = 0;

	*out = f;
	if (!f)
		return 0;
	for (size_t i = 0; i < d->nseries; i++) {
		if (d->series[i].file)
			continue; /* evidence of its instance's finding */
		f[n].s = &d->series[i];
		series_compare(d, f[n].s, &f[n].r);
		n++;
	}
	qsort(f, n, sizeof(*f), finding_cmp);
	/* a cause's total is shown only when none of its resources explains the rise */
	for (size_t i = 0; i < n; i++) {
		if (!f[i].r.significant || !f[i].s->total)
			continue;
		for (size_t k = 0; k < n; k++)
			if (k != i && f[k].r.significant && !f[k].s->total &&
			    f[k].s->cause == f[i].s->cause &&
			    !strncmp(f[k].s->key, f[i].s->key, strcspn(f[i].s->key, "*")))
				f[i].r.significant = false;
	}
	qsort(f, n, sizeof(*f), finding_cmp);
	while (nsig < n && f[nsig].r.significant)
		nsig++;
	return nsig;
}

/*
 * The tracked threads that changed most in quantity q, as evidence lines: per second, in
 * seconds (q in ns) or in events (counts: scale 1).
 */
static void evidence_threads(struct diag *d, int q, const char *what, struct json_object *ev)
{
	double scale = q == Q_FUTEX_WAKES || (q >= Q_WAIT_N && q < Q_WAIT_N + WAIT_KINDS) ? 1 : 1e9;
	const char *unit = scale == 1 ? "/s" : " s/s";
	double bs = 0, os = 0;
	bool used[DIAG_MAX_TRACKED] = { false };
	char line[320];

	for (size_t i = 0; i < d->nbase; i++)
		bs += d->int_s[i];
	for (size_t i = d->nbase; i < d->nint; i++)
		os += d->int_s[i];
	for (int k = 0; k < DIAG_EVIDENCE; k++) {
		double best = 0;
		size_t bi = 0;

		for (size_t i = 0; i < d->ntracked; i++) {
			double ch = d->tracked[i].sum[1][q] / scale / (os ? os : 1) -
				    d->tracked[i].sum[0][q] / scale / (bs ? bs : 1);

			if (!used[i] && ch > best) {
				best = ch;
				bi = i;
			}
		}
		if (best <= 0)
			return;
		used[bi] = true;
		snprintf(line, sizeof(line), "%s: tid %u (%.16s, pid %u) %+.3f%s", what,
			 d->tracked[bi].tid, d->tracked[bi].comm, d->tracked[bi].pid, best, unit);
		json_object_array_add(ev, json_object_new_string(line));
	}
}

/* Processes outside the tracked set with the most CPU time in the observation window. */
static void evidence_cpu_hogs(struct diag *d, struct json_object *ev)
{
	struct sched_thread_sample *a = d->mark_threads[0], *b = d->mark_threads[1];
	double secs = d->mark_s[2] - d->mark_s[1];
	struct {
		uint32_t pid;
		char comm[16];
		double run;
	} top[DIAG_EVIDENCE] = { 0 };
	char line[200];

	if (!a || !b || secs <= 0)
		return;
	for (size_t i = 0; i < d->nmark_threads[1]; i++) {
		const struct sched_thread_sample *old =
			sample_find(a, d->nmark_threads[0], b[i].tid, b[i].start_ns);
		double run = (b[i].q[Q_RUN] - (old ? old->q[Q_RUN] : 0)) / 1e9 / secs;
		size_t k;

		if (pid_tracked(d, b[i].pid) || b[i].pid == d->self || !b[i].pid)
			continue;
		for (k = 0; k < DIAG_EVIDENCE; k++) /* per process: add to its entry */
			if (top[k].pid == b[i].pid)
				break;
		if (k < DIAG_EVIDENCE) {
			top[k].run += run;
			continue;
		}
		for (k = 0; k < DIAG_EVIDENCE; k++)
			if (run > top[k].run) {
				memmove(&top[k + 1], &top[k],
					(DIAG_EVIDENCE - k - 1) * sizeof(top[0]));
				top[k].pid = b[i].pid;
				memcpy(top[k].comm, b[i].comm, 16);
				top[k].run = run;
				break;
			}
	}
	for (int k = 0; k < DIAG_EVIDENCE && top[k].run > 0.01; k++) {
		snprintf(line, sizeof(line), "running meanwhile: pid %u (%.16s) %.2f CPU-s/s",
			 top[k].pid, top[k].comm, top[k].run);
		json_object_array_add(ev, json_object_new_string(line));
	}
}

/* A thread's sectors on a disk at mark `at` (0 if it had none then). */
static const struct blk_thread_sample *blk_thread_at(struct diag *d, int at,
						     const struct blk_thread_sample *t)
{
	for (size_t i = 0; i < d->nmark_blk_threads[at]; i++) {
		const struct blk_thread_sample *o = &d->mark_blk_threads[at][i];

		if (o->tid == t->tid && o->start_ns == t->start_ns && !strcmp(o->device, t->device))
			return o;
	}
	return NULL;
}

/* Threads outside the tracked set that submitted the most sectors in the observation. */
static void evidence_disk_threads(struct diag *d, struct json_object *ev)
{
	const struct blk_thread_sample *b = d->mark_blk_threads[2], *top[DIAG_EVIDENCE] = { 0 };
	double secs = d->mark_s[2] - d->mark_s[1], v[DIAG_EVIDENCE] = { 0 };
	char line[300], comm[32];

	if (!b || !d->mark_blk_threads[1] || secs <= 0)
		return;
	for (size_t i = 0; i < d->nmark_blk_threads[2]; i++) {
		const struct blk_thread_sample *old = blk_thread_at(d, 1, &b[i]);
		double sectors = b[i].read + b[i].write - (old ? old->read + old->write : 0);

		if (pid_tracked(d, b[i].pid) || b[i].pid == d->self)
			continue;
		for (int k = 0; k < DIAG_EVIDENCE; k++)
			if (sectors > v[k]) {
				memmove(&top[k + 1], &top[k],
					(DIAG_EVIDENCE - k - 1) * sizeof(top[0]));
				memmove(&v[k + 1], &v[k], (DIAG_EVIDENCE - k - 1) * sizeof(v[0]));
				top[k] = &b[i];
				v[k] = sectors;
				break;
			}
	}
	for (int k = 0; k < DIAG_EVIDENCE && top[k]; k++) {
		const struct sched_thread_sample *t = sample_find(
			d->mark_threads[1], d->nmark_threads[1], top[k]->tid, top[k]->start_ns);

		if (t)
			snprintf(comm, sizeof(comm), "%.16s", t->comm);
		else
			proc_comm(top[k]->pid, comm, sizeof(comm));
		snprintf(line, sizeof(line),
			 "submitting meanwhile: tid %u (%s, pid %u) %.1f MiB/s to %s", top[k]->tid,
			 comm, top[k]->pid, v[k] * 512 / 1048576 / secs, top[k]->device);
		json_object_array_add(ev, json_object_new_string(line));
	}
}

/* A tracked thread's sector_count over the run, per disk. */
static struct json_object *thread_sectors_json(struct diag *d, const struct tracked *x)
{
	struct json_object *list = json_object_new_array();

	for (size_t i = 0; i < d->nmark_blk_threads[2]; i++) {
		const struct blk_thread_sample *b = &d->mark_blk_threads[2][i], *old;
		struct json_object *o;

		if (b->tid != x->tid || b->start_ns != x->start_ns)
			continue;
		old = blk_thread_at(d, 0, b);
		o = json_object_new_object();
		json_object_object_add(o, "device", json_object_new_string(b->device));
		json_object_object_add(
			o, "read",
			json_object_new_int64((int64_t)(b->read - (old ? old->read : 0))));
		json_object_object_add(
			o, "write",
			json_object_new_int64((int64_t)(b->write - (old ? old->write : 0))));
		json_object_array_add(list, o);
	}
	return list;
}

/* The disks the tracked processes' cgroups wrote to: their share then and now, who else. */
static void evidence_disks(struct diag *d, struct json_object *ev)
{
	struct blk_sample *w[3] = { d->mark_blk[0], d->mark_blk[1], d->mark_blk[2] };
	char line[400];

	if (!w[0] || !w[1] || !w[2])
		return;
	for (size_t i = 0; i < d->nmark_blk[2]; i++) {
		const char *dev = w[2][i].device;
		double mine[2] = { 0 }, all[2] = { 0 }, other_best = 0;
		const char *other = NULL;
		bool target = false;

		for (size_t k = 0; k < d->ntracked && !target; k++) {
			const struct sched_thread_sample *t = sample_find(
				d->prev, d->nprev, d->tracked[k].tid, d->tracked[k].start_ns);

			target = t && t->cgroup_id == w[2][i].cgroup_id;
		}
		if (!target)
			continue;
		for (size_t j = 0; j < d->nmark_blk[2]; j++) {
			double v[2];
			uint64_t at[3] = { 0, 0, w[2][j].sectors };

			if (strcmp(w[2][j].device, dev))
				continue;
			for (int m = 0; m < 2; m++)
				for (size_t k = 0; k < d->nmark_blk[m]; k++)
					if (w[m][k].cgroup_id == w[2][j].cgroup_id &&
					    !strcmp(w[m][k].device, dev))
						at[m] = w[m][k].sectors;
			v[0] = at[1] - at[0];
			v[1] = at[2] - at[1];
			all[0] += v[0];
			all[1] += v[1];
			if (w[2][j].cgroup_id == w[2][i].cgroup_id) {
				mine[0] += v[0];
				mine[1] += v[1];
			} else if (v[1] > other_best) {
				other_best = v[1];
				other = w[2][j].cgroup;
			}
		}
		snprintf(line, sizeof(line),
			 "disk %s: the target's share of its sectors %.0f%% -> %.0f%%%s%s", dev,
			 all[0] ? 100 * mine[0] / all[0] : 0, all[1] ? 100 * mine[1] / all[1] : 0,
			 other ? "; most of the rest from cgroup " : "", other ? other : "");
		json_object_array_add(ev, json_object_new_string(line));
		if (other) {
			snprintf(line, sizeof(line), "writing meanwhile: cgroup %s, %.1f MiB/s",
				 other, other_best * 512 / 1048576 / (d->mark_s[2] - d->mark_s[1]));
			json_object_array_add(ev, json_object_new_string(line));
		}
	}
}

static bool pid_is_seed(struct diag *d, uint32_t pid)
{
	for (size_t i = 0; i < d->ntracked; i++)
		if (d->tracked[i].pid == pid && d->tracked[i].seed)
			return true;
	return false;
}

/* Who is at the other end of a socket or pipe: the processes that hold it, the target aside. */
static void evidence_other_end(struct diag *d, struct series *s, struct json_object *ev)
{
	uint32_t pids[8];
	uint64_t ino = s->wkey.a;
	char line[300], comm[32];
	size_t n;

	if (s->wkey.bri != BRI_INODE)
		return;
	if (s->wkey.kind == WAIT_SOCKET) {
		ino = socket_peer(&s->wkey, s->pid);
		if (!ino) {
			json_object_array_add(
				ev, json_object_new_string("the remote end is not on this host"));
			return;
		}
	}
	n = fd_holders(s->wkey.kind == WAIT_PIPE ? "pipe" : "socket", ino, pids, 8);
	for (size_t i = 0; i < n; i++) {
		if (pid_is_seed(d, pids[i]))
			continue;
		proc_comm(pids[i], comm, sizeof(comm));
		snprintf(line, sizeof(line), "%s: pid %u (%s)",
			 s->wkey.kind == WAIT_PIPE ? "the other end is held by" :
						     "served on this host by",
			 pids[i], comm);
		json_object_array_add(ev, json_object_new_string(line));
	}
}

static double series_seconds(struct diag *d, const struct series *s)
{
	double t = 0;

	for (size_t i = 0; i < d->nint; i++)
		t += s->v[i] * d->int_s[i];
	return t;
}

/* The files registered in an epoll instance with the most wait charged in the observation. */
static void evidence_epoll_files(struct diag *d, struct series *inst, struct json_object *ev)
{
	bool used[DIAG_MAX_SERIES] = { false };
	char line[360];

	for (int k = 0; k < DIAG_EVIDENCE; k++) {
		struct diag_result r, best = { .obs = -1 };
		size_t bi = 0;

		for (size_t i = 0; i < d->nseries; i++) {
			struct series *s = &d->series[i];

			if (!s->file || used[i] || s->wkey.a != inst->wkey.a || s->pid != inst->pid)
				continue;
			series_compare(d, s, &r);
			if (r.obs > best.obs) {
				best = r;
				bi = i;
			}
		}
		if (best.obs < 0)
			return;
		used[bi] = true;
		snprintf(line, sizeof(line), "registered while waiting: %s, %.3f -> %.3f s/s",
			 d->series[bi].resource, best.base, best.obs);
		json_object_array_add(ev, json_object_new_string(line));
	}
}

/* epoll_file_wait of every file seen registered in a tracked thread's epoll instance. */
static struct json_object *epoll_files_json(struct diag *d)
{
	struct json_object *list = json_object_new_array();
	char inst[240];

	for (size_t i = 0; i < d->nseries; i++) {
		struct series *s = &d->series[i];
		struct json_object *o;
		struct diag_result r;

		if (!s->file || !s->v)
			continue;
		o = json_object_new_object();
		series_compare(d, s, &r);
		resource_name(&s->wkey, s->pid, inst, sizeof(inst));
		json_object_object_add(o, "instance", json_object_new_string(inst));
		json_object_object_add(o, "file", json_object_new_string(s->resource));
		json_object_object_add(o, "wait_s", json_object_new_double(series_seconds(d, s)));
		json_object_object_add(o, "baseline", json_object_new_double(r.base));
		json_object_object_add(o, "observed", json_object_new_double(r.obs));
		json_object_array_add(list, o);
	}
	return list;
}

static const char *const cause_hint[DIAG_CAUSES] = {
	"threads wait longer for a CPU",
	"threads wait longer on one futex (a contended lock)",
	"threads are blocked longer (disk or other uninterruptible waits)",
	"threads wait longer on one socket (the other end answers slowly)",
	"threads wait longer on one pipe (another stage is slower)",
	"threads wait longer in epoll",
};

static struct json_object *report_make(struct diag *d)
{
	struct json_object *doc = json_object_new_object(), *list = json_object_new_array();
	struct json_object *tracking = json_object_new_array();
	struct finding *f;
	size_t nsig = findings_make(d, &f);
	char target[4200];

	if (d->o->pid)
		snprintf(target, sizeof(target), "pid %d", d->o->pid);
	else if (d->o->comm[0])
		snprintf(target, sizeof(target), "comm ~ /%s/", d->o->comm);
	else
		snprintf(target, sizeof(target), "cgroup %s", d->cgroup_path);
	json_object_object_add(doc, "target", json_object_new_string(target));
	json_object_object_add(doc, "interval_s", json_object_new_double(d->o->interval_ms / 1e3));
	json_object_object_add(doc, "intervals", json_object_new_int((int)d->nint));
	snprintf(target, sizeof(target), "the first %.1f s", d->nbase * d->o->interval_ms / 1e3);
	json_object_object_add(doc, "baseline",
			       json_object_new_string(d->o->baseline[0] ? d->o->baseline : target));
	json_object_object_add(doc, "baseline_intervals",
			       json_object_new_int(d->o->baseline[0] ? 0 : (int)d->nbase));
	json_object_object_add(doc, "partial", json_object_new_boolean(d->partial));
	for (size_t i = 0; i < nsig && f; i++) {
		struct json_object *o = json_object_new_object(), *ev = json_object_new_array();
		struct series *s = f[i].s;

		json_object_object_add(o, "cause",
				       json_object_new_string(diag_cause_names[s->cause]));
		json_object_object_add(o, "resource", json_object_new_string(s->resource));
		json_object_object_add(o, "explanation",
				       json_object_new_string(cause_hint[s->cause]));
		json_object_object_add(o, "baseline", json_object_new_double(f[i].r.base));
		json_object_object_add(o, "observed", json_object_new_double(f[i].r.obs));
		json_object_object_add(o, "change", json_object_new_double(f[i].r.change));
		json_object_object_add(o, "z", json_object_new_double(f[i].r.z));
		switch (s->cause) {
		case DIAG_CPU:
			evidence_threads(d, Q_RQ, "waiting for a CPU", ev);
			evidence_cpu_hogs(d, ev);
			break;
		case DIAG_DISK:
			evidence_threads(d, Q_BLOCK, "blocked", ev);
			evidence_disks(d, ev);
			evidence_disk_threads(d, ev);
			break;
		case DIAG_LOCK:
			evidence_threads(d, Q_WAIT_NS + WAIT_FUTEX, "waiting on futexes", ev);
			evidence_threads(d, Q_FUTEX_WAKES, "waking the waiters (futex wakes)", ev);
			break;
		case DIAG_DEPENDENCY:
		case DIAG_PIPE:
			evidence_threads(
				d, Q_WAIT_NS + (s->cause == DIAG_PIPE ? WAIT_PIPE : WAIT_SOCKET),
				"waiting", ev);
			evidence_other_end(d, s, ev);
			break;
		default:
			evidence_threads(
				d, Q_WAIT_NS + (strcmp(s->key, "poll") ? WAIT_EPOLL : WAIT_POLL),
				"waiting", ev);
			if (s->wkey.bri == BRI_EPOLL)
				evidence_epoll_files(d, s, ev);
		}
		json_object_object_add(o, "evidence", ev);
		json_object_array_add(list, o);
	}
	json_object_object_add(doc, "findings", list);
	json_object_object_add(
		doc, "verdict",
		json_object_new_string(nsig ? "likely causes found" : "no significant change"));
	for (size_t i = 0; i < d->ntracked; i++) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "tid", json_object_new_int((int)d->tracked[i].tid));
		json_object_object_add(o, "pid", json_object_new_int((int)d->tracked[i].pid));
		json_object_object_add(
			o, "comm",
			json_object_new_string_len(d->tracked[i].comm,
						   (int)strnlen(d->tracked[i].comm, 16)));
		json_object_object_add(o, "why", json_object_new_string(d->tracked[i].why));
		/* false: joined in the observation window, counts in no signal (late()) */
		json_object_object_add(
			o, "counted",
			json_object_new_boolean(d->tracked[i].counted && !late(d, &d->tracked[i])));
		json_object_object_add(o, "sectors", thread_sectors_json(d, &d->tracked[i]));
		json_object_array_add(tracking, o);
	}
	json_object_object_add(doc, "tracking", tracking);
	json_object_object_add(doc, "tracking_full", json_object_new_boolean(d->tracked_full));
	json_object_object_add(doc, "epoll_files", epoll_files_json(d));
	json_object_object_add(doc, "signals_full", json_object_new_boolean(d->series_full));
	json_object_object_add(doc, "window_monotonic_s", json_object_new_array());
	json_object_array_add(json_object_object_get(doc, "window_monotonic_s"),
			      json_object_new_double(d->started));
	json_object_array_add(json_object_object_get(doc, "window_monotonic_s"),
			      json_object_new_double(d->ended));
	json_object_object_add(doc, "observation_monotonic_s", json_object_new_double(d->observed));
	free(f);
	return doc;
}

static void report_print(struct json_object *doc, bool explain)
{
	struct json_object *f = json_object_object_get(doc, "findings");
	struct json_object *t = json_object_object_get(doc, "tracking");
	size_t nf = json_object_array_length(f), nt = json_object_array_length(t);

	printf("plumb diagnose: %s, %d intervals of %.1f s; baseline: %s%s\n",
	       json_object_get_string(json_object_object_get(doc, "target")),
	       json_object_get_int(json_object_object_get(doc, "intervals")),
	       json_object_get_double(json_object_object_get(doc, "interval_s")),
	       json_object_get_string(json_object_object_get(doc, "baseline")),
	       json_object_get_boolean(json_object_object_get(doc, "partial")) ?
		       " (partial: the target exited)" :
		       "");
	printf("tracked: %zu threads%s\n\n", nt, explain ? "" : " (--explain-tracking lists them)");
	if (!nf)
		printf("no significant change: no signal rose clearly above its baseline\n");
	else
		printf("likely causes, most likely first (thread-seconds per second):\n");
	for (size_t i = 0; i < nf; i++) {
		struct json_object *o = json_object_array_get_idx(f, i);
		struct json_object *ev = json_object_object_get(o, "evidence");

		printf("%2zu. %s: %s\n    %s: %.3f -> %.3f (%+.3f, z %.1f)\n", i + 1,
		       json_object_get_string(json_object_object_get(o, "cause")),
		       json_object_get_string(json_object_object_get(o, "explanation")),
		       json_object_get_string(json_object_object_get(o, "resource")),
		       json_object_get_double(json_object_object_get(o, "baseline")),
		       json_object_get_double(json_object_object_get(o, "observed")),
		       json_object_get_double(json_object_object_get(o, "change")),
		       json_object_get_double(json_object_object_get(o, "z")));
		for (size_t k = 0; k < json_object_array_length(ev); k++)
			printf("      %s\n",
			       json_object_get_string(json_object_array_get_idx(ev, k)));
	}
	if (explain) {
		printf("\ntracked threads:\n");
		for (size_t i = 0; i < nt; i++) {
			struct json_object *o = json_object_array_get_idx(t, i);

			printf("  tid %-7d pid %-7d %-16s %s%s\n",
			       json_object_get_int(json_object_object_get(o, "tid")),
			       json_object_get_int(json_object_object_get(o, "pid")),
			       json_object_get_string(json_object_object_get(o, "comm")),
			       json_object_get_string(json_object_object_get(o, "why")),
			       json_object_get_boolean(json_object_object_get(o, "counted")) ?
				       "" :
				       " (not counted: joined in the observation window, or seen"
				       " in one snapshot only)");
		}
	}
}

/* ---- recordings ---- */

/* text to f, then f closed: 0 or -errno */
static int put_close(FILE *f, const char *text)
{
	int err = 0;

	errno = 0;
	if (fputs(text, f) < 0)
		err = errno ? -errno : -EIO;
	/* most write errors (a full disk) show only here, when the buffer goes out */
	if (fclose(f) && !err)
		err = errno ? -errno : -EIO;
	return err;
}

/*
 * The temporary file beside path that a recording is written to before it replaces path,
 * made with a name of its own (a run killed midway leaves one behind: it must not stop the
 * next); its name in tmp. An fd, or -1 with errno.
 */
static int record_tmp(const char *path, char *tmp, size_t size)
{
	if (snprintf(tmp, size, "%s.plumb-XXXXXX", path) >= (int)size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return mkostemp(tmp, O_CLOEXEC);
}

/* The process's umask, read without changing it (umask(2) would, for every thread). */
static mode_t current_umask(void)
{
	unsigned int mask = 022;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %o", &mask) == 1)
			break;
	if (f)
		fclose(f);
	return mask;
}

/*
 * text into the temporary file fd, which takes the mode and owner of the file it replaces
 * (st), or a new file's mode (0666 less the umask, as fopen would make it); flushed to the
 * disk before it is renamed over the file. 0 or -errno; fd is closed.
 */
static int record_fill(int fd, const struct stat *st, const char *text)
{
	mode_t mode = st ? st->st_mode & 07777 : 0666 & ~current_umask();
	FILE *f;
	int err;

	if (st && fchown(fd, st->st_uid, st->st_gid)) /* not ours to give (not root): ours */
		errno = 0;
	f = fchmod(fd, mode) ? NULL : fdopen(fd, "w");
	if (!f) {
		err = -errno;
		close(fd);
		return err;
	}
	errno = 0;
	if (fputs(text, f) < 0 || fflush(f) || fsync(fileno(f))) {
		err = errno ? -errno : -EIO;
		fclose(f);
		return err;
	}
	return fclose(f) ? (errno ? -errno : -EIO) : 0;
}

/*
 * A recording replaces a regular file (or makes a new one) whole or not at all: it is written
 * beside it under a temporary name, which is renamed over it once complete, so that a write
 * that fails (a full disk) leaves an earlier recording, perhaps the baseline of later runs, as
 * it was. Where that cannot be done (a directory that is not writable, a file bind-mounted
 * into a container: rename's EBUSY) it is written in place, as anything else is (a device, a
 * FIFO, a symlink).
 */
static int record_put(const char *path, const char *text)
{
	char tmp[4096];
	struct stat st;
	bool exists;
	FILE *f;
	int fd, err;

	exists = !lstat(path, &st);
	if (exists ? S_ISREG(st.st_mode) : errno == ENOENT) {
		fd = record_tmp(path, tmp, sizeof(tmp));
		if (fd >= 0) {
			err = record_fill(fd, exists ? &st : NULL, text);
			if (!err && !rename(tmp, path))
				return 0;
			err = err ? err : -errno;
			unlink(tmp);
			if (err != -EBUSY && err != -EXDEV && err != -EPERM && err != -EACCES &&
			    err != -EROFS)
				return err; /* the write failed: the file is left as it was */
		}
	}
	f = fopen(path, "we");
	return f ? put_close(f, text) : -errno;
}

static int record_write(struct diag *d, const char *path)
{
	struct json_object *doc = json_object_new_object(), *list = json_object_new_array();
	const char *text;
	int err;

	json_object_object_add(doc, "version", json_object_new_int(1));
	json_object_object_add(doc, "interval_s", json_object_new_double(d->o->interval_ms / 1e3));
	for (size_t i = 0; i < d->nseries; i++) {
		struct json_object *o = json_object_new_object(), *v = json_object_new_array();

		json_object_object_add(o, "cause", json_object_new_int(d->series[i].cause));
		json_object_object_add(o, "key", json_object_new_string(d->series[i].key));
		json_object_object_add(o, "resource",
				       json_object_new_string(d->series[i].resource));
		for (size_t k = 0; k < d->nint; k++)
			json_object_array_add(v, json_object_new_double(d->series[i].v[k]));
		json_object_object_add(o, "values", v);
		json_object_array_add(list, o);
	}
	json_object_object_add(doc, "series", list);
	text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	err = text ? record_put(path, text) : -ENOMEM;
	json_object_put(doc);
	return err;
}

/*
 * Whether --record can be written, asked before the run rather than found after it: for a
 * regular file or a new one, the temporary file beside it (record_put) is made and removed
 * again. A file that is there and cannot be replaced so, or is not a regular file, must be
 * writable (a FIFO is not opened: that would wait for a reader); a dangling symlink is left
 * to the end.
 */
static int record_check(const char *path)
{
	char tmp[4096];
	struct stat st;
	bool exists;
	int fd;

	exists = !lstat(path, &st);
	if (!exists && errno != ENOENT)
		goto fail;
	if (!exists || S_ISREG(st.st_mode)) {
		fd = record_tmp(path, tmp, sizeof(tmp));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
			return 0;
		}
		if (!exists)
			goto fail;
	}
	if (!stat(path, &st) ? !access(path, W_OK) : errno == ENOENT)
		return 0;
fail:
	fprintf(stderr, "plumb diagnose: --record %s: %s\n", path, strerror(errno));
	return -1;
}

/*
 * --baseline FILE: each series of the recording is the baseline of the series with the same
 * cause and key in this run (one that is new here gets a baseline of zeros).
 */
static int baseline_read(struct diag *d, const char *path, char *err, size_t errlen)
{
	struct json_object *doc = json_object_from_file(path), *list;
	size_t nint = 0;

	if (!doc || !json_object_object_get_ex(doc, "series", &list) ||
	    !json_object_is_type(list, json_type_array)) {
		snprintf(err, errlen,
			 "--baseline %.200s: not a recording of plumb diagnose --record", path);
		json_object_put(doc);
		return -EINVAL;
	}
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *o = json_object_array_get_idx(list, i), *v;
		int cause = json_object_get_int(json_object_object_get(o, "cause"));
		const char *key = json_object_get_string(json_object_object_get(o, "key"));
		struct series *s;

		if (cause < 0 || cause >= DIAG_CAUSES || !key ||
		    !json_object_object_get_ex(o, "values", &v))
			continue;
		s = series_get(d, cause, key,
			       json_object_get_string(json_object_object_get(o, "resource")) ?: "");
		if (!s)
			break;
		s->total = strchr(key, '*') != NULL;
		s->file = !strncmp(key, "epoll-file:", 11);
		s->nfile = json_object_array_length(v);
		s->file_base = calloc(s->nfile ? s->nfile : 1, sizeof(double));
		for (size_t k = 0; s->file_base && k < s->nfile; k++)
			s->file_base[k] = json_object_get_double(json_object_array_get_idx(v, k));
		if (s->nfile > nint)
			nint = s->nfile;
	}
	json_object_put(doc);
	if (!nint) {
		snprintf(err, errlen, "--baseline %.200s: the recording has no intervals", path);
		return -EINVAL;
	}
	/* a series the recording had no values for in some interval: zeros, same length */
	for (size_t i = 0; i < d->nseries; i++)
		if (d->series[i].nfile < nint) {
			double *v = realloc(d->series[i].file_base, nint * sizeof(*v));

			if (!v)
				return -ENOMEM;
			memset(v + d->series[i].nfile, 0, (nint - d->series[i].nfile) * sizeof(*v));
			d->series[i].file_base = v;
			d->series[i].nfile = nint;
		}
	return 0;
}

/* ---- the command ---- */

static bool target_alive(struct diag *d, const struct sched_thread_sample *t, size_t n)
{
	/* a zombie still answers kill(pid, 0): the iterator's live threads decide */
	for (size_t i = 0; d->o->pid && i < n; i++)
		if ((int)t[i].pid == d->o->pid)
			return true;
	if (d->o->pid)
		return false;
	for (size_t i = 0; i < d->ntracked; i++)
		if (d->tracked[i].seed &&
		    sample_find(t, n, d->tracked[i].tid, d->tracked[i].start_ns))
			return true;
	return d->ntracked == 0; /* nothing matched yet: keep looking */
}

/* Snapshots at the run's start (0), the observation's start (1) and the end (2). */
static void mark(struct diag *d, int at, struct sched_thread_sample *t, size_t n)
{
	d->mark_s[at] = monotonic_s();
	if (at >= 1) {
		d->mark_threads[at - 1] = malloc((n ? n : 1) * sizeof(*t));
		if (d->mark_threads[at - 1]) {
			memcpy(d->mark_threads[at - 1], t, n * sizeof(*t));
			d->nmark_threads[at - 1] = n;
		}
	}
	if (blk_module.up) {
		blk_snapshot(&blk_module, &d->mark_blk[at], &d->nmark_blk[at]);
		blk_thread_snapshot(&blk_module, &d->mark_blk_threads[at],
				    &d->nmark_blk_threads[at]);
	}
}

int diagnose_run(const struct diagnose_options *o)
{
	struct plumb_config cfg = { .cgroup_grace_s = 60, .wait = true };
	struct sigaction sa = { .sa_handler = on_signal };
	struct diag d = { .o = o };
	char cgroup_root[4096], err[512];
	struct json_object *doc;
	struct stat st;
	double t0, start;
	int ret = 1, err_write;

	if (o->pid && kill(o->pid, 0) && errno == ESRCH) {
		fprintf(stderr, "plumb diagnose: no process with pid %d\n", o->pid);
		return 1;
	}
	if (o->comm[0] && regcomp(&d.comm_re, o->comm, REG_EXTENDED | REG_NOSUB)) {
		fprintf(stderr, "plumb diagnose: --comm: '%s' is not a regular expression\n",
			o->comm);
		return 2;
	}
	if (o->record[0] && record_check(o->record))
		goto out_regex;
	if (privileges_check("plumb diagnose") || tracefs_ensure() ||
	    agent_config(&cfg, cgroup_root, sizeof(cgroup_root)))
		goto out_regex;
	if (o->cgroup[0]) {
		const char *rel = o->cgroup;
		char full[8192];

		if (!strncmp(rel, cgroup_root, strlen(cgroup_root)))
			rel += strlen(cgroup_root);
		snprintf(d.cgroup_path, sizeof(d.cgroup_path), "%s%.4000s",
			 rel[0] == '/' ? "" : "/", rel);
		if (strlen(d.cgroup_path) > 1 && d.cgroup_path[strlen(d.cgroup_path) - 1] == '/')
			d.cgroup_path[strlen(d.cgroup_path) - 1] = '\0';
		snprintf(full, sizeof(full), "%s%s", cgroup_root, d.cgroup_path);
		if (stat(full, &st) || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "plumb diagnose: no cgroup %s (under %s)\n", d.cgroup_path,
				cgroup_root);
			goto out_regex;
		}
	}
	d.self = (uint32_t)getpid();
	d.max_int = o->duration_ms / o->interval_ms + 1;
	d.nbase = o->baseline[0] ? 0 : o->baseline_ms / o->interval_ms;
	d.tracked = calloc(DIAG_MAX_TRACKED, sizeof(*d.tracked));
	d.series = calloc(DIAG_MAX_SERIES, sizeof(*d.series));
	d.int_s = calloc(d.max_int, sizeof(*d.int_s));
	d.epoll_buf = calloc(DIAG_MAX_EPOLL, sizeof(*d.epoll_buf));
	if (!d.tracked || !d.series || !d.int_s || !d.epoll_buf)
		goto out_free;
	if (o->baseline[0] && baseline_read(&d, o->baseline, err, sizeof(err))) {
		fprintf(stderr, "plumb diagnose: %s\n", err);
		goto out_free;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (wait_module.load(&wait_module, &cfg)) {
		fprintf(stderr, "plumb diagnose: the wait module cannot run: %s\n",
			wait_module.error);
		goto out_free;
	}
	wait_module.up = true;
	if (blk_module.load(&blk_module, &cfg))
		pr_warn("diagnose: no disk evidence: the blk module cannot run: %s\n",
			blk_module.error);
	else
		blk_module.up = true;
	if (sched_snapshot(&wait_module, &d.prev, &d.nprev, &d.prev_waits, &d.nprev_waits))
		goto out_unload;
	tracking_update(&d, &wait_module, d.prev, d.nprev, d.prev_waits, d.nprev_waits);
	if (o->pid && !target_alive(&d, d.prev, d.nprev)) {
		/*
		 * kill() found it, the iterator not: a zombie; or plumb runs in a pid namespace
		 * of its own, where --pid is that namespace's number and the iterator gives the
		 * host's (docs/diagnose.md: run it in the host's)
		 */
		fprintf(stderr,
			"plumb diagnose: pid %d: the kernel's task iterator shows no live thread "
			"of it (a zombie, or pids of another pid namespace)\n",
			o->pid);
		goto out_unload;
	}
	mark(&d, 0, d.prev, d.nprev);
	if (!d.nbase)
		mark(&d, 1, d.prev, d.nprev); /* --baseline: the whole run is the observation */
	pr_info("diagnose: attached; %zu threads tracked\n", d.ntracked);
	t0 = start = d.started = d.ended = d.observed = monotonic_s();
	if (!d.nbase)
		pr_info("diagnose: observation window starts\n");
	while (!exiting && d.nint + 1 < d.max_int) {
		struct sched_thread_sample *t;
		struct sched_wait_sample *w;
		size_t n, nw;
		double t1, wait;

		/* on a fixed cadence from the start: a slow snapshot does not stretch the run */
		wait = start + (d.nint + 1) * o->interval_ms / 1e3 - monotonic_s();
		if (wait > 0)
			usleep((useconds_t)(wait * 1e6));
		if (exiting)
			break;
		if (sched_snapshot(&wait_module, &t, &n, &w, &nw))
			break;
		t1 = d.ended = monotonic_s();
		interval_add(&d, t, n, w, nw, t1 - t0);
		tracking_update(&d, &wait_module, t, n, w, nw);
		if (d.nint == d.nbase && d.nbase) {
			d.observed = t1;
			mark(&d, 1, t, n);
			pr_info("diagnose: observation window starts\n");
		}
		free(d.prev);
		free(d.prev_waits);
		d.prev = t;
		d.nprev = n;
		d.prev_waits = w;
		d.nprev_waits = nw;
		t0 = t1;
		if (!target_alive(&d, t, n)) {
			d.partial = true;
			break;
		}
	}
	mark(&d, 2, d.prev, d.nprev);
	if (d.nint < d.nbase + 1) {
		fprintf(stderr,
			"plumb diagnose: stopped after %zu intervals, before the observation "
			"window "
			"(the baseline is %zu)\n",
			d.nint, d.nbase);
		goto out_unload;
	}
	ret = 0;
	err_write = o->record[0] ? record_write(&d, o->record) : 0;
	if (err_write) {
		fprintf(stderr, "plumb diagnose: cannot write --record %s: %s\n", o->record,
			strerror(-err_write));
		ret = 1; /* the report still follows: what the run found is not lost */
	}
	doc = report_make(&d);
	if (o->json)
		printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY));
	else
		report_print(doc, o->explain);
	json_object_put(doc);

out_unload:
	if (blk_module.up)
		blk_module.unload(&blk_module);
	wait_module.unload(&wait_module);
out_free:
	for (size_t i = 0; i < d.nseries; i++) {
		free(d.series[i].v);
		for (size_t k = 0; k < d.series[i].nparts; k++)
			free(d.series[i].part[k].v);
		free(d.series[i].file_base);
	}
	for (int i = 0; i < 3; i++) {
		free(d.mark_blk[i]);
		free(d.mark_blk_threads[i]);
	}
	for (int i = 0; i < 2; i++)
		free(d.mark_threads[i]);
	free(d.prev);
	free(d.prev_waits);
	free(d.tracked);
	free(d.series);
	free(d.int_s);
	free(d.epoll_buf);
out_regex:
	if (o->comm[0])
		regfree(&d.comm_re);
	return ret;
}
