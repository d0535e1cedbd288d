// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "export/prom.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static int setup_writer(void **state)
{
	struct prom_writer *w = malloc(sizeof(*w));

	if (!w)
		return -1;
	prom_init(w);
	if (w->err) {
		free(w);
		return -1;
	}
	*state = w;
	return 0;
}

static int teardown_writer(void **state)
{
	prom_free(*state);
	free(*state);
	return 0;
}

static void expect_output(const struct prom_writer *w, const char *expected, const char *what)
{
	if (w->err)
		fail_msg("%s: err = %d, expected 0", what, w->err);
	if (strcmp(w->buf, expected))
		fail_msg("%s: expected output\n%s\ngot\n%s", what, expected, w->buf);
	if (w->len != strlen(expected))
		fail_msg("%s: len = %zu, expected %zu", what, w->len, strlen(expected));
}

static void expect_error(const struct prom_writer *w, int err, const char *output, const char *what)
{
	if (w->err != err)
		fail_msg("%s: err = %d, expected %d", what, w->err, err);
	if (strcmp(w->buf, output))
		fail_msg("%s: a rejected call changed the output to\n%s\nexpected\n%s", what,
			 w->buf, output);
	if (w->len != strlen(output))
		fail_msg("%s: len = %zu, expected %zu", what, w->len, strlen(output));
}

/* The value of the last sample line: the text after its last space, without the newline. */
static double last_value(const struct prom_writer *w)
{
	const char *space = strrchr(w->buf, ' ');

	assert_non_null(space);
	return strtod(space + 1, NULL);
}

static void test_label_value_escaping(void **state)
{
	static const struct {
		const char *value, *escaped;
	} cases[] = {
		{ "plain", "plain" },
		{ "", "" },
		{ "C:\\Windows", "C:\\\\Windows" },
		{ "say \"hi\"", "say \\\"hi\\\"" },
		{ "two\nlines", "two\\nlines" },
		{ "\\\"\n", "\\\\\\\"\\n" },
		{ "\\n is not a newline", "\\\\n is not a newline" },
		{ "/kubepods/pod ünïcødé ✓ 日本", "/kubepods/pod ünïcødé ✓ 日本" },
		{ "tab\tstays", "tab\tstays" },
	};
	struct prom_writer *w = *state;
	char expected[256];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct prom_label label = { "cgroup", cases[i].value };

		prom_reset(w);
		assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
		prom_sample(w, &label, 1, 1);
		snprintf(expected, sizeof(expected),
			 "# HELP m h\n# TYPE m gauge\nm{cgroup=\"%s\"} 1\n", cases[i].escaped);
		expect_output(w, expected, cases[i].value);
	}
}

static void test_help_escaping(void **state)
{
	static const struct {
		const char *help, *escaped;
	} cases[] = {
		{ "Bytes read.", "Bytes read." },
		{ "path C:\\dir", "path C:\\\\dir" },
		{ "first\nsecond", "first\\nsecond" },
		{ "quotes \"stay\" as they are", "quotes \"stay\" as they are" },
		{ "\\\n\\", "\\\\\\n\\\\" },
		{ "µs ✓", "µs ✓" },
	};
	struct prom_writer *w = *state;
	char expected[256];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		prom_reset(w);
		assert_int_equal(prom_family(w, "m_total", PROM_COUNTER, cases[i].help), 0);
		snprintf(expected, sizeof(expected), "# HELP m_total %s\n# TYPE m_total counter\n",
			 cases[i].escaped);
		expect_output(w, expected, cases[i].help);
	}
}

