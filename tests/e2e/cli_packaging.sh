#!/usr/bin/env bash
# cli_packaging.sh: what a packaged command ships and how its results read (issue 25 sections 3 and 5): gc's
# counts, --json of ls, tag, gc, fsck, verify and doctor, run --snapshot's checks before any work, raw bytes of
# a result, man pages and bash completion that match --help, doctor's advice (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${STRATA_BUILD:-$SRC/build}
G="$BUILD/vmm/guest/simpleguest.elf"

N=85
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch packaging
unset STRATA_STORE XDG_DATA_HOME
jq_of() { jq -r "$1" "$T/out"; }

S=$T/s
newstore "$S"
head -c 1M /dev/urandom >"$T/img"
truncate -s 4M "$T/img"
st "$S" debug ingest "$T/img" --tag base >/dev/null

# ---- gc: referenced blobs are counted as in use, not as young unreferenced ones
check "gc counts the snapshot's blob as in use" 0 'kept 1 blob\(s\) snapshots use and 0 unreferenced blob\(s\) younger than 3600s$' -- \
	st "$S" gc
check "gc --json" 0 '"blobs_in_use"' -- st "$S" gc --json
is "... in use 1, young 0, removed 0" "$(jq_of '"\(.blobs_in_use) \(.blobs_young) \(.blobs_removed)"')" "1 0 0"

# ---- --json of ls, tag, fsck, verify
ID=$(st "$S" show base --json | jq -r .id)
check "ls --json" 0 '' -- st "$S" ls --json
is "... one object with id, tags, parent, memory_bytes, unique_bytes, lazy" \
	"$(jq_of '.[0] | "\(.id) \(.tags|join(",")) \(.parent) \(.memory_bytes) \(.unique_bytes) \(.lazy)"')" \
	"$ID base null 4194304 1048576 null"
check "ls --tree --json is refused" 2 'not both' -- st "$S" ls --tree --json
check "tag --json" 0 '' -- st "$S" tag --json
is "... [{name, id}]" "$(jq_of '.[] | "\(.name) \(.id)"')" "base $ID"
check "tag -d NAME --json is refused" 2 'takes no operands' -- st "$S" tag -d base --json
check "fsck --json of a sound store" 0 '' -- st "$S" fsck --json
is "... counts and no problems" "$(jq_of '"\(.snapshots) \(.blobs) \(.errors) \(.problems|length) \(.exposed|length)"')" "1 1 0 0 0"
check "verify TAG --json" 0 '' -- st "$S" verify base --json
is "... the target, its layers, no problems" "$(jq_of '.targets[0] | "\(.name) \(.kind) \(.id) \(.layers) \(.problems|length)"')" \
	"base snapshot $ID 1 0"
st "$S" export base "$T/e" >/dev/null
check "verify DIR --json" 0 '' -- st "$S" verify "$T/e" --json
is "... a directory target" "$(jq_of '.targets[0] | "\(.kind) \(.layers) \(.problems|length)"')" "directory 1 0"
BLOB=$(find "$S/blobs" -type f | head -1)
chmod u+w "$BLOB"
"$SRC/tests/e2e/flip_byte" "$BLOB" 100
check "fsck --json of a corrupt blob: exit 4, the JSON on stdout" 4 '' -- st "$S" fsck --json
is "... the problem: kind corrupt, object blob, an error" "$(jq_of '.problems[0] | "\(.kind) \(.object) \(.error)"')" \
	"corrupt blob true"
check "verify --json of the store: exit 4" 4 '' -- st "$S" verify --json
is "... errors 1" "$(jq_of .errors)" 1
check "verify TAG --json: exit 4, the layer named" 4 '' -- st "$S" verify base --json
is "... corrupt" "$(jq_of '.targets[0].problems[0].layer != null')" true
check "fsck --repair --json" 4 '' -- st "$S" fsck --repair --json
is "... repaired 1, the snapshot lacking its layer" "$(jq_of '"\(.repaired) \(.lacking[0].id) \(.lacking[0].missing_layers)"')" \
	"1 $ID 1"

