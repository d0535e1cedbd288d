// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "export/webconfig.h"

/* "pw", bcrypt cost 4 (fast for a test) */
#define PW_HASH "$2b$04$abcdefghijklmnopqrstuuyvPXIbu7xe6/CED2DzX8z6Si09MlzlW"

static int parse(const char *text, struct web_config *c, char *err, size_t errlen)
{
	return web_config_parse(text, strlen(text), "/etc/plumb", c, err, errlen);
}

static void test_full(void **state)
{
	static struct web_config c;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse("tls_server_config:\n"
			       "  cert_file: server.crt\n"
			       "  key_file: /keys/server.key\n"
			       "  min_version: TLS13\n"
			       "basic_auth_users:\n"
			       "  alice: " PW_HASH "\n"
			       "  bob: '" PW_HASH "'\n",
			       &c, err, sizeof(err)),
			 0);
	assert_true(c.tls);
	assert_string_equal(c.cert_file, "/etc/plumb/server.crt"); /* relative: to the file */
	assert_string_equal(c.key_file, "/keys/server.key");
	assert_int_equal(c.min_version, 13);
	assert_int_equal(c.max_version, 13);
	assert_int_equal(c.nusers, 2);
	assert_string_equal(c.users[1].name, "bob");
	assert_true(web_config_check(&c, "alice", "pw"));
	assert_false(web_config_check(&c, "alice", "pw2"));
	assert_false(web_config_check(&c, "carol", "pw"));
	assert_false(web_config_check(&c, "alice", ""));
}

static void test_empty_and_defaults(void **state)
{
	static struct web_config c;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse("", &c, err, sizeof(err)), 0);
	assert_false(c.tls);
	assert_int_equal(c.nusers, 0);
	assert_int_equal(parse("# nothing\n", &c, err, sizeof(err)), 0);
	assert_int_equal(parse("basic_auth_users:\n", &c, err, sizeof(err)), 0);
	assert_int_equal(c.nusers, 0);
	assert_int_equal(
		parse("tls_server_config:\n  cert_file: a\n  key_file: b\n", &c, err, sizeof(err)),
		0);
	assert_int_equal(c.min_version, 12);
	assert_int_equal(c.max_version, 13);
}

/* Each bad file: -EINVAL and a one-line reason with its line. */
static void test_errors(void **state)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "nope: 1\n", "line 1: nope: unknown key" },
		{ "tls_server_config:\n  cert_file: a\n", "needs cert_file and key_file" },
		{ "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS11\n",
		  "line 4: min_version: plumb serves TLS 1.2 and 1.3 only" },
		{ "tls_server_config:\n  cert_file: a\n  key_file: b\n  max_version: SSL3\n",
		  "max_version: not TLS12 or TLS13" },
		{ "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n"
		  "  max_version: TLS12\n",
		  "min_version above max_version" },
		{ "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
		  "line 4: tls_server_config.client_ca_file: not supported by plumb" },
		{ "tls_server_config:\n  cert_file: a\n  cert_file: b\n",
		  "cert_file: given twice" },
		{ "http_server_config:\n  http2: false\n", "http_server_config: not supported" },
		{ "basic_auth_users:\n  alice: plain\n", "user 'alice': not a bcrypt hash" },
		{ "basic_auth_users:\n  alice: " PW_HASH "\n  alice: " PW_HASH "\n",
		  "user 'alice' given twice" },
		{ "basic_auth_users:\n  a:b: " PW_HASH "\n", "too long or has a ':'" },
		{ "basic_auth_users: [a, b]\n", "expected a mapping of user: bcrypt hash" },
		{ "- a\n- b\n", "expected a mapping at the top" },
		{ "basic_auth_users:\n  alice: &h " PW_HASH "\n  bob: *h\n",
		  "line 3: aliases are not supported" },
		{ "tls_server_config: {cert_file: [x], key_file: b}\n", "expected a plain value" },
		{ "basic_auth_users: {\n", "not YAML" },
		{ "basic_auth_users:\n---\nbasic_auth_users:\n", "more than one document" },
	};
	static struct web_config c;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(parse(bad[i].text, &c, err, sizeof(err)), -EINVAL);
		if (!strstr(err, bad[i].want) || strchr(err, '\n') || strncmp(err, "line ", 5))
			fail_msg("case %zu: '%s', want '%s'", i, err, bad[i].want);
	}
}

/* Text that is not NUL-terminated where it ends (a fuzzer's buffer) is read within len. */
static void test_length_bound(void **state)
{
	static struct web_config c;
	char err[256], text[] = "basic_auth_users:\nXXXX";

	(void)state;
	assert_int_equal(
		web_config_parse(text, strlen("basic_auth_users:\n"), NULL, &c, err, sizeof(err)),
		0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_empty_and_defaults),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_length_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
