// SPDX-License-Identifier: GPL-2.0
/*
 * A workload whose every I/O syscall is known: the integration tests' ground truth.
 * Built static so that no dynamic loader reads libraries on the tested mounts.
 *
 *   iowork [--cgroup DIR] [--sleep-before S] [--sleep-after S] OP...
 *
 * It moves itself into the cgroup DIR (writing its pid to DIR/cgroup.procs) before any
 * other I/O, then runs each OP in order; any syscall that does not return what the OP
 * expects makes it exit 1 with a message.
 *
 *   write:PATH:BYTES:CHUNK   open(O_CREAT|O_TRUNC), write() BYTES in CHUNK-sized calls
 *   pwrite:PATH:BYTES:CHUNK  the same with pwrite64()
 *   writev:PATH:BYTES:CHUNK  the same with writev(), each call two iovecs of CHUNK/2
 *   read:PATH:BYTES:CHUNK    open(O_RDONLY), read() exactly BYTES in CHUNK-sized calls
 *   pread:PATH:BYTES:CHUNK   the same with pread64()
 *   readv:PATH:BYTES:CHUNK   the same with readv()
 *   ebadf:N                  read() on a closed fd, N times (EBADF)
 *   efault:PATH:N            read() into an unmapped buffer, N times (EFAULT)
 *   enoent:PATH:N            open() of PATH, which must not exist, N times (ENOENT)
 *   mkdir:PATH  rmdir:PATH  unlink:PATH  creat:PATH
 *   mkdirat:DIR:NAME  unlinkat:DIR:NAME  rmdirat:DIR:NAME   (relative to an open DIR)
 *   fsync:PATH               open(O_RDONLY) PATH (a file or a directory), fsync() and
 *                            fdatasync() it
 *   fsyncerr:N               fsync() of a closed fd N times (EBADF), and fdatasync() of a
 *                            pipe N times (EINVAL)
 *   synctimed:PATH:N:BYTES   PATH created, then N rounds of a pwrite() of BYTES at offset 0
 *                            and an fsync() (fdatasync() in odd rounds); prints each sync
 *                            call's time in ns as its caller measures it (CLOCK_MONOTONIC,
 *                            the clock of bpf_ktime_get_ns), comma-separated
 *   rename:OLD:NEW           rename(); renameat:DIR:OLD:NEW renameat2() with flags 0
 *                            relative to an open DIR; exdev:OLD:NEW a rename() that must
 *                            fail with EXDEV (across mounts)
 *   slowread:PATH:MS         one read() of 4 KiB that takes at least MS: its buffer is a
 *                            userfaultfd page that a second thread fills only after MS
 *   swapread:PATH:MS         the same, and while it waits the second thread puts a pipe on
 *                            its fd (dup2): the read ends with the fd no longer PATH's
 *   ia32seek:PATH:MS         for MS, 32-bit syscalls from this 64-bit process: int $0x80,
 *                            eax 19 (ia32's lseek; x86_64's 19 is readv) on PATH opened, rdi
 *                            holding its fd too; prints the calls made. Exits 77 when the
 *                            kernel takes no 32-bit syscalls (a probe child's int $0x80 faults)
 *   aioread:PATH:BYTES:CHUNK  aiowrite:PATH:BYTES:CHUNK
 *                            the same through Linux AIO: io_submit() up to 8 requests at a
 *                            time, every other one vectored (PREADV, PWRITEV), reaped by
 *                            io_getevents() (one) and io_pgetevents() (up to 3) in turn;
 *                            each must complete with its full size
 *   uringread:PATH:BYTES:CHUNK  uringwrite:PATH:BYTES:CHUNK
 *                            the same through io_uring: up to 8 requests at a time, cycling
 *                            through READ, READV and READ_FIXED (WRITE...: a registered buffer)
 *   aioefault:PATH:N  uringefault:PATH:N
 *                            N reads into an unmapped buffer through AIO or io_uring: each
 *                            must complete with -EFAULT
 *   uringebadf:N             N io_uring reads of fd 999, not open: each must complete with
 *                            -EBADF
 *   aiodrops:PATH            AIO reads of 16 bytes of PATH the io module cannot count: 5000
 *                            reaped by one call (904 past its cap), 3 with their iocbs
 *                            unmapped before reaping, 2 with their fd closed before reaping
 *   uringfsync:PATH:N        N io_uring FSYNC requests on PATH (every other one DATASYNC),
 *                            then N on fd 999 (EBADF)
 *   uringpaths:A:B           io_uring's path operations, one at a time, each must return as
 *                            said: A and B directories, open(2)ed as dirfds, on two mounts,
 *                            A/nested a third one. OPENAT B/u-f O_CREAT (created), OPENAT
 *                            u-f from B (opened), OPENAT2 nested/u-missing from A (-ENOENT),
 *                            MKDIRAT nested/u-d from A, MKDIRAT u-e from B (twice: the second
 *                            -EEXIST), RENAMEAT B/u-f to B/u-g, UNLINKAT u-g from B, UNLINKAT
 *                            nested/u-d from A and u-e from B (AT_REMOVEDIR), OPENAT
 *                            A/nested/u-x O_CREAT into a fixed-file slot (created, no fd);
 *                            then unlink(2) A/nested/u-x; then MKDIRAT u-skip from B with
 *                            IOSQE_CQE_SKIP_SUCCESS (no completion) and UNLINKAT of an
 *                            unreadable path (-EFAULT), and rmdir(2) B/u-skip; then READ of
 *                            fd 999 (-EBADF) and, linked after it, MKDIRAT u-never from B
 *                            (-ECANCELED: never run)
 *   uringskip:B              MKDIRAT u-skip from B with IOSQE_CQE_SKIP_SUCCESS (no
 *                            completion) on a ring of its own, then rmdir(2) B/u-skip
 *   uringoverflow:PATH       24 io_uring reads of 1000 bytes of PATH, 16 of whose completions
 *                            overflow the ring before they are reaped
 *   sendfile:SRC:DST:CHUNK   copy all of SRC to DST (created) by sendfile() of CHUNK a call;
 *   copyrange:SRC:DST:CHUNK  by copy_file_range(); splice:SRC:DST:CHUNK: by splice() from SRC
 *                            into a pipe and from the pipe into DST (two calls a chunk)
 *   sendsock:SRC:CHUNK       sendfile() all of SRC into a unix socket (a thread drains it)
 *   sendagain:SRC:CHUNK      sendfile() into a non-blocking unix socket nobody reads, until
 *                            it fails with EAGAIN (full)
 *   sendfull:SRC:DST:CHUNK   sendfile() SRC to DST until it fails with ENOSPC
 *                            Each prints "OP: B bytes in I calls out O calls failed F": the
 *                            calls that read SRC, those that wrote to the other side (both
 *                            without the failed one) and the failed one (0 or 1)
 *   sendebadf:N              sendfile() from a closed fd to stdout, N times (EBADF)
 *   copyebadf:DST:N          copy_file_range() from a closed fd to DST (created), N times
 *   sleep:MS
 *   stream:DIR:CHUNK:STOP    until the file STOP exists: write() CHUNK bytes to DIR/stream
 *                            (created) and mkdir() DIR/d/<n> (DIR/d created), then sleep
 *                            1 ms; prints "written W mkdirs M" (D/d and D/stream included)
 */
