/* SPDX-License-Identifier: GPL-2.0 */
/* The monotonic clock, for intervals, rate limits and grace periods. */
#ifndef PLUMB_CLOCK_H
#define PLUMB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t monotonic_ms(void)
{
	return monotonic_ns() / 1000000;
}

static inline double monotonic_s(void)
{
	return monotonic_ns() / 1e9;
}

#endif
