# fs_lib.sh: shared helpers for the filesystem e2e scripts (TAP output, temp dirs, mounts always unmounted).
# shellcheck shell=bash
set -u
STRATA=${STRATA_BIN:?STRATA_BIN not set (run through meson test)}
T=$(mktemp -d /tmp/strata-fs-e2e.XXXXXX)
MOUNTS=()
# Daemons lose stderr once mounted: sanitizer reports go to files we check at the end.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$T/sanitizer"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$T/sanitizer"
n=0
failed=0

cleanup() {
	local m
	for m in "${MOUNTS[@]}"; do
		if grep -q " $m " /proc/mounts 2>/dev/null; then
			"$STRATA" umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		fi
	done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() {     # ok NAME COMMAND...: run a command, report it as one TAP case
	local name=$1; shift
	n=$((n + 1))
	if "$@" >"$T/last.out" 2>&1; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		sed 's/^/# /' "$T/last.out" | head -20
		failed=$((failed + 1))
	fi
}

setup() {  # setup WHAT COMMAND...: a step the cases need, not a case: on failure the script bails out
	local what=$1; shift
	"$@" >"$T/last.out" 2>&1 && return 0
	echo "Bail out! setup failed: $what: $(head -c 300 "$T/last.out" | tr '\n' ' ')"
	exit 1
}

# shellcheck source=kvm_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/kvm_lib.sh"
ok_kvm() { # ok_kvm NAME COMMAND...: as ok where sandboxes run (KVM, or the process backend); else the case is skipped with the reason
	if [ -n "$SANDBOX_WHY" ]; then
		n=$((n + 1))
		echo "ok $n - $1 # SKIP needs KVM: $SANDBOX_WHY"
		return 0
	fi
	ok "$@"
}

st() {     # st STORE ARGS...: the strata CLI on a store
	local s=$1; shift
	"$STRATA" --store "$s" "$@"
}

mount_store() {  # mount_store STORE MOUNTPOINT [extra mount args]
	local s=$1 m=$2; shift 2
	mkdir -p "$m"
	MOUNTS+=("$m")
	# STRATA_FS_MOUNT_ARGS: e.g. "--threads 4" to run a suite on the worker pool
	# shellcheck disable=SC2086
	"$STRATA" mount "$s" "$m" --log "$s.log" --stage-timeout 2 ${STRATA_FS_MOUNT_ARGS:-} "$@"
}

# A memory image: 256 KiB random, 64 KiB zero hole, 128 KiB random.
make_image() {  # make_image FILE [seed-bytes]
	head -c 262144 /dev/urandom >"$1"
	head -c 65536 /dev/zero >>"$1"
	head -c 131072 /dev/urandom >>"$1"
}

# A store with one snapshot tagged NAME made from IMAGE.
make_store() {  # make_store STORE NAME IMAGE
	st "$1" init >/dev/null && st "$1" debug ingest "$3" --tag "$2" >/dev/null
}

errno_of() {    # errno_of COMMAND...: print the strerror text the command failed with
	"$@" 2>&1 | tail -1
}

expect_fail() { # expect_fail TEXT COMMAND...: command fails and its message contains TEXT
	local want=$1; shift
	local out
	if out=$("$@" 2>&1); then
		echo "unexpected success: $*"
		return 1
	fi
	if [[ "$out" != *"$want"* ]]; then
		echo "wanted '$want', got: $out"
		return 1
	fi
}

not_listed() {  # not_listed MOUNT NAME STORE: nothing named NAME under snapshots/ nor in strata ls
	! ls "$1/snapshots" | grep -qx "$2" && ! st "$3" ls | awk '{print $1}' | tr ',' '\n' | grep -qx "$2"
}

wait_for() {    # wait_for SECONDS COMMAND...: poll until the command succeeds
	local deadline=$((SECONDS + $1)); shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.1
	done
}

pids_of() {     # pids_of PROGRAM TEXT: processes started as PROGRAM whose command line contains TEXT
	local d cmd
	for d in /proc/[0-9]*; do
		cmd=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
		case "$cmd" in "$1 "*"$2"*) echo "${d#/proc/}" ;; esac
	done
}

finish() {
	local m
	for m in "${MOUNTS[@]}"; do
		grep -q " $m " /proc/mounts 2>/dev/null && "$STRATA" umount "$m" 2>/dev/null
	done
	# let the daemons exit (leak checks run at exit)
	wait_for 10 bash -c "test -z \"\$(pids_of '$STRATA' 'mount $T/')\""
	ok "no sanitizer reports from any strata process" bash -c \
		"! ls '$T'/sanitizer.* 2>/dev/null | grep -q . || { cat '$T'/sanitizer.* | head -40; false; }"
	echo "1..$n"
	[ "$failed" -eq 0 ]
}

# Helpers usable inside `bash -c` strings.
export STRATA
export -f st wait_for expect_fail not_listed pids_of
