#!/usr/bin/env bash
# One-command side-by-side benchmark of the DCACHE cache modes against
# plain VFS, on one private ganesha.nfsd (tests/e2e/with_server.sh) over a
# scratch XFS on a loop device.
#
#   tools/bench-report.sh [--quick] [--out DIR] [--size BYTES] [--runtime SEC]
#                         [--repeats N] [--variants a,b,...] [--workloads a,b,...]
#                         [--memcg-limit BYTES] [--perf] [--ganesha X]
#
# --ganesha X (or DCACHE_GANESHA=X, as for ci/build.sh; ci/release.sh): the
# server is that release's ganesha.nfsd (6.5, 9.14: chrooted in its Debian
# root, DCACHE_GANESHA to the harness), with the module from build-X/
# (ci/build.sh --ganesha X when missing); the default is Debian 12's 4.3.
# machine.txt and results.json ("ganesha") say which.
#
# Workloads (each repeated, medians reported):
#   mix        the reference job: 60/40 read/write, 1 MiB, 16 jobs, iodepth 16,
#              SIZE in total per variant (default 1G), pattern-verified
#   randread   4 KiB random reads, 4 jobs x iodepth 16, RUNTIME seconds
#   randwrite  4 KiB random writes, same shape
#   reread     read 1/4 of the data twice; the second (measured) pass is
#              what a cached re-read costs
#   interleave 32 writers (DCACHE_BENCH_INTERLEAVE_WRITERS) writing 47008-byte records into one file so that
#              every boundary page is shared by two WRITEs (either order),
#              read back and verified; device reads show RMW of edges
#   interleave_commit_end   the same records dealt to the writers in stride
#              (neighbours are different writers), each writer COMMITting
#              as soon as its own records are written, while others still write
#   interleave_commit_every stride, each writer COMMITs every 16 records
#   interleave_slow         stride, COMMIT at each writer's end, one writer
#              3x slower than the others
#   commit     4 writers, SIZE/4 each in 1 MiB WRITEs (depth 16), each
#              COMMITting its file at close: the COMMIT round trip of a
#              SIZE/4 range (256 MiB by default), p50/p99 per variant; read
#              back and verified after
#   mempressure the mix job with ganesha.nfsd in a cgroup v1 memory group
#              limited to max(SIZE/4, 384 MiB) (skipped with a reason when
#              /sys/fs/cgroup/memory is absent)
#   latency    the variants of DCACHE_BENCH_LATENCY_VARIANTS (default
#              vfs,buffered,buffered_sync,direct,direct_sync), the server's
#              device throttled to DCACHE_BENCH_LATENCY_BPS (50 MiB/s, cgroup
#              v1 blkio): 128 connections (--quick 32) streaming uncached
#              1 MiB READs, iodepth 4, for 20 s (--quick 6), while one probe
#              client alternates GETATTR and a cached 4 KiB READ on a plain
#              VFS export of the same server, 10 ms apart: the probe's
#              latency is how long a request waits for a worker thread
#   memory     one server per variant (DCACHE_BENCH_MEMORY_VARIANTS, default
#              vfs,buffered,dontcache,direct): 64 connections of mixed I/O
#              (48 jobs 60/40 1 MiB, 16 jobs 4 KiB random, iodepth 16) for
#              DCACHE_BENCH_MEMORY_LOAD seconds (180; --quick 20), then
#              DCACHE_BENCH_MEMORY_IDLE idle (60; --quick 10): ganesha.nfsd's
#              RSS before, at peak and after, its threads and io-wq workers
#   overload   one server per variant (DCACHE_BENCH_OVERLOAD_VARIANTS, default
#              vfs,direct,direct_sync) in a cgroup v1 blkio group throttling
#              its device to DCACHE_BENCH_OVERLOAD_BPS (50 MiB/s): 256
#              connections x iodepth 32 of 1 MiB WRITEs (--quick: 32 x 8) for
#              DCACHE_BENCH_OVERLOAD_LOAD seconds (20; --quick 5): RSS peak,
#              errors, requests that waited for a place
# Streaming beside a working set (`--workloads pressure` for all eight; a
# server per kernel mode, the variants of DCACHE_BENCH_PRESSURE_VARIANTS,
# default vfs,buffered,dontcache,fadvise,direct,direct_file_sync, --quick
# vfs,dontcache,direct): a working set WS (384M; --quick 64M) on a plain
# VFS export of its own filesystem and loop device, read by 4 clients,
# while a stream runs through the variant's export, the server in a cgroup
# v1 memory group of its own per run (1G; --quick 256M), or unlimited:
#   seq_write  1 writer, STREAM (3G; --quick 1G) of 1 MiB WRITEs, iodepth
#              16, COMMIT at close in the time; WS read continuously
#   seq_read   1 reader of a cold STREAM-sized file; WS read continuously
#   multi_write 16 writers, STREAM in all; WS read continuously
#   noisy_writer 4 writers for RUNTIME s (20; --quick 3); WS read continuously
#   noisy_writer_touch the same, WS read whole every TOUCH s (8; --quick 1.5)
#   noisy_reader 4 readers of a cold STREAM-sized data set for RUNTIME s
#   noisy_reader_touch the same, WS read whole every TOUCH s
#   lat_reader noisy_writer's stream; WS readers paced (one request at a
#              time, 2 ms apart): their latency p50/p99/p99.9
# each against the WS alone (solo) in the same group: its throughput and
# latency relative to solo, the WS device's reads, the group's limit hits,
# peak, refaults, reclaim, memory stall (PSI), kswapd, server CPU and the
# stream's throughput. DCACHE_BENCH_PRESSURE_RUNS (rwf.limit,norwf.limit,
# rwf.whole) lists kernel.memory pairs: rwf as the kernel is, norwf with
# DCACHE_TEST_NO_RWF_DONTCACHE=1 (RWF_DONTCACHE refused as before 6.14);
# limit the group above, whole the machine's memory. More knobs:
# DCACHE_BENCH_PRESSURE_{WS,LIMIT,STREAM,RUNTIME,TOUCH,TOUCHES,SOLO,
# REPEATS,VERIFY,WS_BS} (docs/benchmarks.md).
# Variants: vfs (plain VFS FSAL, the baseline) and one DCACHE export per
# mode; buffered_sync, dontcache_sync and direct_sync are buffered,
# dontcache and direct with IO_Backend = sync (the others use io_uring);
# direct_async is direct with IO_Blocking_Max = 0 (every device-bound step
# through io_uring, none blocking a worker thread).
# DCACHE_BENCH_DEVICE_BPS=RATE (e.g. 100M): a slow device: the shared
# server's loop device throttled to RATE bytes/s for reads and for writes
# (cgroup v1 blkio) in every workload it runs; latency keeps its own rate
# (machine.txt says so).
# dcache-bench also samples ganesha.nfsd's threads every 50 ms: threads in
# state D, and svc_* workers blocked in a file I/O syscall.
# Between runs the test files' page cache is written back and dropped with
# POSIX_FADV_DONTNEED (never a global drop_caches).
# --perf: `perf record -g` of ganesha.nfsd during every measured run, into
# runs/WORKLOAD.VARIANT.REPEAT.perf.data (read with `perf report -i`).
#
# Output in DIR (default build/bench-report-<date>): runs/*.json (one per
# run), servers/ (the workloads with a server per variant), pressure/ (one
# KERNEL.MEMORY.WORKLOAD.VARIANT.REPEAT.{stream,ws}.json, .sys0/.sys1 and
# .stats0/.stats1 per run; solo and solo_end: the WS alone), results.json,
# table.md, chart.png (throughput), chart-cpu.png and chart-pagecache.png
# (tools/bench_report.py --charts-only DIR redraws them).
# Needs root (loop device, namespaces) and builds with ci/build.sh if the
# tool or plugin is missing.
set -euo pipefail

