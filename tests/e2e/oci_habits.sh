#!/usr/bin/env bash
# oci_habits.sh: push and pull as skopeo, podman and oras users expect them (issue 25 section 4): references
# other tools take refused with the fix, --plain-http / --tls-verify and what a failed connection says,
# credentials from --creds, auth files and docker-credential helpers, CA and client-certificate directories,
# progress lines and the --json event stream, and the OCI annotations of pushed manifests; against Debian's
# docker-registry on 127.0.0.1, plain, with htpasswd and with TLS (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}

N=70
n=0
fails=0
echo "1..$N"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch ocihabits
unset REGISTRY_AUTH_FILE DOCKER_CONFIG STRATA_CERTS_D
export HOME=$T/home XDG_RUNTIME_DIR=$T/run XDG_CONFIG_HOME=$T/home/.config
mkdir -p "$HOME" "$XDG_RUNTIME_DIR"

# ---- references other tools take: refused before any store or network work, with the fix
S=$T/s
refuse() { # name ref pattern
	check "$1" 2 "$3" -- st "$T/nostore" pull "$2"
	check "... and push too" 2 "$3" -- st "$T/nostore" push x "$2"
}
refuse "skopeo's docker:// transport: drop the prefix" docker://127.0.0.1:5000/snaps/web:v1 \
	"drop the transport prefix.*\\(e.g. 127.0.0.1:5000/snaps/web:v1\\)"
refuse "skopeo's oci: transport points at export --oci and import" oci:/tmp/x:tag \
	"registries only.*'strata export --oci DIR'.*'strata import DIR'"
refuse "a host with an empty port" a:/b "'a:' is not a registry host \\(HOST\\[:PORT\\]"
refuse "a host whose port is not a number" abc:def/x:y "'abc:def' is not a registry host"
refuse "a port past 65535" 127.0.0.1:70000/x "'127.0.0.1:70000' is not a registry host"
refuse "an URL scheme: drop it, plain HTTP is --plain-http" http://127.0.0.1:5000/x "drop the scheme.*--plain-http"
is "none of them made a store" "$([ -e "$T/nostore" ] && echo made || echo none)" none

# ---- the registries: plain, with htpasswd, with TLS (a CA of the test's own), with TLS asking for a client
# certificate
if ! command -v docker-registry >/dev/null; then
	skip_rest "registry" "docker-registry not installed"
	exit 0
fi
newstore "$S"
head -c 1M /dev/urandom >"$T/img"
truncate -s 4M "$T/img"
snap=$(st "$S" debug ingest "$T/img" --tag v1)
start_registry reg || { skip_rest "registry" "the registry did not start: $(tail -3 "$T/reg.log")"; exit 1; }
R=127.0.0.1:$REG_PORT
python3 -W ignore -c 'import crypt; print("bob:" + crypt.crypt("pw", crypt.mksalt(crypt.METHOD_BLOWFISH)))' >"$T/htpasswd"
start_registry regauth "$T/htpasswd" || { skip_rest "registry" "the htpasswd registry did not start"; exit 1; }
RA=127.0.0.1:$REG_PORT
P=$T/pki
mkdir -p "$P"
(
	cd "$P" || exit 1
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=strata-test-ca
	openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1
	printf 'subjectAltName=IP:127.0.0.1\n' >srv.ext
	openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 1 -extfile srv.ext
	openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=strata-client
	openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1
) >"$T/pki.log" 2>&1 || { skip_rest "registry" "openssl failed: $(tail -2 "$T/pki.log")"; exit 1; }
start_registry regtls "" "$P/srv.pem $P/srv.key" || { skip_rest "registry" "the TLS registry did not start"; exit 1; }
RT=127.0.0.1:$REG_PORT
# A TLS registry that asks for a client certificate signed by the CA (start_registry's config, with clientcas).
mtls_port=$(freeport)
mkdir -p "$T/regmtls"
cat >"$T/regmtls.yml" <<YML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $T/regmtls}}
http: {addr: 127.0.0.1:$mtls_port, tls: {certificate: $P/srv.pem, key: $P/srv.key, clientcas: [$P/ca.pem]}}
YML
docker-registry serve "$T/regmtls.yml" >"$T/regmtls.log" 2>&1 &
PIDS+=($!)
RM=127.0.0.1:$mtls_port
for _ in $(seq 1 100); do
	curl -s -o /dev/null --cacert "$P/ca.pem" --cert "$P/client.pem" --key "$P/client.key" "https://$RM/v2/" && break
	sleep 0.1
