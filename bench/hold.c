// SPDX-License-Identifier: GPL-2.0
/*
 * Loads a BPF object file, attaches every program in it and keeps them attached until SIGTERM
 * or SIGINT, printing "attached" once they are: the benchmarks run a workload beside it to
 * measure the floor under a module (empty programs on the module's tracepoints). With PROGRAM
 * names, only those (bench/netstack.py: which of the tracepoints the floor comes from).
 * Ring buffers in the object are drained every 100 ms, as an agent would (bench/flow_sk.bpf.c).
 *
 * --windows ON PERIOD (seconds, 0 < ON < PERIOD): the programs are attached for ON seconds of
 * every PERIOD instead, the first time at once, loaded once; each attach and detach is
 * printed as "attach T" or "detach T", T on CLOCK_MONOTONIC in seconds, read after the last
 * link is made and after the last is gone (bench/flow.py --in-run: one iperf3 run's bytes
 * missing in the windows).
 *
 *   hold [--windows ON PERIOD] OBJECT.bpf.o [PROGRAM...]
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/libbpf.h>

#define HOLD_MAX_PROGRAMS 64

static struct bpf_program *progs[HOLD_MAX_PROGRAMS];
static struct bpf_link *links[HOLD_MAX_PROGRAMS];
static int nprogs;
static struct ring_buffer *rings;
static sigset_t stop_signals;

static int discard(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	return 0;
}

static bool chosen(const char *name, int argc, char **argv)
{
	if (argc == 2)
		return true;
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], name))
			return true;
	return false;
}

static double monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int attach_all(void)
{
	for (int i = 0; i < nprogs; i++) {
		links[i] = bpf_program__attach(progs[i]);
		if (!links[i]) {
			fprintf(stderr, "hold: cannot attach %s\n", bpf_program__name(progs[i]));
			return -1;
		}
	}
	return 0;
}

static void detach_all(void)
{
	for (int i = 0; i < nprogs; i++) {
		bpf_link__destroy(links[i]);
		links[i] = NULL;
	}
}

/* Drains the ring buffers every 100 ms until the time t (CLOCK_MONOTONIC); true on a signal. */
static bool wait_until(double t)
{
	for (;;) {
		double left = t - monotonic_s();
		struct timespec tick = { 0, 100 * 1000 * 1000 };

		if (t >= 0 && left <= 0)
			return false;
		if (t >= 0 && left < 0.1)
			tick.tv_nsec = (long)(left * 1e9);
		if (sigtimedwait(&stop_signals, NULL, &tick) >= 0)
			return true;
		if (rings)
			ring_buffer__consume(rings);
	}
}

/*
 * --windows: ON seconds attached in every PERIOD (from each period's scheduled start, so a
 * window is attached ON less its attach time), until a signal; a window a signal cuts short
 * is detached and printed too.
 */
static int run_windows(double on, double period)
{
	double t0 = monotonic_s();
	bool stop = false;

	for (long k = 0; !stop; k++) {
		if (attach_all())
			return 1;
		printf("attach %.6f\n", monotonic_s());
		fflush(stdout);
		stop = wait_until(t0 + k * period + on);
		detach_all();
		printf("detach %.6f\n", monotonic_s());
		fflush(stdout);
		if (!stop)
			stop = wait_until(t0 + (k + 1) * period);
	}
	return 0;
}

/* Seconds: the whole argument a positive number, else 0. */
static double seconds(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	return end != s && !*end && v > 0 ? v : 0;
}

int main(int argc, char **argv)
{
	double on = 0, period = 0;
	struct bpf_object *obj;
	struct bpf_program *p;
	struct bpf_map *m;
	int ret;

	if (argc > 1 && !strcmp(argv[1], "--windows")) {
		if (argc < 5) {
			fprintf(stderr, "usage: hold [--windows ON PERIOD] OBJECT.bpf.o "
					"[PROGRAM...]\n");
			return 2;
		}
		on = seconds(argv[2]);
		period = seconds(argv[3]);
		if (!(on > 0 && on < period)) {
			fprintf(stderr, "hold: --windows ON PERIOD needs 0 < ON < PERIOD\n");
			return 2;
		}
		argv[3] = argv[0];
		argv += 3;
		argc -= 3;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: hold [--windows ON PERIOD] OBJECT.bpf.o [PROGRAM...]\n");
		return 2;
	}
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigprocmask(SIG_BLOCK, &stop_signals, NULL);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "hold: cannot load %s\n", argv[1]);
		return 1;
	}
	bpf_object__for_each_program (p, obj) {
		if (!chosen(bpf_program__name(p), argc, argv))
			continue;
		if (nprogs == HOLD_MAX_PROGRAMS) {
			fprintf(stderr, "hold: more than %d programs\n", HOLD_MAX_PROGRAMS);
			return 1;
		}
		progs[nprogs++] = p;
	}
	if (argc > 2 && nprogs != argc - 2) {
		fprintf(stderr, "hold: %d of the %d programs named are in %s\n", nprogs, argc - 2,
			argv[1]);
		return 1;
	}
	bpf_object__for_each_map (m, obj) {
		if (bpf_map__type(m) != BPF_MAP_TYPE_RINGBUF)
			continue;
		if (!rings)
			rings = ring_buffer__new(bpf_map__fd(m), discard, NULL, NULL);
		else if (ring_buffer__add(rings, bpf_map__fd(m), discard, NULL)) {
			ring_buffer__free(rings);
			rings = NULL;
		}
		if (!rings) {
			fprintf(stderr, "hold: cannot read ring buffer %s\n", bpf_map__name(m));
			return 1;
		}
	}
	if (!nprogs) {
		fprintf(stderr, "hold: no program to attach in %s\n", argv[1]);
		ret = 1;
	} else if (period > 0) {
		ret = run_windows(on, period);
	} else if (attach_all()) {
		ret = 1;
	} else {
		printf("attached\n");
		fflush(stdout);
		wait_until(-1);
		ret = 0;
	}
	detach_all();
	ring_buffer__free(rings);
	bpf_object__close(obj);
	return ret;
}