# ---- doctor: advice a user can act on, the process backend as working, the store, fusermount3, the registry
nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env -u STRATA_BACKEND HOME="$T/nobody" "$@"; }
mkdir -p "$T/nobody"
chmod 777 "$T/nobody"
chmod o+rx "$T"
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
	for _ in $(seq 18); do skip "doctor and the backend note as another user" "needs root and setpriv"; done
elif nobody test -r /dev/kvm -a -w /dev/kvm; then
	for _ in $(seq 18); do skip "doctor and the backend note as another user" "nobody may open /dev/kvm here"; done
else
	check "doctor as a user who cannot open /dev/kvm: exit 0, the process backend works" 0 \
		'^process: +usable' -- nobody "$BIN" doctor
	grep -E '^kvm:' "$T/out" >"$T/kvmline"
	if grep -q 'usermod -aG root' "$T/kvmline"; then nok "... no 'usermod -aG root'" "$(cat "$T/kvmline")"
	else ok "... no 'usermod -aG root'"; fi
	mode=$(stat -c %a /dev/kvm) grp=$(stat -c %G /dev/kvm)
	if grep -q "(mode $mode, group $grp)" "$T/kvmline" && grep -Eq 'GROUP="kvm"|usermod -aG kvm|usermod -aG' "$T/kvmline"
	then ok "... the device's mode and group, and what would grant access"
	else nok "... the device's mode and group, and what would grant access" "$(cat "$T/kvmline")"; fi
	is "... backend, fusermount3, store and registry lines" \
		"$(grep -cE '^(backend: +process|fusermount3: |store: |registry: )' "$T/out")" 4
	check "doctor --json as that user" 0 '' -- nobody "$BIN" doctor --json
	is "... ok, the process backend, kvm not ok" "$(jq_of '"\(.ok) \(.backend) \(.checks.process.ok) \(.checks.kvm.ok)"')" \
		"true process true false"
	# on a terminal (script(1) gives one), or with -v; not into a script's captured stderr
	check_kvm "run on a terminal where auto falls back: one note" 0 '^3' -- \
		nobody script -qec "'$BIN' run '$G' --call add 1 2" /dev/null
	is "... the note, once" "$(grep -c '^strata: note: sandboxes run on the process backend, KVM cannot be used here' "$T/out")" 1
	check_kvm "... with -v into a file too" 0 '^3$' -- nobody "$BIN" -v run "$G" --call add 1 2
	is "... once" "$(grep -c '^strata: note: sandboxes run on the process backend' "$T/err")" 1
	check_kvm "... not into a script's captured stderr without -v" 0 '^3$' -- nobody "$BIN" run "$G" --call add 1 2
	is "... stderr empty" "$(cat "$T/err")" ""
	check_kvm "--backend process on a terminal: no note" 0 '^3' -- \
		nobody script -qec "'$BIN' --backend process run '$G' --call add 1 2" /dev/null
	is "... none" "$(grep -c 'note:' "$T/out")" 0
	# a store root made and let others read (not write) opens read-only for them
	R=$T/rootstore
	newstore "$R"
	st "$R" debug ingest "$T/img" --tag base >/dev/null
	chmod -R go+rX "$R"
	check "another user lists a store root made readable to them" 0 '^base ' -- nobody "$BIN" --store "$R" ls
	check "... verifies it" 0 '0 problem' -- nobody "$BIN" --store "$R" verify
	check "... and may not write it: read-only" 1 'the store is read-only' -- nobody "$BIN" --store "$R" tag base t2
	chmod -R go-rwx "$R"
	check "a private store of another user: whose it is and how to share one" 1 \
		'belongs to uid 0 \(mode 0700\).*init --shared GROUP' -- nobody "$BIN" --store "$R" ls