done

# ---- plain HTTP and TLS: --plain-http, --insecure (the same), --tls-verify, and what a mismatch says
check "push --plain-http to a plain-HTTP registry" 0 '^sha256:' -- st "$S" push --plain-http v1 "$R/h/web:v1"
newstore "$T/p1"
check "pull --plain-http, the option after the operand" 0 "^$snap\$" -- st "$T/p1" pull "$R/h/web:v1" --plain-http
check "--insecure is still plain HTTP" 0 '^sha256:' -- st "$S" push --insecure v1 "$R/h/web:v1"
check "HTTPS (the default) to a plain-HTTP registry names --plain-http" 1 \
	'speaks plain HTTP, not HTTPS: use --plain-http' -- st "$S" push v1 "$R/h/web:v1"
check "--plain-http to a TLS registry says it speaks HTTPS, and which option does what" 1 \
	'speaks HTTPS, not plain HTTP \(HTTP 400\): drop --plain-http \(--insecure means plain HTTP.*--tls-verify=false' -- \
	st "$S" push --plain-http v1 "$RT/h/web:v1"
check "... the same for oras's --insecure" 1 'speaks HTTPS, not plain HTTP' -- st "$S" push --insecure v1 "$RT/h/web:v1"
check "a certificate of an unknown CA names --cacert, certs.d and --tls-verify=false" 1 \
	'TLS error.*a private CA: --cacert FILE or its CA as ca.crt in the registry.s certs.d directory; --tls-verify=false' -- \
	st "$S" push v1 "$RT/h/web:v1"
check "--tls-verify=false pushes over HTTPS without checking the certificate" 0 '^sha256:' -- \
	st "$S" push --tls-verify=false v1 "$RT/h/web:v1"
newstore "$T/p2"
check "... and pulls" 0 "^$snap\$" -- st "$T/p2" pull --tls-verify=false "$RT/h/web:v1"
newstore "$T/lz"
st "$T/lz" pull --lazy --tls-verify=false "$RT/h/web:v1" >/dev/null 2>&1
check "a pull completing a lazy layer fetches its chunks with the pull's --tls-verify=false" 0 \
	'"layers_completed":1,' -- st "$T/lz" pull --json --tls-verify=false "$RT/h/web:v1"
check "--tls-verify takes true or false" 2 '--tls-verify takes true or false' -- st "$S" push --tls-verify=no v1 "$RT/h/web:v1"
check "--tls-verify=false with --plain-http is plain HTTP still" 0 '^sha256:' -- \
	st "$S" push --tls-verify=false --plain-http v1 "$R/h/web:v1"

# ---- certificate directories: certs.d/HOST:PORT/ (ca.crt, *.crt; NAME.cert + NAME.key), --cert-dir
C1=$T/certs1 C2=$T/certs2
mkdir -p "$C1/127.0.0.1:1" "$C2/$RT" "$C2/$RM"
cp "$P/ca.pem" "$C2/$RT/ca.crt"
check "a CA in the second certs.d root's HOST:PORT directory is trusted" 0 '^sha256:' -- \
	env STRATA_CERTS_D="$C1:$C2" "$BIN" --store "$S" push v1 "$RT/h/web:v1"
newstore "$T/p3"
check "... for a pull" 0 "^$snap\$" -- env STRATA_CERTS_D="$C1:$C2" "$BIN" --store "$T/p3" pull "$RT/h/web:v1"
mkdir -p "$T/onedir"
cp "$P/ca.pem" "$T/onedir/extra.crt"
check "--cert-dir DIR: any *.crt in it" 0 '^sha256:' -- st "$S" push --cert-dir "$T/onedir" v1 "$RT/h/web:v1"
cp "$P/ca.pem" "$C2/$RM/ca.crt"
check "a registry asking for a client certificate, none in its directory: the hint names NAME.cert and NAME.key" 1 \
	'client certificate: NAME.cert and NAME.key' -- env STRATA_CERTS_D="$C2" "$BIN" --store "$S" push v1 "$RM/h/web:v1"
