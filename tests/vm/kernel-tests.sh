#!/bin/bash
# tests/vm/kernel-tests.sh [--list]
#   Runs the integration tests on the running kernel, module by module; `make test-kernels`
#   runs it inside each test VM and directly on the host, and reads its result lines.
#
#   A test file belongs to the module its `# plumb-module: <module>` line names (or, without
#   one, the module its file name starts with: test_<module>.py, test_<module>_*.py). Before a
#   module's tests run, `plumb agent --check --modules <module>` asks whether the module can
#   run on this kernel: exit 0, its tests run; exit 1, they do not, and the module is
#   unsupported here, for the reason --check gives.
#
#   Result lines (everything else is the tests' own output):
#     == result <module> <file> <passed> <failed> <seconds> <host>
#     == unsupported <module> <reason>
#   <host>: the file's tests left to the host in an emulated guest ("HOST <name>: <reason>"
#   lines, lib.Runner.run_host: user-space code, the same on every kernel, which make test
#   runs on the host before CI's make test-kernels).
#   --list prints "<module> <file>" for each test file and exits.
# Exit status: 0 when every test that ran passed, 1 otherwise. Needs root and a built tree.
set -u
cd "$(dirname "$0")/../.." || exit 1
PLUMB=build/plumb

module_of() {
	local m
	m=$(sed -n 's/^# plumb-module: *\([a-z0-9_]*\).*/\1/p' "$1" | head -n 1)
	if [ -z "$m" ]; then
		m=$(basename "$1" .py)
		m=${m#test_}
		m=${m%%_*}
	fi
	echo "$m"
}

files=(tests/integration/test_*.py)
if [ "${1:-}" = --list ]; then
	for f in "${files[@]}"; do echo "$(module_of "$f") $f"; done
	exit 0
fi

modules=$(for f in "${files[@]}"; do module_of "$f"; done | awk '!seen[$0]++')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
echo "== kernel $(uname -r), $(nproc) CPUs, $(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo) MiB"
for m in $modules; do
	echo "== $PLUMB agent --check --modules $m"
	"$PLUMB" agent --check --modules "$m" >"$out" 2>&1
	rc=$?
	cat "$out"
	if [ $rc = 1 ]; then
		# the module's line of --check: "<module>  unavailable  <reason>"
		reason=$(awk -v m="$m" '$1 == m && $2 == "unavailable" { $1 = $2 = ""; sub(/^ +/, ""); print; exit }' "$out")
		echo "== unsupported $m ${reason:-(--check exited 1 without a reason)}"
		continue
	elif [ $rc != 0 ]; then # a usage error (unknown module) or a crash: the module's tests fail
		echo "== result $m --check 0 1 0"
		status=1
		continue
	fi
	for f in "${files[@]}"; do
		[ "$(module_of "$f")" = "$m" ] || continue
		echo "== python3 $f"
		t0=$(date +%s)
		python3 "$f" 2>&1 | tee "$out"
		rc=${PIPESTATUS[0]}
		summary=$(grep -aoE '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
		passed=$(echo "$summary" | cut -d' ' -f1)
		failed=$(echo "$summary" | cut -d' ' -f3)
		# a file that crashed or printed no summary counts as one failure, as in run-all.sh
		if [ "$rc" != 0 ] && [ "${failed:-0}" = 0 ]; then failed=$((${failed:-0} + 1)); fi
		[ "${failed:-0}" = 0 ] || status=1
		echo "== result $m $f ${passed:-0} ${failed:-0} $(($(date +%s) - t0))" \
			"$(grep -ac '^HOST ' "$out")"
	done
done
exit $status
