// SPDX-License-Identifier: GPL-2.0
/*
 * sched: where each thread's time goes — on a CPU, waiting for one, blocked, waiting for I/O,
 * sleeping — from the scheduler's tracepoints, nothing on syscalls.
 *
 * Time on a CPU and time runnable but waiting for one are the kernel's own per-thread counts
 * (se.sum_exec_runtime, sched_info.run_delay: /proc/<tid>/schedstat's first two fields), read
 * by the sched_read iterator; nothing runs per event for them. What the kernel does not count
 * is the time off the CPU and why: the switch-out of a thread that blocks stamps the time and
 * the kind (sleep, uninterruptible block, I/O wait) in its task storage, and its wakeup adds
 * the episode to the kind. Runnable switch-outs (preemption) return at once: the kernel's run
 * delay covers them.
 *
 * The clock is the scheduler's own (the run queue's clock, which __schedule() and the wakeup
 * have just updated; a wakeup's end is the task's sched_info.last_queued, stamped when it was
 * enqueued), not bpf_ktime_get_ns(): a clock read costs ~165 ns on these VMs and a context
 * switch would pay two. Kernels without CONFIG_FAIR_GROUP_SCHED (no se.cfs_rq) read ktime.
 *
 * Nothing is allocated here: sched_switch and sched_wakeup run with a run-queue lock held, and
 * creating task storage there allocates memory (kmalloc on 6.1), which can wake a kernel thread
 * and take a run-queue lock again: a 6.1 guest hung with it. The storage is created where that
 * is safe: for every thread by the iterator at the agent's start, and for each new one at fork.
 *
 * The wakeup is sched_wakeup, not sched_waking: a waker can run sched_waking while the thread
 * is still inside schedule() on another CPU, before its switch-out is traced; sched_wakeup
 * comes after try_to_wake_up() has waited for the switch-out to finish.
 * (docs/research/issue5-wait.md: the measurements behind this design.)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "plumb_sched.h"

char LICENSE[] SEC("license") = "GPL";

/* include/linux/sched.h */
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD	     0x0080
#define TASK_NOLOAD	     0x0400
#define PF_EXITING	     0x00000004

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sched_thread);
} sched_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries,
	       4 * 1024 * 1024); /* 96 bytes a record with its header: 43,000 between two drains */
} sched_exits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCHED_LOST_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} sched_lost SEC(".maps");

/* Kernels before 5.14 named the state field `state` (and made it a long). */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/* The run-queue clock of the task's CPU (ns, sched_clock), or ktime where it cannot be read. */
static __always_inline __u64 task_rq_clock(struct task_struct *t)
{
	struct cfs_rq *cfs;

	if (!bpf_core_field_exists(t->se.cfs_rq))
		return bpf_ktime_get_ns();
	cfs = BPF_CORE_READ(t, se.cfs_rq);
	return cfs ? BPF_CORE_READ(cfs, rq, clock) : 0;
}

/* When a waking task was enqueued, on the same clock: its run delay starts there. */
static __always_inline __u64 wakeup_clock(struct task_struct *p)
{
	__u64 queued = 0;

	if (!bpf_core_field_exists(p->se.cfs_rq))
		return bpf_ktime_get_ns();
	if (bpf_core_field_exists(p->sched_info))
		queued = BPF_CORE_READ(p, sched_info.last_queued);
	return queued ? queued : task_rq_clock(p);
}

static __always_inline void count_lost(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&sched_lost, &reason);

	if (n)
		*n += 1;
}

