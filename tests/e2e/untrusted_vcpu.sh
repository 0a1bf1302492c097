#!/usr/bin/env bash
# untrusted_vcpu.sh: snapshot directories whose vCPU state is forged, through the real strata binary: every
# privileged field (segments, descriptor tables, control registers, EFER, XCR0, flags a guest cannot set,
# MXCSR) is refused naming the field, on the backend the suite runs; user-mode state is taken (TAP).
set -u
BIN=${STRATA_BIN:-$(dirname "$0")/../../build/mount/strata}
BUILD=${STRATA_BUILD:-$(dirname "$0")/../../build}
G=$BUILD/vmm/guest/simpleguest.elf
T=$(mktemp -d /tmp/strata-e2e-untrusted-vcpu.XXXXXX)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && echo "# $(echo "$2" | head -c 400 | tr '\n\033' ' ?')"; }
# shellcheck source=kvm_lib.sh
. "$(dirname "$0")/kvm_lib.sh"

# jq edit of the vCPU state : the field the refusal names
cases=(
	'.vcpu.cs.dpl = 0 | .vcpu.cs.selector = 8:cs.selector'
	'.vcpu.ss.dpl = 0:ss.dpl'
	'.vcpu.cr3 = "0x2000":cr3'
	'.vcpu.cr4 = "0x50620":cr4'
	'.vcpu.efer = "0x500":efer'
	'.vcpu.xcr0 = "0xe7":xcr0'
	'.vcpu.gdt.base = "0x400000":gdt'
	'.vcpu.tr.base = "0x400000":tr.base'
	'.vcpu.rflags = "0x23046":rflags'
	'.vcpu.fxsave |= (.[0:48] + "ffff1f80" + .[56:]):MXCSR'
	'.vcpu.fs.base = "0x7fff00000000":fs.base'
)
echo "1..$(( ${#cases[@]} + 1 ))"
if [ -n "$SANDBOX_WHY" ]; then
	for c in "${cases[@]}"; do echo "ok - ${c##*:} # SKIP $SANDBOX_WHY"; done
	echo "ok - user-mode state # SKIP $SANDBOX_WHY"
	exit 0
fi
S=$T/store
st() { "$BIN" --store "$S" "$@"; }
mkdir -p "$S"
st init >/dev/null
st run "$G" --call counter_next --snapshot sg >/dev/null 2>&1
st export sg "$T/sg" >/dev/null
forge() { # jq filter, into DIR (a copy of the export)
	rm -rf "$2"; cp -r "$T/sg" "$2"; chmod -R u+w "$2"
	jq -c "$1" "$T/sg/manifest.json" > "$2/manifest.json"
}
for c in "${cases[@]}"; do
	edit=${c%:*}; field=${c##*:}
	forge "$edit" "$T/f"
	out=$("$BIN" run "$T/f" --call counter_next 2>&1); rc=$?
	if [ "$rc" -ne 0 ] && printf '%s' "$out" | grep -qF "vCPU state" && printf '%s' "$out" | grep -qF "$field"; then
		ok "run refuses a snapshot directory with a forged $field, naming it"
	else nok "run refuses a snapshot directory with a forged $field, naming it" "rc $rc: $out"; fi
done
# What a guest may leave at CPL 3: carry, direction and ID flags, a canonical gs base
# (fs base is the thread block's, the stack protector's canary: refused above).
forge '.vcpu.rflags = "0x200447" | .vcpu.gs.base = "0x7fff00000000"' "$T/f"
out=$("$BIN" run "$T/f" --call counter_next 2>&1)
if [ "$out" = 2 ]; then
	ok "user-mode state (flags a guest may set, gs base) is taken as it is"
else nok "user-mode state (flags a guest may set, gs base) is taken as it is" "$out"; fi
[ "$failed" -eq 0 ]
