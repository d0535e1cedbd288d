// SPDX-License-Identifier: GPL-2.0
/*
 * flow module, user space: loads bpf/flow.bpf.c, follows each TCP connection by its socket
 * cookie (live byte counts from the flow_conns map, final ones from close events), and adds
 * what each connection did since the last read into per-(owner, peer, port, role) counters.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <dirent.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "clock.h"
#include "detach.h"
#include "log.h"
#include "plumb.h"
#include "probe.h"
#include "export/prom.h"
#include "identity/cgroup.h"
#include "identity/workload.h"
#include <linux/types.h>
#include "flow.h"
#include "flow.skel.h"

#define FLOW_RESCAN_MS		250
#define FLOW_UNRESOLVED_HOLD_MS 5000
#define FLOW_LISTENERS_MAX	4096
#define FLOW_BATCH		1024

static const char *const flow_role_names[] = { "unknown", "client", "server" };

/* What a connection adds to: its owner, its peer, the server port and its role. */
struct flow_agg_key {
	uint64_t cgroup_id;
	char comm[16];
	uint8_t peer[16];
	uint16_t family;
	uint16_t peer_port; /* the server's port: the remote one for a client, the local one for
			     * a server, so that ephemeral ports never become labels */
	uint8_t role;
	uint8_t pad[3];
};

struct flow_agg {
	struct flow_agg_key key;
	uint64_t tx, rx, connections;
	char cgroup[256]; /* "" until resolved */
	uint64_t first_seen_ms;
	uint64_t gone_since_ms; /* when its cgroup was first seen removed; 0 while it exists */
};

/* A connection the agent follows, by socket cookie. */
struct flow_track {
	uint64_t cookie;
	struct flow_conn conn;
	uint64_t tx_seen, rx_seen; /* what was already added to its aggregate */
	uint64_t read_gen; /* the map read that last saw it */
	bool counted; /* added to its aggregate's connections */
};

struct flow_listener {
	uint32_t netns;
	uint16_t port;
};

struct flow_state {
	const char *cgroup_root;
	uint64_t last_owner_scan_ms;
	struct flow_bpf *skel;
	struct ring_buffer *events;
	struct cgroup_cache *cgroups;
	void *tracks, *aggs; /* tsearch trees */
	size_t ntracks, naggs, track_capacity, agg_capacity;
	struct flow_listener listeners[FLOW_LISTENERS_MAX];
	size_t nlisteners;
	enum flow_bytes_mode bytes; /* CALLS, COUNTERS or OFF once chosen */
	struct bpf_link
		*iter; /* flow_discover, run at load and, counting from counters, per read */
	uint64_t read_gen, in_map;
	unsigned int grace_s;
	uint64_t last_expiry_ms;
	uint64_t tracks_full, aggs_full, found_at_start;
	__u64 keys[FLOW_BATCH];
	struct flow_conn values[FLOW_BATCH];
};

