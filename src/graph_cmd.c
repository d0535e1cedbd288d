// SPDX-License-Identifier: GPL-2.0
/*
 * plumb graph: fetches the ends from agents (GET /api/v1/graph) or from Prometheus (instant
 * queries at t and t - window), joins and projects them (analysis/graph.c), writes the result.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>
#include <json-c/json.h>

#include "analysis/graph.h"
#include "cli.h"
#include "graph_cmd.h"

#define HTTP_TIMEOUT_S 10
#define ERR_LEN	       768

struct http_body {
	char *buf;
	size_t len, cap;
	bool too_big;
	bool text; /* served as text/plain */
};

static size_t http_write(char *data, size_t size, size_t n, void *arg)
{
	struct http_body *b = arg;
	size_t len = size * n, cap;
	char *p;

	if (len > GRAPH_MAX_BODY - b->len) {
		b->too_big = true;
		return 0; /* curl stops with CURLE_WRITE_ERROR */
	}
	if (b->len + len + 1 > b->cap) {
		cap = b->cap ? b->cap : 64 * 1024;
		while (cap < b->len + len + 1)
			cap *= 2;
		p = realloc(b->buf, cap);
		if (!p)
			return 0;
		b->buf = p;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, data, len);
	b->len += len;
	b->buf[b->len] = '\0';
	return len;
}

/*
 * Why a request failed, from the body of the 4xx/5xx answer: Prometheus's {"error": "..."},
 * or a line of text (an agent's: the module an endpoint needs is not running).
 */
static const char *body_error(const struct http_body *b, char *buf, size_t len)
{
	struct json_object *root, *v;

	buf[0] = '\0';
	if (!b->len)
		return buf;
	root = json_tokener_parse(b->buf);
	if (root && json_object_object_get_ex(root, "error", &v) &&
	    json_object_is_type(v, json_type_string))
		snprintf(buf, len, ": %s", json_object_get_string(v));
	else if (!root && b->text && b->len < 200 && strlen(b->buf) == b->len)
		snprintf(buf, len, ": %.*s", (int)strcspn(b->buf, "\n"), b->buf);
	json_object_put(root);
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	return buf;
}

/* GET url into b (NUL-terminated); a transfer error or a status other than 200 fails. */
static int http_get(const char *url, struct http_body *b, char *err, size_t errlen)
{
	char curl_err[CURL_ERROR_SIZE] = "", detail[256], *type = NULL;
	long status = 0;
	CURLcode rc;
	CURL *curl;

	memset(b, 0, sizeof(*b));
	curl = curl_easy_init();
	if (!curl) {
		snprintf(err, errlen, "%s: could not start libcurl", url);
		return -ENOMEM;
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, http_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)HTTP_TIMEOUT_S);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, (long)HTTP_TIMEOUT_S);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "plumb/" PLUMB_VERSION);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	rc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
	b->text = type && !strncasecmp(type, "text/plain", 10);
	curl_easy_cleanup(curl);
	if (b->too_big)
		snprintf(err, errlen, "%s: the response is over the limit of %u MiB", url,
			 GRAPH_MAX_BODY >> 20);
	else if (rc != CURLE_OK)
		snprintf(err, errlen, "%s: %s", url,
			 curl_err[0] ? curl_err : curl_easy_strerror(rc));
	else if (status != 200)
		snprintf(err, errlen, "%s: HTTP status %ld%s", url, status,
			 body_error(b, detail, sizeof(detail)));
	else
		return 0;
	free(b->buf);
	memset(b, 0, sizeof(*b));
	return -EIO;
}

static int add_agents(struct graph *g, const struct graph_options *o, char *err, size_t errlen)
{
	for (size_t i = 0; i < o->nfrom; i++) {
		struct http_body b;
		int ret = http_get(o->from[i], &b, err, errlen);

		if (ret)
			return ret;
		ret = graph_add_agent(g, b.buf ? b.buf : "", b.len, o->from[i], err, errlen);
		free(b.buf);
		if (ret)
			return ret;
	}
	return 0;
}

/* The six instant queries of §2, all at one t (now) or t - window, passed explicitly. */
static int add_prometheus(struct graph *g, const struct graph_options *o, char *err, size_t errlen)
{
	struct http_body b[GRAPH_PROM_QUERIES] = { 0 };
	const char *body[GRAPH_PROM_QUERIES];
	size_t len[GRAPH_PROM_QUERIES];
	struct timespec now;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &now);
	for (int q = 0; q < GRAPH_PROM_QUERIES && !ret; q++) {
		const struct graph_prom_query_def *d = &graph_prom_queries[q];
		long long t = (long long)now.tv_sec - (d->then ? (long long)o->window_s : 0);
		char url[CLI_URL_MAX + 128];

		snprintf(url, sizeof(url), "%s/api/v1/query?query=%s&time=%lld.%03ld",
			 o->prometheus, d->metric, t, now.tv_nsec / 1000000);
		ret = http_get(url, &b[q], err, errlen);
		body[q] = b[q].buf ? b[q].buf : "";
		len[q] = b[q].len;
	}
	if (!ret)
		ret = graph_add_prometheus(g, body, len, o->window_s, o->prometheus, err, errlen);
	for (int q = 0; q < GRAPH_PROM_QUERIES; q++)
		free(b[q].buf);
	return ret;
}

