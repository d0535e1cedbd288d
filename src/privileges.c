// SPDX-License-Identifier: GPL-2.0
/*
 * The running agent's privileges: once every program is attached it keeps only the
 * capabilities its ticks and scrapes use, empties its bounding, inheritable and ambient sets
 * and sets no_new_privs. libcap (Debian's libcap2) does the set arithmetic.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include "log.h"
#include "privileges.h"

/* What stays, and why: docs/security.md says the same. */
static const cap_value_t keep[] = {
	CAP_BPF, /* map reads and iterators: 6.1-6.4 check it on every bpf() command */
	CAP_PERFMON, /* BPF iterators over tasks and sockets read kernel pointers */
	CAP_SYS_ADMIN, /* setns() into other network namespaces (their sockets, their names) */
	CAP_SYS_PTRACE, /* /proc/PID/fd and /proc/PID/ns of other users' processes */
	CAP_DAC_READ_SEARCH, /* /proc and cgroupfs files whatever their owner and mode */
};

static bool kept(cap_value_t c)
{
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (keep[i] == c)
			return true;
	return false;
}

int privileges_drop(char *err, size_t len)
{
	cap_t now = cap_get_proc(), want = cap_init();
	cap_value_t last = (cap_value_t)cap_max_bits();
	cap_flag_value_t has;
	int bound_left = 0, ret = -1;

	if (!now || !want) {
		snprintf(err, len, "cannot read this process's capabilities: %s", strerror(errno));
		goto out;
	}
	/* the bounding set first: dropping from it needs CAP_SETPCAP, which goes next */
	for (cap_value_t c = 0; c < last; c++) {
		if (kept(c) || cap_get_bound(c) != 1)
			continue; /* kept, unknown to this kernel, or not in the set */
		if (cap_drop_bound(c))
			bound_left++; /* no CAP_SETPCAP (not root): the set stays as it was given */
	}
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		if (cap_get_flag(now, keep[i], CAP_PERMITTED, &has) || has != CAP_SET)
			continue;
		if (cap_set_flag(want, CAP_PERMITTED, 1, &keep[i], CAP_SET) ||
		    cap_set_flag(want, CAP_EFFECTIVE, 1, &keep[i], CAP_SET)) {
			snprintf(err, len, "cannot build the capability set: %s", strerror(errno));
			goto out;
		}
	}
	if (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient()) {
		snprintf(err, len, "cannot clear the ambient capabilities: %s", strerror(errno));
		goto out;
	}
	if (cap_set_proc(want)) {
		snprintf(err, len, "cannot drop capabilities: %s", strerror(errno));
		goto out;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		snprintf(err, len, "cannot set no_new_privs: %s", strerror(errno));
		goto out;
	}
	pr_info("capabilities: kept cap_bpf, cap_perfmon, cap_sys_admin, cap_sys_ptrace, "
		"cap_dac_read_search (those given); every other dropped%s\n",
		bound_left ? ", but the bounding set stays as given (no CAP_SETPCAP)" : "");
	ret = 0;
out:
	cap_free(now);
	cap_free(want);
	return ret;
}
