// SPDX-License-Identifier: GPL-2.0
/*
 * netstack: how long sampled packets spend in each component of the host's network stack.
 *
 * A sampled packet is followed by its skb pointer from the first event that sees it
 * (net_dev_queue: every packet this host sends or forwards) through the events below; each
 * event closes the segment the previous one opened and adds its length to the histogram of
 * (network namespace, device, component). Which component a segment is follows from its two
 * ends (include/netstack.h): start_xmit -> net_dev_xmit is a driver's transmit, start_xmit ->
 * netif_rx on the peer a veth or loopback crossing, netif_receive_skb -> net_dev_queue a
 * bridge or router forwarding it.
 *
 * skbs are freed without a tracepoint (TCP data after the copy, ACKs) and their addresses come
 * back within microseconds for other packets: each entry carries a fingerprint of the
 * packet's headers (addresses, IPv4 id, ports, TCP sequence), checked at every event, and an
 * age limit; an entry that is not this packet's is counted as unmatched and replaced.
 *
 * Sampling: 1 in sample_every flows, by the flow hash (skb->hash, which TCP sets from the
 * socket), decided the same way at every event before any map lookup (followed()).
 *
 * Fields of the tracepoints' BTF pointers (skb, sk, dev, and pointers loaded from them) are
 * read by direct loads (a faulting one reads 0), not bpf_probe_read_kernel() calls: the
 * fingerprint alone read four skb fields at each of a packet's ~8 events. Under iperf3 with
 * every flow followed the programs took ~17% less per packet (bpf_stats, 3 alternating
 * pairs). A tcp_sock's or udp_sock's fields behind a struct sock pointer, and packet bytes,
 * are still read by helper: the verifier knows the pointer only as a struct sock.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "netstack.h"
#include "gate.bpf.h"
#include "task.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define ETH_P_IP       0x0800
#define ETH_P_IPV6     0x86DD
#define IPPROTO_TCP    6
#define IPPROTO_UDP    17
#define NET_RX_SOFTIRQ 3
#define PF_KTHREAD     0x00200000
#define TCPHDR_FIN     0x01
#define TCPHDR_SYN     0x02
/* How far behind a reader's copy a waiting segment can be and still be this socket's. */
#define NETSTACK_RECV_REACH (64U << 20)

const volatile __u32 sample_every = 1;
const volatile bool send_on = false; /* the kernel has tcp_sendmsg_locked (6.18) */
/* ns_data_ready takes each queued UDP datagram (6.6+): one received and not taken is lost */
const volatile bool udp_claims = false;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NETSTACK_PKTS_MAX);
	__type(key, __u64);
	__type(value, struct netstack_pkt);
} ns_pkts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NETSTACK_HISTS_MAX);
	__type(key, struct netstack_key);
	__type(value, struct netstack_hist);
} ns_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NETSTACK_SENDS_MAX);
	__type(key, __u64);
	__type(value, struct netstack_send);
} ns_sends SEC(".maps");

/*
 * A UDP socket's sampled datagrams in its receive queue, oldest first (up to
 * NETSTACK_SEND_SLOTS): their copy has no tracepoint (UDP copies a linear skb with
 * copy_linear_skb), so each is counted out of the queue instead: ahead datagrams are read
 * before it (sock_recv_length, one per datagram read).
 *
 * The datagram's arrival (softirq) and the reads (the reader's CPU) change it at once, so it
 * is changed under its lock only, and the place in the queue is taken under it too (ns_udp):
 * without the lock a host test of 20,000 datagrams 20 us apart left 1-8 of them measured
 * neither at the socket nor as lost (an append lost to a read's update, a datagram read
 * between its walk and its append, a count of the queue taken across the reader's splice),
 * and a 6.12 guest in CI one of 1,000. Socket storage, as a lock needs (an LRU hash cannot
 * hold one): it goes with its socket, one per UDP socket that has had a sampled datagram.
 */
struct netstack_udp_wait {
	struct bpf_spin_lock lock;
	__u32 n; /* slots in use, from 0 */
	__u32 gen; /* window_gen when they were taken */
	__u64 ts[NETSTACK_SEND_SLOTS]; /* ktime at sk_data_ready */
	__s64 ahead[NETSTACK_SEND_SLOTS]; /* datagrams queued before it, still to be read */
	__u32 netns[NETSTACK_SEND_SLOTS], ifindex[NETSTACK_SEND_SLOTS]; /* where it arrived */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct netstack_udp_wait);
} ns_udp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NETSTACK_RECVS_MAX);
	__type(key, __u64);
	__type(value, struct netstack_recv);
} ns_recvs SEC(".maps");

/*
 * Hypervisor steal (sched.bpf.c's steal_on): set by user space when the kernel keeps steal
 * apart and the host has had some. Until then the receive path pays nothing for it.
 */
__u32 steal_on = 0;

/*
 * Attach windows (src/modules/netstack.c, docs/netstack.md section 5): the programs are
 * attached for a window of every period. window_closing is set but while a window follows
 * new packets: in its drain no new packet or send is followed, those already followed run to
 * their ends. window_gen advances as each window's programs go: what a UDP socket's storage
 * holds from an earlier generation was left then (its reads unseen since) and is counted as
 * window_edge_udp. Without windows both stay 0. The counts after them are user space's,
 * here so that --pin hands them to the next agent with the rest of .bss.
 */
__u32 window_closing = 0;
__u32 window_gen = 0;
__u64 window_followed_ns = 0; /* the ended windows' time following new packets */
__u64 window_ended = 0; /* windows ended: programs detached, maps emptied */
__u64 window_failed = 0; /* windows whose programs could not all be attached */
__u64 window_edge = 0; /* samples on their way in the maps emptied after a window */
__u64 window_swept[NS_MAPS] = {}; /* entries user space deleted: no program counted them */
/* --pin: when the agent before handed over while its programs followed new packets (they go
 * on until the next agent's attach, which counts that time as followed); 0 when not */
__u64 window_handed_at = 0;

/*
 * Where receive processing stands on a CPU. Each start carries the CPU's hypervisor steal at
 * that instant (task_steal; 0 without steal_on): a packet whose wait inside the processing
 * includes stolen time waited for the CPU, not behind other packets (ns_receive).
 */
struct netstack_cpu {
	__u64 softirq_ts; /* the last NET_RX softirq's start on this CPU */
	__u64 softirq_steal;
	__u64 napi_ts; /* the last switch-in of a threaded-NAPI kthread on this CPU */
	__u64 napi_steal;
	__u64 steal_seen; /* the steal as the receives last saw it grow */
	__u64 steal_seen_ts; /* when the first of them saw it */
	__u64 rx_skb; /* the last sampled packet this CPU's receive processing took */
	__u32 napi_pid; /* that kthread */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct netstack_cpu);
} ns_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NS_LOST_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} ns_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NS_MAPS * 2);
	__type(key, __u32);
	__type(value, __u64);
} ns_churn SEC(".maps");

static const struct netstack_hist zero_hist;

static __always_inline void count_lost_n(__u32 reason, __u64 k)
{
	__u64 *n = bpf_map_lookup_elem(&ns_lost, &reason);

	if (n)
		*n += k;
}

static __always_inline void count_lost(__u32 reason)
{
	count_lost_n(reason, 1);
}

