/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_HTTP_H
#define PLUMB_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct prom_writer;
struct http_server;

/* Writes the whole /metrics page; called from the server's thread. 0 or -errno. */
typedef int (*http_metrics_fn)(void *ctx, struct prom_writer *w);

/* Binds addr:port (IPv4 or IPv6 literal) and serves; NULL with a one-line reason in err. */
struct http_server *http_start(const char *addr, uint16_t port, http_metrics_fn metrics,
			       void *ctx, char *err, size_t errlen);
void http_stop(struct http_server *srv);

#endif
