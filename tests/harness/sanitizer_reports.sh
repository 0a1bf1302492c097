#!/usr/bin/env bash
# sanitizer_reports.sh: meson test's --wrapper (tests/run, the ASan build): any sanitizer report from any process a test starts fails that test.
# Usage: sanitizer_reports.sh COMMAND [ARGS...]
#
# Every process the test starts (the test program, Criterion's workers, the
# strata commands and the mount daemons it runs, whose stderr may be a log
# or gone) writes ASan, LSan and UBSan reports to a directory of this test's
# own (log_path). After the test, each report is copied to stderr and one
# "not ok" case per reporting process is added to the test's TAP, so the
# test fails and tests/count.py names it. A script that sets log_path
# itself (tests/e2e/fs_lib.sh) checks its own reports; the ones it misses
# still land here.
set -u
dir=$(mktemp -d /tmp/strata-sanitizer.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$dir/report"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$dir/report"
# Leaks matched by tests/lsan.supp are not reports: no table of them.
export LSAN_OPTIONS="${LSAN_OPTIONS:-}:print_suppressions=0"
"$@"
rc=$?
# A daemon unmounted at the end of the test writes its leak report as it
# exits: wait (up to 5 s) for every process whose environment names this
# directory, other than this script, to be gone.
alive() {
	local e
	for e in /proc/[0-9]*/environ; do
		[ "${e#/proc/}" = "$$/environ" ] && continue
		grep -qsF "$dir/report" "$e" && return 0
	done
	return 1
}
for _ in $(seq 25); do
	alive || break
	sleep 0.2
done
found=0
for r in "$dir"/report.*; do
	[ -e "$r" ] || continue
	# Only the table of suppressions used, nothing else: not a report.
	grep -vqE '^-+$|^Suppressions used:|^ *count +bytes +template|^ +[0-9]+ +[0-9]+ |^$' "$r" || continue
	found=$((found + 1))
	first=$(grep -m1 -E 'ERROR: |runtime error:|SUMMARY: ' "$r" | tr -d '\r' | cut -c1-200)
	echo "not ok - sanitizer report from pid ${r##*.}: ${first:-see stderr}"
	{ echo "--- sanitizer report ${r##*/} (pid ${r##*.})"; head -80 "$r"; } >&2
done
[ "$found" -eq 0 ] || exit 1
exit "$rc"