static __always_inline void churn(__u32 i)
{
	__u64 *n = bpf_map_lookup_elem(&ns_churn, &i);

	if (n)
		*n += 1;
}

/*
 * An LRU map's new entry and a deleted one, counted: what was inserted, not deleted and is
 * not there was evicted (user space compares with a walk of the keys).
 */
static __always_inline void lru_insert(void *map, __u32 m, void *key, void *value)
{
	if (!bpf_map_update_elem(map, key, value, BPF_NOEXIST))
		churn(NS_CHURN_INSERT(m));
}

static __always_inline void lru_delete(void *map, __u32 m, void *key)
{
	if (!bpf_map_delete_elem(map, key))
		churn(NS_CHURN_DELETE(m));
}

static __always_inline __u64 mix(__u64 h, __u64 v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h;
}

/*
 * The packet's fingerprint: a hash of its addresses, protocol, ports, IPv4 id or IPv6 payload
 * length, and TCP sequence or UDP length; 0 when the headers are neither IPv4 nor IPv6. The
 * headers are at head + network_header on every event here: the packet was built by this host
 * (TX), and the same skb crosses veth and loopback unchanged. *inv, when asked for: a hash of
 * what NAT leaves as it is (the protocol, IPv4 id or IPv6 payload length, TCP sequence or UDP
 * length; not addresses, ports or checksums), which tells a packet whose addresses were
 * rewritten from another one at the same address.
 */
static __always_inline __u64 headers_fp(struct sk_buff *skb, __u32 *inv)
{
	unsigned char *head = skb->head;
	__u16 nh = skb->network_header, th = skb->transport_header;
	__u16 proto = bpf_ntohs(skb->protocol);
	__u32 l4[2] = {}; /* ports, then the TCP sequence or UDP length and checksum */
	__u64 f = 0, id = 0;
	__u8 l4proto;

	if (proto == ETH_P_IP && bpf_ksym_exists(bpf_rdonly_cast)) {
		struct iphdr *ip =
			bpf_rdonly_cast(head + nh, bpf_core_type_id_kernel(struct iphdr));

		f = mix(mix(ip->saddr, ip->daddr), ip->protocol);
		id = ip->id;
		l4proto = ip->protocol;
	} else if (proto == ETH_P_IP) {
		struct iphdr ip;

		if (bpf_probe_read_kernel(&ip, sizeof(ip), head + nh))
			return 0;
		f = mix(mix(ip.saddr, ip.daddr), ip.protocol);
		id = ip.id;
		l4proto = ip.protocol;
	} else if (proto == ETH_P_IPV6 && bpf_ksym_exists(bpf_rdonly_cast)) {
		struct ipv6hdr *ip6 =
			bpf_rdonly_cast(head + nh, bpf_core_type_id_kernel(struct ipv6hdr));

		f = mix(mix(mix(mix(ip6->saddr.in6_u.u6_addr32[2], ip6->saddr.in6_u.u6_addr32[3]),
				ip6->daddr.in6_u.u6_addr32[2]),
			    ip6->daddr.in6_u.u6_addr32[3]),
			ip6->nexthdr);
		id = ip6->payload_len;
		l4proto = ip6->nexthdr;
	} else if (proto == ETH_P_IPV6) {
		struct ipv6hdr ip6;

		if (bpf_probe_read_kernel(&ip6, sizeof(ip6), head + nh))
			return 0;
		f = mix(mix(mix(mix(ip6.saddr.in6_u.u6_addr32[2], ip6.saddr.in6_u.u6_addr32[3]),
				ip6.daddr.in6_u.u6_addr32[2]),
			    ip6.daddr.in6_u.u6_addr32[3]),
			ip6.nexthdr);
		id = ip6.payload_len;
		l4proto = ip6.nexthdr;
	} else {
		return 0;
	}
	if ((l4proto != IPPROTO_TCP && l4proto != IPPROTO_UDP) || th == (__u16)~0U) {
		if (inv)
			*inv = (__u32)mix(id, l4proto);
		return mix(mix(f, id), 0) | 1;
	}
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		/* the same 8 bytes as the probe read's two words: ports, then sequence or
		 * length and checksum (a UDP header read as TCP's first eight bytes) */
		struct tcphdr *t =
			bpf_rdonly_cast(head + th, bpf_core_type_id_kernel(struct tcphdr));

		l4[0] = t->source | (__u32)t->dest << 16;
		l4[1] = t->seq;
		f = mix(f, l4[0]);
	} else if (!bpf_probe_read_kernel(l4, sizeof(l4), head + th)) {
		f = mix(f, l4[0]);
	}
	if (inv) /* UDP: its length, the low half of the word as loaded (the checksum changes) */
		*inv = (__u32)mix(mix(id, l4proto),
				  l4proto == IPPROTO_UDP ? l4[1] & 0xffff : l4[1]);
	return mix(mix(f, id), l4[1]) | 1; /* never 0 */
}

static __always_inline __u64 headers_hash(struct sk_buff *skb)
{
	return headers_fp(skb, NULL);
}

/*
 * tcp_sk(sk)->field: a plain load where bpf_rdonly_cast() exists (6.2+; the verifier knows sk
 * only as a struct sock), else a probe read (a helper call, dear on these hosts: task.bpf.h).
 */
#define TCP_SK(sk, field)                                                                       \
	(bpf_ksym_exists(bpf_rdonly_cast) ?                                                     \
		 ((struct tcp_sock *)bpf_rdonly_cast(sk,                                        \
						     bpf_core_type_id_kernel(struct tcp_sock))) \
			 ->field :                                                              \
		 BPF_CORE_READ((struct tcp_sock *)(sk), field))

static __always_inline void dev_ids(struct net_device *dev, __u32 *ifindex, __u32 *netns)
{
	*ifindex = dev->ifindex;
	*netns = dev->nd_net.net->ns.inum;
}

/* w packets of ns each (w > 1 only for a merged receive-queue slot, struct netstack_recv) */
static __always_inline void hist_add_w(__u32 netns, __u32 ifindex, __u32 component, __u64 cgroup,
				       __u64 ns, __u32 w)
{
	struct netstack_key k = {
		.netns = netns, .ifindex = ifindex, .component = component, .cgroup = cgroup
	};
	struct netstack_hist *h = bpf_map_lookup_elem(&ns_hists, &k);
	__u64 b;

	if (!h) {
		if (bpf_map_update_elem(&ns_hists, &k, &zero_hist, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&ns_hists, &k)) {
			count_lost(NS_LOST_HISTS_FULL);
			return;
		}
		h = bpf_map_lookup_elem(&ns_hists, &k);
		if (!h)
			return;
	}
	/*
	 * A 64-bit index, bounded on the register it is used in: 6.1's and 6.12's verifiers lose
	 * the bound of a 32-bit one that the compiler widens in another register.
	 */
	b = netstack_bucket(ns);
	barrier_var(b);
	if (b < NETSTACK_BUCKETS)
		h->count[b] += w;
	h->sum_ns += ns * w;
}

static __always_inline void hist_add_at(__u32 netns, __u32 ifindex, __u32 component, __u64 cgroup,
					__u64 ns)
{
	hist_add_w(netns, ifindex, component, cgroup, ns, 1);
}

static __always_inline void hist_add(struct netstack_pkt *p, __u32 component, __u64 ns)
{
	hist_add_at(p->netns, p->ifindex, component, 0, ns);
}

