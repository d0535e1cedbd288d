// SPDX-License-Identifier: GPL-2.0
/*
 * The agent's HTTP server: GET /metrics, GET /healthz and GET /api/v1/... (JSON) on
 * libmicrohttpd, one internal polling thread, bounded connections, request memory and time per connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include "export/http.h"
#include "export/prom.h"
#include "export/webconfig.h"
#include "log.h"

/*
 * Slow clients: a client may hold HTTP_MAX_PER_IP connections, and each connection has
 * HTTP_HEAD_DEADLINE_MS to send a request's head (MHD's own timeout is for idleness only:
 * a client that trickles a byte every few seconds never meets it). It takes 32 addresses to
 * fill the server, and they must reconnect every few seconds to stay.
 */
#define HTTP_MAX_CONNECTIONS	  512
#define HTTP_MAX_PER_IP		  16
#define HTTP_CONNECTION_TIMEOUT_S 10
#define HTTP_HEAD_DEADLINE_MS	  3000
/* Request line, headers and any body must fit: anything larger gets 431/413 from MHD. */
#define HTTP_CONNECTION_MEMORY (32 * 1024)

#define HTTP_PEM_MAX (1 << 20) /* a certificate chain or key file larger: refused */

/* A connection, watched for the head deadline (under http_server.lock). */
struct http_conn {
	bool used;
	bool in_head; /* waiting for a request's head: since since_ms */
	int fd;
	uint64_t since_ms;
};

struct http_server {
	struct MHD_Daemon *daemon;
	pthread_mutex_t lock;
	struct http_conn conns[HTTP_MAX_CONNECTIONS];
	pthread_t sweeper;
	bool sweeping, stop;
	uint64_t cut; /* connections closed for a slow head */
	int listen_fd;
	http_metrics_fn metrics;
	http_api_fn api;
	void *ctx;
	struct web_config web; /* --web-config (zero: plain HTTP, no auth) */
	char *cert, *key; /* the PEM files' text, for TLS */
	/*
	 * Per user, SHA-256 of the last password that passed bcrypt: a scrape every few seconds
	 * must not cost a bcrypt each (~50 ms at cost 10). Only the server's thread touches it.
	 */
	unsigned char verified[WEB_USERS_MAX][32];
	bool have_verified[WEB_USERS_MAX];
};

/* Queues resp (NULL: not made) with its content type, and lets go of it. */
static enum MHD_Result queue(struct MHD_Connection *conn, unsigned int status,
			     const char *content_type, struct MHD_Response *resp)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/*
 * body (malloc'd) goes to the response, which frees it once sent: no copy. A scrape's
 * metrics are megabytes (11 MB for ~90,000 series): copying them cost a memmove and the
 * page faults of a fresh buffer as large, at each scrape.
 */
static enum MHD_Result reply_owned(struct MHD_Connection *conn, unsigned int status,
				   const char *content_type, char *body, size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);

	if (!resp)
		free(body);
	return queue(conn, status, content_type, resp);
}

/* text: a string literal, never copied */
static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned int status,
				  const char *text)
{
	return queue(conn, status, "text/plain; charset=utf-8",
		     MHD_create_response_from_buffer(strlen(text), (void *)text,
						     MHD_RESPMEM_PERSISTENT));
}

static enum MHD_Result handle_api(struct http_server *srv, struct MHD_Connection *conn,
				  const char *url)
{
	char *body = NULL;
	size_t len = 0;
	int err;

	err = srv->api ? srv->api(srv->ctx, url, &body, &len) : -ENOENT;
	if (err == -ENOENT)
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
				  "not found: try /api/v1/graph or /api/v1/waits\n");
	if (err == -ENODEV)
		return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "the module this needs is not running: /api/v1/graph needs flow, "
				  "/api/v1/waits wait (--modules)\n");
	if (err) {
		pr_warn("http: %s failed: %s\n", url, strerror(-err));
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "failed\n");
	}
	return reply_owned(conn, MHD_HTTP_OK, "application/json", body, len);
}

/* Basic auth, when users are configured: whether this request may go on. */
static bool authorized(struct http_server *srv, struct MHD_Connection *conn)
{
	char *pass = NULL, *user;
	unsigned char digest[32];
	bool ok = false;
	size_t i;

	if (!srv->web.nusers)
		return true;
	user = MHD_basic_auth_get_username_password(conn, &pass);
	if (!user || !pass)
		goto out;
	for (i = 0; i < srv->web.nusers && strcmp(srv->web.users[i].name, user); i++)
		;
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, pass, strlen(pass), digest))
		goto out;
	if (i < srv->web.nusers && srv->have_verified[i] &&
	    !gnutls_memcmp(digest, srv->verified[i], sizeof(digest))) {
		ok = true;
		goto out;
	}
	ok = web_config_check(&srv->web, user, pass);
	if (ok) {
		memcpy(srv->verified[i], digest, sizeof(digest));
		srv->have_verified[i] = true;
	}
