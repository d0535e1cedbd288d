// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel feature probes. Each answer comes from asking the kernel itself (load a two-instruction
 * program, create a map, look in BTF or tracefs), never from the version number: distribution
 * kernels backport BPF features (RHEL 9's 5.14 has much of 6.x), and sandboxed kernels lack
 * what their version promises (no kprobes on the 6.18 of these machines).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "probe.h"

#define TRACEFS "/sys/kernel/tracing"

static const struct {
	const char *name;
	const char *what;
} features[KERNEL_FEATURES] = {
	[FEAT_BTF] = { "btf", "kernel BTF at /sys/kernel/btf/vmlinux (CO-RE)" },
	[FEAT_SYSCALL_TRACEPOINTS] = { "syscall_tracepoints",
				       "syscalls/sys_{enter,exit}_* (CONFIG_FTRACE_SYSCALLS)" },
	[FEAT_RAW_TP] = { "raw_tp", "raw tracepoint programs (4.17)" },
	[FEAT_TP_BTF] = { "tp_btf", "BTF-typed tracepoint programs (5.5)" },
	[FEAT_ITER_TASK] = { "iter_task", "BPF task iterators (5.8)" },
	[FEAT_RINGBUF] = { "ringbuf", "BPF ring buffer (5.8)" },
	[FEAT_TASK_STORAGE] = { "task_storage", "task-local storage maps (5.11)" },
	[FEAT_CURRENT_TASK_BTF] = { "current_task_btf", "bpf_get_current_task_btf() (5.11)" },
	[FEAT_TASK_PT_REGS] = { "task_pt_regs",
				"bpf_task_pt_regs(): syscall arguments at exit (5.15)" },
	[FEAT_BPF_STATS] = { "bpf_stats", "kernel.bpf_stats_enabled=1: program run time" },
	[FEAT_STEAL] = { "steal", "hypervisor steal kept out of CPU time, per run queue "
				  "(CONFIG_PARAVIRT_TIME_ACCOUNTING)" },
	[FEAT_SLEEP_REMAINDER] = { "sleep_remainder",
				   "sleep as the rest of a thread's time: uninterruptible blocks "
				   "flagged (sched_contributes_to_load), run-queue clocks, IRQ "
				   "time "
				   "in CPU time (CONFIG_IRQ_TIME_ACCOUNTING off)" },
	[FEAT_DELAYED_DEQUEUE] = { "delayed_dequeue",
				   "EEVDF's delayed dequeue (sched_entity.sched_delayed, 6.12): "
				   "sched marks a sleeper moved while its dequeue is delayed" },
	[FEAT_BPF_LOOP] = { "bpf_loop", "bpf_loop(): io's AIO completions, any number (5.17)" },
};

/* 0: not probed yet, 1: present, -1: absent */
static int probed[KERNEL_FEATURES];

bool probe_hidden(const char *name)
{
	const char *list = getenv("PLUMB_TEST_HIDE"), *p;
	size_t n = strlen(name);

	for (p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

/* Loads "r0 = 0; exit" as a BPF_PROG_TYPE_TRACING program of the given attach kind. */
static bool tracing_prog_loads(const char *target, enum bpf_attach_type type)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = type);
	int id, fd;

	id = libbpf_find_vmlinux_btf_id(target, type);
	if (id < 0)
		return false;
	opts.attach_btf_id = id;
	fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, NULL, "GPL", insns, 2, &opts);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static bool bpf_stats_enabled(void)
{
	char c = '0';
	int fd = open("/proc/sys/kernel/bpf_stats_enabled", O_RDONLY);

	if (fd < 0)
		return false;
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c == '1';
}

/* t (a struct or union) has member, also inside its anonymous structs and unions */
static bool members_have(const struct btf *btf, const struct btf_type *t, const char *member,
			 int depth)
{
	const struct btf_member *m = btf_members(t);
	const struct btf_type *inner;
	const char *name;

	for (int i = 0; i < btf_vlen(t); i++) {
		name = btf__name_by_offset(btf, m[i].name_off);
		if (name && !strcmp(name, member))
			return true;
		if (name && *name)
			continue;
		inner = btf__type_by_id(btf, m[i].type);
		if (depth < 4 && inner && (btf_is_struct(inner) || btf_is_union(inner)) &&
		    members_have(btf, inner, member, depth + 1))
			return true;
	}
	return false;
}

bool btf_struct_has(const char *type, const char *member)
{
	struct btf *btf = btf__load_vmlinux_btf();
	const struct btf_type *t;
	bool has;
	int id;

	if (!btf)
		return false;
	id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
	t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	has = t && members_have(btf, t, member, 0);
	btf__free(btf);
	return has;
}

static bool probe(enum kernel_feature f)
{
	struct btf *btf;

	switch (f) {
	case FEAT_BTF:
		if (faccessat(AT_FDCWD, "/sys/kernel/btf/vmlinux", R_OK, AT_EACCESS))
			return false;
		btf = btf__load_vmlinux_btf();
		if (!btf)
			return false;
		btf__free(btf);
		return true;
	case FEAT_SYSCALL_TRACEPOINTS:
		return tracepoint_exists("syscalls", "sys_enter_read");
	case FEAT_RAW_TP:
		return libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_RAW_TRACEPOINT, NULL) == 1;
	case FEAT_TP_BTF:
		return tracing_prog_loads("sched_switch", BPF_TRACE_RAW_TP);
	case FEAT_ITER_TASK:
		return tracing_prog_loads("task", BPF_TRACE_ITER);
	case FEAT_RINGBUF:
		return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
	case FEAT_TASK_STORAGE:
		return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1;
	case FEAT_CURRENT_TASK_BTF:
		return libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT,
					       BPF_FUNC_get_current_task_btf, NULL) == 1;
	case FEAT_TASK_PT_REGS:
		return libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_task_pt_regs,
					       NULL) == 1;
	case FEAT_BPF_STATS:
		return bpf_stats_enabled();
	case FEAT_STEAL:
		return btf_struct_has("rq", "prev_steal_time_rq");
	case FEAT_SLEEP_REMAINDER:
		/* CONFIG_IRQ_TIME_ACCOUNTING takes IRQ time out of CPU time: it would be "sleep" */
		return btf_struct_has("task_struct", "sched_contributes_to_load") &&
		       btf_struct_has("sched_entity", "cfs_rq") &&
		       !btf_struct_has("rq", "prev_irq_time");
	case FEAT_DELAYED_DEQUEUE:
		return btf_struct_has("sched_entity", "sched_delayed");
	case FEAT_BPF_LOOP:
		return libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_loop, NULL) == 1;
	case KERNEL_FEATURES:
		break;
	}
	return false;
}

