# kvm_lib.sh: the e2e scripts' one KVM check (`strata doctor --need kvm`): where KVM cannot run sandboxes, why.
# shellcheck shell=bash
KVM_WHY=
# kvm_unusable: status 0 if KVM cannot run sandboxes here; the reason is then in $KVM_WHY.
kvm_unusable() {
	KVM_WHY=$("${STRATA_BIN:?}" doctor --need kvm 2>&1) && { KVM_WHY=; return 1; }
	KVM_WHY=${KVM_WHY:-strata doctor --need kvm failed}
	return 0
}
