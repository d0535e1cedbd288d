/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_DETACH_H
#define PLUMB_DETACH_H

/*
 * Detaching quickly. Each BPF link on a syscall tracepoint costs the kernel a tasks-trace RCU
 * grace period to detach (perf_event_detach_bpf_prog(), 6.12+) and another to free its perf
 * event (perf_trace_event_unreg() -> tracepoint_synchronize_unregister()), 15-55 ms each on
 * these machines. The detaches can wait in parallel; the frees are serialised under the
 * kernel's event_mutex. So: links are destroyed from parallel threads, and the bare perf
 * events are handed to a short-lived child that frees them after the agent has exited.
 * Measured: SIGTERM to exit 0.7-1.6 s before, ~0.06 s after (29-38 attach points).
 */
#include <stddef.h>

struct bpf_link;

/*
 * Lets a child process take a reference to every perf event this process has open, so that
 * destroying the links afterwards only detaches the programs; the child closes the events
 * once this process has exited, and exits. Without it (any step failing) nothing changes,
 * only the slow path stays.
 */
void perf_events_handoff(void);

/* Destroys links[0..n) (NULL entries skipped) from parallel threads and sets them to NULL. */
void links_destroy_parallel(struct bpf_link **links, size_t n);

#endif
