// SPDX-License-Identifier: GPL-2.0
/*
 * A one-way delay line between two network namespaces: the round trip of a wide-area path
 * for the netstack scenario (d), on a kernel without sch_netem. Built static.
 *
 *   delayline FROM_NETNS TO_NETNS DELAY_US
 *
 * Creates tun "dly0" in FROM_NETNS and tun "dly1" in TO_NETNS (names under /var/run/netns),
 * prints "ready", and from then on every IP packet routed into dly0 comes out of dly1
 * DELAY_US later (plus up to POLL_US), in order. One thread takes what dly0 holds every
 * POLL_US: it never sleeps in read(2), so the tun's transmit never wakes it, and that
 * transmit (plumb's driver stage on dly0) costs the same whatever this program does (blocked
 * in read(2), the wake-up in the transmit took 3.5 us in some runs and 14 us in others,
 * and plumb named it). Another thread writes each packet at its time. At most CAPACITY
 * packets are held; more are dropped and counted, and the count is printed on SIGTERM or
 * SIGINT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define CAPACITY 4096
#define POLL_US	 200
#define MTU	 2048 /* the tun devices keep the default MTU, 1500 */

struct held {
	struct timespec due;
	ssize_t len;
	unsigned char data[MTU];
};

static struct held *ring;
static size_t head, tail; /* tail - head packets held */
static unsigned long dropped;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static int in_fd, out_fd;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int tun(const char *netns, const char *name)
{
	char path[256];
	struct ifreq ifr = { .ifr_flags = IFF_TUN | IFF_NO_PI };
	int ns, fd;

	snprintf(path, sizeof(path), "/var/run/netns/%s", netns);
	ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0 || setns(ns, CLONE_NEWNET) < 0)
		die(path);
	close(ns);
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		die("/dev/net/tun");
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		die("TUNSETIFF");
	return fd;
}

static void *writer(void *arg)
{
	(void)arg;
	for (;;) {
		struct held *h;

		pthread_mutex_lock(&lock);
		while (head == tail)
			pthread_cond_wait(&more, &lock);
		h = &ring[head % CAPACITY];
		pthread_mutex_unlock(&lock);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &h->due, NULL))
			;
		/* a packet the far side refuses (its device down) is gone, as on a wire */
		if (write(out_fd, h->data, h->len) < 0)
			__atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&lock);
		head++;
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static void stop(int sig)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "dropped=%lu\n",
			 __atomic_load_n(&dropped, __ATOMIC_RELAXED));

	(void)sig;
	if (write(STDOUT_FILENO, line, n) < 0)
		_exit(1);
	_exit(0);
}

int main(int argc, char **argv)
{
	long delay_us;
	pthread_t t;

	if (argc != 4) {
		fprintf(stderr, "usage: delayline FROM_NETNS TO_NETNS DELAY_US\n");
		return 2;
	}
	delay_us = atol(argv[3]);
	ring = calloc(CAPACITY, sizeof(*ring));
	if (!ring)
		die("calloc");
	in_fd = tun(argv[1], "dly0");
	out_fd = tun(argv[2], "dly1");
	signal(SIGTERM, stop);
	signal(SIGINT, stop);
	if (pthread_create(&t, NULL, writer, NULL))
		die("pthread_create");
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		const struct timespec poll = { .tv_nsec = POLL_US * 1000 };
		struct held *h;
		size_t held;

		pthread_mutex_lock(&lock);
		held = tail - head;
		pthread_mutex_unlock(&lock);
		if (held == CAPACITY) { /* the writer frees a slot within DELAY_US */
			unsigned char sink[MTU];

			if (read(in_fd, sink, sizeof(sink)) >= 0)
				__atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
			else
				nanosleep(&poll, NULL);
			continue;
		}
		h = &ring[tail % CAPACITY];
		h->len = read(in_fd, h->data, sizeof(h->data));
		if (h->len < 0 && errno == EAGAIN) {
			nanosleep(&poll, NULL);
			continue;
		}
		if (h->len < 0)
			die("read dly0");
		clock_gettime(CLOCK_MONOTONIC, &h->due);
		h->due.tv_nsec += (delay_us % 1000000) * 1000;
		h->due.tv_sec += delay_us / 1000000 + h->due.tv_nsec / 1000000000;
		h->due.tv_nsec %= 1000000000;
		pthread_mutex_lock(&lock);
		tail++;
		pthread_cond_signal(&more);
		pthread_mutex_unlock(&lock);
	}
}
