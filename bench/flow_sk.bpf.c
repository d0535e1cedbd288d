// SPDX-License-Identifier: GPL-2.0
/*
 * A probe for issue 4's churn cost, not the module: flow's TCP path (calls mode) with each
 * connection's entry in socket-local storage (BPF_MAP_TYPE_SK_STORAGE) instead of the
 * cookie-keyed hashes flow_hot/flow_conns. The same tracepoints, the same work per event
 * (owner, tuple, byte counts, a close record through a ring buffer), but the entry hangs off
 * the socket the kernel is working on: no cookie, no hash bucket, no element in a table that
 * both CPUs write, and no delete (the kernel frees it with the socket). Loaded by bench/hold.c
 * beside nginx + wrk: if the churn ratio moves, the module's user space would have to read
 * live connections another way (iter/tcp per network namespace: an iterator over the storage
 * map is refused on these kernels, see bpf/flow.bpf.c). Built with -DPROBE_INDEX (object
 * flow_sk_index.bpf.o), it also keeps what user space could walk instead: each established
 * connection's cookie in a hash, added at ESTABLISHED and deleted at tcp_destroy_sock (two
 * hash operations per connection where the module makes one per event).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "flow.h"
#include "task.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define AF_INET		2
#define AF_INET6	10
#define IPPROTO_TCP	6
#define SOCK_STREAM	1
#define MSG_PEEK	2
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT	2
#define TCP_SYN_RECV	3

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct flow_conn);
} sk_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
} sk_events SEC(".maps");

__u64 sk_lost;

#ifdef PROBE_INDEX
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 131072);
	__type(key, __u64);
	__type(value, __u8);
} sk_index SEC(".maps");
#endif

static __always_inline bool is_tcp(const struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;

	return sk->sk_protocol == IPPROTO_TCP && sk->sk_type == SOCK_STREAM &&
	       (family == AF_INET || family == AF_INET6);
}

static __always_inline void set_owner(struct flow_conn *c)
{
	c->tgid = bpf_get_current_pid_tgid() >> 32;
	c->cgroup_id = task_cgroup_id(bpf_get_current_task_btf());
	bpf_get_current_comm(c->comm, sizeof(c->comm));
}

static __always_inline void set_tuple(struct flow_conn *c, const struct sock *sk)
{
	c->family = sk->__sk_common.skc_family;
	c->lport = sk->__sk_common.skc_num;
	c->rport = __builtin_bswap16(sk->__sk_common.skc_dport);
	c->netns = sk->__sk_common.skc_net.net->ns.inum;
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

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(sk_state, struct sock *sk, const int oldstate, const int newstate)
{
	struct flow_conn *c;

	if (newstate == TCP_ESTABLISHED) {
		if (oldstate != TCP_SYN_SENT && oldstate != TCP_SYN_RECV)
			return 0;
	} else if (newstate != TCP_SYN_SENT) {
		return 0;
	}
	if (!is_tcp(sk))
		return 0;
	c = bpf_sk_storage_get(&sk_conns, sk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
	if (!c) {
		__sync_fetch_and_add(&sk_lost, 1);
		return 0;
	}
	if (newstate == TCP_SYN_SENT) {
		set_owner(c);
		c->role = FLOW_ROLE_CLIENT;
		return 0;
	}
	c->role = oldstate == TCP_SYN_SENT ? FLOW_ROLE_CLIENT : FLOW_ROLE_SERVER;
	set_tuple(c, sk);
	c->established = 1;
#ifdef PROBE_INDEX
	{
		__u64 cookie = bpf_get_socket_cookie(sk);
		__u8 one = 1;

		if (bpf_map_update_elem(&sk_index, &cookie, &one, BPF_ANY))
			__sync_fetch_and_add(&sk_lost, 1);
	}
#endif
	return 0;
}

SEC("tp_btf/tcp_destroy_sock")
int BPF_PROG(sk_destroy, struct sock *sk)
{
	struct flow_conn *c = bpf_sk_storage_get(&sk_conns, sk, NULL, 0);
	struct tcp_sock *tp;
	struct flow_event *e;

	if (!c || !c->established)
		return 0;
#ifdef PROBE_INDEX
	{
		__u64 cookie = bpf_get_socket_cookie(sk);

		bpf_map_delete_elem(&sk_index, &cookie);
	}
#endif
	tp = bpf_skc_to_tcp_sock(sk);
	if (tp) {
		c->segs_out = tp->segs_out - c->base_segs_out;
		c->segs_in = tp->segs_in - c->base_segs_in;
	}
	e = bpf_ringbuf_reserve(&sk_events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&sk_lost, 1);
		return 0;
	}
	e->cookie = 0;
	e->kind = FLOW_CLOSE;
	e->pad = 0;
	__builtin_memcpy(&e->conn, c, sizeof(*c));
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int count(struct sock *sk, int ret, bool tx)
{
	struct flow_conn *c;

	if (ret <= 0 || !is_tcp(sk))
		return 0;
	c = bpf_sk_storage_get(&sk_conns, sk, NULL, 0);
	if (!c)
		return 0;
	if (!c->tgid)
		set_owner(c);
	if (tx)
		__sync_fetch_and_add(&c->tx, ret);
	else
		__sync_fetch_and_add(&c->rx, ret);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(sk_send, struct sock *sk, int ret, int flags)
{
	return count(sk, ret, true);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(sk_recv, struct sock *sk, int ret, int flags)
{
	if (flags & MSG_PEEK)
		return 0;
	return count(sk, ret, false);
}
