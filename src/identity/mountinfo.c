// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/<pid>/mountinfo, as proc(5) and fs/proc_namespace.c:show_mountinfo() write it:
 *
 *   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
 *   (1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
 *
 * Fields are separated by single spaces. The kernel escapes space, tab, newline and backslash in
 * every string field as \ooo (mangle() in fs/proc_namespace.c), so no field contains a space;
 * but a field may be empty (a mount whose source is "" prints two spaces in a row), which is why
 * the line is split on each space rather than on runs of them. The optional fields (7) are zero
 * or more "tag[:value]" up to the lone "-" (8).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "identity/mountinfo.h"
#include "log.h"

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool is_octal(char ch)
{
	return ch >= '0' && ch <= '7';
}

static int parse_u32(const char *s, uint32_t *v)
{
	unsigned long x;
	char *end;

	/* strtoul would also take leading blanks and a sign. */
	if (!is_digit(*s))
		return -EINVAL;
	errno = 0;
	x = strtoul(s, &end, 10);
	if (errno || *end || x > UINT32_MAX)
		return -EINVAL;
	*v = x;
	return 0;
}

/* Undoes the kernel's \ooo escapes in place. */
static void unescape_octal(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && is_octal(s[1]) && is_octal(s[2]) && is_octal(s[3])) {
			*w++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* Frees the strings of one entry; free(NULL) makes this safe on a half-filled one. */
static void mount_entry_free(struct mount_entry *e)
{
	free(e->root);
	free(e->mount_point);
	free(e->fstype);
	free(e->source);
}

/* Parses one line (modified in place) into e; -EINVAL with *why set, or -ENOMEM. */
static int parse_line(char *line, struct mount_entry *e, const char **why)
{
	char *field[6], *tok, *fstype, *source, *minor;
	char *p = line;

	memset(e, 0, sizeof(*e));
	for (int i = 0; i < 6; i++) {
		field[i] = strsep(&p, " ");
		if (!field[i]) {
			*why = "fewer than 6 fields before the separator";
			return -EINVAL;
		}
	}
	do {
		tok = strsep(&p, " ");
		if (!tok) {
			*why = "no \" - \" separator";
			return -EINVAL;
		}
	} while (strcmp(tok, "-"));
	fstype = strsep(&p, " ");
	source = strsep(&p, " ");
	/* p is now the super options, which the kernel always prints. */
	if (!fstype || !source || !p || !*fstype) {
		*why = "fewer than 3 fields after the separator";
		return -EINVAL;
	}

	minor = strchr(field[2], ':');
	if (minor)
		*minor++ = '\0';
	if (parse_u32(field[0], &e->mnt_id) || parse_u32(field[1], &e->parent_id) || !minor ||
	    parse_u32(field[2], &e->major) || parse_u32(minor, &e->minor)) {
		*why = "bad mount id, parent id or major:minor";
		return -EINVAL;
	}
	/* The root may be a non-path such as "net:[4026531840]" (nsfs); the mount point is a path. */
	if (!*field[3] || field[4][0] != '/') {
		*why = "empty root or relative mount point";
		return -EINVAL;
	}

	unescape_octal(field[3]);
	unescape_octal(field[4]);
	unescape_octal(fstype);
	unescape_octal(source);
	e->root = strdup(field[3]);
	e->mount_point = strdup(field[4]);
	e->fstype = strdup(fstype);
	e->source = strdup(source);
	if (!e->root || !e->mount_point || !e->fstype || !e->source) {
		mount_entry_free(e);
		return -ENOMEM;
	}
	return 0;
}

int mountinfo_parse(FILE *f, struct mount_table *t)
{
	size_t line_size = 0, lineno = 0, alloc = 0;
	const char *why = "";
	char *line = NULL;
	ssize_t len;
	int err = 0;

	t->v = NULL;
	t->n = 0;
	for (errno = 0; (len = getline(&line, &line_size, f)) >= 0; errno = 0) {
		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		/* The kernel writes none; tolerate them in hand-written input. */
		if (!len)
			continue;
		if (t->n == alloc) {
			size_t n = alloc ? 2 * alloc : 64;
			struct mount_entry *v = realloc(t->v, n * sizeof(*v));

			if (!v) {
				err = -ENOMEM;
				goto out_free;
			}
			t->v = v;
			alloc = n;
		}
		err = parse_line(line, &t->v[t->n], &why);
		if (err) {
			if (err == -EINVAL)
				pr_debug("mountinfo: line %zu malformed: %s\n", lineno, why);
			goto out_free;
		}
		t->n++;
	}
	/* getline() returns -1 both at the end and on an error; only an error sets errno. */
	if (errno)
		err = -errno;
out_free:
	free(line);
	if (err)
		mount_table_free(t);
	return err;
}

int mountinfo_load(const char *path, struct mount_table *t)
{
	FILE *f = fopen(path, "re");
	int err;

	if (!f) {
		t->v = NULL;
		t->n = 0;
		return -errno;
	}
	err = mountinfo_parse(f, t);
	fclose(f);
	return err;
}

void mount_table_free(struct mount_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		mount_entry_free(&t->v[i]);
	free(t->v);
	t->v = NULL;
	t->n = 0;
}

/* A linear scan: a host has hundreds of mounts, and callers cache what they resolve. */
const struct mount_entry *mount_table_find(const struct mount_table *t, uint32_t mnt_id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].mnt_id == mnt_id)
			return &t->v[i];
	return NULL;
}

