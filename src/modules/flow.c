// SPDX-License-Identifier: GPL-2.0
/*
 * flow module, user space: loads bpf/flow.bpf.c, follows each TCP connection by its socket
 * cookie (live byte counts from the flow_conns map, final ones from close events), and adds
 * what each connection did since the last read into per-(owner, peer, port, role) counters
 * for /metrics, and into per-process ends for /api/v1/graph (docs/graph.md): both ends of a
 * connection on this host are paired by the reversed 4-tuple, so a local edge names both
 * processes exactly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <dirent.h>
#include <fcntl.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <json-c/json.h>
#include <bpf/libbpf.h>

#include "adopt.h"
#include "clock.h"
#include "hashtab.h"
#include "detach.h"
#include "log.h"
#include "plumb.h"
#include "probe.h"
#include "export/prom.h"
#include "identity/cgroup.h"
#include "identity/netns.h"
#include "identity/workload.h"
#include <linux/types.h>
#include "flow.h"
#include "flow.skel.h"

#define FLOW_RESCAN_MS		250
#define FLOW_UNRESOLVED_HOLD_MS 5000
#define FLOW_LISTENERS_MAX	4096
#define FLOW_BATCH		1024
/*
 * A connection waits this long for the other end (same host) before its graph end is written
 * without a peer process; a closed one stays findable this long for a late other end.
 */
#define FLOW_PAIR_WAIT_MS 1000
/* flow_hot's entries: buckets (16 B each) and recently freed entries that stay in cache */
#define FLOW_HOT_MAX	  4096
#define FLOW_PAIR_HOLD_MS 1000
/*
 * UDP flows and unix sockets have no close the agent sees: one whose counts have not moved for
 * this long is taken out of the kernel map (its last counts read as it goes) and forgotten;
 * if it moves again it starts anew, as one more flow.
 */
#define FLOW_IDLE_MS 60000

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
	uint8_t proto; /* enum flow_proto */
	uint8_t pad[2];
	char path[80]; /* unix: the server's address, as unix_peer_string() writes it */
};

struct flow_agg {
	struct flow_agg_key key;
	uint64_t tx, rx, connections;
	uint64_t segs_out, segs_in; /* TCP only */
	char cgroup[256]; /* "" until resolved */
	uint64_t first_seen_ms;
	uint64_t gone_since_ms; /* when its cgroup was first seen removed; 0 while it exists */
};

/* A process's end of its connections for the graph: per peer, server port and peer process. */
struct flow_end_key {
	uint32_t tgid;
	uint32_t peer_tgid; /* the other end's process when both are on this host, else 0 */
	uint8_t laddr[16], raddr[16]; /* IPv6, or IPv4-mapped */
	uint16_t port; /* the server's port */
	uint8_t role;
	uint8_t proto; /* enum flow_proto */
	char path[80]; /* unix: the server's address, as unix_peer_string() writes it */
};

struct flow_end {
	struct flow_end_key key;
	uint64_t tx, rx, connections;
	uint64_t cgroup_id;
	char comm[16];
	char exe[256]; /* read when the end is made; "" if the process was gone */
	char cgroup[256]; /* its path once resolved, kept after the cgroup is removed */
	uint64_t gone_since_ms; /* when its process was first seen gone; 0 while it runs */
};

/* A connection's addresses and ports in one form (IPv4 as IPv4-mapped IPv6). */
struct flow_tuple {
	uint8_t laddr[16], raddr[16];
	uint16_t lport, rport;
	uint32_t netns; /* loopback connections only: the same addresses mean nothing across */
	uint32_t proto;
};

/* What a followed connection is known by: its socket, and for UDP the peer too. */
struct flow_track_key {
	uint64_t cookie;
	uint8_t raddr[16]; /* UDP only */
	uint16_t rport, family; /* UDP only */
	uint8_t proto; /* enum flow_proto */
	uint8_t pad[3];
};

/* A connection the agent follows: a TCP connection, a UDP (socket, peer) flow, a unix socket. */
struct flow_track {
	struct hnode hnode; /* in flow_state.tracks, by key */
	struct hnode tuple_node; /* in flow_state.tuples, by tuple, while indexed */
	struct flow_track_key key;
	struct flow_conn conn;
	char path[80]; /* unix: the server's address, as unix_peer_string() writes it */
	uint64_t last_change_ms; /* UDP and unix: when its counts last moved */
	struct flow_tuple tuple;
	uint64_t tx_seen, rx_seen; /* what was already added to its aggregate */
	uint32_t segs_out_seen, segs_in_seen;
	uint64_t end_tx_seen, end_rx_seen; /* ... and to its graph end */
	uint64_t read_gen; /* the map read that last saw it */
	uint64_t first_ms, closed_ms;
	uint32_t peer_tgid;
	bool counted; /* added to its aggregate's connections */
	bool end_counted; /* ... and to its graph end's */
	bool peer_decided; /* peer_tgid is final (0: not on this host, or not seen in time) */
	bool closed; /* its close event came: kept FLOW_PAIR_HOLD_MS for the other end */
	bool indexed; /* the tuple index points at it */
	struct flow_track *closed_prev, *closed_next; /* closed ones, oldest first */
};

struct flow_listener {
	uint32_t netns;
	uint16_t port;
};

/*
 * --pin: what user space hands to the next agent beside the maps, in DIR/flow_baselines, per
 * followed connection (key: struct flow_track_key): its counts already added to its aggregate,
 * so the next agent adds only what came after; whether it was counted as a connection; and
 * its owner, which user space may have found itself (/proc, a connection older than the agent).
 */
struct flow_baseline {
	uint64_t tx_seen, rx_seen;
	uint32_t segs_out_seen, segs_in_seen;
	uint64_t cgroup_id;
	uint32_t tgid;
	uint8_t counted;
	uint8_t pad[3];
	char comm[16];
};

/*
 * Written last, when every connection's baseline was: an agent stopped midway (killed while
 * it saved them) leaves none, and the next one does not take the maps over.
 */
#define FLOW_BASELINES_MARK 0xff /* in key.proto */

/* A baseline taken over, until its connection is first read or its close event drained. */
struct flow_restored {
	struct hnode hnode;
	struct flow_track_key key;
	struct flow_baseline b;
};

struct flow_netns;

struct flow_state {
	const char *cgroup_root;
	uint64_t last_owner_scan_ms;
	struct flow_bpf *skel;
	struct ring_buffer *events;
	struct cgroup_cache *cgroups;
	struct hashtab tracks, tuples; /* connections by key, and by 4-tuple */
	void *aggs, *ends; /* tsearch trees */
	struct flow_track *closed_head, *closed_tail; /* closed connections, in closing order */
	size_t ntracks, naggs, nends, track_capacity, agg_capacity;
	const struct netns *netns;
	struct flow_listener listeners[FLOW_LISTENERS_MAX];
	size_t nlisteners;
	enum flow_bytes_mode bytes; /* CALLS, COUNTERS or OFF once chosen */
	bool dgram_on, unix_on; /* UDP flows and unix sockets followed */
	struct bpf_link
		*iter; /* flow_discover, run at load and, counting from counters, per read */
	uint64_t read_gen, in_map;
	unsigned int grace_s;
	uint64_t last_expiry_ms;
	uint64_t tracks_full, aggs_full, ends_full, found_at_start;
	uint64_t in_dgram, in_unix;
	struct flow_netns *netnses; /* counting from counters: namespaces walked per read */
	size_t nnetns;
	uint32_t own_netns;
	uint64_t netns_full;
	struct adopt adopt; /* --pin: the maps and links over a restart */
	int baselines_fd; /* --pin: DIR/flow_baselines, or -1 */
	struct hashtab restored; /* flow_restored, by key; until the first read is done */
	bool reading; /* flow_read's drain and map reads: closed tracks are held */
	uint64_t now_ms; /* monotonic_ms() at the drain or read under way (one clock read each) */
	size_t nrestored;
};

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