cp "$P/client.pem" "$C2/$RM/client.cert"
check "a .cert without its .key is named" 1 "client certificate .*client.cert has no key .*client.key" -- \
	env STRATA_CERTS_D="$C2" "$BIN" --store "$S" push v1 "$RM/h/web:v1"
cp "$P/client.key" "$C2/$RM/client.key"
check "client.cert and client.key in certs.d/HOST:PORT: the push is let in" 0 '^sha256:' -- \
	env STRATA_CERTS_D="$C2" "$BIN" --store "$S" push v1 "$RM/h/web:v1"
newstore "$T/p4"
check "... and a pull" 0 "^$snap\$" -- env STRATA_CERTS_D="$C2" "$BIN" --store "$T/p4" pull "$RM/h/web:v1"

# ---- credentials: --creds, the auth files in the containers tools' order, credHelpers and credsStore through
# a docker-credential helper on PATH (it logs the server it was asked for)
check "htpasswd: no credentials anywhere names where they can come from" 1 \
	'none were found for it \(--creds USER:PASSWORD, an auth file or a docker-credential helper\)' -- \
	st "$S" push --plain-http v1 "$RA/c/web:v1"
check "--creds USER:PASSWORD" 0 '^sha256:' -- st "$S" push --plain-http --creds bob:pw v1 "$RA/c/web:v1"
check "--creds USER alone: strata does not prompt, and says so" 2 'takes USER:PASSWORD \(strata does not prompt' -- \
	st "$S" push --plain-http --creds bob v1 "$RA/c/web:v1"
check "--creds with a wrong password" 1 'authentication failed.*refused the credentials' -- \
	st "$S" push --plain-http --creds bob:nope v1 "$RA/c/web:v1"
mkdir -p "$T/bin"
cat >"$T/bin/docker-credential-stratatest" <<SH
#!/bin/sh
[ "\$1" = get ] || exit 2
read -r server
echo "\$server" >>"$T/helper.log"
case \$server in
$RA) printf '{"ServerURL":"%s","Username":"bob","Secret":"pw"}\n' "\$server" ;;
*) echo "credentials not found in native keychain"; exit 1 ;;
esac
SH
chmod +x "$T/bin/docker-credential-stratatest"
export PATH="$T/bin:$PATH"
mkdir -p "$HOME/.docker"
echo '{"credHelpers":{"'"$RA"'":"stratatest"}}' >"$HOME/.docker/config.json"
newstore "$T/c1"
check "credHelpers: the helper named for the registry gives the credentials" 0 "^$snap\$" -- \
	st "$T/c1" pull --plain-http "$RA/c/web:v1"
is "... asked with the registry's host:port on stdin" "$(cat "$T/helper.log")" "$RA"
echo '{"auths":{"'"$RA"'":{}},"credsStore":"stratatest"}' >"$HOME/.docker/config.json"
newstore "$T/c2"
check "credsStore: the store for every registry gives them" 0 "^$snap\$" -- st "$T/c2" pull --plain-http "$RA/c/web:v1"
echo '{"credHelpers":{"'"$RA"'":"nosuchhelper"}}' >"$HOME/.docker/config.json"
check "a helper not on PATH is named" 1 'docker-credential-nosuchhelper \(named in .*config.json\) cannot be run.*not on PATH' -- \
	st "$S" push --plain-http v1 "$RA/c/web:v1"
echo '{"credHelpers":{"'"$RA"'":"../../bin/sh"}}' >"$HOME/.docker/config.json"
check "a helper name that is a path is refused" 1 'not the name of a docker-credential-NAME helper' -- \
	st "$S" push --plain-http v1 "$RA/c/web:v1"
