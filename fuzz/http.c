// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: the agent's HTTP server (export/http.c on libmicrohttpd), as the agent
 * runs it, with basic auth on (one user, bcrypt cost 4): each input is sent as a request on a
 * fresh loopback connection, the write side is closed, and the answer read to its end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "export/http.h"
#include "export/prom.h"
#include "export/webconfig.h"

static const char config[] =
	"basic_auth_users:\n"
	"  prom: $2b$04$abcdefghijklmnopqrstuuyvPXIbu7xe6/CED2DzX8z6Si09MlzlW\n";
static uint16_t port;

static int metrics(void *ctx, struct prom_writer *w)
{
	(void)ctx;
	prom_family(w, "plumb_fuzz", PROM_GAUGE, "A value.");
	prom_sample(w, NULL, 0, 1);
	return 0;
}

static int api(void *ctx, const char *url, char **body, size_t *len)
{
	(void)ctx;
	if (strcmp(url, "/api/v1/graph"))
		return -ENOENT;
	*body = strdup("{}");
	*len = 2;
	return *body ? 0 : -ENOMEM;
}

static void start(void)
{
	static struct web_config web;
	struct http_server *srv;
	char err[256];

	for (port = 40000 + (uint16_t)(getpid() % 20000);; port++) {
		srv = http_bind("127.0.0.1", port, err, sizeof(err));
		if (srv)
			break;
	}
	if (web_config_parse(config, sizeof(config) - 1, NULL, &web, err, sizeof(err)) ||
	    http_secure(srv, &web, err, sizeof(err)) ||
	    http_serve(srv, metrics, api, NULL, err, sizeof(err))) {
		fprintf(stderr, "fuzz http: %s\n", err);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
	struct timeval tv = { .tv_sec = 2 };
	char buf[4096];
	int fd;

	if (!port)
		start();
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (size)
			(void)!write(fd, data, size);
		shutdown(fd, SHUT_WR);
		while (read(fd, buf, sizeof(buf)) > 0)
			;
	}
	close(fd);
	return 0;
}
