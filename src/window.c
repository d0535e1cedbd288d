// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>

#include "clock.h"
#include "log.h"
#include "window.h"

#define TRACEFS "/sys/kernel/tracing"
/* From one program's attach (and close) to the next's: more than a close takes here */
#define WINDOW_STAGGER_NS 50000000ull

struct attach_window {
	pthread_t thread;
	pthread_mutex_t lock; /* stop and stats */
	pthread_cond_t cond; /* stop was set */
	bool stop;
	bool started; /* the thread (attach_window_run) */
	size_t n;
	int *prog_fds, *perf_fds;
	uint32_t *gates; /* program k times calls while gates[k] is 1 (NULL: none) */
	uint64_t window_ns, period_ns, rng;
	uint64_t test_close_delay_ns; /* PLUMB_TEST_WINDOW_CLOSE_DELAY_MS: a close that waits */
	struct attach_window_stats stats;
};

static int tracepoint_id(const char *point)
{
	char path[256];
	int id = -1;
	FILE *f;

	snprintf(path, sizeof(path), TRACEFS "/events/%s/id", point);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	if (fscanf(f, "%d", &id) != 1)
		id = -EINVAL;
	fclose(f);
	return id;
}

int window_tracepoint_event(const char *point)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_TRACEPOINT,
		.size = sizeof(attr),
		.sample_period = 1,
		.wakeup_events = 1,
		.disabled = 1,
	};
	int id = tracepoint_id(point), fd;

	if (id < 0)
		return id;
	attr.config = (uint64_t)id;
	fd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

bool window_wait_until(pthread_mutex_t *lock, pthread_cond_t *cond, const bool *stop, uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000),
			       .tv_nsec = (long)(t % 1000000000) };
	bool stopped;

	pthread_mutex_lock(lock);
	while (!*stop && pthread_cond_timedwait(cond, lock, &ts) != ETIMEDOUT)
		;
	stopped = *stop;
	pthread_mutex_unlock(lock);
	return stopped;
}

