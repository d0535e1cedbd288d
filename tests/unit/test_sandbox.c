// SPDX-License-Identifier: GPL-2.0
/*
 * The agent's seccomp filter, installed in a child process: calls on its list work, others
 * get EPERM (enforce) or go through (log), in the thread that installed it and in threads
 * started before and after (TSYNC, inheritance).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "sandbox.h"

/* errno of chdir("/") (0: it worked): chdir is on no list of the agent's */
static void *try_chdir(void *arg)
{
	int *out = arg;

	*out = chdir("/") ? errno : 0;
	return NULL;
}

static int waiting = 1;

/* a thread started before the filter: it waits, then tries */
static void *early(void *arg)
{
	while (__atomic_load_n(&waiting, __ATOMIC_ACQUIRE))
		usleep(1000);
	return try_chdir(arg);
}

/*
 * In a child: installs the filter in mode, then reports in its exit status bit 0: chdir
 * failed with EPERM here; bit 1: in a thread started before; bit 2: in one started after;
 * bit 3: getpid() (allowed) worked; bit 4: the filter was installed.
 */
static int child_result(enum seccomp_mode mode)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		int here, before = -1, after = -1, bits = 0;
		char err[256];
		pthread_t t1, t2;

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    pthread_create(&t1, NULL, early, &before))
			_exit(255);
		if (!sandbox_syscalls(mode, false, err, sizeof(err)))
			bits |= 16;
		__atomic_store_n(&waiting, 0, __ATOMIC_RELEASE);
		pthread_join(t1, NULL);
		try_chdir(&here);
		if (pthread_create(&t2, NULL, try_chdir, &after))
			_exit(254);
		pthread_join(t2, NULL);
		bits |= (here == EPERM) | (before == EPERM) << 1 | (after == EPERM) << 2;
		bits |= (syscall(SYS_getpid) == getpid()) << 3;
		_exit(bits);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_enforce(void **state)
{
	(void)state;
	assert_int_equal(child_result(SECCOMP_ENFORCE), 16 | 8 | 4 | 2 | 1);
}

static void test_log(void **state)
{
	(void)state;
	assert_int_equal(child_result(SECCOMP_LOG), 16 | 8);
}

static void test_off(void **state)
{
	(void)state;
	assert_int_equal(child_result(SECCOMP_OFF), 16 | 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enforce),
		cmocka_unit_test(test_log),
		cmocka_unit_test(test_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
