#!/bin/bash
# tests/vm/fetch-kernel.sh SERIES|FILE.deb
#   Makes a Debian kernel ready for tests/vm/run.sh and prints its directory,
#   build/kernels/<release>/ (release as `uname -r` will say it in the guest):
#     boot/vmlinuz-<release>, boot/config-<release>   from the package
#     lib/modules/<release>/                            from the package, plus modules.dep
#     vmlinux                                           the uncompressed kernel, for PVH boot
#   SERIES is 6.1 (linux-image-6.1.0-<abi>-amd64) or 6.12 (linux-image-6.12.<n>+deb12-amd64):
#   the newest such package in Debian's index is downloaded with apt-get. Not the -cloud
#   flavour: it has no 9p, which the guest needs for its root file system. FILE.deb unpacks a
#   package already on disk instead (no network).
#   Idempotent: a kernel already unpacked is not fetched again. Needs root only when the apt
#   index must be refreshed.
# Exit status: 0 and the directory on stdout, or 1 with the reason on stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
KERNELS=$PWD/build/kernels
die() {
	echo "fetch-kernel: $*" >&2
	exit 1
}
[ $# -eq 1 ] || die "usage: $0 6.1|6.12|FILE.deb"

case $1 in
6.1) pattern='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
6.12) pattern='^linux-image-6\.12\.[0-9]+\+deb12-amd64$' ;;
*.deb) pattern= ;;
*) die "unknown series '$1' (6.1, 6.12, or a linux-image-*.deb)" ;;
esac

# newest package of the series in the local apt index; refresh the index once if it has none
newest() {
	apt-cache pkgnames linux-image- 2>/dev/null | grep -E "$pattern" | sort -V | tail -n 1
}
refreshed=0
refresh_index() {
	[ $refreshed = 0 ] || return 1
	refreshed=1
	echo "fetch-kernel: apt-get update" >&2
	apt-get update -qq >&2 || die "apt-get update failed"
}

mkdir -p "$KERNELS"
work=$(mktemp -d "$KERNELS/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -z "$pattern" ]; then
	deb=$(realpath "$1")
	[ -f "$deb" ] || die "$1: no such file"
	pkg=$(dpkg-deb -f "$deb" Package)
else
	pkg=$(newest)
	if [ -z "$pkg" ]; then
		refresh_index
		pkg=$(newest)
	fi
	[ -n "$pkg" ] || die "no package matching $pattern in Debian's index"
fi
release=${pkg#linux-image-}
dir=$KERNELS/$release
if [ -s "$dir/vmlinux" ]; then # unpacked by an earlier run: nothing to do
	echo "$dir"
	exit 0
fi

if [ -n "$pattern" ]; then
	# apt-get download fetches into the current directory. An index older than the archive
	# names a package the archive has already dropped (404): refresh once and retry.
	echo "fetch-kernel: downloading $pkg" >&2
	# (as root apt drops to its user _apt to download, which cannot write under build/)
	until (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$pkg" >&2); do
		refresh_index || die "apt-get download $pkg failed"
		pkg=$(newest)
		release=${pkg#linux-image-}
		dir=$KERNELS/$release
		if [ -s "$dir/vmlinux" ]; then
			echo "$dir"
			exit 0
		fi
	done
	deb=$(ls "$work"/*.deb)
fi

echo "fetch-kernel: unpacking $(basename "$deb")" >&2
dpkg-deb -x "$deb" "$work/tree"
tree=$work/tree
vmlinuz=$tree/boot/vmlinuz-$release
moddir=$tree/lib/modules/$release
if [ ! -f "$vmlinuz" ] || [ ! -d "$moddir" ]; then
	die "$(basename "$deb") has no boot/vmlinuz-$release or lib/modules/$release"
fi

# The package ships no modules.dep (its postinst runs depmod); busybox's depmod writes one,
# which the guest's busybox modprobe and tests/vm/run.sh's initramfs builder read.
busybox depmod -b "$tree" "$release" || die "depmod failed"

# Under TCG, decompressing the bzImage's payload takes the guest ~3.5 s of every boot. qemu can
# boot the uncompressed ELF kernel directly through its PVH entry point (CONFIG_PVH), so
# decompress it once here. The payload's place is in the bzImage header (boot protocol 2.08+):
# setup sectors at 0x1f1 (the protected-mode code follows them), payload offset at 0x248 and
# length at 0x24c. All compressors but gzip append the uncompressed size (4 bytes).
le32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }
setup_sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$vmlinuz" | tr -d ' ')
[ "$setup_sects" -ne 0 ] || setup_sects=4
start=$(((setup_sects + 1) * 512 + $(le32 "$vmlinuz" $((0x248)))))
length=$(le32 "$vmlinuz" $((0x24c)))
magic=$(od -An -tx1 -j "$start" -N4 "$vmlinuz" | tr -d ' ')
case $magic in
1f8b*) unpack="gzip -dc" ;;
fd377a58) unpack="xz -dc --single-stream" length=$((length - 4)) ;;
28b52ffd) unpack="zstd -dcq" length=$((length - 4)) ;;
*) die "$(basename "$vmlinuz"): payload compression with magic $magic not handled" ;;
esac
dd if="$vmlinuz" iflag=skip_bytes,count_bytes skip="$start" count="$length" bs=1M status=none |
	$unpack >"$tree/vmlinux" ||
	die "cannot decompress the payload of $(basename "$vmlinuz") ($unpack)"
# the PVH entry is the ELF note XEN_ELFNOTE_PHYS32_ENTRY (type 0x12)
readelf -n "$tree/vmlinux" | grep -q 'type: (0x00000012)\|XEN_ELFNOTE_PHYS32_ENTRY' ||
	die "$release has no PVH entry (CONFIG_PVH); tests/vm/run.sh boots only PVH kernels"
dpkg-deb -f "$deb" Package Version >"$tree/package"

rm -rf "$dir"
mv -T "$tree" "$dir"
echo "$dir"
