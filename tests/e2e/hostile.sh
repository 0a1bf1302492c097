#!/usr/bin/env bash
# hostile.sh: `strata pool SNAP -n 2 --call F` of each hostile-guest channel: after a restore in place, F answers as from the snapshot, or is refused (TAP).
set -u
S="${STRATA_BIN:?}"
G="${STRATA_BUILD:?}/vmm/guest/hostileguest.elf"
T=$(mktemp -d /tmp/strata-e2e-hostile.XXXXXX)
trap 'rm -rf "$T"' EXIT
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
# shellcheck source=kvm_lib.sh
. "$(dirname "$0")/kvm_lib.sh"
# Each channel of vmm/guest/hostileguest.c (tests/snap/test_hostile.c runs
# them in the library): its value is 1 after a restore, or it is refused.
channels="altstack_next stack_next ctl_next child_data_next fsbase_next gsbase_next memfd_alias_next
madv_remove_next stub_code_next mmap_1g_next mlock_next hwpoison_try soft_offline_try page_tables_next
forged_stop_next"
N=$(($(echo $channels | wc -w) + 4))
n=0
fails=0
echo "1..$N"
BIN=$S
newstore "$T/s"
if [ -n "$SANDBOX_WHY" ]; then
	skip_rest "hostile channels" "$SANDBOX_WHY"
	exit 0
fi
if st "$T/s" run "$G" --call memory_next --snapshot hostile >"$T/snap.out" 2>&1; then
	ok "the hostile guest is captured"
else
	nok "the hostile guest is captured" "$(head -3 "$T/snap.out")"
fi
# One channel through a pool of two: the first call's value and the one
# after a restore in place are 1, or the call is refused (a guest fault,
# the child ended by its filter, the guest's own failure), never 2.
fresh() {
	local f=$1 out
	out=$(st "$T/s" pool hostile -n 2 --call "$f" 2>&1)
	if echo "$out" | grep -q "^sandbox 1 after a restore in place: $f -> "; then
		echo "$out" | grep -q "^sandbox 1 after a restore in place: $f -> 1$" || { echo "$out"; return 1; }
		echo "$out" | grep -q "^sandbox 1: $f -> 1$" || { echo "$out"; return 1; }
		return 0
	fi
	echo "$out" | grep -Eq "pool: (restore and )?$f in sandbox [12]: .*(page fault|invalid opcode|killed by signal 31|failed)" ||
		{ echo "$out"; return 1; }
}
for f in $channels; do
	if out=$(fresh "$f"); then ok "$f: nothing survives a restore in place"; else nok "$f: nothing survives a restore in place" "$(echo "$out" | head -4 | tr '\n' ' ')"; fi
done
# fs: the thread block (0x15800 = 88064, vmm/abi.h STRATA_TLS_GPA) and the
# snapshot's canary after fs base was moved, in a pool's restore in place
# and in a snapshot captured right after a move.
canary=$(st "$T/s" run hostile --call fs_canary 2>&1)
st "$T/s" run hostile --call fs_selector_null --snapshot fsmoved >/dev/null 2>&1
out="$(st "$T/s" run fsmoved --call fs_self 2>&1) $(st "$T/s" run fsmoved --call fs_canary 2>&1)"
is "a snapshot captured after the guest loaded a null fs selector has the thread block and the canary" "$out" "88064 $canary"
for f in fsbase_far fs_selector_null fsbase_next; do st "$T/s" pool hostile -n 1 --call "$f" >/dev/null 2>&1; done
out=$(st "$T/s" pool hostile -n 2 --call fs_canary 2>&1 | sed -n 's/^sandbox 1 after a restore in place: fs_canary -> //p')
is "a pool's restore in place gives the snapshot's canary" "$out" "$canary"

# The child's lockdown needs no privilege: a host that is not root runs it
# too (its removed working directory must still be enterable).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	mkdir -p "$T/nobody" && cp "$G" "$T/nobody/g.elf" && chmod -R a+rwX "$T/nobody" && chmod a+x "$T"
	got=$(setpriv --reuid 65534 --regid 65534 --clear-groups env -i HOME="$T/nobody" STRATA_BACKEND=process "$S" run "$T/nobody/g.elf" \
		--call memory_next --repeat 2 2>&1 | tail -1)
	is "a host that is not root runs the child" "$got" 2
else
	skip "a host that is not root runs the child" "needs root and setpriv to become nobody"
fi
exit $((fails > 0))
