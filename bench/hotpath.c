// SPDX-License-Identifier: GPL-2.0
/*
 * The io module's per-syscall cost: the time a syscall takes with the module's programs
 * attached minus without, measured in one process that attaches and detaches the real
 * io.bpf.o between short batches. Alternating every few milliseconds cancels the slow drift
 * of a shared machine far better than separate runs can; the report is the median of the
 * paired differences.
 *
 *   hotpath [--floor [--gate]] [--no-latency] [--sample N | --windows N | --no-enter
 *           [--idle-events]] [--pairs N] [--calls N | --seconds S] TMPFS_FILE
 *   hotpath --hold [--floor] [--no-latency]
 *
 * --floor loads bench/floor.bpf.c instead: empty programs on the same tracepoints (enter
 * programs too unless --no-latency), the kernel's own price for any program there. --gate
 * makes them check the handover gate (bpf/gate.bpf.h) first: above the floor, its price.
 *
 * --windows N attaches the enter program as the agent does by default (enter_rw on raw
 * sys_enter, src/window.h): for 1/N of each second (of each --window-period S seconds),
 * timing every call then. Its batches are 3 periods long instead of --calls calls; the report
 * gives the share of the time the windows were open.
 *
 * --no-enter: the windows' cost without their windows: the exit programs as they are between
 * windows (latency on, no call stamped: no task-storage lookup), the enter program never
 * attached; --idle-events adds perf events on the read and write enter tracepoints (disabled,
 * no program on them), what the windows kept open before 2026-12-05: their cost on every
 * syscall.
 *
 * --seconds S makes every batch S seconds long instead of --calls calls (the clock read every
 * 1000 calls): the other modes measured as the windows are, for a like-for-like comparison.
 *
 * --hold attaches the programs and keeps them attached until SIGTERM or SIGINT (prints
 * "attached" first): bench/overhead.py runs fio beside it for the floor's share of a workload.
 *
 * Three loops: 4 KiB pread64() of TMPFS_FILE (counted by the module), 1-byte read() of
 * /dev/zero (traced, not counted: a char device), getppid() (no program of ours).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "io.skel.h"
#include "floor.skel.h"
#include "window.h"

#define WINDOW_BATCH_S 3

enum loop { LOOP_PREAD, LOOP_ZERO, LOOP_GETPPID, LOOPS };

static const char *const loop_names[LOOPS] = { "pread64 4 KiB, tmpfs (counted)",
					       "read 1 B, /dev/zero (traced, not counted)",
					       "getppid (not traced)" };

static char buf[4096];

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double run_batch(enum loop l, int file_fd, int zero_fd, long calls)
{
	double t0 = now_ns();

	for (long i = 0; i < calls; i++) {
		switch (l) {
		case LOOP_PREAD:
			if (pread(file_fd, buf, sizeof(buf), 0) != sizeof(buf))
				exit(1);
			break;
		case LOOP_ZERO:
			if (read(zero_fd, buf, 1) != 1)
				exit(1);
			break;
		default:
			syscall(SYS_getppid);
		}
	}
	return (now_ns() - t0) / calls;
}

/*
 * --seconds, --windows: ns per call over whole seconds (the windows come one per second from the attach,
 * so each program's window falls in every second exactly once); the clock is read every 1000
 * calls only.
 */
