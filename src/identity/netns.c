// SPDX-License-Identifier: GPL-2.0
/* Network namespaces: --netns, running code inside one, and its addresses. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "identity/netns.h"

void netns_all(struct netns *ns)
{
	ns->fd = -1;
	ns->ino = 0;
	ns->name[0] = '\0';
}

int netns_open(const char *name, struct netns *ns, char *err, size_t errlen)
{
	char path[512];
	struct stat st;
	int fd, e;

	netns_all(ns);
	if (strchr(name, '/'))
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "--netns %s: cannot open %s: %s", name, path, strerror(e));
		return -e;
	}
	/* a network namespace file is on nsfs; setns() below checks its type too */
	if (fstat(fd, &st)) {
		e = errno;
		close(fd);
		snprintf(err, errlen, "--netns %s: %s", name, strerror(e));
		return -e;
	}
	ns->fd = fd;
	ns->ino = (uint32_t)st.st_ino;
	snprintf(ns->name, sizeof(ns->name), "%s", name);
	e = netns_run(ns, NULL, NULL);
	if (e) {
		snprintf(err, errlen, "--netns %s: %s is not a network namespace we can enter: %s",
			 name, path, strerror(-e));
		netns_close(ns);
		return e;
	}
	return 0;
}

void netns_close(struct netns *ns)
{
	if (ns->fd >= 0)
		close(ns->fd);
	netns_all(ns);
}

struct netns_job {
	const struct netns *ns;
	int (*fn)(void *arg);
	void *arg;
	int ret;
};

static void *netns_thread(void *p)
{
	struct netns_job *job = p;

	if (setns(job->ns->fd, CLONE_NEWNET)) {
		job->ret = -errno;
		return NULL;
	}
	job->ret = job->fn ? job->fn(job->arg) : 0;
	return NULL;
}

int netns_run(const struct netns *ns, int (*fn)(void *arg), void *arg)
{
	struct netns_job job = { .ns = ns, .fn = fn, .arg = arg };
	pthread_t t;
	int err;

	if (ns->fd < 0)
		return fn ? fn(arg) : 0;
	err = pthread_create(&t, NULL, netns_thread, &job);
	if (err)
		return -err;
	pthread_join(t, NULL);
	return job.ret;
}

struct addresses_job {
	char (*out)[INET6_ADDRSTRLEN];
	int max, n;
};

static int addr_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int addresses_read(void *p)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct addresses_job *job = p;
	struct ifaddrs *ifs, *i;

	if (getifaddrs(&ifs))
		return -errno;
	for (i = ifs; i && job->n < job->max; i = i->ifa_next) {
		const struct sockaddr *sa = i->ifa_addr;
		char text[INET6_ADDRSTRLEN];

		if (!sa || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		if (sa->sa_family == AF_INET) {
			inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, text,
				  sizeof(text));
		} else if (sa->sa_family == AF_INET6) {
			const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

			if (IN6_IS_ADDR_LINKLOCAL(a6))
				continue; /* fe80::/10 needs a scope: it names no host on its own */
			if (!memcmp(a6, v4mapped, sizeof(v4mapped)))
				inet_ntop(AF_INET, a6->s6_addr + 12, text, sizeof(text));
			else
				inet_ntop(AF_INET6, a6, text, sizeof(text));
		} else {
			continue;
		}
		memcpy(job->out[job->n++], text, sizeof(text));
	}
	freeifaddrs(ifs);
	qsort(job->out, job->n, sizeof(job->out[0]), addr_cmp);
	return 0;
}

int netns_addresses(const struct netns *ns, char (*out)[INET6_ADDRSTRLEN], int max)
{
	struct addresses_job job = { .out = out, .max = max };
	int err = netns_run(ns, addresses_read, &job);

	return err ? err : job.n;
}
