#!/usr/bin/env bash
# fs_agree.sh: the mount and the CLI agree: a tag removed between two polls is not reachable, rm of a
# snapshot's file removes the snapshot for both, and strata gc during an import through the mount.
. "$(dirname "$0")/fs_lib.sh"

SRC=$T/src S=$T/store M=$T/mnt
make_image "$T/img"
make_store "$SRC" src "$T/img"
st "$SRC" export src "$T/exp" >/dev/null
make_store "$S" base "$T/img"
L=$(ls "$T/exp/layers" | head -1)
id=$(st "$S" ls | awk '$1=="base"{print $2}')
# a slow poller: the tag below is created and removed between two of its looks at the index
setup "mount with a 3 s poll" mount_store "$S" "$M" --poll-ms 3000

# 6. A tag created, looked up through the mount and removed within one poll is invalidated.
ok "a new tag is visible at once" bash -c "st '$S' tag '$id' quick >/dev/null && stat '$M/snapshots/quick' >/dev/null"
ok "... and its memory file" stat "$M/memory/quick"
st "$S" tag -d quick >/dev/null
ok "removed by the CLI, it is gone from the mount within a poll" \
	wait_for 5 bash -c "! stat '$M/snapshots/quick' && ! stat '$M/memory/quick'"
ok "an import under that name works" bash -c "cp -r '$T/exp' '$M/snapshots/quick' && st '$S' tag | grep -q '^quick'"
qid=$(st "$S" ls | awk '$1=="quick"{print $2}')
st "$S" tag "$id" moved >/dev/null && stat "$M/snapshots/moved" >/dev/null
st "$S" tag -f "$qid" moved >/dev/null
ok "a tag moved by the CLI shows the other snapshot within a poll" wait_for 5 bash -c \
	"test \"\$(python3 -c \"import os; print(os.getxattr('$M/snapshots/moved', 'user.strata.id').decode())\")\" = '$qid'"

# 7. Removing a file of a snapshot removes the snapshot, for the mount and the CLI alike.
st "$S" tag "$id" victim >/dev/null
ok "rm of a snapshot's manifest.json exits 0" rm "$M/snapshots/victim/manifest.json"
ok "the CLI no longer has the tag" bash -c "! st '$S' tag | grep -q '^victim'"
ok "the mount no longer lists it" bash -c "! ls '$M/snapshots' | grep -qx victim"
ok "the log says why" grep -q "rm snapshots/victim/manifest.json: a snapshot is whole or not at all: tag victim removed" "$S.log"
ok "rm -r of what is left exits 0" rm -r "$M/snapshots/victim"
st "$S" tag "$id" victim2 >/dev/null
ok "rm of a layer alone removes the snapshot too" bash -c \
	"rm '$M/snapshots/victim2/layers/$L' && ! st '$S' tag | grep -q '^victim2'"
ok "... and the mount lets go of the name within a poll" wait_for 6 bash -c "! stat '$M/snapshots/victim2'"
ok "after that the name takes a new import" bash -c "cp -r '$T/exp' '$M/snapshots/victim2' && st '$S' tag | grep -q '^victim2'"
ok "rm -r of a whole snapshot still works" bash -c "rm -r '$M/snapshots/victim2' && ! st '$S' tag | grep -q '^victim2'"

# 8. strata gc during an import that matched an old unreferenced blob.
head -c 131072 /dev/urandom >"$T/img3" && st "$SRC" debug ingest "$T/img3" --tag g >/dev/null && st "$SRC" export g "$T/gexp" >/dev/null
st "$S" import "$T/gexp" --tag g >/dev/null && st "$S" rm g >/dev/null
G=$(ls "$T/gexp/layers" | head -1)
touch -d '3 days ago' "$S/blobs/${G:0:2}/$G"
mkdir "$M/snapshots/gi" "$M/snapshots/gi/layers" && cp "$T/gexp/manifest.json" "$M/snapshots/gi/"
python3 -c "
import os, sys, time
src = open('$T/gexp/layers/$G', 'rb').read()
fd = os.open('$M/snapshots/gi/layers/$G', os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, src[:8192])
open('$T/gi.ready', 'w').close()
while not os.path.exists('$T/gi.go'):
    time.sleep(0.05)
os.write(fd, src[8192:])
try:
    os.close(fd)
    print('closed')
except OSError as e:
    print('close failed:', e)
" >"$T/gi.out" 2>&1 &
gpid=$!
wait_for 10 test -e "$T/gi.ready"
setup "strata gc runs while the import is half way" st "$S" gc
touch "$T/gi.go"; wait $gpid
ok "the import's close succeeds" grep -qx closed "$T/gi.out"
ok "the snapshot is committed and verifies" bash -c "st '$S' tag | grep -q '^gi' && st '$S' verify gi >/dev/null"
# 10. `created` survives JSON tools: a reformatted manifest imports as the same snapshot.
bid=$(st "$S" tag | awk '$1=="base"{print $2}')
ok "created is an RFC 3339 string" bash -c \
	"jq -e '.created | test(\"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\\\.[0-9]{9}Z\$\")' '$M/snapshots/base/manifest.json'"
reformat() {    # reformat NAME COMMAND: a copy of base whose manifest.json went through COMMAND
	cp -r "$T/exp" "$T/$1" && chmod -R u+w "$T/$1" && st "$S" export base "$T/$1.src" >/dev/null &&
		bash -c "$2" <"$T/$1.src/manifest.json" >"$T/$1/manifest.json" && rm -r "$T/$1/layers" && cp -r "$T/$1.src/layers" "$T/$1/"
}
export -f reformat
ok "jq . reformats it" reformat jqfmt "jq ."
ok "... and the mount imports it as the same snapshot" bash -c \
	"cp -r '$T/jqfmt' '$M/snapshots/jqfmt' && test \"\$(st '$S' tag | awk '\$1==\"jqfmt\"{print \$2}')\" = '$bid'"
ok "python json with sorted keys and indentation" reformat pyfmt \
	"python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), indent=3, sort_keys=False)[::1])'"
ok "... strata import takes it as the same snapshot" bash -c \
	"st '$S' import '$T/pyfmt' --tag pyfmt >/dev/null && test \"\$(st '$S' tag | awk '\$1==\"pyfmt\"{print \$2}')\" = '$bid'"
if command -v node >/dev/null; then
	ok "node JSON.parse/stringify" reformat nodefmt \
		"node -e 'let s=\"\";process.stdin.on(\"data\",d=>s+=d).on(\"end\",()=>console.log(JSON.stringify(JSON.parse(s),null,1)))'"
	ok "... imports as the same snapshot" bash -c \
		"cp -r '$T/nodefmt' '$M/snapshots/nodefmt' && test \"\$(st '$S' tag | awk '\$1==\"nodefmt\"{print \$2}')\" = '$bid'"
else
	n=$((n + 1)); echo "ok $n # SKIP node is not installed"
	n=$((n + 1)); echo "ok $n # SKIP node is not installed"
fi
ok "store is consistent" st "$S" fsck
finish
