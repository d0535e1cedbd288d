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
 *
 * Without the wait module (sleep_remainder), sleeps have no episodes at all: a thread's time
 * is its CPU time, its run delay, its blocked and stolen time, and the rest, which is its
 * interruptible sleep (and stopped, traced). Only an uninterruptible block opens an episode;
 * a switch that brings in a thread whose last block was not one (the kernel's own
 * sched_contributes_to_load, set at each block) has nothing to close. So most switches touch
 * no task storage: under a switch storm the program runs 72 ns instead of 91 (bpf_stats;
 * bench/builds.py; docs/architecture.md "Sleep as the remainder").
 * (docs/research/issue5-wait.md: the measurements behind this design.)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "plumb_sched.h"
#include "task.bpf.h"
#include "gate.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* include/linux/sched.h */
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD	     0x0080
#define TASK_WAKING	     0x0200
#define TASK_NOLOAD	     0x0400
#define TASK_FROZEN	     0x8000
#define PF_EXITING	     0x00000004
#define ENOSYS		     38
#define S_IFMT		     00170000
#define S_IFSOCK	     0140000
#define S_IFIFO		     0010000
#define PAGE_SHIFT	     12
#define AF_UNIX		     1
/* include/uapi/linux/futex.h */
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CMD_MASK	   0x7f
#define FUTEX2_PRIVATE	   128

/* the wait module is on: blocking switch-outs say what they wait on (set before load) */
const volatile bool wait_on = false;
/*
 * Sleep as the remainder (see the top; set before load, never with wait_on, only where the
 * kernel has sched_info, sched_contributes_to_load, the run-queue clock, and keeps IRQ time
 * in CPU time: src/probe.c FEAT_SLEEP_REMAINDER).
 */
const volatile bool sleep_remainder = false;
/*
 * Episodes close when the thread is switched in, at its sched_info.last_queued (when the
 * wakeup enqueued it): one tracepoint per context switch instead of two. Off on kernels
 * without CONFIG_SCHED_INFO: the sched_wakeup program closes them there.
 */
const volatile bool close_at_switch_in = false;
/* tests only: see fault_thread() */
const volatile bool fault_miss_switch_in = false;
const volatile bool fault_hide_switch_in = false;
/*
 * Hypervisor steal: a kernel with CONFIG_PARAVIRT_TIME_ACCOUNTING takes the time the
 * hypervisor ran something else on a CPU out of the CPU time of the thread that was on it, and
 * keeps it per run queue (rq->prev_steal_time_rq, folded in at each clock update). User space
 * sets this when the kernel has the field and the host has had steal: every switch then reads
 * the CPU's steal so far, and what came since the CPU's last switch is the leaving thread's.
 * Elsewhere steal is in the CPU time, or there is none, and switches do not pay for it.
 */
__u32 steal_on = 0;

/*
 * Threads marked by sched_migrate_task whose switch-in has not come yet: while there are any,
 * every switch-in looks at the arriving thread's storage (moved_arrival), also where sleep is
 * the remainder and most switch-ins touch none; otherwise a switch reads only this.
 */
__s64 moved_pending = 0;

/* how far from a move its stale enqueue stamp may be: the same balance's attach */
#define MOVED_STAMP_NS 1000000

/*
 * Per CPU, not per thread: a switch compares the CPU's steal with its own slot (an inlined
 * lookup) and touches the leaving thread's storage only when there was steal, which is rare
 * between two switches. A per-thread start (a store in the arriving thread's storage, a lookup
 * for every preempted one) cost ~3 ns a switch more (bpf_stats, switch storm); the slice
 * itself costs ~6 ns a switch there, mostly the run queue's steal line.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sched_cpu);
} sched_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH); /* preallocated: updated under the run-queue lock */
	__uint(max_entries, WAIT_BRI_MAX);
	__type(key, struct wait_key);
	__type(value, struct wait_val);
} wait_bri SEC(".maps");

/* entries made in wait_bri (only the agent deletes): it prunes when they may pass 3/4 */
__u64 bri_inserted = 0;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sched_thread);
} sched_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries,
	       4 * 1024 * 1024); /* 264 bytes a record with its header: 15,800 between two drains */
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

/*
 * The switch's reads of the tasks are direct loads through the tracepoint's BTF pointers (a
 * faulting pointer reads 0), not bpf_probe_read_kernel() calls: sched_switch ran ~15 ns
 * faster under a context-switch storm (bpf_stats, median of 5 pairs: 170 ns, then 157).
 */
static __always_inline unsigned int task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return ((struct task_struct___pre514 *)t)->state;
}

/* The run-queue clock of the task's CPU (ns, sched_clock), or ktime where it cannot be read. */
static __always_inline __u64 task_rq_clock(struct task_struct *t)
{
	struct cfs_rq *cfs;

	if (!bpf_core_field_exists(t->se.cfs_rq))
		return bpf_ktime_get_ns();
	cfs = t->se.cfs_rq;
	return cfs && cfs->rq ? cfs->rq->clock : 0;
}

static __always_inline void count_lost(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&sched_lost, &reason);

	if (n)
		*n += 1;
}

/* A thread's last_queued is the stamp its move left (sched_migrate_task), not a wakeup's. */
static __always_inline bool moved_stale(__u64 queued, __u64 moved)
{
	return queued && moved && queued + MOVED_STAMP_NS > moved &&
	       queued < moved + MOVED_STAMP_NS;
}

static __always_inline void moved_clear(struct sched_thread *t)
{
	t->moved_ns = 0;
	__sync_fetch_and_add(&moved_pending, -1);
}

/*
 * A thread marked moved arrives on a CPU (now: that run queue's clock, the one the kernel's
 * sched_info_arrive takes). When its last_queued is the move's stamp, the kernel is about to
 * add now less the stamp to its run delay: all of it sleep (its wakeup's own queueing, not
 * known, with it), kept to be taken out of the run delay plumb reports. True then.
 */
