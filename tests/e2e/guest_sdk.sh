#!/usr/bin/env bash
# guest_sdk.sh: the guest SDK as a packager installs it: meson install, a guest built outside the tree with pkg-config strata-guest, run on each backend, a fault named by function and line, --core opened by gdb, a guest built with Debian's hardening flags and one of Debian's liblua5.4.a (TAP).
set -u
S=${STRATA_BIN:?} B=${STRATA_BUILD:?} SRC=${STRATA_SRC:?}
T=$(mktemp -d /tmp/strata-e2e-sdk.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..53"
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
# A guest that declares its heap (STRATA_GUEST_HEAP, docs/guests.md
# "Memory") gets it without --heap; --heap still wins.
cat >"$T/proj/m.c" <<'CEOF'
#include <strata_guest.h>

STRATA_GUEST_HEAP(8 << 20);

STRATA_FUNCTION(heap, "i()")
{
	return strata_ret_i64(c, (int64_t)strata_boot_info()->heap_size);
}
CEOF
# shellcheck disable=SC2046
check "a guest built with STRATA_GUEST_HEAP(8 << 20) gets an 8 MiB heap without --heap" 0 '^8388608$' -- \
	sh -c "cd '$T/proj' && cc -Wall -Wextra -Wpedantic -Werror $(pc_guest --cflags --libs) -o m.elf m.c && '$S' run m.elf --call heap"
check "and --heap 1M gives it 1 MiB" 0 '^1048576$' -- "$S" run "$T/proj/m.elf" --heap 1M --call heap
# Debian's hardening flags (dpkg-buildflags: -fstack-protector-strong,
# -D_FORTIFY_SOURCE=2, -Werror=format-security; -fcf-protection as newer
# dpkg-buildflags add it) with pkg-config's: the guest's own code checks the
# runtime's canary at %fs:0x28. Its smash writes past a 16-byte buffer; its
# overflow calls glibc's fortify entry points as glibc's headers would.
cat >"$T/proj/h.c" <<'CEOF'
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <strata_guest.h>

void *__memcpy_chk(void *d, const void *s, size_t n, size_t dn);
int __sprintf_chk(char *s, int flag, size_t sn, const char *fmt, ...);

static char big[256];

static void __attribute__((noinline)) fill(char *dst, size_t n)
{
	memcpy(dst, big, n);
}

STRATA_FUNCTION(format, "s(s)")
{
	char buf[64];

	snprintf(buf, sizeof buf, "%s %.3f", strata_arg_str(c, 0), 2.0 / 3);
	return strata_ret_str(c, buf);
}

STRATA_FUNCTION(smash, "i(i)")
{
	char buf[16];
	size_t n = (size_t)strata_arg_i64(c, 0);

	memset(big, 'A', sizeof big);
	fill(buf, n < sizeof big ? n : sizeof big);
	__asm__ volatile("" : : "r"(buf) : "memory");
	return strata_ret_i64(c, buf[0]);
}

STRATA_FUNCTION(overflow, "i(i)")
{
	char buf[16];
	volatile size_t dn = sizeof buf;

	__memcpy_chk(buf, big, (size_t)strata_arg_i64(c, 0), dn);
	__asm__ volatile("" : : "r"(buf) : "memory");
	return strata_ret_i64(c, 0);
}

STRATA_FUNCTION(sprintf_over, "i(s)")
{
	char buf[8];

	return strata_ret_i64(c, __sprintf_chk(buf, 1, sizeof buf, "%s", strata_arg_str(c, 0)));
}

STRATA_FUNCTION(now, "i()")
{
	return strata_ret_i64(c, (int64_t)time(NULL));
}
CEOF
# shellcheck disable=SC2046
check "a guest built with dpkg-buildflags' CPPFLAGS and CFLAGS and pkg-config strata-guest checks its canary at %fs:0x28" 0 \
	'^canary in smash$' -- sh -c "cd '$T/proj' && cc $(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS) \
	-fcf-protection -Wall -Werror $(pc_guest --cflags --libs) -o h.elf h.c &&
	objdump -d --disassemble=smash h.elf | grep -q '%fs:0x28' && echo 'canary in smash'"
# Debian's liblua5.4.a, built against glibc's headers with its hardening
# flags: each symbol it needs from a C library is one the SDK's archives
# define (glibc's _chk forms, __ctype_b_loc, _setjmp, the large-file names...),
# and a guest of all of it links and runs.
LUA_A=/usr/lib/x86_64-linux-gnu/liblua5.4.a
lua_why=
[ -r "$LUA_A" ] || lua_why="no $LUA_A (liblua5.4-dev; .ci/deps installs it)"
cat >"$T/proj/l.c" <<'CEOF'
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <strata_guest.h>

STRATA_FUNCTION(eval, "s(s)")
{
	lua_State *L = luaL_newstate();

	luaL_openlibs(L);
	int rc = luaL_dostring(L, strata_arg_str(c, 0));
	int64_t r = strata_ret_str(c, rc ? lua_tostring(L, -1) : luaL_tolstring(L, -1, NULL));
	lua_close(L);
	return r;
}
CEOF
if [ -z "$lua_why" ]; then
	check "every C library symbol Debian's liblua5.4.a needs is defined by libstrata-guest.a or libstrata-c.a" 0 \
		'^none missing$' -- sh -c "nm -u '$LUA_A' | awk '{print \$2}' | sort -u >'$T/lua.u' &&
		nm --defined-only '$LUA_A' | awk 'NF==3 {print \$3}' | sort -u >'$T/lua.d' &&
		nm --defined-only -g '${pc%/*/*}/libstrata-guest.a' '${pc%/*/*}/libstrata-c.a' 2>/dev/null |
		awk 'NF==3 {print \$3}' | sort -u >'$T/sdk.d' &&
		m=\$(comm -23 '$T/lua.u' '$T/lua.d' | comm -23 - '$T/sdk.d' | grep -vE '^(_GLOBAL_OFFSET_TABLE_)?\$' | tr '\n' ' ') &&
		if [ -z \"\$m\" ]; then echo 'none missing'; else echo \"missing: \$m\"; fi"
	# shellcheck disable=SC2046
	check "a guest of the whole of liblua5.4.a links against the installed SDK" 0 '^built$' -- \
		sh -c "cd '$T/proj' && cc $(dpkg-buildflags --get CFLAGS) -I/usr/include/lua5.4 -o l.elf l.c \
		-Wl,--whole-archive '$LUA_A' -Wl,--no-whole-archive $(pc_guest --cflags --libs) && echo built"
else
	for c in "every C library symbol Debian's liblua5.4.a needs is defined by the SDK" "a guest of liblua5.4.a links"; do
		n=$((n + 1)); echo "ok $n - $c # SKIP $lua_why"
	done
fi
H=$T/proj/h.elf
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
	check_kvm "$be: the hardened guest runs (its stack protector checks pass)" 0 '^hardened 0\.667$' -- \
		st run "$H" --backend "$be" --call format hardened
	check_kvm "$be: a guest that smashes its stack ends with the stack-smashing guest error" 5 \
		'smash: guest aborted with code -5: stack smashing detected' -- st run "$H" --backend "$be" --call smash 64
	check_kvm "$be: the same call within the buffer returns" 0 '^65$' -- st run "$H" --backend "$be" --call smash 8
	check_kvm "$be: a failing __memcpy_chk is a guest error naming it and the sizes" 5 \
		'buffer overflow detected in __memcpy_chk: 20 bytes into an object of 16' -- \
		st run "$H" --backend "$be" --call overflow 20
	check_kvm "$be: __sprintf_chk past its object is a guest error naming it" 5 \
		'buffer overflow detected in __sprintf_chk: 12 bytes into an object of 8' -- \
		st run "$H" --backend "$be" --call sprintf_over "eleven char"
	check_kvm "$be: time() is the host's clock (run registers clock_gettime)" 0 '^close$' -- sh -c "t=\$('$S' \
		--store '$T/store' run '$H' --backend '$be' --call now) && d=\$(date +%s) &&
		[ \$((d - t)) -ge 0 ] && [ \$((d - t)) -le 5 ] && echo close || echo \"guest \$t, host \$d\""
	if [ -n "$lua_why" ]; then
		SANDBOX_WHY=$lua_why
	fi
	check_kvm "$be: Lua from liblua5.4.a: string.format with floats, table.sort, pcall with a table error, os.time" 0 \
		'^0\.667 1,2,3 false table true$' -- st run "$T/proj/l.elf" --backend "$be" --call eval \
		'local t = {3, 1, 2}; table.sort(t); local ok, e = pcall(error, {}); return string.format("%.3f %s %s %s %s", 2/3, table.concat(t, ","), ok, type(e), os.time() > 1700000000)'
done
[ "$fails" -eq 0 ]
