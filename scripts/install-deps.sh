#!/bin/sh
# Installs every build, run, test and benchmark dependency of plumb from Debian's registry.
# Idempotent: packages already present are not downloaded again, and apt-get update runs
# only when something is missing.
set -eu

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps.sh: must run as root (apt-get needs it); run it with sudo" >&2
	exit 1
fi

PKGS="make gcc clang llvm pkg-config libbpf-dev bpftool libelf-dev zlib1g-dev
libmicrohttpd-dev libyaml-dev libgnutls28-dev libcrypt-dev libcap-dev libseccomp-dev libncurses-dev tmux ethtool openssl libcmocka-dev libclang-rt-14-dev prometheus fio curl e2fsprogs util-linux bsdutils mount iproute2
openmpi-bin libopenmpi-dev python3 procps iperf3 sockperf nftables bpftrace nginx wrk stress-ng redis-server redis-tools
qemu-system-x86 busybox-static xz-utils zstd libjson-c-dev libcurl4-openssl-dev libmetis-dev graphviz
lintian dpkg-dev systemd strace python3-kubernetes"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
# npm (tests/integration/test_deploy.py's Kubernetes schema check): Debian's nodejs and npm,
# unless an npm is already there (a nodejs from elsewhere bundles its own, and Debian's npm
# package cannot be installed beside it)
if ! command -v npm >/dev/null 2>&1; then
	missing="$missing nodejs npm"
fi

if [ -z "$missing" ]; then
	echo "install-deps: all dependencies present"
	exit 0
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
# Debian's prometheus package starts a system-wide server on :9090; plumb's tests start their
# own on loopback, so the packaged service is not needed and would only take the port.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
	systemctl stop prometheus || true
fi
# Likewise nginx (bench/flow.py runs its own on a loopback port, from a config under /tmp): the
# package starts a server on :80 when it is installed, with or without systemd.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
	systemctl stop nginx || true
elif [ -x /etc/init.d/nginx ] && /etc/init.d/nginx status >/dev/null 2>&1; then
	/etc/init.d/nginx stop >/dev/null 2>&1 || true
fi
# And redis (bench/sched.py runs its own on a loopback port).
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
	systemctl stop redis-server || true
elif [ -x /etc/init.d/redis-server ] && /etc/init.d/redis-server status >/dev/null 2>&1; then
	/etc/init.d/redis-server stop >/dev/null 2>&1 || true
fi
echo "install-deps: done"
