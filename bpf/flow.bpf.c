// SPDX-License-Identifier: GPL-2.0
/*
 * flow: TCP connections and their payload bytes per owning process, from tracepoints.
 *
 * Lifecycle from inet_sock_set_state (no per-packet hook): SYN_SENT runs in the connecting
 * process, which becomes the owner; ESTABLISHED after SYN_SENT is a client, after SYN_RECV a
 * server (the accepted child socket); when the socket is freed (tcp_destroy_sock) an
 * established connection's final counts go through a ring buffer (no wakeup: drained on the
 * agent's tick) and its entry is freed.
 *
 * Bytes per call from sock_send_length/sock_recv_length (in sock_sendmsg/sock_recvmsg, so every
 * write/send/read/recv family syscall alike): one hash lookup by socket cookie and one atomic
 * add per call, nothing per packet. They run in the calling process, which owns an accepted
 * socket from the first time it reads or writes it.
 *
 * Live connections are read by user space from two hashes (every network namespace: an
 * iterator over socket storage would do too, but these kernels refuse to load one: EPERM):
 * flow_hot, small, takes new connections while it has room, and flow_conns the rest, up to
 * --flow-capacity in all. Each hash operation lands in a random bucket; in a table sized for
 * 100k connections (2 MiB of buckets) that is a cache miss, in one of 4,096 it is not.
 * Socket-local storage in their place was measured no cheaper under connection churn (its
 * allocation at ESTABLISHED costs more than the insert; bench/results/flow-probe.md).
 * Connections older than the agent are found once with iter/tcp, or at their next send/recv.
 *
 * Every program but the iterator first checks the handover gate (gate.bpf.h): with --pin the
 * maps and programs of the agent before go on counting until this agent's are attached.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "flow.h"
#include "gate.bpf.h"
#include "task.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/*
 * Where a connection ends for plumb. tcp_destroy_sock: when the socket is freed, after the
 * application has read what was left in it (a client that half-closes and then reads the
 * server's last bytes does so after TCP_CLOSE). Kernels without it: at TCP_CLOSE, and bytes read
 * after that start a new entry (counted, but as one more connection).
 */
const volatile bool close_at_destroy = true;
/*
 * Where bytes come from. false: per call, sock_send_length/sock_recv_length (6.3+): what the
 * application wrote and read. true (kernels without them, or --flow-bytes counters): TCP's own
 * counters, read when the socket is freed and, for live connections, by the flow_discover
 * iterator before each read of the map: bytes sent (less retransmissions) and received.
 */
const volatile bool bytes_from_counters = false;
/* --netns: the inode number of the only network namespace observed; 0: every one */
const volatile __u32 netns_only = 0;
/* TCP bytes per call (sock_send_length/sock_recv_length also carry UDP and unix sockets) */
const volatile bool tcp_calls = true;
const volatile bool udp_on = true;
const volatile bool unix_on = true;

#define AF_UNIX	    1
#define AF_INET	    2
#define AF_INET6    10
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
/* x86_64 syscall numbers whose arguments name a UDP datagram's destination */
#define NR_sendto	   44
#define NR_sendmsg	   46
#define NR_sendmmsg	   307
#define SOCK_STREAM	   1
#define SOCK_BINDPORT_LOCK 8 /* include/net/sock.h: sk_userlocks, bind() named the port */
#define E2BIG		   7
#define EEXIST		   17
#define MSG_PEEK	   2
#define PF_KTHREAD	   0x00200000 /* include/linux/sched.h: task_struct flags */
/* include/net/tcp_states.h */
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT	2
#define TCP_SYN_RECV	3
#define TCP_FIN_WAIT1	4
#define TCP_FIN_WAIT2	5
#define TCP_CLOSE	7
#define TCP_CLOSE_WAIT	8
#define TCP_LAST_ACK	9
#define TCP_LISTEN	10
#define TCP_CLOSING	11

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 131072); /* resized to --flow-capacity before load */
	__type(key, __u64);
	__type(value, struct flow_conn);
} flow_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* resized before load: at most --flow-capacity / 2 */
	__type(key, __u64);
	__type(value, struct flow_conn);
} flow_hot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768); /* resized to --flow-capacity / 4 before load */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct flow_dgram_key);
	__type(value, struct flow_conn);
} flow_dgram SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768); /* resized to --flow-capacity / 4 before load */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct flow_unix);
} flow_unix SEC(".maps");

/* The source of the UDP datagram a thread is receiving, for sock_recv_length. */
struct dgram_source {
	__u64 tid;
	__u64 cookie; /* the socket's (dgram_dests: checked where the send is counted) */
	__u8 addr[16];
	__u16 port;
	__u16 family;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dgram_source);
} dgram_sources SEC(".maps");

