// SPDX-License-Identifier: GPL-2.0
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli.h"
#include "plumb.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_ARGS      8
#define ERR_LEN	      256 /* what main() gives the parsers */

/* A duration case that must fail, with no opinion on which errno says so. */
#define ANY_ERROR 1

/* getopt permutes argv, so the parsers get writable copies; args[] holds the options only. */
struct argv_buf {
	int argc;
	char *argv[MAX_ARGS + 2];
};

static void argv_build(struct argv_buf *a, const char *cmd, const char *const *args)
{
	a->argc = 0;
	a->argv[a->argc++] = strdup(cmd);
	for (size_t i = 0; i < MAX_ARGS && args[i]; i++)
		a->argv[a->argc++] = strdup(args[i]);
	a->argv[a->argc] = NULL;
	for (int i = 0; i < a->argc; i++)
		assert_non_null(a->argv[i]);
}

static void argv_free(struct argv_buf *a)
{
	for (int i = 0; i < a->argc; i++)
		free(a->argv[i]);
	a->argc = 0;
}

/* The case's options joined by spaces, for failure messages. */
static const char *args_str(const char *const *args)
{
	static char buf[256];
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < MAX_ARGS && args[i] && n < sizeof(buf); i++)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? " " : "", args[i]);
	return buf;
}

static const char *result_str(enum cli_result r)
{
	switch (r) {
	case CLI_OK:
		return "CLI_OK";
	case CLI_HELP:
		return "CLI_HELP";
	case CLI_ERROR:
		return "CLI_ERROR";
	}
	return "?";
}

/* main() prints err on one line after "plumb agent: ". */
static bool err_is_one_printable_line(const char *err)
{
	if (!*err)
		return false;
	for (const char *c = err; *c; c++)
		if (!isprint((unsigned char)*c))
			return false;
	return true;
}

/* err for a failure message, with control characters as octal escapes */
static const char *escaped(const char *err)
{
	static char buf[4 * ERR_LEN];
	size_t n = 0;

	for (const char *c = err; *c && n + 5 <= sizeof(buf); c++)
		n += snprintf(buf + n, sizeof(buf) - n,
			      isprint((unsigned char)*c) ? "%c" : "\\%03o", (unsigned char)*c);
	buf[n] = '\0';
	return buf;
}

static uint32_t all_modules(void)
{
	return (1u << plumb_module_count) - 1;
}

