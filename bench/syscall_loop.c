// SPDX-License-Identifier: GPL-2.0
/*
 * Tight syscall loops for the hot-path benchmark: the time per call of
 *   pread   4 KiB pread64() of a file (on tmpfs in the benchmark): a counted I/O syscall
 *   zero    1-byte read() of /dev/zero: traced by the module but not counted (char device)
 *   getppid a syscall no program is attached to
 * Usage: syscall_loop pread|zero|getppid PATH ITERATIONS  -> prints ns per call
 *
 * The calls run in 100 batches and the median batch is reported: on a noisy machine a
 * median of short batches is far steadier than the mean of one long run.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#define BATCHES 100

static char buf[4096];

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1e9 + (b->tv_nsec - a->tv_nsec);
}

int main(int argc, char **argv)
{
	struct timespec a, b;
	double batch[BATCHES];
	long n, i;
	int fd = -1, k;

	if (argc != 4) {
		fprintf(stderr, "usage: syscall_loop pread|zero|getppid PATH ITERATIONS\n");
		return 2;
	}
	n = atol(argv[3]) / BATCHES;
	if (n <= 0)
		return 2;
	if (strcmp(argv[1], "getppid")) {
		fd = open(argv[2], O_RDONLY);
		if (fd < 0) {
			perror(argv[2]);
			return 1;
		}
	}
	for (k = 0; k < BATCHES; k++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		if (!strcmp(argv[1], "pread")) {
			for (i = 0; i < n; i++)
				if (pread(fd, buf, sizeof(buf), 0) != sizeof(buf))
					return 1;
		} else if (!strcmp(argv[1], "zero")) {
			for (i = 0; i < n; i++)
				if (read(fd, buf, 1) != 1)
					return 1;
		} else {
			for (i = 0; i < n; i++)
				syscall(SYS_getppid);
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		batch[k] = elapsed_ns(&a, &b) / n;
	}
	qsort(batch, BATCHES, sizeof(batch[0]), cmp_double);
	printf("%.1f\n", (batch[BATCHES / 2 - 1] + batch[BATCHES / 2]) / 2);
	return 0;
}
