/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The handover gate (include/handover.h): a program of a module whose maps can be handed to
 * the next agent counts only while the gate names its generation, on the CPU it runs on.
 *
 * Per CPU, because one event runs the old agent's program and then the new one's (a
 * tracepoint runs its programs in the order they were attached): with one global gate, a
 * flip between the two would let both count that event. So plumb_gate holds the generation
 * user space wants, and plumb_gate_cpu the one that counts on each CPU; the old program is
 * the one that moves its CPU over, at the start of an event it then leaves to the new one.
 * Both are array lookups of a constant key, which the verifier inlines.
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
	__type(value, __u32);
} plumb_gate_cpu SEC(".maps");

/* Set by user space before load: 0, or the generation after the one it takes over from. */
const volatile __u32 plumb_generation = 0;

static __always_inline bool gate_open(void)
{
	__u32 zero = 0, *cpu = bpf_map_lookup_elem(&plumb_gate_cpu, &zero);
	struct handover_gate *g;

	if (!cpu || *cpu != plumb_generation)
		return false; /* another generation's programs count on this CPU */
	g = bpf_map_lookup_elem(&plumb_gate, &zero);
	if (!g)
		return false;
	if (g->generation != plumb_generation) {
		/* the next agent's programs are attached: from this event on, theirs */
		*cpu = g->generation;
		return false;
	}
	return true;
}

#endif
