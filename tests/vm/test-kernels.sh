#!/bin/bash
# tests/vm/test-kernels.sh [--no-host] [--parallel] [SERIES...]      (make test-kernels)
#   Runs the integration tests on several kernels and prints one table, kernel x module:
#     - on the host's own kernel, directly (not with --no-host: CI has just run them there,
#       in make test);
#     - on Debian's kernels of each SERIES (default: 6.1 6.12), fetched by
#       tests/vm/fetch-kernel.sh, each in a qemu guest booted by tests/vm/run.sh.
#   On every kernel tests/vm/kernel-tests.sh asks `plumb agent --check` which modules can
#   run there and runs their tests; a module that cannot is shown as unsupported, with the
#   reason. The table's "host" column counts the tests a guest left to the host (user-space
#   code, the same on every kernel: tests/integration/lib.py, Runner.run_host); on the host
#   they run. Full output of each kernel: build/test-kernels/<kernel release>.log (and the
#   guest's kernel console in <release>.console); the tail of each log with a failure is
#   printed after the table.
#   The tree must be built (make all build/iowork build/schedwork build/waitwork): the guests run the host's build.
#   --parallel: the guests at the same time, each on one host CPU (qemu TCG, one thread).
#   PLUMB_VM_OPTS: more options for tests/vm/run.sh, e.g. "--smp 1" or
#   "--append rcupdate.rcu_expedited=1" (see README.md, Kernels, for what they change).
# Exit status: 0 when no test failed on any kernel and every kernel ran; 1 otherwise.
set -u
cd "$(dirname "$0")/../.." || exit 1
LOGS=build/test-kernels
host=yes parallel=no
while [ $# -gt 0 ]; do
	case $1 in
	--no-host) host=no ;;
	--parallel) parallel=yes ;;
	*) break ;;
	esac
	shift