fi
printf '{"auths": {"reg.example:5000": {"auth": "dTpw"}}}' >"$T/auth.json"
check "doctor names the auth file and its registries" 0 \
	"^registry: +credentials from $T/auth.json for 1 registry \\(reg.example:5000\\)" -- \
	env REGISTRY_AUTH_FILE="$T/auth.json" "$BIN" doctor
echo '{"auths": ' >"$T/bad.json"
check "... and says a broken one breaks push and pull" 0 "^registry: +auth file $T/bad.json cannot be read" -- \
	env REGISTRY_AUTH_FILE="$T/bad.json" "$BIN" doctor
# Without $REGISTRY_AUTH_FILE: the files push and pull read, in their order, with their helpers.
H=$T/home
mkdir -p "$H/.config/containers" "$H/.docker" "$T/bin"
printf '{"auths": {"a.example": {"auth": "dTpw"}}}' >"$H/.config/containers/auth.json"
printf '{"credHelpers": {"b.example": "strata-test"}, "credsStore": "strata-test"}' >"$H/.docker/config.json"
printf '#!/bin/sh\necho "credentials not found"; exit 1\n' >"$T/bin/docker-credential-strata-test"
chmod +x "$T/bin/docker-credential-strata-test"
check "doctor lists every auth file pull reads, in its order, with credHelpers and credsStore" 0 \
	"^registry: +credentials from $H/.config/containers/auth.json for 1 registry \\(a.example\\); then $H/.docker/config.json for 0 registries, credHelpers b.example: docker-credential-strata-test, credsStore docker-credential-strata-test \\(looked up in order: --creds, --authfile, \\\$REGISTRY_AUTH_FILE, \\\$XDG_RUNTIME_DIR/containers/auth.json, ~/.config/containers/auth.json, ~/.docker/config.json; in each, credHelpers, auths, then credsStore\\)" -- \
	env -u REGISTRY_AUTH_FILE -u XDG_RUNTIME_DIR -u XDG_CONFIG_HOME -u DOCKER_CONFIG HOME="$H" PATH="$T/bin:$PATH" "$BIN" doctor
check "... and says a helper that is not on PATH fails push and pull" 0 \
	"^registry: +docker-credential-strata-test, named by credHelpers in $H/.docker/config.json, is not on PATH" -- \
	env -u REGISTRY_AUTH_FILE -u XDG_RUNTIME_DIR -u XDG_CONFIG_HOME -u DOCKER_CONFIG HOME="$H" "$BIN" doctor
env -u REGISTRY_AUTH_FILE -u XDG_RUNTIME_DIR -u XDG_CONFIG_HOME -u DOCKER_CONFIG HOME="$H" "$BIN" doctor --json >"$T/doc.json"
is "... doctor --json: the registry check fails" "$(jq -r '.checks.registry.ok' "$T/doc.json")" false
check "... and that a \$REGISTRY_AUTH_FILE naming no file fails them" 0 \
	"^registry: +\\\$REGISTRY_AUTH_FILE names $T/none.json, which does not exist" -- \
	env REGISTRY_AUTH_FILE="$T/none.json" "$BIN" doctor
check "doctor shows the store and that you may write it" 0 "^store: +$S, readable by its owner only; you may write it" -- \
	st "$S" doctor