static __always_inline bool moved_arrival(struct task_struct *next, struct sched_thread *t,
					  __u64 now)
{
	__u64 queued = next->sched_info.last_queued;
	bool stale = moved_stale(queued, t->moved_ns);

	if (stale) {
		t->stale_last_ns = now > queued ? now - queued : 0;
		t->stale_stamp = queued;
		t->rq_stale_ns += t->stale_last_ns;
		count_lost(SCHED_STALE_QUEUED);
	}
	moved_clear(t);
	return stale;
}

/*
 * The kernel's run delay of a thread, less what moved_arrival() found was sleep. Between that
 * switch-in's tracepoint and sched_info_arrive() the kernel has not added the last part yet:
 * that function clears last_queued and then adds to run_delay (in source order; x86 keeps
 * stores, and loads, in order), so a run delay read before a last_queued that still holds the
 * stamp lacks it. A read that races otherwise is off until the next: user space keeps the
 * highest count, so such a read can raise runqueue time by that part (not seen).
 */
static __always_inline __u64 run_delay(struct task_struct *task, struct sched_thread *t)
{
	__u64 d = BPF_CORE_READ(task, sched_info.run_delay), stale;

	if (!t || !t->rq_stale_ns)
		return d;
	asm volatile("" ::: "memory");
	stale = t->rq_stale_ns;
	if (BPF_CORE_READ(task, sched_info.last_queued) == t->stale_stamp)
		stale -= t->stale_last_ns;
	return d >= stale ? d - stale : 0;
}

/*
 * A switch on this CPU: the steal since the last one (steal_on), which belongs to prev if that
 * switch brought prev in; the slot moves on to next, with its arrival and CPU time then
 * (sleep_remainder). *unseen: prev is not the thread the CPU's last traced switch brought in,
 * so a switch since was not traced (counted; the steal slice is lost): its switch-in of prev
 * closed nothing. *first: no switch on this CPU was traced before this one (the agent has
 * just attached): prev's arrival was not seen either. Where close_at_switch_in, every switch
 * comes here, to see that: one inlined per-CPU lookup, a compare and a store.
 */
static __always_inline __u64 cpu_switch(struct task_struct *prev, struct task_struct *next,
					bool *unseen, bool *first)
{
	__u32 zero = 0;
	struct sched_cpu *c = bpf_map_lookup_elem(&sched_cpus, &zero);
	__u64 steal, d = 0;

	if (!c)
		return 0;
	*first = !c->seen;
	*unseen = c->seen && c->tid != prev->pid;
	if (*unseen)
		count_lost(SCHED_LOST_SWITCH);
	if (steal_on) {
		steal = task_steal(prev);
		if (c->valid && !*unseen && steal > c->last)
			d = steal - c->last;
		c->last = steal;
		c->valid = 1;
	}
	if (sleep_remainder) {
		/* the run-queue clock sched_info_arrive() is about to stamp next with */
		c->arrive_ns = task_rq_clock(prev);
		c->arrive_run_ns = next->se.sum_exec_runtime;
	}
	c->tid = next->pid;
	c->seen = 1;
	return d;
}

/* What the kernel counts as an uninterruptible block (__schedule's sched_contributes_to_load) */
static __always_inline bool blocks_uninterruptibly(unsigned int state)
{
	return (state & TASK_UNINTERRUPTIBLE) && !(state & TASK_NOLOAD) && !(state & TASK_FROZEN);
}

/* When a waking task was enqueued, on the same clock: its run delay starts there. */
static __always_inline __u64 wakeup_clock(struct task_struct *p)
{
	__u64 queued = 0;

	if (!bpf_core_field_exists(p->se.cfs_rq))
		return bpf_ktime_get_ns();
	if (bpf_core_field_exists(p->sched_info))
		queued = p->sched_info.last_queued;
	return queued ? queued : task_rq_clock(p);
}

/*
 * x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl): the calls whose blocking
 * the wait module names. A 32-bit task's numbers are another table's: it is not classified.
 */
enum {
	NR_READ = 0,
	NR_WRITE = 1,
	NR_POLL = 7,
	NR_PREAD64 = 17,
	NR_PWRITE64 = 18,
	NR_READV = 19,
	NR_WRITEV = 20,
	NR_SELECT = 23,
	NR_CONNECT = 42,
	NR_ACCEPT = 43,
	NR_SENDTO = 44,
	NR_RECVFROM = 45,
	NR_SENDMSG = 46,
	NR_RECVMSG = 47,
	NR_FUTEX = 202,
	NR_EPOLL_WAIT = 232,
	NR_PSELECT6 = 270,
	NR_PPOLL = 271,
	NR_EPOLL_PWAIT = 281,
	NR_ACCEPT4 = 288,
	NR_PREADV = 295,
	NR_PWRITEV = 296,
	NR_RECVMMSG = 299,
	NR_SENDMMSG = 307,
	NR_PREADV2 = 327,
	NR_PWRITEV2 = 328,
	NR_EPOLL_PWAIT2 = 441,
	NR_FUTEX_WAITV = 449,
	NR_FUTEX_WAKE = 454,
	NR_FUTEX_WAIT = 455,
};

/* include/linux/futex.h ops */
enum {
	FUTEX_WAIT = 0,
	FUTEX_WAKE = 1,
	FUTEX_REQUEUE = 3,
	FUTEX_CMP_REQUEUE = 4,
	FUTEX_WAKE_OP = 5,
	FUTEX_LOCK_PI = 6,
	FUTEX_UNLOCK_PI = 7,
	FUTEX_WAIT_BITSET = 9,
	FUTEX_WAKE_BITSET = 10,
	FUTEX_WAIT_REQUEUE_PI = 11,
	FUTEX_CMP_REQUEUE_PI = 12,
	FUTEX_LOCK_PI2 = 13,
};