/* The connection's role and server port (older than the agent: a server if it listens). */
static uint8_t conn_role(const struct flow_state *s, const struct flow_conn *c, uint16_t *port)
{
	uint8_t role = c->role;

	if (role == FLOW_ROLE_UNKNOWN)
		role = is_listener(s, c->netns, c->lport) ? FLOW_ROLE_SERVER : FLOW_ROLE_CLIENT;
	*port = role == FLOW_ROLE_SERVER ? c->lport : c->rport;
	return role;
}

static struct flow_agg *agg_for(struct flow_state *s, const struct flow_track *t)
{
	struct flow_agg probe = { 0 }, *a, **found;
	const struct flow_conn *c = &t->conn;

	probe.key.cgroup_id = c->cgroup_id;
	memcpy(probe.key.comm, c->comm, sizeof(probe.key.comm));
	probe.key.family = c->family;
	memcpy(probe.key.peer, c->raddr, sizeof(probe.key.peer));
	probe.key.role = conn_role(s, c, &probe.key.peer_port);
	probe.key.proto = c->proto;
	if (c->proto == FLOW_PROTO_UNIX) {
		probe.key.peer_port = 0;
		memcpy(probe.key.path, t->path, sizeof(probe.key.path));
	}
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

static void addr_v6(uint16_t family, const uint8_t *in, uint8_t *out)
{
	if (family == AF_INET) {
		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, in, 4);
	} else {
		memcpy(out, in, 16);
	}
}

static bool addr_is_loopback(const uint8_t *a)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t v6loop[16] = { [15] = 1 };

	return !memcmp(a, v6loop, 16) || (!memcmp(a, v4mapped, 12) && a[12] == 127);
}

static void tuple_of(const struct flow_conn *c, struct flow_tuple *t)
{
	memset(t, 0, sizeof(*t));
	addr_v6(c->family, c->laddr, t->laddr);
	addr_v6(c->family, c->raddr, t->raddr);
	t->lport = c->lport;
	t->rport = c->rport;
	t->proto = c->proto;
	if (addr_is_loopback(t->raddr))
		t->netns = c->netns;
}

/* The connection the tuple index holds for this tuple (the newest with it), or NULL. */
static struct flow_track *tuple_find(const struct flow_state *s, const struct flow_tuple *tuple)
{
	uint64_t hash = hash_bytes(tuple, sizeof(*tuple));

	for (struct hnode *n = s->tuples.buckets[hash & s->tuples.mask]; n; n = n->next) {
		struct flow_track *t =
			(struct flow_track *)((char *)n - offsetof(struct flow_track, tuple_node));

		if (n->hash == hash && !memcmp(&t->tuple, tuple, sizeof(*tuple)))
			return t;
	}
	return NULL;
}

static void tuple_unindex(struct flow_state *s, struct flow_track *t)
{
	if (!t->indexed)
		return;
	hashtab_remove(&s->tuples, &t->tuple_node);
	t->indexed = false;
}

/* Makes t the connection its tuple names (the newest one, if a tuple was reused). */
static void tuple_index(struct flow_state *s, struct flow_track *t)
{
	struct flow_track *old = tuple_find(s, &t->tuple);

	if (old)
		tuple_unindex(s, old);
	hashtab_insert(&s->tuples, &t->tuple_node, hash_bytes(&t->tuple, sizeof(t->tuple)));
	t->indexed = true;
}

/* The connection at the other end of t on this host, if the agent follows it. */
static struct flow_track *tuple_peer(struct flow_state *s, const struct flow_track *t)
{
	struct flow_tuple probe;
	struct flow_track *found;

	memset(&probe, 0, sizeof(probe));
	memcpy(probe.laddr, t->tuple.raddr, 16);
	memcpy(probe.raddr, t->tuple.laddr, 16);
	probe.lport = t->tuple.rport;
	probe.rport = t->tuple.lport;
	probe.netns = t->tuple.netns;
	probe.proto = t->tuple.proto;
	found = tuple_find(s, &probe);
	if (!found && t->conn.proto == FLOW_PROTO_UDP) {
		/* a UDP server bound to the any address: 0.0.0.0 (IPv4-mapped) or :: */
		memset(probe.laddr, 0, 16);
		found = tuple_find(s, &probe);
		if (!found) {
			probe.laddr[10] = probe.laddr[11] = 0xff;
			found = tuple_find(s, &probe);
		}
	}
	return found != t ? found : NULL;
}

static int end_cmp(const void *a, const void *b)
{
	return memcmp(&((const struct flow_end *)a)->key, &((const struct flow_end *)b)->key,
		      sizeof(struct flow_end_key));
}

static struct flow_end *end_for(struct flow_state *s, const struct flow_track *t)
{
	struct flow_end probe, *e, **found;
	char path[64];
	ssize_t n;

	memset(&probe, 0, sizeof(probe));
	probe.key.tgid = t->conn.tgid;
	probe.key.peer_tgid = t->peer_tgid;
	memcpy(probe.key.laddr, t->tuple.laddr, 16);
	memcpy(probe.key.raddr, t->tuple.raddr, 16);
	probe.key.role = conn_role(s, &t->conn, &probe.key.port);
	probe.key.proto = t->conn.proto;
	if (t->conn.proto == FLOW_PROTO_UNIX) {
		probe.key.port = 0;
		memcpy(probe.key.path, t->path, sizeof(probe.key.path));
	}
	found = tfind(&probe, &s->ends, end_cmp);
	if (found)
		return *found;
	if (s->nends >= s->agg_capacity) {
		s->ends_full++;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key = probe.key;
	e->cgroup_id = t->conn.cgroup_id;
	memcpy(e->comm, t->conn.comm, sizeof(e->comm));
	snprintf(path, sizeof(path), "/proc/%u/exe", e->key.tgid);
	n = e->key.tgid ? readlink(path, e->exe, sizeof(e->exe) - 1) : -1;
	e->exe[n > 0 ? n : 0] = '\0';
	if (!tsearch(e, &s->ends, end_cmp)) {
		free(e);
		return NULL;
	}
	s->nends++;
	return e;
}

/*
 * Adds what the connection did since last time to its process's graph end. First its peer:
 * the connection with the reversed tuple, when the agent follows it and its owner is known;
 * both ends are decided together, so that the two ends of a pair name each other or neither.
 * A connection whose peer is not found within FLOW_PAIR_WAIT_MS is a remote one (or its peer
 * came too late): its end is joined by address (docs/graph.md section 3). Returns the peer it
 * was paired with now, if any.
 */
static struct flow_track *end_apply(struct flow_state *s, struct flow_track *t, uint64_t now)
{
	struct flow_track *paired = NULL;
	struct flow_end *e;

