#!/usr/bin/env bash
# fs_writers.sh: every ordinary writer imports into a mount (shell redirections, tee, dd, cp, install,
# rsync --inplace, tar, cpio, python, pv); unfinished imports say what they lack and never block a
# retry; extra files are ignored with exit 0; rsync onto a committed snapshot is a no-op.
. "$(dirname "$0")/fs_lib.sh"

SRC=$T/src S=$T/store M=$T/mnt
make_image "$T/img"
make_store "$SRC" src "$T/img"
st "$SRC" export src "$T/exp" >/dev/null
st "$S" init >/dev/null
setup "mount the empty store" mount_store "$S" "$M" --stage-timeout 60
L=$(ls "$T/exp/layers" | head -1)
E=$T/exp
P=$M/snapshots

committed() {   # committed NAME: strata tag lists NAME and the snapshot verifies
	st "$S" tag | awk '{print $1}' | grep -qx "$1" && st "$S" verify "$1" >/dev/null
}
imports() {     # imports NAME WRITER-COMMAND: mkdir NAME and NAME/layers, run the writer, NAME is committed
	local name=$1; shift
	mkdir "$P/$name" "$P/$name/layers" && bash -c "$*" && committed "$name"
}
export -f committed imports
export S P E L T

# 1. Writers. bash `>` and dd dup2() the descriptor and close the first one before writing: the
# daemon must not finish a file at its first close.
ok "bash > redirection" imports redir "cat \$E/manifest.json >\$P/redir/manifest.json && cat \$E/layers/\$L >\$P/redir/layers/\$L"
ok "bash { cat; cat; } > into one layer" imports brace \
	"{ head -c 100000 \$E/layers/\$L; tail -c +100001 \$E/layers/\$L; } >\$P/brace/layers/\$L && cat \$E/manifest.json >\$P/brace/manifest.json"
split -b 50000 "$E/layers/$L" "$T/part."
ok "chunked >> appends" imports append \
	"for p in \$T/part.*; do cat \$p >>\$P/append/layers/\$L || exit 1; done; head -c 40 \$E/manifest.json >>\$P/append/manifest.json && tail -c +41 \$E/manifest.json >>\$P/append/manifest.json"
ok "tee" imports tee "tee \$P/tee/manifest.json <\$E/manifest.json >/dev/null && tee \$P/tee/layers/\$L <\$E/layers/\$L >/dev/null"
ok "dd of=" imports dd "dd if=\$E/manifest.json of=\$P/dd/manifest.json status=none && dd if=\$E/layers/\$L of=\$P/dd/layers/\$L bs=64k status=none"
ok "dd conv=fsync" imports ddfs \
	"dd if=\$E/manifest.json of=\$P/ddfs/manifest.json conv=fsync status=none && dd if=\$E/layers/\$L of=\$P/ddfs/layers/\$L bs=64k conv=fsync status=none"
ok "dd oflag=append conv=notrunc, in chunks" imports ddapp \
	"dd if=\$E/manifest.json of=\$P/ddapp/manifest.json oflag=append conv=notrunc status=none && for p in \$T/part.*; do dd if=\$p of=\$P/ddapp/layers/\$L oflag=append conv=notrunc status=none || exit 1; done"
ok "cp --reflink=auto" imports reflink "cp --reflink=auto \$E/manifest.json \$P/reflink/ && cp --reflink=auto \$E/layers/\$L \$P/reflink/layers/"
ok "install -m 0444" imports install "install -m 0444 \$E/manifest.json \$P/install/ && install -m 0444 \$E/layers/\$L \$P/install/layers/"
ok "rsync --inplace" imports inplace "rsync -a --inplace \$E/ \$P/inplace/"
ok "cpio -p" imports cpio "cd \$E && find . | cpio -p --quiet \$P/cpio"
ok "python open('wb')" imports py "python3 -c \"
import shutil
for f in ['manifest.json', 'layers/\$L']:
    with open('\$E/' + f, 'rb') as a, open('\$P/py/' + f, 'wb') as b:
        shutil.copyfileobj(a, b)