struct futex_vma {
	__u64 uaddr, ino, off;
	__u32 dev;
	bool file;
};

static long futex_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct futex_vma *f = data;
	struct file *file = vma->vm_file;

	if (!file)
		return 0;
	f->file = true;
	f->ino = BPF_CORE_READ(file, f_inode, i_ino);
	f->dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	f->off = f->uaddr - vma->vm_start + (vma->vm_pgoff << PAGE_SHIFT);
	return 0;
}

/*
 * The open wait's key, (mm, address) so far, made a shared futex's: (inode, offset) when its
 * address is in a file or shared memory, which is the same in every process that maps it.
 * False when bpf_find_vma could not read the mapping: it only try-locks the mmap lock, and
 * under irqs off (a switch) refuses while its last unlock is still queued on this CPU.
 */
static __always_inline bool futex_key_file(struct task_struct *task, struct sched_thread *t)
{
	struct wait_key *k = &t->open;
	struct futex_vma f = { .uaddr = k->a };
	__u64 uaddr = k->a, mm = k->b;

	/*
	 * A thread waits on the same shared futex again and again: its key was resolved the
	 * last time (bpf_find_vma costs ~1.7 us here). A mapping replaced at the same address
	 * in between would keep the old key: not seen in practice, accepted.
	 */
	if (t->fcache_uaddr == uaddr && t->fcache_mm == mm && uaddr) {
		k->bri = t->fcache_bri;
		k->a = t->fcache_a;
		k->b = t->fcache_b;
		k->c = t->fcache_c;
		return true;
	}
	if (bpf_find_vma(task, uaddr, futex_vma_cb, &f, 0))
		return false;
	if (f.file) {
		k->bri = BRI_FUTEX_SHARED;
		k->a = f.ino;
		k->b = f.off;
		k->c = f.dev;
	}
	t->fcache_uaddr = uaddr;
	t->fcache_mm = mm;
	t->fcache_bri = k->bri;
	t->fcache_a = k->a;
	t->fcache_b = k->b;
	t->fcache_c = k->c;
	return true;
}

/*
 * The futex key as the kernel makes it: (mm, address) for a private futex or an anonymous
 * private page; (inode, offset) for a shared futex in a file or shared memory. A mapping
 * that could not be read now is tried again when the thread is switched in (switch_in).
 */
static __always_inline void futex_key(struct task_struct *prev, __u64 uaddr, bool private,
				      struct sched_thread *t)
{
	struct wait_key *k = &t->open;

	k->kind = WAIT_FUTEX;
	k->bri = BRI_FUTEX_PRIVATE;
	k->a = uaddr;
	k->b = (__u64)prev->mm;
	if (!private && !futex_key_file(prev, t))
		t->open_unresolved = 1;
}

/*
 * A read/write/send/recv-family call blocked on fd: a pipe or a socket wait, or none. Where
 * bpf_rdonly_cast() exists (6.2+) the file from fd_to_file() is a typed pointer and every
 * field is a plain load (a NULL on the way reads 0); before, probe reads (~20-40 ns a call on
 * these hosts, five to ten of them here).
 */
static __always_inline void fd_wait(struct task_struct *prev, long fd, struct wait_key *k)
{
	struct file *file = fd_to_file(prev, fd);
	struct inode *inode;
	struct socket *sock;
	struct sock *sk;
	__u32 type;

	if (!file)
		return;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		inode = file->f_inode;
		type = inode->i_mode & S_IFMT;
	} else {
		inode = BPF_CORE_READ(file, f_inode);
		type = BPF_CORE_READ(inode, i_mode) & S_IFMT;
	}
	if (type == S_IFIFO)
		k->kind = WAIT_PIPE;
	else if (type == S_IFSOCK)
		k->kind = WAIT_SOCKET;
	else
		return;
	k->bri = BRI_INODE;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		k->a = inode->i_ino;
		k->b = inode->i_sb->s_dev;
	} else {
		k->a = BPF_CORE_READ(inode, i_ino);
		k->b = BPF_CORE_READ(inode, i_sb, s_dev);
	}
	if (type != S_IFSOCK)
		return;
	/* a unix socket's peer (sockfs inode numbers are 32-bit: get_next_ino()) */
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		sock = bpf_rdonly_cast(file->private_data, bpf_core_type_id_kernel(struct socket));
		sk = sock->sk;
		if (sk && sk->__sk_common.skc_family == AF_UNIX)
			k->c = ((struct unix_sock *)bpf_rdonly_cast(
					sk, bpf_core_type_id_kernel(struct unix_sock)))
				       ->peer->sk_socket->file->f_inode->i_ino;
		return;
	}
	sock = (struct socket *)BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (sk && BPF_CORE_READ(sk, __sk_common.skc_family) == AF_UNIX)
		k->c = BPF_CORE_READ((struct unix_sock *)sk, peer, sk_socket, file, f_inode, i_ino);
}

/*
 * What the thread that blocks waits on, from its saved user registers: a thread inside a
 * syscall has ax == -ENOSYS (the entry code's placeholder until the call returns), orig_ax
 * the call, di, si, dx, r10, r8, r9 its arguments. A page fault or a kernel thread is no wait.
 */
