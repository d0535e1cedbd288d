// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/prom.h"

#define PROM_INITIAL_CAP 4096
/* The longest %.17g of a double, "-2.2250738585072014e-308", is 24 characters. */
#define PROM_NUMBER_MAX	      32
#define PROM_MAX_SAFE_INTEGER 9007199254740992.0 /* 2^53 */

static const char *const type_names[] = {
	[PROM_COUNTER] = "counter",
	[PROM_GAUGE] = "gauge",
	[PROM_HISTOGRAM] = "histogram",
};

static int grow(struct prom_writer *w, char **p, size_t *cap, size_t need)
{
	size_t new_cap = *cap ? *cap : PROM_INITIAL_CAP;
	char *q;

	if (need <= *cap)
		return 0;
	while (new_cap < need) {
		if (new_cap > SIZE_MAX / 2)
			return -ENOMEM;
		new_cap *= 2;
	}
	q = w->realloc_fn(*p, new_cap);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = new_cap;
	return 0;
}

static int set_err(struct prom_writer *w, int err)
{
	if (!w->err)
		w->err = err;
	return w->err;
}

/* Drops what a failed call wrote, so that buf never ends in half a line. */
static void undo_on_error(struct prom_writer *w, size_t start)
{
	if (!w->err || !w->buf)
		return;
	w->len = start;
	w->buf[start] = '\0';
}

