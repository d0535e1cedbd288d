// SPDX-License-Identifier: GPL-2.0
/*
 * plumb io: a live, iotop-like table of file I/O per workload and mount. It loads the io
 * module itself (no agent needed) and prints the change over each interval.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "agent.h"
#include "cli.h"
#include "io_view.h"
#include "log.h"
#include "plumb.h"
#include "host.h"
#include "modules/io_module.h"

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

static const struct io_row *find_row(const struct io_row *rows, size_t n, const struct io_row *r)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].cgroup, r->cgroup) && !strcmp(rows[i].mount, r->mount) &&
		    !strcmp(rows[i].fstype, r->fstype))
			return &rows[i];
	return NULL;
}

/* cur - prev, field by field (every field of io_row after the names is a uint64_t counter) */
static void row_delta(struct io_row *d, const struct io_row *cur, const struct io_row *prev)
{
	size_t first = offsetof(struct io_row, bytes) / sizeof(uint64_t);
	const uint64_t *c = (const uint64_t *)cur, *p = (const uint64_t *)prev;
	uint64_t *o = (uint64_t *)d;

	*d = *cur;
	if (!prev)
		return;
	for (size_t i = first; i < sizeof(*d) / sizeof(uint64_t); i++)
		o[i] = c[i] >= p[i] ? c[i] - p[i] : c[i]; /* an expired entry restarts at 0 */
}

