#!/usr/bin/env bash
# abi.sh: libstrata.so's ABI against the committed baseline mount/api/libstrata.abi (abidiff, libabigail), and that the check catches a removed call (TAP).
set -u
SRC=${STRATA_SRC:?} B=${STRATA_BUILD:?}
LIB=$B/libstrata.so BASE=$SRC/mount/api/libstrata.abi SUPP=$SRC/mount/api/libstrata.abignore
T=$(mktemp -d /tmp/strata-abi.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "1..2"
skip_all() {
	echo "ok 1 - libstrata.so's ABI is the baseline's # SKIP $1"
	echo "ok 2 - the check fails on a library that lacks a call of the baseline # SKIP $1"
	exit 0
}
command -v abidiff >/dev/null || skip_all "abidiff is missing (Debian's abigail-tools; .ci/deps installs it)"
readelf -S "$LIB" | grep -q '\.debug_info' || skip_all "libstrata.so has no DWARF (a build without -g, e.g. -Dbuildtype=release)"
# Only what strata.h defines is compared (--headers-dir2, --drop-private-types);
# the opaque handles' insides are left out (libstrata.abignore).
diffabi() { abidiff --suppressions "$SUPP" --headers-dir2 "$SRC/mount/api" --drop-private-types "$@"; }

# The soname and version node the baseline was taken of: a library that
# changed either on purpose breaks its ABI knowingly (docs/library.md says
# how to refresh the baseline then).
base_soname=$(grep -o "soname='[^']*'" "$BASE" | head -1 | cut -d"'" -f2)
base_node=$(grep -o "version='STRATA_[^']*'" "$BASE" | sort -u | cut -d"'" -f2 | tr '\n' ' ')
soname=$(readelf -d "$LIB" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
node=$(nm -D --defined-only "$LIB" | sed -n 's/.*@@\(STRATA_[^ ]*\)$/\1/p' | sort -u | tr '\n' ' ')
if [ "$soname" != "$base_soname" ] || [ "$node" != "$base_node" ]; then
	echo "ok 1 - libstrata.so's ABI is the baseline's # SKIP the soname or version node changed ($base_soname $base_node-> $soname $node): refresh mount/api/libstrata.abi (docs/library.md)"
else
	diffabi "$BASE" "$LIB" >"$T/report" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		echo "ok 1 - libstrata.so's ABI is the baseline's ($soname, $node)"
	else
		echo "not ok 1 - libstrata.so's ABI differs from mount/api/libstrata.abi (abidiff status $rc): a change of strata.h's ABI needs a new version node or soname, an addition a refreshed baseline (docs/library.md)"
		sed 's/^/# /' "$T/report" | head -60
	fi
fi
# The same objects linked again without strata_pool_get (libstrata.a is
# one relocatable object with its DWARF): a library that dropped a call.
sed '/strata_pool_get;/d' "$B/libstrata.map" >"$T/less.map"
san=
nm "$B/libstrata.a" 2>/dev/null | grep -q ' U __asan_' && san=-fsanitize=address,undefined
nm "$B/libstrata.a" 2>/dev/null | grep -q ' U __ubsan_' && [ -z "$san" ] && san=-fsanitize=undefined
# shellcheck disable=SC2086
if ! cc -shared $san -o "$T/libstrata.so" -Wl,-soname,"$soname" -Wl,--version-script="$T/less.map" \
	-Wl,--whole-archive "$B/libstrata.a" -Wl,--no-whole-archive -llmdb -ljansson -lfuse3 -pthread \
	>"$T/link.log" 2>&1; then
	echo "not ok 2 - cannot link libstrata.a without strata_pool_get: $(head -c 300 "$T/link.log")"
	exit 1
fi
diffabi "$BASE" "$T/libstrata.so" >"$T/report2" 2>&1
rc=$?
if [ $((rc & 8)) -ne 0 ] && grep -q 'strata_pool_get' "$T/report2"; then
	echo "ok 2 - the check fails on a library that lacks a call of the baseline (abidiff status $rc names strata_pool_get)"
else
	echo "not ok 2 - abidiff did not report the removed strata_pool_get (status $rc)"
	sed 's/^/# /' "$T/report2" | head -20
fi