/*
 * Whether a lost entry was mid-path: one that reached its last event is complete. A UDP
 * datagram's last is its socket's sk_data_ready where that program runs (p->udp).
 */
static __always_inline void pkt_drop(__u64 key, struct netstack_pkt *p)
{
	if (p->stage == NS_ST_RECEIVE && p->udp && window_closing)
		/* a window's programs going (ns_data_ready may be gone before ns_queue): its edge */
		__sync_fetch_and_add(&window_edge, 1);
	else if (p->stage == NS_ST_RECEIVE && p->udp)
		count_lost(NS_LOST_UDP_UNCLAIMED);
	else if (p->stage != NS_ST_PROBE && p->stage != NS_ST_RECEIVE && p->stage != NS_ST_SENT)
		count_lost(NS_LOST_UNMATCHED);
	lru_delete(&ns_pkts, NS_MAP_PKTS, &key);
}

/*
 * Whether this packet's flow is followed: every flow, or 1 in sample_every by skb->hash
 * (TCP sets it from the socket's hash; veth, bridge and loopback keep it). Checked at every
 * event before any map lookup, so a flow not followed costs one load and a division per
 * event. A packet without a hash is followed only when every flow is. And only while the
 * handover gate (gate.bpf.h) names these programs: with --pin the agent before's programs
 * follow packets until this agent's are attached; a flow not followed does not pay for it.
 */
static __always_inline bool followed(struct sk_buff *skb)
{
	__u32 hash;

	if (sample_every > 1) {
		hash = skb->hash;
		if (!hash || hash % sample_every)
			return false;
	}
	return gate_open();
}

/*
 * The sampled packet this skb carries, if it has an entry that is its own: the fingerprint
 * matches (check_fp) and the entry is younger than the age limit. *now is read only then.
 */
static __always_inline struct netstack_pkt *pkt_find(struct sk_buff *skb, bool check_fp, __u64 *now)
{
	__u64 key = (__u64)skb;
	struct netstack_pkt *p;

	/* at net_dev_xmit (no check_fp) the skb is not read: the lookup decides */
	if (check_fp && !followed(skb))
		return NULL;
	p = bpf_map_lookup_elem(&ns_pkts, &key);
	if (!p)
		return NULL;
	*now = bpf_ktime_get_ns();
	if ((*now > p->ts && *now - p->ts > NETSTACK_MAX_AGE_NS) ||
	    (check_fp && p->fp != headers_hash(skb))) {
		pkt_drop(key, p);
		return NULL;
	}
	return p;
}

/*
 * Closes the packet's open segment as component c and opens the next at now. A segment of no
 * time is counted too (0 ns): the packet went through c. One is the backlog of a packet whose
 * wait the hypervisor took whole (ns_receive moves it to softirq).
 */
static __always_inline void segment(struct netstack_pkt *p, __u32 c, __u64 now, __u32 stage)
{
	hist_add(p, c, now > p->ts ? now - p->ts : 0);
	p->ts = now;
	p->stage = stage;
}

/*
 * A TCP packet at the device: the socket's sampled sends whose first byte it carries end
 * their send component (from the send to here: TCP/IP, and the write queue when the window or
 * the congestion window held it); sends whose byte left before it, in a packet not followed,
 * are counted unmatched. seq and payload from the headers.
 */
static __always_inline void send_end(struct sk_buff *skb, struct netstack_pkt *p, __u64 now)
{
	unsigned char *head = skb->head, *data = skb->data;
	__u16 th = skb->transport_header;
	struct sock *sk = skb->sk;
	struct netstack_send *snd;
	__u32 tcp[4], hdr, len, off, seq, done = 0, i;
	__u64 key = (__u64)sk;

	if (!sk)
		return;
	snd = bpf_map_lookup_elem(&ns_sends, &key);
	if (!snd || th == (__u16)~0U)
		return;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		struct tcphdr *t =
			bpf_rdonly_cast(head + th, bpf_core_type_id_kernel(struct tcphdr));

		hdr = BPF_CORE_READ_BITFIELD(t, doff) * 4;
		seq = bpf_ntohl(t->seq);
	} else {
		if (bpf_probe_read_kernel(tcp, sizeof(tcp), head + th))
			return;
		hdr = ((tcp[3] & 0xff) >> 4) *
		      4; /* data offset, in the byte after the ack number */
		seq = bpf_ntohl(tcp[1]);
	}
	off = th - (__u32)(data - head) + hdr; /* from skb->data to the payload */
	len = skb->len;
	len = len > off ? len - off : 0;
	/* the oldest sends first: those this packet carries or that left before it */
	for (i = 0; i < NETSTACK_SEND_SLOTS; i++) {
		if (i >= snd->n)
			break;
		off = snd->seq[i] - seq; /* the send's first byte, from this packet's first */
		if (off >= len && (__s32)off >= 0)
			break; /* still behind this packet in the write queue */
		/* left in a packet not followed, or waited longer than the histograms reach */
		if (off >= len || now < snd->ts[i] || now - snd->ts[i] > NETSTACK_QUEUE_MAX_AGE_NS)
			count_lost(NS_LOST_UNMATCHED);
		else
			hist_add_at(p->netns, p->ifindex, NS_SEND, snd->cgroup, now - snd->ts[i]);
		done++;
	}
	if (!done)
		return;
	if (done >= snd->n) {
		lru_delete(&ns_sends, NS_MAP_SENDS, &key);
		return;
	}
	for (i = 0; i + done < NETSTACK_SEND_SLOTS; i++) {
		snd->ts[i] = snd->ts[i + done];
		snd->seq[i] = snd->seq[i + done];
	}
	snd->n -= done;
}

/*
 * Whether skb, received last at p (netif_receive_skb) and now with another fingerprint, is
 * that packet with its addresses or ports rewritten by NAT (a service's DNAT, masquerade): on
 * the device and in the namespace it was received on (skb_iif: 0 in an skb this host made,
 * as a freed address's reuse for a send is), with what NAT does not rewrite unchanged (inv:
 * its IPv4 id or IPv6 length, protocol, TCP sequence or UDP length). Not "not a clone": the
 * first packet of a flow came cloned to the NAT and left it so (the header NAT writes was
 * the clone's own; seen on 6.18).
 */
static __always_inline bool nat_rewritten(struct sk_buff *skb, struct netstack_pkt *p, __u64 fp,
					  __u32 inv)
{
	return fp && inv == p->inv && skb->skb_iif == p->ifindex &&
	       skb->dev->nd_net.net->ns.inum == p->netns;
}

