// SPDX-License-Identifier: GPL-2.0
/*
 * io: bytes, calls, errors and latency of file I/O per (cgroup, mount), from tracepoints
 * only: syscalls', and io_uring's completions.
 *
 * Hot path (see DESIGN.md "The hot path"; measured by bench/hotpath.c): the exit program
 * does the work. It reads the fd from the saved user registers (bpf_task_pt_regs) instead of
 * carrying it from enter to exit in a map, resolves fd -> file -> mount and the task's cgroup
 * by plain loads (6.2+; 6.1 keeps a probe read for the file), and adds into per-CPU counts
 * without atomics, found through a per-CPU memory of the last key (stats_for). Helper calls
 * are what it avoids: each cost 15-60 ns on the AMD hosts, whose kernel returns through a
 * mitigation thunk (bench/results/hotpath.md). The enter programs exist only for the latency
 * histogram: user space attaches them for a window of each second (src/window.h) and they
 * time every call then (latency_sample_period 1), or, where they must run on every call
 * anyway (args_at_enter), a random one in latency_sample_period calls.
 *
 * Why per-syscall tracepoints and not one tp_btf program on raw sys_enter/sys_exit: the raw
 * tracepoint runs BPF on every syscall of the host, and measured here that costs ~140 ns on
 * each (getppid), against ~10 ns for a per-syscall tracepoint that is not enabled for it; on
 * the counted calls the raw variant was not cheaper either (bench/results/).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "io.h"
#include "task.bpf.h"
#include "hist.bpf.h"
#include "gate.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
const volatile bool latency_enabled = true;
/* Time one call in this many (a power of two), chosen at random per call. */
const volatile __u32 latency_sample_period = 1;
/*
 * Fallback for kernels without bpf_task_pt_regs() (before 5.15, commit dd6e10fbd9fb): the
 * enter programs store the first three arguments in task storage and the exit programs read
 * them there. Costs an enter program on every counted syscall; chosen only when probed absent.
 */
const volatile bool args_at_enter = false;
/*
 * Latency in windows (the default): the enter programs stamp calls only while attached, so
 * outside the windows no thread has a stamp once the calls a window timed have returned.
 * io_stamps counts the stamps set and not yet cleared (an atomic add at each, in the windows
 * only), and an exit looks in task storage only while it is not 0: the rest of the time the
 * exit makes no storage call (a helper call, ~30 ns; bench/results/hotpath.md). A thread that
 * ends with a stamp (it cannot: its syscall's exit clears it first) or whose fd became a pipe
 * or socket under a timed call (the exit returns before its storage; the thread's next call
 * clears it) leaves the count high: the exits then look again, as before, and lose nothing.
 * fsyncs' stamps are counted apart, in io_fsync_stamps, which only fsync exits read: an fsync
 * can take seconds on a slow disk, and one timed in a window would otherwise keep every read
 * and write exit of the host looking meanwhile.
 */
const volatile bool stamps_counted = false;
__u64 io_stamps;
__u64 io_fsync_stamps;
/*
 * enter_rw's gate (src/window.h): 1 from the return of the window's attach to the start of
 * its close, the span user space measures; the kernel can run the program on either side
 * of it (a close's detach, slow in an emulated guest), and it times nothing there.
 */
__u32 rw_window_gate;

#define S_IFMT	     00170000
#define S_IFREG	     0100000
#define S_IFDIR	     0040000
#define S_IFBLK	     0060000
#define AT_FDCWD     -100
#define AT_REMOVEDIR 0x200
/* include/linux/fs.h: set by do_open() when O_CREAT created the file (since v4.19, 73a09dd94e). */
#define FMODE_CREATED 0x100000
/* include/linux/errno.h: kernel-internal codes for a syscall that will be restarted. */
#define EEXIST		      17
#define ECANCELED	      125
#define ERESTARTSYS	      512
#define ERESTART_RESTARTBLOCK 516

/*
 * The counts live in a per-CPU array, one slot per (cgroup, mount) key; io_slots says which
 * key has which slot, and io_free holds the slots no key has (user space fills it at load and
 * gives a slot back, zeroed, when it removes a gone cgroup's key). io_free is a stack, filled
 * so that slot 0 comes first: the lowest slots are taken and taken again, and user space
 * reads the array only up to the highest slot a key has. Each CPU remembers the
 * last key it counted and its slot (io_cache): consecutive calls of one workload on one
 * mount, the common case, find their counts with two inlined array lookups and no hash
 * lookup, which measured ~45 ns per call (bench/results/hotpath.md). A remembered slot is
 * never wrong: keys are removed only for cgroups gone for the grace period (their ids are
 * never reused, so no event names them again), and only then does their slot go back.
 * All three are sized to --io-capacity before load.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct io_stats);
} io_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct io_key);
	__type(value, __u32);
} io_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK);
	__uint(max_entries, 4096);
	__type(value, __u32);
} io_free SEC(".maps");

/* keys added to io_slots, ever: user space walks io_slots again when it moves */
__u64 io_keys_added;

struct io_cached {
	__u64 cgroup_id;
	__u32 mnt_id;
	__u32 slot1; /* slot + 1; 0: nothing remembered yet */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_cached);
} io_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IO_LOST_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} io_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024); /* >= 14,000 events between two drains */
} io_path_events SEC(".maps");

/* The enter programs' random draws: one xorshift64 state per CPU (latency_sampled). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} io_rng SEC(".maps");

/* Where a path operation is read and examined before it is known to need the ring buffer. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_path_event);
} io_path_scratch SEC(".maps");

/*
 * The syscall in flight, per thread (survives migration between CPUs): its entry time when
 * timed (else 0), and its arguments when args_at_enter, else in args[0] and args[1] the file
 * its fd resolved to at entry and that file's inode (0: none). nr is -1 once the exit has
 * used it.
 */
struct syscall_start {
	__u64 ts;
	__s64 nr;
	unsigned long args[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct syscall_start);
} io_start SEC(".maps");

/* Layouts of the syscalls/sys_{enter,exit}_* tracepoints (their format files). */
struct syscall_enter_ctx {
	__u64 common;
	int nr;
	int pad;
	unsigned long args[6];
};

struct syscall_exit_ctx {
	__u64 common;
	int nr;
	int pad;
	long ret;
};

