#!/usr/bin/env python3
# figures.py: docs/figures.md and every generated figures block in README.md and docs/, from the kept `strata bench --json` results.
"""Write the one figures table, and the blocks the docs quote from it.

usage: figures.py [RESULTS.json ...] [--merge] [--check]

The kept results are docs/figures.json. With no file, the docs are
generated from it. RESULTS.json files are what `strata bench --json FILE`
wrote (full runs, not --quick); several are merged in order, later over
earlier:
  - a run of every group replaces everything before it;
  - a run of some groups (`strata bench lazy`) replaces every case of those
    groups;
  - a run with --filter replaces the cases of the same name.
The floor group runs every time; its cases are taken only from a run that
named it or ran every group, so the ratios already kept stay beside the
floor they were computed with. Each case keeps the time and machine of
its run, which docs/figures.md shows per group.

--merge merges the files into docs/figures.json and writes it (the first
input is then docs/figures.json itself). docs/figures.md is rewritten with
every case; so is each block between `<!-- figures:begin NAME -->` and
`<!-- figures:end NAME -->` in README.md and docs/*.md, its rows computed
by BLOCKS[NAME] below. --check writes nothing and exits 1 if any of those
files differs from what would be written, names a block BLOCKS does not
define, or a block quotes a case the results lack.
"""
import argparse
import datetime
import glob
import json
import math
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEPT = os.path.join(ROOT, "docs", "figures.json")
FIGURES_MD = os.path.join(ROOT, "docs", "figures.md")


class Missing(Exception):
    pass


class PlotError(Exception):
    pass


# ------------------------------------------------------------------ formats

def fmt_ns(ns):
    if ns < 1e3:
        return "%.0f ns" % ns
    if ns < 1e6:
        return ("%.1f µs" if ns < 1e5 else "%.0f µs") % (ns / 1e3)
    if ns < 1e9:
        return ("%.2f ms" if ns < 1e7 else "%.1f ms" if ns < 1e8 else "%.0f ms") % (ns / 1e6)
    return "%.2f s" % (ns / 1e9)


def fmt_range(lo, hi, fmt):
    a, b = fmt(lo), fmt(hi)
    if a == b:
        return a
    ua, ub = a.split(" ")[-1], b.split(" ")[-1]
    if ua == ub and " " in a:
        return "%s–%s" % (a[: -len(ua) - 1], b)
    return "%s–%s" % (a, b)


def fmt_bytes(v):
    for div, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if v >= div:
            return "%.1f %s" % (v / div, name)
    return "%.0f B" % v


def fmt_value(v, unit):
    if unit in ("bytes", "B"):
        return fmt_bytes(v)
    if unit == "us":
        return fmt_ns(v * 1e3)
    if unit == "ms":
        return fmt_ns(v * 1e6)
    if unit == "x":
        return "%.2f×" % v
    if v == int(v):
        return ("%d %s" % (v, unit)).strip()
    return ("%.3g %s" % (v, unit)).strip()


def fmt_int(v):
    return "{:,}".format(int(round(v)))


# ------------------------------------------------------------------ results

# The group of a case recorded before strata-bench wrote "group" (the
# names that do not start with their group's name).
LEGACY_GROUPS = [
    ("guest_calls/call/", "vmm"), ("guest_calls/call_with_host_function/", "vmm"),
    ("guest_calls/interrupt_latency", "vmm"), ("guest_calls/timeout_1ms", "vmm"),
    ("guest_calls/", "snapshots"), ("sample_workloads/", "vmm"), ("guest_call_with_large_parameters", "vmm"),
    ("sandboxes/create_initialized", "vmm"), ("sandboxes/", "cold"), ("snapshot_files/", "cold"),
    ("floor/", "floor"), ("store/export_", "index"), ("store/import_", "index"), ("store/", "store"),
    ("index/", "index"), ("fs/", "fs"), ("snapshots/", "snapshots"), ("density/", "density"),
    ("oci/", "oci"), ("lazy/", "lazy"), ("guest_alloc/", "alloc"),
]


def group_of(r):
    if r.get("group"):
        return r["group"]
    name = r["name"][len("process/"):] if r["name"].startswith("process/") else r["name"]
    for prefix, g in LEGACY_GROUPS:
        if name.startswith(prefix):
            return g
    return name.split("/")[0]