/* First event of a packet this host sends or forwards: the sampling decision. */
SEC("tp_btf/net_dev_queue")
int BPF_PROG(ns_queue, struct sk_buff *skb)
{
	__u64 key = (__u64)skb, now = 0, fp;
	struct netstack_pkt *p, n = {};
	__u32 inv = 0;

	if (!followed(skb))
		return 0;
	fp = headers_fp(skb, &inv);
	p = bpf_map_lookup_elem(&ns_pkts, &key);
	if (p) {
		now = bpf_ktime_get_ns();
		/* received on a bridge port or by a router, now sent on: forwarding */
		if (p->stage == NS_ST_RECEIVE && now - p->ts <= NETSTACK_MAX_AGE_NS &&
		    (p->fp == fp || nat_rewritten(skb, p, fp, inv))) {
			p->fp = fp;
			segment(p, NS_FORWARD, now, NS_ST_QUEUE);
			dev_ids(skb->dev, &p->ifindex, &p->netns);
			return 0;
		}
		if (p->stage == NS_ST_XMIT && p->fp == fp && now - p->ts <= NETSTACK_MAX_AGE_NS) {
			/* a virtual device's transmit handing it to the device under it */
			segment(p, NS_DRIVER, now, NS_ST_QUEUE);
			dev_ids(skb->dev, &p->ifindex, &p->netns);
			return 0;
		}
		pkt_drop(key, p); /* the address of a packet gone untraced: a new one */
	}
	if (!fp)
		return 0; /* neither IPv4 nor IPv6 */
	n.ts = now ? now : bpf_ktime_get_ns();
	dev_ids(skb->dev, &n.ifindex, &n.netns);
	if (window_closing) {
		/* the window's drain: the packet is not followed, the sends it carries end */
		if (send_on)
			send_end(skb, &n, n.ts);
		return 0;
	}
	n.fp = fp;
	n.inv = inv;
	n.stage = NS_ST_QUEUE;
	lru_insert(&ns_pkts, NS_MAP_PKTS, &key, &n);
	if (send_on)
		send_end(skb, &n, n.ts);
	return 0;
}

