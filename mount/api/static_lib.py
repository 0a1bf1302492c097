#!/usr/bin/env python3
# static_lib.py: libstrata.a as one relocatable object whose only global definitions are the public API's.
"""Usage: static_lib.py LD OBJCOPY AR SYMS OUT ARCHIVE...

Links every member of the ARCHIVEs (the modules' static libraries) into one
relocatable object (ld -r), makes every global symbol it defines local
except the names in SYMS (objcopy --keep-global-symbols: what the public
header declares), and archives that object alone as OUT. A program linking
OUT sees only strata_ names; the modules' internal calls are resolved
inside the object, so they neither clash with the program's names nor can
be called by it. Undefined symbols (libc, LMDB, ...) stay global.
"""
import os
import subprocess
import sys
import tempfile


def main(argv):
    if len(argv) < 7:
        raise SystemExit(__doc__)
    ld, objcopy, ar, syms, out = argv[1:6]
    archives = argv[6:]
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(out))) as tmp:
        obj = os.path.join(tmp, "libstrata.o")
        subprocess.run([ld, "-r", "-o", obj, "--whole-archive", *archives, "--no-whole-archive"], check=True)
        subprocess.run([objcopy, "--keep-global-symbols=" + syms, obj], check=True)
        if os.path.exists(out):
            os.unlink(out)
        subprocess.run([ar, "rcsD", out, obj], check=True)


if __name__ == "__main__":
    main(sys.argv)
