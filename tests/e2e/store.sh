#!/usr/bin/env bash
# store.sh: end-to-end test of the store commands (init, debug ingest, ls, show, tag, export,
# import, verify, fsck and fsck --repair with healing by import, rm, gc) through the real strata binary; prints TAP.
set -u
BIN=${STRATA_BIN:-$(dirname "$0")/../../build/mount/strata}
T=$(mktemp -d /tmp/strata-e2e-store.XXXXXX)
MOUNTS=()
cleanup() {
	for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
	chmod -R u+w "$T" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && echo "# $2"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
check() { # name, command...
	local name=$1; shift
	if out=$("$@" 2>&1); then ok "$name"; else nok "$name" "$(echo "$out" | tail -3 | tr '\n' ' ')"; fi
}
# expect_exit CODE NAME PATTERN command...: exit status CODE and stderr/stdout matching PATTERN
expect_exit() {
	local code=$1 name=$2 pat=$3; shift 3
	out=$("$@" 2>&1); rc=$?
	if [ "$rc" -eq "$code" ] && echo "$out" | grep -qE -- "$pat"; then ok "$name"
	else nok "$name" "exit $rc (want $code), output: $(echo "$out" | head -3 | tr '\n' ' ')"; fi
}

echo "1..44"
S=$T/store
S2=$T/store2
st() { "$BIN" --store "$S" "$@"; }
st2() { "$BIN" --store "$S2" "$@"; }

# A 8 MiB image: 1 MiB of random pages, a run of 16 random pages at 4 MiB, the rest zero.
head -c 1M /dev/urandom > "$T/img1"
head -c 64K /dev/urandom | dd of="$T/img1" bs=4096 seek=1024 conv=notrunc 2>/dev/null
truncate -s 8M "$T/img1"
# Version 2: three scattered pages changed.
cp "$T/img1" "$T/img2"
for p in 3 200 1030; do head -c 4096 /dev/urandom | dd of="$T/img2" bs=4096 seek=$p conv=notrunc 2>/dev/null; done

mkdir -p "$S"
check "init creates a store" st init
check "init again is harmless" st init
base=$(st debug ingest "$T/img1" --tag base 2>&1)
if [[ "$base" =~ ^[0-9a-f]{32}$ ]]; then ok "debug ingest prints the new snapshot id"; else nok "debug ingest prints the new snapshot id" "$base"; fi
v2=$(st debug ingest "$T/img2" --parent base --tag v2 2>&1)
if [[ "$v2" =~ ^[0-9a-f]{32}$ ]]; then ok "debug ingest with a parent"; else nok "debug ingest with a parent" "$v2"; fi

out=$(st ls)
if echo "$out" | grep -qE "^base +$base" && echo "$out" | grep -qE "^v2 +$v2 +$base +8\.0 MiB +12 KiB"; then
	ok "ls shows tags, ids, parent, memory and bytes unique (3 changed pages = 12 KiB)"
else nok "ls shows tags, ids, parent, memory and bytes unique (3 changed pages = 12 KiB)" "$out"; fi
out=$(st ls --tree)
if echo "$out" | grep -qE "^base $base" && echo "$out" | grep -qE "^  v2 $v2"; then ok "ls --tree nests the child under its parent"
else nok "ls --tree nests the child under its parent" "$out"; fi

js=$(st show v2 --json)
if [ "$(echo "$js" | jq -r .manifest.parent)" = "$base" ] && [ "$(echo "$js" | jq -r .id)" = "$v2" ] &&
   [ "$(echo "$js" | jq -r '.tags[0]')" = v2 ] && [ "$(echo "$js" | jq -r .manifest.mem_size)" = 8388608 ] &&
   [ "$(echo "$js" | jq -r .unique_bytes)" = 12288 ]; then ok "show --json gives id, tags, unique bytes and the manifest"
else nok "show --json gives id, tags, unique bytes and the manifest" "$js"; fi
expect_exit 0 "show prints a human description" "parent +$base \(base\)" st show v2

check "tag adds a second name" st tag v2 web-1
expect_exit 1 "tag refuses to move an existing tag without --force" "already names another snapshot" st tag base web-1
check "tag --force moves it" st tag -f base web-1
check "tag -m renames" st tag -m web-1 web-2
expect_exit 3 "an unknown snapshot is reported with its name and the store" "snapshot 'web-1' not found in store $S" st show web-1

expect_exit 2 "a tag with '/' is refused" "not a valid tag name" st tag v2 'a/b'
expect_exit 2 "a tag '..' is refused" "not a valid tag name" st tag v2 '..'
expect_exit 2 "a tag over 128 characters is refused" "not a valid tag name" st tag v2 "$(printf 'a%.0s' {1..129})"

check "export writes a snapshot directory" st export v2 "$T/exp"
nlayers=$(ls "$T/exp/layers" | wc -l)
if [ -f "$T/exp/manifest.json" ] && [ "$nlayers" -eq "$(echo "$js" | jq '.manifest.layers | length')" ]; then
	ok "the exported directory holds the manifest and every layer"
else nok "the exported directory holds the manifest and every layer" "$nlayers layers"; fi

mkdir -p "$S2"
st2 init >/dev/null
id=$(st2 import "$T/exp" --tag copied 2>&1)
if [ "$id" = "$v2" ]; then ok "import into a second store gives the same id"; else nok "import into a second store gives the same id" "$id"; fi
id=$(st2 import "$T/exp" --tag copied 2>&1)
if [ "$id" = "$v2" ] && [ "$(st2 ls | grep -c copied)" -eq 1 ]; then ok "importing again is idempotent"
else nok "importing again is idempotent" "$id"; fi
check "verify passes on a healthy store" st2 verify

# A damaged copy is rejected and leaves the store unchanged.
cp -r "$T/exp" "$T/bad"; chmod -R u+w "$T/bad"
lay=$(ls "$T/bad/layers" | head -1)
"$(dirname "$0")/flip_byte" "$T/bad/layers/$lay" 10
rm -rf "$S2.before"; cp -a "$S2" "$S2.before"
expect_exit 1 "import of a layer that does not hash to its name is rejected, naming it" "layer $lay.*(do not hash|hashes to)" st2 import "$T/bad" --tag bad
if diff -r "$S2/blobs" "$S2.before/blobs" >/dev/null && st2 fsck >/dev/null; then ok "the rejected import left the store unchanged and fsck clean"
else nok "the rejected import left the store unchanged and fsck clean"; fi

# Corrupt a blob inside the store: verify names it and exits 4.
blob=$(find "$S2/blobs" -type f | head -1); bid=$(basename "$blob")
chmod u+w "$blob"; "$(dirname "$0")/flip_byte" "$blob" 5
expect_exit 4 "verify exits 4 and names the corrupt blob" "corrupt: blob $bid" st2 verify
expect_exit 4 "fsck also reports it" "corrupt: blob $bid" st2 fsck

# Repair: the corrupt blob goes to lost+found (bytes kept), the snapshot is
# listed as lacking the layer, and importing the earlier export heals it.
cp "$blob" "$T/corrupt.copy"
expect_exit 4 "fsck --repair moves the corrupt blob to lost+found and exits 4 (a layer is missing)" \
	"corrupt: blob $bid: .* -> moved to lost\+found/$bid\.[0-9]+" st2 fsck --repair
kept=$(ls "$S2/lost+found/$bid".* 2>/dev/null | head -1)
if [ -n "$kept" ] && cmp -s "$kept" "$T/corrupt.copy" && [ ! -e "$blob" ]; then ok "lost+found holds the corrupt bytes as they were"
else nok "lost+found holds the corrupt bytes as they were" "kept=$kept"; fi
out=$(st2 fsck --repair 2>&1); rc=$?
if [ $rc -eq 4 ] && echo "$out" | grep -qE "lacking: snapshot $v2 \(tags: copied\) lacks 1 of 2 layer" &&
   echo "$out" | grep -qE "strata --store $S2 import DIR"; then
	ok "after repair it names the snapshot lacking the layer, its tag, and how to heal it"
else nok "after repair it names the snapshot lacking the layer, its tag, and how to heal it" "rc=$rc $(echo "$out" | tr '\n' ' ')"; fi
expect_exit 4 "fsck now reports the layer as missing" "missing: blob $bid" st2 fsck
expect_exit 0 "import of an earlier export heals the layer" "healed 1 layer\(s\) of snapshot $v2" st2 import "$T/exp"
check "fsck is clean after healing" st2 fsck
check "verify and show of the healed snapshot work" bash -c "'$BIN' --store '$S2' verify copied && '$BIN' --store '$S2' show copied >/dev/null"

# A truncated blob and a deleted blob, healed the same way.
blob2=$(find "$S2/blobs" -type f ! -name "$bid" | head -1); bid2=$(basename "$blob2")
blob3=$blob; bid3=$bid
chmod u+w "$blob2"; truncate -s 100 "$blob2"; rm -f "$blob3"
out=$(st2 fsck --repair 2>&1); rc=$?
if [ $rc -eq 4 ] && echo "$out" | grep -qE "wrong size: blob $bid2: .* -> moved to lost\+found/" &&
   echo "$out" | grep -qE "missing: blob $bid3" && [ "$(stat -c %s "$S2/lost+found/$bid2".*)" -eq 100 ]; then
	ok "repair moves a truncated blob aside and reports a deleted one"
else nok "repair moves a truncated blob aside and reports a deleted one" "rc=$rc $(echo "$out" | head -4 | tr '\n' ' ')"; fi
expect_exit 0 "import heals both layers" "healed 2 layer\(s\)" st2 import "$T/exp"
nlf=$(ls "$S2/lost+found" | wc -l)
expect_exit 0 "repair of a healthy store changes nothing and exits 0" "0 problem\(s\) found, 0 repaired, 0 left" \
	st2 fsck --repair
if [ "$(ls "$S2/lost+found" | wc -l)" -eq "$nlf" ] && st2 fsck >/dev/null && st2 verify copied >/dev/null; then
	ok "a second repair is a no-op and the store stays clean"
else nok "a second repair is a no-op and the store stays clean"; fi

# rm and gc.
before=$(find "$S/blobs" -type f | wc -l)
check "rm removes a tag and its snapshot" st rm v2
if ! st ls | grep -q "^v2 "; then ok "the removed snapshot is gone from ls"; else nok "the removed snapshot is gone from ls"; fi
out=$(st gc --grace 0)
after=$(find "$S/blobs" -type f | wc -l)
if [ "$after" -eq $((before - 1)) ] && echo "$out" | grep -q "removed 1 blob"; then ok "gc frees the layer only v2 used"
else nok "gc frees the layer only v2 used" "$before -> $after: $out"; fi
check "fsck is clean after rm and gc, base intact" bash -c "'$BIN' --store '$S' fsck && '$BIN' --store '$S' show base >/dev/null"

# A read-only store: reads work, writes get a clear error.
mkdir -p "$T/ro"
if mount --bind "$S" "$T/ro" 2>/dev/null && mount -o remount,bind,ro "$T/ro" 2>/dev/null; then
	MOUNTS+=("$T/ro")
	if "$BIN" --store "$T/ro" ls | grep -qE "^base[ ,]"; then ok "a read-only store can be listed"; else nok "a read-only store can be listed"; fi
	expect_exit 1 "a write to a read-only store says so" "read-only" "$BIN" --store "$T/ro" tag base other
else
	skip "a read-only store can be listed" "cannot bind-mount read-only here"
	skip "a write to a read-only store says so" "cannot bind-mount read-only here"
fi

# ENOSPC: a store on a tiny tmpfs.
mkdir -p "$T/small"
if mount -t tmpfs -o size=3M tmpfs "$T/small" 2>/dev/null; then
	MOUNTS+=("$T/small")
	SS=$T/small/store; mkdir "$SS"
	"$BIN" --store "$SS" init >/dev/null
	head -c 512K /dev/urandom > "$T/tiny"; truncate -s 1M "$T/tiny"
	small_id=$("$BIN" --store "$SS" debug ingest "$T/tiny" --tag small 2>&1)
	head -c 4M /dev/urandom > "$T/big"
	out=$("$BIN" --store "$SS" debug ingest "$T/big" --tag big 2>&1); rc=$?
	if [ $rc -ne 0 ] && echo "$out" | grep -q "no space left" && "$BIN" --store "$SS" fsck >/dev/null &&
	   [ "$("$BIN" --store "$SS" show small --json | jq -r .id)" = "$small_id" ] && ! "$BIN" --store "$SS" show big >/dev/null 2>&1; then
		ok "a full disk gives a clear error and leaves the store consistent"
	else nok "a full disk gives a clear error and leaves the store consistent" "rc=$rc $out"; fi
else
	skip "a full disk gives a clear error and leaves the store consistent" "cannot mount tmpfs here"
fi

# --help for every store command.
allhelp=1
for c in init ls show tag rm gc verify fsck export import debug; do
	"$BIN" "$c" --help | grep -q "^usage: strata" || { allhelp=0; echo "# no help for $c"; }
done
[ $allhelp -eq 1 ] && ok "--help works for every store command" || nok "--help works for every store command"

[ "$n" -eq 44 ] || echo "# ran $n tests, planned 44"
exit 0
