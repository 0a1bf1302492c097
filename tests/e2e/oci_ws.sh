#!/usr/bin/env bash
# oci_ws.sh: a snapshot's working-set record travels with it through a real loopback registry (Debian's
# docker-registry, behind tests/e2e/oci_proxy.py): pushed as a referrer of its manifest, found on pull by the
# referrers API or the tag schema, refused when it does not belong (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
G="${STRATA_BUILD:-$SRC/build}/vmm/guest/simpleguest.elf"

N=31
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch ociws

if ! command -v docker-registry >/dev/null; then skip_rest "working sets through a registry" "docker-registry not installed"; exit 0; fi
if [ -n "$SANDBOX_WHY" ]; then skip_rest "working sets through a registry" "needs a sandbox: $SANDBOX_WHY"; exit 0; fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%s}\n' \
	"$T/reg" "$port" >"$T/reg.yml"
docker-registry serve "$T/reg.yml" >"$T/reg.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && break; sleep 0.1; done
python3 "$SRC/tests/e2e/oci_proxy.py" "$port" "$T/mode" "$T/proxy.port" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$T/proxy.port" ] && break; sleep 0.1; done
P=127.0.0.1:$(cat "$T/proxy.port")
R=http://127.0.0.1:$port/v2/ws/app
echo pass >"$T/mode"

S=$T/s
newstore "$S"
st "$S" run "$G" --heap 8M --call touch_pages 600 --snapshot app >/dev/null 2>&1
st "$S" run "$G" --call echo x --snapshot plain >/dev/null 2>&1
st "$S" run app --call touch_pages 100 --record-working-set >/dev/null 2>&1
rec=$(st "$S" show app --json | jq -r .working_set.record)

check "push sends the snapshot and its working set" 0 '"working_set":true' -- \
	st "$S" push --insecure --json app "$P/ws/app:v1"
top=$(jq -r .digest "$T/out" | tail -1)
idx=$(curl -s -H 'Accept: application/vnd.oci.image.index.v1+json' "$R/manifests/sha256-${top#sha256:}")
is "the tag schema's index lists one working-set artifact" \
	"$(echo "$idx" | jq -r '[.manifests[] | select(.artifactType == "application/vnd.strata.workingset.v1")] | length')" 1
