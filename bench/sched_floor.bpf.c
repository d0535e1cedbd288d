// SPDX-License-Identifier: GPL-2.0
/*
 * The floor under the sched module's cost: programs on the same scheduler tracepoints that
 * return at once: the kernel's price for running any program there. Loaded by bench/hold.c.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(floor_wakeup, struct task_struct *p)
{
	return 0;
}
