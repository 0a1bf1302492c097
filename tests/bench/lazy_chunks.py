#!/usr/bin/env python3
"""lazy_chunks.py: which chunk size a lazy pull should fetch by (docs/lazy.md has the results).

usage: lazy_chunks.py STRATA_BIN [RUNS]
Starts Debian's docker-registry on loopback behind tests/e2e/oci_proxy.py,
pushes one 64 MiB snapshot of random pages with chunk indexes of 64 KiB ..
1 MiB, and for each chunk size and each delay the proxy adds to every
request (0, 2, 20 ms) runs RUNS times (default 5): a fresh store, pull
--lazy, mount, then touch the pages a first call might: 5% of the layer,
as 100 runs of 8 pages at fixed pseudo-random places, through a shared
mapping of the layer file (page faults, as a restored guest makes them).
Prints, per case, the median and p10-p90 of the time to touch them all,
the bytes fetched and the Range requests made (from the proxy's log).
"""
import mmap
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = [64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20]
DELAYS = [0, 2, 20]
LAYER = 64 << 20


def st(store, *args, **kw):
    return subprocess.run([BIN, "--store", store] + list(args), check=True, capture_output=True, text=True, **kw)


def freeport():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def main():
    t = tempfile.mkdtemp(prefix="strata-lazy-bench.")
    procs = []
    try:
        port = freeport()
        os.mkdir(t + "/reg")
        with open(t + "/reg.yml", "w") as f:
            f.write("version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s/reg}}\n"
                    "http: {addr: 127.0.0.1:%d}\n" % (t, port))
        procs.append(subprocess.Popen(["docker-registry", "serve", t + "/reg.yml"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        mode = t + "/mode"
        open(mode, "w").write("pass\n")
        procs.append(subprocess.Popen([sys.executable, SRC + "/tests/e2e/oci_proxy.py", str(port), mode,
                                       t + "/proxy.port"]))
        for _ in range(100):
            if os.path.exists(t + "/proxy.port"):
                break
            time.sleep(0.1)
        time.sleep(1)
        proxy = "127.0.0.1:" + open(t + "/proxy.port").read().strip()
        src = t + "/src"
        st(src, "init")
        with open(t + "/img", "wb") as f:
            f.write(os.urandom(LAYER))
        st(src, "debug", "ingest", t + "/img", "--tag", "base")
        for cs in SIZES:
            st(src, "push", "--insecure", "--chunk-size", str(cs), "base", "%s/bench/c%d:v1" % (proxy, cs))
        rnd = random.Random(2026)
        pages = LAYER // 4096
        touch = sorted(set(p + k for p in rnd.sample(range(pages - 8), 100) for k in range(8)))
        print("case,chunk_KiB,delay_ms,median_ms,p10_ms,p90_ms,bytes_fetched,requests")
        for delay in DELAYS:
            for cs in SIZES:
                times, fetched, reqs = [], [], []
                for r in range(RUNS):
                    store = "%s/s-%d-%d-%d" % (t, delay, cs, r)
                    st(store, "init")
                    open(mode, "w").write("pass\n")
                    st(store, "pull", "--lazy", "--insecure", "--tag", "base", "%s/bench/c%d:v1" % (proxy, cs))
                    mp = store + ".mnt"
                    os.mkdir(mp)
                    st(store, "mount", mp, "--log", store + ".log")
                    try:
                        layer = os.listdir(mp + "/snapshots/base/layers")[0]
                        open(mode, "w").write("delay %d\n" % delay if delay else "pass\n")
                        open(mode + ".log", "w").close()
                        fd = os.open(mp + "/snapshots/base/layers/" + layer, os.O_RDONLY)
                        m = mmap.mmap(fd, LAYER, mmap.MAP_SHARED, mmap.PROT_READ)
                        t0 = time.perf_counter()
                        s = 0
                        for p in touch:
                            s += m[p * 4096]
                        times.append((time.perf_counter() - t0) * 1000)
                        m.close()
                        os.close(fd)
                        nb = nr = 0
                        for line in open(mode + ".log"):
                            w = line.split()
                            if len(w) >= 5 and w[4].startswith("bytes="):
                                nb += int(w[3])
                                nr += 1
                        fetched.append(nb)
                        reqs.append(nr)
                    finally:
                        subprocess.run([BIN, "umount", mp], capture_output=True)
                    shutil.rmtree(store, ignore_errors=True)
                print("lazy/touch_5pct_64MiB,%d,%d,%.1f,%.1f,%.1f,%d,%d" % (
                    cs >> 10, delay, statistics.median(times), pct(times, 0.1), pct(times, 0.9),
                    int(statistics.median(fetched)), int(statistics.median(reqs))), flush=True)
        print("# working set touched: %d pages, %d bytes" % (len(touch), len(touch) * 4096))
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(t, ignore_errors=True)


if __name__ == "__main__":
    main()