static void test_value_formatting(void **state)
{
	static const struct {
		double value;
		const char *text;
	} cases[] = {
		{ 0, "0" },
		{ -0.0, "0" },
		{ 1, "1" },
		{ -1, "-1" },
		{ 1234567890123.0, "1234567890123" },
		{ 9007199254740992.0, "9007199254740992" }, /* 2^53 */
		{ -9007199254740992.0, "-9007199254740992" },
		{ 18014398509481984.0, "18014398509481984" }, /* 2^54: %.17g, no exponent needed */
		{ 1e20, "1e+20" },
		{ 0.5, "0.5" },
		{ 0.1, "0.1" },
		{ -2.5, "-2.5" },
		{ 123456789.125, "123456789.125" },
		{ 1.0 / 3, "0.3333333333333333" },
		{ 1.024e-06, "1.024e-06" },
		{ 1.7976931348623157e308, "1.7976931348623157e+308" },
		{ NAN, "NaN" },
		{ INFINITY, "+Inf" },
		{ -INFINITY, "-Inf" },
	};
	struct prom_writer *w = *state;
	char expected[128];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		prom_reset(w);
		assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
		prom_sample(w, NULL, 0, cases[i].value);
		snprintf(expected, sizeof(expected), "# HELP m h\n# TYPE m gauge\nm %s\n",
			 cases[i].text);
		expect_output(w, expected, cases[i].text);
	}
}

/* Every finite double must read back bit for bit, whatever its shortest form is. */
static void test_values_round_trip(void **state)
{
	struct prom_writer *w = *state;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	int i;

	for (i = 0; i < 20000; i++) {
		double v, back;

		/* xorshift64: arbitrary bit patterns cover subnormals and all exponents. */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(&v, &x, sizeof(v));
		if (!isfinite(v))
			continue;
		prom_reset(w);
		assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
		prom_sample(w, NULL, 0, v);
		assert_int_equal(w->err, 0);
		back = last_value(w);
		if (memcmp(&back, &v, sizeof(v)) && !(v == 0 && back == 0))
			fail_msg("%.17g was written as %s", v, strrchr(w->buf, ' ') + 1);
	}
}

static void test_sample_labels(void **state)
{
	static const struct prom_label three[] = {
		{ "device", "nvme0n1" },
		{ "op", "read" },
		{ "cgroup", "/system.slice" },
	};
	struct prom_writer *w = *state;

	assert_int_equal(prom_family(w, "io_total", PROM_COUNTER, "Requests."), 0);
	prom_sample(w, NULL, 0, 7);
	prom_sample(w, three, 1, 8);
	prom_sample(w, three, 3, 9);
	expect_output(w,
		      "# HELP io_total Requests.\n"
		      "# TYPE io_total counter\n"
		      "io_total 7\n"
		      "io_total{device=\"nvme0n1\"} 8\n"
		      "io_total{device=\"nvme0n1\",op=\"read\",cgroup=\"/system.slice\"} 9\n",
		      "labels");
}

