#!/usr/bin/env python3
"""musl_subset.py: the part of Debian's musl libc.a a strata guest links (libstrata-c.a).

usage: musl_subset.py LIBC_A ROOTS_FILE OUT_A RUNTIME_OBJ...

Takes the members of musl's libc.a that define the symbols named in
ROOTS_FILE, and the members those need, stopping at every symbol the
guest runtime's objects define (the hooks: output, errno, locks, time,
files). Then, for each member taken:

- refuses it if it defines a symbol the runtime defines too (two
  definitions), or needs one that neither musl's taken members nor the
  runtime define (a guest could not link);
- rewrites its stack-protector canary: Debian builds musl with
  -fstack-protector-strong, whose canary is the word at %fs:0x28, and a
  guest has no thread block at fs (fs base is 0 on both backends). Each
  load of the canary becomes a load of 0, each check a subtraction of 0,
  the same lengths and the same flags (docs/guests.md, "The C library");
- refuses it if its code still uses %fs or %gs, or has a syscall, sysenter
  or int 0x80 instruction: the guest has no kernel, and on the process
  backend a system call from guest code is a guest fault.
"""
import os
import re
import subprocess
import sys
import tempfile

# (canary instruction, replacement of the same length and effect with a 0 canary)
NOP4 = bytes.fromhex('0f1f4000')
NOP5 = bytes.fromhex('0f1f440000')
NOP3 = bytes.fromhex('0f1f00')
CANARY = [
    (bytes.fromhex('64488b042528000000'), bytes.fromhex('b800000000') + NOP4),  # mov %fs:0x28,%rax -> mov $0,%eax
    (bytes.fromhex('64488b142528000000'), bytes.fromhex('ba00000000') + NOP4),  # mov %fs:0x28,%rdx -> mov $0,%edx
    (bytes.fromhex('64488b0c2528000000'), bytes.fromhex('b900000000') + NOP4),  # mov %fs:0x28,%rcx -> mov $0,%ecx
    (bytes.fromhex('644c8b0c2528000000'), bytes.fromhex('41b900000000') + NOP3),  # mov %fs:0x28,%r9 -> mov $0,%r9d
    (bytes.fromhex('64482b042528000000'), bytes.fromhex('4883e800') + NOP5),    # sub %fs:0x28,%rax -> sub $0,%rax
    (bytes.fromhex('64482b142528000000'), bytes.fromhex('4883ea00') + NOP5),    # sub %fs:0x28,%rdx -> sub $0,%rdx
]
FORBIDDEN = re.compile(r'\t(syscall|sysenter|int\s+\$0x80)\b|%[fg]s:')


def rewrite_canary(path):
    """Rewrite the object at path in place to a 0 canary; the lines of its code still using %fs, %gs or a system call."""
    with open(path, 'rb') as f:
        data = f.read()
    for old, new in CANARY:
        data = data.replace(old, new)
    with open(path, 'wb') as f:
        f.write(data)
    dis = subprocess.run(['objdump', '-d', path], check=True, capture_output=True, text=True).stdout
    return [ln.strip() for ln in dis.splitlines() if FORBIDDEN.search(ln)]


def nm_members(path):
    """[(name, ordinal among same-named members, defined set, strong-undefined set)]."""
    out = subprocess.run(['nm', path], check=True, capture_output=True, text=True).stdout
    members, cur, seen = [], None, {}
    for line in out.splitlines():
        if line.endswith(':') and ' ' not in line:
            name = line[:-1]
            seen[name] = seen.get(name, 0) + 1
            cur = (name, seen[name], set(), set())
            members.append(cur)
        elif cur and line.strip():
            parts = line.split()
            kind, sym = parts[-2], parts[-1]
            if kind == 'U':
                cur[3].add(sym)
            elif kind.isupper():
                cur[2].add(sym)
    return members


def defined_by(objs):
    syms = set()
    out = subprocess.run(['nm', '--defined-only', '-g'] + objs, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms.add(parts[2])
    return syms


def main():
    libc, roots_file, out = sys.argv[1:4]
    runtime = defined_by(sys.argv[4:])
    members = nm_members(libc)
    where = {}
    for i, m in enumerate(members):
        for s in m[2]:
            where.setdefault(s, i)
    with open(roots_file) as f:
        todo = [(w, 'musl.syms') for line in f for w in line.split('#')[0].split()]
    taken, errors, why = [], [], {}
    done = set()
    while todo:
        s, need = todo.pop()
        if s in done or s in runtime or s == '_GLOBAL_OFFSET_TABLE_':  # the linker's
            continue
        done.add(s)
        if s not in where:
            errors.append(f'{s} (needed by {need}): defined neither by musl nor by the runtime')
            continue
        i = where[s]
        if i in taken:
            continue
        taken.append(i)
        why[i] = f'{s}, needed by {need}'
        todo.extend((u, members[i][0]) for u in members[i][3])
    for i in taken:
        both = members[i][2] & runtime
        if both:
            errors.append(f'{members[i][0]}: defines {" ".join(sorted(both))}, which the runtime defines too')
    with tempfile.TemporaryDirectory() as tmp:
        objs = []
        for i in sorted(taken):
            name, nth = members[i][0], members[i][1]
            subprocess.run(['ar', 'xN', str(nth), os.path.abspath(libc), name], cwd=tmp, check=True)
            dst = os.path.join(tmp, f'musl_{nth}_{name[:-3] if name.endswith(".lo") else name}.o')
            os.rename(os.path.join(tmp, name), dst)
            bad = rewrite_canary(dst)
            if bad:
                errors.append(f'{name} ({why[i]}): {bad[0]} (a guest has no kernel and no thread block)')
            objs.append(dst)
        if errors:
            sys.exit('musl_subset.py: ' + '\n  '.join(sorted(set(errors))))
        if os.path.exists(out):
            os.unlink(out)
        subprocess.run(['ar', 'crs', out] + objs, check=True)


if __name__ == '__main__':
    main()
