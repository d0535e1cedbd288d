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
	SCHED_LOST_UNCLOSED, /* a thread blocked again with its last episode never woken and
			      * not recoverable from its sched_info: that episode */
	WAIT_LOST_BRI_FULL, /* a wait's resource could not get a wait_bri entry: its time is in
			     * the thread's per-kind totals, not under a resource */
	WAIT_LOST_FUTEX_KEY, /* a shared futex whose mapping bpf_find_vma could not read at the
			      * switch-out nor at the switch-in (mmap lock busy): keyed by (mm,
			      * address) like a private one instead, counted when the wait ends */
	SCHED_RECOVERED, /* not a loss: an episode whose switch-in closed nothing, ended at the
			  * thread's next switch from its sched_info (episode_recover) */
	SCHED_LOST_SWITCH, /* a switch not traced: the thread leaving a CPU is not the one the
			    * CPU's last traced switch brought in (cpu_switch) */
	SCHED_STALE_QUEUED, /* not a loss: a sleeper's enqueue stamp left by a migration while
			     * its dequeue was delayed, not taken as its wakeup (moved_arrival) */
	SCHED_LOST_REASONS,
};

/*
 * What a thread blocked in, from the syscall its saved registers show at the switch-out
 * (the wait module; docs/metrics.md defines each).
 */
enum wait_kind {
	WAIT_PIPE = 0, /* read/write family on a pipe or FIFO */
	WAIT_SOCKET, /* read/write, send/recv family, accept, connect on a socket */
	WAIT_FUTEX, /* futex WAIT, WAIT_BITSET, LOCK_PI(2), WAIT_REQUEUE_PI, futex_waitv, futex_wait */
	WAIT_EPOLL, /* epoll_wait, epoll_pwait, epoll_pwait2 */
	WAIT_POLL, /* poll, ppoll, select, pselect6 (per thread: no resource) */
	WAIT_KINDS,
	WAIT_NONE = 0xff, /* not in one of these (or not in a syscall) */
};

/* How a wait's resource (BRI) is named: the meaning of wait_key.a and .b. */
enum wait_bri {
	BRI_NONE = 0, /* poll/select */
	BRI_INODE, /* pipe or socket: a = inode number, b = its superblock's dev_t; c = a unix
		    * socket's peer's inode number */
	BRI_FUTEX_PRIVATE, /* a = user address, b = the mm (address space) */
	BRI_FUTEX_SHARED, /* a = inode number of the mapped file, b = offset in it; dev in c */
	BRI_EPOLL, /* a = the eventpoll instance, b = the fd it was waited through */
};

/*
 * (thread, resource) pairs wait_bri holds by default (--wait-capacity); user space removes
 * those of exited threads, and above 3/4 full the least recently flushed, down to 1/2
 */
#define WAIT_BRI_MAX 65536

/* One thread's waits on one resource (BPF hash wait_bri). */
struct wait_key {
	__u32 tid;
	__u8 kind; /* enum wait_kind */
	__u8 bri; /* enum wait_bri */
	__u16 pad;
	__u64 a, b;
	__u32 c; /* BRI_FUTEX_SHARED: dev_t of the file */
	__u32 pad2;
};

struct wait_val {
	__u64 ns; /* time blocked in these waits */
	__u64 n; /* blocking episodes */
	__u64 wakes; /* futex: the episodes ended by a FUTEX_WAKE-family call on the same key */
	__u64 last_ns; /* wait_bri: when the thread last flushed its waits here */
};

/*
 * Per CPU, the CPU's last context switch: the thread it switched in, and (steal_on) the CPU's
 * steal (rq->prev_steal_time_rq) then: the steal since is that thread's, added at its
 * switch-out; (sleep_remainder) the run-queue clock then, which is the thread's
 * sched_info.last_arrival, and its CPU time then: a running thread's counts as of its arrival.
 */
struct sched_cpu {
	__u64 last; /* steal */
	__u64 arrive_ns, arrive_run_ns;
	__u32 tid;
	__u32 valid; /* 0 until the CPU's first switch with steal_on */
	__u32 seen; /* 0 until the CPU's first traced switch: tid is known */
	__u32 pad;
};