done
series=("$@")
[ ${#series[@]} -gt 0 ] || series=(6.1 6.12)

for need in build/plumb build/iowork build/schedwork build/waitwork; do
	[ -x $need ] || { echo "test-kernels: $need missing: run make first" >&2; exit 1; }
done
if ! command -v qemu-system-x86_64 >/dev/null || [ ! -x /bin/busybox ]; then
	echo "test-kernels: needs qemu and busybox-static: run scripts/install-deps.sh" >&2
	exit 1
fi
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log "$LOGS"/*.console "$LOGS"/*.console.1 "$LOGS"/*.rc "$LOGS"/*.secs

t_start=$(date +%s)
kernels=()            # release of each kernel, in the table's order
declare -A how err secs # per release: "host"/"qemu"; why it did not run to the end; its seconds

mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# One guest: its log, console, exit status ($LOGS/<release>.rc) and seconds (.secs).
guest() {
	local k=$1 kdir=$2 t0 rc attempt
	t0=$(date +%s)
	# loop and ext4 are modules in Debian's kernels and the tests mount ext4 images; veth and
	# bridge, for the tests' network namespaces. A guest that fails before any test ran (a
	# harness failure with no result line: under TCG a boot has been seen to panic in early
	# boot, once in many) is booted once more; its console is kept as <release>.console.1.
	# --timeout: the 6.1 guest took 33m in CI on a slow day, alone on the host, and 42m beside
	# the 6.12 guest (session 18's CI run); 55 min leaves make test 35 of CI's 90
	for attempt in 1 2; do
		# shellcheck disable=SC2086
		tests/vm/run.sh --modprobe loop,ext4,veth,bridge,vxlan --timeout 3300 --console "$LOGS/$k.console" \
			${PLUMB_VM_OPTS:-} "$kdir" tests/vm/kernel-tests.sh >"$LOGS/$k.log" 2>&1
		rc=$?
		if [ $attempt -eq 1 ] && [ $rc -eq 125 ] && ! grep -q '^== result' "$LOGS/$k.log"; then
			mv "$LOGS/$k.console" "$LOGS/$k.console.1"
			echo "test-kernels: $k: the guest failed before any test ran" \
				"($(tail -n 1 "$LOGS/$k.log")); booting it once more"
			continue
		fi
		break
	done
	echo $(($(date +%s) - t0)) >"$LOGS/$k.secs"
	echo $rc >"$LOGS/$k.rc"
	echo "test-kernels: $k done in $(mmss "$(cat "$LOGS/$k.secs")")"
}

# the guest kernels first (the table lists them in this order), then the host's; with
# --parallel the guests run at the same time (each is one host thread under TCG)
guests=()
for s in "${series[@]}"; do
	echo "test-kernels: fetching Debian's $s kernel"
	if ! kdir=$(tests/vm/fetch-kernel.sh "$s" 2>"$LOGS/fetch.log"); then
		k=$(basename "$s")
		kernels+=("$k")
		mv "$LOGS/fetch.log" "$LOGS/$k.log"
		how[$k]=qemu err[$k]="cannot fetch the kernel: $(tail -n 1 "$LOGS/$k.log")" secs[$k]=0
		continue
	fi
	rm -f "$LOGS/fetch.log"
	k=$(basename "$kdir")
	kernels+=("$k")
	guests+=("$k")
	how[$k]=qemu
	echo "test-kernels: $k in qemu (TCG) ..."
	if [ $parallel = yes ]; then
		guest "$k" "$kdir" &
	else
		guest "$k" "$kdir"
	fi
done
wait
for k in "${guests[@]}"; do
	secs[$k]=$(cat "$LOGS/$k.secs" 2>/dev/null || echo 0)
	rc=$(cat "$LOGS/$k.rc" 2>/dev/null || echo 125)
	case $rc in
	0 | 1) ;;
	124) err[$k]="timeout (tests/vm/run.sh)" ;;
	125) err[$k]="harness failure (tests/vm/run.sh): $(tail -n 1 "$LOGS/$k.log")" ;;
	*) err[$k]="tests/vm/kernel-tests.sh exited $rc" ;;
	esac
done

if [ $host = yes ]; then
	k=$(uname -r)
	kernels+=("$k")
	how[$k]=host
	echo "test-kernels: $k on this host ..."
	t0=$(date +%s)
	tests/vm/kernel-tests.sh >"$LOGS/$k.log" 2>&1
	rc=$?
	secs[$k]=$(($(date +%s) - t0))
	[ $rc -le 1 ] || err[$k]="tests/vm/kernel-tests.sh exited $rc"
	echo "test-kernels: $k done in $(mmss "${secs[$k]}")"
fi

# The table: one row per kernel and module. A module whose files did not all report a
# result (the guest died or timed out in the middle) is an error, counted as a failure.
modules=$(tests/vm/kernel-tests.sh --list | awk '!seen[$1]++ { print $1 }')
total_passed=0 total_failed=0 bad=()
echo
printf '%-30s %-8s %-12s %7s %7s %5s %8s  %s\n' kernel module result passed failed host time note
for k in "${kernels[@]}"; do
	log=$LOGS/$k.log
	for m in $modules; do
		nfiles=$(tests/vm/kernel-tests.sh --list | awk -v m="$m" '$1 == m' | wc -l)
		unsupported=$(sed -n "s/^== unsupported $m //p" "$log" 2>/dev/null | head -n 1)
		read -r nres p f t h < <(awk -v m="$m" '$1 == "==" && $2 == "result" && $3 == m {
			n++; p += $5; f += $6; t += $7; h += $8 }
			END { print n + 0, p + 0, f + 0, t + 0, h + 0 }' "$log" 2>/dev/null ||
			echo 0 0 0 0 0)
		note=""
		if [ -n "$unsupported" ]; then
			result=unsupported p=- f=- t=- h=- note=$unsupported
		elif [ -n "${err[$k]:-}" ] || [ "$nres" -lt "$nfiles" ]; then
			result=error f=$((f + nfiles - nres)) t=$(mmss "$t")
			note="${err[$k]:-no result from $((nfiles - nres)) of $nfiles test files}"
		else
			result=pass t=$(mmss "$t")
			[ "$f" = 0 ] || result=FAIL
		fi
		[ "$p" = - ] || total_passed=$((total_passed + p))
		[ "$f" = - ] || total_failed=$((total_failed + f))
		if [ "$result" = FAIL ] || [ "$result" = error ]; then
			case " ${bad[*]:-} " in *" $k "*) ;; *) bad+=("$k") ;; esac
		fi
		printf '%-30s %-8s %-12s %7s %7s %5s %8s  %s\n' "$k (${how[$k]})" "$m" "$result" "$p" "$f" \
			"$h" "$t" "$note"
	done
done
echo
for k in "${kernels[@]}"; do
	printf 'time %-30s %s\n' "$k (${how[$k]})" "$(mmss "${secs[$k]}")"
done
echo "time total $(mmss $(($(date +%s) - t_start)))"
for k in "${bad[@]}"; do
	echo
	echo "--- $k: the last lines of $LOGS/$k.log"
	tail -n 12 "$LOGS/$k.log" 2>/dev/null
done
# last, just above the closing line, where a log cut to its ends still shows them: each
# failure with the first lines of its message (indented below it), and each failing file's
# result line (== result MODULE FILE PASSED FAILED SECONDS HOST), bounded per kernel
for k in "${bad[@]}"; do
	echo
	echo "--- $k: failures"
	awk '/^FAIL/ { n = 0; shown++; if (shown <= 12) print substr($0, 1, 600); next }
		$1 == "==" && $2 == "result" && $6 > 0 { print; n = 9; next }
		/^[ \t]/ && n < 4 && shown <= 12 { print substr($0, 1, 300); n++; next } { n = 9 }' \
		"$LOGS/$k.log" 2>/dev/null || true
done
echo
echo "$total_passed passed, $total_failed failed"
[ ${#bad[@]} = 0 ]
