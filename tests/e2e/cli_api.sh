#!/bin/bash
# cli_api.sh: the commands built on libstrata's public API (strata run and pool with their snapshots, tag, rm, gc, push, pull, import, ls, export, verify, init, show) include nothing of strata's but <strata.h> and the command's own cli_api.h, directly or through another header (TAP).
set -u
SRC=${STRATA_SRC:?}
CC=${CC:-cc}
T=$(mktemp -d /tmp/strata-cli-api.XXXXXX)
trap 'rm -rf "$T"' EXIT
# The files of mount/ built on strata.h alone.
FILES="cmd_run.c cmd_pool.c cmd_snap.c cmd_tag.c cmd_gc.c cmd_xfer.c cmd_import.c cmd_ls.c lists.c cmd_export.c cmd_verify.c cmd_init.c cmd_show.c cmd_fsck.c exposed.c"
echo "1..$(($(echo $FILES | wc -w) + 1))"
n=0

# What FILE includes of strata's, transitively (the compiler's own list,
# not a grep): every header of the tree but mount/api/strata.h and
# mount/cli_api.h, one a line; empty if it is built on the API alone.
foreign() {
	local f=$1 deps
	deps=$("$CC" -MM -MG -D_GNU_SOURCE -I"$SRC" -I"$SRC/mount/api" -I"$SRC/mount" "$f" 2>"$T/cc.err") ||
		{ echo "(cc -MM failed: $(head -c 200 "$T/cc.err"))"; return; }
	echo "$deps" | tr ' \\' '\n\n' | sed '/^$/d; /:$/d' | while read -r h; do
		case "$h" in
		*.c) ;;
		/usr/*) ;;  # libc and the system's headers
		*) h=$(realpath -m --relative-to="$SRC" "$h")
		   case "$h" in
		   mount/api/strata.h|mount/cli_api.h) ;;
		   *) echo "$h" ;;
		   esac ;;
		esac
	done
}

for f in $FILES; do
	n=$((n + 1))
	bad=$(foreign "$SRC/mount/$f" | tr '\n' ' ')
	if [ -z "$bad" ]; then
		echo "ok $n - mount/$f includes only <strata.h>, cli_api.h and the system's headers"
	else
		echo "not ok $n - mount/$f includes module headers: $bad(build it on strata.h: what it lacks is an API gap, docs/library.md)"
	fi
done
# The check catches a regression: cmd_run.c with a module header added.
n=$((n + 1))
{ echo '#include "vmm/vmm.h"'; cat "$SRC/mount/cmd_run.c"; } >"$T/cmd_run.c"
bad=$(foreign "$T/cmd_run.c" | tr '\n' ' ')
case "$bad" in
*vmm/vmm.h*) echo "ok $n - the check fails on a copy of cmd_run.c that includes vmm/vmm.h ($bad)" ;;
*) echo "not ok $n - a copy of cmd_run.c including vmm/vmm.h passed the check (found: '$bad')" ;;
esac
