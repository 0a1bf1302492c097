#!/usr/bin/env bash
# cli_synopsis.sh: every synopsis in docs/cli.md run as written (options after the arguments where it
# puts them there), global flags after a subcommand's name, and `--` ending options.
. "$(dirname "$0")/fs_lib.sh"
. "$(dirname "$0")/kvm_lib.sh"
G=${STRATA_BUILD:?}/vmm/guest/simpleguest.elf
DOC=${STRATA_SRC:?}/docs/cli.md
S=$T/store

# The synopses this script runs; a synopsis added to docs/cli.md without a case here fails.
tested=(
	'strata init [--sync full|none] [--shared GROUP]'
	'strata ls [--tree | --json]'
	'strata show TAG|ID [--json]'
	'strata tag'
	'strata rm TAG|ID...'
	'strata gc [--grace SECONDS] [--json]'
	'strata verify [--json] [TAG|ID|SNAPSHOT_DIR...]'
	'strata fsck [--quick] [--repair] [--json]'
	'strata export TAG|ID DIR'
	'strata export --oci [--whole-configs] DIR [TAG|ID...]'
	'strata import DIR [--tag NAME] [--force]'
	'strata push [OPTIONS] TAG|ID REGISTRY/REPOSITORY[:TAG]'
	'strata pull [OPTIONS] REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST]'
	'strata debug ingest IMAGE [--parent TAG|ID] [--tag NAME] [--force]'
	'strata mount [STORE] MOUNTPOINT [-f] [-d] [-o OPTS] [--log FILE] [--read-mode M] [--stage-timeout SEC] [--stage-memory MIB] [--poll-ms MS] [--threads N]'
	'strata umount [-l] MOUNTPOINT'
	'strata run TARGET --call FN [ARGS...] [options]'
	'strata pool TARGET [-n N] [--verify] [--via-fuse] [--map-files] [--backend B] [--call FN [--] [ARGS...]]'
	'strata wasm build MODULE.wasm -o GUEST.elf [--sig NAME=SIG]... [--heap SIZE] [--keep]'
	'strata calibrate [--output FILE] [--guest GUEST.elf] [--backend B]'
	'strata doctor [--need kvm] [--json]'
	'strata help [COMMAND]'
)
ok "every synopsis in docs/cli.md has a case here" bash -c '
	diff <(grep -o "^### \`strata [^\`]*\`" "$0" | sed "s/^### \`//; s/\`\$//") <(printf "%s\n" "${@}")' "$DOC" "${tested[@]}"

make_image "$T/img"
ok "init [--sync full|none]" st "$S" init --sync none
ok "init --sync full --shared GROUP (a group of the caller's)" st "$T/shared" init --sync full --shared "$(id -g)"
ok "debug ingest IMAGE --parent --tag --force (options after IMAGE)" bash -c \
	"st '$S' debug ingest '$T/img' --tag base >/dev/null && st '$S' debug ingest '$T/img' --parent base --tag child --force >/dev/null"
ok "ls --tree" bash -c "st '$S' ls --tree | grep -q child"
ok "ls --json" bash -c "st '$S' ls --json | jq -e '.[0].id' >/dev/null"
ok "show TAG --json" bash -c "st '$S' show child --json | jq -e .id >/dev/null"
ok "tag" bash -c "st '$S' tag | grep -q '^base'"
ok "export TAG DIR" st "$S" export base "$T/exp"
ok "import DIR --tag NAME --force" st "$S" import "$T/exp" --tag again --force
ok "export --oci DIR TAG, and import of it" bash -c \
	"st '$S' export --oci '$T/oci' base >/dev/null && st '$S' import '$T/oci' --tag fromoci --force >/dev/null"
ok "export --oci --whole-configs DIR TAG, and import of it" bash -c \
	"st '$S' export --oci --whole-configs '$T/ociw' child >/dev/null && st '$S' import '$T/ociw' --tag fromociw --force >/dev/null"
# push and pull as written, against a port nothing listens on: parsed (not a usage error, 2), refused for the connection (1)
ok "push [OPTIONS] TAG REGISTRY/REPOSITORY:TAG parses and fails for the connection" bash -c \
	"st '$S' push --insecure base 127.0.0.1:9/strata/x:t >/dev/null 2>&1; test \$? -eq 1"
ok "pull [OPTIONS] REGISTRY/REPOSITORY:TAG parses and fails for the connection" bash -c \
	"st '$S' pull --insecure 127.0.0.1:9/strata/x:t >/dev/null 2>&1; test \$? -eq 1"
