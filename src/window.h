/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_WINDOW_H
#define PLUMB_WINDOW_H

/*
 * Programs attached for a window of every period, from a thread of their own: io's latency
 * sampling (docs/architecture.md, "Latency windows"). An enter program costs every call it
 * sees its dispatch (~190 ns on the AMD hosts, bench/results/hotpath.md) even when it decides
 * to do nothing; attached 1/N of the time it costs 1/N of that. io's is one tp_btf program
 * (raw sys_enter), attached with BPF_RAW_TRACEPOINT_OPEN and detached by closing the link.
 *
 * A program on a tracepoint event instead gets a perf event, opened once and never enabled (a BPF
 * program on a tracepoint event runs whether the event is enabled or not); a window attaches
 * each program with BPF_LINK_CREATE (~10 us) and closes its link window_ns later. A program
 * stops early in its link's close (but see below), and the close then waits for an RCU grace period
 * (~40 ms), and on 6.1 and 6.12 the next close's detach waits behind it: so the programs'
 * windows are staggered 50 ms apart (src/window.c), each measured. The perf events stay, so
 * a window does not pay their free (another grace period, serialised).
 *
 * A program can run well after its close began and before its attach returned (the kernel's work
 * around them, slow in an emulated guest, and serialised with other programs' attaches and
 * detaches): a 6.12 guest in CI timed 2.6 times as many calls as its measured windows held, and 18%
 * of the calls a 6.12 guest's program saw came outside the spans (0.15% on this project's machine).
 * So each program may have a gate, a word of its object's .bss that the thread sets to 1 once the
 * program is attached and to 0 before its close, each at its span's edge: the program times a call
 * only while its gate is 1, and its span is exactly the time it times.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct attach_window;

#define WINDOW_MAX_PROGRAMS 16

struct attach_window_stats {
	uint64_t windows; /* windows that attached every program */
	uint64_t failed; /* windows that could not attach one (logged once) */
	/* each program's time attached, all windows (its attach to the start of its close) */
	uint64_t attached_ns[WINDOW_MAX_PROGRAMS];
};

/*
 * Opens a perf event for each of n tracepoints ("category/event"; NULL for a tp_btf program,
 * attached to its own raw tracepoint with BPF_RAW_TRACEPOINT_OPEN): the windows, not yet
 * running. From attach_window_run on, in each period of period_ns, each of the programs
 * prog_fds[0..n) is attached for window_ns, at a random offset (window_pieces), program k
 * 50 ms after program k - 1 (n * 50 ms + window_ns must fit in the period); gates[k] (its
 * .bss, mmapped; gates NULL: none) is 1 from its attach to its close. NULL with err on
 * failure (nothing left open).
 */
struct attach_window *attach_window_open(const int *prog_fds, const char *const *points,
					 uint32_t *gates, size_t n, uint64_t window_ns,
					 uint64_t period_ns, char *err, size_t errlen);

/*
 * Starts the windows' thread (once; 0 when it runs). A thread keeps the capabilities it was
 * started with, so the agent calls this after dropping them (its first tick), not at load.
 */
int attach_window_run(struct attach_window *w, char *err, size_t errlen);

/* attach_window_open and attach_window_run at once (bench/hotpath.c). */
struct attach_window *attach_window_start(const int *prog_fds, const char *const *points,
					  uint32_t *gates, size_t n, uint64_t window_ns,
					  uint64_t period_ns, char *err, size_t errlen);

void attach_window_stats(struct attach_window *w, struct attach_window_stats *out);

/*
 * Where a period's window of span_ns lies, from offset (any number: taken modulo period_ns):
 * at that offset in the period, and a window that would run past the period's end has that
 * part at the period's start instead (wrapped). So every phase of the period is in the window
 * with the same chance, span_ns / period_ns, and a workload that repeats on the period's beat
 * is sampled as any other. (Until 2026-12-06 the offset was drawn from the room left before
 * the period's end: the phases near its start were seldom in a window and the last
 * window_ns + 50 ms never.) Writes the pieces in time order, each inside the period; returns
 * how many, 1 or 2.
 */
int window_pieces(uint64_t period, uint64_t period_ns, uint64_t span_ns, uint64_t offset,
		  uint64_t start[2], uint64_t len[2]);

/*
 * A perf event on the tracepoint ("category/event"), on CPU 0 and disabled: only a handle for
 * programs; -errno when it cannot be opened.
 */
int window_tracepoint_event(const char *point);

/*
 * For a window thread (this one's, netstack's): waits on cond, under lock, until monotonic
 * time t (ns) or *stop; true when stopped (cond must use CLOCK_MONOTONIC).
 */
bool window_wait_until(pthread_mutex_t *lock, pthread_cond_t *cond, const bool *stop, uint64_t t);

/* xorshift64 of *state (not 0): a window's random offset in its period. */
uint64_t window_random(uint64_t *state);

/*
 * For windows that must stay whole (netstack's follow packets through one unbroken window):
 * the next window's start after one that started at start, given a random number. After the
 * window and its drain comes a gap of random % (2 * slack + 1), slack being the period less
 * the window and the drain: a period apart on average (a start that comes late, as netstack's
 * do when the agent's tick closes the interval after it, begins then: a little more). Starts
 * so drawn (a renewal process) put every phase of any beat a workload keeps in a window
 * equally often in the long run.
 */
uint64_t window_next_start(uint64_t start, uint64_t period_ns, uint64_t window_ns,
			   uint64_t drain_ns, uint64_t random);

/* Ends the current window, stops the thread, closes the perf events. NULL is fine. */
void attach_window_stop(struct attach_window *w);

#endif