/* The destination of each unconnected UDP send, from the root cgroup's sendmsg hooks. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dgram_source);
} dgram_dests SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024); /* 128-byte events: >= 30,000 between two drains */
} flow_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLOW_LOST_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} flow_lost SEC(".maps");

static const struct flow_conn zero_conn;
static const struct flow_unix zero_unix;

/*
 * The socket flags live in struct sock_common as skc_flags (sk_flags is a macro for it) on
 * 6.1, 6.12 and 6.18 (checked in the BTF of all three); older kernels kept sk_flags in struct
 * sock itself. The flavour below reads whichever the running kernel has.
 */
struct sock___with_sk_flags {
	unsigned long sk_flags;
} __attribute__((preserve_access_index));

static __always_inline unsigned long sock_flags(const struct sock *sk)
{
	if (bpf_core_field_exists(struct sock_common, skc_flags))
		return sk->__sk_common.skc_flags;
	return ((const struct sock___with_sk_flags *)sk)->sk_flags;
}

/*
 * TCP's own payload counts. Sent: bytes_sent counts every data byte put on the wire,
 * retransmissions included, so they are taken out (both since 4.19). Received: bytes_received
 * advances with rcv_nxt, which a FIN moves by one: SOCK_DONE is set when the FIN arrives
 * (tcp_fin()), so it is taken out then. Received means received by TCP, read or not.
 */
static __always_inline void tcp_counts(const struct tcp_sock *tp, __u64 *tx, __u64 *rx)
{
	unsigned long flags = sock_flags((const struct sock *)tp);
	__u64 done = flags >> bpf_core_enum_value(enum sock_flags, SOCK_DONE) & 1;

	*tx = tp->bytes_sent - tp->bytes_retrans;
	*rx = tp->bytes_received - done;
}

/* TCP's segment counts (every segment, data or not, retransmissions included) */
static __always_inline void segs_update(struct flow_conn *c, const struct tcp_sock *tp)
{
	c->segs_out = tp->segs_out - c->base_segs_out;
	c->segs_in = tp->segs_in - c->base_segs_in;
}

/* counters mode: the connection's counts since it was first seen */
static __always_inline void counts_update(struct flow_conn *c, const struct tcp_sock *tp)
{
	__u64 tx, rx;

	tcp_counts(tp, &tx, &rx);
	c->tx = tx - c->base_tx;
	c->rx = rx - c->base_rx;
	segs_update(c, tp);
}

static __always_inline void count_lost(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&flow_lost, &reason);

	if (n)
		*n += 1;
}

/* Whether this socket's namespace is observed (one read, only when --netns is given). */
static __always_inline bool netns_observed(const struct sock *sk)
{
	return !netns_only || BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum) == netns_only;
}

/*
 * The same reads for the programs that get the socket as a BTF pointer (tp_btf, the
 * iterator): direct loads, one instruction each, where a BPF_CORE_READ is a
 * bpf_probe_read_kernel call (~20-40 ns each on the machines of bench/results). The probe-read
 * flavours (netns_observed, set_tuple) stay for UDP and unix sockets, which the syscall
 * tracepoints of kernels before 6.3 reach through a probe read.
 */
static __always_inline bool is_tcp_btf(const struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;

	/* sk_protocol is a u16 field since 5.6 (bf9765145b85); plumb needs 5.8 anyway */
	return sk->sk_protocol == IPPROTO_TCP && sk->sk_type == SOCK_STREAM &&
	       (family == AF_INET || family == AF_INET6);
}

static __always_inline __u32 netns_btf(const struct sock *sk)
{
	return sk->__sk_common.skc_net.net->ns.inum;
}

static __always_inline bool netns_observed_btf(const struct sock *sk)
{
	return !netns_only || netns_btf(sk) == netns_only;
}

static __always_inline void set_tuple_btf(struct flow_conn *c, const struct sock *sk)
{
	c->family = sk->__sk_common.skc_family;
	c->lport = sk->__sk_common.skc_num;
	c->rport = __builtin_bswap16(sk->__sk_common.skc_dport);
	c->netns = netns_btf(sk);
	if (c->family == AF_INET) {
		__u32 l = sk->__sk_common.skc_rcv_saddr, r = sk->__sk_common.skc_daddr;

		__builtin_memcpy(c->laddr, &l, 4);
		__builtin_memcpy(c->raddr, &r, 4);
	} else {
		const __u32 *l = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32;
		const __u32 *r = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32;
		__u32 la[4] = { l[0], l[1], l[2], l[3] }, ra[4] = { r[0], r[1], r[2], r[3] };

		__builtin_memcpy(c->laddr, la, 16);
		__builtin_memcpy(c->raddr, ra, 16);
	}
}

static __always_inline void set_owner(struct flow_conn *c)
{
	c->tgid = bpf_get_current_pid_tgid() >> 32;
	c->cgroup_id = task_cgroup_id(bpf_get_current_task_btf());
	bpf_get_current_comm(c->comm, sizeof(c->comm));
}

