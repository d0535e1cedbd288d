/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_IDENTITY_NETNS_H
#define PLUMB_IDENTITY_NETNS_H

#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdint.h>

/* The network namespace an agent observes (--netns), or every one. */
struct netns {
	int fd; /* open namespace file; -1: the agent's own namespace, and no filter */
	uint32_t ino; /* its inode number, as sockets record it (net->ns.inum); 0: every netns */
	char name[256]; /* as given: a name under /run/netns, or a path */
};

/* No --netns: every namespace is observed; the agent's own is the one to read from. */
void netns_all(struct netns *ns);

/*
 * Opens a namespace by name (/run/netns/NAME, as `ip netns add` makes) or by path
 * (/proc/PID/ns/net). 0, or -errno with a one-line reason in err.
 */
int netns_open(const char *name, struct netns *ns, char *err, size_t errlen);
void netns_close(struct netns *ns);

/*
 * Runs fn(arg) in a thread that has entered ns (setns() changes only the calling thread), so
 * that what fn creates (a BPF iterator, a netlink socket) sees that namespace. Directly when
 * ns->fd < 0. fn's return value, or -errno when the thread could not start or enter.
 */
int netns_run(const struct netns *ns, int (*fn)(void *arg), void *arg);

/*
 * The namespace's addresses, loopback ones left out, as inet_ntop text (IPv4-mapped IPv6 as
 * IPv4), sorted, at most max. Their number, or -errno.
 */
int netns_addresses(const struct netns *ns, char (*out)[INET6_ADDRSTRLEN], int max);

#endif
