#!/usr/bin/env bash
# musl_subset.sh: vmm/guest/musl_subset.py takes musl's pure members and refuses one that would make a system call, read the thread block or define a runtime symbol twice (TAP).
set -u
PY=${1:?musl_subset.py} LIBC=${2:?musl libc.a} RT=${3:?the directory of the runtime objects}
T=$(mktemp -d /tmp/strata-musl-subset.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..5"
# shellcheck source=../e2e/check_lib.sh
. "$(dirname "$0")/../e2e/check_lib.sh"
objs=("$RT"/start.guest.o "$RT"/runtime.guest.o "$RT"/libc.guest.o "$RT"/sys.guest.o "$RT"/alloc.guest.o)
subset() {  # subset NAME SYMBOL...: musl_subset.py with those roots into $T/NAME.a
	local name=$1
	shift
	echo "$*" >"$T/$name.syms"
	python3 "$PY" "$LIBC" "$T/$name.syms" "$T/$name.a" "${objs[@]}"
}
pure() {  # the pure members, their canary checks kept, no other %fs use
	subset pure strtod vfprintf qsort && ar t "$T/pure.a" | grep -q vfprintf &&
		objdump -d "$T/pure.a" >"$T/pure.dis" && grep -q '%fs:0x28,' "$T/pure.dis" &&
		! grep '%fs:' "$T/pure.dis" | grep -vq '%fs:0x28,' && echo 'canary only'
}
check "strtod, vfprintf and qsort are taken with what they need, their stack protector canary at %fs:0x28 kept" 0 \
	'^canary only$' -- pure
check "open (a system call) is refused, named with what needed it" 1 '^  ?open\.lo \(open, needed by musl\.syms\): .*syscall' -- \
	subset sys open
check "a member reading the thread block (pthread_self: %fs:0) is refused" 1 \
	'pthread_self\.lo \(pthread_self, needed by musl\.syms\): .*%fs:0x0' -- subset tls pthread_self
check "a member defining a symbol the runtime defines (musl's malloc) is refused" 1 \
	'defines .*malloc.*which the runtime defines too' -- subset twice __libc_malloc_impl
check "a symbol neither musl nor the runtime defines is refused" 1 'no_such_symbol \(needed by musl\.syms\): defined neither' -- \
	subset none no_such_symbol
[ "$fails" -eq 0 ]
