#!/usr/bin/env bash
# fs_conformance.sh: each operation of the conformance table in docs/fs.md, run with a real tool on a
# live mount; the suite fails when a result departs from the table, or a row and a case do not match.
. "$(dirname "$0")/fs_lib.sh"
DOC=${STRATA_SRC:?}/docs/fs.md
S=$T/store M=$T/mnt
make_image "$T/img"
make_store "$S" base "$T/img"
st "$S" export base "$T/exp" >/dev/null
id=$(st "$S" tag | awk '$1=="base"{print $2}')
L=$(ls "$T/exp/layers" | head -1)
st "$S" tag "$id" t1 >/dev/null && st "$S" tag "$id" victim >/dev/null
head -c 65536 /dev/urandom >"$T/img2" && st "$S" debug ingest "$T/img2" --tag other >/dev/null
other=$(st "$S" tag | awk '$1=="other"{print $2}')
setup "mount" mount_store "$S" "$M" --stage-timeout 120
P=$M/snapshots
mkdir "$P/imp" "$P/imp/layers" "$P/imp2" && cp "$T/exp/manifest.json" "$T/m.json" && echo x >"$P/imp2/README"
head -c 8192 /dev/urandom >"$T/8k"

# The table: id -> expected result, from docs/fs.md.
declare -A want
while IFS='|' read -r _ rid _ _ res _; do
	rid=$(echo "$rid" | tr -d ' `') res=$(echo "$res" | tr -d ' ')
	[ "$rid" = id ] || want[$rid]=$res
done < <(sed -n '/^### Conformance: expected results/,/^## /p' "$DOC" | grep -E '^\| [a-z]')
ok "the table in docs/fs.md has rows" test "${#want[@]}" -gt 40

# errno names by their messages (what the tools print)
python3 -c '
import errno, os
for code, name in sorted(errno.errorcode.items()):
    print({"ENOTSUP": "EOPNOTSUPP", "EWOULDBLOCK": "EAGAIN", "EDEADLOCK": "EDEADLK"}.get(name, name), os.strerror(code), sep="\t")
' >"$T/errnos"
result() {  # result COMMAND: OK, or the errno name the tool's message names
	local err
	if err=$(cd "$M" && bash -c "$1" 2>&1 >/dev/null); then
		echo OK
		return
	fi
	# tools that word an errno their own way: mv says EINVAL from rename(2)
	# as "to a subdirectory of itself", getfattr says ENODATA "No such attribute"
	case "$err" in
	*"to a subdirectory of itself"*) echo EINVAL; return ;;
	*"No such attribute"*) echo ENODATA; return ;;
	esac
	while IFS=$'\t' read -r name text; do
		if [[ "$err" == *"$text"* ]]; then
			echo "$name"
			return
		fi
	done <"$T/errnos"
	echo "UNKNOWN($err)"
}
declare -A seen
case_() {   # case_ ID COMMAND: the command's result is the table's
	local cid=$1 got
	seen[$cid]=1
	got=$(result "$2")
	n=$((n + 1))
	if [ "${want[$cid]:-}" = "$got" ]; then
		echo "ok $n - $cid: $got"
	else
		echo "not ok $n - $cid: got $got, the table says ${want[$cid]:-(no row)}"
		failed=$((failed + 1))
	fi
}

