// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "plumb.h"

static int all_digits(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

int cli_parse_duration_ms(const char *s, unsigned int *ms)
{
	static const struct {
		const char *suffix;
		unsigned long mult;
	} units[] = { { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "", 1000 } };
	unsigned long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix))
			continue;
		if (v > UINT_MAX / units[i].mult)
			return -ERANGE;
		*ms = (unsigned int)(v * units[i].mult);
		return 0;
	}
	return -EINVAL;
}

int cli_parse_listen(const char *s, char *addr, size_t addrlen, uint16_t *port)
{
	const char *colon, *host = s;
	size_t hostlen;
	unsigned long p;
	char *end;

	if (s[0] == '[') { /* [v6]:port */
		colon = strstr(s, "]:");
		if (!colon)
			return -EINVAL;
		host = s + 1;
		hostlen = colon - host;
		colon++;
	} else {
		colon = strrchr(s, ':');
		if (!colon || strchr(s, ':') != colon)
			return -EINVAL;
		hostlen = colon - s;
	}
	if (hostlen == 0 || hostlen >= addrlen || !all_digits(colon + 1))
		return -EINVAL;
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p == 0 || p > 65535)
		return -EINVAL;
	memcpy(addr, host, hostlen);
	addr[hostlen] = '\0';
	*port = (uint16_t)p;
	return 0;
}

static void module_names(char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < plumb_module_count && n < len; i++)
		n += snprintf(out + n, len - n, "%s%s", i ? ", " : "", plumb_modules[i]->name);
}

int cli_parse_modules(const char *s, uint32_t *mask, char *err, size_t errlen)
{
	char buf[256], names[128], *tok, *save = NULL;
	size_t i;

	if (strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "--modules: list too long");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	*mask = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < plumb_module_count; i++)
			if (!strcmp(tok, plumb_modules[i]->name))
				break;
		if (i == plumb_module_count) {
			module_names(names, sizeof(names));
			snprintf(err, errlen, "unknown module '%s' (valid: %s)", tok, names);
			return -EINVAL;
		}
		*mask |= 1u << i;
	}
	if (!*mask) {
		snprintf(err, errlen, "--modules: empty list");
		return -EINVAL;
	}
	return 0;
}