/* Whether prefix is path or one of its ancestors, component-wise. */
static bool is_path_prefix(const char *prefix, const char *path)
{
	size_t n = strlen(prefix);

	if (n == 1 && prefix[0] == '/')
		return path[0] == '/';
	return !strncmp(prefix, path, n) && (path[n] == '\0' || path[n] == '/');
}

const struct mount_entry *mount_table_longest_prefix(const struct mount_table *t,
						     const char *abs_path)
{
	const struct mount_entry *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < t->n; i++) {
		size_t n = strlen(t->v[i].mount_point);

		/* ">=": of mounts on the same point, the later one is on top. */
		if (is_path_prefix(t->v[i].mount_point, abs_path) && (!best || n >= best_len)) {
			best = &t->v[i];
			best_len = n;
		}
	}
	return best;
}

/*
 * Walks the components of in from the last to the first, the direction in which ".." can be
 * resolved without a stack: each ".." cancels the nearest component before it that is kept.
 * Returns the length of the canonical path ("" for "/"); when out is not NULL, also writes it
 * to out[0..len), filling from the end.
 */
static size_t canonical_walk(const char *in, char *out, size_t len)
{
	const char *end = in + strlen(in);
	size_t skip = 0, n = 0;

	while (end > in) {
		const char *start = end;
		size_t clen;

		while (start[-1] != '/')
			start--;
		clen = end - start;
		if (clen == 0 || (clen == 1 && start[0] == '.')) {
			/* "//" or "/./": nothing */
		} else if (clen == 2 && start[0] == '.' && start[1] == '.') {
			skip++;
		} else if (skip) {
			skip--;
		} else {
			n += clen + 1;
			if (out) {
				out[len - n] = '/';
				memcpy(out + len - n + 1, start, clen);
			}
		}
		end = start - 1;
	}
	return n;
}

int path_canonicalize(const char *in, char *out, size_t outlen)
{
	size_t len;

	if (!in || in[0] != '/')
		return -EINVAL;
	len = canonical_walk(in, NULL, 0);
	if (!len) {
		if (outlen < 2)
			return -ENAMETOOLONG;
		strcpy(out, "/");
		return 0;
	}
	if (len >= outlen)
		return -ENAMETOOLONG;
	canonical_walk(in, out, len);
	out[len] = '\0';
	return 0;
}
