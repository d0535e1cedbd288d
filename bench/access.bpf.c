// SPDX-License-Identifier: GPL-2.0
/*
 * What one memory access costs a BPF program on this machine: programs on sched_switch that
 * each read one thing and return, for bench/access.py (loaded one at a time by bench/hold.c).
 * On a host whose kernel entries flush the TLB (page-table isolation without PCID), the
 * first touch of a non-global page after each entry should be a page walk: a program would
 * pay for the pages of map memory it touches rather than for its instructions.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gate.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct slot {
	__u32 a, b;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slot);
} per_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct slot);
} by_cpu SEC(".maps");

const volatile __u32 ro_value = 0;
__u32 bss_value = 0;

SEC("tp_btf/sched_switch")
int BPF_PROG(access_none, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return 0;
}

/* a field of the task the scheduler has just touched */
SEC("tp_btf/sched_switch")
int BPF_PROG(access_task, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return prev->pid == 7;
}

/* a global in .rodata (a frozen, mmapable array map) */
SEC("tp_btf/sched_switch")
int BPF_PROG(access_rodata, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return ro_value == 7;
}

/* a global in .bss */
SEC("tp_btf/sched_switch")
int BPF_PROG(access_bss, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return bss_value == 7;
}

/* a per-CPU array's value (the lookup is inlined): the handover gate's first read */
SEC("tp_btf/sched_switch")
int BPF_PROG(access_per_cpu, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 zero = 0;
	struct slot *s = bpf_map_lookup_elem(&per_cpu, &zero);

	return s && s->a == 7;
}

/* a plain array's value at this CPU's index */
SEC("tp_btf/sched_switch")
int BPF_PROG(access_by_cpu, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 key = bpf_get_smp_processor_id() & 63;
	struct slot *s = bpf_map_lookup_elem(&by_cpu, &key);

	return s && s->a == 7;
}

/*
 * The handover gate every plumb program opens with (gate.bpf.h): its per-CPU value and the
 * generation in .rodata.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(access_gate, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return gate_open();
}

/*
 * Page or cache line: two dependent reads of one .data array (an mmapable array map: its
 * value starts on a page), the second at an index the first read gives, so the second cannot
 * start before the first ends. steps[0] = 512 puts the second 2048 bytes on (the same page, a
 * cache line no prefetcher brings with the first); steps[1] = 1024 puts it 4096 bytes on (the
 * next page). If what a first touch costs is a TLB miss, the near pair costs one miss and the
 * far pair two; if it is a cache miss, both pairs cost two.
 */
__u32 steps[2048] = { 512, 1024 };

SEC("tp_btf/sched_switch")
int BPF_PROG(access_line, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return steps[steps[0] & 2047] == 7;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(access_page, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return steps[steps[1] & 2047] == 7;
}

/* the first read alone */
SEC("tp_btf/sched_switch")
int BPF_PROG(access_data, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return steps[0] == 7;
}