prog=${0##*/}
top=$(cd "$(dirname "$0")/.." && pwd)
# the parts it sources (bench-report.d/), beside it wherever it is run from
parts=$(cd "$(dirname "$0")" && pwd)/bench-report.d
die() { echo "$prog: $*" >&2; exit 2; }

# *_sync: the same export with IO_Backend = sync (the others run on the
# default io_uring backend), placed beside their io_uring twin
all_variants=(vfs buffered buffered_sync dontcache dontcache_sync fadvise direct direct_sync direct_async direct_untracked
              direct_untracked_sync direct_cached_edges direct_mem_buffered direct_data_sync direct_file_sync)
all_workloads=(mix randread randwrite reread interleave interleave_commit_end interleave_commit_every
               interleave_slow mempressure commit latency memory overload
               seq_write seq_read multi_write noisy_writer noisy_writer_touch noisy_reader noisy_reader_touch
               lat_reader)
# workloads that measure the whole process: each variant gets a server of its own
server_workloads=(memory overload)
# streaming beside a working set: a server per kernel mode, a memory group per run
pressure_workloads=(seq_write seq_read multi_write noisy_writer noisy_writer_touch noisy_reader noisy_reader_touch
                    lat_reader)

orig_args=("$@")
quick=0 out="" size="" runtime="" repeats="" variants="" workloads="" memcg_limit="" perf=0 inner=0 own_server=0
# shellcheck source=../ci/release.sh
. "$top/ci/release.sh"
pressure_kernel=""
ganesha=${DCACHE_GANESHA:-4.3}
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; shift ;;
    --out) out=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --runtime) runtime=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --memcg-limit) memcg_limit=$2; shift 2 ;;
    --perf) perf=1; shift ;;
    --ganesha) ganesha=$2; shift 2 ;;
    --ganesha=*) ganesha=${1#--ganesha=}; shift ;;
    --inner) inner=1; shift ;;
    --inner-server) inner=1; own_server=1; shift ;;
    --inner-pressure) inner=1; pressure_kernel=$2; shift 2 ;;
    -h|--help) sed -n '2,104p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