static __always_inline void wait_classify(struct task_struct *prev, struct sched_thread *t)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	struct wait_key *k = &t->open;
	__u64 uaddr = 0;
	__u32 op;

	k->kind = WAIT_NONE;
	k->bri = BRI_NONE;
	k->a = k->b = 0;
	k->c = 0;
	k->tid = prev->pid;
	t->open_unresolved = 0;
	if (!regs || regs->ax != (unsigned long)-ENOSYS)
		return;
	if (bpf_core_field_exists(prev->thread_info.status) && (prev->thread_info.status & 2))
		return; /* TS_COMPAT: a 32-bit syscall */
	switch (regs->orig_ax) {
	case NR_FUTEX:
		op = regs->si & FUTEX_CMD_MASK;
		if (op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET || op == FUTEX_LOCK_PI ||
		    op == FUTEX_LOCK_PI2 || op == FUTEX_WAIT_REQUEUE_PI)
			futex_key(prev, regs->di, regs->si & FUTEX_PRIVATE_FLAG, t);
		return;
	case NR_FUTEX_WAIT: /* futex_wait(uaddr, val, mask, flags, ...) */
		futex_key(prev, regs->di, regs->r10 & FUTEX2_PRIVATE, t);
		return;
	case NR_FUTEX_WAITV: { /* the first of the futexes: struct futex_waitv { val, uaddr, flags } */
		__u64 w[3] = {};

		if (bpf_probe_read_user(w, sizeof(w), (void *)regs->di))
			uaddr = 0;
		else
			uaddr = w[1];
		futex_key(prev, uaddr, (w[2] & FUTEX2_PRIVATE) != 0, t);
		return;
	}
	case NR_EPOLL_WAIT:
	case NR_EPOLL_PWAIT:
	case NR_EPOLL_PWAIT2: {
		struct file *file = fd_to_file(prev, regs->di);

		k->kind = WAIT_EPOLL;
		k->bri = BRI_EPOLL;
		if (!file)
			k->a = 0;
		else if (bpf_ksym_exists(bpf_rdonly_cast))
			k->a = (__u64)file->private_data;
		else
			k->a = (__u64)BPF_CORE_READ(file, private_data);
		k->b = regs->di;
		return;
	}
	case NR_POLL:
	case NR_PPOLL:
	case NR_SELECT:
	case NR_PSELECT6:
		k->kind = WAIT_POLL;
		return;
	case NR_READ:
	case NR_WRITE:
	case NR_PREAD64:
	case NR_PWRITE64:
	case NR_READV:
	case NR_WRITEV:
	case NR_PREADV:
	case NR_PWRITEV:
	case NR_PREADV2:
	case NR_PWRITEV2:
	case NR_CONNECT:
	case NR_ACCEPT:
	case NR_ACCEPT4:
	case NR_SENDTO:
	case NR_RECVFROM:
	case NR_SENDMSG:
	case NR_RECVMSG:
	case NR_SENDMMSG:
	case NR_RECVMMSG:
		fd_wait(prev, regs->di, k);
		return;
	}
}

static __always_inline bool wait_key_eq(const struct wait_key *x, const struct wait_key *y)
{
	return x->kind == y->kind && x->bri == y->bri && x->a == y->a && x->b == y->b &&
	       x->c == y->c;
}

/* The thread's accumulated resource into wait_bri (its waits now go to another one). */
static __always_inline void wait_slot_flush(struct sched_thread *t, __u64 now)
{
	struct wait_val *v = bpf_map_lookup_elem(&wait_bri, &t->slot);

	t->slot_val.last_ns = now;
	if (!v) {
		if (!bpf_map_update_elem(&wait_bri, &t->slot, &t->slot_val, BPF_NOEXIST)) {
			__sync_fetch_and_add(&bri_inserted, 1);
			return;
		}
		v = bpf_map_lookup_elem(&wait_bri, &t->slot); /* -EEXIST: made meanwhile */
		if (!v) {
			count_lost(WAIT_LOST_BRI_FULL);
			return;
		}
	}
	v->ns += t->slot_val.ns;
	v->n += t->slot_val.n;
	v->wakes += t->slot_val.wakes;
	v->last_ns = now;
}