\""
ok "pv pipelines" imports pv "pv -q \$E/manifest.json >\$P/pv/manifest.json && pv -q \$E/layers/\$L | cat >\$P/pv/layers/\$L"
ok "tar -x" imports tar "tar -C \$E -cf - . | tar -C \$P/tar -xf -"
ok "layers already stored are not stored again" test "$(find "$S/blobs" -type f | wc -l)" -eq 1
ok "nothing left in the store's staging dir" test -z "$(ls -A "$S/tmp")"

# 2. An import that cannot complete says so, and never blocks a retry.
cp -r "$E" "$T/nolayer" && chmod -R u+w "$T/nolayer" && rm "$T/nolayer/layers/$L"
ok "copy lacking a layer: cp ends, nothing is committed" bash -c "cp -r '$T/nolayer' '$P/short' && ! committed short"
ok "imports/ lists the unfinished import" bash -c "ls '$M/imports' | grep -qx short"
ok "imports/short names the missing layer" grep -q "^layers/$L: missing" "$M/imports/short"
ok "imports/short says what it lacks" grep -q "^lacks: layer $L" "$M/imports/short"
ok "the log says it waits" grep -q "import short: started" "$S.log"
sleep 2.5 # nothing open, idle: the unfinished import is set aside
ok "a retry under the same name imports" bash -c "cp -r '$E' '$P/short' && committed short"
ok "the log says the earlier copy was dropped" grep -q "import short: the earlier unfinished copy (layer $L never arrived" "$S.log"
ok "imports/ no longer lists it" bash -c "! ls '$M/imports' | grep -qx short"
cp -r "$E" "$T/trunc" && chmod -R u+w "$T/trunc" && truncate -s -4096 "$T/trunc/layers/$L"
size=$(stat -c %s "$E/layers/$L")
cp "$E/manifest.json" "$T/m.json"
ok "a truncated layer: imports/ gives how many bytes came" bash -c \
	"mkdir '$P/tr' '$P/tr/layers' && cp '$T/m.json' '$P/tr/manifest.json' && cp '$T/trunc/layers/$L' '$P/tr/layers/' && grep 'layers/$L: $((size - 4096)) of $size bytes' '$M/imports/tr' || { cat '$M/imports/tr'; false; }"
ok "a truncated layer completed by an append commits" bash -c \
	"tail -c 4096 '$E/layers/$L' >>'$P/tr/layers/$L' && committed tr"
ok "rm imports/NAME drops an unfinished import" bash -c \
	"mkdir '$P/gone' && cp '$T/m.json' '$P/gone/manifest.json' && rm '$M/imports/gone' && ! stat '$P/gone' 2>/dev/null && grep -q 'import gone: dropped' '$S.log'"
cp -r "$E" "$T/bad" && chmod -R u+w "$T/bad" && "$(dirname "$0")/flip_byte" "$T/bad/layers/$L" 5000
ok "a corrupt layer is refused at a close with Bad message" expect_fail "Bad message" cp -r "$T/bad" "$P/bad"
ok "imports/bad says the layer was refused" grep -q "^layers/$L: refused" "$M/imports/bad"
printf '{"version": 1}' >"$T/closed.json"
ok "a whole JSON object that is no manifest is refused at close" bash -c \
	"mkdir '$P/badjson' && ! cp '$T/closed.json' '$P/badjson/manifest.json' 2>'$T/err' && grep -q 'Invalid argument' '$T/err'"

# 3. Extra files are ignored, the snapshot is committed, the tool exits 0.
cp -r "$E" "$T/extra" && chmod -R u+w "$T/extra"
echo notes >"$T/extra/README" && mkdir -p "$T/extra/sub/deeper" && echo x >"$T/extra/sub/deeper/f" && echo n >"$T/extra/layers/notes.txt"
ok "cp -r with extras exits 0 and commits" bash -c "cp -r '$T/extra' '$P/ex1' && committed ex1"
ok "rsync -a with extras exits 0 and commits" bash -c "rsync -a '$T/extra/' '$P/ex2/' && committed ex2"
ok "tar -x with extras exits 0 and commits" bash -c "mkdir '$P/ex3' && tar -C '$T/extra' -cf - . | tar -C '$P/ex3' -xf - && committed ex3"
ok "the log says the extras were ignored" grep -q "import ex1: README: not part of a snapshot" "$S.log"

