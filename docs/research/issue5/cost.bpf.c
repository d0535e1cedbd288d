// SPDX-License-Identifier: GPL-2.0
/*
 * Experiment 4 of issue 5: the cost per event of sched_switch + sched_waking programs doing
 * (0) nothing, (1) the per-thread scheduling state machine in task storage, (2) that plus
 * the wait classification from the blocked thread's saved registers (fd -> file -> BRI) and a
 * per-(thread, kind, BRI) wait hash, (3) the state machine in a tid-keyed hash instead.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cost.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 mode;

#define TASK_INTERRUPTIBLE   0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_DEAD	     0x80
#define TASK_NOLOAD	     0x400
#define ENOSYS		     38
#define S_IFMT		     00170000
#define S_IFSOCK	     0140000
#define S_IFIFO		     0010000
#define FUTEX_PRIVATE_FLAG   128
#define FUTEX_CMD_MASK	     0x7f

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} thread_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct thread_state);
} thread_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct wait_key);
	__type(value, struct wait_val);
} waits SEC(".maps");

__u64 lost_waits;
__u64 sink;
const volatile __u32 target_tgid;

/*
 * This host's kernel lacks CONFIG_KALLSYMS_ALL, so the per-CPU 'runqueues' ksym cannot be
 * resolved: reach this CPU's rq through the fair task's cfs_rq (CONFIG_FAIR_GROUP_SCHED).
 */
static __always_inline __u64 rq_clock_of(struct task_struct *a, struct task_struct *b)
{
	/* direct BTF loads (BPF_PROBE_MEM), no probe_read helper calls */
	struct cfs_rq *cfs = a->se.cfs_rq;

	if (!cfs)
		cfs = b->se.cfs_rq;
	return cfs ? cfs->rq->clock : 0;
}

static struct thread_state zero_state;
static struct wait_val zero_wait;

static __always_inline struct thread_state *state_of(struct task_struct *t, bool create)
{
	__u32 tid;

	if (mode == MODE_HASH) {
		struct thread_state *s;

		tid = t->pid;
		s = bpf_map_lookup_elem(&thread_hash, &tid);
		if (s || !create)
			return s;
		bpf_map_update_elem(&thread_hash, &tid, &zero_state, BPF_NOEXIST);
		return bpf_map_lookup_elem(&thread_hash, &tid);
	}
	return bpf_task_storage_get(&thread_states, t, NULL,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline struct file *fd_to_file(struct task_struct *task, long fd)
{
	struct fdtable *fdt = task->files->fdt;
	struct file **fds;
	struct file *file = NULL;

	if (fd < 0 || fd >= fdt->max_fds)
		return NULL;
	fds = fdt->fd;
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	return file;
}

/* What the blocked thread waits on, from the syscall its saved registers show. */
static __always_inline void classify_wait(struct task_struct *prev, struct thread_state *s)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	struct file *file;
	__u32 type;
	long nr;

	s->wait_kind = WK_NONE;
	if (regs->ax != (unsigned long)-ENOSYS) /* not in a syscall: fault, kernel thread */
		return;
	nr = regs->orig_ax;
	switch (nr) {
	case 202: /* futex */
		switch (regs->si & FUTEX_CMD_MASK) {
		case 0:
		case 9:
		case 6:
		case 13:
		case 11: /* WAIT, WAIT_BITSET, LOCK_PI(2), WAIT_REQUEUE_PI */
			s->wait_kind = WK_FUTEX;
			s->bri = regs->di;
			s->bri2 = (__u64)prev->mm; /* shared keys: see probe.bpf.c, bpf_find_vma */
		}
		return;
	case 232:
	case 281:
	case 441: /* epoll_wait, epoll_pwait, epoll_pwait2 */
		file = fd_to_file(prev, regs->di);
		s->wait_kind = WK_EPOLL;
		s->bri = file ? (__u64)BPF_CORE_READ(file, private_data) : 0;
		return;
	case 7:
	case 23:
	case 270:
	case 271: /* poll, select, pselect6, ppoll */
		s->wait_kind = WK_POLL;
		s->bri = 0;
		return;
	case 0:
	case 1:
	case 17:
	case 18:
	case 19:
	case 20:
	case 295:
	case 296:
	case 43:
	case 288:
	case 44:
	case 45:
	case 46:
	case 47:
	case 299:
	case 307:
	case 42:
		file = fd_to_file(prev, regs->di);
		if (!file)
			return;
		struct inode *inode = BPF_CORE_READ(file, f_inode);

		type = BPF_CORE_READ(inode, i_mode) & S_IFMT;
		if (type == S_IFIFO)
			s->wait_kind = WK_PIPE;
		else if (type == S_IFSOCK)
			s->wait_kind = WK_SOCKET;
		else
			return;
		s->bri = BPF_CORE_READ(inode, i_ino);
		return;
	}
}

static __always_inline void end_wait(__u32 tid, struct thread_state *s, __u64 ns, bool futex_wake)
{
	struct wait_key k = { .tid = tid, .kind = s->wait_kind, .bri = s->bri, .bri2 = s->bri2 };
	struct wait_val *v;

	s->wait_kind = WK_NONE;
	v = bpf_map_lookup_elem(&waits, &k);
	if (!v) {
		bpf_map_update_elem(&waits, &k, &zero_wait, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&waits, &k);
		if (!v) {
			lost_waits++;
			return;
		}
	}
	v->ns += ns;
	v->count++;
	if (futex_wake)
		v->wakes++;
}

/* The waker (current) is in a futex wake-family call on the waiter's own key. */
static __always_inline bool is_futex_wake(struct thread_state *s)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);

	if (regs->ax != (unsigned long)-ENOSYS || regs->orig_ax != 202)
		return false;
	switch (regs->si & FUTEX_CMD_MASK) {
	case 1:
	case 10:
	case 5:
	case 3:
	case 4:
	case 7:
	case 12: /* WAKE(_BITSET/_OP), (CMP_)REQUEUE(_PI), UNLOCK_PI */
		return regs->di == s->bri && (__u64)cur->mm == s->bri2;
	}
	return false;
}

