#!/usr/bin/env bash
# oci.sh: snapshots as OCI artifacts end to end: export --oci / import of a layout (oci-image-tool,
# skopeo), push / pull through a real loopback registry (Debian's docker-registry), bad registries
# (a fault-injecting proxy), auth, resume, and the guest round trip (KVM) (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
G="${STRATA_BUILD:-$SRC/build}/vmm/guest/simpleguest.elf"

N=95
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch oci

jsonlast() { tail -1 "$T/out" | jq -r "$1"; }

# ---- snapshots without a guest: an 8 MiB image and a child with 3 changed pages
S=$T/s
newstore "$S"
head -c 1M /dev/urandom >"$T/img1"
truncate -s 8M "$T/img1"
cp "$T/img1" "$T/img2"
for p in 3 200 1030; do head -c 4096 /dev/urandom | dd of="$T/img2" bs=4096 seek=$p conv=notrunc 2>/dev/null; done
base=$(st "$S" debug ingest "$T/img1" --tag base)
v2=$(st "$S" debug ingest "$T/img2" --parent base --tag v2)
child_layer=$(st "$S" show v2 --json | jq -r '.manifest.layers[] | select(.pages == 3) | .id')

# ---- 1. OCI layout
check "export --oci writes a layout of v2 and its parent" 0 '' -- st "$S" -v export --oci "$T/lay" v2
L=$T/lay
is "index.json names v2 with its artifact type" \
	"$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"] + " " + .manifests[0].artifactType' "$L/index.json")" \
	"v2 application/vnd.strata.snapshot.v1"
top=$(jq -r '.manifests[0].digest' "$L/index.json" | cut -d: -f2)
M=$L/blobs/sha256/$top
is "the manifest's config is the strata manifest, annotated with the snapshot id" \
	"$(jq -r '.config.mediaType + " " + .config.annotations["dev.strata.id"]' "$M")" \
	"application/vnd.strata.manifest.v1+json $v2"
cfg=$(jq -r '.config.digest' "$M" | cut -d: -f2)
st "$S" export v2 "$T/v2dir" >/dev/null
if head -c -1 "$T/v2dir/manifest.json" | cmp -s - "$L/blobs/sha256/$cfg"; then ok "the config blob is the canonical manifest"
else nok "the config blob is the canonical manifest"; fi
is "one OCI layer per strata layer, each annotated with its XXH3 id" \
	"$(jq -r '[.layers[] | select(.mediaType == "application/vnd.strata.layer.v1") | .annotations["dev.strata.id"]] | join(",")' "$M")" \
	"$(st "$S" show v2 --json | jq -r '[.manifest.layers[].id] | join(",")')"
par=$(jq -r '.subject.digest' "$M" | cut -d: -f2)
is "the parent is reachable as the manifest's subject" \
	"$(jq -r '.config.annotations["dev.strata.id"]' "$L/blobs/sha256/$par")" "$base"
