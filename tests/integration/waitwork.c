// SPDX-License-Identifier: GPL-2.0
/*
 * Two threads and a wait of known length: the wait tests' ground truth. Built static.
 *
 *   waitwork [--cgroup DIR] [--spin] [--miss] [--migrate] KIND MS ROUNDS
 *
 * A waiter thread blocks ROUNDS times on one resource of KIND; each time the main thread
 * sleeps MS (nanosleep: a sleep, no wait kind), longer until the waiter sleeps in its call,
 * and then releases it without blocking itself.
 * The time the waiter was blocked is known within two bounds, both printed (sums over the
 * rounds, CLOCK_MONOTONIC):
 *   blocked  at least: each call's wall time less the waiter's time on a CPU and queued for
 *            one around it (CLOCK_THREAD_CPUTIME_ID and /proc/thread-self/schedstat's run
 *            delay, read before and after). The clock is read after the first read and
 *            before the second: the time those reads take around their samples is not in the
 *            wall time then, and it is neither run nor queued time in the counts (a 6.12
 *            guest, --migrate, the clock read before the first read: 57 ms from it to the
 *            block, 8 ms of it on a CPU by the counts, and a bound 47 ms above the wait its
 *            traced switches showed). The wall time alone also holds the run-queue delay
 *            after each wakeup, which an emulated guest stretches to tens of milliseconds,
 *            and a stall of the guest while the waiter ran counts as run time.
 *            The bound is low when the kernel counts blocked time as run time: a wakeup that
 *            preempts a busy CPU (--miss) can start the waiter's run on an rq clock one tick
 *            old (3.5 ms of "run" inside a 30 ms wait that the release ended 0.05 ms before
 *            the call returned, seen on 6.18).
 *   until    at most: from each call's start to main's return from the release, or the wall
 *            time around both schedstat reads less the queued time if that is less.
 *
 *   pipe          read(2) of one byte from a pipe; released by a write of one byte
 *   futex         FUTEX_WAIT_PRIVATE on a word; released by FUTEX_WAKE_PRIVATE
 *   futex-shared  FUTEX_WAIT (not private) on a word at offset 4096 + 8 of a MAP_SHARED
 *                 memfd mapping; released by FUTEX_WAKE: its key is the file and the offset
 *   socket        recv(2) on the server end of a loopback TCP connection; released by a
 *                 send of one byte from the client end
 *   unix          recv(2) on one end of a unix stream socketpair; released by a send of one
 *                 byte from the other end
 *   epoll         epoll_wait(2) on an instance watching a pipe's read end; released by a
 *                 write to the pipe (the waiter then reads the byte without blocking)
 *
 * Nothing else in the process blocks in a wait kind: the main thread moves into DIR before
 * the waiter exists, does not join it (it watches a flag, yielding) and leaves with _exit.
 * At the end it prints one line, then sleeps (pause: no wait kind) until killed, so that the
 * test can read the agent's per-thread view while the threads still exist. With --spin the
 * waiter is SCHED_FIFO and, after its last wait, spins for SPIN_MS before it pauses: its last
 * wait has ended and the thread has not switched out since (no CFS thread preempts it).
 * With --miss the waiter is named "miss-switch-in", the thread whose switch-ins an agent
 * started with PLUMB_TEST_MISS_SWITCH_IN does not close (bpf/sched.bpf.c fault_thread());
 * without --spin it then shares a CPU with a spinning thread of the process (main runs on
 * another) and spins for MISS_SPIN_MS after each wait, long enough to be preempted before it
 * blocks again (each wakeup then waits for the CPU the spinning thread holds). With --migrate
 * each wakeup is migrated while it is queued: the waiter blocks on the first CPU the process
 * may use, a SCHED_FIFO thread then holds that CPU, main (on the second) releases the waiter,
 * waits MIGRATE_QUEUED_MS and moves the waiter to its own CPU, where it runs. The line:
 *   tid=<waiter> pid=<process> blocked=<ns, at least> until=<ns, at most> rounds=<ROUNDS>
 *   ino=<inode of the resource: pipe read end, server socket, memfd; 0 for futex>
 *   peer=<inode of the socket at the other end (socket, unix); 0 otherwise>
 *   addr=<the futex word's address, hex> off=<its offset in the memfd> epfd=<epoll fd>
 *   delay0=<the waiter's run delay before its first wait, ns (schedstat)>
 *   waits_delay=<its run delay inside its waits, summed, ns>
 *   late=<rounds whose release waited past MS for the waiter to block>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static const char *kind;
static int rounds;
static long ms;
static int fds[2], srv = -1, cli = -1, epfd = -1;
static uint32_t *word; /* the futex word */
static volatile int released, done; /* rounds released by main; the waiter finished */
static volatile int entered; /* rounds whose call the waiter has begun */
static int late; /* rounds main found the waiter not yet blocked after its sleep */
static volatile pid_t waiter_tid;
static uint64_t delay_first; /* the waiter's run delay before its first wait (before done) */
struct round {
	uint64_t start, wall, outer, run, delay; /* the waiter's call, and around its samples */
	volatile uint64_t release; /* main's return from its release */
};
static struct round *round_of;
static bool spin, miss, migrate;
static volatile int hog_go, hog_spinning; /* --migrate: main asks, the hog says */
#define SPIN_MS		  700
#define MISS_SPIN_MS	  20
#define MIGRATE_QUEUED_MS 20

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	_exit(1);
}