# 4. rsync is idempotent against the mount, xattrs included.
sleep 2.5 # the copies below are of the committed snapshot, not of the import lingering after its commit
ok "the committed snapshot shows no extras" test "$(ls "$P/ex1" | tr '\n' ' ')" = "layers manifest.json "
rsync -a "$P/ex1/" "$T/copy/"
rsync -aX "$P/ex1/" "$T/copyx/"
# directories whose times moved (a file added and removed): rsync then sets their times on the mount
touch -d '2001-01-01' "$T/copy" "$T/copy/layers" "$T/copyx" "$T/copyx/layers"
ok "a copy taken with rsync -X carries user.strata.id" bash -c \
	"python3 -c \"import os; os.getxattr('$T/copyx/manifest.json', 'user.strata.id')\""
ok "rsync -a into a new name" rsync -a "$T/copy/" "$P/rs1/"
sleep 2.5
ok "rsync -a again onto the committed snapshot: a no-op, exit 0" rsync -a "$T/copy/" "$P/rs1/"
ok "rsync -aX of the -X copy imports, exit 0" rsync -aX "$T/copyx/" "$P/rsx/"
sleep 2.5
ok "rsync -aX again onto the committed snapshot: exit 0" rsync -aX "$T/copyx/" "$P/rsx/"
ok "rsync -ac from the export onto it: exit 0" rsync -ac "$E/" "$P/rs1/"
ok "both verify" bash -c "committed rs1 && committed rsx"

# 5. The mount and the CLI agree: a name the CLI just removed takes a new copy at once.
head -c 65536 /dev/urandom >"$T/img2" && st "$SRC" debug ingest "$T/img2" --tag other >/dev/null
st "$SRC" export other "$T/exp2" >/dev/null
ok "rsync, strata rm, rsync again: the snapshot is back" bash -c \
	"rsync -a '$E/' '$P/again/' && st '$S' rm again >/dev/null && rsync -a '$E/' '$P/again/' && committed again"
ok "rsync, strata rm, rsync of another snapshot: that one is imported" bash -c \
	"rsync -a '$E/' '$P/again2/' && st '$S' rm again2 >/dev/null && rsync -a '$T/exp2/' '$P/again2/' && committed again2 && \
	 test \$(python3 -c \"import os; print(os.getxattr('$P/again2', 'user.strata.id').decode())\") = \$(st '$SRC' ls | awk '\$1==\"other\"{print \$2}')"
ok "store is consistent" st "$S" fsck

# Reads racing appends on a multithreaded mount: a read of a staged file in
# memory replied from its buffer while another descriptor's write moved it.
S2=$T/store-mt M2=$T/mnt-mt
st "$S2" init >/dev/null
setup "mount a second store with 4 threads" mount_store "$S2" "$M2" --stage-timeout 60 --threads 4
race() {
	mkdir "$M2/snapshots/race" "$M2/snapshots/race/layers" || return 1
	( while :; do cat "$M2/snapshots/race/manifest.json" >/dev/null 2>&1; done ) &
	local reader=$!
	split -b 16 "$E/manifest.json" "$T/mchunk."
	for c in "$T"/mchunk.*; do cat "$c" >>"$M2/snapshots/race/manifest.json" || { kill $reader; return 1; }; done
	kill $reader; wait $reader 2>/dev/null
	cat "$E/layers/$L" >"$M2/snapshots/race/layers/$L" && st "$S2" verify race >/dev/null
}
ok "a file read while another descriptor appends to it imports whole (4 threads)" race
finish
