// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "identity/epoll.h"

/*
 * fs/eventpoll.c prints one line per registered file:
 * "tfd: %8d events: %8x data: %16llx  pos:%lli ino:%lx sdev:%x".
 */
int epoll_fdinfo_parse(const char *text, struct epoll_file *out, size_t max)
{
	const char *line = text;
	int n = 0;

	for (; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		struct epoll_file f = { 0 };
		unsigned long long ino;
		unsigned int events, sdev;
		const char *p;

		if (strncmp(line, "tfd:", 4))
			continue;
		p = strstr(line, " ino:");
		if (sscanf(line, "tfd: %d events: %x", &f.tfd, &events) != 2 || !p ||
		    sscanf(p, " ino:%llx sdev:%x", &ino, &sdev) != 2)
			return -EINVAL;
		f.events = events;
		f.ino = ino;
		f.sdev = sdev;
		if ((size_t)n < max)
			out[n] = f;
		n++;
	}
	return n;
}

int epoll_files(uint32_t pid, int fd, struct epoll_file *out, size_t max)
{
	char path[64], link[32], *text = NULL;
	size_t cap = 0, len = 0, got;
	ssize_t ll;
	FILE *f;
	int n;

	/* the fd may have been closed and reused since the wait: it must still be an epoll */
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, fd);
	ll = readlink(path, link, sizeof(link) - 1);
	if (ll <= 0)
		return -ENOENT;
	link[ll] = '\0';
	if (strcmp(link, "anon_inode:[eventpoll]"))
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%u/fdinfo/%d", pid, fd);
	f = fopen(path, "r");
	if (!f)
		return -ENOENT;
	do {
		if (len + 4096 + 1 > cap) {
			char *t = realloc(text, cap = cap ? 2 * cap : 16384);

			if (!t) {
				free(text);
				fclose(f);
				return -ENOMEM;
			}
			text = t;
		}
		got = fread(text + len, 1, cap - len - 1, f);
		len += got;
	} while (got);
	fclose(f);
	text[len] = '\0';
	n = epoll_fdinfo_parse(text, out, max);
	free(text);
	return n;
}
