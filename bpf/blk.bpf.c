// SPDX-License-Identifier: GPL-2.0
/*
 * blk: sectors each workload submits to each disk, and the latency of each disk's requests.
 *
 * Sectors at tp_btf/block_bio_queue, in the submitting thread's context (its cgroup): a bio
 * is counted once on each device it passes through, so a stacked device (loop, dm, md) and
 * the device under it both count it, each correctly for itself. Buffered writes reach the
 * disk from the kernel's flusher threads: they are charged to those threads' cgroup, not to
 * the writer (docs/metrics.md).
 *
 * The same sectors per thread, in task storage: plumb diagnose's sector_count, read by the
 * task iterator blk_threads_read (live threads only; the cgroup counts keep the dead's).
 *
 * Latency at tp_btf/block_rq_complete: now - rq->start_time_ns, which the block layer stamps
 * when it makes the request (when the queue keeps I/O statistics, the default; a request
 * without it is counted as no_start). One clock read per completed request.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "blk.h"
#include "hist.bpf.h"
#include "gate.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* include/linux/blk_types.h: REQ_OP_BITS 8 */
#define REQ_OP_MASK	    0xff
#define REQ_OP_READ	    0
#define REQ_OP_WRITE	    1
#define REQ_OP_FLUSH	    2
#define REQ_OP_DISCARD	    3
#define REQ_OP_SECURE_ERASE 5
#define REQ_OP_WRITE_ZEROES 9
#define SECTOR_SHIFT	    9
#define MINORBITS	    20

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, BLK_SECTORS_MAX);
	__type(key, struct blk_key);
	__type(value, __u64);
} blk_sectors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, BLK_LAT_MAX);
	__type(key, struct blk_lat_key);
	__type(value, struct blk_lat);
} blk_latency SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BLK_LOST_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} blk_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct blk_thread);
} blk_threads SEC(".maps");

static const __u64 zero_sectors;
static const struct blk_lat zero_lat;

static __always_inline void count_lost(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&blk_lost, &reason);

	if (n)
		*n += 1;
}

static __always_inline __u32 op_of(__u32 opf)
{
	switch (opf & REQ_OP_MASK) {
	case REQ_OP_READ:
		return BLK_READ;
	case REQ_OP_WRITE:
		return BLK_WRITE;
	case REQ_OP_FLUSH:
		return BLK_FLUSH;
	case REQ_OP_DISCARD:
	case REQ_OP_SECURE_ERASE:
	case REQ_OP_WRITE_ZEROES:
		return BLK_DISCARD;
	}
	return BLK_OTHER;
}

static __always_inline __u32 disk_dev(struct gendisk *disk)
{
	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << MINORBITS) | BPF_CORE_READ(disk, first_minor);
}

/* Creates the key's entry (zero) when it is new; NULL when the map is full. */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *zero,
					    __u32 full_reason)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	/* -EEXIST: another CPU made it first; anything else: the map is full */
	if (bpf_map_update_elem(map, key, zero, BPF_NOEXIST) && !bpf_map_lookup_elem(map, key)) {
		count_lost(full_reason);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

static __always_inline void thread_add(struct task_struct *task, __u32 dev, bool read,
				       __u64 sectors)
{
	struct blk_thread *t =
		bpf_task_storage_get(&blk_threads, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	int i;

	if (!t) {
		count_lost(BLK_LOST_THREAD_STORAGE);
		return;
	}
	for (i = 0; i < BLK_THREAD_DISKS; i++) {
		if (t->dev[i] && t->dev[i] != dev)
			continue;
		t->dev[i] = dev; /* only this thread writes its storage */
		if (read)
			t->read[i] += sectors;
		else
			t->write[i] += sectors;
		return;
	}
	count_lost(BLK_LOST_THREAD_DISKS);
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(blk_bio_queue, struct bio *bio)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct blk_key key = {};
	__u64 *sectors;
	__u32 size = bio->bi_iter.bi_size;

	if (!size || !gate_open())
		return 0; /* a flush or an empty bio: no sectors */
	key.cgroup_id = task->cgroups->dfl_cgrp->kn->id;
	key.dev = disk_dev(bio->bi_bdev->bd_disk);
	key.op = op_of(bio->bi_opf);
	sectors = lookup_or_init(&blk_sectors, &key, &zero_sectors, BLK_LOST_SECTORS_FULL);
	if (sectors)
		*sectors += size >> SECTOR_SHIFT;
	if (key.dev)
		thread_add(task, key.dev, key.op == BLK_READ, size >> SECTOR_SHIFT);
	return 0;
}

/* Called for each part of a request that completes; the last part ends the request. */
SEC("tp_btf/block_rq_complete")
int BPF_PROG(blk_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	struct blk_lat_key key = {};
	struct blk_lat *lat;
	__u64 start, now;
	__u32 b;

	if (nr_bytes < rq->__data_len || !gate_open())
		return 0;
	start = rq->start_time_ns;
	if (!start) {
		count_lost(BLK_LOST_NO_START);
		return 0;
	}
	now = bpf_ktime_get_ns();
	key.dev = disk_dev(rq->q->disk);
	key.op = op_of(rq->cmd_flags);
	lat = lookup_or_init(&blk_latency, &key, &zero_lat, BLK_LOST_LAT_FULL);
	if (!lat || now < start)
		return 0;
	b = log2_bucket(now - start, BLK_LAT_MIN_SHIFT, BLK_LAT_BUCKETS);
	if (b < BLK_LAT_BUCKETS)
		lat->count[b] += 1;
	lat->sum_ns += now - start;
	return 0;
}

/* Every live thread's sectors per disk (those that ever submitted a bio). */
SEC("iter/task")
int blk_threads_read(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct blk_thread_record r = {};
	struct blk_thread *t;
	int i;

	if (!task)
		return 0;
	t = bpf_task_storage_get(&blk_threads, task, NULL, 0);
	if (!t)
		return 0;
	r.tid = task->pid;
	r.pid = task->tgid;
	r.start_ns = task->start_time;
	for (i = 0; i < BLK_THREAD_DISKS; i++) {
		if (!t->dev[i])
			break;
		r.dev = t->dev[i];
		r.read = t->read[i];
		r.write = t->write[i];
		bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	}
	return 0;
}
