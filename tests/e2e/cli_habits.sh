#!/usr/bin/env bash
# cli_habits.sh: the command line as git, skopeo and podman users type it (issue 25 sections 1 and 2): options
# after operands for every subcommand, getopt's messages and hints, `help CMD`, "did you mean", stores made
# where they are missing, and lazy snapshots shown as lazy by ls, show, verify and export (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
G="${STRATA_BUILD:-$SRC/build}/vmm/guest/simpleguest.elf"

N=65
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch habits
unset STRATA_STORE XDG_DATA_HOME
jq_of() { jq -r "$1" "$T/out"; }

# ---- messages: getopt's, with the strata prefix and a one-line hint; help; did you mean
check "umount --help prints its usage" 0 '^usage: strata umount \[-l\] MOUNTPOINT' -- "$BIN" umount --help
check "a bad option: 'strata push:' and a one-line hint, not the whole usage" 2 '' -- "$BIN" push --bogus
is "... exactly getopt's message and the hint" "$(cat "$T/err")" \
	"strata push: unrecognized option '--bogus'
see 'strata push --help'"
check "an option's missing argument is named with the command" 2 \
	"^strata pull: option requires an argument -- 't'\$" -- "$BIN" pull -t
is "... followed by the hint alone" "$(wc -l <"$T/err") $(tail -1 "$T/err")" "2 see 'strata pull --help'"
check "a bad global option: 'strata:' (not the binary's path) and the hint" 2 '' -- "$BIN" --bogus
is "... the two lines" "$(cat "$T/err")" "strata: unrecognized option '--bogus'
see 'strata --help'"
check "help CMD prints the command's help" 0 '^usage: strata .*pull' -- "$BIN" help pull
"$BIN" pull --help >"$T/pullhelp"
if cmp -s "$T/out" "$T/pullhelp"; then ok "... the same text as 'pull --help'"; else nok "... the same text as 'pull --help'"; fi
check "help of an unknown command fails as a usage error" 2 "unknown command 'nosuch'" -- "$BIN" help nosuch
check "a mistyped command: did you mean" 2 "did you mean 'strata pull'\\?" -- "$BIN" pul
check "... a transposition too" 2 "did you mean 'strata verify'\\?" -- "$BIN" verfiy
check "a word far from every command gets no guess" 2 "unknown command 'xyzzy'" -- "$BIN" xyzzy
if grep -q 'did you mean' "$T/err"; then nok "... and no 'did you mean'" "$(cat "$T/err")"; else ok "... and no 'did you mean'"; fi

# ---- stores made where they are missing
check "init makes the missing parents of the default store (~/.local/share absent)" 0 'ready' -- \
	env HOME="$T/home" "$BIN" init
if [ -d "$T/home/.local/share/strata/blobs" ]; then ok "... the store is there"; else nok "... the store is there"; fi
check "ls of a missing store names the command that makes it" 3 "create one with 'strata --store $T/a/b init'" -- \
	st "$T/a/b" ls
check "... and that command, run as printed, works" 0 'ready' -- "$BIN" --store "$T/a/b" init

# ---- options after operands, every subcommand
S=$T/s
head -c 1M /dev/urandom >"$T/img"
truncate -s 4M "$T/img"
check "init with its options after the subcommand" 0 'ready' -- st "$S" init --sync none
check "debug ingest IMAGE --tag NAME" 0 '^[0-9a-f]{32}$' -- st "$S" debug ingest "$T/img" --tag base
check "show TAG --json" 0 '"id"' -- st "$S" show base --json
check "tag TAG NAME --force, then tag NAME --delete" 0 '^base ' -- \
	bash -c '"$0" --store "$1" tag base t2 --force && "$0" --store "$1" tag t2 --delete && "$0" --store "$1" tag' \
	"$BIN" "$S"
is "... t2 was made and removed" "$(grep -c '^t2 ' "$T/out")" 0
check "export TAG DIR, export DIR TAG --oci" 0 '^index.json$' -- \
	bash -c '"$0" --store "$1" export base "$2/e1" && "$0" --store "$1" export "$2/lay" base --oci && ls "$2/lay"' \
	"$BIN" "$S" "$T"
check "import DIR --tag NAME --force into a missing store: the store is made" 0 "created store $T/new/imp" -- \
	st "$T/new/imp" import "$T/e1" --tag imp --force
check "rm TAG --help is rm's help (the option is seen after the operand)" 0 '^usage: strata .*rm' -- \
	st "$S" rm base --help
st "$S" doctor --need kvm >/dev/null 2>&1
drc=$?
if [ "$drc" -ne 2 ]; then ok "doctor --need kvm (exit $drc: an answer, not a usage error)"
else nok "doctor --need kvm (exit $drc: an answer, not a usage error)"; fi
check_kvm "run GUEST --call FN ARGS --repeat N --snapshot TAG" 0 '^3$' -- \
	st "$S" run "$G" --call counter_next --repeat 3 --snapshot c3