static double run_seconds(enum loop l, int file_fd, int zero_fd, int seconds)
{
	double t0 = now_ns(), end = t0 + seconds * 1e9, t;
	long calls = 0;

	do {
		run_batch(l, file_fd, zero_fd, 1000);
		calls += 1000;
		t = now_ns();
	} while (t < end);
	return (t - t0) / calls;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Either object, behind the three calls the measurement needs. */
struct subject {
	struct io_bpf *io;
	struct floor_bpf *floor;
	unsigned int windows; /* N: enter programs in windows of 1/N of each period */
	int no_enter, idle_events; /* --no-enter [--idle-events] */
	int idle_fds[WINDOW_MAX_PROGRAMS];
	size_t nidle;
	unsigned int period_s; /* the windows' period, seconds (1) */
	size_t nwindowed; /* programs in the windows */
	struct attach_window *window;
	double window_s; /* time the windows were open, all batches */
};

static int subject_load(struct subject *sub, int floor, int latency, unsigned int sample, int gated)
{
	struct bpf_object *obj;
	struct bpf_program *p;

	if (floor) {
		sub->floor = floor_bpf__open();
		if (!sub->floor)
			return -1;
		sub->floor->rodata->gated = gated;
		obj = sub->floor->obj;
	} else {
		sub->io = io_bpf__open();
		if (!sub->io)
			return -1;
		sub->io->rodata->latency_enabled = latency;
		sub->io->rodata->latency_sample_period = sub->windows ? 1 : sample;
		sub->io->rodata->stamps_counted = sub->windows || sub->no_enter;
		obj = sub->io->obj;
		/* windows: enter_rw (raw sys_enter) in them, as src/modules/io.c picks it */
		bpf_object__for_each_program (p, obj)
			if (!strncmp(bpf_program__name(p), "enter_", 6)) {
				if (sub->windows || sub->no_enter)
					bpf_program__set_autoattach(p, false);
				if ((p == sub->io->progs.enter_rw) != !!sub->windows)
					bpf_program__set_autoload(p, false);
			}
	}
	if (!latency)
		bpf_object__for_each_program (p, obj)
			if (!strncmp(bpf_program__name(p), "enter_", 6))
				bpf_program__set_autoload(p, false);
	if (floor)
		return floor_bpf__load(sub->floor);
	if (io_bpf__load(sub->io))
		return -1;
	/* every slot free, slot 0 on top, as the agent leaves them at load (src/modules/io.c) */
	for (__u32 slot = bpf_map__max_entries(sub->io->maps.io_free); slot-- > 0;)
		if (bpf_map_update_elem(bpf_map__fd(sub->io->maps.io_free), NULL, &slot, BPF_ANY))
			return -1;
	return 0;
}

static struct bpf_object *subject_obj(struct subject *sub)
{
	return sub->floor ? sub->floor->obj : sub->io->obj;
}

static int write_sysctl(const char *path, const char *v)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return -1;
	ok = fputs(v, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/*
 * The programs' own run time per call, from kernel.bpf_stats_enabled: precise where the
 * paired end-to-end numbers are noisy, but it leaves out the tracepoint's dispatch and adds
 * the statistics' own two clock reads (compare with --floor for that part).
 */
static int subject_attach(struct subject *sub);
static void subject_detach(struct subject *sub);

static void program_run_times(struct subject *sub, int file_fd, int zero_fd, long calls)
{
	static const char *const progs[] = { "enter_pread64", "exit_pread64", "enter_read",
					     "exit_read", "enter_rw" };
	struct bpf_prog_info info;
	struct bpf_program *p;
	__u32 len;

	if (write_sysctl("/proc/sys/kernel/bpf_stats_enabled", "1")) {
		printf("\n(kernel.bpf_stats_enabled cannot be set: no per-program times)\n");
		return;
	}
	if (subject_attach(sub)) {
		write_sysctl("/proc/sys/kernel/bpf_stats_enabled", "0");
		return;
	}
	run_batch(LOOP_PREAD, file_fd, zero_fd, calls);
	run_batch(LOOP_ZERO, file_fd, zero_fd, calls);
	printf("\n| program | runs | ns per run (bpf_stats) |\n|---|---|---|\n");
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		p = bpf_object__find_program_by_name(subject_obj(sub), progs[i]);
		if (!p || bpf_program__fd(p) < 0)
			continue;
		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) || !info.run_cnt)
			continue;
		printf("| %s | %llu | %.0f |\n", progs[i], (unsigned long long)info.run_cnt,
		       (double)info.run_time_ns / info.run_cnt);
	}
	subject_detach(sub);
	write_sysctl("/proc/sys/kernel/bpf_stats_enabled", "0");
}