#if defined(__TARGET_ARCH_x86)
#define SYSCALL_ARG1(regs) ((regs)->di)
#define SYSCALL_ARG2(regs) ((regs)->si)
#define SYSCALL_ARG3(regs) ((regs)->dx)
#define SYSCALL_ARG4(regs) ((regs)->r10)
#elif defined(__TARGET_ARCH_arm64)
/* arm64 keeps the first argument in orig_x0: x0 is overwritten by the return value. */
#define SYSCALL_ARG1(regs) ((regs)->orig_x0)
#define SYSCALL_ARG2(regs) ((regs)->regs[1])
#define SYSCALL_ARG3(regs) ((regs)->regs[2])
#define SYSCALL_ARG4(regs) ((regs)->regs[3])
#else
#error "plumb io: unsupported architecture"
#endif

static __always_inline void count_lost_n(__u32 reason, __u64 count)
{
	__u64 *n = bpf_map_lookup_elem(&io_lost, &reason);

	if (n)
		*n += count;
}

static __always_inline void count_lost(__u32 reason)
{
	count_lost_n(reason, 1);
}

static __always_inline struct io_stats *stats_for(__u64 cgroup_id, __u32 mnt_id)
{
	struct io_key key = { .cgroup_id = cgroup_id, .mnt_id = mnt_id };
	__u32 zero = 0, slot, *found;
	struct io_cached *c = bpf_map_lookup_elem(&io_cache, &zero);

	if (c && c->slot1 && c->cgroup_id == cgroup_id && c->mnt_id == mnt_id) {
		slot = c->slot1 - 1;
		return bpf_map_lookup_elem(&io_stats, &slot);
	}
	found = bpf_map_lookup_elem(&io_slots, &key);
	if (found) {
		slot = *found;
	} else if (bpf_map_pop_elem(&io_free, &slot)) {
		count_lost(IO_LOST_STATS_MAP_FULL); /* every slot has a key */
		return NULL;
	} else if (bpf_map_update_elem(&io_slots, &key, &slot, BPF_NOEXIST)) {
		/* another CPU gave the key a slot first (-EEXIST): this one goes back, unused */
		bpf_map_push_elem(&io_free, &slot, 0);
		found = bpf_map_lookup_elem(&io_slots, &key);
		if (!found) {
			count_lost(IO_LOST_STATS_MAP_FULL);
			return NULL;
		}
		slot = *found;
	} else {
		__sync_fetch_and_add(&io_keys_added, 1); /* after the update: walk_slots() */
	}
	if (c) {
		c->cgroup_id = cgroup_id;
		c->mnt_id = mnt_id;
		c->slot1 = slot + 1;
	}
	return bpf_map_lookup_elem(&io_stats, &slot);
}

static __always_inline __u32 vfsmount_id(struct vfsmount *vfsmnt)
{
	struct mount *mnt = (void *)vfsmnt - bpf_core_field_offset(struct mount, mnt);

	if (bpf_ksym_exists(bpf_rdonly_cast))
		return ((struct mount *)bpf_rdonly_cast(mnt, bpf_core_type_id_kernel(struct mount)))
			->mnt_id;
	return BPF_CORE_READ(mnt, mnt_id);
}

static __always_inline __u32 file_mode_type(struct file *file)
{
	if (bpf_ksym_exists(bpf_rdonly_cast))
		return ((struct file *)bpf_rdonly_cast(file, bpf_core_type_id_kernel(struct file)))
			       ->f_inode->i_mode &
		       S_IFMT;
	return BPF_CORE_READ(file, f_inode, i_mode) & S_IFMT;
}

static __always_inline unsigned long file_inode_addr(struct file *file)
{
	if (!file)
		return 0;
	if (bpf_ksym_exists(bpf_rdonly_cast))
		return (unsigned long)((struct file *)bpf_rdonly_cast(
					       file, bpf_core_type_id_kernel(struct file)))
			->f_inode;
	return (unsigned long)BPF_CORE_READ(file, f_inode);
}

static __always_inline struct vfsmount *file_mnt(struct file *file)
{
	if (bpf_ksym_exists(bpf_rdonly_cast))
		return ((struct file *)bpf_rdonly_cast(file, bpf_core_type_id_kernel(struct file)))
			->f_path.mnt;
	return BPF_CORE_READ(file, f_path.mnt);
}

/*
 * The syscalls latency times, by number: the per-syscall tracepoints' nr, and the raw
 * sys_enter's id (enter_rw).
 */
#if defined(__TARGET_ARCH_x86)
#define NR_read	     0
#define NR_write     1
#define NR_pread64   17
#define NR_pwrite64  18
#define NR_readv     19
#define NR_writev    20
#define NR_fsync     74
#define NR_fdatasync 75
#define NR_preadv    295
#define NR_pwritev   296
#define NR_preadv2   327
#define NR_pwritev2  328
#define TS_COMPAT    0x0002 /* arch/x86/include/asm/thread_info.h: thread_info.status */
#else
#error "plumb io: syscall numbers of this architecture"
#endif

static __always_inline bool fsync_syscall(long id)
{
	return id == NR_fsync || id == NR_fdatasync;
}

static __always_inline bool timed_syscall(long id)
{
	switch (id) {
	case NR_read:
	case NR_write:
	case NR_pread64:
	case NR_pwrite64:
	case NR_readv:
	case NR_writev:
	case NR_preadv:
	case NR_pwritev:
	case NR_preadv2:
	case NR_pwritev2:
	case NR_fsync:
	case NR_fdatasync:
		return true;
	}
	return false;
}

/* Log2 bucket such that bucket k holds v <= 2^(IO_LAT_MIN_SHIFT + k). */
static __always_inline __u32 latency_bucket(__u64 ns)
{
	return log2_bucket(ns, IO_LAT_MIN_SHIFT, IO_LAT_BUCKETS);
}

/*
 * nargs: how many leading arguments the exit needs. Reading past the ones a syscall has fails
 * the attach (EACCES): the kernel checks the program's largest context offset against the
 * tracepoint's record size (perf_event_set_bpf_prog()).
 */
static __always_inline bool latency_sampled(void)
{
	__u32 zero = 0;
	__u64 *rng, x;

	if (!latency_enabled)
		return false;
	if (latency_sample_period <= 1)
		return true;
	/*
	 * A xorshift64 generator per CPU, seeded once from bpf_get_prandom_u32(): the helper
	 * call on every enter cost more than the draw itself (bench/results/hotpath.md).
	 */
	rng = bpf_map_lookup_elem(&io_rng, &zero);
	if (!rng)
		return !(bpf_get_prandom_u32() & (latency_sample_period - 1));
	x = *rng;
	if (!x)
		x = (__u64)bpf_get_prandom_u32() << 32 | bpf_get_prandom_u32() | 1;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*rng = x;
	return !((x >> 32) & (latency_sample_period - 1));
}

