#!/usr/bin/env python3
# docs_lint.py: fails when README.md or a doc under docs/ quotes a measured-looking figure outside a generated figures block.
"""Find hand-written measured figures in README.md and docs/*.md.

usage: docs_lint.py [--allow FILE] [--self-test] [PATH ...]

A measured figure (a time such as `12 ms` or `3.4 µs`, a throughput such as
`1.9 GB/s`, a ratio such as `2.8×`) belongs in the generated table: in
docs/figures.md, or in a `<!-- figures:begin NAME -->` block that
tests/bench/figures.py fills from the same results. Anywhere else in a doc
it is stale the day it is written, so this fails on it.

Settings and spec constants that look the same (a default timeout, a poll
interval, a published figure of another project) are listed in the allow
file (default: docs_lint.allow beside this script), one per line:
    PATH: TEXT    # why it is not a measurement
TEXT is a piece of the doc's line that contains the figure. An entry that
no longer matches anything also fails, so the list cannot go stale.
"""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))

NUM = r"(?<![\w.])~?\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(
    # a time: 12 ms, 3.4 µs, 0.9 s, 25–33 ms, 2s
    NUM + r"\s?(?:ns|µs|us|ms|s|sec|seconds?|min|minutes?)(?![\w/])"
    # a throughput
    r"|" + NUM + r"\s?(?:[KMGT]i?B|[kKMG]b)/s\b"
    # a ratio: 2.8×, 16× over, ×1.08, 3x (not 0x… hex, not `pages × 4096` arithmetic)
    r"|(?!0x)" + NUM + r"[×x](?!\w)"
    r"|×\d[\d.]*")
BLOCK = re.compile(r"<!-- figures:begin ([\w-]+) -->\n.*?<!-- figures:end \1 -->\n", re.S)


def doc_paths():
    return [os.path.join(ROOT, "README.md")] + sorted(
        p for p in glob.glob(os.path.join(ROOT, "docs", "*.md")) if os.path.basename(p) != "figures.md")


def load_allow(path):
    allow = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            if not line:
                continue
            doc, sep, text = line.partition(": ")
            if not sep or not text:
                sys.exit("docs_lint.py: %s:%d: want 'PATH: TEXT'" % (path, n))
            allow.append([doc.strip(), text.strip(), n, 0])
    return allow


def blank_blocks(text):
    """The text with every generated block's lines emptied (line numbers kept)."""
    return BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)


# What the pattern must catch, and what it must leave alone (--self-test).
PLANTED = ["a restore took 12 ms here", "3.4 µs per call", "reads at 1.9 GB/s", "2.8× the floor",
           "16× over", "(×1.08 here)", "25–33 ms", "took 0.9 s", "~13 ms each", "at 600 MB/s", "3x faster"]
CLEAN = ["a `pages × 4096` file", "64 KiB chunks", "value 0x1000", "`\"0x…\"` strings", "ranges × 8",
         "16 × n", "at most 4 × the text", "256 MiB heap", "5% of the layer", "8 threads", "version 1.2.3"]


def self_test():
    bad = ["not caught: %r" % t for t in PLANTED if not FIGURE.search(t)]
    bad += ["flagged: %r (%r)" % (t, FIGURE.search(t).group(0)) for t in CLEAN if FIGURE.search(t)]
    text = "x\n<!-- figures:begin a -->\n12 ms\n<!-- figures:end a -->\n"
    if FIGURE.search(blank_blocks(text)) or not FIGURE.search(text):
        bad.append("a generated block is not skipped, or what is outside it is")
    print("\n".join(bad) if bad else "docs_lint.py: self-test passed")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allow", default=os.path.join(HERE, "docs_lint.allow"))
    ap.add_argument("--self-test", action="store_true", help="check the pattern against planted figures")
    ap.add_argument("paths", nargs="*")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    allow = load_allow(a.allow)
    paths = a.paths or doc_paths()
    bad = []
    for path in paths:
        rel = os.path.relpath(os.path.abspath(path), ROOT)
        with open(path) as f:
            text = blank_blocks(f.read())
        for n, line in enumerate(text.split("\n"), 1):
            for m in FIGURE.finditer(line):
                ok = False
                for entry in allow:
                    doc, piece = entry[0], entry[1]
                    if doc != rel:
                        continue
                    i = line.find(piece)
                    while i >= 0 and not ok:
                        if i <= m.start() and m.end() <= i + len(piece):
                            ok = True
                            entry[3] += 1
                        i = line.find(piece, i + 1)
                    if ok:
                        break
                if not ok:
                    bad.append("%s:%d: measured-looking figure '%s' outside a generated block: %s" % (
                        rel, n, m.group(0), line.strip()[:160]))
    if not a.paths:
        for doc, piece, n, hits in allow:
            if not hits:
                bad.append("%s:%d: allow entry matches nothing (remove it): %s: %s" % (
                    os.path.relpath(a.allow, ROOT), n, doc, piece))
    if bad:
        print("\n".join(bad))
        print("docs_lint.py: %d figure(s): quote the case from docs/figures.md, or add a generated block "
              "(tests/bench/figures.py BLOCKS); a setting or constant goes in %s with its reason" % (
                  len(bad), os.path.relpath(a.allow, ROOT)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
