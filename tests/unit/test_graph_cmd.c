// SPDX-License-Identifier: GPL-2.0
/*
 * plumb graph end to end, in process: graph_cmd_run() against a small HTTP server on a
 * thread that serves fixture agents and a fixture Prometheus, writing to -o files.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <json-c/json.h>

#include "cli.h"
#include "graph_cmd.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_REQUESTS  32
#define WINDOW_S      300

static const char agent_a[] =
	"{\"version\": 1, \"host\": \"hostA\", \"addresses\": [\"10.77.0.1\"], \"processes\": "
	"[{\"pid\": 4242, \"comm\": \"curl\", \"exe\": \"/usr/bin/curl\", \"cgroup\": \"/\", "
	"\"workload\": \"\"}], \"ends\": [{\"pid\": 4242, \"role\": \"client\", \"protocol\": "
	"\"tcp\", \"local_addr\": \"10.77.0.1\", \"peer_addr\": \"10.77.0.2\", \"port\": 80, "
	"\"tx_bytes\": 1200, \"rx_bytes\": 53000, \"connections\": 3, \"peer_pid\": 0}]}";
static const char agent_b[] =
	"{\"version\": 1, \"host\": \"hostB\", \"addresses\": [\"10.77.0.2\"], \"processes\": "
	"[{\"pid\": 77, \"comm\": \"nginx\", \"exe\": \"/usr/sbin/nginx\", \"cgroup\": \"/\", "
	"\"workload\": \"\"}], \"ends\": [{\"pid\": 77, \"role\": \"server\", \"protocol\": "
	"\"tcp\", \"local_addr\": \"10.77.0.2\", \"peer_addr\": \"10.77.0.1\", \"port\": 80, "
	"\"tx_bytes\": 53000, \"rx_bytes\": 1200, \"connections\": 3, \"peer_pid\": 0}]}";

/* Prometheus: curl on a:1 (hostA, 10.0.0.1) talked to 10.0.0.2:80, which no one owns */
#define VECTOR(result)                                                                          \
	"{\"status\": \"success\", \"data\": {\"resultType\": \"vector\", \"result\": [" result \
	"]}}"
#define CURL_LABELS                                                                            \
	"\"instance\": \"a:1\", \"cgroup\": \"/c\", \"workload\": \"w\", \"comm\": \"curl\", " \
	"\"peer_addr\": \"10.0.0.2\", \"peer_port\": \"80\", \"role\": \"client\""
#define SAMPLE(labels, value) "{\"metric\": {" labels "}, \"value\": [1, \"" value "\"]}"

static const struct prom_route {
	const char *metric;
	bool then;
	const char *body;
} prom_routes[] = {
	{ "plumb_flow_bytes_total", false,
	  VECTOR(SAMPLE(CURL_LABELS ", \"direction\": \"tx\"",
			"500") ", " SAMPLE(CURL_LABELS ", \"direction\": \"rx\"", "900")) },
	{ "plumb_flow_bytes_total", true,
	  VECTOR(SAMPLE(CURL_LABELS ", \"direction\": \"tx\"", "100")) },
	{ "plumb_flow_connections_total", false, VECTOR(SAMPLE(CURL_LABELS, "7")) },
	{ "plumb_flow_connections_total", true, VECTOR(SAMPLE(CURL_LABELS, "2")) },
	{ "plumb_host_info", false,
	  VECTOR(SAMPLE("\"instance\": \"a:1\", \"host\": \"hostA\"", "1")) },
	{ "plumb_host_address", false,
	  VECTOR(SAMPLE("\"instance\": \"a:1\", \"host\": \"hostA\", \"addr\": \"10.0.0.1\"",
			"1")) },
};

static const struct route {
	const char *path;
	int status;
	const char *body;
} routes[] = {
	{ "/api/v1/graph", 200, agent_a },
	{ "/b.json", 200, agent_b },
	{ "/missing", 404, "not found" },
	{ "/bad.json", 200, "{\"version\": 1, \"host\": " },
	{ "/off", 503, "the module this needs is not running\nsecond line" },
};

struct server {
	int fd;
	uint16_t port;
	pthread_t thread;
	pthread_mutex_t lock;
	char requests[MAX_REQUESTS][512]; /* the request targets, in order */
	size_t nrequests;
};

