#!/usr/bin/env bash
# verify_lazy.sh: verify and fsck re-hash the present chunks of a lazy layer against its chunk index: a partial
# file that rots after its chunks were fetched is named by layer and chunk (exit 4), fsck --repair marks the
# chunk missing and a read fetches it again (a real loopback docker-registry, a real mount) (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}

N=17
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch verifylazy

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

# A 1 MiB layer of random pages in 16 chunks of 64 KiB, pulled lazily.
S=$T/s
newstore "$S"
head -c 1M /dev/urandom >"$T/img"
st "$S" debug ingest "$T/img" --tag base >/dev/null
layer=$(st "$S" show base --json | jq -r '.manifest.layers[0].id')
LB=$(find "$S/blobs" -name "$layer")
st "$S" push --plain-http base "$R/v/img:v1" >/dev/null
L=$T/l
newstore "$L"
st "$L" pull --lazy --plain-http --tag base "$R/v/img:v1" >/dev/null

# Read chunks 2 and 3 through a mount, so they are present.
M=$T/m
mkdir -p "$M"
if ! st "$L" mount "$M" --log "$T/m.log" >/dev/null; then
	nok "mount the lazy store" "$(cat "$T/m.log" 2>/dev/null)"
	skip_rest "mount" "the mount failed"
	exit 1
fi
MOUNTS+=("$M")
f=$M/snapshots/base/layers/$layer
dd if="$f" bs=64k skip=2 count=2 2>/dev/null >"$T/got"
dd if="$LB" bs=64k skip=2 count=2 2>/dev/null >"$T/want"
"$BIN" umount "$M" >/dev/null
sleep 1 # the kernel's read-ahead may still bring a chunk or two in as the daemon ends
map() { od -An -tu1 -v "$L/lazy/$layer.map" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }
present=$(map | tr ' ' '\n' | grep -c 1)
if cmp -s "$T/got" "$T/want"; then ok "two chunks read through the mount"; else nok "two chunks read through the mount"; fi
is "... are present in the map (with what read-ahead brought)" "$(map | cut -d' ' -f3,4)" "1 1"
check "verify of the intact lazy snapshot re-hashes them against the chunk index" 0 \
	"lazy: $present of 16 chunks present from $R/v/img, each re-hashed against the layer's chunk index \(XXH3-128, sha256:[0-9a-f]{64}\): all match" \
	-- st "$L" verify base
check "... as does verify of the whole store" 0 \
	"\\(1 lazy, not yet checked against their ids\\), $present present chunk\(s\) of them re-hashed against their chunk indexes.* 0 problem" \
	-- st "$L" verify

# The partial file rots in chunk 3 (bytes 196608-262143).
"$SRC/tests/e2e/flip_byte" "$L/lazy/$layer.part" $((3 * 65536 + 100))
check "verify TAG names the bad chunk by layer and number, exit 4" 4 \
	"^base: layer $layer: chunk 3 \(bytes 196608-262143\) does not match the layer's chunk index from http://$R/v/img: corrupt" \
	-- st "$L" verify base
check "... and counts it" 4 'verify: 1 problem\(s\) found' -- st "$L" verify base
st "$L" verify base --json >"$T/v.json" 2>/dev/null
is "verify --json: the problem with its layer, chunk and bytes" \
	"$(jq -c -S '.errors, .targets[0].problems, [.targets[0].lazy[0] | .present, .checked, .bad]' "$T/v.json" | tr '\n' ' ')" \
	"1 [{\"chunk\":3,\"layer\":\"$layer\",\"length\":65536,\"offset\":196608,\"problem\":\"bad chunk\"}] [$present,$present,1] "
check "verify of the whole store finds it, exit 4" 4 \
	"^bad chunk: layer $layer: chunk 3 \(bytes 196608-262143\) does not match the layer's chunk index \(XXH3-128 of each chunk; index sha256:[0-9a-f]{64}, from http://$R/v/img\)" \
	-- st "$L" verify
st "$L" verify --json >"$T/vs.json" 2>/dev/null
is "verify --json of the whole store: a bad chunk problem of the layer" \
	"$(jq -c '[.errors, .lazy, .lazy_chunks_hashed, .problems[0].kind, .problems[0].object, .problems[0].id, .problems[0].error]' "$T/vs.json")" \
	"[1,1,$present,\"bad chunk\",\"layer\",\"$layer\",true]"
check "fsck finds it, exit 4" 4 "^bad chunk: layer $layer: chunk 3 " -- st "$L" fsck
check "fsck --quick does not hash, so does not" 0 ' 0 problem' -- st "$L" fsck --quick

# The repair marks the chunk missing: a read fetches it again, checked.
check "fsck --repair marks the chunk missing, exit 0" 0 \
	"^bad chunk: layer $layer: chunk 3 .* -> marked missing: fetched again when read" -- st "$L" fsck --repair
is "... its map byte is 0, the others still present" "$(map | cut -d' ' -f3,4) $(map | tr ' ' '\n' | grep -c 1)" \
	"1 0 $((present - 1))"
check "... and verify is clean again" 0 "lazy: $((present - 1)) of 16 chunks present.*: all match" -- st "$L" verify base
if st "$L" mount "$M" --log "$T/m2.log" >/dev/null; then
	dd if="$f" bs=64k skip=3 count=1 2>/dev/null >"$T/got3"
	"$BIN" umount "$M" >/dev/null
else
	: >"$T/got3"
fi
dd if="$LB" bs=64k skip=3 count=1 2>/dev/null >"$T/want3"
if cmp -s "$T/got3" "$T/want3"; then ok "a read of the chunk fetches it again: the layer's bytes"; else nok "a read of the chunk fetches it again: the layer's bytes"; fi
check "... and the whole store verifies" 0 'present chunk\(s\) of them re-hashed.* 0 problem' -- st "$L" verify
check "a pull completes the layer: an ordinary blob that verifies" 0 'layer\(s\) checked$' \
	-- sh -c "'$BIN' --store '$L' pull --plain-http --tag base '$R/v/img:v1' >/dev/null && '$BIN' --store '$L' verify base"

[ "$n" -eq "$N" ] || { echo "# ran $n of $N cases"; exit 1; }
[ "$fails" -eq 0 ]
