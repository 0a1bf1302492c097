#!/usr/bin/env bash
# oci_poison.sh: two registries, one hostile: a lazy pull from an attacker's registry that lists the victim's
# layer id with its own chunk index must not decide what that layer is for a pull of the trusted snapshot from
# the trusted registry (full and lazy); a failed completion commits nothing; fsck lists lazy layers as unchecked;
# a registry trickling bytes ends a pull at its deadline (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${STRATA_BUILD:-$SRC/build}
G="$BUILD/vmm/guest/simpleguest.elf"

N=52
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch poison

if ! command -v docker-registry >/dev/null; then
	skip_rest "registry" "docker-registry not installed"
	exit 0
fi
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitport() { for _ in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1; }

# ---- registry B: the trusted one (a real registry), and a proxy in front of it for the trickle case
pb=$(freeport)
mkdir -p "$T/reg"
printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%s}\n' \
	"$T/reg" "$pb" >"$T/reg.yml"
docker-registry serve "$T/reg.yml" >"$T/reg.log" 2>&1 &
PIDS+=($!)
up=0
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$pb/v2/" && { up=1; break; }; sleep 0.1; done
if [ $up = 0 ]; then
	nok "the trusted registry starts" "$(tail -3 "$T/reg.log")"
	skip_rest "registry" "the registry did not start"
	exit 1
fi
B=127.0.0.1:$pb
echo pass >"$T/mode"
python3 "$SRC/tests/e2e/oci_proxy.py" "$pb" "$T/mode" "$T/proxy.port" &
PIDS+=($!)
waitport "$T/proxy.port"
BP=127.0.0.1:$(cat "$T/proxy.port")

# ---- the victim publishes a snapshot of 1 MiB of random pages to B, by digest
V=$T/v
newstore "$V"
head -c 1M /dev/urandom >"$T/img"
id=$(st "$V" debug ingest "$T/img" --tag base)
layer=$(st "$V" show base --json | jq -r '.manifest.layers[0].id')
LB=$(find "$V/blobs" -name "$layer")
D=$(st "$V" push --insecure base "$B/trusted/img:v1")
is "the victim pushes its snapshot to the trusted registry" "${D:0:7}" "sha256:"

# ---- the attacker, registry A: the victim's manifest with its own chunk index (and bytes) for the same layer id
head -c 1M /dev/urandom >"$T/evil"
craft() { python3 "$SRC/tests/e2e/oci_hostile.py" craft "$B" trusted/img "$D" "$T/evil" "$T/a" "$@"; }
DA=$(craft same:v1)
DO=$(craft other:v1 --new-config=1)
DO2=$(craft other:v2 --new-config=2)
DS=$(craft badsha:v1 --new-config=3 --bad-sha)
is "the attacker crafts four manifests" "${DA:0:7}${DO:0:7}${DO2:0:7}${DS:0:7}" "sha256:sha256:sha256:sha256:"
python3 "$SRC/tests/e2e/oci_hostile.py" serve "$T/a" "$T/a.port" &
PIDS+=($!)
waitport "$T/a.port"
A=127.0.0.1:$(cat "$T/a.port")
oid=$(curl -s "http://$A/v2/evil/other/manifests/v1" | jq -r '.config.annotations["dev.strata.id"]')

# The bytes a store's layer file holds, as the mount of that store serves them to readers.
layer_via_mount() { # store
	local m=$T/m.$RANDOM
	mkdir -p "$m"
	st "$1" mount "$m" --log "$T/mount.log" >/dev/null || return 1
	MOUNTS+=("$m")
	sha256sum <"$m/snapshots/$2/layers/$layer" | cut -d' ' -f1
	"$BIN" umount "$m" >/dev/null 2>&1
}
want=$(sha256sum <"$LB" | cut -d' ' -f1)

# ---- 1. the attacker's snapshot has the victim's snapshot id (same config, its own chunk index)
for how in lazy full; do
	U=$T/u1-$how
	newstore "$U"
	check "[$how] pull --lazy from the attacker records the snapshot (the victim's id)" 0 "^$id\$" -- \
		st "$U" pull --lazy --insecure --tag evil "$A/evil/same:v1"
	flag=--lazy
	[ $how = full ] && flag=
	# shellcheck disable=SC2086
	check "[$how] pull of the trusted snapshot by digest from the trusted registry succeeds" 0 "^$id\$" -- \
		st "$U" pull $flag --insecure --tag trusted "$B/trusted/img@$D"
	is "[$how] ... the layer is now the trusted bytes, fetched whole and checked: a blob, no lazy files" \
		"$(find "$U/blobs" -name "$layer" -exec cmp -s {} "$LB" \; -print | wc -l) $(find "$U" -path '*/lazy/*' -type f | wc -l)" \
		"1 0"
	is "[$how] ... a reader of the trusted snapshot gets the trusted bytes" "$(layer_via_mount "$U" trusted)" "$want"
	check "[$how] ... fsck is clean" 0 ' 0 problem' -- st "$U" fsck
