/* SPDX-License-Identifier: GPL-2.0 */
/* A socket's addresses, and its peer on this host, from /proc/<pid>/net/{tcp,udp}{,6}. */
#ifndef PLUMB_IDENTITY_SOCKETS_H
#define PLUMB_IDENTITY_SOCKETS_H

#include <stdint.h>

struct socket_ends {
	char proto[8]; /* "tcp", "tcp6", "udp", "udp6" */
	char local[64]; /* "127.0.0.1:6379", "[::1]:6379" */
	char remote[64];
	uint64_t peer_inode; /* the socket with the two ends swapped, on this host; 0: none */
};

/*
 * The TCP or UDP socket with inode ino, in the network namespace of process pid. 0, or
 * -ENOENT when no table there lists it (a unix socket, or a socket already closed).
 */
int socket_ends(uint32_t pid, uint64_t ino, struct socket_ends *out);

/* "0100007F:1F90" or 32 hex digits and a port, as /proc/net/tcp prints them: "127.0.0.1:8080". */
void socket_endpoint(const char *hex, char *out, size_t len);

#endif