/* A wait episode of d ns ended at now: to its kind, and to its resource through the slot. */
static __always_inline void wait_close(struct sched_thread *t, __u64 d, __u64 now)
{
	__u32 kind = t->open.kind;

	if (kind >= WAIT_KINDS)
		return;
	if (t->open_unresolved) { /* keyed by address space and address */
		count_lost(WAIT_LOST_FUTEX_KEY);
		t->open_unresolved = 0;
	}
	t->wait_ns[kind] += d;
	t->wait_n[kind] += 1;
	if (!wait_key_eq(&t->slot, &t->open)) {
		if (t->slot.kind < WAIT_KINDS &&
		    t->slot_val.n) /* not the zeroed one of new storage */
			wait_slot_flush(t, now);
		t->slot = t->open;
		t->slot_val.ns = t->slot_val.n = t->slot_val.wakes = 0;
	}
	t->slot_val.ns += d;
	t->slot_val.n += 1;
	t->slot_val.wakes += t->open_woken;
	t->open.kind = WAIT_NONE;
	t->open_woken = 0;
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

/*
 * When the open episode of a thread that has arrived on a CPU since it blocked ended: its
 * enqueue, from its sched_info (last arrival less the run delay added since it blocked), when
 * it arrived exactly once since; 0 when that is not known.
 */
static __always_inline __u64 episode_woke(struct task_struct *p, struct sched_thread *t, __u64 off)
{
	__u64 arrival, delay, woke;

	if (!bpf_core_field_exists(p->sched_info) ||
	    BPF_CORE_READ(p, sched_info.pcount) != t->off_pcount + 1)
		return 0;
	arrival = BPF_CORE_READ(p, sched_info.last_arrival);
	delay = BPF_CORE_READ(p, sched_info.run_delay) - t->off_delay;
	if (arrival < delay)
		return 0;
	woke = arrival - delay;
	return woke < off ? 0 : woke;
}

/*
 * When a woken thread, still queued or arriving now, was enqueued by its wakeup: last_queued,
 * less the run delay added since it blocked. That is 0 unless it was migrated while queued:
 * the dequeue adds its wait so far to run_delay and the enqueue on the other CPU stamps
 * last_queued again, and that wait is run delay, not part of the episode.
 */
static __always_inline __u64 wake_enqueue(__u64 queued, __u64 run_delay, struct sched_thread *t,
					  __u64 off)
{
	__u64 moved = run_delay - t->off_delay;

	return queued > moved && queued - moved >= off ? queued - moved : queued;
}

/*
 * The thread is switched again and its last episode is still open: the switch-in that
 * followed its wakeup closed nothing. Before 6.2 a task-storage lookup refused because
 * another storage call was in progress on that CPU did that (as when an interrupt wakes a
 * thread while the agent's iterator is inside one: ~2 a second on an idle host with the
 * earlier sched_wakeup design); later kernels no longer refuse it, and on 6.18 it is still
 * seen, ~30 a minute on an idle host here (mostly kernel threads): this project's machines
 * (a Firecracker guest, 6.18.44-fc) trace no switch away from their own PID 1 threads, so
 * the thread switched in after one has no sched_switch event (ftrace and perf miss it too).
 * Called at the thread's next blocking switch-out, at its next switch-out of any kind when
 * cpu_switch() saw that its switch-in was not traced, and at its next switch-in when it was
 * preempted first: if it arrived on a CPU exactly once since it blocked, the episode ends at that
 * arrival's enqueue, as it would have at that switch-in (counted as recovered): that moment
 * is returned, for episode_close() (one inlined copy of it per caller: a third made 6.1's
 * verifier lose the bound of the wait kind). Otherwise it is lost (counted, closed) and 0 is
 * returned.
 */
static __always_inline __u64 episode_recover(struct task_struct *p, struct sched_thread *t)
{
	__u64 woke = episode_woke(p, t, t->off_ns);

	if (!woke) {
		t->off_ns = 0;
		t->open.kind = WAIT_NONE;
		count_lost(SCHED_LOST_UNCLOSED);
		return 0;
	}
	count_lost(SCHED_RECOVERED);
	return woke;
}

/*
 * prev_state is the raw __state: test bits, never compare (0x2001 is an interruptible,
 * freezable sleep). A thread is runnable when either the traced state or the state now is 0
 * (a pending signal sets it running after prev_state was sampled), and when it was preempted:
 * a thread preempted between setting a sleeping state and calling schedule() stays on the
 * run queue with that state, and runs again without any wakeup (counted as wakeup_unseen,
 * ~2 a second on an idle host, until preempt was tested).
 */
static __always_inline void episode_close(struct sched_thread *t, __u64 now)
{
	if (now > t->off_ns)
		off_add(t->ns, t->off_kind, now - t->off_ns);
	if (wait_on)
		wait_close(t, now > t->off_ns ? now - t->off_ns : 0, now);
	t->off_ns = 0;
}

/*
 * Tests only, set from PLUMB_TEST_MISS_SWITCH_IN before load, off and compiled out otherwise:
 * a thread named "miss-switch-in" has the first switch-in after each of its blocks close
 * nothing, as a refused storage lookup would (fault_miss_switch_in, episode_recover), or, with
 * PLUMB_TEST_MISS_SWITCH_IN=hide (fault_hide_switch_in), every switch to it not seen at all,
 * as the switches the kernel does not trace (cpu_switch's unseen).
 */
static __always_inline bool fault_thread(struct task_struct *p)
{
	static const char name[] = "miss-switch-in";
	char comm[sizeof(name)];

	if (bpf_probe_read_kernel(comm, sizeof(comm), p->comm))
		return false;
	for (int i = 0; i < sizeof(name); i++)
		if (comm[i] != name[i])
			return false;
	return true;
}

/*
 * The thread switched in ends its off-CPU episode when it was woken: the tracepoint runs
 * before the scheduler's accounting of the switch, so last_queued still holds the enqueue
 * of its wakeup (sched_info_arrive clears it afterwards) and pcount does not count this
 * arrival yet. A thread that arrived since it blocked (pcount moved) and still has its
 * episode open was preempted after a switch-in that closed nothing: its last_queued is that
 * preemption's, and the episode is recovered instead.
 */
static __always_inline void switch_in(struct task_struct *next)
{
	struct sched_thread *t;
	bool stale = false;
	__u64 end;

	if (!next->pid)
		return; /* the idle task */
	t = bpf_task_storage_get(&sched_threads, next, NULL, 0);
	if (!t)
		return;
	if (moved_pending && t->moved_ns)
		stale = moved_arrival(next, t, task_rq_clock(next));
	if (!t->off_ns)
		return;
	/* a shared futex whose mapping was unreadable at the switch-out: once more, now */
	if (wait_on && t->open_unresolved && futex_key_file(next, t))
		t->open_unresolved = 0;
	end = 0;
	if (bpf_core_field_exists(next->sched_info)) {
		if (next->sched_info.pcount != t->off_pcount) {
			end = episode_recover(next, t);
			if (!end)
				return;
		} else if (fault_miss_switch_in && fault_thread(next)) {
			return;
		} else if (next->sched_info.last_queued && !stale) {
			end = wake_enqueue(next->sched_info.last_queued, next->sched_info.run_delay,
					   t, t->off_ns);
		}
	}
	episode_close(t, end ? end : task_rq_clock(next));
}

/*
 * Where a read counts a thread's open episode, begun at off (t->off_ns, read once: a switch
 * on another CPU can zero it meanwhile), up to: 0 when that is not known; now while the
 * thread is still off the CPU (on the clock of the CPU that reads, ours: updated when we
 * were scheduled, so at most a tick behind); its wakeup's enqueue once it has been woken;
 * and, when it has been on a CPU since and that switch-in closed nothing, the enqueue that
 * episode_recover will find. Counted up to now, such an episode grew for as long as the
 * thread ran on, and user space keeps the highest count it read (a 6.18 CI run: a 0.1 s
 * pipe wait read as 0.7156 s while the thread spun). Never past now. The enqueue
 * (last_queued) is its wakeup's only once the thread is running again (state 0), and when it
 * is not the stamp of a move while its dequeue was delayed (sched_migrate_task): Debian's
 * 6.12 leaves that stamp on a sleeper, and read as the wakeup it stopped a sleep's reads
 * where it was moved (a 6.12 CI run: 0.00084 s through 7 reads of a 1.5 s sleep). Such a
 * woken thread's episode is counted up to now, as its switch-in will.
 */
static __always_inline __u64 open_end(struct task_struct *task, struct sched_thread *t, __u64 off,
				      __u64 now)
{
	__u64 end = now, queued;

	if (!off)
		return 0;
	if (bpf_core_field_exists(task->sched_info)) {
		queued = BPF_CORE_READ(task, sched_info.last_queued);
		if (BPF_CORE_READ(task, sched_info.pcount) != t->off_pcount)
			end = episode_woke(task, t, off);
		else if (queued && !task_state(task) && !moved_stale(queued, t->moved_ns))
			end = wake_enqueue(queued, BPF_CORE_READ(task, sched_info.run_delay), t,
					   off);
	}
	if (end > now)
		end = now;
	return end > off ? end : 0;
}

/* A thread's counts so far: its open episode as open_end() says. */
static __always_inline void remainder_base(struct sched_thread *t, __u64 when, __u64 run, __u64 rq,
					   __u64 rest)
{
	t->base_ns = when ? when : 1;
	t->base_run_ns = run;
	t->base_rq_ns = rq;
	t->base_rest_ns = rest;
}

/*
 * sleep_remainder: a moment at which all of a thread's counts are known, and its CPU time
 * then. Asleep or blocked: now. Runnable, waiting: its enqueue (nothing but run delay has
 * accrued since, and that is counted at its arrival). On a CPU: its arrival, with the CPU
 * time the slot of that switch kept (the kernel's count is behind by up to a tick there);
 * false when that switch was not seen. Exiting (final): now, its CPU time final.
 */
static __always_inline bool remainder_when(struct task_struct *task, struct sched_thread *t,
					   __u64 now, bool final, __u64 *when, __u64 *run)
{
	__u32 zero = 0, cpu;
	struct sched_cpu *c;
	__u64 arrival;

	*run = BPF_CORE_READ(task, se.sum_exec_runtime);
	*when = now;
	if (final)
		return true;
	*when = BPF_CORE_READ(task, sched_info.last_queued); /* read before on_cpu */
	if (*when && !task_state(task) && !moved_stale(*when, t->moved_ns)) /* (open_end) */
		return true;
	*when = now;
	if (!BPF_CORE_READ(task, on_cpu))
		return true;
	arrival = BPF_CORE_READ(task, sched_info.last_arrival);
	cpu = BPF_CORE_READ(task, thread_info.cpu);
	c = bpf_map_lookup_percpu_elem(&sched_cpus, &zero, cpu);
	if (!c || c->tid != BPF_CORE_READ(task, pid) || !arrival || c->arrive_ns != arrival)
		return false;
	*when = arrival;
	*run = c->arrive_run_ns;
	return true;
}

/*
 * sleep_remainder: the thread's sleep since its base, the rest of its time (open blocks
 * counted up to the same moment); where that moment is not known now, sleep reads 0 and
 * user space keeps its last count. A thread without a base gets it here.
 */
static __always_inline void remainder_fill(struct sched_record *r, struct task_struct *task,
					   struct sched_thread *t, __u64 now, bool final)
{
	__u64 when, run, rq, rest, used, end, off;

	if (!bpf_core_field_exists(task->sched_info) ||
	    !remainder_when(task, t, now, final, &when, &run))
		return;
	rq = run_delay(task, t);
	rest = t->ns[SCHED_BLOCK] + t->steal_ns;
	off = *(volatile __u64 *)&t->off_ns;
	end = open_end(task, t, off, when);
	if (end) {
		off_add(r->off_ns, t->off_kind, end - off);
		rest += end - off;
	}
	if (!t->base_ns) {
		remainder_base(t, when, run, rq, rest);
		return;
	}
	if (when <= t->base_ns || run < t->base_run_ns || rq < t->base_rq_ns ||
	    rest < t->base_rest_ns)
		return;
	used = (run - t->base_run_ns) + (rq - t->base_rq_ns) + (rest - t->base_rest_ns);
	if (when - t->base_ns > used)
		r->off_ns[SCHED_SLEEP] = when - t->base_ns - used;
}

static __always_inline void record_fill(struct sched_record *r, struct task_struct *task,
					bool final)
{
	struct sched_thread *t = bpf_task_storage_get(&sched_threads, task, NULL, 0);
	__u64 now = task_rq_clock(bpf_get_current_task_btf()), end, off;

	r->tid = BPF_CORE_READ(task, pid);
	r->pid = BPF_CORE_READ(task, tgid);
	r->ppid = BPF_CORE_READ(task, real_parent, tgid);
	r->cgroup_id = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
	r->start_ns = BPF_CORE_READ(task, start_time);
	r->read_ns = now;
	r->run_ns = BPF_CORE_READ(task, se.sum_exec_runtime);
	r->rq_ns = bpf_core_field_exists(task->sched_info) ?
			   BPF_CORE_READ(task, sched_info.run_delay) :
			   0; /* CONFIG_SCHED_INFO off: user space says so */
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), task->comm);
	if (!t) {
		__builtin_memset(r->off_ns, 0, sizeof(r->off_ns));
		r->steal_ns = 0;
		__builtin_memset(r->wait_ns, 0, sizeof(r->wait_ns));
		__builtin_memset(r->wait_n, 0, sizeof(r->wait_n));
		r->futex_wakes = 0;
		r->slot.kind = WAIT_NONE;
		return;
	}
	__builtin_memcpy(r->off_ns, t->ns, sizeof(r->off_ns));
	__builtin_memcpy(r->wait_ns, t->wait_ns, sizeof(r->wait_ns));
	__builtin_memcpy(r->wait_n, t->wait_n, sizeof(r->wait_n));
	r->futex_wakes = t->futex_wakes;
	r->steal_ns = t->steal_ns;
	if (steal_on && r->tid) { /* on a CPU now: its steal there so far */
		__u32 zero = 0, cpu = BPF_CORE_READ(task, thread_info.cpu);
		struct sched_cpu *c = bpf_map_lookup_percpu_elem(&sched_cpus, &zero, cpu);
		__u64 steal;

		if (c && c->valid && c->tid == r->tid) {
			steal = task_steal(task);
			if (steal > c->last)
				r->steal_ns += steal - c->last;
		}
	}
	r->slot = t->slot;
	r->slot_val = t->slot_val;
	if (bpf_core_field_exists(task->sched_info))
		r->rq_ns = run_delay(task, t);
	if (sleep_remainder) {
		remainder_fill(r, task, t, now, final);
		return;
	}
	off = *(volatile __u64 *)&t->off_ns;
	end = open_end(task, t, off, now);
	if (end) {
		off_add(r->off_ns, t->off_kind, end - off);
		if (t->open.kind < WAIT_KINDS)
			r->wait_ns[t->open.kind] += end - off;
	}
}

