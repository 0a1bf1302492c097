#!/usr/bin/env bash
# wasm.sh: WebAssembly modules as guests (docs/wasm.md): a module built here from C with clang --target=wasm32-wasi and
# hand-written .wat through wat2wasm, compiled by strata wasm build, run on each backend: types, strings, bytes, imports,
# WASI, traps by name, the heap the guest declares and --heap over it, memory.grow, snapshot, restore, pool, a mount and a registry (TAP).
set -u
BIN=${STRATA_BIN:?} SRC=${STRATA_SRC:?} B=${STRATA_BUILD:?}
N=104 n=0 fails=0
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
# shellcheck source=kvm_lib.sh
. "$(dirname "$0")/kvm_lib.sh"
scratch wasm
W=$SRC/tests/e2e/wasm
S=$T/store
echo "1..$N"
newstore "$S"

if [ ! -e "$B/vmm/guest/wasm/libstrata-wasm.a" ]; then
	skip_rest "wasm guests" "the build has no libstrata-wasm.a (Debian's wabt was missing at meson setup)"
	exit 0
fi
# expect NAME STATUS REGEX -- CMD...: exit status and output (stdout and stderr) matching REGEX
expect() {
	local name=$1 want=$2 re=$3 got rc
	shift 4
	got=$("$@" 2>&1)
	rc=$?
	if [ "$rc" = "$want" ] && grep -Eq -- "$re" <<<"$got"; then ok "$name"; else nok "$name" "status $rc, output: $(head -c 600 <<<"$got" | tr '\n' '|')"; fi
}

expect "clang --target=wasm32-wasi builds the test module (wasi-libc, lld)" 0 '' -- \
	clang-14 --target=wasm32-wasi -mexec-model=reactor -O2 -I"$SRC/vmm/guest/wasm" -Wl,--export=malloc \
	-Wl,--export=free -o "$T/module.wasm" "$W/module.c"
expect "wat2wasm builds the trap and import modules" 0 '' -- \
	sh -c "wat2wasm '$W/traps.wat' -o '$T/traps.wasm' && wat2wasm '$W/imports.wat' -o '$T/imports.wasm'"
expect "strata wasm build: the C module" 0 '' -- st "$S" wasm build "$T/module.wasm" -o "$T/module.elf"
expect "strata wasm build: the trap module" 0 '' -- st "$S" wasm build "$T/traps.wasm" -o "$T/traps.elf"
expect "strata wasm build --heap refuses a size that is no size or over 2G" 2 'wants a size from 1 to 2G' -- \
	st "$S" wasm build "$T/traps.wasm" -o "$T/bad.elf" --heap 3G
expect "strata wasm build refuses a module whose initial memory (2 GiB) cannot fit a sandbox's heap" 1 \
	'initial memory \(32768 pages, 2048 MiB\) does not fit a sandbox.s heap' -- \
	sh -c "printf '(module (memory (export \"memory\") 32768))' >'$T/huge.wat' && wat2wasm '$T/huge.wat' -o '$T/huge.wasm' &&
	       '$BIN' wasm build '$T/huge.wasm' -o '$T/bad.elf'"
expect "strata wasm build: the import module says what is not available" 0 \
	'WASI function path_open is not available.*|.*export f64_out is left out: f64' -- \
	sh -c "'$BIN' wasm build '$T/imports.wasm' -o '$T/imports.elf' 2>&1 | tr '\n' '|'"
expect "a signature that does not fit the wasm type is refused at build time" 1 \
	"export add: signature 's\(i\)' does not fit its wasm type" -- \
	st "$S" wasm build "$T/module.wasm" -o "$T/bad.elf" --sig 'add=s(i)'
expect "a module that is no wasm is refused" 1 'not a WebAssembly binary module' -- \
	st "$S" wasm build "$W/module.c" -o "$T/bad.elf"
expect "an import's string result needs a buffer after its arguments (refused at build time)" 1 \
	"import host_add: signature 's\\(ii\\)' does not fit its wasm type" -- \
	st "$S" wasm build "$T/imports.wasm" -o "$T/bad.elf" --sig 'import:host_add=s(ii)'