done

# ---- 2. the attacker's snapshot is another snapshot listing the victim's layer
for how in lazy full; do
	U=$T/u2-$how
	newstore "$U"
	check "[$how] pull --lazy of the attacker's own snapshot listing the victim's layer" 0 "^$oid\$" -- \
		st "$U" pull --lazy --insecure --tag evil "$A/evil/other:v1"
	check "[$how] fsck lists the lazy layer as not yet checked against its id, naming its registry" 0 \
		"unchecked: layer $layer: lazy layer from http://$A/evil/other \\(manifest $DO\\), 0 of 16 chunks here" -- st "$U" fsck
	check "[$how] ... and counts it so, without calling it a problem" 0 \
		'\(1 lazy, not yet checked against their ids\).* 0 problem' -- st "$U" fsck
	flag=--lazy
	[ $how = full ] && flag=
	# shellcheck disable=SC2086
	check "[$how] pull of the trusted snapshot by digest from the trusted registry succeeds" 0 "^$id\$" -- \
		st "$U" pull $flag --insecure --tag trusted "$B/trusted/img@$D"
	is "[$how] ... a reader of the trusted snapshot gets the trusted bytes" "$(layer_via_mount "$U" trusted)" "$want"
	check "[$how] ... which verify" 0 '' -- st "$U" verify trusted
	is "[$how] ... the attacker's record is gone (the layer is an ordinary blob)" \
		"$(find "$U" -path '*/lazy/*' -type f | wc -l)" 0
done

# ---- 3. a failed completion commits nothing
U=$T/u3
newstore "$U"
st "$U" pull --lazy --insecure --tag evil "$A/evil/other:v1" >/dev/null
check "a full pull from the same registry whose layer does not hash to its id fails" 1 \
	"the whole does not hash to the layer's id" -- st "$U" pull --insecure --tag bad "$A/evil/other:v2"
is "... and commits neither its snapshot nor its tag" \
	"$(st "$U" ls | awk 'NR > 1 { print $1 }' | sort | tr '\n' ' ')$(st "$U" show bad >/dev/null 2>&1; echo $?)" "evil 3"
check "a full pull of the lazy snapshot itself fails the same way" 1 "the whole does not hash to the layer's id" -- \
	st "$U" pull --insecure --tag bad2 "$A/evil/other:v1"
is "... and sets no tag" "$(st "$U" ls | awk 'NR > 1 { print $1 }' | sort | tr '\n' ' ')" "evil "
check "... the store stays consistent" 0 ' 0 problem' -- st "$U" fsck

# ---- 3b. a registry naming a layer the store holds by a wrong sha256 records nothing of it
U=$T/u3b
newstore "$U"
st "$U" debug ingest "$T/img" --tag local >/dev/null
check "a pull listing a layer the store holds (made here, never hashed for sha256) by a wrong digest" 0 "" -- \
	st "$U" pull --insecure --tag badsha "$A/evil/badsha:v1"
check "... does not record that digest: the trusted pull of the layer still succeeds" 0 "^$id\$" -- \
	st "$U" pull --insecure --tag trusted "$B/trusted/img@$D"
check "... and a push of it sends its true digest" 0 '^sha256:' -- st "$U" push --insecure trusted "$B/copy/img:v1"

# ---- 4. a registry trickling 2 bytes a second: the pull ends at its deadline
U=$T/u4
newstore "$U"
echo trickle >"$T/mode"
t0=$(date +%s)
check "a pull from a trickling registry with --timeout 3 fails" 1 "gave up after 3 s .*deadline passed" -- \
	timeout 60 "$BIN" --store "$U" pull --timeout 3 --insecure --tag t "$BP/trusted/img:v1"
s=$(($(date +%s) - t0))
is "... within its deadline (under 10 s)" "$([ "$s" -lt 10 ] && echo bounded || echo "${s} s")" bounded
t0=$(date +%s)
check "\$STRATA_PULL_TIMEOUT sets the same deadline" 1 "gave up after 2 s" -- \
	timeout 60 env STRATA_PULL_TIMEOUT=2 "$BIN" --store "$U" pull --insecure --tag t "$BP/trusted/img:v1"
