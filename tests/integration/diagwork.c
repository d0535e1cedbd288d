// SPDX-License-Identifier: GPL-2.0
/*
 * The workloads of plumb diagnose's scenarios (tests/integration/test_diagnose.py): each runs
 * steadily and, from the first SIGUSR1 on, injects its cause. Built static.
 *
 *   diagwork lock THREADS                 THREADS threads take one mutex in a loop; they hold
 *                                         it 5 us, 200 us once injected (lock contention)
 *   diagwork produce                      writes 64-byte records to stdout as fast as it can
 *   diagwork stage                        copies records stdin -> stdout, 20 us of work each;
 *                                         5 ms once injected (a pipeline stage slows down)
 *   diagwork consume                      reads records from stdin, 200 us of work each: the
 *                                         slowest stage; once injected, the next 2048 records
 *                                         with no work (it empties the full pipe and waits on
 *                                         it a moment, as it never did before), then as before
 *   diagwork server PORT                  a TCP server on 127.0.0.1:PORT answering each 64-byte
 *                                         request after 50 us of work; 2 ms once injected
 *   diagwork client PORT                  sends a request, waits for the answer, works 300 us,
 *                                         in a loop (its dependency is the server)
 *   diagwork fsync FILE                   writes 4 KiB to FILE and fsyncs it, then sleeps 2 ms,
 *                                         in a loop (disk contention comes from outside)
 *   diagwork epoll                        epoll_wait with a 20 ms timeout on an instance watching
 *                                         pipe A, then 20 ms of work, in a loop; from SIGUSR1
 *                                         on no work and pipe B registered too (more epoll
 *                                         waiting, on a file that is new). At
 *                                         SIGTERM it prints on stdout "b <ns>" (when B was
 *                                         registered) and "wait <begin ns> <end ns> <cpu ns>
 *                                         <run delay ns>" for each epoll_wait (CLOCK_MONOTONIC;
 *                                         the thread's CPU and run-queue time in the span):
 *                                         epoll_file_wait's truth
 *
 * Each prints "ready <pid> <detail>" on stderr once it runs (lock: the mutex's address) and
 * runs until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t injected_flag, term_flag;

static void on_term(int sig)
{
	(void)sig;
	term_flag = 1;
}

static void on_usr1(int sig)
{
	(void)sig;
	injected_flag = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void spin_us(uint64_t us)
{
	uint64_t end = now_ns() + us * 1000;

	while (now_ns() < end)
		;
}

/* the cause is on: SIGUSR1 came */
static int injected(void)
{
	return injected_flag;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void *locker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&lock);
		spin_us(injected() ? 200 : 5);
		pthread_mutex_unlock(&lock);
		spin_us(100);
	}
	return NULL;
}

static void read_full(int fd, char *buf, size_t n)
{
	while (n) {
		ssize_t got = read(fd, buf, n);

		if (got <= 0)
			exit(0); /* the other end went away */
		buf += got;
		n -= got;
	}
}

static void write_full(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t put = write(fd, buf, n);

		if (put <= 0)
			exit(0);
		buf += put;
		n -= put;
	}
}

static void serve(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1, c;
	char buf[64];

	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 8))
		die("server");
	fprintf(stderr, "ready %d %d\n", getpid(), port);
	c = accept(l, NULL, NULL);
	if (c < 0)
		die("accept");
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (;;) {
		read_full(c, buf, sizeof(buf));
		spin_us(injected() ? 2000 : 50);
		write_full(c, buf, sizeof(buf));
	}
}

