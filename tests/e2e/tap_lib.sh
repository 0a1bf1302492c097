# tap_lib.sh: the TAP case helpers and store shorthands the registry scripts (oci, oci_lazy, oci_ws) share.
# shellcheck shell=bash
# The caller sets BIN, N (cases planned), n (cases so far) and fails (failures so far).
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && echo "# $2"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
is() { # name, got, want
	if [ "$2" = "$3" ]; then ok "$1"; else nok "$1" "got '$2', want '$3'"; fi
}
skip_rest() { while [ "$n" -lt "$N" ]; do skip "$1" "$2"; done; }
st() { local s=$1; shift; "$BIN" --store "$s" "$@"; }
newstore() { mkdir -p "$1" && st "$1" init >/dev/null; }