/* A file whose reads and writes io counts: regular files and block devices. */
static __always_inline bool counted_file(struct file *file)
{
	__u32 type = file_mode_type(file);

	return type == S_IFREG || type == S_IFBLK;
}

/* A file whose call nr the exit counts: for an fsync, a directory's too (count_fsync). */
static __always_inline bool timed_file(struct file *file, long nr)
{
	__u32 type = file_mode_type(file);

	return type == S_IFREG || type == S_IFBLK || (type == S_IFDIR && fsync_syscall(nr));
}

/*
 * A read, write or fsync call entering (the usual case): only a sampled call is timed, nothing
 * else is stored, and only one on a file the exit counts (or an fd it cannot resolve now):
 * the exit of a call on a pipe, socket or device then needs no storage lookup to clear a
 * stamp (rw_exit).
 */
static __always_inline void rw_stamp(struct task_struct *task, long nr, long fd)
{
	struct syscall_start *start;
	struct file *file;

	if (!latency_sampled())
		return;
	file = fd_to_file(task, fd);
	if (file && !timed_file(file, nr))
		return;
	start = bpf_task_storage_get(&io_start, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!start)
		return;
	if (stamps_counted) {
		/* this stamp counted, and any it replaces (left behind) no longer */
		if (start->ts)
			__sync_fetch_and_sub(
				fsync_syscall(start->nr) ? &io_fsync_stamps : &io_stamps, 1);
		__sync_fetch_and_add(fsync_syscall(nr) ? &io_fsync_stamps : &io_stamps, 1);
	}
	start->ts = bpf_ktime_get_ns();
	start->nr = nr;
	/* whose call this stamp times: a struct file's address alone is reused */
	start->args[0] = (unsigned long)file;
	start->args[1] = file_inode_addr(file);
}

static __always_inline int syscall_enter(struct syscall_enter_ctx *ctx, int nargs)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct syscall_start *start;

	if (!args_at_enter) {
		rw_stamp(task, ctx->nr, ctx->args[0]);
		return 0;
	}
	start = bpf_task_storage_get(&io_start, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!start)
		return 0;
	start->ts = latency_sampled() ? bpf_ktime_get_ns() : 0;
	start->nr = ctx->nr;
	start->args[0] = ctx->args[0];
	if (nargs > 1)
		start->args[1] = ctx->args[1];
	if (nargs > 2)
		start->args[2] = ctx->args[2];
	return 0;
}

/*
 * The syscall's first three arguments, at its exit: from the user registers the kernel saved
 * at entry, or (args_at_enter) from what the enter program stored. False when they are not
 * known: the call entered before the programs were attached (counted as lost).
 */
static __always_inline bool syscall_args(struct task_struct *task, int nr, unsigned long a[3])
{
	struct syscall_start *start;
	struct pt_regs *regs;

	if (args_at_enter) {
		start = bpf_task_storage_get(&io_start, task, NULL, 0);
		if (!start || start->nr != nr) {
			count_lost(IO_LOST_ARGS_UNKNOWN);
			return false;
		}
		a[0] = start->args[0];
		a[1] = start->args[1];
		a[2] = start->args[2];
		start->nr = -1;
		return true;
	}
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	a[0] = SYSCALL_ARG1(regs);
	a[1] = SYSCALL_ARG2(regs);
	a[2] = SYSCALL_ARG3(regs);
	return true;
}

/* stamp_taken(): args_at_enter, and the call entered before the programs were attached */
#define STAMP_ARGS_UNKNOWN (~0ULL)

/*
 * The stamp of the call now exiting, taken and always cleared (a timed call whose file went
 * away must not leave its timestamp to the next, untimed, call of the syscall): its entry
 * time when it was timed on this file, else 0, and with args_at_enter its fd in *fd; or
 * STAMP_ARGS_UNKNOWN (counted as lost). A read's or write's exit looks while io_stamps is
 * not 0, an fsync's (fsync: a constant in each exit) while io_fsync_stamps is not.
 */
static __always_inline __u64 stamp_taken(struct task_struct *task, int nr, bool fsync,
					 struct file *file, long *fd)
{
	struct syscall_start *start = NULL;
	__u64 start_ns = 0;

	if (args_at_enter ||
	    (latency_enabled && (!stamps_counted || (fsync ? io_fsync_stamps : io_stamps))))
		start = bpf_task_storage_get(&io_start, task, NULL, 0);
	if (!start || start->nr != nr) {
		if (!args_at_enter)
			return 0;
		count_lost(IO_LOST_ARGS_UNKNOWN);
		return STAMP_ARGS_UNKNOWN;
	}
	/*
	 * A stamp is this call's only if it was taken on the same file. One left by a call whose
	 * fd became a pipe or socket before its exit (dup2, a close and reuse by another thread:
	 * that exit returned before its stamp, leaving it) is older than this call: it would time
	 * the gap since then. The inode too: that file, freed, and the next one opened can have
	 * the same address (a 6.1 guest: 2 of 18).
	 */
	if (args_at_enter ||
	    (start->args[0] == (unsigned long)file && start->args[1] == file_inode_addr(file)))
		start_ns = start->ts;
	if (stamps_counted && start->ts)
		__sync_fetch_and_sub(fsync ? &io_fsync_stamps : &io_stamps, 1);
	start->ts = 0;
	if (args_at_enter) {
		*fd = start->args[0];
		start->nr = -1;
	}
	return start_ns;
}

/* A timed call's latency (kind: a direction or IO_LAT_FSYNC); nothing when it was not timed. */
static __always_inline void count_latency(struct io_stats *s, int kind, __u64 start_ns)
{
	__u64 ns;

	if (!s || !start_ns)
		return;
	ns = bpf_ktime_get_ns() - start_ns;
	s->lat_sum_ns[kind] += ns;
	s->lat[kind][latency_bucket(ns)]++;
}