printf '#!/bin/sh\necho "credentials not found in native keychain"; exit 1\n' >"$T/bin/docker-credential-empty"
chmod +x "$T/bin/docker-credential-empty"
echo '{"credsStore":"empty"}' >"$HOME/.docker/config.json"
check "a helper with nothing for the registry is no credentials, not an error" 1 'none were found for it' -- \
	st "$S" push --plain-http v1 "$RA/c/web:v1"
printf '#!/bin/sh\necho "{\\"Username\\":\\"<token>\\",\\"Secret\\":\\"x\\"}"\n' >"$T/bin/docker-credential-tokenonly"
chmod +x "$T/bin/docker-credential-tokenonly"
echo '{"credsStore":"tokenonly"}' >"$HOME/.docker/config.json"
check "an identity token from a helper is refused by name" 1 'identity token' -- st "$S" push --plain-http v1 "$RA/c/web:v1"
rm "$HOME/.docker/config.json"
authjson() { echo '{"auths":{"'"$RA"'":{"auth":"'"$(printf "%s" "$1" | base64)"'"}}}'; }
mkdir -p "$XDG_RUNTIME_DIR/containers" "$XDG_CONFIG_HOME/containers"
authjson bob:pw >"$XDG_CONFIG_HOME/containers/auth.json"
check "\$XDG_CONFIG_HOME/containers/auth.json" 0 '^sha256:' -- st "$S" push --plain-http v1 "$RA/c/web:v1"
authjson bob:wrong >"$XDG_RUNTIME_DIR/containers/auth.json"
check "\$XDG_RUNTIME_DIR/containers/auth.json comes first" 1 'refused the credentials' -- \
	st "$S" push --plain-http v1 "$RA/c/web:v1"
authjson bob:pw >"$T/regauth.json"
check "\$REGISTRY_AUTH_FILE before both" 0 '^sha256:' -- \
	env REGISTRY_AUTH_FILE="$T/regauth.json" "$BIN" --store "$S" push --plain-http v1 "$RA/c/web:v1"
check "--creds before every file" 0 '^sha256:' -- st "$S" push --plain-http --creds bob:pw v1 "$RA/c/web:v1"

