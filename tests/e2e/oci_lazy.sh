#!/usr/bin/env bash
# oci_lazy.sh: lazy pulls end to end against a real loopback registry (docker-registry) behind the
# fault-injecting proxy: pull --lazy, reads through the mount fetching only their chunks, completion,
# concurrent readers, offline, kill -9, refused chunks and chunk indexes, guests restored lazily (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
G="${STRATA_BUILD:-$SRC/build}/vmm/guest/simpleguest.elf"

N=63
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch lazy
setmode() { echo "$1" >"$T/mode"; }
# Range requests for blobs since the log was last cleared: count and bytes.
# Only requests for repository ${1:-any} (a mount of another store may still be reading ahead).
ranges() { grep ' bytes=' "$T/mode.log" 2>/dev/null | grep -c "/v2/${1:-}" || true; }
range_bytes() { awk -v r="/v2/${1:-}" '$5 ~ /^bytes=/ && index($2, r) == 1 { s += $4 } END { print s + 0 }' "$T/mode.log" 2>/dev/null; }
clearlog() { : >"$T/mode.log"; }
mountit() { # store mountpoint [args]
	local s=$1 m=$2; shift 2
	mkdir -p "$m"
	st "$s" mount "$m" --log "$T/$(basename "$m").log" "$@" >/dev/null && MOUNTS+=("$m")
}

# ---- a 16 MiB snapshot of random pages: 64 chunks of 256 KiB in one layer
S=$T/s
newstore "$S"
head -c 16M /dev/urandom >"$T/img"
id=$(st "$S" debug ingest "$T/img" --tag base)
layer=$(st "$S" show base --json | jq -r '.manifest.layers[0].id')
LB=$(find "$S/blobs" -name "$layer")

if ! command -v docker-registry >/dev/null; then
	skip_rest "registry" "docker-registry not installed"
	exit 0
fi
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(freeport)
mkdir -p "$T/reg"
printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%s}\n' \
	"$T/reg" "$port" >"$T/reg.yml"
docker-registry serve "$T/reg.yml" >"$T/reg.log" 2>&1 &
PIDS+=($!)
up=0
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && { up=1; break; }; sleep 0.1; done
if [ $up = 0 ]; then
	nok "the loopback registry starts" "$(tail -3 "$T/reg.log")"
	skip_rest "registry" "the registry did not start"
	exit 1
fi
setmode pass
python3 "$SRC/tests/e2e/oci_proxy.py" "$port" "$T/mode" "$T/proxy.port" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$T/proxy.port" ] && break; sleep 0.1; done
P=127.0.0.1:$(cat "$T/proxy.port")

# ---- 1. push carries a chunk index per layer
check "push sends the snapshot with its chunk index" 0 '^sha256:' -- \
	st "$S" push --insecure --chunk-size 262144 base "$P/lazy/img:v1"
man=$(curl -s -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$P/v2/lazy/img/manifests/v1")
is "the OCI manifest lists the layer, then its chunk index" \
	"$(echo "$man" | jq -r '[.layers[].mediaType] | join(" ")')" \
	"application/vnd.strata.layer.v1 application/vnd.strata.chunks.v1"
is "... a chunk index of 64 chunks of 256 KiB (40 + 64 x 16 bytes)" "$(echo "$man" | jq -r '.layers[1].size')" 1064
st "$S" push --insecure base "$P/lazy/img64:v1" >/dev/null
is "by default, chunks of 64 KiB (256 of them: 40 + 256 x 16 bytes)" \
	"$(curl -s -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$P/v2/lazy/img64/manifests/v1" | jq -r '.layers[1].size')" 4136

# ---- 2. pull --lazy: the snapshot at once, no layer bytes
L=$T/l
newstore "$L"
clearlog
check "pull --lazy records the snapshot" 0 "^$id\$" -- st "$L" pull --lazy --insecure --tag base "$P/lazy/img:v1"
is "... and fetches no layer bytes (no Range request, no layer GET)" \
	"$(ranges) $(awk '$2 ~ /blobs/ && $4 > 65536' "$T/mode.log" | wc -l)" "0 0"
