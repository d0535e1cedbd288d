#!/bin/bash
# tests/vm/run.sh [OPTIONS] KDIR COMMAND...
#   Boots the kernel in KDIR (a directory from tests/vm/fetch-kernel.sh) under qemu, runs
#   COMMAND as root in the guest, in the host's current directory, prints its output (stdout
#   and stderr together) and exits with its exit status.
#
#   The guest's / is the host's / (read-only 9p) under a tmpfs overlay: it runs the host's
#   binaries and sees the host's files, writes where it likes, and its writes vanish with it.
#   So build on the host; in the guest only run (reading through 9p is slow). COMMAND's words
#   are joined with spaces and run by /bin/sh, as ssh does. See tests/vm/init for the guest.
#
# Options:
#   --modprobe LIST   modules to load (busybox modprobe, comma-separated) before COMMAND
#   --mem SIZE        guest memory (default 2G); its tmpfs holds every file the guest writes
#   --smp N           virtual CPUs (default 2)
#   --tcg-thread T    single (default) or multi: how qemu runs the virtual CPUs (below)
#   --timeout SECS    power the guest off after SECS (default 1800)
#   --append ARGS     more kernel command line
#   --console FILE    keep the guest's kernel console (and tests/vm/init's log) in FILE
#   -v, --verbose     copy the guest's kernel console to stderr
# Exit status: COMMAND's, or 124 when the timeout struck, 125 on a harness failure (bad
# usage, no qemu, the guest could not boot or mount its root). A COMMAND that itself exits
# 124 or 125 cannot be told apart from these; the message on stderr can.
#
# qemu runs without KVM (this project's machines have none): TCG, about 10-20x slower than
# the host for kernel-heavy work. The kernel boots through its PVH entry from the
# uncompressed vmlinux fetch-kernel.sh made, which saves TCG ~3.5 s of decompression.
#
# The virtual CPUs take turns on one host thread (-accel tcg,thread=single) unless
# --tcg-thread multi. With one host thread per virtual CPU (multi, qemu 7.2's default), a
# Debian 6.12 guest dies of "Oops: int3" at a tracepoint's jump site in kernel_clone within
# seconds when another CPU toggles that tracepoint (a BPF link attached and detached in a
# loop while a process forks): the CPU runs the breakpoint byte of a text_poke_bp() that has
# already finished. 6.1 survived 3000 such toggles, 6.12 with thread=single 16000; CI lost
# a run to it (the sched module attaches tp_btf/sched_process_fork at every agent start).
# Real CPUs do not do this; qemu's parallel TCG does, so the guests run single-threaded.
set -euo pipefail
die() {
	echo "vm: $*" >&2
	exit 125
}
usage() {
	die "usage: $0 [--modprobe LIST] [--mem SIZE] [--smp N] [--tcg-thread single|multi]" \
		"[--timeout SECS] [--append ARGS] [--console FILE] [-v] KDIR COMMAND..."
}

modprobe="" mem=2G smp=2 tcg_thread=single timeout=1800 append="" console_file="" verbose=0
while [ $# -gt 0 ]; do
	case $1 in
	--modprobe) modprobe=${2//,/ } && shift 2 ;;
	--mem) mem=$2 && shift 2 ;;
	--smp) smp=$2 && shift 2 ;;
	--tcg-thread) tcg_thread=$2 && shift 2 ;;
	--timeout) timeout=$2 && shift 2 ;;
	--append) append=$2 && shift 2 ;;
	--console) console_file=$2 && shift 2 ;;
	-v | --verbose) verbose=1 && shift ;;
	--) shift && break ;;
	-*) usage ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || usage
case $tcg_thread in single | multi) ;; *) usage ;; esac
kdir=$(realpath "$1")
shift
here=$(dirname "$(realpath "$0")")

