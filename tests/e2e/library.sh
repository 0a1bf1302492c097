#!/usr/bin/env bash
# library.sh: libstrata as a packager installs it and a host program uses it: meson install, pkg-config, the docs/examples built and run (TAP).
set -u
S=${STRATA_BIN:?} B=${STRATA_BUILD:?} SRC=${STRATA_SRC:?}
G=$B/vmm/guest/simpleguest.elf
T=$(mktemp -d /tmp/strata-e2e-lib.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..17"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"

I=$T/inst
meson install -C "$B" --destdir "$I" --no-rebuild --quiet >"$T/install.log" 2>&1
pc=$(find "$I" -name strata.pc | head -1)
libdir=$(dirname "$(dirname "$pc")")
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$I
check "meson install puts the library, its headers and strata.pc in place" 0 'vmm/vmm.h' -- \
	sh -c "ls '$libdir'/libstrata.so.*.*.* '$libdir/libstrata.a' && find '$I' -path '*/include/strata/*' -name '*.h'"
check "the shared library has a versioned soname" 0 'SONAME.*libstrata\.so\.[0-9]+\]' -- \
	readelf -d "$libdir/libstrata.so"
check "pkg-config strata gives the include dir and the library" 0 'include/strata .*-lstrata' -- \
	pkg-config --cflags --libs strata
# The benchmarks are strata-bench's, built in the tree and not installed: no
# installed file (the strata command, the library, its headers) holds them.
# The shared library's dynamic symbols are the installed headers' functions,
# no more (an internal function exported) and no fewer (a declared call the
# library lacks). The compiler lists the declarations (gcc -aux-info), so this
# does not share a parser with libstrata_map.py, which makes the
# version script from the same headers.
inc=$(pkg-config --cflags-only-I strata | sed 's/^-I//; s/ .*//')
declared() {
	find "$inc" -name '*.h' | sed "s|^$inc/|#include <|; s|\$|>|" >"$T/all.c" &&
		gcc -D_GNU_SOURCE -I"$inc" -fsyntax-only -aux-info "$T/aux" "$T/all.c" &&
		grep -F "/* $inc/" "$T/aux" | sed -E 's|^/\* [^*]*\*/ ||; s/^[^(]*[ *]([A-Za-z_][A-Za-z0-9_]*) \(.*/\1/' | sort -u
}
exported() {
	nm -D --defined-only "$libdir/libstrata.so" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u
}
symbols_differ() {  # symbols_differ LIST_A LIST_B: names in A not in B, or "none"
	declared >"$T/declared" && exported >"$T/exported" || return 1
	[ -s "$T/declared" ] && [ -s "$T/exported" ] || { echo "no symbols listed"; return 1; }
	comm -23 "$T/$1" "$T/$2" >"$T/diff"
	if [ -s "$T/diff" ]; then
		echo "$(wc -l <"$T/diff") $1 but not $2: $(head -20 "$T/diff" | tr '\n' ' ')"
		return 1
	fi
	echo "none ($(wc -l <"$T/declared") declared, $(wc -l <"$T/exported") exported)"
}
if command -v gcc >/dev/null; then
	check "libstrata.so exports every function the installed headers declare" 0 '^none' -- \
		symbols_differ declared exported
	check "libstrata.so exports nothing the installed headers do not declare" 0 '^none' -- \
		symbols_differ exported declared
else
	for what in "every function the installed headers declare" "nothing the installed headers do not declare"; do
		n=$((n + 1))
		echo "ok $n - libstrata.so exports $what # SKIP needs gcc (-aux-info lists the declarations)"
	done
fi
# The host library's folders define no C library name (memcpy, strlen...):
# only the freestanding guest SDK and the process backend's child program
# (built apart, vmm/guest/ and vmm/proc/child/) bring their own.
libc_names_defined() {
	libc=$(cc -print-file-name=libc.so.6) && [ -f "$libc" ] || { echo "no libc.so.6 found"; return 1; }
	nm -D --defined-only "$libc" | awk '{ sub(/@.*/, "", $3); print $3 }' | sort -u >"$T/libc_names"
	[ -s "$T/libc_names" ] || { echo "libc.so.6 lists no names"; return 1; }
	for f in "$libdir/libstrata.a" "$libdir/libstrata.so"; do
		nm --defined-only "$f" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBRVWi]$/ { sub(/@.*/, "", $3); print $3 }'
	done | sort -u | comm -12 - "$T/libc_names" >"$T/libc_defined"
	[ -s "$T/libc_defined" ] && { echo "defined: $(head -20 "$T/libc_defined" | tr '\n' ' ')"; return 1; }
	echo "none ($(wc -l <"$T/libc_names") C library names checked)"
}
check "libstrata.a and libstrata.so define no C library name" 0 '^none ' -- libc_names_defined
check "nothing installed holds the benchmarks (strata-bench, bench_run, vmm_bare_*)" 0 '^none$' -- \
	sh -c "! find '$I' -name 'strata-bench*' | grep -q . && ! grep -rlE 'vmm_bare|bench_run' '$I' && echo none"
