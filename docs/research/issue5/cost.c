// SPDX-License-Identifier: GPL-2.0
/*
 * cost MODE ROUNDS: pipe ping-pong between two threads pinned to one CPU (ROUNDS round trips,
 * each 2 context switches and 2 wakeups), with cost.bpf.o in MODE attached (-1: nothing
 * attached). Prints ns per round trip and, from BPF run-time statistics (enabled through
 * BPF_ENABLE_STATS for the run only: no sysctl is changed), ns per program run.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "cost.h"
#include "cost.skel.h"

static int p1[2], p2[2];
static long rounds;
static int cpu = 1;

static void pin(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *echo(void *arg)
{
	char c;
	long i;

	pin();
	for (i = 0; i < rounds; i++) {
		if (read(p1[0], &c, 1) != 1 || write(p2[1], &c, 1) != 1)
			break;
	}
	return NULL;
}

static volatile int stop_spin;
static double t_start;
static double now_s(void);

static void spin_ms(int ms)
{
	double t = now_s();

	while (now_s() - t < ms / 1e3)
		;
}

/* Validation: sleep 2 x 100 ms, spin 100 ms while a competitor spins on the same CPU,
 * block 50 ms in an O_DIRECT-free uninterruptible way is not portable: skip; then spin until
 * main has dumped. */
static void *known(void *arg)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	(void)arg;
	pin();
	t_start = now_s();
	nanosleep(&ts, NULL);
	nanosleep(&ts, NULL);
	spin_ms(100);
	while (!stop_spin)
		;
	return NULL;
}

static void *competitor(void *arg)
{
	struct timespec ts = { 0, 200 * 1000 * 1000 };

	(void)arg;
	pin();
	nanosleep(&ts, NULL);
	spin_ms(100);
	return NULL;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void prog_stats(struct bpf_program *p, __u64 *ns, __u64 *cnt)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len);
	*ns = info.run_time_ns;
	*cnt = info.run_cnt;
}

int main(int argc, char **argv)
{
	int mode = argc > 1 ? atoi(argv[1]) : -1;
	struct cost_bpf *skel = NULL;
	__u64 s0[2], c0[2], s1[2], c1[2];
	pthread_t th;
	double t0, t1;
	char c = 1;
	long i;
	int stats_fd = -1;

	rounds = argc > 2 ? atol(argv[2]) : 200000;
	if (argc > 3)
		cpu = atoi(argv[3]);
	if (mode >= 0) {
		skel = cost_bpf__open();
		if (!skel)
			return 1;
		skel->rodata->mode = mode;
		skel->rodata->target_tgid = getpid();
		if (cost_bpf__load(skel) || cost_bpf__attach(skel)) {
			fprintf(stderr, "load/attach failed\n");
			return 1;
		}
		if (!getenv("NOSTATS"))
			stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0 && !getenv("NOSTATS"))
			fprintf(stderr, "bpf_enable_stats failed\n");
	}
	if (rounds == 0 && skel) {
		pthread_t a, b;
		struct bpf_link *l;
		char buf[4096];
		int ifd, n;
		double t_dump;

		pthread_create(&a, NULL, known, NULL);
		pthread_create(&b, NULL, competitor, NULL);
		usleep(450 * 1000);
		l = bpf_program__attach_iter(skel->progs.dump_threads, NULL);
		t_dump = now_s();
		ifd = l ? bpf_iter_create(bpf_link__fd(l)) : -1;
		while (ifd >= 0 && (n = read(ifd, buf, sizeof(buf) - 1)) > 0) {
			buf[n] = 0;
			fputs(buf, stdout);
		}
		printf("known thread's window: %.0f ns (the first line)\n",
		       (t_dump - t_start) * 1e9);
		stop_spin = 1;
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		return 0;
	}
	pipe(p1);
	pipe(p2);
	pin();
	pthread_create(&th, NULL, echo, NULL);
	usleep(10000);
	if (skel) {
		prog_stats(skel->progs.on_switch, &s0[0], &c0[0]);
		prog_stats(skel->progs.on_waking, &s0[1], &c0[1]);
	}
	t0 = now_s();
	for (i = 0; i < rounds; i++) {
		if (write(p1[1], &c, 1) != 1 || read(p2[0], &c, 1) != 1)
			break;
	}
	t1 = now_s();
	pthread_join(th, NULL);
	printf("mode %2d: %.0f ns per round trip (%.3f s)", mode, (t1 - t0) * 1e9 / rounds,
	       t1 - t0);
	if (skel) {
		prog_stats(skel->progs.on_switch, &s1[0], &c1[0]);
		prog_stats(skel->progs.on_waking, &s1[1], &c1[1]);
		printf("; sched_switch %.1f ns/run (%llu runs), sched_waking %.1f ns/run (%llu "
		       "runs)",
		       c1[0] > c0[0] ? (double)(s1[0] - s0[0]) / (c1[0] - c0[0]) : 0.0,
		       c1[0] - c0[0],
		       c1[1] > c0[1] ? (double)(s1[1] - s0[1]) / (c1[1] - c0[1]) : 0.0,
		       c1[1] - c0[1]);
		if (mode == MODE_WAITS || mode == MODE_LEAN_WAITS || mode == MODE_NOWAKE_WAITS) {
			struct wait_key k, *pk = NULL;
			struct wait_val v[256];
			int n = libbpf_num_possible_cpus(), j;

			printf("; lost_waits %llu", (unsigned long long)skel->bss->lost_waits);
			while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.waits), pk, &k)) {
				__u64 ns = 0, cnt = 0;

				pk = &k;
				if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.waits), &k, v))
					continue;
				for (j = 0; j < n; j++)
					ns += v[j].ns, cnt += v[j].count;
				if (cnt > 100)
					printf("\n  wait tid %u kind %u bri %llu: %llu waits, %.3f "
					       "s",
					       k.tid, k.kind, (unsigned long long)k.bri,
					       (unsigned long long)cnt, ns / 1e9);
			}
		}
		if (getenv("DUMP")) {
			struct bpf_link *l =
				bpf_program__attach_iter(skel->progs.dump_threads, NULL);
			char buf[4096];
			int ifd = l ? bpf_iter_create(bpf_link__fd(l)) : -1, n;

			printf("\n");
			while (ifd >= 0 && (n = read(ifd, buf, sizeof(buf) - 1)) > 0) {
				buf[n] = 0;
				fputs(buf, stdout);
			}
			bpf_link__destroy(l);
		}
		close(stats_fd);
		cost_bpf__destroy(skel);
	}
	printf("\n");
	return 0;
}