# Names are input: wasm2c writes them into C comments, and notes quote them on the terminal.
printf '(module (func (export "a*/int(x)=1;/*b") (result i32) i32.const 1))' >"$T/comment.wat"
printf '(module (func (export "ok") (result i32) i32.const 1) (func (export "bad\\0aname") (result i32) i32.const 2))' \
	>"$T/newline.wat"
expect "an export whose name would end wasm2c's C comment is refused" 1 'a name with \*/ in it is refused' -- \
	sh -c "wat2wasm '$T/comment.wat' -o '$T/comment.wasm' && '$BIN' wasm build '$T/comment.wasm' -o '$T/bad.elf'"
expect "a note quoting a name with a newline prints it escaped, on one line" 0 "^note: export 'bad\\\\nname' is left out" -- \
	sh -c "wat2wasm '$T/newline.wat' -o '$T/newline.wasm' && '$BIN' wasm build '$T/newline.wasm' -o '$T/nl.elf'"
# The module is input: cut short anywhere (but after its 8-byte header: an empty module is valid), it is refused with a message (status 1), never a crash.
truncated() {
	local size len
	size=$(stat -c %s "$T/module.wasm")
	for len in 0 4 9 11 13 40 100 1000 $((size / 2)) $((size - 1)); do
		head -c "$len" "$T/module.wasm" >"$T/cut.wasm"
		TMPDIR=$T "$BIN" wasm build "$T/cut.wasm" -o "$T/cut.elf" >/dev/null 2>"$T/cut.err"
		rc=$?
		[ "$rc" = 1 ] && [ -s "$T/cut.err" ] || { echo "length $len: status $rc: $(head -c 300 "$T/cut.err")"; return 1; }
	done
	echo refused
}
expect "a module cut short at any of ten lengths is refused with a message" 0 '^refused$' -- truncated