static int track_cmp(const void *a, const void *b)
{
	const struct flow_track *x = a, *y = b;

	return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

static int agg_cmp(const void *a, const void *b)
{
	return memcmp(&((const struct flow_agg *)a)->key, &((const struct flow_agg *)b)->key,
		      sizeof(struct flow_agg_key));
}

static bool is_listener(const struct flow_state *s, uint32_t netns, uint16_t port)
{
	for (size_t i = 0; i < s->nlisteners; i++)
		if (s->listeners[i].netns == netns && s->listeners[i].port == port)
			return true;
	return false;
}

static struct flow_agg *agg_for(struct flow_state *s, const struct flow_track *t)
{
	struct flow_agg probe = { 0 }, *a, **found;
	const struct flow_conn *c = &t->conn;

	probe.key.cgroup_id = c->cgroup_id;
	memcpy(probe.key.comm, c->comm, sizeof(probe.key.comm));
	probe.key.family = c->family;
	memcpy(probe.key.peer, c->raddr, sizeof(probe.key.peer));
	probe.key.role = c->role;
	if (probe.key.role == FLOW_ROLE_UNKNOWN)
		/* older than the agent: a server when its local port is listening */
		probe.key.role =
			is_listener(s, c->netns, c->lport) ? FLOW_ROLE_SERVER : FLOW_ROLE_CLIENT;
	probe.key.peer_port = probe.key.role == FLOW_ROLE_SERVER ? c->lport : c->rport;
	found = tfind(&probe, &s->aggs, agg_cmp);
	if (found)
		return *found;
	if (s->naggs >= s->agg_capacity) {
		s->aggs_full++;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->key = probe.key;
	a->first_seen_ms = monotonic_ms();
	if (!tsearch(a, &s->aggs, agg_cmp)) {
		free(a);
		return NULL;
	}
	s->naggs++;
	return a;
}

/* Adds what the connection did since it was last seen; counts it once its owner is known. */
static void track_apply(struct flow_state *s, struct flow_track *t, const struct flow_conn *c,
			bool closed)
{
	struct flow_agg *a;

	/* owner and role are set once in the kernel; take them as they arrive */
	if (!t->conn.tgid && c->tgid) {
		t->conn.tgid = c->tgid;
		t->conn.cgroup_id = c->cgroup_id;
		memcpy(t->conn.comm, c->comm, sizeof(c->comm));
	}
	if (!t->conn.role)
		t->conn.role = c->role;
	if (!t->conn.tgid && !closed)
		return; /* an accepted connection nobody has read or written yet */
	a = agg_for(s, t);
	if (!a)
		return;
	if (c->tx >= t->tx_seen)
		a->tx += c->tx - t->tx_seen;
	if (c->rx >= t->rx_seen)
		a->rx += c->rx - t->rx_seen;
	t->tx_seen = c->tx;
	t->rx_seen = c->rx;
	if (!t->counted) {
		a->connections++;
		t->counted = true;
	}
}

static struct flow_track *track_get(struct flow_state *s, uint64_t cookie,
				    const struct flow_conn *c)
{
	struct flow_track probe = { .cookie = cookie }, *t, **found;

	found = tfind(&probe, &s->tracks, track_cmp);
	if (found)
		return *found;
	if (s->ntracks >= s->track_capacity) {
		s->tracks_full++;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->cookie = cookie;
	t->conn = *c;
	t->conn.tx = t->conn.rx = 0;
	if (!tsearch(t, &s->tracks, track_cmp)) {
		free(t);
		return NULL;
	}
	s->ntracks++;
	return t;
}

static void track_drop(struct flow_state *s, struct flow_track *t)
{
	tdelete(t, &s->tracks, track_cmp);
	free(t);
	s->ntracks--;
}

static int handle_close(void *ctx, void *data, size_t len)
{
	struct flow_state *s = ctx;
	const struct flow_event *e = data;
	struct flow_track *t;

	if (len < sizeof(*e) || e->kind != FLOW_CLOSE)
		return 0;
	t = track_get(s, e->cookie, &e->conn);
	if (!t)
		return 0;
	track_apply(s, t, &e->conn, true);
	track_drop(s, t);
	return 0;
}

/*
 * Runs flow_discover (iter/tcp, the agent's network namespace): at load for listening ports
 * and connections established before the agent; counting from TCP's counters, also before
 * each read of the map, to bring live connections' counts up to date.
 */
static int flow_iterate(struct flow_state *s)
{
	struct flow_event e;
	int fd;

	if (!s->iter)
		return -ENOENT;
	fd = bpf_iter_create(bpf_link__fd(s->iter));
	if (fd < 0)
		return -errno;
	while (read(fd, &e, sizeof(e)) == sizeof(e)) {
		if (e.kind == FLOW_LISTEN && s->nlisteners < FLOW_LISTENERS_MAX &&
		    !is_listener(s, e.conn.netns, e.conn.lport)) {
			s->listeners[s->nlisteners].netns = e.conn.netns;
			s->listeners[s->nlisteners++].port = e.conn.lport;
		} else if (e.kind == FLOW_FOUND) {
			s->found_at_start++;
		}
	}
	close(fd);
	return 0;
}

/* The owner of a process: its tgid, command name and cgroup id (its cgroup2 directory inode). */
static bool process_owner(struct flow_state *s, uint32_t pid, struct flow_conn *c)
{
	char path[4352], line[4096], *rel = NULL;
	struct stat st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			rel = line + 3;
			rel[strcspn(rel, "\n")] = '\0';
			break;
		}
	fclose(f);
	snprintf(path, sizeof(path), "%s%s", s->cgroup_root, rel && strcmp(rel, "/") ? rel : "");
	if (!rel || stat(path, &st))
		return false;
	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "r");
	memset(c->comm, 0, sizeof(c->comm));
	if (f) {
		if (fgets(c->comm, sizeof(c->comm), f))
			c->comm[strcspn(c->comm, "\n")] = '\0';
		fclose(f);
	}
	c->tgid = pid;
	c->cgroup_id = st.st_ino;
	return true;
}

/*
 * Connections older than the agent have no owner until they send or receive (and, counting
 * from TCP's counters, not even then): find the process holding the socket, as ss -p does.
 * At most once a second, one pass over /proc for every connection still without an owner.
 */
#define FLOW_OWNER_SCAN_MS 1000
#define FLOW_OWNER_WANTED  256

static struct flow_track *owner_wanted[FLOW_OWNER_WANTED];
static size_t owner_nwanted;

static void owner_visit(const void *node, VISIT which, int depth)
{
	struct flow_track *t = *(struct flow_track *const *)node;

	(void)depth;
	if ((which == postorder || which == leaf) && !t->conn.tgid && t->conn.ino &&
	    owner_nwanted < FLOW_OWNER_WANTED)
		owner_wanted[owner_nwanted++] = t;
}

static void owners_find(struct flow_state *s)
{
	struct dirent *p, *fd;
	DIR *proc, *fds;

	owner_nwanted = 0;
	twalk(s->tracks, owner_visit);
	if (!owner_nwanted || monotonic_ms() - s->last_owner_scan_ms < FLOW_OWNER_SCAN_MS)
		return;
	s->last_owner_scan_ms = monotonic_ms();
	proc = opendir("/proc");
	if (!proc)
		return;
	while ((p = readdir(proc))) {
		uint32_t pid = strtoul(p->d_name, NULL, 10);
		char dir[64], link[64], path[320];

		if (!pid)
			continue;
		snprintf(dir, sizeof(dir), "/proc/%u/fd", pid);
		fds = opendir(dir);
		if (!fds)
			continue;
		while ((fd = readdir(fds))) {
			unsigned long long ino;
			ssize_t n;

			snprintf(path, sizeof(path), "%s/%s", dir, fd->d_name);
			n = readlink(path, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = '\0';
			if (sscanf(link, "socket:[%llu]", &ino) != 1)
				continue;
			/* kept in user space only: writing the kernel's entry back could undo
			 * an atomic add made in between */
			for (size_t i = 0; i < owner_nwanted; i++)
				if (!owner_wanted[i]->conn.tgid && owner_wanted[i]->conn.ino == ino)
					process_owner(s, pid, &owner_wanted[i]->conn);
		}
		closedir(fds);
	}
	closedir(proc);
}

/* twalk cannot carry a context: the read in progress, for the stale-entry sweep. */
static struct flow_state *sweep_state;
static struct flow_track *sweep_victims[FLOW_BATCH];
static size_t sweep_n;

static void sweep_visit(const void *node, VISIT which, int depth)
{
	struct flow_track *t = *(struct flow_track *const *)node;

	(void)depth;
	if ((which == postorder || which == leaf) && sweep_n < FLOW_BATCH &&
	    t->read_gen + 2 <= sweep_state->read_gen)
		sweep_victims[sweep_n++] = t;
}

/*
 * Reads every live connection from the kernel map. Close events are drained first, so a
 * connection missing from the map has either closed since (its event comes at the next drain)
 * or lost its close event: one absent from two reads in a row is dropped.
 */
static void flow_read(struct flow_state *s)
{
	int fd = bpf_map__fd(s->skel->maps.flow_conns);
	__u64 batch = 0;
	bool first = true;
	uint64_t n = 0;

	ring_buffer__consume(s->events);
	if (s->bytes == FLOW_BYTES_COUNTERS)
		flow_iterate(s);
	s->read_gen++;
	for (;;) {
		__u32 count = FLOW_BATCH;
		int err = bpf_map_lookup_batch(fd, first ? NULL : &batch, &batch, s->keys,
					       s->values, &count, NULL);

		first = false;
		for (__u32 i = 0; i < count; i++) {
			struct flow_track *t;

			if (!s->values[i].established)
				continue;
			t = track_get(s, s->keys[i], &s->values[i]);
			if (!t)
				continue;
			t->read_gen = s->read_gen;
			track_apply(s, t, &s->values[i], false);
			n++;
		}
		if (err)
			break; /* -ENOENT: the end */
	}
	s->in_map = n;
	owners_find(s);
	sweep_state = s;
	do {
		sweep_n = 0;
		twalk(s->tracks, sweep_visit);
		for (size_t i = 0; i < sweep_n; i++)
			track_drop(s, sweep_victims[i]);
	} while (sweep_n == FLOW_BATCH);
}

static int flow_tick(struct plumb_module *m)
{
	struct flow_state *s = m->priv;

	ring_buffer__consume(s->events);
	return 0;
}

static void peer_string(const struct flow_agg_key *k, char *out, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (k->family == AF_INET6 && !memcmp(k->peer, v4mapped, sizeof(v4mapped)))
		inet_ntop(AF_INET, k->peer + 12, out, len);
	else
		inet_ntop(k->family == AF_INET6 ? AF_INET6 : AF_INET, k->peer, out, len);
}

struct flow_row {
	const struct flow_agg *agg;
	char workload[256], peer[64], port[8];
};

static struct flow_row *collect_rows;
static size_t collect_n, collect_cap;
static struct flow_state *collect_state;

static void collect_visit(const void *node, VISIT which, int depth)
{
	struct flow_agg *a = *(struct flow_agg *const *)node;
	struct flow_state *s = collect_state;
	struct flow_row *r;
	const char *path;

	(void)depth;
	if (which != postorder && which != leaf)
		return;
	if (!a->cgroup[0]) {
		path = cgroup_cache_resolve(s->cgroups, a->key.cgroup_id, FLOW_RESCAN_MS);
		if (path)
			snprintf(a->cgroup, sizeof(a->cgroup), "%s", path);
		else if (monotonic_ms() - a->first_seen_ms >= FLOW_UNRESOLVED_HOLD_MS)
			snprintf(a->cgroup, sizeof(a->cgroup), "unknown:%llu",
				 (unsigned long long)a->key.cgroup_id);
		else
			return; /* held back a little: see io's IO_UNRESOLVED_HOLD_MS */
	}
	if (collect_n == collect_cap)
		return;
	r = &collect_rows[collect_n++];
	r->agg = a;
	workload_from_cgroup(a->cgroup, r->workload, sizeof(r->workload));
	peer_string(&a->key, r->peer, sizeof(r->peer));
	snprintf(r->port, sizeof(r->port), "%u", a->key.peer_port);
}

static void row_labels(const struct flow_row *r, struct prom_label *l)
{
	l[0] = (struct prom_label){ "cgroup", r->agg->cgroup };
	l[1] = (struct prom_label){ "workload", r->workload };
	l[2] = (struct prom_label){ "comm", r->agg->key.comm };
	l[3] = (struct prom_label){ "peer_addr", r->peer };
	l[4] = (struct prom_label){ "peer_port", r->port };
	l[5] = (struct prom_label){ "role", flow_role_names[r->agg->key.role] };
}

/*
 * A removed cgroup's series stay for --cgroup-grace, as io's do, then go: without this, a
 * host with pod churn would fill the aggregate table with the dead. Keys sort by cgroup id
 * first, so one existence check (a stat) serves each run of keys of the same cgroup.
 */
#define FLOW_EXPIRY_CHECK_MS 1000

static struct flow_agg *expiry_victims[FLOW_BATCH];
static size_t expiry_n;
static uint64_t expiry_now, expiry_id;
static int expiry_exists;

static void expiry_visit(const void *node, VISIT which, int depth)
{
	struct flow_agg *a = *(struct flow_agg *const *)node;
	struct flow_state *s = collect_state;

	(void)depth;
	if (which != postorder && which != leaf)
		return;
	if (a->key.cgroup_id != expiry_id || expiry_exists < 0) {
		expiry_id = a->key.cgroup_id;
		expiry_exists = cgroup_cache_exists(s->cgroups, expiry_id);
	}
	if (expiry_exists) {
		a->gone_since_ms = 0;
		return;
	}
	if (!a->gone_since_ms)
		a->gone_since_ms = expiry_now;
	else if (expiry_now - a->gone_since_ms >= 1000ull * s->grace_s && expiry_n < FLOW_BATCH)
		expiry_victims[expiry_n++] = a;
}

static void flow_expire(struct flow_state *s)
{
	expiry_now = monotonic_ms();
	if (expiry_now - s->last_expiry_ms < FLOW_EXPIRY_CHECK_MS)
		return;
	s->last_expiry_ms = expiry_now;
	expiry_n = 0;
	expiry_exists = -1;
	collect_state = s;
	twalk(s->aggs, expiry_visit);
	for (size_t i = 0; i < expiry_n; i++) {
		tdelete(expiry_victims[i], &s->aggs, agg_cmp);
		free(expiry_victims[i]);
		s->naggs--;
	}
}

static int flow_collect(struct plumb_module *m, struct prom_writer *w)
{
	struct flow_state *s = m->priv;
	struct prom_label l[7];

	flow_read(s);
	flow_expire(s);
	collect_rows = calloc(s->naggs ? s->naggs : 1, sizeof(*collect_rows));
	if (!collect_rows)
		return -ENOMEM;
	collect_cap = s->naggs;
	collect_n = 0;
	collect_state = s;
	twalk(s->aggs, collect_visit);

	if (s->bytes != FLOW_BYTES_OFF) {
		prom_family(w, "plumb_flow_bytes_total", PROM_COUNTER,
			    "TCP payload bytes sent (tx) and received (rx) by the owning "
			    "process, per peer and server port.");
		for (size_t i = 0; i < collect_n; i++)
			for (int d = 0; d < 2; d++) {
				row_labels(&collect_rows[i], l);
				l[6] = (struct prom_label){ "direction", d ? "rx" : "tx" };
				prom_sample(w, l, 7,
					    (double)(d ? collect_rows[i].agg->rx :
							 collect_rows[i].agg->tx));
			}
	}
	prom_family(w, "plumb_flow_connections_total", PROM_COUNTER,
		    "TCP connections established, per owner, peer, server port and role.");
	for (size_t i = 0; i < collect_n; i++) {
		row_labels(&collect_rows[i], l);
		prom_sample(w, l, 6, (double)collect_rows[i].agg->connections);
	}
	free(collect_rows);
	collect_rows = NULL;
	return w->err;
}

static void flow_health(struct plumb_module *m, struct module_health *h)
{
	struct flow_state *s = m->priv;
	static const char *const reasons[FLOW_LOST_REASONS] = { "ringbuf_full", "conns_full" };
	int ncpus = libbpf_num_possible_cpus();
	__u64 *percpu = ncpus > 0 ? calloc(ncpus, sizeof(__u64)) : NULL;

	h->maps[h->nmaps].name = "flow_conns";
	h->maps[h->nmaps].entries = s->in_map;
	h->maps[h->nmaps++].capacity = bpf_map__max_entries(s->skel->maps.flow_conns);
	h->maps[h->nmaps].name = "connections";
	h->maps[h->nmaps].entries = s->ntracks;
	h->maps[h->nmaps++].capacity = s->track_capacity;
	h->maps[h->nmaps].name = "aggregates";
	h->maps[h->nmaps].entries = s->naggs;
	h->maps[h->nmaps++].capacity = s->agg_capacity;
	for (__u32 r = 0; r < FLOW_LOST_REASONS; r++) {
		uint64_t sum = 0;

		if (percpu && !bpf_map__lookup_elem(s->skel->maps.flow_lost, &r, sizeof(r), percpu,
						    ncpus * sizeof(__u64), 0))
			for (int c = 0; c < ncpus; c++)
				sum += percpu[c];
		h->lost[h->nlost].reason = reasons[r];
		h->lost[h->nlost++].count = sum;
	}
	free(percpu);
	h->lost[h->nlost].reason = "connections_full";
	h->lost[h->nlost++].count = s->tracks_full;
	h->lost[h->nlost].reason = "aggregates_full";
	h->lost[h->nlost++].count = s->aggs_full;
	h->obj = s->skel->obj;
}

static void flow_unload(struct plumb_module *m)
{
	struct flow_state *s = m->priv;

	if (!s)
		return;
	ring_buffer__free(s->events);
	bpf_link__destroy(s->iter);
	if (s->skel)
		links_destroy_parallel((struct bpf_link **)&s->skel->links,
				       sizeof(s->skel->links) / sizeof(struct bpf_link *));
	flow_bpf__destroy(s->skel);
	cgroup_cache_free(s->cgroups);
	tdestroy(s->tracks, free);
	tdestroy(s->aggs, free);
	free(s);
	m->priv = NULL;
}

/* Chooses programs from what the kernel offers; records the choices in m. */
static int flow_choose(struct plumb_module *m, struct flow_state *s, const struct plumb_config *cfg)
{
	static const enum kernel_feature required[] = { FEAT_BTF, FEAT_TP_BTF, FEAT_RINGBUF };
	static const struct {
		const char *tracepoint;
		int nargs;
	} bytes_tps[] = { { "sock_send_length", 3 }, { "sock_recv_length", 3 } };
	const char *off;
	bool calls;

	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (!kernel_has(required[i])) {
			snprintf(m->error, sizeof(m->error), "needs %s, which this kernel lacks",
				 kernel_feature_name(required[i]));
			return -EOPNOTSUPP;
		}
	if (tracepoint_btf_args("inet_sock_set_state") != 3) {
		module_attach_note(m, "tp_btf/inet_sock_set_state", "flow_state",
				   "missing: required, not in BTF");
		snprintf(m->error, sizeof(m->error), "tracepoint inet_sock_set_state not found");
		return -EOPNOTSUPP;
	}
	module_attach_note(m, "tp_btf/inet_sock_set_state", "flow_state", "chosen");
	s->skel->rodata->close_at_destroy = tracepoint_btf_args("tcp_destroy_sock") == 1;
	bpf_program__set_autoload(s->skel->progs.flow_destroy, s->skel->rodata->close_at_destroy);
	module_attach_note(m, "tp_btf/tcp_destroy_sock", "flow_destroy",
			   s->skel->rodata->close_at_destroy ?
				   "chosen" :
				   "off: tracepoint missing, connections end at TCP_CLOSE");
	calls = tracepoint_btf_args(bytes_tps[0].tracepoint) == bytes_tps[0].nargs &&
		tracepoint_btf_args(bytes_tps[1].tracepoint) == bytes_tps[1].nargs;
	switch (cfg->flow_bytes) {
	case FLOW_BYTES_AUTO:
		s->bytes = calls ? FLOW_BYTES_CALLS : FLOW_BYTES_COUNTERS;
		break;
	case FLOW_BYTES_CALLS:
		if (!calls) {
			snprintf(m->error, sizeof(m->error),
				 "--flow-bytes calls needs the sock_send_length and "
				 "sock_recv_length tracepoints (6.3+), which this kernel lacks");
			return -EOPNOTSUPP;
		}
		/* fall through */
	default:
		s->bytes = cfg->flow_bytes;
	}
	bpf_program__set_autoload(s->skel->progs.flow_send, s->bytes == FLOW_BYTES_CALLS);
	bpf_program__set_autoload(s->skel->progs.flow_recv, s->bytes == FLOW_BYTES_CALLS);
	s->skel->rodata->bytes_from_counters = s->bytes == FLOW_BYTES_COUNTERS;
	off = s->bytes == FLOW_BYTES_OFF ? "off: --flow-bytes off" :
	      calls ? "off: bytes from TCP's counters (--flow-bytes counters)" :
		      "off: tracepoint missing (6.3+): bytes from TCP's counters";
	module_attach_note(m, "tp_btf/sock_send_length", "flow_send",
			   s->bytes == FLOW_BYTES_CALLS ? "chosen" : off);
	module_attach_note(m, "tp_btf/sock_recv_length", "flow_recv",
			   s->bytes == FLOW_BYTES_CALLS ? "chosen" : off);
	if (!kernel_has(FEAT_SYSCALL_TRACEPOINTS) ||
	    !tracepoint_exists("syscalls", "sys_exit_accept4") ||
	    !tracepoint_exists("syscalls", "sys_exit_accept")) {
		/* owners of accepted connections then come from their first read or write */
		bpf_program__set_autoload(s->skel->progs.flow_accept4, false);
		bpf_program__set_autoload(s->skel->progs.flow_accept, false);
		module_attach_note(m, "syscalls/sys_exit_accept4", "flow_accept4",
				   "off: tracepoint missing");
		module_attach_note(m, "syscalls/sys_exit_accept", "flow_accept",
				   "off: tracepoint missing");
	} else {
		module_attach_note(m, "syscalls/sys_exit_accept4", "flow_accept4", "chosen");
		module_attach_note(m, "syscalls/sys_exit_accept", "flow_accept", "chosen");
	}
	module_attach_note(m, "iter/tcp", "flow_discover", "chosen");
	snprintf(m->choice, sizeof(m->choice), "TCP connections from inet_sock_set_state; bytes %s",
		 s->bytes == FLOW_BYTES_CALLS ? "per call from sock_send_length/sock_recv_length" :
		 s->bytes == FLOW_BYTES_COUNTERS ? "from TCP's counters at close and on each read "
						   "(live ones in the agent's network namespace)" :
						   "off");
	return 0;
}

static int flow_load(struct plumb_module *m, const struct plumb_config *cfg)
{
	struct flow_state *s;
	int err;

	m->nattach = 0;
	m->choice[0] = '\0';
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	m->priv = s;
	s->cgroup_root = cfg->cgroup_root;
	s->grace_s = cfg->cgroup_grace_s;
	s->track_capacity = cfg->flow_capacity;
	s->agg_capacity = cfg->flow_capacity;
	s->cgroups = cgroup_cache_new(cfg->cgroup_root, 4096);
	if (!s->cgroups) {
		err = -ENOMEM;
		snprintf(m->error, sizeof(m->error), "out of memory");
		goto out_unload;
	}
	s->skel = flow_bpf__open();
	if (!s->skel) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open BPF object: %s", strerror(-err));
		goto out_unload;
	}
	bpf_map__set_max_entries(s->skel->maps.flow_conns, cfg->flow_capacity);
	err = flow_choose(m, s, cfg);
	if (err)
		goto out_unload;
	err = flow_bpf__load(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot load BPF programs: %s",
			 strerror(-err));
		goto out_unload;
	}
	/* the iterator is run by hand below, not attached */
	bpf_program__set_autoattach(s->skel->progs.flow_discover, false);
	err = flow_bpf__attach(s->skel);
	if (err) {
		snprintf(m->error, sizeof(m->error), "cannot attach: %s", strerror(-err));
		goto out_unload;
	}
	s->events = ring_buffer__new(bpf_map__fd(s->skel->maps.flow_events), handle_close, s, NULL);
	if (!s->events) {
		err = -errno;
		snprintf(m->error, sizeof(m->error), "cannot open ring buffer: %s", strerror(-err));
		goto out_unload;
	}
	module_attach_settle(m, true);
	s->iter = bpf_program__attach_iter(s->skel->progs.flow_discover, NULL);
	err = s->iter ? flow_iterate(s) : -errno;
	/* the last note is iter/tcp's: it runs here, once, and again per read with counters */
	if (err)
		/* connections older than the agent then appear at their next send or receive */
		snprintf(m->attach[m->nattach - 1].status, sizeof(m->attach[0].status),
			 "failed: %s; older connections appear at their next send/recv",
			 strerror(-err));
	else
		snprintf(m->attach[m->nattach - 1].status, sizeof(m->attach[0].status),
			 "ran at start: %llu connections, %zu listeners",
			 (unsigned long long)s->found_at_start, s->nlisteners);
	return 0;

out_unload:
	module_attach_settle(m, false);
	flow_unload(m);
	return err;
}

struct plumb_module flow_module = {
	.name = "flow",
	.summary = "TCP connections and bytes per process, peer and server port",
	.load = flow_load,
	.tick = flow_tick,
	.collect = flow_collect,
	.health = flow_health,
	.unload = flow_unload,
};