static int row_active(const struct io_row *d)
{
	uint64_t any = d->calls[IO_READ] + d->calls[IO_WRITE];

	for (int o = 0; o < IO_OPS; o++)
		any += d->ops[o] + d->op_errors[o];
	return any != 0;
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = *s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void human_bytes(double v, char *out, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(out, len, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

static void human_seconds(double s, char *out, size_t len)
{
	if (s == 0)
		snprintf(out, len, "-");
	else if (s < 1e-3)
		snprintf(out, len, "%.0fus", s * 1e6);
	else if (s < 1)
		snprintf(out, len, "%.1fms", s * 1e3);
	else
		snprintf(out, len, "%.2fs", s);
}

static void print_json(const struct io_row *d, size_t n, double secs)
{
	printf("{\"time\":%ld,\"interval_seconds\":%.3f,\"rows\":[", (long)time(NULL), secs);
	for (size_t i = 0, first = 1; i < n; i++) {
		if (!row_active(&d[i]))
			continue;
		printf("%s{\"cgroup\":", first ? "" : ",");
		first = 0;
		json_string(d[i].cgroup);
		printf(",\"workload\":");
		json_string(d[i].workload);
		printf(",\"mount\":");
		json_string(d[i].mount);
		printf(",\"fstype\":");
		json_string(d[i].fstype);
		for (int dir = 0; dir < IO_DIRS; dir++)
			printf(",\"%s_bytes_per_second\":%.1f,\"%s_calls_per_second\":%.1f,"
			       "\"%s_bytes\":%llu,\"%s_calls\":%llu,\"%s_errors\":%llu,"
			       "\"%s_p50_seconds\":%.9f,\"%s_p99_seconds\":%.9f",
			       io_dir_names[dir], d[i].bytes[dir] / secs, io_dir_names[dir],
			       d[i].calls[dir] / secs, io_dir_names[dir],
			       (unsigned long long)d[i].bytes[dir], io_dir_names[dir],
			       (unsigned long long)d[i].calls[dir], io_dir_names[dir],
			       (unsigned long long)d[i].errors[dir], io_dir_names[dir],
			       io_latency_quantile(d[i].lat[dir], 0.5), io_dir_names[dir],
			       io_latency_quantile(d[i].lat[dir], 0.99));
		printf(",\"fsync_p50_seconds\":%.9f,\"fsync_p99_seconds\":%.9f",
		       io_latency_quantile(d[i].lat[IO_LAT_FSYNC], 0.5),
		       io_latency_quantile(d[i].lat[IO_LAT_FSYNC], 0.99));
		printf(",\"ops\":{");
		for (int o = 0; o < IO_OPS; o++)
			printf("%s\"%s\":%llu", o ? "," : "", io_op_names[o],
			       (unsigned long long)d[i].ops[o]);
		printf("},\"op_errors\":{");
		for (int o = 0; o < IO_OPS; o++)
			printf("%s\"%s\":%llu", o ? "," : "", io_op_names[o],
			       (unsigned long long)d[i].op_errors[o]);
		printf("}}");
	}
	printf("]}\n");
}

static void print_table(const struct io_row *d, size_t n, double secs, int tty)
{
	char rb[16], wb[16], r50[16], r99[16], w50[16], w99[16], f99[16], tbuf[32];
	time_t now = time(NULL);
	uint64_t ops;

	strftime(tbuf, sizeof(tbuf), "%H:%M:%S", localtime(&now));
	if (tty)
		printf("\033[H\033[2J");
	printf("plumb io  %s  interval %.1fs\n", tbuf, secs);
	printf("%-28s %-20s %-8s %9s %9s %8s %8s %5s %6s %7s %7s %7s %7s %7s\n", "WORKLOAD",
	       "MOUNT", "FSTYPE", "READ/s", "WRITE/s", "RCALL/s", "WCALL/s", "ERR", "OPS/s",
	       "R_P50", "R_P99", "W_P50", "W_P99", "F_P99");
	for (size_t i = 0; i < n; i++) {
		if (!row_active(&d[i]))
			continue;
		ops = 0;
		for (int o = 0; o < IO_OPS; o++)
			ops += d[i].ops[o];
		human_bytes(d[i].bytes[IO_READ] / secs, rb, sizeof(rb));
		human_bytes(d[i].bytes[IO_WRITE] / secs, wb, sizeof(wb));
		human_seconds(io_latency_quantile(d[i].lat[IO_READ], 0.5), r50, sizeof(r50));
		human_seconds(io_latency_quantile(d[i].lat[IO_READ], 0.99), r99, sizeof(r99));
		human_seconds(io_latency_quantile(d[i].lat[IO_WRITE], 0.5), w50, sizeof(w50));
		human_seconds(io_latency_quantile(d[i].lat[IO_WRITE], 0.99), w99, sizeof(w99));
		human_seconds(io_latency_quantile(d[i].lat[IO_LAT_FSYNC], 0.99), f99, sizeof(f99));
		printf("%-28.28s %-20.20s %-8.8s %9s %9s %8.0f %8.0f %5llu %6.0f %7s %7s %7s %7s "
		       "%7s\n",
		       d[i].workload, d[i].mount, d[i].fstype, rb, wb, d[i].calls[IO_READ] / secs,
		       d[i].calls[IO_WRITE] / secs,
		       (unsigned long long)(d[i].errors[IO_READ] + d[i].errors[IO_WRITE]),
		       ops / secs, r50, r99, w50, w99, f99);
	}
	if (!tty)
		printf("\n");
	fflush(stdout);
}

int io_view_run(const struct io_options *o)
{
	struct plumb_config cfg = { .cgroup_grace_s = 60,
				    .io_capacity = o->io_capacity,
				    .io_latency = o->io_latency,
				    .io_latency_sample = o->io_latency_sample };
	struct sigaction sa = { .sa_handler = on_signal };
	struct io_row *prev = NULL, *cur, *delta;
	size_t nprev = 0, ncur;
	char cgroup_root[4096];
	int tty = isatty(STDOUT_FILENO), ret = 0;
	double t0, t1;
	long shown = 0;

	if (privileges_check("plumb io") || tracefs_ensure() ||
	    agent_config(&cfg, cgroup_root, sizeof(cgroup_root)))
		return 1;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (io_module.load(&io_module, &cfg)) {
		pr_warn("io: %s\n", io_module.error);
		return 1;
	}
	pr_info("io: attached; first report in %.1fs\n", o->interval_ms / 1000.0);
	t0 = monotonic_s();
	while (!exiting && (!o->count || shown < o->count)) {
		usleep(o->interval_ms * 1000);
		if (exiting)
			break;
		if (io_snapshot(&io_module, &cur, &ncur)) {
			ret = 1;
			break;
		}
		t1 = monotonic_s();
		delta = calloc(ncur ? ncur : 1, sizeof(*delta));
		if (!delta) {
			free(cur);
			ret = 1;
			break;
		}
		for (size_t i = 0; i < ncur; i++)
			row_delta(&delta[i], &cur[i], find_row(prev, nprev, &cur[i]));
		if (o->json)
			print_json(delta, ncur, t1 - t0);
		else
			print_table(delta, ncur, t1 - t0, tty);
		fflush(stdout);
		free(delta);
		free(prev);
		prev = cur;
		nprev = ncur;
		t0 = t1;
		shown++;
	}
	free(prev);
	io_module.unload(&io_module);
	return ret;
}