static int subject_attach(struct subject *sub)
{
	const char *points[WINDOW_MAX_PROGRAMS];
	int fds[WINDOW_MAX_PROGRAMS];
	struct bpf_program *p;
	char err[256];
	size_t n = 0;

	if (sub->floor)
		return floor_bpf__attach(sub->floor);
	if (io_bpf__attach(sub->io))
		return -1;
	if (sub->idle_events) /* the windows' perf events, as src/modules/io.c picks them */
		bpf_object__for_each_program (p, sub->io->obj)
			if (!strncmp(bpf_program__name(p), "enter_", 6) &&
			    sub->nidle < WINDOW_MAX_PROGRAMS &&
			    (strstr(bpf_program__name(p), "read") ||
			     strstr(bpf_program__name(p), "write"))) {
				sub->idle_fds[sub->nidle] = window_tracepoint_event(
					strchr(bpf_program__section_name(p), '/') + 1);
				if (sub->idle_fds[sub->nidle] < 0)
					return -1;
				sub->nidle++;
			}
	if (!sub->windows)
		return 0;
	/* the windows' one enter program, on raw sys_enter (a tp_btf program: no perf event) */
	fds[n] = bpf_program__fd(sub->io->progs.enter_rw);
	points[n++] = NULL;
	sub->nwindowed = n;
	sub->window = attach_window_start(fds, points, &sub->io->bss->rw_window_gate, n,
					  sub->period_s * 1000000000ull / sub->windows,
					  sub->period_s * 1000000000ull, err, sizeof(err));
	if (!sub->window)
		fprintf(stderr, "hotpath: %s\n", err);
	return sub->window ? 0 : -1;
}

static void subject_detach(struct subject *sub)
{
	struct attach_window_stats st;

	if (sub->floor) {
		floor_bpf__detach(sub->floor);
		return;
	}
	if (sub->window) {
		attach_window_stats(sub->window, &st);
		/* the programs' mean span */
		for (size_t k = 0; k < sub->nwindowed; k++)
			sub->window_s += st.attached_ns[k] / 1e9 / sub->nwindowed;
		attach_window_stop(sub->window);
		sub->window = NULL;
	}
	while (sub->nidle)
		close(sub->idle_fds[--sub->nidle]);
	io_bpf__detach(sub->io);
}

/* --hold: attached until a signal; 0 when it came, 1 when the programs would not attach. */
static int hold(struct subject *sub)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (subject_attach(sub)) {
		fprintf(stderr, "hotpath: cannot attach\n");
		return 1;
	}
	printf("attached\n");
	fflush(stdout);
	sigwait(&set, &sig);
	subject_detach(sub);
	return 0;
}

