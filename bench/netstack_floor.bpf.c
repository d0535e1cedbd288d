// SPDX-License-Identifier: GPL-2.0
/*
 * The floor under the netstack module's cost: programs on the same fourteen tracepoints that
 * return at once, the kernel's price for running any program there. Loaded by bench/hold.c.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define FLOOR(name, tp)    \
	SEC("tp_btf/" #tp) \
	int BPF_PROG(name) \
	{                  \
		return 0;  \
	}

FLOOR(floor_queue, net_dev_queue)
FLOOR(floor_start_xmit, net_dev_start_xmit)
FLOOR(floor_xmit, net_dev_xmit)
FLOOR(floor_rx, netif_rx)
FLOOR(floor_gro, napi_gro_receive_entry)
FLOOR(floor_softirq, softirq_entry)
FLOOR(floor_receive, netif_receive_skb)
FLOOR(floor_probe, tcp_probe)
FLOOR(floor_copy, skb_copy_datagram_iovec)
FLOOR(floor_kfree, kfree_skb)
FLOOR(floor_sendmsg, tcp_sendmsg_locked)
FLOOR(floor_data_ready, sk_data_ready)
FLOOR(floor_recv_length, sock_recv_length)
FLOOR(floor_switch, sched_switch)