static void test_duration(void **state)
{
	static const struct {
		const char *in;
		int ret;
		unsigned int ms;
	} cases[] = {
		{ "1s", 0, 1000 },
		{ "500ms", 0, 500 },
		{ "2m", 0, 120000 },
		{ "1h", 0, 3600000 },
		{ "3", 0, 3000 }, /* no unit: seconds */
		{ "0", 0, 0 },
		{ "0ms", 0, 0 },
		{ "010s", 0, 10000 }, /* decimal, not octal */
		{ "4294967295ms", 0, UINT_MAX },
		{ "1193h", 0, 4294800000u },
		{ "", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },
		{ "-1s", -EINVAL, 0 },
		{ "+1s", -EINVAL, 0 },
		{ " 1s", -EINVAL, 0 },
		{ "1 s", -EINVAL, 0 },
		{ "1s ", -EINVAL, 0 },
		{ "1x", -EINVAL, 0 },
		{ "1S", -EINVAL, 0 },
		{ "1sec", -EINVAL, 0 },
		{ "1ms2", -EINVAL, 0 },
		{ "s", -EINVAL, 0 },
		{ "ms", -EINVAL, 0 },
		{ "1.5s", -EINVAL, 0 },
		{ "0x10s", -EINVAL, 0 },
		{ "99999999999h", -ERANGE, 0 },
		{ "4294967296ms", -ERANGE, 0 },
		{ "4294968s", -ERANGE, 0 },
		{ "1194h", -ERANGE, 0 },
		{ "99999999999999999999999s", ANY_ERROR, 0 }, /* past unsigned long itself */
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		unsigned int ms = 12345;
		int ret = cli_parse_duration_ms(cases[i].in, &ms);
		bool ret_ok = cases[i].ret == ANY_ERROR ? ret < 0 : ret == cases[i].ret;
		unsigned int want_ms = cases[i].ret ? 12345 : cases[i].ms;

		if (!ret_ok || ms != want_ms) {
			print_error("duration \"%s\": expected %d, ms %u; got %d, ms %u\n",
				    cases[i].in, cases[i].ret, want_ms, ret, ms);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu duration cases failed", failures, ARRAY_SIZE(cases));
	assert_int_equal(cli_parse_duration_ms(NULL, &(unsigned int){ 0 }), -EINVAL);
}

static void test_listen(void **state)
{
	static const struct {
		const char *in;
		int ret;
		const char *addr;
		uint16_t port;
	} cases[] = {
		{ "127.0.0.1:9977", 0, "127.0.0.1", 9977 },
		{ "0.0.0.0:1", 0, "0.0.0.0", 1 },
		{ "[::1]:9977", 0, "::1", 9977 },
		{ "[::]:80", 0, "::", 80 },
		{ "[fe80::1%eth0]:8080", 0, "fe80::1%eth0", 8080 },
		{ "localhost:80", 0, "localhost", 80 }, /* syntax only: no name lookup */
		{ "127.0.0.1:65535", 0, "127.0.0.1", 65535 },
		{ "127.0.0.1:09977", 0, "127.0.0.1", 9977 },
		{ "", -EINVAL, NULL, 0 },
		{ ":", -EINVAL, NULL, 0 },
		{ ":9977", -EINVAL, NULL, 0 },
		{ "127.0.0.1", -EINVAL, NULL, 0 },
		{ "127.0.0.1:", -EINVAL, NULL, 0 },
		{ "127.0.0.1:0", -EINVAL, NULL, 0 },
		{ "127.0.0.1:65536", -EINVAL, NULL, 0 },
		{ "127.0.0.1:99999999999999999999999", -EINVAL, NULL, 0 },
		{ "127.0.0.1:-1", -EINVAL, NULL, 0 },
		{ "127.0.0.1:80x", -EINVAL, NULL, 0 },
		{ "127.0.0.1:http", -EINVAL, NULL, 0 },
		{ "::1:9977", -EINVAL, NULL, 0 }, /* v6 without brackets */
		{ "a:b:80", -EINVAL, NULL, 0 },
		{ "[::1]9977", -EINVAL, NULL, 0 },
		{ "[::1]", -EINVAL, NULL, 0 },
		{ "[::1]:", -EINVAL, NULL, 0 },
		{ "[::1", -EINVAL, NULL, 0 },
		{ "[]:80", -EINVAL, NULL, 0 },
		{ "[::1]:80:90", -EINVAL, NULL, 0 },
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char addr[sizeof(((struct agent_options *)0)->addr)] = "untouched";
		const char *want_addr = cases[i].ret ? "untouched" : cases[i].addr;
		uint16_t port = 7, want_port = cases[i].ret ? 7 : cases[i].port;
		int ret = cli_parse_listen(cases[i].in, addr, sizeof(addr), &port);

		if (ret != cases[i].ret || strcmp(addr, want_addr) || port != want_port) {
			print_error("listen \"%s\": expected %d \"%s\" %u, got %d \"%s\" %u\n",
				    cases[i].in, cases[i].ret, want_addr, want_port, ret, addr,
				    port);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu listen cases failed", failures, ARRAY_SIZE(cases));
}

/* Hosts against the size of the output buffer, which counts the NUL. */
static void test_listen_host_length(void **state)
{
	char addr[sizeof(((struct agent_options *)0)->addr)], in[sizeof(addr) + 16];
	const size_t max = sizeof(addr) - 1;
	uint16_t port = 0;
	char *small;

	(void)state;
	memset(in, 'a', max);
	snprintf(in + max, sizeof(in) - max, ":80");
	assert_int_equal(cli_parse_listen(in, addr, sizeof(addr), &port), 0);
	assert_int_equal(strlen(addr), max);
	assert_int_equal(port, 80);

	memset(in, 'a', max + 1);
	snprintf(in + max + 1, sizeof(in) - max - 1, ":80");
	strcpy(addr, "untouched");
	assert_int_equal(cli_parse_listen(in, addr, sizeof(addr), &port), -EINVAL);
	assert_string_equal(addr, "untouched");

	in[0] = '[';
	memset(in + 1, 'a', max + 1);
	snprintf(in + max + 2, sizeof(in) - max - 2, "]:80");
	assert_int_equal(cli_parse_listen(in, addr, sizeof(addr), &port), -EINVAL);
	assert_string_equal(addr, "untouched");

	/* exactly sized on the heap, so that valgrind sees a write past the end */
	small = malloc(9);
	assert_non_null(small);
	assert_int_equal(cli_parse_listen("127.0.0.1:80", small, 9, &port), -EINVAL);
	assert_int_equal(cli_parse_listen("[::ffff:ab]:80", small, 9, &port), -EINVAL);
	assert_int_equal(cli_parse_listen("[::ffff:a]:80", small, 9, &port), 0);
	assert_string_equal(small, "::ffff:a");
	assert_int_equal(cli_parse_listen("10.0.0.1:80", small, 9, &port), 0);
	assert_string_equal(small, "10.0.0.1");
	free(small);
}

/* The port is decimal digits: no sign, no blanks, as durations are. */
static void test_listen_port_digits_only(void **state)
{
	static const char *const bad[] = {
		"127.0.0.1:+80", "127.0.0.1: 80",
		"127.0.0.1:-18446744073709551615", /* strtoul negates it into 1 */
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char addr[64] = "untouched";
		uint16_t port = 7;
		int ret = cli_parse_listen(bad[i], addr, sizeof(addr), &port);

		if (ret != -EINVAL) {
			print_error("listen \"%s\": expected -EINVAL, got %d \"%s\" port %u\n",
				    bad[i], ret, addr, port);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu malformed ports accepted", failures, ARRAY_SIZE(bad));
}

static void test_modules(void **state)
{
	static const struct {
		const char *in;
		int ret;
		uint32_t mask;
		const char *err;
	} cases[] = {
		{ "io", 0, 1u << 0, NULL },
		{ "io,io", 0, 1u << 0, NULL },
		{ "flow", 0, 1u << 1, NULL },
		{ "flow,io", 0, (1u << 0) | (1u << 1), NULL },
		{ "sched", 0, 1u << 2, NULL },
		{ "sched,flow,io", 0, (1u << 0) | (1u << 1) | (1u << 2), NULL },
		{ "wait", 0, 1u << 3, NULL },
		{ "wait,sched", 0, (1u << 2) | (1u << 3), NULL },
		{ "blk", 0, 1u << 4, NULL },
		{ "bogus", -EINVAL, 0,
		  "unknown module 'bogus' (valid: io, flow, sched, wait, blk, netstack)" },
		{ "io,bogus", -EINVAL, 0,
		  "unknown module 'bogus' (valid: io, flow, sched, wait, blk, netstack)" },
		{ "bogus,io", -EINVAL, 0,
		  "unknown module 'bogus' (valid: io, flow, sched, wait, blk, netstack)" },
		{ "IO", -EINVAL, 0,
		  "unknown module 'IO' (valid: io, flow, sched, wait, blk, netstack)" },
		{ " io", -EINVAL, 0,
		  "unknown module ' io' (valid: io, flow, sched, wait, blk, netstack)" },
		{ "io ", -EINVAL, 0,
		  "unknown module 'io ' (valid: io, flow, sched, wait, blk, netstack)" },
		{ "", -EINVAL, 0, "--modules: empty list" },
		{ ",", -EINVAL, 0, "--modules: empty list" },
		{ ",,,", -EINVAL, 0, "--modules: empty list" },
	};
	int failures = 0;

	(void)state;
	/* the cases name bits by position in the registry */
	assert_int_equal(plumb_module_count, 6);
	assert_string_equal(plumb_modules[0]->name, "io");
	assert_string_equal(plumb_modules[1]->name, "flow");
	assert_string_equal(plumb_modules[2]->name, "sched");
	assert_string_equal(plumb_modules[3]->name, "wait");
	assert_string_equal(plumb_modules[4]->name, "blk");
	assert_string_equal(plumb_modules[5]->name, "netstack");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[ERR_LEN] = "";
		uint32_t mask = 0xdead;
		int ret = cli_parse_modules(cases[i].in, &mask, err, sizeof(err));

		if (ret != cases[i].ret || (!ret && mask != cases[i].mask) ||
		    (ret && strcmp(err, cases[i].err))) {
			print_error("modules \"%s\": expected %d mask %#x err \"%s\"; "
				    "got %d mask %#x err \"%s\"\n",
				    cases[i].in, cases[i].ret, cases[i].mask,
				    cases[i].err ? cases[i].err : "", ret, mask, err);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu module cases failed", failures, ARRAY_SIZE(cases));
}

static void test_modules_long_list_and_short_err(void **state)
{
	char list[300], err[ERR_LEN], *tiny;
	uint32_t mask;
	size_t n = 0;

	(void)state;
	/* 255 characters ("io," 85 times) fit the parser's copy; 256 do not */
	while (n < 255)
		n += snprintf(list + n, sizeof(list) - n, "io,");
	assert_int_equal(strlen(list), 255);
	assert_int_equal(cli_parse_modules(list, &mask, err, sizeof(err)), 0);
	assert_int_equal(mask, 1u << 0);
	strcat(list, "i");
	assert_int_equal(cli_parse_modules(list, &mask, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--modules: list too long");

	/* a short err is truncated, never overrun (exactly sized for valgrind) */
	tiny = malloc(8);
	assert_non_null(tiny);
	assert_int_equal(cli_parse_modules("bogus", &mask, tiny, 8), -EINVAL);
	assert_string_equal(tiny, "unknown");
	free(tiny);
}

/* Which fields of an agent case's want are set; the others must keep their defaults. */
enum agent_field {
	A_ADDR = 1 << 0,
	A_PORT = 1 << 1,
	A_MODULES = 1 << 2,
	A_VERBOSE = 1 << 3,
	A_CHECK = 1 << 4,
	A_GRACE = 1 << 5,
	A_CAPACITY = 1 << 6,
	A_LATENCY = 1 << 7,
	A_SAMPLE = 1 << 8,
	A_FLOW = 1 << 9,
	A_FLOW_BYTES = 1 << 10,
	A_NETSTACK_SAMPLE = 1 << 13,
	A_SECCOMP = 1 << 14,
	A_PIN = 1 << 15,
	A_PIN_CAPACITY = 1 << 16,
	A_WAIT_CAPACITY = 1 << 17,
	A_NETSTACK_WINDOW = 1 << 18,
	A_HOST = 1 << 11,
	A_NETNS = 1 << 12,
};

struct agent_case {
	const char *args[MAX_ARGS];
	unsigned int set;
	struct agent_options want;
};

static void agent_defaults(struct agent_options *o)
{
	memset(o, 0, sizeof(*o));
	strcpy(o->addr, "127.0.0.1");
	o->port = 9977;
	o->modules = all_modules();
	o->verbose = 0;
	o->check = false;
	o->grace_s = 300;
	o->io_capacity = 4096;
	o->io_latency = true;
	o->io_latency_sample = PLUMB_DEFAULT_LATENCY_SAMPLE;
	o->flow_capacity = 131072;
	o->flow_bytes = FLOW_BYTES_AUTO;
	o->netstack_sample = PLUMB_DEFAULT_NETSTACK_SAMPLE;
	o->netstack_window = PLUMB_DEFAULT_NETSTACK_WINDOW;
	o->pin_capacity = PLUMB_DEFAULT_PIN_CAPACITY;
	o->wait_capacity = PLUMB_DEFAULT_WAIT_CAPACITY;
}

static void agent_want(const struct agent_case *c, struct agent_options *o)
{
	agent_defaults(o);
	if (c->set & A_ADDR)
		strcpy(o->addr, c->want.addr);
	if (c->set & A_PORT)
		o->port = c->want.port;
	if (c->set & A_MODULES)
		o->modules = c->want.modules;
	if (c->set & A_VERBOSE)
		o->verbose = c->want.verbose;
	if (c->set & A_CHECK)
		o->check = c->want.check;
	if (c->set & A_GRACE)
		o->grace_s = c->want.grace_s;
	if (c->set & A_CAPACITY)
		o->io_capacity = c->want.io_capacity;
	if (c->set & A_LATENCY)
		o->io_latency = c->want.io_latency;
	if (c->set & A_SAMPLE)
		o->io_latency_sample = c->want.io_latency_sample;
	if (c->set & A_FLOW)
		o->flow_capacity = c->want.flow_capacity;
	if (c->set & A_FLOW_BYTES)
		o->flow_bytes = c->want.flow_bytes;
	if (c->set & A_NETSTACK_SAMPLE)
		o->netstack_sample = c->want.netstack_sample;
	if (c->set & A_NETSTACK_WINDOW)
		o->netstack_window = c->want.netstack_window;
	if (c->set & A_SECCOMP)
		o->seccomp = c->want.seccomp;
	if (c->set & A_PIN)
		strcpy(o->pin, c->want.pin);
	if (c->set & A_PIN_CAPACITY)
		o->pin_capacity = c->want.pin_capacity;
	if (c->set & A_WAIT_CAPACITY)
		o->wait_capacity = c->want.wait_capacity;
	if (c->set & A_HOST)
		strcpy(o->host, c->want.host);
	if (c->set & A_NETNS)
		strcpy(o->netns, c->want.netns);
}

static void agent_str(const struct agent_options *o, char *buf, size_t len)
{
	snprintf(buf, len,
		 "addr=%s port=%u modules=%#x verbose=%d check=%d grace_s=%u io_capacity=%u "
		 "io_latency=%d io_latency_sample=%u flow_capacity=%u flow_bytes=%d host=%s "
		 "netns=%s netstack_sample=%u netstack_window=%u seccomp=%d pin=%.64s "
		 "pin_capacity=%u wait_capacity=%u",
		 o->addr, o->port, o->modules, o->verbose, o->check, o->grace_s, o->io_capacity,
		 o->io_latency, o->io_latency_sample, o->flow_capacity, o->flow_bytes, o->host,
		 o->netns, o->netstack_sample, o->netstack_window, o->seccomp, o->pin,
		 o->pin_capacity, o->wait_capacity);
}

static void test_agent_defaults(void **state)
{
	const char *const none[] = { NULL };
	struct agent_options o;
	struct argv_buf a;
	char err[ERR_LEN];

	(void)state;
	argv_build(&a, "agent", none);
	assert_int_equal(cli_parse_agent(a.argc, a.argv, &o, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_string_equal(o.addr, "127.0.0.1");
	assert_string_equal(o.addr, PLUMB_DEFAULT_ADDR);
	assert_int_equal(o.port, 9977);
	assert_int_equal(o.port, PLUMB_DEFAULT_PORT);
	assert_int_equal(o.modules, all_modules());
	assert_int_equal(o.verbose, 0);
	assert_false(o.check);
	assert_int_equal(o.grace_s, 300);
	assert_int_equal(o.io_capacity, 4096);
	assert_true(o.io_latency);
	assert_int_equal(o.io_latency_sample, PLUMB_DEFAULT_LATENCY_SAMPLE);
	assert_int_equal(o.seccomp, SECCOMP_ENFORCE);
	assert_string_equal(o.pin, "");
	assert_int_equal(o.pin_capacity, PLUMB_DEFAULT_PIN_CAPACITY);
	assert_int_equal(o.netstack_window, 20);
	assert_int_equal(o.netstack_window, PLUMB_DEFAULT_NETSTACK_WINDOW);
}

static void test_agent_options(void **state)
{
	static const struct agent_case cases[] = {
		{ { "--listen", "0.0.0.0:9000" },
		  A_ADDR | A_PORT,
		  { .addr = "0.0.0.0", .port = 9000 } },
		{ { "--listen=0.0.0.0:9000" },
		  A_ADDR | A_PORT,
		  { .addr = "0.0.0.0", .port = 9000 } },
		{ { "-l", "[::1]:1234" }, A_ADDR | A_PORT, { .addr = "::1", .port = 1234 } },
		{ { "-l[::1]:1234" }, A_ADDR | A_PORT, { .addr = "::1", .port = 1234 } },
		{ { "-l", "1.2.3.4:5", "-l", "localhost:6" }, /* the last one wins */
		  A_ADDR | A_PORT,
		  { .addr = "localhost", .port = 6 } },
		{ { "--modules", "io" }, A_MODULES, { .modules = 1u << 0 } },
		{ { "-m", "io,io" }, A_MODULES, { .modules = 1u << 0 } },
		{ { "-v" }, A_VERBOSE, { .verbose = 1 } },
		{ { "--verbose" }, A_VERBOSE, { .verbose = 1 } },
		{ { "-vv" }, A_VERBOSE, { .verbose = 2 } },
		{ { "-v", "-v" }, A_VERBOSE, { .verbose = 2 } },
		{ { "-v", "--verbose", "-v" }, A_VERBOSE, { .verbose = 3 } },
		{ { "--check" }, A_CHECK, { .check = true } },
		{ { "--cgroup-grace", "10s" }, A_GRACE, { .grace_s = 10 } },
		{ { "--cgroup-grace=2m" }, A_GRACE, { .grace_s = 120 } },
		{ { "--cgroup-grace", "1h" }, A_GRACE, { .grace_s = 3600 } },
		{ { "--cgroup-grace", "45" }, A_GRACE, { .grace_s = 45 } },
		{ { "--cgroup-grace", "0" }, A_GRACE, { .grace_s = 0 } },
		{ { "--io-capacity", "1024" }, A_CAPACITY, { .io_capacity = 1024 } },
		{ { "--io-capacity", "16" }, A_CAPACITY, { .io_capacity = 16 } },
		{ { "--io-capacity=1048576" }, A_CAPACITY, { .io_capacity = 1048576 } },
		{ { "--flow-capacity", "100000" }, A_FLOW, { .flow_capacity = 100000 } },
		{ { "--wait-capacity", "4096" }, A_WAIT_CAPACITY, { .wait_capacity = 4096 } },
		{ { "--wait-capacity=64" }, A_WAIT_CAPACITY, { .wait_capacity = 64 } },
		{ { "--flow-bytes", "off" }, A_FLOW_BYTES, { .flow_bytes = FLOW_BYTES_OFF } },
		{ { "--netstack-sample", "64" }, A_NETSTACK_SAMPLE, { .netstack_sample = 64 } },
		{ { "--netstack-sample", "1" }, A_NETSTACK_SAMPLE, { .netstack_sample = 1 } },
		{ { "--netstack-window", "1" }, A_NETSTACK_WINDOW, { .netstack_window = 1 } },
		{ { "--netstack-window=3600" }, A_NETSTACK_WINDOW, { .netstack_window = 3600 } },
		{ { "--seccomp", "log" }, A_SECCOMP, { .seccomp = SECCOMP_LOG } },
		{ { "--seccomp=off" }, A_SECCOMP, { .seccomp = SECCOMP_OFF } },
		{ { "--seccomp", "enforce" }, A_SECCOMP, { .seccomp = SECCOMP_ENFORCE } },
		{ { "--pin", "/sys/fs/bpf/plumb" }, A_PIN, { .pin = "/sys/fs/bpf/plumb" } },
		{ { "--pin-capacity=1024" }, A_PIN_CAPACITY, { .pin_capacity = 1024 } },
		{ { "--pin-capacity", "16777216" }, A_PIN_CAPACITY, { .pin_capacity = 16777216 } },
		{ { "--flow-bytes=counters" },
		  A_FLOW_BYTES,
		  { .flow_bytes = FLOW_BYTES_COUNTERS } },
		{ { "--flow-bytes", "calls" }, A_FLOW_BYTES, { .flow_bytes = FLOW_BYTES_CALLS } },
		{ { "--host", "node-7" }, A_HOST, { .host = "node-7" } },
		{ { "--netns", "pod1" }, A_NETNS | A_HOST, { .netns = "pod1", .host = "" } },
		{ { "--netns=/proc/1/ns/net", "--host", "h" },
		  A_NETNS | A_HOST,
		  { .netns = "/proc/1/ns/net", .host = "h" } },
		{ { "--no-io-latency" }, A_LATENCY, { .io_latency = false } },
		{ { "--io-latency-sample", "1" }, A_SAMPLE, { .io_latency_sample = 1 } },
		{ { "--io-latency-sample", "64" }, A_SAMPLE, { .io_latency_sample = 64 } },
		{ { "--io-latency-sample=65536" }, A_SAMPLE, { .io_latency_sample = 65536 } },
		{ { "-vv", "--check", "-l", "[::]:1", "-m", "io", "--no-io-latency" },
		  A_VERBOSE | A_CHECK | A_ADDR | A_PORT | A_MODULES | A_LATENCY,
		  { .verbose = 2,
		    .check = true,
		    .addr = "::",
		    .port = 1,
		    .modules = 1u << 0,
		    .io_latency = false } },
		{ .args = { "--" } }, /* nothing set: all defaults */
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct agent_options got, want;
		char err[ERR_LEN] = "", got_s[768], want_s[768];
		struct argv_buf a;
		enum cli_result r;

		argv_build(&a, "agent", cases[i].args);
		r = cli_parse_agent(a.argc, a.argv, &got, err, sizeof(err));
		argv_free(&a);
		agent_want(&cases[i], &want);
		agent_str(&want, want_s, sizeof(want_s));
		if (r != CLI_OK) {
			print_error("agent %s: expected CLI_OK, got %s \"%s\"\n",
				    args_str(cases[i].args), result_str(r), err);
			failures++;
			continue;
		}
		agent_str(&got, got_s, sizeof(got_s));
		if (strcmp(got_s, want_s)) {
			print_error("agent %s:\n  expected %s\n  got      %s\n",
				    args_str(cases[i].args), want_s, got_s);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu agent option cases failed", failures, ARRAY_SIZE(cases));
}

/* A command line that does not parse to CLI_OK, and what err must say. */
struct result_case {
	const char *args[MAX_ARGS];
	enum cli_result ret;
	enum { MATCH_NONE, MATCH_EXACT, MATCH_SUBSTRING } match;
	const char *err;
};

#define HELP		CLI_HELP, MATCH_NONE, NULL
#define ERROR_IS(msg)	CLI_ERROR, MATCH_EXACT, msg
#define ERROR_HAS(part) CLI_ERROR, MATCH_SUBSTRING, part

static enum cli_result parse_agent(int argc, char **argv, char *err, size_t errlen)
{
	struct agent_options o;

	return cli_parse_agent(argc, argv, &o, err, errlen);
}

static enum cli_result parse_io(int argc, char **argv, char *err, size_t errlen)
{
	struct io_options o;

	return cli_parse_io(argc, argv, &o, err, errlen);
}

static int check_results(const char *cmd,
			 enum cli_result (*parse)(int argc, char **argv, char *err, size_t errlen),
			 const struct result_case *cases, size_t n)
{
	int failures = 0;

	for (size_t i = 0; i < n; i++) {
		const struct result_case *c = &cases[i];
		char err[ERR_LEN] = "";
		struct argv_buf a;
		enum cli_result r;
		bool ok;

		argv_build(&a, cmd, c->args);
		r = parse(a.argc, a.argv, err, sizeof(err));
		argv_free(&a);
		ok = r == c->ret;
		if (ok && r == CLI_ERROR)
			ok = err_is_one_printable_line(err) &&
			     (c->match == MATCH_EXACT ? !strcmp(err, c->err) :
							!!strstr(err, c->err));
		if (!ok) {
			print_error("%s %s: expected %s %s\"%s\"; got %s \"%s\"\n", cmd,
				    args_str(c->args), result_str(c->ret),
				    c->match == MATCH_SUBSTRING ? "containing " : "",
				    c->err ? c->err : "", result_str(r), escaped(err));
			failures++;
		}
	}
	return failures;
}

static void test_agent_errors(void **state)
{
	static const struct result_case cases[] = {
		{ { "--help" }, HELP },
		{ { "-h" }, HELP },
		{ { "-vh" }, HELP },
		{ { "--check", "--help" }, HELP },
		{ { "--bogus" }, ERROR_IS("unknown option '--bogus'") },
		{ { "--bogus=1" }, ERROR_IS("unknown option '--bogus=1'") },
		{ { "-v", "--bogus", "-v" }, ERROR_IS("unknown option '--bogus'") },
		{ { "-x" }, ERROR_IS("unknown option '-x'") },
		{ { "-vx" }, ERROR_IS("unknown option '-x'") },
		{ { "-i", "1s" }, ERROR_IS("unknown option '-i'") }, /* io's, not agent's */
		{ { "--json" }, ERROR_IS("unknown option '--json'") },
		{ { "--listen" }, ERROR_HAS("'--listen'") },
		{ { "-v", "--listen" }, ERROR_HAS("'--listen'") },
		{ { "-l" }, ERROR_HAS("'-l'") },
		{ { "--modules" }, ERROR_HAS("'--modules'") },
		{ { "-m" }, ERROR_HAS("'-m'") },
		{ { "--cgroup-grace" }, ERROR_HAS("'--cgroup-grace'") },
		{ { "--io-capacity" }, ERROR_HAS("'--io-capacity'") },
		{ { "--io-latency-sample" }, ERROR_HAS("'--io-latency-sample'") },
		{ { "foo" }, ERROR_IS("unexpected argument 'foo'") },
		{ { "foo", "bar" }, ERROR_IS("unexpected argument 'foo'") },
		{ { "-v", "foo" }, ERROR_IS("unexpected argument 'foo'") },
		{ { "foo", "-v" }, ERROR_IS("unexpected argument 'foo'") },
		{ { "--", "-v" }, ERROR_IS("unexpected argument '-v'") },
		{ { "--listen", ":9977" }, ERROR_IS("--listen: ':9977' is not ADDR:PORT") },
		{ { "-l", "::1:9977" }, ERROR_IS("--listen: '::1:9977' is not ADDR:PORT") },
		{ { "--listen=" }, ERROR_IS("--listen: '' is not ADDR:PORT") },
		{ { "-m", "bogus" },
		  ERROR_IS(
			  "unknown module 'bogus' (valid: io, flow, sched, wait, blk, netstack)") },
		{ { "--modules", "" }, ERROR_IS("--modules: empty list") },
		{ { "--modules", "," }, ERROR_IS("--modules: empty list") },
		{ { "--cgroup-grace", "1x" },
		  ERROR_IS("--cgroup-grace: '1x' is not a duration in whole seconds") },
		{ { "--cgroup-grace", "-1s" },
		  ERROR_IS("--cgroup-grace: '-1s' is not a duration in whole seconds") },
		{ { "--cgroup-grace", "500ms" },
		  ERROR_IS("--cgroup-grace: '500ms' is not a duration in whole seconds") },
		{ { "--io-capacity", "15" },
		  ERROR_IS("--io-capacity: '15' is not in 16..1048576") },
		{ { "--io-capacity", "1048577" }, ERROR_HAS("'1048577'") },
		{ { "--io-capacity", "-1" }, ERROR_HAS("'-1'") },
		{ { "--io-capacity", "1k" }, ERROR_HAS("'1k'") },
		{ { "--io-capacity", "" }, ERROR_HAS("--io-capacity: ''") },
		{ { "--flow-bytes", "all" },
		  ERROR_IS("--flow-bytes: 'all' is not auto, calls, counters or off") },
		{ { "--flow-capacity", "15" },
		  ERROR_IS("--flow-capacity: '15' is not in 16..4194304") },
		{ { "--wait-capacity", "63" },
		  ERROR_IS("--wait-capacity: '63' is not in 64..4194304") },
		{ { "--host", "" }, ERROR_HAS("--host: '' is not a host name") },
		{ { "--host", "a/b" }, ERROR_HAS("--host: 'a/b' is not a host name") },
		{ { "--host", "a b" }, ERROR_HAS("--host: 'a b'") },
		{ { "--host", "0123456789012345678901234567890123456789012345678901234567890123" },
		  ERROR_HAS("is not a host name (1-63 characters") },
		{ { "--netns", "" }, ERROR_IS("--netns: '' is not a namespace name or path") },
		{ { "--netstack-sample", "0" },
		  ERROR_IS("--netstack-sample: '0' is not in 1..65536") },
		{ { "--seccomp", "strict" },
		  ERROR_IS("--seccomp: 'strict' is not enforce, log or off") },
		{ { "--pin", "" }, ERROR_IS("--pin: '' is not a directory name") },
		{ { "--pin" }, ERROR_IS("option '--pin' needs a value") },
		{ { "--pin-capacity", "1023" },
		  ERROR_IS("--pin-capacity: '1023' is not in 1024..16777216") },
		{ { "--pin-capacity", "16777217" },
		  ERROR_IS("--pin-capacity: '16777217' is not in 1024..16777216") },
		{ { "--netstack-sample", "65537" }, ERROR_HAS("--netstack-sample: '65537'") },
		{ { "--netstack-window", "0" },
		  ERROR_IS("--netstack-window: '0' is not in 1..3600") },
		{ { "--netstack-window", "10s" }, ERROR_HAS("--netstack-window: '10s'") },
		{ { "--io-latency-sample", "3" },
		  ERROR_IS("--io-latency-sample: '3' is not a power of two in 1..65536") },
		{ { "--io-latency-sample", "0" }, ERROR_HAS("--io-latency-sample: '0'") },
		{ { "--io-latency-sample", "131072" }, ERROR_HAS("--io-latency-sample: '131072'") },
		{ { "--io-latency-sample", "48" }, ERROR_HAS("--io-latency-sample: '48'") },
		{ { "--io-latency-sample", "-16" }, ERROR_HAS("--io-latency-sample: '-16'") },
		{ { "--io-latency-sample", "4294967296" }, ERROR_HAS("'4294967296'") },
	};
	int failures;

	(void)state;
	failures = check_results("agent", parse_agent, cases, ARRAY_SIZE(cases));
	if (failures)
		fail_msg("%d of %zu agent error cases failed", failures, ARRAY_SIZE(cases));
}

/*
 * A long option that takes no value, given one: getopt_long reports it with optopt set to
 * the option's val, which is not a short option's letter for the long-only options.
 */
static void test_long_option_given_a_value(void **state)
{
	static const struct result_case agent_cases[] = {
		{ { "--check=yes" }, ERROR_HAS("--check") },
		{ { "--no-io-latency=1" }, ERROR_HAS("--no-io-latency") },
		{ { "--help=x" }, ERROR_HAS("--help") },
		{ { "--verbose=2" }, ERROR_HAS("--verbose") },
	};
	static const struct result_case io_cases[] = {
		{ { "--json=1" }, ERROR_HAS("--json") },
		{ { "--no-io-latency=1" }, ERROR_HAS("--no-io-latency") },
	};
	int failures;

	(void)state;
	failures = check_results("agent", parse_agent, agent_cases, ARRAY_SIZE(agent_cases));
	failures += check_results("io", parse_io, io_cases, ARRAY_SIZE(io_cases));
	if (failures)
		fail_msg("%d of %zu cases failed", failures,
			 ARRAY_SIZE(agent_cases) + ARRAY_SIZE(io_cases));
}

/*
 * Each call starts getopt afresh: the first calls stop part-way through "-hv" and "--bogus"
 * (with getopt holding pointers into an argv that is freed before the next call) or leave
 * argv permuted.
 */
static void test_parse_twice(void **state)
{
	static const char *const help_mid_cluster[] = { "-hv", NULL };
	static const char *const verbose[] = { "-v", NULL };
	static const char *const bogus[] = { "--bogus", "-vvv", NULL };
	static const char *const check[] = { "--check", NULL };
	static const char *const permuted[] = { "foo", "-v", NULL };
	static const char *const json[] = { "-j", NULL };
	static const char *const count_no_value[] = { "-c", NULL };
	static const char *const none[] = { NULL };
	struct agent_options ao;
	struct io_options io;
	struct argv_buf a;
	char err[ERR_LEN];

	(void)state;
	argv_build(&a, "agent", help_mid_cluster);
	assert_int_equal(cli_parse_agent(a.argc, a.argv, &ao, err, sizeof(err)), CLI_HELP);
	argv_free(&a);
	argv_build(&a, "agent", verbose);
	assert_int_equal(cli_parse_agent(a.argc, a.argv, &ao, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_int_equal(ao.verbose, 1);

	argv_build(&a, "agent", bogus);
	assert_int_equal(cli_parse_agent(a.argc, a.argv, &ao, err, sizeof(err)), CLI_ERROR);
	argv_free(&a);
	argv_build(&a, "agent", check);
	assert_int_equal(cli_parse_agent(a.argc, a.argv, &ao, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_true(ao.check);
	assert_int_equal(ao.verbose, 0);

	/* the same argv twice, permuted by the first call */
	argv_build(&a, "agent", permuted);
	assert_int_equal(cli_parse_agent(a.argc, a.argv, &ao, err, sizeof(err)), CLI_ERROR);
	assert_string_equal(err, "unexpected argument 'foo'");
	assert_int_equal(cli_parse_agent(a.argc, a.argv, &ao, err, sizeof(err)), CLI_ERROR);
	assert_string_equal(err, "unexpected argument 'foo'");
	argv_free(&a);

	argv_build(&a, "io", json);
	assert_int_equal(cli_parse_io(a.argc, a.argv, &io, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_true(io.json);
	assert_int_equal(io.verbose, 0);

	argv_build(&a, "io", count_no_value);
	assert_int_equal(cli_parse_io(a.argc, a.argv, &io, err, sizeof(err)), CLI_ERROR);
	argv_free(&a);
	argv_build(&a, "io", none);
	assert_int_equal(cli_parse_io(a.argc, a.argv, &io, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_int_equal(io.count, 0);
	assert_int_equal(io.interval_ms, 1000);
}

enum io_field {
	I_INTERVAL = 1 << 0,
	I_COUNT = 1 << 1,
	I_JSON = 1 << 2,
	I_VERBOSE = 1 << 3,
	I_CAPACITY = 1 << 4,
	I_LATENCY = 1 << 5,
	I_SAMPLE = 1 << 6,
};

struct io_case {
	const char *args[MAX_ARGS];
	unsigned int set;
	struct io_options want;
};

static void io_defaults(struct io_options *o)
{
	memset(o, 0, sizeof(*o));
	o->interval_ms = 1000;
	o->count = 0;
	o->json = false;
	o->verbose = 0;
	o->io_capacity = 4096;
	o->io_latency = true;
	o->io_latency_sample = PLUMB_DEFAULT_LATENCY_SAMPLE;
}

static void io_want(const struct io_case *c, struct io_options *o)
{
	io_defaults(o);
	if (c->set & I_INTERVAL)
		o->interval_ms = c->want.interval_ms;
	if (c->set & I_COUNT)
		o->count = c->want.count;
	if (c->set & I_JSON)
		o->json = c->want.json;
	if (c->set & I_VERBOSE)
		o->verbose = c->want.verbose;
	if (c->set & I_CAPACITY)
		o->io_capacity = c->want.io_capacity;
	if (c->set & I_LATENCY)
		o->io_latency = c->want.io_latency;
	if (c->set & I_SAMPLE)
		o->io_latency_sample = c->want.io_latency_sample;
}

static void io_str(const struct io_options *o, char *buf, size_t len)
{
	snprintf(buf, len,
		 "interval_ms=%u count=%ld json=%d verbose=%d io_capacity=%u io_latency=%d "
		 "io_latency_sample=%u",
		 o->interval_ms, o->count, o->json, o->verbose, o->io_capacity, o->io_latency,
		 o->io_latency_sample);
}

static void test_io_defaults(void **state)
{
	const char *const none[] = { NULL };
	struct io_options o;
	struct argv_buf a;
	char err[ERR_LEN];

	(void)state;
	argv_build(&a, "io", none);
	assert_int_equal(cli_parse_io(a.argc, a.argv, &o, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_int_equal(o.interval_ms, 1000);
	assert_int_equal(o.count, 0);
	assert_false(o.json);
	assert_int_equal(o.verbose, 0);
	assert_int_equal(o.io_capacity, 4096);
	assert_true(o.io_latency);
	assert_int_equal(o.io_latency_sample, PLUMB_DEFAULT_LATENCY_SAMPLE);
}

static void test_io_options(void **state)
{
	static const struct io_case cases[] = {
		{ { "--interval", "2s" }, I_INTERVAL, { .interval_ms = 2000 } },
		{ { "--interval=3s" }, I_INTERVAL, { .interval_ms = 3000 } },
		{ { "-i", "500ms" }, I_INTERVAL, { .interval_ms = 500 } },
		{ { "-i100ms" }, I_INTERVAL, { .interval_ms = 100 } }, /* the floor itself */
		{ { "-i", "1m" }, I_INTERVAL, { .interval_ms = 60000 } },
		{ { "-i", "2" }, I_INTERVAL, { .interval_ms = 2000 } },
		{ { "--count", "5" }, I_COUNT, { .count = 5 } },
		{ { "-c", "1" }, I_COUNT, { .count = 1 } },
		{ { "-c", "1073741824" }, I_COUNT, { .count = 1073741824 } },
		{ { "--json" }, I_JSON, { .json = true } },
		{ { "-j" }, I_JSON, { .json = true } },
		{ { "-v" }, I_VERBOSE, { .verbose = 1 } },
		{ { "-vv" }, I_VERBOSE, { .verbose = 2 } },
		{ { "--verbose", "-v" }, I_VERBOSE, { .verbose = 2 } },
		{ { "--io-capacity", "1024" }, I_CAPACITY, { .io_capacity = 1024 } },
		{ { "--no-io-latency" }, I_LATENCY, { .io_latency = false } },
		{ { "--io-latency-sample", "1" }, I_SAMPLE, { .io_latency_sample = 1 } },
		{ { "--io-latency-sample", "64" }, I_SAMPLE, { .io_latency_sample = 64 } },
		{ { "-jc", "3", "-i", "2s" },
		  I_JSON | I_COUNT | I_INTERVAL,
		  { .json = true, .count = 3, .interval_ms = 2000 } },
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct io_options got, want;
		char err[ERR_LEN] = "", got_s[256], want_s[256];
		struct argv_buf a;
		enum cli_result r;

		argv_build(&a, "io", cases[i].args);
		r = cli_parse_io(a.argc, a.argv, &got, err, sizeof(err));
		argv_free(&a);
		io_want(&cases[i], &want);
		io_str(&want, want_s, sizeof(want_s));
		if (r != CLI_OK) {
			print_error("io %s: expected CLI_OK, got %s \"%s\"\n",
				    args_str(cases[i].args), result_str(r), err);
			failures++;
			continue;
		}
		io_str(&got, got_s, sizeof(got_s));
		if (strcmp(got_s, want_s)) {
			print_error("io %s:\n  expected %s\n  got      %s\n",
				    args_str(cases[i].args), want_s, got_s);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu io option cases failed", failures, ARRAY_SIZE(cases));
}

static void test_io_errors(void **state)
{
	static const struct result_case cases[] = {
		{ { "--help" }, HELP },
		{ { "-h" }, HELP },
		{ { "-j", "--help" }, HELP },
		{ { "--interval", "50ms" },
		  ERROR_IS("--interval: '50ms' is not a duration of at least 100ms") },
		{ { "-i", "99ms" }, ERROR_HAS("--interval: '99ms'") },
		{ { "-i", "0" }, ERROR_HAS("--interval: '0'") },
		{ { "-i", "1x" }, ERROR_HAS("--interval: '1x'") },
		{ { "-i", "-1s" }, ERROR_HAS("--interval: '-1s'") },
		{ { "-i", "99999999999h" }, ERROR_HAS("--interval: '99999999999h'") },
		{ { "-c", "0" }, ERROR_IS("--count: '0' is not a positive number") },
		{ { "--count", "-1" }, ERROR_HAS("--count: '-1'") },
		{ { "--count", "1073741825" }, ERROR_HAS("--count: '1073741825'") },
		{ { "--count", "5x" }, ERROR_HAS("--count: '5x'") },
		{ { "--count", "" }, ERROR_HAS("--count: ''") },
		{ { "--io-capacity", "15" }, ERROR_HAS("--io-capacity: '15'") },
		{ { "--io-latency-sample", "3" }, ERROR_HAS("--io-latency-sample: '3'") },
		{ { "--io-latency-sample", "0" }, ERROR_HAS("--io-latency-sample: '0'") },
		{ { "--io-latency-sample", "131072" }, ERROR_HAS("--io-latency-sample: '131072'") },
		{ { "--bogus" }, ERROR_IS("unknown option '--bogus'") },
		{ { "-x" }, ERROR_IS("unknown option '-x'") },
		{ { "--listen", "1.2.3.4:5" }, ERROR_IS("unknown option '--listen'") },
		{ { "--check" }, ERROR_IS("unknown option '--check'") },
		{ { "-l", "1.2.3.4:5" }, ERROR_IS("unknown option '-l'") },
		{ { "--interval" }, ERROR_HAS("'--interval'") },
		{ { "-i" }, ERROR_HAS("'-i'") },
		{ { "--count" }, ERROR_HAS("'--count'") },
		{ { "-c" }, ERROR_HAS("'-c'") },
		{ { "foo" }, ERROR_IS("unexpected argument 'foo'") },
		{ { "-j", "foo" }, ERROR_IS("unexpected argument 'foo'") },
		{ { "foo", "-j" }, ERROR_IS("unexpected argument 'foo'") },
	};
	int failures;

	(void)state;
	failures = check_results("io", parse_io, cases, ARRAY_SIZE(cases));
	if (failures)
		fail_msg("%d of %zu io error cases failed", failures, ARRAY_SIZE(cases));
}

/* top: defaults, each option, and the errors */
static enum cli_result parse_top(int argc, char **argv, char *err, size_t errlen)
{
	struct top_options o;

	return cli_parse_top(argc, argv, &o, err, errlen);
}

static void test_top_options(void **state)
{
	static const char *none[MAX_ARGS] = { NULL };
	static const char *all[MAX_ARGS] = { "-i2s",	  "--sort=wait", "-fSlurm/job",
					     "--count=3", "-b",		 "-vv" };
	static const char *json[MAX_ARGS] = { "--json", "-s", "name" };
	struct top_options o;
	char err[ERR_LEN];
	struct argv_buf a;

	(void)state;
	argv_build(&a, "top", none);
	assert_int_equal(cli_parse_top(a.argc, a.argv, &o, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_int_equal(o.interval_ms, 1000);
	assert_int_equal(o.sort, TOP_COL_CPU);
	assert_int_equal(o.count, 0);
	assert_string_equal(o.filter, "");
	assert_false(o.batch);
	assert_false(o.json);

	argv_build(&a, "top", all);
	assert_int_equal(cli_parse_top(a.argc, a.argv, &o, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_int_equal(o.interval_ms, 2000);
	assert_int_equal(o.sort, TOP_COL_WAIT);
	assert_string_equal(o.filter, "Slurm/job");
	assert_int_equal(o.count, 3);
	assert_true(o.batch);
	assert_int_equal(o.verbose, 2);

	argv_build(&a, "top", json);
	assert_int_equal(cli_parse_top(a.argc, a.argv, &o, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_true(o.json);
	assert_true(o.batch); /* JSON is never drawn on a terminal */
	assert_int_equal(o.sort, TOP_COL_NAME);
	for (int c = 0; c < TOP_COLS; c++)
		assert_non_null(top_col_names[c]);
}

static void test_top_errors(void **state)
{
	static const struct result_case cases[] = {
		{ { "--help" }, HELP },
		{ { "--sort", "colour" },
		  ERROR_IS("--sort: 'colour' is not one of cpu, runq, block, wait, read, write, "
			   "net, "
			   "name") },
		{ { "--sort" }, ERROR_IS("option '--sort' needs a value") },
		{ { "-i", "100ms" },
		  ERROR_IS("--interval: '100ms' is not a duration of at least 250ms") },
		{ { "-i", "soon" },
		  ERROR_IS("--interval: 'soon' is not a duration of at least 250ms") },
		{ { "-c", "0" }, ERROR_IS("--count: '0' is not a positive number") },
		{ { "--filter", "012345678901234567890123456789012345678901234567890123456789012345"
				"6789012345678901"
				"234567890123456789012345678901234567890123456789" },
		  ERROR_IS("--filter: longer than 127 characters") },
		{ { "--batch=1" }, ERROR_IS("option '--batch' takes no value") },
		{ { "--pid", "1" }, ERROR_IS("unknown option '--pid'") },
		{ { "cpu" }, ERROR_IS("unexpected argument 'cpu'") },
	};
	int failures;

	(void)state;
	failures = check_results("top", parse_top, cases, ARRAY_SIZE(cases));
	if (failures)
		fail_msg("%d of %zu top error cases failed", failures, ARRAY_SIZE(cases));
}

/* place: the options as one string, so that a case's expectation reads as a line */
static void place_str(const struct place_options *o, char *buf, size_t len)
{
	size_t n = snprintf(buf, len,
			    "graph=%s hosts=%s format=%d max_moves=%ld peers=%u verbose=%d pins=",
			    o->graph, o->hosts, (int)o->format, o->max_moves, o->peers, o->verbose);

	for (size_t i = 0; i < o->npins && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i ? "," : "", o->pins[i]);
}

static void test_place_options(void **state)
{
	static const struct {
		const char *args[MAX_ARGS];
		const char *want;
	} cases[] = {
		{ { "--graph", "g.json", "--hosts", "h.json" },
		  "graph=g.json hosts=h.json format=0 max_moves=-1 peers=3 verbose=0 pins=" },
		{ { "-g", "g.json", "-H", "h.json" },
		  "graph=g.json hosts=h.json format=0 max_moves=-1 peers=3 verbose=0 pins=" },
		{ { "--graph=/a b/g.json", "--hosts=h" },
		  "graph=/a b/g.json hosts=h format=0 max_moves=-1 peers=3 verbose=0 pins=" },
		{ { "-gg", "-Hh", "--format", "json" },
		  "graph=g hosts=h format=1 max_moves=-1 peers=3 verbose=0 pins=" },
		{ { "-g", "g", "-H", "h", "-f", "k8s" },
		  "graph=g hosts=h format=2 max_moves=-1 peers=3 verbose=0 pins=" },
		{ { "-g", "g", "-H", "h", "--format=table" },
		  "graph=g hosts=h format=0 max_moves=-1 peers=3 verbose=0 pins=" },
		{ { "-g", "g", "-H", "h", "--max-moves", "0" },
		  "graph=g hosts=h format=0 max_moves=0 peers=3 verbose=0 pins=" },
		{ { "-g", "g", "-H", "h", "--max-moves", "1073741824" },
		  "graph=g hosts=h format=0 max_moves=1073741824 peers=3 verbose=0 pins=" },
		{ { "-g", "g", "-H", "h", "--pin", "db*", "--pin", "external/*" },
		  "graph=g hosts=h format=0 max_moves=-1 peers=3 verbose=0 pins=db*,external/*" },
		{ { "-g", "g", "-H", "h", "--peers", "0", "-vv" },
		  "graph=g hosts=h format=0 max_moves=-1 peers=0 verbose=2 pins=" },
		{ { "-g", "g", "-H", "h", "--peers", "16" },
		  "graph=g hosts=h format=0 max_moves=-1 peers=16 verbose=0 pins=" },
		{ { "-H", "h", "-g", "first", "-g", "second" }, /* the last one counts */
		  "graph=second hosts=h format=0 max_moves=-1 peers=3 verbose=0 pins=" },
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[ERR_LEN] = "", got[512];
		struct place_options o;
		struct argv_buf a;
		enum cli_result r;

		argv_build(&a, "place", cases[i].args);
		r = cli_parse_place(a.argc, a.argv, &o, err, sizeof(err));
		argv_free(&a);
		if (r != CLI_OK) {
			print_error("place %s: expected CLI_OK, got %s \"%s\"\n",
				    args_str(cases[i].args), result_str(r), err);
			failures++;
			continue;
		}
		place_str(&o, got, sizeof(got));
		if (strcmp(got, cases[i].want)) {
			print_error("place %s:\n  expected %s\n  got      %s\n",
				    args_str(cases[i].args), cases[i].want, got);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu place option cases failed", failures, ARRAY_SIZE(cases));
}

static enum cli_result parse_place(int argc, char **argv, char *err, size_t errlen)
{
	struct place_options o;

	return cli_parse_place(argc, argv, &o, err, errlen);
}

static void test_place_errors(void **state)
{
	static char long_path[5000], long_pin[300];
	static const struct result_case cases[] = {
		{ { "--help" }, HELP },
		{ { "-h" }, HELP },
		{ { "-g", "g", "--help" }, HELP },
		{ {}, ERROR_IS("--graph FILE is required") },
		{ { "-H", "h" }, ERROR_IS("--graph FILE is required") },
		{ { "-g", "g" }, ERROR_IS("--hosts FILE is required") },
		{ { "--graph" }, ERROR_HAS("'--graph'") },
		{ { "-g", "g", "--hosts" }, ERROR_HAS("'--hosts'") },
		{ { "-g", "", "-H", "h" }, ERROR_IS("--graph: '' is not a file name") },
		{ { "-g", "g", "-H", "" }, ERROR_IS("--hosts: '' is not a file name") },
		{ { "-g", long_path, "-H", "h" }, ERROR_HAS("--graph: 'xxxx") },
		{ { "-g", "g", "-H", "h", "--format", "yaml" },
		  ERROR_IS("--format: 'yaml' is not table, json or k8s") },
		{ { "-g", "g", "-H", "h", "-f", "JSON" }, ERROR_HAS("--format: 'JSON'") },
		{ { "-g", "g", "-H", "h", "--max-moves", "-1" },
		  ERROR_IS("--max-moves: '-1' is not a number in 0..1073741824") },
		{ { "-g", "g", "-H", "h", "--max-moves", "1073741825" },
		  ERROR_HAS("'1073741825'") },
		{ { "-g", "g", "-H", "h", "--max-moves", "3x" }, ERROR_HAS("--max-moves: '3x'") },
		{ { "-g", "g", "-H", "h", "--max-moves", "" }, ERROR_HAS("--max-moves: ''") },
		{ { "-g", "g", "-H", "h", "--peers", "17" },
		  ERROR_IS("--peers: '17' is not in 0..16") },
		{ { "-g", "g", "-H", "h", "--pin", "" },
		  ERROR_IS("--pin: a pattern of 1 to 255 characters") },
		{ { "-g", "g", "-H", "h", "--pin", long_pin }, ERROR_HAS("--pin: a pattern") },
		{ { "-g", "g", "-H", "h", "--json" }, ERROR_IS("unknown option '--json'") },
		{ { "-g", "g", "-H", "h", "-j" }, ERROR_IS("unknown option '-j'") },
		{ { "-g", "g", "-H", "h", "--listen", "x" },
		  ERROR_IS("unknown option '--listen'") },
		{ { "-g", "g", "-H", "h", "extra" }, ERROR_IS("unexpected argument 'extra'") },
		{ { "-g", "g", "-H", "h", "--verbose=1" }, ERROR_HAS("--verbose") },
	};
	char *args[2 * PLACE_MAX_PINS + 8], pins[PLACE_MAX_PINS + 1][8], err[ERR_LEN];
	struct place_options o;
	int failures, n = 0;

	(void)state;
	memset(long_path, 'x', sizeof(long_path) - 1);
	memset(long_pin, 'p', sizeof(long_pin) - 1);
	failures = check_results("place", parse_place, cases, ARRAY_SIZE(cases));
	if (failures)
		fail_msg("%d of %zu place error cases failed", failures, ARRAY_SIZE(cases));

	/* PLACE_MAX_PINS patterns, then one more (argv built by hand: more than MAX_ARGS) */
	assert_int_equal(PLACE_MAX_PINS, 16);
	args[n++] = "place";
	args[n++] = "-g";
	args[n++] = "g";
	args[n++] = "-H";
	args[n++] = "h";
	for (int i = 0; i <= PLACE_MAX_PINS; i++) {
		snprintf(pins[i], sizeof(pins[i]), "p%d", i);
		args[n++] = "--pin";
		args[n++] = pins[i];
	}
	args[n] = NULL;
	assert_int_equal(cli_parse_place(n - 2, args, &o, err, sizeof(err)), CLI_OK);
	assert_int_equal(o.npins, PLACE_MAX_PINS);
	assert_string_equal(o.pins[PLACE_MAX_PINS - 1], "p15");
	assert_int_equal(cli_parse_place(n, args, &o, err, sizeof(err)), CLI_ERROR);
	assert_string_equal(err, "--pin: at most 16 patterns");
}

#define GRAPH_PATH "/api/v1/graph"

static void test_url(void **state)
{
	static const struct {
		const char *in;
		const char *default_path; /* NULL: a base URL */
		int ret;
		const char *out;
	} cases[] = {
		{ "http://h:9977", GRAPH_PATH, 0, "http://h:9977/api/v1/graph" },
		{ "http://h:9977/", GRAPH_PATH, 0, "http://h:9977/api/v1/graph" },
		{ "https://h", GRAPH_PATH, 0, "https://h/api/v1/graph" },
		{ "HTTP://H:1", GRAPH_PATH, 0, "HTTP://H:1/api/v1/graph" },
		{ "http://[::1]:9977", GRAPH_PATH, 0, "http://[::1]:9977/api/v1/graph" },
		{ "http://h:9977/api/v1/graph", GRAPH_PATH, 0, "http://h:9977/api/v1/graph" },
		{ "http://h/x/graph.json", GRAPH_PATH, 0, "http://h/x/graph.json" },
		{ "http://h//", GRAPH_PATH, 0, "http://h//" }, /* a path, if an odd one */
		{ "http://h/g?pretty=1", GRAPH_PATH, 0, "http://h/g?pretty=1" },
		{ "http://p:9090", NULL, 0, "http://p:9090" },
		{ "http://p:9090/", NULL, 0, "http://p:9090" },
		{ "http://p:9090///", NULL, 0, "http://p:9090" },
		{ "https://p/prometheus/", NULL, 0, "https://p/prometheus" },
		{ "http://p:9090/?x=1", NULL, -EINVAL, NULL },
		{ "http://p:9090#top", NULL, -EINVAL, NULL },
		{ "http://h?x=1", GRAPH_PATH, -EINVAL, NULL }, /* a query where the path goes */
		{ "http://", GRAPH_PATH, -EINVAL, NULL },
		{ "http:///api", GRAPH_PATH, -EINVAL, NULL },
		{ "http:/h", GRAPH_PATH, -EINVAL, NULL },
		{ "h:9977", GRAPH_PATH, -EINVAL, NULL },
		{ "127.0.0.1:9977", GRAPH_PATH, -EINVAL, NULL },
		{ "ftp://h", GRAPH_PATH, -EINVAL, NULL },
		{ "file:///etc/passwd", GRAPH_PATH, -EINVAL, NULL },
		{ "", GRAPH_PATH, -EINVAL, NULL },
		{ "", NULL, -EINVAL, NULL },
		{ "http://h 1", GRAPH_PATH, -EINVAL, NULL },
		{ "http://h\t", GRAPH_PATH, -EINVAL, NULL },
		{ " http://h", GRAPH_PATH, -EINVAL, NULL },
		{ "http://h/\x7f", GRAPH_PATH, -EINVAL, NULL },
	};
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char out[CLI_URL_MAX] = "untouched";
		const char *want = cases[i].ret ? "untouched" : cases[i].out;
		int ret = cli_parse_url(cases[i].in, cases[i].default_path, out, sizeof(out));

		if (ret != cases[i].ret || strcmp(out, want)) {
			print_error("url \"%s\" (%s): expected %d \"%s\", got %d \"%s\"\n",
				    escaped(cases[i].in), cases[i].default_path ? "agent" : "base",
				    cases[i].ret, want, ret, out);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu URL cases failed", failures, ARRAY_SIZE(cases));
}

/* The URL with its path fits CLI_URL_MAX with its NUL, and the caller's buffer; else -ENAMETOOLONG. */
static void test_url_length(void **state)
{
	char in[CLI_URL_MAX + 8], out[CLI_URL_MAX], *small;
	size_t host = CLI_URL_MAX - 1 - strlen("http://") - strlen(GRAPH_PATH);

	(void)state;
	snprintf(in, sizeof(in), "http://%0*d", (int)host, 0);
	assert_int_equal(cli_parse_url(in, GRAPH_PATH, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), CLI_URL_MAX - 1);
	snprintf(in, sizeof(in), "http://%0*d", (int)host + 1, 0);
	strcpy(out, "untouched");
	assert_int_equal(cli_parse_url(in, GRAPH_PATH, out, sizeof(out)), -ENAMETOOLONG);
	assert_string_equal(out, "untouched");

	/* exactly sized on the heap, so that valgrind sees a write past the end */
	small = malloc(14);
	assert_non_null(small);
	assert_int_equal(cli_parse_url("http://p:9090", NULL, small, 14), 0);
	assert_string_equal(small, "http://p:9090");
	assert_int_equal(cli_parse_url("http://p:90901", NULL, small, 14), -ENAMETOOLONG);
	assert_int_equal(cli_parse_url("http://p:1", GRAPH_PATH, small, 14), -ENAMETOOLONG);
	free(small);
}

enum graph_field {
	G_PROJECTION = 1 << 0,
	G_FORMAT = 1 << 1,
	G_FROM = 1 << 2,
	G_PROMETHEUS = 1 << 3,
	G_WINDOW = 1 << 4,
	G_OUTPUT = 1 << 5,
};

#define MAX_FROM 4

struct graph_case {
	const char *args[MAX_ARGS];
	unsigned int set;
	enum graph_projection projection;
	enum graph_format format;
	const char *from[MAX_FROM]; /* G_FROM: the list; up to the first NULL */
	const char *prometheus;
	unsigned int window_s; /* G_WINDOW: window_set too */
	const char *output;
};

static void graph_str(const struct graph_options *o, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "projection=%d format=%d nfrom=%zu from=[",
				    o->projection, o->format, o->nfrom);

	for (size_t i = 0; i < o->nfrom && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", o->from[i]);
	if (n < len)
		snprintf(buf + n, len - n,
			 "] prometheus=%s window_s=%u window_set=%d output=%.300s", o->prometheus,
			 o->window_s, o->window_set, o->output);
}

static void graph_want(const struct graph_case *c, struct graph_options *o)
{
	memset(o, 0, sizeof(*o));
	o->projection = c->set & G_PROJECTION ? c->projection : GRAPH_PROJECT_PROCESS;
	o->format = c->set & G_FORMAT ? c->format : GRAPH_FORMAT_TABLE;
	o->window_s = 300;
	if (c->set & G_WINDOW) {
		o->window_s = c->window_s;
		o->window_set = true;
	}
	if (c->set & G_PROMETHEUS)
		strcpy(o->prometheus, c->prometheus);
	if (c->set & G_OUTPUT)
		strcpy(o->output, c->output);
	for (size_t i = 0; c->set & G_FROM && i < MAX_FROM && c->from[i]; i++)
		strcpy(o->from[o->nfrom++], c->from[i]);
	if (!o->nfrom && !o->prometheus[0])
		strcpy(o->from[o->nfrom++], "http://127.0.0.1:9977/api/v1/graph");
}

static void test_graph_defaults(void **state)
{
	const char *const none[] = { NULL };
	struct graph_options o;
	struct argv_buf a;
	char err[ERR_LEN];

	(void)state;
	argv_build(&a, "graph", none);
	assert_int_equal(cli_parse_graph(a.argc, a.argv, &o, err, sizeof(err)), CLI_OK);
	argv_free(&a);
	assert_int_equal(o.projection, GRAPH_PROJECT_PROCESS);
	assert_int_equal(o.format, GRAPH_FORMAT_TABLE);
	assert_int_equal(o.nfrom, 1);
	assert_string_equal(o.from[0], "http://127.0.0.1:9977/api/v1/graph");
	assert_string_equal(o.prometheus, "");
	assert_int_equal(o.window_s, 300);
	assert_false(o.window_set);
	assert_string_equal(o.output, "");
}

static void test_graph_options(void **state)
{
	static const struct graph_case cases[] = {
		{ .args = { "-p", "type" }, .set = G_PROJECTION, .projection = GRAPH_PROJECT_TYPE },
		{ .args = { "--projection=host" },
		  .set = G_PROJECTION,
		  .projection = GRAPH_PROJECT_HOST },
		{ .args = { "--projection", "process" },
		  .set = G_PROJECTION,
		  .projection = GRAPH_PROJECT_PROCESS },
		{ .args = { "-f", "json" }, .set = G_FORMAT, .format = GRAPH_FORMAT_JSON },
		{ .args = { "--format", "dot" }, .set = G_FORMAT, .format = GRAPH_FORMAT_DOT },
		{ .args = { "-fsvg" }, .set = G_FORMAT, .format = GRAPH_FORMAT_SVG },
		{ .args = { "--format=table" }, .set = G_FORMAT, .format = GRAPH_FORMAT_TABLE },
		{ .args = { "-o", "g.svg" }, .set = G_OUTPUT, .output = "g.svg" },
		{ .args = { "--output=/tmp/x y" }, .set = G_OUTPUT, .output = "/tmp/x y" },
		{ .args = { "--from", "http://h:9977" },
		  .set = G_FROM,
		  .from = { "http://h:9977/api/v1/graph" } },
		{ .args = { "--from=https://h/g" }, .set = G_FROM, .from = { "https://h/g" } },
		{ .args = { "--from", "http://a:1,http://b:2/" },
		  .set = G_FROM,
		  .from = { "http://a:1/api/v1/graph", "http://b:2/api/v1/graph" } },
		{ .args = { "--from", "http://a:1", "--from", "http://b:2,http://c:3" },
		  .set = G_FROM,
		  .from = { "http://a:1/api/v1/graph", "http://b:2/api/v1/graph",
			    "http://c:3/api/v1/graph" } },
		{ .args = { "--prometheus", "http://p:9090" },
		  .set = G_PROMETHEUS,
		  .prometheus = "http://p:9090" },
		{ .args = { "--prometheus=http://p:9090/" },
		  .set = G_PROMETHEUS,
		  .prometheus = "http://p:9090" },
		{ .args = { "--prometheus", "http://p:9090", "--window", "15m" },
		  .set = G_PROMETHEUS | G_WINDOW,
		  .prometheus = "http://p:9090",
		  .window_s = 900 },
		{ .args = { "--window", "1s" }, .set = G_WINDOW, .window_s = 1 },
		{ .args = { "--window=2h" }, .set = G_WINDOW, .window_s = 7200 },
		{ .args = { "--window", "90" }, .set = G_WINDOW, .window_s = 90 },
		{ .args = { "--window", "300000ms" }, .set = G_WINDOW, .window_s = 300 },
		/* accepted with --from; the command notes that it changes nothing */
		{ .args = { "--from", "http://a:1", "--window", "1m" },
		  .set = G_FROM | G_WINDOW,
		  .from = { "http://a:1/api/v1/graph" },
		  .window_s = 60 },
		{ .args = { "-p", "type", "-p", "host" }, /* the last one wins */
		  .set = G_PROJECTION,
		  .projection = GRAPH_PROJECT_HOST },
		{ .args = { "-ptype", "-fjson", "--prometheus", "http://p:9090", "--window", "10m",
			    "-o", "g.json" },
		  .set = G_PROJECTION | G_FORMAT | G_PROMETHEUS | G_WINDOW | G_OUTPUT,
		  .projection = GRAPH_PROJECT_TYPE,
		  .format = GRAPH_FORMAT_JSON,
		  .prometheus = "http://p:9090",
		  .window_s = 600,
		  .output = "g.json" },
		{ .args = { "--" } },
	};
	static char got_s[4096], want_s[4096];
	int failures = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		static struct graph_options got, want; /* 64 KiB each */
		char err[ERR_LEN] = "";
		struct argv_buf a;
		enum cli_result r;

		argv_build(&a, "graph", cases[i].args);
		r = cli_parse_graph(a.argc, a.argv, &got, err, sizeof(err));
		argv_free(&a);
		graph_want(&cases[i], &want);
		graph_str(&want, want_s, sizeof(want_s));
		if (r != CLI_OK) {
			print_error("graph %s: expected CLI_OK, got %s \"%s\"\n",
				    args_str(cases[i].args), result_str(r), err);
			failures++;
			continue;
		}
		graph_str(&got, got_s, sizeof(got_s));
		if (strcmp(got_s, want_s)) {
			print_error("graph %s:\n  expected %s\n  got      %s\n",
				    args_str(cases[i].args), want_s, got_s);
			failures++;
		}
	}
	if (failures)
		fail_msg("%d of %zu graph option cases failed", failures, ARRAY_SIZE(cases));
}

static enum cli_result parse_graph(int argc, char **argv, char *err, size_t errlen)
{
	static struct graph_options o;

	return cli_parse_graph(argc, argv, &o, err, errlen);
}

static void test_graph_errors(void **state)
{
	static const struct result_case cases[] = {
		{ { "--help" }, HELP },
		{ { "-h" }, HELP },
		{ { "-p", "type", "--help" }, HELP },
		{ { "--projection", "pod" },
		  ERROR_IS("--projection: 'pod' is not process, type or host") },
		{ { "-p", "" }, ERROR_IS("--projection: '' is not process, type or host") },
		{ { "-p", "Process" }, ERROR_HAS("'Process'") },
		{ { "--format", "png" },
		  ERROR_IS("--format: 'png' is not table, json, dot or svg") },
		{ { "-f", "JSON" }, ERROR_HAS("--format: 'JSON'") },
		{ { "--from", "ftp://h" },
		  ERROR_IS("--from: 'ftp://h' is not an http:// or https:// URL") },
		{ { "--from", "127.0.0.1:9977" }, ERROR_HAS("--from: '127.0.0.1:9977' is not") },
		{ { "--from", "http://a:1,ftp://b" }, ERROR_HAS("--from: 'ftp://b' is not") },
		{ { "--from", "http://h?x" }, ERROR_HAS("--from: 'http://h?x' is not") },
		{ { "--from", "" }, ERROR_IS("--from: an empty URL in ''") },
		{ { "--from", "http://a:1," }, ERROR_IS("--from: an empty URL in 'http://a:1,'") },
		{ { "--from", ",http://a:1" }, ERROR_HAS("an empty URL") },
		{ { "--from", "http://a:1,,http://b:2" }, ERROR_HAS("an empty URL") },
		{ { "--from", "http://a\n" }, ERROR_HAS("--from: 'http://a?' is not") },
		{ { "--prometheus", "p:9090" },
		  ERROR_HAS("--prometheus: 'p:9090' is not an http:// or https:// base URL") },
		{ { "--prometheus", "http://p:9090/?x=1" }, ERROR_HAS("--prometheus: 'http://p") },
		{ { "--prometheus", "" }, ERROR_HAS("--prometheus: ''") },
		{ { "--window", "0" },
		  ERROR_IS("--window: '0' is not a duration in whole seconds of at least 1s") },
		{ { "--window", "500ms" }, ERROR_HAS("--window: '500ms'") },
		{ { "--window", "1500ms" }, ERROR_HAS("--window: '1500ms'") },
		{ { "--window", "5x" }, ERROR_HAS("--window: '5x'") },
		{ { "--window", "-5m" }, ERROR_HAS("--window: '-5m'") },
		{ { "--window", "" }, ERROR_HAS("--window: ''") },
		{ { "--from", "http://a:1", "--prometheus", "http://p:9090" },
		  ERROR_IS("--from and --prometheus cannot be used together") },
		{ { "--prometheus", "http://p:9090", "--from", "http://a:1" },
		  ERROR_IS("--from and --prometheus cannot be used together") },
		{ { "-o", "" }, ERROR_IS("--output: '' is not a file name") },
		{ { "--projection" }, ERROR_HAS("'--projection'") },
		{ { "-p" }, ERROR_HAS("'-p'") },
		{ { "--format" }, ERROR_HAS("'--format'") },
		{ { "-f" }, ERROR_HAS("'-f'") },
		{ { "-o" }, ERROR_HAS("'-o'") },
		{ { "--from" }, ERROR_HAS("'--from'") },
		{ { "--prometheus" }, ERROR_HAS("'--prometheus'") },
		{ { "--window" }, ERROR_HAS("'--window'") },
		{ { "--bogus" }, ERROR_IS("unknown option '--bogus'") },
		{ { "-x" }, ERROR_IS("unknown option '-x'") },
		{ { "-v" }, ERROR_IS("unknown option '-v'") },
		{ { "--json" }, ERROR_IS("unknown option '--json'") },
		{ { "--listen", "1.2.3.4:5" }, ERROR_IS("unknown option '--listen'") },
		{ { "--help=x" }, ERROR_HAS("--help") },
		{ { "foo" }, ERROR_IS("unexpected argument 'foo'") },
		{ { "http://a:1" }, ERROR_IS("unexpected argument 'http://a:1'") },
		{ { "-p", "type", "foo" }, ERROR_IS("unexpected argument 'foo'") },
	};
	int failures;

	(void)state;
	failures = check_results("graph", parse_graph, cases, ARRAY_SIZE(cases));
	if (failures)
		fail_msg("%d of %zu graph error cases failed", failures, ARRAY_SIZE(cases));
}

/* --from takes up to CLI_GRAPH_MAX_SOURCES agents, in one list or several */
static void test_graph_many_sources(void **state)
{
	static struct graph_options o;
	char list[CLI_GRAPH_MAX_SOURCES * 16 + 16], err[ERR_LEN] = "";
	char *argv[] = { "graph", "--from", list, NULL };
	size_t n = 0;

	(void)state;
	for (int i = 0; i < CLI_GRAPH_MAX_SOURCES; i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%shttp://h%d", i ? "," : "", i);
	assert_int_equal(cli_parse_graph(3, argv, &o, err, sizeof(err)), CLI_OK);
	assert_int_equal(o.nfrom, CLI_GRAPH_MAX_SOURCES);
	assert_string_equal(o.from[CLI_GRAPH_MAX_SOURCES - 1], "http://h255/api/v1/graph");
	snprintf(list + n, sizeof(list) - n, ",http://one-more");
	assert_int_equal(cli_parse_graph(3, argv, &o, err, sizeof(err)), CLI_ERROR);
	assert_string_equal(err, "--from: more than 256 agents");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_listen),
		cmocka_unit_test(test_listen_host_length),
		cmocka_unit_test(test_listen_port_digits_only),
		cmocka_unit_test(test_modules),
		cmocka_unit_test(test_modules_long_list_and_short_err),
		cmocka_unit_test(test_agent_defaults),
		cmocka_unit_test(test_agent_options),
		cmocka_unit_test(test_agent_errors),
		cmocka_unit_test(test_long_option_given_a_value),
		cmocka_unit_test(test_parse_twice),
		cmocka_unit_test(test_io_defaults),
		cmocka_unit_test(test_io_options),
		cmocka_unit_test(test_io_errors),
		cmocka_unit_test(test_top_options),
		cmocka_unit_test(test_top_errors),
		cmocka_unit_test(test_place_options),
		cmocka_unit_test(test_place_errors),
		cmocka_unit_test(test_url),
		cmocka_unit_test(test_url_length),
		cmocka_unit_test(test_graph_defaults),
		cmocka_unit_test(test_graph_options),
		cmocka_unit_test(test_graph_errors),
		cmocka_unit_test(test_graph_many_sources),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