bad=0
for f in "$L"/blobs/sha256/*; do [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$(basename "$f")" ] || bad=1; done
is "every blob file is named by its sha256" $bad 0
if command -v oci-image-tool >/dev/null; then
	check "oci-image-tool validates each manifest" 0 'Validation succeeded' -- \
		oci-image-tool validate --type manifest "$M" "$L/blobs/sha256/$par"
	check "oci-image-tool validates index.json" 0 'Validation succeeded' -- \
		oci-image-tool validate --type imageIndex "$L/index.json"
else
	skip "oci-image-tool validates each manifest" "oci-image-tool not installed"
	skip "oci-image-tool validates index.json" "oci-image-tool not installed"
fi
check "a second export hashes nothing (sha256 table)" 0 'sha256 computed over 0 bytes' -- \
	st "$S" -v export --oci "$T/lay2" v2
S2=$T/s2
newstore "$S2"
check "import detects the layout and imports the chain" 0 "^$v2\$" -- st "$S2" import "$L"
check "both snapshots arrived, v2 tagged, and verify" 0 "" -- st "$S2" verify
is "v2 and its parent are in the new store" "$(st "$S2" ls | awk 'NR>1 {print $1, $2}' | sort | tr '\n' ' ')" \
	"- $base v2 $v2 "

# A layout edited by hand: re-hash a changed manifest and point index.json at it.
relayout() { # src dst jq-filter-on-top-manifest
	cp -r "$1" "$2" && chmod -R u+w "$2"
	jq -c "$3" "$2/blobs/sha256/$top" >"$T/m.json"
	local h
	h=$(sha256sum "$T/m.json" | cut -d' ' -f1)
	cp "$T/m.json" "$2/blobs/sha256/$h"
	jq -c --arg d "sha256:$h" --argjson s "$(stat -c %s "$T/m.json")" \
		'.manifests[0].digest = $d | .manifests[0].size = $s' "$1/index.json" >"$2/index.json"
}
S3=$T/s3
newstore "$S3"
relayout "$L" "$T/l-type" '.artifactType = "application/vnd.example.thing"'
check "a layout whose artifact type is not ours is refused" 1 'not a strata snapshot' -- st "$S3" import "$T/l-type"
relayout "$L" "$T/l-drop" '.layers |= map(select(.mediaType != "application/vnd.strata.chunks.v1")) | del(.layers[0])'
check "a manifest that does not carry a layer of the snapshot is refused" 1 'carries 1 layer|is not carried' -- \
	st "$S3" import "$T/l-drop"
cp -r "$L" "$T/l-miss" && chmod -R u+w "$T/l-miss"
rm "$T/l-miss/blobs/sha256/$(jq -r '.layers[0].digest' "$M" | cut -d: -f2)"
check "a manifest naming a blob the layout lacks is refused" 1 'not in the layout' -- st "$S3" import "$T/l-miss"
cp -r "$L" "$T/l-flip" && chmod -R u+w "$T/l-flip"
"$SRC/tests/e2e/flip_byte" "$T/l-flip/blobs/sha256/$(jq -r '.layers[0].digest' "$M" | cut -d: -f2)" 5000 2>/dev/null ||
	python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(5000); b=f.read(1); f.seek(5000); f.write(bytes([b[0]^255]))" \
		"$T/l-flip/blobs/sha256/$(jq -r '.layers[0].digest' "$M" | cut -d: -f2)"
check "a layer whose bytes changed is refused" 1 'do not match digest' -- st "$S3" import "$T/l-flip"
relayout "$L" "$T/l-subj" ".subject.digest = \"sha256:$top\" | .subject.size = $(stat -c %s "$M")"
check "a manifest whose subject is not the snapshot's parent is refused" 1 "subject is not the snapshot's parent" -- \
	st "$S3" import "$T/l-subj"
is "after five refused imports the store holds nothing" "$(st "$S3" ls | tail -n +2 | wc -l) $(find "$S3/blobs" -type f | wc -l)" "0 0"

# ---- 2. a real registry on loopback
if ! command -v docker-registry >/dev/null; then
	skip_rest "registry" "docker-registry not installed"
	exit 0
fi
if ! start_registry reg; then
	nok "the loopback registry starts" "$(tail -3 "$T/reg.log")"
	skip_rest "registry" "the registry did not start"
	exit 1
fi
R=127.0.0.1:$REG_PORT

check "push sends the snapshot and its parent" 0 '^sha256:[0-9a-f]{64}$' -- st "$S" push --insecure v2 "$R/snaps/web:v2"
check "a second push sends nothing and hashes nothing" 0 '"blobs_moved":0,' -- \
	st "$S" push --insecure --json v2 "$R/snaps/web:v2"
is "... no sha256 work at all" "$(jsonlast .bytes_sha256)" 0
check "push over HTTPS (the default) to a plain-HTTP registry fails clearly" 1 'TLS|SSL|--insecure' -- \
	st "$S" push v2 "$R/snaps/web:v2"
S4=$T/s4
newstore "$S4"
check "pull into a fresh store" 0 "^$v2\$" -- st "$S4" pull --insecure "$R/snaps/web:v2"
check "the pulled chain verifies" 0 '' -- st "$S4" verify
is "the pulled snapshot is tagged with the remote tag, parent included" \
	"$(st "$S4" ls | awk 'NR>1 {print $1, $2}' | sort | tr '\n' ' ')" "- $base v2 $v2 "
newstore "$T/s4b"
check "--json gives a line per blob event" 0 '"event":"end","kind":"layer","digest":"sha256:' -- \
	st "$T/s4b" pull --insecure --json "$R/snaps/web:v2"
newstore "$T/s4c"
if command -v script >/dev/null; then
	check "progress shows on a terminal" 0 'blob\(s\) copied \([0-9.]+ MiB\)' -- \
		script -qec "'$BIN' --store '$T/s4c' pull --insecure '$R/snaps/web:v2'" /dev/null
else
	skip "progress shows on a terminal" "script(1) not installed"
fi
check "pulling again fetches nothing" 0 '"blobs_moved":0,' -- st "$S4" pull --insecure --json "$R/snaps/web:v2"

# Only the child's own pages travel once the parent is there.
S5=$T/s5
newstore "$S5"
st "$S" push --insecure base "$R/snaps/web:base" >/dev/null
st "$S5" pull --insecure "$R/snaps/web:base" >/dev/null
check "pulling the child next to its parent fetches one layer" 0 '"blobs_moved":1,' -- \
	st "$S5" pull --insecure --json "$R/snaps/web:v2"
is "... of exactly the child's 3 pages" "$(jsonlast .bytes_moved)" 12288
down=$(jsonlast .wire_down)
if [ "$down" -le $((12288 + 16384)) ]; then ok "... and under 16 KiB more on the wire ($down bytes down)"
else nok "... and under 16 KiB more on the wire" "$down bytes down"; fi
check "a push to another repository mounts the blobs it has" 0 '"mounts":[1-9]' -- \
	st "$S" push --insecure --json --from snaps/web v2 "$R/other/web:v2"
check "a push to a third repository mounts from where the store last saw each blob, sending none" 0 \
	'"blobs_moved":0,.*"mounts":[1-9]' -- st "$S" push --insecure --json v2 "$R/third/web:v2"
check "a pulled snapshot pushed to a new repository is mounted from where it was pulled" 0 \
	'"blobs_moved":0,.*"mounts":[1-9]' -- st "$S4" push --insecure --json v2 "$R/fourth/web:v2"
newstore "$T/s6"
check "pull by digest with --tag" 0 "^$v2\$" -- st "$T/s6" pull --insecure --tag mine "$R/snaps/web@sha256:$top"
check "an unknown tag is reported as not found (exit 3)" 3 'not in the registry' -- \
	st "$T/s6" pull --insecure "$R/snaps/web:nosuch"

# Manifests a strata pull must refuse, written straight to the registry.
put_blob() { # repo file -> digest
	local d loc
	d=sha256:$(sha256sum "$2" | cut -d' ' -f1)
	loc=$(curl -s -D - -o /dev/null -X POST "http://$R/v2/$1/blobs/uploads/" | tr -d '\r' | awk -F': ' 'tolower($1)=="location" {print $2}')
	case $loc in http*) ;; *) loc="http://$R$loc" ;; esac
	curl -s -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' --data-binary "@$2" "$loc&digest=$d"
	echo "$d"
}
put_manifest() { # repo tag file [media type] -> http status
	curl -s -o "$T/put.out" -w '%{http_code}' -X PUT -H "Content-Type: ${4:-application/vnd.oci.image.manifest.v1+json}" \
		--data-binary "@$3" "http://$R/v2/$1/manifests/$2"
}
jq -c '.artifactType = "application/vnd.example.thing"' "$M" >"$T/m-type.json"
put_manifest snaps/web badtype "$T/m-type.json" >/dev/null
S7=$T/s7
newstore "$S7"
check "an artifact type that is not ours is refused" 1 'not a strata snapshot' -- st "$S7" pull --insecure "$R/snaps/web:badtype"
echo '{"hello":"world"}' >"$T/notstrata.json"
d=$(put_blob snaps/web "$T/notstrata.json")
jq -c --arg d "$d" --argjson s "$(stat -c %s "$T/notstrata.json")" '.config.digest = $d | .config.size = $s' "$M" >"$T/m-cfg.json"
put_manifest snaps/web badcfg "$T/m-cfg.json" >/dev/null
check "a config that is not a strata manifest is refused" 1 'config is not a strata manifest' -- \
	st "$S7" pull --insecure "$R/snaps/web:badcfg"
jq -c '.layers |= map(select(.mediaType != "application/vnd.strata.chunks.v1")) | del(.layers[0])' "$M" >"$T/m-drop.json"
put_manifest snaps/web baddrop "$T/m-drop.json" >/dev/null
check "a manifest that does not carry a layer the snapshot lists is refused" 1 'carries 1 layer|not carried' -- \
	st "$S7" pull --insecure "$R/snaps/web:baddrop"
jq -c '.mediaType = "application/vnd.oci.artifact.manifest.v1+json" | del(.config) | .blobs = .layers | del(.layers)' "$M" >"$T/m-art.json"
code=$(put_manifest snaps/web artifact "$T/m-art.json" application/vnd.oci.artifact.manifest.v1+json)
if [ "$code" -ge 400 ]; then ok "distribution 2.x refuses the OCI 1.1-rc artifact manifest form (HTTP $code), so strata uses the image manifest with artifactType"
else nok "distribution 2.x refuses the OCI 1.1-rc artifact manifest form" "HTTP $code"; fi
is "after the refused pulls the store holds nothing" "$(st "$S7" ls | tail -n +2 | wc -l)" 0

# ---- 3. a registry that misbehaves: a proxy injecting faults
python3 "$SRC/tests/e2e/oci_proxy.py" "$REG_PORT" "$T/mode" "$T/proxy.port" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$T/proxy.port" ] && break; sleep 0.1; done
P=127.0.0.1:$(cat "$T/proxy.port")
proxy() { echo "$1" >"$T/mode"; }
pull_faulty() { # mode name pattern [status]
	local S8=$T/f-$1
	newstore "$S8"
	proxy "$1"
	check "$2" "${4:-1}" "$3" -- st "$S8" pull --insecure "$P/snaps/web:v2"
	is "... and nothing is imported" "$(st "$S8" ls | tail -n +2 | wc -l)" 0
}
pull_faulty corrupt "wrong bytes from the registry are refused" 'do not match digest'
pull_faulty truncate "a truncated blob is refused" 'ended after'
pull_faulty fail500 "a 500 in the middle is reported" 'HTTP 500'
pull_faulty drop "a connection dropped mid-blob is reported, with how to resume" 'resume'
pull_faulty missing "a manifest naming a blob the registry does not carry is refused (exit 3)" 'does not carry' 3
# More bytes than the descriptor says: the transfer is cut there and refused.
pull_faulty long "a layer longer than its descriptor is cut and refused" 'sent more than its'
# A registry's message is quoted escaped: no terminal escape reaches the screen.
newstore "$T/f-esc"
proxy escape500
st "$T/f-esc" pull --insecure "$P/snaps/web:v2" >"$T/esc.out" 2>&1
if grep -qF 'wiped' "$T/esc.out" && ! grep -q "$(printf '\033')" "$T/esc.out"; then
	ok "a registry's error message is printed escaped"
else nok "a registry's error message is printed escaped" "$(tr '\033' '?' <"$T/esc.out")"; fi
pull_faulty bigmanifest "a manifest over 4 MiB (by tag) is refused by its size" 'the answer is over 4194304 bytes'
proxy pass
check "the interrupted pull resumes where it stopped" 0 '"bytes_resumed":[1-9]' -- \
	st "$T/f-drop" pull --insecure --json "$P/snaps/web:v2"
check "... and the result verifies" 0 '' -- st "$T/f-drop" verify

# kill -9 in the middle of a pull: the store stays consistent and the next pull resumes.
newstore "$T/k9"
proxy slow
st "$T/k9" pull --insecure "$P/snaps/web:v2" >/dev/null 2>&1 &
k9=$!
sleep 0.5
kill -9 $k9 2>/dev/null
wait $k9 2>/dev/null
check "after kill -9 mid-pull fsck finds the store consistent" 0 '0 problem' -- st "$T/k9" fsck
is "... with no snapshot in it" "$(st "$T/k9" ls | tail -n +2 | wc -l)" 0
proxy pass

# A layer larger than the 8 MiB of buffers a pull's sha256 thread works
# through (docs/oci.md, Pull): every byte is hashed after the buffers have
# gone round, and one wrong byte near the end is refused.
head -c 20M /dev/urandom >"$T/img-big"
truncate -s 24M "$T/img-big"
st "$S" debug ingest "$T/img-big" --tag big >/dev/null
check "a 20 MiB layer is pushed" 0 '' -- st "$S" push --insecure big "$R/snaps/big:v1"
newstore "$T/big"
check "... pulled whole" 0 '"blobs_moved":1,' -- st "$T/big" pull --insecure --json "$R/snaps/big:v1"
check "... and verifies" 0 '' -- st "$T/big" verify
newstore "$T/big-bad"
proxy corrupt_end
check "a 20 MiB layer with a wrong byte near its end is refused" 1 'do not match digest' -- \
	st "$T/big-bad" pull --insecure "$P/snaps/big:v1"
is "... and nothing is imported" "$(st "$T/big-bad" ls | tail -n +2 | wc -l)" 0
proxy pass
check "... and the next pull completes" 0 "^$v2\$" -- st "$T/k9" pull --insecure "$P/snaps/web:v2"
check "... and verifies" 0 '' -- st "$T/k9" verify

# ---- authentication: bearer tokens through the proxy, basic against the registry itself
proxy bearer
echo '{"auths":{"'"$P"'":{"auth":"'"$(printf alice:secret | base64)"'"}}}' >"$T/auth.json"
echo '{"auths":{"'"$P"'":{"auth":"'"$(printf alice:wrong | base64)"'"}}}' >"$T/auth-bad.json"
newstore "$T/a1"
check "bearer: no credentials is an authentication failure" 1 'authentication failed' -- \
	env HOME="$T" "$BIN" --store "$T/a1" pull --insecure "$P/snaps/web:v2"
check "bearer: a wrong password is an authentication failure" 1 'authentication failed' -- \
	env REGISTRY_AUTH_FILE="$T/auth-bad.json" "$BIN" --store "$T/a1" pull --insecure "$P/snaps/web:v2"
check "bearer: credentials from \$REGISTRY_AUTH_FILE pull" 0 "^$v2\$" -- \
	env REGISTRY_AUTH_FILE="$T/auth.json" "$BIN" --store "$T/a1" pull --insecure "$P/snaps/web:v2"
mkdir -p "$T/home/.docker" && cp "$T/auth.json" "$T/home/.docker/config.json"
check "bearer: credentials from ~/.docker/config.json push" 0 '^sha256:' -- \
	env HOME="$T/home" XDG_RUNTIME_DIR= "$BIN" --store "$S" push --insecure v2 "$P/snaps/auth:v2"
# A registry that redirects blob GETs to a blob store on another port: the
# bearer token stays with the registry (docs/security.md).
proxy bearer-redirect
: >"$T/mode.log"
newstore "$T/a2"
check "bearer: a pull whose blobs are redirected to another host:port completes" 0 "^$v2\$" -- \
	env REGISTRY_AUTH_FILE="$T/auth.json" "$BIN" --store "$T/a2" pull --insecure "$P/snaps/web:v2"
redirected=$(grep -c ' 307 ' "$T/mode.log") plain=$(grep -c ' blobstore auth=no' "$T/mode.log")
with_auth=$(grep -c ' blobstore auth=yes' "$T/mode.log")
if [ "$redirected" -gt 0 ] && [ "$plain" -eq "$redirected" ] && [ "$with_auth" -eq 0 ]; then
	ok "... and the blob store got each of the $redirected redirected GETs without the Authorization header"
else nok "... and the blob store got every redirected GET without the Authorization header" \
	"$redirected redirects, $plain GETs without it, $with_auth with it"; fi
proxy pass
python3 -W ignore -c 'import crypt; print("bob:" + crypt.crypt("pw", crypt.mksalt(crypt.METHOD_BLOWFISH)))' >"$T/htpasswd"
if start_registry regauth "$T/htpasswd"; then
	RA=127.0.0.1:$REG_PORT
	echo '{"auths":{"'"$RA"'":{"username":"bob","password":"pw"}}}' >"$T/auth-basic.json"
	check "basic: a push without credentials is refused" 1 'authentication failed' -- \
		env HOME="$T" "$BIN" --store "$S" push --insecure v2 "$RA/snaps/web:v2"
	check "basic: a push with credentials works" 0 '^sha256:' -- \
		st "$S" push --insecure --authfile "$T/auth-basic.json" v2 "$RA/snaps/web:v2"
else
	nok "basic: the registry with htpasswd starts" "$(tail -3 "$T/regauth.log")"
	n=$((n + 1))
fi

# ---- TLS (the default): a registry with a certificate of its own CA
if openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 1 \
	-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 &&
	start_registry regtls "" "$T/cert.pem $T/key.pem"; then
	RT=127.0.0.1:$REG_PORT
	check "TLS: a certificate the system does not trust is refused" 1 'TLS error' -- st "$S" push v2 "$RT/snaps/web:v2"
	check "TLS: push with --cacert" 0 '^sha256:' -- st "$S" push --cacert "$T/cert.pem" v2 "$RT/snaps/web:v2"
	newstore "$T/t1"
	check "TLS: pull with --cacert" 0 "^$v2\$" -- st "$T/t1" pull --cacert "$T/cert.pem" "$RT/snaps/web:v2"
	# An HTTPS registry whose bearer challenge names a plain-HTTP realm: the
	# credentials are not sent there without --insecure.
	echo bearer >"$T/tmode"
	python3 "$SRC/tests/e2e/oci_proxy.py" "${R#*:}" "$T/tmode" "$T/tproxy.port" "$T/cert.pem" "$T/key.pem" &
	PIDS+=($!)
	for _ in $(seq 1 100); do [ -s "$T/tproxy.port" ] && break; sleep 0.1; done
	PT=127.0.0.1:$(cat "$T/tproxy.port")
	echo '{"auths":{"'"$PT"'":{"auth":"'"$(printf alice:secret | base64)"'"}}}' >"$T/auth-tls.json"
	newstore "$T/t2"
	check "TLS: a bearer realm on plain HTTP is refused without --insecure" 1 'token realm http://.* is not HTTPS' -- \
		env REGISTRY_AUTH_FILE="$T/auth-tls.json" "$BIN" --store "$T/t2" pull --cacert "$T/cert.pem" "$PT/snaps/web:v2"
	is "... and no token was asked for" "$(grep -c '/token' "$T/tmode.log" 2>/dev/null)" 0
else
	for t in 1 2 3 4 5; do nok "TLS registry $t" "openssl or the TLS registry failed: $(tail -2 "$T/regtls.log" 2>/dev/null)"; done
fi

# ---- skopeo interop, both ways
if command -v skopeo >/dev/null; then
	check "skopeo copies strata's layout to the registry" 0 '' -- \
		skopeo copy --preserve-digests --dest-tls-verify=false "oci:$L:v2" "docker://$R/skopeo/web:v2"
	newstore "$T/k1"
	check "strata pulls what skopeo pushed (the top alone: skopeo does not copy subjects)" 0 "^$v2\$" -- st "$T/k1" pull --insecure "$R/skopeo/web:v2"
	check "skopeo copies strata's push back into a layout" 0 '' -- \
		skopeo copy --preserve-digests --src-tls-verify=false "docker://$R/snaps/web:v2" "oci:$T/klay:v2"
	newstore "$T/k2"
	check "strata imports the layout skopeo wrote" 0 "^$v2\$" -- st "$T/k2" import "$T/klay"
else
	for t in 1 2 3 4; do skip "skopeo interop $t" "skopeo not installed"; done
fi

# ---- 4. the guest round trip (on the process backend where KVM is missing)
if [ -n "$SANDBOX_WHY" ] || [ ! -f "$G" ]; then # SANDBOX_WHY: kvm_lib.sh's (only a run asking for kvm needs it)
	skip_rest "guest round trip" "needs a sandbox: ${SANDBOX_WHY:-the guest $G is not built}"
	exit $((fails > 0))
fi
GA=$T/ga
GB=$T/gb
newstore "$GA"
newstore "$GB"
check "1. capture a snapshot of a guest" 0 'tagged g1' -- st "$GA" run "$G" --call counter_next --snapshot g1
check "2. push it" 0 '^sha256:' -- st "$GA" push --insecure g1 "$R/guest/counter:g1"
check "3. pull it into a fresh store" 0 '^[0-9a-f]{32}$' -- st "$GB" pull --insecure "$R/guest/counter:g1"
check "4. run from the pulled snapshot" 0 '^2$' -- st "$GB" run g1 --call counter_next
mkdir -p "$T/mnt"
if st "$GB" mount "$T/mnt" >/dev/null 2>&1; then
	MOUNTS+=("$T/mnt")
	check "4. ... and from its mounted path" 0 '^2$' -- "$BIN" run "$T/mnt/snapshots/g1" --call counter_next
else
	nok "4. ... and from its mounted path" "mount failed"
fi
check "5. capture a child" 0 'tagged g2' -- st "$GA" run g1 --call counter_next --snapshot g2
check "5. push it" 0 '"blobs_moved":' -- st "$GA" push --insecure --json g2 "$R/guest/counter:g2"
own=$(jq -n --argjson a "$(st "$GA" show g1 --json)" --argjson b "$(st "$GA" show g2 --json)" \
	'[$b.manifest.layers[] | select(.id as $i | [$a.manifest.layers[].id] | index($i) | not) | .pages] | add * 4096')
check "5. pull it" 0 '"blobs_moved":1,' -- st "$GB" pull --insecure --json "$R/guest/counter:g2"
is "6. on the wire: the child's own pages only" "$(jsonlast .bytes_moved)" "$own"
check "the pulled child runs" 0 '^3$' -- st "$GB" run g2 --call counter_next
exit $((fails > 0))
