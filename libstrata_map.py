#!/usr/bin/env python3
# libstrata_map.py: the linker version script of libstrata.so, made from the installed headers (their declarations are the public API).
"""Usage: libstrata_map.py [--node NAME] [--prefix P] [--syms SYMS] OUT HEADER...

Writes a GNU ld version script to OUT that exports, in the node NAME
(default STRATA_1.0), every function and every extern object the headers
declare, and makes every other symbol local; with --syms, also the names
alone, one a line, to SYMS (what objcopy --keep-global-symbols keeps in
libstrata.a). With --prefix, a declared name that does not begin with P
stops it. The header is the one list of what libstrata exports: adding a
declaration to it exports it, nothing else does.

The parser knows the C the public headers are written in (docs/library.md):
comments, preprocessor lines, struct/union/enum bodies, typedefs, function
declarations and `extern` objects at file scope. Anything else at file scope
(a definition, an inline function, an object without `extern`) stops it with
the header and the text, so no header can hold something this script misreads.
"""
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip(text):
    """The header without comments, C++ guards and preprocessor lines, newlines kept."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # #ifdef __cplusplus / extern "C" { / #endif, and the closing } likewise
    text = re.sub(r"^[ \t]*#[ \t]*ifdef[ \t]+__cplusplus\b.*?^[ \t]*#[ \t]*endif[^\n]*",
                  lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", "", text, flags=re.M)
    return text


def statements(text, where):
    """File-scope statements ending in ';', with brace-enclosed bodies elided."""
    out, cur, depth = [], [], 0
    for c in text:
        if c == "{":
            if depth == 0 and re.search(r"\)\s*$", "".join(cur)):
                raise SystemExit(f"{where}: a function defined in a public header: {' '.join(''.join(cur).split())}")
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise SystemExit(f"{where}: unbalanced '}}'")
        elif depth == 0:
            if c == ";":
                out.append(" ".join("".join(cur).split()))
                cur = []
            else:
                cur.append(c)
    if depth != 0 or "".join(cur).strip():
        raise SystemExit(f"{where}: text after the last declaration: {' '.join(''.join(cur).split())}")
    return out


def declared(stmt, where):
    """The symbol a file-scope statement declares, or None (a type)."""
    words = IDENT.findall(stmt)
    if not words or words[0] == "typedef":
        return None
    if words[0] in ("struct", "union", "enum") and re.fullmatch(r"(struct|union|enum)(\s+\w+)?", stmt):
        return None  # a type's definition or forward declaration
    if "static" in words or "inline" in words:
        raise SystemExit(f"{where}: static or inline at file scope: {stmt}")
    paren = stmt.find("(")
    if paren >= 0:
        m = re.search(r"([A-Za-z_]\w*)\s*$", stmt[:paren])
        if not m or re.match(r"\(\s*\*", stmt[paren:]):
            raise SystemExit(f"{where}: a declarator this script does not read: {stmt}")
        return m.group(1)
    if words[0] == "extern":
        return re.sub(r"\[[^\]]*\]", "", stmt).split()[-1].lstrip("*")
    raise SystemExit(f"{where}: an object defined (not extern) in a public header: {stmt}")


def main(argv):
    args = argv[1:]
    opts = {"--node": "STRATA_1.0", "--prefix": "", "--syms": None}
    while args and args[0] in opts:
        if len(args) < 2:
            raise SystemExit(__doc__)
        opts[args[0]] = args[1]
        args = args[2:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    names = {}
    for header in args[1:]:
        with open(header, encoding="utf-8") as f:
            for stmt in statements(strip(f.read()), header):
                name = declared(stmt, header)
                if name:
                    if not name.startswith(opts["--prefix"]):
                        raise SystemExit(f"{header}: '{name}' is not named {opts['--prefix']}...: "
                                         "the library exports only its own namespace")
                    names.setdefault(name, header)
    body = "".join(f"\t\t{n};\n" for n in sorted(names))
    text = ("/* libstrata.so's exports: made by libstrata_map.py from the installed header. */\n"
            f"{opts['--node']} {{\n\tglobal:\n{body}\tlocal:\n\t\t*;\n}};\n")
    with open(args[0], "w", encoding="utf-8") as f:
        f.write(text)
    if opts["--syms"]:
        with open(opts["--syms"], "w", encoding="utf-8") as f:
            f.write("".join(f"{n}\n" for n in sorted(names)))


if __name__ == "__main__":
    main(sys.argv)
