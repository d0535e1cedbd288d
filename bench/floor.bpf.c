// SPDX-License-Identifier: GPL-2.0
/*
 * The floor under the io module's cost: programs on the same syscall tracepoints that return
 * at once. What the module adds above this is its own work; this much is the kernel's price
 * for running any BPF program on those tracepoints. With gated set, each first checks the
 * handover gate (bpf/gate.bpf.h) as every program of the io, blk, sched and flow modules does:
 * the difference is the gate's price.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "gate.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile bool gated = false;

#define EMPTY(name)                                 \
	SEC("tracepoint/syscalls/sys_enter_" #name) \
	int enter_##name(void *ctx)                 \
	{                                           \
		if (gated && !gate_open())          \
			return 1;                   \
		return 0;                           \
	}                                           \
	SEC("tracepoint/syscalls/sys_exit_" #name)  \
	int exit_##name(void *ctx)                  \
	{                                           \
		if (gated && !gate_open())          \
			return 1;                   \
		return 0;                           \
	}

EMPTY(read)
EMPTY(readv)
EMPTY(pread64)
EMPTY(preadv)
EMPTY(preadv2)
EMPTY(write)
EMPTY(writev)
EMPTY(pwrite64)
EMPTY(pwritev)
EMPTY(pwritev2)
