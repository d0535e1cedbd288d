/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A module's BPF maps and links handed from one agent to the next over a restart (--pin DIR,
 * docs/continuity.md), so that nothing goes uncounted while no agent runs. At a clean exit
 * the agent pins the module's maps and links in DIR/<module> and leaves the programs
 * attached; the next agent with the same BPF object takes the maps over before it loads
 * its programs, attaches them beside the old ones, and moves the module's gate
 * (include/handover.h) to them in one write: from then on its programs count and the old
 * ones do not; then the old links go. Only the maps' counts are handed over this way; what
 * user space adds goes in the counters map (src/export/carry.c).
 */
#ifndef PLUMB_ADOPT_H
#define PLUMB_ADOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

struct bpf_map;
struct bpf_object;
struct bpf_object_skeleton;

struct adopt {
	char dir[4200]; /* DIR/<module>; empty without --pin */
	bool adopted; /* the maps are the previous agent's */
	bool handed; /* at exit: pinned for the next agent */
	unsigned int generation; /* of this agent's programs */
	struct bpf_object *obj; /* the module's, with its plumb_gate_cpu */
	uint64_t object_hash;
};

/*
 * Before load. Without pin, nothing (the gate stays open to generation 0). With it: when
 * DIR/<module> holds the maps an agent with the same BPF object and settings (its read-only
 * data, set before this call) left, every map of obj but its read-only data takes the old
 * one's place and *generation is the next one; anything else there (another object or
 * settings, maps of another size) is removed and its links detach. A map that is not
 * created (autocreate off) is neither adopted nor handed over.
 */
int adopt_maps(struct adopt *a, const char *pin, const char *module,
	       const struct bpf_object_skeleton *skel, struct bpf_map *gate,
	       unsigned int *generation, char *err, size_t errlen);

/* After attach: the gate moves to this agent's programs, then the old links and pins go. */
int adopt_activate(struct adopt *a, struct bpf_map *gate, char *err, size_t errlen);

/*
 * At a clean exit: pins the maps and the attached links in DIR/<module> and disconnects the
 * links, so destroying them leaves the programs attached. On failure nothing stays pinned
 * and nothing is disconnected. 0 or -errno.
 */
int adopt_hand_over(struct adopt *a, const struct bpf_object_skeleton *skel);

/*
 * DIR/<name>: a hash map of the module's own (not preallocated) for what user space hands to
 * the next agent beside the maps, made if missing or of another shape. Its fd or -errno.
 */
int adopt_side_map(const char *pin, const char *name, __u32 key_size, __u32 value_size,
		   __u32 max_entries, char *err, size_t errlen);

/* Removes whatever an agent left in DIR/<module> (its links detach). */
void adopt_discard(const char *pin, const char *module);

/*
 * Before adopt_maps: what the module hands over beside the maps (what) is missing, so the
 * maps left are not to be taken over: adopt_discard, said in the log when there were some.
 */
void adopt_refuse(const char *pin, const char *module, const char *what);

#endif
