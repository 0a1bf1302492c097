#!/usr/bin/env bash
# cold.sh: `strata run`/`strata pool` from snapshot directories: a mount right after rsync, copies, bad paths (TAP).
here=$(dirname "$0")
# shellcheck source=fs_lib.sh
. "$here/fs_lib.sh"
GUEST=${STRATA_BUILD:?}/vmm/guest/simpleguest.elf
# The plan comes last (finish): 20 cases and the sanitizer-report check.

A=$T/a B=$T/b MA=$T/ma MB=$T/mb
st "$A" init >/dev/null
if [ -n "$SANDBOX_WHY" ]; then
	# No guest runs on the backend asked for: a snapshot from a memory image
	# serves every case that only stores, mounts, copies and verifies; the
	# rest skip.
	make_image "$T/image"
	st "$A" debug ingest "$T/image" --tag two >/dev/null 2>&1
else
	st "$A" run "$GUEST" --call counter_next --repeat 2 --snapshot two >/dev/null 2>&1
fi
ok "a snapshot is taken" st "$A" show two
ok "store A mounts" mount_store "$A" "$MA"
ok "the snapshot copies out with cp -r" cp -r "$MA/snapshots/two" "$T/copy"
st "$B" init >/dev/null
mount_store "$B" "$MB"
ok "rsync -a copies it into store B's mount" rsync -a "$T/copy/" "$MB/snapshots/two-copy/"
counter_is() { local out; out=$("$STRATA" run "$@" --call counter_next) && [ "$out" = 3 ] || { echo "got '$out'"; return 1; }; }
ok_kvm "run from the mounted path right after rsync continues the counter" counter_is "$MB/snapshots/two-copy"
ok_kvm "pool through the FUSE files right after rsync" \
	"$STRATA" pool "$MB/snapshots/two-copy" -n 3 --via-fuse --call counter_next
ok_kvm "run from the plain copy, verified" env STRATA_VERIFY=1 "$STRATA" run "$T/copy" --call counter_next
reuse() { # a sandbox restored in place answers as the snapshot did: the counter went back
	out=$("$STRATA" pool "$T/copy" -n 3 --call counter_next) &&
	echo "$out" | grep -q '^sandbox 1: counter_next -> 3$' &&
	echo "$out" | grep -q '^sandbox 1 after a restore in place: counter_next -> 3$' &&
	echo "$out" | grep -Eq 'then restore in place \+ call: median [0-9.]+ us'
}
ok_kvm "pool restores each sandbox in place and calls it again" reuse
shared_pages() { "$STRATA" pool "$T/copy" -n 4 --map-files --call counter_next | grep -Eq 'private, [1-9][0-9.]* KiB shared file pages'; }
backend=$("$STRATA" -v run "$GUEST" --call add 1 2 2>&1 | sed -n 's/.*runs on the \(.*\) backend$/\1/p')
if [ "$backend" = process ]; then
	n=$((n + 1)); echo "ok $n # SKIP the process backend copies snapshot pages into shared memory (no file pages)"
else
	ok_kvm "pool --map-files maps the copy's files (shared file pages)" shared_pages
fi
ok "a directory without manifest.json is refused" \
	expect_fail "neither a guest ELF nor a snapshot directory" "$STRATA" run "$T" --call counter_next
# The target on the command line is stat'ed once by the command (file,
# directory or tag?) and once by the snapshot-directory open, no more.
stats_of() { # stats_of PATH COMMAND...: how many stat-family calls named PATH
	local p=$1; shift
	# LeakSanitizer cannot run under ptrace (it reports a fatal error instead).
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
		strace -qq -e trace=stat,lstat,newfstatat,statx,access,faccessat,faccessat2 -o "$T/strace" "$@" >/dev/null 2>&1
	grep -c "\"$p\"" "$T/strace"
}
in_dir() { (cd "$1" && shift && "$@"); }
stat_twice() { local k; k=$(stats_of "$@") && [ "$k" -le 2 ] || { echo "stat'ed $k times"; return 1; }; }
if command -v strace >/dev/null; then
	ok_kvm "run from a snapshot directory named without a slash stats it at most twice" \
		in_dir "$T" stat_twice copy "$STRATA" run copy --call counter_next
	ok "a directory without manifest.json is stat'ed at most twice" \
		stat_twice "$T" "$STRATA" run "$T" --call counter_next
else
	for _ in 1 2; do n=$((n + 1)); echo "ok $n # SKIP strace is not installed"; done
fi
ok "verify checks one snapshot of the store" st "$A" verify two
ok "verify checks a copied snapshot directory" "$STRATA" verify "$T/copy"
cp -r "$T/copy" "$T/bad" && chmod -R u+w "$T/bad"
for f in "$T"/bad/layers/*; do "$here/flip_byte" "$f" 100; done
verify_corrupt() { "$STRATA" verify "$T/bad" >"$T/v.out" 2>&1; [ $? -eq 4 ] && grep -q 'content hashes to' "$T/v.out"; }
ok "verify names a corrupted layer of a copy and exits 4" verify_corrupt
ok "pool -n 0 is a usage error" expect_fail "-n wants a count" "$STRATA" pool "$T/copy" -n 0
ok "pool of a missing tag says so" expect_fail "not found in store" st "$A" pool no-such-tag -n 1
ok "bench of an unknown group is a usage error" expect_fail "no benchmark group" "$STRATA" bench no-such-group
# A dead daemon: its mountpoint answers ENOTCONN; run says so in words.
for p in $(pids_of "$STRATA" "mount $B $MB"); do kill -9 "$p"; done
wait_for 5 sh -c "! kill -0 $(pids_of "$STRATA" "mount $B $MB" | head -1) 2>/dev/null"
ok "a stale mount path is refused with a clear message" \
	expect_fail "daemon" "$STRATA" pool "$MB/snapshots/two-copy" -n 1
ok_kvm "mounting again brings the snapshot back" sh -c "'$STRATA' umount '$MB' 2>/dev/null; '$STRATA' mount '$B' '$MB' && '$STRATA' run '$MB/snapshots/two-copy' --call counter_next"
finish