if [ "$quick" = 1 ]; then
  : "${size:=256M}" "${runtime:=2}" "${repeats:=1}"
else
  : "${size:=1G}" "${runtime:=5}" "${repeats:=3}"
fi
[ -n "$variants" ] || variants=$(IFS=,; echo "${all_variants[*]}")
[ -n "$workloads" ] || workloads=$(IFS=,; echo "${all_workloads[*]}")
# `pressure`: the eight workloads of streaming beside a working set
workloads=,$workloads,
workloads=${workloads//,pressure,/,$(IFS=,; echo "${pressure_workloads[*]}"),}
workloads=${workloads#,} workloads=${workloads%,}
to_bytes() { numfmt --from=iec "${1%B}"; }
size_b=$(to_bytes "$size") || die "--size $size: not a size"
# a slow device for the shared server's workloads (latency keeps its own)
dev_bps=""
[ -z "${DCACHE_BENCH_DEVICE_BPS:-}" ] ||
  dev_bps=$(to_bytes "$DCACHE_BENCH_DEVICE_BPS") || die "DCACHE_BENCH_DEVICE_BPS=$DCACHE_BENCH_DEVICE_BPS: not a size"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats $repeats: must be a positive integer"
[[ $runtime =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--runtime $runtime: must be seconds"
IFS=, read -r -a vlist <<<"$variants"
IFS=, read -r -a wlist <<<"$workloads"
for v in "${vlist[@]}"; do [[ " ${all_variants[*]} " == *" $v "* ]] || die "unknown variant '$v' (known: ${all_variants[*]})"; done
for w in "${wlist[@]}"; do [[ " ${all_workloads[*]} " == *" $w "* ]] || die "unknown workload '$w' (known: ${all_workloads[*]})"; done

release_select "$ganesha" || exit 2

# ---- streaming beside a working set: sizes and lengths (docs/benchmarks.md) ----
# WS: the working set (4 files, on a VFS export of a filesystem of its own);
# LIMIT: the memory group's limit, between WS and WS + STREAM; STREAM: the
# bytes of a size-based stream, and the cold data set of the streaming
# readers; RUNTIME: a time-based stream's length; TOUCH: the seconds
# between two passes over the whole WS (long enough for the stream to pass
# through the group's memory in between), TOUCHES of them during the
# stream; SOLO: the seconds of the WS alone (hot and paced readers).
if [ "$quick" = 1 ]; then
  p_ws=${DCACHE_BENCH_PRESSURE_WS:-64M} p_limit=${DCACHE_BENCH_PRESSURE_LIMIT:-256M}
  p_stream=${DCACHE_BENCH_PRESSURE_STREAM:-1G} p_runtime=${DCACHE_BENCH_PRESSURE_RUNTIME:-3}
  p_touch=${DCACHE_BENCH_PRESSURE_TOUCH:-1.5} p_touches=${DCACHE_BENCH_PRESSURE_TOUCHES:-2}
  p_solo=${DCACHE_BENCH_PRESSURE_SOLO:-3}
  p_variants=${DCACHE_BENCH_PRESSURE_VARIANTS:-vfs,dontcache,direct}
  p_runs=${DCACHE_BENCH_PRESSURE_RUNS:-rwf.limit,norwf.limit}
else
  p_ws=${DCACHE_BENCH_PRESSURE_WS:-384M} p_limit=${DCACHE_BENCH_PRESSURE_LIMIT:-1G}
  p_stream=${DCACHE_BENCH_PRESSURE_STREAM:-3G} p_runtime=${DCACHE_BENCH_PRESSURE_RUNTIME:-20}
  p_touch=${DCACHE_BENCH_PRESSURE_TOUCH:-8} p_touches=${DCACHE_BENCH_PRESSURE_TOUCHES:-3}
  p_solo=${DCACHE_BENCH_PRESSURE_SOLO:-10}
  p_variants=${DCACHE_BENCH_PRESSURE_VARIANTS:-vfs,buffered,dontcache,fadvise,direct,direct_file_sync}
  p_runs=${DCACHE_BENCH_PRESSURE_RUNS:-rwf.limit,norwf.limit,rwf.whole}
fi
p_repeats=${DCACHE_BENCH_PRESSURE_REPEATS:-1} p_verify=${DCACHE_BENCH_PRESSURE_VERIFY:-0}
p_ws_bs=${DCACHE_BENCH_PRESSURE_WS_BS:-64k}
p_ws_b=$(to_bytes "$p_ws") || die "DCACHE_BENCH_PRESSURE_WS=$p_ws: not a size"
p_limit_b=$(to_bytes "$p_limit") || die "DCACHE_BENCH_PRESSURE_LIMIT=$p_limit: not a size"
p_stream_b=$(to_bytes "$p_stream") || die "DCACHE_BENCH_PRESSURE_STREAM=$p_stream: not a size"
for x in "$p_runtime" "$p_touch" "$p_solo"; do
  [[ $x =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DCACHE_BENCH_PRESSURE_RUNTIME/TOUCH/SOLO: '$x' is not seconds"
done
[[ $p_touches =~ ^[1-9][0-9]*$ && $p_repeats =~ ^[1-9][0-9]*$ ]] ||
  die "DCACHE_BENCH_PRESSURE_TOUCHES/REPEATS: must be positive integers"
[ "$p_limit_b" -gt "$p_ws_b" ] || die "DCACHE_BENCH_PRESSURE_LIMIT ($p_limit) must be above the working set ($p_ws)"
IFS=, read -r -a p_runlist <<<"$p_runs"
for x in "${p_runlist[@]}"; do
  [[ $x =~ ^(rwf|norwf)\.(limit|whole)$ ]] || die "DCACHE_BENCH_PRESSURE_RUNS: '$x' is not KERNEL.MEMORY (rwf|norwf).(limit|whole)"
done
# the pressure workloads' variants: those of --variants that DCACHE_BENCH_PRESSURE_VARIANTS names
pvlist=()
for v in "${vlist[@]}"; do [[ ",$p_variants," != *",$v,"* ]] || pvlist+=("$v"); done
# a time-based stream with touches: the WS starts with it, touches at TOUCH,
# 2 TOUCH, ..., and the last one has half a TOUCH before the stream ends
p_touch_runtime=$(awk -v t="$p_touch" -v n="$p_touches" 'BEGIN { printf "%g", n * t + t / 2 }')

build=${DCACHE_BUILD_DIR:-$top/build}
bench=$build/tools/dcache-bench
plugin=$build/fsal_dcache/adapter/libfsaldcache.so
# another release: the client tool is still the host's build, the module
# the release's
[ -z "$release_root" ] || plugin=$release_plugin

# ------------------------------------------------------------ outer part --
# As root: the exports, the servers (tests/e2e/with_server.sh runs this
# script again inside them with --inner*), the report; exits.
# shellcheck source=bench-report.d/outer.sh
. "$parts/outer.sh"

# ------------------------------------------------------------ inner part --
# Runs inside the harness: DCACHE_MNT, DCACHE_PID, DBUS_SYSTEM_BUS_ADDRESS set.
: "${DCACHE_MNT:?run through tools/bench-report.sh, not --inner directly}"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

fsal_stats() {  # $1 = file; the plugin's counters, all exports (JSON)
  "$top/tools/dcache-stats" --json >"$1" 2>&1 || true
}
# Counters are reset before each run, so what is read after it holds that
# run's counts (and the export's own, the only one with traffic); $1 gets an
# empty reading, the baseline.
fsal_stats_reset() {
  "$top/tools/dcache-stats" --json --reset >/dev/null 2>&1 || true
  echo '{}' >"$1"
}

per_job=$((size_b / 16))
per_job=$((per_job / 1048576 * 1048576))
[ "$per_job" -ge 1048576 ] || per_job=1048576
ileave_size=$((size_b / 8))
reread_jobs=4

# cgroup v1 groups for the server (memory: mempressure; blkio: latency,
# overload).  `ip netns exec` mounted a fresh sysfs in our namespace,
# without the cgroup hierarchies: each controller's (host-wide) hierarchy
# is mounted privately, once, and the server put in a group of its own.
declare -A cg_root=() cg_group=()
cg_mount() {  # controller; why it cannot be is in runs/CONTROLLER.mount.err
  [ -z "${cg_root[$1]:-}" ] || return 0
  local root
  root=$(mktemp -d "${TMPDIR:-/tmp}/dcache-bench-$1.XXXXXX")
  if ! mount -t cgroup -o "$1" "dcache-bench-$1" "$root" 2>"$out/runs/$1.mount.err" || [ ! -w "$root/cgroup.procs" ]; then
    umount "$root" 2>/dev/null; rmdir "$root"
    return 1
  fi
  cg_root[$1]=$root
}
cg_enter() {  # controller file=value...: the server alone in a new group with those settings
  local c=$1 kv
  shift
  cg_mount "$c" || return 1
  cg_group[$c]=${cg_root[$c]}/dcache-bench-$$${cg_suffix:-}
  mkdir -p "${cg_group[$c]}"
  for kv; do echo "${kv#*=}" >"${cg_group[$c]}/${kv%%=*}" || return 1; done
  echo "$DCACHE_PID" >"${cg_group[$c]}/cgroup.procs"
}
cg_leave() {  # controller: the server back in the root group, ours removed
  [ -n "${cg_group[$1]:-}" ] || return 0
  echo "$DCACHE_PID" >"${cg_root[$1]}/cgroup.procs" 2>/dev/null || true
  rmdir "${cg_group[$1]}" 2>/dev/null || true
  unset "cg_group[$1]"
}
cleanup_all() {
  local c
  for c in "${!cg_root[@]}"; do
    cg_leave "$c"
    umount "${cg_root[$c]}" 2>/dev/null; rmdir "${cg_root[$c]}" 2>/dev/null
  done
  return 0
}
trap cleanup_all EXIT
# a killed run (ctest timeout, with_server.sh teardown) must still remove its group
trap 'exit 143' TERM
trap 'exit 130' INT

throttle_server() {  # bytes/s: reads and writes of the loop device, in a blkio group
  local dev
  dev=$(lsblk -dno MAJ:MIN "$DCACHE_LOOPDEV" | tr -d ' ')
  cg_enter blkio "blkio.throttle.write_bps_device=$dev $1" "blkio.throttle.read_bps_device=$dev $1"
}

run() {  # workload variant repeat [extra dcache-bench args...]
  local w=$1 v=$2 r=$3; shift 3
  local dir=$DCACHE_MNT/$v base=$out/runs/$w.$v.$r
  fsal_stats_reset "$base.stats0"
  local rc=0 perf_pid=""
  if [ "$perf" = 1 ]; then
    perf record -q -g -F 999 -p "$DCACHE_PID" -o "$base.perf.data" 2>"$base.perf.err" &
    perf_pid=$!
  fi
  # bounded: a stalled server must fail this run, not hang the report
  timeout --kill-after=10 "$run_timeout" "$bench" url="nfs://$DCACHE_SERVER/$v" --label "$w/$v/$r" --sample-dir "$dir" \
    --server-pid "$DCACHE_PID" --json "$base.json" --no-progress "$@" 2>"$base.err" || rc=$?
  fsal_stats "$base.stats1"
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
  if [ "$rc" != 0 ]; then
    log "FAILED: $w $v repeat $r (status $rc): $(tail -n 2 "$base.err" | tr '\n' ' ')"
    echo "$rc" >"$base.failed"
  fi
  return 0
}

# the workloads with a server of their own (memory, overload): exits under --inner-server
# shellcheck source=bench-report.d/own-server.sh
. "$parts/own-server.sh"
# streaming beside a working set (the pressure workloads): exits under --inner-pressure
# shellcheck source=bench-report.d/pressure.sh
. "$parts/pressure.sh"

# ---- latency: a probe's wait for a worker under throttled streaming ----
if [ "$quick" = 1 ]; then lat_jobs=32 lat_load=6; else lat_jobs=${DCACHE_BENCH_LATENCY_JOBS:-128} lat_load=20; fi
lat_depth=${DCACHE_BENCH_LATENCY_DEPTH:-4}
lat_variants=${DCACHE_BENCH_LATENCY_VARIANTS:-vfs,buffered,buffered_sync,direct,direct_sync}
lat_bps=$(to_bytes "${DCACHE_BENCH_LATENCY_BPS:-50M}")
lat_file=$((8 << 20))
latency_run() {  # variant repeat
  local v=$1 r=$2 d=$DCACHE_MNT/$1 base=$out/runs/latency.$1.$2 pp
  if [ ! -e "$d/stream.$((lat_jobs - 1))" ]; then
    # the streamed files, written once, before the throttle
    "$bench" url="nfs://$DCACHE_SERVER/$v" rw=write bs=1M numjobs="$lat_jobs" iodepth=4 size="$lat_file" \
      filename=stream --json /dev/null --no-progress 2>"$base.layout.err" || true
  fi
  [ -z "$dev_bps" ] || cg_leave blkio
  if ! throttle_server "$lat_bps"; then
    echo "no cgroup v1 blkio controller" >"$out/runs/latency.skipped"
    cg_leave blkio
    return 0
  fi
  (sleep 2
   exec "$bench" url="nfs://$DCACHE_SERVER/probe" rw=probe bs=4k size=1M filename=probe verify=1 time_based=1 \
     runtime=$((lat_load - 4)) --json "$base.probe" --no-progress 2>"$base.probe.err") &
  pp=$!
  run latency "$v" "$r" rw=read bs=1M numjobs="$lat_jobs" iodepth="$lat_depth" size="$lat_file" filename=stream \
    time_based=1 runtime="$lat_load" --drop-cache "$d"
  wait "$pp" || echo "$?" >"$base.probe.failed"
  cg_leave blkio
  [ -z "$dev_bps" ] || throttle_server "$dev_bps"
}

run_timeout=$(awk -v r="$runtime" -v s="$size_b" 'BEGIN { printf "%d", 60 + 4 * r + s / 1048576 / 4 }')
ileave_writers=${DCACHE_BENCH_INTERLEAVE_WRITERS:-32}
mix_args=(rw=rw rwmixread=60 bs=1M numjobs=16 iodepth=16 size="$per_job" filename=mix verify=1)
ileave_stride=(rw=interleave numjobs="$ileave_writers" iodepth=2 record=47008 size="$ileave_size" verify=1
               interleave_order=stride commit_at_end=1)
if [ -n "$dev_bps" ] && ! throttle_server "$dev_bps"; then
  cg_leave blkio
  die "DCACHE_BENCH_DEVICE_BPS: no writable cgroup v1 blkio controller to throttle the device with"
fi
for ((r = 1; r <= repeats; r++)); do
  for w in "${wlist[@]}"; do
    for v in "${vlist[@]}"; do
      d=$DCACHE_MNT/$v
      case $w in
        mix) run "$w" "$v" "$r" "${mix_args[@]}" --drop-cache "$d" ;;
        randread) run "$w" "$v" "$r" rw=randread bs=4k numjobs=4 iodepth=16 size="$per_job" filename=mix \
                    time_based=1 runtime="$runtime" verify=1 --drop-cache "$d" ;;
        randwrite) run "$w" "$v" "$r" rw=randwrite bs=4k numjobs=4 iodepth=16 size="$per_job" filename=mix \
                    time_based=1 runtime="$runtime" verify=1 --drop-cache "$d" ;;
        reread)
          # first pass fills whatever the mode leaves cached; the second is measured
          "$bench" url="nfs://$DCACHE_SERVER/$v" rw=read bs=1M numjobs=$reread_jobs iodepth=8 size="$per_job" \
            filename=mix --drop-cache "$d" --json /dev/null --no-progress 2>/dev/null || true
          run "$w" "$v" "$r" rw=read bs=1M numjobs=$reread_jobs iodepth=8 size="$per_job" filename=mix verify=1 ;;
        interleave) run "$w" "$v" "$r" rw=interleave numjobs="$ileave_writers" iodepth=2 record=47008 size="$ileave_size" \
                    filename="ileave$r" verify=1 --drop-cache "$d" ;;
        interleave_commit_end) run "$w" "$v" "$r" "${ileave_stride[@]}" filename="ileave_end$r" --drop-cache "$d" ;;
        interleave_commit_every) run "$w" "$v" "$r" "${ileave_stride[@]}" fsync=16 filename="ileave_every$r" --drop-cache "$d" ;;
        interleave_slow) run "$w" "$v" "$r" "${ileave_stride[@]}" slow_writer=3 filename="ileave_slow$r" --drop-cache "$d" ;;
        mempressure)
          if ! cg_mount memory; then
            [ "$v" != "${vlist[0]}" ] || log "mempressure skipped: no writable cgroup v1 memory controller"
            echo "no cgroup v1 memory controller (mount -t cgroup -o memory: $(cat "$out/runs/memory.mount.err" 2>/dev/null))" >"$out/runs/mempressure.skipped"
            continue
          fi
          # cgroup v1 does not move the server's existing memory into the
          # group (no move_charge_at_immigrate): the limit is what the run's
          # new page cache and allocations may take: a quarter of the data,
          # but never below 384 MiB, because 16 jobs x iodepth 16 x 1 MiB
          # is 256 MiB of request buffers in the server alone (a smaller
          # limit stalls ganesha.nfsd instead of measuring reclaim)
          limit=${memcg_limit:-$((size_b / 4 > 402653184 ? size_b / 4 : 402653184))}
          limit=$(to_bytes "$limit")
          cg_enter memory "memory.limit_in_bytes=$limit" ||
            { log "mempressure: could not set up its memory group"; cg_leave memory; continue; }
          echo "$limit" >"$out/runs/$w.$v.$r.memcg_limit"
          run "$w" "$v" "$r" "${mix_args[@]}" --drop-cache "$d"
          cat "${cg_group[memory]}/memory.failcnt" >"$out/runs/$w.$v.$r.memcg_failcnt" 2>/dev/null || true
          cg_leave memory ;;
        latency)
          [[ ",$lat_variants," == *",$v,"* ]] || continue
          latency_run "$v" "$r" ;;
        commit) run "$w" "$v" "$r" rw=write bs=1M numjobs=4 iodepth=16 size=$((size_b / 4)) filename=commit verify=1 \
                  --drop-cache "$d" ;;
      esac
      log "$w $v repeat $r done"
    done
  done
done
[ -z "$dev_bps" ] || cg_leave blkio