static void test_histogram_cumulative(void **state)
{
	static const double bounds[] = { 1, 2, 4, 8 };
	static const uint64_t counts[] = { 3, 0, 5, 1, 2 };
	static const uint64_t only_overflow[] = { 4 };
	static const struct prom_label labels[] = { { "device", "sda" }, { "op", "write" } };
	static const struct {
		const char *what;
		size_t nlabels, nbounds;
		const uint64_t *counts;
		double sum;
		const char *expected;
	} cases[] = {
		{ "no labels", 0, 4, counts, 37.5,
		  "h_seconds_bucket{le=\"1\"} 3\n"
		  "h_seconds_bucket{le=\"2\"} 3\n"
		  "h_seconds_bucket{le=\"4\"} 8\n"
		  "h_seconds_bucket{le=\"8\"} 9\n"
		  "h_seconds_bucket{le=\"+Inf\"} 11\n"
		  "h_seconds_sum 37.5\n"
		  "h_seconds_count 11\n" },
		{ "two labels", 2, 4, counts, 37.5,
		  "h_seconds_bucket{device=\"sda\",op=\"write\",le=\"1\"} 3\n"
		  "h_seconds_bucket{device=\"sda\",op=\"write\",le=\"2\"} 3\n"
		  "h_seconds_bucket{device=\"sda\",op=\"write\",le=\"4\"} 8\n"
		  "h_seconds_bucket{device=\"sda\",op=\"write\",le=\"8\"} 9\n"
		  "h_seconds_bucket{device=\"sda\",op=\"write\",le=\"+Inf\"} 11\n"
		  "h_seconds_sum{device=\"sda\",op=\"write\"} 37.5\n"
		  "h_seconds_count{device=\"sda\",op=\"write\"} 11\n" },
		{ "no bounds", 1, 0, only_overflow, 0.25,
		  "h_seconds_bucket{device=\"sda\",le=\"+Inf\"} 4\n"
		  "h_seconds_sum{device=\"sda\"} 0.25\n"
		  "h_seconds_count{device=\"sda\"} 4\n" },
	};
	struct prom_writer *w = *state;
	char expected[1024];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		prom_reset(w);
		assert_int_equal(prom_family(w, "h_seconds", PROM_HISTOGRAM, "Latency."), 0);
		prom_histogram(w, labels, cases[i].nlabels, bounds, cases[i].counts,
			       cases[i].nbounds, cases[i].sum);
		snprintf(expected, sizeof(expected),
			 "# HELP h_seconds Latency.\n# TYPE h_seconds histogram\n%s",
			 cases[i].expected);
		expect_output(w, expected, cases[i].what);
	}
}

/* Counts near 2^64 must not pass through a double, which would round them. */
static void test_histogram_large_counts(void **state)
{
	static const double bounds[] = { 1 };
	static const uint64_t counts[] = { 9007199254740993ULL, 2 };
	struct prom_writer *w = *state;

	assert_int_equal(prom_family(w, "h", PROM_HISTOGRAM, "h"), 0);
	prom_histogram(w, NULL, 0, bounds, counts, 1, 1);
	expect_output(w,
		      "# HELP h h\n# TYPE h histogram\n"
		      "h_bucket{le=\"1\"} 9007199254740993\n"
		      "h_bucket{le=\"+Inf\"} 9007199254740995\n"
		      "h_sum 1\n"
		      "h_count 9007199254740995\n",
		      "large counts");
}

/* The adjust hook (counters carried over a restart): every counter and histogram line, with
 * its series text as written; gauges never. */
struct adjust_log {
	char seen[8][128];
	int n;
};

static double add_100(void *ctx, const char *series, size_t len, double value)
{
	struct adjust_log *log = ctx;

	if (log->n < 8)
		snprintf(log->seen[log->n++], sizeof(log->seen[0]), "%.*s", (int)len, series);
	return value + 100;
}

static void test_adjust_hook(void **state)
{
	static const double bounds[] = { 1 };
	static const uint64_t counts[] = { 2, 3 };
	const struct prom_label l[] = { { "a", "x\"y" } };
	struct prom_writer *w = *state;
	struct adjust_log log = { 0 };

	w->adjust = add_100;
	w->adjust_ctx = &log;
	prom_family(w, "c_total", PROM_COUNTER, "c");
	prom_sample(w, l, 1, 5);
	prom_family(w, "g", PROM_GAUGE, "g");
	prom_sample(w, l, 1, 5);
	prom_family(w, "h", PROM_HISTOGRAM, "h");
	prom_histogram(w, NULL, 0, bounds, counts, 1, 0.5);
	expect_output(
		w,
		"# HELP c_total c\n# TYPE c_total counter\nc_total{a=\"x\\\"y\"} 105\n"
		"# HELP g g\n# TYPE g gauge\ng{a=\"x\\\"y\"} 5\n"
		"# HELP h h\n# TYPE h histogram\n"
		"h_bucket{le=\"1\"} 102\nh_bucket{le=\"+Inf\"} 105\nh_sum 100.5\nh_count 105\n",
		"adjusted");
	assert_int_equal(log.n, 5);
	assert_string_equal(log.seen[0], "c_total{a=\"x\\\"y\"}");
	assert_string_equal(log.seen[1], "h_bucket{le=\"1\"}");
	assert_string_equal(log.seen[2], "h_bucket{le=\"+Inf\"}");
	assert_string_equal(log.seen[3], "h_sum");
	assert_string_equal(log.seen[4], "h_count");
	prom_reset(w); /* the hook stays */
	prom_family(w, "c_total", PROM_COUNTER, "c");
	prom_sample(w, NULL, 0, 1);
	expect_output(w, "# HELP c_total c\n# TYPE c_total counter\nc_total 101\n", "after reset");
}

