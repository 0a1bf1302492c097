#!/usr/bin/env bash
# library.sh: libstrata as a packager installs it and a host program uses it: meson install, pkg-config, the docs/examples built and run on each backend (TAP).
set -u
S=${STRATA_BIN:?} B=${STRATA_BUILD:?} SRC=${STRATA_SRC:?}
G=$B/vmm/guest/simpleguest.elf
T=$(mktemp -d /tmp/strata-e2e-lib.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..42"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"

I=$T/inst
meson install -C "$B" --destdir "$I" --no-rebuild --quiet >"$T/install.log" 2>&1
pc=$(find "$I" -name strata.pc | head -1)
libdir=$(dirname "$(dirname "$pc")")
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$I
inc=$(pkg-config --cflags-only-I strata | sed 's/^-I//; s/ .*//')
check "meson install puts the library, strata.h and strata.pc in place" 0 'include/strata\.h$' -- \
	sh -c "ls '$libdir'/libstrata.so.1.0.0 '$libdir/libstrata.a' && ls '$inc/strata.h'"
# The modules' headers are internal: only strata.h (and the guest SDK's own
# include/strata-guest/) is installed.
check "no module header is installed (vmm.h, store.h, index.h, registry.h, fs.h): strata.h and the guest SDKs' alone" 0 '^none$' -- \
	sh -c "find '$I' -name '*.h' -path '*/include/*' ! -path '*/strata-guest/*' ! -path '*/strata-wasm/*' ! -name strata.h \
		>'$T/headers'; if [ -s '$T/headers' ]; then cat '$T/headers'; else echo none; fi"
check "the shared library's soname is libstrata.so.1" 0 'SONAME.*\[libstrata\.so\.1\]' -- \
	readelf -d "$libdir/libstrata.so"
check "pkg-config strata gives -I\${includedir} alone and the library (no fuse3 include dir)" 0 \
	'^-I[^ ]*/include -L[^ ]* -lstrata *$' -- pkg-config --cflags --libs strata
# The benchmarks are strata-bench's, built in the tree and not installed: no
# installed file (the strata command, the library, its header) holds them.
# The shared library's dynamic symbols are the header's functions, no more
# (an internal function exported) and no fewer (a declared call the
# library lacks). The compiler lists the declarations (gcc -aux-info), so
# this does not share a parser with libstrata_map.py, which makes the
# version script from the same header.
declared() {
	echo '#include <strata.h>' >"$T/all.c" &&
		gcc -I"$inc" -fsyntax-only -aux-info "$T/aux" "$T/all.c" &&
		grep -F "/* $inc/" "$T/aux" | sed -E 's|^/\* [^*]*\*/ ||; s/^[^(]*[ *]([A-Za-z_][A-Za-z0-9_]*) \(.*/\1/' | sort -u
}
exported() {
	nm -D --defined-only "$libdir/libstrata.so" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u
}
# libstrata.a is one relocatable object (mount/api/static_lib.py): its
# global definitions are the header's calls too.
archived() {
	nm -g --defined-only "$libdir/libstrata.a" | awk 'NF == 3 { print $3 }' | sort -u
}
symbols_differ() {  # symbols_differ LIST_A LIST_B: names in A not in B, or "none"
	declared >"$T/declared" && exported >"$T/exported" && archived >"$T/archived" || return 1
	[ -s "$T/declared" ] && [ -s "$T/$1" ] && [ -s "$T/$2" ] || { echo "no symbols listed"; return 1; }
	comm -23 "$T/$1" "$T/$2" >"$T/diff"
	if [ -s "$T/diff" ]; then
		echo "$(wc -l <"$T/diff") $1 but not $2: $(head -20 "$T/diff" | tr '\n' ' ')"
		return 1
	fi
	echo "none ($(wc -l <"$T/declared") declared, $(wc -l <"$T/exported") exported, $(wc -l <"$T/archived") archived)"
}
if command -v gcc >/dev/null; then
	check "libstrata.so exports every function strata.h declares" 0 '^none' -- symbols_differ declared exported
	check "libstrata.so exports nothing strata.h does not declare" 0 '^none' -- symbols_differ exported declared
	check "libstrata.a defines every function strata.h declares" 0 '^none' -- symbols_differ declared archived
	check "libstrata.a defines no global that strata.h does not declare" 0 '^none' -- symbols_differ archived declared
else
	for what in "libstrata.so exports every function" "libstrata.so exports nothing else" \
		"libstrata.a defines every function" "libstrata.a defines nothing else"; do
		n=$((n + 1))
		echo "ok $n - $what strata.h declares # SKIP needs gcc (-aux-info lists the declarations)"
	done
fi
check "every export is strata_-named, of the version node STRATA_1.0" 0 '^[1-9][0-9]* strata_@STRATA_1.0$' -- \
	sh -c "nm -D --defined-only '$libdir/libstrata.so' | awk '\$2 != \"A\"' >'$T/dyn' &&
		! grep -v ' strata_[a-z_0-9]*@@STRATA_1\.0\$' '$T/dyn' && echo \"\$(wc -l <'$T/dyn') strata_@STRATA_1.0\""
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
# check_cxx: as check where g++ is installed, else the case is skipped.
check_cxx() {
	if ! command -v g++ >/dev/null; then
		n=$((n + 1))
		echo "ok $n - $1 # SKIP no g++ (.ci/deps installs it)"
		return 0
	fi
	check "$@"
}
# The header alone, as C (the oldest standard it promises) and as C++.
check "strata.h compiles alone as C99 (gcc -std=c99 -Wall -Wextra -Werror -pedantic)" 0 '^ok$' -- \
	sh -c "echo '#include <strata.h>' | gcc -std=c99 -Wall -Wextra -Werror -pedantic -I'$inc' -fsyntax-only -x c - && echo ok"
check_cxx "strata.h compiles alone as C++11 (g++ -std=c++11 -Wall -Wextra -Werror -pedantic)" 0 '^ok$' -- \
	sh -c "echo '#include <strata.h>' | g++ -std=c++11 -Wall -Wextra -Werror -pedantic -I'$inc' -fsyntax-only -x c++ - && echo ok"

# A sanitizer build installs an instrumented library: link its runtime too.
cflags="-Wall -Wextra -Werror -O2"
[ "${STRATA_SANITIZE:-none}" != none ] && cflags="$cflags -fsanitize=$STRATA_SANITIZE"
build() {  # build NAME: one example against the installed library (shared)
	# shellcheck disable=SC2046,SC2086
	cc $cflags -o "$T/$1" "$SRC/docs/examples/$1.c" $(pkg-config --cflags --libs strata) -pthread &&
		echo "built $1"
}
for e in restore_loop host_function thread_pool capture_store memory_snapshot lazy_registry; do
	check "docs/examples/$e.c compiles against the installed library" 0 "^built $e\$" -- build "$e"
done
# A C++ host links the C library through extern "C".
check_cxx "docs/examples/host.cpp (a C++ host) compiles and links against the installed library" 0 '^built$' -- \
	sh -c "g++ -std=c++11 $cflags -o '$T/host_cpp' '$SRC/docs/examples/host.cpp' \$(pkg-config --cflags --libs strata) && echo built"
# The static archive, with the system libraries shared, as most packagers link
# it: pkg-config --static names what it needs.
# shellcheck disable=SC2086
check "restore_loop links against libstrata.a (pkg-config --static)" 0 '^built$' -- sh -c "cc $cflags -o '$T/restore_loop_static' \
	'$SRC/docs/examples/restore_loop.c' \$(pkg-config --cflags strata) '$libdir/libstrata.a' \
	\$(pkg-config --libs --static strata | sed 's/-lstrata//') && echo built"

# Running them needs a sandbox. A host program picks the backend with
# strata_host_set_backend; each example takes it as `--backend B` (last),
# and prints "backend: kvm|process" (strata_sandbox_backend) first. Every
# example runs on the process backend (anywhere) and on KVM where it works
# (else skipped, saying why); a snapshot taken on either runs on either.
export LD_LIBRARY_PATH=$libdir
"$S" --store "$T/store" init >/dev/null
"$S" --store "$T/store" --backend process run "$G" --call counter_next --repeat 2 --snapshot two >/dev/null 2>&1
"$S" --store "$T/store" export two "$T/snap" >/dev/null 2>&1
# on BE EXAMPLE ARGS...: the example with --backend BE; its output after the
# backend line on one line, or status 99 if it ran elsewhere.
on() {
	local be=$1 rc
	shift
	"$@" --backend "$be" >"$T/on.out"
	rc=$?
	[ "$rc" -eq 0 ] || { cat "$T/on.out"; return "$rc"; }
	[ "$(head -1 "$T/on.out")" = "backend: $be" ] || { echo "ran on '$(head -1 "$T/on.out")', not $be"; return 99; }
	tail -n +2 "$T/on.out" | tr '\n' ' '
}
# check_on BE NAME STATUS REGEX -- COMMAND...: check, named for BE; on kvm
# skipped with the reason where KVM cannot run sandboxes here.
check_on() {
	local be=$1 name="$2 ($1 backend)"
	shift 2
	if [ "$be" = kvm ] && [ -n "$KVM_WHY" ]; then
		n=$((n + 1))
		echo "ok $n - $name # SKIP $KVM_WHY"
		return 0
	fi
	check "$name" "$@"
}
# lazy_example BE: a snapshot pushed to a loopback registry, restored from
# it by a lazy pull into a fresh store, its pages fetched on first touch.
lazy_example() {
	local be=$1 port pid up='' rc
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%s}\n' \
		"$T/registry-$be" "$port" >"$T/registry.yml"
	docker-registry serve "$T/registry.yml" >"$T/registry.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && { up=1; break; }; sleep 0.1; done
	[ -n "$up" ] || { kill "$pid"; echo "the registry did not start"; return 1; }
	"$S" --store "$T/store" push --insecure two "127.0.0.1:$port/examples/counter:v1" >/dev/null &&
		on "$be" "$T/lazy_registry" "$T/lazystore-$be" "127.0.0.1:$port/examples/counter:v1" counter_next --plain-http
	rc=$?
	# What the lazy pull left in the store: its layers recorded, not fetched whole.
	"$S" --store "$T/lazystore-$be" verify 2>&1 | grep -o 'lazy' | head -1
	kill "$pid"; wait "$pid" 2>/dev/null
	return $rc
}
# A host program that makes no registry call maps no TLS, HTTP or crypto
# library: libstrata loads libcurl and libcrypto on first use (store/dl.h).
# LD_DEBUG=files names every object the runtime linker loads, dlopen()ed ones too.
no_tls_http() {
	LD_DEBUG=files "$T/restore_loop" "$T/snap" counter_next 2 --backend "$1" >/dev/null 2>"$T/ld.log" ||
		{ echo "restore_loop failed"; return 1; }
	grep -q 'file=[^ ]*libstrata\.so' "$T/ld.log" || { echo "libstrata.so not loaded"; return 1; }
	loaded=$(grep -oE 'file=[^ ]*(curl|ssl|gnutls|crypto|nghttp|ssh2|krb5|ldap|rtmp)[^ ]*' "$T/ld.log" | sort -u | tr '\n' ' ')
	echo "${loaded:-none} ($(grep -c 'file=.*\[0\];  generating link map' "$T/ld.log") objects)"
}
for be in process kvm; do
	check_on $be "restore_loop: every call after a restore sees the snapshot (counter 3, 3, 3)" 0 \
		'^call 1: 3 call 2: 3 call 3: 3 $' -- on $be "$T/restore_loop" "$T/snap" counter_next 3
	check_on $be "host_function: the guest's add calls the host back once" 0 \
		'^add\(1, 41\) = 42, host_add called 1 time\(s\) $' -- on $be "$T/host_function" "$G" 1 41
	check_on $be "thread_pool: 4 threads over 2 sandboxes, every call from the snapshot" 0 \
		'^100 calls on 2 sandboxes: every result 3, 0 differed, 0 failed $' -- on $be "$T/thread_pool" "$T/snap" counter_next
	check_on $be "capture_store: one capture call, then restore goes back to it (1; 2, 3, then 2)" 0 \
		'counter 1 captured as first .*after 2, 3 and a restore: 2 tag first -> [0-9a-f]{32}' -- \
		on $be "$T/capture_store" "$T/capstore-$be" "$G" first
	check_on $be "memory_snapshot: a checkpoint in memory after each step, each gone back to (1 2 3; 4 3 2)" 0 \
		'^step 1: 1 step 2: 2 step 3: 3 from step 3: 4 from step 2: 3 from step 1: 2 $' -- \
		on $be "$T/memory_snapshot" "$G" counter_next
	if command -v docker-registry >/dev/null; then
		check_on $be "lazy_registry: a lazy pull from a registry, then calls from the snapshot (3, 3)" 0 \
			'^call 1: 3 call 2: 3 ' -- lazy_example $be
	else
		n=$((n + 1))
		echo "ok $n - lazy_registry: a lazy pull from a registry, then calls ($be backend) # SKIP docker-registry is not installed"
	fi
	if command -v g++ >/dev/null; then
		check_on $be "host.cpp: the C++ host's lambda answers the guest" 0 '^libstrata 1\.0\.0: HELLO $' -- \
			on $be "$T/host_cpp" "$G" hello
	else
		check_cxx "host.cpp: the C++ host's lambda answers the guest ($be backend)"
	fi
	check_on $be "the statically linked restore_loop runs too" 0 '^call 1: 3 call 2: 3 $' -- \
		on $be "$T/restore_loop_static" "$T/snap" counter_next 2
	check_on $be "restore_loop (no registry call) loads no TLS, HTTP or crypto library" 0 '^none ' -- no_tls_http $be
done
# Without --backend a host is STRATA_BACKEND_AUTO: KVM where it works.
auto_is=kvm
[ -n "$KVM_WHY" ] && auto_is=process
check "restore_loop without --backend runs on the automatic backend's choice ($auto_is here)" 0 \
	"^backend: $auto_is\$" -- "$T/restore_loop" "$T/snap" counter_next 1
check "an example given an unknown backend says how to call it" 2 'usage: .*--backend auto\|kvm\|process' -- \
	"$T/restore_loop" "$T/snap" counter_next 1 --backend qemu
[ "$fails" -eq 0 ]