uint64_t window_random(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

uint64_t window_next_start(uint64_t start, uint64_t period_ns, uint64_t window_ns,
			   uint64_t drain_ns, uint64_t random)
{
	uint64_t busy = window_ns + drain_ns;
	uint64_t slack = period_ns > busy ? period_ns - busy : 0; /* no room: back to back */

	return start + busy + random % (2 * slack + 1);
}

static bool wait_until(struct attach_window *w, uint64_t t)
{
	return window_wait_until(&w->lock, &w->cond, &w->stop, t);
}

/*
 * One window (or piece of one): program k attached at start + k * WINDOW_STAGGER_NS and
 * closed span_ns after its own attach, in that order, all from this thread. Staggered because
 * a close blocks: it detaches the program at once, then waits for a grace period (~40 ms); on
 * 6.1 and 6.12 a close's detach also waits behind the grace period of any close under way
 * (measured: the last of ten parallel closes took effect ~400 ms late), so closing all at
 * once would give the last program a window several times longer. Each program's span is
 * measured, from its attach to the start of its close; with gates, the program times calls
 * only between the two (its gate open), so that the kernel's running it after the close
 * began (src/window.h) times nothing outside the span. The period's window is counted at its
 * last piece (count): as failed when any of its pieces could not attach all (period_failed
 * gathers them). False when stopped.
 */
static bool window_run(struct attach_window *w, uint64_t start, uint64_t span_ns, bool count,
		       bool *period_failed, bool *warned)
{
	uint64_t attached_at[WINDOW_MAX_PROGRAMS], spans[WINDOW_MAX_PROGRAMS] = { 0 };
	int links[WINDOW_MAX_PROGRAMS];
	size_t next_attach = 0, next_close = 0;
	bool stop = false, failed = false;

	while (next_close < w->n) {
		uint64_t due_attach = start + next_attach * WINDOW_STAGGER_NS;
		uint64_t due_close =
			next_close < next_attach ? attached_at[next_close] + span_ns : UINT64_MAX;

		if (next_attach < w->n && !stop && !failed && due_attach <= due_close) {
			stop = wait_until(w, due_attach);
			if (stop)
				continue;
			links[next_attach] =
				w->perf_fds[next_attach] < 0 ?
					bpf_raw_tracepoint_open(NULL, w->prog_fds[next_attach]) :
					bpf_link_create(w->prog_fds[next_attach],
							w->perf_fds[next_attach], BPF_PERF_EVENT,
							NULL);
			if (links[next_attach] < 0) {
				if (!*warned)
					pr_warn("io: latency window cannot attach: %s (counted in "
						"plumb_io_latency_windows_failed_total)\n",
						strerror(-links[next_attach]));
				*warned = true;
				failed = true;
				continue;
			}
			/* timed from here: the span starts with the gate's opening */
			attached_at[next_attach] = monotonic_ns();
			if (w->gates)
				__atomic_store_n(&w->gates[next_attach], 1, __ATOMIC_RELEASE);
			next_attach++;
			continue;
		}
		if (next_close == next_attach) /* stopped or failed: nothing more attached */
			break;
		if (!stop && !failed)
			stop = wait_until(w, due_close);
		/* to here: the close may wait (below) with the program still on */
		if (w->gates)
			__atomic_store_n(&w->gates[next_close], 0, __ATOMIC_RELEASE);
		spans[next_close] = monotonic_ns() - attached_at[next_close];
		if (w->test_close_delay_ns && !stop)
			stop = wait_until(w, monotonic_ns() + w->test_close_delay_ns);
		close(links[next_close]);
		links[next_close++] = -1;
	}
	/* a period's window counts once, failed when either piece failed */
	*period_failed |= failed;
	pthread_mutex_lock(&w->lock);
	if (count && *period_failed)
		w->stats.failed++;
	else if (count && !stop)
		w->stats.windows++;
	/* each program's span: its syscall's calls are timed for this long */
	for (size_t k = 0; k < w->n; k++)
		w->stats.attached_ns[k] += spans[k];
	pthread_mutex_unlock(&w->lock);
	return !stop;
}

int window_pieces(uint64_t period, uint64_t period_ns, uint64_t span_ns, uint64_t offset,
		  uint64_t start[2], uint64_t len[2])
{
	offset %= period_ns;
	if (offset + span_ns <= period_ns) {
		start[0] = period + offset;
		len[0] = span_ns;
		return 1;
	}
	start[0] = period;
	len[0] = offset + span_ns - period_ns;
	start[1] = period + offset;
	len[1] = period_ns - offset;
	return 2;
}

static void *window_thread(void *arg)
{
	struct attach_window *w = arg;
	uint64_t period = monotonic_ns(), start[2], len[2];
	bool warned = false, failed;
	int n;

	for (;;) {
		n = window_pieces(period, w->period_ns, w->window_ns, window_random(&w->rng), start,
				  len);
		/* a period's window counts once, in one piece or two */
		failed = false;
		for (int i = 0; i < n; i++)
			if (!window_run(w, start[i], len[i], i == n - 1, &failed, &warned))
				return NULL;
		period += w->period_ns;
		/* behind by more than a period (a stopped process, slow closes): start afresh */
		if (monotonic_ns() > period + w->period_ns)
			period = monotonic_ns();
	}
	return NULL;
}

static void window_free(struct attach_window *w)
{
	/* fast after perf_events_handoff(); else each waits a grace period, serialised anyway */
	for (size_t i = 0; w->perf_fds && i < w->n; i++)
		if (w->perf_fds[i] >= 0)
			close(w->perf_fds[i]);
	free(w->prog_fds);
	free(w->perf_fds);
	free(w);
}

struct attach_window *attach_window_open(const int *prog_fds, const char *const *points,
					 uint32_t *gates, size_t n, uint64_t window_ns,
					 uint64_t period_ns, char *err, size_t errlen)
{
	struct attach_window *w = calloc(1, sizeof(*w));
	pthread_condattr_t attr;

	if (!w || !n || n > WINDOW_MAX_PROGRAMS || !window_ns ||
	    window_ns + n * WINDOW_STAGGER_NS > period_ns) {
		snprintf(err, errlen, "latency window: %s", w ? "bad window" : "out of memory");
		free(w);
		return NULL;
	}
	w->n = n;
	w->gates = gates;
	if (getenv("PLUMB_TEST_WINDOW_CLOSE_DELAY_MS"))
		w->test_close_delay_ns =
			strtoull(getenv("PLUMB_TEST_WINDOW_CLOSE_DELAY_MS"), NULL, 10) * 1000000;
	w->window_ns = window_ns;
	w->period_ns = period_ns;
	w->rng = (monotonic_ns() ^ ((uint64_t)getpid() << 32)) | 1;
	w->prog_fds = calloc(n, sizeof(int));
	w->perf_fds = malloc(n * sizeof(int));
	if (!w->prog_fds || !w->perf_fds) {
		snprintf(err, errlen, "latency window: out of memory");
		free(w->perf_fds);
		w->perf_fds = NULL;
		window_free(w);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		w->perf_fds[i] = -1;
	for (size_t i = 0; i < n; i++) {
		w->prog_fds[i] = prog_fds[i];
		if (!points[i])
			continue; /* a tp_btf program: its point is its own */
		w->perf_fds[i] = window_tracepoint_event(points[i]);
		if (w->perf_fds[i] < 0) {
			snprintf(err, errlen, "latency window: cannot open a perf event on %s: %s",
				 points[i], strerror(-w->perf_fds[i]));
			window_free(w);
			return NULL;
		}
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &attr);
	pthread_condattr_destroy(&attr);
	return w;
}

int attach_window_run(struct attach_window *w, char *err, size_t errlen)
{
	int rc;

	if (w->started)
		return 0;
	rc = pthread_create(&w->thread, NULL, window_thread, w);
	if (rc) {
		snprintf(err, errlen, "latency window: cannot start a thread: %s", strerror(rc));
		return -rc;
	}
	w->started = true;
	return 0;
}

struct attach_window *attach_window_start(const int *prog_fds, const char *const *points,
					  uint32_t *gates, size_t n, uint64_t window_ns,
					  uint64_t period_ns, char *err, size_t errlen)
{
	struct attach_window *w =
		attach_window_open(prog_fds, points, gates, n, window_ns, period_ns, err, errlen);

	if (w && attach_window_run(w, err, errlen)) {
		attach_window_stop(w);
		return NULL;
	}
	return w;
}

void attach_window_stats(struct attach_window *w, struct attach_window_stats *out)
{
	pthread_mutex_lock(&w->lock);
	*out = w->stats;
	pthread_mutex_unlock(&w->lock);
}

void attach_window_stop(struct attach_window *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (w->started)
		pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	window_free(w);
}