static void spin_for(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		;
}

/* The n-th CPU the process may run on (--miss: 0 for the waiter, 1 for main), or -1. */
static int allowed_cpu(int n)
{
	static cpu_set_t set;
	static bool read;

	if (!read && sched_getaffinity(0, sizeof(set), &set))
		die("sched_getaffinity");
	read = true;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &set) && n-- == 0)
			return cpu;
	return -1;
}

static void pin(int n)
{
	int cpu = allowed_cpu(n);
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (cpu < 0 || sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

/*
 * The thread's run delay (schedstat's second field) and then its CPU time: from
 * CLOCK_THREAD_CPUTIME_ID, which takes in the slice it is running, where schedstat's first
 * field lags by up to a tick (the run since its last switch-in, which a lower bound read
 * with it would count as blocked).
 */
static void schedstat(uint64_t *run, uint64_t *delay)
{
	unsigned long long r, d;
	FILE *f = fopen("/proc/thread-self/schedstat", "re");
	struct timespec ts;

	if (!f || fscanf(f, "%llu %llu", &r, &d) != 2)
		die("/proc/thread-self/schedstat");
	fclose(f);
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		die("CLOCK_THREAD_CPUTIME_ID");
	*run = ts.tv_sec * 1000000000ull + ts.tv_nsec;
	*delay = d;
}

/* --miss without --spin: keeps CPU 0 busy, without waiting, until the waiter is done */
static void *partner(void *arg)
{
	(void)arg;
	pin(0);
	while (!done)
		;
	for (;;)
		pause();
	return NULL;
}

static long futex(uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

static bool is_futex(void)
{
	return !strncmp(kind, "futex", 5);
}

static int futex_op(int op)
{
	return strcmp(kind, "futex-shared") ? op | FUTEX_PRIVATE_FLAG : op;
}

/*
 * --migrate: holds the waiter's CPU (SCHED_FIFO, so that the waiter's wakeup stays queued)
 * while main asks, polling with short sleeps (no wait kind) otherwise.
 */
static void *hog(void *arg)
{
	struct sched_param sp = { .sched_priority = 1 };
	struct timespec nap = { 0, 200000 };

	(void)arg;
	pin(0);
	errno = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (errno)
		die("SCHED_FIFO");
	for (;;) {
		while (!hog_go)
			clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, NULL);
		hog_spinning = 1;
		while (hog_go)
			;
		hog_spinning = 0;
	}
	return NULL;
}

/* One blocking call on the resource; returns when main released it. */
static void wait_once(int round)
{
	struct epoll_event ev;
	char c;

	switch (kind[0]) {
	case 'p':
		if (read(fds[0], &c, 1) != 1)
			die("read");
		break;
	case 's':
	case 'u':
		if (recv(srv, &c, 1, 0) != 1)
			die("recv");
		break;
	case 'e':
		if (epoll_wait(epfd, &ev, 1, -1) != 1)
			die("epoll_wait");
		if (read(fds[0], &c, 1) != 1)
			die("read");
		break;
	default: /* futex: the word becomes round + 1 when released */
		while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == (uint32_t)round)
			if (futex(word, futex_op(FUTEX_WAIT), round) && errno != EAGAIN &&
			    errno != EINTR)
				die("futex wait");
	}
}

static void *waiter(void *arg)
{
	(void)arg;
	waiter_tid = gettid();
	if (miss && prctl(PR_SET_NAME, "miss-switch-in"))
		die("PR_SET_NAME");
	if (miss && !spin)
		pin(0);
	if (spin) {
		struct sched_param sp = { .sched_priority = 1 };

		errno = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
		if (errno)
			die("SCHED_FIFO");
	}
	for (int i = 0; i < rounds; i++) {
		struct round *r = &round_of[i];
		uint64_t run, delay, t0;

		if (migrate)
			pin(0); /* back from main's CPU */
		while (released < i) /* main has not started this round's sleep yet */
			sched_yield();
		t0 = now_ns();
		schedstat(&run, &delay);
		r->start = now_ns();
		if (i == 0)
			delay_first = delay;
		entered = i + 1; /* nothing blocks between this and the call */
		wait_once(i);
		r->wall = now_ns() - r->start;
		schedstat(&r->run, &r->delay);
		r->outer = now_ns() - t0;
		r->run -= run;
		r->delay -= delay;
		if (miss && !spin)
			spin_for(MISS_SPIN_MS * 1000000ull);
	}
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE); /* round_of[] written before */
	if (spin)
		spin_for(SPIN_MS * 1000000ull);
	for (;;)
		pause(); /* a sleep, no wait kind, until _exit */
	return NULL;
}

