// SPDX-License-Identifier: GPL-2.0
/*
 * probe [BLOCKDEV [FSYNC_FILE]]: loads probe.bpf.o, starts threads that each block in one
 * known syscall, prints what the sched_switch program read from their saved registers, then
 * wakes them one by one and prints who woke them and for how long they were off CPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "probe.h"
#include "probe.skel.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

enum {
	T_PIPE,
	T_PIPEW,
	T_FPRIV,
	T_FSHARED,
	T_BITSET,
	T_PI,
	T_WAITV,
	T_EPOLL,
	T_TCP,
	T_UNIX,
	T_ACCEPT,
	T_POLL,
	T_SELECT,
	T_SLEEP,
	T_DIO,
	T_FSYNC,
	T_FAULT,
	T_SPIN1,
	T_SPIN2,
	T_N
};
static const char *names[T_N] = { "pipe-read",	  "pipe-write",	   "futex-priv",   "futex-shared",
				  "futex-bitset", "futex-lock-pi", "futex-waitv",  "epoll-wait",
				  "tcp-recv",	  "unix-recv",	   "tcp-accept",   "poll",
				  "select",	  "nanosleep",	   "odirect-read", "fsync",
				  "mmap-fault",	  "spin1",	   "spin2" };
static pid_t tids[T_N];
static pthread_t th[T_N];
static int pipe_a[2], pipe_b[2], pipe_c[2], pipe_d[2], pipe_e[2], epfd, tcp_srv_conn, tcp_cli,
	unix_sv[2], lsn2, lsn2_port;
static uint32_t f_priv, f_bits, f_pi, f_v[2], *f_shared;
static const char *blockdev, *fsync_file;
static volatile int dio_done, fsync_done;

static long futex(void *uaddr, int op, uint32_t val, void *ts, void *uaddr2, uint32_t val3)
{
	return syscall(SYS_futex, uaddr, op, val, ts, uaddr2, val3);
}

static void *worker(void *arg)
{
	int k = (int)(long)arg;
	char buf[4096];
	struct epoll_event ev;
	struct pollfd pfd;
	fd_set rfds;
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	struct futex_waitv {
		uint64_t val, uaddr;
		uint32_t flags, reserved;
	} wv[2] = { { 0, (uintptr_t)&f_v[0], 2 | 128, 0 }, { 0, (uintptr_t)&f_v[1], 2 | 128, 0 } };
	int fd, i;

	tids[k] = gettid();
	switch (k) {
	case T_PIPE:
		read(pipe_a[0], buf, 1);
		break;
	case T_PIPEW:
		memset(buf, 0, sizeof(buf));
		write(pipe_e[1], buf, sizeof(buf));
		write(pipe_e[1], buf, sizeof(buf));
		break;
	case T_FPRIV:
		futex(&f_priv, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
		break;
	case T_FSHARED:
		futex(f_shared, FUTEX_WAIT, 0, NULL, NULL, 0);
		break;
	case T_BITSET:
		futex(&f_bits, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL, NULL, 0xff);
		break;
	case T_PI:
		futex(&f_pi, FUTEX_LOCK_PI_PRIVATE, 0, NULL, NULL, 0);
		futex(&f_pi, FUTEX_UNLOCK_PI_PRIVATE, 0, NULL, NULL, 0);
		break;
	case T_WAITV:
		syscall(SYS_futex_waitv, wv, 2, 0, NULL, 0);
		break;
	case T_EPOLL:
		epoll_wait(epfd, &ev, 1, -1);
		break;
	case T_TCP:
		recv(tcp_srv_conn, buf, 1, 0);
		break;
	case T_UNIX:
		recv(unix_sv[0], buf, 1, 0);
		break;
	case T_ACCEPT:
		close(accept(lsn2, NULL, NULL));
		break;
	case T_POLL:
		pfd.fd = pipe_c[0];
		pfd.events = POLLIN;
		poll(&pfd, 1, -1);
		break;
	case T_SELECT:
		FD_ZERO(&rfds);
		FD_SET(pipe_d[0], &rfds);
		select(pipe_d[0] + 1, &rfds, NULL, NULL, NULL);
		break;
	case T_SLEEP:
		nanosleep(&ts, NULL);
		break;
	case T_DIO:
		fd = open(blockdev, O_RDONLY | O_DIRECT);
		if (fd < 0) {
			perror(blockdev);
			break;
		}
		{
			void *p;
			if (posix_memalign(&p, 4096, 4096))
				break;
			for (i = 0; i < 200; i++)
				pread(fd, p, 4096, (off_t)(i * 7919 % 1000) * 4096);
			free(p);
		}
		close(fd);
		dio_done = 1;
		break;
	case T_FAULT:
		fd = open(blockdev, O_RDONLY);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		{
			volatile char *p = mmap(NULL, 8 << 20, PROT_READ, MAP_SHARED, fd, 0);
			long s = 0;
			madvise((void *)p, 8 << 20, MADV_RANDOM);
			for (i = 0; i < 2048; i += 16)
				s += p[(long)i * 4096];
			munmap((void *)p, 8 << 20);
		}
		close(fd);
		break;
	case T_SPIN1:
	case T_SPIN2: {
		cpu_set_t set;
		struct timespec t0, t1;
		CPU_ZERO(&set);
		CPU_SET(1, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t1);
		while ((t1.tv_sec - t0.tv_sec) * 1000000000L + t1.tv_nsec - t0.tv_nsec <
		       100000000L);
		break;
	}
	case T_FSYNC:
		fd = open(fsync_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0) {
			perror(fsync_file);
			break;
		}
		for (i = 0; i < 20; i++) {
			write(fd, buf, sizeof(buf));
			fsync(fd);
		}
		close(fd);
		fsync_done = 1;
		break;
	}
	return NULL;
}

static int tcp_listener(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	bind(s, (void *)&a, sizeof(a));
	listen(s, 4);
	getsockname(s, (void *)&a, &l);
	*port = ntohs(a.sin_port);
	return s;
}

static int tcp_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(port) };
	int s = socket(AF_INET, SOCK_STREAM, 0);

	connect(s, (void *)&a, sizeof(a));
	return s;
}

static const char *ftype(uint32_t m)
{
	switch (m & S_IFMT) {
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "sock";
	case S_IFREG:
		return "reg";
	case S_IFCHR:
		return "chr";
	case 0:
		return "anon";
	default:
		return "other";
	}
}

static void dump(int map_fd, int after)
{
	struct probe_rec r;
	int k;

	for (k = 0; k < T_N; k++) {
		__u32 tid = tids[k];

		if (!tid || bpf_map_lookup_elem(map_fd, &tid, &r))
			continue;
		if (!after) {
			printf("%-13s tid %-6u ep %-3llu prev_state 0x%x __state 0x%x iowait %u "
			       "cur %u kth %u "
			       "in_sc %u nr %lld di 0x%llx si 0x%llx dx 0x%llx r10 0x%llx",
			       names[k], tid, r.episodes, r.prev_state, r.state_now, r.in_iowait,
			       r.is_current, r.kthread, r.in_syscall, (long long)r.orig_ax, r.di,
			       r.si, r.dx, r.r10);
			if (r.file)
				printf(" | file %s ino %llu priv 0x%llx", ftype(r.i_mode), r.ino,
				       r.private_data);
			if (r.family == AF_INET)
				printf(" tcp %s:%u->", inet_ntoa((struct in_addr){ r.saddr }),
				       r.sport),
					printf("%s:%u", inet_ntoa((struct in_addr){ r.daddr }),
					       r.dport);
			if (r.family == 1)
				printf(" unix peer_ino %llu", r.peer_ino);
			if (r.find_vma_tried)
				printf(" | find_vma %lld vma_ino %llu vm_start 0x%llx pgoff %llu "
				       "flags 0x%llx => off %llu",
				       r.find_vma_ret, r.vma_ino, r.vm_start, r.vm_pgoff,
				       r.vm_flags, r.di - r.vm_start + (r.vm_pgoff << 12));
			if (r.pre_count)
				printf(" | preempted %llu x, last orig_ax %lld ax 0x%llx user %llu",
				       r.pre_count, (long long)r.pre_orig_ax, r.pre_ax,
				       r.pre_ip_user);
			if (r.orig_ax == 449)
				printf(" | waitv read %lld uaddr0 0x%llx flags0 0x%x", r.uread_ret,
				       r.waitv_uaddr0, r.waitv_flags0);
			printf("\n");
		} else {
			printf("%-13s tid %-6u ep %-3llu waker %llu (nr %lld di 0x%llx si 0x%llx) "
			       "out->waking %.3f ms out->in %.3f ms\n",
			       names[k], tid, r.episodes, r.waker_tid, (long long)r.waker_orig_ax,
			       r.waker_di, r.waker_si, r.last_block_ns / 1e6, r.last_off_ns / 1e6);
		}
	}
}

static void dump_states(int map_fd)
{
	struct state_key k, *prev = NULL;
	__u64 n;

	printf("state histogram (prev_state arg, __state now, preempt, in_iowait): count\n");
	while (!bpf_map_get_next_key(map_fd, prev, &k)) {
		bpf_map_lookup_elem(map_fd, &k, &n);
		printf("  0x%-5x 0x%-5x %u %u: %llu\n", k.prev_state, k.state_now, k.preempt,
		       k.in_iowait, n);
		prev = &k;
	}
}

/* Two threads hand a token back and forth through shared (non-private) futex waits. */
static uint32_t *storm_word;
static int storm_rounds;