static void respond(int c, int status, const char *body)
{
	char head[160];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d X\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, body[0] == '{' ? "application/json" : "text/plain; charset=utf-8",
			 strlen(body));

	if (write(c, head, (size_t)n) != n || write(c, body, strlen(body)) < 0)
		return;
}

/* The fixture Prometheus answers by metric, and by whether time is t or t - window. */
static void respond_prometheus(int c, const char *query)
{
	static double first_time; /* t: the first query's time, the largest */
	char metric[64] = "";
	const char *t = strstr(query, "&time=");
	double time_s;

	if (sscanf(query, "query=%63[a-z_]", metric) != 1 || !t) {
		respond(c, 400, "{\"status\": \"error\", \"error\": \"no query or no time\"}");
		return;
	}
	time_s = strtod(t + 6, NULL);
	if (time_s > first_time)
		first_time = time_s;
	for (size_t i = 0; i < ARRAY_SIZE(prom_routes); i++)
		if (!strcmp(prom_routes[i].metric, metric) &&
		    prom_routes[i].then == (time_s < first_time - WINDOW_S / 2)) {
			respond(c, 200, prom_routes[i].body);
			return;
		}
	respond(c, 200, VECTOR(""));
}

static void *serve(void *arg)
{
	struct server *s = arg;
	int c;

	while ((c = accept(s->fd, NULL, NULL)) >= 0) {
		char req[2048] = "", target[512] = "";
		size_t n = 0;
		ssize_t r;

		while (n < sizeof(req) - 1 && !strstr(req, "\r\n\r\n") &&
		       (r = read(c, req + n, sizeof(req) - 1 - n)) > 0)
			n += (size_t)r;
		req[n] = '\0';
		if (sscanf(req, "GET %511s HTTP/1.1", target) != 1) {
			close(c);
			continue;
		}
		pthread_mutex_lock(&s->lock);
		if (s->nrequests < MAX_REQUESTS)
			snprintf(s->requests[s->nrequests++], sizeof(s->requests[0]), "%s", target);
		pthread_mutex_unlock(&s->lock);
		if (!strncmp(target, "/api/v1/query?", 14)) {
			respond_prometheus(c, target + 14);
		} else {
			size_t i = 0;

			while (i < ARRAY_SIZE(routes) && strcmp(routes[i].path, target))
				i++;
			if (i < ARRAY_SIZE(routes))
				respond(c, routes[i].status, routes[i].body);
			else
				respond(c, 404, "no such fixture");
		}
		close(c);
	}
	return NULL;
}

static int server_start(void **state)
{
	struct server *s = calloc(1, sizeof(*s));
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);

	if (!s)
		return -1;
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(s->fd, 16) ||
	    getsockname(s->fd, (struct sockaddr *)&addr, &len))
		return -1;
	s->port = ntohs(addr.sin_port);
	pthread_mutex_init(&s->lock, NULL);
	if (pthread_create(&s->thread, NULL, serve, s))
		return -1;
	*state = s;
	return 0;
}

static int server_stop(void **state)
{
	struct server *s = *state;

	shutdown(s->fd, SHUT_RDWR);
	close(s->fd);
	pthread_join(s->thread, NULL);
	free(s);
	return 0;
}

