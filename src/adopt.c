// SPDX-License-Identifier: GPL-2.0
/*
 * A module's maps and links handed over a restart: see adopt.h. The pins are DIR/<module>/
 * map_<name> and link_<program>; they exist only between one agent's clean exit and the next
 * one's start, which removes them once its own programs count.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adopt.h"
#include "handover.h"
#include "hashtab.h"
#include "log.h"

#define ADOPT_MAX_MAPS 32

/* The maps handed over: all but read-only data (.rodata, .kconfig), which each load sets. */
static bool handed_map(const struct bpf_map *map)
{
	const char *name = bpf_map__name(map);

	if (!bpf_map__autocreate(map))
		return false;
	return !bpf_map__is_internal(map) ||
	       (!strstr(name, ".rodata") && !strstr(name, ".kconfig"));
}

/*
 * A pin's path. A map is named as the kernel names it (15 characters at most), which is what
 * bpf_map__name() says of a map taken over and the first 15 of what it says of a new one;
 * its dots (io_bpf.bss) become underscores: bpffs refuses names with dots.
 */
static void map_path(const struct adopt *a, const struct bpf_map *map, char *out, size_t len)
{
	char name[16];

	snprintf(name, sizeof(name), "%s", bpf_map__name(map));
	for (char *c = name; *c; c++)
		if (*c == '.')
			*c = '_';
	snprintf(out, len, "%s/map_%s", a->dir, name);
}

/* Unlinks every pin in dir: a link's last reference, so it detaches. */
static void remove_pins(const char *dir)
{
	char path[4480];
	struct dirent *d;
	DIR *dp;

	dp = opendir(dir);
	if (!dp)
		return;
	while ((d = readdir(dp)))
		if (d->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
			unlink(path);
		}
	closedir(dp);
}

void adopt_discard(const char *pin, const char *module)
{
	char dir[4200];

	snprintf(dir, sizeof(dir), "%s/%s", pin, module);
	remove_pins(dir);
}

void adopt_refuse(const char *pin, const char *module, const char *what)
{
	char gate[4400];

	snprintf(gate, sizeof(gate), "%s/%s/map_plumb_gate", pin, module);
	if (!access(gate, F_OK))
		pr_info("pin: %s: the maps left came without %s: not taken over\n", module, what);
	adopt_discard(pin, module);
}

/* The pinned map at path, if it is what map would be made as; -1 otherwise. */
static int compatible_pin(const char *path, const struct bpf_map *map)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	int fd = bpf_obj_get(path);

	if (fd < 0)
		return -1;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.type != bpf_map__type(map) ||
	    info.key_size != bpf_map__key_size(map) ||
	    info.value_size != bpf_map__value_size(map) ||
	    info.max_entries != bpf_map__max_entries(map) ||
	    info.map_flags != bpf_map__map_flags(map)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The BPF object's bytes and the settings its load gets (its read-only data as set before
 * load, the generation still 0): programs of another build or another choice (io's latency
 * sampling, flow's bytes from calls or from TCP's counters) might keep the maps otherwise.
 */
static uint64_t object_hash(struct bpf_object *obj, const struct bpf_object_skeleton *skel)
{
	uint64_t h = hash_bytes(skel->data, skel->data_sz);
	struct bpf_map *map;

	bpf_object__for_each_map (map, obj) {
		const void *data;
		size_t size;

		if (!bpf_map__is_internal(map) || !strstr(bpf_map__name(map), ".rodata"))
			continue;
		data = bpf_map__initial_value(map, &size);
		if (data)
			h = hash_bytes(&h, sizeof(h)) ^ hash_bytes(data, size);
	}
	return h;
}

int adopt_maps(struct adopt *a, const char *pin, const char *module,
	       const struct bpf_object_skeleton *skel, struct bpf_map *gate,
	       unsigned int *generation, char *err, size_t errlen)
{
	struct bpf_object *obj = *skel->obj;
	struct bpf_map *maps[ADOPT_MAX_MAPS], *map;
	int fds[ADOPT_MAX_MAPS], n = 0, gate_fd;
	struct handover_gate g;
	char path[4480];
	__u32 zero = 0;
	bool ok = true;

	memset(a, 0, sizeof(*a));
	*generation = 0;
	if (!pin || !pin[0])
		return 0;
	a->obj = obj;
	snprintf(a->dir, sizeof(a->dir), "%s/%s", pin, module);
	if (mkdir(a->dir, 0700) && errno != EEXIST) {
		int e = errno;

		snprintf(err, errlen, "--pin: cannot create %.200s: %s", a->dir, strerror(e));
		a->dir[0] = '\0';
		return -e;
	}
	a->object_hash = object_hash(obj, skel);

	map_path(a, gate, path, sizeof(path));
	gate_fd = compatible_pin(path, gate);
	if (gate_fd < 0 || bpf_map_lookup_elem(gate_fd, &zero, &g) ||
	    g.object_hash != a->object_hash) {
		if (gate_fd >= 0) {
			pr_info("pin: %s: the maps left are another build's or settings': not "
				"taken over\n",
				module);
			close(gate_fd);
		}
		adopt_discard(pin, module);
		return 0;
	}
	close(gate_fd);
	bpf_object__for_each_map (map, obj) {
		if (!handed_map(map))
			continue;
		if (n == ADOPT_MAX_MAPS) {
			ok = false;
			break;
		}
		map_path(a, map, path, sizeof(path));
		maps[n] = map;
		fds[n] = compatible_pin(path, map);
		if (fds[n] < 0) {
			pr_info("pin: %s: map %s left is missing or of another size: not taken "
				"over\n",
				module, bpf_map__name(map));
			ok = false;
			break;
		}
		n++;
	}
	if (!ok) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		adopt_discard(pin, module);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		int e = bpf_map__reuse_fd(maps[i], fds[i]);

		close(fds[i]);
		if (e) {
			for (int k = i + 1; k < n; k++)
				close(fds[k]);
			snprintf(err, errlen, "--pin: cannot take over map %s: %s",
				 bpf_map__name(maps[i]), strerror(-e));
			return e;
		}
	}
	a->adopted = true;
	a->generation = g.generation + 1;
	*generation = a->generation;
	return 0;
}

