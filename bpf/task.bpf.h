/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers on a task shared by the modules' BPF programs. */
#ifndef PLUMB_TASK_BPF_H
#define PLUMB_TASK_BPF_H

/* The file behind a task's fd, or NULL: current->files->fdt, bounds-checked. */
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