bool kernel_has(enum kernel_feature f)
{
	if (f < 0 || f >= KERNEL_FEATURES)
		return false;
	if (!probed[f])
		probed[f] = !probe_hidden(features[f].name) && probe(f) ? 1 : -1;
	return probed[f] > 0;
}

const char *kernel_feature_name(enum kernel_feature f)
{
	return f >= 0 && f < KERNEL_FEATURES ? features[f].name : "?";
}

bool tracepoint_exists(const char *category, const char *event)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", category, event);
	if (probe_hidden(path))
		return false;
	snprintf(path, sizeof(path), TRACEFS "/events/%s/%s/id", category, event);
	return faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) == 0;
}

/* The func_proto of a tp_btf tracepoint (void *__data, its arguments...), or NULL. */
static const struct btf_type *tracepoint_proto(const char *event, struct btf **out)
{
	static struct btf *btf; /* parsed once: a few MB, kept for the process */
	const struct btf_type *t;
	char name[256];
	int id;

	if (probe_hidden(event))
		return NULL;
	if (!btf)
		btf = btf__load_vmlinux_btf();
	if (!btf)
		return NULL;
	snprintf(name, sizeof(name), "btf_trace_%s", event);
	id = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF);
	/* typedef -> pointer -> func_proto(void *__data, the tracepoint's arguments...) */
	t = id > 0 ? btf__type_by_id(btf, btf__type_by_id(btf, id)->type) : NULL;
	t = t && btf_is_ptr(t) ? btf__type_by_id(btf, t->type) : NULL;
	*out = btf;
	return t && btf_is_func_proto(t) ? t : NULL;
}

int tracepoint_btf_args(const char *event)
{
	struct btf *btf;
	const struct btf_type *t = tracepoint_proto(event, &btf);

	return t ? btf_vlen(t) - 1 : -ENOENT;
}

bool tracepoint_btf_arg_is_ptr(const char *event, int i)
{
	struct btf *btf;
	const struct btf_type *t = tracepoint_proto(event, &btf);

	if (!t || i < 0 || i + 1 >= btf_vlen(t))
		return false;
	t = btf__type_by_id(btf, btf__resolve_type(btf, btf_params(t)[i + 1].type));
	return t && btf_is_ptr(t);
}

void kernel_features_print(FILE *out)
{
	struct utsname u;

	if (!uname(&u))
		fprintf(out, "kernel %s %s\n", u.release, u.machine);
	fprintf(out, "\n%-20s %-4s %s\n", "FEATURE", "HAS", "WHAT");
	for (int f = 0; f < KERNEL_FEATURES; f++)
		fprintf(out, "%-20s %-4s %s\n", features[f].name, kernel_has(f) ? "yes" : "no",
			features[f].what);
}
