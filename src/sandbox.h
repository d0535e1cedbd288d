/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_SANDBOX_H
#define PLUMB_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

/*
 * Installs the agent's seccomp filter on every thread (after privileges_drop(), which sets
 * no_new_privs): the syscalls in src/sandbox.c's list pass; any other gets EPERM
 * (SECCOMP_ENFORCE) or passes and is logged by the kernel (SECCOMP_LOG). pin: bpf() may
 * pin objects too (--pin hands maps and links to the next agent at exit). 0, or -1 with err.
 */
int sandbox_syscalls(enum seccomp_mode mode, bool pin, char *err, size_t len);

#endif