/*
 * Sets every CPU's want to the new generation; each CPU moves to it at the first event an old
 * program sees there (bpf/gate.bpf.h). Programs change cur only once want differs from it, so
 * the cur values read here are still current when written back. Once the old links go, no old
 * program runs to move a CPU that had no event meanwhile (an idle one): after
 * ADOPT_CPU_WAIT_MS the ones left are moved from here (an event in progress on such a CPU at
 * that instant could count twice).
 */
#define ADOPT_CPU_WAIT_MS 200

static int gate_cpus_settle(struct bpf_object *obj, unsigned int generation)
{
	struct bpf_map *cpus = bpf_object__find_map_by_name(obj, "plumb_gate_cpu");
	int n = libbpf_num_possible_cpus(), fd, moved = 0;
	struct handover_gate_cpu v[1024]; /* 8 bytes: a per-CPU value's slot for each CPU */
	__u32 zero = 0;

	if (!cpus || n <= 0 || n > 1024 || bpf_map__value_size(cpus) != sizeof(v[0]))
		return -EINVAL;
	fd = bpf_map__fd(cpus);
	if (bpf_map_lookup_elem(fd, &zero, v))
		return -errno;
	for (int i = 0; i < n; i++)
		v[i].want = generation;
	if (bpf_map_update_elem(fd, &zero, v, BPF_ANY))
		return -errno;
	for (int waited = 0; waited <= ADOPT_CPU_WAIT_MS; waited++) {
		if (bpf_map_lookup_elem(fd, &zero, v))
			return -errno;
		moved = 0;
		for (int i = 0; i < n; i++)
			moved += v[i].cur == generation;
		if (moved == n)
			return 0;
		usleep(1000);
	}
	for (int i = 0; i < n; i++)
		v[i].cur = v[i].want = generation;
	pr_info("pin: %d of %d CPUs had no event in %d ms: moved to the new programs\n", n - moved,
		n, ADOPT_CPU_WAIT_MS);
	return bpf_map_update_elem(fd, &zero, v, BPF_ANY) ? -errno : 0;
}

int adopt_activate(struct adopt *a, struct bpf_map *gate, char *err, size_t errlen)
{
	struct handover_gate g = { .generation = a->generation, .object_hash = a->object_hash };
	__u32 zero = 0;
	int e;

	if (!a->dir[0])
		return 0;
	if (bpf_map_update_elem(bpf_map__fd(gate), &zero, &g, BPF_ANY)) {
		e = errno;
		snprintf(err, errlen, "--pin: cannot set the gate: %s", strerror(e));
		return -e;
	}
	e = a->adopted ? gate_cpus_settle(a->obj, a->generation) : 0;
	if (e) {
		snprintf(err, errlen, "--pin: cannot move the CPUs to the new programs: %s",
			 strerror(-e));
		return e;
	}
	/* the old programs count no more: their links and the pins go */
	remove_pins(a->dir);
	return 0;
}

int adopt_hand_over(struct adopt *a, const struct bpf_object_skeleton *skel)
{
	struct bpf_object *obj = *skel->obj;
	struct bpf_map *map;
	char path[4480];
	int ret = 0;

	if (!a->dir[0])
		return -ENOENT;
	if (a->handed)
		return 0; /* an object two modules share (sched and wait) */
	bpf_object__for_each_map (map, obj) {
		if (!handed_map(map))
			continue;
		map_path(a, map, path, sizeof(path));
		if (bpf_obj_pin(bpf_map__fd(map), path)) {
			ret = -errno;
			goto fail;
		}
	}
	for (int i = 0; i < skel->prog_cnt; i++) {
		const struct bpf_prog_skeleton *p =
			(const void *)((const char *)skel->progs + (size_t)i * skel->prog_skel_sz);

		if (!*p->link)
			continue;
		snprintf(path, sizeof(path), "%s/link_%s", a->dir, p->name);
		if (bpf_obj_pin(bpf_link__fd(*p->link), path)) {
			ret = -errno;
			goto fail;
		}
	}
	for (int i = 0; i < skel->prog_cnt; i++) {
		const struct bpf_prog_skeleton *p =
			(const void *)((const char *)skel->progs + (size_t)i * skel->prog_skel_sz);

		if (*p->link)
			bpf_link__disconnect(*p->link);
	}
	a->handed = true;
	return 0;
fail:
	pr_warn("pin: cannot pin %.200s: %s: counting stops until the next agent\n", path,
		strerror(-ret));
	remove_pins(a->dir);
	return ret;
}

int adopt_side_map(const char *pin, const char *name, __u32 key_size, __u32 value_size,
		   __u32 max_entries, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	char path[4480];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin, name);
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) && info.type == BPF_MAP_TYPE_HASH &&
		    info.key_size == key_size && info.value_size == value_size &&
		    info.max_entries == max_entries)
			return fd;
		close(fd); /* another build's: made again */
		unlink(path);
	}
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, name, key_size, value_size, max_entries, &opts);
	if (fd < 0 || bpf_obj_pin(fd, path)) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "--pin: cannot make %.200s: %s", path, strerror(e));
		return -e;
	}
	return fd;
}