check "an installed strata bench says the benchmarks run from a build tree" 1 \
	'strata-bench is not beside .*build tree' -- "$(find "$I" -path '*/bin/strata' | head -1)" bench --list

# A sanitizer build installs an instrumented library: link its runtime too.
cflags="-Wall -Wextra -Werror -O2"
[ "${STRATA_SANITIZE:-none}" != none ] && cflags="$cflags -fsanitize=$STRATA_SANITIZE"
build() {  # build NAME: one example against the installed library (shared)
	# shellcheck disable=SC2046,SC2086
	cc $cflags -o "$T/$1" "$SRC/docs/examples/$1.c" $(pkg-config --cflags --libs strata) -pthread &&
		echo "built $1"
}
for e in restore_loop host_function thread_pool; do
	check "docs/examples/$e.c compiles against the installed library" 0 "^built $e\$" -- build "$e"
done
# The static archive, with the system libraries shared, as most packagers link it.
# shellcheck disable=SC2086
check "restore_loop links against libstrata.a" 0 '^built$' -- sh -c "cc $cflags -o '$T/restore_loop_static' \
	'$SRC/docs/examples/restore_loop.c' \$(pkg-config --cflags strata) '$libdir/libstrata.a' \
	\$(PKG_CONFIG_SYSROOT_DIR= pkg-config --libs libxxhash jansson lmdb fuse3) -pthread -lrt && echo built"

# Running them needs a sandbox: KVM, or the process backend without it.
export LD_LIBRARY_PATH=$libdir
"$S" --store "$T/store" init >/dev/null
if [ -z "$SANDBOX_WHY" ]; then
	"$S" --store "$T/store" run "$G" --call counter_next --repeat 2 --snapshot two >/dev/null 2>&1
	"$S" --store "$T/store" export two "$T/snap" >/dev/null 2>&1
fi
check_kvm "restore_loop: every call after a restore sees the snapshot (counter 3, 3, 3)" 0 \
	'call 1: 3.*call 2: 3.*call 3: 3' -- sh -c "'$T/restore_loop' '$T/snap' counter_next 3 | tr '\n' ' '"
check_kvm "host_function: the guest's add calls the host back once" 0 \
	'^add\(1, 41\) = 42, host_add called 1 time\(s\)$' -- "$T/host_function" "$G" 1 41
check_kvm "thread_pool: 4 threads over 2 sandboxes, every call from the snapshot" 0 \
	'^100 calls on 2 sandboxes: every result 3, 0 differed, 0 failed$' -- "$T/thread_pool" "$T/snap" counter_next
check_kvm "the statically linked restore_loop runs too" 0 'call 2: 3' -- \
	sh -c "'$T/restore_loop_static' '$T/snap' counter_next 2 | tr '\n' ' '"
# A host program that makes no registry call maps no TLS, HTTP or crypto
# library: libstrata loads libcurl and libcrypto on first use (store/dl.h).
# LD_DEBUG=files names every object the runtime linker loads, dlopen()ed ones too.
no_tls_http() {
	LD_DEBUG=files "$T/restore_loop" "$T/snap" counter_next 2 >/dev/null 2>"$T/ld.log" || { echo "restore_loop failed"; return 1; }
	grep -q 'file=[^ ]*libstrata\.so' "$T/ld.log" || { echo "libstrata.so not loaded"; return 1; }
	loaded=$(grep -oE 'file=[^ ]*(curl|ssl|gnutls|crypto|nghttp|ssh2|krb5|ldap|rtmp)[^ ]*' "$T/ld.log" | sort -u | tr '\n' ' ')
	echo "${loaded:-none} ($(grep -c 'file=.*\[0\];  generating link map' "$T/ld.log") objects)"
}
check_kvm "restore_loop (no registry call) loads no TLS, HTTP or crypto library" 0 '^none ' -- no_tls_http
[ "$fails" -eq 0 ]
