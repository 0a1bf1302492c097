#!/usr/bin/env bash
# perms.sh: who can read a store (docs/security.md): under umask 022, as root, nobody reads no blob, layer, export,
# OCI layout, pulled blob or mount log; `init --shared GROUP` lets that group read and nobody else; fsck and
# doctor warn about a store an older strata left 0755, and fsck --repair closes it (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
G="${STRATA_BUILD:-$SRC/build}/vmm/guest/simpleguest.elf"

N=25
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch perms

if [ "$(id -u)" -ne 0 ] || ! id nobody >/dev/null 2>&1 || ! command -v setpriv >/dev/null; then
	skip_rest "who can read a store" "needs root, a nobody user and setpriv(1) to read as another user"
	exit 0
fi
# The group a shared store is given to: one nobody is not in (it gets it only as asked below).
GRP=daemon
getent group "$GRP" >/dev/null || { skip_rest "who can read a store" "no group $GRP"; exit 0; }

# What every user creates with; mktemp's 0700 directory would hide the store
# by itself, so the store's own modes are what is tested.
umask 022
chmod 0755 "$T"
asnobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
asgroup() { setpriv --reuid=nobody --regid=nogroup --groups="$GRP" "$@"; }

# readable_by WHO PATH...: the files and directories under PATH that WHO can read (one per line)
readable_by() {
	local who=$1 p; shift
	find "$@" \( -type f -o -type d \) -print 2>/dev/null | while read -r p; do
		if [ -d "$p" ]; then "$who" ls "$p" >/dev/null 2>&1 && echo "$p"
		else "$who" head -c1 "$p" >/dev/null 2>&1 && echo "$p"; fi
	done
}
# none_readable NAME PATH...: a case: nobody reads nothing under PATH (and PATH holds files to read)
none_readable() {
	local name=$1; shift
	local files got
	files=$(find "$@" -type f 2>/dev/null | wc -l)
	got=$(readable_by asnobody "$@")
	if [ "$files" -gt 0 ] && [ -z "$got" ]; then ok "$name"
	else nok "$name" "$files file(s); nobody reads: $(echo "$got" | head -5 | tr '\n' ' ')"; fi
}

# runs NAME COMMAND...: a case: the command succeeds
runs() {
	local name=$1; shift
	if "$@" >"$T/out" 2>&1; then ok "$name"; else nok "$name" "$(head -c 300 "$T/out")"; fi
}

# ---- a private store (the default)
S=$T/s
check "init under umask 022" 0 'ready' -- st "$S" init
is "the store directory is its owner's only" "$(stat -c %a "$S")" 700
head -c 1M /dev/urandom >"$T/img"
truncate -s 4M "$T/img"
st "$S" debug ingest "$T/img" --tag img >/dev/null
is "a blob is read-only, its owner's only" "$(find "$S/blobs" -type f -printf '%m\n' | sort -u)" 400
none_readable "nobody reads no blob, no index file, nothing of the store" "$S"
if [ -f "$G" ]; then
	check_kvm "a run with --snapshot commits one" 0 'tagged one' -- st "$S" run "$G" --call counter_next --snapshot one
else
	skip "a run with --snapshot commits one" "simpleguest.elf not built"
fi
none_readable "... and nobody reads the snapshot's layers (the sandbox's memory)" "$S"
runs "export" st "$S" export img "$T/exp"
none_readable "nobody reads the export's manifest or layers" "$T/exp"
runs "export --oci" st "$S" export --oci "$T/lay" img
none_readable "nobody reads the OCI layout's blobs" "$T/lay"

# ---- the mount's log (it names snapshots and what was done with them)
mkdir -p "$T/mp"
if st "$S" mount "$T/mp" >"$T/out" 2>&1; then
	MOUNTS+=("$T/mp")
	ls "$T/mp/snapshots" >/dev/null 2>&1
	"$BIN" umount "$T/mp" >/dev/null 2>&1
	is "the mount's log is its owner's only" "$(stat -c %a "$S/mount.log" 2>&1)" 600
else
	nok "the mount's log is its owner's only" "mount failed: $(head -c 300 "$T/out")"
fi

# ---- a pull from a registry on loopback
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
REG_PORT=
if command -v docker-registry >/dev/null; then
	port=$(freeport)
	mkdir -p "$T/reg"
	printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%s}\n' \
		"$T/reg" "$port" >"$T/reg.yml"
	docker-registry serve "$T/reg.yml" >"$T/reg.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 1 100); do
		curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && { REG_PORT=$port; break; }
		sleep 0.1
	done