M=$T/module.elf
kvm_why=
kvm_unusable && kvm_why=$KVM_WHY
start=$n
for be in process kvm; do
	if [ "$be" = kvm ] && [ -n "$kvm_why" ]; then
		# as many cases as the process backend's pass had
		for _ in $(seq $((n - start))); do skip "kvm: wasm guests" "$kvm_why"; done
		break
	fi
	# No --heap: the guest declares the heap its module needs.
	r() { st "$S" run "$@" --backend "$be"; }
	expect "$be: exports are listed with their mapped signatures" 0 'greet s\(s\)' -- r "$M" --list
	expect "$be: i32 add" 0 '^42$' -- r "$M" --call add 2 40
	expect "$be: i32 wraps as wasm's i32 does" 0 '^-2147483648$' -- r "$M" --call add 2147483647 1
	expect "$be: i64 arguments and an import reaching host_add" 0 '^6000000000006$' -- \
		r "$M" --call sum3 1000000000000 5000000000000 6
	expect "$be: a string in, a NUL-terminated string out" 0 '^hello world$' -- r "$M" --call greet world
	expect "$be: printf is WASI fd_write to the host log" 0 'guest info: greeted 5 bytes' -- r "$M" --call greet world
	expect "$be: bytes in, bytes out (offset | length << 32), printed in hex" 0 '^6f6c6c6568$' -- r "$M" --call reverse hello
	expect "$be: state persists across calls of one sandbox" 0 '^3$' -- r "$M" --call next --repeat 3
	expect "$be: trap: integer divide by zero" 5 'wasm trap: integer divide by zero' -- r "$M" --call divide 1 0
	expect "$be: trap: out of bounds memory access" 5 'wasm trap: out of bounds memory access' -- \
		r "$M" --call peek 2147483647
	expect "$be: trap: call stack exhausted (the guest's stack, not a fault)" 5 'wasm trap: call stack exhausted' -- \
		r "$M" --call recurse 1000000
	expect "$be: deep recursion within the stack runs" 0 '^100$' -- r "$M" --call recurse 100
	expect "$be: trap: unreachable" 5 'wasm trap: unreachable' -- r "$T/traps.elf" --call unreachable
	expect "$be: trap: call_indirect type mismatch" 5 'wasm trap: indirect call type mismatch' -- \
		r "$T/traps.elf" --call call_slot 1
	expect "$be: call_indirect of the right type runs" 0 '^7$' -- r "$T/traps.elf" --call call_slot 0
	expect "$be: trap: integer overflow" 5 'wasm trap: integer overflow' -- \
		r "$T/traps.elf" --call overflow -2147483648 -1
	expect "$be: trap: invalid conversion to integer" 5 'wasm trap: invalid conversion to integer' -- \
		r "$T/traps.elf" --call truncate
	expect "$be: memory.grow within the maximum gives the old size" 0 '^1$' -- r "$T/traps.elf" --call grow 2
	expect "$be: memory.grow past the module's maximum is -1" 0 '^-1$' -- r "$T/traps.elf" --call grow 3
	expect "$be: memory.grow past the sandbox's heap is -1" 0 '^-1$' -- \
		st "$S" run "$T/traps.elf" --backend "$be" --heap 100K --call grow 1
	expect "$be: linear memory grows from the heap (malloc of 1 MiB)" 0 '^[0-9]+$' -- r "$M" --call grab 1024
	expect "$be: the declared heap holds 16 MiB of growth (malloc of 12 MiB)" 0 '^[0-9]+$' -- r "$M" --call grab 12288
	expect "$be: and no more: malloc of 24 MiB is NULL" 0 '^-1$' -- r "$M" --call grab 24576
	expect "$be: an explicit larger --heap wins over the declared one (malloc of 24 MiB)" 0 '^[0-9]+$' -- \
		st "$S" run "$M" --backend "$be" --heap 40M --call grab 24576
	expect "$be: an explicit smaller --heap wins too: malloc of 12 MiB is NULL" 0 '^-1$' -- \
		st "$S" run "$M" --backend "$be" --heap 4M --call grab 12288
	expect "$be: an explicit --heap too small for the module's memory says so" 1 \
		'does not fit in the guest heap: run with a larger --heap' -- st "$S" run "$M" --backend "$be" --heap 64K --call add 1 2
	expect "$be: strata wasm build --heap declares that heap instead" 0 '^-1$' -- \
		sh -c "'$BIN' wasm build '$T/module.wasm' -o '$T/small-$be.elf' --heap 4M && '$BIN' run '$T/small-$be.elf' --backend $be --call grab 12288"
	expect "$be: a snapshot keeps the heap it was taken with, not the ELF's" 0 '^-1$' -- \
		sh -c "'$BIN' --store '$S' run '$M' --backend $be --heap 4M --call next --snapshot small-$be >/dev/null &&
		       '$BIN' --store '$S' run small-$be --backend $be --call grab 12288"
	expect "$be: WASI random_get from the host" 0 '^-?[0-9]+$' -- r "$M" --call random64
	expect "$be: WASI proc_exit is a guest error" 5 'proc_exit\(3\)' -- r "$M" --call quit 3
	expect "$be: WASI clock_time_get reads the host clock strata run registers" 0 '^1[0-9]{9}$' -- r "$M" --call now
	expect "$be: an import's string result (host_upper) into the module's buffer" 0 '^HELLO$' -- r "$M" --call shout hello
	expect "$be: an import's result larger than the buffer gives its length" 0 '^needs 20 bytes$' -- \
		r "$M" --call shout abcdefghijklmnopqrst
	expect "$be: an import reaches host_add" 0 '^5$' -- r "$T/imports.elf" --call add 2 3
	expect "$be: an import of another type than the host function's" 5 \
		'import host_upper: its arguments differ from the host function.s signature' -- r "$T/imports.elf" --call add_bad 1
	expect "$be: an import with no host function" 5 'import no_such_host_function: the host registered no function' -- \
		r "$T/imports.elf" --call missing 1
	expect "$be: a WASI function that is not available fails the call" 5 'WASI function path_open is not available' -- \
		r "$T/imports.elf" --call open
	# Snapshots as for any guest: initialise, capture, restore per request.
	expect "$be: run an initialising export and snapshot" 0 '^1$' -- r "$M" --call next --snapshot "w-$be"
	expect "$be: each restore starts from the snapshot" 0 '^2$' -- \
		sh -c "'$BIN' --store '$S' run w-$be --backend $be --call next && '$BIN' --store '$S' run w-$be --backend $be --call next | sort -u"
	expect "$be: a trap, then the snapshot restored is usable" 0 '^2$' -- \
		sh -c "'$BIN' --store '$S' run w-$be --backend $be --call divide 1 0; '$BIN' --store '$S' run w-$be --backend $be --call next"
	expect "$be: a pool of 20 sandboxes from the snapshot" 0 '20' -- \
		st "$S" pool "w-$be" -n 20 --backend "$be" --call next
	expect "$be: a copy of the snapshot (strata export) restores the module" 0 '^2$' -- \
		sh -c "'$BIN' --store '$S' export w-$be '$T/copy-$be' >/dev/null && '$BIN' run '$T/copy-$be' --backend $be --call next"
