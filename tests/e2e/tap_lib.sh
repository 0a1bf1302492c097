# tap_lib.sh: the TAP case helpers, store shorthands and loopback registry the registry scripts (oci, oci_lazy,
# oci_ws, cli_habits) share.
# shellcheck shell=bash
# The caller sets BIN, N (cases planned), n (cases so far) and fails (failures so far), and calls
# scratch NAME for T (a temp dir), PIDS and MOUNTS (what its cleanup ends).
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && echo "# $2"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
is() { # name, got, want
	if [ "$2" = "$3" ]; then ok "$1"; else nok "$1" "got '$2', want '$3'"; fi
}
# A temp dir T, removed at exit with the mounts in MOUNTS (unmounted) and
# the processes in PIDS (killed) first; KEEP=1 keeps T to look at.
scratch() { # NAME
	T=$(mktemp -d "/tmp/strata-e2e-$1.XXXXXX")
	PIDS=()
	MOUNTS=()
	trap scratch_cleanup EXIT
}
scratch_cleanup() {
	local m p
	for m in "${MOUNTS[@]}"; do "$BIN" umount "$m" >/dev/null 2>&1 || umount -l "$m" 2>/dev/null; done
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	chmod -R u+w "$T" 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}
skip_rest() { while [ "$n" -lt "$N" ]; do skip "$1" "$2"; done; }
st() { local s=$1; shift; "$BIN" --store "$s" "$@"; }
newstore() { mkdir -p "$1" && st "$1" init >/dev/null; }
# Debian's docker-registry on a free loopback port, its files under $T/NAME.
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_registry() { # name [htpasswd file] [tls: "cert key"] -> sets REG_PORT
	local name=$1 auth=${2:-} tls=${3:-} port scheme=http
	port=$(freeport)
	mkdir -p "$T/$name"
	{
		echo "version: 0.1"
		echo "log: {level: error}"
		echo "storage: {filesystem: {rootdirectory: $T/$name}, delete: {enabled: true}}"
		if [ -n "$tls" ]; then
			echo "http: {addr: 127.0.0.1:$port, tls: {certificate: ${tls% *}, key: ${tls#* }}}"
		else
			echo "http: {addr: 127.0.0.1:$port}"
		fi
		[ -n "$auth" ] && echo "auth: {htpasswd: {realm: strata-test, path: $auth}}"
	} >"$T/$name.yml"
	[ -n "$tls" ] && scheme=https
	docker-registry serve "$T/$name.yml" >"$T/$name.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 1 100); do
		curl -sk -o /dev/null "$scheme://127.0.0.1:$port/v2/" && { REG_PORT=$port; return 0; }
		sleep 0.1
	done
	return 1
}
