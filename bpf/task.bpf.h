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

#endif
