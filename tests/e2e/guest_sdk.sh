#!/usr/bin/env bash
# guest_sdk.sh: the guest SDK as a packager installs it: meson install, a guest built outside the tree with pkg-config strata-guest, run on each backend, a fault named by function and line, --core opened by gdb (TAP).
set -u
S=${STRATA_BIN:?} B=${STRATA_BUILD:?} SRC=${STRATA_SRC:?}
T=$(mktemp -d /tmp/strata-e2e-sdk.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..34"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"

I=$T/inst
meson install -C "$B" --destdir "$I" --no-rebuild --quiet >"$T/install.log" 2>&1
pc=$(find "$I" -name strata-guest.pc | head -1)
# The .pc names everything from ${prefix}: point it into the DESTDIR.
prefix=$(sed -n 's/^prefix=//p' "$pc" 2>/dev/null)
export PKG_CONFIG_PATH=${pc%/*}
pc_guest() { pkg-config --define-variable=prefix="$I$prefix" "$@" strata-guest; }
check "meson install puts strata-guest.pc, libstrata-guest.a, guest.ld and include/strata-guest/ in place" 0 \
	'include/strata-guest/vmm/abi.h' -- sh -c "test -n '$pc' && ls '${pc%/*/*}/libstrata-guest.a' \
	'${pc%/*/*}/strata/guest.ld' && find '$I' -path '*/include/strata-guest/*' -name '*.h'"
# The guest headers are strata_guest.h, its C library subset and the ABI it
# includes; nothing of the host's (vmm.h, vmm_int.h, proc_abi.h, store.h).
check "include/strata-guest/ holds the guest headers and abi.h, no host header" 0 '^ok$' -- sh -c "
	cd \"\$(pkg-config --define-variable=prefix='$I$prefix' --cflags-only-I strata-guest | sed 's/^-I//; s/ *\$//')\" &&
	find . -type f | sort | tr '\n' ' ' |
	grep -qx './strata_guest.h ./strata_heap.h ./vmm/abi.h ' && echo ok"
check "pkg-config strata-guest gives the headers, the freestanding flags, the link script and the archive" 0 \
	'include/strata-guest .*-ffreestanding.*-mno-red-zone.*-T,[^ ]*/strata/guest\.ld .*libstrata-guest\.a' -- \
	pc_guest --cflags --libs
# Built with the guest's flags, not the host build's: no sanitizer, stack
# protector or GOT reference, and each C object's DWARF producer (gcc records
# its flags there) names the freestanding ones.
# The C library beside it: musl's members, none of which makes a system
# call or reads fs or gs but for the stack protector's canary at %fs:0x28, the
# host's thread block (musl_subset.py refused them at build time).
check "libstrata-c.a is installed beside it and has no syscall instruction and no %fs/%gs use but the canary" 0 '^[1-9][0-9]* members, none$' -- \
	sh -c "ar t '${pc%/*/*}/libstrata-c.a' >'$T/members' && objdump -d '${pc%/*/*}/libstrata-c.a' >'$T/dis' &&
	grep -q '%fs:0x28,' '$T/dis' && ! grep -Eq '\s(syscall|sysenter)\b|%gs:' '$T/dis' &&
	! grep '%fs:' '$T/dis' | grep -vq '%fs:0x28,' && echo \"\$(wc -l <'$T/members') members, none\""
check "libstrata-guest.a needs nothing of a host build (no __asan, __ubsan, __stack_chk, GOT)" 0 '^none$' -- \
	sh -c "nm '${pc%/*/*}/libstrata-guest.a' >'$T/nm' && grep -q ' T strata_main' '$T/nm' &&
	! grep -E ' U (__asan|__ubsan|__stack_chk|_GLOBAL_OFFSET_TABLE_)' '$T/nm' && echo none"
readelf --debug-dump=info "${pc%/*/*}/libstrata-guest.a" 2>/dev/null | grep -E 'DW_AT_producer.*GNU C[0-9]' >"$T/prod"
if [ -s "$T/prod" ]; then
	check "libstrata-guest.a's C objects were compiled -ffreestanding -fno-pic -mno-red-zone (gcc's DW_AT_producer)" \
		0 '^[1-9][0-9]* objects, none without$' -- sh -c "c=\$(wc -l <'$T/prod');
		bad=\$(grep -cvE -- '-mno-red-zone.*-ffreestanding -fno-pic' '$T/prod');
		[ \"\$bad\" = 0 ] && echo \"\$c objects, none without\" || echo \"\$bad of \$c objects without\""
else
	n=$((n + 1))
	echo "ok $n - libstrata-guest.a's C objects were compiled with the guest flags # SKIP the compiler records no flags in DWARF (gcc does)"
fi

# A guest outside the tree: docs/examples/guest.c copied to a directory of
# its own, built with the one command docs/guests.md gives.
mkdir -p "$T/proj"
cp "$SRC/docs/examples/guest.c" "$T/proj/g.c"
build() {  # build OUT [CFLAGS...]: g.c against the installed SDK
	local out=$1
	shift
	# shellcheck disable=SC2046
	(cd "$T/proj" && cc "$@" -Wall -Wextra -Werror $(pc_guest --cflags --libs) -o "$out" g.c) && echo "built $out"
}
check "cc \$(pkg-config --cflags --libs strata-guest) builds a guest outside the tree" 0 '^built g.elf$' -- \
	build g.elf -g
check "the guest is a static x86-64 executable at the image base with the strata note" 0 \
	'Entry point address: +0x1[0-9a-f]{5}$' -- sh -c "readelf -h -n '$T/proj/g.elf' | grep -q 'strata' &&
	! readelf -l '$T/proj/g.elf' | grep -q INTERP && readelf -h '$T/proj/g.elf' | grep Entry"
check "a stripped copy builds too" 0 '^built g-stripped.elf$' -- build g-stripped.elf -s
# Ordinary portable C against the installed SDK: printf("%g"), qsort,
# strtod, snprintf into a result, from the C library the SDK ships.
cat >"$T/proj/c.c" <<'CEOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata_guest.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static char out[256];

STRATA_FUNCTION(sorted, "s(s)")
{
	double v[16];
	size_t n = 0, len = 0;
	const char *p = strata_arg_str(c, 0);
	char *end;

	while (n < 16 && (v[n] = strtod(p, &end), end != p)) {
		n++;
		p = end;
	}
	qsort(v, n, sizeof v[0], cmp);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(out + len, sizeof out - len, "%s%g", i ? " " : "", v[i]);
	printf("sorted %zu numbers\n", n);
	return strata_ret_str(c, out);
}
CEOF
# shellcheck disable=SC2046
check "an out-of-tree guest of printf(\"%g\"), qsort and strtod builds with pkg-config strata-guest" 0 '^built$' -- \
	sh -c "cd '$T/proj' && cc -g -Wall -Wextra -Werror $(pc_guest --cflags --libs) -o c.elf c.c && echo built"
G=$T/proj/g.elf
SG=$B/vmm/guest/simpleguest.elf
st() { "$S" --store "$T/store" "$@"; }
st init >/dev/null

# Each backend: the process backend everywhere, kvm where KVM runs sandboxes.
kvm_why=
kvm_unusable && kvm_why=$KVM_WHY
for be in process kvm; do
	SANDBOX_WHY=
	[ "$be" = kvm ] && SANDBOX_WHY=$kvm_why
	check_kvm "$be: the guest's functions are listed" 0 '^shout s\(s\)' -- st run "$G" --backend "$be" --list
	check_kvm "$be: a host call that returns a string (host_upper) comes back to the guest" 0 '^HELLO, SDK!$' -- \
		st run "$G" --backend "$be" --call shout "hello, sdk"
	check_kvm "$be: the guest's log line at a named level reaches stderr" 0 '^guest info: call 1: 10 bytes' -- \
		st run "$G" --backend "$be" --call shout "hello, sdk"
	check_kvm "$be: integers through host_add" 0 '^42$' -- st run "$G" --backend "$be" --call add 2 40
	check_kvm "$be: the out-of-tree C library guest sorts with qsort and formats with %g; its printf reaches the log" 0 \
		'^guest info: sorted 4 numbers -2\.5 0\.001 3 1e\+100$' -- sh -c "'$S' --store '$T/store' run '$T/proj/c.elf' \
		--backend '$be' --call sorted '3 1e100 -2.5 1e-3' 2>&1 | tr '\n' ' ' | sed 's/ \$//'"
	check_kvm "$be: a fault is reported with the guest function and source line" 5 \
		'faulted in crash \(g\.c:[0-9]+\)' -- st run "$G" --backend "$be" --call crash 0
	check_kvm "$be: a guest without symbols says how to get them" 5 'no symbols .*build the guest with -g' -- \
		st run "$T/proj/g-stripped.elf" --backend "$be" --call crash 0
	check_kvm "$be: --core writes an ELF core file" 5 "wrote the guest's core to $T/core.$be" -- \
		st run "$G" --backend "$be" --call crash 16 --core "$T/core.$be"
	check_kvm "$be: gdb opens the core: rip and the backtrace are in crash, called by the runtime's dispatch" 0 \
		'rip +0x[0-9a-f]+ +0x[0-9a-f]+ <crash\+[0-9]+> #0 +(0x[0-9a-f]+ in )?crash \(c=0x[0-9a-f]+\) at g\.c:[0-9]+ #1 .* in dispatch \(\)' -- sh -c "gdb -nx -batch \
		-ex 'info registers rip' -ex bt '$G' '$T/core.$be' 2>&1 | grep -E '^(#|rip)' | tr -s '\n' ' '"
	check_kvm "$be: gdb reads the faulting argument and the page fault's signal from the core" 0 \
		'SIGSEGV.*p = 0x10 ' -- sh -c "gdb -nx -batch -ex 'info frame' -ex 'print p' '$G' '$T/core.$be' 2>&1 |
		tr '\n' ' ' | sed 's/\\\$1 = (volatile int \*) /p = /'"
	check_kvm "$be: a divide error in simpleguest: core, gdb names div_zero and SIGFPE" 0 \
		'SIGFPE.*#0 +.*div_zero' -- sh -c "'$S' --store '$T/store' run '$SG' --backend '$be' --call div_zero 0 \
		--core '$T/div.$be' >/dev/null 2>&1; gdb -nx -batch -ex bt '$SG' '$T/div.$be' 2>&1 | tr '\n' ' '"
	check_kvm "$be: --core after a call that succeeded writes nothing" 0 '^absent$' -- sh -c "'$S' --store \
		'$T/store' run '$G' --backend '$be' --call add 1 2 --core '$T/ok.$be' && test ! -e '$T/ok.$be' && echo absent"
done
[ "$fails" -eq 0 ]