/* Log2 buckets of nanoseconds exported in seconds: each le must read back as its bound. */
static void test_histogram_le_round_trip(void **state)
{
	struct prom_writer *w = *state;
	double bounds[31];
	uint64_t counts[32];
	const char *p;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bounds); i++) {
		bounds[i] = (double)(1ULL << i) * 1e-9;
		counts[i] = i;
	}
	counts[31] = 1;
	assert_int_equal(prom_family(w, "lat_seconds", PROM_HISTOGRAM, "h"), 0);
	prom_histogram(w, NULL, 0, bounds, counts, ARRAY_SIZE(bounds), 0.5);
	assert_int_equal(w->err, 0);

	p = w->buf;
	for (i = 0; i < ARRAY_SIZE(bounds); i++) {
		p = strstr(p, "le=\"");
		assert_non_null(p);
		p += strlen("le=\"");
		if (strtod(p, NULL) != bounds[i])
			fail_msg("bound %.17g was written as le=\"%.*s\"", bounds[i],
				 (int)strcspn(p, "\""), p);
	}
	/* 0 + 1 + ... + 30 below the last bound, 1 above it. */
	assert_non_null(strstr(w->buf, "lat_seconds_bucket{le=\"+Inf\"} 466\n"));
	assert_non_null(strstr(w->buf, "lat_seconds_count 466\n"));
}

static void test_histogram_invalid_input(void **state)
{
	static const uint64_t counts[] = { 1, 2, 3 };
	static const struct prom_label le_label[] = { { "le", "1" } };
	static const struct {
		const char *what;
		double bounds[2];
		const uint64_t *counts;
		const struct prom_label *labels;
		size_t nlabels;
	} cases[] = {
		{ "decreasing bounds", { 2, 1 }, counts, NULL, 0 },
		{ "equal bounds", { 1, 1 }, counts, NULL, 0 },
		{ "NaN bound", { NAN, 1 }, counts, NULL, 0 },
		{ "NaN second bound", { 1, NAN }, counts, NULL, 0 },
		{ "+Inf bound", { 1, INFINITY }, counts, NULL, 0 },
		{ "-Inf bound", { -INFINITY, 1 }, counts, NULL, 0 },
		{ "no counts", { 1, 2 }, NULL, NULL, 0 },
		{ "le label", { 1, 2 }, counts, le_label, 1 },
	};
	static const char header[] = "# HELP h h\n# TYPE h histogram\n";
	struct prom_writer *w = *state;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		prom_reset(w);
		assert_int_equal(prom_family(w, "h", PROM_HISTOGRAM, "h"), 0);
		prom_histogram(w, cases[i].labels, cases[i].nlabels, cases[i].bounds,
			       cases[i].counts, 2, 1);
		expect_error(w, -EINVAL, header, cases[i].what);
	}
}

static void test_duplicate_family_rejected(void **state)
{
	static const char before[] = "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"
				     "# HELP b B.\n# TYPE b gauge\nb 2\n";
	struct prom_writer *w = *state;

	assert_int_equal(prom_family(w, "a_total", PROM_COUNTER, "A."), 0);
	prom_sample(w, NULL, 0, 1);
	assert_int_equal(prom_family(w, "b", PROM_GAUGE, "B."), 0);
	prom_sample(w, NULL, 0, 2);

	assert_int_equal(prom_family(w, "a_total", PROM_GAUGE, "A again."), -EEXIST);
	expect_error(w, -EEXIST, before, "second a_total");
	/* The sample meant for the duplicate must not land in family b either. */
	prom_sample(w, NULL, 0, 3);
	expect_error(w, -EEXIST, before, "sample after the duplicate");
}