static void *storm_peer(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < storm_rounds; i++) {
		while (__atomic_load_n(storm_word, __ATOMIC_ACQUIRE) != 1)
			futex(storm_word, FUTEX_WAIT, 0, NULL, NULL, 0);
		__atomic_store_n(storm_word, 0, __ATOMIC_RELEASE);
		futex(storm_word, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
	return NULL;
}

static int futex_storm(int rounds)
{
	struct probe_bpf *skel = probe_bpf__open();
	char path[] = "/tmp/issue5-storm.XXXXXX";
	pthread_t t;
	int fd, i;

	if (!skel)
		return 1;
	skel->rodata->target_tgid = getpid();
	if (probe_bpf__load(skel) || probe_bpf__attach(skel))
		return 1;
	fd = mkstemp(path);
	ftruncate(fd, 4096);
	storm_word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	storm_rounds = rounds;
	pthread_create(&t, NULL, storm_peer, NULL);
	for (i = 0; i < rounds; i++) {
		__atomic_store_n(storm_word, 1, __ATOMIC_RELEASE);
		futex(storm_word, FUTEX_WAKE, 1, NULL, NULL, 0);
		while (__atomic_load_n(storm_word, __ATOMIC_ACQUIRE) != 0)
			futex(storm_word, FUTEX_WAIT, 1, NULL, NULL, 0);
	}
	pthread_join(t, NULL);
	printf("shared-futex storm, %d rounds: bpf_find_vma ok %llu, -EBUSY %llu, -ENOENT %llu, "
	       "other %llu\n",
	       rounds, skel->bss->find_vma_results[0], skel->bss->find_vma_results[1],
	       skel->bss->find_vma_results[3], skel->bss->find_vma_results[2]);
	unlink(path);
	probe_bpf__destroy(skel);
	return 0;
}

int main(int argc, char **argv)
{
	struct probe_bpf *skel;
	char c = 1, path[] = "/tmp/issue5-futex.XXXXXX";
	struct epoll_event ev = { .events = EPOLLIN };
	int k, port, lsn, fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "futexstorm"))
		return futex_storm(argc > 2 ? atoi(argv[2]) : 20000);
	blockdev = argc > 1 ? argv[1] : NULL;
	fsync_file = argc > 2 ? argv[2] : NULL;
	skel = probe_bpf__open();
	if (!skel)
		return 1;
	skel->rodata->target_tgid = getpid();
	if (probe_bpf__load(skel) || probe_bpf__attach(skel)) {
		fprintf(stderr, "load/attach failed\n");
		return 1;
	}
	pipe(pipe_a);
	pipe(pipe_b);
	pipe(pipe_c);
	pipe(pipe_d);
	pipe(pipe_e);
	fcntl(pipe_e[1], F_SETPIPE_SZ, 4096);
	epfd = epoll_create1(0);
	epoll_ctl(epfd, EPOLL_CTL_ADD, pipe_b[0], &ev);
	lsn = tcp_listener(&port);
	tcp_cli = tcp_connect(port);
	tcp_srv_conn = accept(lsn, NULL, NULL);
	lsn2 = tcp_listener(&lsn2_port);
	socketpair(AF_UNIX, SOCK_STREAM, 0, unix_sv);
	fd = mkstemp(path);
	ftruncate(fd, 3 * 4096);
	f_shared = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 4096);
	f_shared = (uint32_t *)((char *)f_shared + 4096 + 8); /* file offset 2*4096+8 */
	*f_shared = 0;
	f_pi = gettid();
	{
		struct stat st;
		fstat(fd, &st);
		printf("futex file %s ino %lu; main tid %d; f_priv %p; f_shared %p (file offset "
		       "8200); "
		       "pipe_a ino? see /proc; tcp client port %d server port %d\n",
		       path, st.st_ino, gettid(), (void *)&f_priv, (void *)f_shared, 0, port);
		fstat(pipe_a[0], &st);
		printf("pipe_a ino %lu; epfd %d\n", st.st_ino, epfd);
		fstat(unix_sv[1], &st);
		printf("unix_sv[1] (peer of the reader) ino %lu\n", st.st_ino);
	}
	for (k = 0; k < T_N; k++) {
		if (((k == T_DIO || k == T_FAULT) && !blockdev) || (k == T_FSYNC && !fsync_file))
			continue;
		pthread_create(&th[k], NULL, worker, (void *)(long)k);
	}
	usleep(200 * 1000);
	dump(bpf_map__fd(skel->maps.recs), 0);

	/* wake them, one at a time */
	write(pipe_a[1], &c, 1);
	usleep(20000);
	{
		char b[65536];
		read(pipe_e[0], b, sizeof(b));
	}
	usleep(20000);
	f_priv = 1;
	futex(&f_priv, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	usleep(20000);
	*f_shared = 1;
	futex(f_shared, FUTEX_WAKE, 1, NULL, NULL, 0);
	usleep(20000);
	f_bits = 1;
	futex(&f_bits, FUTEX_WAKE_BITSET_PRIVATE, 1, NULL, NULL, 0xff);
	usleep(20000);
	futex(&f_pi, FUTEX_UNLOCK_PI_PRIVATE, 0, NULL, NULL, 0);
	usleep(20000);
	f_v[1] = 1;
	futex(&f_v[1], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	usleep(20000);
	write(pipe_b[1], &c, 1);
	usleep(20000);
	send(tcp_cli, &c, 1, 0);
	usleep(20000);
	send(unix_sv[1], &c, 1, 0);
	usleep(20000);
	close(tcp_connect(lsn2_port));
	usleep(20000);
	write(pipe_c[1], &c, 1);
	usleep(20000);
	write(pipe_d[1], &c, 1);
	usleep(20000);
	for (k = 0; k < T_N; k++)
		if (th[k])
			pthread_join(th[k], NULL);
	printf("--- after wakes\n");
	dump(bpf_map__fd(skel->maps.recs), 1);
	dump_states(bpf_map__fd(skel->maps.states));
	unlink(path);
	probe_bpf__destroy(skel);
	return 0;
}