/* Per thread, in task storage: the off-CPU time the kernel does not count itself. */
struct sched_thread {
	__u64 off_ns; /* run-queue clock at the blocking switch-out; 0 while not off */
	__u64 off_delay, off_pcount; /* its sched_info.run_delay and .pcount then */
	__u64 ns[SCHED_OFF_KINDS]; /* closed episodes; SCHED_BLOCK includes SCHED_IOWAIT */
	__u32 off_kind; /* enum sched_off of the open episode */
	__u16 open_woken; /* the open futex wait was ended by a futex wake (sched_waking) */
	/* the open futex wait's mapping could not be read at the switch-out: tried at switch-in
	 * (in this first cache line, which the switch reads anyway) */
	__u16 open_unresolved;
	/* hypervisor steal while on a CPU (steal_on): its ended slices (the open one: sched_steal) */
	__u64 steal_ns;
	/* the wait module: per-kind totals, the open wait, and the resource being accumulated */
	__u64 wait_ns[WAIT_KINDS], wait_n[WAIT_KINDS];
	__u64 futex_wakes; /* wakes this thread did that woke a futex waiter */
	struct wait_key open; /* .kind WAIT_NONE when the open episode is no wait */
	struct wait_key slot; /* flushed to wait_bri when a wait on another resource ends */
	struct wait_val slot_val;
	/* the last shared futex's key, by (mm, address): bpf_find_vma only when either changes */
	__u64 fcache_uaddr, fcache_mm, fcache_a, fcache_b;
	__u32 fcache_c, fcache_bri;
	/*
	 * sleep_remainder: the thread's clock, CPU, run-queue, and blocked + stolen time when
	 * its sleep starts counting (its first enqueue, or the agent's first read); base_ns 0
	 * until then
	 */
	__u64 base_ns, base_run_ns, base_rq_ns, base_rest_ns;
	/*
	 * moved asleep while its dequeue was delayed: the run-queue clock then (0: not); the run
	 * delay the kernel added for the stale enqueue stamps that leaves, which is sleep; and
	 * the last such stamp and its part (bpf/sched.bpf.c moved_arrival, run_delay)
	 */
	__u64 moved_ns, rq_stale_ns, stale_stamp, stale_last_ns;
};

enum sched_record_kind {
	SCHED_REC_LIVE = 1, /* iterator: a live thread's counts so far */
	SCHED_REC_EXIT, /* ring buffer: a thread's final counts, at its exit */
	/*
	 * iterator: a thread past PF_EXITING, tid and start_ns only: its exit record is on its
	 * way (do_exit tears the mm down between the two), or already read
	 */
	SCHED_REC_EXITING,
};

/* One thread's counts: from the iterator (live threads) or the exit ring buffer. */
struct sched_record {
	__u32 kind; /* enum sched_record_kind */
	__u32 tid;
	__u32 pid; /* thread group id */
	__u32 ppid; /* the thread group id of its parent process */
	__u64 cgroup_id;
	__u64 start_ns; /* task->start_time (CLOCK_MONOTONIC): tells a reused tid apart */
	__u64 run_ns; /* se.sum_exec_runtime: the kernel's own, since the thread started */
	__u64 rq_ns; /* sched_info.run_delay: runnable, waiting for a CPU; idem */
	__u64 read_ns; /* the reading CPU's run-queue clock: the open episode counts up to it */
	__u64 steal_ns; /* hypervisor steal while it was on a CPU, since the agent attached (not
			 * in run_ns: kernels with CONFIG_PARAVIRT_TIME_ACCOUNTING take it out) */
	__u64 off_ns[SCHED_OFF_KINDS]; /* since the agent attached; open episodes included */
	__u64 wait_ns[WAIT_KINDS], wait_n[WAIT_KINDS]; /* idem (open: time yes, count not yet) */
	__u64 futex_wakes;
	struct wait_key slot; /* the thread's last resource (.kind WAIT_NONE: none yet) */
	struct wait_val slot_val; /* what it has there, not yet in wait_bri */
	char comm[16];
};

#endif