/*
 * The application sends on a TCP socket (6.18's tcp_sendmsg_locked): the first byte's time
 * and sequence, kept until a packet carries it. A socket keeps its oldest
 * NETSTACK_SEND_SLOTS waiting sends; later ones wait unsampled. The tracepoint is in the
 * send's copy loop, once for each skb the data goes into: only the first, before any of the
 * message was taken (its iterator's offset still 0), starts a send. (A message of several
 * iovecs whose skb ends exactly at the end of one of them is taken for a second send.)
 */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(ns_sendmsg, struct sock *sk, struct msghdr *msg, struct sk_buff *skb, int size_goal)
{
	struct netstack_send *snd, fresh = {};
	__u64 key = (__u64)sk, now;
	__u32 hash, n, seq;

	if (msg->msg_iter.iov_offset)
		return 0; /* the same send, going on into a new skb */
	if (sample_every > 1) {
		hash = sk->sk_txhash; /* what TCP puts in its packets' skb->hash */
		if (!hash || hash % sample_every)
			return 0;
	}
	if (!gate_open() || window_closing)
		return 0;
	now = bpf_ktime_get_ns();
	seq = TCP_SK(sk, write_seq);
	snd = bpf_map_lookup_elem(&ns_sends, &key);
	if (!snd) {
		fresh.ts[0] = now;
		fresh.seq[0] = seq;
		fresh.n = 1;
		fresh.cgroup = task_cgroup_id(bpf_get_current_task_btf());
		fresh.last_msg = (__u64)msg;
		fresh.last_seq = seq;
		lru_insert(&ns_sends, NS_MAP_SENDS, &key, &fresh);
		return 0;
	}
	/* the loop again with nothing taken yet: it waited for memory before its first skb */
	if (snd->last_msg == (__u64)msg && snd->last_seq == seq)
		return 0;
	snd->last_msg = (__u64)msg;
	snd->last_seq = seq;
	n = snd->n;
	barrier_var(n);
	if (n >= NETSTACK_SEND_SLOTS) {
		count_lost(NS_LOST_SEND_SLOTS); /* and pays no cgroup read */
		return 0;
	}
	snd->cgroup = task_cgroup_id(bpf_get_current_task_btf());
	snd->ts[n] = now;
	snd->seq[n] = seq;
	snd->n = n + 1;
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(ns_start_xmit, struct sk_buff *skb, struct net_device *dev)
{
	struct netstack_pkt *p;
	__u64 now;

	p = pkt_find(skb, true, &now);
	if (!p || p->stage != NS_ST_QUEUE)
		return 0;
	segment(p, NS_QDISC, now, NS_ST_XMIT);
	dev_ids(dev, &p->ifindex, &p->netns);
	return 0;
}

/* Whether dev is a veth: its link type's kind, "veth". */
static __always_inline bool is_veth(struct net_device *dev)
{
	const char *kind = dev->rtnl_link_ops ? dev->rtnl_link_ops->kind : NULL;
	char k[5];

	return kind && !bpf_probe_read_kernel(k, sizeof(k), kind) && k[0] == 'v' && k[1] == 'e' &&
	       k[2] == 't' && k[3] == 'h' && !k[4];
}

/*
 * After the driver's ndo_start_xmit returned. On a veth or lo the skb already belongs to the
 * peer's receive path: only the pointer is used, never read. Its netif_rx came first, unless
 * the peer receives by NAPI (a veth with GRO on the peer): then the skb is in the peer's
 * ring, still at NS_ST_XMIT here unless the peer's poll on another CPU took it already.
 */
SEC("tp_btf/net_dev_xmit")
int BPF_PROG(ns_xmit, struct sk_buff *skb, int rc, struct net_device *dev)
{
	__u64 key = (__u64)skb, now;
	struct netstack_pkt *p;

	/*
	 * A flow not followed costs a load here, not a lookup. After a veth's transmit the skb is
	 * its peer's, maybe received and freed on another CPU already: its hash may then be
	 * another packet's. A sampled packet skipped so is still at NS_ST_XMIT when its peer
	 * takes it (ns_rx, ns_gro end its crossing there); one on another device ages out.
	 */
	if (!followed(skb))
		return 0;
	p = pkt_find(skb, false, &now);
	/* its start_xmit was on this device: not a freed and reused skb from elsewhere */
	if (!p || p->stage != NS_ST_XMIT || p->ifindex != dev->ifindex)
		return 0;
	if (is_veth(dev)) {
		/* its peer receives by NAPI (GRO there): the packet waits in its ring */
		segment(p, NS_CROSSING, now, NS_ST_RING);
		return 0;
	}
	segment(p, NS_DRIVER, now, NS_ST_SENT);
	lru_delete(&ns_pkts, NS_MAP_PKTS, &key); /* it left this host */
	return 0;
}

/* The peer of a veth or lo receives it: the crossing ends, the wait for NET_RX begins. */
static __always_inline void rx_begin(struct sk_buff *skb, struct netstack_pkt *p, __u64 now)
{
	segment(p, NS_CROSSING, now, NS_ST_RX);
	dev_ids(skb->dev, &p->ifindex, &p->netns);
}

SEC("tp_btf/netif_rx")
int BPF_PROG(ns_rx, struct sk_buff *skb)
{
	struct netstack_pkt *p;
	__u64 now;

	p = pkt_find(skb, true, &now);
	if (p && p->stage == NS_ST_XMIT)
		rx_begin(skb, p, now);
	return 0;
}

/*
 * GRO receive, in a NAPI poll: the packet a veth's peer put in the ring (NS_ST_RING) is
 * taken; its wait goes on to netif_receive_skb (GRO holds it until its flush), now on this
 * device. One still at NS_ST_XMIT was taken before its sender's net_dev_xmit ran: the
 * crossing ends here.
 */
SEC("tp_btf/napi_gro_receive_entry")
int BPF_PROG(ns_gro, struct sk_buff *skb)
{
	struct netstack_pkt *p;
	__u64 now;

	p = pkt_find(skb, true, &now);
	if (!p)
		return 0;
	if (p->stage == NS_ST_RING)
		dev_ids(skb->dev, &p->ifindex, &p->netns);
	else if (p->stage == NS_ST_XMIT)
		rx_begin(skb, p, now);
	return 0;
}

/*
 * A threaded-NAPI kthread ("napi/<dev>-<id>") gets this CPU: its receive processing starts.
 * Every other switch costs the flags test.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(ns_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct netstack_cpu *cpu;
	__u32 zero = 0;

	if (!(next->flags & PF_KTHREAD))
		return 0;
	if (next->comm[0] != 'n' || next->comm[1] != 'a' || next->comm[2] != 'p' ||
	    next->comm[3] != 'i' || next->comm[4] != '/' || !gate_open())
		return 0;
	cpu = bpf_map_lookup_elem(&ns_cpu, &zero);
	if (cpu) {
		cpu->napi_ts = bpf_ktime_get_ns();
		cpu->napi_steal = steal_on ? task_steal(next) : 0;
		cpu->napi_pid = next->pid;
	}
	return 0;
}

/*
 * NET_RX starts on this CPU. Stamped every time: with RPS a packet queued on one CPU is
 * processed on another, so the CPU that queued it cannot tell which one to watch.
 */
SEC("tp_btf/softirq_entry")
int BPF_PROG(ns_softirq, unsigned int vec_nr)
{
	struct netstack_cpu *cpu;
	__u32 zero = 0;

	if (vec_nr != NET_RX_SOFTIRQ || !gate_open())
		return 0;
	cpu = bpf_map_lookup_elem(&ns_cpu, &zero);
	if (cpu) {
		cpu->softirq_ts = bpf_ktime_get_ns();
		cpu->softirq_steal = steal_on ? task_steal(bpf_get_current_task_btf()) : 0;
	}
	return 0;
}

/*
 * The hypervisor's steal of this CPU during a packet's wait inside the processing that started
 * at start (the CPU's steal then: start_steal), the packet queued at queued. The steal is
 * known only as it grows (task_steal): a packet queued after the receives saw its last growth
 * counts from there, any other from the start. So a packet that came while the CPU was taken
 * counts the whole of it (capped by its wait, in ns_receive).
 */
static __always_inline __u64 wait_stolen(struct netstack_cpu *cpu, __u64 queued, __u64 start,
					 __u64 start_steal, __u64 now)
{
	__u64 steal = task_steal(bpf_get_current_task_btf()), base = start_steal;

	if (cpu->steal_seen_ts > start && queued >= cpu->steal_seen_ts)
		base = cpu->steal_seen;
	if (steal > cpu->steal_seen) {
		cpu->steal_seen = steal;
		cpu->steal_seen_ts = now;
	}
	return steal > base ? steal - base : 0;
}

/* Whether skb's headers (as received) are a UDP datagram's: with udp_claims only (6.6+). */
static __always_inline bool skb_udp(struct sk_buff *skb)
{
	unsigned char *nh = skb->head + skb->network_header;

	struct iphdr *ip;

	if (!bpf_ksym_exists(bpf_rdonly_cast))
		return false;
	/* a GSO packet is split at the socket into skbs of its own: not lost, not followed */
	if (((struct skb_shared_info *)bpf_rdonly_cast(
		     skb->head + skb->end, bpf_core_type_id_kernel(struct skb_shared_info)))
		    ->gso_size)
		return false;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		ip = bpf_rdonly_cast(nh, bpf_core_type_id_kernel(struct iphdr));
		/* a fragment: reassembly frees all but one, without kfree_skb */
		return ip->protocol == IPPROTO_UDP && !(ip->frag_off & bpf_htons(0x3fff));
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return ((struct ipv6hdr *)bpf_rdonly_cast(nh,
							  bpf_core_type_id_kernel(struct ipv6hdr)))
			       ->nexthdr == IPPROTO_UDP;
	return false;
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(ns_receive, struct sk_buff *skb)
{
	struct netstack_cpu *cpu;
	struct netstack_pkt *p;
	__u32 zero = 0;
	__u64 now;

	p = pkt_find(skb, true, &now);
	if (!p)
		return 0;
	if (p->stage == NS_ST_RX || p->stage == NS_ST_RING) {
		/*
		 * Queued to a backlog or a NAPI ring at p->ts: the wait for the processing that
		 * takes it, if that started after, then the wait inside it. The processing is
		 * the NET_RX softirq, or for a ring in threaded NAPI the kthread running now.
		 * Time the hypervisor took the CPU from the processing (no sched_switch shows
		 * it) is a wait for the CPU too: it moves from the wait inside to softirq.
		 */
		__u64 start = 0, start_steal = 0, split, stolen = 0;

		if (p->stage == NS_ST_RING) /* the receiving device, had GRO not seen it */
			dev_ids(skb->dev, &p->ifindex, &p->netns);
		cpu = bpf_map_lookup_elem(&ns_cpu, &zero);
		if (cpu) {
			start = cpu->softirq_ts;
			start_steal = cpu->softirq_steal;
			if (p->stage == NS_ST_RING && cpu->napi_pid &&
			    cpu->napi_pid == (__u32)bpf_get_current_pid_tgid()) {
				start = cpu->napi_ts;
				start_steal = cpu->napi_steal;
			}
		}
		split = start > p->ts && start < now ? start : p->ts;
		if (cpu && start_steal && start < now && now > split) {
			stolen = wait_stolen(cpu, p->ts, start, start_steal, now);
			if (stolen > now - split)
				stolen = now - split;
		}
		if (split + stolen > p->ts)
			segment(p, NS_SOFTIRQ, split + stolen, NS_ST_RX);
		segment(p, NS_BACKLOG, now, NS_ST_RECEIVE);
		if (udp_claims)
			p->udp = skb_udp(skb);
		if (cpu)
			cpu->rx_skb = (__u64)skb; /* for ns_data_ready: udp_claim_own() */
	} else if (p->stage == NS_ST_RECEIVE) {
		segment(p, NS_FORWARD, now, NS_ST_RECEIVE); /* a bridge delivering it to itself */
	} else {
		return 0;
	}
	dev_ids(skb->dev, &p->ifindex, &p->netns);
	return 0;
}

/*
 * A sampled segment joins its socket's receive queue (struct netstack_recv): a slot of its
 * own, or, between strides, the newest slot (whose mean arrival time moves towards now).
 * When every slot is taken, neighbouring slots are merged in pairs and the stride doubles.
 */
static __always_inline void recv_queue(struct netstack_recv *r, __u64 now, __u32 seq,
				       struct netstack_pkt *p)
{
	__u64 n = r->n, j; /* 64-bit indexes, bounded on their own register (hist_add_w) */
	__u32 i, w, w2;

	/* n >= 1: a drained socket's entry is deleted (ns_copy), its next one starts at stride 1 */
	if (r->skip) {
		j = n - 1;
		barrier_var(j);
		if (j >= NETSTACK_SEND_SLOTS)
			return;
		w = r->weight[j];
		if (now > r->ts[j])
			r->ts[j] += (now - r->ts[j]) / (w + 1);
		r->weight[j] = w + 1;
		r->skip--;
		return;
	}
	if (n >= NETSTACK_SEND_SLOTS) {
		for (i = 0; i < NETSTACK_SEND_SLOTS / 2; i++) {
			w = r->weight[2 * i];
			w2 = r->weight[2 * i + 1];
			r->ts[i] = r->ts[2 * i];
			if (r->ts[2 * i + 1] > r->ts[i] && w + w2)
				r->ts[i] += (r->ts[2 * i + 1] - r->ts[i]) * w2 / (w + w2);
			r->seq[i] = r->seq[2 * i];
			r->netns[i] = r->netns[2 * i];
			r->ifindex[i] = r->ifindex[2 * i];
			r->weight[i] = w + w2;
		}
		n = NETSTACK_SEND_SLOTS / 2;
		r->stride = r->stride < (1U << 30) ? r->stride * 2 : r->stride;
	}
	barrier_var(n);
	if (n >= NETSTACK_SEND_SLOTS)
		return;
	r->ts[n] = now;
	r->seq[n] = seq;
	r->netns[n] = p->netns;
	r->ifindex[n] = p->ifindex;
	r->weight[n] = 1;
	r->n = n + 1;
	r->skip = r->stride - 1;
}

/*
 * TCP's receive of an established socket's segment (top of tcp_rcv_established): the
 * protocol stage ends. A segment with data waits for the reader from here, followed by its
 * socket and sequence (ns_recvs); a pure ACK's path ends here.
 */
SEC("tp_btf/tcp_probe")
int BPF_PROG(ns_probe, struct sock *sk, struct sk_buff *skb)
{
	__u64 key = (__u64)skb, sk_key = (__u64)sk, now;
	struct netstack_recv *r, fresh = {};
	struct netstack_pkt *p;
	struct tcp_skb_cb *tcb = (struct tcp_skb_cb *)&skb->cb;
	__u32 cb[2], rcv_nxt; /* TCP_SKB_CB(skb): seq, end_seq */
	__u8 flags;

	p = pkt_find(skb, true, &now);
	if (!p || p->stage != NS_ST_RECEIVE)
		return 0;
	segment(p, NS_PROTOCOL, now, NS_ST_PROBE);
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		/* plain loads, no probe reads (6.2+, bpf/task.bpf.h) */
		tcb = bpf_rdonly_cast(tcb, bpf_core_type_id_kernel(struct tcp_skb_cb));
		flags = tcb->tcp_flags;
		cb[0] = tcb->seq;
		cb[1] = tcb->end_seq;
		rcv_nxt = ((struct tcp_sock *)bpf_rdonly_cast(
				   sk, bpf_core_type_id_kernel(struct tcp_sock)))
				  ->rcv_nxt;
	} else {
		flags = BPF_CORE_READ(tcb, tcp_flags);
		if (bpf_probe_read_kernel(cb, sizeof(cb), tcb))
			goto done;
		rcv_nxt = BPF_CORE_READ((struct tcp_sock *)sk, rcv_nxt);
	}
	if (cb[1] - cb[0] <= !!(flags & TCPHDR_FIN) + !!(flags & TCPHDR_SYN))
		goto done; /* no data (a SYN and a FIN count one each): nothing for a reader */
	if ((__s32)(cb[1] - rcv_nxt) <= 0)
		goto done; /* a retransmission of data already received: TCP drops it */
	r = bpf_map_lookup_elem(&ns_recvs, &sk_key);
	if (!r) {
		fresh.ts[0] = now;
		fresh.seq[0] = cb[0];
		fresh.netns[0] = p->netns;
		fresh.ifindex[0] = p->ifindex;
		fresh.weight[0] = 1;
		fresh.n = 1;
		fresh.stride = 1;
		lru_insert(&ns_recvs, NS_MAP_RECVS, &sk_key, &fresh);
		goto done;
	}
	recv_queue(r, now, cb[0], p);
done:
	lru_delete(&ns_pkts, NS_MAP_PKTS, &key);
	return 0;
}

#define UDP_WALK     64
#define UDP_TOO_DEEP (-1)
#define UDP_READ     (-2)

/*
 * How many datagrams will be read before skb: those before it in its queue, walked back to
 * the queue's head (not the queue's length, which another CPU's enqueue may already have
 * grown), and, while it is still in sk_receive_queue, all of the reader's queue.
 * UDP_TOO_DEEP when it is more than UDP_WALK deep; UDP_READ when it is in no queue any more
 * (unlinked: a reader on another CPU has taken it since it was queued). Plain loads only: it
 * runs under the socket's lock (ns_data_ready).
 */
static __always_inline __s64 udp_ahead(struct sock *sk, struct udp_sock *up, struct sk_buff *skb)
{
	void *receive = (void *)&sk->sk_receive_queue;
	void *reader = (void *)&up->reader_queue;
	struct sk_buff *cur = skb;
	__s64 pos;

	for (pos = 0; pos < UDP_WALK; pos++) {
		cur = cur->prev;
		if ((void *)cur == receive)
			return pos + up->reader_queue.qlen;
		if (!cur && !pos)
			return UDP_READ;
		if ((void *)cur == reader || !cur)
			return pos; /* the reader took the queue over meanwhile */
	}
	return UDP_TOO_DEEP;
}

/* sk as the udp_sock it is (6.2+; the UDP programs attach on 6.6+ only) */
static __always_inline struct udp_sock *udp_sk_cast(struct sock *sk)
{
	if (!bpf_ksym_exists(bpf_rdonly_cast))
		return NULL;
	return bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct udp_sock));
}

