#!/usr/bin/env bash
# tests/harness/tmpfs_tmp.sh COMMAND...: runs COMMAND in a mount namespace of
# its own where /tmp is a fresh tmpfs, so the suites' many short-lived
# stores, mounts and layouts do not wait on the disk's inode allocator and
# journal (docs/testing.md has the figures). Where the checkout itself is
# under /tmp, its top directory there is bound back into the new /tmp at
# the same path. Mounts made inside (FUSE included) stay inside.
set -euo pipefail
if [ "${STRATA_TMPFS_INNER:-}" != 1 ]; then
	export STRATA_TMPFS_INNER=1
	exec unshare --mount --propagation private -- "$0" "$@"
fi
keep=()
for p in "$PWD" "$@"; do
	case $p in /tmp/?*) top=${p#/tmp/}; keep+=("${top%%/*}") ;; esac
done
old=$(mktemp -d /run/strata-oldtmp.XXXXXX)
mount --bind /tmp "$old"
mount -t tmpfs -o mode=1777 strata-tmp /tmp
for k in "${keep[@]}"; do
	[ -e "$old/$k" ] || continue
	mountpoint -q "/tmp/$k" && continue
	mkdir -p "/tmp/$k"
	mount --bind "$old/$k" "/tmp/$k"
done
unset STRATA_TMPFS_INNER
exec "$@"