#define _GNU_SOURCE /* splice() */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <pthread.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

static char buf[1 << 20];
/* an address that is never mapped, hidden from the compiler's buffer-size checks */
static void *volatile unmapped = (void *)8;

static void die(const char *op, const char *what)
{
	fprintf(stderr, "iowork: %s: %s: %s\n", op, what, strerror(errno));
	exit(1);
}

static long num(const char *s, const char *op)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < 0) {
		fprintf(stderr, "iowork: %s: bad number '%s'\n", op, s);
		exit(2);
	}
	return v;
}

static void join_cgroup(const char *dir)
{
	char path[4096], pid[32];
	int fd, n;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		die("cgroup", path);
	n = snprintf(pid, sizeof(pid), "%d\n", getpid());
	if (write(fd, pid, n) != n)
		die("cgroup", path);
	close(fd);
}

static void rw(const char *kind, const char *path, long bytes, long chunk)
{
	int writing = kind[0] == 'w' || kind[1] == 'w';
	int fd = open(path, writing ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
	long done = 0, n, want;
	struct iovec iov[2];

	if (fd < 0)
		die(kind, path);
	if (chunk <= 0 || chunk > (long)sizeof(buf) || (kind[strlen(kind) - 1] == 'v' && chunk % 2))
		die(kind, "bad chunk");
	while (done < bytes) {
		want = bytes - done < chunk ? bytes - done : chunk;
		if (!strcmp(kind, "write")) {
			n = write(fd, buf, want);
		} else if (!strcmp(kind, "pwrite")) {
			n = pwrite(fd, buf, want, done);
		} else if (!strcmp(kind, "read")) {
			n = read(fd, buf, want);
		} else if (!strcmp(kind, "pread")) {
			n = pread(fd, buf, want, done);
		} else {
			iov[0] = (struct iovec){ buf, want / 2 };
			iov[1] = (struct iovec){ buf + want / 2, want - want / 2 };
			n = writing ? writev(fd, iov, 2) : readv(fd, iov, 2);
		}
		if (n != want)
			die(kind, "short transfer");
		done += n;
	}
	if (close(fd))
		die(kind, "close");
}

struct fault_server {
	int uffd;
	long delay_ms;
	char *page;
	int swap_fd, swap_to; /* dup2(swap_to, swap_fd) before answering; -1: no swap */
};

/* Answers the one page fault of a slow read, delay_ms after it happens. */
static void *serve_fault(void *arg)
{
	struct fault_server *fs = arg;
	struct pollfd p = { .fd = fs->uffd, .events = POLLIN };
	struct uffd_msg msg;
	struct uffdio_copy copy;

	if (poll(&p, 1, 10000) != 1 || read(fs->uffd, &msg, sizeof(msg)) != sizeof(msg) ||
	    msg.event != UFFD_EVENT_PAGEFAULT)
		die("slowread", "no page fault");
	usleep(fs->delay_ms * 1000);
	if (fs->swap_fd >= 0 && dup2(fs->swap_to, fs->swap_fd) < 0)
		die("swapread", "dup2");
	copy = (struct uffdio_copy){ .dst = (unsigned long)fs->page,
				     .src = (unsigned long)buf,
				     .len = 4096 };
	if (ioctl(fs->uffd, UFFDIO_COPY, &copy))
		die("slowread", "UFFDIO_COPY");
	return NULL;
}

static void slow_read(const char *path, long delay_ms, bool swap)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	struct fault_server fs = { .delay_ms = delay_ms, .swap_fd = -1 };
	pthread_t server;
	int fd = open(path, O_RDONLY), pipe_fds[2];

	if (swap) {
		if (pipe(pipe_fds))
			die("swapread", "pipe");
		fs.swap_fd = fd;
		fs.swap_to = pipe_fds[0];
	}

	fs.uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (fd < 0 || fs.uffd < 0 || ioctl(fs.uffd, UFFDIO_API, &api))
		die("slowread", "userfaultfd");
	fs.page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg = (struct uffdio_register){ .range = { (unsigned long)fs.page, 4096 },
					.mode = UFFDIO_REGISTER_MODE_MISSING };
	if (fs.page == MAP_FAILED || ioctl(fs.uffd, UFFDIO_REGISTER, &reg))
		die("slowread", "register");
	if (pthread_create(&server, NULL, serve_fault, &fs))
		die("slowread", "thread");
	/* the copy into the missing page faults and waits for serve_fault */
	if (read(fd, fs.page, 4096) != 4096)
		die("slowread", "read");
	pthread_join(server, NULL);
	close(fd);
	close(fs.uffd);
	munmap(fs.page, 4096);
	if (swap) {
		close(pipe_fds[0]);
		close(pipe_fds[1]);
	}
}

