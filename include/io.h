/* SPDX-License-Identifier: GPL-2.0 */
/* Types shared by bpf/io.bpf.c and src/modules/io.c: fixed-width only. */
#ifndef PLUMB_IO_H
#define PLUMB_IO_H

/*
 * Latency histogram: bucket k counts calls with latency <= 2^(IO_LAT_MIN_SHIFT + k) ns, so that
 * bucket k exports directly as le = 2^(IO_LAT_MIN_SHIFT + k) / 1e9 seconds; the last bucket
 * counts everything above the largest bound (it becomes le="+Inf").
 * 2^10 ns ~ 1 us ... 2^34 ns ~ 17 s.
 */
#define IO_LAT_MIN_SHIFT 10
#define IO_LAT_BUCKETS	 26

enum io_dir {
	IO_READ = 0,
	IO_WRITE = 1,
	IO_DIRS,
};

/*
 * What the latency histogram times: the two directions' syscalls, then fsync and fdatasync
 * (the op fsync's syscalls; io_uring's FSYNC requests are not timed).
 */
#define IO_LAT_FSYNC IO_DIRS
#define IO_LAT_KINDS (IO_DIRS + 1)

enum io_op {
	IO_OP_OPEN = 0,
	IO_OP_CREATE,
	IO_OP_MKDIR,
	IO_OP_UNLINK,
	IO_OP_RMDIR,
	IO_OP_FSYNC, /* fsync, fdatasync */
	IO_OP_RENAME, /* rename, renameat, renameat2 */
	IO_OPS,
};

/* Reasons an event was not counted; index of the io_lost per-CPU array. */
enum io_lost_reason {
	IO_LOST_STATS_MAP_FULL = 0, /* io_stats had no room for a new (cgroup, mount) */
	IO_LOST_PATH_RINGBUF_FULL, /* a path operation's event found the ring buffer full */
	IO_LOST_ARGS_UNKNOWN, /* args_at_enter: a call that entered before the programs attached */
	IO_LOST_AIO_UNREADABLE, /* an AIO event or its iocb not readable in the process's memory */
	IO_LOST_AIO_FD_CLOSED, /* an AIO completion whose fd was closed since it was submitted */
	IO_LOST_URING_NO_FILE, /* an io_uring read or write completion with no file */
	IO_LOST_AIO_BATCH_CAP, /* AIO events past the most one io_getevents() exit counts */
	IO_LOST_URING_OVERFLOW, /* an io_uring completion that overflowed its ring (6.3+) */
	IO_LOST_URING_PATH_FULL, /* an io_uring path operation uring_paths had no room for */
	IO_LOST_URING_PATH_STALE, /* an entry of uring_paths whose completion never came */
	IO_LOST_REASONS,
};

struct io_key {
	__u64 cgroup_id;
	__u32 mnt_id; /* struct mount.mnt_id, as in /proc/<pid>/mountinfo; 0: no file (EBADF) */
	__u32 pad;
};

struct io_stats {
	__u64 bytes[IO_DIRS];
	__u64 calls[IO_DIRS];
	__u64 errors[IO_DIRS];
	__u64 lat_sum_ns[IO_LAT_KINDS];
	__u64 lat[IO_LAT_KINDS][IO_LAT_BUCKETS];
	__u64 ops[IO_OPS];
	__u64 op_errors[IO_OPS];
};

/*
 * A path operation (mkdir, unlink, rmdir) whose path crosses directories: BPF cannot walk the
 * path, so it sends the path and where the lookup started, and user space finds the mount.
 */
#define IO_PATH_MAX	256
#define IO_DENTRY_DEPTH 16
#define IO_DENTRY_NAME	64
/* io_uring path operations submitted and not yet completed, host-wide (bpf/io.bpf.c) */
#define URING_PATHS_MAX 1024

struct io_path_event {
	__u64 cgroup_id;
	__u32 mntns_inum; /* mount namespace of the caller */
	__u32 start_mnt_id; /* mount where the lookup started (root for absolute paths) */
	__u32 op; /* enum io_op */
	__s32 ret;
	__u32 depth; /* components of start_names used; > IO_DENTRY_DEPTH: truncated */
	__u32 pad;
	char path[IO_PATH_MAX];
	/*
	 * The start directory below its mount's root, innermost first; only for relative paths,
	 * and only the used components are sent: an event is offsetof(start_names) + 64 * depth.
	 */
	char start_names[IO_DENTRY_DEPTH][IO_DENTRY_NAME];
};

/* An io_uring path operation between its submission and its completion (bpf/io.bpf.c) */
struct uring_path {
	__u64 submitted_ns; /* CLOCK_MONOTONIC */
	/* the request's ring, user data and opcode: the same request at its completion */
	__u64 ctx;
	__u64 user_data;
	__u32 opcode;
	__u32 at; /* where its mount is found: enum path_at in bpf/io.bpf.c */
	__u32 op; /* enum io_op */
	__u32 pad;
	struct io_path_event e;
};

#endif
