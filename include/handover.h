/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The gate of a module whose maps and links one agent hands to the next over a restart
 * (--pin, src/handover.c, docs/continuity.md). Shared by the BPF programs and user space.
 */
#ifndef PLUMB_HANDOVER_H
#define PLUMB_HANDOVER_H

/*
 * The one entry of a module's plumb_gate map: the generation of the programs that are to
 * count (a rodata constant set at load). An agent taking over attaches its programs beside
 * the old ones, then moves generation to its own in one write; each CPU follows at its next
 * event (plumb_gate_cpu, bpf/gate.bpf.h), so every event is counted by exactly one of them.
 * object_hash names the BPF object the maps were made for and its settings (its read-only
 * data): an agent adopts them only from the same object, set alike.
 */
struct handover_gate {
	__u32 generation;
	__u32 pad;
	__u64 object_hash;
};

#endif
