#!/usr/bin/env bash
# bench_smoke: tools/bench-report.sh --quick with tiny sizes through the
# real harness; asserts the JSON has every variant of every workload (or a
# printed reason for a skipped workload) and that pattern verification read
# data and found no errors, that ganesha.nfsd's threads were sampled, and
# that every IO_Backend = sync twin got its io_uring/sync ratio; that the
# latency probe was answered beside the throttled streaming load; that
# the servers of the memory and overload workloads gave back their memory
# after the load and made requests wait for a place under overload; that
# the pressure workloads (streaming beside a working set, the server in a
# memory group) ran for vfs, dontcache and direct with and without
# RWF_DONTCACHE (DCACHE_TEST_NO_RWF_DONTCACHE=1), their working set read
# and verified beside every stream, the group's counters read, and that
# without RWF_DONTCACHE dontcache took its fallback (and with it, on a
# kernel that has it on XFS, did not).
#   bench_smoke.sh BUILD_DIR
set -euo pipefail
build=$(realpath "$1")
top=$(cd "$(dirname "$0")/../../.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-smoke.XXXXXX")
trap 'rm -rf "$out"' EXIT
rc=0
# the workloads with a server per variant, and latency, on fewer variants.
# The pressure group (192M) is between the working set (16M) and working
# set + stream (272M), and holds what cannot be reclaimed: the server's own
# memory, multi_write's 16 x 4 WRITEs of 1 MiB in flight and a direct
# export's bounce buffers (IO_Queue_Depth x 1 MiB); at 96M the memory
# group's OOM killer took the server in multi_write/direct.
DCACHE_BENCH_MEMORY_LOAD=5 DCACHE_BENCH_MEMORY_IDLE=4 DCACHE_BENCH_OVERLOAD_LOAD=2 \
  DCACHE_BENCH_MEMORY_VARIANTS=vfs,direct DCACHE_BENCH_OVERLOAD_VARIANTS=direct,direct_sync \
  DCACHE_BENCH_LATENCY_VARIANTS=vfs,direct,direct_sync \
  DCACHE_BENCH_PRESSURE_VARIANTS=vfs,dontcache,direct DCACHE_BENCH_PRESSURE_RUNS=rwf.limit,norwf.limit \
  DCACHE_BENCH_PRESSURE_WS=16M DCACHE_BENCH_PRESSURE_LIMIT=192M DCACHE_BENCH_PRESSURE_STREAM=256M \
  DCACHE_BENCH_PRESSURE_RUNTIME=1.5 DCACHE_BENCH_PRESSURE_TOUCH=0.75 DCACHE_BENCH_PRESSURE_TOUCHES=1 \
  DCACHE_BENCH_PRESSURE_SOLO=1 DCACHE_BENCH_PRESSURE_VERIFY=1 \
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
# the latency probe: answered, verified, beside every streaming variant
lat = [x for x in r["rows"] if x["workload"] == "latency"]
if "latency" in r["skipped"]:
    print(f"bench_smoke: latency skipped: {r['skipped']['latency']}")
else:
    if sorted(x["variant"] for x in lat) != sorted(["vfs", "direct", "direct_sync"]):
        bad.append(f"latency: variants {[x['variant'] for x in lat]}")
    for x in lat:
        if not x.get("probe_getattr_ops") or not x.get("probe_read_ops") or x.get("probe_errors"):
            bad.append(f"latency/{x['variant']}: probe {x.get('probe_getattr_ops')} GETATTRs, "
                       f"{x.get('probe_read_ops')} READs, {x.get('probe_errors')} errors")
# a server per variant: memory given back after the load, requests made
# to wait for a place under overload, nothing lost
servers = r.get("servers", {})
mem = {x["variant"]: x for x in servers.get("memory", [])}
over = {x["variant"]: x for x in servers.get("overload", [])}
if sorted(mem) != sorted(["vfs", "direct"]):
    bad.append(f"memory: variants {sorted(mem)}")