case_ create-root ': > x'
case_ create-snapshots ': > snapshots/x'
case_ create-blobs ': > blobs/x'
case_ create-snap ': > snapshots/base/x'
case_ create-imp "cp '$T/m.json' snapshots/imp/manifest.json"
case_ create-extra 'echo hi > snapshots/imp/README'
case_ open-excl 'dd if=/dev/null of=snapshots/imp/manifest.json conv=excl status=none'
case_ open-trunc-snap ': > snapshots/base/manifest.json'
case_ open-append-snap ': >> snapshots/base/manifest.json'
case_ open-rdwr-snap 'exec 3<> snapshots/base/manifest.json'
case_ open-read-snap 'cat snapshots/base/manifest.json'
case_ write-behind "cat '$T/8k' > snapshots/imp/layers/$L && dd if='$T/8k' of=snapshots/imp/layers/$L bs=4096 count=1 seek=0 conv=notrunc status=none"
case_ read-arriving-layer "cat '$T/8k' > snapshots/imp/layers/$L && cat snapshots/imp/layers/$L"
case_ rename-in-imp "cp '$T/m.json' snapshots/imp/.m.tmp && mv snapshots/imp/.m.tmp snapshots/imp/manifest.json"
case_ rename-out-of-imp 'mv snapshots/imp/README snapshots/base/README'
case_ rename-snap-file 'mv snapshots/base/manifest.json snapshots/base/m2'
case_ rename-tag 'mv snapshots/t1 snapshots/t2'
case_ rename-onto-tag 'mv -T snapshots/t2 snapshots/base'
case_ unlink-blob "rm -f blobs/$L"
case_ unlink-mem 'rm -f memory/base'
case_ unlink-snap-file 'rm -f snapshots/victim/manifest.json'
case_ unlink-imp 'rm snapshots/imp/README'
case_ mkdir-root 'mkdir x'
case_ mkdir-badtag 'mkdir snapshots/.x'
case_ mkdir-tag 'mkdir snapshots/base'
case_ mkdir-mem 'mkdir memory/x'
case_ mkdir-snap 'mkdir snapshots/base/x'
case_ mkdir-extra 'mkdir snapshots/imp/sub'
case_ rmdir-snap-nonempty 'rmdir snapshots/base'
case_ rmdir-top 'rmdir blobs'
case_ rmdir-extra 'rmdir snapshots/imp/sub'
case_ truncate-snap 'truncate -s 0 snapshots/base/manifest.json'
case_ truncate-grow-layer "cat '$T/8k' > snapshots/imp/layers/$L && truncate -s +4096 snapshots/imp/layers/$L"
case_ truncate-shrink-layer "cat '$T/8k' > snapshots/imp/layers/$L && truncate -s 4096 snapshots/imp/layers/$L"
case_ truncate-shrink-manifest "head -c 100 '$T/m.json' > snapshots/imp/manifest.json && truncate -s 10 snapshots/imp/manifest.json"
case_ chmod-snap 'chmod 600 snapshots/base/manifest.json'
ok "chmod on a snapshot's file is not kept" test "$(stat -c %a "$P/base/manifest.json")" = 444
case_ chmod-mem 'chmod 600 memory/base'
case_ chmod-root 'chmod 700 .'
case_ chown-snap 'chown 0:0 snapshots/base/manifest.json'
case_ chown-imp "cp '$T/m.json' snapshots/imp/manifest.json && chown 0:0 snapshots/imp/manifest.json"
case_ utimes-snap 'touch -d 2001-01-01 snapshots/base/manifest.json'
ok "touch on a snapshot's file is not kept" test "$(stat -c %Y "$P/base/manifest.json")" -gt 978307200
case_ utimes-mem 'touch memory/base'
case_ link-imp 'ln snapshots/imp/manifest.json snapshots/imp/m2'
case_ link-blob "ln blobs/$L snapshots/imp/layers/$L.x"
case_ symlink-imp 'ln -s x snapshots/imp/y'
case_ symlink-snapshots 'ln -s base snapshots/alias'
case_ mknod-imp 'mknod snapshots/imp/n c 1 3'
case_ mkfifo-imp 'mkfifo snapshots/imp/f'
case_ setxattr-imp-user 'setfattr -n user.x -v 1 snapshots/imp/manifest.json'
case_ setxattr-imp-strata "setfattr -n user.strata.id -v $id snapshots/imp/manifest.json"
case_ setxattr-snap-same "setfattr -n user.strata.id -v $id snapshots/base"
case_ setxattr-snap-other "setfattr -n user.strata.id -v $other snapshots/base"
case_ setxattr-snap-user 'setfattr -n user.x -v 1 snapshots/base/manifest.json'
case_ removexattr-snap 'setfattr -x user.strata.id snapshots/base'
case_ getxattr-security 'getfattr -n security.selinux snapshots/base/manifest.json'
case_ getxattr-missing 'getfattr -n user.nothing snapshots/base/manifest.json'
case_ getxattr-id 'getfattr -n user.strata.id snapshots/base'
case_ rm-import-status 'rm imports/imp2'
case_ create-imports ': > imports/x'
case_ write-after-unlink "exec 3> snapshots/imp/layers/$L && rm snapshots/imp/layers/$L && echo x >&3"
case_ write-after-rm-import 'mkdir snapshots/x && exec 3> snapshots/x/manifest.json && rm -r snapshots/x && echo x >&3'

ok "link, symlink, mknod refusals are logged with the place" bash -c \
	"grep -q 'link m2 in an import: refused (EPERM)' '$S.log' && grep -q 'symlink y in an import: refused' '$S.log' && grep -q 'mknod n in an import: refused' '$S.log'"
ok "an extra directory's log line names the import" grep -q "import imp: directory sub: not part of a snapshot" "$S.log"
missing=()
for k in "${!want[@]}"; do [ -n "${seen[$k]:-}" ] || missing+=("$k"); done
ok "every row of the table has a case" test "${#missing[@]}" -eq 0
[ "${#missing[@]}" -eq 0 ] || echo "# rows without a case: ${missing[*]}"
ok "the store is consistent after all of it" st "$S" fsck
finish
