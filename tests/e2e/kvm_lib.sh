# kvm_lib.sh: the e2e scripts' one KVM check (`strata doctor --need kvm`), held against the harness's own (tests/harness/kvm_works.c).
# shellcheck shell=bash
KVM_WHY=
# harness_has NAME: the harness's own verdict on KVM or PAGEMAP_SCAN (no
# strata code): status 0 if it works here; its words in $HARNESS_WHY.
# tests/run exports STRATA_HARNESS_<NAME>=1/0 and _WHY; meson test alone
# runs the probe built in STRATA_BUILD/tests/harness.
HARNESS_WHY=
harness_has() {
	local v="STRATA_HARNESS_$1" w="STRATA_HARNESS_$1_WHY" line prog
	if [ -n "${!v:-}" ]; then
		HARNESS_WHY=${!w:-}
		[ "${!v}" = 1 ]
		return
	fi
	case $1 in KVM) prog=kvm_works ;; *) prog=pagemap_scan_works ;; esac
	line=$("${STRATA_BUILD:?}/tests/harness/$prog" 2>&1) || line="0 the harness probe $prog failed: $line"
	HARNESS_WHY=${line#? }
	[ "${line%% *}" = 1 ]
}
# kvm_unusable: status 0 if KVM cannot run sandboxes here; the reason is then
# in $KVM_WHY. Where strata says so but the harness's probe ran a guest, the
# script bails out: a broken KVM check must fail the run, not skip it.
kvm_unusable() {
	KVM_WHY=$("${STRATA_BIN:?}" doctor --need kvm 2>&1) && { KVM_WHY=; return 1; }
	KVM_WHY=${KVM_WHY:-strata doctor --need kvm failed}
	if harness_has KVM; then
		echo "Bail out! strata says KVM is unusable ($KVM_WHY), but the harness's own check ran a guest: $HARNESS_WHY"
		exit 1
	fi
	KVM_WHY="$KVM_WHY (the harness agrees: $HARNESS_WHY)"
	return 0
}
# SANDBOX_WHY: why sandboxes cannot run here, or empty. Only a run that asks
# for the kvm backend needs KVM: the process backend (asked for, or what auto
# picks without KVM) runs sandboxes anywhere. The automatic backend is held
# to the harness's verdict too: it must not fall back to the process backend
# where KVM works.
SANDBOX_WHY=
case ${STRATA_BACKEND:-auto} in
kvm) kvm_unusable && SANDBOX_WHY=$KVM_WHY ;;
auto) kvm_unusable || true ;;
esac
