// SPDX-License-Identifier: GPL-2.0
/*
 * The MPI-IO workload of the accuracy benchmark: every rank writes its own contiguous region
 * of one shared file with MPI_File_write_at (independent I/O, one block per call), wrapping
 * around inside its region, until SECONDS have passed; rank 0 then prints one JSON line.
 *
 *   mpirun -np 4 mpiio_write --file PATH --block BYTES --region BYTES --seconds S [--log PATH]
 *
 * The time is measured between an MPI_Barrier before the first write and one after the last,
 * the maximum over the ranks; bw_bytes is the sum of all ranks' bytes over that time.
 * start and end are rank 0's wall clock (seconds since the epoch) after each barrier, so that
 * the caller can line the run up with a Prometheus series. With --log, every rank also writes
 * PATH.<rank> after the run: one line per write, the wall clock when it returned and its bytes,
 * so that the caller can tell how much was written between any two instants.
 *
 * Build: mpicc -O2 -Wall -Wextra -o mpiio_write mpiio_write.c
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>

struct options {
	const char *file;
	long long block;
	long long region;
	double seconds;
	const char *log;
};

/* when each write returned, kept in memory until the timed loop is over */
struct write_log {
	double *when;
	size_t n, cap;
};

static double wall_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage_exit(int rank)
{
	if (rank == 0)
		fprintf(stderr, "usage: mpiio_write --file PATH --block BYTES --region BYTES "
				"--seconds S [--log PATH]\n");
	MPI_Finalize();
	exit(2);
}

static void parse_options(int argc, char **argv, int rank, struct options *o)
{
	static const struct option longopts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "block", required_argument, NULL, 'b' },
		{ "region", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "log", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o->file = optarg;
			break;
		case 'b':
			o->block = atoll(optarg);
			break;
		case 'r':
			o->region = atoll(optarg);
			break;
		case 's':
			o->seconds = atof(optarg);
			break;
		case 'l':
			o->log = optarg;
			break;
		default:
			usage_exit(rank);
		}
	}
	/* MPI_File_write_at takes an int count */
	if (!o->file || o->block <= 0 || o->block > (1LL << 30) || o->region < o->block ||
	    o->region % o->block || o->seconds <= 0)
		usage_exit(rank);
}

static void die(int rank, const char *what, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, msg, &len);
	fprintf(stderr, "mpiio_write: rank %d: %s: %s\n", rank, what, msg);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void write_log_add(struct write_log *l, int rank, double when)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4096;
		double *grown = realloc(l->when, cap * sizeof(*grown));

		if (!grown) {
			fprintf(stderr, "mpiio_write: rank %d: out of memory\n", rank);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		l->when = grown;
		l->cap = cap;
	}
	l->when[l->n++] = when;
}

static void write_log_save(const struct write_log *l, const char *prefix, int rank, long long block)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s.%d", prefix, rank);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (size_t i = 0; i < l->n; i++)
		fprintf(f, "%.6f %lld\n", l->when[i], block);
	if (fclose(f)) {
		perror(path);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct write_log log = { 0 };
	unsigned long long written = 0, total = 0;
	double t0, t1, elapsed, slowest, start, end;
	long long pos = 0;
	MPI_Status status;
	MPI_File fh;
	int rank, ranks, err, count;
	char *buf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	parse_options(argc, argv, rank, &o);

	buf = malloc(o.block);
	if (!buf) {
		fprintf(stderr, "mpiio_write: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	/* touch every page now, so that no page fault lands inside the timed loop */
	memset(buf, 'a' + rank % 26, o.block);

	err = MPI_File_open(MPI_COMM_WORLD, o.file, MPI_MODE_CREATE | MPI_MODE_WRONLY,
			    MPI_INFO_NULL, &fh);
	if (err != MPI_SUCCESS)
		die(rank, "MPI_File_open", err);

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	start = wall_clock();
	do {
		err = MPI_File_write_at(fh, rank * o.region + pos, buf, (int)o.block, MPI_BYTE,
					&status);
		if (err != MPI_SUCCESS)
			die(rank, "MPI_File_write_at", err);
		MPI_Get_count(&status, MPI_BYTE, &count);
		if (count != o.block) {
			fprintf(stderr, "mpiio_write: rank %d: short write: %d of %lld bytes\n",
				rank, count, o.block);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		if (o.log)
			write_log_add(&log, rank, wall_clock());
		written += o.block;
		pos += o.block;
		if (pos == o.region)
			pos = 0;
	} while (MPI_Wtime() - t0 < o.seconds);
	MPI_Barrier(MPI_COMM_WORLD);
	t1 = MPI_Wtime();
	end = wall_clock();

	elapsed = t1 - t0;
	MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&written, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

	err = MPI_File_close(&fh);
	if (err != MPI_SUCCESS)
		die(rank, "MPI_File_close", err);
	if (o.log)
		write_log_save(&log, o.log, rank, o.block);
	if (rank == 0)
		printf("{\"ranks\": %d, \"block\": %lld, \"bytes\": %llu, \"seconds\": %.6f, "
		       "\"bw_bytes\": %.1f, \"start\": %.6f, \"end\": %.6f}\n",
		       ranks, o.block, total, slowest, total / slowest, start, end);
	free(log.when);
	free(buf);
	MPI_Finalize();
	return 0;
}
