#!/usr/bin/env python3
"""Print LIBDIR/SONAME for a library's development link LIBDIR/libNAME.so.

strata loads libcurl and libcrypto on first use by this absolute path
(store/dl.h); the soname is the name the runtime linker would look for.
"""
import struct
import sys


def soname(path):
    with open(path, 'rb') as f:
        data = f.read()
    if data[:4] != b'\x7fELF' or data[4] != 2:
        sys.exit(f'{path}: not a 64-bit ELF file')
    end = '<' if data[5] == 1 else '>'
    shoff, = struct.unpack_from(end + 'Q', data, 0x28)
    shentsize, shnum = struct.unpack_from(end + 'HH', data, 0x3a)
    secs = [struct.unpack_from(end + 'IIQQQQIIQQ', data, shoff + i * shentsize) for i in range(shnum)]
    for s in secs:
        if s[1] != 6:  # SHT_DYNAMIC
            continue
        strtab = secs[s[6]]
        for off in range(s[4], s[4] + s[5], 16):
            tag, val = struct.unpack_from(end + 'qQ', data, off)
            if tag == 14:  # DT_SONAME
                name = data[strtab[4] + val:data.index(b'\0', strtab[4] + val)]
                return name.decode()
    sys.exit(f'{path}: no DT_SONAME')


libdir, name = sys.argv[1], sys.argv[2]
print(f'{libdir}/{soname(f"{libdir}/lib{name}.so")}')