/*
 * A thread's final counts, to user space (drained on the agent's tick), from its last switch
 * away: after do_exit has torn its memory down, which sched_process_exit precedes on kernels
 * since 6.16 (a 4 GiB process: 0.2 s of its CPU time after the tracepoint).
 */
static __noinline void exit_send(struct task_struct *p, __u64 stolen)
{
	struct sched_record *r;
	struct sched_thread *t;

	if (stolen) {
		t = bpf_task_storage_get(&sched_threads, p, NULL, 0);
		if (t)
			t->steal_ns += stolen;
	}
	r = bpf_ringbuf_reserve(&sched_exits, sizeof(*r), 0);
	if (!r) {
		count_lost(SCHED_LOST_RINGBUF_FULL);
		return;
	}
	r->kind = SCHED_REC_EXIT;
	record_fill(r, p, true);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct sched_thread *t;
	__u32 kind = SCHED_SLEEP;
	__u64 now = 0, end, stolen = 0;
	bool unseen = false, first = false, runnable;

	if (!gate_open())
		return 0;
	if (fault_hide_switch_in && fault_thread(next))
		return 0;
	if (close_at_switch_in || steal_on || sleep_remainder)
		stolen = cpu_switch(prev, next, &unseen, &first);
	/* sleep_remainder: only a thread whose last block was uninterruptible has one open */
	if (close_at_switch_in && (!sleep_remainder || moved_pending ||
				   BPF_CORE_READ_BITFIELD(next, sched_contributes_to_load)))
		switch_in(next);
	if (!preempt && (prev_state & TASK_DEAD)) { /* do_task_dead: it never runs again */
		/* marked, its switch-in since not traced: the count must not outlive it */
		if (moved_pending && (t = bpf_task_storage_get(&sched_threads, prev, NULL, 0)) &&
		    t->moved_ns)
			moved_clear(t);
		exit_send(prev, stolen);
		return 0;
	}
	/*
	 * Runnable, or a sleep (the remainder): only its steal, if any, and, when its switch-in
	 * was not traced, its episode, recovered now, while it has arrived once since it blocked
	 * (the idle task has no storage). Where sleep is the remainder, a thread whose arrival
	 * was not seen (not traced, or before the agent attached) may have no base yet (the
	 * reads take one only at a known moment, remainder_when()): it gets one here, a moment at
	 * which all its counts are known, before a sleep that would otherwise count only from the
	 * next read (a 6.18 make test: 0.1431 s of a 0.4 s sleep, the thread spinning when the
	 * agent started and its switch-ins after PID 1's threads not traced).
	 */
	runnable = preempt || !prev_state || !task_state(prev) ||
		   (sleep_remainder && !blocks_uninterruptibly(prev_state));
	if (runnable && (!(stolen || unseen || first) || !prev->pid))
		return 0;
	t = bpf_task_storage_get(&sched_threads, prev, NULL, 0);
	if (!t) {
		if (!runnable)
			count_lost(SCHED_LOST_STORAGE);
		return 0;
	}
	t->steal_ns += stolen;
	if (!runnable && !(now = task_rq_clock(prev)))
		return 0;
	/*
	 * without sched_info (steal followed) nothing could be recovered: left to the block. A
	 * first switch on this CPU is one whose switch-in was not seen either (hidden, where
	 * no switch there was traced before).
	 */
	if (t->off_ns && (!runnable || ((unseen || first) && close_at_switch_in))) {
		/* a shared futex whose mapping was unreadable at the switch-out: once more, now */
		if (wait_on && t->open_unresolved && futex_key_file(prev, t))
			t->open_unresolved = 0;
		if ((end = episode_recover(prev, t)))
			episode_close(t, end);
	}
	/* after the recovery: its episode ended before now, in rest */
	if (sleep_remainder && !t->base_ns && (unseen || first) &&
	    (now || (now = task_rq_clock(prev))))
		remainder_base(t, now, prev->se.sum_exec_runtime, run_delay(prev, t),
			       t->ns[SCHED_BLOCK] + t->steal_ns);
	if (runnable)
		return 0;
	if (blocks_uninterruptibly(prev_state))
		kind = BPF_CORE_READ_BITFIELD(prev, in_iowait) ? SCHED_IOWAIT : SCHED_BLOCK;
	if (moved_pending && t->moved_ns) /* its switch-in since was not traced */
		moved_clear(t);
	t->off_kind = kind;
	t->off_ns = now;
	if (bpf_core_field_exists(prev->sched_info)) {
		t->off_delay = prev->sched_info.run_delay;
		t->off_pcount = prev->sched_info.pcount;
	}
	if (wait_on) {
		wait_classify(prev, t);
		t->open_woken = 0;
	}
	return 0;
}

