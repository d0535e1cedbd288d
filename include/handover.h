/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The gate of a module whose maps and links one agent hands to the next over a restart
 * (--pin, src/handover.c, docs/continuity.md). Shared by the BPF programs and user space.
 */
#ifndef PLUMB_HANDOVER_H
#define PLUMB_HANDOVER_H

/*
 * The one entry of a module's plumb_gate map: the generation of the programs that count now
 * (a rodata constant set at load), and object_hash, which names the BPF object the maps were
 * made for and its settings (its read-only data): an agent adopts them only from the same
 * object, set alike. Read by user space only: the programs read their CPU's handover_gate_cpu.
 */
struct handover_gate {
	__u32 generation;
	__u32 pad;
	__u64 object_hash;
};

/*
 * Per CPU (plumb_gate_cpu, bpf/gate.bpf.h): the generation whose programs count on this CPU,
 * and the one user space wants. An agent taking over attaches its programs beside the old
 * ones, then sets want on every CPU; each CPU moves cur at its next event, so every event is
 * counted by exactly one of them. One 8-byte word: a CPU reads both fields from one line.
 */
struct handover_gate_cpu {
	__u32 cur;
	__u32 want;
};

#endif
