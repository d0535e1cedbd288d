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
#include "detach.h"
#include "log.h"
#include "window.h"

#define TRACEFS "/sys/kernel/tracing"

struct attach_window {
	pthread_t thread;
	pthread_mutex_t lock; /* stop and stats */
	pthread_cond_t cond; /* stop was set */
	bool stop;
	size_t n;
	int *prog_fds, *perf_fds, *links;
	uint64_t window_ns, period_ns, rng;
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

/* A perf event on the tracepoint, on CPU 0 and disabled: only a handle for its programs. */
static int tracepoint_event(const char *point)
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

/* Waits until monotonic time t (ns) or stop; true when stopped. */
static bool wait_until(struct attach_window *w, uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000),
			       .tv_nsec = (long)(t % 1000000000) };
	bool stop;

	pthread_mutex_lock(&w->lock);
	while (!w->stop && pthread_cond_timedwait(&w->cond, &w->lock, &ts) != ETIMEDOUT)
		;
	stop = w->stop;
	pthread_mutex_unlock(&w->lock);
	return stop;
}

static uint64_t next_random(struct attach_window *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

/* Attaches every program; on a failure, closes what did attach. 0 or -errno. */
static int attach_all(struct attach_window *w)
{
	for (size_t i = 0; i < w->n; i++) {
		w->links[i] = bpf_link_create(w->prog_fds[i], w->perf_fds[i], BPF_PERF_EVENT, NULL);
		if (w->links[i] < 0) {
			int err = w->links[i];

			fds_close_parallel(w->links, i);
			return err;
		}
	}
	return 0;
}

static void *window_thread(void *arg)
{
	struct attach_window *w = arg;
	uint64_t period = monotonic_ns();
	bool warned = false, stop = false;

	while (!stop) {
		uint64_t start = period + next_random(w) % (w->period_ns - w->window_ns + 1), t0,
			 t1;
		int err;

		if (wait_until(w, start))
			break;
		err = attach_all(w);
		if (err) {
			if (!warned)
				pr_warn("io: latency window cannot attach: %s (counted in "
					"plumb_io_latency_windows_failed_total)\n",
					strerror(-err));
			warned = true;
			pthread_mutex_lock(&w->lock);
			w->stats.failed++;
			pthread_mutex_unlock(&w->lock);
		} else {
			t0 = monotonic_ns();
			stop = wait_until(w, t0 + w->window_ns);
			t1 = monotonic_ns();
			fds_close_parallel(w->links, w->n);
			pthread_mutex_lock(&w->lock);
			w->stats.windows++;
			w->stats.attached_ns += t1 - t0;
			pthread_mutex_unlock(&w->lock);
		}
		period += w->period_ns;
		/* behind by more than a period (a stopped process, a slow close): start afresh */
		if (monotonic_ns() > period + w->period_ns)
			period = monotonic_ns();
	}
	return NULL;
}

static void window_free(struct attach_window *w)
{
	if (w->perf_fds)
		fds_close_parallel(w->perf_fds, w->n);
	free(w->prog_fds);
	free(w->perf_fds);
	free(w->links);
	free(w);
}

struct attach_window *attach_window_start(const int *prog_fds, const char *const *points, size_t n,
					  uint64_t window_ns, uint64_t period_ns, char *err,
					  size_t errlen)
{
	struct attach_window *w = calloc(1, sizeof(*w));
	pthread_condattr_t attr;
	int rc;

	if (!w || !n || !window_ns || window_ns >= period_ns) {
		snprintf(err, errlen, "latency window: %s", w ? "bad window" : "out of memory");
		free(w);
		return NULL;
	}
	w->n = n;
	w->window_ns = window_ns;
	w->period_ns = period_ns;
	w->rng = (monotonic_ns() ^ ((uint64_t)getpid() << 32)) | 1;
	w->prog_fds = calloc(n, sizeof(int));
	w->perf_fds = malloc(n * sizeof(int));
	w->links = malloc(n * sizeof(int));
	if (!w->prog_fds || !w->perf_fds || !w->links) {
		snprintf(err, errlen, "latency window: out of memory");
		free(w->perf_fds);
		w->perf_fds = NULL;
		window_free(w);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		w->perf_fds[i] = w->links[i] = -1;
	for (size_t i = 0; i < n; i++) {
		w->prog_fds[i] = prog_fds[i];
		w->perf_fds[i] = tracepoint_event(points[i]);
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
	rc = pthread_create(&w->thread, NULL, window_thread, w);
	if (rc) {
		snprintf(err, errlen, "latency window: cannot start a thread: %s", strerror(rc));
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		window_free(w);
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
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	window_free(w);
}
