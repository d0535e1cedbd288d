// SPDX-License-Identifier: GPL-2.0
/*
 * The floor under the sched module's cost: a program on sched_switch that returns at once,
 * the kernel's price for running any program at each context switch (the sched module needs
 * no other per-switch tracepoint where the kernel keeps sched_info), and one on
 * sched_migrate_task, which the module attaches where the kernel delays dequeues (6.12 on;
 * elsewhere the floor has one program more than the module, which a pinned switch storm, migrating
 * next to nothing, hardly runs). Loaded by bench/hold.c.
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

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(floor_migrate, struct task_struct *p, int dest_cpu)
{
	return 0;
}
