#!/bin/bash
# tests/fuzz.sh [SECONDS]   (make fuzz; make test runs it for 6 s through tests/run-all.sh)
#   Runs the libFuzzer targets in build/fuzz/ side by side, each for SECONDS (default 60)
#   from its corpus, fuzz/corpus/NAME (the seeds and every crash found, kept there as a
#   regression: each run replays them first). New inputs go to build/fuzz/corpus-NAME, not
#   into the repository. A crash leaves its input in build/fuzz/crash-NAME-*; copy it into
#   fuzz/corpus/NAME once fixed. Prints one line per target and "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
secs=${1:-60}
passed=0
failed=0
# one target for $secs from its corpus, its output in its own log
fuzz_one() {
	local f=$1 name start rc
	name=$(basename "$f")
	start=$(date +%s)
	mkdir -p "build/fuzz/corpus-$name"
	"$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="build/fuzz/crash-$name-" "build/fuzz/corpus-$name" \
		"fuzz/corpus/$name" >"build/fuzz/$name.log" 2>&1
	rc=$?
	echo $(($(date +%s) - start)) >"build/fuzz/$name.secs"
	return $rc
}
# the targets run side by side (each is one process, on a CPU of its own on a 2-CPU machine);
# each is judged by its own exit status once all have ended
names=() pids=()
for f in build/fuzz/*; do
	[ -f "$f" ] && [ -x "$f" ] || continue
	name=$(basename "$f")
	[ -d "fuzz/corpus/$name" ] || continue
	fuzz_one "$f" &
	names+=("$name")
	pids+=($!)
done
for i in "${!names[@]}"; do
	name=${names[$i]}
	log=build/fuzz/$name.log
	if wait "${pids[$i]}"; then
		runs=$(grep -aoE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
		echo "PASS fuzz $name: ${runs:-?} inputs in $(cat "build/fuzz/$name.secs") s, no crash"
		passed=$((passed + 1))
	else
		echo "FAIL fuzz $name: $(grep -aE 'ERROR|SUMMARY|Test unit written' "$log" | head -3 | tr '\n' ' ')"
		failed=$((failed + 1))
	fi
done
[ $((passed + failed)) -gt 0 ] || { echo "no fuzzers built: make fuzz"; failed=1; }
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
