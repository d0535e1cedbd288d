#ifndef PROBE_H
#define PROBE_H

struct state_key {
	__u32 prev_state; /* tp argument */
	__u32 state_now; /* prev->__state read in the program */
	__u8 preempt;
	__u8 in_iowait;
	__u8 pad[2];
};

struct probe_rec {
	__u64 episodes;
	__u64 out_ts;
	__u64 last_off_ns; /* switch-out -> switch-in */
	__u64 last_block_ns; /* switch-out -> waking */
	__u64 wake_to_run_ts;
	__u32 prev_state, state_now;
	__u8 in_iowait, is_current, kthread, compat, in_syscall, find_vma_tried, waker_in_syscall,
		pad;
	__u64 orig_ax, ax, di, si, dx, r10, mm;
	/* fd resolution */
	__u64 file, private_data, ino, peer_ino;
	__u32 i_mode, family;
	__u32 saddr, daddr;
	__u16 sport, dport;
	__u32 pad2;
	/* futex */
	__s64 find_vma_ret;
	__u64 vma_ino, vm_start, vm_pgoff, vm_flags;
	__s64 uread_ret;
	__u64 waitv_uaddr0;
	__u32 waitv_flags0, pad3;
	/* last preemption */
	__u64 pre_count, pre_orig_ax, pre_ax, pre_ip_user;
	/* waker */
	__u64 waker_tid, waker_orig_ax, waker_di, waker_si;
};

#endif