#define UDP_CLAIM_WALK 4

/*
 * The newest datagram no program has taken yet in sk's queues, taken: its packet entry
 * deleted (the delete decides between two CPUs) after its copy to *p. The receive queue is
 * walked back from its tail and, past its head, the reader's queue (a reader moves the
 * receive queue to the reader queue's tail whole), UDP_CLAIM_WALK datagrams in all. For a
 * call that udp_claim_own leaves without one: from 6.18 one CPU queues what several CPUs
 * delivered at once and calls sk_data_ready once for each, and in a list delivery (GRO's
 * batches) every packet's netif_receive_skb comes before the first is queued. A datagram of a
 * flow not followed is passed over.
 */
static __always_inline struct sk_buff *udp_claim(struct sock *sk, struct udp_sock *up,
						 struct netstack_pkt *p, __u64 *now)
{
	struct sk_buff *skb = sk->sk_receive_queue.prev;
	void *head = (void *)&sk->sk_receive_queue;
	struct netstack_pkt *found;
	__u64 key;
	int i;

	for (i = 0; i < UDP_CLAIM_WALK; i++) {
		if ((void *)skb == head && up && head != (void *)&up->reader_queue) {
			head = (void *)&up->reader_queue;
			skb = up->reader_queue.prev;
		}
		if (!skb || (void *)skb == head)
			return NULL; /* the head: nothing left (a reader took the rest) */
		found = pkt_find(skb, true, now);
		if (found && found->stage == NS_ST_RECEIVE) {
			*p = *found;
			key = (__u64)skb;
			if (!bpf_map_delete_elem(&ns_pkts, &key)) {
				churn(NS_CHURN_DELETE(NS_MAP_PKTS));
				return skb;
			}
		}
		skb = skb->prev;
	}
	return NULL;
}