static __always_inline __u32 blocked_state_of(struct task_struct *prev, unsigned int prev_state)
{
	if (prev_state & TASK_UNINTERRUPTIBLE && !(prev_state & TASK_NOLOAD))
		return BPF_CORE_READ_BITFIELD(prev, in_iowait) ? ST_IOWAIT : ST_BLOCK;
	return ST_SLEEP;
}

/* The wait slot: one (kind, BRI) accumulated in task storage, flushed to the hash on change. */
static __always_inline void slot_add(__u32 tid, struct thread_state *s, __u32 kind, __u64 bri,
				     __u64 bri2, __u64 ns)
{
	if (s->wait_count && (kind != s->state_kind_pad || bri != s->slot_bri)) {
		struct wait_key k = { .tid = tid,
				      .kind = s->state_kind_pad,
				      .bri = s->slot_bri,
				      .bri2 = s->slot_bri2 };
		struct wait_val *v = bpf_map_lookup_elem(&waits, &k);

		if (!v) {
			bpf_map_update_elem(&waits, &k, &zero_wait, BPF_NOEXIST);
			v = bpf_map_lookup_elem(&waits, &k);
		}
		if (v) {
			v->ns += s->wait_ns;
			v->count += s->wait_count;
		} else {
			lost_waits++;
		}
		s->wait_ns = 0;
		s->wait_count = 0;
		s->flushes++;
	}
	s->state_kind_pad = kind;
	s->slot_bri = bri;
	s->slot_bri2 = bri2;
	s->wait_ns += ns;
	s->wait_count++;
}