done

# Through a mount, as any snapshot: the mounted path restores the module, and so does a cp -r copy of it.
mkdir -p "$T/mnt"
if st "$S" mount "$T/mnt" >"$T/mount.out" 2>&1; then
	MOUNTS+=("$T/mnt")
	expect "the mounted snapshots/w-process restores the module" 0 '^2$' -- \
		"$BIN" run "$T/mnt/snapshots/w-process" --backend process --call next
	expect "a cp -r copy out of the mount restores the module" 0 '^2$' -- \
		sh -c "cp -r '$T/mnt/snapshots/w-process' '$T/mntcopy' && '$BIN' run '$T/mntcopy' --backend process --call next"
else
	# /dev/fuse is on every machine strata's tests run on: a mount that fails is a failure.
	nok "the mounted snapshot restores the module" "strata mount failed: $(head -c 300 "$T/mount.out")"
	nok "a cp -r copy out of the mount restores the module" "no mount"
fi

# Through an OCI registry, as any snapshot: push, a pull into a new store, a lazy pull; each restores the module.
if command -v docker-registry >/dev/null && start_registry reg; then
	R=127.0.0.1:$REG_PORT
	expect "push the initialised module's snapshot to a registry" 0 '^sha256:' -- \
		st "$S" push --insecure w-process "$R/wasm/module:w"
	expect "a pull into a new store restores the module" 0 '^2$' -- \
		sh -c "'$BIN' --store '$T/pulled' pull --insecure '$R/wasm/module:w' >/dev/null &&
		       '$BIN' --store '$T/pulled' run w --backend process --call next"
	expect "a lazy pull restores the module" 0 '^2$' -- \
		sh -c "'$BIN' --store '$T/lazy' pull --lazy --insecure '$R/wasm/module:w' >/dev/null &&
		       '$BIN' --store '$T/lazy' run w --backend process --call next"
else
	skip "push to a registry" "no docker-registry (.ci/deps installs it)"
	skip "pull and restore" "no docker-registry"
	skip "lazy pull and restore" "no docker-registry"
fi

# Installed: strata wasm build finds the SDK where meson install put it.
expect "meson install to a DESTDIR puts libstrata-wasm.a, strata_wasm.h and strata-wasm.pc in place" 0 '' -- \
	sh -c "DESTDIR='$T/dest' meson install -C '$B' --no-rebuild --quiet >/dev/null && \
	       find '$T/dest' -name libstrata-wasm.a | grep -q . && find '$T/dest' -name strata_wasm.h | grep -q . && \
	       find '$T/dest' -name strata-wasm.pc | grep -q ."
pcdir=$(dirname "$(find "$T/dest" -name strata-wasm.pc | head -1)")
prefix=$(sed -n 's/^prefix=//p' "$pcdir/strata-wasm.pc")
kept=$("$BIN" wasm build "$T/module.wasm" -o "$T/kept.elf" --keep 2>&1 | sed -n 's/^strata: wasm build: the generated C is in //p')
expect "the generated C (--keep), compiled against the installed SDK (pkg-config strata-wasm), runs" 0 '^hello installed$' -- \
	sh -c "cc -O1 -w -I '$kept' -o '$T/inst.elf' '$kept/module.c' '$kept/glue.c' \
	       \$(PKG_CONFIG_PATH='$pcdir' pkg-config --define-variable=prefix='$T/dest$prefix' --cflags --libs strata-wasm) && \
	       '$BIN' --store '$S' run '$T/inst.elf' --call greet installed 2>/dev/null"
rm -rf "$kept"
exit $((fails > 0))