vmlinux=$kdir/vmlinux
[ -s "$vmlinux" ] || die "$kdir has no vmlinux: make it with tests/vm/fetch-kernel.sh"
release=$(basename "$(ls "$kdir"/boot/vmlinuz-*)")
release=${release#vmlinuz-}
moddir=$kdir/lib/modules/$release
command -v qemu-system-x86_64 >/dev/null || die "no qemu-system-x86_64 (scripts/install-deps.sh installs it)"
busybox=/bin/busybox
readelf -l "$busybox" 2>/dev/null | grep -q 'program interpreter' &&
	die "$busybox is dynamically linked; the initramfs needs busybox-static"

# The initramfs: static busybox, tests/vm/init, and the modules that reach the host's files
# (virtio PCI transport, 9p over virtio, overlayfs) with their dependencies, decompressed and
# in load order. Built once per kernel; rebuilt when this script or init changes.
initrd=$kdir/initrd.cpio.gz
if [ ! -s "$initrd" ] || [ "$0" -nt "$initrd" ] || [ "$here/init" -nt "$initrd" ]; then
	stage=$(mktemp -d)
	trap 'rm -rf "$stage"' EXIT
	mkdir -p "$stage/bin" "$stage/m"
	cp "$busybox" "$stage/bin/busybox"
	install -m 755 "$here/init" "$stage/init"
	order=""
	add_module() { # depth first: a module's dependencies load before it
		local name=$1 line dep
		case " $order " in *"/$name.ko"*) return 0 ;; esac
		if ! line=$(grep -E "(^|/)$name\.ko(\.[a-z]+)?:" "$moddir/modules.dep"); then
			grep -qE "/$name\.ko" "$moddir/modules.builtin" && return 0 # built in
			die "kernel $release has no module $name (Debian's -cloud kernels lack 9p)"
		fi
		for dep in ${line#*:}; do
			dep=${dep##*/}
			add_module "${dep%%.ko*}"
		done
		order="$order ${line%%:*}"
	}
	for m in virtio_pci 9pnet_virtio 9p overlay; do add_module $m; done
	i=10
	for path in $order; do
		out=$stage/m/$i-$(basename "${path%%.ko*}").ko
		i=$((i + 1))
		case $path in
		*.xz) xz -dc "$moddir/$path" >"$out" ;;
		*.zst) zstd -dcq "$moddir/$path" >"$out" ;;
		*.gz) gzip -dc "$moddir/$path" >"$out" ;;
		*) cp "$moddir/$path" "$out" ;;
		esac
	done
	(cd "$stage" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$initrd.tmp"
	mv "$initrd.tmp" "$initrd"
	rm -rf "$stage"
	trap - EXIT
fi

# What the guest reads from the host, through the shared root: the command (run in the
# host's cwd), the host's PATH, the kernel directory and the modules to load.
run=$(mktemp -d /tmp/plumb-vm.XXXXXX)
trap 'rm -rf "$run"' EXIT
printf 'cd %q || exit 125\n%s\n' "$PWD" "$*" >"$run/cmd"
# A python3 on PATH that is a version manager's shim (pyenv's is a bash script that runs
# pyenv for every start: 7 s a start under TCG, 9 of 10 s of each test file's set-up) is
# replaced by the interpreter it stands for, ahead of the rest: the same python, run directly.
guest_path=$PATH
py=$(command -v python3 || true)
if [ -n "$py" ] && head -c 64 "$py" | grep -q '^#!.*bash'; then
	real=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)
	[ -x "$real" ] && guest_path=$(dirname "$real"):$PATH
fi
echo "$guest_path" >"$run/path"
echo "$kdir" >"$run/kdir"
echo "$modprobe" >"$run/modprobe"

# ttyS0 (first -serial) is the command's output, to our stdout; ttyS1 the console, to a file.
# panic=-1 and -no-reboot: a guest that panics powers off instead of hanging until the timeout.
rc=0
timeout --foreground -k 10 "$timeout" qemu-system-x86_64 \
	-machine pc -accel tcg,thread="$tcg_thread" -cpu max -smp "$smp" -m "$mem" \
	-nodefaults -display none -no-reboot \
	-kernel "$vmlinux" -initrd "$initrd" \
	-append "console=ttyS1 panic=-1 oops=panic vm.run=$run $append" \
	-chardev stdio,id=out -serial chardev:out -serial "file:$run/console" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	</dev/null || rc=$?
console=$(tr -d '\r' <"$run/console")
[ $verbose = 0 ] || echo "$console" >&2
[ -z "$console_file" ] || echo "$console" >"$console_file"
if [ $rc = 124 ] || [ $rc = 137 ]; then
	echo "vm: timeout: the guest ran longer than $timeout s" >&2
	exit 124
fi
grep '^vm: ' <<<"$console" | tail -n 1 >&2 || true # the guest's own closing line: time, memory
status=$(sed -n 's/^VM_STATUS=//p' <<<"$console")
case $status in
[0-9]*) exit "$status" ;;
harness) die "$(grep '^vm: ' <<<"$console" | tail -n 2 | head -n 1)" ;;
*)
	tail -n 30 <<<"$console" >&2
	die "the guest gave no exit status (qemu exited $rc)"
	;;
esac
