/* SPDX-License-Identifier: GPL-2.0 */
/* The module interface: what the agent and the views know of a module. */
#ifndef PLUMB_PLUMB_H
#define PLUMB_PLUMB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct prom_writer;
struct bpf_map;
struct bpf_object;
struct json_object;
struct netns;

/* --flow-bytes: per call (sock_send_length/sock_recv_length), TCP's counters, or none. */
enum flow_bytes_mode {
	FLOW_BYTES_AUTO = 0, /* calls where the kernel has the tracepoints, else counters */
	FLOW_BYTES_CALLS,
	FLOW_BYTES_COUNTERS,
	FLOW_BYTES_OFF,
};

struct plumb_config {
	const char *cgroup_root; /* cgroup2 mount point, found in /proc/self/mountinfo */
	unsigned int cgroup_grace_s; /* how long a removed cgroup's counts stay exported */
	unsigned int io_capacity; /* (cgroup, mount) pairs the io module keeps */
	bool io_latency; /* enter timestamps for the latency histogram */
	unsigned int io_latency_sample; /* time one call in this many (a power of two) */
	unsigned int flow_capacity; /* TCP connections the flow module follows at once */
	enum flow_bytes_mode flow_bytes; /* where the flow module's byte counts come from */
	const struct netns *netns; /* --netns: the one network namespace observed (flow) */
	bool wait; /* the wait module is requested: the sched object classifies waits */
	unsigned int wait_capacity; /* wait_bri's (thread, resource) pairs; 0: WAIT_BRI_MAX */
	unsigned int netstack_sample; /* netstack follows 1 in this many flows */
	/* netstack's programs attached for a 1 s window in every this many s; 0 or 1: always */
	unsigned int netstack_window;
	const char *pin; /* --pin DIR: maps and links taken over from the agent before; or NULL */
};

#define MODULE_MAX_MAPS	   8
#define MODULE_MAX_REASONS 16

/* A module's own health, exported by the agent as plumb_* self-metrics. */
struct module_health {
	struct {
		const char *name;
		uint64_t entries, capacity;
	} maps[MODULE_MAX_MAPS];
	size_t nmaps;
	struct {
		const char *reason;
		uint64_t count;
	} lost[MODULE_MAX_REASONS];
	size_t nlost;
	struct bpf_object *obj; /* for the programs' run time and count */
};

/*
 * What a module chose for one attach point at load, for `plumb agent --check`: the point
 * ("syscalls/sys_exit_read"), the program, and "attached", "off: <why>" or "missing: <why>".
 */
#define MODULE_MAX_ATTACH 96

struct attach_choice {
	char point[64];
	char program[32];
	char status[96];
};

struct plumb_module {
	const char *name;
	const char *summary;
	/* open, configure rodata, load, attach; on failure fill error and return -errno */
	int (*load)(struct plumb_module *m, const struct plumb_config *cfg);
	/* housekeeping between scrapes: drain ring buffers, resolve identities, expire entries */
	int (*tick)(struct plumb_module *m);
	/* write the module's metric families */
	int (*collect)(struct plumb_module *m, struct prom_writer *w);
	void (*health)(struct plumb_module *m, struct module_health *h);
	/* optional: add the module's part of GET /api/v1/graph to doc (docs/graph.md) */
	int (*graph)(struct plumb_module *m, struct json_object *doc);
	/* optional: GET api_path answers with what api adds to doc (a JSON object) */
	const char *api_path;
	int (*api)(struct plumb_module *m, struct json_object *doc);
	void (*unload)(struct plumb_module *m);
	/*
	 * optional, --pin: at a clean exit, pins the module's maps and links for the next agent
	 * and leaves its programs attached (src/adopt.h). 0 or -errno (then they detach).
	 */
	int (*hand_over)(struct plumb_module *m);
	/* with hand_over: every counter the module exports is what its maps hold, nothing else */
	bool maps_hold_all;

	void *priv;
	/* --pin: this agent took the maps over from the one before (their counts went on) */
	bool adopted;
	/*
	 * Set by the agent around one collect at exit: write each counter as far as the maps
	 * hold it, without what user space adds (the part the next agent carries).
	 */
	bool maps_only;
	/* the agent's timing of the module's part of the last scrape (collect and health), s */
	double scrape_seconds;
	bool up;
	char error[256];
	/* filled by load, also when it fails: what was chosen, in one line and per point */
	char choice[256];
	struct attach_choice attach[MODULE_MAX_ATTACH];
	size_t nattach;
};

/* Sums each of the first n keys of a per-CPU array map of __u64 over the CPUs into out. */
void percpu_counters_sum(int map_fd, uint32_t n, uint64_t *out);

/*
 * Reads every entry of a hash map (plain, per-CPU or LRU) in batches: one syscall per up to
 * MAP_BATCH entries, fewer when they would take more than MAP_BATCH_BYTES (a per-CPU value is
 * one per possible CPU), where a walk by get_next_key and lookup makes two per entry (a scrape
 * of 45,000 wait entries: 90,000 syscalls). visit(ctx, key, value) gets each entry; a per-CPU
 * map's value is each CPU's in turn, round_up(value_size, 8) apart. The walk goes bucket by
 * bucket and never starts over: an entry added or deleted meanwhile is seen once or not at
 * all. visit returning non-zero stops the walk. The entries visited, or -errno.
 */
#define MAP_BATCH	1024
#define MAP_BATCH_BYTES (1 << 20)
typedef int (*map_visit_fn)(void *ctx, const void *key, const void *value);
long map_read_all(const struct bpf_map *map, map_visit_fn visit, void *ctx);
/* The same by fd, for a map of that type (enum bpf_map_type) and sizes, in batches of at
 * most batch_bytes. */
long map_read_fd(int fd, unsigned int type, size_t key_size, size_t value_size, size_t batch_bytes,
		 map_visit_fn visit, void *ctx);
/* Deletes every entry of the map at fd (keys of key_size bytes, at most 64). */
void map_empty(int fd, size_t key_size);
/* The entries in a hash map, by map_read_all (0 when it fails). */
uint64_t map_count(const struct bpf_map *map);

/* Appends a map's fill, or a lost reason's count, to h. */
void health_add_map(struct module_health *h, const char *name, uint64_t entries, uint64_t capacity);
void health_add_lost(struct module_health *h, const char *reason, uint64_t count);

/*
 * A removed cgroup's (or ended process's) grace period, kept in *since_ms (0 while it
 * exists): dates the removal the first time it is seen (the clock read then, not the tick's
 * start, which a slow read before may put ahead of the removal) and says whether grace_s has
 * passed by now_ms.
 */
bool grace_over(uint64_t *since_ms, uint64_t now_ms, unsigned int grace_s);

/* Turns every "chosen" attach point into "attached", or into "not attached" after a failure. */
void module_attach_settle(struct plumb_module *m, bool attached);

struct bpf_program;
struct bpf_link;

/*
 * Attaches a cgroup program to the cgroup2 root (every process is below it): its link, or
 * NULL with errno set.
 */
struct bpf_link *attach_root_cgroup(struct bpf_program *prog, const char *cgroup_root);

/* Records an attach point's choice in m->attach (printf-style status). */
void module_attach_note(struct plumb_module *m, const char *point, const char *program,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));

extern struct plumb_module io_module;
extern struct plumb_module flow_module;
extern struct plumb_module sched_module;
extern struct plumb_module wait_module;
extern struct plumb_module blk_module;
extern struct plumb_module netstack_module;

/* All modules, in the order they load and export. */
extern struct plumb_module *plumb_modules[];
extern const size_t plumb_module_count;

#endif