/* plumb graph ARGS... as main() would run it, the URLs' PORT replaced by the server's */
static int run(struct server *s, const char *args)
{
	static struct graph_options o;
	char line[1024], *argv[16], err[256], *save = NULL, *tok, *p;
	int argc = 0;

	argv[argc++] = "graph";
	snprintf(line, sizeof(line), "%s", args);
	while ((p = strstr(line, "PORT"))) {
		char rest[1024];

		snprintf(rest, sizeof(rest), "%s", p + 4);
		snprintf(p, sizeof(line) - (size_t)(p - line), "%u%s", s->port, rest);
	}
	for (tok = strtok_r(line, " ", &save); tok && argc < 15; tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	pthread_mutex_lock(&s->lock);
	s->nrequests = 0;
	pthread_mutex_unlock(&s->lock);
	if (cli_parse_graph(argc, argv, &o, err, sizeof(err)) != CLI_OK)
		fail_msg("graph %s: %s", args, err);
	return graph_cmd_run(&o);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

static char out_path[64];

static int out_setup(void **state)
{
	(void)state;
	snprintf(out_path, sizeof(out_path), "/tmp/plumb-test-graph-%d.out", (int)getpid());
	unlink(out_path);
	return 0;
}

static int out_teardown(void **state)
{
	(void)state;
	unlink(out_path);
	return 0;
}

static struct json_object *edge_of(struct json_object *root, size_t i)
{
	struct json_object *edges;

	assert_true(json_object_object_get_ex(root, "edges", &edges));
	if (i >= json_object_array_length(edges))
		fail_msg("no edge %zu in %s", i, json_object_to_json_string(root));
	return json_object_array_get_idx(edges, i);
}

static const char *field(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("no %s in %s", key, json_object_to_json_string(o));
	return json_object_get_string(v);
}

/* Two agents, one by the default path, one by its own; the join across them. */
static void test_agents_json(void **state)
{
	struct server *s = *state;
	char args[256];
	struct json_object *root, *e, *w;
	char *out;

	snprintf(args, sizeof(args),
		 "--from http://127.0.0.1:PORT,http://127.0.0.1:PORT/b.json -f json -o %s",
		 out_path);
	assert_int_equal(run(s, args), 0);
	assert_int_equal(s->nrequests, 2);
	assert_string_equal(s->requests[0], "/api/v1/graph");
	assert_string_equal(s->requests[1], "/b.json");
	out = slurp(out_path);
	assert_non_null(out);
	root = json_tokener_parse(out);
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "window_seconds", &w));
	assert_null(w);
	e = edge_of(root, 0);
	assert_string_equal(field(e, "source"), "hostA/4242");
	assert_string_equal(field(e, "target"), "hostB/77");
	assert_string_equal(field(e, "tx_bytes"), "1200");
	assert_string_equal(field(e, "rx_bytes"), "53000");
	assert_string_equal(field(e, "connections"), "3");
	json_object_put(root);
	free(out);
}

static void test_agents_table_and_dot(void **state)
{
	struct server *s = *state;
	char args[256], *out;

	snprintf(args, sizeof(args),
		 "--from http://127.0.0.1:PORT/ --from http://127.0.0.1:PORT/b.json -p host -o %s",
		 out_path);
	assert_int_equal(run(s, args), 0);
	out = slurp(out_path);
	assert_string_equal(out, "SOURCE  TARGET  PORT       TX        RX  CONNS\n"
				 "hostA   hostB     80  1.2 KiB  51.8 KiB      3\n");
	free(out);
	snprintf(args, sizeof(args), "--from http://127.0.0.1:PORT/b.json -f dot -o %s", out_path);
	assert_int_equal(run(s, args), 0);
	out = slurp(out_path);
	assert_non_null(strstr(out, "\t\"external/10.77.0.1\" -> \"hostB/77\" [label=\":80 "));
	free(out);
}

/* A failing source: exit status 1, and -o FILE not written. */
static void test_source_errors(void **state)
{
	static const char *const bad[] = {
		"--from http://127.0.0.1:PORT/missing",
		"--from http://127.0.0.1:PORT/bad.json",
		"--from http://127.0.0.1:PORT,http://127.0.0.1:PORT", /* hostA twice */
		"--from http://127.0.0.1:PORT,http://127.0.0.1:PORT/missing",
		"--prometheus http://127.0.0.1:PORT/prefix",
	};
	struct server *s = *state;
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char args[256];

		snprintf(args, sizeof(args), "%s -o %s", bad[i], out_path);
		if (run(s, args) != 1)
			fail_msg("graph %s: expected exit status 1", bad[i]);
		if (!stat(out_path, &st))
			fail_msg("graph %s: %s was written", bad[i], out_path);
	}
}

/* A failing source says why: an agent's plain-text reason after its HTTP status, one line. */
static void test_source_error_text(void **state)
{
	struct server *s = *state;
	char path[] = "/tmp/plumb-graph-stderr-XXXXXX", *text;
	int fd = mkstemp(path), saved;

	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	assert_true(saved >= 0 && dup2(fd, 2) == 2);
	assert_int_equal(run(s, "--from http://127.0.0.1:PORT/off"), 1);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	text = slurp(path);
	unlink(path);
	assert_non_null(text);
	if (!strstr(text, "/off: HTTP status 503: the module this needs is not running\n"))
		fail_msg("plumb graph said: %s", text);
	assert_null(strstr(text, "second line"));
	free(text);
}