static void test_invalid_metric_names(void **state)
{
	static const struct {
		const char *name;
		int err;
	} cases[] = {
		{ "a", 0 },
		{ "_a", 0 },
		{ ":a", 0 },
		{ "job:plumb_io_bytes:rate5m", 0 },
		{ "plumb_io_bytes_total", 0 },
		{ "A9_z", 0 },
		{ "", -EINVAL },
		{ NULL, -EINVAL },
		{ "9a", -EINVAL },
		{ "a-b", -EINVAL },
		{ "a b", -EINVAL },
		{ "a.b", -EINVAL },
		{ "a{b}", -EINVAL },
		{ "a\n", -EINVAL },
		{ "é", -EINVAL },
	};
	struct prom_writer *w = *state;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *what = cases[i].name ? cases[i].name : "(null)";
		int ret;

		prom_reset(w);
		ret = prom_family(w, cases[i].name, PROM_GAUGE, "h");
		if (ret != cases[i].err)
			fail_msg("name \"%s\": returned %d, expected %d", what, ret, cases[i].err);
		if (cases[i].err)
			expect_error(w, cases[i].err, "", what);
		else if (w->err || !w->len)
			fail_msg("name \"%s\": err %d, %zu bytes written", what, w->err, w->len);
	}
}

/* Unlike metric names, label names may not contain colons. */
static void test_invalid_label_names(void **state)
{
	static const struct {
		const char *name;
		int err;
	} cases[] = {
		{ "a", 0 },
		{ "_a", 0 },
		{ "a1_B", 0 },
		{ "container_runtime_cgroup_path", 0 },
		{ "kubernetes_pod_container_name", 0 },
		{ "", -EINVAL },
		{ NULL, -EINVAL },
		{ "1a", -EINVAL },
		{ "a:b", -EINVAL },
		{ "a-b", -EINVAL },
		{ "a b", -EINVAL },
		{ "a.b", -EINVAL },
		{ "app.kubernetes.io/name", -EINVAL },
		{ "a\"b", -EINVAL },
		{ "ä", -EINVAL },
	};
	static const char header[] = "# HELP m h\n# TYPE m gauge\n";
	static const struct prom_label null_value[] = { { "ok", "1" }, { "a", NULL } };
	struct prom_writer *w = *state;
	char expected[128];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		/* The invalid label comes second, so a half-written line would show. */
		struct prom_label labels[] = { { "ok", "1" }, { cases[i].name, "v" } };
		const char *what = cases[i].name ? cases[i].name : "(null)";

		prom_reset(w);
		assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
		prom_sample(w, labels, 2, 5);
		if (cases[i].err) {
			expect_error(w, cases[i].err, header, what);
			continue;
		}
		snprintf(expected, sizeof(expected), "%sm{ok=\"1\",%s=\"v\"} 5\n", header,
			 cases[i].name);
		expect_output(w, expected, what);
	}

	prom_reset(w);
	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
	prom_sample(w, null_value, 2, 5);
	expect_error(w, -EINVAL, header, "NULL label value");
}

static void test_sample_without_family_rejected(void **state)
{
	static const double bounds[] = { 1 };
	static const uint64_t counts[] = { 1, 1 };
	struct prom_writer *w = *state;

	prom_sample(w, NULL, 0, 1);
	expect_error(w, -EINVAL, "", "sample before any family");

	prom_reset(w);
	prom_histogram(w, NULL, 0, bounds, counts, 1, 1);
	expect_error(w, -EINVAL, "", "histogram before any family");
}

