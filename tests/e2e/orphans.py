#!/usr/bin/env python3
"""orphans.py COMMAND...: run COMMAND as the child of a child subreaper and say what it left behind.

Prints `status S, left N`: COMMAND's exit status, then how many processes
that outlived it were reaped here (an orphan comes to the nearest subreaper),
each within 10 s; `still running` if one lasts longer (tests/e2e/start.sh).
"""
import ctypes
import os
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER): " + os.strerror(ctypes.get_errno()))
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status = os.waitpid(pid, 0)
left, deadline = 0, time.monotonic() + 10
while True:
    try:
        reaped, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if reaped:
        left += 1
    elif time.monotonic() > deadline:
        print("still running after 10 s")
        break
    else:
        time.sleep(0.002)
print(f"status {os.waitstatus_to_exitcode(status)}, left {left}")
