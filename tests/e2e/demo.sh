#!/usr/bin/env bash
# demo.sh: the README's first command (tests/demo) runs every step against this build (TAP).
set -u
src=${STRATA_SRC:?} build=${STRATA_BUILD:?}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "1..4"
STRATA_DEMO_NO_BUILD=1 STRATA_BIN="$STRATA_BIN" STRATA_GUEST="$build/vmm/guest/simpleguest.elf" \
	"$src/tests/demo" >"$log" 2>&1 </dev/null
rc=$?
if [ $rc -eq 0 ] && grep -q '^demo: every step passed' "$log"; then echo "ok 1 - the demo passes every step"
else echo "not ok 1 - the demo passes every step (exit $rc)"; sed 's/^/# /' "$log" | tail -40; fi
grep -q '^4$' "$log" && echo "ok 2 - a sandbox restored from the mounted copy continues the counter at 4" \
	|| echo "not ok 2 - a sandbox restored from the mounted copy continues the counter at 4"
grep -q 'restored 100 sandboxes' "$log" && echo "ok 3 - 100 sandboxes restored from the mount" \
	|| echo "not ok 3 - 100 sandboxes restored from the mount"
if grep -qE 'PSS\): [0-9.]+ KiB per sandbox' "$log"; then echo "ok 4 - memory per sandbox reported"
else echo "not ok 4 - memory per sandbox reported"; fi