static void test_wrong_family_type_rejected(void **state)
{
	static const double bounds[] = { 1 };
	static const uint64_t counts[] = { 1, 1 };
	static const struct {
		enum prom_type type;
		bool histogram;
		const char *header;
	} cases[] = {
		{ PROM_HISTOGRAM, false, "# HELP m h\n# TYPE m histogram\n" },
		{ PROM_COUNTER, true, "# HELP m h\n# TYPE m counter\n" },
		{ PROM_GAUGE, true, "# HELP m h\n# TYPE m gauge\n" },
	};
	struct prom_writer *w = *state;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		prom_reset(w);
		assert_int_equal(prom_family(w, "m", cases[i].type, "h"), 0);
		if (cases[i].histogram)
			prom_histogram(w, NULL, 0, bounds, counts, 1, 1);
		else
			prom_sample(w, NULL, 0, 1);
		expect_error(w, -EINVAL, cases[i].header, cases[i].header);
	}
}

static void test_first_error_is_sticky(void **state)
{
	static const struct prom_label bad = { "bad-name", "v" };
	static const char header[] = "# HELP m h\n# TYPE m gauge\n";
	struct prom_writer *w = *state;

	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
	prom_sample(w, &bad, 1, 1);
	expect_error(w, -EINVAL, header, "bad label");
	prom_sample(w, NULL, 0, 1);
	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), -EINVAL);
	assert_int_equal(prom_family(w, "n", PROM_GAUGE, "h"), -EINVAL);
	expect_error(w, -EINVAL, header, "calls after the error");
}

static void test_reset(void **state)
{
	struct prom_writer *w = *state;
	char *buf;
	size_t cap;

	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
	prom_sample(w, NULL, 0, 1);
	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), -EEXIST);
	buf = w->buf;
	cap = w->cap;

	prom_reset(w);
	expect_output(w, "", "after reset");
	assert_ptr_equal(w->buf, buf);
	assert_int_equal(w->cap, cap);

	assert_int_equal(prom_family(w, "m", PROM_COUNTER, "again"), 0);
	prom_sample(w, NULL, 0, 2);
	expect_output(w, "# HELP m again\n# TYPE m counter\nm 2\n", "family after reset");

	/* Reset also forgets the current family. */
	prom_reset(w);
	prom_sample(w, NULL, 0, 3);
	expect_error(w, -EINVAL, "", "sample after reset");
}

static void test_output_grows(void **state)
{
	enum { N = 100000 };
	struct prom_writer *w = *state;
	char value[48], line[96];
	size_t newlines = 0;
	const char *p;
	int i;

	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
	for (i = 0; i < N; i++) {
		struct prom_label label = { "cgroup", value };

		snprintf(value, sizeof(value), "/sys/fs/cgroup/slice-%d", i);
		prom_sample(w, &label, 1, i);
	}
	assert_int_equal(w->err, 0);
	assert_int_equal(w->len, strlen(w->buf));
	assert_true(w->len < w->cap);
	for (p = w->buf; (p = strchr(p, '\n')); p++)
		newlines++;
	assert_int_equal(newlines, N + 2);
	snprintf(line, sizeof(line), "\nm{cgroup=\"/sys/fs/cgroup/slice-%d\"} %d\n", N - 1, N - 1);
	assert_string_equal(w->buf + w->len - strlen(line), line);
}

/* Allocations that failing_realloc() lets through before it returns NULL. */
static int allocations_left;

static void *failing_realloc(void *ptr, size_t size)
{
	if (allocations_left <= 0)
		return NULL;
	allocations_left--;
	return realloc(ptr, size);
}

