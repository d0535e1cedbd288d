// SPDX-License-Identifier: GPL-2.0
/*
 * The running agent's syscalls: once its programs are attached, a seccomp filter (Debian's
 * libseccomp) allows the calls its ticks, scrapes and shutdown make and answers every other
 * with EPERM (or lets it through and has the kernel log it, with --seccomp log). The list is
 * what the whole test suite's agents were seen to call (docs/security.md says how).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <seccomp.h>
#include <linux/bpf.h>
#include <sys/prctl.h>

#include "log.h"
#include "sandbox.h"

static const char *const allowed[] = {
	/* memory, threads, time, signals: glibc, libbpf, libmicrohttpd, GnuTLS */
	"brk",
	"mmap",
	"munmap",
	"mprotect",
	"mremap",
	"madvise",
	"futex",
	"clone",
	"clone3",
	"set_robust_list",
	"rseq",
	"exit",
	"exit_group",
	"gettid",
	"getpid",
	"getppid",
	"getuid",
	"geteuid",
	"getgid",
	"getegid",
	"rt_sigaction",
	"rt_sigprocmask",
	"rt_sigreturn",
	"sigaltstack",
	"restart_syscall",
	"nanosleep",
	"clock_nanosleep",
	"clock_gettime",
	"clock_getres",
	"gettimeofday",
	"sched_yield",
	"sched_getaffinity",
	"getrandom",
	"membarrier",
	"uname",
	"sysinfo",
	"prlimit64",
	/* files: /proc, /sys, cgroupfs, mountinfo, the web config's TLS files at reload */
	"read",
	"pread64",
	"readv",
	"write",
	"writev",
	"openat",
	"close",
	"lseek",
	"fstat",
	"newfstatat",
	"statx",
	"statfs",
	"fstatfs",
	"getdents64",
	"readlink",
	"readlinkat",
	"faccessat",
	"faccessat2",
	"access",
	"fcntl",
	"ioctl",
	"dup",
	"dup3",
	"pipe",
	"pipe2",
	"eventfd2",
	/* the HTTP server and netlink (a namespace's addresses) */
	"poll",
	"ppoll",
	"select",
	"pselect6",
	"epoll_create1",
	"epoll_ctl",
	"epoll_wait",
	"epoll_pwait",
	"accept",
	"accept4",
	"recvfrom",
	"recvmsg",
	"sendto",
	"sendmsg",
	"shutdown",
	"setsockopt",
	"getsockopt",
	"getsockname",
	"getpeername",
	"socket",
	"bind",
	/* glibc before 2.33 (Debian 12 has 2.36, which uses newfstatat) */
	"stat",
	"lstat",
};

/*
 * bpf() with these commands only: the agent's own maps, its iterators, its programs' info.
 * Not: loading programs or BTF, creating maps, attaching (but io's windows, below), pinning
 * (but with --pin, below), or opening other tools' objects by id or path.
 */
static const unsigned int bpf_cmds[] = {
	BPF_MAP_LOOKUP_ELEM,
	BPF_MAP_UPDATE_ELEM,
	BPF_MAP_DELETE_ELEM,
	BPF_MAP_GET_NEXT_KEY,
	BPF_OBJ_GET_INFO_BY_FD,
	BPF_MAP_LOOKUP_AND_DELETE_ELEM,
	BPF_MAP_LOOKUP_BATCH,
	BPF_MAP_LOOKUP_AND_DELETE_BATCH,
	BPF_MAP_DELETE_BATCH,
	BPF_ITER_CREATE,
	/* io's latency windows attach its enter programs to their perf events (src/window.h),
	 * netstack's windows its tracepoint programs (libbpf falls back to the raw tracepoint
	 * command where the kernel's link_create lacks them, before 6.10); with neither
	 * BPF_PROG_LOAD nor BPF_PROG_GET_FD_BY_ID, only the agent's own programs */
	BPF_LINK_CREATE,
	BPF_RAW_TRACEPOINT_OPEN,
};

/* Rules with an argument: the calls whose other uses the agent has no need of. */
static int add_narrow_rules(scmp_filter_ctx ctx, bool pin)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < sizeof(bpf_cmds) / sizeof(bpf_cmds[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(bpf), 1,
				      SCMP_A0(SCMP_CMP_EQ, bpf_cmds[i]));
	/* --pin: at a clean exit the maps and links of a module are pinned for the next agent */
	if (!rc && pin)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(bpf), 1,
				      SCMP_A0(SCMP_CMP_EQ, BPF_OBJ_PIN));
	/* network namespaces only (src/identity/netns.c) */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setns), 1,
				      SCMP_A1(SCMP_CMP_EQ, CLONE_NEWNET));
	/* signal 0 only: whether a process exists (the flow module's peers) */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
				      SCMP_A1(SCMP_CMP_EQ, 0));
	/* a thread's name only (libmicrohttpd names its thread) */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				      SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
	return rc;
}

int sandbox_syscalls(enum seccomp_mode mode, bool pin, char *err, size_t len)
{
	scmp_filter_ctx ctx;
	int rc, unknown = 0;

	if (mode == SECCOMP_OFF) {
		pr_info("seccomp: off (--seccomp off)\n");
		return 0;
	}
	ctx = seccomp_init(mode == SECCOMP_LOG ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(EPERM));
	if (!ctx) {
		snprintf(err, len, "seccomp: cannot create a filter");
		return -1;
	}
	/* every thread, those started later too (they inherit it) */
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	/* a refused call is logged by the kernel too (audit type 1326: which call, which thread) */
	if (!rc)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1);
	for (size_t i = 0; !rc && i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		int nr = seccomp_syscall_resolve_name(allowed[i]);

		if (nr < 0) {
			unknown++; /* not on this architecture (libseccomp's pseudo-numbers) */
			continue;
		}
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	}
	if (!rc)
		rc = add_narrow_rules(ctx, pin);
	if (!rc)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc) {
		snprintf(err, len, "seccomp: cannot install the filter: %s", strerror(-rc));
		return -1;
	}
	pr_info("seccomp: %zu syscalls allowed, and bpf, setns, kill, prctl for some arguments; "
		"others %s\n",
		sizeof(allowed) / sizeof(allowed[0]) - unknown,
		mode == SECCOMP_LOG ? "allowed and logged (--seccomp log)" : "refused (EPERM)");
	return 0;
}
