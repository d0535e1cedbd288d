// SPDX-License-Identifier: GPL-2.0
/*
 * A single-threaded workload whose time is known: the sched tests' ground truth.
 * Built static, like iowork.
 *
 *   schedwork [--cgroup DIR] PHASE...
 *
 * --cgroup DIR: moves itself into the cgroup DIR first thing in main. The move can block (the
 * cgroup core waits for an RCU grace period): that time is reported (move_wall, move_cpu) so
 * that the test can count it.
 *
 *   sleep:MS      clock_nanosleep for MS (interruptible sleep)
 *   spin:MS       run on the CPU until MS of wall time have passed
 *   vfork:MS      vfork() a child that sleeps MS and exits: the parent is blocked
 *                 (uninterruptibly, not in I/O wait) for the child's whole life, in one wait
 *   dio:DEV:MS    O_DIRECT 4 MiB reads of the first 8 MiB of the block device DEV until MS
 *                 have passed (uninterruptible, in I/O wait): long waits, so that the
 *                 context switches around them (time in no kind) weigh little
 *
 * At the end it prints one line of nanoseconds and exits at once (no teardown to count):
 *   main=<monotonic at main> end=<monotonic at the end>
 *   run0=<CPU time at main> rq0=<schedstat run delay at main>
 *   run=<CPU time at the end> rq=<schedstat run delay at the end>
 *   dio_wall=<wall time of the dio phases> dio_cpu=<run + run delay during them>
 *   move_wall=<wall time of the move into DIR> move_cpu=<run + run delay during it>
 *   vfork_wall=<wall time of the vfork phases> vfork_cpu=<the parent's run + run delay in them>
 *   vfork_steal=<the whole host's hypervisor steal in them, /proc/stat's, in whole ticks>
 *   child_run=<CPU time of the vfork children> child_rq=<their run delay>
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>

/* What the vfork children ran and waited for a CPU, written by them before they exit. */
static volatile uint64_t child_run, child_rq;
/* The parent's counts before its vfork: not on the stack, which the child runs on. */
static uint64_t vfork_r0, vfork_q0, vfork_r1, vfork_q1, vfork_s0, vfork_t0;