static __always_inline void set_tuple(struct flow_conn *c, const struct sock *sk)
{
	c->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	c->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	c->rport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
	c->netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	if (c->family == AF_INET) {
		bpf_core_read(c->laddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_core_read(c->raddr, 4, &sk->__sk_common.skc_daddr);
	} else {
		bpf_core_read(c->laddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_core_read(c->raddr, 16, &sk->__sk_common.skc_v6_daddr);
	}
}

/* The connection's entry: in flow_hot, or else in flow_conns. */
static __always_inline struct flow_conn *conn_lookup(__u64 cookie)
{
	struct flow_conn *c = bpf_map_lookup_elem(&flow_hot, &cookie);

	return c ? c : bpf_map_lookup_elem(&flow_conns, &cookie);
}

/*
 * The connection's entry, created (zeroed) when absent; NULL and counted when the map is full.
 * For a socket older than the agent, or one whose insert found the maps full: two CPUs (a
 * send and a receive, or one and the iterator) may make its entry at once, so it goes into
 * flow_conns only, where the second gets -EEXIST. (In flow_hot for one and flow_conns for the
 * other, each would count part of the connection.)
 */
static __always_inline struct flow_conn *conn_get(__u64 cookie, bool *created)
{
	struct flow_conn *c = conn_lookup(cookie);

	*created = false;
	if (c)
		return c;
	if (bpf_map_update_elem(&flow_conns, &cookie, &zero_conn, BPF_NOEXIST) == 0)
		*created = true;
	c = conn_lookup(cookie);
	if (!c)
		count_lost(FLOW_LOST_CONNS_FULL);
	else if (*created)
		c->first_ns = bpf_ktime_get_ns();
	return c;
}

/*
 * A socket's entry, filled in by flow_state, for a socket that has none as far as it knows:
 * one update and no lookup (conn_get's three hash operations were a third of flow_state's
 * time). Fresh (no cookie before this event: a socket in connect() or a child socket just
 * established, which no other program can be making an entry for): in flow_hot while it has
 * room (-E2BIG: full), else in flow_conns; any other socket in flow_conns, as conn_get does.
 * false when the socket has an entry already (the caller then looks it up); full maps are
 * counted.
 */
static __always_inline bool conn_insert(__u64 cookie, const struct flow_conn *v, bool fresh)
{
	long err = -E2BIG;

	if (fresh)
		err = bpf_map_update_elem(&flow_hot, &cookie, v, BPF_NOEXIST);
	/* flow_hot full: -E2BIG on 6.12 and 6.18; 6.1 answered otherwise for one end in two */
	if (err && err != -EEXIST)
		err = bpf_map_update_elem(&flow_conns, &cookie, v, BPF_NOEXIST);
	if (err == -EEXIST)
		return false;
	if (err)
		count_lost(FLOW_LOST_CONNS_FULL);
	return true;
}

/*
 * What ESTABLISHED tells of a connection: its role and tuple. Its base counts stay 0: TCP's
 * count from the socket's start, which plumb saw (SYN_SENT or SYN_RECV), and may already hold
 * bytes here (TCP Fast Open's data in the SYN, sent or received before ESTABLISHED).
 */
static __always_inline void conn_established(struct flow_conn *c, const struct sock *sk, __u8 role)
{
	c->role = role;
	set_tuple_btf(c, sk);
	c->established = 1;
	c->base_known = 1;
}

/*
 * Calls mode, at the end: bytes that passed no sock_sendmsg/sock_recvmsg. TCP's own counts
 * reach past the calls' where a process read with splice() (tcp_splice_read), sent through
 * sendpage (splice or sendfile into a socket before 6.5), or closed with data unread; the
 * connection keeps the larger of the two. Only when the socket is freed (close_at_destroy):
 * nothing is read from it after that.
 */
static __always_inline void calls_reconcile(struct flow_conn *c, const struct tcp_sock *tp)
{
	__u64 tx, rx;

	if (!c->base_known || !close_at_destroy)
		return;
	tcp_counts(tp, &tx, &rx);
	tx -= c->base_tx;
	rx -= c->base_rx;
	/*
	 * tcp_disconnect() zeroes TCP's counts (MPTCP's first subflow, connect(AF_UNSPEC)):
	 * below the base, the difference wraps, and the calls' counts are kept.
	 */
	if (tx > c->tx && tx - c->tx < 1ULL << 62)
		c->tx = tx;
	if (rx > c->rx && rx - c->rx < 1ULL << 62)
		c->rx = rx;
}

/* Sends an established connection's final counts to user space and frees its entry. */
static __always_inline void conn_end(const struct sock *sk)
{
	/* a socket plumb follows has its cookie since SYN_SENT or ESTABLISHED: 0, not followed */
	__u64 cookie = sk->__sk_common.skc_cookie.counter;
	struct tcp_sock *tp;
	struct flow_event *e;
	struct flow_conn *c;
	bool hot;

	if (!cookie)
		return;
	c = bpf_map_lookup_elem(&flow_hot, &cookie);
	hot = c;
	if (!c)
		c = bpf_map_lookup_elem(&flow_conns, &cookie);
	if (!c)
		return;
	/* tcp_sock's fields by direct loads: the socket as the BTF pointer of a tcp_sock */
	tp = c->established ? bpf_skc_to_tcp_sock((void *)sk) : NULL;
	if (tp && bytes_from_counters) {
		counts_update(c, tp);
	} else if (tp) {
		segs_update(c, tp);
		calls_reconcile(c, tp);
	}
	if (c->established) {
		e = bpf_ringbuf_reserve(&flow_events, sizeof(*e), 0);
		if (e) {
			e->cookie = cookie;
			e->kind = FLOW_CLOSE;
			e->pad = 0;
			__builtin_memcpy(&e->conn, c, sizeof(*c));
			bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
		} else {
			count_lost(FLOW_LOST_RINGBUF_FULL);
		}
	}
	if (hot)
		bpf_map_delete_elem(&flow_hot, &cookie);
	else
		bpf_map_delete_elem(&flow_conns, &cookie);
}

/*
 * An established connection's first FIN from this end (FIN_WAIT1, or LAST_ACK after the
 * peer's) is sent by close() or shutdown(), in the process that holds the socket: it owns a
 * connection nobody has owned yet (accepted, then only spliced: no sock_recvmsg names it).
 * Accepted sockets carry their listener's sk_max_ack_backlog (the clone copies it), which a
 * connecting socket leaves 0: a client's end, owned since connect(), costs no lookup. (Those
 * found by the iterator, also unowned here, are named by user space from /proc.) Not for
 * kernel threads, nor MPTCP subflows: the MPTCP socket's calls never reach them, and their
 * closes come from MPTCP's worker or the path manager, not from the socket's holder.
 */
static __always_inline int closer_owns(const struct sock *sk)
{
	__u64 cookie = sk->__sk_common.skc_cookie.counter;
	struct tcp_sock *tp;
	struct flow_conn *c;

	if (!cookie || !sk->sk_max_ack_backlog || !gate_open())
		return 0; /* no cookie: no entry */
	if (bpf_get_current_task_btf()->flags & PF_KTHREAD)
		return 0;
	c = conn_lookup(cookie);
	if (!c || c->tgid)
		return 0; /* the common case: a call has named it; no helper call for that */
	tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp || (bpf_core_field_exists(tp->is_mptcp) && BPF_CORE_READ_BITFIELD(tp, is_mptcp)))
		return 0;
	set_owner(c);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(flow_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct flow_conn *c, v = {};
	__u64 cookie;
	bool fresh;
	__u8 role;

	/* most changes matter not: leave before reading anything of the socket */
	if (newstate == TCP_ESTABLISHED) {
		if (oldstate != TCP_SYN_SENT && oldstate != TCP_SYN_RECV)
			return 0;
	} else if (newstate == TCP_FIN_WAIT1 || newstate == TCP_LAST_ACK) {
		return closer_owns(sk);
	} else if (newstate != TCP_SYN_SENT && (newstate != TCP_CLOSE || close_at_destroy)) {
		return 0;
	}
	if (!gate_open() || !is_tcp_btf(sk) || !netns_observed_btf(sk))
		return 0;
	/* entries are keyed by cookie: a socket without one yet (a new one) has none */
	fresh = !sk->__sk_common.skc_cookie.counter;
	cookie = bpf_get_socket_cookie((void *)sk);
	if (newstate == TCP_SYN_SENT) {
		/* in connect(): the caller owns the socket (a second connect() has an entry) */
		c = fresh ? NULL : conn_lookup(cookie);
		if (!c) {
			set_owner(&v);
			v.role = FLOW_ROLE_CLIENT;
			v.first_ns = bpf_ktime_get_ns();
			if (conn_insert(cookie, &v, fresh))
				return 0;
			c = conn_lookup(cookie);
		}
		if (c) {
			set_owner(c);
			c->role = FLOW_ROLE_CLIENT;
		}
		return 0;
	}
	if (newstate == TCP_ESTABLISHED) {
		role = oldstate == TCP_SYN_SENT ? FLOW_ROLE_CLIENT : FLOW_ROLE_SERVER;
		/* a client's entry is there since SYN_SENT; an accepted socket is new */
		c = fresh ? NULL : conn_lookup(cookie);
		if (!c) {
			conn_established(&v, sk, role);
			v.first_ns = bpf_ktime_get_ns();
			if (conn_insert(cookie, &v, fresh))
				return 0;
			c = conn_lookup(cookie);
		}
		if (c)
			conn_established(c, sk, role);
		return 0;
	}
	/* TCP_CLOSE */
	if (!close_at_destroy)
		conn_end(sk);
	return 0;
}

SEC("tp_btf/tcp_destroy_sock")
int BPF_PROG(flow_destroy, struct sock *sk)
{
	/* TCP sockets only; one plumb does not follow has no entry (conn_end looks it up) */
	if (gate_open())
		conn_end(sk);
	return 0;
}

static __always_inline int count_bytes(struct sock *sk, int ret, bool tx)
{
	bool created = false;
	struct flow_conn *c;
	__u64 cookie;

	/* count_call() has checked ret, the family and the protocol */
	cookie = bpf_get_socket_cookie(sk);
	c = conn_lookup(cookie);
	if (!c && netns_observed_btf(sk))
		c = conn_get(cookie, &created);
	if (!c)
		return 0;
	if (created) {
		/* a connection older than the agent that iter/tcp did not see (another netns) */
		set_tuple_btf(c, sk);
		c->established = 1;
	}
	if (!c->tgid)
		set_owner(c); /* an accepted socket's first reader or writer */
	if (tx)
		__sync_fetch_and_add(&c->tx, ret);
	else
		__sync_fetch_and_add(&c->rx, ret);
	return 0;
}

/*
 * The peer of a UDP datagram an unconnected socket sends, where the sendmsg hooks did not give
 * it (the syscall exits of kernels without sock_send_length): the destination the syscall
 * names, from the caller's saved registers. Were a sendmmsg's message to come here, it would
 * be given the first message's destination (counted).
 */
static __always_inline bool dgram_destination(struct flow_dgram_key *k)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long nr = BPF_CORE_READ(regs, orig_ax);
	struct user_msghdr *msg = NULL;
	struct sockaddr_in6 sa = {};
	void *uaddr = NULL;

	if (nr == NR_sendto) {
		uaddr = (void *)BPF_CORE_READ(regs, r8);
	} else if (nr == NR_sendmsg || nr == NR_sendmmsg) {
		/* struct mmsghdr starts with its struct user_msghdr */
		msg = (struct user_msghdr *)BPF_CORE_READ(regs, si);
		bpf_probe_read_user(&uaddr, sizeof(uaddr), &msg->msg_name);
		if (nr == NR_sendmmsg && BPF_CORE_READ(regs, dx) > 1)
			count_lost(FLOW_LOST_MMSG_PEER);
	}
	if (!uaddr || bpf_probe_read_user(&sa, sizeof(struct sockaddr_in), uaddr))
		return false;
	if (sa.sin6_family == AF_INET) {
		__builtin_memcpy(k->raddr, &((struct sockaddr_in *)&sa)->sin_addr, 4);
	} else if (sa.sin6_family == AF_INET6) {
		if (bpf_probe_read_user(&sa, sizeof(sa), uaddr))
			return false;
		__builtin_memcpy(k->raddr, &sa.sin6_addr, 16);
	} else {
		return false;
	}
	k->family = sa.sin6_family;
	k->rport = __builtin_bswap16(sa.sin6_port);
	return true;
}

/*
 * A UDP datagram's peer, as a cgroup hook sees it, kept in this CPU's slot of `slots` for the
 * byte count that follows on the same thread and socket. The source of a datagram a socket
 * receives (dgram_sources): udp_recvmsg() runs the cgroup recvmsg hook with the address it
 * is about to return to the application (only when the application asked for one:
 * recvfrom/recvmsg with a name buffer), before sock_recv_length. Attached to the root
 * cgroup, so every process passes; it always allows. Nothing runs for TCP or unix sockets.
 */
static __always_inline int keep_address(struct bpf_sock_addr *ctx, bool v6, void *slots)
{
	struct dgram_source *src;
	__u32 zero = 0;

	if (!gate_open())
		return 1;
	src = bpf_map_lookup_elem(slots, &zero);
	if (!src)
		return 1;
	if (v6) {
		__u32 a[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
			       ctx->user_ip6[3] };

		__builtin_memcpy(src->addr, a, 16);
		src->family = AF_INET6;
	} else {
		__u32 a = ctx->user_ip4;

		__builtin_memset(src->addr, 0, 16);
		__builtin_memcpy(src->addr, &a, 4);
		src->family = AF_INET;
	}
	src->port = __builtin_bswap16((__u16)ctx->user_port);
	src->tid = bpf_get_current_pid_tgid();
	src->cookie = bpf_get_socket_cookie(ctx);
	return 1;
}

SEC("cgroup/recvmsg4")
int flow_recvmsg4(struct bpf_sock_addr *ctx)
{
	return keep_address(ctx, false, &dgram_sources);
}

SEC("cgroup/recvmsg6")
int flow_recvmsg6(struct bpf_sock_addr *ctx)
{
	return keep_address(ctx, true, &dgram_sources);
}

/*
 * The destination of a datagram an unconnected UDP socket sends: udp_sendmsg() and
 * udpv6_sendmsg() run the cgroup sendmsg hook with the address the caller named (msg_name)
 * before the datagram goes, and sock_send_length follows for that same message. So each
 * message of a sendmmsg() gets its own destination. Attached to the root cgroup, after any
 * hook of a cgroup below it: what it sees is where the datagram goes, after a rewrite by
 * another program (a socket load balancer's). Only where sock_send_length counts the bytes.
 */
SEC("cgroup/sendmsg4")
int flow_sendmsg4(struct bpf_sock_addr *ctx)
{
	return keep_address(ctx, false, &dgram_dests);
}

SEC("cgroup/sendmsg6")
int flow_sendmsg6(struct bpf_sock_addr *ctx)
{
	return keep_address(ctx, true, &dgram_dests);
}

/*
 * Whether the application chose the socket's local port (bind() with a port). A UDP socket
 * whose port the kernel chose (at its first send, or bind() to port 0) serves nobody there.
 */
static __always_inline bool port_chosen(const struct sock *sk)
{
	return BPF_CORE_READ_BITFIELD_PROBED(sk, sk_userlocks) & SOCK_BINDPORT_LOCK;
}

/*
 * The peer a cgroup hook kept in this CPU's slot of `slots` (keep_address) into k, when it was
 * kept for this thread and, given a socket cookie, for this socket; the slot is then emptied.
 */
static __always_inline bool take_address(void *slots, __u64 cookie, struct flow_dgram_key *k)
{
	__u32 zero = 0;
	struct dgram_source *a = bpf_map_lookup_elem(slots, &zero);

	if (!a || a->tid != bpf_get_current_pid_tgid() || (cookie && a->cookie != cookie))
		return false;
	__builtin_memcpy(k->raddr, a->addr, 16);
	k->rport = a->port;
	k->family = a->family;
	a->tid = 0;
	return true;
}

/*
 * One UDP call's bytes, to its (socket, peer) flow. key: the socket's cookie where hooked
 * (sock_send_length/sock_recv_length), its inode marked otherwise (the syscall exits).
 */
static __always_inline int count_dgram(struct sock *sk, __u64 key, int ret, bool tx, bool hooked)
{
	struct flow_dgram_key k = {};
	struct flow_conn *c;

	k.cookie = key;
	if (BPF_CORE_READ(sk, __sk_common.skc_state) == TCP_ESTABLISHED) {
		/* connected: the peer is the socket's own */
		k.family = BPF_CORE_READ(sk, __sk_common.skc_family);
		k.rport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
		if (k.family == AF_INET)
			bpf_core_read(k.raddr, 4, &sk->__sk_common.skc_daddr);
		else
			bpf_core_read(k.raddr, 16, &sk->__sk_common.skc_v6_daddr);
	} else if (tx) {
		if (!hooked || !take_address(&dgram_dests, key, &k))
			dgram_destination(&k);
	} else {
		take_address(&dgram_sources, hooked ? key : 0, &k);
	}
	c = bpf_map_lookup_elem(&flow_dgram, &k);
	if (!c) {
		struct flow_conn fresh = {};

		if (!netns_observed(sk))
			return 0;
		set_owner(&fresh);
		set_tuple(&fresh, sk);
		fresh.family = k.family ? k.family : fresh.family;
		__builtin_memcpy(fresh.raddr, k.raddr, 16);
		fresh.rport = k.rport;
		/*
		 * A datagram read without its source (k.family 0) on a port the kernel chose: a
		 * client reading its replies (sendto, then recv). A server's port would be its own,
		 * an ephemeral one, a label value per socket; a client's is the peer's: 0, unknown.
		 */
		fresh.role =
			tx || (!k.family && !port_chosen(sk)) ? FLOW_ROLE_CLIENT : FLOW_ROLE_SERVER;
		fresh.established = 1;
		fresh.proto = FLOW_PROTO_UDP;
		fresh.first_ns = bpf_ktime_get_ns();
		bpf_map_update_elem(&flow_dgram, &k, &fresh, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&flow_dgram, &k);
		if (!c) {
			count_lost(FLOW_LOST_DGRAM_FULL);
			return 0;
		}
	}
	if (tx)
		__sync_fetch_and_add(&c->tx, ret);
	else
		__sync_fetch_and_add(&c->rx, ret);
	return 0;
}

/* A unix socket's bound address, into u->path (abstract names start with a 0 byte). */
static __always_inline void unix_path(struct flow_unix *u, struct unix_sock *us)
{
	struct unix_address *addr = BPF_CORE_READ(us, addr);
	int len;

	if (!addr)
		return;
	len = BPF_CORE_READ(addr, len) - (int)sizeof(__u16); /* less sun_family */
	if (len <= 0)
		return;
	u->path_len = len < (int)sizeof(u->path) ? len : sizeof(u->path);
	bpf_probe_read_kernel(u->path, sizeof(u->path), addr->name[0].sun_path);
}

/*
 * One unix socket call's bytes, by socket. The peer process is the socket's SO_PEERCRED pid:
 * for an accepted socket the process that connected, for a connecting one the process that
 * listened. The server is the end with an address (an accepted socket shares its listener's).
 */
static __always_inline int count_unix(struct sock *sk, __u64 cookie, int ret, bool tx)
{
	struct flow_unix *u = bpf_map_lookup_elem(&flow_unix, &cookie);

	if (!u) {
		struct unix_sock *us = (struct unix_sock *)sk, *peer;

		if (!netns_observed(sk))
			return 0;
		bpf_map_update_elem(&flow_unix, &cookie, &zero_unix, BPF_NOEXIST);
		u = bpf_map_lookup_elem(&flow_unix, &cookie);
		if (!u) {
			count_lost(FLOW_LOST_UNIX_FULL);
			return 0;
		}
		set_owner(&u->conn);
		u->conn.first_ns = bpf_ktime_get_ns();
		u->conn.family = AF_UNIX;
		u->conn.proto = FLOW_PROTO_UNIX;
		u->conn.established = 1;
		u->conn.netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
		u->conn.ino = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino);
		u->conn.peer_tgid = BPF_CORE_READ(sk, sk_peer_pid, numbers[0].nr);
		if (BPF_CORE_READ(us, addr)) {
			u->conn.role = FLOW_ROLE_SERVER;
			unix_path(u, us);
		} else {
			u->conn.role = FLOW_ROLE_CLIENT;
			peer = (struct unix_sock *)BPF_CORE_READ(us, peer);
			if (peer)
				unix_path(u, peer);
		}
	}
	if (tx)
		__sync_fetch_and_add(&u->conn.tx, ret);
	else
		__sync_fetch_and_add(&u->conn.rx, ret);
	return 0;
}