fi
if [ -n "$REG_PORT" ]; then
	R=127.0.0.1:$REG_PORT
	st "$S" push --insecure img "$R/perms/img:v1" >/dev/null 2>&1
	newstore "$T/p"
	check "pull into a new store" 0 '^[0-9a-f]{32}$' -- st "$T/p" pull --insecure "$R/perms/img:v1"
	none_readable "nobody reads a pulled blob" "$T/p"
	newstore "$T/pl"
	if st "$T/pl" pull --lazy --insecure "$R/perms/img:v1" >"$T/out" 2>&1 && ls "$T/pl/lazy/"*.part >/dev/null 2>&1; then
		is "a lazy layer's part and map files are their owner's only" \
			"$(find "$T/pl/lazy" -type f -printf '%m\n' | sort -u) $(stat -c %a "$T/pl/lazy")" "600 700"
	else
		skip "a lazy layer's part and map files are their owner's only" "no lazy pull from this registry: $(head -c 200 "$T/out")"
	fi
else
	for _ in 1 2 3; do skip "pull" "docker-registry not installed or did not start"; done
fi

# ---- a store shared with a group: the group reads, nobody else, nobody writes
SH=$T/sh
check "init --shared GROUP" 0 'ready' -- st "$SH" init --shared "$GRP"
st "$SH" debug ingest "$T/img" --tag img >/dev/null
is "its directories are the group's (set-group-id), blobs 0440" \
	"$(stat -c '%a %G' "$SH" "$SH/blobs" | sort -u | tr '\n' ' ')$(find "$SH/blobs" -type f -printf '%m %g\n' | sort -u)" \
	"2750 $GRP 440 $GRP"
none_readable "a user outside the group reads nothing of it" "$SH"
got=$(readable_by asgroup "$SH/blobs" | grep -c .)
want=$(find "$SH/blobs" -type f 2>/dev/null | grep -c .)
[ "$want" -gt 0 ] && want=$(find "$SH/blobs" | grep -c .)
is "a member of the group reads every blob" "$got" "$want"
check "... lists it with strata (the index opened read-only)" 0 '^img ' -- asgroup "$BIN" --store "$SH" ls
st "$SH" fsck >"$T/out.owner" 2>&1
asgroup "$BIN" --store "$SH" fsck >"$T/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q ' 0 problem' "$T/out" && ! grep -q 'warning\|exposed' "$T/out" "$T/out.owner"; then
	ok "... fsck, by the owner and by a member, finds it consistent and exposed to nobody else"
else nok "... fsck, by the owner and by a member, finds it consistent and exposed to nobody else" \
	"status $rc: $(head -c 200 "$T/out") / $(head -c 200 "$T/out.owner")"; fi
if asgroup touch "$SH/blobs/planted" 2>/dev/null || asgroup "$BIN" --store "$SH" tag img planted >/dev/null 2>&1; then
	nok "... and writes nothing"
else ok "... and writes nothing"; fi

# ---- a store an older strata made under umask 022
chmod 0755 "$S" "$S/blobs" "$S"/blobs/*
find "$S/blobs" -type f -exec chmod 0444 {} +
st "$S" fsck >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^exposed: $S/blobs: directory mode 0755" "$T/out" &&
	grep -q "warning: .*chmod -R go-rwx $S" "$T/err"; then
	ok "fsck warns about a store others can read, naming the path and the fix"
else nok "fsck warns about a store others can read, naming the path and the fix" \
	"status $rc; $(head -c 300 "$T/out") $(head -c 300 "$T/err")"; fi
# doctor's own status says whether KVM and the rest are usable; the store is a warning.
st "$S" doctor >"$T/out" 2>"$T/err"
if grep -q "^store: .*other users can read it" "$T/out" && grep -q "chmod -R go-rwx" "$T/err"; then
	ok "doctor warns too"
else nok "doctor warns too" "$(tail -c 300 "$T/out") $(head -c 300 "$T/err")"; fi
check "fsck --repair sets the store's modes" 0 "-> mode set to 0700" -- st "$S" fsck --repair
none_readable "... after which nobody reads anything" "$S"

[ "$n" -eq "$N" ] || { echo "not ok - planned $N cases, ran $n"; exit 1; }
[ "$fails" -eq 0 ]