static __always_inline int rw_exit(struct syscall_exit_ctx *ctx, int dir)
{
	struct task_struct *task = bpf_get_current_task_btf();
	long ret = ctx->ret, fd = -1;
	struct file *file = NULL;
	struct io_stats *s;
	__u32 mnt_id = 0;
	__u64 start_ns;
	struct pt_regs *regs;

	if (!args_at_enter) {
		regs = (struct pt_regs *)bpf_task_pt_regs(task);
		fd = SYSCALL_ARG1(regs);
		file = fd_to_file(task, fd);
		if (file && !counted_file(file))
			return 0; /* pipes, sockets, ttys (wait and flow's business): never stamped */
	}
	start_ns = stamp_taken(task, ctx->nr, false, file, &fd);
	if (start_ns == STAMP_ARGS_UNKNOWN)
		return 0;
	if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK)
		return 0; /* not finished: the kernel restarts it or turns it into EINTR */
	if (args_at_enter) {
		file = fd_to_file(task, fd);
		if (file && !counted_file(file))
			return 0;
	}
	if (file) {
		mnt_id = vfsmount_id(file_mnt(file));
	} else if (ret >= 0) {
		return 0; /* closed by another thread since: nothing to attribute */
	}
	s = stats_for(task_cgroup_id(task), mnt_id);
	if (!s)
		return 0;
	s->calls[dir]++;
	if (ret < 0)
		s->errors[dir]++;
	else
		s->bytes[dir] += ret;
	count_latency(s, dir, start_ns);
	return 0;
}

/* One completed read or write that no syscall of the io module saw (AIO, io_uring). */
static __always_inline void count_completion(struct task_struct *task, struct file *file, int dir,
					     long res)
{
	struct io_stats *s;

	if (!counted_file(file))
		return;
	s = stats_for(task_cgroup_id(task), vfsmount_id(file_mnt(file)));
	if (!s)
		return;
	s->calls[dir]++;
	if (res < 0)
		s->errors[dir]++;
	else
		s->bytes[dir] += res;
}

/* A failed call with no bytes: one call and one error on a file's mount (0: none). */
static __always_inline void count_error(struct task_struct *task, struct file *file, int dir)
{
	struct io_stats *s =
		stats_for(task_cgroup_id(task), file ? vfsmount_id(file_mnt(file)) : 0);

	if (s) {
		s->calls[dir]++;
		s->errors[dir]++;
	}
}

/*
 * sendfile, copy_file_range, splice: the kernel moves data from one fd to another in one call.
 * Its ret bytes were read from the input and written to the output: a read call on the
 * input's file and a write call on the output's, each where that is a counted file (a socket
 * or a pipe end is flow's and wait's business). A failed call is one error on the side that
 * failed, as far as the errno tells: an fd not open, on its side (mount "none", as for
 * read()); no space or quota, or a file too large, on the output; what a socket or pipe
 * returns (EAGAIN when full or empty, EPIPE, ECONNRESET, EINTR) is not counted where one side
 * is a socket or pipe (nginx's non-blocking sendfile meets EAGAIN at every full socket
 * buffer); anything else on the input when it is a counted file, else on the output. Not
 * timed.
 */
#define EINTR	   4
#define EAGAIN	   11
#define EFBIG	   27
#define ENOSPC	   28
#define EPIPE	   32
#define EDQUOT	   122
#define ECONNRESET 104

static __always_inline int transfer_exit(struct syscall_exit_ctx *ctx, long in_fd, long out_fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct file *in = fd_to_file(task, in_fd), *out = fd_to_file(task, out_fd);
	bool in_counted = in && counted_file(in), out_counted = out && counted_file(out);
	long ret = ctx->ret;

	if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK)
		return 0;
	if (ret >= 0) {
		if (in_counted)
			count_completion(task, in, IO_READ, ret);
		if (out_counted)
			count_completion(task, out, IO_WRITE, ret);
		return 0;
	}
	if (!in) {
		count_error(task, NULL, IO_READ);
	} else if (!out) {
		count_error(task, NULL, IO_WRITE);
	} else if (ret == -ENOSPC || ret == -EDQUOT || ret == -EFBIG) {
		if (out_counted)
			count_error(task, out, IO_WRITE);
	} else if ((ret == -EAGAIN || ret == -EPIPE || ret == -ECONNRESET || ret == -EINTR) &&
		   (!in_counted || !out_counted)) {
		return 0;
	} else if (in_counted) {
		count_error(task, in, IO_READ);
	} else if (out_counted) {
		count_error(task, out, IO_WRITE);
	}
	return 0;
}

/*
 * Linux AIO (io_submit): the data moves in no read or write syscall, and each result
 * reaches the process through io_getevents() or io_pgetevents() (libaio's io_getevents()
 * makes the syscall unless it polls an empty ring with a zero timeout). At their exit each
 * returned event names its iocb (obj: the process's own memory, in flight until the process
 * reads the events), whose opcode and fd the program reads from there; res is the bytes moved
 * or -errno. It counts as a read or write call on the file that fd holds now, charged to the
 * reaping thread's cgroup (an AIO context belongs to one process); it is not timed (latency
 * is a syscall's). include/uapi/linux/aio_abi.h, little-endian: opcode and fd at offset 16.
 */
#define IOCB_CMD_PREAD	 0
#define IOCB_CMD_PWRITE	 1
#define IOCB_CMD_PREADV	 7
#define IOCB_CMD_PWRITEV 8
#define IOCB_CMD_OFFSET	 16
/*
 * Events past this many in one call are not counted (counted as lost): bpf_loop runs with
 * preemption off, ~0.25 us an event here, so at most ~1 ms in one call's exit.
 */
#define AIO_EVENTS_MAX 4096

struct aio_event {
	__u64 data;
	__u64 obj;
	__s64 res;
	__s64 res2;
};

struct aio_cmd {
	__u16 opcode;
	__s16 reqprio;
	__u32 fd;
};

/* bpf_loop()'s context: a pointer to the stack */
struct aio_reaped {
	__u64 events; /* the io_event array, in the process's memory */
	struct task_struct *task;
};

static __always_inline long aio_event_counted(__u32 i, struct aio_reaped *r)
{
	struct aio_event *events = (void *)r->events;
	struct task_struct *task = r->task;
	struct aio_event ev;
	struct aio_cmd cmd;
	struct file *file;
	int dir;

	if (bpf_probe_read_user(&ev, sizeof(ev), events + i) ||
	    bpf_probe_read_user(&cmd, sizeof(cmd), (void *)(ev.obj + IOCB_CMD_OFFSET))) {
		count_lost(IO_LOST_AIO_UNREADABLE);
		return 0;
	}
	if (cmd.opcode == IOCB_CMD_PREAD || cmd.opcode == IOCB_CMD_PREADV)
		dir = IO_READ;
	else if (cmd.opcode == IOCB_CMD_PWRITE || cmd.opcode == IOCB_CMD_PWRITEV)
		dir = IO_WRITE;
	else
		return 0; /* fsync, poll, noop */
	file = fd_to_file(task, (int)cmd.fd);
	if (!file) {
		count_lost(IO_LOST_AIO_FD_CLOSED); /* closed since io_submit: no mount to name */
		return 0;
	}
	count_completion(task, file, dir, ev.res);
	return 0;
}