static int parse_uint(const char *s, unsigned int min, unsigned int max, unsigned int *out)
{
	unsigned long v;
	char *end;

	if (!all_digits(s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || *s == '-' || v < min || v > max)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static int parse_sample_period(const char *s, unsigned int *out, char *err, size_t errlen)
{
	if (parse_uint(s, 1, 65536, out) || (*out & (*out - 1))) {
		snprintf(err, errlen, "--io-latency-sample: '%s' is not a power of two in 1..65536",
			 s);
		return -EINVAL;
	}
	return 0;
}

/* getopt_long with its messages off: errors come back in err, one line. */
static int next_opt(int argc, char **argv, const struct option *opts, const char *shortopts,
		    char *err, size_t errlen)
{
	int c = getopt_long(argc, argv, shortopts, opts, NULL);

	if (c == '?') {
		const char *arg = argv[optind - 1];

		/* glibc sets optopt to the option's value when a long option that takes none is
		 * given one ("--check=yes"); print what the user typed instead */
		if (!strncmp(arg, "--", 2) && optopt)
			snprintf(err, errlen, "option '%.*s' takes no value",
				 (int)strcspn(arg, "="), arg);
		else if (optopt)
			snprintf(err, errlen, "unknown option '-%c'", optopt);
		else
			snprintf(err, errlen, "unknown option '%s'", arg);
	} else if (c == ':') {
		snprintf(err, errlen, "option '%s' needs a value", argv[optind - 1]);
		c = '?';
	}
	return c;
}

enum {
	OPT_GRACE = 256,
	OPT_IO_CAPACITY,
	OPT_NO_LATENCY,
	OPT_CHECK,
	OPT_LATENCY_SAMPLE,
	OPT_FLOW_CAPACITY,
	OPT_FLOW_BYTES,
	OPT_HOST,
	OPT_NETNS,
	OPT_NETSTACK_SAMPLE,
	OPT_NETSTACK_WINDOW,
	OPT_WEB_CONFIG,
	OPT_SECCOMP,
	OPT_PIN_DIR,
	OPT_PIN_CAPACITY,
	OPT_WAIT_CAPACITY,
	OPT_DEV,
	OPT_MAX_MOVES,
	OPT_PIN,
	OPT_PEERS,
	OPT_FROM,
	OPT_PROMETHEUS,
	OPT_WINDOW,
	OPT_BASELINE_DURATION,
	OPT_BASELINE,
	OPT_RECORD,
	OPT_EXPLAIN,
};

enum cli_result cli_parse_agent(int argc, char **argv, struct agent_options *o, char *err,
				size_t errlen)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "modules", required_argument, NULL, 'm' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "cgroup-grace", required_argument, NULL, OPT_GRACE },
		{ "io-capacity", required_argument, NULL, OPT_IO_CAPACITY },
		{ "no-io-latency", no_argument, NULL, OPT_NO_LATENCY },
		{ "io-latency-sample", required_argument, NULL, OPT_LATENCY_SAMPLE },
		{ "flow-capacity", required_argument, NULL, OPT_FLOW_CAPACITY },
		{ "flow-bytes", required_argument, NULL, OPT_FLOW_BYTES },
		{ "host", required_argument, NULL, OPT_HOST },
		{ "netns", required_argument, NULL, OPT_NETNS },
		{ "netstack-sample", required_argument, NULL, OPT_NETSTACK_SAMPLE },
		{ "netstack-window", required_argument, NULL, OPT_NETSTACK_WINDOW },
		{ "web-config", required_argument, NULL, OPT_WEB_CONFIG },
		{ "seccomp", required_argument, NULL, OPT_SECCOMP },
		{ "pin", required_argument, NULL, OPT_PIN_DIR },
		{ "pin-capacity", required_argument, NULL, OPT_PIN_CAPACITY },
		{ "wait-capacity", required_argument, NULL, OPT_WAIT_CAPACITY },
		{ 0 },
	};
	unsigned int ms;
	int c;

	memset(o, 0, sizeof(*o));
	snprintf(o->addr, sizeof(o->addr), "%s", PLUMB_DEFAULT_ADDR);
	o->port = PLUMB_DEFAULT_PORT;
	o->modules = (1u << plumb_module_count) - 1;
	o->grace_s = 300;
	o->io_capacity = 4096;
	o->io_latency = true;
	o->io_latency_sample = PLUMB_DEFAULT_LATENCY_SAMPLE;
	o->flow_capacity = 131072;
	o->flow_bytes = FLOW_BYTES_AUTO;
	o->netstack_sample = PLUMB_DEFAULT_NETSTACK_SAMPLE;
	o->netstack_window = PLUMB_DEFAULT_NETSTACK_WINDOW;
	o->pin_capacity = PLUMB_DEFAULT_PIN_CAPACITY;
	o->wait_capacity = PLUMB_DEFAULT_WAIT_CAPACITY;
	optind = 0;
	opterr = 0;
	while ((c = next_opt(argc, argv, opts, ":l:m:vh", err, errlen)) != -1) {
		switch (c) {
		case 'l':
			if (cli_parse_listen(optarg, o->addr, sizeof(o->addr), &o->port)) {
				snprintf(err, errlen, "--listen: '%s' is not ADDR:PORT", optarg);
				return CLI_ERROR;
			}
			break;
		case 'm':
			if (cli_parse_modules(optarg, &o->modules, err, errlen))
				return CLI_ERROR;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			return CLI_HELP;
		case OPT_CHECK:
			o->check = true;
			break;
		case OPT_GRACE:
			if (cli_parse_duration_ms(optarg, &ms) || ms % 1000) {
				snprintf(err, errlen,
					 "--cgroup-grace: '%s' is not a duration in whole seconds",
					 optarg);
				return CLI_ERROR;
			}
			o->grace_s = ms / 1000;
			break;
		case OPT_IO_CAPACITY:
			if (parse_uint(optarg, 16, 1u << 20, &o->io_capacity)) {
				snprintf(err, errlen, "--io-capacity: '%s' is not in 16..1048576",
					 optarg);
				return CLI_ERROR;
			}
			break;
		case OPT_NO_LATENCY:
			o->io_latency = false;
			break;
		case OPT_LATENCY_SAMPLE:
			if (parse_sample_period(optarg, &o->io_latency_sample, err, errlen))
				return CLI_ERROR;
			break;
		case OPT_FLOW_CAPACITY:
			if (parse_uint(optarg, 16, 1u << 22, &o->flow_capacity)) {
				snprintf(err, errlen, "--flow-capacity: '%s' is not in 16..4194304",
					 optarg);
				return CLI_ERROR;
			}
			break;
		case OPT_FLOW_BYTES: {
			static const char *const modes[] = { "auto", "calls", "counters", "off" };
			size_t k = 0;

			while (k < 4 && strcmp(optarg, modes[k]))
				k++;
			if (k == 4) {
				snprintf(err, errlen,
					 "--flow-bytes: '%s' is not auto, calls, counters or off",
					 optarg);
				return CLI_ERROR;
			}
			o->flow_bytes = (enum flow_bytes_mode)k;
			break;
		}
		case OPT_NETSTACK_SAMPLE:
			if (parse_uint(optarg, 1, 65536, &o->netstack_sample)) {
				snprintf(err, errlen, "--netstack-sample: '%s' is not in 1..65536",
					 optarg);
				return CLI_ERROR;
			}
			break;
		case OPT_NETSTACK_WINDOW:
			if (parse_uint(optarg, 1, 3600, &o->netstack_window)) {
				snprintf(err, errlen, "--netstack-window: '%s' is not in 1..3600",
					 optarg);
				return CLI_ERROR;
			}
			break;
		case OPT_HOST:
			if (!*optarg || strlen(optarg) >= sizeof(o->host) ||
			    strpbrk(optarg, "/ \t\n\"")) {
				snprintf(
					err, errlen,
					"--host: '%s' is not a host name (1-63 characters, no '/', "
					"quote or space)",
					optarg);
				return CLI_ERROR;
			}
			snprintf(o->host, sizeof(o->host), "%s", optarg);
			break;
		case OPT_NETNS:
			if (!*optarg || strlen(optarg) >= sizeof(o->netns)) {
				snprintf(err, errlen,
					 "--netns: '%s' is not a namespace name or path", optarg);
				return CLI_ERROR;
			}
			snprintf(o->netns, sizeof(o->netns), "%s", optarg);
			break;
		case OPT_WEB_CONFIG:
			if (!*optarg || strlen(optarg) >= sizeof(o->web_config)) {
				snprintf(err, errlen, "--web-config: '%.200s' is not a file name",
					 optarg);
				return CLI_ERROR;
			}
			snprintf(o->web_config, sizeof(o->web_config), "%s", optarg);
			break;
		case OPT_SECCOMP:
			if (!strcmp(optarg, "enforce")) {
				o->seccomp = SECCOMP_ENFORCE;
			} else if (!strcmp(optarg, "log")) {
				o->seccomp = SECCOMP_LOG;
			} else if (!strcmp(optarg, "off")) {
				o->seccomp = SECCOMP_OFF;
			} else {
				snprintf(err, errlen,
					 "--seccomp: '%.200s' is not enforce, log or off", optarg);
				return CLI_ERROR;
			}
			break;
		case OPT_PIN_DIR:
			if (!*optarg || strlen(optarg) >= sizeof(o->pin)) {
				snprintf(err, errlen, "--pin: '%.200s' is not a directory name",
					 optarg);
				return CLI_ERROR;
			}
			snprintf(o->pin, sizeof(o->pin), "%s", optarg);
			break;
		case OPT_PIN_CAPACITY:
			if (parse_uint(optarg, 1024, 1u << 24, &o->pin_capacity)) {
				snprintf(err, errlen,
					 "--pin-capacity: '%s' is not in 1024..16777216", optarg);
				return CLI_ERROR;
			}
			break;
		case OPT_WAIT_CAPACITY:
			if (parse_uint(optarg, 64, 1u << 22, &o->wait_capacity)) {
				snprintf(err, errlen, "--wait-capacity: '%s' is not in 64..4194304",
					 optarg);
				return CLI_ERROR;
			}
			break;
		default:
			return CLI_ERROR;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
		return CLI_ERROR;
	}
	return CLI_OK;
}

