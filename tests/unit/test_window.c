// SPDX-License-Identifier: GPL-2.0
/*
 * src/window.h's window_pieces: a period's window lies inside its period, in one piece or two,
 * spans what it should, and over every offset (drawn uniformly by the windows' thread) each
 * phase of the period is in exactly as many windows as any other: a workload that repeats on
 * the period's beat has the same chance of being timed at whatever phase it runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "window.h"

/* io's shapes: 1/16 of a second, 1/2 of one, a 10 ms window of a 1.6 s period; units any */
static const uint64_t shapes[][2] = { { 1600, 100 }, { 1000, 500 }, { 1600, 10 }, { 7, 7 } };

static void test_pieces_inside(void **state)
{
	uint64_t start[2], len[2], period = 1000000;

	(void)state;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint64_t p = shapes[s][0], span = shapes[s][1];

		for (uint64_t off = 0; off < 3 * p; off++) {
			int n = window_pieces(period, p, span, off, start, len);

			assert_true(n == 1 || n == 2);
			assert_int_equal(len[0] + (n == 2 ? len[1] : 0), span);
			for (int i = 0; i < n; i++) {
				assert_true(len[i] > 0);
				assert_true(start[i] >= period && start[i] + len[i] <= period + p);
			}
			if (n == 2) /* in time order, apart (touching when span is p) */
				assert_true(start[0] + len[0] <= start[1]);
			/* the offset taken modulo the period */
			assert_int_equal(start[n - 1] + len[n - 1] - period,
					 n == 2 ? p : off % p + span);
		}
	}
}

static void test_phases_equal(void **state)
{
	uint64_t start[2], len[2];

	(void)state;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint64_t p = shapes[s][0], span = shapes[s][1];
		uint64_t *covered = calloc(p, sizeof(*covered));

		assert_non_null(covered);
		/* every offset once: the phases each window covers, counted */
		for (uint64_t off = 0; off < p; off++) {
			int n = window_pieces(0, p, span, off, start, len);

			for (int i = 0; i < n; i++)
				for (uint64_t t = start[i]; t < start[i] + len[i]; t++)
					covered[t]++;
		}
		/* each phase in span windows of the p: the chance span / p, the ends too */
		for (uint64_t t = 0; t < p; t++)
			assert_int_equal(covered[t], span);
		free(covered);
	}
}

/*
 * window_next_start: over many windows, each phase of a beat (the period's own, one longer,
 * one shorter) is in a window for the same share of time, window / period, within 4% (the
 * sampling noise of 200,000 windows: 1.7% at most here, from a fixed seed); the starts are a
 * period apart on average. netstack's shape in units of 10 ms: 1 s windows, 100 ms drains,
 * a 2 s period (--netstack-window 2) and the default 20 s. A fixed grid with one offset
 * drawn inside each period fails: the last drain of each period is never in a window (the
 * 2 s period's phases: 0 to 2 times the share; the 20 s period's: 0.43 to 1.07).
 */
static void test_next_start_phases(void **state)
{
	static const uint64_t periods[] = { 200, 2000 };
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	(void)state;
	/* a period with no room past the window and its drain: back to back, never wrapped */
	assert_int_equal(window_next_start(10, 5, 4, 2, 12345), 16);
	for (size_t k = 0; k < sizeof(periods) / sizeof(periods[0]); k++) {
		uint64_t period = periods[k], window = 100, drain = 10, windows = 200000;
		uint64_t beats[] = { period, period + 60, period - 40 }, start = 0; /* /20 whole */
		double bins[3][20] = { { 0 } }, want = (double)window / (double)period;

		for (uint64_t n = 0; n < windows; n++) {
			for (size_t b = 0; b < 3; b++) /* each unit of the window, at its phase */
				for (uint64_t t = start; t < start + window; t++)
					bins[b][(t % beats[b]) * 20 / beats[b]] += 1;
			start = window_next_start(start, period, window, drain,
						  window_random(&rng));
		}
		/* a period apart on average (within 1%) */
		assert_true(start > windows * period * 99 / 100 &&
			    start < windows * period * 101 / 100);
		for (size_t b = 0; b < 3; b++)
			for (size_t i = 0; i < 20; i++) {
				/* the share of the bin's time in a window (each bin 1/20 of all) */
				double share = bins[b][i] * 20 / (double)start;

				assert_true(share > 0.96 * want && share < 1.04 * want);
			}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pieces_inside),
		cmocka_unit_test(test_phases_equal),
		cmocka_unit_test(test_next_start_phases),
	};

	return cmocka_run_group_tests_name("window", tests, NULL, NULL);
}
