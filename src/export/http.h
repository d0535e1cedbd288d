/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PLUMB_HTTP_H
#define PLUMB_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct prom_writer;
struct http_server;

/* Writes the whole /metrics page; called from the server's thread. 0 or -errno. */
typedef int (*http_metrics_fn)(void *ctx, struct prom_writer *w);
/*
 * Answers GET /api/v1/...: a JSON body (malloc'd, the server frees it) and 0; -ENOENT for a
 * path it does not serve (404), -ENODEV when what it needs is not running (503), other
 * -errno: 500. Called from the server's thread.
 */
typedef int (*http_api_fn)(void *ctx, const char *url, char **body, size_t *len);

/*
 * Binds and listens on addr:port (IPv4 or IPv6 literal); NULL with a one-line reason in err.
 * Connections wait in the backlog until http_serve().
 */
struct http_server *http_bind(const char *addr, uint16_t port, char *err, size_t errlen);
struct web_config;
/*
 * TLS and basic auth from a --web-config (export/webconfig.h), before http_serve: reads the
 * certificate and key. 0, or -errno with a reason in err.
 */
int http_secure(struct http_server *srv, const struct web_config *web, char *err, size_t errlen);
/* Starts answering on the bound socket. 0, or -errno with a reason in err. */
int http_serve(struct http_server *srv, http_metrics_fn metrics, http_api_fn api, void *ctx,
	       char *err, size_t errlen);
void http_stop(struct http_server *srv);

#endif
