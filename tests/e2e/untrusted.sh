#!/usr/bin/env bash
# untrusted.sh: snapshot directories from an untrusted source through the real strata binary: text from
# them is printed escaped, oversized manifests are refused early, forged guest descriptions are refused
# with a clear reason (TAP).
set -u
BIN=${STRATA_BIN:-$(dirname "$0")/../../build/mount/strata}
BUILD=${STRATA_BUILD:-$(dirname "$0")/../../build}
G=$BUILD/vmm/guest/simpleguest.elf
T=$(mktemp -d /tmp/strata-e2e-untrusted.XXXXXX)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && echo "# $(echo "$2" | head -c 400 | tr '\n\033' ' ?')"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
# shellcheck source=kvm_lib.sh
. "$(dirname "$0")/kvm_lib.sh"
esc=$(printf '\033')

echo "1..19"
S=$T/store
st() { "$BIN" --store "$S" "$@"; }
mkdir -p "$S"
st init >/dev/null
head -c 64K /dev/urandom > "$T/img"
truncate -s 1M "$T/img"
st debug ingest "$T/img" --tag base >/dev/null
st export base "$T/exp" >/dev/null

# A copy whose labels carry a terminal escape and a newline forging a line.
forge() { # jq filter, into DIR (a copy of the export)
	rm -rf "$2"; cp -r "$T/exp" "$2"; chmod -R u+w "$2"
	jq -c "$1" "$T/exp/manifest.json" > "$2/manifest.json"
}
forge '.labels = {"who": "a\u001b[31mred", "x": "1\nlabel     forged=yes"}' "$T/labels"
if st import "$T/labels" --tag labelled >/dev/null 2>&1; then
	out=$(st show labelled)
	if ! printf '%s' "$out" | grep -q "$esc" && [ "$(printf '%s\n' "$out" | grep -c '^label ')" = 2 ] &&
	   printf '%s\n' "$out" | grep -qF 'label     who=a\x1b[31mred' &&
	   printf '%s\n' "$out" | grep -qF 'label     x=1\nlabel     forged=yes'; then
		ok "show prints labels with control characters escaped (no escape byte, no forged line)"
	else nok "show prints labels with control characters escaped (no escape byte, no forged line)" "$out"; fi
	out=$(st show labelled --json)
	if ! printf '%s' "$out" | grep -q "$esc" &&
	   [ "$(printf '%s' "$out" | jq -r '.manifest.labels.who')" = "a${esc}[31mred" ]; then
		ok "show --json escapes them as JSON and keeps their value"
	else nok "show --json escapes them as JSON and keeps their value" "$out"; fi
else
	nok "a snapshot with such labels imports"; nok "show --json (not run)"
fi

forge '.["bad\u001b[2Jkey"] = 1' "$T/badkey"
out=$("$BIN" verify "$T/badkey" 2>&1)
if ! printf '%s' "$out" | grep -q "$esc" && printf '%s' "$out" | grep -qF "unknown key 'bad\\x1b[2Jkey'"; then
	ok "verify quotes a manifest's bad key escaped"
else nok "verify quotes a manifest's bad key escaped" "$out"; fi
out=$(st import "$T/badkey" 2>&1)
if ! printf '%s' "$out" | grep -q "$esc" && printf '%s' "$out" | grep -qF 'bad\x1b[2Jkey'; then
	ok "import's error names it escaped too"
else nok "import's error names it escaped too" "$out"; fi

