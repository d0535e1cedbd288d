/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Types shared by bpf/sched.bpf.c and src/modules/sched.c: fixed-width only. Not "sched.h":
 * with -Iinclude that name would hide the C library's <sched.h>.
 */
#ifndef PLUMB_PLUMB_SCHED_H
#define PLUMB_PLUMB_SCHED_H

/* Why a thread was off the CPU, between a blocking switch-out and its wakeup. */
enum sched_off {
	SCHED_SLEEP = 0, /* interruptible sleep, stopped, traced, idle kernel threads */
	SCHED_BLOCK, /* uninterruptible sleep (TASK_UNINTERRUPTIBLE without TASK_NOLOAD) */
	SCHED_IOWAIT, /* the part of SCHED_BLOCK spent in io_schedule() (in_iowait) */
	SCHED_OFF_KINDS,
};

/* Reasons something was not counted; index of the sched_lost per-CPU array. */
enum sched_lost_reason {
	SCHED_LOST_RINGBUF_FULL = 0, /* an exit record found the ring buffer full: the thread's
				      * counts since the last read */
	SCHED_LOST_STORAGE, /* a thread without task storage (its creation at fork or at the
			     * agent's first read failed): counted then, and each wait of it */
	SCHED_LOST_UNCLOSED, /* a thread blocked again with its last episode never woken: that
			      * episode (a wakeup the tracepoint did not show) */
	SCHED_LOST_REASONS,
};

/* Per thread, in task storage: the off-CPU time the kernel does not count itself. */
struct sched_thread {
	__u64 off_ns; /* run-queue clock at the blocking switch-out; 0 while not off */
	__u64 ns[SCHED_OFF_KINDS]; /* closed episodes; SCHED_BLOCK includes SCHED_IOWAIT */
	__u32 off_kind; /* enum sched_off of the open episode */
	__u32 pad;
};

enum sched_record_kind {
	SCHED_REC_LIVE = 1, /* iterator: a live thread's counts so far */
	SCHED_REC_EXIT, /* ring buffer: a thread's final counts, at its exit */
};

/* One thread's counts: from the iterator (live threads) or the exit ring buffer. */
struct sched_record {
	__u32 kind; /* enum sched_record_kind */
	__u32 tid;
	__u32 pid; /* thread group id */
	__u32 pad;
	__u64 cgroup_id;
	__u64 start_ns; /* task->start_time (CLOCK_MONOTONIC): tells a reused tid apart */
	__u64 run_ns; /* se.sum_exec_runtime: the kernel's own, since the thread started */
	__u64 rq_ns; /* sched_info.run_delay: runnable, waiting for a CPU; idem */
	__u64 off_ns[SCHED_OFF_KINDS]; /* since the agent attached; open episodes included */
	char comm[16];
};

#endif