/* Writes and directories at a steady pace until stop exists: a workload across a restart. */
static void stream(const char *dir, long chunk, const char *stop)
{
	char path[4096];
	long written = 0, mkdirs = 1, n;
	int fd;

	if (chunk <= 0 || chunk > (long)sizeof(buf))
		die("stream", "CHUNK must be 1..1 MiB");
	snprintf(path, sizeof(path), "%s/d", dir);
	if (mkdir(path, 0755))
		die("stream", path);
	snprintf(path, sizeof(path), "%s/stream", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("stream", path);
	for (n = 0; access(stop, F_OK); n++) {
		if (write(fd, buf, chunk) != chunk)
			die("stream", "short write");
		written += chunk;
		snprintf(path, sizeof(path), "%s/d/%ld", dir, n);
		if (mkdir(path, 0755))
			die("stream", path);
		mkdirs++;
		usleep(1000);
	}
	close(fd);
	printf("written %ld mkdirs %ld\n", written, mkdirs);
	fflush(stdout);
}

#ifdef __x86_64__
/* A 32-bit syscall: the kernel takes its arguments from ebx, ecx, edx; rdi gets the first too,
 * where a program reading x86_64's registers would look for it. */
static long int80(long nr, long a1, long a2, long a3)
{
	long r;

	__asm__ volatile("int $0x80"
			 : "=a"(r)
			 : "a"(nr), "b"(a1), "c"(a2), "d"(a3), "D"(a1)
			 : "memory", "cc", "r8", "r9", "r10", "r11");
	return r;
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sync_timed(const char *path, long n, long bytes)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	long long t0, t1;

	if (fd < 0 || bytes > (long)sizeof(buf))
		die("synctimed", path);
	memset(buf, 's', bytes);
	printf("synctimed:");
	for (long i = 0; i < n; i++) {
		if (pwrite(fd, buf, bytes, 0) != bytes)
			die("synctimed", "pwrite");
		t0 = now_ns();
		if (i % 2 ? fdatasync(fd) : fsync(fd))
			die("synctimed", "fsync");
		t1 = now_ns();
		printf("%s%lld", i ? "," : " ", t1 - t0);
	}
	printf("\n");
	close(fd);
}

static void ia32_seek(const char *path, long ms)
{
	long calls = 0, end;
	int fd, status;
	pid_t pid;

	pid = fork(); /* the probe: without IA32 emulation int $0x80 is a general protection fault */
	if (pid < 0)
		die("ia32seek", "fork");
	if (!pid)
		_exit(int80(20, 0, 0, 0) == getpid() ? 0 : 1); /* ia32's getpid */
	if (waitpid(pid, &status, 0) != pid)
		die("ia32seek", "waitpid");
	if (!WIFEXITED(status)) {
		fprintf(stderr,
			"iowork: ia32seek: this kernel takes no 32-bit syscalls "
			"(int $0x80 killed the probe with signal %d)\n",
			WTERMSIG(status));
		exit(77);
	}
	if (WEXITSTATUS(status))
		die("ia32seek", "ia32 getpid returned another pid");
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die("ia32seek", path);
	end = now_ms() + ms;
	do {
		for (int i = 0; i < 1000; i++, calls++)
			if (int80(19, fd, 0, SEEK_SET) != 0)
				die("ia32seek", "ia32 lseek(fd, 0, SEEK_SET) did not return 0");
	} while (now_ms() < end);
	close(fd);
	printf("ia32 calls %ld\n", calls);
	fflush(stdout);
}
#endif

/*
 * Asynchronous I/O through raw syscalls (the binary is static; libaio and liburing are not
 * needed). Request i moves CHUNK bytes at offset i * CHUNK (the last one the rest); `dst` is
 * where each reads into or writes from, and `want` what each must complete with (-EFAULT for
 * an unmapped dst, else its size).
 */
#define ASYNC_DEPTH 8

struct async_job {
	const char *op;
	int fd;
	bool writing;
	long bytes, chunk, nreq;
	char *dst;
	int err; /* what each request must fail with (EFAULT, EBADF), or 0 */
};

static long async_len(const struct async_job *j, long i)
{
	return j->bytes - i * j->chunk < j->chunk ? j->bytes - i * j->chunk : j->chunk;
}

static void async_check(const struct async_job *j, long i, long res)
{
	long want = j->err ? -j->err : async_len(j, i);

	if (res != want) {
		fprintf(stderr, "iowork: %s: request %ld completed with %ld, not %ld\n", j->op, i,
			res, want);
		exit(1);
	}
}

static void aio_run(struct async_job *j)
{
	static struct iovec iov[ASYNC_DEPTH];
	struct iocb cb[ASYNC_DEPTH], *cbp[ASYNC_DEPTH];
	struct io_event ev[ASYNC_DEPTH];
	aio_context_t ctx = 0;
	long next = 0, reaped = 0, n, batch, reaps = 0;

	if (syscall(SYS_io_setup, ASYNC_DEPTH, &ctx))
		die(j->op, "io_setup");
	while (next < j->nreq) {
		for (batch = 0; batch < ASYNC_DEPTH && next < j->nreq; batch++, next++) {
			memset(&cb[batch], 0, sizeof(cb[batch]));
			cb[batch].aio_data = next;
			cb[batch].aio_fildes = j->fd;
			cb[batch].aio_offset = next * j->chunk;
			if (next % 2) {
				iov[batch] = (struct iovec){ j->dst, async_len(j, next) };
				cb[batch].aio_lio_opcode =
					j->writing ? IOCB_CMD_PWRITEV : IOCB_CMD_PREADV;
				cb[batch].aio_buf = (unsigned long)&iov[batch];
				cb[batch].aio_nbytes = 1;
			} else {
				cb[batch].aio_lio_opcode =
					j->writing ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
				cb[batch].aio_buf = (unsigned long)j->dst;
				cb[batch].aio_nbytes = async_len(j, next);
			}
			cbp[batch] = &cb[batch];
		}
		if (syscall(SYS_io_submit, ctx, batch, cbp) != batch)
			die(j->op, "io_submit");
		for (long got = 0; got < batch; got += n) {
			/* 1, then up to 3 a call: both syscalls reap, one and several events */
			long max = reaps % 2 ? 3 : 1;

			max = batch - got < max ? batch - got : max;

			n = reaps++ % 2 ? syscall(SYS_io_pgetevents, ctx, 1, max, ev, NULL, NULL) :
					  syscall(SYS_io_getevents, ctx, 1, max, ev, NULL);
			if (n <= 0)
				die(j->op, "io_getevents");
			for (long k = 0; k < n; k++)
				async_check(j, (long)ev[k].data, ev[k].res);
		}
		reaped += batch;
	}
	syscall(SYS_io_destroy, ctx);
	printf("%s: %ld requests, %ld reaping calls\n", j->op, reaped, reaps);
}

struct uring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static void uring_open(struct uring *r, const char *op, unsigned int entries)
{
	struct io_uring_params p;
	char *sq, *cq;

	memset(&p, 0, sizeof(p));
	r->fd = syscall(SYS_io_uring_setup, entries, &p);
	if (r->fd < 0)
		die(op, "io_uring_setup");
	sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned int),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
		die(op, "io_uring mmap");
	r->sq_tail = (unsigned int *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned int *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned int *)(sq + p.sq_off.array);
	r->cq_head = (unsigned int *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned int *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned int *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

static void uring_run(struct async_job *j)
{
	static struct iovec iov[ASYNC_DEPTH];
	struct iovec reg = { NULL, sizeof(buf) };
	static const __u8 ops[2][3] = { { IORING_OP_READ, IORING_OP_READV, IORING_OP_READ_FIXED },
					{ IORING_OP_WRITE, IORING_OP_WRITEV,
					  IORING_OP_WRITE_FIXED } };
	struct uring r;
	long next = 0, batch, reaped = 0;
	unsigned int tail, head;

	uring_open(&r, j->op, ASYNC_DEPTH);
	/*
	 * READ_FIXED needs a registered buffer, and 6.1 registers only anonymous memory (buf's
	 * first page may share its mapping with .data): a mapping of its own, the dst of every
	 * request then; a failing job never uses it
	 */
	reg.iov_base =
		mmap(NULL, reg.iov_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (reg.iov_base == MAP_FAILED)
		die(j->op, "mmap");
	memset(reg.iov_base, 'u', reg.iov_len);
	if (syscall(SYS_io_uring_register, r.fd, IORING_REGISTER_BUFFERS, &reg, 1))
		die(j->op, "io_uring_register");
	if (!j->err)
		j->dst = reg.iov_base;
	while (next < j->nreq) {
		tail = *r.sq_tail;
		for (batch = 0; batch < ASYNC_DEPTH && next < j->nreq; batch++, next++, tail++) {
			unsigned int idx = tail & *r.sq_mask;
			struct io_uring_sqe *sqe = &r.sqes[idx];
			int kind = j->err ? 0 : next % 3;

			memset(sqe, 0, sizeof(*sqe));
			sqe->opcode = ops[j->writing][kind];
			sqe->fd = j->fd;
			sqe->off = next * j->chunk;
			sqe->user_data = next;
			if (kind == 1) {
				iov[batch] = (struct iovec){ j->dst, async_len(j, next) };
				sqe->addr = (unsigned long)&iov[batch];
				sqe->len = 1;
			} else {
				sqe->addr = (unsigned long)j->dst;
				sqe->len = async_len(j, next);
				sqe->buf_index = 0;
			}
			r.sq_array[idx] = idx;
		}
		__atomic_store_n(r.sq_tail, tail, __ATOMIC_RELEASE);
		for (long got = 0; got < batch;) {
			long want = got ? 1 : batch;

			if (syscall(SYS_io_uring_enter, r.fd, got ? 0 : batch, want,
				    IORING_ENTER_GETEVENTS, NULL, 0) < 0)
				die(j->op, "io_uring_enter");
			head = *r.cq_head;
			for (; head != __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE);
			     head++, got++) {
				struct io_uring_cqe *cqe = &r.cqes[head & *r.cq_mask];

				async_check(j, (long)cqe->user_data, cqe->res);
			}
			__atomic_store_n(r.cq_head, head, __ATOMIC_RELEASE);
		}
		reaped += batch;
	}
	close(r.fd);
	munmap(reg.iov_base, reg.iov_len);
	printf("%s: %ld requests\n", j->op, reaped);
}

/*
 * uringfsync: n FSYNC requests on PATH (a file or a directory), every other one with
 * IORING_FSYNC_DATASYNC, one at a time, each must complete with 0; then n on fd 999, not
 * open, each must complete with -EBADF
 */
static void uring_fsync(const char *path, long n)
{
	struct uring r;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		die("uringfsync", path);
	uring_open(&r, "uringfsync", 4);
	for (long i = 0; i < 2 * n; i++) {
		unsigned int tail = *r.sq_tail, idx = tail & *r.sq_mask, head;
		struct io_uring_sqe *sqe = &r.sqes[idx];

		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = IORING_OP_FSYNC;
		sqe->fd = i < n ? fd : 999;
		sqe->fsync_flags = i % 2 ? IORING_FSYNC_DATASYNC : 0;
		r.sq_array[idx] = idx;
		__atomic_store_n(r.sq_tail, tail + 1, __ATOMIC_RELEASE);
		if (syscall(SYS_io_uring_enter, r.fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) != 1)
			die("uringfsync", "io_uring_enter");
		head = *r.cq_head;
		if (head == __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE) ||
		    r.cqes[head & *r.cq_mask].res != (i < n ? 0 : -EBADF))
			die("uringfsync", "an fsync did not complete with 0, or -EBADF on fd 999");
		__atomic_store_n(r.cq_head, head + 1, __ATOMIC_RELEASE);
	}
	close(r.fd);
	close(fd);
	printf("uringfsync: %ld requests\n", 2 * n);
}

/* One request, submitted and reaped: its result. */
static int uring_one(struct uring *r, const struct io_uring_sqe *req, const char *op)
{
	unsigned int tail = *r->sq_tail, idx = tail & *r->sq_mask, head;
	int res;

	r->sqes[idx] = *req;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) != 1)
		die(op, "io_uring_enter");
	head = *r->cq_head;
	if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		die(op, "no completion");
	res = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static void sqe_path(struct io_uring_sqe *q, int code, int dir, const char *path)
{
	memset(q, 0, sizeof(*q));
	q->opcode = code;
	q->fd = dir;
	q->addr = (uintptr_t)path;
}

