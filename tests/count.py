#!/usr/bin/env python3
"""count.py: count every test case across meson builds from this run's logs; the last line is 'N passed, N failed, N skipped'.

What is counted (docs/testing.md):
  - each TAP result line of each meson test ("ok", "not ok"; "# SKIP" and
    "# TODO" count as skipped), and each exitcode-protocol test as one case;
  - a suite that skips as a whole ("1..0 # SKIP why") as one skipped case,
    with its reason;
  - as failures: a plan that does not match the cases run, a missing plan, a
    plan followed by nothing, no cases at all, "Bail out!", a test meson did
    not pass (a crash, a timeout, a nonzero exit) without a failing line, a
    build whose log is missing or older than this run (--since), and a skip
    whose reason names something the harness's own probes found working
    here (KVM, PAGEMAP_SCAN, node, clang: STRATA_HARNESS_<NAME>=1);
  - --extra FILE (repeatable): TAP lines of checks that are not meson tests
    (a build that must compile, the mutation check), counted the same way.
The line before the last says how many distinct cases ran: a case is a
program (test binary or script) and a case name; the plain and ASan builds,
the backends and the policies run most of them more than once.
"""
import glob
import json
import os
import re
import subprocess
import sys

RESULT_OK = ("OK", "SKIP", "EXPECTEDFAIL")
# What a skip reason names -> the harness verdict that rules it out.
ENVIRONMENTS = {
    "KVM": re.compile(r"\bKVM\b|/dev/kvm is missing"),
    "PAGEMAP_SCAN": re.compile(r"PAGEMAP_SCAN"),
    "NODE": re.compile(r"\bnode\b"),
    "CLANG": re.compile(r"\bclang\b|libFuzzer"),
}
PLAN = re.compile(r"^1\.\.(\d+)\s*(?:#\s*(.*))?$")
RESULT = re.compile(r"^(not ok|ok)\b\s*(\d+)?\s*(?:-\s*)?([^#]*?)\s*(?:#\s*(\S+)\s*(.*))?$")
INTERPRETERS = {"env", "bash", "sh", "python3", "python", "burst.sh"}


def harness_verdicts(builds):
    """STRATA_HARNESS_<NAME> as tests/run exported them; else ask the probes here."""
    v = {}
    for name in ENVIRONMENTS:
        e = os.environ.get("STRATA_HARNESS_" + name)
        if e in ("0", "1"):
            v[name] = (e == "1", os.environ.get("STRATA_HARNESS_%s_WHY" % name, ""))
    for name, prog in (("KVM", "kvm_works"), ("PAGEMAP_SCAN", "pagemap_scan_works")):
        if name in v:
            continue
        for b in builds:
            p = os.path.join(b, "tests", "harness", prog)
            if os.access(p, os.X_OK):
                try:
                    out = subprocess.run([p], capture_output=True, text=True, timeout=60).stdout.strip()
                except (OSError, subprocess.SubprocessError):
                    continue
                if out[:2] in ("0 ", "1 "):
                    v[name] = (out[0] == "1", out[2:])
                    break
    return v


class Count:
    def __init__(self, verdicts):
        self.passed = self.failed = self.skipped = 0
        self.failures, self.details, self.cases = [], [], set()
        self.skip_reasons = {}
        self.verdicts = verdicts

    def fail(self, where, why):
        self.failed += 1
        self.failures.append(f"{where}: {why}")

    def skip(self, where, why, key):
        """A skip, unless the harness found what it says is missing."""
        self.cases.add(key)
        for name, pat in ENVIRONMENTS.items():
            works, hwhy = self.verdicts.get(name, (False, ""))
            if works and pat.search(why or ""):
                self.fail(where, f"skipped ({why}), but the harness found {name} working here: {hwhy}")
                return
        self.skipped += 1
        self.skip_reasons[why or "(no reason given)"] = self.skip_reasons.get(why or "(no reason given)", 0) + 1

    def tap(self, where, prog, text, result=None, returncode=None, protocol="tap"):
        """Count one test's output; result is meson's verdict (None for --extra lines)."""
        plan = None
        plan_skip = None
        ran = bad = 0
        bailed = False
        for raw in (text or "").splitlines():
            line = raw.rstrip()
            if not line or line[0] in " \t":
                continue  # YAML blocks, indented subtests, blank lines
            m = PLAN.match(line)
            if m:
                if plan is not None:
                    self.fail(where, f"a second plan ({line})")
                    bad += 1
                plan = int(m.group(1))
                if plan == 0 and m.group(2) and re.match(r"skip\b", m.group(2), re.I):
                    plan_skip = m.group(2)[4:].strip()
                continue
            if line.startswith("Bail out!"):
                bailed = True
                bad += 1
                self.fail(where, line)
                continue
            m = RESULT.match(line)
            if not m:
                continue
            status, num, desc, directive, reason = m.groups()
            # tests/harness/sanitizer_reports.sh adds one case per report after
            # the test's own: a failure each, not also a plan mismatch.
            if not (desc or "").startswith("sanitizer report from pid"):
                ran += 1
            key = (prog, desc or f"#{num or ran}")
            directive = (directive or "").upper()
            if status == "ok" and directive == "SKIP":
                self.skip(where, reason.strip(), key)
            elif status == "not ok" and directive == "TODO":
                self.cases.add(key)
                self.skipped += 1
                self.skip_reasons["TODO: " + reason.strip()] = self.skip_reasons.get("TODO: " + reason.strip(), 0) + 1
            elif status == "ok":
                self.cases.add(key)
                self.passed += 1
            else:
                self.cases.add(key)
                bad += 1
                self.fail(where, line.strip())
        if result is None:  # --extra: lines only
            return
        if protocol != "tap":  # exitcode: the test is one case
            self.cases.add((prog, ""))
            if result in RESULT_OK:
                self.passed += 1
            else:
                self.fail(where, f"{result} (exit {returncode})")
            return
        if plan_skip is not None and ran == 0 and not bailed:
            self.skip(where, plan_skip, (prog, "(the whole suite)"))
        elif not bailed:
            if plan is None and ran == 0:
                self.fail(where, "printed no plan and no case: it ran nothing")
                bad += 1
            elif plan is None:
                self.fail(where, f"no plan (ran {ran} cases)")
                bad += 1
            elif plan == 0:
                self.fail(where, "plan 1..0 without a SKIP reason: it ran nothing")
                bad += 1
            elif ran == 0:
                self.fail(where, f"printed its plan (1..{plan}) and then nothing")
                bad += 1
            elif ran != plan:
                self.fail(where, f"planned {plan} cases, ran {ran}")
                bad += 1
        if result not in RESULT_OK and bad == 0:
            self.fail(where, f"{result} (exit {returncode})")