static __always_inline int lean_switch(struct task_struct *prev, struct task_struct *next,
				       unsigned int prev_state)
{
	struct thread_state *s;

	if (mode == MODE_NOWAKE || mode == MODE_NOWAKE_WAITS) {
		__u64 now = 0;

		s = bpf_task_storage_get(&thread_states, next, NULL, 0);
		if (s && s->ts) {
			__u64 rq_wait, off;

			now = rq_clock_of(next, prev);
			off = now - s->ts;
			rq_wait = next->sched_info.run_delay - s->run_delay_out;
			if (next->sched_info.last_queued)
				rq_wait += now - next->sched_info.last_queued;
			if (rq_wait > off)
				rq_wait = off;
			s->ns[s->state & 7] += off - rq_wait;
			s->ts = 0;
			if (mode == MODE_NOWAKE_WAITS && s->wait_kind != WK_NONE) {
				slot_add(next->pid, s, s->wait_kind, s->bri, s->bri2,
					 off - rq_wait);
				s->wait_kind = WK_NONE;
			}
		}
		if (!prev_state || !prev->__state)
			return 0;
		s = bpf_task_storage_get(&thread_states, prev, NULL,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!s)
			return 0;
		s->state = blocked_state_of(prev, prev_state);
		s->ts = now ? now : rq_clock_of(prev, next);
		s->run_delay_out = prev->sched_info.run_delay;
		if (mode == MODE_NOWAKE_WAITS)
			classify_wait(prev, s);
		return 0;
	}
	if (!prev_state || !prev->__state)
		return 0;
	s = bpf_task_storage_get(&thread_states, prev, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return 0;
	s->state = blocked_state_of(prev, prev_state);
	s->ts = bpf_ktime_get_ns();
	if (mode == MODE_LEAN_WAITS)
		classify_wait(prev, s);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct thread_state *s;
	__u64 now;
	__u32 st;

	if (mode == MODE_EMPTY)
		return 0;
	if (mode == MODE_KTIME) {
		if (prev_state && prev->__state)
			sink = bpf_ktime_get_ns();
		return 0;
	}
	if (mode == MODE_GET) {
		if (prev_state && prev->__state) {
			s = bpf_task_storage_get(&thread_states, prev, NULL,
						 BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (s)
				s->ts = 1;
		}
		return 0;
	}
	if (mode == MODE_REGS)
		return 0;
	if (mode >= MODE_LEAN)
		return lean_switch(prev, next, prev_state);
	now = bpf_ktime_get_ns();
	s = state_of(prev, true);
	if (s) {
		if (s->ts && s->state < ST_N)
			s->ns[s->state & 7] += now - s->ts;
		if (!prev_state || preempt || !prev->__state) {
			st = ST_RUNNABLE;
		} else if (prev_state & TASK_UNINTERRUPTIBLE && !(prev_state & TASK_NOLOAD)) {
			st = BPF_CORE_READ_BITFIELD(prev, in_iowait) ? ST_IOWAIT : ST_BLOCK;
		} else {
			st = ST_SLEEP; /* interruptible, idle, stopped, traced, dead */
		}
		s->state = st;
		s->ts = now;
		if (mode == MODE_WAITS && st != ST_RUNNABLE)
			classify_wait(prev, s);
	}
	s = state_of(next, true);
	if (s) {
		if (s->ts && s->state < ST_N)
			s->ns[s->state & 7] += now - s->ts;
		if (mode == MODE_WAITS && s->wait_kind != WK_NONE) /* no waking seen */
			end_wait(next->pid, s, now - s->ts, false);
		s->state = ST_RUNNING;
		s->ts = now;
	}
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	struct thread_state *s;
	__u64 now;

	if (mode == MODE_EMPTY || mode == MODE_NOWAKE || mode == MODE_KTIME || mode == MODE_GET)
		return 0;
	if (mode == MODE_REGS || mode == MODE_NOWAKE_WAITS) {
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);

		if (regs->orig_ax == 202 && regs->ax == (unsigned long)-ENOSYS)
			sink++;
		return 0;
	}
	if (mode >= MODE_LEAN) {
		s = bpf_task_storage_get(&thread_states, p, NULL, 0);
		if (!s || !s->ts)
			return 0;
		now = bpf_ktime_get_ns();
		s->ns[s->state & 7] += now - s->ts;
		if (mode == MODE_LEAN_WAITS && s->wait_kind != WK_NONE) {
			slot_add(p->pid, s, s->wait_kind, s->bri, s->bri2, now - s->ts);
			s->wait_kind = WK_NONE;
		}
		s->ts = 0;
		return 0;
	}
	s = state_of(p, false);
	if (!s || s->state < ST_SLEEP || s->state >= ST_N)
		return 0;
	now = bpf_ktime_get_ns();
	s->ns[s->state & 7] += now - s->ts;
	if (mode == MODE_WAITS && s->wait_kind != WK_NONE)
		end_wait(p->pid, s, now - s->ts, s->wait_kind == WK_FUTEX && is_futex_wake(s));
	s->state = ST_RUNNABLE;
	s->ts = now;
	return 0;
}

/* One line per thread of target_tgid: what user space would collect at each scrape. */
SEC("iter/task")
int dump_threads(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *t = ctx->task;
	struct thread_state *s;
	__u64 v[8];

	if (!t || t->tgid != target_tgid)
		return 0;
	s = bpf_task_storage_get(&thread_states, t, NULL, 0);
	v[0] = t->pid;
	v[1] = t->se.sum_exec_runtime;
	v[2] = t->sched_info.run_delay;
	v[3] = s ? s->ns[ST_RUNNING] : 0;
	v[4] = s ? s->ns[ST_RUNNABLE] : 0;
	v[5] = s ? s->ns[ST_SLEEP] : 0;
	v[6] = s ? s->ns[ST_BLOCK] + s->ns[ST_IOWAIT] : 0;
	v[7] = s ? s->wait_count : 0;
	static const char fmt[] = "tid %llu kernel: run %llu rq %llu | bpf: run %llu rq %llu sleep "
				  "%llu block %llu slot_waits %llu\n";

	bpf_seq_printf(seq, fmt, sizeof(fmt), v, sizeof(v));
	return 0;
}
