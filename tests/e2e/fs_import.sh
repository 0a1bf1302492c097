#!/usr/bin/env bash
# fs_import.sh: copying snapshots into a mount with cp -r, cp -a, rsync -a, tar -x and mount to mount;
# corrupt, truncated, misnamed, invalid and interrupted copies; rm -r and mv; a full disk.
. "$(dirname "$0")/fs_lib.sh"

SRC=$T/src S=$T/store M=$T/mnt M2=$T/mnt2
make_image "$T/img"
make_store "$SRC" src "$T/img"
st "$SRC" export src "$T/exp" >/dev/null
st "$S" init >/dev/null
setup "mount the empty store" mount_store "$S" "$M"
setup "mount the source store" mount_store "$SRC" "$M2"
layer=$(ls "$T/exp/layers" | head -1)

ok "cp -r imports a snapshot" cp -r "$T/exp" "$M/snapshots/cpr"
ok "it is listed by ls and strata ls" bash -c "ls '$M/snapshots' | grep -qx cpr && '$STRATA' --store '$S' ls | grep -q cpr"
ok "its memory reads back as the image" cmp "$M/memory/cpr" "$T/img"
ok "rsync -a (temp names, renames) imports" rsync -a "$T/exp/" "$M/snapshots/rs/"
ok "tar -x imports" bash -c "mkdir '$M/snapshots/tx' && tar -C '$T/exp' -cf - . | tar -C '$M/snapshots/tx' -xf -"
ok "cp -a imports" cp -a "$T/exp" "$M/snapshots/cpa"
ok "mount-to-mount cp -r imports" cp -r "$M2/snapshots/src" "$M/snapshots/"
ok "all five are committed and verify" bash -c \
	"test \$('$STRATA' --store '$S' tag | wc -l) -eq 5 && '$STRATA' --store '$S' verify >/dev/null"
ok "layers already stored are not stored again" test "$(find "$S/blobs" -type f | wc -l)" -eq 1
ok "nothing left in the store's staging dir" test -z "$(ls -A "$S/tmp")"

cp -r "$T/exp" "$T/bad" && chmod -R u+w "$T/bad"
"$(dirname "$0")/flip_byte" "$T/bad/layers/$layer" 5000
ok "corrupt layer: cp reports Bad message" expect_fail "Bad message" cp -r "$T/bad" "$M/snapshots/corrupt"
ok "corrupt layer: not visible" not_listed "$M" corrupt "$S"
ok "corrupt layer: the log says why" grep -q "corrupt: layers/$layer: bytes do not hash" "$S.log"

cp -r "$T/exp" "$T/short" && chmod -R u+w "$T/short"
truncate -s -4096 "$T/short/layers/$layer"
cp -r "$T/short" "$M/snapshots/short" 2>/dev/null
ok "truncated layer: imports/short says how many bytes came" grep -q "^layers/$layer: .* of .* bytes so far" "$M/imports/short"
ok "truncated layer: not visible" not_listed "$M" short "$S"

cp -r "$T/exp" "$T/renamed" && chmod -R u+w "$T/renamed"
mv "$T/renamed/layers/$layer" "$T/renamed/layers/0123456789abcdef0123456789abcdef"
ok "renamed layer: cp fails" expect_fail "Invalid argument" cp -r "$T/renamed" "$M/snapshots/renamed"
ok "renamed layer: the log names it" grep -q "import renamed: .*0123456789abcdef0123456789abcdef" "$S.log"
ok "renamed layer: not visible" not_listed "$M" renamed "$S"

cp -r "$T/exp" "$T/badjson" && chmod -R u+w "$T/badjson"
echo '{"version": 1, "mem_size": 4096}' >"$T/badjson/manifest.json"
ok "invalid manifest: cp reports Invalid argument" expect_fail "Invalid argument" cp -r "$T/badjson" "$M/snapshots/badjson"
ok "invalid manifest: log line" grep -q "import badjson: manifest.json refused" "$S.log"
ok "invalid manifest: not visible" not_listed "$M" badjson "$S"
echo '{"version": 1, "mem_size": ' >"$T/badjson/manifest.json"
cp -r "$T/badjson" "$M/snapshots/cutjson" 2>/dev/null
ok "cut-off manifest: imports/ says it is not a whole JSON object yet" \
	grep -q "^manifest.json: .*not yet a whole JSON object" "$M/imports/cutjson"
ok "cut-off manifest: not visible" not_listed "$M" cutjson "$S"