def program(cmd, name):
    """The program a test runs (its binary or script), which names its cases."""
    for c in cmd or []:
        b = os.path.basename(c)
        if b not in INTERPRETERS and not b.startswith("python3"):
            return b
    return name


def main(argv):
    extras, since, builds = [], None, []
    i = 0
    while i < len(argv):
        if argv[i] == "--extra":
            extras.append(argv[i + 1])
            i += 2
        elif argv[i] == "--since":
            since = float(argv[i + 1])
            i += 2
        else:
            builds.append(argv[i])
            i += 1
    c = Count(harness_verdicts(builds))
    for e in extras:
        with open(e) as f:
            c.tap(os.path.basename(e), os.path.basename(e), f.read())
    for build in builds:
        # testlog.json, or testlog-WRAPPER.json when meson test ran with
        # --wrapper (the ASan build's sanitizer_reports.sh): the newest.
        logs = glob.glob(os.path.join(build, "meson-logs", "testlog*.json"))
        log = max(logs, key=os.path.getmtime) if logs else os.path.join(build, "meson-logs", "testlog.json")
        if not os.path.exists(log):
            c.fail(build, "no test log (build or setup failed)")
            continue
        if since is not None and os.path.getmtime(log) < since:
            c.fail(build, "its test log is older than this run (a stale log from an earlier run: build or setup failed)")
            continue
        protocols, cmds = {}, {}
        try:
            with open(os.path.join(build, "meson-info", "intro-tests.json")) as f:
                for t in json.load(f):
                    protocols[t["name"]] = t.get("protocol", "exitcode")
                    cmds[t["name"]] = t.get("cmd")
        except (OSError, ValueError):
            pass
        with open(log) as f:
            for line in f:
                t = json.loads(line)
                # "strata:e2e+fs / e2e-fs_read" in the log is "e2e-fs_read" in meson's list
                name = t["name"].split(" / ")[-1]
                where = f"{build}: {t['name']}"
                if since is not None and t.get("starttime", since) < since:
                    c.fail(where, "started before this run (a stale log entry)")
                    continue
                # Without meson's list of tests, TAP is what every suite here speaks.
                c.tap(where, program(cmds.get(name) or t.get("command"), name), t.get("stdout"),
                      t.get("result"), t.get("returncode"), protocols.get(name, "tap"))
                if t.get("result") not in RESULT_OK:
                    # The end of what the failing test wrote (a sanitizer report,
                    # a crash message) lands beside the summary, where CI shows it.
                    tail = (t.get("stderr") or "").splitlines()[-40:]
                    if tail:
                        c.details.append(f"--- last lines of stderr of {where}")
                        c.details.extend(tail)
    for d in c.details:
        print(d)
    for why, k in sorted(c.skip_reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"SKIPPED {k}x: {why}")
    for f in c.failures:
        print("FAILED", f)
    runs = c.passed + c.failed + c.skipped
    line = f"{c.passed} passed, {c.failed} failed, {c.skipped} skipped"
    print(f"{len(c.cases)} cases, run {runs} times: {line}")
    print(line)
    return 1 if c.failed or c.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
