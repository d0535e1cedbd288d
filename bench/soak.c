// SPDX-License-Identifier: GPL-2.0
/*
 * The soak benchmark's load (bench/soak.py): short-lived processes, short TCP connections and
 * cgroups created and removed, each at a paced rate, for a given time. Every second it
 * prints what it has done so far, so the benchmark can hold the agent's counts against it:
 *
 *   t=<s> procs=<n> proc_bytes=<n> conns=<n> conn_bytes=<n> cgroups=<n> cgroup_bytes=<n>
 *   errors=<n>
 *
 * proc_bytes: what the processes wrote (in soak's own cgroup); cgroup_bytes: what those of
 * the made cgroups wrote.
 *
 *   soak --seconds S --procs RATE --file PATH --tcp RATE --cgroups RATE --cgroup-dir DIR
 *
 * Each process (vfork, write 64 bytes to PATH's descriptor (O_APPEND, emptied every second),
 * _exit; a failed write is counted in write_errors and not in proc_bytes) and each connection
 * (connect to a loopback server of its own, send 100 bytes, read to EOF, close) is one unit;
 * each cgroup is made under DIR, gets one process that forks 4 children (each writing 64
 * bytes), and is removed once they are gone. The pacing is per millisecond tick: a thread
 * that falls behind catches up, up to one second's worth.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROC_BYTES 64
#define CONN_BYTES 100

static double seconds = 60;
static unsigned int procs_rate, tcp_rate, cgroups_rate;
static const char *file, *cgroup_dir;
static int file_fd = -1;
static uint16_t port;
static atomic_ulong procs, conns, cgroups, errors, write_errors;
static atomic_int stop;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Calls fn rate times a second until stop: as many as are due at each 1 ms tick. */
static void paced(unsigned int rate, int (*fn)(void))
{
	double start = now();
	unsigned long done = 0;
	struct timespec tick = { 0, 1000000 };

	while (!atomic_load(&stop)) {
		unsigned long due = (unsigned long)((now() - start) * rate);

		if (due > done + rate) /* more than a second behind: drop the backlog */
			done = due - rate;
		while (done < due && !atomic_load(&stop)) {
			if (fn())
				atomic_fetch_add(&errors, 1);
			done++;
		}
		nanosleep(&tick, NULL);
	}
}