/*
 * Debian's 6.12 (EEVDF's DELAY_DEQUEUE): a thread that sleeps with negative lag stays queued,
 * its dequeue delayed; a balance can move it to another CPU then, and the enqueue there stamps
 * its sched_info.last_queued. The pick that dequeues it for good does not clear the stamp, and
 * sched_info_enqueue at its real wakeup keeps an existing one: at its arrival the kernel adds
 * the whole sleep since the move to its run delay, and last_queued, read as its wakeup, ended
 * the sleep at the move (tests/vm/delayed-dequeue.py: 3 and 9 of 30 sleeps of 0.3 s in two
 * runs; none on 6.1 or 6.18). Such a move is marked here (the stamp follows within the same
 * balance); its next switch-in, or a read before it, takes a last_queued within
 * MOVED_STAMP_NS of the mark as that stamp, not as a wakeup (moved_arrival). Loaded where
 * sched_entity has sched_delayed (FEAT_DELAYED_DEQUEUE) and sched_info is kept.
 */
SEC("tp_btf/sched_migrate_task")
int BPF_PROG(sched_migrate_task, struct task_struct *p, int dest_cpu)
{
	struct sched_thread *t;
	unsigned int state;
	__u64 now;

	if (!gate_open())
		return 0;
	state = task_state(p);
	if (!state || (state & TASK_WAKING) || !BPF_CORE_READ(p, se.sched_delayed))
		return 0;
	t = bpf_task_storage_get(&sched_threads, p, NULL, 0);
	now = task_rq_clock(p);
	if (!t || !now)
		return 0;
	if (!t->moved_ns)
		__sync_fetch_and_add(&moved_pending, 1);
	t->moved_ns = now;
	return 0;
}

