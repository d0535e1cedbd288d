// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <cmocka.h>

#include "identity/epoll.h"

/* An epoll fd's fdinfo as Linux 6.18 prints it: a pipe and a socket registered. */
static const char fdinfo_text[] =
	"pos:\t0\n"
	"flags:\t02000002\n"
	"mnt_id:\t17\n"
	"ino:\t1039\n"
	"tfd:        4 events:       19 data:                4  pos:0 ino:683deaf sdev:f\n"
	"tfd:       16 events: 80000005 data:     7f00deadbeef  pos:0 ino:683deb0 sdev:9\n";

static void test_parse(void **state)
{
	struct epoll_file f[4];

	(void)state;
	assert_int_equal(epoll_fdinfo_parse(fdinfo_text, f, 4), 2);
	assert_int_equal(f[0].tfd, 4);
	assert_int_equal(f[0].events, 0x19);
	assert_int_equal(f[0].ino, 0x683deaf);
	assert_int_equal(f[0].sdev, 0xf);
	assert_int_equal(f[1].tfd, 16);
	assert_int_equal(f[1].events, 0x80000005);
	assert_int_equal(f[1].ino, 0x683deb0);
	assert_int_equal(f[1].sdev, 9);
}

static void test_parse_more_than_room(void **state)
{
	struct epoll_file f[2] = { 0 };

	(void)state;
	/* the count says two; only one was written */
	assert_int_equal(epoll_fdinfo_parse(fdinfo_text, f, 1), 2);
	assert_int_equal(f[0].tfd, 4);
	assert_int_equal(f[1].tfd, 0);
}

static void test_parse_empty_and_malformed(void **state)
{
	struct epoll_file f[2];

	(void)state;
	assert_int_equal(epoll_fdinfo_parse("pos:\t0\nflags:\t02\nmnt_id:\t17\nino:\t1\n", f, 2),
			 0);
	assert_int_equal(epoll_fdinfo_parse("", f, 2), 0);
	assert_int_equal(epoll_fdinfo_parse("tfd: x events: 1\n", f, 2), -EINVAL);
	assert_int_equal(epoll_fdinfo_parse("tfd: 3 events: 1 data: 3 pos:0\n", f, 2), -EINVAL);
}

/* A real instance of this process: what epoll_ctl registered, and not a plain fd. */
static void test_read_live(void **state)
{
	struct epoll_file f[4];
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(0), p[2];

	(void)state;
	assert_true(ep >= 0);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(epoll_files((uint32_t)getpid(), ep, f, 4), 0);
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), 0);
	assert_int_equal(epoll_files((uint32_t)getpid(), ep, f, 4), 1);
	assert_int_equal(f[0].tfd, p[0]);
	assert_true(f[0].events & EPOLLIN); /* the kernel adds EPOLLERR | EPOLLHUP */
	assert_int_equal(epoll_files((uint32_t)getpid(), p[0], f, 4), -ENOENT);
	assert_int_equal(epoll_files((uint32_t)getpid(), 999, f, 4), -ENOENT);
	close(p[0]);
	close(p[1]);
	close(ep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_more_than_room),
		cmocka_unit_test(test_parse_empty_and_malformed),
		cmocka_unit_test(test_read_live),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