	if (!t->conn.established || (!t->conn.tgid && !t->closed))
		return NULL;
	if (t->conn.proto == FLOW_PROTO_UNIX) {
		/* the kernel names the peer process itself (SO_PEERCRED) */
		t->peer_tgid = t->conn.peer_tgid;
		t->peer_decided = true;
	}
	if (!t->peer_decided) {
		struct flow_track *r = tuple_peer(s, t);

		if (r && r->conn.established && (r->conn.tgid || r->closed) &&
		    (!r->peer_decided || r->peer_tgid == t->conn.tgid)) {
			t->peer_tgid = r->conn.tgid;
			r->peer_tgid = t->conn.tgid;
			t->peer_decided = r->peer_decided = true;
			paired = r;
		} else if (now - t->first_ms < FLOW_PAIR_WAIT_MS) {
			return NULL;
		} else {
			t->peer_decided = true;
		}
	}
	e = end_for(s, t);
	if (!e)
		return paired;
	if (t->conn.tx >= t->end_tx_seen)
		e->tx += t->conn.tx - t->end_tx_seen;
	if (t->conn.rx >= t->end_rx_seen)
		e->rx += t->conn.rx - t->end_rx_seen;
	t->end_tx_seen = t->conn.tx;
	t->end_rx_seen = t->conn.rx;
	if (!t->end_counted) {
		e->connections++;
		t->end_counted = true;
	}
	return paired;
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
	if (c->tx != t->conn.tx || c->rx != t->conn.rx)
		t->last_change_ms = s->now_ms;
	t->conn.tx = c->tx; /* the counts so far, for end_apply */
	t->conn.rx = c->rx;
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
	if (c->segs_out >= t->segs_out_seen)
		a->segs_out += c->segs_out - t->segs_out_seen;
	if (c->segs_in >= t->segs_in_seen)
		a->segs_in += c->segs_in - t->segs_in_seen;
	t->segs_out_seen = c->segs_out;
	t->segs_in_seen = c->segs_in;
	if (!t->counted) {
		a->connections++;
		t->counted = true;
	}
}

/*
 * A connection the agent before followed: it continues from what that agent had added (the
 * counts since are in the maps the two shared, or in its close event).
 */
static void track_restore(struct flow_state *s, struct flow_track *t, uint64_t hash)
{
	struct flow_restored *r;

	r = (struct flow_restored *)hashtab_find(
		&s->restored, hash, &t->key, offsetof(struct flow_restored, key), sizeof(t->key));
	if (!r)
		return;
	t->tx_seen = t->end_tx_seen = t->conn.tx = r->b.tx_seen;
	t->rx_seen = t->end_rx_seen = t->conn.rx = r->b.rx_seen;
	t->segs_out_seen = r->b.segs_out_seen;
	t->segs_in_seen = r->b.segs_in_seen;
	t->counted = r->b.counted;
	if (r->b.tgid) { /* as it was: the owner is set once (track_apply) */
		t->conn.tgid = r->b.tgid;
		t->conn.cgroup_id = r->b.cgroup_id;
		memcpy(t->conn.comm, r->b.comm, sizeof(t->conn.comm));
	}
	hashtab_remove(&s->restored, &r->hnode);
	free(r);
	s->nrestored--;
}

static void restored_free(struct flow_state *s)
{
	struct hnode *n, *next;

	for (size_t b = 0; s->restored.buckets && b <= s->restored.mask; b++)
		for (n = s->restored.buckets[b]; n; n = next) {
			next = n->next;
			free(n);
		}
	free(s->restored.buckets);
	s->restored.buckets = NULL;
	s->nrestored = 0;
}

/*
 * The connection's track, made when absent. from_map: c was read from a kernel map, where the
 * entry may have been for long; a track first seen at its close event waits its second from
 * then (its peer's close may come next: decided at once, both ends would go unpaired).
 */
static struct flow_track *track_get(struct flow_state *s, const struct flow_track_key *key,
				    const struct flow_conn *c, bool from_map)
{
	uint64_t hash = hash_bytes(key, sizeof(*key));
	struct flow_track *t;

	t = (struct flow_track *)hashtab_find(&s->tracks, hash, key,
					      offsetof(struct flow_track, key), sizeof(*key));
	if (t)
		return t;
	if (s->ntracks >= s->track_capacity) {
		s->tracks_full++;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->key = *key;
	t->conn = *c;
	t->conn.tx = t->conn.rx = 0;
	t->last_change_ms = s->now_ms;
	/* the entry's age, not the read's: a read may be the first in minutes (no scrapes) */
	t->first_ms = from_map && c->first_ns && c->first_ns / 1000000 < s->now_ms ?
			      c->first_ns / 1000000 :
			      s->now_ms;
	if (s->nrestored)
		track_restore(s, t, hash);
	tuple_of(c, &t->tuple);
	hashtab_insert(&s->tracks, &t->hnode, hash);
	s->ntracks++;
	if (c->proto != FLOW_PROTO_UNIX)
		tuple_index(s, t); /* unix sockets name their peer process themselves */
	return t;
}

static void track_drop(struct flow_state *s, struct flow_track *t)
{
	if (t->closed) {
		if (t->closed_prev)
			t->closed_prev->closed_next = t->closed_next;
		else
			s->closed_head = t->closed_next;
		if (t->closed_next)
			t->closed_next->closed_prev = t->closed_prev;
		else
			s->closed_tail = t->closed_prev;
	}
	tuple_unindex(s, t);
	hashtab_remove(&s->tracks, &t->hnode);
	free(t);
	s->ntracks--;
}

static int handle_close(void *ctx, void *data, size_t len)
{
	struct flow_state *s = ctx;
	const struct flow_event *e = data;
	struct flow_track_key key = { .proto = FLOW_PROTO_TCP };
	struct flow_track *t, *r;

	if (len < sizeof(*e) || e->kind != FLOW_CLOSE)
		return 0;
	key.cookie = e->cookie;
	t = track_get(s, &key, &e->conn, false);
	if (!t || t->closed)
		return 0;
	track_apply(s, t, &e->conn, true);
	/* kept a little for its graph end and the other end's pairing: see closed_expire() */
	t->closed = true;
	t->closed_ms = s->now_ms;
	t->closed_prev = s->closed_tail;
	t->closed_next = NULL;
	if (s->closed_tail)
		s->closed_tail->closed_next = t;
	else
		s->closed_head = t;
	s->closed_tail = t;
	r = end_apply(s, t, t->closed_ms);
	/*
	 * Paired or decided: nothing is left to wait for. Going now keeps the agent's table to
	 * the connections still waiting for their peer (under churn, tens of thousands held for
	 * FLOW_PAIR_HOLD_MS made the agent's working set megabytes, and cost the workload more
	 * than the agent's CPU time: bench/results/README.md, flow). A closed peer paired now has its end
	 * applied and goes too; a live one is applied at its reads and close as before. Not
	 * while a read of the map is under way (flow_read): the event is sent just before the
	 * entry is deleted, so the read may still find it, and the closed track, held, makes
	 * read_tcp ignore it instead of counting a new connection.
	 */
	if (r && r->closed) {
		end_apply(s, r, t->closed_ms);
		if (!s->reading)
			track_drop(s, r);
	}
	if (t->peer_decided && !s->reading)
		track_drop(s, t);
	return 0;
}

/*
 * On every tick, not only at reads (scrapes may be far apart while thousands of connections
 * close each second): closed connections held FLOW_PAIR_HOLD_MS go, oldest first, their
 * graph ends applied a last time (a peer that never came: applied unpaired).
 */
static void closed_expire(struct flow_state *s, uint64_t now)
{
	while (s->closed_head && now - s->closed_head->closed_ms >= FLOW_PAIR_HOLD_MS) {
		struct flow_track *t = s->closed_head;

		end_apply(s, t, now); /* now >= first_ms + FLOW_PAIR_WAIT_MS: decides */
		track_drop(s, t);
	}
}

/*
 * Runs flow_discover (iter/tcp, the agent's network namespace): at load for listening ports
 * and connections established before the agent; counting from TCP's counters, also before
 * each read of the map, to bring live connections' counts up to date.
 */
static int flow_iterate_here(void *arg)
{
	struct flow_state *s = arg;
	struct flow_event e;
	int fd;

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

/* iter/tcp walks the network namespace of whoever creates the iterator: --netns's, or ours. */
static int flow_iterate(struct flow_state *s)
{
	if (!s->iter)
		return -ENOENT;
	if (!s->netns)
		return flow_iterate_here(s);
	return netns_run(s->netns, flow_iterate_here, s);
}

/*
 * Counting from TCP's counters, live connections in every network namespace: each namespace
 * that has followed connections is entered (through /proc/<owner>/ns/net, kept open while it
 * has connections) and walked by the iterator before each read. Bounded by FLOW_NETNS_MAX;
 * namespaces left out show their connections' bytes at close (counted: netns_full).
 */
#define FLOW_NETNS_MAX	   1024
#define FLOW_NETNS_IDLE_MS 60000

struct flow_netns {
	struct netns ns;
	uint64_t last_used_ms;
};

static struct flow_netns *netns_find(struct flow_state *s, uint32_t ino)
{
	for (size_t i = 0; i < s->nnetns; i++)
		if (s->netnses[i].ns.ino == ino)
			return &s->netnses[i];
	return NULL;
}

/* Notes that a followed connection lives in namespace ino, owned by pid. */
static void netns_want(struct flow_state *s, uint32_t ino, uint32_t pid, uint64_t now)
{
	struct flow_netns *n = netns_find(s, ino);
	char path[64], err[128];

	if (n) {
		n->last_used_ms = now;
		return;
	}
	if (!ino || ino == s->own_netns || !pid)
		return;
	if (s->nnetns == FLOW_NETNS_MAX) {
		s->netns_full++;
		return;
	}
	snprintf(path, sizeof(path), "/proc/%u/ns/net", pid);
	n = &s->netnses[s->nnetns];
	if (netns_open(path, &n->ns, err, sizeof(err)))
		return; /* the owner is gone: another connection of that namespace may do */
	if (n->ns.ino != ino) {
		netns_close(&n->ns); /* the pid was reused by a process elsewhere */
		return;
	}
	n->last_used_ms = now;
	s->nnetns++;
}

static void flow_iterate_all(struct flow_state *s, uint64_t now)
{
	flow_iterate(s);
	if (s->netns && s->netns->fd >= 0)
		return; /* --netns: that one only */
	for (size_t i = 0; i < s->nnetns;) {
		if (now - s->netnses[i].last_used_ms >= FLOW_NETNS_IDLE_MS) {
			netns_close(&s->netnses[i].ns);
			s->netnses[i] = s->netnses[--s->nnetns];
			continue;
		}
		netns_run(&s->netnses[i].ns, flow_iterate_here, s);
		i++;
	}
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

static void owners_find(struct flow_state *s)
{
	struct dirent *p, *fd;
	struct hnode *n;
	DIR *proc, *fds;
	size_t b;

	owner_nwanted = 0;
	hashtab_for_each(&s->tracks, b, n)
	{
		struct flow_track *t = (struct flow_track *)n;

		if (!t->conn.tgid && t->conn.ino && owner_nwanted < FLOW_OWNER_WANTED)
			owner_wanted[owner_nwanted++] = t;
	}
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

static uint64_t sweep_now;

/*
 * After each read: every live connection's graph end is brought up to date (closed ones are
 * closed_expire()'s); a UDP flow or unix socket idle for FLOW_IDLE_MS goes; a TCP connection
 * absent from two reads in a row lost its close event and goes.
 */
static void sweep_visit(struct flow_track *t)
{
	bool stale;

	if (t->closed)
		return;
	end_apply(sweep_state, t, sweep_now);
	if (sweep_state->netnses && t->key.proto == FLOW_PROTO_TCP)
		netns_want(sweep_state, t->conn.netns, t->conn.tgid, sweep_now);
	if (t->key.proto != FLOW_PROTO_TCP && sweep_now - t->last_change_ms >= FLOW_IDLE_MS)
		stale = true;
	else
		stale = t->read_gen + 2 <= sweep_state->read_gen;
	if (stale && sweep_n < FLOW_BATCH)
		sweep_victims[sweep_n++] = t;
}

/*
 * Reads every live connection from the kernel map. Close events are drained first, so a
 * connection missing from the map has either closed since (its event comes at the next drain)
 * or lost its close event: one absent from two reads in a row is dropped.
 */
static const char *const flow_proto_names[] = { "tcp", "udp", "unix" };

/*
 * A unix socket's address as a peer: "unix:/run/x.sock", "unix:@name" for an abstract one,
 * "unix:" for an unnamed one (socketpair); bytes that are not printable become '?'.
 */
static void unix_peer_string(const char *path, size_t len, char *out, size_t outlen)
{
	size_t n = snprintf(out, outlen, "unix:");

	for (size_t i = 0; i < len && i < 64 && n + 1 < outlen; i++) {
		char c = path[i];

		if (i == 0 && c == '\0')
			c = '@';
		else if (c == '\0' && path[0] != '\0')
			break; /* a path name ends at its NUL */
		else if (c < 0x20 || c > 0x7e)
			c = '?';
		out[n++] = c;
	}
	out[n] = '\0';
}

/* Reads one kernel map whole; the number of entries (0 when the read fails). */
static uint64_t entries_read(const struct bpf_map *map, map_visit_fn visit, struct flow_state *s,
			     bool *ok)
{
	long n = map_read_all(map, visit, s);

	if (n < 0)
		*ok = false;
	return n > 0 ? n : 0;
}

static int read_tcp(void *ctx, const void *k, const void *v)
{
	struct flow_track_key key = { .cookie = *(const __u64 *)k, .proto = FLOW_PROTO_TCP };
	const struct flow_conn *c = v;
	struct flow_state *s = ctx;
	struct flow_track *t;

	if (!c->established)
		return 0;
	t = track_get(s, &key, c, true);
	if (!t || t->closed)
		return 0; /* closed: a later entry of the same socket (TCP_CLOSE ends) */
	t->read_gen = s->read_gen;
	track_apply(s, t, c, false);
	return 0;
}

static void dgram_track_key(const struct flow_dgram_key *k, struct flow_track_key *key)
{
	memset(key, 0, sizeof(*key));
	key->cookie = k->cookie;
	memcpy(key->raddr, k->raddr, sizeof(key->raddr));
	key->rport = k->rport;
	key->family = k->family;
	key->proto = FLOW_PROTO_UDP;
}

static int read_dgram(void *ctx, const void *k, const void *v)
{
	struct flow_state *s = ctx;
	struct flow_track_key key;
	struct flow_track *t;

	dgram_track_key(k, &key);
	t = track_get(s, &key, v, true);
	if (!t)
		return 0;
	t->read_gen = s->read_gen;
	track_apply(s, t, v, false);
	return 0;
}

static int read_unix(void *ctx, const void *k, const void *v)
{
	struct flow_track_key key = { .cookie = *(const __u64 *)k, .proto = FLOW_PROTO_UNIX };
	const struct flow_unix *u = v;
	struct flow_state *s = ctx;
	struct flow_track *t;

	t = track_get(s, &key, &u->conn, true);
	if (!t)
		return 0;
	if (!t->path[0])
		unix_peer_string(u->path, u->path_len, t->path, sizeof(t->path));
	t->read_gen = s->read_gen;
	track_apply(s, t, &u->conn, false);
	return 0;
}

/* A UDP flow or unix socket idle for FLOW_IDLE_MS leaves the kernel map with its last counts. */
static void track_retire(struct flow_state *s, struct flow_track *t)
{
	struct flow_dgram_key dk = { .cookie = t->key.cookie };
	struct flow_unix u;

	if (t->key.proto == FLOW_PROTO_UDP) {
		memcpy(dk.raddr, t->key.raddr, sizeof(dk.raddr));
		dk.rport = t->key.rport;
		dk.family = t->key.family;
		if (!bpf_map_lookup_and_delete_elem(bpf_map__fd(s->skel->maps.flow_dgram), &dk,
						    &u.conn))
			track_apply(s, t, &u.conn, true);
	} else if (t->key.proto == FLOW_PROTO_UNIX) {
		if (!bpf_map_lookup_and_delete_elem(bpf_map__fd(s->skel->maps.flow_unix),
						    &t->key.cookie, &u))
			track_apply(s, t, &u.conn, true);
	}
	end_apply(s, t, monotonic_ms());
}

/*
 * Reads every live connection from the kernel maps. Close events are drained first, so a TCP
 * connection missing from the map has either closed since (its event comes at the next drain)
 * or lost its close event: one absent from two reads in a row is dropped.
 */
static void flow_read(struct flow_state *s)
{
	bool ok = true;

	s->reading = true;
	s->now_ms = monotonic_ms();
	ring_buffer__consume(s->events);
	if (s->bytes == FLOW_BYTES_COUNTERS)
		flow_iterate_all(s, monotonic_ms());
	s->read_gen++;
	s->in_map = entries_read(s->skel->maps.flow_hot, read_tcp, s, &ok);
	s->in_map += entries_read(s->skel->maps.flow_conns, read_tcp, s, &ok);
	if (s->dgram_on)
		s->in_dgram = entries_read(s->skel->maps.flow_dgram, read_dgram, s, &ok);
	if (s->unix_on)
		s->in_unix = entries_read(s->skel->maps.flow_unix, read_unix, s, &ok);
	s->reading = false;
	owners_find(s);
	sweep_state = s;
	sweep_now = monotonic_ms();
	do {
		struct hnode *n;
		size_t b;

		sweep_n = 0;
		hashtab_for_each(&s->tracks, b, n) sweep_visit((struct flow_track *)n);
		for (size_t i = 0; i < sweep_n; i++) {
			if (sweep_victims[i]->key.proto != FLOW_PROTO_TCP)
				track_retire(s, sweep_victims[i]);
			track_drop(s, sweep_victims[i]);
		}
	} while (sweep_n == FLOW_BATCH);
	/*
	 * Every connection the agent before followed has been read from the maps or closed by
	 * now: one that closed during the read had its event sent before its entry went, so it
	 * is in the ring buffer. One that is neither lost its close event.
	 */
	if (s->restored.buckets && ok) {
		ring_buffer__consume(s->events);
		if (s->nrestored)
			pr_info("pin: flow: %zu connections handed over were gone\n", s->nrestored);
		restored_free(s);
	}
}

static int flow_tick(struct plumb_module *m)
{
	struct flow_state *s = m->priv;

	s->now_ms = monotonic_ms();
	ring_buffer__consume(s->events);
	closed_expire(s, s->now_ms);
	return 0;
}

static void peer_string(const struct flow_agg_key *k, char *out, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (k->proto == FLOW_PROTO_UNIX)
		snprintf(out, len, "%s", k->path);
	else if (k->family == AF_INET6 && !memcmp(k->peer, v4mapped, sizeof(v4mapped)))
		inet_ntop(AF_INET, k->peer + 12, out, len);
	else
		inet_ntop(k->family == AF_INET6 ? AF_INET6 : AF_INET, k->peer, out, len);
}

struct flow_row {
	const struct flow_agg *agg;
	char workload[256], peer[80], port[8];
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
	if (a->key.proto == FLOW_PROTO_UNIX)
		r->port[0] = '\0';
	else
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
	l[6] = (struct prom_label){ "protocol", flow_proto_names[r->agg->key.proto] };
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
	if (grace_over(&a->gone_since_ms, expiry_now, s->grace_s) && expiry_n < FLOW_BATCH)
		expiry_victims[expiry_n++] = a;
}

/* Graph ends of processes that exited go after --cgroup-grace, like removed cgroups' series. */
static struct flow_end *end_victims[FLOW_BATCH];
static size_t end_victims_n;
static uint32_t end_pid;
static bool end_pid_alive;

static void end_expiry_visit(const void *node, VISIT which, int depth)
{
	struct flow_end *e = *(struct flow_end *const *)node;
	struct flow_state *s = collect_state;

	(void)depth;
	if (which != postorder && which != leaf)
		return;
	if (e->key.tgid != end_pid) {
		end_pid = e->key.tgid;
		end_pid_alive = end_pid && (kill((pid_t)end_pid, 0) == 0 || errno == EPERM);
	}
	if (end_pid_alive) {
		e->gone_since_ms = 0;
		return;
	}
	if (grace_over(&e->gone_since_ms, expiry_now, s->grace_s) && end_victims_n < FLOW_BATCH)
		end_victims[end_victims_n++] = e;
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
	end_victims_n = 0;
	end_pid = 0;
	end_pid_alive = false;
	twalk(s->ends, end_expiry_visit);
	for (size_t i = 0; i < end_victims_n; i++) {
		tdelete(end_victims[i], &s->ends, end_cmp);
		free(end_victims[i]);
		s->nends--;
	}
}

static int flow_collect(struct plumb_module *m, struct prom_writer *w)
{
	struct flow_state *s = m->priv;
	struct prom_label l[8];

	if (m->maps_only)
		return 0; /* the next agent adds only what came after this read: all is carried */
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
			    "Payload bytes sent (tx) and received (rx) by the owning process "
			    "over TCP, UDP and unix sockets, per peer and server port.");
		for (size_t i = 0; i < collect_n; i++)
			for (int d = 0; d < 2; d++) {
				row_labels(&collect_rows[i], l);
				l[7] = (struct prom_label){ "direction", d ? "rx" : "tx" };
				prom_sample(w, l, 8,
					    (double)(d ? collect_rows[i].agg->rx :
							 collect_rows[i].agg->tx));
			}
	}
	prom_family(w, "plumb_flow_segments_total", PROM_COUNTER,
		    "TCP segments sent (tx) and received (rx), every segment (data, pure ACKs, "
		    "retransmissions); live with --flow-bytes counters, else at close.");
	for (size_t i = 0; i < collect_n; i++)
		for (int d = 0; d < 2 && collect_rows[i].agg->key.proto == FLOW_PROTO_TCP; d++) {
			row_labels(&collect_rows[i], l);
			l[7] = (struct prom_label){ "direction", d ? "rx" : "tx" };
			prom_sample(w, l, 8,
				    (double)(d ? collect_rows[i].agg->segs_in :
						 collect_rows[i].agg->segs_out));
		}
	prom_family(w, "plumb_flow_connections_total", PROM_COUNTER,
		    "Connections established (TCP), flows seen (UDP, per socket and "
		    "peer) and sockets seen (unix), per owner, peer, server port and role.");
	for (size_t i = 0; i < collect_n; i++) {
		row_labels(&collect_rows[i], l);
		prom_sample(w, l, 7, (double)collect_rows[i].agg->connections);
	}
	free(collect_rows);
	collect_rows = NULL;
	return w->err;
}

/* An address as text; "" for the unspecified one (a UDP socket bound to any, a unix socket). */
static void addr_string(const uint8_t *a, char *out, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t zero[16];

	if (!memcmp(a, zero, 16) || (!memcmp(a, v4mapped, 12) && !memcmp(a + 12, zero, 4)))
		snprintf(out, len, "%s", "");
	else if (!memcmp(a, v4mapped, sizeof(v4mapped)))
		inet_ntop(AF_INET, a + 12, out, len);
	else
		inet_ntop(AF_INET6, a, out, len);
}

static struct json_object *graph_ends, *graph_processes;
static uint32_t graph_last_pid;
static bool graph_rescanned; /* one forced cgroup rescan per request, not one per miss */

/* One end, and its process the first time one of its ends is seen (ends sort by pid first). */
static void graph_visit(const void *node, VISIT which, int depth)
{
	struct flow_end *e = *(struct flow_end *const *)node;
	struct flow_state *s = collect_state;
	struct json_object *o;
	char addr[INET6_ADDRSTRLEN], workload[256];
	const char *cgroup;

	(void)depth;
	if (which != postorder && which != leaf)
		return;
	if (e->key.tgid != graph_last_pid || !json_object_array_length(graph_processes)) {
		graph_last_pid = e->key.tgid;
		if (!e->cgroup[0]) {
			cgroup = cgroup_cache_resolve(s->cgroups, e->cgroup_id,
						      graph_rescanned ? FLOW_RESCAN_MS : 0);
			if (!cgroup)
				graph_rescanned = true; /* it rescanned: once is enough */
			else
				snprintf(e->cgroup, sizeof(e->cgroup), "%s", cgroup);
		}
		cgroup = e->cgroup;
		workload[0] = '\0';
		if (cgroup[0])
			workload_from_cgroup(cgroup, workload, sizeof(workload));
		o = json_object_new_object();
		json_object_object_add(o, "pid", json_object_new_int64(e->key.tgid));
		json_object_object_add(o, "comm", json_object_new_string(e->comm));
		json_object_object_add(o, "exe", json_object_new_string(e->exe));
		json_object_object_add(o, "cgroup", json_object_new_string(cgroup));
		json_object_object_add(o, "workload", json_object_new_string(workload));
		json_object_array_add(graph_processes, o);
	}
	o = json_object_new_object();
	json_object_object_add(o, "pid", json_object_new_int64(e->key.tgid));
	json_object_object_add(o, "role", json_object_new_string(flow_role_names[e->key.role]));
	json_object_object_add(o, "protocol",
			       json_object_new_string(flow_proto_names[e->key.proto]));
	addr_string(e->key.laddr, addr, sizeof(addr));
	json_object_object_add(o, "local_addr", json_object_new_string(addr));
	if (e->key.proto == FLOW_PROTO_UNIX)
		json_object_object_add(o, "peer_addr", json_object_new_string(e->key.path));
	else
		addr_string(e->key.raddr, addr, sizeof(addr));
	if (e->key.proto != FLOW_PROTO_UNIX)
		json_object_object_add(o, "peer_addr", json_object_new_string(addr));
	json_object_object_add(o, "port", json_object_new_int(e->key.port));
	json_object_object_add(o, "tx_bytes", json_object_new_int64((int64_t)e->tx));
	json_object_object_add(o, "rx_bytes", json_object_new_int64((int64_t)e->rx));
	json_object_object_add(o, "connections", json_object_new_int64((int64_t)e->connections));
	json_object_object_add(o, "peer_pid", json_object_new_int64(e->key.peer_tgid));
	json_object_array_add(graph_ends, o);
}

/* The flow module's part of GET /api/v1/graph: "processes" and "ends" (docs/graph.md). */
static int flow_graph(struct plumb_module *m, struct json_object *doc)
{
	struct flow_state *s = m->priv;

	flow_read(s);
	graph_processes = json_object_new_array();
	graph_ends = json_object_new_array();
	if (!graph_processes || !graph_ends) {
		json_object_put(graph_processes);
		json_object_put(graph_ends);
		return -ENOMEM;
	}
	collect_state = s;
	graph_last_pid = 0;
	graph_rescanned = false;
	twalk(s->ends, graph_visit);
	json_object_object_add(doc, "processes", graph_processes);
	json_object_object_add(doc, "ends", graph_ends);
	return 0;
}

static void flow_health(struct plumb_module *m, struct module_health *h)
{
	struct flow_state *s = m->priv;
	static const char *const reasons[FLOW_LOST_REASONS] = { "ringbuf_full", "conns_full",
								"dgram_full", "unix_full",
								"mmsg_first_peer" };
	uint64_t lost[FLOW_LOST_REASONS];

	/* one table of live connections, in two maps: flow_hot first, then flow_conns */
	h->maps[h->nmaps].name = "flow_conns";
	h->maps[h->nmaps].entries = s->in_map;
	h->maps[h->nmaps++].capacity = bpf_map__max_entries(s->skel->maps.flow_hot) +
				       bpf_map__max_entries(s->skel->maps.flow_conns);
	h->maps[h->nmaps].name = "flow_dgram";
	h->maps[h->nmaps].entries = s->in_dgram;
	h->maps[h->nmaps++].capacity = bpf_map__max_entries(s->skel->maps.flow_dgram);
	h->maps[h->nmaps].name = "flow_unix";
	h->maps[h->nmaps].entries = s->in_unix;
	h->maps[h->nmaps++].capacity = bpf_map__max_entries(s->skel->maps.flow_unix);
	h->maps[h->nmaps].name = "connections";
	h->maps[h->nmaps].entries = s->ntracks;
	h->maps[h->nmaps++].capacity = s->track_capacity;
	h->maps[h->nmaps].name = "aggregates";
	h->maps[h->nmaps].entries = s->naggs;
	h->maps[h->nmaps++].capacity = s->agg_capacity;
	h->maps[h->nmaps].name = "graph_ends";
	h->maps[h->nmaps].entries = s->nends;
	h->maps[h->nmaps++].capacity = s->agg_capacity;
	percpu_counters_sum(bpf_map__fd(s->skel->maps.flow_lost), FLOW_LOST_REASONS, lost);
	for (__u32 r = 0; r < FLOW_LOST_REASONS; r++)
		health_add_lost(h, reasons[r], lost[r]);
	/* what the maps hold goes on in them (--pin); user space's own counts are carried */
	h->lost[h->nlost].reason = "connections_full";
	h->lost[h->nlost++].count = m->maps_only ? 0 : s->tracks_full;
	h->lost[h->nlost].reason = "aggregates_full";
	h->lost[h->nlost++].count = m->maps_only ? 0 : s->aggs_full;
	h->lost[h->nlost].reason = "graph_ends_full";
	h->lost[h->nlost++].count = m->maps_only ? 0 : s->ends_full;
	h->lost[h->nlost].reason = "netns_full";
	h->lost[h->nlost++].count = m->maps_only ? 0 : s->netns_full;
	h->obj = s->skel->obj;
}

/* A start that took the maps over: the connections the agent before followed; map emptied. */
static int baseline_take(void *ctx, const void *key, const void *value)
{
	struct flow_state *s = ctx;
	struct flow_restored *r;

	if (((const struct flow_track_key *)key)->proto == FLOW_BASELINES_MARK)
		return 0;
	/* the map holds no more than the table of connections: none is left out */
	if (s->nrestored >= s->track_capacity || !(r = calloc(1, sizeof(*r))))
		return 0;
	memcpy(&r->key, key, sizeof(r->key));
	memcpy(&r->b, value, sizeof(r->b));
	hashtab_insert(&s->restored, &r->hnode, hash_bytes(&r->key, sizeof(r->key)));
	s->nrestored++;
	return 0;
}

/* At a clean exit that handed the maps over: every followed connection, for the next agent. */
static void baselines_save(struct flow_state *s)
{
	struct flow_track_key mark = { .cookie = ~0ull, .proto = FLOW_BASELINES_MARK };
	struct flow_baseline b;
	struct hnode *n;
	size_t saved = 0, live = 0, i;

	hashtab_for_each(&s->tracks, i, n)
	{
		const struct flow_track *t = (const struct flow_track *)n;

		if (t->closed)
			continue; /* all added: nothing of it comes any more */
		live++;
		memset(&b, 0, sizeof(b));
		b.tx_seen = t->tx_seen;
		b.rx_seen = t->rx_seen;
		b.segs_out_seen = t->segs_out_seen;
		b.segs_in_seen = t->segs_in_seen;
		b.counted = t->counted;
		b.tgid = t->conn.tgid;
		b.cgroup_id = t->conn.cgroup_id;
		memcpy(b.comm, t->conn.comm, sizeof(b.comm));
		saved += !bpf_map_update_elem(s->baselines_fd, &t->key, &b, BPF_ANY);
	}
	memset(&b, 0, sizeof(b));
	if (saved == live && !bpf_map_update_elem(s->baselines_fd, &mark, &b, BPF_ANY))
		pr_info("pin: flow: %zu connections' counts handed over\n", saved);
	else
		pr_warn("pin: flow: %zu of %zu connections' counts handed over: the next agent "
			"counts flow from its own start\n",
			saved, live);
}

/*
 * --pin: the maps of the agent before, if it left them (its programs still count into them
 * until this one's attach), with its connections' counts at its last read, which the first
 * read here continues from: the maps only with every one of those (read first); then a
 * fresh DIR/flow_baselines for this agent's exit.
 */
static int flow_adopt(struct plumb_module *m, struct flow_state *s, const struct plumb_config *cfg)
{
	struct flow_track_key mark = { .cookie = ~0ull, .proto = FLOW_BASELINES_MARK };
	struct flow_baseline b;
	int err;

	if (cfg->pin) {
		s->baselines_fd =
			adopt_side_map(cfg->pin, "flow_baselines", sizeof(struct flow_track_key),
				       sizeof(struct flow_baseline), s->track_capacity + 1,
				       m->error, sizeof(m->error));
		if (s->baselines_fd < 0)
			return s->baselines_fd;
		if (!bpf_map_lookup_elem(s->baselines_fd, &mark, &b) &&
		    (hashtab_init(&s->restored, s->track_capacity) ||
		     map_read_fd(s->baselines_fd, BPF_MAP_TYPE_HASH, sizeof(struct flow_track_key),
				 sizeof(struct flow_baseline), MAP_BATCH_BYTES, baseline_take,
				 s) < 0))
			restored_free(s);
		if (!s->restored.buckets)
			adopt_refuse(cfg->pin, m->name, "their connections' counts");
		map_empty(s->baselines_fd, sizeof(struct flow_track_key));
	}
	err = adopt_maps(&s->adopt, cfg->pin, m->name, s->skel->skeleton, s->skel->maps.plumb_gate,
			 &s->skel->rodata->plumb_generation, m->error, sizeof(m->error));
	if (err || !s->adopt.adopted)
		restored_free(s);
	return err;
}

static int flow_hand_over(struct plumb_module *m)
{
	struct flow_state *s = m->priv;

	return adopt_hand_over(&s->adopt, s->skel->skeleton);
}

static void flow_unload(struct plumb_module *m)
{
	struct flow_state *s = m->priv;

	if (!s)
		return;
	if (s->adopt.handed)
		baselines_save(s);
	if (s->baselines_fd >= 0)
		close(s->baselines_fd);
	restored_free(s);
	ring_buffer__free(s->events);
	bpf_link__destroy(s->iter);
	if (s->skel)
		links_destroy_parallel((struct bpf_link **)&s->skel->links,
				       sizeof(s->skel->links) / sizeof(struct bpf_link *));
	flow_bpf__destroy(s->skel);
	cgroup_cache_free(s->cgroups);
	for (size_t b = 0; s->tracks.buckets && b <= s->tracks.mask; b++)
		for (struct hnode *n = s->tracks.buckets[b], *next; n; n = next) {
			next = n->next;
			free(n);
		}
	free(s->tracks.buckets);
	free(s->tuples.buckets);
	tdestroy(s->aggs, free);
	tdestroy(s->ends, free);
	for (size_t i = 0; s->netnses && i < s->nnetns; i++)
		netns_close(&s->netnses[i].ns);
	free(s->netnses);
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
	const struct {
		const char *tracepoint, *point;
		struct bpf_program *prog;
	} sock_syscalls[] = {
		{ "sys_exit_sendto", "syscalls/sys_exit_sendto", s->skel->progs.flow_exit_sendto },
		{ "sys_exit_sendmsg", "syscalls/sys_exit_sendmsg",
		  s->skel->progs.flow_exit_sendmsg },
		{ "sys_exit_recvfrom", "syscalls/sys_exit_recvfrom",
		  s->skel->progs.flow_exit_recvfrom },
		{ "sys_exit_recvmsg", "syscalls/sys_exit_recvmsg",
		  s->skel->progs.flow_exit_recvmsg },
	};
	const char *off;
	bool calls, syscalls;

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
	/*
	 * UDP and unix sockets have no counters of their own: bytes per call where the kernel
	 * has sock_send_length/sock_recv_length, else from the exits of the send and receive
	 * syscalls.
	 */
	syscalls = !calls && s->bytes != FLOW_BYTES_OFF && kernel_has(FEAT_SYSCALL_TRACEPOINTS) &&
		   kernel_has(FEAT_TASK_PT_REGS);
	for (size_t i = 0; i < sizeof(sock_syscalls) / sizeof(sock_syscalls[0]); i++)
		syscalls = syscalls && tracepoint_exists("syscalls", sock_syscalls[i].tracepoint);
	s->unix_on = (calls || syscalls) && s->bytes != FLOW_BYTES_OFF;
	s->dgram_on = s->unix_on && kernel_has(FEAT_TASK_PT_REGS);
	for (size_t i = 0; i < sizeof(sock_syscalls) / sizeof(sock_syscalls[0]); i++) {
		bpf_program__set_autoload(sock_syscalls[i].prog, syscalls);
		module_attach_note(m, sock_syscalls[i].point,
				   bpf_program__name(sock_syscalls[i].prog), "%s",
				   syscalls ? "chosen: UDP and unix bytes (no sock_send_length)" :
				   s->bytes == FLOW_BYTES_OFF ? "off: --flow-bytes off" :
				   calls ? "off: UDP and unix bytes from sock_send_length" :
					   "off: tracepoint missing");
	}
	s->skel->rodata->tcp_calls = s->bytes == FLOW_BYTES_CALLS;
	s->skel->rodata->udp_on = s->dgram_on;
	s->skel->rodata->unix_on = s->unix_on;
	bpf_program__set_autoload(s->skel->progs.flow_send, calls && s->unix_on);
	bpf_program__set_autoload(s->skel->progs.flow_recv, calls && s->unix_on);
	bpf_program__set_autoload(s->skel->progs.flow_recvmsg4, s->dgram_on);
	bpf_program__set_autoload(s->skel->progs.flow_recvmsg6, s->dgram_on);
	bpf_program__set_autoload(s->skel->progs.flow_sendmsg4, s->dgram_on && calls);
	bpf_program__set_autoload(s->skel->progs.flow_sendmsg6, s->dgram_on && calls);
	s->skel->rodata->bytes_from_counters = s->bytes == FLOW_BYTES_COUNTERS;
	off = s->bytes == FLOW_BYTES_OFF ? "off: --flow-bytes off" :
	      !calls ? "off: tracepoint missing (6.3+): TCP bytes from TCP's counters" :
		       "chosen: UDP and unix (TCP bytes from its counters)";
	module_attach_note(m, "tp_btf/sock_send_length", "flow_send", "%s",
			   s->bytes == FLOW_BYTES_CALLS ? "chosen" : off);
	module_attach_note(m, "tp_btf/sock_recv_length", "flow_recv", "%s",
			   s->bytes == FLOW_BYTES_CALLS ? "chosen" : off);
	for (int v = 4; v <= 6; v += 2)
		module_attach_note(
			m, v == 4 ? "cgroup/recvmsg4" : "cgroup/recvmsg6",
			v == 4 ? "flow_recvmsg4" : "flow_recvmsg6", "%s",
			s->dgram_on ? "chosen: on the root cgroup, the source of UDP datagrams" :
			s->unix_on  ? "off: bpf_task_pt_regs missing: no UDP" :
				      off);
	for (int v = 4; v <= 6; v += 2)
		module_attach_note(
			m, v == 4 ? "cgroup/sendmsg4" : "cgroup/sendmsg6",
			v == 4 ? "flow_sendmsg4" : "flow_sendmsg6", "%s",
			s->dgram_on && calls ?
				"chosen: on the root cgroup, the destination of each UDP datagram" :
			s->dgram_on ? "off: the send syscalls' exits name the destination" :
			s->unix_on  ? "off: bpf_task_pt_regs missing: no UDP" :
				      off);
	if (s->bytes == FLOW_BYTES_CALLS) {
		/*
		 * Counting per call, an accepted connection's owner is the first process to
		 * send or receive on it, found at no extra cost; the accept tracepoints would
		 * cost ~0.7 us per connection and put every syscall on the host on the tracing
		 * slow path (bench/results/flow.md).
		 */
		bpf_program__set_autoload(s->skel->progs.flow_accept4, false);
		bpf_program__set_autoload(s->skel->progs.flow_accept, false);
		module_attach_note(m, "syscalls/sys_exit_accept4", "flow_accept4",
				   "off: owners from the first send/recv");
		module_attach_note(m, "syscalls/sys_exit_accept", "flow_accept",
				   "off: owners from the first send/recv");
	} else if (!kernel_has(FEAT_SYSCALL_TRACEPOINTS) ||
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
	snprintf(m->choice, sizeof(m->choice),
		 "TCP connections from inet_sock_set_state; bytes %s; UDP %s; unix sockets %s",
		 s->bytes == FLOW_BYTES_CALLS ? "per call from sock_send_length/sock_recv_length" :
		 s->bytes == FLOW_BYTES_COUNTERS ? "from TCP's counters at close and on each read" :
						   "off",
		 !s->dgram_on ? "off" :
		 calls	      ? "per call" :
				"from send*/recv* syscall exits",
		 !s->unix_on ? "off" :
		 calls	     ? "per call" :
			       "from send*/recv* syscall exits");
	return 0;
}

/* A cgroup hook's IPv4 and IPv6 programs, on the root cgroup: 0, or the first failure's -errno. */
static int attach_pair(struct bpf_program *v4, struct bpf_program *v6, struct bpf_link **l4,
		       struct bpf_link **l6, const char *cgroup_root)
{
	*l4 = attach_root_cgroup(v4, cgroup_root);
	*l6 = *l4 ? attach_root_cgroup(v6, cgroup_root) : NULL;
	return *l6 ? 0 : -errno;
}

static int flow_load(struct plumb_module *m, const struct plumb_config *cfg)
{
	struct flow_state *s;
	uint32_t hot;
	int err;

	m->nattach = 0;
	m->choice[0] = '\0';
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	m->priv = s;
	s->baselines_fd = -1;
	s->cgroup_root = cfg->cgroup_root;
	s->grace_s = cfg->cgroup_grace_s;
	s->netns = cfg->netns;
	s->track_capacity = cfg->flow_capacity;
	s->agg_capacity = cfg->flow_capacity;
	s->cgroups = cgroup_cache_new(cfg->cgroup_root, 4096);
	if (!s->cgroups || hashtab_init(&s->tracks, s->track_capacity) ||
	    hashtab_init(&s->tuples, s->track_capacity)) {
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
	/* --flow-capacity live connections in all: new ones in flow_hot while it has room */
	hot = cfg->flow_capacity / 2 < FLOW_HOT_MAX ? cfg->flow_capacity / 2 : FLOW_HOT_MAX;
	bpf_map__set_max_entries(s->skel->maps.flow_hot, hot);
	bpf_map__set_max_entries(s->skel->maps.flow_conns, cfg->flow_capacity - hot);
	bpf_map__set_max_entries(s->skel->maps.flow_dgram, cfg->flow_capacity / 4);
	bpf_map__set_max_entries(s->skel->maps.flow_unix, cfg->flow_capacity / 4);
	s->skel->rodata->netns_only = cfg->netns ? cfg->netns->ino : 0;
	err = flow_choose(m, s, cfg);
	if (err)
		goto out_unload;
	if (s->bytes == FLOW_BYTES_COUNTERS && !(cfg->netns && cfg->netns->fd >= 0)) {
		struct stat st;

		s->netnses = calloc(FLOW_NETNS_MAX, sizeof(*s->netnses));
		if (!s->netnses || stat("/proc/self/ns/net", &st)) {
			err = -ENOMEM;
			snprintf(m->error, sizeof(m->error), "out of memory");
			goto out_unload;
		}
		s->own_netns = (uint32_t)st.st_ino;
	}
	err = flow_adopt(m, s, cfg);
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
	if (!err && s->dgram_on) /* the UDP recvmsg hooks */
		err = attach_pair(s->skel->progs.flow_recvmsg4, s->skel->progs.flow_recvmsg6,
				  &s->skel->links.flow_recvmsg4, &s->skel->links.flow_recvmsg6,
				  cfg->cgroup_root);
	/* the UDP sendmsg hooks, where sock_send_length counts (flow_choose) */
	if (!err && bpf_program__autoload(s->skel->progs.flow_sendmsg4))
		err = attach_pair(s->skel->progs.flow_sendmsg4, s->skel->progs.flow_sendmsg6,
				  &s->skel->links.flow_sendmsg4, &s->skel->links.flow_sendmsg6,
				  cfg->cgroup_root);
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
	/* the programs count from here (with --pin: the old ones stop in the same write) */
	err = adopt_activate(&s->adopt, s->skel->maps.plumb_gate, m->error, sizeof(m->error));
	if (err)
		goto out_unload;
	m->adopted = s->adopt.adopted;
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
	.graph = flow_graph,
	.unload = flow_unload,
	.hand_over = flow_hand_over,
};
