#!/usr/bin/env bash
# make_corpus.sh [BUILD_DIR]: regenerate tests/fuzz/corpus/ (the seed corpora) from real exports made by the
# built strata binary and simpleguest. Needs /dev/kvm (for the guest snapshots). The output is checked in.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
bin=$build/mount/strata
guest=$build/vmm/guest/simpleguest.elf
out=$src/tests/fuzz/corpus
store_path=/var/lib/strata/store   # the store fuzz_restore_answer.c checks answers against
T=$(mktemp -d /tmp/strata-corpus.XXXXXX)
trap 'chmod -R u+w "$T"; rm -rf "$T"' EXIT
st() { "$bin" --store "$T/store" "$@"; }

rm -rf "$out"
mkdir -p "$out"/{manifest,snapdir,elf,descriptions,policy,restore_answer,oci} "$T/store"
st init >/dev/null

# Snapshots: a memory image (one layer), a child of it (two layers), and
# simpleguest after a call, then after more calls (guest and vCPU state).
head -c 8K /dev/urandom >"$T/mem.img"; truncate -s 64K "$T/mem.img"
st debug ingest "$T/mem.img" --tag img >/dev/null
head -c 4K /dev/urandom | dd of="$T/mem.img" bs=4096 seek=9 conv=notrunc 2>/dev/null
st debug ingest "$T/mem.img" --parent img --tag img2 >/dev/null
st run "$guest" --snapshot g1 --call counter_next >/dev/null
st run g1 --snapshot g2 --call touch_pages 3 >/dev/null
for t in img img2 g1 g2; do st export "$t" "$T/$t" >/dev/null; done

for t in img img2 g1 g2; do
	m=$T/$t/manifest.json
	# 1. the manifest as exported (canonical), and reformatted
	cp "$m" "$out/manifest/$t"
	jq . "$m" >"$out/manifest/$t-pretty"
	# 2. the directory: manifest, NUL, layers in manifest order
	{ cat "$m"; printf '\0'; for id in $(jq -r '.layers[].id' "$m"); do cat "$T/$t/layers/$id"; done; } \
		>"$out/snapdir/$t"
	# 6. the restore answer a mount of $store_path gives for it (store/mountabi.h, version 1)
	{ printf '1\0'; cat "$m"; printf '\0'
	  for id in $(jq -r '.layers[].id' "$m"); do printf 'b%s/blobs/%s/%s\0' "$store_path" "${id:0:2}" "$id"; done
	} >"$out/restore_answer/$t"
done
# one label, as a user adds them
jq -c '.labels = {"app": "web", "team": "x"}' "$T/img/manifest.json" >"$out/manifest/labels"
# 4. the guest and vCPU descriptions
for t in g1 g2; do
	jq -c .guest "$T/$t/manifest.json" >"$out/descriptions/$t-guest"
	jq -c .vcpu "$T/$t/manifest.json" >"$out/descriptions/$t-vcpu"
done
# 3. the guest ELF
cp "$guest" "$out/elf/simpleguest"
cp "$build/vmm/guest/memguest.elf" "$out/elf/memguest"   # with the memory note (STRATA_GUEST_MEMORY)
# 5. the policy file as `strata calibrate` writes it, and the other mode
cat >"$out/policy/calibrated" <<'P'
# strata reset policy, written by `strata calibrate` (docs/restore.md)
reset = rewrite
keep_restores = 16
idle_cap = 1024
range_cap = 64
measured_rewrite_16_pages_us = 12.5
measured_rewrite_256_pages_us = 101.2
measured_drop_16_pages_us = 80.1
measured_drop_256_pages_us = 1203.4
measured_map_range_us = 0.74
P
printf 'reset = drop\nrange_cap = 65536\nx-note = kept\n' >"$out/policy/drop"
# 6. mountinfo tables (the same target reads its input as one)
cat >"$out/restore_answer/mountinfo" <<'P'
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:40 / /tmp/m1 rw,nosuid,nodev,relatime shared:5 - fuse.strata strata:/var/lib/strata/store rw,user_id=0,group_id=0
41 22 0:41 / /tmp/m2 rw shared:7 master:3 - fuse.strata strata:/srv/a\040b rw
42 22 0:42 / /tmp/m3 rw - fuse.sshfs strata:/srv/x rw
P
# 7. OCI inputs: a layout's index.json (as written and reformatted), the
# snapshots' OCI manifests (the child's names its parent as subject), and an
# artifact that is not ours
st export --oci "$T/oci" img img2 >/dev/null
cp "$T/oci/index.json" "$out/oci/index"
jq . "$T/oci/index.json" >"$out/oci/index-pretty"
for t in img img2; do
	d=$(jq -r --arg t "$t" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t) | .digest' \
		"$T/oci/index.json")
	cp "$T/oci/blobs/sha256/${d#sha256:}" "$out/oci/manifest-$t"
done
printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.example.other","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}' \
	>"$out/oci/manifest-not-ours"
echo "corpus written to $out:"
for d in "$out"/*; do echo "  $(basename "$d"): $(ls "$d" | wc -l) files, $(du -sk "$d" | cut -f1) KiB"; done
