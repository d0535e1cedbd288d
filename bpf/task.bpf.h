/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers on a task shared by the modules' BPF programs. */
#ifndef PLUMB_TASK_BPF_H
#define PLUMB_TASK_BPF_H

/*
 * 6.2+: a typed, read-only view of any address, so fields of objects reached through it are
 * plain loads instead of bpf_probe_read_kernel() calls. Where the kernel lacks it (6.1) libbpf
 * resolves the weak symbol to 0, the verifier drops the branch, and the probe reads remain.
 * The verifier inlines it: no call. Each helper call avoided matters most on hosts whose
 * kernel returns through a mitigation thunk (AMD's Safe RET: bench/results/hotpath.md).
 */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;
#ifndef bpf_ksym_exists /* libbpf 1.2+ */
#define bpf_ksym_exists(sym) (!!(sym))
#endif

/*
 * The file behind a task's fd, or NULL: current->files->fdt, bounds-checked. The slot fds[fd]
 * is read through a struct llist_node view (one pointer at offset 0, the same layout since
 * 2.6.37): the verifier types fdt->fd as a number, so a plain load is refused.
 */
static __always_inline struct file *fd_to_file(struct task_struct *task, long fd)
{
	struct fdtable *fdt = task->files->fdt;
	struct file **fds;
	struct file *file = NULL;
	struct llist_node *slot;

	if (fd < 0 || fd >= fdt->max_fds)
		return NULL;
	fds = fdt->fd;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		slot = bpf_rdonly_cast(&fds[fd], bpf_core_type_id_kernel(struct llist_node));
		return bpf_rdonly_cast(slot->next, bpf_core_type_id_kernel(struct file));
	}
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	return file;
}

/* The task's cgroup v2 id: what bpf_get_current_cgroup_id() returns, by loads, no call. */
static __always_inline __u64 task_cgroup_id(struct task_struct *task)
{
	return task->cgroups->dfl_cgrp->kn->id;
}

/*
 * The steal so far (ns) of the CPU a task is on (a switch: this one; sched's iterator: another
 * one); 0 where the kernel does not keep it (rq->prev_steal_time_rq, see sched.bpf.c's
 * steal_on: folded in at each clock update, so up to a tick behind). Loads straight through
 * the task's BTF pointers (a faulting one reads 0), not helper calls: sched's switch pays this
 * on every context switch. Every task has se.cfs_rq, whatever its class (set_task_rq), the
 * idle task too.
 */
static __always_inline __u64 task_steal(struct task_struct *t)
{
	struct cfs_rq *cfs;
	struct rq *rq = NULL;

	if (!bpf_core_field_exists(t->se.cfs_rq) || !bpf_core_field_exists(rq->prev_steal_time_rq))
		return 0;
	cfs = t->se.cfs_rq;
	rq = cfs ? cfs->rq : NULL;
	return rq ? rq->prev_steal_time_rq : 0;
}

#endif