/* Whether skb (its headers as received) is a UDP datagram to local port (host order). */
static __always_inline bool udp_to_port(struct sk_buff *skb, __u16 port)
{
	unsigned char *nh = skb->head + skb->network_header;
	struct ipv6hdr *ip6;
	struct udphdr *udp;
	struct iphdr *ip;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		ip = bpf_rdonly_cast(nh, bpf_core_type_id_kernel(struct iphdr));
		if (ip->protocol != IPPROTO_UDP)
			return false;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		ip6 = bpf_rdonly_cast(nh, bpf_core_type_id_kernel(struct ipv6hdr));
		if (ip6->nexthdr != IPPROTO_UDP)
			return false;
	} else {
		return false;
	}
	udp = bpf_rdonly_cast(skb->head + skb->transport_header,
			      bpf_core_type_id_kernel(struct udphdr));
	return bpf_ntohs(udp->dest) == port;
}

#define PACKET_HOST 0

/*
 * Whether skb, a UDP datagram to sk's port, is in one of sk's queues, within UDP_WALK of its
 * tail (datagrams other CPUs queued since, or, after a reader's splice of the receive queue
 * into reader_queue, those spliced with it: a 6.12 guest had 5 from the other CPU behind
 * it), or, unicast, in no queue (a reader on another CPU has taken it since). A multicast
 * datagram's original goes to the last socket, clones to the others: unlinked, it is not yet
 * queued. The port first: rx_skb left by a TCP segment or another socket's datagram would
 * otherwise cost every UDP sk_data_ready on this CPU a walk of UDP_WALK; a walk that comes
 * back to skb is a list not a socket's (GRO's batch). Plain loads, no lock: a queue changing
 * under the walk makes it false.
 */
static __always_inline bool udp_queued(struct sock *sk, struct udp_sock *up, struct sk_buff *skb)
{
	struct sk_buff *cur = skb->next;
	int i;

	if (!udp_to_port(skb, sk->__sk_common.skc_num))
		return false;
	if (!cur)
		return !skb->prev && BPF_CORE_READ_BITFIELD(skb, pkt_type) == PACKET_HOST;
	for (i = 0; i < UDP_WALK && cur && cur != skb; i++) {
		if ((void *)cur == (void *)&sk->sk_receive_queue ||
		    (void *)cur == (void *)&up->reader_queue)
			return true;
		cur = cur->next;
	}
	return false;
}

/*
 * skb's sample taken for sk, if it is a followed datagram between netif_receive_skb and its
 * socket: its entry copied to *p and deleted (the delete decides between two CPUs). check_ns:
 * a datagram read already is this socket's by its port only, and one to a same-port socket
 * of another namespace (a CPU's last received, never queued here) is not; one linked in the
 * socket's queue is this socket's whatever namespace its entry names (bpf_redirect_peer
 * hands a packet to a pod's device without a receive there).
 */
static __always_inline bool udp_take(struct sock *sk, struct sk_buff *skb, struct netstack_pkt *p,
				     __u64 *now, bool check_ns)
{
	struct netstack_pkt *found = pkt_find(skb, true, now);
	__u64 key = (__u64)skb;

	if (!found || found->stage != NS_ST_RECEIVE ||
	    (check_ns && found->netns != sk->__sk_common.skc_net.net->ns.inum))
		return false;
	*p = *found;
	if (bpf_map_delete_elem(&ns_pkts, &key))
		return false; /* another CPU's program took it */
	churn(NS_CHURN_DELETE(NS_MAP_PKTS));
	return true;
}

/*
 * The datagram this CPU is delivering, taken: up to 6.17 sk_data_ready comes on the CPU
 * that queued it, right after, and ns_receive kept it (rx_skb, the last sampled packet
 * this CPU's receive processing took; 0 once taken). Each CPU takes its own, whichever
 * program runs first: before, a program took the newest datagram at the tail, and two
 * CPUs queuing at once could both find the later one, the earlier then taken by neither
 * when a reader had moved it on (1 in 5,000 in a 6.12 guest's test_udp_races).
 */
static __always_inline struct sk_buff *udp_claim_own(struct sock *sk, struct udp_sock *up,
						     struct netstack_cpu *cpu,
						     struct netstack_pkt *p, __u64 *now)
{
	struct sk_buff *skb;

	if (!cpu->rx_skb || !up)
		return NULL;
	skb = bpf_rdonly_cast((void *)cpu->rx_skb, bpf_core_type_id_kernel(struct sk_buff));
	if (!udp_queued(sk, up, skb))
		return NULL;
	cpu->rx_skb = 0;
	return udp_take(sk, skb, p, now, !skb->next) ? skb : NULL;
}

/*
 * A UDP socket has a datagram queued (6.6+: sk_data_ready, after the enqueue): IP and UDP
 * are done, the wait for the application begins. TCP ends its protocol stage at tcp_probe
 * instead (all kernels; its data_ready comes after the segment is queued, already counted
 * as socket). From here the datagram is followed by its socket and place in the queue
 * (ns_udp). The place is taken under the socket's lock, which the read's program takes too:
 * a datagram read after the walk is read after its sample is in place.
 */
