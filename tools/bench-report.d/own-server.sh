# shellcheck shell=bash
# The workloads with a server of their own (memory, overload: a server per
# variant), sourced by tools/bench-report.sh in its inner part: their sizes,
# the server's RSS, a run's summary, memory_run and overload_run; under
# --inner-server it runs them, then exits.
# shellcheck disable=SC2154  # set by tools/bench-report.sh before it sources this
if [ "$quick" = 1 ]; then
  mem_load=${DCACHE_BENCH_MEMORY_LOAD:-20} mem_idle=${DCACHE_BENCH_MEMORY_IDLE:-10} mem_file=$((16 << 20))
  over_load=${DCACHE_BENCH_OVERLOAD_LOAD:-5} over_jobs=32 over_depth=8
else
  mem_load=${DCACHE_BENCH_MEMORY_LOAD:-180} mem_idle=${DCACHE_BENCH_MEMORY_IDLE:-60} mem_file=$((64 << 20))
  over_load=${DCACHE_BENCH_OVERLOAD_LOAD:-20} over_jobs=256 over_depth=32
fi
over_bps=$(to_bytes "${DCACHE_BENCH_OVERLOAD_BPS:-50M}")

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$DCACHE_PID/status"; }
# An own-server run's RSS, threads and io-wq workers during its load are
# sampled by dcache-bench (--server-pid, every 50 ms): the jobs' JSON.
# A summary of one own-server run: the server's RSS at the
# marks, the dcache-bench results and the plugin's counters.
server_summary() {  # base workload variant idle_kib load_end_kib after_kib rc...
  python3 - "$@" <<'PY'
import json, sys
base, w, v, idle, end, after = sys.argv[1:7]
rcs = [int(x) for x in sys.argv[7:]]
jobs = []
for part in ("big", "small", "write"):
    try:
        jobs.append(json.load(open(f"{base}.{part}.json")))
    except (OSError, ValueError):
        pass
threads = [j["server"]["threads"] for j in jobs if "threads" in j.get("server", {})]
out = {"workload": w, "variant": v, "idle_kib": int(idle), "load_end_kib": int(end), "after_kib": int(after),
       "rss_peak_kib": max((t.get("rss_peak_kib", 0) for t in threads), default=0),
       "threads_peak": max((t["threads_peak"] for t in threads), default=0),
       "iowq_peak": max((t["iowq_peak"] for t in threads), default=0),
       "samples": sum(t["samples"] for t in threads), "exit_codes": rcs,
       "mib_s": sum(j["total"]["mib_s"] for j in jobs),
       "bytes": sum(j["total"]["bytes"] for j in jobs),
       "errors": sum(j.get("errors", 0) for j in jobs),
       "first_error": next((j.get("first_error") for j in jobs if j.get("first_error")), ""),
       "verify_errors": sum(j.get("verify", {}).get("errors", 0) for j in jobs),
       "server_cpu_s": sum(j["server"]["cpu_s"] for j in jobs) / max(len(jobs), 1),
       "write_lat_p99_us": max((j["write"]["lat_p99_us"] for j in jobs if j["write"]["ops"]), default=None)}
json.dump(out, open(base + ".json", "w"), indent=1)
PY
}
memory_run() {  # variant
  local v=$1 base=$out/servers/memory.$1 url="nfs://$DCACHE_SERVER/$1" rc1=0 rc2=0 idle end after
  local limit=$((mem_load + 300))
  idle=$(rss_kib)
  fsal_stats_reset "$base.stats0"
  timeout --kill-after=10 "$limit" "$bench" url="$url" rw=rw rwmixread=60 bs=1M numjobs=48 iodepth=16 \
    size="$mem_file" filename=mem time_based=1 runtime="$mem_load" --server-pid "$DCACHE_PID" \
    --json "$base.big.json" --no-progress 2>"$base.big.err" &
  local b1=$!
  timeout --kill-after=10 "$limit" "$bench" url="$url" rw=randrw bs=4k numjobs=16 iodepth=16 \
    size="$mem_file" filename=memsmall time_based=1 runtime="$mem_load" --server-pid "$DCACHE_PID" \
    --json "$base.small.json" --no-progress 2>"$base.small.err" &
  local b2=$!
  wait "$b1" || rc1=$?
  wait "$b2" || rc2=$?
  end=$(rss_kib)
  log "memory $v: load done (RSS $((end / 1024)) MiB), idle ${mem_idle}s"
  sleep "$mem_idle"
  after=$(rss_kib)
  fsal_stats "$base.stats1"
  server_summary "$base" memory "$v" "$idle" "$end" "$after" "$rc1" "$rc2"
}

overload_run() {  # variant
  local v=$1 base=$out/servers/overload.$1 rc=0 idle end
  if ! throttle_server "$over_bps"; then
    echo "no cgroup v1 blkio controller" >"$base.skipped"
    log "overload skipped: no writable cgroup v1 blkio controller"
    cg_leave blkio
    return 0
  fi
  idle=$(rss_kib)
  fsal_stats_reset "$base.stats0"
  # what is in flight when the load stops drains at the throttled rate
  local drain=$((over_jobs * over_depth * 1048576 / over_bps))
  timeout --kill-after=10 $((over_load + drain + 300)) "$bench" url="nfs://$DCACHE_SERVER/$v" rw=write bs=1M \
    numjobs="$over_jobs" iodepth="$over_depth" size=$((64 << 20)) filename=over time_based=1 runtime="$over_load" \
    --server-pid "$DCACHE_PID" --json "$base.write.json" --no-progress 2>"$base.write.err" || rc=$?
  end=$(rss_kib)
  fsal_stats "$base.stats1"
  cg_leave blkio
  server_summary "$base" overload "$v" "$idle" "$end" "$end" "$rc"
}

if [ "$own_server" = 1 ]; then
  mkdir -p "$out/servers"
  for w in "${wlist[@]}"; do
    for v in "${vlist[@]}"; do
      log "$w $v: a server of its own"
      case $w in
        memory) memory_run "$v" ;;
        overload) overload_run "$v" ;;
      esac
    done
  done
  exit 0
fi