cp -r "$T/exp" "$T/nolayer" && chmod -R u+w "$T/nolayer" && rm "$T/nolayer/layers/$layer"
cp -r "$T/nolayer" "$M/snapshots/nolayer" 2>/dev/null
ok "manifest naming a missing layer: not visible" not_listed "$M" nolayer "$S"
ok "missing layer: the import is abandoned with a log line" \
	wait_for 10 grep -q "import nolayer: abandoned (layer $layer never arrived" "$S.log"
ok "missing layer: the staging name is free again" wait_for 5 bash -c "! stat '$M/snapshots/nolayer'"

ok "stray file in a snapshot dir is accepted and ignored" bash -c \
	"mkdir '$M/snapshots/stray' && echo hi >'$M/snapshots/stray/README' && grep -q 'import stray: README: not part of a snapshot' '$S.log'"
ok "mkdir of an existing tag is EEXIST" expect_fail "File exists" mkdir "$M/snapshots/cpr"

# Interrupted copies: a writer killed mid-layer, and rsync killed mid-way.
mkdir "$M/snapshots/intr" "$M/snapshots/intr/layers" && cp "$T/exp/manifest.json" "$M/snapshots/intr/"
python3 -c "
import os, sys, time
fd = os.open('$M/snapshots/intr/layers/$layer', os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, open('$T/exp/layers/$layer', 'rb').read(8192))
print('ready', flush=True)
time.sleep(30)
" >"$T/py.out" &
wpid=$!
wait_for 5 grep -q ready "$T/py.out"
kill -9 $wpid; wait $wpid 2>/dev/null
ok "killed writer: not visible" not_listed "$M" intr "$S"
ok "killed writer: the log says the layer closed unfinished" \
	wait_for 5 grep -q "import intr: layers/$layer closed unfinished (8192 of .* bytes so far)" "$S.log"

head -c 8388608 /dev/urandom >"$T/big" && st "$SRC" debug ingest "$T/big" --tag big >/dev/null && st "$SRC" export big "$T/bigexp" >/dev/null
rsync -a --bwlimit=2000 "$T/bigexp/" "$M/snapshots/rsk/" 2>/dev/null &
rpid=$!
sleep 1
for p in $(pids_of rsync "--bwlimit=2000 $T/bigexp/"); do kill -9 "$p" 2>/dev/null; done
wait $rpid 2>/dev/null
ok "killed rsync: not visible" not_listed "$M" rsk "$S"
ok "killed rsync: abandoned and cleaned up" wait_for 10 grep -q "import rsk: abandoned" "$S.log"
ok "killed rsync: store consistent, no staging files left" bash -c \
	"'$STRATA' --store '$S' fsck >/dev/null && test -z \"\$(ls -A '$S/tmp')\""

ok "rm -r removes a tag" bash -c "rm -r '$M/snapshots/cpa' && ! '$STRATA' --store '$S' tag | grep -q cpa"
ok "rm -r: gone from the mount" not_listed "$M" cpa "$S"
ok "mv renames a tag" bash -c "mv '$M/snapshots/rs' '$M/snapshots/rs2' && '$STRATA' --store '$S' tag | grep -q rs2"
ok "mv: the new name reads" cmp "$M/memory/rs2" "$T/img"
# the import a cp -r has just committed lingers under its name for a while: mv renames its tag
ok "mv right after cp -r renames the new tag (not EBUSY)" bash -c "cp -r '$T/exp' '$M/snapshots/cpmv' &&
	mv '$M/snapshots/cpmv' '$M/snapshots/cpmv2' && '$STRATA' --store '$S' tag | grep -q '^cpmv2 ' &&
	! '$STRATA' --store '$S' tag | grep -q '^cpmv '"
ok "... the old name is gone from the mount, the new one reads" bash -c \
	"! ls '$M/snapshots' | grep -qx cpmv && cmp '$M/memory/cpmv2' '$T/img'"
ok "mv onto an existing tag is refused" expect_fail "File exists" mv -T "$M/snapshots/tx" "$M/snapshots/cpr"

# A full disk: a store on a 2 MiB tmpfs cannot take an 8 MiB layer.
F=$T/full
mkdir -p "$F" && mount -t tmpfs -o size=2m tmpfs "$F" && MOUNTS+=("$F")
st "$F/s" init >/dev/null
setup "mount a store on a small disk" mount_store "$F/s" "$T/mfull"
ok "full disk: cp reports No space left" expect_fail "No space left on device" cp -r "$T/bigexp" "$T/mfull/snapshots/big"
ok "full disk: not visible, log says why" bash -c \
	"! ls '$T/mfull/snapshots' | grep -q big && grep -q 'import big: .*No space left' '$F/s.log'"
ok "full disk: store consistent" st "$F/s" fsck
"$STRATA" umount "$T/mfull" 2>/dev/null
finish