static long aio_event_count(__u32 i, void *ctx)
{
	return aio_event_counted(i, ctx);
}

static __always_inline int aio_reap(struct syscall_exit_ctx *ctx)
{
	struct aio_reaped r;
	struct pt_regs *regs;
	long n = ctx->ret;

	if (args_at_enter || n <= 0)
		return 0;
	r.task = bpf_get_current_task_btf();
	regs = (struct pt_regs *)bpf_task_pt_regs(r.task);
	r.events = SYSCALL_ARG4(regs);
	/* one event (a process reaping each as it comes): no loop, no call */
	if (n == 1)
		return aio_event_counted(0, &r);
	if (n > AIO_EVENTS_MAX) {
		count_lost_n(IO_LOST_AIO_BATCH_CAP, n - AIO_EVENTS_MAX);
		n = AIO_EVENTS_MAX;
	}
	bpf_loop(n, aio_event_count, &r, 0);
	return 0;
}

/* The mount where a path lookup starts: root for absolute paths, else dirfd or the cwd. */
static __always_inline int lookup_start(struct task_struct *task, long dirfd, char first,
					struct vfsmount **mnt, struct dentry **dentry)
{
	struct file *file;

	if (first == '/') {
		*mnt = task->fs->root.mnt;
		*dentry = task->fs->root.dentry;
	} else if ((int)dirfd == AT_FDCWD) {
		*mnt = task->fs->pwd.mnt;
		*dentry = task->fs->pwd.dentry;
	} else {
		file = fd_to_file(task, dirfd);
		if (!file)
			return -1;
		*mnt = BPF_CORE_READ(file, f_path.mnt);
		*dentry = BPF_CORE_READ(file, f_path.dentry);
	}
	return 0;
}

/* Counts an op on a mount (0: none) for a cgroup; returns that key's counts, or NULL. */
static __always_inline struct io_stats *count_op_for(__u64 cgroup_id, __u32 mnt_id, int op,
						     long ret)
{
	struct io_stats *s = stats_for(cgroup_id, mnt_id);

	if (!s || op < 0 || op >= IO_OPS)
		return NULL;
	if (ret < 0)
		s->op_errors[op]++;
	else
		s->ops[op]++;
	return s;
}

/* Counts an op of the current task's cgroup on a mount (0: none). */
static __always_inline struct io_stats *count_op(__u32 mnt_id, int op, long ret)
{
	return count_op_for(task_cgroup_id(bpf_get_current_task_btf()), mnt_id, op, ret);
}

/*
 * fsync and fdatasync, as syscalls or io_uring requests: an op on the mount of their file, a
 * regular file, a directory (fsync'd after a create or rename that must last) or a block
 * device. No file (a closed fd: EBADF) is an error on no mount; a file of another kind (a
 * pipe, a socket: EINVAL) is not counted. start_ns: the syscall's entry when it was timed.
 */
static __always_inline void count_fsync(struct file *file, long ret, __u64 start_ns)
{
	__u32 type;

	if (!file) {
		if (ret < 0)
			count_latency(count_op(0, IO_OP_FSYNC, ret), IO_LAT_FSYNC, start_ns);
		return;
	}
	type = file_mode_type(file);
	if (type == S_IFREG || type == S_IFDIR || type == S_IFBLK)
		count_latency(count_op(vfsmount_id(file_mnt(file)), IO_OP_FSYNC, ret), IO_LAT_FSYNC,
			      start_ns);
}

/* Where a path operation's mount is found (path_start) */
enum path_at {
	PATH_AT_NONE, /* a bad dirfd: nothing was touched, the unknown mount (0) */
	PATH_AT_START, /* the start directory's mount, e->start_mnt_id */
	PATH_AT_USER, /* may cross mounts: user space resolves e (path_done) */
};

/*
 * A path operation with no file to look at (mkdir, unlink, rmdir, rename, a failed open),
 * its path read into e->path (n: the read's result): where its lookup started, filled into e
 * (the task's cgroup, its mount namespace and the start mount). A single relative component
 * ("name") is looked up in the start directory itself, so the start directory's mount is the
 * one touched; anything else may cross mounts, and user space resolves it from the path and
 * the start directory, whose names below its mount's root e keeps for relative paths.
 */
static __always_inline enum path_at path_start(struct task_struct *task, long dirfd, int n,
					       struct io_path_event *e)
{
	struct vfsmount *mnt;
	struct dentry *dentry, *root;
	bool simple = true;
	int i;

	e->cgroup_id = task_cgroup_id(task);
	if (lookup_start(task, dirfd, n > 0 ? e->path[0] : 0, &mnt, &dentry))
		return PATH_AT_NONE;
	e->start_mnt_id = vfsmount_id(mnt);
	/* an unreadable path (EFAULT): the lookup never left the start directory */
	if (n <= 0)
		return PATH_AT_START;
	if (n >= (int)sizeof(e->path))
		simple = false;
	for (i = 0; i < IO_PATH_MAX && i < n - 1 && simple; i++) {
		if (e->path[i] == '/')
			simple = false;
	}
	if (e->path[0] == '.' && (n == 2 || (e->path[1] == '.' && n == 3)))
		simple = false;
	if (simple)
		return PATH_AT_START;
	e->mntns_inum = BPF_CORE_READ(task, nsproxy, mnt_ns, ns.inum);
	root = BPF_CORE_READ(mnt, mnt_root);
	for (i = 0; i < IO_DENTRY_DEPTH; i++) {
		if (dentry == root || e->path[0] == '/')
			break;
		bpf_probe_read_kernel_str(e->start_names[i], IO_DENTRY_NAME,
					  BPF_CORE_READ(dentry, d_name.name));
		dentry = BPF_CORE_READ(dentry, d_parent);
	}
	e->depth = (i == IO_DENTRY_DEPTH && dentry != root) ? IO_DENTRY_DEPTH + 1 : i;
	return PATH_AT_USER;
}

