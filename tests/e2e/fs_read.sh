#!/usr/bin/env bash
# fs_read.sh: the read side of a mount: ls -lR, du, stat, jq, xattrs, the sparse memory file,
# copying a snapshot out and importing it elsewhere, and refusals of nonsense writes.
. "$(dirname "$0")/fs_lib.sh"

S=$T/store M=$T/mnt
make_image "$T/img"
make_store "$S" base "$T/img"
head -c 4096 /dev/urandom | dd of="$T/img" bs=4096 seek=2 conv=notrunc 2>/dev/null
st "$S" debug ingest "$T/img" --parent base --tag child >/dev/null
setup "mount in the background" mount_store "$S" "$M"
ok "top level is snapshots blobs memory imports" test "$(ls "$M" | tr '\n' ' ')" = "blobs imports memory snapshots "
ok "snapshots/ lists the tags" test "$(ls "$M/snapshots" | tr '\n' ' ')" = "base child "
ok "ls -lR walks everything" bash -c "ls -lR '$M' >'$T/lsr' && grep -c manifest.json '$T/lsr' | grep -qx 2"
same_manifest() { jq -S . "$M/snapshots/child/manifest.json" >"$T/m.mount" && st "$S" show child --json | jq -S .manifest >"$T/m.index" &&
	jq -e '.version == 2 and (.layers | length) >= 1' "$T/m.mount" >/dev/null && diff "$T/m.index" "$T/m.mount"; }
ok "manifest.json parses with jq and matches the index" same_manifest
ok "manifest.json is the canonical encoding plus newline" python3 -c "
import json, sys
raw = open('$M/snapshots/child/manifest.json', 'rb').read()
canon = json.dumps(json.loads(raw), separators=(',', ':'), sort_keys=True).encode() + b'\\n'
sys.exit(raw != canon)
"
layer=$(ls "$M/snapshots/base/layers" | head -1)
ok "layer size is pages * 4096 as the manifest says" bash -c \
	"test \$(stat -c %s '$M/snapshots/base/layers/$layer') -eq \$(jq '.layers[0].pages * 4096' '$M/snapshots/base/manifest.json')"
ok "a layer and its blob have st_nlink 1 (tar and cp -a take no hard links)" bash -c \
	"test \$(stat -c %h '$M/snapshots/base/layers/$layer'):\$(stat -c %h '$M/blobs/$layer') = 1:1"
ok "a layer's bytes equal its backing blob" cmp "$M/snapshots/base/layers/$layer" "$S/blobs/${layer:0:2}/$layer"
ok "blobs/ shares the inode of the same layer" test \
	"$(stat -c %i "$M/snapshots/base/layers/$layer")" = "$(stat -c %i "$M/blobs/$layer")"
ok "xattr user.strata.blob_path names the backing file" bash -c \
	"python3 -c \"import os,sys; sys.exit(os.getxattr('$M/blobs/$layer','user.strata.blob_path').decode() != '$S/blobs/${layer:0:2}/$layer')\""
ok "xattr user.strata.id is the layer id" bash -c \
	"python3 -c \"import os,sys; sys.exit(os.getxattr('$M/blobs/$layer','user.strata.id').decode() != '$layer')\""
ok "user.strata.restore of a snapshot dir: version 1, manifest.json, then each layer's backing blob" python3 -c "
import os, sys
v = os.getxattr('$M/snapshots/base', 'user.strata.restore').split(b'\\0')
man = open('$M/snapshots/base/manifest.json', 'rb').read()
sys.exit(not (v[0] == b'1' and v[1] == man and v[2] == b'b$S/blobs/${layer:0:2}/$layer' and v[3:] == [b''] and
              'user.strata.restore' not in os.listxattr('$M/snapshots/base')))
"
ok "security.* and POSIX ACL xattrs are not supported (ls -l asks once per mount, not per file)" python3 -c "
import errno, os, sys
for f, name in (('manifest.json', 'security.selinux'), ('manifest.json', 'system.posix_acl_access'),
                ('layers', 'system.posix_acl_default')):
    try:
        os.getxattr('$M/snapshots/base/' + f, name)
        sys.exit(1)
    except OSError as e:
        if e.errno != errno.EOPNOTSUPP:
            sys.exit(1)