# Manifests larger, or denser in structure, than any strata writes are
# refused before they are parsed (a 60 MiB one took ~1.3 GiB and seconds).
forge '.' "$T/huge"
python3 - "$T/huge/manifest.json" "$T/exp/manifest.json" <<'P'
import json, sys
m = json.load(open(sys.argv[2]))
m["labels"] = {"pad": ",".join(["{}"] * (20 << 20))}
json.dump(m, open(sys.argv[1], "w"))
P
forge '.' "$T/dense"
python3 - "$T/dense/manifest.json" "$T/exp/manifest.json" <<'P'
import sys
text = open(sys.argv[2]).read()
open(sys.argv[1], "w").write(text[:-1] + ',"x-dense":[' + ",".join(["{}"] * (4 << 20)) + "]}")
P
maxrss_of() { # command...: its output, then maxrss_kb=N
	python3 -c 'import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(p.stdout + p.stderr + "maxrss_kb=%d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
for c in "huge:more than the limit" "dense:too dense in structure"; do
	d=${c%%:*}; want=${c#*:}
	size=$(( $(stat -c %s "$T/$d/manifest.json") >> 20 ))
	out=$(maxrss_of "$BIN" verify "$T/$d")
	rss=$(printf '%s' "$out" | sed -n 's/.*maxrss_kb=\([0-9]*\).*/\1/p')
	if printf '%s' "$out" | grep -q "$want" && [ -n "$rss" ] && [ "$rss" -lt 65536 ]; then
		ok "verify refuses a $size MiB manifest ($want) in $((rss >> 10)) MiB of memory"
	else nok "verify refuses a $size MiB manifest ($want) in under 64 MiB of memory" "$out"; fi
done

# A snapshot of a guest: sandboxes run on the process backend where KVM is
# missing, so only a run that asks for the kvm backend skips.
if [ -n "$SANDBOX_WHY" ]; then
	while [ "$n" -lt 19 ]; do skip "guest snapshots" "needs a sandbox: $SANDBOX_WHY"; done
	[ "$failed" -eq 0 ]; exit
fi
st run "$G" --call counter_next --snapshot sg >/dev/null 2>&1
st export sg "$T/sg" >/dev/null
cp -r "$T/sg" "$T/fn" && chmod -R u+w "$T/fn"
jq -c '.guest.functions[0].name = "wild\u001b[2Jx"' "$T/sg/manifest.json" > "$T/fn/manifest.json"
out=$("$BIN" run "$T/fn" --list 2>&1)
if ! printf '%s' "$out" | grep -q "$esc" && printf '%s\n' "$out" | grep -qF 'wild\x1b[2Jx v(i)'; then
	ok "run --list prints a guest's function names escaped"
else nok "run --list prints a guest's function names escaped" "$out"; fi
jq -c 'del(.guest.abi_version)' "$T/sg/manifest.json" > "$T/fn/manifest.json"
out=$("$BIN" run "$T/fn" --list 2>&1)
if printf '%s' "$out" | grep -q "no valid abi_version"; then
	ok "a guest description without abi_version is refused with that reason"
else nok "a guest description without abi_version is refused with that reason" "$out"; fi

# A copy whose layer file, layers/ directory or manifest.json is a symlink
# to a file (directory) outside it, with the right bytes: verify, import and
# run refuse it; nothing of it is mapped or stored (docs/security.md, "Map a
# file outside the snapshot"). The same bytes as plain files run.
l=$(ls "$T/sg/layers" | head -1)
escape() { # KIND DIR: DIR becomes a copy of sg whose KIND points outside it
	rm -rf "$2" "$2.out"; cp -r "$T/sg" "$2"; chmod -R u+w "$2"; mkdir -p "$2.out"
	case $1 in
	layer) mv "$2/layers/$l" "$2.out/$l"; ln -s "$2.out/$l" "$2/layers/$l" ;;
	layers) mv "$2/layers" "$2.out/layers"; ln -s "$2.out/layers" "$2/layers" ;;
	manifest) mv "$2/manifest.json" "$2.out/manifest.json"; ln -s "$2.out/manifest.json" "$2/manifest.json" ;;
	esac
}
refused() { # NAME WANT COMMAND...: COMMAND fails, its message contains WANT
	local name=$1 want=$2 out; shift 2
	if out=$("$@" 2>&1); then nok "$name" "succeeded: $out"
	elif printf '%s' "$out" | grep -qF "$want"; then ok "$name"
	else nok "$name" "wanted '$want': $out"; fi
}
escape layer "$T/plain" && rm -f "$T/plain/layers/$l" && cp "$T/plain.out/$l" "$T/plain/layers/$l"
out=$("$BIN" run "$T/plain" --call counter_next 2>&1)
if [ "$out" = 2 ]; then ok "a copy with its layer's bytes as a plain file runs"
else nok "a copy with its layer's bytes as a plain file runs" "$out"; fi
for kind in layer:"layer $l" layers:"layer $l" manifest:manifest.json; do
	k=${kind%%:*} want=${kind#*:}
	escape "$k" "$T/esc-$k"
	refused "verify refuses a copy whose $k is a symlink out of it" "$want" "$BIN" verify "$T/esc-$k"
	refused "import refuses it and stores nothing" "$want" st import "$T/esc-$k" --tag "esc-$k"
	refused "run refuses it (nothing outside the snapshot is mapped)" "$want" "$BIN" run "$T/esc-$k" --call counter_next
done
if st ls | grep -q esc-; then nok "no refused copy was tagged" "$(st ls)"; else ok "no refused copy was tagged"; fi
[ "$failed" -eq 0 ]