SEC("tp_btf/sk_data_ready")
int BPF_PROG(ns_data_ready, struct sock *sk)
{
	struct netstack_udp_wait *w;
	struct netstack_cpu *cpu;
	__u32 zero = 0;
	struct netstack_pkt p;
	struct udp_sock *up;
	struct sk_buff *skb;
	__u32 n, gen, stale = 0;
	__u64 now;
	__s64 ahead;

	if (sk->sk_protocol != IPPROTO_UDP)
		return 0;
	up = udp_sk_cast(sk);
	cpu = bpf_map_lookup_elem(&ns_cpu, &zero);
	if (!cpu)
		return 0;
	skb = udp_claim_own(sk, up, cpu, &p, &now);
	if (!skb)
		skb = udp_claim(sk, up, &p, &now);
	if (!skb)
		return 0;
	hist_add(&p, NS_PROTOCOL, now > p.ts ? now - p.ts : 0);
	w = bpf_sk_storage_get(&ns_udp, sk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
	if (!w) /* another CPU made it first, or no memory */
		w = bpf_sk_storage_get(&ns_udp, sk, NULL, 0);
	if (!w || !up) {
		count_lost(NS_LOST_SOCKET_STORAGE);
		return 0;
	}
	gen = window_gen;
	bpf_spin_lock(&w->lock);
	if (w->gen != gen) { /* an earlier window's: its reads went unseen */
		stale = w->n;
		w->n = 0;
		w->gen = gen;
	}
	ahead = udp_ahead(sk, up, skb);
	n = w->n;
	if (ahead >= 0 && n < NETSTACK_SEND_SLOTS) {
		w->ts[n] = now;
		w->ahead[n] = ahead;
		w->netns[n] = p.netns;
		w->ifindex[n] = p.ifindex;
		w->n = n + 1;
	}
	bpf_spin_unlock(&w->lock);
	if (stale)
		count_lost_n(NS_LOST_WINDOW_EDGE_UDP, stale);
	if (ahead == UDP_READ)
		/*
		 * Read before the walk, its read's program gone by without it: its wait was
		 * shorter than the time since, charged to the socket's cgroup.
		 */
		hist_add_at(p.netns, p.ifindex, NS_SOCKET,
			    BPF_CORE_READ(sk, sk_cgrp_data.cgroup, kn, id),
			    bpf_ktime_get_ns() - now);
	else if (ahead < 0 || n >= NETSTACK_SEND_SLOTS)
		/* too deep in the queue to count, or the socket's eight oldest are waiting */
		count_lost(NS_LOST_SOCKET_SLOTS);
	return 0;
}

/*
 * A UDP socket released (its last file closed; a cgroup hook on the root cgroup, run for
 * every process's sockets): the datagrams its samples wait for will never be read, and the
 * samples would go with its storage. Counted as socket_closed, so that the socket stage's
 * samples, those beyond the slots and these add up to the protocol stage's.
 */
SEC("cgroup/sock_release")
int ns_udp_release(struct bpf_sock *ctx)
{
	struct netstack_udp_wait *w;
	__u32 n, gen;
	bool stale;

	if (ctx->protocol != IPPROTO_UDP || !gate_open())
		return 1;
	w = bpf_sk_storage_get(&ns_udp, ctx, NULL, 0);
	if (!w)
		return 1;
	gen = window_gen;
	bpf_spin_lock(&w->lock);
	n = w->n;
	w->n = 0;
	stale = w->gen != gen;
	bpf_spin_unlock(&w->lock);
	if (n)
		count_lost_n(stale ? NS_LOST_WINDOW_EDGE_UDP : NS_LOST_SOCKET_CLOSED, n);
	return 1;
}

#define MSG_PEEK 2

/*
 * A datagram read from a UDP socket (6.3+: sock_recv_length, at the end of the call, one per
 * datagram): each waiting sample has one fewer ahead of it; the socket stage of the one whose
 * turn it was ends. So does that of a sample with as many ahead of it as the socket still
 * holds: its count slipped (another reader's datagram read before the walk saw it go, or
 * one counted twice across the reader's splice of the queues) and it has been read; the
 * queue empties at the end of every burst, which ends them all.
 */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(ns_recv_length, struct sock *sk, int ret, int flags)
{
	__u32 netns[NETSTACK_SEND_SLOTS], ifindex[NETSTACK_SEND_SLOTS];
	__u64 ts[NETSTACK_SEND_SLOTS], now, cgroup;
	__u32 done = 0, kept = 0, i, remaining, gen, stale;
	struct netstack_udp_wait *w;
	struct udp_sock *up;

	if (ret < 0 || (flags & MSG_PEEK) || sk->sk_protocol != IPPROTO_UDP || !gate_open())
		return 0; /* every read on the host comes here: TCP leaves before any lookup */
	w = bpf_sk_storage_get(&ns_udp, sk, NULL, 0);
	if (!w)
		return 0;
	up = udp_sk_cast(sk);
	if (!up)
		return 0;
	gen = window_gen;
	bpf_spin_lock(&w->lock);
	if (w->gen != gen) { /* an earlier window's: its reads went unseen */
		stale = w->n;
		w->n = 0;
		w->gen = gen;
		bpf_spin_unlock(&w->lock);
		if (stale)
			count_lost_n(NS_LOST_WINDOW_EDGE_UDP, stale);
		return 0;
	}
	remaining = sk->sk_receive_queue.qlen + up->reader_queue.qlen;
	for (i = 0; i < NETSTACK_SEND_SLOTS; i++) {
		if (i >= w->n)
			break;
		if (w->ahead[i] > 0 && --w->ahead[i] < remaining) {
			if (kept < i) {
				w->ts[kept] = w->ts[i];
				w->ahead[kept] = w->ahead[i];
				w->netns[kept] = w->netns[i];
				w->ifindex[kept] = w->ifindex[i];
			}
			kept++;
			continue;
		}
		ts[done] = w->ts[i];
		netns[done] = w->netns[i];
		ifindex[done] = w->ifindex[i];
		done++;
	}
	w->n = kept;
	bpf_spin_unlock(&w->lock);
	if (!done)
		return 0;
	now = bpf_ktime_get_ns();
	cgroup = task_cgroup_id(bpf_get_current_task_btf());
	for (i = 0; i < NETSTACK_SEND_SLOTS; i++) {
		if (i >= done)
			break;
		if (now > ts[i] && now - ts[i] <= NETSTACK_QUEUE_MAX_AGE_NS)
			hist_add_at(netns[i], ifindex[i], NS_SOCKET, cgroup, now - ts[i]);
		else
			count_lost(NS_LOST_UNMATCHED); /* longer than the histograms reach */
	}
	return 0;
}

/*
 * The application copies len bytes out of a TCP socket's receive queue, from the socket's
 * copied_seq on: the socket stage of every sampled segment whose first byte is in them (or
 * before them) ends. UDP datagrams end at sock_recv_length instead (ns_recv_length).
 */
SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(ns_copy, struct sk_buff *skb, int len)
{
	struct sock *sk = skb->sk;
	__u32 copied, done = 0, i;
	struct netstack_recv *r;
	__u64 key = (__u64)sk, now;

	if (!sk || len <= 0 || !followed(skb))
		return 0; /* a flow not followed pays no lookup (the same hash as at tcp_probe) */
	r = bpf_map_lookup_elem(&ns_recvs, &key);
	if (!r)
		return 0;
	now = bpf_ktime_get_ns();
	copied = TCP_SK(sk, copied_seq);
	for (i = 0; i < NETSTACK_SEND_SLOTS; i++) {
		if (i >= r->n || (__s32)(r->seq[i] - (copied + len)) >= 0)
			break; /* not reached yet */
		/* far behind the reader: left by an earlier socket at this address */
		if (copied + len - r->seq[i] <= NETSTACK_RECV_REACH && now > r->ts[i] &&
		    now - r->ts[i] <= NETSTACK_QUEUE_MAX_AGE_NS)
			hist_add_w(r->netns[i], r->ifindex[i], NS_SOCKET,
				   task_cgroup_id(bpf_get_current_task_btf()), now - r->ts[i],
				   r->weight[i]);
		else
			count_lost_n(NS_LOST_UNMATCHED, r->weight[i]);
		done++;
	}
	if (!done)
		return 0;
	if (done >= r->n) {
		lru_delete(&ns_recvs, NS_MAP_RECVS, &key);
		return 0;
	}
	for (i = 0; i + done < NETSTACK_SEND_SLOTS; i++) {
		r->ts[i] = r->ts[i + done];
		r->seq[i] = r->seq[i + done];
		r->netns[i] = r->netns[i + done];
		r->ifindex[i] = r->ifindex[i + done];
		r->weight[i] = r->weight[i + done];
	}
	r->n -= done;
	return 0;
}

/* A drop (or a free the kernel reports as one): the sample ends there. */
SEC("tp_btf/kfree_skb")
int BPF_PROG(ns_kfree, struct sk_buff *skb)
{
	struct netstack_cpu *cpu;
	__u64 key = (__u64)skb;
	__u32 zero = 0;

	if (!followed(skb) || !bpf_map_lookup_elem(&ns_pkts, &key))
		return 0;
	count_lost(NS_LOST_DROPPED);
	lru_delete(&ns_pkts, NS_MAP_PKTS, &key);
	/* a datagram dropped before its socket's queue: no sk_data_ready will take it */
	cpu = bpf_map_lookup_elem(&ns_cpu, &zero);
	if (cpu && cpu->rx_skb == key)
		cpu->rx_skb = 0;
	return 0;
}
