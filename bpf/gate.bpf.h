/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The handover gate (include/handover.h): a program of a module whose maps can be handed to
 * the next agent counts only while the gate names its generation. An array lookup of a
 * constant key, which the verifier inlines: a few instructions per event.
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

/* Set by user space before load: 0, or the generation after the one it takes over from. */
const volatile __u32 plumb_generation = 0;

static __always_inline bool gate_open(void)
{
	struct handover_gate *g;
	__u32 zero = 0;

	g = bpf_map_lookup_elem(&plumb_gate, &zero);
	return g && g->generation == plumb_generation;
}

#endif