/* The operation's result known: counted where path_start() found, or sent to user space. */
static __always_inline void path_done(struct io_path_event *e, enum path_at at, int op, long ret)
{
	__u32 size, depth;

	if (at != PATH_AT_USER) {
		count_op_for(e->cgroup_id, at == PATH_AT_START ? e->start_mnt_id : 0, op, ret);
		return;
	}
	e->op = op;
	e->ret = ret;
	depth = e->depth < IO_DENTRY_DEPTH ? e->depth : IO_DENTRY_DEPTH;
	size = offsetof(struct io_path_event, start_names) + depth * IO_DENTRY_NAME;
	/* never true; bounds size where the verifier sees it (e may be a map's value) */
	barrier_var(size);
	if (size > sizeof(*e))
		return;
	/* no wakeup: user space drains the buffer on its own tick */
	if (bpf_ringbuf_output(&io_path_events, e, size, BPF_RB_NO_WAKEUP))
		count_lost(IO_LOST_PATH_RINGBUF_FULL);
}

/* A path operation's syscall, at its exit: its path read from the caller's memory. */
static __always_inline int path_op(long dirfd, const char *upath, int op, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct io_path_event *e;
	__u32 zero = 0;
	int n;

	if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK)
		return 0;
	e = bpf_map_lookup_elem(&io_path_scratch, &zero);
	if (!e)
		return 0;
	n = bpf_probe_read_user_str(e->path, sizeof(e->path), upath);
	path_done(e, path_start(task, dirfd, n, e), op, ret);
	return 0;
}

/*
 * An open that made file (an fd's, a syscall's or an io_uring OPENAT's): a create when it
 * made the file, else an open, on the file's mount; regular files, directories and block
 * devices only.
 */
static __always_inline void count_opened(__u64 cgroup_id, struct file *file)
{
	__u32 type = file ? file_mode_type(file) : 0;

	if (type != S_IFREG && type != S_IFDIR && type != S_IFBLK)
		return;
	count_op_for(cgroup_id, vfsmount_id(file_mnt(file)),
		     BPF_CORE_READ(file, f_mode) & FMODE_CREATED ? IO_OP_CREATE : IO_OP_OPEN, 0);
}

static __always_inline int open_exit(struct syscall_exit_ctx *ctx, long dirfd, const char *upath)
{
	struct task_struct *task = bpf_get_current_task_btf();

	if (ctx->ret < 0)
		return path_op(dirfd, upath, IO_OP_OPEN, ctx->ret);
	count_opened(task_cgroup_id(task), fd_to_file(task, ctx->ret));
	return 0;
}

/* fsync, fdatasync: timed as reads and writes are (rw_exit), counted as the op fsync */
static __always_inline int fsync_exit(struct syscall_exit_ctx *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	long ret = ctx->ret, fd = -1;
	struct file *file = NULL;
	__u64 start_ns;

	if (!args_at_enter) {
		fd = SYSCALL_ARG1((struct pt_regs *)bpf_task_pt_regs(task));
		file = fd_to_file(task, fd);
	}
	start_ns = stamp_taken(task, ctx->nr, true, file, &fd);
	if (start_ns == STAMP_ARGS_UNKNOWN)
		return 0;
	if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK)
		return 0;
	if (args_at_enter)
		file = fd_to_file(task, fd);
	count_fsync(file, ret, start_ns);
	return 0;
}

/*
 * The latency windows' enter program (the default): one program on the raw sys_enter
 * tracepoint, attached only inside the windows, instead of the twelve per-syscall enter
 * programs (reads, writes, fsync and fdatasync). Any perf event on a syscall's enter
 * tracepoint hooks perf into sys_enter for every syscall of the host, attached or idle
 * (~20 ns each, docs/architecture.md); with this, nothing runs at sys_enter between the
 * windows, and inside them every syscall pays the raw dispatch and the check of its number.
 * The syscall numbers are the per-syscall tracepoints' (their nr); 32-bit (compat) calls are
 * theirs to skip, as those tracepoints do (the exits never see them).
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(enter_rw, struct pt_regs *regs, long id)
{
	struct task_struct *task;

	if (!timed_syscall(id) || !rw_window_gate || !gate_open())
		return 0;
	task = bpf_get_current_task_btf();
	if (task->thread_info.status & TS_COMPAT)
		return 0;
	rw_stamp(task, id, SYSCALL_ARG1(regs));
	return 0;
}

/* A timed syscall's programs: its exit's work, and an enter program that stamps it. */
#define TIMED_PROGS(name, exit_body)                    \
	SEC("tracepoint/syscalls/sys_enter_" #name)     \
	int enter_##name(struct syscall_enter_ctx *ctx) \
	{                                               \
		if (!gate_open())                       \
			return 0;                       \
		return syscall_enter(ctx, 1);           \
	}                                               \
	SEC("tracepoint/syscalls/sys_exit_" #name)      \
	int exit_##name(struct syscall_exit_ctx *ctx)   \
	{                                               \
		if (!gate_open())                       \
			return 0;                       \
		return exit_body;                       \
	}
#define RW_PROGS(name, dir) TIMED_PROGS(name, rw_exit(ctx, dir))

RW_PROGS(read, IO_READ)
RW_PROGS(readv, IO_READ)
RW_PROGS(pread64, IO_READ)
RW_PROGS(preadv, IO_READ)
RW_PROGS(preadv2, IO_READ)
RW_PROGS(write, IO_WRITE)
RW_PROGS(writev, IO_WRITE)
RW_PROGS(pwrite64, IO_WRITE)
RW_PROGS(pwritev, IO_WRITE)
RW_PROGS(pwritev2, IO_WRITE)
TIMED_PROGS(fsync, fsync_exit(ctx))
TIMED_PROGS(fdatasync, fsync_exit(ctx))

/* Linux AIO's completions (aio_reap); user space leaves them off without task_pt_regs. */
SEC("tracepoint/syscalls/sys_exit_io_getevents")
int exit_io_getevents(struct syscall_exit_ctx *ctx)
{
	if (!gate_open())
		return 0;
	return aio_reap(ctx);
}

SEC("tracepoint/syscalls/sys_exit_io_pgetevents")
int exit_io_pgetevents(struct syscall_exit_ctx *ctx)
{
	if (!gate_open())
		return 0;
	return aio_reap(ctx);
}

/*
 * io_uring: its reads and writes run in no syscall of their own, and each posts a completion
 * (CQE); io_uring_complete fires as the CQE is filled, with the request (NULL for an
 * auxiliary CQE, which has no file). The request still holds its file then (put when the
 * request is freed, after). It counts on that file's mount, charged to the cgroup of the
 * thread posting it: the submitter (task work, polling), or one of its process's io-wq or
 * SQPOLL threads. An FSYNC request counts as the fsync op, as the syscalls do. Not timed.
 * The tracepoint's arguments after the request changed in 6.3 (the CQE instead of its
 * fields); the request's result is req->cqe.res on both.
 * Opcodes: include/uapi/linux/io_uring.h, stable.
 */
enum uring_rw_op {
	URING_READV = 1,
	URING_WRITEV = 2,
	URING_FSYNC = 3, /* with IORING_FSYNC_DATASYNC an fdatasync: both the op fsync */
	URING_READ_FIXED = 4,
	URING_WRITE_FIXED = 5,
	URING_READ = 22,
	URING_WRITE = 23,
	URING_READV_FIXED = 60,
	URING_WRITEV_FIXED = 61,
	URING_OPENAT = 18,
	URING_OPENAT2 = 28,
	URING_RENAMEAT = 35,
	URING_UNLINKAT = 36,
	URING_MKDIRAT = 37,
};

/*
 * io_uring's path operations (OPENAT, OPENAT2, MKDIRAT, UNLINKAT, RENAMEAT): the request holds
 * its path once prepared, at its submission's tracepoint (io_uring_submit_req; 6.1:
 * io_uring_submit_sqe), as the kernel's own copy (struct filename), which the operation puts
 * before the completion. So the submission finds where the lookup starts and keeps it here,
 * by request, and the completion counts it with its result, as path_op() does for the
 * syscalls; an OPENAT that made an fd is counted on its file, as open_exit() does. Bounded:
 * a full table counts the request as uring_path_full (its completion then on mount none);
 * a request that never posts a completion (IOSQE_CQE_SKIP_SUCCESS, a ring torn down) leaves
 * its entry until the request is reused or user space drops it as stale (counted).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* nothing held where io_uring makes no paths */
	__uint(max_entries, URING_PATHS_MAX);
	__type(key, __u64); /* the request's address */
	__type(value, struct uring_path);
} uring_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uring_path);
} uring_path_scratch SEC(".maps");

