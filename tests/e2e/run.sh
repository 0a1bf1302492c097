#!/bin/bash
# run.sh: end-to-end tests of `strata run` with the real simpleguest on real /dev/kvm (TAP).
set -u
S="${STRATA_BIN:?}"
G="${STRATA_BUILD:?}/vmm/guest/simpleguest.elf"
T=$(mktemp -d /tmp/strata-e2e-run.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..16"

# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"


check_kvm "list shows functions with signatures" 0 '^echo s\(s\)$' -- "$S" run "$G" --list
check_kvm "echo prints its argument" 0 '^hello world$' -- "$S" run "$G" --call echo "hello world"
check_kvm "add goes through the host function" 0 '^42$' -- "$S" run "$G" --call add 1 41
check_kvm "negative integer arguments parse" 0 '^-7$' -- "$S" run "$G" --call add_local -3 -4
printf 'abc' >"$T/in.bin"
check_kvm "bytes argument from @FILE prints hex" 0 '^616263$' -- "$S" run "$G" --call echo_bytes "@$T/in.bin"
check_kvm "state persists across --repeat" 0 '^100$' -- "$S" run "$G" --repeat 100 --call counter_next
check_kvm "bigger heap with --heap" 0 '^[0-9]+$' -- "$S" run "$G" --heap 64M --call heap_write 3000000
check_kvm "null write is a guest error (status 5)" 5 'page fault at address 0x0' -- "$S" run "$G" --call null_write
# libdw is loaded for the report only (mount/guest_debug.c): it still names the function and line
check_kvm "the fault report names the guest's function and source line" 5 'faulted in null_write \(simpleguest\.c:[0-9]+\)' -- \
	"$S" run "$G" --call null_write
check_kvm "abort message reaches the user" 5 'aborted with code 9: asked to abort' -- "$S" run "$G" --call do_abort 9
check_kvm "spin is stopped by --timeout" 5 'timed out' -- "$S" run "$G" --timeout 200ms --call spin
check "not an ELF file is refused" 1 'not an ELF file' -- "$S" run /etc/passwd --call echo x
check "missing guest file" 3 'No such file' -- "$S" run "$T/nope.elf" --call echo x
check_kvm "unknown function is a usage error" 2 "no function 'nope'" -- "$S" run "$G" --call nope
if [ -n "$KVM_WHY" ]; then
	check "without KVM, run --backend kvm names the cause" 1 "cannot start .*: ${KVM_WHY%% *}" -- \
		"$S" run --backend kvm "$G" --call echo x
else
	check "doctor --need kvm agrees that KVM runs sandboxes" 0 '^KVM runs sandboxes here$' -- "$S" doctor --need kvm
fi
check_kvm "wrong argument type is a usage error" 2 'must be an integer' -- "$S" run "$G" --call add one two
[ "$fails" -eq 0 ]
