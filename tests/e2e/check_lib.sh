# check_lib.sh: check NAME WANT_STATUS WANT_REGEX -- COMMAND...: run a command as one TAP case.
# The caller sets T (a temp dir), n (cases so far) and fails (failures so far).
# shellcheck shell=bash
check() {
	local name=$1 want_rc=$2 want=$3
	shift 4
	n=$((n + 1))
	"$@" >"$T/out" 2>"$T/err"
	local rc=$?
	if [ "$rc" -eq "$want_rc" ] && grep -Eq -- "$want" "$T/out" "$T/err"; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		echo "# status $rc (want $want_rc); stdout: $(head -c 300 "$T/out"); stderr: $(head -c 300 "$T/err")"
		fails=$((fails + 1))
	fi
}

# shellcheck source=kvm_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/kvm_lib.sh"
kvm_unusable || true
# check_kvm: as check where sandboxes run (KVM, or the process backend); else the case is skipped with the reason.
check_kvm() {
	if [ -n "$SANDBOX_WHY" ]; then
		n=$((n + 1))
		echo "ok $n - $1 # SKIP needs KVM: $SANDBOX_WHY"
		return 0
	fi
	check "$@"
}