/* The request must return want, or an fd or 0 when want is 0 (an fd is closed). */
static void uring_expect(struct uring *r, const struct io_uring_sqe *q, int want, const char *op)
{
	int res = uring_one(r, q, op);

	if (want ? res != want : res < 0) {
		fprintf(stderr, "%s: opcode %d returned %d, not %d\n", op, q->opcode, res, want);
		exit(1);
	}
	if (q->opcode == IORING_OP_OPENAT && res > 0)
		close(res);
}

/*
 * Two requests linked (IOSQE_IO_LINK), submitted at once: a READ of fd 999, not open, fails
 * (-EBADF), so MKDIRAT u-never from B's fd, linked after it, is cancelled (-ECANCELED) and
 * never runs (a failed MKDIRAT would not break the link: io_uring fails links on some
 * operations' errors only).
 */
static void uring_cancelled(struct uring *r, int db)
{
	static const char *const op = "uringpaths";
	unsigned int tail = *r->sq_tail, head;
	static char byte;
	int want[2] = { -EBADF, -ECANCELED }, got[2] = { 0, 0 };
	struct io_uring_sqe *q;

	for (int i = 0; i < 2; i++) {
		unsigned int idx = (tail + i) & *r->sq_mask;

		q = &r->sqes[idx];
		if (i) {
			sqe_path(q, IORING_OP_MKDIRAT, db, "u-never");
			q->len = 0755;
		} else {
			sqe_path(q, IORING_OP_READ, 999, NULL);
			q->addr = (uintptr_t)&byte;
			q->len = 1;
			q->flags = IOSQE_IO_LINK;
		}
		q->user_data = i;
		r->sq_array[idx] = idx;
	}
	__atomic_store_n(r->sq_tail, tail + 2, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, r->fd, 2, 2, IORING_ENTER_GETEVENTS, NULL, 0) != 2)
		die(op, "io_uring_enter");
	head = *r->cq_head;
	for (int i = 0; i < 2 && head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE); i++) {
		struct io_uring_cqe *c = &r->cqes[head++ & *r->cq_mask];

		got[c->user_data & 1] = c->res;
	}
	__atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
	if (got[0] != want[0] || got[1] != want[1]) {
		fprintf(stderr, "%s: a READ and a MKDIRAT linked returned %d, %d, not %d, %d\n", op,
			got[0], got[1], want[0], want[1]);
		exit(1);
	}
}