art=$(echo "$idx" | jq -r '.manifests[0].digest')
m=$(curl -s -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$R/manifests/$art")
is "its subject is the snapshot's manifest" "$(echo "$m" | jq -r .subject.digest)" "$top"
is "it carries the record, annotated with its strata id" "$(echo "$m" | jq -r '.layers[0].annotations["dev.strata.id"]')" "$rec"
is "the snapshot's own manifest is unchanged by it (no working-set field)" \
	"$(curl -s -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$R/manifests/v1" | sha256sum | cut -c1-64)" "${top#sha256:}"

S2=$T/s2
newstore "$S2"
: >"$T/mode.log"
check "pull brings the working set with the snapshot" 0 '"working_set":true' -- st "$S2" pull --insecure --json "$P/ws/app:v1"
is "the pulled record is the pushed one" "$(st "$S2" show v1 --json | jq -r .working_set.record)" "$rec"
is "the snapshot id did not change" "$(st "$S2" show v1 --json | jq -r .id)" "$(st "$S" show app --json | jq -r .id)"
# The lookup goes out with the config, at once, right after the top manifest
# (ix_registry_pull_ahead): one round trip for the three instead of three.
reqs() { awk '{sub(/\?.*/, "", $2); split($2, p, "/"); print p[5], $3}' | tr '\n' ' '; }
is "found through the tag schema (no referrers API here), asked with the config right after the manifest" \
	"$(sed -n 2,4p "$T/mode.log" | reqs | tr ' ' '\n' | paste -d' ' - - | sort | tr '\n' ' ')" \
	"blobs 200 manifests 200 referrers 404 "
# The tag schema's index embeds the artifact manifest, which embeds the
# record (descriptor data): neither is asked for.
is "... and nothing more: the artifact manifest and the record come embedded in the index (5 requests in all)" \
	"$(grep -c ' /v2/ws/app/manifests/sha256:' "$T/mode.log") $(wc -l <"$T/mode.log")" "0 5"
check "fsck of the pulled store is clean" 0 '0 problem' -- st "$S2" fsck

echo referrers >"$T/mode"
S3=$T/s3
newstore "$S3"
check "a registry with the referrers API is asked that first" 0 'found by the registry.s referrers API' -- \
	st "$S3" -v pull --insecure "$P/ws/app:v1"
echo pass >"$T/mode"

# ---- a lazy pull fetches the working set first
S7=$T/s7
newstore "$S7"
echo pass >"$T/mode"
: >"$T/mode.log"
check "pull --lazy takes the record and fetches its pages first" 0 '"working_set":true' -- \
	st "$S7" pull --insecure --lazy --json "$P/ws/app:v1"
preq=$(tail -1 "$T/out" | jq .prefetch_requests)
# Counts, not timings: the manifest, then the config, the chunk index, the
# referrers query and the tag schema's index at once (ix_registry_pull_ahead),
# then the Range requests: the working set needs no request of its own.
is "... in 5 requests before its Range requests (manifest; config, chunk index, referrers, index)" \
	"$(grep -vc ' 206 ' "$T/mode.log")" 5
pbytes=$(tail -1 "$T/out" | jq .prefetch_bytes)
wsb=$(st "$S7" show v1 --json | jq .working_set.bytes)
after=$(awk '/\/blobs\/sha256:/ && $3 == 200 && $4 < 100000 {n = NR} END {print n}' "$T/mode.log")
is "... in Range requests right after the record, as many as it reports" \
	"$(tail -n +$((after + 1)) "$T/mode.log" | grep -c ' 206 .*bytes=')" "$preq"
if [ "$pbytes" -ge "$wsb" ] && [ "$pbytes" -le $((wsb * 2 + 1048576)) ]; then ok "... covering the record ($wsb bytes) in whole chunks ($pbytes bytes)"
else nok "... covering the record in whole chunks" "record $wsb, fetched $pbytes"; fi
# The same first call through a mount then reads what is there.
mkdir -p "$T/m7"
if st "$S7" mount "$T/m7" --log "$T/m7.log" >/dev/null; then
	MOUNTS+=("$T/m7")
	: >"$T/mode.log"
	check "the first call on the lazy snapshot gives its result" 0 '^100$' -- \
		"$BIN" run "$T/m7/snapshots/v1" --via-fuse --call touch_pages 100
	more=$(grep -c ' 206 ' "$T/mode.log")
	# The process backend copies every data page at restore (docs/lazy.md),
	# so there the call reads the whole layer whatever was fetched first.
	if [ "${STRATA_BACKEND:-auto}" = process ] || { [ "${STRATA_BACKEND:-auto}" = auto ] && [ -n "$KVM_WHY" ]; }; then
		ok "... fetching no chunk beyond the record # SKIP the process backend restores every data page ($more Range requests)"
	# The call touches only recorded pages: a Range request now would be the
	# kernel's read-around reaching absent chunks next to the recorded runs.
	elif [ "$more" -eq 0 ]; then ok "... fetching no chunk beyond the record (no read-around into absent chunks)"
	else nok "... fetching no chunk beyond the record" "$more Range requests during the call (read-around?)"; fi
	"$BIN" umount "$T/m7" >/dev/null 2>&1
else
	nok "the first call on the lazy snapshot gives its result" "$(cat "$T/m7.log")"
	nok "... fetching no chunk beyond the record"
fi
# Behind a token service: the working set's Range requests go with the
# pull's own token (ix_lazy_opts.token_from), none asks for one of its own.
echo bearer >"$T/mode"
: >"$T/mode.log"
newstore "$T/s11"
check "a lazy pull behind a token service takes the record and fetches its pages" 0 '"prefetch_requests":[1-9]' -- \
	st "$T/s11" pull --insecure --lazy --json --creds alice:secret "$P/ws/app:v1"
is "... asking the token service once (one 401, for the manifest), the Range requests going with the pull's token" \
	"$(grep -c '^GET /token' "$T/mode.log") $(grep -c ' 401 ' "$T/mode.log") $(grep -c ' 206 ' "$T/mode.log")" \
	"1 1 $(tail -1 "$T/out" | jq .prefetch_requests)"
echo pass >"$T/mode"
check "a snapshot without a record pushes none" 0 '"working_set":false' -- st "$S" push --insecure --json plain "$P/ws/plain:v1"
S4=$T/s4
newstore "$S4"
check "... and its pull finds none" 0 '"working_set":false' -- st "$S4" pull --insecure --json "$P/ws/plain:v1"
S8=$T/s8
newstore "$S8"
: >"$T/mode.log"
check "pull --lazy of a snapshot without a record fetches no layer bytes" 0 '"prefetch_requests":0' -- \
	st "$S8" pull --insecure --lazy --json "$P/ws/plain:v1"

st "$S" run app --call echo hi --record-working-set >/dev/null 2>&1
check "a new record pushed again replaces the old one in the index" 0 '"working_set":true' -- \
	st "$S" push --insecure --json app "$P/ws/app:v1"
is "... still one working-set entry" "$(curl -s -H 'Accept: application/vnd.oci.image.index.v1+json' \
	"$R/manifests/sha256-${top#sha256:}" | jq '[.manifests[] | select(.artifactType == "application/vnd.strata.workingset.v1")] | length')" 1

# A record of another snapshot, listed as app's: refused, the snapshot still arrives.
other=$(st "$S" ls | awk '$1 == "plain" {print $2}')
python3 - "$S" "$(st "$S" show app --json | jq -r .working_set.record)" "$other" "$T/bad" <<'PY'
import sys
store, rec, other, out = sys.argv[1:5]
b = bytearray(open("%s/blobs/%s/%s" % (store, rec[:2], rec), "rb").read())
b[16:32] = bytes.fromhex(other)
open(out, "wb").write(bytes(b))
PY
push_blob() { # file -> digest
	local d loc
	d=sha256:$(sha256sum "$1" | cut -d' ' -f1)
	loc=$(curl -s -D - -o /dev/null -X POST "$R/blobs/uploads/" | tr -d '\r' | awk 'tolower($1) == "location:" {print $2}')
	case $loc in http*) ;; *) loc=http://127.0.0.1:$port$loc ;; esac
	curl -s -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' --data-binary "@$1" "$loc&digest=$d"
	echo "$d"
}
bd=$(push_blob "$T/bad")
echo "$m" | jq -c --arg d "$bd" --argjson s "$(stat -c %s "$T/bad")" \
	'.layers[0].digest = $d | .layers[0].size = $s | del(.layers[0].annotations) | del(.layers[0].data)' >"$T/badm.json"
