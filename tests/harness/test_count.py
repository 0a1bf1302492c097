#!/usr/bin/env python3
"""test_count.py: tests/count.py, the closing line's counter, fed crafted meson logs for each way a count can lie (TAP).

The test outputs below are what meson 1.0.1 (Debian 12) wrote to testlog.json
for a shell test printing each one (result, return code, stdout), so the
counter is checked against the logs it really reads.
Usage: test_count.py PATH/TO/count.py
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

COUNT = sys.argv[1]
# name: (meson's result, return code, stdout), as meson 1.0.1 logged them
MESON = {
    "wholeskip": ("SKIP", 0, "1..0 # SKIP no widget here\n"),
    "kvmskip": ("SKIP", 0, "1..0 # SKIP /dev/kvm is missing or unusable: KVM lacks KVM_CAP_SYNC_REGS\n"),
    "mismatch": ("ERROR", 0, "1..3\nok 1\nok 2\n"),
    "noplan": ("OK", 0, "ok 1\nok 2\n"),
    "planonly": ("SKIP", 0, "1..4\n"),
    "nothing": ("SKIP", 0, ""),
    "planzero": ("SKIP", 0, "1..0\n"),
    "crash": ("ERROR", -11, "1..2\nok 1\nok 2\n"),
    "bail": ("ERROR", 0, "1..2\nok 1\nBail out! broken\n"),
    "good": ("OK", 0, "1..2\nok 1 - a\nok 2 - b # SKIP needs KVM: nope\n"),
    "pass": ("OK", 0, "TAP version 13\n1..2\n# Criterion v2.4.1\nok - s::one\nok - s::two\n"),
    "exitcode": ("OK", 0, ""),
}
LAST = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$")
n = 0
failures = 0


def build(root, name, tests, age=0.0, start=None):
    """A build directory whose testlog.json holds these tests (names of MESON), written age seconds ago."""
    b = os.path.join(root, name)
    os.makedirs(os.path.join(b, "meson-logs"))
    os.makedirs(os.path.join(b, "meson-info"))
    intro = []
    with open(os.path.join(b, "meson-logs", "testlog.json"), "w") as f:
        for t in tests:
            res, rc, out = MESON[t]
            # meson logs a test with suites as "PROJECT:SUITE / NAME"
            f.write(json.dumps({"name": "strata:docs / " + t if t == "exitcode" else t, "result": res, "returncode": rc, "stdout": out,
                                "starttime": start if start is not None else time.time() - age,
                                "command": ["/bin/prog_" + t], "duration": 0.01, "env": {}}) + "\n")
            intro.append({"name": t, "protocol": "exitcode" if t == "exitcode" else "tap",
                          "cmd": ["/usr/bin/env", "bash", "/src/tests/" + t + ".sh"]})
    with open(os.path.join(b, "meson-info", "intro-tests.json"), "w") as f:
        json.dump(intro, f)
    if age:
        t = time.time() - age
        os.utime(os.path.join(b, "meson-logs", "testlog.json"), (t, t))
    return b


def count(args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_HARNESS_")}
    e.update({"STRATA_HARNESS_KVM": "0", "STRATA_HARNESS_PAGEMAP_SCAN": "0"})
    e.update(env or {})
    p = subprocess.run([sys.executable, COUNT] + args, capture_output=True, text=True, env=e)
    lines = p.stdout.splitlines()
    m = LAST.match(lines[-1]) if lines else None
    return p.returncode, (tuple(int(x or 0) for x in m.groups()) if m else None), p.stdout


def case(name, tests, want_rc, check=None, env=None, extra_args=None, **kw):
    """Run count.py on one crafted build; want_rc its exit status, check(counts, out) more."""
    global n, failures
    n += 1
    with tempfile.TemporaryDirectory() as root:
        b = build(root, "build", tests, **kw)
        rc, counts, out = count((extra_args or []) + [b], env)
    good = rc == want_rc and counts is not None and (check is None or check(counts, out))
    if good:
        print(f"ok {n} - {name}")
    else:
        failures += 1
        print(f"not ok {n} - {name}")
        print("# exit %d, want %d; output:" % (rc, want_rc))
        for line in out.splitlines()[-12:]:
            print("#   " + line)


def failed(k=1):
    return lambda c, out: c[1] >= k


print("1..17")
case("a suite skipped as a whole counts as one skip, its reason printed", ["wholeskip", "pass"], 0,
     lambda c, out: c == (2, 0, 1) and "no widget here" in out)
case("a whole-suite KVM skip fails where the harness's own check ran a guest", ["kvmskip", "pass"], 1,
     lambda c, out: c[1] == 1 and "the harness found KVM working" in out, env={"STRATA_HARNESS_KVM": "1"})
case("... and is a skip where the harness agrees KVM is missing", ["kvmskip", "pass"], 0,
     lambda c, out: c == (2, 0, 1))
case("a case skipped for want of KVM fails where the harness found KVM", ["good"], 1,
     lambda c, out: c == (1, 1, 0), env={"STRATA_HARNESS_KVM": "1"})
case("a plan mismatch is a failure", ["mismatch", "pass"], 1, failed())
case("a suite with no plan is a failure", ["noplan", "pass"], 1, failed())
case("a suite that prints its plan and then nothing is a failure", ["planonly", "pass"], 1, failed())
case("a suite that prints nothing is a failure", ["nothing", "pass"], 1, failed())
case("a plan of 1..0 without SKIP is a failure", ["planzero", "pass"], 1, failed())
case("a crashed binary is a failure, though each case it printed passed", ["crash"], 1, failed())
case("Bail out! is a failure", ["bail", "pass"], 1, failed())
case("a test log older than this run is a failure and none of it counts", ["pass"], 1,
     lambda c, out: c[0] == 0 and c[1] == 1 and "older than this run" in out,
     age=120, extra_args=["--since", str(time.time() - 60)])
case("a log entry started before this run is a failure", ["pass"], 1,
     lambda c, out: c[0] == 0 and c[1] == 1, start=time.time() - 120, extra_args=["--since", str(time.time() - 60)])
case("an exitcode test counts as one case", ["exitcode", "pass"], 0, lambda c, out: c == (3, 0, 0))


def two_builds():
    """The same suite in two builds: 2 distinct cases, run 4 times."""
    with tempfile.TemporaryDirectory() as root:
        a = build(root, "build", ["pass"])
        b = build(root, "build-asan", ["pass"])
        rc, counts, out = count([a, b])
    lines = out.splitlines()
    return rc == 0 and counts == (4, 0, 0) and len(lines) >= 2 and \
        lines[-2] == "2 cases, run 4 times: 4 passed, 0 failed, 0 skipped"


n += 1
if two_builds():
    print(f"ok {n} - the line before the last names the distinct cases beside the runs")
else:
    failures += 1
    print(f"not ok {n} - the line before the last names the distinct cases beside the runs")


def extra_line():
    with tempfile.TemporaryDirectory() as root:
        a = build(root, "build", ["pass"])
        x = os.path.join(root, "compiled")
        with open(x, "w") as f:
            f.write("ok - build-release compiles\nnot ok - build-clang compiles (clang missing)\n")
        rc, counts, out = count(["--extra", x, a])
    return rc == 1 and counts == (3, 1, 0)


n += 1
print(f"ok {n} - --extra lines count as cases" if extra_line() else f"not ok {n} - --extra lines count as cases")
failures += 0 if extra_line() else 1


def missing_log():
    with tempfile.TemporaryDirectory() as root:
        a = build(root, "build", ["pass"])
        rc, counts, out = count([a, os.path.join(root, "build-asan")])
    return rc == 1 and counts is not None and counts[1] == 1


n += 1
print(f"ok {n} - a build without a test log is a failure" if missing_log() else f"not ok {n} - a build without a test log is a failure")
failures += 0 if missing_log() else 1
sys.exit(1 if failures else 0)