/*
 * A request that posts no completion: MKDIRAT u-skip from B's fd (db) with
 * IOSQE_CQE_SKIP_SUCCESS, waited for until the directory exists and a little longer. Its
 * path, B/u-skip, into d.
 */
static void uring_skipped(struct uring *r, const char *b, int db, const char *op, char *d,
			  size_t size)
{
	struct timespec nap = { 0, 1000000 };
	unsigned int tail = *r->sq_tail, idx = tail & *r->sq_mask;
	struct stat st;
	int i;

	snprintf(d, size, "%s/u-skip", b);
	sqe_path(&r->sqes[idx], IORING_OP_MKDIRAT, db, "u-skip");
	r->sqes[idx].len = 0755;
	r->sqes[idx].flags = IOSQE_CQE_SKIP_SUCCESS;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, r->fd, 1, 0, 0, NULL, 0) != 1)
		die(op, "io_uring_enter");
	for (i = 0; i < 5000 && stat(d, &st); i++)
		nanosleep(&nap, NULL);
	if (i == 5000)
		die(op, "the skipped MKDIRAT made nothing in 5 s");
	nanosleep(&nap, NULL);
}

/*
 * A request that posts no completion, then one that fails before it is prepared, on the
 * same ring: the second likely reuses the first's memory. MKDIRAT u-skip from B's fd with
 * IOSQE_CQE_SKIP_SUCCESS (uring_skipped), then UNLINKAT with an unreadable path (-EFAULT);
 * then rmdir(2) B/u-skip.
 */
static void uring_stale(struct uring *r, const char *b, int db)
{
	static const char *const op = "uringpaths";
	struct io_uring_sqe q;
	char d[4096];

	uring_skipped(r, b, db, op, d, sizeof(d));
	sqe_path(&q, IORING_OP_UNLINKAT, db, NULL);
	q.addr = 1; /* unreadable */
	uring_expect(r, &q, -EFAULT, op);
	if (rmdir(d))
		die(op, d);
}

/*
 * uringpaths:A:B: io_uring's path operations, each checked for its result (see the usage);
 * A/nested must be a mount point, B another mount's directory
 */