for v, x in mem.items():
    if x["samples"] < 4 or x["rss_peak_kib"] <= x["idle_kib"]:
        bad.append(f"memory/{v}: {x['samples']} samples, RSS peak {x['rss_peak_kib']} idle {x['idle_kib']} KiB")
    if v != "vfs" and x["after_kib"] > x["rss_peak_kib"] // 2:
        bad.append(f"memory/{v}: RSS {x['after_kib']} KiB after the load, peak {x['rss_peak_kib']}: not given back")
if "overload" in r["skipped"]:
    print(f"bench_smoke: overload skipped: {r['skipped']['overload']}")
elif sorted(over) != sorted(["direct", "direct_sync"]):
    bad.append(f"overload: variants {sorted(over)}")
elif not over["direct"]["plugin"].get("admission_waits"):
    bad.append("overload/direct: no request waited for a place")
# streaming beside a working set: every workload, variant and kernel mode
# with the working set read (and verified) beside the stream, the group's
# counters, the solo runs the ratios need; the DONTCACHE fallback taken
# exactly where RWF_DONTCACHE was refused
import os, re
pressure = r.get("pressure")
if "pressure" in r["skipped"]:
    print(f"bench_smoke: pressure skipped: {r['skipped']['pressure']}")
elif not pressure:
    bad.append("pressure: no results")
else:
    prow = {(x["kernel"], x["workload"], x["variant"]): x for x in pressure["rows"]}
    for k in ("rwf", "norwf"):
        for w in ("seq_write", "seq_read", "multi_write", "noisy_writer", "noisy_writer_touch", "noisy_reader",
                  "noisy_reader_touch", "lat_reader"):
            for v in ("vfs", "dontcache", "direct"):
                x = prow.get((k, w, v))
                if x is None:
                    bad.append(f"pressure {k}/{w}/{v}: missing")
                    continue
                if x.get("errors") or not x.get("stream_mib_s"):
                    bad.append(f"pressure {k}/{w}/{v}: {x.get('errors')} errors, stream {x.get('stream_mib_s')} MiB/s")
                if not x.get("ws_ops") or not x.get("ws_verify_bytes"):
                    bad.append(f"pressure {k}/{w}/{v}: working set {x.get('ws_ops')} READs, "
                               f"{x.get('ws_verify_bytes')} bytes verified")
                if x.get("limit_hits") is None or x.get("ws_dev_reads") is None or x.get("limit_mib") != 192:
                    bad.append(f"pressure {k}/{w}/{v}: group {x.get('limit_mib')} MiB, limit hits "
                               f"{x.get('limit_hits')}, WS device reads {x.get('ws_dev_reads')}")
                if not w.endswith("_touch") and x.get("ws_x_solo") is None:
                    bad.append(f"pressure {k}/{w}/{v}: no ratio to the working set alone")
                fb = x["plugin"].get("fallback_no_dontcache", 0)
                if v == "dontcache" and k == "norwf" and not fb:
                    bad.append(f"pressure {k}/{w}/{v}: no DONTCACHE fallback without RWF_DONTCACHE")
                # XFS has RWF_DONTCACHE from 6.15
                rel = tuple(int(n) for n in re.findall(r"\d+", os.uname().release)[:2])
                if v == "dontcache" and k == "rwf" and fb and rel >= (6, 15):
                    bad.append(f"pressure {k}/{w}/{v}: {fb} DONTCACHE fallbacks on {os.uname().release}")
    for x in pressure["solo"]:
        if not x.get("ws_ops") or (x["variant"] == "touch" and not x.get("ws_passes")):
            bad.append(f"pressure solo {x['kernel']}/{x['workload']}/{x['variant']}: {x.get('ws_ops')} READs, "
                       f"{x.get('ws_passes')} passes")
for f in r["failures"]:
    bad.append(f)
if bad:
    print("bench_smoke: FAILED\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"bench_smoke: {len(r['rows'])} rows, all verified")
PY
[ -s "$out/r/chart.png" ] || { echo "bench_smoke: no chart.png"; exit 1; }
exit "$rc"
