# kvm_lib.sh: the e2e scripts' one KVM check (`strata doctor --need kvm`): where KVM cannot run sandboxes, why.
# shellcheck shell=bash
KVM_WHY=
# kvm_unusable: status 0 if KVM cannot run sandboxes here; the reason is then in $KVM_WHY.
kvm_unusable() {
	KVM_WHY=$("${STRATA_BIN:?}" doctor --need kvm 2>&1) && { KVM_WHY=; return 1; }
	KVM_WHY=${KVM_WHY:-strata doctor --need kvm failed}
	return 0
}
# SANDBOX_WHY: why sandboxes cannot run here, or empty. Only a run that asks
# for the kvm backend needs KVM: the process backend (asked for, or what auto
# picks without KVM) runs sandboxes anywhere.
SANDBOX_WHY=
if [ "${STRATA_BACKEND:-auto}" = kvm ] && kvm_unusable; then
	SANDBOX_WHY=$KVM_WHY
fi