/* The whole host's steal so far, ns: /proc/stat's first line, 8th number, in USER_HZ ticks. */
static uint64_t host_steal_ns(void)
{
	unsigned long long v[8];
	FILE *f = fopen("/proc/stat", "r");

	if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			 &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {
		fprintf(stderr, "schedwork: cannot read /proc/stat\n");
		exit(1);
	}
	fclose(f);
	return v[7] * (1000000000ull / sysconf(_SC_CLK_TCK));
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/*
 * Time on a CPU (CLOCK_THREAD_CPUTIME_ID: includes the running slice, where schedstat's first
 * field lags by up to a tick) and time runnable waiting for a CPU (schedstat's second field),
 * in ns.
 */
static void schedstat(uint64_t *run, uint64_t *rq)
{
	unsigned long long a, b;
	struct timespec ts;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	if (!f || fscanf(f, "%llu %llu", &a, &b) != 2) {
		fprintf(stderr, "schedwork: cannot read /proc/thread-self/schedstat\n");
		exit(1);
	}
	fclose(f);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	*run = ts.tv_sec * 1000000000ull + ts.tv_nsec;
	*rq = b;
}

int main(int argc, char **argv)
{
	uint64_t t_main = now_ns(), run0, rq0, run, rq, dio_wall = 0, dio_cpu = 0, vfork_wall = 0;
	uint64_t vfork_cpu = 0, vfork_steal = 0;
	static char buf[(4 << 20) + 4096];
	char *aligned = (char *)(((uintptr_t)buf + 4095) & ~(uintptr_t)4095);

	uint64_t move_wall = 0, move_cpu = 0;
	int first = 1;

	schedstat(&run0, &rq0);
	if (argc > 2 && !strcmp(argv[1], "--cgroup")) {
		char path[4096];
		uint64_t t0 = now_ns(), r1, q1;
		FILE *f;

		snprintf(path, sizeof(path), "%s/cgroup.procs", argv[2]);
		f = fopen(path, "w");
		if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f)) {
			perror(path);
			return 1;
		}
		schedstat(&r1, &q1);
		move_wall = now_ns() - t0;
		move_cpu = (r1 - run0) + (q1 - rq0);
		first = 3;
	}
	for (int i = first; i < argc; i++) {
		char *arg = argv[i], *colon = strrchr(arg, ':');
		uint64_t ms = colon ? strtoull(colon + 1, NULL, 10) : 0, t0 = now_ns(), until;

		until = t0 + ms * 1000000ull;
		if (!strncmp(arg, "sleep:", 6)) {
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

			while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts))
				;
		} else if (!strncmp(arg, "spin:", 5)) {
			while (now_ns() < until)
				;
		} else if (!strncmp(arg, "vfork:", 6)) {
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
			pid_t pid;

			/*
			 * The phase's clocks start after the steal read: the parent runs
			 * through it (a first read of /proc/stat took 7.5 ms in a 6.1 guest),
			 * and the wall time from the CPU clock's read on, so that the two
			 * cover the same span.
			 */
			vfork_s0 = host_steal_ns();
			schedstat(&vfork_r0, &vfork_q0);
			vfork_t0 = now_ns();
			pid = vfork();

			if (pid == 0) {
				uint64_t r, q;

				while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts))
					;
				/* the parent's memory, which a vfork child shares */
				schedstat(&r, &q);
				child_run += r;
				child_rq += q;
				_exit(0);
			}
			if (pid < 0) {
				perror("vfork");
				return 1;
			}
			/* the parent ran (the call) and, woken, waited for a CPU: not blocked then */
			schedstat(&vfork_r1, &vfork_q1);
			vfork_wall += now_ns() - vfork_t0;
			vfork_cpu += (vfork_r1 - vfork_r0) + (vfork_q1 - vfork_q0);
			vfork_steal += host_steal_ns() - vfork_s0;
		} else if (!strncmp(arg, "dio:", 4) && colon) {
			uint64_t r0, q0, r1, q1;
			unsigned int k = 0;
			int fd;

			*colon = '\0';
			fd = open(arg + 4, O_RDONLY | O_DIRECT);
			if (fd < 0) {
				perror(arg + 4);
				return 1;
			}
			schedstat(&r0, &q0);
			t0 = now_ns(); /* after the open, which ran: the span of the CPU clock */
			while (now_ns() < until) {
				off_t off = (off_t)(k++ % 2) << 22;

				if (pread(fd, aligned, 4 << 20, off) != 4 << 20) {
					perror("pread");
					return 1;
				}
			}
			schedstat(&r1, &q1);
			dio_wall += now_ns() - t0;
			dio_cpu += (r1 - r0) + (q1 - q0);
			close(fd);
		} else {
			fprintf(stderr, "schedwork: unknown phase '%s'\n", arg);
			return 2;
		}
	}
	schedstat(&run, &rq);
	printf("main=%llu end=%llu run0=%llu rq0=%llu run=%llu rq=%llu dio_wall=%llu "
	       "dio_cpu=%llu vfork_wall=%llu vfork_cpu=%llu child_run=%llu child_rq=%llu "
	       "move_wall=%llu move_cpu=%llu vfork_steal=%llu\n",
	       (unsigned long long)t_main, (unsigned long long)now_ns(), (unsigned long long)run0,
	       (unsigned long long)rq0, (unsigned long long)run, (unsigned long long)rq,
	       (unsigned long long)dio_wall, (unsigned long long)dio_cpu,
	       (unsigned long long)vfork_wall, (unsigned long long)vfork_cpu,
	       (unsigned long long)child_run, (unsigned long long)child_rq,
	       (unsigned long long)move_wall, (unsigned long long)move_cpu,
	       (unsigned long long)vfork_steal);
	fflush(stdout);
	_exit(0);
}