s=$(($(date +%s) - t0))
is "... within it (under 10 s)" "$([ "$s" -lt 10 ] && echo bounded || echo "${s} s")" bounded
is "... nothing committed" "$(st "$U" ls | tail -n +2 | wc -l)" 0
echo pass >"$T/mode"
check "a --timeout that is not a number of seconds is refused" 2 "not a number of seconds" -- \
	st "$U" pull --timeout soon --insecure "$BP/trusted/img:v1"
check "pull --help documents the deadline" 0 'STRATA_PULL_TIMEOUT' -- st "$U" pull --help

# ---- 5. a long chain of subjects is not held whole in memory: peak RSS of a pull of 65 links is within
# a few MiB of one of 9 (each link's manifest lists 8192 ranges: ~130 KiB as JSON, ~400 KiB as held before)
C=$T/c
newstore "$C"
python3 -c '
import os, sys
with open(sys.argv[1], "wb") as f:
    f.truncate(64 << 20)
    for p in range(0, 16384, 2):
        f.seek(p * 4096)
        f.write(os.urandom(4096))' "$T/cimg"
prev=$(st "$C" debug ingest "$T/cimg" --tag c0)
for k in $(seq 1 64); do
	head -c 4096 /dev/urandom | dd of="$T/cimg" conv=notrunc bs=4096 count=1 2>/dev/null
	prev=$(st "$C" debug ingest "$T/cimg" --parent "$prev" --tag "c$k")
done
is "a chain of 65 snapshots of 8192 ranges each" "$(st "$C" show c64 --json | jq '.manifest.ranges | length')" 8192
check "... pushes" 0 '^sha256:' -- st "$C" push --insecure c64 "$B/chain/img:c64"
st "$C" push --insecure c8 "$B/chain/img:c8" >/dev/null
# Peak RSS of the pull (KiB); ASan's quarantine would keep freed memory resident: off for this.
peak() { # store ref
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=0:thread_local_quarantine_size_kb=0" python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if r.returncode == 0 else "failed")' \
		"$BIN" --store "$1" pull --insecure "$2"
}
newstore "$T/c9"
newstore "$T/c65"
r9=$(peak "$T/c9" "$B/chain/img:c8")
r65=$(peak "$T/c65" "$B/chain/img:c64")
is "pulls of 9 and of 65 links succeed" "$(st "$T/c9" ls | tail -n +2 | wc -l) $(st "$T/c65" ls | tail -n +2 | wc -l)" "9 65"
grow=$(( (r65 - r9) / 1024 ))
is "... peak RSS grows by under 12 MiB for 56 more links (${r9} KiB, then ${r65} KiB)" \
	"$([ "$grow" -lt 12 ] && echo bounded || echo "${grow} MiB")" bounded
check "... the long chain verifies" 0 '' -- st "$T/c65" verify

# ---- 6. a guest: the trusted snapshot runs the trusted memory
if [ -n "$SANDBOX_WHY" ]; then
	skip_rest "guests" "needs a sandbox backend: $SANDBOX_WHY"
	exit $((fails > 0))
fi
GV=$T/gv
newstore "$GV"
st "$GV" run "$G" --call counter_next --snapshot g >/dev/null 2>&1
st "$GV" run "$G" --call counter_next --repeat 41 --snapshot g41 >/dev/null 2>&1
glayer=$(st "$GV" show g --json | jq -r '.manifest.layers[0].id')
e41=$(st "$GV" show g41 --json | jq -r '.manifest.layers[0].id')
cp "$(find "$GV/blobs" -name "$e41")" "$T/evil"
GD=$(st "$GV" push --insecure g "$B/trusted/guest:v1")
if ! GA=$(python3 "$SRC/tests/e2e/oci_hostile.py" craft "$B" trusted/guest "$GD" "$T/evil" "$T/a" \
	guest:v1 2>"$T/craft.err"); then
	skip_rest "guests" "the two guest layers differ in size: $(cat "$T/craft.err")"
	exit $((fails > 0))
fi
gid=$(st "$GV" show g --json | jq -r '.id')
for how in lazy full; do
	U=$T/u5-$how
	newstore "$U"
	st "$U" pull --lazy --insecure --tag evil "$A/evil/guest:v1" >/dev/null
	check "[$how] the attacker's lazy snapshot runs the attacker's memory (its counter is at 41)" 0 '^42$' -- \
		st "$U" run evil --call counter_next
	flag=--lazy
	[ $how = full ] && flag=
	# shellcheck disable=SC2086
	check "[$how] pull of the trusted guest by digest from the trusted registry" 0 "^$gid\$" -- \
		st "$U" pull $flag --insecure --tag trusted "$B/trusted/guest@$GD"
	check "[$how] ... strata run of it runs the trusted memory (its counter was at 1)" 0 '^2$' -- \
		st "$U" run trusted --call counter_next
done
exit $((fails > 0))
