/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The agent's --web-config file, in the Prometheus exporter-toolkit's format (a subset of it:
 * docs/security.md): TLS (certificate, key, minimum and maximum version) and basic auth with
 * bcrypt-hashed passwords. No I/O in the parser: unit-tested and fuzzed.
 */
#ifndef PLUMB_EXPORT_WEBCONFIG_H
#define PLUMB_EXPORT_WEBCONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define WEB_USERS_MAX 64

struct web_user {
	char name[64];
	char hash[128]; /* bcrypt: $2a$, $2b$ or $2y$ */
};

struct web_config {
	bool tls; /* tls_server_config given: cert_file and key_file set */
	char cert_file[PATH_MAX], key_file[PATH_MAX]; /* relative ones: to the file's directory */
	int min_version, max_version; /* 12 (TLS 1.2) or 13 (TLS 1.3) */
	struct web_user users[WEB_USERS_MAX];
	size_t nusers;
};

/*
 * Parses the text of a web config; dir resolves relative certificate paths (NULL: as given).
 * 0, or -EINVAL with a one-line reason (and its line) in err.
 */
int web_config_parse(const char *text, size_t len, const char *dir, struct web_config *out,
		     char *err, size_t errlen);

/* Reads and parses path: 0, or -errno with a one-line reason in err. */
int web_config_load(const char *path, struct web_config *out, char *err, size_t errlen);

/* Whether password is user's (bcrypt, through crypt_r); unknown users cost a hash too. */
bool web_config_check(const struct web_config *c, const char *user, const char *password);

#endif