# ---- man pages: one per command of `strata --help`, made from its --help, rendering every option
cmds=$("$BIN" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p' | grep -vxE 'help|bench')
listed=$(sed -n "/^strata_man_commands = \[/,/\]/p" "$SRC/mount/man/meson.build" | grep -o "'[a-z]*'" | tr -d "'")
is "mount/man/meson.build makes a page for each command 'strata --help' lists (but help and bench)" "$(echo $listed)" "$(echo $cmds)"
missing="" unrendered="" lacking=""
for c in "" $cmds; do
	page="$BUILD/mount/man/strata${c:+-$c}.1"
	if [ ! -f "$page" ]; then missing="$missing ${c:-strata}"; continue; fi
	if ! MANWIDTH=200 man -l "$page" >"$T/man" 2>"$T/manerr" || [ -s "$T/manerr" ]; then
		unrendered="$unrendered ${c:-strata}"; continue
	fi
	# every option --help names is in the rendered page, and its synopsis
	for o in $("$BIN" $c --help | sed -n 's/^  \(-[^ ]*, \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p'); do
		grep -q -- "$o" "$T/man" || lacking="$lacking ${c:-strata}:$o"
	done
	syn=$("$BIN" $c --help | sed -n '1s/^usage: //p')
	grep -qF -- "$syn" "$T/man" || lacking="$lacking ${c:-strata}:synopsis"
done
is "every page exists" "$missing" ""
is "... renders with man -l, no warnings" "$unrendered" ""
is "... with every option and the synopsis of its --help" "$lacking" ""
check "man -l strata-pull.1 names the command and its summary" 0 '^ +strata-pull - fetch a snapshot' -- \
	env MANWIDTH=200 man -l "$BUILD/mount/man/strata-pull.1"

# ---- bash completion, sourced as bash-completion would: commands, options, tags
comp() { # the completions of the words given, the last one being completed
	bash -c '. "$1/mount/strata.bash"; shift; export PATH; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_strata; printf "%s\n" "${COMPREPLY[@]}"' _ "$SRC" "$@" | sort | tr '\n' ' '
}
export PATH="$(dirname "$BIN"):$PATH"
is "completion: commands starting with 'pu'" "$(comp strata pu)" "pull push "
is "... options of pull starting with '--ta'" "$(comp strata pull --ta)" "--tag "
is "... global options" "$(comp strata --st)" "--store "
mkdir -p "$T/empty"
is "... tags of the store for show" "$(cd "$T/empty" && comp strata --store "$S" show ba)" "base "
is "... backends" "$(comp strata --backend p)" "process "
is "... help COMMAND" "$(comp strata help ver)" "verify "
D=$T/inst
meson install -C "$BUILD" --destdir "$D" --no-rebuild >"$T/inst.log" 2>&1
is "meson install puts the pages in mandir" "$(find "$D" -path '*/man/man1/strata-pull.1' | wc -l)" 1
is "... the completion where bash-completion looks" \
	"$(find "$D" -path '*/share/bash-completion/completions/strata' | wc -l)" 1

# ---- LICENSE matches meson's license:
lic=$(sed -n "s/^  license: '\(.*\)',/\1/p" "$SRC/meson.build")
is "LICENSE is the $lic licence meson.build names" "$(head -1 "$SRC/LICENSE")" "$lic License"

# ---- run --snapshot: checked before the guest runs; one rule for moving tags
check_kvm "run --snapshot TAG makes the tag" 0 '^1$' -- st "$S" run "$G" --call counter_next --snapshot c1
check_kvm "run --snapshot of an existing tag is refused without --force" 1 \
	"run: tag 'c1' already names snapshot [0-9a-f]{32} \(use --force to move it\)" -- \
	st "$S" run "$G" --call counter_next --snapshot c1
is "... before the guest ran: nothing printed" "$(cat "$T/out")" ""
check_kvm "... and moved with --force" 0 '^1$' -- st "$S" run "$G" --call counter_next --snapshot c1 --force
check_kvm "an invalid tag name is refused before the guest runs" 2 "not a valid tag" -- \
	st "$S" run "$G" --call counter_next --snapshot 'no/slash'
is "... nothing printed" "$(cat "$T/out")" ""
check_kvm "a missing store is refused before the guest runs" 3 "is not a strata store" -- \
	st "$T/nostore" run "$G" --call counter_next --snapshot x
is "... nothing printed" "$(cat "$T/out")" ""
newstore "$T/other"
st "$S" export c1 "$T/c1dir" >/dev/null
check_kvm "a directory whose layers the store lacks is refused before the guest runs" 1 \
	"lacks 1 of its layer\(s\): import it first" -- st "$T/other" run "$T/c1dir" --call counter_next --snapshot y
is "... nothing printed" "$(cat "$T/out")" ""
check_kvm "--force without --snapshot is a usage error" 2 'there is no --snapshot' -- \
	st "$S" run "$G" --call counter_next --force

# ---- a 'b' result as raw bytes
head -c 5000 /dev/urandom >"$T/bytes"
check_kvm "run --raw: a 'b' result's bytes as they are" 0 '' -- "$BIN" run "$G" --call echo_bytes "@$T/bytes" --raw
if [ -n "$SANDBOX_WHY" ]; then skip "... byte for byte" "needs KVM: $SANDBOX_WHY"
elif cmp -s "$T/bytes" "$T/out"; then ok "... byte for byte"; else nok "... byte for byte" "$(head -c 40 "$T/out" | od -c | head -2)"; fi
check_kvm "without --raw: hex and a newline" 0 "^$(head -c 4 "$T/bytes" | od -An -tx1 | tr -d ' \n')" -- \
	"$BIN" run "$G" --call echo_bytes "@$T/bytes"
if command -v script >/dev/null; then
	check "--raw to a terminal is refused (exit 2)" 2 'not a terminal' -- \
		script -qec "'$BIN' run '$G' --call echo_bytes ab --raw" /dev/null
else skip "--raw to a terminal is refused" "no script(1)"; fi

# ---- pull: a tag that names a snapshot from elsewhere is refused before anything is fetched; ls says where from
if ! command -v docker-registry >/dev/null; then
	for _ in 1 2 3 4 5 6 7 8; do skip "pull's tag clash and ls's origin" "docker-registry not installed"; done
elif ! start_registry reg; then
	nok "the loopback registry starts" "$(tail -3 "$T/reg.log")"
	for _ in 1 2 3 4 5 6 7; do skip "pull's tag clash and ls's origin" "the registry did not start"; done
else
	R=127.0.0.1:$REG_PORT
	for i in 2 3; do head -c 1M /dev/urandom >"$T/img$i"; truncate -s 4M "$T/img$i"; done
	st "$S" debug ingest "$T/img2" --tag web >/dev/null
	st "$S" debug ingest "$T/img3" --tag other >/dev/null
	st "$S" push --insecure web "$R/r/web:v1" >/dev/null 2>&1
	st "$S" push --insecure other "$R/r/db:v1" >/dev/null 2>&1
	P=$T/pulled
	check "pull r/web:v1 tags it v1" 0 '^[0-9a-f]{32}$' -- st "$P" pull --insecure "$R/r/web:v1"
	check "ls says where it came from" 0 "^v1 .* from $R/r/web\$" -- st "$P" ls
	is "... ls --json's origin" "$(st "$P" ls --json | jq -r '.[0].origin')" "$R/r/web"
	blobs=$(find "$P/blobs" -type f | wc -l)
	check "pull r/db:v1 (another repository, the same tag) is refused before any transfer" 1 \
		"tag 'v1' already names snapshot [0-9a-f]{32} from $R/r/web, not one from $R/r/db; nothing was fetched" -- \
		st "$P" pull --insecure "$R/r/db:v1"
	is "... no blob was fetched" "$(find "$P/blobs" -type f | wc -l)" "$blobs"
	check "... --tag NAME keeps both" 0 '^[0-9a-f]{32}$' -- st "$P" pull --insecure "$R/r/db:v1" --tag db-v1
	check "pulling r/web:v1 again (the same repository) is no clash" 0 '^[0-9a-f]{32}$' -- \
		st "$P" pull --insecure "$R/r/web:v1"
	st "$P" debug ingest "$T/img" --tag made >/dev/null
	check "a tag naming a snapshot made here is refused before any transfer too" 1 "\(made here\), not one from" -- \
		st "$P" pull --insecure "$R/r/db:v1" --tag made
fi
#@END@
[ "$n" -eq "$N" ] || nok "the plan: $N cases" "ran $n"
exit $((fails > 0))
