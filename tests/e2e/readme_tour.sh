#!/usr/bin/env bash
# readme_tour.sh: README.md's "A quick tour" block run verbatim, from the source root with the build dir, as on
# a fresh machine: in new mount, network and pid namespaces (an empty /tmp and /mnt, a loopback of its own
# for the registry the tour starts on 127.0.0.1:5000; everything it started ends with it) (TAP).
set -u
SRC=${STRATA_SRC:?}
BUILD=${STRATA_BUILD:?}
T=$(mktemp -d /tmp/strata-e2e-tour.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
echo "1..3"

# The first ```sh block after the "## A quick tour" heading.
tour=$(awk '/^## A quick tour/ { on = 1; next } on && /^```sh$/ { in_block = 1; next }
	in_block && /^```$/ { exit } in_block { print }' "$SRC/README.md")
if [ -n "$tour" ] && grep -q 'strata=build/mount/strata' <<<"$tour"; then echo "ok 1 - README.md has the tour block"
else echo "not ok 1 - README.md has the tour block"; exit 1; fi

why=
[ "$(id -u)" = 0 ] || why="needs root (namespaces, a FUSE mount under /mnt)"
for p in unshare ip docker-registry; do
	command -v "$p" >/dev/null || why="${why:-$p not installed}"
done
if [ -n "$why" ]; then
	echo "ok 2 - the tour runs verbatim # SKIP $why"
	echo "ok 3 - its results are the ones it prints # SKIP $why"
	exit 0
fi

# The tour names build/...: run it from the source root, or (another build dir) from a directory whose
# build is that one.
root=$SRC
if ! [ "$BUILD" -ef "$SRC/build" ]; then
	root=$T/root
	mkdir -p "$root/build" "$root/docs" "$root/vmm" "$root/tests"
fi
# cd before /tmp is covered: the working directory stays reachable whatever
# is mounted over its path, and so does what lies below it. Another build
# dir is bind-mounted at build/ there (a link to it would be resolved from
# /, into the tmpfs, when the build is under /tmp).
# A source or build dir under /tmp or /mnt is put back at its own path on the
# new tmpfs (through a descriptor opened before, not canonicalized: its
# path is the covered one): the build tree names
# itself by absolute path (its .pc files, strata wasm build's SDK), as it
# does for a user whose /tmp is not covered.
TOUR=$tour BUILD_DIR=$(cd "$BUILD" && pwd) SRC_DIR=$(cd "$SRC" && pwd) timeout 240 unshare --mount --net --pid --fork --mount-proc --propagation private bash -c '
	cd "$0" && { [ "$BUILD_DIR" -ef build ] || mount --bind "$BUILD_DIR" build; } &&
	{ [ "$SRC_DIR/docs" -ef docs ] || { mount --bind "$SRC_DIR/docs" docs && mount --bind "$SRC_DIR/vmm" vmm && mount --bind "$SRC_DIR/tests" tests; }; } &&
	exec 7<"$SRC_DIR" 8<"$BUILD_DIR" &&
	ip link set lo up && mount -t tmpfs tmpfs /tmp && mount -t tmpfs tmpfs /mnt &&
	for kept in "7:$SRC_DIR" "8:$BUILD_DIR"; do
		case ${kept#*:} in /tmp/* | /mnt/*)
			mkdir -p "${kept#*:}" && mount --no-canonicalize --bind "/proc/self/fd/${kept%%:*}" "${kept#*:}" || exit 1 ;;
		esac
	done && exec 7<&- 8<&- &&
	exec bash -e -c "$TOUR"' "$root" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" = 0 ]; then echo "ok 2 - the tour runs verbatim"
else
	echo "not ok 2 - the tour runs verbatim"
	echo "# status $rc; stderr: $(tail -5 "$T/err" | tr '\n' '|')"
fi
# echo "hello", the wasm module's "hello, wasm", three calls then a snapshot, restore from the copy prints 4 (and
# the mount's restore too); Lua's eval prints its results tab-separated, the loaded program's snapshot answers handle().
if grep -qx 'hello' "$T/out" && grep -qx 'hello, wasm' "$T/out" && [ "$(grep -cx '4' "$T/out")" -ge 2 ] &&
	grep -qx '3.142	Lua 5.4' "$T/out" && grep -q '^apple:12(.*) pear:3(.*)$' "$T/out"; then echo "ok 3 - its results are the ones it prints"
else echo "not ok 3 - its results are the ones it prints"; echo "# stdout: $(head -c 600 "$T/out" | tr '\n' '|')"; fi