static void put_mem(struct prom_writer *w, const char *s, size_t n)
{
	if (w->err)
		return;
	if (n >= SIZE_MAX - w->len || grow(w, &w->buf, &w->cap, w->len + n + 1)) {
		set_err(w, -ENOMEM);
		return;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void put(struct prom_writer *w, const char *s)
{
	put_mem(w, s, strlen(s));
}

/* HELP text escapes only backslash and newline; label values also escape the double quote. */
static void put_escaped(struct prom_writer *w, const char *s, bool label_value)
{
	const char *run = s;

	for (; *s; s++) {
		const char *esc;

		if (*s == '\\')
			esc = "\\\\";
		else if (*s == '\n')
			esc = "\\n";
		else if (*s == '"' && label_value)
			esc = "\\\"";
		else
			continue;
		put_mem(w, run, s - run);
		put(w, esc);
		run = s + 1;
	}
	put_mem(w, run, s - run);
}

static void format_number(char *out, size_t size, double v)
{
	int prec;

	if (isnan(v)) {
		snprintf(out, size, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	/* Counters read from BPF maps are integers; %g would turn large ones into 1.23e+12. */
	if (fabs(v) <= PROM_MAX_SAFE_INTEGER && v == trunc(v)) {
		snprintf(out, size, "%" PRId64, (int64_t)v);
		return;
	}
	/* %.17g always reads back exactly, but shorter forms avoid 0.10000000000000001. */
	for (prec = 15; prec < 17; prec++) {
		snprintf(out, size, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return;
	}
	snprintf(out, size, "%.17g", v);
}

/* ASCII only: isalpha() and friends depend on the locale. */
static bool is_name_char(char c, bool first, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

/* Metric names may contain colons (recording rules use them), label names may not. */
static bool valid_name(const char *s, bool colon)
{
	const char *p;

	if (!s || !*s)
		return false;
	for (p = s; *p; p++) {
		if (!is_name_char(*p, p == s, colon))
			return false;
	}
	return true;
}

/* A histogram's own le label would appear twice if the caller passed one too. */
static bool valid_labels(const struct prom_label *labels, size_t n, bool histogram)
{
	size_t i;

	if (n && !labels)
		return false;
	for (i = 0; i < n; i++) {
		if (!valid_name(labels[i].name, false) || !labels[i].value)
			return false;
		if (histogram && !strcmp(labels[i].name, "le"))
			return false;
	}
	return true;
}

static bool valid_bounds(const double *bounds, const uint64_t *counts, size_t n)
{
	size_t i;

	if (!counts || (n && !bounds))
		return false;
	/* An infinite bound would duplicate the +Inf bucket; !(a > b) also rejects NaN. */
	for (i = 0; i < n; i++) {
		if (!isfinite(bounds[i]) || (i && !(bounds[i] > bounds[i - 1])))
			return false;
	}
	return true;
}

/* A scrape has tens of families, so a linear scan is cheaper than keeping a hash table. */
static bool family_started(const struct prom_writer *w, const char *name)
{
	size_t off;

	for (off = 0; off < w->names_len; off += strlen(w->names + off) + 1) {
		if (!strcmp(w->names + off, name))
			return true;
	}
	return false;
}

/*
 * One line: name+suffix{labels,le="..."} value. adjust: the value is a counter's (or a
 * histogram's), passed through the writer's adjust hook with the series text. exact: the
 * value already formatted (a count beyond 2^53 prints exactly), used unless it is adjusted.
 */
static void put_line(struct prom_writer *w, const char *suffix, const struct prom_label *labels,
		     size_t nlabels, const char *le, double value, const char *exact, bool adjust)
{
	char num[PROM_NUMBER_MAX];
	size_t start = w->len;
	size_t i;

	put(w, w->names + w->family);
	put(w, suffix);
	if (nlabels || le) {
		put(w, "{");
		for (i = 0; i < nlabels; i++) {
			if (i)
				put(w, ",");
			put(w, labels[i].name);
			put(w, "=\"");
			put_escaped(w, labels[i].value, true);
			put(w, "\"");
		}
		if (le) {
			put(w, nlabels ? ",le=\"" : "le=\"");
			put(w, le);
			put(w, "\"");
		}
		put(w, "}");
	}
	if (adjust && w->adjust && !w->err) {
		value = w->adjust(w->adjust_ctx, w->buf + start, w->len - start, value);
		exact = NULL;
	}
	if (exact)
		snprintf(num, sizeof(num), "%s", exact);
	else
		format_number(num, sizeof(num), value);
	put(w, " ");
	put(w, num);
	put(w, "\n");
}

void prom_init(struct prom_writer *w)
{
	memset(w, 0, sizeof(*w));
	w->realloc_fn = realloc;
	if (grow(w, &w->buf, &w->cap, PROM_INITIAL_CAP)) {
		w->err = -ENOMEM;
		return;
	}
	w->buf[0] = '\0';
}

void prom_free(struct prom_writer *w)
{
	free(w->buf);
	free(w->names);
	memset(w, 0, sizeof(*w));
}

void prom_reset(struct prom_writer *w)
{
	w->len = 0;
	if (w->buf)
		w->buf[0] = '\0';
	w->err = 0;
	w->names_len = 0;
	w->family = 0;
	w->has_family = false;
}

int prom_family(struct prom_writer *w, const char *name, enum prom_type type, const char *help)
{
	size_t start = w->len;
	size_t size;

	if (w->err)
		return w->err;
	if (!valid_name(name, true) || !help || (unsigned int)type > PROM_HISTOGRAM)
		return set_err(w, -EINVAL);
	if (family_started(w, name))
		return set_err(w, -EEXIST);

	size = strlen(name) + 1;
	if (grow(w, &w->names, &w->names_cap, w->names_len + size))
		return set_err(w, -ENOMEM);

	put(w, "# HELP ");
	put(w, name);
	put(w, " ");
	put_escaped(w, help, false);
	put(w, "\n# TYPE ");
	put(w, name);
	put(w, " ");
	put(w, type_names[type]);
	put(w, "\n");
	if (w->err) {
		undo_on_error(w, start);
		return w->err;
	}

	memcpy(w->names + w->names_len, name, size);
	w->family = w->names_len;
	w->names_len += size;
	w->has_family = true;
	w->type = type;
	return 0;
}

void prom_sample(struct prom_writer *w, const struct prom_label *labels, size_t nlabels,
		 double value)
{
	size_t start = w->len;

	if (w->err)
		return;
	if (!w->has_family || w->type == PROM_HISTOGRAM || !valid_labels(labels, nlabels, false)) {
		set_err(w, -EINVAL);
		return;
	}
	put_line(w, "", labels, nlabels, NULL, value, NULL, w->type == PROM_COUNTER);
	undo_on_error(w, start);
}

void prom_histogram(struct prom_writer *w, const struct prom_label *labels, size_t nlabels,
		    const double *bounds, const uint64_t *counts, size_t nbounds, double sum)
{
	char le[PROM_NUMBER_MAX], count[PROM_NUMBER_MAX];
	size_t start = w->len;
	uint64_t total = 0;
	size_t i;

	if (w->err)
		return;
	if (!w->has_family || w->type != PROM_HISTOGRAM || !valid_labels(labels, nlabels, true) ||
	    !valid_bounds(bounds, counts, nbounds)) {
		set_err(w, -EINVAL);
		return;
	}
	for (i = 0; i < nbounds; i++) {
		total += counts[i];
		format_number(le, sizeof(le), bounds[i]);
		snprintf(count, sizeof(count), "%" PRIu64, total);
		put_line(w, "_bucket", labels, nlabels, le, (double)total, count, true);
	}
	total += counts[nbounds];
	snprintf(count, sizeof(count), "%" PRIu64, total);
	put_line(w, "_bucket", labels, nlabels, "+Inf", (double)total, count, true);
	put_line(w, "_sum", labels, nlabels, NULL, sum, NULL, true);
	put_line(w, "_count", labels, nlabels, NULL, (double)total, count, true);
	undo_on_error(w, start);
}
