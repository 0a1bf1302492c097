#!/usr/bin/env python3
"""os_seam.py: the library's file, memory and allocation calls go through store/sys.c (the OS seam that fault injection sweeps), but for the files tests/e2e/os_seam.allow names with their reason (TAP)."""
import os
import re
import sys

# The calls the seam wraps (store/sys.h: st_sys_*), and the neighbours of
# theirs a file would reach for instead: each has a counted wrapper there.
CALLS = sorted("""
open openat openat2 creat close read pread pread64 write pwrite pwrite64
fsync fdatasync fstat fstatat stat lstat fchmod fchown mkdir mkdirat unlink
unlinkat link linkat rename renameat renameat2 ftruncate fallocate lseek dup
dup2 dup3 opendir fdopendir getxattr lgetxattr statfs fstatfs memfd_create
sendfile copy_file_range poll mmap munmap mremap madvise malloc calloc
realloc reallocarray strdup strndup aligned_alloc posix_memalign asprintf
vasprintf
""".split())
# A call: the name as a whole identifier, not a member (s.read, s->read),
# followed by "(".
CALL_RE = re.compile(r"(?<![A-Za-z0-9_.>])(" + "|".join(CALLS) + r")\s*\(")
MODULES = ["store", "index", "fs", "vmm"]
# Code that is not the host library: the guest runtime and SDK, and the
# process backend's freestanding child (no libc; its own system calls).
NOT_HOST = ["vmm/guest/", "vmm/proc/child/"]
SEAM = "store/sys.c"


def strip(text):
    """C source without comments, strings and character literals (each kept as
    spaces, newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def scan_file(path, rel):
    with open(path, errors="replace") as f:
        lines = strip(f.read()).split("\n")
    hits = []
    for no, line in enumerate(lines, 1):
        # A preprocessor line (#define WRAP(x) malloc(x)) still counts.
        for m in CALL_RE.finditer(line):
            hits.append((rel, no, m.group(1)))
    return hits


def scan(root, files=None):
    hits = []
    for mod in MODULES:
        for dirpath, _, names in os.walk(os.path.join(root, mod)):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if rel == SEAM or any(rel.startswith(p) for p in NOT_HOST):
                    continue
                hits += scan_file(path, rel)
    return hits


def read_allow(path):
    allow = {}
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            rel, _, why = line.partition(" ")
            if not why.strip():
                sys.exit(f"{path}:{no}: an entry is a path and its reason: {line}")
            allow[rel] = why.strip()
    return allow


def main():
    root = os.environ.get("STRATA_SRC") or os.path.join(os.path.dirname(__file__), "..", "..")
    allow_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "os_seam.allow")
    allow = read_allow(allow_path)
    print("1..4")
    fails = 0

    # 1: the scan finds what it looks for, and skips comments, strings and members.
    probe = ("int f(void) { char *p = malloc(8); int fd = open(\"x\", 0);\n"
             "/* malloc(1) */ s->read(fd); o.close(fd); puts(\"free(p) close(fd)\");\n"
             "  void *m = mmap (0, 4096, 3, 0x22, -1, 0); return st_sys_close(fd); }\n")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "p.c"), "w") as f:
            f.write(probe)
        got = [h[2] for h in scan_file(os.path.join(d, "p.c"), "p.c")]
    if got == ["malloc", "open", "mmap"]:
        print("ok 1 - the scan finds raw calls and skips comments, strings, members and the seam's own calls")
    else:
        print(f"not ok 1 - the scan finds raw calls and skips comments, strings, members and the seam's own calls\n# got {got}")
        fails += 1

    hits = scan(root)
    raw = [h for h in hits if h[0] not in allow]
    # 2: nothing outside the seam and the allowed files.
    if raw:
        print("not ok 2 - the library's file, memory and allocation calls go through store/sys.c")
        for rel, no, call in raw:
            print(f"# {rel}:{no}: {call}() outside the seam (store/sys.h has a counted st_sys_ call for it)")
        fails += 1
    else:
        print("ok 2 - the library's file, memory and allocation calls go through store/sys.c")

    # 3: every allowed file exists and still needs its entry.
    stale = [rel for rel in allow if not os.path.exists(os.path.join(root, rel))
             or not any(h[0] == rel for h in hits)]
    if stale:
        print("not ok 3 - every os_seam.allow entry names a file that still makes raw calls")
        for rel in stale:
            print(f"# {rel}: no raw call there any more (or no such file): remove the entry")
        fails += 1
    else:
        print("ok 3 - every os_seam.allow entry names a file that still makes raw calls")

    # 4: the seam itself is where the calls are.
    seam_hits = scan_file(os.path.join(root, SEAM), SEAM)
    if len({h[2] for h in seam_hits}) >= 20:
        print(f"ok 4 - store/sys.c makes the calls itself ({len(seam_hits)} calls)")
    else:
        print(f"not ok 4 - store/sys.c makes the calls itself\n# only {sorted({h[2] for h in seam_hits})}")
        fails += 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