static void client(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	char buf[64] = "request";

	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
		die("client");
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fprintf(stderr, "ready %d %d\n", getpid(), port);
	for (;;) {
		write_full(s, buf, sizeof(buf));
		read_full(s, buf, sizeof(buf));
		spin_us(300);
	}
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* this thread's time runnable, waiting for a CPU: schedstat's second field (sched_info) */
static uint64_t run_delay_ns(int fd)
{
	char buf[96];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	char *p;

	if (n <= 0)
		die("schedstat");
	buf[n] = 0;
	p = strchr(buf, ' ');
	if (!p)
		die("schedstat");
	return strtoull(p + 1, NULL, 10);
}

/*
 * Nothing is ever ready: every epoll_wait blocks for its whole timeout. Each wait's span is
 * printed with the thread's CPU time and run delay inside it: the span less both is the time
 * it slept (what the wait module charges; the wake-up's wait for a CPU is run-queue time).
 */
static void epoll_waiter(void)
{
	static uint64_t span[1 << 18][4];
	int stat = open("/proc/thread-self/schedstat", O_RDONLY);
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(0), a[2], b[2];
	uint64_t b_at = 0;
	size_t n = 0;

	if (stat < 0 || ep < 0 || pipe(a) || pipe(b) || epoll_ctl(ep, EPOLL_CTL_ADD, a[0], &ev))
		die("epoll");
	signal(SIGTERM, on_term);
	fprintf(stderr, "ready %d epfd=%d a=%d b=%d\n", getpid(), ep, a[0], b[0]);
	while (!term_flag && n < sizeof(span) / sizeof(span[0])) {
		if (injected() && !b_at) {
			b_at = now_ns();
			if (epoll_ctl(ep, EPOLL_CTL_ADD, b[0], &ev))
				die("epoll_ctl");
		}
		uint64_t c, d;

		span[n][0] = now_ns();
		c = cpu_ns();
		d = run_delay_ns(stat);
		epoll_wait(ep, &ev, 1, 20); /* EINTR at a signal: the wait so far counts */
		span[n][3] = run_delay_ns(stat) - d;
		span[n][2] = cpu_ns() - c;
		span[n++][1] = now_ns();
		if (!injected())
			spin_us(20000);
	}
	printf("b %llu\n", (unsigned long long)b_at);
	for (size_t i = 0; i < n; i++)
		printf("wait %llu %llu %llu %llu\n", (unsigned long long)span[i][0],
		       (unsigned long long)span[i][1], (unsigned long long)span[i][2],
		       (unsigned long long)span[i][3]);
	exit(0);
}

int main(int argc, char **argv)
{
	char rec[64] = "record";
	struct timespec nap = { 0, 2000000 };

	if (argc < 2) {
		fprintf(stderr, "usage: diagwork MODE ARGS... (see the source)\n");
		return 2;
	}
	signal(SIGUSR1, on_usr1);
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "lock") && argc == 3) {
		int n = atoi(argv[2]);
		pthread_t t;

		for (int i = 0; i < n; i++)
			if (pthread_create(&t, NULL, locker, NULL))
				die("pthread_create");
		fprintf(stderr, "ready %d %p\n", getpid(), (void *)&lock);
		for (;;)
			sleep(3600);
	} else if (!strcmp(argv[1], "produce")) {
		fprintf(stderr, "ready %d\n", getpid());
		for (;;)
			write_full(1, rec, sizeof(rec));
	} else if (!strcmp(argv[1], "stage")) {
		fprintf(stderr, "ready %d\n", getpid());
		for (;;) {
			read_full(0, rec, sizeof(rec));
			spin_us(injected() ? 5000 : 20);
			write_full(1, rec, sizeof(rec));
		}
	} else if (!strcmp(argv[1], "consume")) {
		int drain = 2048;

		fprintf(stderr, "ready %d\n", getpid());
		for (;;) {
			read_full(0, rec, sizeof(rec));
			if (injected() && drain > 0)
				drain--;
			else
				spin_us(200);
		}
	} else if (!strcmp(argv[1], "server") && argc == 3) {
		serve(atoi(argv[2]));
	} else if (!strcmp(argv[1], "client") && argc == 3) {
		client(atoi(argv[2]));
	} else if (!strcmp(argv[1], "epoll")) {
		epoll_waiter();
	} else if (!strcmp(argv[1], "fsync") && argc == 3) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		char page[4096];

		if (fd < 0)
			die(argv[2]);
		memset(page, 'x', sizeof(page));
		fprintf(stderr, "ready %d\n", getpid());
		for (;;) {
			if (pwrite(fd, page, sizeof(page), 0) != sizeof(page) || fdatasync(fd))
				die("write");
			nanosleep(&nap, NULL);
		}
	}
	fprintf(stderr, "diagwork: bad arguments\n");
	return 2;
}
