// SPDX-License-Identifier: GPL-2.0
/*
 * One-way latency of small TCP messages, as the applications see it: the netstack accuracy
 * test's ground truth. Built static.
 *
 *   network recv PORT COUNT SIZE [EVERY:STALL_MS]
 *   network send ADDR PORT COUNT SIZE INTERVAL_US
 *
 * The sender connects (TCP_NODELAY) and sends COUNT messages of SIZE bytes, one every
 * INTERVAL_US on an absolute schedule; the first 8 bytes of each are CLOCK_MONOTONIC read
 * just before its send(2). The receiver (listening on PORT, printing "ready" once it listens)
 * blocks in recv(2) for each message and reads CLOCK_MONOTONIC as soon as it has the whole
 * message: the difference is the message's one-way time, from the sender's call into the
 * kernel to the receiver's return from it (the same clock: one machine). BPF's
 * bpf_ktime_get_ns() is this clock too. With EVERY:STALL_MS the receiver sleeps STALL_MS
 * after every EVERY messages: a reader that lags, its socket's queue growing meanwhile.
 *
 * The receiver prints one line at the end:
 *   count=<messages> mean_ns=<mean one-way> split=<messages that took more than one recv>
 * A split message left in more than one packet, and its time is not one packet's.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int die(const char *what)
{
	perror(what);
	exit(1);
}

static int do_recv(int port, long count, size_t size, long every, long stall_ms)
{
	struct timespec stall = { stall_ms / 1000, stall_ms % 1000 * 1000000L };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), c;
	char *buf = calloc(1, size);
	long split = 0;
	double sum = 0;

	if (l < 0 || !buf)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1))
		die("bind");
	printf("ready\n");
	fflush(stdout);
	c = accept(l, NULL, NULL);
	if (c < 0)
		die("accept");
	for (long i = 0; i < count; i++) {
		size_t got = 0;
		int calls = 0;
		uint64_t sent, t = 0;

		while (got < size) {
			ssize_t n;

			n = recv(c, buf + got, size - got, 0);

			t = now_ns();
			if (n <= 0)
				die("recv");
			got += n;
			calls++;
		}
		memcpy(&sent, buf, sizeof(sent));
		sum += (double)(t - sent);
		split += calls > 1;
		if (every > 0 && (i + 1) % every == 0)
			nanosleep(&stall, NULL);
	}
	printf("count=%ld mean_ns=%.0f split=%ld\n", count, sum / count, split);
	return 0;
}

static int do_send(const char *addr, int port, long count, size_t size, long interval_us)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0);
	char *buf = calloc(1, size < 8 ? 8 : size);
	struct timespec next;

	if (s < 0 || !buf || inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		die("address");
	if (connect(s, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long i = 0; i < count; i++) {
		uint64_t t;

		next.tv_nsec += interval_us * 1000;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		t = now_ns();
		memcpy(buf, &t, sizeof(t));
		if (send(s, buf, size, 0) != (ssize_t)size)
			die("send");
	}
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	long every = 0, stall_ms = 0;

	if (argc == 6 && !strcmp(argv[1], "recv") &&
	    sscanf(argv[5], "%ld:%ld", &every, &stall_ms) != 2)
		argc = 0; /* the usage line */
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "recv"))
		return do_recv(atoi(argv[2]), atol(argv[3]), atol(argv[4]), every, stall_ms);
	if (argc == 7 && !strcmp(argv[1], "send"))
		return do_send(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]), atol(argv[6]));
	fprintf(stderr, "usage: network recv PORT COUNT SIZE [EVERY:STALL_MS] | "
			"network send ADDR PORT COUNT SIZE INTERVAL_US\n");
	return 2;
}
