// SPDX-License-Identifier: GPL-2.0
/*
 * --web-config: the exporter-toolkit's YAML (tls_server_config, basic_auth_users), read with
 * libyaml's event parser. Strict like the toolkit: an unknown key is an error, and so is a key
 * of the toolkit's that plumb does not implement (it would otherwise be silently ignored: a
 * client_ca_file that checks nobody).
 */
#include <crypt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "export/webconfig.h"

#define WEB_CONFIG_MAX_BYTES (1 << 20)

struct parse {
	yaml_parser_t parser;
	yaml_event_t ev;
	bool have; /* ev holds an event to delete */
	char *err;
	size_t errlen;
};

static int fail(struct parse *p, const char *fmt, const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, what);
	snprintf(p->err, p->errlen, "line %zu: %s",
		 p->have ? p->ev.start_mark.line + 1 : p->parser.problem_mark.line + 1, msg);
	return -EINVAL;
}

/* The next event; aliases are refused (a billion laughs needs no more than that). */
static int next(struct parse *p)
{
	if (p->have)
		yaml_event_delete(&p->ev);
	p->have = false;
	if (!yaml_parser_parse(&p->parser, &p->ev))
		return fail(p, "not YAML: %s",
			    p->parser.problem ? p->parser.problem : "cannot parse");
	p->have = true;
	if (p->ev.type == YAML_ALIAS_EVENT)
		return fail(p, "%s", "aliases are not supported");
	return 0;
}

static const char *scalar(const struct parse *p)
{
	return (const char *)p->ev.data.scalar.value;
}

/* A scalar value into out (bounded), or an error naming key. */
static int value(struct parse *p, const char *key, char *out, size_t outlen)
{
	int err = next(p);

	if (err)
		return err;
	if (p->ev.type != YAML_SCALAR_EVENT)
		return fail(p, "%s: expected a plain value", key);
	if (p->ev.data.scalar.length >= outlen)
		return fail(p, "%s: too long", key);
	if (strlen(scalar(p)) != p->ev.data.scalar.length)
		return fail(p, "%s: a NUL byte in the value", key);
	memcpy(out, scalar(p), p->ev.data.scalar.length + 1);
	return 0;
}

static int tls_version(struct parse *p, const char *key, int *out)
{
	char v[16];
	int err = value(p, key, v, sizeof(v));

	if (err)
		return err;
	if (!strcmp(v, "TLS12"))
		*out = 12;
	else if (!strcmp(v, "TLS13"))
		*out = 13;
	else if (!strcmp(v, "TLS10") || !strcmp(v, "TLS11"))
		return fail(p, "%s: plumb serves TLS 1.2 and 1.3 only", key);
	else
		return fail(p, "%s: not TLS12 or TLS13", key);
	return 0;
}

/* A path relative to the config file's directory. */
static int path_value(struct parse *p, const char *key, const char *dir, char *out, size_t len)
{
	char v[PATH_MAX];
	int err = value(p, key, v, sizeof(v));

	if (err)
		return err;
	if (!v[0])
		return fail(p, "%s: empty", key);
	if (v[0] != '/' && dir ? snprintf(out, len, "%s/%s", dir, v) >= (int)len :
				 snprintf(out, len, "%s", v) >= (int)len)
		return fail(p, "%s: too long", key);
	return 0;
}

/* Whether key was seen already in this mapping (bit i of *seen for names[i]). */
static int once(struct parse *p, const char *const *names, size_t n, unsigned int *seen)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(scalar(p), names[i]))
			continue;
		if (*seen & (1u << i))
			return fail(p, "%s: given twice", names[i]);
		*seen |= 1u << i;
		return (int)i;
	}
	return -1;
}