static int parse_duration_opt(const char *opt, const char *arg, unsigned int min_ms,
			      unsigned int *ms, char *err, size_t errlen)
{
	if (cli_parse_duration_ms(arg, ms) || *ms < min_ms) {
		snprintf(err, errlen, "%s: '%s' is not a duration of at least %ums", opt, arg,
			 min_ms);
		return -EINVAL;
	}
	return 0;
}

/* --count N of the views: 1..2^30 */
static int parse_count_opt(const char *arg, long *count, char *err, size_t errlen)
{
	unsigned int n;

	if (parse_uint(arg, 1, 1u << 30, &n)) {
		snprintf(err, errlen, "--count: '%s' is not a positive number", arg);
		return -EINVAL;
	}
	*count = n;
	return 0;
}

enum cli_result cli_parse_io(int argc, char **argv, struct io_options *o, char *err, size_t errlen)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "io-capacity", required_argument, NULL, OPT_IO_CAPACITY },
		{ "no-io-latency", no_argument, NULL, OPT_NO_LATENCY },
		{ "io-latency-sample", required_argument, NULL, OPT_LATENCY_SAMPLE },
		{ 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->interval_ms = 1000;
	o->io_capacity = 4096;
	o->io_latency = true;
	o->io_latency_sample = PLUMB_DEFAULT_LATENCY_SAMPLE;
	optind = 0;
	opterr = 0;
	while ((c = next_opt(argc, argv, opts, ":i:c:jvh", err, errlen)) != -1) {
		switch (c) {
		case 'i':
			if (parse_duration_opt("--interval", optarg, 100, &o->interval_ms, err,
					       errlen))
				return CLI_ERROR;
			break;
		case 'c':
			if (parse_count_opt(optarg, &o->count, err, errlen))
				return CLI_ERROR;
			break;
		case 'j':
			o->json = true;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			return CLI_HELP;
		case OPT_IO_CAPACITY:
			if (parse_uint(optarg, 16, 1u << 20, &o->io_capacity)) {
				snprintf(err, errlen, "--io-capacity: '%s' is not in 16..1048576",
					 optarg);
				return CLI_ERROR;
			}
			break;
		case OPT_NO_LATENCY:
			o->io_latency = false;
			break;
		case OPT_LATENCY_SAMPLE:
			if (parse_sample_period(optarg, &o->io_latency_sample, err, errlen))
				return CLI_ERROR;
			break;
		default:
			return CLI_ERROR;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
		return CLI_ERROR;
	}
	return CLI_OK;
}

const char *const top_col_names[TOP_COLS] = {
	[TOP_COL_CPU] = "cpu",	 [TOP_COL_RUNQ] = "runq", [TOP_COL_BLOCK] = "block",
	[TOP_COL_WAIT] = "wait", [TOP_COL_READ] = "read", [TOP_COL_WRITE] = "write",
	[TOP_COL_NET] = "net",	 [TOP_COL_NAME] = "name",
};

enum cli_result cli_parse_top(int argc, char **argv, struct top_options *o, char *err,
			      size_t errlen)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "sort", required_argument, NULL, 's' },
		{ "filter", required_argument, NULL, 'f' },
		{ "batch", no_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, k;

	memset(o, 0, sizeof(*o));
	o->interval_ms = 1000;
	o->sort = TOP_COL_CPU;
	optind = 0;
	opterr = 0;
	while ((c = next_opt(argc, argv, opts, ":i:c:s:f:bjvh", err, errlen)) != -1) {
		switch (c) {
		case 'i':
			if (parse_duration_opt("--interval", optarg, 250, &o->interval_ms, err,
					       errlen))
				return CLI_ERROR;
			break;
		case 'c':
			if (parse_count_opt(optarg, &o->count, err, errlen))
				return CLI_ERROR;
			break;
		case 's':
			for (k = 0; k < TOP_COLS && strcmp(optarg, top_col_names[k]); k++)
				;
			if (k == TOP_COLS) {
				snprintf(err, errlen,
					 "--sort: '%s' is not one of cpu, runq, block, wait, read, "
					 "write, net, name",
					 optarg);
				return CLI_ERROR;
			}
			o->sort = k;
			break;
		case 'f':
			if (strlen(optarg) >= sizeof(o->filter)) {
				snprintf(err, errlen, "--filter: longer than %zu characters",
					 sizeof(o->filter) - 1);
				return CLI_ERROR;
			}
			snprintf(o->filter, sizeof(o->filter), "%s", optarg);
			break;
		case 'b':
			o->batch = true;
			break;
		case 'j':
			o->json = true;
			o->batch = true;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			return CLI_HELP;
		default:
			return CLI_ERROR;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
		return CLI_ERROR;
	}
	return CLI_OK;
}

static int copy_path(char *dst, size_t len, const char *opt, const char *arg, char *err,
		     size_t errlen)
{
	if (!*arg || strlen(arg) >= len) {
		snprintf(err, errlen, "%s: '%.64s%s' is not a file name", opt, arg,
			 strlen(arg) > 64 ? "..." : "");
		return -EINVAL;
	}
	memcpy(dst, arg, strlen(arg) + 1);
	return 0;
}

enum cli_result cli_parse_place(int argc, char **argv, struct place_options *o, char *err,
				size_t errlen)
{
	static const struct option opts[] = {
		{ "graph", required_argument, NULL, 'g' },
		{ "hosts", required_argument, NULL, 'H' },
		{ "format", required_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "max-moves", required_argument, NULL, OPT_MAX_MOVES },
		{ "pin", required_argument, NULL, OPT_PIN },
		{ "peers", required_argument, NULL, OPT_PEERS },
		{ 0 },
	};
	static const char *const formats[] = { "table", "json", "k8s" };
	unsigned int n;
	size_t k;
	int c;

	memset(o, 0, sizeof(*o));
	o->format = PLACE_FORMAT_TABLE;
	o->max_moves = -1;
	o->peers = PLACE_DEFAULT_PEERS;
	optind = 0;
	opterr = 0;
	while ((c = next_opt(argc, argv, opts, ":g:H:f:vh", err, errlen)) != -1) {
		switch (c) {
		case 'g':
			if (copy_path(o->graph, sizeof(o->graph), "--graph", optarg, err, errlen))
				return CLI_ERROR;
			break;
		case 'H':
			if (copy_path(o->hosts, sizeof(o->hosts), "--hosts", optarg, err, errlen))
				return CLI_ERROR;
			break;
		case 'f':
			for (k = 0; k < 3 && strcmp(optarg, formats[k]); k++)
				;
			if (k == 3) {
				snprintf(err, errlen, "--format: '%s' is not table, json or k8s",
					 optarg);
				return CLI_ERROR;
			}
			o->format = (enum place_format)k;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			return CLI_HELP;
		case OPT_MAX_MOVES:
			if (parse_uint(optarg, 0, 1u << 30, &n)) {
				snprintf(err, errlen, "--max-moves: '%s' is not a number in 0..%u",
					 optarg, 1u << 30);
				return CLI_ERROR;
			}
			o->max_moves = n;
			break;
		case OPT_PIN:
			if (o->npins == PLACE_MAX_PINS) {
				snprintf(err, errlen, "--pin: at most %d patterns", PLACE_MAX_PINS);
				return CLI_ERROR;
			}
			if (!*optarg || strlen(optarg) >= sizeof(o->pins[0])) {
				snprintf(err, errlen, "--pin: a pattern of 1 to %zu characters",
					 sizeof(o->pins[0]) - 1);
				return CLI_ERROR;
			}
			memcpy(o->pins[o->npins++], optarg, strlen(optarg) + 1);
			break;
		case OPT_PEERS:
			if (parse_uint(optarg, 0, 16, &o->peers)) {
				snprintf(err, errlen, "--peers: '%s' is not in 0..16", optarg);
				return CLI_ERROR;
			}
			break;
		default:
			return CLI_ERROR;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
		return CLI_ERROR;
	}
	if (!*o->graph || !*o->hosts) {
		snprintf(err, errlen, "%s is required",
			 *o->graph ? "--hosts FILE" : "--graph FILE");
		return CLI_ERROR;
	}
	return CLI_OK;
}

int cli_parse_url(const char *s, const char *default_path, char *out, size_t outlen)
{
	const char *host, *path;
	char buf[CLI_URL_MAX];
	size_t len;
	int n;

	if (!strncasecmp(s, "http://", 7))
		host = s + 7;
	else if (!strncasecmp(s, "https://", 8))
		host = s + 8;
	else
		return -EINVAL;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return -EINVAL;
	path = host + strcspn(host, "/?#");
	if (path == host || *path == '?' || *path == '#')
		return -EINVAL; /* no host, or a query where the path should be */
	if (default_path) {
		if (!*path || !strcmp(path, "/"))
			n = snprintf(buf, sizeof(buf), "%.*s%s", (int)(path - s), s, default_path);
		else
			n = snprintf(buf, sizeof(buf), "%s", s);
	} else {
		if (strpbrk(path, "?#"))
			return -EINVAL; /* a base URL gets a path and a query appended */
		len = strlen(s);
		while (len > (size_t)(path - s) && s[len - 1] == '/')
			len--;
		n = snprintf(buf, sizeof(buf), "%.*s", (int)len, s);
	}
	if (n < 0 || (size_t)n >= sizeof(buf) || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, buf, (size_t)n + 1);
	return 0;
}

/* One --from value: a comma list of agent URLs, added to o->from. */
static int parse_from(const char *s, struct graph_options *o, char *err, size_t errlen)
{
	const char *p = s;

	for (;;) {
		size_t len = strcspn(p, ",");
		char url[CLI_URL_MAX];
		int ret;

		if (!len) {
			snprintf(err, errlen, "--from: an empty URL in '%s'", s);
			return -EINVAL;
		}
		if (o->nfrom == CLI_GRAPH_MAX_SOURCES) {
			snprintf(err, errlen, "--from: more than %d agents", CLI_GRAPH_MAX_SOURCES);
			return -E2BIG;
		}
		ret = -ENAMETOOLONG;
		if (len < sizeof(url)) {
			memcpy(url, p, len);
			url[len] = '\0';
			ret = cli_parse_url(url, CLI_GRAPH_PATH, o->from[o->nfrom],
					    sizeof(o->from[0]));
		}
		if (ret == -ENAMETOOLONG) {
			snprintf(err, errlen,
				 "--from: '%.*s' is too long (with %s, at most %d characters)",
				 (int)len, p, CLI_GRAPH_PATH, CLI_URL_MAX - 1);
			return ret;
		}
		if (ret) {
			snprintf(err, errlen, "--from: '%.*s' is not an http:// or https:// URL",
				 (int)len, p);
			return ret;
		}
		o->nfrom++;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

static int parse_choice(const char *s, const char *const *names, size_t n, int *out)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, names[i])) {
			*out = (int)i;
			return 0;
		}
	return -EINVAL;
}

static enum cli_result parse_graph(int argc, char **argv, struct graph_options *o, char *err,
				   size_t errlen)
{
	static const struct option opts[] = {
		{ "projection", required_argument, NULL, 'p' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "from", required_argument, NULL, OPT_FROM },
		{ "prometheus", required_argument, NULL, OPT_PROMETHEUS },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ 0 },
	};
	unsigned int ms;
	int c, k;

	memset(o, 0, sizeof(*o));
	o->projection = GRAPH_PROJECT_PROCESS;
	o->format = GRAPH_FORMAT_TABLE;
	o->window_s = 300;
	optind = 0;
	opterr = 0;
	while ((c = next_opt(argc, argv, opts, ":p:f:o:h", err, errlen)) != -1) {
		switch (c) {
		case 'p':
			if (parse_choice(optarg, graph_projection_names, 3, &k)) {
				snprintf(err, errlen,
					 "--projection: '%s' is not process, type or host", optarg);
				return CLI_ERROR;
			}
			o->projection = (enum graph_projection)k;
			break;
		case 'f':
			if (parse_choice(optarg, graph_format_names, 4, &k)) {
				snprintf(err, errlen,
					 "--format: '%s' is not table, json, dot or svg", optarg);
				return CLI_ERROR;
			}
			o->format = (enum graph_format)k;
			break;
		case 'o':
			if (!*optarg || strlen(optarg) >= sizeof(o->output)) {
				snprintf(err, errlen, "--output: '%s' is not a file name", optarg);
				return CLI_ERROR;
			}
			snprintf(o->output, sizeof(o->output), "%s", optarg);
			break;
		case 'h':
			return CLI_HELP;
		case OPT_FROM:
			if (parse_from(optarg, o, err, errlen))
				return CLI_ERROR;
			break;
		case OPT_PROMETHEUS:
			if (cli_parse_url(optarg, NULL, o->prometheus, sizeof(o->prometheus))) {
				snprintf(
					err, errlen,
					"--prometheus: '%s' is not an http:// or https:// base URL "
					"(no query, at most %d characters)",
					optarg, CLI_URL_MAX - 1);
				return CLI_ERROR;
			}
			break;
		case OPT_WINDOW:
			if (cli_parse_duration_ms(optarg, &ms) || ms % 1000 || ms < 1000) {
				snprintf(err, errlen,
					 "--window: '%s' is not a duration in whole seconds of at "
					 "least 1s",
					 optarg);
				return CLI_ERROR;
			}
			o->window_s = ms / 1000;
			o->window_set = true;
			break;
		default:
			return CLI_ERROR;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
		return CLI_ERROR;
	}
	if (o->nfrom && o->prometheus[0]) {
		snprintf(err, errlen, "--from and --prometheus cannot be used together");
		return CLI_ERROR;
	}
	if (!o->nfrom && !o->prometheus[0]) {
		snprintf(o->from[0], sizeof(o->from[0]), "http://%s:%u%s", PLUMB_DEFAULT_ADDR,
			 PLUMB_DEFAULT_PORT, CLI_GRAPH_PATH);
		o->nfrom = 1;
	}
	return CLI_OK;
}

/* err echoes what was typed: control characters in it would break the one-line message */
enum cli_result cli_parse_graph(int argc, char **argv, struct graph_options *o, char *err,
				size_t errlen)
{
	enum cli_result r = parse_graph(argc, argv, o, err, errlen);

	for (char *c = err; r == CLI_ERROR && errlen && *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return r;
}

enum cli_result cli_parse_netstack(int argc, char **argv, struct netstack_options *o, char *err,
				   size_t errlen)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'n' },
		{ "dev", required_argument, NULL, OPT_DEV },
		{ "netns", required_argument, NULL, OPT_NETNS },
		{ "record", required_argument, NULL, OPT_RECORD },
		{ "baseline", required_argument, NULL, OPT_BASELINE },
		{ "sample", required_argument, NULL, OPT_NETSTACK_SAMPLE },
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->interval_ms = 1000;
	o->sample = PLUMB_DEFAULT_NETSTACK_SAMPLE;
	optind = 0;
	opterr = 0;
	while ((c = next_opt(argc, argv, opts, ":i:n:jvh", err, errlen)) != -1) {
		switch (c) {
		case 'i':
			if (parse_duration_opt("--interval", optarg, 100, &o->interval_ms, err,
					       errlen))
				return CLI_ERROR;
			break;
		case 'n':
			if (parse_count_opt(optarg, &o->count, err, errlen))
				return CLI_ERROR;
			break;
		case OPT_DEV:
			if (!*optarg || strlen(optarg) >= 16) {
				snprintf(err, errlen, "--dev: '%s' is not a device name", optarg);
				return CLI_ERROR;
			}
			snprintf(o->dev, sizeof(o->dev), "%s", optarg);
			break;
		case OPT_NETNS:
			if (!*optarg || strlen(optarg) >= sizeof(o->netns)) {
				snprintf(err, errlen, "--netns: '%s' is not a namespace name",
					 optarg);
				return CLI_ERROR;
			}
			snprintf(o->netns, sizeof(o->netns), "%s", optarg);
			break;
		case OPT_RECORD:
			if (copy_path(o->record, sizeof(o->record), "--record", optarg, err,
				      errlen))
				return CLI_ERROR;
			break;
		case OPT_BASELINE:
			if (copy_path(o->baseline, sizeof(o->baseline), "--baseline", optarg, err,
				      errlen))
				return CLI_ERROR;
			break;
		case OPT_NETSTACK_SAMPLE:
			if (parse_uint(optarg, 1, 65536, &o->sample)) {
				snprintf(err, errlen, "--sample: '%s' is not in 1..65536", optarg);
				return CLI_ERROR;
			}
			break;
		case 'j':
			o->json = true;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			return CLI_HELP;
		default:
			return CLI_ERROR;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
		return CLI_ERROR;
	}
	return CLI_OK;
}

enum cli_result cli_parse_diagnose(int argc, char **argv, struct diagnose_options *o, char *err,
				   size_t errlen)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'g' },
		{ "comm", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'd' },
		{ "interval", required_argument, NULL, 'i' },
		{ "baseline-duration", required_argument, NULL, OPT_BASELINE_DURATION },
		{ "baseline", required_argument, NULL, OPT_BASELINE },
		{ "record", required_argument, NULL, OPT_RECORD },
		{ "explain-tracking", no_argument, NULL, OPT_EXPLAIN },
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	unsigned int pid;
	bool baseline_duration = false;
	int c, seeds = 0;

	memset(o, 0, sizeof(*o));
	o->duration_ms = 30000;
	o->interval_ms = 1000;
	o->baseline_ms = 10000;
	optind = 0;
	opterr = 0;
	while ((c = next_opt(argc, argv, opts, ":p:g:c:d:i:jvh", err, errlen)) != -1) {
		switch (c) {
		case 'p':
			if (parse_uint(optarg, 1, 1u << 22, &pid)) {
				snprintf(err, errlen, "--pid: '%s' is not a process id", optarg);
				return CLI_ERROR;
			}
			o->pid = (int)pid;
			seeds++;
			break;
		case 'g':
			if (copy_path(o->cgroup, sizeof(o->cgroup), "--cgroup", optarg, err,
				      errlen))
				return CLI_ERROR;
			seeds++;
			break;
		case 'c':
			if (copy_path(o->comm, sizeof(o->comm), "--comm", optarg, err, errlen))
				return CLI_ERROR;
			seeds++;
			break;
		case 'd':
			if (parse_duration_opt("--duration", optarg, 1000, &o->duration_ms, err,
					       errlen))
				return CLI_ERROR;
			break;
		case 'i':
			if (parse_duration_opt("--interval", optarg, 100, &o->interval_ms, err,
					       errlen))
				return CLI_ERROR;
			break;
		case OPT_BASELINE_DURATION:
			if (parse_duration_opt("--baseline-duration", optarg, 100, &o->baseline_ms,
					       err, errlen))
				return CLI_ERROR;
			baseline_duration = true;
			break;
		case OPT_BASELINE:
			if (copy_path(o->baseline, sizeof(o->baseline), "--baseline", optarg, err,
				      errlen))
				return CLI_ERROR;
			break;
		case OPT_RECORD:
			if (copy_path(o->record, sizeof(o->record), "--record", optarg, err,
				      errlen))
				return CLI_ERROR;
			break;
		case OPT_EXPLAIN:
			o->explain = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			return CLI_HELP;
		default:
			return CLI_ERROR;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
		return CLI_ERROR;
	}
	if (seeds != 1) {
		snprintf(err, errlen, "give exactly one of --pid, --cgroup, --comm");
		return CLI_ERROR;
	}
	if (o->baseline[0] && baseline_duration) {
		snprintf(err, errlen, "--baseline and --baseline-duration exclude each other");
		return CLI_ERROR;
	}
	if (o->baseline[0])
		o->baseline_ms = 0;
	if (o->interval_ms > o->duration_ms) {
		snprintf(err, errlen, "--interval is longer than --duration");
		return CLI_ERROR;
	}
	if (o->baseline_ms / o->interval_ms < 3 && !o->baseline[0]) {
		snprintf(err, errlen, "--baseline-duration: at least 3 intervals are needed");
		return CLI_ERROR;
	}
	if (o->duration_ms / o->interval_ms < o->baseline_ms / o->interval_ms + 3) {
		snprintf(err, errlen,
			 "--duration leaves fewer than 3 intervals after the baseline");
		return CLI_ERROR;
	}
	return CLI_OK;
}