# ---- OCI annotations on pushed manifests: created (the snapshot's capture time: digests stay equal), source,
# --annotation
manifest() { curl -s -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$R/v2/$1/manifests/$2"; }
d1=$(st "$S" push --plain-http v1 "$R/a/one:v1" 2>/dev/null)
created=$(st "$S" show v1 --json | jq -r '.manifest.created' | sed 's/\.[0-9]*Z$/Z/')
is "the manifest carries org.opencontainers.image.created, the snapshot's capture time in RFC 3339" \
	"$(manifest a/one v1 | jq -r '.annotations["org.opencontainers.image.created"]')" "$created"
sleep 1
d2=$(st "$S" push --plain-http v1 "$R/a/two:v1" 2>/dev/null)
is "a push a second later to another repository gives the same digest" "$d2" "$d1"
st "$S" export --oci "$T/lay" v1 >/dev/null 2>&1
is "... and so does export --oci" "$(jq -r '.manifests[0].digest' "$T/lay/index.json")" "$d1"
check "push --source URL --annotation KEY=VALUE" 0 '^sha256:' -- \
	st "$S" push --plain-http --source https://example.org/web.git --annotation org.example.team=infra v1 "$R/a/three:v1"
is "... both in the manifest beside created" \
	"$(manifest a/three v1 | jq -c '.annotations | del(.["org.opencontainers.image.created"])')" \
	'{"org.example.team":"infra","org.opencontainers.image.source":"https://example.org/web.git"}'
check "... and it still pulls" 0 "^$snap\$" -- st "$T/p1" pull --plain-http --tag three "$R/a/three:v1"
check "--annotation without KEY= is a usage error" 2 "--annotation takes KEY=VALUE, not 'team'" -- \
	st "$S" push --plain-http --annotation team v1 "$R/a/three:v1"

# ---- progress: skopeo-like lines on stderr (a line per blob when not on a terminal), totals and rate; --json:
# versioned events with each blob's kind, no repeated bytes events, errors in the stream
head -c 12M /dev/urandom >"$T/big"
st "$S" debug ingest "$T/big" --tag big >/dev/null
check "push prints a line per blob, as skopeo does" 0 '^sha256:' -- st "$S" push --plain-http big "$R/p/big:v1"
cp "$T/err" "$T/push1.err"
grep -cE '^Copying layer sha256:[0-9a-f]{12} done \([0-9.]+ (MiB|KiB|B)\)$' "$T/push1.err" >"$T/nlayers"
is "... one 'Copying layer ... done' line per layer" "$(cat "$T/nlayers")" \
	"$(st "$S" show big --json | jq '.manifest.layers | length')"
is "... a chunk-index line, a config line and the manifest, in that order" \
	"$(grep -oE '^(Copying chunk-index|Copying config|Writing manifest) sha256:[0-9a-f]{12}( done)?' "$T/push1.err" | sed 's/ sha256:[0-9a-f]*//' | uniq | tr '\n' ,)" \
	"Copying chunk-index done,Copying config done,Writing manifest,"
is "... and the totals with the rate" \
	"$(grep -cE '^[0-9]+ blob\(s\) copied \([0-9.]+ MiB\) in [0-9.]+ s, [0-9.]+ (MiB|KiB|B)/s; 0 already there$' "$T/push1.err")" 1
is "... no internal event words" "$(grep -cE '(^| )(begin|bytes|end|skip) sha256' "$T/push1.err")" 0
check "a second push: each blob skipped, as skopeo says it" 0 \
	'^Copying layer sha256:[0-9a-f]{12} skipped: already exists$' -- st "$S" push --plain-http big "$R/p/big:v1"
newstore "$T/rd"
check "a pull says it reads the manifest, then copies each layer" 0 '^Reading manifest sha256:[0-9a-f]{12}$' -- \
	st "$T/rd" pull --plain-http "$R/p/big:v1"
if command -v script >/dev/null; then
	newstore "$T/tty"
	check "on a terminal: the line in flight is rewritten (cleared with ESC [K), the finished ones stay" 0 \
		$'\033\\[KCopying layer sha256:[0-9a-f]{12} done \\(12.0 MiB\\)' -- \
		script -qec "'$BIN' --store '$T/tty' pull --plain-http '$R/p/big:v1'" /dev/null
else
	skip "on a terminal: the line in flight is rewritten" "script(1) not installed"
fi
newstore "$T/j"
st "$T/j" pull --plain-http --json "$R/p/big:v1" >"$T/pull.json" 2>"$T/pull.err"
is "--json: stdout is JSON lines only, every one with schema 1" \
	"$(jq -s 'map(.schema) | unique' "$T/pull.json" 2>&1 | tr -d ' \n')" "[1]"
is "... each blob event says its kind" \
	"$(jq -r 'select(.event != "done") | .kind' "$T/pull.json" | sort -u | tr '\n' ' ')" "layer manifest "
is "... no bytes event repeats one before it, nor says a blob is whole (end does)" \
	"$(jq -s '[.[] | select(.event == "bytes")] | (group_by([.digest, .done]) | map(select(length > 1)) | length) + (map(select(.done >= .size)) | length)' "$T/pull.json")" 0
is "... and the last line is the done event" "$(tail -1 "$T/pull.json" | jq -r .event)" done
st "$S" push --plain-http --json big "$R/p/big2:v1" >"$T/push.json" 2>/dev/null
is "push --json: layer, chunk-index, config and manifest blobs" \
	"$(jq -r 'select(.event != "done") | .kind' "$T/push.json" | sort -u | tr '\n' ' ')" "chunk-index config layer manifest "
is "... no repeated bytes events there either" \
	"$(jq -s '[.[] | select(.event == "bytes")] | group_by([.digest, .done]) | map(select(length > 1)) | length' "$T/push.json")" 0
check "an error is an event of the --json stream too" 3 '' -- st "$T/j" pull --plain-http --json "$R/p/big:nosuch"
is "... the last line, with the message" "$(tail -1 "$T/out" | jq -r '[.schema, .event, (.message | test("not in the registry"))] | join(" ")')" \
	"1 error true"