out:
	if (user)
		MHD_free(user);
	if (pass)
		MHD_free(pass);
	return ok;
}

static enum MHD_Result unauthorized(struct MHD_Connection *conn)
{
	static const char body[] = "unauthorized\n";
	struct MHD_Response *resp = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body,
								    MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	ret = MHD_queue_basic_auth_fail_response(conn, "plumb", resp);
	MHD_destroy_response(resp);
	return ret;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A connection opens (its head is awaited) or closes. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct http_server *srv = cls;
	const union MHD_ConnectionInfo *info;
	struct http_conn *c = *socket_context;

	pthread_mutex_lock(&srv->lock);
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		for (size_t i = 0; info && i < HTTP_MAX_CONNECTIONS; i++) {
			if (srv->conns[i].used)
				continue;
			srv->conns[i] = (struct http_conn){ .used = true,
							    .in_head = true,
							    .fd = info->connect_fd,
							    .since_ms = now_ms() };
			*socket_context = &srv->conns[i];
			break;
		}
	} else if (c) {
		c->used = false;
		*socket_context = NULL;
	}
	pthread_mutex_unlock(&srv->lock);
}

/* A request's head arrived (in_head false), or a request ended: the next head is awaited. */
static void head_state(struct http_server *srv, struct MHD_Connection *conn, bool in_head)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct http_conn *c = info ? info->socket_context : NULL;

	if (!c)
		return;
	pthread_mutex_lock(&srv->lock);
	c->in_head = in_head;
	c->since_ms = now_ms();
	pthread_mutex_unlock(&srv->lock);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode code)
{
	(void)con_cls;
	(void)code;
	head_state(cls, conn, true);
}

/*
 * Every 250 ms: a connection past its head deadline is shut down (MHD sees it end and closes
 * it; the slot is freed by on_connection, under the same lock, before the descriptor is).
 */
static void *sweep(void *arg)
{
	struct http_server *srv = arg;

	for (;;) {
		uint64_t now;

		usleep(250 * 1000);
		pthread_mutex_lock(&srv->lock);
		if (srv->stop) {
			pthread_mutex_unlock(&srv->lock);
			return NULL;
		}
		now = now_ms();
		for (size_t i = 0; i < HTTP_MAX_CONNECTIONS; i++) {
			struct http_conn *c = &srv->conns[i];

			if (c->used && c->in_head && now - c->since_ms > HTTP_HEAD_DEADLINE_MS) {
				shutdown(c->fd, SHUT_RDWR);
				c->in_head = false; /* once */
				srv->cut++;
			}
		}
		pthread_mutex_unlock(&srv->lock);
	}
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_size, void **con_cls)
{
	struct http_server *srv = cls;
	struct prom_writer w;
	static int first_call;
	enum MHD_Result ret;
	char *body;

	(void)version;
	(void)upload_data;
	/* MHD calls once with the headers, then again for any body and at its end. */
	if (!*con_cls) {
		*con_cls = &first_call;
		head_state(srv, conn, false);
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a body on GET is ignored; bounded by the memory limit */
		return MHD_YES;
	}
	if (!authorized(srv, conn))
		return unauthorized(conn);
	if (strcmp(url, "/metrics") && strcmp(url, "/healthz") && strcmp(url, "/") &&
	    strncmp(url, "/api/v1/", 8))
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	if (!strncmp(url, "/api/v1/", 8))
		return handle_api(srv, conn, url);
	if (!strcmp(url, "/healthz"))
		return reply_text(conn, MHD_HTTP_OK, "ok\n");
	if (!strcmp(url, "/"))
		return reply_text(conn, MHD_HTTP_OK,
				  "plumb agent: metrics at /metrics, health at /healthz\n");

	prom_init(&w);
	if (srv->metrics(srv->ctx, &w) || w.err) {
		pr_warn("http: writing metrics failed: %s\n", strerror(w.err ? -w.err : EIO));
		prom_free(&w);
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics failed\n");
	}
	body = w.buf;
	w.buf = NULL; /* the response's now */
	ret = reply_owned(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body,
			  w.len);
	prom_free(&w);
	return ret;
}

