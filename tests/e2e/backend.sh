#!/bin/bash
# backend.sh: choosing where guests run (--backend, $STRATA_BACKEND), and the errors when a backend cannot run (TAP).
set -u
S="${STRATA_BIN:?}"
G="${STRATA_BUILD:?}/vmm/guest/simpleguest.elf"
T=$(mktemp -d /tmp/strata-e2e-backend.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..11"

# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"

check "the process backend runs a guest, and -v names it" 0 'runs on the process backend' -- \
	"$S" -v run --backend process "$G" --call add 1 41
check "the global --backend works too" 0 '^42$' -- "$S" --backend process run "$G" --call add 1 41
check "STRATA_BACKEND picks the backend" 0 'runs on the process backend' -- \
	env STRATA_BACKEND=process "$S" -v run "$G" --call add 1 41
check "an unknown backend is a usage error naming the choices" 2 'auto, kvm or process' -- \
	"$S" run --backend qemu "$G" --call add 1 2
check "an unknown STRATA_BACKEND is a usage error" 2 'STRATA_BACKEND must be auto, kvm or process' -- \
	env STRATA_BACKEND=qemu "$S" run "$G" --call add 1 2
check "bench results name their backend" 0 '"backend": "process"' -- \
	sh -c "'$S' bench --quick --backend process --filter guest_calls/call/default --json '$T/b.json' >/dev/null && cat '$T/b.json'"

# Without KVM (its device replaced by /dev/null in a private mount namespace).
nokvm() { unshare -m sh -c 'mount --bind /dev/null /dev/kvm && exec "$@"' nokvm "$@"; }
if ! unshare -m true 2>/dev/null || [ ! -e /dev/kvm ]; then
	for i in 7 8 9; do echo "ok $i # SKIP needs root and /dev/kvm to hide (unshare -m)"; done
	n=9
else
	check "without KVM, auto runs on the process backend" 0 'runs on the process backend' -- \
		nokvm "$S" -v run "$G" --call add 1 41
	check "without KVM, --backend kvm says why and names the process backend" 1 \
		'kvm backend cannot run here: /dev/kvm .*\(the process backend, --backend process, needs no KVM\)' -- \
		nokvm "$S" run --backend kvm "$G" --call add 1 2
	check "without KVM, a snapshot runs and restores on the process backend" 0 '^2$' -- \
		nokvm sh -c "'$S' --store '$T/st' init >/dev/null && '$S' --store '$T/st' run '$G' --call counter_next --snapshot one >/dev/null && '$S' --store '$T/st' run one --call counter_next"
fi

# What a process-backend guest's process holds (docs/security.md): no file
# but its guest memory (fd 3) and its userfaultfd (fd 4), a working
# directory removed before it started, no environment, no capability, no
# new privileges, a seccomp filter.
"$S" run --backend process "$G" --call spin --timeout 5s >/dev/null 2>&1 &
host=$!
kids=
for _ in $(seq 100); do
	kids=$(cat /proc/$host/task/*/children 2>/dev/null) && [ -n "$kids" ] && break
	sleep 0.05
done
sleep 0.3
held() { # PID: what it holds, one line each
	local k=$1 f
	for f in /proc/$k/fd/*; do echo "fd ${f##*/} $(readlink "$f")"; done
	echo "cwd $(readlink /proc/$k/cwd | sed 's/-[A-Za-z0-9]\{6\} (deleted)$/-XXXXXX (deleted)/') root $(readlink /proc/$k/root) environ $(wc -c </proc/$k/environ)"
	grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/$k/status | tr -s '\t ' ' '
}
k=${kids%% *}
got=$( [ -n "$k" ] && held "$k" 2>&1)
kill -9 $host 2>/dev/null; wait $host 2>/dev/null
# The removed directory is made in /dev/shm (tmpfs), else in /tmp.
cwd_dir=/tmp; [ -d /dev/shm ] && [ -w /dev/shm ] && cwd_dir=/dev/shm
want="fd 3 /memfd:strata-guest (deleted)
fd 4 anon_inode:[userfaultfd]
cwd $cwd_dir/strata-proc-cwd-XXXXXX (deleted) root / environ 0
CapInh: 0000000000000000
CapPrm: 0000000000000000
CapEff: 0000000000000000
CapBnd: 0000000000000000
CapAmb: 0000000000000000
NoNewPrivs: 1
Seccomp: 2"
n=$((n + 1))
if [ "$got" = "$want" ]; then echo "ok $n - a process sandbox's child holds its guest memory and userfaultfd only: a removed cwd, no environment, no capability, seccomp"
else echo "not ok $n - a process sandbox's child holds its guest memory and userfaultfd only: a removed cwd, no environment, no capability, seccomp"
	printf '%s\n' "$got" | sed 's/^/# /'; fails=$((fails + 1)); fi

# A process-backend guest does not outlive its host: kill -9 the host in the
# middle of a call that never ends, and its sandbox's child process exits.
"$S" run --backend process "$G" --call spin >/dev/null 2>&1 &
host=$!
kids=
for _ in $(seq 100); do
	kids=$(cat /proc/$host/task/*/children 2>/dev/null) && [ -n "$kids" ] && break
	sleep 0.05
done
sleep 0.3  # the call is running
kill -9 $host; wait $host 2>/dev/null
gone() { for k in $kids; do [ -e /proc/$k ] && ! grep -qs '^State:.*Z' /proc/$k/status && return 1; done; return 0; }
for _ in $(seq 60); do gone && break; sleep 0.05; done
n=$((n + 1))
if [ -n "$kids" ] && gone; then echo "ok $n - a process sandbox's child exits when its host is killed -9"
else echo "not ok $n - a process sandbox's child exits when its host is killed -9"; echo "# children '${kids}' still running"
	fails=$((fails + 1)); for k in $kids; do kill -9 "$k" 2>/dev/null; done; fi
[ "$fails" -eq 0 ]
