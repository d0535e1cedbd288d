// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "clock.h"
#include "log.h"
#include "plumb.h"

struct plumb_module *plumb_modules[] = {
	&io_module, &flow_module, &sched_module, &wait_module, &blk_module, &netstack_module,
};

const size_t plumb_module_count = sizeof(plumb_modules) / sizeof(plumb_modules[0]);

void percpu_counters_sum(int map_fd, uint32_t n, uint64_t *out)
{
	int ncpus = libbpf_num_possible_cpus();
	uint64_t *percpu = ncpus > 0 ? calloc(ncpus, sizeof(*percpu)) : NULL;

	memset(out, 0, n * sizeof(*out));
	for (uint32_t k = 0; percpu && k < n; k++)
		if (!bpf_map_lookup_elem(map_fd, &k, percpu))
			for (int c = 0; c < ncpus; c++)
				out[k] += percpu[c];
	free(percpu);
}

long map_read_fd(int fd, unsigned int type, size_t key_size, size_t value_size, size_t batch_bytes,
		 map_visit_fn visit, void *ctx)
{
	bool percpu = type == BPF_MAP_TYPE_PERCPU_HASH || type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
	int ncpus = percpu ? libbpf_num_possible_cpus() : 1;
	__u32 batch_size = MAP_BATCH;
	char *keys = NULL, *values = NULL, *key_copy = NULL, *value_copy = NULL;
	__u64 batch = 0;
	bool first = true;
	long n = 0;
	int err = 0;

	if (ncpus < 1)
		return ncpus ? ncpus : -EINVAL;
	if (percpu)
		value_size = (value_size + 7) / 8 * 8 * ncpus;
	if (batch_size * (key_size + value_size) > batch_bytes)
		batch_size = batch_bytes / (key_size + value_size);
	if (!batch_size)
		batch_size = 1;
	key_copy = malloc(key_size);
	value_copy = malloc(value_size);
	if (!key_copy || !value_copy)
		err = -ENOMEM;
	while (!err) {
		__u32 count = batch_size;

		if (!keys) {
			keys = malloc(batch_size * key_size);
			values = malloc(batch_size * value_size);
			if (!keys || !values) {
				err = -ENOMEM;
				break;
			}
		}
		err = bpf_map_lookup_batch(fd, first ? NULL : &batch, &batch, keys, values, &count,
					   NULL);
		if (err == -ENOSPC && !count && batch_size < (1u << 20)) {
			/* a bucket holds more entries than a batch: the same bucket, larger */
			batch_size *= 4;
			free(keys);
			free(values);
			keys = values = NULL;
			err = 0;
			continue;
		}
		first = false;
		for (__u32 i = 0; i < count; i++) {
			const void *k = keys + i * key_size, *v = values + i * value_size;

			/* packed one after another: a size not a multiple of 8 leaves them unaligned */
			if (key_size % 8)
				k = memcpy(key_copy, k, key_size);
			if (value_size % 8)
				v = memcpy(value_copy, v, value_size);
			n++;
			if (visit(ctx, k, v)) {
				err = -ECANCELED;
				break;
			}
		}
	}
	free(keys);
	free(values);
	free(key_copy);
	free(value_copy);
	return err == -ENOENT || err == -ECANCELED ? n : err; /* -ENOENT: the end */
}

long map_read_all(const struct bpf_map *map, map_visit_fn visit, void *ctx)
{
	return map_read_fd(bpf_map__fd(map), bpf_map__type(map), bpf_map__key_size(map),
			   bpf_map__value_size(map), MAP_BATCH_BYTES, visit, ctx);
}

void map_empty(int fd, size_t key_size)
{
	char key[64];

	if (key_size > sizeof(key))
		return;
	while (!bpf_map_get_next_key(fd, NULL, key))
		if (bpf_map_delete_elem(fd, key))
			break;
}

static int count_entry(void *ctx, const void *key, const void *value)
{
	(void)ctx;
	(void)key;
	(void)value;
	return 0;
}

uint64_t map_count(const struct bpf_map *map)
{
	long n = map_read_all(map, count_entry, NULL);

	return n > 0 ? n : 0;
}

void health_add_map(struct module_health *h, const char *name, uint64_t entries, uint64_t capacity)
{
	if (h->nmaps == MODULE_MAX_MAPS)
		return;
	h->maps[h->nmaps].name = name;
	h->maps[h->nmaps].entries = entries;
	h->maps[h->nmaps++].capacity = capacity;
}

void health_add_lost(struct module_health *h, const char *reason, uint64_t count)
{
	if (h->nlost == MODULE_MAX_REASONS)
		return;
	h->lost[h->nlost].reason = reason;
	h->lost[h->nlost++].count = count;
}

bool grace_over(uint64_t *since_ms, uint64_t now_ms, unsigned int grace_s)
{
	if (!*since_ms)
		*since_ms = monotonic_ms();
	return now_ms >= *since_ms + (uint64_t)grace_s * 1000;
}

struct bpf_link *attach_root_cgroup(struct bpf_program *prog, const char *cgroup_root)
{
	int fd = open(cgroup_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err;
	struct bpf_link *link;

	if (fd < 0)
		return NULL;
	link = bpf_program__attach_cgroup(prog, fd);
	err = errno;
	close(fd);
	errno = err;
	return link;
}

void module_attach_settle(struct plumb_module *m, bool attached)
{
	char why[sizeof(m->attach[0].status)];

	/* "chosen" or "chosen: why" */
	for (size_t i = 0; i < m->nattach; i++) {
		if (strncmp(m->attach[i].status, "chosen", 6) ||
		    (m->attach[i].status[6] && m->attach[i].status[6] != ':'))
			continue;
		snprintf(why, sizeof(why), "%s", m->attach[i].status + 6);
		if (!attached)
			snprintf(m->attach[i].status, sizeof(m->attach[i].status), "%s",
				 "not attached: module failed");
		else
			snprintf(m->attach[i].status, sizeof(m->attach[i].status), "attached%.*s",
				 (int)sizeof(m->attach[i].status) - 9, why);
	}
}

void module_attach_note(struct plumb_module *m, const char *point, const char *program,
			const char *fmt, ...)
{
	struct attach_choice *c;
	va_list ap;

	if (m->nattach >= MODULE_MAX_ATTACH) {
		/* a table that lies by omission is worse than a warning: raise the limit */
		log_print(LOG_WARN, "module %s: attach point %s left out of --check's table (%d)",
			  m->name, point, MODULE_MAX_ATTACH);
		return;
	}
	c = &m->attach[m->nattach++];
	snprintf(c->point, sizeof(c->point), "%s", point);
	snprintf(c->program, sizeof(c->program), "%s", program ? program : "");
	va_start(ap, fmt);
	vsnprintf(c->status, sizeof(c->status), fmt, ap);
	va_end(ap);
}
