#!/bin/bash
# start.sh: what a strata command costs a process around its work: no shared library but libc, and the teardown of its sandboxes left to a helper that ends after it (TAP).
set -u
S="${STRATA_BIN:?}"
G="${STRATA_BUILD:?}/vmm/guest/simpleguest.elf"
O="$(dirname "$0")/orphans.py"
T=$(mktemp -d /tmp/strata-e2e-start.XXXXXX)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
n=0
fails=0
echo "1..10"

# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"

# The objects the runtime linker maps for a command (LD_DEBUG=files), less
# libc's own and a sanitizer's runtime (in a sanitizer build also what that
# runtime needs itself: libstdc++, libm, libgcc_s).
runtime='lib(a|ub|l|t)san\.so[^ ]*'
case ${STRATA_SANITIZE:-none} in *address*|*undefined*) runtime="$runtime|libstdc\+\+\.so\.6|libm\.so\.6|libgcc_s\.so\.1" ;; esac
loaded() {
	LD_DEBUG=files "$@" 2>&1 >/dev/null | grep -oE 'file=[^ ]+ \[0\];  generating link map' | sed 's/ .*//; s/^file=//' |
		grep -vE "^(libc\.so\.6|ld-linux[^ ]*|$runtime)\$" | sort -u | tr '\n' ' '
	echo "(the rest)"
}
if [ "${STRATA_CLI_STATIC:-0}" = 1 ]; then
	check "strata needs no shared library but libc (LMDB, jansson and libfuse3 linked in)" 0 '^libc\.so\.6 $' -- \
		sh -c "readelf -d '$S' | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -vE '^(ld-linux|lib(a|ub|l|t)san)' | tr '\n' ' '"
	check "strata --version maps no library but libc" 0 '^\(the rest\)$' -- loaded "$S" --version
else
	for what in "needs no shared library but libc" "--version maps no library but libc"; do
		n=$((n + 1))
		echo "ok $n - strata $what # SKIP built with shared LMDB, jansson or libfuse3 (-Dcli_static_deps, or no archive)"
	done
fi

# An exported snapshot, as `strata bench start` runs one.
"$S" --store "$T/st" init >/dev/null 2>&1 && "$S" --store "$T/st" run "$G" --call counter_next --snapshot s >/dev/null 2>&1 &&
	"$S" --store "$T/st" export s "$T/snap" >/dev/null 2>&1 || echo "# could not make the snapshot directory"
if [ "${STRATA_CLI_STATIC:-0}" = 1 ]; then
	check_kvm "run DIR --call maps no library but libc" 0 '^\(the rest\)$' -- loaded "$S" run "$T/snap" --call counter_next
else
	n=$((n + 1))
	echo "ok $n - run DIR --call maps no library but libc # SKIP built with shared LMDB, jansson or libfuse3"
fi

# Under AddressSanitizer the command tears its host down itself (its leak check must see it).
left='left [1-9]' one='left 1'
case ${STRATA_SANITIZE:-none} in *address*) left='left 0' one='left 0' ;; esac
if [ -n "$KVM_WHY" ]; then
	n=$((n + 1))
	echo "ok $n - on KVM, run DIR --call leaves the teardown to one helper that ends after it # SKIP needs KVM: $KVM_WHY"
else
	check "on KVM, run DIR --call prints its result and leaves the teardown to one helper that ends after it" 0 \
		"^2 status 0, $one\$" -- \
		sh -c "STRATA_EXIT_WAIT=0 python3 '$O' '$S' --backend kvm run '$T/snap' --call counter_next | tr '\n' ' ' | sed 's/ \$//'"
fi
check "on the process backend the helper and the sandbox's child end after it" 0 "^2 status 0, $left\$" -- \
	sh -c "STRATA_EXIT_WAIT=0 python3 '$O' '$S' --backend process run '$T/snap' --call counter_next | tr '\n' ' ' | sed 's/ \$//'"
check "STRATA_EXIT_WAIT=1: the command tears its sandboxes down itself, nothing outlives it" 0 '^2 status 0, left 0$' -- \
	sh -c "STRATA_EXIT_WAIT=1 python3 '$O' '$S' --backend process run '$T/snap' --call counter_next | tr '\n' ' ' | sed 's/ \$//'"
check "a guest fault's status (5) and message come through the helper's exit" 0 'status 5, left' -- \
	sh -c "STRATA_EXIT_WAIT=0 python3 '$O' '$S' --backend process run '$G' --call null_write 2>&1 | grep -q 'guest page fault' && STRATA_EXIT_WAIT=0 python3 '$O' '$S' --backend process run '$G' --call null_write 2>/dev/null"
# Unset, STRATA_EXIT_WAIT leaves the teardown to a helper only where PID 1
# reaps orphans (an init): in a PID namespace whose first process is a
# shell (a container's application), the command waits, leaving nothing;
# STRATA_EXIT_WAIT=0 there still leaves it to the helper.
check "where PID 1 is no init (a container's application), the command tears its sandboxes down itself" 0 '^2 status 0, left 0$' -- \
	unshare --pid --fork --mount-proc sh -c "python3 '$O' '$S' --backend process run '$T/snap' --call counter_next | tr '\n' ' ' | sed 's/ \$//'"
check "there, STRATA_EXIT_WAIT=0 leaves the teardown to the helper" 0 "^2 status 0, $left\$" -- \
	unshare --pid --fork --mount-proc sh -c "STRATA_EXIT_WAIT=0 python3 '$O' '$S' --backend process run '$T/snap' --call counter_next | tr '\n' ' ' | sed 's/ \$//'"
check "a command that runs no sandbox starts no helper" 0 'status 0, left 0' -- python3 "$O" "$S" --store "$T/st" ls

[ "$fails" -eq 0 ]