static void uring_paths(const char *a, const char *b)
{
	static const char *const op = "uringpaths";
	int da = open(a, O_RDONLY | O_DIRECTORY), db = open(b, O_RDONLY | O_DIRECTORY);
	struct io_uring_rsrc_register reg = { .nr = 1, .flags = IORING_RSRC_REGISTER_SPARSE };
	struct open_how how = { .flags = O_RDONLY };
	char f[4096], g[4096], x[4096];
	struct io_uring_sqe q;
	struct uring r;

	if (da < 0 || db < 0)
		die(op, "open a directory");
	snprintf(f, sizeof(f), "%s/u-f", b);
	snprintf(g, sizeof(g), "%s/u-g", b);
	snprintf(x, sizeof(x), "%s/nested/u-x", a);
	uring_open(&r, op, 4);
	sqe_path(&q, IORING_OP_OPENAT, AT_FDCWD, f); /* created, on B's mount */
	q.open_flags = O_CREAT | O_WRONLY;
	q.len = 0644;
	uring_expect(&r, &q, 0, op);
	sqe_path(&q, IORING_OP_OPENAT, db, "u-f"); /* opened there */
	uring_expect(&r, &q, 0, op);
	sqe_path(&q, IORING_OP_OPENAT2, da, "nested/u-missing"); /* ENOENT, on A/nested's mount */
	q.len = sizeof(how);
	q.addr2 = (uintptr_t)&how;
	uring_expect(&r, &q, -ENOENT, op);
	sqe_path(&q, IORING_OP_MKDIRAT, da, "nested/u-d");
	q.len = 0755;
	uring_expect(&r, &q, 0, op);
	sqe_path(&q, IORING_OP_MKDIRAT, db, "u-e");
	q.len = 0755;
	uring_expect(&r, &q, 0, op);
	sqe_path(&q, IORING_OP_MKDIRAT, db, "u-e");
	uring_expect(&r, &q, -EEXIST, op);
	sqe_path(&q, IORING_OP_RENAMEAT, AT_FDCWD, f);
	q.len = AT_FDCWD;
	q.addr2 = (uintptr_t)g;
	uring_expect(&r, &q, 0, op);
	sqe_path(&q, IORING_OP_UNLINKAT, db, "u-g");
	uring_expect(&r, &q, 0, op);
	sqe_path(&q, IORING_OP_UNLINKAT, da, "nested/u-d");
	q.unlink_flags = AT_REMOVEDIR;
	uring_expect(&r, &q, 0, op);
	sqe_path(&q, IORING_OP_UNLINKAT, db, "u-e");
	q.unlink_flags = AT_REMOVEDIR;
	uring_expect(&r, &q, 0, op);
	/* into a fixed-file slot: no fd; created, counted as an open on A/nested's mount */
	if (syscall(SYS_io_uring_register, r.fd, IORING_REGISTER_FILES2, &reg, sizeof(reg)))
		die(op, "IORING_REGISTER_FILES2");
	sqe_path(&q, IORING_OP_OPENAT, AT_FDCWD, x);
	q.open_flags = O_CREAT | O_WRONLY;
	q.len = 0644;
	q.file_index = 1;
	uring_expect(&r, &q, 0, op);
	if (unlink(x))
		die(op, x);
	uring_stale(&r, b, db);
	uring_cancelled(&r, db);
	close(r.fd);
	close(da);
	close(db);
	printf("%s: 15 requests\n", op);
}

/*
 * uringskip:B: one request that posts no completion (uring_skipped), alone on its ring; then
 * rmdir(2) B/u-skip, and the ring closed
 */
static void uring_skip(const char *b)
{
	static const char *const op = "uringskip";
	int db = open(b, O_RDONLY | O_DIRECTORY);
	struct uring r;
	char d[4096];

	if (db < 0)
		die(op, b);
	uring_open(&r, op, 4);
	uring_skipped(&r, b, db, op, d, sizeof(d));
	if (rmdir(d))
		die(op, d);
	close(r.fd);
	close(db);
	printf("%s: 1 request\n", op);
}

/*
 * uringoverflow: a ring of 4 entries (8 completion slots), 6 rounds of 4 reads of 1000 bytes
 * submitted with none reaped (24 completions: 16 overflow the ring, kept by the kernel
 * until there is room), then all reaped; each must read 1000 bytes
 */
static void uring_overflow(const char *path)
{
	struct uring r;
	unsigned int tail, head;
	long got = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		die("uringoverflow", path);
	uring_open(&r, "uringoverflow", 4);
	for (int round = 0; round < 6; round++) {
		tail = *r.sq_tail;
		for (int i = 0; i < 4; i++, tail++) {
			unsigned int idx = tail & *r.sq_mask;
			struct io_uring_sqe *sqe = &r.sqes[idx];

			memset(sqe, 0, sizeof(*sqe));
			sqe->opcode = IORING_OP_READ;
			sqe->fd = fd;
			sqe->addr = (unsigned long)buf;
			sqe->len = 1000;
			r.sq_array[idx] = idx;
		}
		__atomic_store_n(r.sq_tail, tail, __ATOMIC_RELEASE);
		if (syscall(SYS_io_uring_enter, r.fd, 4, 0, 0, NULL, 0) != 4)
			die("uringoverflow", "io_uring_enter");
	}
	alarm(20); /* a completion that never comes: killed, not hung */
	while (got < 24) {
		head = *r.cq_head;
		for (; head != __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE); head++, got++)
			if (r.cqes[head & *r.cq_mask].res != 1000)
				die("uringoverflow", "a read did not return 1000 bytes");
		__atomic_store_n(r.cq_head, head, __ATOMIC_RELEASE);
		/* moves what overflowed into the room made, and waits for one if none is there */
		if (got < 24 &&
		    syscall(SYS_io_uring_enter, r.fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
			die("uringoverflow", "io_uring_enter");
	}
	alarm(0);
	close(r.fd);
	close(fd);
	printf("uringoverflow: 24 requests\n");
}

/* AIO reads of 16 bytes of fd, their iocbs in cb, submitted at once */
static void aio_submit_reads(aio_context_t ctx, struct iocb *cb, long n, int fd)
{
	struct iocb **p = calloc(n, sizeof(*p));

	if (!p)
		die("aiodrops", "calloc");
	for (long i = 0; i < n; i++) {
		memset(&cb[i], 0, sizeof(cb[i]));
		cb[i].aio_lio_opcode = IOCB_CMD_PREAD;
		cb[i].aio_fildes = fd;
		cb[i].aio_buf = (unsigned long)buf;
		cb[i].aio_nbytes = 16;
		p[i] = &cb[i];
	}
	if (syscall(SYS_io_submit, ctx, n, p) != n)
		die("aiodrops", "io_submit");
	free(p);
}

/* reaps exactly n events in one io_getevents() */
static void aio_reap_all(aio_context_t ctx, long n)
{
	struct io_event *ev = calloc(n, sizeof(*ev));

	if (!ev || syscall(SYS_io_getevents, ctx, n, n, ev, NULL) != n)
		die("aiodrops", "io_getevents");
	free(ev);
}

/*
 * aiodrops: what the io module cannot count, made on purpose. 5000 reads reaped by one
 * io_getevents() (past its 4,096 a call); 3 whose iocbs are unmapped before they are reaped
 * (the kernel no longer needs them); 2 whose fd is closed before they are reaped.
 */
static void aio_drops(const char *path)
{
	aio_context_t ctx = 0;
	struct iocb *cb = calloc(5000, sizeof(*cb)), *lone;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || !cb || syscall(SYS_io_setup, 5000, &ctx))
		die("aiodrops", path);
	aio_submit_reads(ctx, cb, 5000, fd);
	aio_reap_all(ctx, 5000);
	lone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (lone == MAP_FAILED)
		die("aiodrops", "mmap");
	aio_submit_reads(ctx, lone, 3, fd);
	munmap(lone, 4096);
	aio_reap_all(ctx, 3);
	aio_submit_reads(ctx, cb, 2, fd);
	close(fd);
	aio_reap_all(ctx, 2);
	syscall(SYS_io_destroy, ctx);
	free(cb);
	printf("aiodrops: 5000 + 3 + 2 requests\n");
}

