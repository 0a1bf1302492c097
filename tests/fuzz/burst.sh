#!/usr/bin/env bash
# burst.sh TARGET CORPUS DICT REGRESS: for a libFuzzer build (-Dfuzz=true): replay the corpus and each named
# regression input, then fuzz for $STRATA_FUZZ_SECONDS (default 15) from the corpus; prints TAP.
set -u
exe=$1 corpus=$2 dict=$3 regress=$4
secs=${STRATA_FUZZ_SECONDS:-15}
name=$(basename "$exe")
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-fuzz-$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work   # what a target makes (fuzz_snapdir's store) goes with it
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; sed 's/^/# /' "$work/log" | tail -30; }
# libFuzzer's options: ASan and UBSan stop at the first report; -timeout is per input.
opts=(-timeout=10 -rss_limit_mb=2048 -dict="$dict")

if "$exe" "${opts[@]}" -runs=0 "$corpus" >"$work/log" 2>&1; then
	ok "$name: corpus $(basename "$corpus") replayed ($(ls "$corpus" | wc -l) inputs)"
else nok "$name: corpus replay"; fi
if [ -d "$regress" ]; then
	for f in "$regress"/*; do
		[ -f "$f" ] || continue
		if "$exe" "${opts[@]}" "$f" >"$work/log" 2>&1; then ok "$name: regression $(basename "$f")"
		else nok "$name: regression $(basename "$f")"; fi
	done
fi
# New inputs go to a scratch corpus; the checked-in one is read, never written.
mkdir "$work/new"
if "$exe" "${opts[@]}" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$work/" \
	"$work/new" "$corpus" >"$work/log" 2>&1; then
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
	ok "$name: fuzzed ${secs} s, ${runs:-?} inputs, no finding"
else
	art=$(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | head -1)
	keep=${STRATA_FUZZ_FINDINGS:-${TMPDIR:-/tmp}}/$name-$(basename "${art:-none}")
	[ -n "$art" ] && cp "$art" "$keep"
	nok "$name: fuzzing found ${art:+$(basename "$art"), kept as $keep (add it under $regress)}"
fi
echo "1..$n"
[ "$failed" -eq 0 ]
