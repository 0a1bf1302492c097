#!/usr/bin/env bash
# oci_habits.sh: push and pull as skopeo, podman and oras users expect them (issue 25 section 4): references
# other tools take refused with the fix, --plain-http / --tls-verify and what a failed connection says,
# credentials from --creds, auth files and docker-credential helpers, CA and client-certificate directories,
# progress lines and the --json event stream, and the OCI annotations of pushed manifests; against Debian's
# docker-registry on 127.0.0.1, plain, with htpasswd and with TLS (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}

N=14
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