static void release(int round)
{
	switch (kind[0]) {
	case 'p':
	case 'e':
		if (write(fds[1], "x", 1) != 1)
			die("write");
		break;
	case 's':
	case 'u':
		if (send(cli, "x", 1, 0) != 1)
			die("send");
		break;
	default:
		__atomic_store_n(word, round + 1, __ATOMIC_RELEASE);
		futex(word, futex_op(FUTEX_WAKE), 1);
	}
}

/* The waiter's state from /proc/self/task/TID/stat: 'S' while it sleeps in its call. */
static char waiter_state(void)
{
	char path[64], buf[512], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)waiter_tid);
	f = fopen(path, "re");
	if (!f)
		die(path);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * Round i is released only once the waiter sleeps in its call: a waiter late to it (its
 * wakeup from the round before queued long, in a loaded emulated guest) would find it
 * released and not block at all, and the round would be no wait (the likely cause of a 6.1
 * guest's count in CI: 3 blocking futex waits of 4). Rounds that waited: late=.
 */
static void until_blocked(int i)
{
	struct timespec nap = { 0, 1000000 };
	uint64_t give_up = now_ns() + 30000000000ull;
	bool waited = false;

	while (entered <= i || waiter_state() != 'S') {
		if (now_ns() > give_up) {
			fprintf(stderr, "waitwork: the waiter did not block in round %d\n", i);
			_exit(1);
		}
		waited = true;
		clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, NULL);
	}
	late += waited;
}

static void setup(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct epoll_event ev = { .events = EPOLLIN };
	socklen_t len = sizeof(a);
	int l, one = 1;

	if (!strcmp(kind, "pipe") || !strcmp(kind, "epoll")) {
		if (pipe(fds))
			die("pipe");
		if (kind[0] == 'e' &&
		    ((epfd = epoll_create1(0)) < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fds[0], &ev)))
			die("epoll");
	} else if (!strcmp(kind, "socket")) {
		l = socket(AF_INET, SOCK_STREAM, 0);
		if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
		    getsockname(l, (struct sockaddr *)&a, &len))
			die("listen");
		cli = socket(AF_INET, SOCK_STREAM, 0);
		if (cli < 0 || connect(cli, (struct sockaddr *)&a, sizeof(a)))
			die("connect");
		setsockopt(cli, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
		srv = accept(l, NULL, NULL);
		if (srv < 0)
			die("accept");
	} else if (!strcmp(kind, "unix")) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			die("socketpair");
		srv = sv[0];
		cli = sv[1];
	} else if (!strcmp(kind, "futex")) {
		static uint32_t private_word;

		word = &private_word;
	} else if (!strcmp(kind, "futex-shared")) {
		int fd = memfd_create("waitwork", 0);
		char *p;

		if (fd < 0 || ftruncate(fd, 2 * 4096))
			die("memfd");
		p = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			die("mmap");
		fds[0] = fd;
		word = (uint32_t *)(p + 4096 + 8);
		*word = 0; /* touch it: the page is there before the wait */
	} else {
		fprintf(stderr, "waitwork: unknown kind %s\n", kind);
		_exit(2);
	}
}