/* The request's own data (io_kiocb.cmd) as the operation's type */
#define URING_CMD(req, type) ((struct type *)&((struct io_kiocb *)(req))->cmd)

/* The op a path operation's request counts as (an OPENAT that created its file: create) */
static __always_inline int uring_path_op(void *req, __u8 op)
{
	if (op == URING_MKDIRAT)
		return IO_OP_MKDIR;
	if (op == URING_RENAMEAT)
		return IO_OP_RENAME;
	if (op != URING_UNLINKAT)
		return IO_OP_OPEN;
	if (BPF_CORE_READ(URING_CMD(req, io_unlink), flags) & AT_REMOVEDIR)
		return IO_OP_RMDIR;
	return IO_OP_UNLINK;
}

/*
 * Every submission comes here, reads and writes too: the opcode is one direct load through
 * the tracepoint's typed pointer (a BPF_CORE_READ, a helper call, made the program 124 ns a
 * run under fio's io_uring reads, bpf_stats; uring_complete's is 76).
 */
static __always_inline int uring_submit(struct io_kiocb *req)
{
	struct task_struct *task;
	struct filename *name;
	struct uring_path *p;
	__u64 key = (__u64)req;
	__u32 zero = 0;
	long dfd, err;
	int n;
	__u8 op;

	if (!req)
		return 0;
	op = req->opcode;
	if (op != URING_OPENAT && op != URING_OPENAT2 && op != URING_MKDIRAT &&
	    op != URING_UNLINKAT && op != URING_RENAMEAT)
		return 0;
	if (!gate_open())
		return 0;
	task = bpf_get_current_task_btf();
	p = bpf_map_lookup_elem(&uring_path_scratch, &zero);
	if (!p)
		return 0;
	p->op = uring_path_op(req, op);
	switch (op) {
	case URING_MKDIRAT:
		dfd = BPF_CORE_READ(URING_CMD(req, io_mkdir), dfd);
		name = BPF_CORE_READ(URING_CMD(req, io_mkdir), filename);
		break;
	case URING_UNLINKAT:
		dfd = BPF_CORE_READ(URING_CMD(req, io_unlink), dfd);
		name = BPF_CORE_READ(URING_CMD(req, io_unlink), filename);
		break;
	case URING_RENAMEAT: /* on its source's mount, as rename(2) */
		dfd = BPF_CORE_READ(URING_CMD(req, io_rename), old_dfd);
		name = BPF_CORE_READ(URING_CMD(req, io_rename), oldpath);
		break;
	default:
		dfd = BPF_CORE_READ(URING_CMD(req, io_open), dfd);
		name = BPF_CORE_READ(URING_CMD(req, io_open), filename);
	}
	n = name ? bpf_probe_read_kernel_str(p->e.path, sizeof(p->e.path),
					     BPF_CORE_READ(name, name)) :
		   -1;
	p->at = path_start(task, (int)dfd, n, &p->e);
	p->submitted_ns = bpf_ktime_get_ns();
	p->ctx = (__u64)req->ctx;
	p->user_data = req->cqe.user_data;
	p->opcode = op;
	/* an entry left at this address: a request that posted no completion (counted) */
	err = bpf_map_update_elem(&uring_paths, &key, p, BPF_NOEXIST);
	if (err == -EEXIST) {
		count_lost(IO_LOST_URING_PATH_STALE);
		err = bpf_map_update_elem(&uring_paths, &key, p, BPF_EXIST);
	}
	if (err)
		count_lost(IO_LOST_URING_PATH_FULL);
	return 0;
}

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(uring_sub_req, struct io_kiocb *req)
{
	return uring_submit(req);
}

SEC("tp_btf/io_uring_submit_sqe")
int BPF_PROG(uring_sub_sqe, struct io_kiocb *req)
{
	return uring_submit(req);
}

/*
 * A path operation's completion: an OPENAT that made an fd on its file (as open_exit; one
 * into a fixed-file slot has no fd, and one completed by a thread whose table does not hold
 * the fd, a kworker's fallback as the process exits: by its path, as an open), anything else
 * where its submission found (path_done), for the submitter's cgroup. No entry (a request submitted
 * before the programs were attached, one whose preparation failed, so that it has no path,
 * e.g. an unreadable one, or one the table had no room for): an error, or an op, on mount
 * none. The entry at the request's address must be this request's (ring, user data,
 * opcode): one left by a request that posted no completion is counted stale and dropped. A
 * request cancelled before it ran (-ECANCELED: a failed link) touched nothing: not counted.
 */
