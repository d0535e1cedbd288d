// SPDX-License-Identifier: GPL-2.0
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#include "host.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static int has_cap(const struct __user_cap_data_struct *d, int cap)
{
	return !!(d[cap / 32].effective & (1u << (cap % 32)));
}

int privileges_check(const char *who)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	const char *missing = NULL;

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data)) {
		fprintf(stderr, "%s: cannot read this process's capabilities\n", who);
		return -1;
	}
	if (!has_cap(data, CAP_SYS_ADMIN)) {
		if (!has_cap(data, CAP_BPF) && !has_cap(data, CAP_PERFMON))
			missing = "CAP_BPF and CAP_PERFMON";
		else if (!has_cap(data, CAP_BPF))
			missing = "CAP_BPF";
		else if (!has_cap(data, CAP_PERFMON))
			missing = "CAP_PERFMON";
	}
	if (missing) {
		fprintf(stderr, "%s: missing %s (or CAP_SYS_ADMIN): run as root, e.g. with sudo\n",
			who, missing);
		return -1;
	}
	if (faccessat(AT_FDCWD, "/sys/kernel/btf/vmlinux", R_OK, AT_EACCESS)) {
		fprintf(stderr,
			"%s: this kernel has no BTF (/sys/kernel/btf/vmlinux): plumb needs "
			"CONFIG_DEBUG_INFO_BTF=y\n",
			who);
		return -1;
	}
	return 0;
}

int tracefs_ensure(void)
{
	/*
	 * libbpf finds syscall tracepoints' ids in tracefs; where nothing mounted it (no systemd,
	 * minimal images, these VMs), mount it where the kernel documents it. It stays mounted:
	 * other tracing tools expect it there, and unmounting would not detach our programs.
	 */
	/* AT_EACCESS: the effective ids and capabilities, as the later opens will use (access()
	 * takes the real uid, which fails a non-root uid holding CAP_DAC_READ_SEARCH) */
	if (!faccessat(AT_FDCWD, "/sys/kernel/tracing/events", F_OK, AT_EACCESS) ||
	    !faccessat(AT_FDCWD, "/sys/kernel/debug/tracing/events", F_OK, AT_EACCESS))
		return 0;
	if (mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL)) {
		fprintf(stderr,
			"plumb: tracefs is not mounted and mounting it on /sys/kernel/tracing "
			"failed: %s\n",
			strerror(errno));
		return -1;
	}
	return 0;
}

bool host_stolen(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return false;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	return n == 8 && v[7] > 0;
}