static int tls_section(struct parse *p, const char *dir, struct web_config *c)
{
	static const char *const keys[] = { "cert_file", "key_file", "min_version", "max_version" };
	/* the toolkit's, not implemented here: refused rather than ignored */
	static const char *const unsupported[] = {
		"client_auth_type",
		"client_ca_file",
		"cipher_suites",
		"curve_preferences",
		"prefer_server_cipher_suites",
		"client_allowed_sans",
		"cert",
		"key",
	};
	unsigned int seen = 0;
	int err = next(p), k;

	if (err)
		return err;
	if (p->ev.type != YAML_MAPPING_START_EVENT)
		return fail(p, "%s: expected a mapping", "tls_server_config");
	while (!(err = next(p)) && p->ev.type != YAML_MAPPING_END_EVENT) {
		if (p->ev.type != YAML_SCALAR_EVENT)
			return fail(p, "%s: expected a key", "tls_server_config");
		k = once(p, keys, 4, &seen);
		if (k == -EINVAL)
			return k;
		if (k < 0) {
			for (size_t i = 0; i < sizeof(unsupported) / sizeof(*unsupported); i++)
				if (!strcmp(scalar(p), unsupported[i]))
					return fail(p,
						    "tls_server_config.%s: not supported by plumb",
						    scalar(p));
			return fail(p, "tls_server_config.%s: unknown key", scalar(p));
		}
		if (k == 0)
			err = path_value(p, "cert_file", dir, c->cert_file, sizeof(c->cert_file));
		else if (k == 1)
			err = path_value(p, "key_file", dir, c->key_file, sizeof(c->key_file));
		else
			err = tls_version(p, keys[k], k == 2 ? &c->min_version : &c->max_version);
		if (err)
			return err;
	}
	if (err)
		return err;
	if (!(seen & 1) || !(seen & 2))
		return fail(p, "%s: needs cert_file and key_file", "tls_server_config");
	if (c->min_version > c->max_version)
		return fail(p, "%s: min_version above max_version", "tls_server_config");
	c->tls = true;
	return 0;
}

static bool bcrypt_hash(const char *h)
{
	return strlen(h) == 60 && h[0] == '$' && h[1] == '2' && strchr("aby", h[2]) &&
	       h[3] == '$' && h[6] == '$';
}

static int users_section(struct parse *p, struct web_config *c)
{
	int err = next(p);

	if (err)
		return err;
	if (p->ev.type == YAML_SCALAR_EVENT && !p->ev.data.scalar.length)
		return 0; /* "basic_auth_users:" with nothing: no users */
	if (p->ev.type != YAML_MAPPING_START_EVENT)
		return fail(p, "%s: expected a mapping of user: bcrypt hash", "basic_auth_users");
	while (!(err = next(p)) && p->ev.type != YAML_MAPPING_END_EVENT) {
		struct web_user *u = &c->users[c->nusers];

		if (p->ev.type != YAML_SCALAR_EVENT || !p->ev.data.scalar.length)
			return fail(p, "%s: expected a user name", "basic_auth_users");
		if (c->nusers == WEB_USERS_MAX)
			return fail(p, "basic_auth_users: more than %s users", "64");
		if (p->ev.data.scalar.length >= sizeof(u->name) || strchr(scalar(p), ':'))
			return fail(p, "basic_auth_users: user '%.64s': too long or has a ':'",
				    scalar(p));
		snprintf(u->name, sizeof(u->name), "%s", scalar(p));
		for (size_t i = 0; i < c->nusers; i++)
			if (!strcmp(c->users[i].name, u->name))
				return fail(p, "basic_auth_users: user '%.64s' given twice",
					    u->name);
		err = value(p, "basic_auth_users", u->hash, sizeof(u->hash));
		if (err)
			return err;
		if (!bcrypt_hash(u->hash))
			return fail(p,
				    "basic_auth_users: user '%.64s': not a bcrypt hash ($2b$...)",
				    u->name);
		c->nusers++;
	}
	return err;
}