static void test_allocation_failure(void **state)
{
	static const struct prom_label label = { "cgroup",
						 "/system.slice/systemd-journald.service" };
	struct prom_writer *w = *state;
	size_t newlines = 0, len;
	const char *p;
	int samples;

	w->realloc_fn = failing_realloc;
	allocations_left = 0;
	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), -ENOMEM);
	expect_error(w, -ENOMEM, "", "family name without memory");

	/* One allocation for the family name; the output buffer may not grow past prom_init's. */
	prom_reset(w);
	allocations_left = 1;
	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
	for (samples = 0; samples < 1000 && !w->err; samples++)
		prom_sample(w, &label, 1, 1);
	assert_int_equal(w->err, -ENOMEM);
	samples--;

	/* The sample that did not fit left no half line behind. */
	assert_int_equal(w->len, strlen(w->buf));
	assert_int_equal(w->buf[w->len - 1], '\n');
	for (p = w->buf; (p = strchr(p, '\n')); p++)
		newlines++;
	assert_int_equal(newlines, 2 + samples);

	len = w->len;
	prom_sample(w, &label, 1, 1);
	assert_int_equal(prom_family(w, "n", PROM_GAUGE, "h"), -ENOMEM);
	assert_int_equal(w->len, len);

	w->realloc_fn = realloc;
	prom_reset(w);
	assert_int_equal(prom_family(w, "m", PROM_GAUGE, "h"), 0);
	prom_sample(w, NULL, 0, 1);
	expect_output(w, "# HELP m h\n# TYPE m gauge\nm 1\n", "after reset with memory back");
}

static void require_promtool(void)
{
	if (system("command -v promtool >/dev/null 2>&1"))
		fail_msg("promtool is needed for this test and was not found in PATH "
			 "(Debian: apt-get install prometheus)");
}

/* Runs promtool check metrics on text; returns its exit status and its messages in out. */
static int promtool_check(const char *text, char *out, size_t out_size)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char in_path[4096], out_path[4096 + 8], cmd[8300];
	size_t len = strlen(text), n;
	int fd, status;
	FILE *f;

	snprintf(in_path, sizeof(in_path), "%s/test_prom.XXXXXX", dir);
	fd = mkstemp(in_path);
	if (fd < 0)
		fail_msg("mkstemp %s: %s", in_path, strerror(errno));
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlink(in_path);
		fail_msg("writing %s: %s", in_path, strerror(errno));
	}
	close(fd);
	snprintf(out_path, sizeof(out_path), "%s.out", in_path);

	snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s' > '%s' 2>&1", in_path, out_path);
	status = system(cmd);
	unlink(in_path);

	f = fopen(out_path, "r");
	n = f ? fread(out, 1, out_size - 1, f) : 0;
	out[n] = '\0';
	if (f)
		fclose(f);
	unlink(out_path);

	if (status == -1 || !WIFEXITED(status))
		fail_msg("running \"%s\" failed (status %d)", cmd, status);
	return WEXITSTATUS(status);
}

static void write_io_samples(struct prom_writer *w, const double *values)
{
	static const struct prom_label sets[][3] = {
		{ { "device", "nvme0n1" },
		  { "op", "read" },
		  { "cgroup", "/system.slice/nginx.service" } },
		{ { "device", "nvme0n1" },
		  { "op", "write" },
		  { "cgroup", "/system.slice/nginx.service" } },
		{ { "device", "sda" },
		  { "op", "read" },
		  { "cgroup", "/user.slice/user-1000.slice" } },
		{ { "device", "sda" },
		  { "op", "write" },
		  { "cgroup", "/pod \"web\\1\"\nünïcødé ✓" } },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sets); i++)
		prom_sample(w, sets[i], ARRAY_SIZE(sets[i]), values[i]);
}