static __always_inline void uring_path_done(void *req, __u8 op, int res)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 key = (__u64)req;
	struct uring_path *p = bpf_map_lookup_elem(&uring_paths, &key);
	struct io_kiocb *r = req;
	struct file *file = NULL;
	__u64 cgroup_id;

	if (p && (p->opcode != op || p->ctx != (__u64)BPF_CORE_READ(r, ctx) ||
		  p->user_data != BPF_CORE_READ(r, cqe.user_data))) {
		count_lost(IO_LOST_URING_PATH_STALE);
		bpf_map_delete_elem(&uring_paths, &key);
		p = NULL;
	}
	if (res == -ECANCELED) {
		if (p)
			bpf_map_delete_elem(&uring_paths, &key);
		return;
	}
	/* a helper, not task_cgroup_id(): its loads and the map value's would share insns */
	cgroup_id = p ? p->e.cgroup_id : bpf_get_current_cgroup_id();
	if ((op == URING_OPENAT || op == URING_OPENAT2) && res >= 0 &&
	    !BPF_CORE_READ(URING_CMD(req, io_open), file_slot))
		file = fd_to_file(task, res);
	if (file) {
		count_opened(cgroup_id, file);
	} else if (p) {
		path_done(&p->e, p->at, p->op, res);
	} else {
		count_op(0, uring_path_op(req, op), res);
	}
	if (p)
		bpf_map_delete_elem(&uring_paths, &key);
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(uring_complete, void *ring, void *req)
{
	struct io_kiocb *r;
	struct file *file;
	int dir, res;
	__u8 op;

	if (!req || !gate_open())
		return 0;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		r = bpf_rdonly_cast(req, bpf_core_type_id_kernel(struct io_kiocb));
		op = r->opcode;
	} else {
		r = req;
		op = BPF_CORE_READ(r, opcode);
	}
	switch (op) {
	case URING_READ:
	case URING_READV:
	case URING_READ_FIXED:
	case URING_READV_FIXED:
		dir = IO_READ;
		break;
	case URING_WRITE:
	case URING_WRITEV:
	case URING_WRITE_FIXED:
	case URING_WRITEV_FIXED:
		dir = IO_WRITE;
		break;
	case URING_FSYNC:
		dir = -1;
		break;
	case URING_OPENAT:
	case URING_OPENAT2:
	case URING_MKDIRAT:
	case URING_UNLINKAT:
	case URING_RENAMEAT:
		res = bpf_ksym_exists(bpf_rdonly_cast) ? r->cqe.res : BPF_CORE_READ(r, cqe.res);
		uring_path_done(req, op, res);
		return 0;
	default:
		return 0;
	}
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		file = r->file;
		res = r->cqe.res;
	} else {
		file = BPF_CORE_READ(r, file);
		res = BPF_CORE_READ(r, cqe.res);
	}
	if (dir < 0) {
		count_fsync(file, res, 0);
		return 0;
	}
	if (!file) {
		/* a bad fd, or a linked request cancelled before it got its file: an error with
		 * no mount, as read() with a bad fd; a result without a file is not counted */
		if (res < 0)
			count_error(bpf_get_current_task_btf(), NULL, dir);
		else
			count_lost(IO_LOST_URING_NO_FILE);
		return 0;
	}
	count_completion(bpf_get_current_task_btf(), file, dir, res);
	return 0;
}

/*
 * io_uring_complete fires once a ring slot is filled: a completion that finds the ring full
 * goes to the overflow list, and into the ring later without the tracepoint (6.1, 6.12 and
 * 6.18 alike: 8 of 24 reads counted when 16 overflowed). Such a completion, of any request
 * (this tracepoint has no request, so no file), is counted as lost.
 */
SEC("tp_btf/io_uring_cqe_overflow")
int BPF_PROG(uring_overflow)
{
	if (gate_open())
		count_lost(IO_LOST_URING_OVERFLOW);
	return 0;
}

/*
 * Opens and path operations: the exit does the work; the enter program exists only for the
 * args_at_enter fallback (user space switches it off otherwise).
 */
#define PATH_PROGS(name, nargs, body)                                                      \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                        \
	int enter_##name(struct syscall_enter_ctx *ctx)                                    \
	{                                                                                  \
		if (!gate_open())                                                          \
			return 0;                                                          \
		return syscall_enter(ctx, nargs);                                          \
	}                                                                                  \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                         \
	int exit_##name(struct syscall_exit_ctx *ctx)                                      \
	{                                                                                  \
		unsigned long a[3];                                                        \
                                                                                           \
		if (!gate_open() || !syscall_args(bpf_get_current_task_btf(), ctx->nr, a)) \
			return 0;                                                          \
		return body;                                                               \
	}

PATH_PROGS(open, 1, open_exit(ctx, AT_FDCWD, (const char *)a[0]))
PATH_PROGS(creat, 1, open_exit(ctx, AT_FDCWD, (const char *)a[0]))
PATH_PROGS(openat, 2, open_exit(ctx, (long)a[0], (const char *)a[1]))
PATH_PROGS(openat2, 2, open_exit(ctx, (long)a[0], (const char *)a[1]))
PATH_PROGS(mkdir, 1, path_op(AT_FDCWD, (const char *)a[0], IO_OP_MKDIR, ctx->ret))
PATH_PROGS(mkdirat, 2, path_op((long)a[0], (const char *)a[1], IO_OP_MKDIR, ctx->ret))
PATH_PROGS(unlink, 1, path_op(AT_FDCWD, (const char *)a[0], IO_OP_UNLINK, ctx->ret))
PATH_PROGS(unlinkat, 3,
	   path_op((long)a[0], (const char *)a[1],
		   (a[2] & AT_REMOVEDIR) ? IO_OP_RMDIR : IO_OP_UNLINK, ctx->ret))
PATH_PROGS(rmdir, 1, path_op(AT_FDCWD, (const char *)a[0], IO_OP_RMDIR, ctx->ret))
/* a rename is charged to the mount of its source path (across mounts it fails, EXDEV) */
PATH_PROGS(rename, 1, path_op(AT_FDCWD, (const char *)a[0], IO_OP_RENAME, ctx->ret))
PATH_PROGS(renameat, 2, path_op((long)a[0], (const char *)a[1], IO_OP_RENAME, ctx->ret))
PATH_PROGS(renameat2, 2, path_op((long)a[0], (const char *)a[1], IO_OP_RENAME, ctx->ret))
/* fd to fd in the kernel (transfer_exit): the input and output fds */
PATH_PROGS(sendfile64, 2, transfer_exit(ctx, (long)a[1], (long)a[0]))
PATH_PROGS(copy_file_range, 3, transfer_exit(ctx, (long)a[0], (long)a[2]))
PATH_PROGS(splice, 3, transfer_exit(ctx, (long)a[0], (long)a[2]))
