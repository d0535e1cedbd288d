/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_PRIVILEGES_H
#define PLUMB_PRIVILEGES_H

#include <stddef.h>

/*
 * After every program is attached, before any thread is started: keeps CAP_BPF, CAP_PERFMON,
 * CAP_SYS_ADMIN, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (those the process has), drops every
 * other capability from all sets (the bounding set where CAP_SETPCAP allows), sets
 * no_new_privs. Capabilities are per thread: threads started before keep theirs. 0, or -1
 * with err set.
 */
int privileges_drop(char *err, size_t len);

#endif
