#!/usr/bin/env python3
"""manpage.py STRATA OUT [COMMAND]: write the man page of `strata` (no
COMMAND) or of `strata COMMAND` to OUT, made from the text the built
binary's --help prints, so a page says what --help says and cannot drift
from it. Usage lines become the synopsis; option lines ("  -x, --opt ARG
text", "  --opt text" and their indented continuations) become tagged
paragraphs; other text becomes paragraphs, and indented blocks stay as
they are."""
import re
import subprocess
import sys

VERSION_ARGS = ["--version"]
# Commands with no page of their own: help is strata(1) itself; bench runs
# strata-bench, which is built in a build tree and never installed.
NO_PAGE = {"help", "bench"}


def run(strata, args):
    out = subprocess.run([strata, *args], check=True, capture_output=True, text=True)
    return out.stdout


def esc(text):
    """Text as roff: backslashes doubled, dashes kept as ASCII, a leading dot or quote guarded."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text[:1] in (".", "'"):
        text = "\\&" + text
    return text


OPTION = re.compile(r"^  (-[^ ].*?)(?:\s{2,}(.*))?$")


def body(lines):
    """The roff of --help text after its usage lines."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        m = OPTION.match(line)
        if m:
            tag, text = m.group(1), m.group(2) or ""
            col = line.index(text) if text else None
            i += 1
            more = []
            while i < len(lines) and lines[i].strip() and lines[i].startswith(" " * 4) and \
                    not OPTION.match(lines[i]) and (col is None or lines[i][:col].strip() == ""):
                more.append(lines[i].strip())
                i += 1
            out += [".TP", "\\fB" + esc(tag) + "\\fR", esc(" ".join(x for x in [text, *more] if x))]
            continue
        if line.startswith("  "):
            block = []
            while i < len(lines) and lines[i].startswith("  ") and not OPTION.match(lines[i]):
                block.append(lines[i])
                i += 1
            out += [".PP", ".nf"] + [esc(b) for b in block] + [".fi"]
            continue
        para = []
        while i < len(lines) and lines[i].strip() and not lines[i].startswith("  "):
            para.append(lines[i])
            i += 1
        if len(para) == 1 and para[0].endswith(":"):
            out += [".SS " + esc(para[0][:-1])]
        else:
            out += [".PP"] + [esc(p) for p in para]
    return out


def page(strata, command, summaries):
    text = run(strata, [command, "--help"] if command else ["--help"])
    version = run(strata, VERSION_ARGS).split()[-1]
    lines = text.rstrip("\n").split("\n")
    usage = []
    while lines and (lines[0].startswith("usage: ") or (usage and lines[0].startswith("       "))):
        usage.append(lines.pop(0)[7:])
    name = "strata" + ("-" + command if command else "")
    what = summaries.get(command, "micro-VM sandboxes whose memory snapshots are files") if command else \
        "micro-VM sandboxes whose memory snapshots are files"
    out = ['.\\" Made by mount/manpage.py from `strata%s --help`: edit that text, not this file.'
           % (" " + command if command else ""),
           '.TH %s 1 "" "strata %s" "strata manual"' % (name.upper(), version),
           ".SH NAME", "%s \\- %s" % (esc(name), esc(what)),
           ".SH SYNOPSIS", ".nf"] + [esc(u) for u in usage] + [".fi", ".SH DESCRIPTION"] + body(lines)
    if command:
        out += [".SH SEE ALSO", "\\fBstrata\\fR(1), docs/cli.md"]
    else:
        out += [".SH SEE ALSO"] + [",\n".join("\\fBstrata\\-%s\\fR(1)" % esc(c) for c in summaries
                                             if c not in NO_PAGE)]
    return "\n".join(out) + "\n"


def summaries_of(strata):
    """COMMAND -> summary, from `strata --help`'s Commands: list."""
    cmds, inside = {}, False
    for line in run(strata, ["--help"]).split("\n"):
        if line == "Commands:":
            inside = True
        elif inside and line.startswith("  ") and not line.startswith("   "):
            name, _, what = line.strip().partition(" ")
            cmds[name] = what.strip()
        elif inside and not line.strip():
            inside = False
    return cmds


def main():
    strata, out = sys.argv[1], sys.argv[2]
    command = sys.argv[3] if len(sys.argv) > 3 else None
    summaries = summaries_of(strata)
    if command and (command not in summaries or command in NO_PAGE):
        sys.exit("manpage.py: no page for '%s' ('strata --help' lists no such command, or NO_PAGE)" % command)
    with open(out, "w") as f:
        f.write(page(strata, command, summaries))


if __name__ == "__main__":
    main()