static int listen_socket(const char *addr, uint16_t port, char *err, size_t errlen)
{
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	struct sockaddr_in sa4 = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr *sa;
	socklen_t salen;
	int fd, one = 1;

	if (inet_pton(AF_INET, addr, &sa4.sin_addr) == 1) {
		sa = (struct sockaddr *)&sa4;
		salen = sizeof(sa4);
	} else if (inet_pton(AF_INET6, addr, &sa6.sin6_addr) == 1) {
		sa = (struct sockaddr *)&sa6;
		salen = sizeof(sa6);
	} else {
		snprintf(err, errlen, "listen address '%s' is not an IPv4 or IPv6 address", addr);
		return -EINVAL;
	}
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, sa, salen) || listen(fd, 64)) {
		int e = errno;

		snprintf(err, errlen, "cannot listen on %s%s%s:%u: %s",
			 sa->sa_family == AF_INET6 ? "[" : "", addr,
			 sa->sa_family == AF_INET6 ? "]" : "", port, strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

struct http_server *http_bind(const char *addr, uint16_t port, char *err, size_t errlen)
{
	struct http_server *srv = calloc(1, sizeof(*srv));

	if (!srv) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&srv->lock, NULL);
	srv->listen_fd = listen_socket(addr, port, err, errlen);
	if (srv->listen_fd < 0) {
		free(srv);
		return NULL;
	}
	return srv;
}

int http_serve(struct http_server *srv, http_metrics_fn metrics, http_api_fn api, void *ctx,
	       char *err, size_t errlen)
{
	srv->metrics = metrics;
	srv->api = api;
	srv->ctx = ctx;
	/* TLS 1.3, and 1.2 unless min_version says TLS13 (GnuTLS priority string) */
	const char *priorities =
		srv->web.min_version >= 13 ? "NORMAL:-VERS-ALL:+VERS-TLS1.3" :
		srv->web.max_version <= 12 ? "NORMAL:-VERS-ALL:+VERS-TLS1.2" :
					     "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
	struct MHD_OptionItem tls[] = {
		{ MHD_OPTION_HTTPS_MEM_CERT, 0, srv->cert },
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, srv->key },
		{ MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)priorities },
		{ MHD_OPTION_END, 0, NULL },
	};

	srv->daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | (srv->web.tls ? MHD_USE_TLS : 0),
		0, NULL, NULL, handle, srv, MHD_OPTION_LISTEN_SOCKET, srv->listen_fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_MAX_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)HTTP_MAX_PER_IP,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_CONNECTION_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_MEMORY,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, srv, MHD_OPTION_ARRAY, srv->web.tls ? tls : &tls[3], MHD_OPTION_END);
	if (srv->daemon && !pthread_create(&srv->sweeper, NULL, sweep, srv))
		srv->sweeping = true;
	if (!srv->daemon) {
		snprintf(err, errlen,
			 srv->web.tls ? "cannot start the HTTPS server: is the key the "
					"certificate's, both PEM?" :
					"cannot start the HTTP server");
		return -EIO;
	}
	return 0;
}

/* A PEM file's text, bounded; NULL with the reason in err. */
static char *read_pem(const char *what, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *text;
	size_t len;

	if (!f) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return NULL;
	}
	text = malloc(HTTP_PEM_MAX + 1);
	len = text ? fread(text, 1, HTTP_PEM_MAX + 1, f) : 0;
	fclose(f);
	if (!text || !len || len > HTTP_PEM_MAX || !strstr(text, "-----BEGIN ")) {
		snprintf(err, errlen, "%s %s: %s", what, path,
			 !text ? "out of memory" : "not a PEM file");
		free(text);
		return NULL;
	}
	text[len] = '\0';
	return text;
}

/* That the key is the certificate's, now: the server starts only after the modules load. */
static int key_pair_check(struct http_server *srv, char *err, size_t errlen)
{
	gnutls_certificate_credentials_t cred;
	gnutls_datum_t cert = { (unsigned char *)srv->cert, (unsigned int)strlen(srv->cert) };
	gnutls_datum_t key = { (unsigned char *)srv->key, (unsigned int)strlen(srv->key) };
	int ret;

	if (gnutls_certificate_allocate_credentials(&cred)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = gnutls_certificate_set_x509_key_mem(cred, &cert, &key, GNUTLS_X509_FMT_PEM);
	gnutls_certificate_free_credentials(cred);
	if (ret < 0) {
		snprintf(err, errlen, "cert_file %s, key_file %s: %s", srv->web.cert_file,
			 srv->web.key_file, gnutls_strerror(ret));
		return -EINVAL;
	}
	return 0;
}

int http_secure(struct http_server *srv, const struct web_config *web, char *err, size_t errlen)
{
	srv->web = *web;
	if (!web->tls)
		return 0;
	srv->cert = read_pem("cert_file", web->cert_file, err, errlen);
	srv->key = srv->cert ? read_pem("key_file", web->key_file, err, errlen) : NULL;
	return srv->key ? key_pair_check(srv, err, errlen) : -EINVAL;
}

void http_stop(struct http_server *srv)
{
	if (!srv)
		return;
	if (srv->sweeping) {
		pthread_mutex_lock(&srv->lock);
		srv->stop = true;
		pthread_mutex_unlock(&srv->lock);
		pthread_join(srv->sweeper, NULL);
	}
	if (srv->daemon)
		MHD_stop_daemon(srv->daemon); /* closes the listening socket too */
	else
		close(srv->listen_fd);
	free(srv->cert);
	if (srv->key)
		explicit_bzero(srv->key, strlen(srv->key));
	free(srv->key);
	free(srv);
}