check_kvm "pool TAG --call FN -n N" 0 'per sandbox' -- st "$S" pool c3 --call counter_next -n 2
# ---- several --call: in order, in one sandbox, each with its own ARGS
check_kvm "run G --call counter_next --call counter_next --call add 2 3: three calls in order" 0 '' -- \
	st "$S" run "$G" --call counter_next --call counter_next --call add 2 3
if [ -n "$SANDBOX_WHY" ]; then skip "... printing 1, 2 and 5" "needs KVM: $SANDBOX_WHY"
else is "... printing 1, 2 (state kept between them) and 5 (add's own ARGS)" "$(tr '\n' ' ' <"$T/out")" "1 2 5 "; fi
check_kvm "--snapshot captures after the last of several calls" 0 '^3$' -- \
	bash -c '"$0" --store "$1" run "$2" --call counter_next --call echo hi --call counter_next --snapshot two >/dev/null &&
		"$0" --store "$1" run two --call counter_next' "$BIN" "$S" "$G"
check "pool refuses a second --call clearly (it replaced the first)" 2 "pool: one --call FN" -- \
	st "$S" pool c3 -n 2 --call counter_next --call add 1 2
# ---- numbers are decimal (a leading zero is not octal), 0x is hex
check_kvm "run --call add 010 1 prints 11" 0 '^11$' -- st "$S" run "$G" --call add 010 1
check_kvm "... 0x10 is still hex, -010 minus ten" 0 '^6$' -- st "$S" run "$G" --call add 0x10 -010
check_kvm "run --repeat 010 makes ten calls" 0 '^10 calls' -- st "$S" run "$G" --call counter_next --repeat 010
check_kvm "pool -n 010 restores ten sandboxes" 0 '^restored 10 sandboxes' -- st "$S" pool c3 -n 010 --call counter_next
check "gc --grace 010 is ten seconds" 0 'younger than 10s$' -- st "$S" gc --grace 010
mkdir -p "$T/mp"
check "mount STORE MOUNTPOINT --threads N" 0 '^base$' -- \
	bash -c '"$0" --store "$1" mount "$1" "$2" --threads 2 && ls "$2/snapshots"' "$BIN" "$S" "$T/mp"
MOUNTS+=("$T/mp")
check "umount MOUNTPOINT -l" 0 '^unmounted$' -- \
	bash -c '"$0" umount "$1" -l && ! mountpoint -q "$1" && echo unmounted' "$BIN" "$T/mp"

check "ls --tree (options after the name)" 0 '^base ' -- st "$S" ls --tree
check "verify TAG --json" 0 '"errors": *0' -- st "$S" verify base --json
check "fsck --quick --json" 0 '"errors": *0' -- st "$S" fsck --quick --json
check "help CMD" 0 '^usage: strata .*gc' -- "$BIN" help gc
check "bench GROUP --list" 0 '' -- "$BIN" bench store --list
check "calibrate --backend B (no operands; an unknown backend is named, not the option)" 2 "^strata: --backend wants auto, kvm or process, not 'qemu'" -- \
	"$BIN" calibrate --backend qemu
if [ -e "${STRATA_BUILD:-$SRC/build}/vmm/guest/wasm/libstrata-wasm.a" ] && command -v wat2wasm >/dev/null &&
	command -v wasm2c >/dev/null; then
	printf '(module (memory (export "memory") 1) (func (export "f") (param i32 i32) (result i32) local.get 1))' >"$T/f.wat"
	wat2wasm "$T/f.wat" -o "$T/f.wasm"
	check "wasm build MODULE.wasm --sig NAME=SIG -o GUEST.elf (every option after the module)" 0 '^built$' -- \
		bash -c '"$0" wasm build "$1" --sig "f=i(ii)" -o "$2" && [ -s "$2" ] && echo built' "$BIN" "$T/f.wasm" "$T/f.elf"
	check_kvm "... a guest that runs" 0 '^41$' -- "$BIN" run "$T/f.elf" --call f 1 41 --heap 1M
else
	skip "wasm build MODULE.wasm --sig NAME=SIG -o GUEST.elf" "no libstrata-wasm.a, wat2wasm or wasm2c (Debian's wabt)"
	skip "... a guest that runs" "no libstrata-wasm.a, wat2wasm or wasm2c (Debian's wabt)"
fi
# Every command strata --help lists has its case above or below (push and pull with the registry).
covered="init ls show tag rm gc verify fsck export import push pull debug run wasm pool calibrate doctor mount umount bench help"
missing=$("$BIN" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z0-9]*\) .*/\1/p' |
	while read -r c; do case " $covered " in *" $c "*) ;; *) printf '%s ' "$c" ;; esac; done)
is "every command strata --help lists is run here with its options after its operands" "$missing" ""
if ! command -v docker-registry >/dev/null; then
	skip_rest "registry" "docker-registry not installed"
	exit 0
