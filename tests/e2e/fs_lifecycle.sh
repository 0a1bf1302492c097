#!/usr/bin/env bash
# fs_lifecycle.sh: mount/umount, foreground, startup errors, CLI changes while mounted,
# daemon kill -9 (stale mountpoint) and remount, a daemon killed mid-import.
. "$(dirname "$0")/fs_lib.sh"

S=$T/store M=$T/mnt
make_image "$T/img"
make_store "$S" base "$T/img"

mkdir -p "$M"
ok "mount returns once the mount is live" bash -c "'$STRATA' mount '$S' '$M' --log '$S.log' && ls '$M/snapshots/base' >/dev/null"
MOUNTS+=("$M")
ok "a second mount on it is refused" expect_fail "already mounted" "$STRATA" mount "$S" "$M"
ok "mounting a directory that is not a store fails cleanly" bash -c \
	"mkdir -p '$T/notstore/x' '$T/m3' && ! '$STRATA' mount '$T/notstore' '$T/m3' 2>'$T/err' && grep -q 'strata: mount' '$T/err' && ! grep -q ' $T/m3 ' /proc/mounts"
ok "umount of a plain directory says nothing is mounted" expect_fail "nothing is mounted" "$STRATA" umount "$T/m3"

ok "-o options reach the kernel mount" bash -c \
	"mkdir -p '$T/m4' && '$STRATA' mount '$S' '$T/m4' -o allow_other --log '$S.log' && grep ' $T/m4 ' /proc/mounts | grep -q allow_other && '$STRATA' umount '$T/m4'"
ok "an unknown -o option is refused before mounting" bash -c \
	"! '$STRATA' mount '$S' '$T/m4' -o no_such_option --log '$S.log' 2>'$T/err' && grep -q 'invalid mount option' '$T/err' && ! grep -q ' $T/m4 ' /proc/mounts"

# Changes made by the CLI while mounted show up.
cat "$M/memory/base" >/dev/null
ok "a tag made by the CLI appears" bash -c "'$STRATA' --store '$S' tag base other && wait_for 3 test -d '$M/snapshots/other'"
ok "a tag removed by the CLI disappears" bash -c "'$STRATA' --store '$S' tag -d other && wait_for 3 bash -c '! ls $M/snapshots | grep -qx other'"
head -c 4096 /dev/urandom | dd of="$T/img2" bs=1 count=0 2>/dev/null
cp "$T/img" "$T/img2" && head -c 8192 /dev/urandom | dd of="$T/img2" bs=4096 seek=1 conv=notrunc 2>/dev/null
ok "a snapshot ingested by the CLI appears" bash -c \
	"'$STRATA' --store '$S' debug ingest '$T/img2' --tag second >/dev/null && wait_for 3 cmp '$M/memory/second' '$T/img2'"
ok "a tag moved by the CLI shows the new snapshot (cached entry invalidated)" bash -c \
	"'$STRATA' --store '$S' tag -f second base && wait_for 3 cmp '$M/memory/base' '$T/img2'"

# Foreground mode and a clean umount.
ok "umount" "$STRATA" umount "$M"
"$STRATA" mount -f "$S" "$M" --log "$S.log" &
fgpid=$!
ok "-f serves in the foreground" wait_for 5 test -d "$M/snapshots/base"
# The daemon is this shell's child: only this shell can wait for it. A
# daemon that has not exited (gone, or a zombie) 10 s after the umount is
# killed (status 137).
"$STRATA" umount "$M"; urc=$?
wait_for 10 bash -c "! test -e /proc/$fgpid || grep -qs '^State:.*Z' /proc/$fgpid/status" || kill -9 $fgpid
wait $fgpid; fgrc=$?
ok "umount ends the foreground daemon with status 0" test "$urc:$fgrc" = 0:0

# SIGINT, SIGTERM and SIGHUP unmount cleanly: the daemon exits 0 and the
# mountpoint is a plain directory again. (A background job of a script
# starts with SIGINT ignored, and a suite run under nohup with SIGHUP
# ignored; libfuse leaves an ignored signal so, as a daemon should: env
# restores all three.)
for sig in INT TERM HUP; do
	env --default-signal=INT,TERM,HUP "$STRATA" mount -f "$S" "$M" --log "$S.log" &
	fgpid=$!
	setup "-f mount for SIG$sig" wait_for 5 test -d "$M/snapshots/base"
	kill -s $sig $fgpid
	wait_for 10 bash -c "! test -e /proc/$fgpid || grep -qs '^State:.*Z' /proc/$fgpid/status" || kill -9 $fgpid
	wait $fgpid; fgrc=$?
	ok "SIG$sig unmounts cleanly (status 0, nothing mounted)" bash -c "test $fgrc -eq 0 && ! grep -q ' $M ' /proc/mounts"
done

# kill -9: the mountpoint goes stale; mounting again recovers it.
setup "mount again" mount_store "$S" "$M"
mkdir "$M/snapshots/half" "$M/snapshots/half/layers"
python3 -c "
import os, time
fd = os.open('$M/snapshots/half/layers/0123456789abcdef0123456789abcdef', os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b'x' * 4096)
print('ready', flush=True)
time.sleep(30)
" >"$T/py.out" 2>/dev/null &
wpid=$!
wait_for 5 grep -q ready "$T/py.out"
setup "kill -9 the daemon mid-import" bash -c "kill -9 \$(pids_of '$STRATA' 'mount $S $M')"
kill -9 $wpid 2>/dev/null; wait $wpid 2>/dev/null
ok "the mountpoint is stale (Transport endpoint is not connected)" expect_fail "Transport endpoint is not connected" stat "$M/snapshots"
ok "mount on the stale mountpoint says so and recovers it" bash -c \
	"'$STRATA' mount '$S' '$M' --log '$S.log' 2>'$T/err' && grep -q 'stale' '$T/err' && ls '$M/snapshots' | grep -qx base"
ok "the killed import left nothing visible" not_listed "$M" half "$S"
ok "the store is consistent after kill -9" st "$S" fsck
ok "strata umount of a stale mount works" bash -c \
	"kill -9 \$(pids_of '$STRATA' 'mount $S $M') && sleep 0.2 && '$STRATA' umount '$M' && ! grep -q ' $M ' /proc/mounts"
finish
