#!/usr/bin/env bash
# bench_smoke: tools/bench-report.sh --quick with tiny sizes through the
# real harness; asserts the JSON has every variant of every workload (or a
# printed reason for a skipped workload) and that pattern verification read
# data and found no errors, that ganesha.nfsd's threads were sampled, and
# that every IO_Backend = sync twin got its io_uring/sync ratio.
#   bench_smoke.sh BUILD_DIR
set -euo pipefail
build=$(realpath "$1")
top=$(cd "$(dirname "$0")/../../.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-smoke.XXXXXX")
trap 'rm -rf "$out"' EXIT
rc=0
DCACHE_BUILD_DIR=$build "$top/tools/bench-report.sh" --quick --size 32M --runtime 1 --out "$out/r" || rc=$?
python3 - "$out/r/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
variants = r["variants"]
want = ["vfs", "buffered", "buffered_sync", "dontcache", "dontcache_sync", "fadvise", "direct",
        "direct_sync", "direct_async", "direct_untracked", "direct_untracked_sync", "direct_cached_edges",
        "direct_mem_buffered", "direct_data_sync", "direct_file_sync"]
assert variants == want, f"variants {variants} != {want}"
bad = []
interleaves = ["interleave", "interleave_commit_end", "interleave_commit_every", "interleave_slow"]
for w in ["mix", "randread", "randwrite", "reread", *interleaves, "mempressure", "commit"]:
    if w in r["skipped"]:
        print(f"bench_smoke: {w} skipped: {r['skipped'][w]}")
        continue
    for v in variants:
        row = next((x for x in r["rows"] if x["workload"] == w and x["variant"] == v), None)
        if row is None:
            bad.append(f"{w}/{v}: missing")
            continue
        if row["verify_errors"] or row["errors"]:
            bad.append(f"{w}/{v}: {row['verify_errors']} verify errors, {row['errors']} errors")
        if row["verify_bytes"] <= 0:
            bad.append(f"{w}/{v}: nothing verified")
        if not row["mib_s"] or row["mib_s"] <= 0:
            bad.append(f"{w}/{v}: no throughput")
        if row["threads_d_mean"] is None or row["server_threads_peak"] is None or row["server_threads_peak"] < 1:
            bad.append(f"{w}/{v}: server thread sampling missing ({row['server_threads_peak']} threads)")
    # every *_sync twin must also get its io_uring / sync ratio
    for v in [x for x in variants if x in ("buffered_sync", "dontcache_sync", "direct_sync")]:
        row = next((x for x in r["rows"] if x["workload"] == w and x["variant"] == v), None)
        if row is not None and row.get("io_uring_over_sync") is None:
            bad.append(f"{w}/{v}: no io_uring/sync ratio")
# boundary pages: the tracker must keep the shared pages whatever the
# COMMIT pattern and backend, against the untracked control of the same run
# (~1 device read per WRITE); the bound leaves room for a stray read in
# this tiny file
for w in interleaves:
    for v, most, least in [("direct", 0.05, None), ("direct_sync", 0.05, None),
                           ("direct_untracked", None, 0.5), ("direct_untracked_sync", None, 0.5)]:
        row = next((x for x in r["rows"] if x["workload"] == w and x["variant"] == v), None)
        per = row and row["dev_reads_per_write"]
        if per is None:
            bad.append(f"{w}/{v}: no device reads per WRITE")
        elif (most is not None and per > most) or (least is not None and per < least):
            bad.append(f"{w}/{v}: {per:.3f} device reads per WRITE")
# every variant's COMMITs of the commit workload were timed (sync-reply
# variants send none)
for row in [x for x in r["rows"] if x["workload"] == "commit"]:
    if row["commits_sent"] and row["commit_lat_p99_us"] is None:
        bad.append(f"commit/{row['variant']}: COMMITs sent but not timed")
    if row["variant"] == "buffered" and not row["commits_sent"]:
        bad.append("commit/buffered: no COMMIT sent")
for f in r["failures"]:
    bad.append(f)
if bad:
    print("bench_smoke: FAILED\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"bench_smoke: {len(r['rows'])} rows, all verified")
PY
[ -s "$out/r/chart.png" ] || { echo "bench_smoke: no chart.png"; exit 1; }
exit "$rc"
