#!/usr/bin/env bash
# fs_kinds.sh: one node of every kind in fs/kinds.c's table on a live mount: each has attributes of its
# type, and each operation its row leaves out gives the row's defined refusal (logged with the kind's
# name), never a silent ENOENT; a kind added to the table without a case here fails the suite.
. "$(dirname "$0")/fs_lib.sh"
SRC=${STRATA_SRC:?}
S=$T/store M=$T/mnt
make_image "$T/img"
make_store "$S" base "$T/img"
L=$(st "$S" export base "$T/exp" >/dev/null && ls "$T/exp/layers" | head -1)
setup "mount" mount_store "$S" "$M" --stage-timeout 120
setup "an unfinished import with layers/" mkdir "$M/snapshots/imp" "$M/snapshots/imp/layers"
# an extra file held open, so the import is never idle (an idle one is set aside after 2 s)
exec 9>"$M/snapshots/imp/README"

# kind | path in the mount | type | name in log lines | refusal
KINDS='
ROOT|.|directory|/|EPERM
SNAPSHOTS|snapshots|directory|snapshots/|EPERM
BLOBS|blobs|directory|blobs/|EROFS
MEMORY|memory|directory|memory/|EROFS
SNAPDIR|snapshots/base|directory|a committed snapshot|EROFS
LAYERS|snapshots/base/layers|directory|a committed snapshot'"'"'s layers/|EROFS
MANIFEST|snapshots/base/manifest.json|regular file|a committed manifest.json|EROFS
BLOB|blobs/'"$L"'|regular file|a blob|EROFS
MEMFILE|memory/base|regular file|a memory file|EROFS
STAGEDIR|snapshots/imp|directory|an import|-
STAGELAYERS|snapshots/imp/layers|directory|an import|-
STAGEFILE|snapshots/imp/README|regular file|an import|-
IMPORTS|imports|directory|imports/|EPERM
IMPORTFILE|imports/imp|regular file|an import'"'"'s status file|EROFS
'
rows=$(grep -cE '^	\[FS_K_[A-Z]+\] = \{' "$SRC/fs/kinds.c")
cases=$(grep -c . <<<"$KINDS")
ok "every row of fs/kinds.c has a kind here ($rows rows, $cases kinds)" test "$rows" -eq "$cases"
for k in $(grep -oE '^	\[FS_K_[A-Z]+\]' "$SRC/fs/kinds.c" | tr -d '\t[]' | sed 's/^FS_K_//'); do
	ok "kind $k is covered" grep -q "^$k|" <<<"$KINDS"
done

msg() {  # msg ERRNO: the text tools print for it
	python3 -c 'import errno, os, sys; print(os.strerror(getattr(errno, sys.argv[1])))' "$1"
}
refused() {  # refused ERRNO LOGTEXT COMMAND: the command fails with ERRNO and the log names the place
	local e=$1 text=$2; shift 2
	expect_fail "$(msg "$e")" bash -c "cd '$M' && $*" && grep -qF -- "$text: refused ($e)" "$S.log"
}

while IFS='|' read -r kind path type name refuse; do
	[ -n "$kind" ] || continue
	# (an empty file is a "regular empty file")
	ok "$kind ($path): stat says $type" bash -c "[ \"\$(stat -c %F '$M/$path' | sed 's/ empty//')\" = '$type' ]"
	[ "$refuse" = - ] && continue
	if [ "$type" = directory ]; then
		# mkdir reaches every directory kind (the kernel looks the new name up first)
		case $kind in
		SNAPSHOTS) ;;  # takes mkdir: an import
		*) ok "$kind: mkdir refused with $refuse" refused "$refuse" "mkdir newdir in $name" "mkdir '$path/newdir'" ;;
		esac
	else
		ok "$kind: open for writing refused with $refuse" \
			refused "$refuse" "open for writing in $name" "exec 3>>'$path'"
	fi
done <<<"$KINDS"
# unlink and rmdir reach a kind only through a name it holds (the kernel looks it up first)
ok "BLOBS: unlink refused with EROFS" refused EROFS "unlink $L in blobs/" "rm -f 'blobs/$L'"
ok "MEMORY: unlink refused with EROFS" refused EROFS "unlink base in memory/" "rm -f memory/base"
ok "ROOT: rmdir refused with EPERM" refused EPERM "rmdir blobs in /" "rmdir blobs"
exec 9>&-
ok "the store is consistent after all of it" st "$S" fsck
finish
