#!/bin/sh
# run inside a run-in-vm.sh guest: the probe experiment with a loop device
uname -r
/.vmtest/modprobe loop 2>/dev/null || modprobe loop 2>/dev/null
dd if=/dev/zero of=/tmp/disk.img bs=1M count=8 2>/dev/null
L=$(losetup -f --show /tmp/disk.img) || echo no loop
./probe $L /tmp/fsync.dat
echo "--- btf typedefs"
bpftool btf dump file /sys/kernel/btf/vmlinux | grep -E "btf_trace_(sched_switch|sched_waking|sched_wakeup|sched_wakeup_new|block_rq_issue|block_rq_complete|block_bio_queue|block_io_start|block_io_done|sched_process_exit|sched_process_free|sched_process_fork)'"
echo "--- sched_switch format"; grep -E 'field' /sys/kernel/tracing/events/sched/sched_switch/format
echo "--- block_rq_issue format"; grep -E 'field' /sys/kernel/tracing/events/block/block_rq_issue/format
echo "--- block_bio_queue format"; grep -E 'field' /sys/kernel/tracing/events/block/block_bio_queue/format
ls /sys/kernel/tracing/events/block/