static int one_process(void)
{
	static const char buf[PROC_BYTES] = { 'p' };
	pid_t pid = vfork();

	if (pid == 0) {
		/* a vfork child runs in its parent's memory until it exits: it counts there */
		if (write(file_fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			atomic_fetch_add(&write_errors, 1);
		_exit(0);
	}
	if (pid < 0)
		return -1;
	atomic_fetch_add(&procs, 1);
	return 0; /* reaped by SIGCHLD = SIG_IGN */
}

static int one_connection(void)
{
	static const char buf[CONN_BYTES] = { 'c' };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	char rbuf[256];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ret = -1;

	if (fd < 0)
		return -1;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		goto out;
	while (read(fd, rbuf, sizeof(rbuf)) > 0) /* the server closes first: its TIME_WAIT */
		;
	atomic_fetch_add(&conns, 1);
	ret = 0;
out:
	close(fd);
	return ret;
}

static void *server(void *arg)
{
	int lfd = *(int *)arg;
	char buf[CONN_BYTES];

	while (!atomic_load(&stop)) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		size_t got = 0;
		ssize_t n;

		if (fd < 0)
			continue;
		while (got < sizeof(buf) && (n = read(fd, buf, sizeof(buf) - got)) > 0)
			got += n;
		close(fd);
	}
	return NULL;
}

/*
 * A cgroup made, one process in it forking 4 that write and exit, then removed. SIGCHLD is
 * ignored (the processes are reaped by the kernel), so the process reports on a pipe: one
 * byte when all went well, and EOF once it is gone.
 */
static int one_cgroup(void)
{
	static unsigned long seq;
	char dir[4096], procs_file[4200], ok = 0;
	int pfd[2];
	pid_t pid;

	snprintf(dir, sizeof(dir), "%s/cg%lu", cgroup_dir, seq++);
	if (mkdir(dir, 0755))
		return -1;
	snprintf(procs_file, sizeof(procs_file), "%s/cgroup.procs", dir);
	if (pipe2(pfd, O_CLOEXEC)) {
		rmdir(dir);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		static const char buf[PROC_BYTES] = { 'g' };
		int fd = open(procs_file, O_WRONLY), status;
		char good = fd >= 0 && write(fd, "0", 1) == 1;

		close(pfd[0]);
		signal(SIGCHLD, SIG_DFL); /* its own children: waited for */
		for (int i = 0; good && i < 4; i++) {
			pid_t c = fork();

			if (c == 0)
				_exit(write(file_fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) ? 0 :
												 1);
			if (c < 0 || waitpid(c, &status, 0) != c || status)
				good = 0;
		}
		if (good && write(pfd[1], &good, 1) != 1)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	if (pid > 0)
		while (read(pfd[0], &ok, 1) > 0) /* to EOF: the process has exited */
			;
	close(pfd[0]);
	/* the exited tasks leave the cgroup asynchronously: retry the removal a little */
	for (int i = 0; i < 100 && rmdir(dir); i++)
		usleep(1000);
	if (pid < 0 || !ok)
		return -1;
	atomic_fetch_add(&cgroups, 1);
	return 0;
}

static void *procs_thread(void *arg)
{
	(void)arg;
	paced(procs_rate, one_process);
	return NULL;
}

static void *tcp_thread(void *arg)
{
	(void)arg;
	paced(tcp_rate, one_connection);
	return NULL;
}

static void *cgroups_thread(void *arg)
{
	(void)arg;
	paced(cgroups_rate, one_cgroup);
	return NULL;
}

static void report(const char *what, double t)
{
	unsigned long p = atomic_load(&procs), c = atomic_load(&conns), g = atomic_load(&cgroups);
	unsigned long we = atomic_load(&write_errors);

	printf("%s=%.0f procs=%lu proc_bytes=%lu conns=%lu conn_bytes=%lu cgroups=%lu "
	       "cgroup_bytes=%lu errors=%lu write_errors=%lu\n",
	       what, t, p, (p - we) * PROC_BYTES, c, c * CONN_BYTES, g, 4 * g * PROC_BYTES,
	       atomic_load(&errors), we);
	fflush(stdout);
}

static int listen_loopback(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4096) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		perror("soak: listen");
		exit(1);
	}
	port = ntohs(sa.sin_port);
	return fd;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "procs", required_argument, NULL, 'p' },
		{ "file", required_argument, NULL, 'f' },
		{ "tcp", required_argument, NULL, 't' },
		{ "cgroups", required_argument, NULL, 'g' },
		{ "cgroup-dir", required_argument, NULL, 'd' },
		{ 0 },
	};
	pthread_t th[4];
	int nth = 0, lfd = -1, c;
	double start;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			seconds = atof(optarg);
			break;
		case 'p':
			procs_rate = atoi(optarg);
			break;
		case 'f':
			file = optarg;
			break;
		case 't':
			tcp_rate = atoi(optarg);
			break;
		case 'g':
			cgroups_rate = atoi(optarg);
			break;
		case 'd':
			cgroup_dir = optarg;
			break;
		default:
			fprintf(stderr, "usage: see the comment at the top of bench/soak.c\n");
			return 2;
		}
	}
	if ((procs_rate || cgroups_rate) && !file) {
		fprintf(stderr, "soak: --procs and --cgroups need --file\n");
		return 2;
	}
	if (cgroups_rate && !cgroup_dir) {
		fprintf(stderr, "soak: --cgroups needs --cgroup-dir\n");
		return 2;
	}
	if (file && (file_fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0) {
		perror(file);
		return 1;
	}
	signal(SIGCHLD, SIG_IGN); /* the kernel reaps the processes */
	signal(SIGPIPE, SIG_IGN);
	if (tcp_rate) {
		static int fd;

		fd = lfd = listen_loopback();
		pthread_create(&th[nth++], NULL, server, &fd);
		pthread_create(&th[nth++], NULL, tcp_thread, NULL);
	}
	if (procs_rate)
		pthread_create(&th[nth++], NULL, procs_thread, NULL);
	if (cgroups_rate)
		pthread_create(&th[nth++], NULL, cgroups_thread, NULL);
	start = now();
	while (now() - start < seconds) {
		sleep(1);
		/* the writes append: emptied every second, the file stays under a megabyte */
		if (file_fd >= 0 && ftruncate(file_fd, 0))
			perror("soak: ftruncate");
		report("t", now() - start);
	}
	atomic_store(&stop, 1);
	if (lfd >= 0)
		shutdown(lfd, SHUT_RDWR); /* wakes the server's accept */
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	report("done", now() - start);
	return 0;
}