int main(int argc, char **argv)
{
	int pairs = 7, latency = 1, floor = 0, gated = 0, holding = 0, seconds = 0, file_fd,
	    zero_fd, i;
	unsigned int sample = 1;
	long calls = 200000;
	double *base, *with, *diff;
	struct subject sub = { .period_s = 1 };

	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--hold"))
			holding = 1;
	for (i = 1; holding && i < argc; i++) {
		if (!strcmp(argv[i], "--no-latency"))
			latency = 0;
		else if (!strcmp(argv[i], "--floor"))
			floor = 1;
		else if (strcmp(argv[i], "--hold"))
			break;
	}
	if (holding) {
		if (i != argc) {
			fprintf(stderr, "usage: hotpath --hold [--floor] [--no-latency]\n");
			return 2;
		}
		if (subject_load(&sub, floor, latency, sample, 0)) {
			fprintf(stderr, "hotpath: cannot load the BPF object\n");
			return 1;
		}
		i = hold(&sub);
		io_bpf__destroy(sub.io);
		floor_bpf__destroy(sub.floor);
		return i;
	}
	for (i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "--no-latency"))
			latency = 0;
		else if (!strcmp(argv[i], "--floor"))
			floor = 1;
		else if (!strcmp(argv[i], "--gate"))
			gated = 1;
		else if (!strcmp(argv[i], "--sample") && i + 1 < argc - 1)
			sample = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--windows") && i + 1 < argc - 1)
			sub.windows = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-enter"))
			sub.no_enter = 1;
		else if (!strcmp(argv[i], "--idle-events"))
			sub.idle_events = 1;
		else if (!strcmp(argv[i], "--window-period") && i + 1 < argc - 1)
			sub.period_s = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--pairs") && i + 1 < argc - 1)
			pairs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--calls") && i + 1 < argc - 1)
			calls = atol(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc - 1)
			seconds = atoi(argv[++i]);
		else
			break;
	}
	if (i != argc - 1 || pairs < 5 || calls < 100 || !sample || (sample & (sample - 1)) ||
	    (gated && !floor) || (sub.windows && (floor || !latency || sub.windows > 100)) ||
	    (sub.no_enter && (floor || !latency || sub.windows || sample > 1)) ||
	    (sub.idle_events && !sub.no_enter) || !sub.period_s || sub.period_s > 60 ||
	    seconds < 0 || seconds > 60) {
		fprintf(stderr, "usage: hotpath [--floor [--gate]] [--no-latency] [--sample 2^k | "
				"--windows 2..100 [--window-period 1..60] | --no-enter "
				"[--idle-events]] [--pairs N>=5] [--calls N | --seconds 1..60] "
				"FILE\n");
		return 2;
	}
	file_fd = open(argv[argc - 1], O_RDONLY);
	zero_fd = open("/dev/zero", O_RDONLY);
	if (file_fd < 0 || zero_fd < 0) {
		perror("open");
		return 1;
	}
	if (subject_load(&sub, floor, latency, sample, gated)) {
		fprintf(stderr, "hotpath: cannot load the BPF object\n");
		return 1;
	}
	base = calloc(pairs, sizeof(double));
	with = calloc(pairs, sizeof(double));
	diff = calloc(pairs, sizeof(double));
	printf("| loop | without (ns/call) | with %s (ns/call) | added (ns/call) |\n",
	       !floor ? "io module" :
	       gated  ? "gate-only programs" :
			"empty programs");
	printf("|---|---|---|---|\n");
	if (sub.windows && !seconds)
		seconds = WINDOW_BATCH_S * sub.period_s;
	for (enum loop l = 0; l < LOOPS; l++) {
		double with_s = 0;

		sub.window_s = 0;
		for (i = 0; i < pairs; i++) {
			base[i] = seconds ? run_seconds(l, file_fd, zero_fd, seconds) :
					    run_batch(l, file_fd, zero_fd, calls);
			if (subject_attach(&sub)) {
				fprintf(stderr, "hotpath: cannot attach\n");
				return 1;
			}
			with[i] = seconds ? run_seconds(l, file_fd, zero_fd, seconds) :
					    run_batch(l, file_fd, zero_fd, calls);
			with_s += seconds;
			subject_detach(&sub);
			diff[i] = with[i] - base[i];
		}
		printf("| %s | %.0f | %.0f | %+.0f |\n", loop_names[l], median(base, pairs),
		       median(with, pairs), median(diff, pairs));
		if (sub.windows)
			fprintf(stderr, "%s: windows open %.4f of the time (1/%u = %.4f)\n",
				loop_names[l], sub.window_s / with_s, sub.windows,
				1.0 / sub.windows);
		fflush(stdout);
	}
	/* per run, the windows change nothing but how often the enter programs run */
	program_run_times(&sub, file_fd, zero_fd, sub.windows ? calls * 25 : calls * 5);
	io_bpf__destroy(sub.io);
	floor_bpf__destroy(sub.floor);
	return 0;
}