is "... the store lists it" "$(st "$L" ls | awk 'NR > 1 { print $1 }')" base
is "... with a sparse partial file and a map of 64 chunks, none present" \
	"$(stat -c %s "$L/lazy/$layer.part") $(du -k "$L/lazy/$layer.part" | cut -f1) $(tr -d '\0' <"$L/lazy/$layer.map" | wc -c)" \
	"16777216 0 0"
check "fsck finds the lazy store consistent" 0 '' -- st "$L" fsck

# ---- 3. reads through the mount fetch only their chunks
M=$T/m
if ! mountit "$L" "$M"; then
	nok "mount the lazy store" "$(cat "$T/m.log" 2>/dev/null)"
	skip_rest "mount" "the mount failed"
	exit 1
fi
f=$M/snapshots/base/layers/$layer
is "the layer file has its full size and the same name" "$(stat -c %s "$f")" 16777216
clearlog
got=$(dd if="$f" bs=4096 skip=1000 count=1 2>/dev/null | sha256sum | cut -d' ' -f1)
want=$(dd if="$LB" bs=4096 skip=1000 count=1 2>/dev/null | sha256sum | cut -d' ' -f1)
is "a 4 KiB read returns the layer's bytes" "$got" "$want"
is "... after one Range request for its 256 KiB chunk" "$(ranges) $(range_bytes)" "1 262144"
clearlog
dd if="$f" bs=4096 skip=1001 count=2 2>/dev/null >/dev/null
is "reading the same chunk again fetches nothing" "$(ranges)" 0
# The present chunk is data, the absent ones holes (what a restore reads ahead).
is "SEEK_DATA and SEEK_HOLE find the one present chunk (15: bytes 3932160-4194303)" \
	"$(python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); d=os.lseek(fd, 0, os.SEEK_DATA); print(d, os.lseek(fd, d, os.SEEK_HOLE))' "$f")" \
	"3932160 4194304"
is "... and doing so fetches nothing" "$(ranges)" 0
if cmp -s "$f" "$LB"; then ok "the whole layer read through the mount is the layer"; else nok "the whole layer read through the mount is the layer"; fi
is "... every chunk fetched once (64 chunks, 16 MiB in total)" "$(( $(range_bytes) + 262144 ))" 16777216
is "the map now says every chunk is present" "$(tr -d '\0' <"$L/lazy/$layer.map" | wc -c)" 64
check "fsck is clean with the lazy layer" 0 '' -- st "$L" fsck

# ---- 4. strata pull completes it: an ordinary verified blob
clearlog
check "pull (not lazy) of the lazy snapshot completes it" 0 "^$id\$" -- st "$L" pull --insecure --tag base "$P/lazy/img:v1"
is "... fetching nothing more (every chunk was there)" "$(ranges)" 0
is "... the layer is now a blob and the lazy files are gone" \
	"$(find "$L/blobs" -name "$layer" | wc -l) $(find "$L/lazy" -type f | wc -l)" "1 0"
check "... which verifies" 0 '' -- st "$L" verify base
if cmp -s "$f" "$LB"; then ok "the mount still reads the layer"; else nok "the mount still reads the layer"; fi

# ---- 5. completion fetches what is missing, in few requests
L2=$T/l2
newstore "$L2"
st "$L2" pull --lazy --insecure --tag base "$P/lazy/img:v1" >/dev/null
clearlog
check "a pull completes a lazy snapshot none of whose chunks were read" 0 "^$id\$" -- st "$L2" pull --insecure --tag base "$P/lazy/img:v1"
is "... 16 MiB in two Range requests of 8 MiB" "$(ranges) $(range_bytes)" "2 16777216"
check "... verified" 0 '' -- st "$L2" verify base