curl -s -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' --data-binary "@$T/badm.json" \
	"$R/manifests/sha256:$(sha256sum "$T/badm.json" | cut -d' ' -f1)"
jq -nc --arg d "sha256:$(sha256sum "$T/badm.json" | cut -d' ' -f1)" --argjson s "$(stat -c %s "$T/badm.json")" \
	'{schemaVersion:2,mediaType:"application/vnd.oci.image.index.v1+json",manifests:[{mediaType:"application/vnd.oci.image.manifest.v1+json",digest:$d,size:$s,artifactType:"application/vnd.strata.workingset.v1"}]}' \
	>"$T/badi.json"
curl -s -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.index.v1+json' --data-binary "@$T/badi.json" \
	"$R/manifests/sha256-${top#sha256:}"
S5=$T/s5
newstore "$S5"
check "a record of another snapshot is refused with the reason" 0 'working set was not taken: .*recorded on snapshot' -- \
	st "$S5" pull --insecure "$P/ws/app:v1"
is "... the snapshot arrives without it" "$(st "$S5" show v1 --json | jq -r '.working_set')" null
check "... and nothing of it stays in the store" 0 ' 0 orphan blob\(s\): 0 problem' -- st "$S5" fsck -v
# The same bytes under a digest that does not match them.
cp "$T/badm.json" "$T/badm2.json"
jq -c --arg d "$(jq -r .layers[0].digest "$T/badm.json" | sed 's/.$/0/')" '.layers[0].digest = $d' "$T/badm.json" >"$T/badm2.json"
jq -c --arg d "sha256:$(sha256sum "$T/badm2.json" | cut -d' ' -f1)" --argjson s "$(stat -c %s "$T/badm2.json")" \
	'.manifests[0].digest = $d | .manifests[0].size = $s' "$T/badi.json" >"$T/badi2.json"
curl -s -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' --data-binary "@$T/badm2.json" \
	"$R/manifests/sha256:$(sha256sum "$T/badm2.json" | cut -d' ' -f1)"
curl -s -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.index.v1+json' --data-binary "@$T/badi2.json" \
	"$R/manifests/sha256-${top#sha256:}"
S6=$T/s6
newstore "$S6"
check "a pull whose working-set manifest names a missing record warns and keeps the snapshot" 0 'working set was not taken' -- \
	st "$S6" pull --insecure "$P/ws/app:v1"
# Embedded bytes are checked as fetched ones: the good record embedded under
# the other record's digest, then an index embedding a manifest that is not
# the one its digest names.
echo "$m" | jq -c --arg d "$bd" --argjson s "$(stat -c %s "$T/bad")" '.layers[0].digest = $d | .layers[0].size = $s' \
	>"$T/badm3.json"
curl -s -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' --data-binary "@$T/badm3.json" \
	"$R/manifests/sha256:$(sha256sum "$T/badm3.json" | cut -d' ' -f1)"
jq -c --arg d "sha256:$(sha256sum "$T/badm3.json" | cut -d' ' -f1)" --argjson s "$(stat -c %s "$T/badm3.json")" \
	--arg data "$(base64 -w0 "$T/badm3.json")" '.manifests[0].digest = $d | .manifests[0].size = $s | .manifests[0].data = $data' \
	"$T/badi.json" >"$T/badi3.json"
curl -s -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.index.v1+json' --data-binary "@$T/badi3.json" \
	"$R/manifests/sha256-${top#sha256:}"
newstore "$T/s9"
check "a record embedded under another record's digest is refused, the snapshot kept" 0 \
	'working set was not taken: the working-set record.s bytes do not match their sha256 digest' -- \
	st "$T/s9" pull --insecure "$P/ws/app:v1"
jq -c --arg data "$(base64 -w0 "$T/badm.json")" '.manifests[0].data = $data' "$T/badi3.json" >"$T/badi4.json"
curl -s -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.index.v1+json' --data-binary "@$T/badi4.json" \
	"$R/manifests/sha256-${top#sha256:}"
newstore "$T/s10"
check "an index embedding another manifest than its digest names is refused, the snapshot kept" 0 \
	'working set was not taken: working-set manifest .*: its bytes do not match the digest' -- \
	st "$T/s10" pull --insecure "$P/ws/app:v1"

exit $((fails > 0))