"
ok "mmap of a layer through the mount equals the backing blob" python3 -c "
import mmap, sys
a = open('$M/snapshots/base/layers/$layer', 'rb'); b = open('$S/blobs/${layer:0:2}/$layer', 'rb')
ma = mmap.mmap(a.fileno(), 0, prot=mmap.PROT_READ); mb = mmap.mmap(b.fileno(), 0, prot=mmap.PROT_READ)
sys.exit(ma[:] != mb[:])
"
ok "memory/NAME reads as the image" cmp "$M/memory/child" "$T/img"
ok "memory file is sparse: SEEK_HOLE and SEEK_DATA find the zero gap" python3 -c "
import os, sys
fd = os.open('$M/memory/base', os.O_RDONLY)
assert os.lseek(fd, 0, os.SEEK_HOLE) == 262144, os.lseek(fd, 0, os.SEEK_HOLE)
assert os.lseek(fd, 262144, os.SEEK_DATA) == 327680
assert os.lseek(fd, 327680, os.SEEK_HOLE) == 458752
"
ok "cp --sparse=always keeps the hole" bash -c \
	"cp --sparse=always '$M/memory/base' '$T/sparse' && cmp '$T/sparse' '$M/memory/base' && test \$(du -k '$T/sparse' | cut -f1) -lt 448"
ok "du sums the snapshots" bash -c "test \$(du -sk '$M/snapshots' | cut -f1) -ge 768"
# Inode numbers of one node of each kind, compared after the remount (the last case).
inodes() { (cd "$M" && stat -c '%i %n' snapshots snapshots/base snapshots/base/manifest.json snapshots/base/layers \
	"snapshots/base/layers/$layer" "blobs/$layer" memory/base memory/child); }
setup "inode numbers before the remount" inodes && cp "$T/last.out" "$T/ino1"
ok "df works on the mount (statfs), namemax 255" bash -c "df '$M' >/dev/null && test \$(stat -f -c %l '$M') = 255"
ok "cp -r out to a plain directory" cp -r "$M/snapshots/child" "$T/out"
ok "strata import of the copy into another store" bash -c \
	"st() { '$STRATA' --store \"\$@\"; }; '$STRATA' --store '$T/s2' init >/dev/null && '$STRATA' --store '$T/s2' import '$T/out' --tag again >/dev/null && '$STRATA' --store '$T/s2' verify >/dev/null"
ok "nonsense: write into blobs/ is EROFS" expect_fail "Read-only file system" cp "$T/img" "$M/blobs/x"
ok "nonsense: a file directly in snapshots/ is EPERM" expect_fail "Operation not permitted" touch "$M/snapshots/file"
ok "nonsense: writing a committed manifest is EROFS" expect_fail "Read-only file system" bash -c "echo {} >'$M/snapshots/base/manifest.json'"
ok "chmod of a layer is accepted and not kept" bash -c \
	"chmod 600 '$M/snapshots/base/layers/$layer' && test \$(stat -c %a '$M/snapshots/base/layers/$layer') = 444"
ok "nonsense: truncate of a layer is EROFS" expect_fail "Read-only file system" truncate -s 0 "$M/snapshots/base/layers/$layer"
ok "nonsense: mkdir in memory/ is EROFS" expect_fail "Read-only file system" mkdir "$M/memory/x"
ok "nonsense: symlink is EPERM" expect_fail "Operation not permitted" ln -s x "$M/snapshots/base/l"
ok "bad name: '..'-ish tag is EINVAL" expect_fail "Invalid argument" mkdir "$M/snapshots/.hidden"
ok "bad name: over 255 bytes is ENAMETOOLONG" expect_fail "File name too long" mkdir "$M/snapshots/$(printf 'a%.0s' $(seq 300))"
ok "bad name: tag over 128 chars is EINVAL" expect_fail "Invalid argument" mkdir "$M/snapshots/$(printf 'b%.0s' $(seq 200))"
ok "log says why a name was refused" grep -q "not a valid tag name" "$S.log"
ok "log says why a write was refused" grep -q "open for writing in a committed manifest.json: refused (EROFS)" "$S.log"
setup "strata umount" "$STRATA" umount "$M"
setup "mount again" "$STRATA" mount "$S" "$M" --log "$S.log"
same_inodes() { inodes | diff "$T/ino1" -; }
ok "stat shows the same inode numbers after a remount" same_inodes
finish