/*
 * prev_state is the raw __state: test bits, never compare (0x2001 is an interruptible,
 * freezable sleep). A thread is runnable when either the traced state or the state now is 0:
 * a pending signal sets it running after prev_state was sampled.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct sched_thread *t;
	__u32 kind = SCHED_SLEEP;
	__u64 now;

	if (!prev_state || (prev_state & TASK_DEAD) || !task_state(prev))
		return 0;
	now = task_rq_clock(prev);
	if (!now)
		return 0;
	t = bpf_task_storage_get(&sched_threads, prev, NULL, 0);
	if (!t) {
		count_lost(SCHED_LOST_STORAGE);
		return 0;
	}
	if (t->off_ns)
		count_lost(SCHED_LOST_UNCLOSED);
	if ((prev_state & TASK_UNINTERRUPTIBLE) && !(prev_state & TASK_NOLOAD))
		kind = BPF_CORE_READ_BITFIELD(prev, in_iowait) ? SCHED_IOWAIT : SCHED_BLOCK;
	t->off_kind = kind;
	t->off_ns = now;
	return 0;
}

static __always_inline void off_add(__u64 *ns, __u32 kind, __u64 d)
{
	if (kind == SCHED_SLEEP) {
		ns[SCHED_SLEEP] += d;
		return;
	}
	ns[SCHED_BLOCK] += d;
	if (kind == SCHED_IOWAIT)
		ns[SCHED_IOWAIT] += d;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	struct sched_thread *t = bpf_task_storage_get(&sched_threads, p, NULL, 0);
	__u64 now;

	if (!t || !t->off_ns)
		return 0;
	now = wakeup_clock(p);
	if (now > t->off_ns)
		off_add(t->ns, t->off_kind, now - t->off_ns);
	t->off_ns = 0;
	return 0;
}

/*
 * A thread's counts so far; an open episode counts up to now, on the clock of the CPU that
 * reads (ours: updated when we were scheduled, so at most a tick behind).
 */
static __always_inline void record_fill(struct sched_record *r, struct task_struct *task)
{
	__u64 now;

	struct sched_thread *t = bpf_task_storage_get(&sched_threads, task, NULL, 0);

	r->tid = BPF_CORE_READ(task, pid);
	r->pid = BPF_CORE_READ(task, tgid);
	r->cgroup_id = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
	r->start_ns = BPF_CORE_READ(task, start_time);
	r->run_ns = BPF_CORE_READ(task, se.sum_exec_runtime);
	r->rq_ns = bpf_core_field_exists(task->sched_info) ?
			   BPF_CORE_READ(task, sched_info.run_delay) :
			   0; /* CONFIG_SCHED_INFO off: user space says so */
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), task->comm);
	if (!t) {
		r->off_ns[SCHED_SLEEP] = r->off_ns[SCHED_BLOCK] = r->off_ns[SCHED_IOWAIT] = 0;
		return;
	}
	r->off_ns[SCHED_SLEEP] = t->ns[SCHED_SLEEP];
	r->off_ns[SCHED_BLOCK] = t->ns[SCHED_BLOCK];
	r->off_ns[SCHED_IOWAIT] = t->ns[SCHED_IOWAIT];
	now = task_rq_clock(bpf_get_current_task_btf());
	if (t->off_ns && now > t->off_ns)
		off_add(r->off_ns, t->off_kind, now - t->off_ns);
}

/* A new thread's storage, made in its parent's context (no scheduler lock held). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!bpf_task_storage_get(&sched_threads, child, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE))
		count_lost(SCHED_LOST_STORAGE);
	return 0;
}

/* Runs in the exiting thread: its final counts, to user space (drained on the agent's tick). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_exit, struct task_struct *p)
{
	struct sched_record *r = bpf_ringbuf_reserve(&sched_exits, sizeof(*r), 0);

	if (!r) {
		count_lost(SCHED_LOST_RINGBUF_FULL);
		return 0;
	}
	r->kind = SCHED_REC_EXIT;
	r->pad = 0;
	record_fill(r, p);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/*
 * Every live thread of the host; exiting ones are left to their exit record. Makes the
 * storage of threads that have none (those older than the agent, at its first read).
 */
SEC("iter/task")
int sched_read(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct sched_record r = { .kind = SCHED_REC_LIVE };

	if (!task || (task->flags & PF_EXITING))
		return 0;
	if (!bpf_task_storage_get(&sched_threads, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE))
		count_lost(SCHED_LOST_STORAGE);
	record_fill(&r, task);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
