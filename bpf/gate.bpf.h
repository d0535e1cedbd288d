/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The handover gate (include/handover.h): a program of a module whose maps can be handed to
 * the next agent counts only while the gate names its generation, on the CPU it runs on.
 *
 * Per CPU, because one event runs the old agent's program and then the new one's (a
 * tracepoint runs its programs in the order they were attached): with one global gate, a
 * flip between the two would let both count that event. So each CPU's plumb_gate_cpu holds
 * the generation that counts there and the one user space wants; the old program is the one
 * that moves its CPU over, at the start of an event it then leaves to the new one. One
 * per-CPU array lookup of a constant key, which the verifier inlines: a second, global value
 * for what user space wants cost every event ~4 ns more (bpf_stats, sched_switch under a
 * switch storm: one more cache line). plumb_gate keeps the generation and the object's hash
 * for the next agent (src/adopt.c).
 */
#ifndef PLUMB_GATE_BPF_H
#define PLUMB_GATE_BPF_H

#include "handover.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct handover_gate);
} plumb_gate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct handover_gate_cpu);
} plumb_gate_cpu SEC(".maps");

/* Set by user space before load: 0, or the generation after the one it takes over from. */
const volatile __u32 plumb_generation = 0;

static __always_inline bool gate_open(void)
{
	__u32 zero = 0;
	struct handover_gate_cpu *cpu = bpf_map_lookup_elem(&plumb_gate_cpu, &zero);

	if (!cpu || cpu->cur != plumb_generation)
		return false; /* another generation's programs count on this CPU */
	if (cpu->want != plumb_generation) {
		/* the next agent's programs are attached: from this event on, theirs */
		cpu->cur = cpu->want;
		return false;
	}
	return true;
}

#endif