/* sock_sendmsg/sock_recvmsg, every protocol: TCP, UDP and unix go their own ways. */
static __always_inline int count_call(struct sock *sk, int ret, bool tx)
{
	__u16 family, proto;

	if (ret <= 0 || !gate_open())
		return 0;
	family = sk->__sk_common.skc_family;
	if (family == AF_UNIX)
		return unix_on ? count_unix(sk, bpf_get_socket_cookie(sk), ret, tx) : 0;
	if (family != AF_INET && family != AF_INET6)
		return 0;
	proto = sk->sk_protocol;
	if (proto == IPPROTO_TCP)
		return tcp_calls ? count_bytes(sk, ret, tx) : 0;
	if (proto == IPPROTO_UDP)
		return udp_on ? count_dgram(sk, bpf_get_socket_cookie(sk), ret, tx, true) : 0;
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(flow_send, struct sock *sk, int ret, int flags)
{
	return count_call(sk, ret, true);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(flow_recv, struct sock *sk, int ret, int flags)
{
	if (flags & MSG_PEEK)
		return 0; /* the bytes stay queued: they are counted when really read */
	return count_call(sk, ret, false);
}

/* Layout of the syscalls/sys_exit_* tracepoints (their format files). */
struct syscall_exit_ctx {
	__u64 common;
	int nr;
	int pad;
	long ret;
};

/*
 * The cookie of the socket behind an open file: plain loads where bpf_rdonly_cast() exists
 * (6.2+, bpf/task.bpf.h), probe reads before.
 */
static __always_inline __u64 file_sock_cookie(struct file *file)
{
	struct socket *sock;

	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		sock = bpf_rdonly_cast(file->private_data, bpf_core_type_id_kernel(struct socket));
		return sock->sk->__sk_common.skc_cookie.counter;
	}
	sock = BPF_CORE_READ(file, private_data);
	return BPF_CORE_READ(sock, sk, __sk_common.skc_cookie.counter);
}

/*
 * accept/accept4 return the accepted socket in the accepting process: it owns the connection
 * (a pre-forked server's worker, not the master that listened). The cookie was generated at
 * ESTABLISHED (bpf_get_socket_cookie), so it is read from the socket here: syscall
 * tracepoint programs have no cookie helper.
 */
static __always_inline int accept_exit(struct syscall_exit_ctx *ctx)
{
	struct file *file;
	struct flow_conn *c;
	__u64 cookie;

	if (!gate_open())
		return 0;
	file = fd_to_file(bpf_get_current_task_btf(), ctx->ret);
	if (!file)
		return 0;
	cookie = file_sock_cookie(file);
	if (!cookie)
		return 0;
	c = conn_lookup(cookie);
	if (c && !c->tgid)
		set_owner(c);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int flow_accept4(struct syscall_exit_ctx *ctx)
{
	return accept_exit(ctx);
}

SEC("tracepoint/syscalls/sys_exit_accept")
int flow_accept(struct syscall_exit_ctx *ctx)
{
	return accept_exit(ctx);
}

/*
 * Kernels without sock_send_length/sock_recv_length (before 6.3): UDP and unix bytes from the
 * exits of the send and receive syscalls, fd from the saved registers. read()/write() on
 * those sockets are not seen this way. Syscall tracepoint programs have no cookie helper and
 * a socket's cookie is made only on demand, so these key sockets by their inode number
 * (unique for the socket's life; sockfs numbers are not reused while it lives).
 */
#define S_IFMT	 00170000
#define S_IFSOCK 0140000

static __always_inline int sock_syscall_exit(struct syscall_exit_ctx *ctx, bool tx, int flags_arg)
{
	struct pt_regs *regs;
	struct socket *sock;
	struct file *file;
	struct sock *sk;
	__u16 family;
	__u64 ino;

	if (ctx->ret <= 0 || !gate_open())
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	/* the bytes of a peek stay queued: they are counted when really read */
	if (flags_arg == 3 && BPF_CORE_READ(regs, dx) & MSG_PEEK)
		return 0;
	if (flags_arg == 4 && BPF_CORE_READ(regs, r10) & MSG_PEEK)
		return 0;
	file = fd_to_file(bpf_get_current_task_btf(), BPF_CORE_READ(regs, di));
	if (!file || (BPF_CORE_READ(file, f_inode, i_mode) & S_IFMT) != S_IFSOCK)
		return 0;
	sock = BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return 0;
	ino = BPF_CORE_READ(file, f_inode, i_ino) | 1ull << 63;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_UNIX)
		return unix_on ? count_unix(sk, ino, ctx->ret, tx) : 0;
	if ((family == AF_INET || family == AF_INET6) &&
	    BPF_CORE_READ(sk, sk_protocol) == IPPROTO_UDP)
		return udp_on ? count_dgram(sk, ino, ctx->ret, tx, false) : 0;
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_sendto")
int flow_exit_sendto(struct syscall_exit_ctx *ctx)
{
	return sock_syscall_exit(ctx, true, 0);
}

SEC("tracepoint/syscalls/sys_exit_sendmsg")
int flow_exit_sendmsg(struct syscall_exit_ctx *ctx)
{
	return sock_syscall_exit(ctx, true, 0);
}

SEC("tracepoint/syscalls/sys_exit_recvfrom")
int flow_exit_recvfrom(struct syscall_exit_ctx *ctx)
{
	return sock_syscall_exit(ctx, false, 4); /* recvfrom(fd, buf, len, flags, ...) */
}

SEC("tracepoint/syscalls/sys_exit_recvmsg")
int flow_exit_recvmsg(struct syscall_exit_ctx *ctx)
{
	return sock_syscall_exit(ctx, false, 3); /* recvmsg(fd, msg, flags) */
}

/*
 * Once at start, in the agent's network namespace: listening ports, and connections that were
 * established before the agent (entered into flow_conns: counted from now on).
 */
SEC("iter/tcp")
int flow_discover(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct flow_event e = {};
	struct tcp_sock *tp;
	struct flow_conn *c;
	bool created;
	int state;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0; /* request and time-wait sockets: not connections yet, or any more */
	state = skc->skc_state;
	if (state == TCP_LISTEN) {
		e.kind = FLOW_LISTEN;
		set_tuple_btf(&e.conn, (struct sock *)tp);
		bpf_seq_write(ctx->meta->seq, &e, sizeof(e));
		return 0;
	}
	if (state != TCP_ESTABLISHED && state != TCP_FIN_WAIT1 && state != TCP_FIN_WAIT2 &&
	    state != TCP_CLOSE_WAIT && state != TCP_LAST_ACK && state != TCP_CLOSING)
		return 0;
	e.cookie = bpf_get_socket_cookie(tp);
	c = conn_get(e.cookie, &created);
	if (!c)
		return 0;
	if (!created) {
		/* known already: counters mode reads its live counts here, before each read */
		if (bytes_from_counters && c->established)
			counts_update(c, tp);
		return 0;
	}
	set_tuple_btf(c, (struct sock *)tp);
	tcp_counts(tp, &c->base_tx, &c->base_rx); /* counters: from now on; calls: at its end */
	c->base_known = 1;
	c->base_segs_out = tp->segs_out; /* counted from now on, like its bytes */
	c->base_segs_in = tp->segs_in;
	c->ino = BPF_CORE_READ((struct sock *)tp, sk_socket, file, f_inode, i_ino);
	c->established = 1;
	e.kind = FLOW_FOUND;
	__builtin_memcpy(&e.conn, c, sizeof(*c));
	bpf_seq_write(ctx->meta->seq, &e, sizeof(e));
	return 0;
}
