#!/usr/bin/env python3
"""lua_archive.py LIBLUA OUT: Debian's liblua5.4.a made fit for a guest.

Debian builds liblua5.4.a with -fstack-protector-strong, whose canary is the
word at %fs:0x28; a guest has no thread block at fs. Each member's canary
becomes 0 as musl_subset.py does for musl's (same lengths, same flags), and
a member whose code still uses %fs or %gs or has a system call is refused.
linit.o (luaL_openlibs), liolib.o and loadlib.o are left out: lua.elf opens
its libraries itself, without io and package (vmm/guest/lua/luaguest.c).
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from musl_subset import rewrite_canary  # noqa: E402

LEFT_OUT = {'linit.o', 'liolib.o', 'loadlib.o'}


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: lua_archive.py LIBLUA OUT')
    lib, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    names = subprocess.run(['ar', 't', lib], check=True, capture_output=True, text=True).stdout.split()
    errors, objs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if name in LEFT_OUT:
                continue
            subprocess.run(['ar', 'x', lib, name], cwd=tmp, check=True)
            dst = os.path.join(tmp, name)
            bad = rewrite_canary(dst)
            if bad:
                errors.append(f'{name}: {bad[0]} (a guest has no kernel and no thread block)')
            objs.append(dst)
        if errors:
            sys.exit('lua_archive.py: ' + '\n  '.join(errors))
        if os.path.exists(out):
            os.unlink(out)
        subprocess.run(['ar', 'crs', out] + objs, check=True)


main()
