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
- keeps its stack-protector checks: Debian builds musl with
  -fstack-protector-strong, whose canary is the word at %fs:0x28, and the
  host points fs at a thread block holding a random canary on both
  backends (vmm/abi.h, struct strata_tls);
- refuses it if its code uses %fs other than the canary, or %gs, or has a syscall, sysenter
  or int 0x80 instruction: the guest has no kernel, and on the process
  backend a system call from guest code is a guest fault.
"""
import os
import re
import subprocess
import sys
import tempfile

# The canary is the one word at fs a guest has (%fs:0x28); nothing else
# lives there (musl's thread pointer, errno, locale are not the guest's).
FORBIDDEN = re.compile(r'\t(syscall|sysenter|int\s+\$0x80)\b|%gs:|%fs:(?!0x28\b)')


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
            dis = subprocess.run(['objdump', '-d', dst], check=True, capture_output=True, text=True).stdout
            bad = [ln.strip() for ln in dis.splitlines() if FORBIDDEN.search(ln)]
            if bad:
                errors.append(f'{name} ({why[i]}): {bad[0]} (a guest has no kernel and no thread block)')
            objs.append(dst)
        if errors:
            sys.exit('musl_subset.py: ' + '\n  '.join(sorted(set(errors))))
        if os.path.exists(out):
            os.unlink(out)
        subprocess.run(['ar', 'crs', out] + objs, check=True)


main()
