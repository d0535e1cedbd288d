/* SPDX-License-Identifier: GPL-2.0 */
/* Types shared by bpf/blk.bpf.c and src/modules/blk.c: fixed-width only. */
#ifndef PLUMB_BLK_H
#define PLUMB_BLK_H

/* What a bio or request does (REQ_OP_*), folded to what the metrics show. */
enum blk_op {
	BLK_READ = 0,
	BLK_WRITE,
	BLK_DISCARD, /* discard, secure erase, write zeroes */
	BLK_FLUSH,
	BLK_OTHER, /* zone management, driver-private */
	BLK_OPS,
};

/* Sectors (512 bytes) that a cgroup's threads submitted to a disk (per-CPU hash). */
struct blk_key {
	__u64 cgroup_id; /* the submitting thread's */
	__u32 dev; /* the whole disk, as major << 20 | minor (the kernel's dev_t) */
	__u32 op; /* enum blk_op */
};

/*
 * Latency of completed requests, from their start (rq->start_time_ns, set when the request
 * was made) to the completion: bucket k counts requests <= 2^(BLK_LAT_MIN_SHIFT + k) ns.
 */
#define BLK_LAT_MIN_SHIFT 10
#define BLK_LAT_BUCKETS	  26

struct blk_lat_key {
	__u32 dev;
	__u32 op;
};

struct blk_lat {
	__u64 count[BLK_LAT_BUCKETS];
	__u64 sum_ns;
};

/*
 * sector_count per thread (task storage, freed with the thread): the first BLK_THREAD_DISKS
 * disks it submitted to, reads and everything else (writes, discards) apart.
 */
#define BLK_THREAD_DISKS 4

struct blk_thread {
	__u32 dev[BLK_THREAD_DISKS]; /* 0: unused */
	__u64 read[BLK_THREAD_DISKS];
	__u64 write[BLK_THREAD_DISKS];
};

/* What the blk_threads_read iterator writes: one live thread's sectors on one disk. */
struct blk_thread_record {
	__u32 tid, pid;
	__u64 start_ns; /* task->start_time: with the tid, names the thread */
	__u32 dev;
	__u32 pad;
	__u64 read, write;
};

/* (cgroup, disk, op) triples and (disk, op) pairs the maps hold */
#define BLK_SECTORS_MAX 16384
#define BLK_LAT_MAX	1024

enum blk_lost_reason {
	BLK_LOST_SECTORS_FULL = 0, /* a new (cgroup, disk, op) found blk_sectors full */
	BLK_LOST_LAT_FULL, /* a new (disk, op) found blk_latency full */
	BLK_LOST_NO_START, /* a request completed without a start time (iostats off) */
	BLK_LOST_THREAD_DISKS, /* a thread's bio to a disk beyond its first BLK_THREAD_DISKS */
	BLK_LOST_THREAD_STORAGE, /* a thread's bio when its storage could not be made */
	BLK_LOST_REASONS,
};

#endif
