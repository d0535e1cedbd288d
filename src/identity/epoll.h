/* SPDX-License-Identifier: GPL-2.0 */
/* The files registered in an epoll instance, from /proc/<pid>/fdinfo/<epoll fd>. */
#ifndef PLUMB_IDENTITY_EPOLL_H
#define PLUMB_IDENTITY_EPOLL_H

#include <stddef.h>
#include <stdint.h>

struct epoll_file {
	int32_t tfd; /* the fd it was registered with, in the registering process */
	uint32_t events; /* EPOLLIN, EPOLLOUT, ... as registered */
	uint64_t ino; /* the file's inode and the device of its filesystem */
	uint32_t sdev;
};

/*
 * Parses the text of an epoll fd's fdinfo: up to max registered files into out. Returns how
 * many the text lists (more than max: the rest were left out), or -EINVAL for a malformed
 * "tfd:" line.
 */
int epoll_fdinfo_parse(const char *text, struct epoll_file *out, size_t max);

/* The same, read from /proc/<pid>/fdinfo/<fd>: -ENOENT when the fd is no epoll instance now. */
int epoll_files(uint32_t pid, int fd, struct epoll_file *out, size_t max);

#endif
