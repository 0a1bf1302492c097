#!/bin/bash
# workingset.sh: working-set records end to end: `run --record-working-set` on each backend, `show`, gc keeps the record while its snapshot lives, fsck, rm releases it (TAP).
set -u
S="${STRATA_BIN:?}"
G="${STRATA_BUILD:?}/vmm/guest/simpleguest.elf"
T=$(mktemp -d /tmp/strata-e2e-ws.XXXXXX)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
ST="$T/store"
N=18
n=0
fails=0
echo "1..$N"

# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
st() { "$S" --store "$ST" "$@"; }
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && echo "# $2"; }
is() { if [ "$2" = "$3" ]; then ok "$1"; else nok "$1" "got '$2', want '$3'"; fi; }

st init >/dev/null
if [ -n "$SANDBOX_WHY" ]; then
	while [ $n -lt $N ]; do n=$((n + 1)); echo "ok $n - working sets # SKIP needs a sandbox: $SANDBOX_WHY"; done
	exit 0
fi
# A snapshot whose heap holds 400 pages of data (one layer of them plus the guest's own pages).
st run "$G" --heap 8M --call touch_pages 400 --snapshot big >/dev/null 2>&1
stored=$(st show big --json | jq '.stored_bytes / 4096')
id0=$(st show big --json | jq -r .id)

check "a snapshot has no working set until one is recorded" 0 '^working set  none' -- st show big
check "run --record-working-set records after the first call" 0 'working set of [0-9a-f]{32}: [0-9]+ pages' -- \
	st run big --call echo hi --record-working-set
small=$(st show big --json | jq '.working_set.pages')
if [ "$small" -gt 0 ] && [ "$small" -lt "$stored" ]; then ok "an echo touches some of the snapshot, not all ($small of $stored pages)"
else nok "an echo touches some of the snapshot, not all" "$small of $stored pages"; fi
check "show reports it against the snapshot's size" 0 '^working set  .* of the .* stored' -- st show big
rec1=$(st show big --json | jq -r '.working_set.record')

check "a first call that reads 400 heap pages records them" 0 'working set of' -- \
	st run big --call touch_pages 400 --record-working-set
big=$(st show big --json | jq '.working_set.pages')
if [ "$big" -ge $((small + 400)) ] && [ "$big" -le "$stored" ]; then ok "the record follows what the first call touched ($big pages)"
else nok "the record follows what the first call touched" "$big pages, echo $small, stored $stored"; fi
rec2=$(st show big --json | jq -r '.working_set.record')
[ "$rec1" != "$rec2" ] && ok "a new record replaces the old one" || nok "a new record replaces the old one"
is "the snapshot id did not change" "$(st ls | awk '$1 == "big" {print $2}')/$(st show big --json | jq -r .id)" "$id0/$id0"

check "fsck: the record is referenced, the replaced one an orphan" 0 '0 problem' -- st fsck
st gc --grace 0 >/dev/null
[ -f "$ST/blobs/${rec2:0:2}/$rec2" ] && ok "gc keeps the record while its snapshot lives" || nok "gc keeps the record"
[ ! -f "$ST/blobs/${rec1:0:2}/$rec1" ] && ok "gc removes the replaced record" || nok "gc removes the replaced record"
check "verify hashes the record too" 0 '' -- st verify
# ... so a record with one byte changed, in a copy of the store, fails it.
cp -a "$ST" "$T/bad" && chmod -R u+w "$T/bad/blobs" && "$(dirname "$0")/flip_byte" "$T/bad/blobs/${rec2:0:2}/$rec2" 0
check "... a record with a changed byte fails verify, named" 4 "$rec2" -- "$S" --store "$T/bad" verify

check "recording from a guest ELF is refused: no snapshot to record" 2 'needs a snapshot' -- \
	st run "$G" --call echo hi --record-working-set
# The record names the layer pages through the manifest: a child's record names the child's layers.
st run big --call touch_pages 10 --snapshot child >/dev/null 2>&1
check "a child snapshot gets its own record" 0 'working set of' -- st run child --call echo hi --record-working-set
is "the child's record is not the parent's" "$([ "$(st show child --json | jq -r .working_set.record)" != "$rec2" ] && echo yes)" yes

st rm big >/dev/null 2>&1
st gc --grace 0 >/dev/null
[ ! -f "$ST/blobs/${rec2:0:2}/$rec2" ] && ok "rm + gc frees the record with its snapshot" || nok "rm + gc frees the record"
check "fsck is clean afterwards" 0 '0 problem' -- st fsck

exit $((fails > 0))
