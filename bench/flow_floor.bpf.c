// SPDX-License-Identifier: GPL-2.0
/*
 * The floor under the flow module's cost: programs on the same tracepoints (calls mode, the
 * default on 6.3+) that return at once. What the module adds above this is its own work; this
 * much is the kernel's price for running any program there. Loaded by bench/hold.c.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(floor_state, const struct sock *sk, const int oldstate, const int newstate)
{
	return 0;
}

SEC("tp_btf/tcp_destroy_sock")
int BPF_PROG(floor_destroy, struct sock *sk)
{
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(floor_send, struct sock *sk, int ret, int flags)
{
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(floor_recv, struct sock *sk, int ret, int flags)
{
	return 0;
}