int main(int argc, char **argv)
{
	struct timespec d;
	struct stat st = { 0 }, peer = { 0 };
	pthread_t t;
	char path[4096];
	uint64_t blocked_ns = 0, until_ns = 0, waits_delay = 0;

	if (argc > 2 && !strcmp(argv[1], "--cgroup")) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/cgroup.procs", argv[2]);
		f = fopen(path, "w");
		if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f))
			die(path);
		argv += 2;
		argc -= 2;
	}
	if (argc > 1 && !strcmp(argv[1], "--spin")) {
		spin = true;
		argv++;
		argc--;
	}
	if (argc > 1 && !strcmp(argv[1], "--miss")) {
		miss = true;
		argv++;
		argc--;
	}
	if (argc > 1 && !strcmp(argv[1], "--migrate")) {
		migrate = true;
		argv++;
		argc--;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: waitwork [--cgroup DIR] [--spin] [--miss] [--migrate] KIND "
				"MS ROUNDS\n");
		return 2;
	}
	kind = argv[1];
	ms = atol(argv[2]);
	rounds = atoi(argv[3]);
	round_of = calloc(rounds > 0 ? rounds : 1, sizeof(*round_of));
	if (!round_of)
		die("calloc");
	setup();
	if ((miss && !spin) || migrate) {
		if (allowed_cpu(1) < 0) {
			fprintf(stderr, "waitwork: --miss and --migrate need two CPUs\n");
			_exit(2);
		}
		pin(1);
		if (pthread_create(&t, NULL, migrate ? hog : partner, NULL))
			die("pthread_create");
	}
	if (pthread_create(&t, NULL, waiter, NULL))
		die("pthread_create");
	d.tv_sec = ms / 1000;
	d.tv_nsec = ms % 1000 * 1000000;
	for (int i = 0; i < rounds; i++) {
		released = i; /* the waiter may start round i */
		clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL);
		until_blocked(i);
		if (migrate) {
			struct timespec q = { 0, MIGRATE_QUEUED_MS * 1000000L };
			cpu_set_t set;

			hog_go = 1;
			while (!hog_spinning)
				sched_yield();
			release(i); /* the waiter's wakeup queues behind the hog */
			round_of[i].release = now_ns();
			clock_nanosleep(CLOCK_MONOTONIC, 0, &q, NULL);
			CPU_ZERO(&set);
			CPU_SET(allowed_cpu(1), &set);
			if (sched_setaffinity(waiter_tid, sizeof(set), &set))
				die("sched_setaffinity waiter");
			hog_go = 0;
			continue;
		}
		release(i);
		round_of[i].release = now_ns();
	}
	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE))
		sched_yield();
	for (int i = 0; i < rounds; i++) {
		struct round *r = &round_of[i];
		uint64_t unqueued = r->wall > r->delay ? r->wall - r->delay : 0;
		uint64_t outside = r->outer > r->delay ? r->outer - r->delay : 0;
		uint64_t to_release = r->release > r->start ? r->release - r->start : 0;

		blocked_ns += unqueued > r->run ? unqueued - r->run : 0;
		until_ns += to_release < outside ? to_release : outside;
		waits_delay += r->delay;
	}
	if (is_futex() && kind[5])
		fstat(fds[0], &st);
	else if (kind[0] == 'p' || kind[0] == 'e')
		fstat(fds[0], &st);
	else if (kind[0] == 's' || kind[0] == 'u') {
		fstat(srv, &st);
		fstat(cli, &peer);
	}
	printf("tid=%d pid=%d blocked=%llu until=%llu rounds=%d ino=%llu peer=%llu addr=%llx "
	       "off=%d epfd=%d delay0=%llu waits_delay=%llu late=%d\n",
	       waiter_tid, getpid(), (unsigned long long)blocked_ns, (unsigned long long)until_ns,
	       rounds, (unsigned long long)st.st_ino, (unsigned long long)peer.st_ino,
	       (unsigned long long)(uintptr_t)word, 4096 + 8, epfd, (unsigned long long)delay_first,
	       (unsigned long long)waits_delay, late);
	fflush(stdout);
	for (;;)
		pause();
}
