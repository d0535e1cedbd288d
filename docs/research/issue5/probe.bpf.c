// SPDX-License-Identifier: GPL-2.0
/*
 * Experiments 1-3 of issue 5: what a blocked thread's saved user registers say at
 * tp_btf/sched_switch, whether fd -> file -> pipe/socket/eventpoll resolves there, whether
 * bpf_find_vma() works there (shared futex key), and what prev_state/in_iowait look like.
 * Only threads of target_tgid are recorded.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "probe.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 target_tgid;

#define S_IFMT	   00170000
#define S_IFSOCK   0140000
#define S_IFIFO	   0010000
#define AF_UNIX	   1
#define AF_INET	   2
#define ENOSYS	   38
#define PF_KTHREAD 0x00200000
#define TS_COMPAT  0x0002

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct probe_rec);
} recs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct state_key);
	__type(value, __u64);
} states SEC(".maps");

static struct probe_rec zero_rec;

/* bpf_find_vma() results: [0] ok, [1] -EBUSY, [2] other error, [3] -ENOENT */
__u64 find_vma_results[4];

static __always_inline struct file *fd_to_file(struct task_struct *task, long fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *file = NULL;

	if (fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	return file;
}

static __always_inline void resolve_fd(struct task_struct *task, long fd, struct probe_rec *r)
{
	struct file *file = fd_to_file(task, fd);
	struct socket *sock;
	struct sock *sk, *peer;

	if (!file)
		return;
	r->file = (__u64)file;
	r->i_mode = BPF_CORE_READ(file, f_inode, i_mode);
	r->ino = BPF_CORE_READ(file, f_inode, i_ino);
	r->private_data = (__u64)BPF_CORE_READ(file, private_data);
	if ((r->i_mode & S_IFMT) != S_IFSOCK)
		return;
	sock = (struct socket *)BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	r->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (r->family == AF_INET) {
		r->saddr = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		r->daddr = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		r->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
		r->dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	} else if (r->family == AF_UNIX) {
		peer = BPF_CORE_READ((struct unix_sock *)sk, peer);
		if (peer)
			r->peer_ino = BPF_CORE_READ(peer, sk_socket, file, f_inode, i_ino);
	}
}

struct vma_ctx {
	struct probe_rec *r;
};

static long vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_ctx *c = data;

	c->r->vm_start = vma->vm_start;
	c->r->vm_pgoff = vma->vm_pgoff;
	c->r->vm_flags = vma->vm_flags;
	if (vma->vm_file)
		c->r->vma_ino = BPF_CORE_READ(vma, vm_file, f_inode, i_ino);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	struct probe_rec *r;
	struct pt_regs *regs;
	struct state_key sk = {};
	__u64 one = 1, *n;
	__u32 tid;

	if (next->tgid == target_tgid) {
		tid = next->pid;
		r = bpf_map_lookup_elem(&recs, &tid);
		if (r && r->out_ts) {
			r->last_off_ns = now - r->out_ts;
			r->out_ts = 0;
		}
	}
	if (prev->tgid != target_tgid)
		return 0;

	sk.prev_state = prev_state;
	sk.state_now = prev->__state;
	sk.preempt = preempt;
	sk.in_iowait = BPF_CORE_READ_BITFIELD(prev, in_iowait);
	n = bpf_map_lookup_elem(&states, &sk);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&states, &sk, &one, BPF_NOEXIST);

	tid = prev->pid;
	if (preempt) {
		bpf_map_update_elem(&recs, &tid, &zero_rec, BPF_NOEXIST);
		r = bpf_map_lookup_elem(&recs, &tid);
		if (!r)
			return 0;
		regs = (struct pt_regs *)bpf_task_pt_regs(prev);
		r->pre_count++;
		r->pre_orig_ax = regs->orig_ax;
		r->pre_ax = regs->ax;
		r->pre_ip_user = regs->cs & 3;
		return 0;
	}
	if (!prev->__state || (prev_state & 0x80 /* TASK_DEAD: the exit */))
		return 0;
	bpf_map_update_elem(&recs, &tid, &zero_rec, BPF_NOEXIST);
	r = bpf_map_lookup_elem(&recs, &tid);
	if (!r)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	r->episodes++;
	r->out_ts = now;
	r->prev_state = prev_state;
	r->state_now = prev->__state;
	r->in_iowait = sk.in_iowait;
	r->is_current = prev == bpf_get_current_task_btf();
	r->kthread = !!(prev->flags & PF_KTHREAD);
	r->compat = !!(prev->thread_info.status & TS_COMPAT);
	r->orig_ax = regs->orig_ax;
	r->ax = regs->ax;
	r->di = regs->di;
	r->si = regs->si;
	r->dx = regs->dx;
	r->r10 = regs->r10;
	r->in_syscall = regs->ax == (unsigned long)-ENOSYS;
	r->mm = (__u64)prev->mm;
	switch (regs->orig_ax) {
	case 0:
	case 1:
	case 17:
	case 18:
	case 19:
	case 20: /* read write pread pwrite readv writev */
	case 7:
	case 23: /* poll, select: fd not the first arg, but record anyway */
	case 232:
	case 281:
	case 441: /* epoll_wait, epoll_pwait, epoll_pwait2 */
	case 43:
	case 288:
	case 44:
	case 45:
	case 46:
	case 47: /* accept(4), send/recv */
		resolve_fd(prev, regs->di, r);
		break;
	case 202: /* futex */
		if (!(regs->si & 128)) {
			struct vma_ctx c = { .r = r };

			r->find_vma_ret = bpf_find_vma(prev, regs->di, vma_cb, &c, 0);
			r->find_vma_tried = 1;
			if (r->find_vma_ret == 0)
				__sync_fetch_and_add(&find_vma_results[0], 1);
			else if (r->find_vma_ret == -16)
				__sync_fetch_and_add(&find_vma_results[1], 1);
			else if (r->find_vma_ret == -2)
				__sync_fetch_and_add(&find_vma_results[3], 1);
			else
				__sync_fetch_and_add(&find_vma_results[2], 1);
		}
		break;
	case 449: { /* futex_waitv: first waiter's uaddr, from user memory */
		struct futex_waitv w = {};

		r->uread_ret = bpf_probe_read_user(&w, sizeof(w), (void *)regs->di);
		r->waitv_uaddr0 = w.uaddr;
		r->waitv_flags0 = w.flags;
		break;
	}
	}
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct probe_rec *r;
	struct pt_regs *regs;
	__u32 tid;

	if (p->tgid != target_tgid)
		return 0;
	tid = p->pid;
	r = bpf_map_lookup_elem(&recs, &tid);
	if (!r)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	r->waker_tid = cur->pid;
	r->waker_orig_ax = regs->orig_ax;
	r->waker_di = regs->di;
	r->waker_si = regs->si;
	r->waker_in_syscall = regs->ax == (unsigned long)-ENOSYS;
	r->wake_to_run_ts = bpf_ktime_get_ns();
	if (r->out_ts)
		r->last_block_ns = r->wake_to_run_ts - r->out_ts;
	return 0;
}