# ---- 6. concurrent readers of one chunk fetch it once
L3=$T/l3
newstore "$L3"
st "$L3" pull --lazy --insecure --tag base "$P/lazy/img:v1" >/dev/null
M3=$T/m3
mountit "$L3" "$M3" --threads 8
setmode "delay 200"
clearlog
f3=$M3/snapshots/base/layers/$layer
rd=()
for i in 1 2 3 4 5 6 7 8; do
	dd if="$f3" of="$T/par.$i" bs=4096 skip=$((2048 + i)) count=1 iflag=direct 2>/dev/null &
	rd+=($!)
done
wait "${rd[@]}"
setmode pass
is "8 readers of one chunk at once: one Range request" "$(ranges) $(range_bytes)" "1 262144"
same=1
for i in 1 2 3 4 5 6 7 8; do
	cmp -s "$T/par.$i" <(dd if="$LB" bs=4096 skip=$((2048 + i)) count=1 2>/dev/null) || same=0
done
is "... and each got its bytes" $same 1

# ---- 7. offline: bounded retries, then EIO, never a hang
setmode offline
clearlog
t0=$(date +%s%N)
if dd if="$f3" bs=4096 skip=100 count=1 of=/dev/null iflag=direct 2>"$T/dd.err"; then
	nok "a read while the registry is unreachable fails"
else
	ok "a read while the registry is unreachable fails"
fi
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
is "... with EIO" "$(grep -c 'Input/output error' "$T/dd.err")" 1
is "... within the bounded retries (4 attempts, 0.1+0.2+0.4 s of backoff: under 5 s)" \
	"$([ "$ms" -lt 5000 ] && echo bounded || echo "${ms} ms")" bounded
tries=$(grep -c offline "$T/mode.log")
is "... after 4 attempts (libcurl adds one when a reused connection drops)" \
	"$([ "$tries" -ge 4 ] && [ "$tries" -le 5 ] && echo 4 || echo "$tries")" 4
check "... the mount's log says which layer, which registry, and that it gave up" 0 \
	"layer $layer bytes 262144-524287 from $P/lazy/img: .*gave up after the retries" -- cat "$T/m3.log"
setmode pass
if dd if="$f3" bs=4096 skip=100 count=1 of=/dev/null iflag=direct 2>/dev/null; then
	ok "back online, the same read works"
else
	nok "back online, the same read works"
fi

# ---- 8. a chunk that fails verification is refused, nothing bad is kept
setmode corrupt
clearlog
if dd if="$f3" bs=4096 skip=1500 count=1 of=/dev/null iflag=direct 2>"$T/dd.err"; then
	nok "a read of a chunk the registry corrupted fails"
else
	ok "a read of a chunk the registry corrupted fails"
fi
is "... with EIO" "$(grep -c 'Input/output error' "$T/dd.err")" 1
check "... the mount's log names the chunk and the registry" 0 \
	"chunk 23 of layer $layer \\(bytes 6029312-6291455\\) from $P/lazy/img does not match the chunk index" -- \
	cat "$T/m3.log"
