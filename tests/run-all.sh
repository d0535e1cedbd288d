#!/bin/bash
# Runs plumb's tests and prints one closing line: "N passed, N failed".
#   tests/run-all.sh              unit, integration (root), then the fuzzers
#   tests/run-all.sh unit         unit tests only
#   tests/run-all.sh integration  integration tests only (root)
#   tests/run-all.sh fuzz         each fuzzer for PLUMB_FUZZ_SECONDS (10) from its corpus
# Exit status: 0 only when every test ran and passed.
set -u
cd "$(dirname "$0")/.." || exit 1
what=${1:-all}
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

count() { # adds the passed/failed counts a test binary or script printed
	local p f
	p=$(awk '/^\[  PASSED  \] [0-9]+ test/ { s += $4; n++ } END { if (n) print s }' "$log")
	f=$(awk '/^\[  FAILED  \] [0-9]+ test/ { s += $4; n++ } END { if (n) print s }' "$log")
	if [ -z "$p$f" ]; then
		p=$(grep -aoE '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1 | cut -d' ' -f1)
		f=$(grep -aoE '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1 | cut -d' ' -f3)
	fi
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	# a binary that crashed or printed no summary counts as one failure
	if [ "$1" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then failed=$((failed + 1)); fi
}

run() {
	echo "== $*"
	local start=$SECONDS
	"$@" >"$log" 2>&1
	local rc=$?
	cat "$log"
	count $rc
	echo "-- $* took $((SECONDS - start)) s"
}

if [ "$what" = all ] || [ "$what" = unit ]; then
	for t in build/tests/test_*; do
		[ -x "$t" ] && run "$t"
	done
fi
if [ "$what" = all ] || [ "$what" = integration ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "integration tests need root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN): run with sudo"
		failed=$((failed + 1))
	else
		for t in tests/integration/test_*.py; do
			run python3 "$t"
		done
	fi
fi
if [ "$what" = all ] || [ "$what" = fuzz ]; then
	run tests/fuzz.sh "${PLUMB_FUZZ_SECONDS:-6}"
fi
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
