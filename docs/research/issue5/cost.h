#ifndef COST_H
#define COST_H

enum cost_mode {
	MODE_EMPTY = 0,	   /* programs return at once */
	MODE_STORAGE = 1,  /* per-thread state machine in task storage (the 5 scheduling times) */
	MODE_WAITS = 2,	   /* + pt_regs, syscall classification, fd -> file -> BRI, wait hash */
	MODE_HASH = 3,	   /* MODE_STORAGE with a hash keyed by tid instead of task storage */
	MODE_LEAN = 4,	   /* runtime/rq_time left to the kernel (sum_exec_runtime, run_delay):
			      storage only at a blocking switch-out and at the waking */
	MODE_NOWAKE = 5,   /* MODE_LEAN without sched_waking: wake time from sched_info.last_queued
			      and run_delay, clock from rq->clock */
	MODE_KTIME = 7,	   /* blocking switch-out: bpf_ktime_get_ns() only */
	MODE_GET = 8,	   /* blocking switch-out: task storage get (create) only */
	MODE_REGS = 9,	   /* waking: a look at the wakee's saved orig_ax only */
	MODE_LEAN_WAITS = 6,
	MODE_NOWAKE_WAITS = 10, /* MODE_NOWAKE + classification and wait slot, ended at switch-in;
				   sched_waking only looks at futex waiters' saved registers */ /* MODE_LEAN + pt_regs classification, wait slot in task storage */
};

enum thread_state_kind { ST_RUNNING, ST_RUNNABLE, ST_SLEEP, ST_BLOCK, ST_IOWAIT, ST_N };

enum wait_kind { WK_NONE, WK_PIPE, WK_SOCKET, WK_FUTEX, WK_EPOLL, WK_POLL, WK_OTHER_FD };

struct thread_state {
	__u64 ts;
	__u64 ns[8]; /* indexed by state & 7 */
	__u32 state;
	__u32 wait_kind;
	__u64 bri; /* pipe/socket inode, futex uaddr, eventpoll pointer */
	__u64 bri2; /* futex: mm (private) */
	__u64 run_delay_out; /* MODE_NOWAKE */
	__u64 wait_ns, wait_count; /* MODE_LEAN_WAITS: the current BRI's slot */
	__u64 flushes;
	__u32 state_kind_pad; /* the slot's kind */
	__u32 pad;
	__u64 slot_bri, slot_bri2;
};

struct wait_key {
	__u32 tid;
	__u32 kind;
	__u64 bri;
	__u64 bri2;
};

struct wait_val {
	__u64 ns;
	__u64 count;
	__u64 wakes; /* futex wakes charged to this key */
};

#endif