static void test_promtool_accepts_output(void **state)
{
	static const double requests[] = { 1234567, 89012, 17, 0 };
	static const double bytes[] = { 5056024576.0, 364593152, 69632, 1e20 };
	static const struct prom_label nvme_read[] = { { "device", "nvme0n1" }, { "op", "read" } };
	static const struct prom_label sda_write[] = { { "device", "sda" }, { "op", "write" } };
	static const uint64_t nvme_counts[21] = { 0, 0, 0, 12, 340, 5120, 9001, 2200, 310, 40, 7 };
	static const uint64_t sda_counts[21] = {
		[8] = 3, [9] = 50, [12] = 700, [15] = 20, [20] = 1
	};
	struct prom_writer *w = *state;
	double bounds[20];
	char msg[4096];
	int status;
	size_t i;

	require_promtool();
	/* Log2 buckets from 1.024 us to 0.54 s, as a BPF histogram of nanoseconds exports them. */
	for (i = 0; i < ARRAY_SIZE(bounds); i++)
		bounds[i] = (double)(1ULL << (i + 10)) * 1e-9;

	prom_family(w, "plumb_io_requests_total", PROM_COUNTER,
		    "Block I/O requests completed, by device, operation and cgroup.");
	write_io_samples(w, requests);
	prom_family(w, "plumb_io_bytes_total", PROM_COUNTER,
		    "Bytes moved by completed block I/O requests.\nSee docs/metrics.md.");
	write_io_samples(w, bytes);
	prom_family(w, "plumb_cgroups_tracked", PROM_GAUGE, "Cgroups in the identity cache.");
	prom_sample(w, NULL, 0, 42);
	prom_family(w, "plumb_io_latency_seconds", PROM_HISTOGRAM,
		    "Block I/O latency from issue to completion, \"C:\\\" style help.");
	prom_histogram(w, nvme_read, ARRAY_SIZE(nvme_read), bounds, nvme_counts, ARRAY_SIZE(bounds),
		       0.731552);
	prom_histogram(w, sda_write, ARRAY_SIZE(sda_write), bounds, sda_counts, ARRAY_SIZE(bounds),
		       3.25);
	assert_int_equal(w->err, 0);

	status = promtool_check(w->buf, msg, sizeof(msg));
	if (status)
		fail_msg("promtool check metrics exited %d:\n%s\non this output:\n%s", status, msg,
			 w->buf);
}

/* Shows that the test above would catch broken output rather than pass regardless. */
static void test_promtool_rejects_broken_output(void **state)
{
	static const char *const broken[] = {
		"# HELP a_total A.\n# TYPE a_total counter\na_total{l=\"unterminated} 1\n",
		"# HELP a_total A.\na_total 1\n# HELP a_total A.\na_total 2\n", /* family twice */
		"# HELP a A.\n# TYPE a counter\na 1\n", /* lint: counter without _total */
	};
	char msg[4096];
	size_t i;

	(void)state;
	require_promtool();
	for (i = 0; i < ARRAY_SIZE(broken); i++) {
		if (!promtool_check(broken[i], msg, sizeof(msg)))
			fail_msg("promtool accepted broken input:\n%s", broken[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define WRITER_TEST(f) cmocka_unit_test_setup_teardown(f, setup_writer, teardown_writer)
		WRITER_TEST(test_label_value_escaping),
		WRITER_TEST(test_help_escaping),
		WRITER_TEST(test_value_formatting),
		WRITER_TEST(test_values_round_trip),
		WRITER_TEST(test_sample_labels),
		WRITER_TEST(test_histogram_cumulative),
		WRITER_TEST(test_histogram_large_counts),
		WRITER_TEST(test_adjust_hook),
		WRITER_TEST(test_histogram_le_round_trip),
		WRITER_TEST(test_histogram_invalid_input),
		WRITER_TEST(test_duplicate_family_rejected),
		WRITER_TEST(test_invalid_metric_names),
		WRITER_TEST(test_invalid_label_names),
		WRITER_TEST(test_sample_without_family_rejected),
		WRITER_TEST(test_wrong_family_type_rejected),
		WRITER_TEST(test_first_error_is_sticky),
		WRITER_TEST(test_reset),
		WRITER_TEST(test_output_grows),
		WRITER_TEST(test_allocation_failure),
		WRITER_TEST(test_promtool_accepts_output),
		WRITER_TEST(test_promtool_rejects_broken_output),
#undef WRITER_TEST
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