def load(path):
    """A results file as {"runs": [...], "results": [...]}, each result naming its run."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("figures.py: %s: %s" % (path, e))
    if data.get("version") != 1:
        sys.exit("figures.py: %s: not a strata bench JSON file (version 1)" % path)
    if isinstance(data.get("runs"), list):  # docs/figures.json's form (a bench file's "runs" is --runs N)
        return data
    if data.get("quick"):
        sys.exit("figures.py: %s is a --quick run; the figures come from full runs" % path)
    run = {"time": data["time"], "machine": data.get("machine", {}),
           "groups": data.get("groups", []), "filter": data.get("filter"), "seconds": data.get("seconds", {})}
    results = []
    for r in data["results"]:
        r = dict(r)
        r["group"] = group_of(r)
        r["run"] = 0
        results.append(r)
    return {"version": 1, "runs": [run], "results": results}


def merge(sets):
    runs, results = [], []
    for s in sets:
        base = len(runs)
        runs += s["runs"]
        for run_i, run in enumerate(s["runs"]):
            mine = [dict(r, run=base + run_i) for r in s["results"] if r["run"] == run_i]
            whole = not run.get("groups") and not run.get("filter")
            named = set(run.get("groups") or [])
            floor_ok = whole or "floor" in named
            if not floor_ok:
                have = {r["name"] for r in results}
                mine = [r for r in mine if r["group"] != "floor" or r["name"] not in have]
            if whole:
                results = []
            elif named and not run.get("filter"):
                results = [r for r in results if r["group"] not in named or (r["group"] == "floor" and not floor_ok)]
            new = {r["name"]: r for r in mine}
            kept = []
            for r in results:
                if r["name"] in new:
                    kept.append(new.pop(r["name"]))
                else:
                    kept.append(r)
            results = kept + [r for r in mine if r["name"] in new]
    # Keep only the runs something still comes from, renumbered.
    # A run also stays while it is the last to have timed a group (whole,
    # not filtered): docs/benchmarks.md says how long each group takes.
    timed = {}
    for i, run in enumerate(runs):
        if not run.get("filter"):
            for g in run.get("seconds", {}):
                timed[g] = i
    used = sorted({r["run"] for r in results} | set(timed.values()))
    remap = {old: i for i, old in enumerate(used)}
    for r in results:
        r["run"] = remap[r["run"]]
    return {"version": 1, "runs": [runs[i] for i in used], "results": results}


def when(run):
    return datetime.datetime.fromtimestamp(run["time"], datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def command(run):
    """the strata bench command line a run was"""
    words = ["strata bench"]
    if run.get("filter"):
        words.append("--filter " + run["filter"])
    words += run.get("groups") or []
    return " ".join(words)


def machine(run):
    m = run.get("machine", {})
    return "Linux %s, written pages found by %s, KVM %s" % (
        m.get("kernel", "?"), m.get("dirty_mechanism") or "none", m.get("kvm", "?"))


class Cases:
    """The merged results by name, with the cells the blocks are made of."""

    def __init__(self, data):
        self.data = data
        self.by = {r["name"]: r for r in data["results"]}

    def get(self, name):
        if name not in self.by:
            raise Missing(name)
        return self.by[name]

    def has(self, name):
        return name in self.by

    def med(self, name):
        return fmt_ns(self.get(name)["median_ns"])

    def lat(self, name):
        """median (p10–p90)"""
        r = self.get(name)
        return "%s (%s)" % (fmt_ns(r["median_ns"]), fmt_range(r["p10_ns"], r["p90_ns"], fmt_ns))

    def thr(self, name):
        r = self.get(name)
        return "%.2f GB/s" % (r["bytes_per_iter"] / r["median_ns"])

    def ratio(self, name):
        r = self.get(name)
        return "%.2f×" % r["floor_ratio"] if "floor_ratio" in r else ""

    def val(self, name):
        r = self.get(name)
        return fmt_value(r["value"], r["unit"])

    def num(self, name):
        return self.get(name)["value"]

    def when(self, name):
        return when(self.data["runs"][self.get(name)["run"]])


# ---------------------------------------------------------------- figures.md

def figures_md(data, plots=None):
    out = [
        "# Figures",
        "",
        "<!-- Generated by tests/bench/figures.py from docs/figures.json: do not edit by hand. -->",
        "",
        "`strata bench` on this project's machine kind (2 shared cores, nested",
        "`kvm_pvm`), kept in docs/figures.json. README.md's summary and the",
        "tables in docs/ are generated from the same results, and the docs cite",
        "these cases by name instead of copying figures. Each group says which",
        "run it comes from (docs/benchmarks.md: how to regenerate one group or all).",
        "",
        "Latencies: median, p10 and p90 of the iterations, how many, and the ratio to",
        "the floor measured in the same run (`floor/kvm_run_roundtrip`, one bare",
        "KVM_RUN round trip from guest user mode; `floor/process_roundtrip` for the",
        "process backend; the raw hash or copy for store cases; the backing file for",
        "fs cases). These machines are shared and noisy: compare ratios, not absolute",
        "times. Other figures (bytes, PSS, counts) are single values.",
    ]
    if plots:
        out += plots_md(plots)
    sections, order = {}, []
    for r in data["results"]:
        parts = r["name"].split("/")
        g = parts[0] if parts[0] != "process" else "process/" + parts[1]
        if g not in sections:
            sections[g] = []
            order.append(g)
        sections[g].append(r)
    for g in order:
        runs = [data["runs"][i] for i in sorted({r["run"] for r in sections[g]})]
        machines = sorted({machine(run) for run in runs})
        src = "; ".join("%s (`%s`)" % (when(run), command(run)) for run in runs)
        out += ["", "## %s" % g, "", "%s %s; %s." % ("Runs" if len(runs) > 1 else "Run", src, "; ".join(machines)), "",
                "| case | median | p10–p90 | n | × floor |", "|---|---|---|---|---|"]
        for r in sections[g]:
            if "unit" in r:
                out.append("| `%s` | %s | | | |" % (r["name"], fmt_value(r["value"], r["unit"])))
                continue
            ratio = "%.2f (`%s`)" % (r["floor_ratio"], r["floor"]) if "floor_ratio" in r else ""
            thr = ""
            if r.get("bytes_per_iter") and r["median_ns"] > 0:
                thr = ", %.2f GB/s" % (r["bytes_per_iter"] / r["median_ns"])
            out.append("| `%s` | %s%s | %s | %d | %s |" % (
                r["name"], fmt_ns(r["median_ns"]), thr, fmt_range(r["p10_ns"], r["p90_ns"], fmt_ns),
                r["iterations"], ratio))
    return "\n".join(out) + "\n"


# -------------------------------------------------------------------- blocks
# Each block: a function of Cases returning its lines (the markers are kept
# around them). A doc holds a block as
#   <!-- figures:begin NAME -->
#   <!-- figures:end NAME -->
# and `figures.py` fills it in.

SIZES = ("default", "small", "medium", "large")

# The README's summary: a label, the case (%s: each of the four guest sizes;
# the row gives the range of their medians), and the figure of the system
# strata is compared with, which is quoted from that project, not measured.
README_ROWS = [
    ("`guest_calls/call`", "guest_calls/call/%s", "Hyperlight 17–18 µs"),
    ("`guest_calls/call_with_restore`", "guest_calls/call_with_restore/%s", "Hyperlight 37–65 µs"),
    ("`snapshots/restore`", "snapshots/restore/%s", "Hyperlight 13–21 µs (46–60 large)"),
    ("`snapshots/restore_alternate`", "snapshots/restore_alternate/%s", "Hyperlight 276–423 µs"),
    ("`snapshots/restore_cycle5` (a cycle of five snapshots)", "snapshots/restore_cycle5/%s", ""),
    ("`sandboxes/create_initialized`", "sandboxes/create_initialized/%s", "Hyperlight 1.78–3.34 ms"),
    ("`sandboxes/sandbox_from_snapshot/*/store` (a freed one kept warm)",
     "sandboxes/sandbox_from_snapshot/%s/store", "Hyperlight 0.66–1.58 ms"),
    ("`sandboxes/sandbox_from_snapshot/*/store_no_warm`", "sandboxes/sandbox_from_snapshot/%s/store_no_warm", ""),
    ("`sandboxes/sandbox_from_snapshot/*/copy`", "sandboxes/sandbox_from_snapshot/%s/copy", ""),
    ("`sandboxes/sandbox_from_snapshot/*/mount`", "sandboxes/sandbox_from_snapshot/%s/mount", ""),
    ("`snapshot_files/cold_start_via_snapshot` (open a copy, restore, one call)",
     "snapshot_files/cold_start_via_snapshot/%s", ""),
    ("... as a new process's first restore (× `floor/kvm_first_sandbox`)",
     "snapshot_files/cold_start_via_snapshot/%s/first_in_process", ""),
    ("`snapshot_files/cold_start_via_mount/*/warm`", "snapshot_files/cold_start_via_mount/%s/warm", ""),
    ("... as a new process's first restore (× `floor/kvm_first_sandbox`)",
     "snapshot_files/cold_start_via_mount/%s/first_in_process", ""),
    ("`process/guest_calls/call` (the process backend)", "process/guest_calls/call/%s", ""),
    ("`process/snapshots/restore` (the process backend)", "process/snapshots/restore/%s", ""),
    ("`density/1000/medium/steady_restore_and_call_median`", "density/1000/medium/steady_restore_and_call_median", ""),
    ("bytes stored for a 4 MiB scattered change to a 256 MiB image",
     "store/ingest_4MiB_scattered_change/bytes_added", "casync ~24 MiB"),
    ("PSS per sandbox, 1,000 sandboxes of one 64 MiB snapshot, 64 KiB written each",
     "density/1000/medium/pss_per_sandbox", "zeroboot ~265 KB"),
]


def block_readme(c):
    floor = c.get("floor/kvm_run_roundtrip")
    out = ["Measured with `strata bench` on this project's machines (2 shared cores,",
           "nested `kvm_pvm`), %s: ranges over the guest sizes, each case in" % c.when("floor/kvm_run_roundtrip"),
           "docs/figures.md. One bare KVM_RUN round trip from guest user mode, the",
           "*floor*, took %s in that run; ratios to it travel better than" % fmt_ns(floor["median_ns"]),
           "absolute times. The compared figures are quoted from their projects (bare metal).",
           "",
           "| | strata here | × floor | compared with |",
           "|---|---|---|---|"]
    for label, pat, other in README_ROWS:
        names = [pat % size for size in SIZES] if "%s" in pat else [pat]
        hit = [c.get(n) for n in names]
        if "unit" in hit[0]:
            out.append("| %s | %s | | %s |" % (label, fmt_value(hit[0]["value"], hit[0]["unit"]), other))
            continue
        meds = [r["median_ns"] for r in hit]
        ratios = [r["floor_ratio"] for r in hit if "floor_ratio" in r]
        ratio = fmt_range(min(ratios), max(ratios), lambda x: "%.2f" % x) if ratios else ""
        out.append("| %s | %s | %s | %s |" % (label, fmt_range(min(meds), max(meds), fmt_ns), ratio, other))
    return out


def block_readme_lazy(c):
    ws = c.num("lazy/working_set_bytes")
    return ["Lazy pulls (docs/lazy.md, docs/workingset.md), from a registry 20 ms",
            "away, 256 MiB snapshot, 5%% read by the first call (%s):" % c.when("lazy/local_cold_start"),
            "the first result took %s after a full pull, %s lazy and %s lazy" % (
                c.med("lazy/full_pull_then_run/20ms"), c.med("lazy/lazy/20ms"), c.med("lazy/lazy_working_set/20ms")),
            "with its working set (local: %s), fetching %s the working set (%s)." % (
                c.med("lazy/local_cold_start"), c.val("lazy/lazy_working_set/20ms/bytes_vs_working_set"),
                fmt_bytes(ws))]


def block_fs_read_modes(c):
    out = ["| mode | mount file cached | backing blob cached | cold read through the mount (backing cached) |",
           "|---|---|---|---|"]
    for mode in ("direct", "dontneed", "cached"):
        case = "fs/seq_read/256m/mount_cold/%s" % mode
        out.append("| %s | %s | %s | %s, %s |" % (
            mode, c.val("fs/page_cache/%s/mount_file_after_read" % mode),
            c.val("fs/page_cache/%s/backing_blob_after_read" % mode), c.lat(case), c.thr(case)))
    return out


FS_ROWS = [
    ("`fs/request_roundtrip` (one getxattr answered by the daemon)", "fs/request_roundtrip", None),
    ("`fs/seq_read/256m/file` (backing blob, page cache) — floor", "fs/seq_read/256m/file", "thr"),
    ("`fs/seq_read/256m/mount_warm` (mount's page cache, keep_cache)", "fs/seq_read/256m/mount_warm", "thr"),
    ("`fs/seq_read/256m/mount_cold/direct` (through the daemon)", "fs/seq_read/256m/mount_cold/direct", "thr"),
    ("`fs/seq_read/256m/mount_cold/dontneed`", "fs/seq_read/256m/mount_cold/dontneed", "thr"),
    ("`fs/seq_read/256m/mount_cold/cached`", "fs/seq_read/256m/mount_cold/cached", "thr"),
    ("`fs/mmap_fault_16m/256m/file` (4096 pages) — floor", "fs/mmap_fault_16m/256m/file", "page"),
    ("`fs/mmap_fault_16m/256m/mount_warm`", "fs/mmap_fault_16m/256m/mount_warm", "page"),
    ("`fs/mmap_fault_16m/256m/mount_cold`", "fs/mmap_fault_16m/256m/mount_cold", "page"),
    ("`fs/ls_lR/1000/plain_dir` (a `cp -r` of snapshots/) — floor", "fs/ls_lR/1000/plain_dir", None),
    ("`fs/ls_lR/1000/mount_cold` (fresh mount each time)", "fs/ls_lR/1000/mount_cold", None),
    ("`fs/ls_lR/1000/mount_warm`", "fs/ls_lR/1000/mount_warm", None),
    ("`fs/du/1000/plain_dir` — floor", "fs/du/1000/plain_dir", None),
    ("`fs/du/1000/mount_cold`", "fs/du/1000/mount_cold", None),
    ("`fs/cp_r/plain_dir` (64 MiB snapshot) — floor", "fs/cp_r/plain_dir", None),
    ("`fs/cp_r/mount_new` (layer hashed and stored)", "fs/cp_r/mount_new", None),
    ("`fs/cp_r/mount_dedup` (layer already stored: only hashed)", "fs/cp_r/mount_dedup", None),
]


def block_fs_cases(c):
    out = ["Run %s (median, p10–p90):" % c.when("fs/request_roundtrip"), "",
           "| case | time | × floor |", "|---|---|---|"]
    for label, name, extra in FS_ROWS:
        cell = c.lat(name)
        if extra == "thr":
            cell += ", " + c.thr(name)
        elif extra == "page":
            cell += ": %s/page" % fmt_ns(c.get(name)["median_ns"] / 4096)
        out.append("| %s | %s | %s |" % (label, cell, c.ratio(name)))
    return out


STORE_ROWS = [
    ("`store/xxh3_128_raw` (256 MiB)", "store/xxh3_128_raw", True),
    ("`store/xxh3_128_raw_64MiB` (floor)", "store/xxh3_128_raw_64MiB", True),
    ("`store/blob_put/sync_none` (64 MiB)", "store/blob_put/sync_none", True),
    ("`store/blob_put/sync_full` (64 MiB)", "store/blob_put/sync_full", True),
    ("`store/blob_verify` (64 MiB, cached)", "store/blob_verify", True),
    ("`store/blob_put_4KiB/sync_none`", "store/blob_put_4KiB/sync_none", False),
    ("`store/blob_put_4KiB/sync_full`", "store/blob_put_4KiB/sync_full", False),
]


def block_store_cases(c):
    out = ["Run %s (median, p10–p90):" % c.when("store/blob_put/sync_none"), "",
           "| case | time | × floor |", "|---|---|---|"]
    for label, name, thr in STORE_ROWS:
        out.append("| %s | %s | %s |" % (label, c.lat(name) + (", " + c.thr(name) if thr else ""), c.ratio(name)))
    for label, name in (("`store/ingest_256MiB_64MiB_nonzero`", "store/ingest_256MiB_64MiB_nonzero"),
                        ("`store/ingest_4MiB_scattered_change`", "store/ingest_4MiB_scattered_change")):
        out.append("| %s | %s; **%s added** (%s pages) | |" % (
            label, c.lat(name), c.val(name + "/bytes_added"), fmt_int(c.num(name + "/pages_stored"))))
    return out


def block_sync_cases(c):
    out = ["Run %s (median, p10–p90):" % c.when("store/blob_put/sync_none"), "",
           "| case | none | full | full / none |", "|---|---|---|---|"]
    for label, a, b, thr in (("`blob_put`, 64 MiB", "store/blob_put/sync_none", "store/blob_put/sync_full", True),
                             ("`blob_put_4KiB`", "store/blob_put_4KiB/sync_none", "store/blob_put_4KiB/sync_full", False)):
        ca, cb = c.lat(a), c.lat(b)
        if thr:
            ca, cb = ca + ", " + c.thr(a), cb + ", " + c.thr(b)
        out.append("| %s | %s | %s | %.1f× |" % (label, ca, cb, c.get(b)["median_ns"] / c.get(a)["median_ns"]))
    f = "store/xxh3_128_raw_64MiB"
    out.append("| floor: `xxh3_128_raw_64MiB` | %s, %s | | |" % (c.lat(f), c.thr(f)))
    out.append("| `blob_verify` (re-hash of a cached 64 MiB blob) | %s, %s the floor | | |" % (
        c.lat("store/blob_verify"), c.ratio("store/blob_verify")))
    return out


def block_index_cases(c):
    out = ["Run %s (median, p10–p90):" % c.when("index/tag_lookup"), "",
           "| case | time | × floor |", "|---|---|---|"]
    for label, name, thr in (
            ("`index/floor/write_4KiB_fdatasync`", "index/floor/write_4KiB_fdatasync", False),
            ("`index/snapshot_commit/sync_full`", "index/snapshot_commit/sync_full", False),
            ("`index/snapshot_commit/sync_none`", "index/snapshot_commit/sync_none", False),
            ("`index/tag_lookup` (read txn + get, 1,000 tags)", "index/tag_lookup", False),
            ("`index/floor/copy_256MiB_fsync`", "index/floor/copy_256MiB_fsync", True),
            ("`store/export_256MiB`", "store/export_256MiB", True),
            ("`store/import_256MiB` (hash + store + commit, empty store)", "store/import_256MiB", True)):
        out.append("| %s | %s | %s |" % (label, c.lat(name) + (", " + c.thr(name) if thr else ""), c.ratio(name)))
    return out


def wire(c, name):
    """bytes the registry moved for a case: its blobs and the rest"""
    return "%s of blobs + %s other (%s up, %s down)" % (
        fmt_bytes(c.num(name + "/blob_bytes")), fmt_bytes(c.num(name + "/metadata_bytes")),
        fmt_bytes(c.num(name + "/wire_up")), fmt_bytes(c.num(name + "/wire_down")))


def block_oci_cases(c):
    out = ["Run %s (median, p10–p90):" % c.when("oci/push_256MiB"), "",
           "| case | time | bytes |", "|---|---|---|",
           "| `oci/floor/curl_get_64MiB` | %s | 64 MiB |" % c.lat("oci/floor/curl_get_64MiB"),
           "| `oci/floor/curl_put_64MiB` | %s | 64 MiB |" % c.lat("oci/floor/curl_put_64MiB")]
    for label, name in (("`oci/push_256MiB` (fresh repository)", "oci/push_256MiB"),
                        ("`oci/pull_256MiB` (fresh store)", "oci/pull_256MiB")):
        out.append("| %s | %s; **%s the paired floor's speed** (p10–p90 %s–%s) | %s |" % (
            label, c.lat(name), c.val(name + "/speed_vs_paired_floor"),
            c.val(name + "/speed_vs_paired_floor_p10"), c.val(name + "/speed_vs_paired_floor_p90"), wire(c, name)))
    out.append("| `oci/push_256MiB_again` | %s, **%s hashed** | %s |" % (
        c.lat("oci/push_256MiB_again"), fmt_bytes(c.num("oci/push_256MiB_again/sha256_bytes")),
        wire(c, "oci/push_256MiB_again")))
    for label, name in (("`oci/push_child_4MiB` (parent in the repository)", "oci/push_child_4MiB"),
                        ("`oci/pull_child_4MiB` (parent in the store)", "oci/pull_child_4MiB"),
                        ("`oci/fanout_8_pulls` (8 threads, 8 stores; total)", "oci/fanout_8_pulls")):
        out.append("| %s | %s | %s |" % (label, c.lat(name), wire(c, name)))
    for label, name in (("`oci/skopeo_push_whole_256MiB` (one whole-memory layer)", "oci/skopeo_push_whole_256MiB"),
                        ("`oci/skopeo_pull_whole_256MiB`", "oci/skopeo_pull_whole_256MiB")):
        out.append("| %s | %s, %s strata's time | 256 MiB |" % (label, c.lat(name), c.ratio(name)))
    return out


LAZY_KINDS = [("full pull, then run", "full_pull_then_run"), ("lazy pull, no working set", "lazy"),
              ("lazy pull with the working set", "lazy_working_set"),
              ("8 sandboxes at once (`pool -n 8`), with the working set", "pool8_lazy_working_set")]
LAZY_DELAYS = ("0ms", "2ms", "20ms")


def block_workingset_lazy(c):
    ws = c.num("lazy/working_set_bytes")
    out = ["Run %s (median, p10–p90; the working set recorded: %s bytes):" % (
               c.when("lazy/local_cold_start"), fmt_int(ws)), "",
           "| case | 0 ms | 2 ms | 20 ms | bytes through the relay at 20 ms |", "|---|---|---|---|---|",
           "| local cold start (`strata run` from a complete store) | %s | | | 0 |" % c.lat("lazy/local_cold_start")]
    for label, kind in LAZY_KINDS:
        cells = [c.lat("lazy/%s/%s" % (kind, d)) for d in LAZY_DELAYS]
        n = "lazy/%s/20ms" % kind
        out.append("| %s | %s | %s (%s the working set) |" % (
            label, " | ".join(cells), fmt_int(c.num(n + "/bytes_fetched")), c.val(n + "/bytes_vs_working_set")))
    return out


def block_workingset_split(c):
    n = "lazy/lazy_working_set/20ms"
    total = c.get(n)["median_ns"]
    run = c.num(n + "/run_after_pull") * 1e6
    return ["At 20 ms, of the %s a lazy start with the working set takes, the pull" % fmt_ns(total),
            "(metadata, record, prefetch) takes about %s and the run after it %s" % (
                fmt_ns(total - run), fmt_ns(run)),
            "(against %s from a complete store, %s over it); without the working set" % (
                c.med("lazy/local_cold_start"), fmt_ns(total - c.get("lazy/local_cold_start")["median_ns"])),
            "the run alone takes %s, fetching chunk after chunk as the guest faults." % fmt_ns(
                c.num("lazy/lazy/20ms/run_after_pull") * 1e6)]


def block_workingset_rtt(c):
    """Round trips over the local cold start, per RTT, against the goal of 5 (bench.c's goals[])."""
    local = "lazy/local_cold_start"
    out = ["  Run %s (medians of the same run; a round trip is the delay the relay adds):" % c.when(
               "lazy/lazy_working_set/20ms"), "",
           "  | RTT | the relay's, measured | lazy start with the working set | local cold start | round trips over it | goal |",
           "  |---|---|---|---|---|---|"]
    for ms in (2, 20, 60):
        n = "lazy/lazy_working_set/%dms" % ms
        rt = c.num(n + "/round_trips_over_local")
        goal = "≤ 5: %s" % ("met" if rt <= 5 else "missed") if ms >= 20 else ""
        out.append("  | %d ms | %.2f ms | %s | %s | %.1f | %s |" % (
            ms, c.num("lazy/relay_added_rtt/%dms" % ms), c.med(n), c.med(local), rt, goal))
    return out


# docs/restore.md: finding written pages, and putting them back.
RESET_MEMS = (64, 256)


def block_restore_dirty(c):
    fl = "floor/kvm_run_roundtrip"
    out = ["Run %s (restore only, median and p10–p90; the floor, a bare KVM_RUN" % c.when("snapshots/dirty/64mib_write_4kib/pagemap-scan"),
           "round trip, took %s):" % c.med(fl), "",
           "| guest memory, written per call | `pagemap-scan` | `pagemap-read` |", "|---|---|---|"]
    for mem in RESET_MEMS:
        for kib, what in ((4, "4 KiB"), (1024, "1 MiB"), (16384, "16 MiB")):
            n = "snapshots/dirty/%dmib_write_%dkib/" % (mem, kib)
            out.append("| %d MiB, %s | %s | %s |" % (mem, what, c.lat(n + "pagemap-scan"), c.lat(n + "pagemap-read")))
    # What reading every entry adds, per MiB of guest memory: the light
    # restore of the large guest against the small one's.
    lo, hi = "snapshots/dirty/64mib_write_4kib/", "snapshots/dirty/256mib_write_4kib/"
    add = lambda n: c.get(n + "pagemap-read")["median_ns"] - c.get(n + "pagemap-scan")["median_ns"]
    per_mib = (add(hi) - add(lo)) / (256 - 64)
    out += ["", "Reading the entries adds about %s per MiB of guest memory to a light" % fmt_ns(per_mib),
            "restore (256 MiB against 64 MiB), and makes the 256 MiB light restore %.1f× slower" % (
                c.get(hi + "pagemap-read")["median_ns"] / c.get(hi + "pagemap-scan")["median_ns"]),
            "than with the scan."]
    return out


def block_restore_write_fault(c):
    a, b = c.get("snapshots/mech/guest_write_1mib_resident"), c.get("snapshots/mech/guest_write_1mib_after_write_protect")
    return ["Run %s: the same call writing 256 resident heap pages takes %s (%s), and" % (
                c.when("snapshots/mech/guest_write_1mib_resident"), fmt_ns(a["median_ns"]),
                fmt_range(a["p10_ns"], a["p90_ns"], fmt_ns)),
            "%s (%s) after the heap was made read-only and writable again: **%s per" % (
                fmt_ns(b["median_ns"]), fmt_range(b["p10_ns"], b["p90_ns"], fmt_ns),
                fmt_ns((b["median_ns"] - a["median_ns"]) / 256)),
            "written page per call**."]


def block_restore_modes(c):
    fl = "floor/kvm_run_roundtrip"
    out = ["Run %s (median; the floor, a bare KVM_RUN round trip, took %s; a bare" % (
               c.when("guest_calls/64mib_write_0mib/restore/rewrite"), c.med(fl)),
           "echo call `guest_calls/call/medium` %s):" % c.med("guest_calls/call/medium"), "",
           "| guest, written per call | call+restore rewrite / drop | call after restore rewrite / drop | restore alone rewrite / drop | drop / rewrite (call+restore) |",
           "|---|---|---|---|---|"]
    wins = []
    for mem in RESET_MEMS:
        for w, what in ((0, "echo"), (1, "1 MiB"), (16, "16 MiB")):
            n = "guest_calls/%dmib_write_%dmib/" % (mem, w)
            cells = ["%s / %s" % (c.med(n + k + "/rewrite"), c.med(n + k + "/drop"))
                     for k in ("call_with_restore", "call_after_restore", "restore")]
            win = c.get(n + "call_with_restore/drop")["median_ns"] / c.get(n + "call_with_restore/rewrite")["median_ns"]
            wins.append(win)
            out.append("| %d MiB, %s | %s | %.1f× |" % (mem, what, " | ".join(cells), win))
    # Against Hyperlight's published KVM figures (bare metal, quoted, not
    # measured here): ratios to each system's own bare call.
    n = "guest_calls/256mib_write_1mib/call_with_restore/rewrite"
    n16 = "guest_calls/256mib_write_16mib/call_with_restore/rewrite"
    call = c.get("guest_calls/call/large")["median_ns"]
    out += ["",
            "Against Hyperlight's published KVM figures (bare metal; ratios to each",
            "system's own bare call, since its floor is not published): 256 MiB writing",
            "1 MiB, call+restore 0.40–0.43 ms, ~23× its 18 µs call; strata %s, %.1f× its" % (
                c.med(n), c.get(n)["median_ns"] / call),
            "%s call (`guest_calls/call/large`). Writing 16 MiB: Hyperlight 18.5–21 ms" % fmt_ns(call),
            "(~1100×), strata %s (%.0f×)." % (c.med(n16), c.get(n16)["median_ns"] / call)]
    return out


def block_restore_give_back(c):
    out = ["| mode | resident after the heavy call's restore | after 32 light calls | the 32 light calls with their restores |",
           "|---|---|---|---|"]
    for mode, label in (("rewrite", "rewrite (keep 16)"), ("drop", "drop")):
        out.append("| %s | %s | %s | %s |" % (
            label, c.val("snapshots/resident_after_heavy/" + mode),
            c.val("snapshots/resident_after_heavy_then_32_light/" + mode),
            c.lat("guest_calls/32_after_32mib_mem_64mib/" + mode)))
    return out


CHUNK_KIB = (64, 128, 256, 512, 1024)


def block_lazy_chunks(c):
    touched = c.num("lazy/chunks/touched_bytes")
    out = ["Run %s (median, p10–p90, of the time to read them all; bytes and Range" % c.when("lazy/chunks/64KiB/0ms"),
           "requests at the relay, delay 0; %s touched):" % fmt_bytes(touched), "",
           "| chunk | delay 0 | delay 2 ms | delay 20 ms | bytes fetched | × touched | Range requests |",
           "|---|---|---|---|---|---|---|"]
    for kib in CHUNK_KIB:
        n = "lazy/chunks/%dKiB/" % kib
        b = c.num(n + "0ms/bytes_fetched")
        out.append("| %s | %s | %s | %s | %s | %.1f× | %d |" % (
            "%d KiB" % kib if kib < 1024 else "%d MiB" % (kib // 1024), c.lat(n + "0ms"), c.lat(n + "2ms"), c.lat(n + "20ms"),
            fmt_bytes(b), b / touched, c.num(n + "0ms/range_requests")))
    req = lambda kib: c.num("lazy/chunks/%dKiB/0ms/range_requests" % kib)
    byt = lambda kib: c.num("lazy/chunks/%dKiB/0ms/bytes_fetched" % kib)
    t20 = lambda kib: c.get("lazy/chunks/%dKiB/20ms" % kib)["median_ns"]
    out += ["", "From 64 to 512 KiB the requests go from %d to %d while the bytes fetched grow %.1f×;" % (
                req(64), req(512), byt(512) / byt(64)),
            "1 MiB makes %d requests, for %.1f× the bytes of 64 KiB, and at 20 ms takes %.2f of 64 KiB's time." % (
                req(1024), byt(1024) / byt(64), t20(1024) / t20(64))]
    return out


def block_workingset_record(c):
    out = ["Run %s (pages in the record; the process backend's is page-exact):" % c.when(
               "lazy/working_set_record/echo/process"), "",
           "| first call | KVM | process | KVM / process |", "|---|---|---|---|"]
    for label, call in (("`echo`", "echo"), ("`touch_clusters 1 800` (one run of 800 pages)", "touch_clusters_1_800"),
                        ("`touch_clusters 8 100` (8 runs of 100)", "touch_clusters_8_100"),
                        ("`touch_strided 100 20` (100 pages, 80 KiB apart)", "touch_strided_100_20")):
        n = "lazy/working_set_record/%s/" % call
        k, p = c.num(n + "kvm"), c.num(n + "process")
        out.append("| %s | %s | %s | %.2f× |" % (label, fmt_int(k), fmt_int(p), k / p))
    return out


ALLOC_ROWS = [
    ("16 B, 1000 live", "16B/1000_live"), ("64 B, 1000 live", "64B/1000_live"),
    ("256 B, 1000 live", "256B/1000_live"), ("1008 B, 1000 live", "1008B/1000_live"),
    ("2016 B, 1000 live", "2016B/1000_live"), ("2 pages, 1000 live", "2_pages/1000_live"),
    ("16 pages, 1000 live", "16_pages/1000_live"), ("3 pages, 2000 free runs of 1–5 pages", "3_pages/2000_free_runs"),
]


def block_guest_alloc(c):
    first = "guest_alloc/malloc_free_x1000/16B/1000_live"
    out = ["Run %s (`guest_alloc/malloc_free_x1000/*`: batches of 1000 pairs; per pair," % c.when(first),
           "median and p10–p90):", "",
           "| malloc+free of | per pair |", "|---|---|"]
    for label, case in ALLOC_ROWS:
        r = c.get("guest_alloc/malloc_free_x1000/" + case)
        out.append("| %s | %s (%s) |" % (label, fmt_ns(r["median_ns"] / 1000),
                                         fmt_range(r["p10_ns"] / 1000, r["p90_ns"] / 1000, fmt_ns)))
    a, b = c.get("snapshots/mech/guest_write_1mib_resident"), c.get("snapshots/mech/guest_write_1mib_after_write_protect")
    fault = (b["median_ns"] - a["median_ns"]) / 256
    worst = max(c.get("guest_alloc/malloc_free_x1000/" + case)["median_ns"] / 1000 for _, case in ALLOC_ROWS)
    out += ["", "A guest's write fault on a page (`snapshots/mech/guest_write_1mib_*`, docs/restore.md)",
            "costs %s, %.0f× the slowest pair above." % (fmt_ns(fault), fault / worst)]
    return out


def block_vmm_exits(c):
    p, t = c.get("floor/process_roundtrip"), c.get("floor/ptrace_fault_roundtrip")
    k = c.get("floor/kvm_run_roundtrip")
    return ["Run %s: one exit and resume of the same guest store costs %s (%s)" % (
                c.when("floor/process_roundtrip"), fmt_ns(p["median_ns"]), fmt_range(p["p10_ns"], p["p90_ns"], fmt_ns)),
            "this way (`floor/process_roundtrip`); a ptrace stop and resume of it",
            "(`PTRACE_CONT`, read and write the registers; `floor/ptrace_fault_roundtrip`)",
            "costs %s (%s); a KVM exit here (`kvm_pvm`, nested; `floor/kvm_run_roundtrip`) %s." % (
                fmt_ns(t["median_ns"]), fmt_range(t["p10_ns"], t["p90_ns"], fmt_ns), fmt_ns(k["median_ns"]))]


def block_vmm_hypercalls(c):
    rows = [("CPL 0 `out %eax,%dx`", "floor/kvm_run_roundtrip_cpl0_out",
             "cheap exit, but CPL 0 code is emulated, so a guest cannot live there"),
            ("CPL 3 `out` with RFLAGS.IOPL=3", None,
             "does not work: kvm_pvm clears IOPL (KVM_SET_REGS reads back IOPL 0), and the TSS I/O bitmap is not consulted: `out` raises #GP"),
            ("CPL 3 `int $0x80` (DPL 3 gate) to a CPL 0 stub", None, "does not work: kvm_pvm raises #UD for `int n` at CPL 3"),
            ("CPL 3 `int3` to a CPL 0 stub doing `out; iretq`", "floor/kvm_run_roundtrip_cpl3_int3_stub", ""),
            ("CPL 3 `out` → #GP → CPL 0 stub doing the `out`, skip, `iretq`", "floor/kvm_run_roundtrip_cpl3_gp_stub", ""),
            ("**CPL 3 32-bit store into an MMIO page**", "floor/kvm_run_roundtrip", "chosen")]
    out = ["Run %s (median, p10–p90):" % c.when("floor/kvm_run_roundtrip"), "",
           "| path | case | time | note |", "|---|---|---|---|"]
    for label, case, note in rows:
        if case:
            out.append("| %s | `%s` | %s | %s |" % (label, case, c.lat(case), note))
        else:
            out.append("| %s | | — | %s |" % (label, note))
    return out


def block_lua(c):
    """`strata bench lua`: one request three ways, and what a loaded Lua costs (docs/lua.md)."""
    rows = [("restore + eval, KVM", "lua/restore_eval"), ("restore + eval, process backend", "lua/process/restore_eval"),
            ("new sandbox from the store + first eval, KVM", "lua/first_eval_from_store"),
            ("new sandbox from the store + first eval, process backend", "lua/process/first_eval_from_store"),
            ("fork + exec of `lua5.4 -e` per request", "lua/fork_exec_lua5.4"),
            ("`luaL_newstate` + `luaL_openlibs` + run, in the host process", "lua/host_newstate")]
    out = ["Run %s (median, p10–p90; one `handle()` request of tests/lua/app.lua):" % c.when("lua/host_newstate"), "",
           "| way | case | time |", "|---|---|---|"]
    for label, case in rows:
        if c.has(case):
            out.append("| %s | `%s` | %s |" % (label, case, c.lat(case)))
    fe, hs = c.get("lua/fork_exec_lua5.4")["median_ns"], c.get("lua/host_newstate")["median_ns"]
    for label, case in (("KVM", "lua/restore_eval"), ("process", "lua/process/restore_eval")):
        if c.has(case):
            r = c.get(case)["median_ns"]
            out.append("")
            out.append("%s: %.1f× faster than fork + exec, %.2f× the host state's time." % (label, fe / r, r / hs))
    out.append("")
    for label, case in (("snapshot layers of the loaded program", "lua/snapshot_layers"),
                        ("PSS per sandbox, 1,000 from one snapshot (KVM)", "lua/density/1000/pss_per_sandbox"),
                        ("PSS per sandbox, 1,000 from one snapshot (process)", "lua/process/density/1000/pss_per_sandbox")):
        if c.has(case):
            out.append("- %s (`%s`): %s" % (label, case, c.val(case)))
    return out


def block_wasm(c):
    """`strata bench wasm`: one function as a wasm guest, natively, and as a C guest (docs/wasm.md)."""
    out = ["Run %s (median, p10–p90; `work` of tests/bench/wasm_bench_logic.h):" % c.when("wasm/restore_and_call"), "",
           "| way | KVM | process backend |", "|---|---|---|"]
    for label, case in (("the wasm guest: restore + call", "wasm/restore_and_call"),
                        ("the same logic as a C guest: restore + call", "wasm/c_guest_restore_and_call"),
                        ("the module natively (wasm2c's C in the bench, no isolation)", "wasm/native_call")):
        cells = [c.lat(n) if c.has(n) else "—" for n in (case, "process/" + case)]
        out.append("| %s | %s | %s |" % (label, cells[0], cells[1]))
    out.append("")
    for label, case in (("the wasm guest against the C guest", "wasm/restore_and_call_vs_c_guest"),
                        ("the wasm guest against the module natively (the cost of isolation)",
                         "wasm/restore_and_call_vs_native")):
        vals = ["%s %s" % (be, c.val(n)) for be, n in (("KVM", case), ("process", "process/" + case)) if c.has(n)]
        out.append("- %s (`%s`): %s" % (label, case, ", ".join(vals)))
    for label, case in (("the initialised module's first snapshot", "wasm/snapshot_bytes"),
                        ("the C guest's", "wasm/c_guest_snapshot_bytes"),
                        ("PSS per sandbox, 1,000 from the snapshot (KVM)", "wasm/density/1000/pss_per_sandbox")):
        if c.has(case):
            out.append("- %s (`%s`): %s" % (label, case, c.val(case)))
    return out


def block_start(c):
    """`strata bench start`: whole processes, spawn to exit (docs/library.md)."""
    out = ["Run %s (median, p10–p90 of 20 processes each):" % c.when("start/strata_version"), "",
           "| process | case | time | × its floor |", "|---|---|---|---|"]
    for label, case in (("a C program linked only against libc", "start/floor/libc_process"),
                        ("`strata --version`", "start/strata_version"),
                        ("`lua5.4 -e` of a one-line script", "start/floor/lua5.4_e"),
                        ("`strata run DIR --call F`, KVM", "start/strata_run_call/kvm"),
                        ("`strata run DIR --call F`, process backend", "start/strata_run_call/process")):
        if c.has(case):
            r = c.get(case)
            floor = " (`%s`)" % r["floor"] if "floor" in r else ""
            out.append("| %s | `%s` | %s | %s%s |" % (label, case, c.lat(case), c.ratio(case), floor))
    return out


def block_checkpoint(c):
    """`strata bench checkpoint`: a durable checkpoint after every call (docs/sync.md)."""
    out = ["Run %s (median, p10–p90):" % c.when("checkpoint/call_capture_commit_64KiB"), "",
           "| case | KVM | × its floor | process backend | × its floor |", "|---|---|---|---|---|"]
    for label, case in (("floor: 4 KiB `pwrite` + `fdatasync`", "checkpoint/floor/write_4KiB_fdatasync"),
                        ("checkpoint: call, capture, commit, rebase (full sync)",
                         "checkpoint/call_capture_commit_64KiB"),
                        ("the same, no sync at all", "checkpoint/call_capture_commit_64KiB/sync_none"),
                        ("restore of a flat snapshot of the same memory", "checkpoint/restore_flat"),
                        ("restore of the chain's last checkpoint", "checkpoint/restore_last")):
        cells = []
        for name in (case, "process/" + case):
            cells += [c.lat(name), c.ratio(name)] if c.has(name) else ["", ""]
        out.append("| %s | %s |" % (label, " | ".join(cells)))
    us = lambda v: fmt_ns(v * 1e3)
    kib = lambda v: "%.1f KiB" % v
    for label, note, f in (("of a checkpoint (median): the call", "phase/call", us),
                           ("the capture: the layer written, its 2 syncs", "phase/capture", us),
                           ("the commit: LMDB's 2 syncs", "phase/commit", us),
                           ("the rebase", "phase/rebase", us),
                           ("checkpoints in the chain", "chain_length", fmt_int),
                           ("store growth per checkpoint (on disk)", "store_growth_per_checkpoint", kib),
                           ("pages the captures wrote, per checkpoint", "captured_per_checkpoint", kib),
                           ("new pages each call wrote", "unique_per_checkpoint", kib),
                           ("the last checkpoint's layers", "last_layers", fmt_int),
                           ("the last checkpoint's ranges", "last_ranges", fmt_int)):
        cells = []
        for name in ("checkpoint/" + note, "process/checkpoint/" + note):
            cells += [f(c.num(name)), ""] if c.has(name) else ["", ""]
        out.append("| %s | %s |" % (label, " | ".join(cells)))
    return out


# ------------------------------------------------------------------- plots
# Curves a reader would rather look at than read: each PLOTS entry is a
# function of Cases returning a Plot; figures.py draws it with gnuplot
# (Debian's gnuplot-nox; .ci/deps installs it) as docs/figures/NAME.svg,
# and the Plots section of docs/figures.md embeds them. The same results
# give the same bytes: gnuplot's SVG carries no time, and the line naming
# gnuplot's version is left out, so --check compares them like the tables.

FIGURES_DIR = os.path.join(ROOT, "docs", "figures")


class Series:
    """One curve: (x, median, p10, p90) points, or (x, value) for single values."""

    def __init__(self, label, points, style="lp"):
        self.label, self.points, self.style = label, points, style


class Plot:
    def __init__(self, title, xlabel, ylabel, series, logx=False, logy=False, lines=(), caption="", cases=()):
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.series, self.logx, self.logy = series, logx, logy
        self.lines = list(lines)      # (label, y): a floor, drawn flat across
        self.caption, self.cases = caption, list(cases)


def lat_points(c, xs, name_of, scale):
    """(x, median, p10, p90) of the cases name_of(x), in units of scale ns; those the results lack left out."""
    out = []
    for x in xs:
        n = name_of(x)
        if c.has(n):
            r = c.get(n)
            out.append((x, r["median_ns"] / scale, r["p10_ns"] / scale, r["p90_ns"] / scale))
    return out


RESTORE_PAGES = (1, 4, 16, 64, 256, 1024, 4096)


def plot_restore_pages(c):
    name = lambda prefix: lambda p: "%ssnapshots/restore_pages_written/64mib/%d" % (prefix, p)
    kvm, proc = lat_points(c, RESTORE_PAGES, name(""), 1e3), lat_points(c, RESTORE_PAGES, name("process/"), 1e3)
    if not kvm and not proc:
        raise Missing("snapshots/restore_pages_written/64mib/*")
    # Each backend's floor as measured in the sweep's own run (median / ratio).
    lines = []
    for label, prefix in (("KVM floor: one bare KVM_RUN round trip", ""),
                          ("process floor: one exit and resume", "process/")):
        r = c.by.get(name(prefix)(RESTORE_PAGES[0]))
        if r and r.get("floor_ratio"):
            lines.append((label, r["median_ns"] / r["floor_ratio"] / 1e3))
    return Plot("Restore against pages written (64 MiB guest, reset by rewrite)",
                "pages written by the call before the restore (4 KiB each)", "restore (µs; median, p10–p90)",
                [Series("KVM", kvm), Series("process backend", proc)], logx=True, logy=True, lines=lines,
                caption="`snapshots/restore_pages_written/64mib/*` and `process/…`, run %s, beside each backend's floor in that run" % (
                    c.when((name("") if kvm else name("process/"))(RESTORE_PAGES[0]))),
                cases=["snapshots/restore_pages_written/64mib/%d" % p for p in RESTORE_PAGES])


LAZY_RTT = (0, 2, 20, 60)


def plot_lazy_rtt(c):
    series = []
    for label, kind in LAZY_KINDS:
        pts = lat_points(c, LAZY_RTT, lambda ms: "lazy/%s/%dms" % (kind, ms), 1e6)
        if pts:
            series.append(Series(label, pts))
    local = c.get("lazy/local_cold_start")["median_ns"] / 1e6
    rtts = sorted({p[0] for s in series for p in s.points})
    series.append(Series("goal: local cold start + 5 round trips", [(x, local + 5 * x) for x in rtts], style="goal"))
    return Plot("Time to the first result against the registry's round trip (256 MiB snapshot)",
                "round-trip time to the registry (ms, added by a delaying relay)",
                "to the first result (ms; median, p10–p90)", series, logy=True,
                lines=[("floor: local cold start from a complete store", local)],
                caption="`lazy/*/{%s}` and `lazy/local_cold_start`, run %s" % (
                    ",".join("%dms" % x for x in rtts), c.when("lazy/local_cold_start")),
                cases=["lazy/local_cold_start"])


DENSITY_COUNTS = (10, 30, 100, 300, 1000)


def plot_density(c):
    def vals(fmt):
        return [(n, c.num(fmt % n)) for n in DENSITY_COUNTS if c.has(fmt % n)]
    series = [Series("PSS of the host process (KVM)", vals("density/%d/medium/pss_per_sandbox"))]
    for label, fmt in (("memory cgroup, all in (KVM)", "density/%d/medium/cgroup/all_in_per_sandbox"),
                       ("memory cgroup, all in (process backend)", "process/density/%d/medium/cgroup/all_in_per_sandbox"),
                       ("PSS of the host process (process backend)", "process/density/%d/medium/cgroup/pss_per_sandbox")):
        pts = vals(fmt)
        if pts:
            series.append(Series(label, pts))
    if not series[0].points:
        raise Missing("density/*/medium/pss_per_sandbox")
    return Plot("Memory per sandbox against sandbox count (64 MiB snapshot, 64 KiB written each)",
                "sandboxes from one snapshot", "KiB per sandbox", series, logx=True, logy=True,
                lines=[("goal: 100 KiB all in (process backend)", 100.0)],
                caption="`density/*/medium/pss_per_sandbox` and `…/cgroup/all_in_per_sandbox`, run %s" % (
                    c.when("density/%d/medium/pss_per_sandbox" % series[0].points[-1][0])),
                cases=["density/%d/medium/pss_per_sandbox" % series[0].points[-1][0]])


PLOTS = {
    "restore-pages": plot_restore_pages,
    "lazy-rtt": plot_lazy_rtt,
    "density": plot_density,
}


def gp_str(s):
    """s as a gnuplot string; markdown's code quotes dropped"""
    return '"%s"' % s.replace("`", "").replace("\\", "\\\\").replace('"', '\\"')


def gp_num(v):
    return "%.6g" % v


def gnuplot_script(p):
    """The gnuplot program drawing p as SVG on its standard output."""
    g = ['set terminal svg size 820,540 noenhanced font "sans,12" background rgb "white"',
         "set encoding utf8", "set output", "set title %s" % gp_str(p.title),
         "set xlabel %s" % gp_str(p.xlabel), "set ylabel %s" % gp_str(p.ylabel),
         "set key below maxcols 2 Left reverse spacing 1.2 width 2",
         "set grid xtics ytics mxtics mytics lc rgb '#dddddd'",
         "set border 3", "set tics nomirror", "set format y '%g'", "set format x '%g'"]
    xs = [pt[0] for s in p.series for pt in s.points]
    ys = [v for s in p.series for pt in s.points for v in pt[1:]] + [y for _, y in p.lines]
    # Tics at the measured x values; on a log y axis at 1, 2 and 5 of
    # each decade (gnuplot labels only the decades).
    g.append("set xtics (%s)" % ", ".join(gp_num(x) for x in sorted(set(xs))))
    if p.logx:
        g.append("set logscale x")
        g.append("set xrange [%s:%s]" % (gp_num(min(xs) / 1.5), gp_num(max(xs) * 1.5)))
    else:
        span = max(xs) - min(xs) or 1
        g.append("set xrange [%s:%s]" % (gp_num(min(xs) - span * 0.04), gp_num(max(xs) + span * 0.04)))
    if p.logy:
        lo, hi = min(ys) / 1.6, max(ys) * 1.6
        tics = [m * 10 ** e for e in range(int(math.floor(math.log10(lo))), int(math.ceil(math.log10(hi))) + 1)
                for m in (1, 2, 5) if lo <= m * 10 ** e <= hi]
        g.append("set logscale y")
        g.append("set yrange [%s:%s]" % (gp_num(lo), gp_num(hi)))
        g.append("set ytics (%s)" % ", ".join(gp_num(t) for t in tics))
    else:
        g.append("set yrange [0:%s]" % gp_num(max(ys) * 1.15))
    colors = ["#1f5fa8", "#c0392b", "#2e8b57", "#8e44ad", "#d68910", "#555555"]
    plots, data = [], []
    for i, s in enumerate(p.series):
        col = colors[i % len(colors)]
        if s.style == "goal":
            plots.append("'-' using 1:2 with lines dt 3 lw 1.5 lc rgb '#777777' title %s" % gp_str(s.label))
            data.append(["%s %s" % (gp_num(pt[0]), gp_num(pt[1])) for pt in s.points])
            continue
        bars = len(s.points[0]) == 4
        if bars:
            plots.append("'-' using 1:2:3:4 with yerrorbars pt 7 ps 0.6 lc rgb '%s' notitle" % col)
            data.append(["%s %s %s %s" % tuple(gp_num(v) for v in pt) for pt in s.points])
        plots.append("'-' using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb '%s' title %s" % (col, gp_str(s.label)))
        data.append(["%s %s" % (gp_num(pt[0]), gp_num(pt[1])) for pt in s.points])
    for j, (label, y) in enumerate(p.lines):
        plots.append("%s with lines dt 2 lw 1.5 lc rgb '%s' title %s" % (
            gp_num(y), ["#000000", "#7f4f00", "#777777"][j % 3], gp_str(label)))
    g.append("plot " + ", \\\n     ".join(plots))
    for rows in data:
        g += rows + ["e"]
    return "\n".join(g) + "\n"


def render_svg(p):
    """p drawn by gnuplot: the SVG's text, without the line naming gnuplot's version."""
    try:
        # -d: no gnuplotrc or ~/.gnuplot; one locale: the same bytes for everyone
        r = subprocess.run(["gnuplot", "-d"], input=gnuplot_script(p), capture_output=True, text=True, check=False,
                           env=dict(os.environ, LC_ALL="C.UTF-8"))
    except OSError as e:
        raise PlotError("gnuplot: %s (Debian's gnuplot-nox; .ci/deps installs it)" % e.strerror)
    if r.returncode != 0:
        raise PlotError("gnuplot failed: %s" % r.stderr.strip())
    svg = re.sub(r"<desc>Produced by GNUPLOT[^<]*</desc>\n?", "", r.stdout)
    title = p.title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return svg.replace("<title>Gnuplot</title>", "<title>%s</title>" % title, 1)


def plots_md(plots):
    """docs/figures.md's plots section: each image, with what it draws."""
    out = ["", "## Plots", "",
           "Drawn by tests/bench/figures.py with gnuplot from the same results (docs/figures/*.svg);",
           "bars are p10–p90, dashed lines the floor or goal each stands beside."]
    for name, p in plots.items():
        out += ["", "### %s" % p.title, "", "![%s](figures/%s.svg)" % (p.title, name), "", "%s." % p.caption]
    return out


GROUPS = ("floor", "store", "vmm", "index", "fs", "snapshots", "cold", "density", "oci", "lazy", "alloc", "lua",
          "wasm", "start")


def block_bench_durations(c):
    """How long each group took in the run it comes from (setup included)."""
    out = ["| group | wall time | run |", "|---|---|---|"]
    for g in GROUPS:
        took = [(i, run) for i, run in enumerate(c.data["runs"]) if g in run.get("seconds", {})
                and not run.get("filter")]
        if took:
            i, run = took[-1]
            out.append("| `%s` | %s | %s |" % (g, fmt_ns(run["seconds"][g] * 1e9), when(run)))
        else:
            out.append("| `%s` | not recorded (a run before strata-bench wrote its times) | |" % g)
    return out


BLOCKS = {
    "readme": block_readme,
    "fs-read-modes": block_fs_read_modes,
    "fs-cases": block_fs_cases,
    "store-cases": block_store_cases,
    "sync-cases": block_sync_cases,
    "index-cases": block_index_cases,
    "oci-cases": block_oci_cases,
    "lazy-chunks": block_lazy_chunks,
    "workingset-record": block_workingset_record,
    "workingset-lazy": block_workingset_lazy,
    "workingset-split": block_workingset_split,
    "workingset-rtt": block_workingset_rtt,
    "readme-lazy": block_readme_lazy,
    "guest-alloc": block_guest_alloc,
    "vmm-exits": block_vmm_exits,
    "vmm-hypercalls": block_vmm_hypercalls,
    "bench-durations": block_bench_durations,
    "restore-dirty": block_restore_dirty,
    "restore-write-fault": block_restore_write_fault,
    "restore-modes": block_restore_modes,
    "restore-give-back": block_restore_give_back,
    "lua": block_lua,
    "wasm": block_wasm,
    "start": block_start,
    "checkpoint": block_checkpoint,
}

BLOCK_RE = re.compile(r"<!-- figures:begin ([\w-]+) -->\n(.*?)<!-- figures:end ([\w-]+) -->\n", re.S)


def doc_paths():
    return [os.path.join(ROOT, "README.md")] + sorted(
        p for p in glob.glob(os.path.join(ROOT, "docs", "*.md")) if p != FIGURES_MD)


def fill_blocks(path, text, cases, used, errors):
    def one(m):
        name, end = m.group(1), m.group(3)
        if name != end:
            errors.append("%s: figures:begin %s closed by figures:end %s" % (os.path.relpath(path, ROOT), name, end))
            return m.group(0)
        if name not in BLOCKS:
            errors.append("%s: no block '%s' in tests/bench/figures.py BLOCKS" % (os.path.relpath(path, ROOT), name))
            return m.group(0)
        used.add(name)
        try:
            lines = BLOCKS[name](cases)
        except Missing as e:
            errors.append("%s: block '%s' quotes case %s, which the results lack" % (
                os.path.relpath(path, ROOT), name, e.args[0]))
            return m.group(0)
        return "<!-- figures:begin %s -->\n%s\n<!-- figures:end %s -->\n" % (name, "\n".join(lines), name)

    if "figures:begin" in text and not BLOCK_RE.search(text):
        errors.append("%s: a figures:begin marker without its figures:end" % os.path.relpath(path, ROOT))
    return BLOCK_RE.sub(one, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="*", help="strata bench --json files (default: docs/figures.json)")
    ap.add_argument("--merge", action="store_true", help="merge the files into docs/figures.json and write it")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    a = ap.parse_args()
    inputs = a.results or [KEPT]
    if a.merge:
        if not a.results:
            ap.error("--merge wants the results files to merge into docs/figures.json")
        inputs = [KEPT] + [p for p in a.results if os.path.abspath(p) != KEPT]
    data = merge([load(p) for p in inputs])
    if a.merge:
        # As a later run without --merge reads the file it writes: the
        # results in the order of their runs, so both write the same docs.
        data = merge([json.loads(json.dumps(data))])
    cases = Cases(data)
    want, errors, used = {}, [], set()
    if a.merge:
        want[KEPT] = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    plots = {}
    for name, fn in PLOTS.items():
        try:
            plots[name] = fn(cases)
        except Missing as e:
            errors.append("plot '%s' draws case %s, which the results lack" % (name, e.args[0]))
    want[FIGURES_MD] = figures_md(data, plots)
    for name, p in plots.items():
        try:
            want[os.path.join(FIGURES_DIR, name + ".svg")] = render_svg(p)
        except PlotError as e:
            errors.append("plot '%s': %s" % (name, e.args[0]))
    for path in sorted(glob.glob(os.path.join(FIGURES_DIR, "*.svg"))):
        if os.path.basename(path)[:-4] not in PLOTS:
            errors.append("%s: no plot of that name in tests/bench/figures.py PLOTS" % os.path.relpath(path, ROOT))
    for path in doc_paths():
        with open(path) as f:
            text = f.read()
        new = fill_blocks(path, text, cases, used, errors)
        if new != text:
            want[path] = new
        elif a.check:
            want[path] = text
    for name in sorted(set(BLOCKS) - used):
        errors.append("block '%s' is defined in tests/bench/figures.py but no doc holds it" % name)
    if errors:
        sys.exit("figures.py: " + "\nfigures.py: ".join(errors))
    stale = []
    for path, text in want.items():
        old = open(path).read() if os.path.exists(path) else None
        if old != text:
            stale.append(path)
            if not a.check:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
    if a.check and stale:
        sys.exit("figures.py: not generated from %s: %s (run tests/bench/figures.py)" % (
            ", ".join(os.path.relpath(p, ROOT) for p in inputs), ", ".join(os.path.relpath(p, ROOT) for p in stale)))
    for p in stale:
        print("wrote %s" % os.path.relpath(p, ROOT))


if __name__ == "__main__":
    main()
