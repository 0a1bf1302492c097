#!/usr/bin/env bash
# crash_loop.sh: kill -9 strata at random points, with a fixed seed and a bounded count, and check after
# each kill that the store is consistent and nothing committed was lost: the mount daemon during a `cp -r`
# import, `strata import` of a 64 MiB snapshot, `strata gc`, a capture (`strata run --snapshot`), and a
# host program that checkpoints after every call (tests/e2e/ckpt_chain.c), killed mid-chain (TAP).
# STRATA_CRASH_COUNT (default 6) kills per case, STRATA_CRASH_SEED (default 15) seeds the kill points; the
# long run is one command (docs/fuzzing.md).
set -u
BIN=${STRATA_BIN:-$(dirname "$0")/../../build/mount/strata}
BUILD=${STRATA_BUILD:-$(dirname "$0")/../../build}
CHAIN=${STRATA_CKPT_CHAIN:-$BUILD/tests/e2e/ckpt_chain}
G=$BUILD/vmm/guest/simpleguest.elf
COUNT=${STRATA_CRASH_COUNT:-6}
RANDOM=${STRATA_CRASH_SEED:-15}
T=$(mktemp -d /tmp/strata-crash.XXXXXX)
S=$T/store M=$T/mnt
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$T/sanitizer"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$T/sanitizer"
daemon=
cleanup() {
	[ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null
	grep -q " $M " /proc/mounts 2>/dev/null && { "$BIN" umount "$M" 2>/dev/null || umount -l "$M"; }
	chmod -R u+w "$T" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | head -20 | sed 's/^/# /'; }
# Every strata process the loop starts, as "PID ARGS" in $T/pids: a
# sanitizer report (sanitizer.PID) then names the command that made it.
# A command prefix, not a function: `"${logged[@]}" CMD &` makes $! the
# pid of CMD itself (a function in the background would be a subshell, and
# kill -9 would hit the subshell, not strata).
logged=(bash -c 'echo "$$ ${*:1}" >>"$0"; exec "$@"' "$T/pids")
st() { "${logged[@]}" "$BIN" --store "$S" "$@"; }
export STRATA_BIN=$BIN
# shellcheck source=kvm_lib.sh
. "$(dirname "$0")/kvm_lib.sh"
now_us() { echo $(( $(date +%s%N) / 1000 )); }
# A kill point in [0, span_us): from the seeded generator, 30 bits.
pick() { echo $(( ((RANDOM << 15) | RANDOM) % $1 )); }
# The span kill points are drawn from: the first of the two runs to
# completion sets it, the second keeps the shorter, and three quarters of
# that is used (runs vary, and a kill after the end checks nothing).
span_take() { # microseconds, run index (0 or 1)
	if [ "$2" -eq 0 ] || [ "$1" -lt "$span" ]; then span=$1; fi
	[ "$2" -eq 1 ] && span=$(( span * 3 / 4 + 1 ))
	return 0
}
sleep_us() { sleep "$(printf '%d.%06d' $(($1 / 1000000)) $(($1 % 1000000)))"; }
# kill -9 pid, and say whether it was still running (a kill that came too
# late is not counted as one).
kill9() { kill -9 "$1" 2>/dev/null; local rc=$?; wait "$1" 2>/dev/null; ontime=$((rc == 0)); [ $rc -eq 0 ] || late=$((late + 1)); return $rc; }

# The committed state, sorted: "snapshot ID" for every snapshot and
# "tag NAME ID" for every tag.
state() { { st ls 2>/dev/null | awk 'NR > 1 { print "snapshot", $2 }'
	    st tag 2>/dev/null | awk '{ print "tag", $1, $2 }'; } | sort; }
# After a kill: fsck and verify clean, every snapshot from before still
# there (and verified by verify), nothing else but what the killed
# operation may have committed whole. Counts into the figures: an effective
# kill is one that found the operation running and not yet committed.
attempts=0 committed=0 inconsistent=0 lost=0 late=0 effective=0 ontime=0
check_after() { # case, before-state file, may-add tag (or "")
	local what=$1 before=$2 tag=$3 out
	attempts=$((attempts + 1))
	out=$(st fsck 2>&1) || { inconsistent=$((inconsistent + 1)); echo "$what: fsck: $out" >>"$T/problems"; }
	out=$(st verify 2>&1) || { inconsistent=$((inconsistent + 1)); echo "$what: verify: $out" >>"$T/problems"; }
	state >"$T/after"
	local gone; gone=$(comm -23 "$before" "$T/after" | wc -l)
	[ "$gone" -gt 0 ] && { lost=$((lost + gone)); echo "$what: lost $(comm -23 "$before" "$T/after")" >>"$T/problems"; }
	# What may appear: the operation's tag, and the snapshot it names.
	local added; added=$(comm -13 "$before" "$T/after")
	[ "$ontime" -eq 1 ] && [ -z "$added" ] && effective=$((effective + 1))
	ontime=0
	if [ -n "$added" ]; then
		local tagline; tagline=$(echo "$added" | grep "^tag $tag " || true)
		local others; others=$(echo "$added" | grep -v "^tag $tag " | grep -v "^snapshot ${tagline##* }\$" || true)
		if [ -n "$tag" ] && [ -n "$tagline" ] && [ -z "$others" ]; then
			committed=$((committed + 1))
		else
			inconsistent=$((inconsistent + 1)); echo "$what: appeared: $added" >>"$T/problems"
		fi
	fi
}
report() { # case name: one TAP line from the figures since the last report
	# A case whose every kill came after the commit (or after the end)
	# checked nothing: it fails.
	if [ ! -s "$T/problems" ] && [ "$inconsistent" -eq 0 ] && [ "$lost" -eq 0 ] && [ "$effective" -gt 0 ]; then
		ok "$1: $((attempts - late)) kills ($effective before commit; $late ended first), 0 inconsistencies, 0 snapshots lost"
	else
		nok "$1: $((attempts - late)) kills ($effective before commit), $inconsistent inconsistencies, $lost snapshots lost" "$(cat "$T/problems" 2>/dev/null)"
	fi
	echo "# figures: $1 attempts=$attempts kills=$((attempts - late)) before_commit=$effective inconsistencies=$inconsistent lost=$lost finished_first=$late span_us=$span committed=$committed"
	attempts=0 committed=0 inconsistent=0 lost=0 late=0 effective=0
	rm -f "$T/problems"
}

echo "1..6"
mkdir -p "$S" "$M"
st init >/dev/null
# A 64 MiB snapshot (random 32 MiB, then a hole) and a small one, both exported.
head -c 32M /dev/urandom >"$T/big.img"; truncate -s 64M "$T/big.img"
st debug ingest "$T/big.img" --tag big >/dev/null
st export big "$T/big" >/dev/null
head -c 1M /dev/urandom >"$T/small.img"; truncate -s 4M "$T/small.img"
st debug ingest "$T/small.img" --tag small >/dev/null
st export small "$T/small" >/dev/null
st rm big >/dev/null && st gc --grace 0 >/dev/null

# 1. The mount daemon, killed while `cp -r` copies the 64 MiB snapshot in.
mount_fg() { "${logged[@]}" "$BIN" mount -f "$S" "$M" --log "$T/mount.log" --stage-timeout 2 & daemon=$!
	for _ in $(seq 500); do [ -d "$M/snapshots" ] && return 0; sleep 0.01; done; return 1; }
span=0
for i in $(seq 0 $((COUNT + 1))); do
	state >"$T/before"
	mount_fg || { nok "daemon killed during cp -r: mount"; break; }
	t0=$(now_us)
	cp -r "$T/big" "$M/snapshots/c$i" 2>/dev/null & cpid=$!
	if [ "$i" -lt 2 ]; then
		# A run to completion measures the span: until the import's
		# commit (its tag in the index), which comes before the copy's
		# last calls end (the import lingers for them), so the kills
		# land before the commit.
		until st tag 2>/dev/null | grep -q "^c$i "; do
			kill -0 $cpid 2>/dev/null || { st tag 2>/dev/null | grep -q "^c$i " || break; }
			sleep 0.005
		done
		span_take $(( $(now_us) - t0 + 1 )) "$i"
		wait $cpid; kill -9 "$daemon"; wait "$daemon" 2>/dev/null; daemon=
		"${logged[@]}" "$BIN" umount "$M" >/dev/null 2>&1
		st rm "c$i" >/dev/null 2>&1; st gc --grace 0 >/dev/null; continue
	fi
	sleep_us "$(pick "$span")"
	kill9 "$daemon"; daemon=
	wait $cpid 2>/dev/null
	"${logged[@]}" "$BIN" umount "$M" >/dev/null 2>&1 || umount -l "$M"
	check_after "cp -r c$i" "$T/before" "c$i"
	# the mount shows exactly the store's snapshots
	mount_fg && { ls "$M/snapshots" | sort >"$T/shown"; state | awk '$1 == "tag" { print $2 }' | sort >"$T/tags"
		cmp -s "$T/shown" "$T/tags" || { inconsistent=$((inconsistent + 1)); echo "c$i: mount shows $(cat "$T/shown" | tr '\n' ' ') for $(cat "$T/tags" | tr '\n' ' ')" >>"$T/problems"; }
		"${logged[@]}" "$BIN" umount "$M" >/dev/null 2>&1; wait "$daemon" 2>/dev/null; daemon=; }
	st rm "c$i" >/dev/null 2>&1; st gc --grace 0 >/dev/null
done
report "mount daemon killed during a cp -r import of 64 MiB"

# 2. `strata import` of the 64 MiB snapshot.
for i in $(seq 0 $((COUNT + 1))); do
	state >"$T/before"
	t0=$(now_us)
	"${logged[@]}" "$BIN" --store "$S" import "$T/big" --tag i$i >/dev/null 2>&1 & pid=$!
	if [ "$i" -lt 2 ]; then wait $pid; span_take $(( $(now_us) - t0 + 1 )) "$i"; st rm i$i >/dev/null; st gc --grace 0 >/dev/null; continue; fi
	sleep_us "$(pick "$span")"; kill9 $pid
	check_after "import i$i" "$T/before" "i$i"
	st rm "i$i" >/dev/null 2>&1; st gc --grace 0 >/dev/null
done
report "strata import of 64 MiB killed"

# 3. `strata gc` with garbage to collect: 8 removed snapshots of 1 MiB.
for i in $(seq 0 $((COUNT + 1))); do
	for k in $(seq 8); do
		head -c 1M /dev/urandom >"$T/g.img"
		st debug ingest "$T/g.img" --tag "g$k" >/dev/null && st rm "g$k" >/dev/null
	done
	state >"$T/before"
	t0=$(now_us)
	"${logged[@]}" "$BIN" --store "$S" gc --grace 0 >/dev/null 2>&1 & pid=$!
	if [ "$i" -lt 2 ]; then wait $pid; span_take $(( $(now_us) - t0 + 1 )) "$i"; continue; fi
	sleep_us "$(pick "$span")"; kill9 $pid
	check_after "gc $i" "$T/before" ""
done
st gc --grace 0 >/dev/null
report "strata gc killed"

# 4. A capture: `strata run --snapshot` (on the process backend where KVM is missing).
if [ -z "$SANDBOX_WHY" ]; then
	for i in $(seq 0 $((COUNT + 1))); do
		state >"$T/before"
		t0=$(now_us)
		"${logged[@]}" "$BIN" --store "$S" run "$G" --heap 8M --snapshot r$i --call touch_pages 512 >/dev/null 2>&1 & pid=$!
		if [ "$i" -lt 2 ]; then wait $pid; span_take $(( $(now_us) - t0 + 1 )) "$i"; continue; fi
		sleep_us "$(pick "$span")"; kill9 $pid
		check_after "capture r$i" "$T/before" "r$i"
	done
	report "capture (run --snapshot) killed"
else
	n=$((n + 1)); echo "ok $n - capture (run --snapshot) killed # SKIP needs a sandbox: $SANDBOX_WHY"
fi

# 5. A checkpoint after every call: ckpt_chain (libstrata, as a host program
# links it) makes a chain of CHAIN_N checkpoints, each a child of the one
# before, tagged k<i>_<k>, and prints each after its capture returned.
# After the kill: fsck and verify clean, nothing from before lost, every
# printed checkpoint tagged with the id printed, the last one restores to
# the counter it printed, and nothing else appeared but the chain's own
# (the capture in flight may have committed unprinted).
CHAIN_N=100
check_chain() { # case, before-state file, tag prefix, acknowledged lines file
	local what=$1 before=$2 pre=$3 acked=$4 out gone added tag id counter last=
	attempts=$((attempts + 1))
	out=$(st fsck 2>&1) || { inconsistent=$((inconsistent + 1)); echo "$what: fsck: $out" >>"$T/problems"; }
	out=$(st verify 2>&1) || { inconsistent=$((inconsistent + 1)); echo "$what: verify: $out" >>"$T/problems"; }
	state >"$T/after"
	gone=$(comm -23 "$before" "$T/after" | wc -l)
	[ "$gone" -gt 0 ] && { lost=$((lost + gone)); echo "$what: lost $(comm -23 "$before" "$T/after")" >>"$T/problems"; }
	while read -r tag id counter; do
		grep -qx "tag $tag $id" "$T/after" || { lost=$((lost + 1)); echo "$what: acknowledged $tag $id is not in the store" >>"$T/problems"; }
		last="$tag $counter"
	done <"$acked"
	if [ -n "$last" ]; then
		out=$(st run "${last% *}" --call counter_next 2>&1)
		[ "$out" = $(( ${last#* } + 1 )) ] || { lost=$((lost + 1)); echo "$what: ${last% *} restored gives '$out', not $(( ${last#* } + 1 ))" >>"$T/problems"; }
		[ "$ontime" -eq 1 ] && effective=$((effective + 1))
	fi
	ontime=0
	# What may appear: the chain's tags and the snapshots they name.
	added=$(comm -13 "$before" "$T/after" | awk -v p="tag $pre" 'index($0, p) == 1 { ids[$3] = 1; next } { rest[++n] = $0 }
		END { for (i = 1; i <= n; i++) { split(rest[i], f, " "); if (!(f[1] == "snapshot" && f[2] in ids)) print rest[i] } }')
	[ -n "$added" ] && { inconsistent=$((inconsistent + 1)); echo "$what: appeared: $added" >>"$T/problems"; }
	committed=$((committed + $(wc -l <"$acked")))
}
if [ -z "$SANDBOX_WHY" ]; then
	for i in $(seq 0 $((COUNT + 1))); do
		state >"$T/before"
		t0=$(now_us)
		"${logged[@]}" "$CHAIN" "$S" "$G" "k${i}_" "$CHAIN_N" "${STRATA_BACKEND:-auto}" >"$T/acked" 2>"$T/chain.err" & pid=$!
		if [ "$i" -lt 2 ]; then
			wait $pid || { nok "checkpoint chain killed mid-chain: ckpt_chain failed" "$(cat "$T/chain.err")"; break; }
			span_take $(( $(now_us) - t0 + 1 )) "$i"; continue
		fi
		sleep_us "$(pick "$span")"; kill9 $pid
		check_chain "chain k${i}_" "$T/before" "k${i}_" "$T/acked"
	done
	report "checkpoint chain (a capture after every call) killed mid-chain"
else
	n=$((n + 1)); echo "ok $n - checkpoint chain killed mid-chain # SKIP needs a sandbox: $SANDBOX_WHY"
fi

# The sanitizers said nothing in any of the processes.
# A report goes to stderr whole, with the command it came from, as well as
# into the TAP line's comment (meson's summary shows stderr's last lines).
if ls "$T"/sanitizer* >/dev/null 2>&1; then
	for r in "$T"/sanitizer*; do
		echo "--- sanitizer report ${r##*/} from: $(awk -v p="${r##*.}" '$1 == p { $1 = ""; print; exit }' "$T/pids")"
		head -60 "$r"
	done >&2
	nok "no sanitizer reports" "$(for r in "$T"/sanitizer*; do awk -v p="${r##*.}" '$1 == p { print "from:" $0; exit }' "$T/pids"; head -8 "$r"; done)"
else ok "no sanitizer reports"; fi
echo "# push and pull: a kill -9 mid-pull is tested by oci.sh; they are not in this loop yet"
[ "$failed" -eq 0 ]
