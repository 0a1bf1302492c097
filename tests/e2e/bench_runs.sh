#!/usr/bin/env bash
# bench_runs.sh: strata bench --runs N: N runs in one process, each case's figure the median of the runs', every run kept in the JSON, the goal table (TAP).
set -u
S=${STRATA_BIN:?}
T=$(mktemp -d /tmp/strata-e2e-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..5"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"

# The floor group alone (a few hundred milliseconds a run): KVM's round
# trip where KVM works, the process backend's bare exit everywhere.
check "--runs 3 prints each of the three runs" 0 'run 3 of 3' -- \
	"$S" bench --quick --runs 3 --json "$T/r.json" floor
# Every result keeps its three runs; the figure is their median (the
# middle of three values, exactly).
check "each result keeps its runs, and its median is the median of theirs" 0 '^ok [1-9]' -- python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["runs"] == 3, d["runs"]
res = [r for r in d["results"] if "median_ns" in r]
assert res, "no latency results"
for r in res:
    meds = sorted(x["median_ns"] for x in r["runs"])
    assert len(meds) == 3, (r["name"], meds)
    assert r["median_ns"] == meds[1], (r["name"], r["median_ns"], meds)
names = [r["name"] for r in d["results"]]
assert len(names) == len(set(names)), "a case is listed twice"
print("ok", len(res))' "$T/r.json"
check "one run keeps no runs list" 0 '^none$' -- sh -c \
	"'$S' bench --quick --json '$T/one.json' floor >/dev/null && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(\"none\" if d[\"runs\"] == 1 and not any(\"runs\" in r for r in d[\"results\"]) else \"runs\")' '$T/one.json'"
check "--runs 0 is a usage error that says what it wants" 2 'runs wants a count from 1 to 64' -- \
	"$S" bench --runs 0 floor
check "--runs with no number is a usage error" 2 'runs wants a count' -- "$S" bench --runs x floor
[ "$fails" -eq 0 ]