static void test_unreachable(void **state)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	static struct graph_options o;
	char url[64], err[256];
	char *argv[] = { "graph", "--from", url, NULL };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)state;
	/* a port that was free a moment ago and has no listener */
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
	close(fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(addr.sin_port));
	assert_int_equal(cli_parse_graph(3, argv, &o, err, sizeof(err)), CLI_OK);
	assert_int_equal(graph_cmd_run(&o), 1);
}

/* The six queries, each with time=, t - window exactly the window before t. */
static void test_prometheus(void **state)
{
	static const char query0[] = "/api/v1/query?query=plumb_flow_bytes_total&time=";
	struct server *s = *state;
	double t[6];
	char args[256], *out;
	struct json_object *root, *e, *w;

	snprintf(args, sizeof(args), "--prometheus http://127.0.0.1:PORT/ -f json -o %s", out_path);
	assert_int_equal(run(s, args), 0);
	assert_int_equal(s->nrequests, 6);
	for (size_t i = 0; i < 6; i++) {
		const char *p = strstr(s->requests[i], "&time=");

		assert_non_null(p);
		t[i] = strtod(p + 6, NULL);
		assert_true(t[i] > 1e9);
	}
	assert_int_equal(strncmp(s->requests[0], query0, strlen(query0)), 0);
	assert_true(t[0] - t[1] > WINDOW_S - 0.001 && t[0] - t[1] < WINDOW_S + 0.001);
	assert_true(t[2] - t[3] > WINDOW_S - 0.001 && t[2] - t[3] < WINDOW_S + 0.001);
	assert_true(t[0] == t[2] && t[0] == t[4] && t[0] == t[5]);
	assert_true(t[0] <= (double)time(NULL) + 1 && t[0] >= (double)time(NULL) - 60);
	out = slurp(out_path);
	root = json_tokener_parse(out);
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "window_seconds", &w));
	assert_int_equal(json_object_get_int(w), WINDOW_S);
	e = edge_of(root, 0);
	assert_string_equal(field(e, "source"), "hostA//c/curl");
	assert_string_equal(field(e, "target"), "external/10.0.0.2");
	assert_string_equal(field(e, "tx_bytes"), "400");
	assert_string_equal(field(e, "rx_bytes"), "900"); /* absent at t - window */
	assert_string_equal(field(e, "connections"), "5");
	json_object_put(root);
	free(out);
}

/* svg through Graphviz's dot; without dot in PATH, one line and status 1, nothing fetched. */
static void test_svg(void **state)
{
	struct server *s = *state;
	const char *path = getenv("PATH");
	char args[256], *saved, *out;
	struct stat st;

	snprintf(args, sizeof(args), "--from http://127.0.0.1:PORT -f svg -o %s", out_path);
	saved = strdup(path ? path : "");
	assert_non_null(saved);
	setenv("PATH", "/nonexistent", 1);
	assert_int_equal(run(s, args), 1);
	setenv("PATH", saved, 1);
	free(saved);
	assert_int_equal(s->nrequests, 0);
	assert_int_not_equal(stat(out_path, &st), 0);

	if (system("command -v dot >/dev/null 2>&1"))
		skip(); /* the rest needs Graphviz */
	assert_int_equal(run(s, args), 0);
	out = slurp(out_path);
	assert_non_null(strstr(out, "<svg"));
	assert_non_null(strstr(out, "curl/4242@hostA"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_agents_json, out_setup, out_teardown),
		cmocka_unit_test_setup_teardown(test_agents_table_and_dot, out_setup, out_teardown),
		cmocka_unit_test_setup_teardown(test_source_errors, out_setup, out_teardown),
		cmocka_unit_test(test_source_error_text),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test_setup_teardown(test_prometheus, out_setup, out_teardown),
		cmocka_unit_test_setup_teardown(test_svg, out_setup, out_teardown),
	};

	/* the fixture server is local: a proxy in the environment must not carry the requests */
	setenv("no_proxy", "*", 1);
	return cmocka_run_group_tests(tests, server_start, server_stop);
}