int web_config_parse(const char *text, size_t len, const char *dir, struct web_config *out,
		     char *err, size_t errlen)
{
	struct parse p = { .err = err, .errlen = errlen };
	unsigned int seen = 0;
	static const char *const keys[] = { "tls_server_config", "basic_auth_users" };
	int ret, k;

	memset(out, 0, sizeof(*out));
	out->min_version = 12;
	out->max_version = 13;
	if (!yaml_parser_initialize(&p.parser)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&p.parser, (const unsigned char *)text, len);
	/* stream start, then a document (or none: an empty file configures nothing) */
	if ((ret = next(&p)) || (ret = next(&p)))
		goto out;
	if (p.ev.type == YAML_STREAM_END_EVENT)
		goto out;
	if ((ret = next(&p)))
		goto out;
	if (p.ev.type == YAML_SCALAR_EVENT && !p.ev.data.scalar.length)
		goto end; /* a document with nothing in it */
	if (p.ev.type != YAML_MAPPING_START_EVENT) {
		ret = fail(&p, "%s", "expected a mapping at the top");
		goto out;
	}
	while (!(ret = next(&p)) && p.ev.type != YAML_MAPPING_END_EVENT) {
		if (p.ev.type != YAML_SCALAR_EVENT) {
			ret = fail(&p, "%s", "expected a key");
			goto out;
		}
		k = once(&p, keys, 2, &seen);
		if (k == -EINVAL) {
			ret = k;
			goto out;
		}
		if (k == 0)
			ret = tls_section(&p, dir, out);
		else if (k == 1)
			ret = users_section(&p, out);
		else if (!strcmp(scalar(&p), "http_server_config"))
			ret = fail(&p, "%s: not supported by plumb", scalar(&p));
		else
			ret = fail(&p, "%.64s: unknown key", scalar(&p));
		if (ret)
			goto out;
	}
	if (ret)
		goto out;
end:
	/* one document only */
	if ((ret = next(&p)))
		goto out;
	if (p.ev.type != YAML_DOCUMENT_END_EVENT) {
		ret = fail(&p, "%s", "more than one value at the top");
		goto out;
	}
	if ((ret = next(&p)))
		goto out;
	if (p.ev.type != YAML_STREAM_END_EVENT)
		ret = fail(&p, "%s", "more than one document");
out:
	if (p.have)
		yaml_event_delete(&p.ev);
	yaml_parser_delete(&p.parser);
	return ret;
}

int web_config_load(const char *path, struct web_config *out, char *err, size_t errlen)
{
	char dir[PATH_MAX], *text, *slash, why[256];
	FILE *f = fopen(path, "r");
	size_t len;
	int ret;

	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	text = malloc(WEB_CONFIG_MAX_BYTES + 1);
	if (!text) {
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	len = fread(text, 1, WEB_CONFIG_MAX_BYTES + 1, f);
	ret = ferror(f) ? -EIO : 0;
	fclose(f);
	if (!ret && len > WEB_CONFIG_MAX_BYTES)
		ret = -EFBIG;
	if (ret) {
		snprintf(err, errlen, "%s: %s", path,
			 ret == -EFBIG ? "larger than 1 MiB" : "cannot read");
		free(text);
		return ret;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	ret = web_config_parse(text, len, slash ? (dir[0] ? dir : "/") : ".", out, why,
			       sizeof(why));
	free(text);
	if (ret)
		snprintf(err, errlen, "%s: %s", path, why);
	return ret;
}

/* Compares all of a and b whatever their first difference: no timing to learn from. */
static bool same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return !d;
}

bool web_config_check(const struct web_config *c, const char *user, const char *password)
{
	/* an unknown user's password is hashed too, at the usual cost */
	static const char dummy[] = "$2b$10$abcdefghijklmnopqrstuu4T826PRnz0Hu6YlprUuxkZxOOj5Fw5S";
	const char *hash = dummy, *got;
	struct crypt_data *cd = calloc(1, sizeof(*cd));
	bool ok;

	if (!cd)
		return false;
	for (size_t i = 0; i < c->nusers; i++)
		if (!strcmp(c->users[i].name, user))
			hash = c->users[i].hash;
	got = crypt_r(password, hash, cd);
	ok = hash != dummy && got && got[0] != '*' && same(got, hash);
	free(cd);
	return ok;
}