is "... the chunk is not marked present" "$(od -An -tu1 -j23 -N1 "$L3/lazy/$layer.map" | tr -d ' ')" 0
setmode pass
got=$(dd if="$f3" bs=4096 skip=1500 count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
want=$(dd if="$LB" bs=4096 skip=1500 count=1 2>/dev/null | sha256sum | cut -d' ' -f1)
is "... and a later read gets the right bytes" "$got" "$want"

# ---- 9. a tampered chunk index is refused before use
L4=$T/l4
newstore "$L4"
setmode index
check "pull --lazy refuses a chunk index that does not match its digest" 1 \
	"chunk index of layer $layer does not match its digest" -- st "$L4" pull --lazy --insecure --tag base "$P/lazy/img:v1"
setmode pass
is "... and records nothing" "$(st "$L4" ls | tail -n +2 | wc -l) $(find "$L4" -path '*/lazy/*' -type f | wc -l)" "0 0"

# ---- 10. kill -9 in the middle of lazy fetches leaves a consistent store
L5=$T/l5
newstore "$L5"
st "$L5" pull --lazy --insecure --tag base "$P/lazy/img:v1" >/dev/null
setmode slow
st "$L5" pull --insecure --tag base "$P/lazy/img:v1" >/dev/null 2>&1 &
pp=$!
sleep 0.6
kill -9 $pp 2>/dev/null
wait $pp 2>/dev/null
setmode pass
check "after kill -9 during a completion, fsck finds the store consistent" 0 '' -- st "$L5" fsck
check "... and a pull completes it" 0 "^$id\$" -- st "$L5" pull --insecure --tag base "$P/lazy/img:v1"
check "... verified" 0 '' -- st "$L5" verify base

# ---- 11. gc frees a lazy layer no snapshot uses
L6=$T/l6
newstore "$L6"
st "$L6" pull --lazy --insecure --tag base "$P/lazy/img:v1" >/dev/null
st "$L6" rm base >/dev/null
before=$(find "$L6/lazy" -type f | wc -l)
check "gc after rm frees the lazy layer's record and files" 0 '' -- st "$L6" gc --grace 0
is "... nothing is left under lazy/ (there were files before), fsck is clean" \
	"$([ "$before" -gt 0 ] && echo some) $(find "$L6/lazy" -type f | wc -l) $(st "$L6" fsck >/dev/null 2>&1; echo $?)" "some 0 0"

# ---- 12. a mount sees chunks another process brought in
L7=$T/l7
newstore "$L7"
st "$L7" pull --lazy --insecure --tag base "$P/lazy/img:v1" >/dev/null
M7=$T/m7
mountit "$L7" "$M7"
exec 9<"$M7/snapshots/base/layers/$layer"
dd bs=4096 count=1 of=/dev/null iflag=direct <&9 2>/dev/null
st "$L7" pull --insecure --tag base "$P/lazy/img:v1" >/dev/null
clearlog
got=$(dd bs=4096 skip=2000 count=1 iflag=direct <&9 2>/dev/null | sha256sum | cut -d' ' -f1)
exec 9<&-
is "a file open before another process completed the layer reads its bytes" "$got" \
	"$(dd if="$LB" bs=4096 skip=2001 count=1 2>/dev/null | sha256sum | cut -d' ' -f1)" # past the first read
is "... fetching nothing again (the mount sees the chunks the other process brought in)" "$(ranges lazy/img)" 0

# ---- 13. guests restored lazily: from the mount's path and from the store
if [ -n "$SANDBOX_WHY" ]; then
	skip_rest "guests" "needs a sandbox backend: $SANDBOX_WHY"
	exit $((fails > 0))
fi
# The process backend copies every data page into its own memory at restore:
# it fetches whole layers, and a chunk it cannot have fails the restore (1)
# rather than a call (5).
proc=0
if [ "${STRATA_BACKEND:-auto}" = process ] || { [ "${STRATA_BACKEND:-auto}" = auto ] && kvm_unusable; }; then proc=1; fi
GS=$T/gs
newstore "$GS"
st "$GS" run "$G" --heap 64M --call touch_pages 8000 --snapshot big >/dev/null 2>&1
glayer=$(st "$GS" show big --json | jq -r '.manifest.layers[0].id')
gsize=$(st "$GS" show big --json | jq -r '.manifest.layers[0].pages * 4096')
st "$GS" push --insecure --chunk-size 262144 big "$P/lazy/guest:v1" >/dev/null
GL=$T/gl
newstore "$GL"
st "$GL" pull --lazy --insecure --tag big "$P/lazy/guest:v1" >/dev/null
GM=$T/gm
mountit "$GL" "$GM"
clearlog
check "a guest restored from a lazy snapshot's mount path runs" 0 '^1$' -- "$BIN" run "$GM/snapshots/big" --call counter_next
gb=$(range_bytes lazy/guest)
if [ $proc = 1 ]; then
	is "... fetching its whole layer once (the process backend copies its data pages at restore)" "$gb" "$gsize"
else
	is "... fetching a part of its ${gsize}-byte layer" "$([ "$gb" -gt 0 ] && [ "$gb" -lt $((gsize / 4)) ] && echo part || echo "$gb")" part
fi
# A page that cannot be had ends the command with exit 5 and the reasons on
# both backends (the process backend meets it copying the snapshot's pages).
bad=5
# Its readahead may still be fetching after the run: stop it before counting again.
"$BIN" umount "$GM" >/dev/null 2>&1
GL2=$T/gl2
newstore "$GL2"
st "$GL2" pull --lazy --insecure --tag big "$P/lazy/guest:v1" >/dev/null
clearlog
check "a guest restored from the lazy snapshot in the store runs (a private mount)" 0 '^1$' -- \
	st "$GL2" run big --call counter_next
is "... fetching the same part" "$(range_bytes lazy/guest)" "$gb"
is "... and leaving no mount behind" "$(grep -c strata-lazy /proc/mounts)" 0
GL3=$T/gl3
newstore "$GL3"
st "$GL3" pull --lazy --insecure --tag big "$P/lazy/guest:v1" >/dev/null
setmode "delay 100"
clearlog
check "8 sandboxes of one lazy snapshot at once (pool) run" 0 'first call' -- st "$GL3" pool big -n 8 --call counter_next
setmode pass
# No range twice; and what one sandbox fetches, or one chunk more: a
# layer with no chunk present yet is mapped with the kernel's read-around
# (vmm/reset.c, docs/lazy.md), so the first of eight faults at once may
# reach into the next chunk, depending on which page faults first.
pb=$(range_bytes lazy/guest)
is "... each chunk fetched once" "$(awk '$5 ~ /^bytes=/ && index($2, "/v2/lazy/guest/") == 1 { print $5 }' "$T/mode.log" | sort | uniq -d | wc -l) $([ "$pb" -ge "$gb" ] && [ "$pb" -le $((gb + 262144)) ] && echo "$gb or one chunk more" || echo "$pb")" "0 $gb or one chunk more"
GL5=$T/gl5
newstore "$GL5"
st "$GL5" pull --lazy --insecure --tag big "$P/lazy/guest:v1" >/dev/null
GM5=$T/gm5
mountit "$GL5" "$GM5" --threads 8
setmode "delay 100"
clearlog
rp=()
for i in 1 2 3 4 5 6 7 8; do
	"$BIN" run "$GM5/snapshots/big" --call counter_next >"$T/run.$i" 2>&1 &
	rp+=($!)
done
okruns=0
for i in 1 2 3 4 5 6 7 8; do wait "${rp[$((i - 1))]}" && [ "$(cat "$T/run.$i")" = 1 ] && okruns=$((okruns + 1)); done
setmode pass
is "8 sandboxes started at once from the mount path all run" $okruns 8
is "... each chunk fetched once, the same bytes as one sandbox" \
	"$(awk '$5 ~ /^bytes=/ && index($2, "/v2/lazy/guest/") == 1 { print $5 }' "$T/mode.log" | sort | uniq -d | wc -l) $(range_bytes lazy/guest)" "0 $gb"
GL4=$T/gl4
newstore "$GL4"
st "$GL4" pull --lazy --insecure --tag big "$P/lazy/guest:v1" >/dev/null
setmode corrupt
check "a guest whose page is in a refused chunk: a guest error naming the chunk and the registry" $bad \
	"chunk 0 of layer $glayer \\(bytes 0-262143\\) from $P/lazy/guest does not match the chunk index" -- \
	st "$GL4" run big --call counter_next
is "... nothing of it kept" "$(tr -d '\0' <"$GL4/lazy/$glayer.map" | wc -c)" 0
setmode offline
t0=$(date +%s%N)
check "offline mid-run: a guest error saying the registry could not be reached" $bad 'gave up after the retries' -- \
	st "$GL4" run big --call counter_next
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
is "... in bounded time (under 10 s)" "$([ "$ms" -lt 10000 ] && echo bounded || echo "${ms} ms")" bounded
setmode pass
check "back online, the same run works" 0 '^1$' -- st "$GL4" run big --call counter_next
exit $((fails > 0))
