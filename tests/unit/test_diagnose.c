// SPDX-License-Identifier: GPL-2.0
/* plumb diagnose's statistics: medians, Mann-Whitney z, what counts as a significant rise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "analysis/diagnose.h"

static void test_median(void **state)
{
	double odd[] = { 3, 1, 2 }, even[] = { 4, 1, 3, 2 }, one[] = { 7 };

	(void)state;
	assert_true(diag_median(odd, 3) == 2);
	assert_true(diag_median(even, 4) == 2.5);
	assert_true(diag_median(one, 1) == 7);
}

static void test_mann_whitney(void **state)
{
	double a[] = { 1, 2, 3, 4, 5 }, b[] = { 6, 7, 8, 9, 10 }, same[] = { 1, 1, 1, 1, 1 };
	double z;

	(void)state;
	/* b entirely above a: U = 25, mean 12.5, var 5*5*11/12 = 22.9: z = 2.61 */
	z = diag_mann_whitney_z(a, 5, b, 5);
	assert_true(fabs(z - 12.5 / sqrt(25 * 11 / 12.0)) < 1e-9);
	assert_true(diag_mann_whitney_z(b, 5, a, 5) < -2.6);
	/* all tied: no evidence either way */
	assert_true(diag_mann_whitney_z(same, 5, same, 5) == 0);
	/* interleaved: about 0 */
	double x[] = { 1, 3, 5, 7, 9 }, y[] = { 2, 4, 6, 8, 10 };

	assert_true(fabs(diag_mann_whitney_z(x, 5, y, 5)) < 0.6);
}

/* A steady signal with noise, then a step: significant; the same without the step: not. */
static void test_compare(void **state)
{
	double base[10], obs[20], flat[20];
	struct diag_result r;

	(void)state;
	for (int i = 0; i < 10; i++)
		base[i] = 0.10 + 0.01 * (i % 3);
	for (int i = 0; i < 20; i++) {
		obs[i] = 0.40 + 0.01 * (i % 4);
		flat[i] = 0.10 + 0.01 * (i % 3);
	}
	diag_compare(base, 10, obs, 20, &r);
	assert_true(r.significant);
	assert_true(fabs(r.change - (0.415 - 0.11)) < 1e-9);
	diag_compare(base, 10, flat, 20, &r);
	assert_false(r.significant);

	/* a rise too small in absolute terms (50 ms/s) is not a cause, however clear */
	for (int i = 0; i < 20; i++)
		obs[i] = base[i % 10] + 0.05;
	diag_compare(base, 10, obs, 20, &r);
	assert_false(r.significant);

	/* nor a rise under half a large baseline */
	for (int i = 0; i < 10; i++)
		base[i] = 2.0 + 0.001 * i;
	for (int i = 0; i < 20; i++)
		obs[i] = 2.8 + 0.001 * i;
	diag_compare(base, 10, obs, 20, &r);
	assert_true(r.z > 3);
	assert_false(r.significant);

	/* a drop is never a cause */
	diag_compare(obs, 10, base, 10, &r);
	assert_false(r.significant);

	/* from nothing to something: significant once it is clear of noise */
	for (int i = 0; i < 10; i++)
		base[i] = 0;
	for (int i = 0; i < 20; i++)
		obs[i] = 0.15;
	diag_compare(base, 10, obs, 20, &r);
	assert_true(r.significant);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_median),
		cmocka_unit_test(test_mann_whitney),
		cmocka_unit_test(test_compare),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
