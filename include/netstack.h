/* SPDX-License-Identifier: GPL-2.0 */
/* Types shared by bpf/netstack.bpf.c, src/modules/netstack.c and the analysis: fixed-width. */
#ifndef PLUMB_NETSTACK_H
#define PLUMB_NETSTACK_H

/*
 * Latency histograms with four buckets per octave (a quarter-octave: values within 19%).
 * Bucket 0 holds v <= 2^NETSTACK_MIN_SHIFT ns; bucket b >= 1 holds, with o = (b - 1) / 4 and
 * s = (b - 1) % 4, the v with 2^(MIN + o) * (1 + s/4) < v <= 2^(MIN + o) * (1 + (s+1)/4); the
 * last bucket everything above. Upper bounds are inclusive: Prometheus's le, no off-by-one.
 */
#define NETSTACK_MIN_SHIFT 7 /* 128 ns */
#define NETSTACK_OCTAVES   28 /* to 2^35 ns, 34 s */
#define NETSTACK_BUCKETS   (NETSTACK_OCTAVES * 4 + 1)

/* v's bucket (BPF and user space alike: shifts and compares only). */
static inline __u32 netstack_bucket(__u64 v)
{
	__u32 msb = 0;
	__u64 w;

	if (v <= (1ULL << NETSTACK_MIN_SHIFT))
		return 0;
	w = v - 1; /* upper bounds inclusive: place v - 1 in [2^msb * (1 + s/4), ...) */
	if (w >> 32) {
		w >>= 32;
		msb += 32;
	}
	if (w >> 16) {
		w >>= 16;
		msb += 16;
	}
	if (w >> 8) {
		w >>= 8;
		msb += 8;
	}
	if (w >> 4) {
		w >>= 4;
		msb += 4;
	}
	if (w >> 2) {
		w >>= 2;
		msb += 2;
	}
	if (w >> 1)
		msb += 1;
	if (msb >= NETSTACK_MIN_SHIFT + NETSTACK_OCTAVES)
		return NETSTACK_BUCKETS - 1;
	return (msb - NETSTACK_MIN_SHIFT) * 4 + (((v - 1) >> (msb - 2)) & 3) + 1;
}

/*
 * The components: consecutive events of one packet, each segment named by its two ends
 * (docs/netstack.md). A packet's segments partition its time from the first event seen to
 * the last: no time is counted twice, none is left out between two events joined.
 */
enum netstack_component {
	NS_SEND = 0, /* TX: tcp_sendmsg_locked -> net_dev_queue of the packet with its first byte */
	NS_QDISC, /* TX: net_dev_queue -> net_dev_start_xmit (qdisc, or its bypass) */
	NS_DRIVER, /* TX: net_dev_start_xmit -> net_dev_xmit (the driver's transmit) */
	NS_CROSSING, /* TX -> RX: start_xmit on a veth or lo -> netif_rx on the peer, or into the
			peer's NAPI ring (net_dev_xmit) */
	NS_SOFTIRQ, /* RX: netif_rx or the ring -> the start of the receive processing on this
		       CPU: the NET_RX softirq, or the device's threaded-NAPI kthread */
	NS_BACKLOG, /* RX: processing start (or netif_rx, in a running softirq) -> netif_receive_skb */
	NS_FORWARD, /* netif_receive_skb on a bridge port or router -> the next device's queue */
	NS_PROTOCOL, /* RX: netif_receive_skb -> tcp_probe (IP and TCP up to the socket) */
	NS_SOCKET, /* RX: tcp_probe -> skb_copy_datagram_iovec (the socket's receive queue) */
	NS_COMPONENTS,
};

/* Where a sampled packet is now: the event that opened its current segment. */
enum netstack_stage {
	NS_ST_QUEUE = 1, /* net_dev_queue */
	NS_ST_XMIT, /* net_dev_start_xmit */
	NS_ST_SENT, /* net_dev_xmit: left this host's stack */
	NS_ST_RX, /* netif_rx, napi_gro_receive_entry */
	NS_ST_RING, /* net_dev_xmit on a veth whose peer receives by NAPI: in the peer's ring */
	NS_ST_RECEIVE, /* netif_receive_skb */
	NS_ST_PROBE, /* tcp_probe */
};

/* A sampled packet in flight, by skb pointer. */
struct netstack_pkt {
	__u64 ts; /* ktime of the event that opened the current segment */
	__u64 fp; /* its headers' fingerprint: a reused skb pointer is another packet */
	__u16 stage; /* enum netstack_stage */
	/*
	 * 1: a UDP datagram at netif_receive_skb on a kernel whose sk_data_ready program takes
	 * each queued one (6.6+); dropped there untaken, it is lost (NS_LOST_UDP_UNCLAIMED)
	 */
	__u8 udp;
	__u8 pad;
	__u32 ifindex; /* the device of the last event that had one */
	__u32 netns; /* and its network namespace (inode number) */
	/* a hash of what NAT does not rewrite (headers_fp): the same packet, its addresses NAT'd */
	__u32 inv;
};

struct netstack_key {
	__u32 netns;
	__u32 ifindex;
	__u32 component; /* enum netstack_component */
	__u32 pad;
	/*
	 * The workload's cgroup where the socket's process is known (send: the sender's, at its
	 * send; socket: the reader's, at its copy), else 0
	 */
	__u64 cgroup;
};