/* Only where close_at_switch_in is off (no sched_info): the episode ends at the wakeup. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	struct sched_thread *t;

	if (!gate_open())
		return 0;
	t = bpf_task_storage_get(&sched_threads, p, NULL, 0);
	if (!t || !t->off_ns)
		return 0;
	episode_close(t, wakeup_clock(p));
	return 0;
}

/*
 * A futex wake that wakes a waiter, seen in the waker's context (sched_waking runs in the
 * waker; sched_wakeup may run on the wakee's CPU instead): the waker must be inside a
 * wake-family futex call on the waiter's key. A private key is checked (same mm, same
 * address); a shared key is not (another process maps it at another address). Wakes that
 * find no waiter never reach the scheduler and are not seen. Only loaded with the wait module.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(wait_waking, struct task_struct *p)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);
	struct sched_thread *t, *w;
	struct task_struct *cur;
	__u64 uaddr2 = 0;
	__u32 op;

	/* the wakee's own registers first: two loads, where a storage lookup costs more */
	if (!gate_open() || !regs || regs->ax != (unsigned long)-ENOSYS ||
	    (regs->orig_ax != NR_FUTEX && regs->orig_ax != NR_FUTEX_WAITV &&
	     regs->orig_ax != NR_FUTEX_WAIT))
		return 0;
	t = bpf_task_storage_get(&sched_threads, p, NULL, 0);
	if (!t || t->open.kind != WAIT_FUTEX)
		return 0;
	cur = bpf_get_current_task_btf();
	regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	if (!regs || regs->ax != (unsigned long)-ENOSYS)
		return 0;
	if (regs->orig_ax == NR_FUTEX) {
		op = regs->si & FUTEX_CMD_MASK;
		if (op == FUTEX_WAKE_OP)
			uaddr2 = regs->r8;
		else if (op != FUTEX_WAKE && op != FUTEX_WAKE_BITSET && op != FUTEX_REQUEUE &&
			 op != FUTEX_CMP_REQUEUE && op != FUTEX_UNLOCK_PI &&
			 op != FUTEX_CMP_REQUEUE_PI)
			return 0;
	} else if (regs->orig_ax != NR_FUTEX_WAKE) {
		return 0;
	}
	if (t->open.bri == BRI_FUTEX_PRIVATE &&
	    (t->open.b != (__u64)cur->mm || (t->open.a != regs->di && t->open.a != uaddr2)))
		return 0;
	t->open_woken = 1;
	w = bpf_task_storage_get(&sched_threads, cur, NULL, 0);
	if (w)
		w->futex_wakes += 1;
	return 0;
}

/*
 * sleep_remainder: a new thread's sleep counts from its first enqueue, which this follows
 * (wake_up_new_task), on the clock its run delay starts from; its storage was made at fork.
 */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	struct sched_thread *t;

	if (!gate_open())
		return 0;
	t = bpf_task_storage_get(&sched_threads, p, NULL, 0);
	if (t && !t->base_ns)
		remainder_base(t, wakeup_clock(p), p->se.sum_exec_runtime, p->sched_info.run_delay,
			       t->ns[SCHED_BLOCK] + t->steal_ns);
	return 0;
}

/* A new thread's storage, made in its parent's context (no scheduler lock held). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!gate_open())
		return 0;
	if (!bpf_task_storage_get(&sched_threads, child, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE))
		count_lost(SCHED_LOST_STORAGE);
	return 0;
}

/*
 * Every live thread of the host. An exiting one's counts are left to its exit record, which
 * comes after PF_EXITING by as long as the mm takes to tear down: it is named only, so that
 * user space keeps it till then. Makes the storage of threads that have none (those older
 * than the agent, at its first read).
 */
SEC("iter/task")
int sched_read(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct sched_record r = { .kind = SCHED_REC_LIVE };

	if (!task)
		return 0;
	if (task->flags & PF_EXITING) {
		r.kind = SCHED_REC_EXITING;
		r.tid = task->pid;
		r.start_ns = task->start_time;
		bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
		return 0;
	}
	if (!bpf_task_storage_get(&sched_threads, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE))
		count_lost(SCHED_LOST_STORAGE);
	record_fill(&r, task, false);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