ok "verify TAG SNAPSHOT_DIR" st "$S" verify again "$T/exp"
ok "fsck --quick" st "$S" fsck --quick
ok "fsck --quick --json" bash -c "st '$S' fsck --quick --json | jq -e '.errors == 0' >/dev/null"
ok "verify --json TAG" bash -c "st '$S' verify --json again | jq -e '.errors == 0' >/dev/null"
ok "rm TAG TAG" st "$S" rm again child
ok "gc --grace SECONDS" st "$S" gc --grace 0
ok "gc --grace SECONDS --json" bash -c "st '$S' gc --grace 0 --json | jq -e .blobs_in_use >/dev/null"
mkdir -p "$T/mnt"
ok "mount STORE MOUNTPOINT with every option after the arguments" \
	"$STRATA" mount "$S" "$T/mnt" -o ro --log "$T/mount.log" --read-mode cached --stage-timeout 30 --stage-memory 32 --poll-ms 100 --threads 2
MOUNTS+=("$T/mnt")
ok "... it serves" test -f "$T/mnt/snapshots/base/manifest.json"
ok "umount -l MOUNTPOINT" "$STRATA" umount -l "$T/mnt"
ok "mount -f in the foreground, -d, stopped by umount" bash -c \
	"mkdir -p '$T/mnt2'; ('$STRATA' mount '$S' '$T/mnt2' -f -d >'$T/fg.log' 2>&1 &); \
	 for i in \$(seq 50); do test -d '$T/mnt2/snapshots' && break; sleep 0.1; done; '$STRATA' umount '$T/mnt2'"
MOUNTS+=("$T/mnt2")

# Global flags after the subcommand's name, before it, and `--` ending them.
ok "fsck -v (global flag after the name)" bash -c "'$STRATA' fsck -v --store '$S' 2>&1 | grep -q 'problem'"
ok "ls --store=DIR after the name" bash -c "'$STRATA' ls --store='$S' | grep -q base"
ok "-s DIR after the name" bash -c "'$STRATA' tag -s '$S' | grep -q base"
ok "a global flag's missing value is a usage error" bash -c "'$STRATA' ls --store; test \$? -eq 2"

ok "doctor" bash -c "'$STRATA' doctor | grep -qi kvm"
ok "doctor --json" bash -c "'$STRATA' doctor --json | jq -e '.checks.kvm' >/dev/null"
ok "help [COMMAND]" bash -c "'$STRATA' help | grep -q '^usage: strata' && '$STRATA' help gc | grep -q '^usage: strata .*gc'"
# Sandboxes run on the process backend where KVM is missing: only
# `doctor --need kvm` needs KVM itself.
ok_kvm "run TARGET --call FN ARGS --snapshot TAG (options after the arguments)" bash -c \
	"test \"\$('$STRATA' --store '$S' run '$G' --call echo hi --snapshot fromrun)\" = hi && st '$S' tag | grep -q '^fromrun'"
ok_kvm "run: options anywhere" bash -c "test \"\$('$STRATA' run --timeout 5s '$G' --call add_local 1 --heap 8M 2)\" = 3"
ok_kvm "run: -- ends options, so ARGS may start with '-'" bash -c \
	"test \"\$('$STRATA' run '$G' --call echo -- --snapshot)\" = --snapshot"
ok_kvm "pool TARGET -n N --verify --call FN -- ARGS" bash -c \
	"'$STRATA' --store '$S' pool fromrun -n 2 --verify --call echo -- -x | grep -q -- -x"
ok_kvm "pool TARGET -n N --map-files --backend process --call FN" bash -c \
	"'$STRATA' --store '$S' pool fromrun -n 2 --map-files --backend process --call echo hi | grep -q 'sandbox 1: echo -> hi'"
if [ -e "$STRATA_BUILD/vmm/guest/wasm/libstrata-wasm.a" ] && command -v wat2wasm >/dev/null; then
	printf '(module (memory (export "memory") 1) (func (export "f") (param i32 i32) (result i32) local.get 1))' >"$T/f.wat"
	wat2wasm "$T/f.wat" -o "$T/f.wasm"
	ok "wasm build MODULE.wasm -o GUEST.elf --sig NAME=SIG --heap SIZE --keep (options after the module)" bash -c \
		"TMPDIR='$T' '$STRATA' wasm build '$T/f.wasm' -o '$T/f.elf' --sig 'f=i(ii)' --heap 1M --keep 2>&1 | grep -q 'generated C is in' &&
		 '$STRATA' run '$T/f.elf' --call f 1 41 | grep -qx 41"
else
	n=$((n + 1)); echo "ok $n - wasm build # SKIP no libstrata-wasm.a or wat2wasm (Debian's wabt)"
fi
ok "calibrate --backend with an unknown backend is a usage error" bash -c \
	"'$STRATA' calibrate --backend qemu 2>&1; test \$? -eq 2"
ok_kvm "calibrate --output FILE --guest GUEST.elf" bash -c \
	"timeout 300 '$STRATA' calibrate --output '$T/policy' --guest '$G' >/dev/null && test -s '$T/policy'"
if kvm_unusable; then
	n=$((n + 1)); echo "ok $n - doctor --need kvm # SKIP $KVM_WHY"
else
	ok "doctor --need kvm" "$STRATA" doctor --need kvm
fi
finish
