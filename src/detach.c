// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "detach.h"
#include "log.h"

#define HANDOFF_MAX_FDS 4096
#define DETACH_THREADS	64

void perf_events_handoff(void)
{
	static int fds[HANDOFF_MAX_FDS];
	static bool perf[HANDOFF_MAX_FDS];
	char link[64], path[64], c;
	int nfds = 0, nperf = 0, ready[2], hold[2];
	struct dirent *de;
	pid_t pid;
	DIR *dir;

	/* listed before fork: the child may only make async-signal-safe calls */
	dir = opendir("/proc/self/fd");
	if (!dir)
		return;
	while ((de = readdir(dir)) && nfds < HANDOFF_MAX_FDS) {
		int fd = atoi(de->d_name);
		ssize_t n;

		if (fd <= 2 || fd == dirfd(dir))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		link[n > 0 ? n : 0] = '\0';
		perf[nfds] = !strcmp(link, "anon_inode:[perf_event]");
		nperf += perf[nfds];
		fds[nfds++] = fd;
	}
	closedir(dir);
	if (!nperf || pipe(ready))
		return;
	if (pipe(hold)) {
		close(ready[0]);
		close(ready[1]);
		return;
	}
	pid = fork();
	if (pid == 0) {
		/* a service manager's SIGTERM to the whole group must not cut this short: dying
		 * would only move the same frees into the exit path */
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		/* links, maps, programs, sockets: the agent's alone, so its closes take effect */
		for (int i = 0; i < nfds; i++)
			if (!perf[i])
				close(fds[i]);
		close(ready[0]);
		close(hold[1]);
		if (write(ready[1], "1", 1) != 1)
			_exit(1);
		close(ready[1]);
		/* EOF when the agent has exited: every link closed, every program detached */
		while (read(hold[0], &c, 1) > 0)
			;
		for (int i = 0; i < nfds; i++)
			if (perf[i])
				close(fds[i]);
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	if (pid > 0 && read(ready[0], &c, 1) == 1)
		pr_debug("%d perf events handed to process %d to free\n", nperf, (int)pid);
	close(ready[0]);
	/* hold[1] stays open until this process exits */
}

static void *link_destroy_thread(void *arg)
{
	struct bpf_link **link = arg;

	bpf_link__destroy(*link);
	*link = NULL;
	return NULL;
}

void links_destroy_parallel(struct bpf_link **links, size_t n)
{
	pthread_t threads[DETACH_THREADS];
	bool started[DETACH_THREADS];

	for (size_t base = 0; base < n; base += DETACH_THREADS) {
		size_t k = n - base < DETACH_THREADS ? n - base : DETACH_THREADS;

		for (size_t i = 0; i < k; i++)
			started[i] = links[base + i] &&
				     !pthread_create(&threads[i], NULL, link_destroy_thread,
						     &links[base + i]);
		for (size_t i = 0; i < k; i++) {
			if (started[i])
				pthread_join(threads[i], NULL);
			else if (links[base + i])
				link_destroy_thread(&links[base + i]);
		}
	}
}
