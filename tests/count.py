#!/usr/bin/env python3
"""count.py: count every test case (TAP lines) across meson builds; print 'N passed, N failed'."""
import json
import os
import re
import sys

passed = failed = skipped = 0
failures = []
details = []
args = sys.argv[1:]
extra = None
if args[:1] == ["--extra"]:
    extra, args = args[1], args[2:]
if extra:  # one TAP line per check that is not a meson test (a build that must compile)
    with open(extra) as f:
        for out in f:
            if re.match(r"^ok\b", out):
                passed += 1
            elif re.match(r"^not ok\b", out):
                failed += 1
                failures.append(out.strip())
for build in args:
    log = os.path.join(build, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        failed += 1
        failures.append(f"{build}: no test log (build or setup failed)")
        continue
    with open(log) as f:
        for line in f:
            t = json.loads(line)
            bad_lines = 0
            for out in (t.get("stdout") or "").splitlines():
                if re.match(r"^ok\b", out):
                    if re.search(r"#\s*SKIP", out, re.I):
                        skipped += 1
                    else:
                        passed += 1
                elif re.match(r"^not ok\b", out):
                    if re.search(r"#\s*TODO", out, re.I):
                        skipped += 1
                    else:
                        failed += 1
                        bad_lines += 1
                        failures.append(f"{build}: {t['name']}: {out.strip()}")
            if t.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL") and bad_lines == 0:
                failed += 1
                failures.append(f"{build}: {t['name']}: {t.get('result')} (exit {t.get('returncode')})")
            if t.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL"):
                # The end of what the failing test wrote (a sanitizer report,
                # a crash message) lands beside the summary, where CI shows it.
                tail = (t.get("stderr") or "").splitlines()[-40:]
                if tail:
                    details.append(f"--- last lines of stderr of {build}: {t['name']}")
                    details.extend(tail)

for d in details:
    print(d)
for f in failures:
    print("FAILED", f)
line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed or passed == 0 else 0)