/* Whether execvp() would find dot: the PATH search, done first to say what to install. */
static bool dot_in_path(void)
{
	const char *path = getenv("PATH");
	char file[4096];

	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (path) {
		const char *end = strchr(path, ':');
		int n = end ? (int)(end - path) : (int)strlen(path);
		struct stat st;

		snprintf(file, sizeof(file), "%.*s%sdot", n, path, n ? "/" : "");
		if (!stat(file, &st) && S_ISREG(st.st_mode) && !access(file, X_OK))
			return true;
		path = end ? end + 1 : NULL;
	}
	return false;
}

/* dot -Tsvg, fed the dot text on a pipe, writing to out_fd. */
static int write_svg(const struct graph_view *v, int out_fd, char *err, size_t errlen)
{
	struct sigaction ignore = { .sa_handler = SIG_IGN }, old;
	int pipefd[2], status = 0, ret;
	FILE *to_dot;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC)) {
		ret = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(-ret));
		return ret;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return -EIO;
	}
	if (!pid) {
		if (dup2(pipefd[0], STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0)
			_exit(126);
		execlp("dot", "dot", "-Tsvg", (char *)NULL);
		_exit(127);
	}
	close(pipefd[0]);
	/* dot exiting early must fail the write, not kill plumb */
	sigaction(SIGPIPE, &ignore, &old);
	to_dot = fdopen(pipefd[1], "w");
	if (!to_dot) {
		close(pipefd[1]);
		ret = -EIO;
	} else {
		ret = graph_write_dot(v, to_dot);
		if (fclose(to_dot))
			ret = -EIO;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	sigaction(SIGPIPE, &old, NULL);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		if (WIFEXITED(status))
			snprintf(err, errlen, "dot -Tsvg failed (exit status %d)",
				 WEXITSTATUS(status));
		else
			snprintf(err, errlen, "dot -Tsvg was killed by signal %d",
				 WTERMSIG(status));
		return -EIO;
	}
	if (ret)
		snprintf(err, errlen, "could not write the graph to dot -Tsvg");
	return ret;
}

static int write_format(const struct graph_view *v, enum graph_format format, FILE *out, char *err,
			size_t errlen)
{
	switch (format) {
	case GRAPH_FORMAT_TABLE:
		return graph_write_table(v, out);
	case GRAPH_FORMAT_JSON:
		return graph_write_json(v, out);
	case GRAPH_FORMAT_DOT:
		return graph_write_dot(v, out);
	case GRAPH_FORMAT_SVG:
	default:
		if (fflush(out))
			return -EIO;
		return write_svg(v, fileno(out), err, errlen);
	}
}

/*
 * To -o FILE (opened only now, when there is a graph to write: a source that fails leaves
 * an old FILE as it was) or standard output. A FILE left half-written is removed.
 */
static int write_output(const struct graph_view *v, const struct graph_options *o, char *err,
			size_t errlen)
{
	const char *name = o->output[0] ? o->output : "standard output";
	bool regular = false;
	FILE *out = stdout;
	struct stat st;
	int ret;

	err[0] = '\0';
	if (o->output[0]) {
		out = fopen(o->output, "w");
		if (!out) {
			ret = -errno;
			snprintf(err, errlen, "%.300s: %s", o->output, strerror(-ret));
			return ret;
		}
		regular = !fstat(fileno(out), &st) && S_ISREG(st.st_mode);
	}
	errno = 0;
	ret = write_format(v, o->format, out, err, errlen);
	if (!ret && fflush(out))
		ret = -(errno ? errno : EIO);
	if (out != stdout && fclose(out) && !ret)
		ret = -(errno ? errno : EIO);
	if (ret && !err[0])
		snprintf(err, errlen, "%.300s: %s", name,
			 ret == -ENOMEM ? "out of memory" :
					  strerror(ret == -EIO && errno ? errno : -ret));
	if (ret && regular)
		unlink(o->output);
	return ret;
}

int graph_cmd_run(const struct graph_options *o)
{
	struct graph_view *v = NULL;
	char err[ERR_LEN] = "";
	struct graph *g;
	int ret;

	if (o->format == GRAPH_FORMAT_SVG && !dot_in_path()) {
		fprintf(stderr, "plumb graph: --format svg needs Graphviz's dot "
				"(apt-get install graphviz)\n");
		return 1;
	}
	if (o->window_set && o->nfrom)
		fprintf(stderr, "plumb graph: note: --window applies to --prometheus only; agents "
				"report totals since each agent started\n");
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "plumb graph: could not initialise libcurl\n");
		return 1;
	}
	g = graph_new();
	if (!g) {
		snprintf(err, sizeof(err), "out of memory");
		ret = -ENOMEM;
		goto out_cleanup;
	}
	ret = o->nfrom ? add_agents(g, o, err, sizeof(err)) :
			 add_prometheus(g, o, err, sizeof(err));
	ret = ret ?: graph_build(g, o->projection, &v, err, sizeof(err));
	ret = ret ?: write_output(v, o, err, sizeof(err));
out_cleanup:
	if (ret)
		fprintf(stderr, "plumb graph: %s\n", err);
	graph_view_free(v);
	graph_free(g);
	curl_global_cleanup();
	return ret ? 1 : 0;
}