struct netstack_hist {
	__u64 count[NETSTACK_BUCKETS];
	__u64 sum_ns;
};

/* A sampled TCP send whose first byte has not reached a device yet, by socket. */
#define NETSTACK_SEND_SLOTS 8

/*
 * A socket's sampled sends waiting for their first byte to leave, oldest first: up to
 * NETSTACK_SEND_SLOTS, so that a window-limited sender, whose sends wait long, still gives
 * several samples per wait.
 */
struct netstack_send {
	__u64 ts[NETSTACK_SEND_SLOTS]; /* ktime at tcp_sendmsg_locked */
	__u32 seq[NETSTACK_SEND_SLOTS]; /* each send's first byte: the socket's write_seq then */
	__u32 n; /* slots in use, from 0 */
	__u32 last_seq; /* the last send seen: its first byte, */
	__u64 last_msg; /* and its msghdr (the same send seen again: nothing new) */
	__u64 cgroup; /* the sender's, at its last send */
};

/*
 * A TCP socket's sampled segments in its receive queue, oldest first, by sequence: the skb
 * that arrived is not always the one copied (TCP coalesces a segment into the queue's tail
 * skb, or collapses the queue, when the reader lags), so the socket stage ends when the
 * reader's copy reaches the segment's first byte.
 *
 * A slot stands for weight[i] segments that arrived one after another, at the mean time ts[i]:
 * when a segment finds every slot taken (a reader that lags by more than NETSTACK_SEND_SLOTS
 * segments), neighbouring slots are merged in pairs and from then on one arriving segment in
 * stride opens a slot, the others join the newest one. Each segment is counted once, and its
 * wait is its slot's: the time from the slot's mean arrival to the copy that reaches the
 * slot's first byte. Dropping the segments that found the slots full instead left out the
 * middle of every long stall: a 6.1 guest's reader, descheduled for tens of milliseconds, had
 * 15 of 2000 segments unsampled and the socket stage 12% short of the true end-to-end time.
 */
struct netstack_recv {
	__u64 ts[NETSTACK_SEND_SLOTS]; /* ktime at tcp_probe (the mean of the slot's segments) */
	__u32 seq[NETSTACK_SEND_SLOTS]; /* the slot's first segment's first byte */
	__u32 netns[NETSTACK_SEND_SLOTS], ifindex[NETSTACK_SEND_SLOTS]; /* where it arrived */
	__u32 weight[NETSTACK_SEND_SLOTS]; /* segments the slot stands for */
	__u32 n; /* slots in use, from 0 */
	__u32 stride; /* one arriving segment in stride opens a slot (1 until slots are merged) */
	__u32 skip; /* segments still to join the newest slot before the next one opens */
	__u32 pad;
};

#define NETSTACK_PKTS_MAX   65536 /* sampled packets in flight */
#define NETSTACK_RECVS_MAX  16384 /* TCP sockets with sampled segments queued */
#define NETSTACK_SENDS_MAX  16384 /* sockets with a sampled send in flight */
#define NETSTACK_HISTS_MAX  4096 /* (netns, device, component) */
#define NETSTACK_MAX_AGE_NS 1000000000ULL /* a segment longer than 1 s: the packet is lost */
/*
 * A socket's queues wait on its application (a reader that sleeps, a window that stays shut):
 * their samples are kept as long as the histograms reach, 2^35 ns.
 */
#define NETSTACK_QUEUE_MAX_AGE_NS (1ULL << 35)

/*
 * The LRU maps, whose evictions are counted from their inserts and deletes (ns_churn, at
 * NS_CHURN_INSERT and NS_CHURN_DELETE of each map): evicted = inserted - deleted - present.
 */
enum netstack_lru_map {
	NS_MAP_PKTS = 0,
	NS_MAP_SENDS,
	NS_MAP_RECVS,
	NS_MAPS,
};
#define NS_CHURN_INSERT(m) ((m)*2)
#define NS_CHURN_DELETE(m) ((m)*2 + 1)

enum netstack_lost_reason {
	NS_LOST_UNMATCHED = 0, /* a sampled packet's entry overwritten or aged before its end */
	NS_LOST_DROPPED, /* a sampled packet freed by kfree_skb (a drop) */
	NS_LOST_HISTS_FULL, /* a segment whose (netns, device, component) found the map full */
	NS_LOST_SEND_SLOTS, /* a sampled TCP send that found its socket's slots taken */
	/* a UDP datagram that found its socket's slots taken, or more than 64 deep in its queue */
	NS_LOST_SOCKET_SLOTS,
	NS_LOST_SOCKET_STORAGE, /* a UDP socket's storage could not be made (out of memory) */
	NS_LOST_SOCKET_CLOSED, /* a sampled UDP datagram still queued when its socket closed */
	/*
	 * With attach windows: a sampled UDP datagram still queued when its window's programs
	 * went (the other samples on their way then are counted by user space: window_edge)
	 */
	NS_LOST_WINDOW_EDGE_UDP,
	/*
	 * A sampled UDP datagram received (netif_receive_skb) whose entry ended without a
	 * socket's sk_data_ready taking it: the claim could not place it (docs/netstack.md
	 * section 2), or a UDP tunnel (VXLAN, Geneve, WireGuard) took it and goes on with the
	 * inner packet in the same skb. Its protocol and socket stages went unmeasured.
	 */
	NS_LOST_UDP_UNCLAIMED,
	NS_LOST_REASONS,
};

#endif
