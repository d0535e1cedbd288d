/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_PROBE_H
#define PLUMB_PROBE_H

/*
 * What the running kernel offers BPF, probed once at start-up: modules ask before they load
 * and choose, per attach point, the best program the kernel can run (or a fallback, or say
 * the metric is unsupported). `plumb agent --check` prints the table.
 *
 * Test-only: PLUMB_TEST_HIDE=<name>[,<name>...] makes the probes report these features
 * (by the names below) or tracepoints ("category/event") as absent, so tests can drive the
 * fallbacks on a kernel that has everything.
 */
#include <stdbool.h>
#include <stdio.h>

enum kernel_feature {
	FEAT_BTF, /* /sys/kernel/btf/vmlinux: CO-RE relocations need it */
	FEAT_SYSCALL_TRACEPOINTS, /* CONFIG_FTRACE_SYSCALLS: syscalls/sys_{enter,exit}_* */
	FEAT_RAW_TP, /* BPF_PROG_TYPE_RAW_TRACEPOINT (4.17) */
	FEAT_TP_BTF, /* tp_btf programs: BPF_PROG_TYPE_TRACING + BPF_TRACE_RAW_TP (5.5) */
	FEAT_ITER_TASK, /* iter/task programs (5.8) */
	FEAT_RINGBUF, /* BPF_MAP_TYPE_RINGBUF (5.8) */
	FEAT_TASK_STORAGE, /* BPF_MAP_TYPE_TASK_STORAGE (5.11) */
	FEAT_CURRENT_TASK_BTF, /* bpf_get_current_task_btf() (5.11) */
	FEAT_TASK_PT_REGS, /* bpf_task_pt_regs() in tracepoint programs (5.15) */
	FEAT_BPF_STATS, /* kernel.bpf_stats_enabled=1: programs' run time (informational) */
	FEAT_STEAL, /* rq->prev_steal_time_rq: steal kept out of CPU time (PARAVIRT_TIME_ACCOUNTING) */
	FEAT_SLEEP_REMAINDER, /* sched can take sleep as the remainder (bpf/sched.bpf.c) */
	FEAT_DELAYED_DEQUEUE, /* EEVDF's delayed dequeue: sched marks moves (bpf/sched.bpf.c) */
	FEAT_BPF_LOOP, /* bpf_loop() in tracepoint programs (5.17) */
	KERNEL_FEATURES,
};

/* Whether the kernel has a feature; the first call for each probes and caches the answer. */
bool kernel_has(enum kernel_feature f);
const char *kernel_feature_name(enum kernel_feature f);

/* Whether tracefs lists <category>/<event> (tracefs must be mounted: tracefs_ensure()). */
bool tracepoint_exists(const char *category, const char *event);

/*
 * Number of arguments the tracepoint's BTF prototype (btf_trace_<event>) gives a tp_btf or
 * raw_tp program, or -ENOENT when the kernel's BTF has no such tracepoint.
 */
int tracepoint_btf_args(const char *event);
/* Whether the kernel's struct <type> has a member <member> (its BTF says), also inside its
 * anonymous structs and unions (io_kiocb.cmd is in one). */
bool btf_struct_has(const char *type, const char *member);
/* Whether argument i (from 0, after __data) of tp_btf tracepoint event is a pointer. */
bool tracepoint_btf_arg_is_ptr(const char *event, int i);

/* The kernel release and one line per feature: name, yes/no, what it is. */
void kernel_features_print(FILE *out);

/* Whether PLUMB_TEST_HIDE names this feature or tracepoint (test-only). */
bool probe_hidden(const char *name);

#endif
