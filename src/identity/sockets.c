// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "identity/sockets.h"

void socket_endpoint(const char *hex, char *out, size_t len)
{
	const char *colon = strchr(hex, ':');
	size_t n = colon ? (size_t)(colon - hex) : 0;
	unsigned int port = 0, b[16];

	if (colon)
		sscanf(colon + 1, "%x", &port);
	if (n == 8) {
		unsigned int a;

		sscanf(hex, "%8x", &a); /* the kernel prints the __be32 as a host-order int */
		snprintf(out, len, "%u.%u.%u.%u:%u", a & 0xff, a >> 8 & 0xff, a >> 16 & 0xff,
			 a >> 24, port);
		return;
	}
	if (n != 32) {
		snprintf(out, len, "?");
		return;
	}
	for (int i = 0; i < 4; i++) {
		unsigned int w;

		sscanf(hex + 8 * i, "%8x", &w);
		for (int k = 0; k < 4; k++)
			b[4 * i + k] = w >> (8 * k) & 0xff;
	}
	snprintf(out, len,
		 "[%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x]:%u",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15], port);
}

int socket_ends(uint32_t pid, uint64_t ino, struct socket_ends *out)
{
	static const char *const tables[] = { "tcp", "tcp6", "udp", "udp6" };
	char path[64], line[512], l[64], r[64], local[64] = "", remote[64] = "";
	unsigned long long inode;
	int found = -1;

	memset(out, 0, sizeof(*out));
	for (int t = 0; t < 4 && found < 0; t++) {
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%u/net/%s", pid, tables[t]);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "%*s %63s %63s %*s %*s %*s %*s %*s %*s %llu", l, r,
				   &inode) == 3 &&
			    inode == ino) {
				strcpy(local, l);
				strcpy(remote, r);
				found = t;
				break;
			}
		if (f)
			fclose(f);
	}
	if (found < 0)
		return -ENOENT;
	snprintf(out->proto, sizeof(out->proto), "%s", tables[found]);
	socket_endpoint(local, out->local, sizeof(out->local));
	socket_endpoint(remote, out->remote, sizeof(out->remote));
	/* the peer: the same table, the ends swapped (a listener's remote is 0:0: none) */
	snprintf(path, sizeof(path), "/proc/%u/net/%s", pid, tables[found]);
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %63s %63s %*s %*s %*s %*s %*s %*s %llu", l, r, &inode) == 3 &&
		    !strcmp(l, remote) && !strcmp(r, local) && inode != ino) {
			out->peer_inode = inode;
			break;
		}
	if (f)
		fclose(f);
	return 0;
}
