/* SPDX-License-Identifier: GPL-2.0 */
/* What the blk module offers its views (plumb diagnose) beyond the module interface. */
#ifndef PLUMB_BLK_MODULE_H
#define PLUMB_BLK_MODULE_H

#include <stddef.h>
#include <stdint.h>

struct plumb_module;

/* Sectors one cgroup submitted to one disk, all ops, cumulative. */
struct blk_sample {
	uint64_t cgroup_id;
	char cgroup[256]; /* "" when not named yet */
	char device[32];
	uint64_t sectors;
};

/* Every (cgroup, disk) with sectors now. The caller frees *out. */
int blk_snapshot(struct plumb_module *m, struct blk_sample **out, size_t *n);

/* One live thread's sectors on one disk, cumulative (sector_count, per thread). */
struct blk_thread_sample {
	uint32_t tid, pid;
	uint64_t start_ns;
	char device[32];
	uint64_t read, write; /* write: writes, discards and the rest */
};

/*
 * Every live thread that submitted bios: its sectors per disk (the first 4 disks it used).
 * The caller frees *out.
 */
int blk_thread_snapshot(struct plumb_module *m, struct blk_thread_sample **out, size_t *n);

#endif
