#!/usr/bin/env bash
# private.sh: runs test_private (a host program restoring lazy snapshots through libstrata's private
# server, fs/fs.h) against a real loopback registry (docker-registry) behind the fault-injecting proxy:
# it pushes a guest snapshot there, then hands the program the proxy's address and mode file (TAP).
set -u
BIN=${STRATA_BIN:?}
SRC=${STRATA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
G="${STRATA_BUILD:-$SRC/build}/vmm/guest/simpleguest.elf"
PROG=${1:?usage: private.sh TEST_PROGRAM}
N=1
n=0
fails=0
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
# shellcheck source=tap_lib.sh
. "$(dirname "$0")/tap_lib.sh"
scratch private
if ! command -v docker-registry >/dev/null; then
	echo "1..0 # SKIP docker-registry not installed"
	exit 0
fi
if ! start_registry reg; then
	echo "1..1"
	nok "the loopback registry starts" "$(tail -3 "$T/reg.log")"
	exit 1
fi
echo pass >"$T/mode"
python3 "$SRC/tests/e2e/oci_proxy.py" "$REG_PORT" "$T/mode" "$T/proxy.port" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$T/proxy.port" ] && break; sleep 0.1; done
P=127.0.0.1:$(cat "$T/proxy.port")
# A guest whose layer is 32 MiB (8000 pages touched), pushed with 256 KiB chunks.
newstore "$T/src"
if ! st "$T/src" run "$G" --heap 64M --call touch_pages 8000 --snapshot big >"$T/make.log" 2>&1 ||
	! st "$T/src" push --insecure --chunk-size 262144 big "$P/lazy/guest:v1" >>"$T/make.log" 2>&1; then
	echo "1..1"
	nok "the guest snapshot is made and pushed" "$(tail -3 "$T/make.log")"
	exit 1
fi
STRATA_PRIVATE_REF="$P/lazy/guest:v1" STRATA_PRIVATE_MODE="$T/mode" STRATA_PRIVATE_DIR="$T" \
	"$PROG" --tap=/dev/stdout --jobs 1