fi
if ! start_registry reg; then
	nok "the loopback registry starts" "$(tail -3 "$T/reg.log")"
	skip_rest "registry" "the registry did not start"
	exit 1
fi
R=127.0.0.1:$REG_PORT
check "push TAG REF --insecure (the issue's 'options last')" 0 '^sha256:' -- st "$S" push base "$R/c/img:v1" --insecure
check "push TAG REF --plain-http --annotation K=V" 0 '^sha256:' -- \
	st "$S" push base "$R/c/img:v2" --plain-http --annotation org.example.k=v
check "pull REF --insecure --tag NAME into a missing store: made, pulled, tagged" 0 "created store $T/p/new" -- \
	st "$T/p/new" pull "$R/c/img:v1" --insecure --tag got
is "... the snapshot is the one pushed" "$(st "$T/p/new" show got --json | jq -r .id)" "$(st "$S" show base --json | jq -r .id)"

# ---- lazy snapshots are shown as lazy
# (options first here, so these cases stand on their own)
st "$S" push --insecure base "$R/c/lazy:v1" >/dev/null
L=$T/lz
newstore "$L"
st "$L" pull --lazy --insecure --tag lz "$R/c/lazy:v1" >/dev/null 2>&1
st "$L" show lz --json >"$T/out"
chunks=$(jq_of '.lazy.chunks')
is "show --json: the lazy layers, their chunks, none present yet" \
	"$(jq_of '[.lazy.present, (.lazy.layers | length), .lazy.layers[0].origin] | join(" ")')" "0 1 $R/c/lazy"
check "ls: the lazy snapshot's row says how much of it is here" 0 "^lz .*  lazy: 0 of $chunks chunks present  from $R/c/lazy\$" -- \
	st "$L" ls
check "show: a lazy line naming the registry" 0 "^lazy      1 layer\\(s\\) from $R/c/lazy, 0 of $chunks chunks present" -- \
	st "$L" show lz
check "verify TAG: a lazy layer is reported as lazy, not missing (exit 0)" 0 \
	": lazy: 0 of $chunks chunks present from $R/c/lazy" -- st "$L" verify lz
mkdir -p "$T/lmp"
st "$L" mount "$T/lmp" >/dev/null && MOUNTS+=("$T/lmp")
layer=$(st "$L" show lz --json | jq -r '.lazy.layers[0].id')
head -c 4096 "$T/lmp/snapshots/lz/layers/$layer" >/dev/null
"$BIN" umount "$T/lmp"
st "$L" show lz --json >"$T/out"
present=$(jq_of '.lazy.present')
if [ "$present" -gt 0 ] && [ "$present" -lt "$chunks" ]; then ok "a read through the mount fetched some chunks"
else nok "a read through the mount fetched some chunks" "present $present of $chunks"; fi
check "... and ls, show, verify say how many" 0 "^lz .*  lazy: $present of $chunks chunks present" -- \
	bash -c '"$0" --store "$1" ls && "$0" --store "$1" show lz && "$0" --store "$1" verify lz' "$BIN" "$L"
is "... in each of them" "$(grep -c "$present of $chunks chunks present" "$T/out")" 4
check "export of a lazy snapshot fetches what it lacks and writes a verified directory" 0 '' -- \
	bash -c '"$0" --store "$1" export lz "$2/lzdir" && "$0" verify "$2/lzdir"' "$BIN" "$L" "$T"
is "... after which nothing of it is lazy" "$(st "$L" show lz --json | jq -c .lazy)" "null"
L3=$T/lz3
newstore "$L3"
st "$L3" pull --lazy --insecure --tag lz "$R/c/lazy:v1" >/dev/null 2>&1
check "export --oci DIR of a lazy snapshot (every tagged one) fetches it too; the layout imports" 0 '^[0-9a-f]{32}$' -- \
	bash -c '"$0" --store "$1" export --oci "$2/lz3oci" && "$0" --store "$2/lz3imp" import "$2/lz3oci"' "$BIN" "$L3" "$T"
L2=$T/lz2
newstore "$L2"
st "$L2" pull --lazy --insecure --tag lz "$R/c/lazy:v1" >/dev/null 2>&1
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
PIDS=()
check "export of a lazy snapshot whose registry is gone: 'lazy ... pull it first', exit 1" 1 \
	"'lz' is lazy and its missing chunks could not be fetched: .*pull it first" -- st "$L2" export lz "$T/lz2dir"
# the CLI's messages come from the one table of codes (st_strerror): a registry's code in its words
check "a pull from a port nobody listens on names the registry's code: 'network error'" 1 \
	"^strata: pull of 127.0.0.1:1/x/y:z failed: network error: .*127.0.0.1" -- st "$L2" pull --insecure 127.0.0.1:1/x/y:z

[ "$n" -eq "$N" ] || { echo "not ok $((n + 1)) - planned $N cases, ran $n"; exit 1; }
[ "$fails" -eq 0 ]
