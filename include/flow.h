/* SPDX-License-Identifier: GPL-2.0 */
/* Types shared by bpf/flow.bpf.c and src/modules/flow.c: fixed-width only. */
#ifndef PLUMB_FLOW_H
#define PLUMB_FLOW_H

enum flow_role {
	FLOW_ROLE_UNKNOWN =
		0, /* found by the iterator, opened before the agent: user space infers */
	FLOW_ROLE_CLIENT, /* this end connected (SYN_SENT -> ESTABLISHED) */
	FLOW_ROLE_SERVER, /* this end was accepted (SYN_RECV -> ESTABLISHED) */
};

enum flow_proto {
	FLOW_PROTO_TCP = 0,
	FLOW_PROTO_UDP,
	FLOW_PROTO_UNIX,
};

enum flow_kind {
	FLOW_CLOSE = 1, /* ring buffer: an established connection reached CLOSE; final bytes */
	FLOW_LISTEN, /* iterator: a listening socket (its port makes pre-existing peers servers) */
	FLOW_FOUND, /* iterator: a connection established before the agent started */
};

/* Reasons an event was not counted; index of the flow_lost per-CPU array. */
enum flow_lost_reason {
	FLOW_LOST_RINGBUF_FULL = 0, /* a close event found the ring buffer full: its last bytes */
	FLOW_LOST_CONNS_FULL, /* flow_conns had no room for a new connection: its bytes */
	FLOW_LOST_DGRAM_FULL, /* flow_dgram had no room for a new UDP flow: this call's bytes */
	FLOW_LOST_UNIX_FULL, /* flow_unix had no room for a new unix socket: this call's bytes */
	FLOW_LOST_MMSG_PEER, /* a sendmmsg message whose destination the sendmsg hook's slot no
			      * longer held (its thread slept or moved inside the send): given
			      * the first message's, counted per such message */
	FLOW_LOST_REASONS,
};

/* One TCP connection, value of the flow_conns hash (key: socket cookie). */
struct flow_conn {
	__u64 tx, rx; /* payload bytes sent and received since the agent attached */
	__u64 base_tx, base_rx; /* the socket's own counts when first seen: 0 for one seen from
				 * its start, the iterator's reading for one older than the agent */
	__u32 segs_out, segs_in; /* TCP segments sent and received (counters: live; calls: at
				  * close), since the agent saw the connection */
	__u32 base_segs_out, base_segs_in; /* the socket's own when first seen (older ones) */
	__u64 ino; /* socket inode, for connections older than the agent: user space finds the
		    * owner in /proc/<pid>/fd */
	__u64 cgroup_id; /* owner: the process that connected, or first sent or received */
	__u32 tgid;
	__u32 netns; /* network namespace inode number */
	__u8 role; /* enum flow_role; UDP: client when this end sent first */
	__u8 established;
	__u16 family; /* AF_INET, AF_INET6 (AF_UNIX for unix sockets) */
	__u8 proto; /* enum flow_proto */
	__u8 base_known; /* base_tx/base_rx are TCP's counts when tx/rx began: 0 for one seen
			  * from its start, the iterator's reading for an older one */
	__u8 pad[2];
	__u32 peer_tgid; /* unix: the peer process (SO_PEERCRED's pid), else 0 */
	__u16 lport, rport; /* host byte order */
	__u8 laddr[16], raddr[16]; /* IPv4 in the first 4 bytes */
	char comm[16];
	__u64 first_ns; /* when its entry was made (bpf_ktime_get_ns: CLOCK_MONOTONIC) */
};

/* A UDP flow: key of flow_dgram, one per (socket, peer). */
struct flow_dgram_key {
	__u64 cookie;
	__u8 raddr[16]; /* IPv4 in the first 4 bytes; all zero: the peer is unknown */
	__u16 rport; /* host byte order */
	__u16 family;
	__u32 pad;
};

/* A unix socket: value of flow_unix (key: socket cookie). */
struct flow_unix {
	struct flow_conn conn;
	__u32 path_len; /* bytes of path used (sockaddr_un.sun_path; abstract: starts with 0) */
	__u32 pad;
	char path[64]; /* the server's address: its own if bound, else its peer's */
};

/* A close event (ring buffer) or an iterator record. */
struct flow_event {
	__u64 cookie;
	__u32 kind; /* enum flow_kind */
	__u32 pad;
	struct flow_conn conn;
};

#endif
