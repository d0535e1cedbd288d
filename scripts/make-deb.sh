#!/bin/sh
# Builds plumb's Debian package from an already built binary, reproducibly: the same binary,
# files and SOURCE_DATE_EPOCH give the same .deb, byte for byte (docs/deploy.md).
#   scripts/make-deb.sh BINARY VERSION OUTDIR
# VERSION is the Debian version (upstream-revision); SOURCE_DATE_EPOCH must be set (the
# Makefile sets it to the last commit's time). Prints the path of the .deb it wrote.
set -eu

if [ $# -ne 3 ] || [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	echo "usage: SOURCE_DATE_EPOCH=T $0 BINARY VERSION OUTDIR" >&2
	exit 2
fi
bin=$1
version=$2
out=$(cd "$3" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
arch=$(dpkg --print-architecture)
# debian/plumb under a debian/control: where dpkg-shlibdeps expects a package's files
work=$out/deb
root=$work/debian/plumb
deb=$out/plumb_${version}_$arch.deb

# nothing of the caller's environment that changes a byte: locale (sort order, dates), time
# zone, umask (modes are set explicitly below anyway)
export LC_ALL=C TZ=UTC
umask 022
rm -rf "$work"
mkdir -p "$root/DEBIAN" "$root/usr/sbin" "$root/usr/share/man/man8" \
	"$root/usr/share/doc/plumb" "$root/lib/systemd/system" "$root/etc/default"

# the binary as dh_strip leaves it (no debug sections, .comment or .note): lintian wants it so
strip --remove-section=.comment --remove-section=.note -o "$root/usr/sbin/plumb" "$bin"
chmod 0755 "$root/usr/sbin/plumb"
gzip -9nc "$top/docs/plumb.8" >"$root/usr/share/man/man8/plumb.8.gz"
install -m 0644 "$top/deploy/plumb.service" "$root/lib/systemd/system/plumb.service"
install -m 0644 "$top/deploy/debian/default" "$root/etc/default/plumb"
install -m 0644 "$top/deploy/debian/copyright" "$root/usr/share/doc/plumb/copyright"
install -D -m 0644 "$top/deploy/debian/lintian-overrides" "$root/usr/share/lintian/overrides/plumb"

# one changelog entry per package version, dated by SOURCE_DATE_EPOCH
commit=$(git -C "$top" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
maintainer=$(sed -n 's/^Maintainer: //p' "$top/deploy/debian/control")
{
	printf 'plumb (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * plumb %s, built from commit %s.\n\n' "${version%-*}" "$commit"
	printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$root/usr/share/doc/plumb/changelog.Debian.gz"

# Depends: the packages of the shared libraries the binary links, with the versions their
# symbols need, as dpkg-shlibdeps finds them
printf 'Source: plumb\n\nPackage: plumb\nArchitecture: any\n' >"$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O debian/plumb/usr/sbin/plumb |
	sed -n 's/^shlibs:Depends=//p')
if [ -z "$depends" ]; then
	echo "make-deb: dpkg-shlibdeps found no dependency for $bin" >&2
	exit 1
fi

# Installed-Size as dpkg-gencontrol counts it: KiB per file, rounded up, and 1 per directory
size=$(find "$root" -path "$root/DEBIAN" -prune -o -type f -printf '%s\n' \
	-o -type d -printf '1024\n' | awk '{ s += int(($1 + 1023) / 1024) } END { print s }')
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
	-e "s/@DEPENDS@/$depends/" "$top/deploy/debian/control" >"$root/DEBIAN/control"
echo /etc/default/plumb >"$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort |
	xargs md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"

# every mtime the commit's; dpkg-deb sorts the members and takes the ar dates from
# SOURCE_DATE_EPOCH; one xz thread, whose output does not depend on the machine's CPU count
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
dpkg-deb --root-owner-group -Zxz --threads-max=1 --build "$root" "$deb" >/dev/null
rm -rf "$work"
echo "$deb"
