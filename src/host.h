/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_HOST_H
#define PLUMB_HOST_H

#include <stdbool.h>

/*
 * What the host must offer before any module loads: privileges, BTF, tracefs; and whether it
 * is a virtual machine whose CPUs the hypervisor has taken.
 */

/*
 * Checks what loading tracepoint programs needs: CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN),
 * and a kernel with BTF. On failure prints one line naming what is missing, returns -1.
 */
int privileges_check(const char *who);

/* Mounts tracefs on /sys/kernel/tracing when no tracefs is mounted. 0, or -1 (said why). */
int tracefs_ensure(void);

/* Whether the host has had hypervisor steal (/proc/stat's steal, its cpu line's 8th number). */
bool host_stolen(void);

#endif