/* err: each request must fail with it; EFAULT: into an unmapped buffer, EBADF: fd 999 */
static void async_io(const char *op, const char *path, long bytes, long chunk, int err)
{
	struct async_job j = { .op = op, .bytes = bytes, .chunk = chunk, .err = err };

	j.writing = strstr(op, "write") != NULL;
	j.fd = err == EBADF ? 999 :
			      open(path, j.writing ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
	if (j.fd < 0)
		die(op, path);
	if (chunk <= 0 || chunk > (long)sizeof(buf))
		die(op, "bad chunk");
	j.nreq = err ? bytes : (bytes + chunk - 1) / chunk;
	if (err)
		j.bytes = j.nreq * chunk;
	j.dst = err == EFAULT ? unmapped : buf;
	if (!strncmp(op, "aio", 3))
		aio_run(&j);
	else
		uring_run(&j);
	if (err != EBADF)
		close(j.fd);
}

static void *drain(void *arg)
{
	int fd = *(int *)arg;

	while (read(fd, buf + sizeof(buf) / 2, 65536) > 0)
		;
	return NULL;
}

/* sendfile, copyrange, splice and sendsock (dst NULL): see the top */
static void transfer(const char *op, const char *src, const char *dst, long chunk, int expect)
{
	int in = open(src, O_RDONLY), out, p[2], sv[2];
	long done = 0, n, m, size, in_calls = 0, out_calls = 0, failed = 0;
	pthread_t reader;
	struct stat st;

	if (in < 0 || fstat(in, &st))
		die(op, src);
	size = st.st_size;
	if (dst) {
		out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	} else {
		/* sendagain: a non-blocking socket nobody reads, until it is full */
		if (socketpair(AF_UNIX, SOCK_STREAM | (expect ? SOCK_NONBLOCK : 0), 0, sv) ||
		    (!expect && pthread_create(&reader, NULL, drain, &sv[1])))
			die(op, "socketpair");
		out = sv[0];
	}
	if (out < 0 || (!strcmp(op, "splice") && pipe(p)))
		die(op, dst ? dst : "socket");
	while (done < size) {
		if (!strcmp(op, "copyrange")) {
			n = syscall(SYS_copy_file_range, in, NULL, out, NULL, chunk, 0);
		} else if (!strcmp(op, "splice")) {
			n = splice(in, NULL, p[1], NULL, chunk, 0);
			for (m = 0; n > 0 && m < n; out_calls++) {
				long k = splice(p[0], NULL, out, NULL, n - m, 0);

				if (k <= 0)
					die(op, "splice from the pipe");
				m += k;
			}
		} else {
			n = sendfile(out, in, NULL, chunk);
		}
		if (n < 0 && expect && errno == expect) {
			failed++;
			break;
		}
		if (n <= 0)
			die(op, "short transfer");
		done += n;
		in_calls++;
		out_calls += strcmp(op, "splice") != 0; /* splice's are counted above */
	}
	close(out);
	if (!dst) {
		if (!expect)
			pthread_join(reader, NULL);
		close(sv[1]);
	}
	close(in);
	if (expect && !failed)
		die(op, "the expected error never came");
	/* the calls that read the file, those that wrote to the other side, and the failed one */
	printf("%s: %ld bytes in %ld calls out %ld calls failed %ld\n", op, done, in_calls,
	       out_calls, failed);
}

static void run(char *spec)
{
	char *f[4] = { 0 };
	int nf = 0, fd;
	long i;

	for (char *p = strtok(spec, ":"); p && nf < 4; p = strtok(NULL, ":"))
		f[nf++] = p;
	if (!f[0])
		return;
	if (!strcmp(f[0], "write") || !strcmp(f[0], "pwrite") || !strcmp(f[0], "writev") ||
	    !strcmp(f[0], "read") || !strcmp(f[0], "pread") || !strcmp(f[0], "readv")) {
		if (nf != 4)
			die(f[0], "needs PATH:BYTES:CHUNK");
		rw(f[0], f[1], num(f[2], f[0]), num(f[3], f[0]));
	} else if (!strcmp(f[0], "aioread") || !strcmp(f[0], "aiowrite") ||
		   !strcmp(f[0], "uringread") || !strcmp(f[0], "uringwrite")) {
		if (nf != 4)
			die(f[0], "needs PATH:BYTES:CHUNK");
		async_io(f[0], f[1], num(f[2], f[0]), num(f[3], f[0]), 0);
	} else if ((!strcmp(f[0], "aioefault") || !strcmp(f[0], "uringefault")) && nf == 3) {
		async_io(f[0], f[1], num(f[2], f[0]), 16, EFAULT);
	} else if (!strcmp(f[0], "aiodrops") && nf == 2) {
		aio_drops(f[1]);
	} else if (!strcmp(f[0], "uringfsync") && nf == 3) {
		uring_fsync(f[1], num(f[2], f[0]));
	} else if (!strcmp(f[0], "uringskip") && nf == 2) {
		uring_skip(f[1]);
	} else if (!strcmp(f[0], "uringpaths") && nf == 3) {
		uring_paths(f[1], f[2]);
	} else if (!strcmp(f[0], "uringoverflow") && nf == 2) {
		uring_overflow(f[1]);
	} else if (!strcmp(f[0], "uringebadf") && nf == 2) {
		async_io(f[0], NULL, num(f[1], f[0]), 16, EBADF);
	} else if ((!strcmp(f[0], "sendfile") || !strcmp(f[0], "copyrange") ||
		    !strcmp(f[0], "splice")) &&
		   nf == 4) {
		transfer(f[0], f[1], f[2], num(f[3], f[0]), 0);
	} else if (!strcmp(f[0], "sendfull") && nf == 4) {
		transfer(f[0], f[1], f[2], num(f[3], f[0]), ENOSPC);
	} else if (!strcmp(f[0], "sendsock") && nf == 3) {
		transfer(f[0], f[1], NULL, num(f[2], f[0]), 0);
	} else if (!strcmp(f[0], "sendagain") && nf == 3) {
		transfer(f[0], f[1], NULL, num(f[2], f[0]), EAGAIN);
	} else if (!strcmp(f[0], "copyebadf") && nf == 3) {
		fd = open(f[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die("copyebadf", f[1]);
		for (i = num(f[2], f[0]); i > 0; i--)
			if (syscall(SYS_copy_file_range, 999, NULL, fd, NULL, 16, 0) != -1 ||
			    errno != EBADF)
				die("copyebadf",
				    "copy_file_range from fd 999 did not fail with EBADF");
		close(fd);
	} else if (!strcmp(f[0], "sendebadf") && nf == 2) {
		for (i = num(f[1], f[0]); i > 0; i--)
			if (sendfile(1, 999, NULL, 16) != -1 || errno != EBADF)
				die("sendebadf", "sendfile from fd 999 did not fail with EBADF");
	} else if (!strcmp(f[0], "ebadf") && nf == 2) {
		for (i = num(f[1], f[0]); i > 0; i--)
			if (read(999, buf, 1) != -1 || errno != EBADF)
				die("ebadf", "read(999) did not fail with EBADF");
	} else if (!strcmp(f[0], "efault") && nf == 3) {
		fd = open(f[1], O_RDONLY);
		if (fd < 0)
			die("efault", f[1]);
		for (i = num(f[2], f[0]); i > 0; i--)
			if (read(fd, unmapped, 16) != -1 || errno != EFAULT)
				die("efault", "read into address 8 did not fail with EFAULT");
		close(fd);
	} else if (!strcmp(f[0], "enoent") && nf == 3) {
		for (i = num(f[2], f[0]); i > 0; i--)
			if (open(f[1], O_RDONLY) != -1 || errno != ENOENT)
				die("enoent", f[1]);
	} else if (!strcmp(f[0], "mkdir") && nf == 2) {
		if (mkdir(f[1], 0755))
			die("mkdir", f[1]);
	} else if (!strcmp(f[0], "rmdir") && nf == 2) {
		if (rmdir(f[1]))
			die("rmdir", f[1]);
	} else if (!strcmp(f[0], "unlink") && nf == 2) {
		if (unlink(f[1]))
			die("unlink", f[1]);
	} else if (!strcmp(f[0], "creat") && nf == 2) {
		fd = creat(f[1], 0644);
		if (fd < 0 || close(fd))
			die("creat", f[1]);
	} else if ((!strcmp(f[0], "mkdirat") || !strcmp(f[0], "unlinkat") ||
		    !strcmp(f[0], "rmdirat")) &&
		   nf == 3) {
		int dfd = open(f[1], O_RDONLY | O_DIRECTORY), r;

		if (dfd < 0)
			die(f[0], f[1]);
		if (!strcmp(f[0], "mkdirat"))
			r = mkdirat(dfd, f[2], 0755);
		else
			r = unlinkat(dfd, f[2], !strcmp(f[0], "rmdirat") ? AT_REMOVEDIR : 0);
		if (r)
			die(f[0], f[2]);
		close(dfd);
	} else if (!strcmp(f[0], "fsync") && nf == 2) {
		fd = open(f[1], O_RDONLY);
		if (fd < 0 || fsync(fd) || fdatasync(fd) || close(fd))
			die("fsync", f[1]);
	} else if (!strcmp(f[0], "synctimed") && nf == 4) {
		sync_timed(f[1], num(f[2], f[0]), num(f[3], f[0]));
	} else if (!strcmp(f[0], "fsyncerr") && nf == 2) {
		int p[2];

		if (pipe(p))
			die("fsyncerr", "pipe");
		for (i = num(f[1], f[0]); i > 0; i--)
			if (fsync(999) != -1 || errno != EBADF || fdatasync(p[0]) != -1 ||
			    errno != EINVAL)
				die("fsyncerr", "fsync(999) or fdatasync of a pipe did not fail");
		close(p[0]);
		close(p[1]);
	} else if (!strcmp(f[0], "rename") && nf == 3) {
		if (rename(f[1], f[2]))
			die("rename", f[1]);
	} else if (!strcmp(f[0], "exdev") && nf == 3) {
		if (rename(f[1], f[2]) != -1 || errno != EXDEV)
			die("exdev", "rename did not fail with EXDEV");
	} else if (!strcmp(f[0], "renameat") && nf == 4) {
		int dfd = open(f[1], O_RDONLY | O_DIRECTORY);

		if (dfd < 0 || syscall(SYS_renameat2, dfd, f[2], dfd, f[3], 0) || close(dfd))
			die("renameat", f[2]);
	} else if ((!strcmp(f[0], "slowread") || !strcmp(f[0], "swapread")) && nf == 3) {
		slow_read(f[1], num(f[2], f[0]), !strcmp(f[0], "swapread"));
	} else if (!strcmp(f[0], "stream") && nf == 4) {
		stream(f[1], num(f[2], f[0]), f[3]);
#ifdef __x86_64__
	} else if (!strcmp(f[0], "ia32seek") && nf == 3) {
		ia32_seek(f[1], num(f[2], f[0]));
#endif
	} else if (!strcmp(f[0], "sleep") && nf == 2) {
		usleep(num(f[1], f[0]) * 1000);
	} else {
		fprintf(stderr, "iowork: unknown operation '%s'\n", f[0]);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	int i = 1;

	memset(buf, 'p', sizeof(buf));
	if (argc > 2 && !strcmp(argv[1], "--cgroup")) {
		join_cgroup(argv[2]);
		i = 3;
	}
	for (; i < argc; i++)
		run(argv[i]);
	return 0;
}
