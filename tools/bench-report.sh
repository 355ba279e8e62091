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
if [ "$inner" = 0 ]; then
  [ "$(id -u)" = 0 ] || die "must run as root (loop devices, mounts, namespaces)"
  if [ ! -x "$bench" ] || { [ "$ganesha" = 4.3 ] && [ ! -f "$plugin" ]; }; then
    echo "$prog: building into $build (ci/build.sh)" >&2
    DCACHE_BUILD_DIR=$build "$top/ci/build.sh" >&2
  fi
  if [ ! -f "$plugin" ]; then
    echo "$prog: building the $release module (ci/build.sh --ganesha $release)" >&2
    "$top/ci/build.sh" --ganesha "$release" >&2
  fi
  if [ "$ganesha" = 4.3 ]; then
    ganesha_desc="4.3 (Debian 12's nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null || echo '?'), the host's ganesha.nfsd)"
  else
    ganesha_desc="$release (Debian ${release_install_suite:-$release_suite}'s nfs-ganesha $(dpkg-query --admindir="$release_root/var/lib/dpkg" -W -f='${Version}' nfs-ganesha 2>/dev/null || echo '?'), ganesha.nfsd chrooted in ${release_root#"$top"/})"
  fi
  command -v python3 >/dev/null || die "python3 is needed for the report"
  [ -n "$out" ] || out=$build/bench-report-$(date +%Y%m%d-%H%M%S)
  mkdir -p "$out/runs"
  out=$(realpath "$out")
  # exports: one per variant, Export_Id 20.. (the harness's own are 1 and 2)
  exports=$out/exports.conf
  : >"$exports"
  id=20
  for v in "${vlist[@]}"; do
    case $v in
      vfs) fsal='FSAL { Name = VFS; }' ;;
      buffered|dontcache|fadvise) fsal="FSAL { Name = DCACHE; IO_Cache_Read = $v; IO_Cache_Write = $v; FSAL { Name = VFS; } }" ;;
      buffered_sync|dontcache_sync) m=${v%_sync}; fsal="FSAL { Name = DCACHE; IO_Cache_Read = $m; IO_Cache_Write = $m; IO_Backend = sync; FSAL { Name = VFS; } }" ;;
      direct_sync) fsal='FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; Direct_Misaligned_Memory = bounce; IO_Backend = sync; FSAL { Name = VFS; } }' ;;
      direct) fsal='FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; Direct_Misaligned_Memory = bounce; FSAL { Name = VFS; } }' ;;
      direct_async) fsal='FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; IO_Blocking_Max = 0; FSAL { Name = VFS; } }' ;;
      direct_mem_buffered) fsal='FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; Direct_Misaligned_Memory = buffered; FSAL { Name = VFS; } }' ;;
      # the boundary-page comparison: tracker off (DONTCACHE edges), and
      # plain cached edges (Direct_Misaligned_Dontcache = false)
      direct_untracked) fsal='FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; Boundary_Tracking = false; FSAL { Name = VFS; } }' ;;
      direct_untracked_sync) fsal='FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; Boundary_Tracking = false; IO_Backend = sync; FSAL { Name = VFS; } }' ;;
      direct_cached_edges) fsal='FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; Direct_Misaligned_Dontcache = false; FSAL { Name = VFS; } }' ;;
      direct_data_sync|direct_file_sync) fsal="FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = $v; FSAL { Name = VFS; } }" ;;
    esac
    block="EXPORT {
  Export_Id = $id; Path = \"@MNT@/$v\"; Pseudo = /$v;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4;
  Transports = TCP; SecType = sys;
  $fsal
}"
    echo "$block" >>"$exports"
    # the same export alone, for the workloads with a server per variant
    echo "$block" >"$out/exports.$v.conf"
    echo "$v $id" >>"$out/variants.txt"
    id=$((id + 1))
  done
  if [[ ",$workloads," == *",latency,"* ]]; then
    # the latency probe's export: plain VFS, its file stays cached
    echo 'EXPORT { Export_Id = 19; Path = "@MNT@/probe"; Pseudo = /probe; Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }' >>"$exports"
  fi
  # room for every variant's data, the interleave files (SIZE/8 each, four
  # workloads) of every repeat, slack
  image=$(( (size_b * 5 / 2 + size_b * repeats / 2) * ${#vlist[@]} + (1 << 30) ))
  # latency's streamed files (128 x 8 MiB per variant), twice for XFS's preallocation
  [[ ",$workloads," != *",latency,"* ]] || image=$((image + ${#vlist[@]} * (2 << 30)))
  # memory's servers (one at a time, each on a fresh image of this size)
  # lay out 64 files of 64 MiB: 4 GiB and slack, whatever the variant count
  [[ ",$workloads," != *",memory,"* ]] || image=$((image > (6 << 30) ? image : (6 << 30)))
  {
    echo "command: $0 ${orig_args[*]}"
    echo "date: $(date -Is)"
    echo "nproc: $(nproc)"
    echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "kernel: $(uname -r)"
    echo "ganesha: $ganesha_desc"
    echo "module: $plugin"
    echo "disk: $(lsblk -ndo NAME,SIZE,ROTA,MODEL "$(findmnt -no SOURCE --target "${TMPDIR:-/tmp}" | sed 's/[0-9]*$//')" 2>/dev/null | tr -s ' ' || echo unknown) (image on ${TMPDIR:-/tmp}, loop --direct-io=on, XFS)"
    echo "size: $size ($size_b bytes per variant), runtime: ${runtime}s, repeats: $repeats"
  } >"$out/machine.txt"
  export DCACHE_GANESHA=$release DCACHE_PLUGIN=$plugin DCACHE_E2E_IMAGE_SIZE=$image DCACHE_E2E_LOG_LEVEL=${DCACHE_E2E_LOG_LEVEL:-EVENT}
  start=$SECONDS
  rc=0
  perf_arg=()
  [ "$perf" = 0 ] || perf_arg=(--perf)
  quick_arg=()
  [ "$quick" = 0 ] || quick_arg=(--quick)
  shared=() own=() pwl=()
  for w in "${wlist[@]}"; do
    if [[ " ${server_workloads[*]} " == *" $w "* ]]; then own+=("$w")
    elif [[ " ${pressure_workloads[*]} " == *" $w "* ]]; then pwl+=("$w")
    else shared+=("$w"); fi
  done
  if [ ${#shared[@]} -gt 0 ]; then
    "$top/tests/e2e/with_server.sh" --exports "$exports" -- \
      "$0" --inner --out "$out" --size "$size" --runtime "$runtime" --repeats "$repeats" \
           --variants "$variants" --workloads "$(IFS=,; echo "${shared[*]}")" ${memcg_limit:+--memcg-limit "$memcg_limit"} \
           "${perf_arg[@]}" || rc=$?
  fi
  mkdir -p "$out/servers"
  for w in "${own[@]}"; do
    case $w in
      memory) wanted=${DCACHE_BENCH_MEMORY_VARIANTS:-vfs,buffered,dontcache,direct} ;;
      overload) wanted=${DCACHE_BENCH_OVERLOAD_VARIANTS:-vfs,direct,direct_sync} ;;
    esac
    for v in "${vlist[@]}"; do
      [[ ",$wanted," == *",$v,"* ]] || continue
      # a server of its own: the process's memory and threads are this variant's
      "$top/tests/e2e/with_server.sh" --no-default-exports --exports "$out/exports.$v.conf" -- \
        "$0" --inner-server --out "$out" --size "$size" --runtime "$runtime" --repeats 1 \
             --variants "$v" --workloads "$w" "${quick_arg[@]}" || rc=$?
    done
  done
  if [ ${#pwl[@]} -gt 0 ] && [ ${#pvlist[@]} -eq 0 ]; then
    echo "$prog: ${pwl[*]}: none of the variants is in DCACHE_BENCH_PRESSURE_VARIANTS ($p_variants); skipped" >&2
    mkdir -p "$out/pressure"
    echo "no variant of --variants in DCACHE_BENCH_PRESSURE_VARIANTS ($p_variants)" >"$out/pressure/skipped"
  elif [ ${#pwl[@]} -gt 0 ]; then
    mkdir -p "$out/pressure"
    # the variants' exports and the working set's: plain VFS, on the second
    # filesystem (DCACHE_E2E_EXTRA_FS) mounted at MNT/ws
    {
      for v in "${pvlist[@]}"; do cat "$out/exports.$v.conf"; done
      echo 'EXPORT { Export_Id = 18; Path = "@MNT@/ws/data"; Pseudo = /ws; Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }'
    } >"$out/exports.pressure.conf"
    # the cold data sets (2 x STREAM, shared by reflink on XFS and btrfs,
    # copied per variant on ext4), one write set at a time (truncated after
    # each run), slack; the working set's filesystem: WS twice and slack
    p_image=$((4 * p_stream_b + (2 << 30)))
    [ "${DCACHE_E2E_FS:-xfs}" != ext4 ] || p_image=$((p_image + 2 * p_stream_b * ${#pvlist[@]}))
    p_ws_image=$((2 * p_ws_b + (512 << 20)))
    {
      printf '{"ws": %d, "limit": %d, "stream": %d, "runtime": %s, "touch": %s, "touches": %d, "touch_runtime": %s,\n' \
        "$p_ws_b" "$p_limit_b" "$p_stream_b" "$p_runtime" "$p_touch" "$p_touches" "$p_touch_runtime"
      printf ' "solo": %s, "repeats": %d, "ws_bs": "%s", "runs": "%s", "variants": "%s", "fs": "%s"}\n' \
        "$p_solo" "$p_repeats" "$p_ws_bs" "$p_runs" "$(IFS=,; echo "${pvlist[*]}")" "${DCACHE_E2E_FS:-xfs}"
    } >"$out/pressure/config.json"
    echo "pressure: WS $p_ws, memory group $p_limit, STREAM $p_stream, RUNTIME ${p_runtime}s, TOUCH every ${p_touch}s x $p_touches (stream ${p_touch_runtime}s), runs $p_runs, variants $(IFS=,; echo "${pvlist[*]}")" >>"$out/machine.txt"
    p_kernels=()
    for x in "${p_runlist[@]}"; do [[ " ${p_kernels[*]} " == *" ${x%.*} "* ]] || p_kernels+=("${x%.*}"); done
    for k in "${p_kernels[@]}"; do
      k_env=(-u DCACHE_TEST_NO_RWF_DONTCACHE)
      [ "$k" = rwf ] || k_env=(DCACHE_TEST_NO_RWF_DONTCACHE=1)
      env "${k_env[@]}" DCACHE_E2E_EXTRA_FS="ws:$p_ws_image" DCACHE_E2E_IMAGE_SIZE="$p_image" \
        "$top/tests/e2e/with_server.sh" --no-default-exports --exports "$out/exports.pressure.conf" -- \
        "$0" --inner-pressure "$k" --out "$out" --size "$size" --runtime "$runtime" --repeats 1 \
             --variants "$(IFS=,; echo "${pvlist[*]}")" --workloads "$(IFS=,; echo "${pwl[*]}")" "${quick_arg[@]}" || rc=$?
    done
  fi
  echo "elapsed: $((SECONDS - start)) s" >>"$out/machine.txt"
  python3 "$top/tools/bench_report.py" "$out" || rc=${rc:-1}
  echo "$prog: results in $out (table.md, results.json, chart.png, chart-cpu.png, chart-pagecache.png)" >&2
  exit "$rc"
fi

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

# ---- the workloads with a server of their own (memory, overload) ----
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
throttle_server() {  # bytes/s: reads and writes of the loop device, in a blkio group
  local dev
  dev=$(lsblk -dno MAJ:MIN "$DCACHE_LOOPDEV" | tr -d ' ')
  cg_enter blkio "blkio.throttle.write_bps_device=$dev $1" "blkio.throttle.read_bps_device=$dev $1"
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

# ---- streaming beside a working set (the pressure workloads) ----
# A server per kernel mode (--inner-pressure rwf|norwf) with the variants'
# exports and the working set's (/ws: plain VFS, on a filesystem and loop
# device of its own at DCACHE_MNT/ws). Every run: a memory group of its own
# (cgroup v1: LIMIT, or none for `whole`), the page cache of every file of
# the mount written back and dropped, the WS read once (so the new group is
# charged for it), then the stream through the variant's export and the WS
# readers, started together, the readers until the stream is over.
# The group's and the system's counters are read before and after
# (.sys0/.sys1); tools/bench_report.py takes the differences.
if [ -n "$pressure_kernel" ]; then
  pdir=$out/pressure
  mkdir -p "$pdir"
  [ -n "${DCACHE_EXTRA_LOOPDEV:-}" ] || { log "pressure: no working-set filesystem (DCACHE_E2E_EXTRA_FS)"; exit 2; }
  if ! cg_mount memory; then
    echo "no cgroup v1 memory controller (mount -t cgroup -o memory: $(cat "$out/runs/memory.mount.err" 2>/dev/null))" >"$pdir/skipped"
    log "pressure skipped: no writable cgroup v1 memory controller"
    exit 0
  fi
  ws_dir=$DCACHE_MNT/ws/data ws_url=nfs://$DCACHE_SERVER/ws
  ws_file=$((p_ws_b / 4 / 1048576 * 1048576))
  p_quarter=$((p_stream_b / 4 / 1048576 * 1048576)) p_sixteenth=$((p_stream_b / 16 / 1048576 * 1048576))
  stream_timeout=$((600 + (p_stream_b >> 20) / 10))
  ws_dev=${DCACHE_EXTRA_LOOPDEV##*/} main_dev=${DCACHE_LOOPDEV##*/}
  mapfile -t kswapd_pids < <(pgrep '^kswapd[0-9]*$' || true)
  verify_arg=()
  [ "$p_verify" = 0 ] || verify_arg=(verify=1)
  p_group=0

  sys_snapshot() {  # file: the memory group's, the two devices' and the system's counters, now
    local g=${cg_group[memory]:-} p t=0 f
    {
      echo "time $(date +%s.%N)"
      if [ -n "$g" ]; then
        sed 's/^/memcg./' "$g/memory.stat"
        for f in failcnt max_usage_in_bytes usage_in_bytes limit_in_bytes; do
          echo "memcg.$f $(cat "$g/memory.$f")"
        done
      fi
      # pgscan/pgsteal_anon and _file count the group's limit reclaim too
      # (cgroup v1's memory.stat has no reclaim counters), _kswapd and
      # _direct only the machine's own
      grep -E '^(pgscan|pgsteal|allocstall|workingset_refault|pgmajfault)' /proc/vmstat | sed 's/^/vmstat./'
      # PSI: time in which some (all) tasks stalled on memory: reclaim,
      # the group's limit reclaim included, and refaults
      [ ! -r /proc/pressure/memory ] || awk '{ sub("total=", "", $5); print "psi." $1 "_us", $5 }' /proc/pressure/memory
      for p in "${kswapd_pids[@]}"; do
        t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
      done
      echo "kswapd.ticks $t"
      echo "clk_tck $(getconf CLK_TCK)"
      awk '{ print "wsdev.reads", $1; print "wsdev.read_sectors", $3 }' "/sys/block/$ws_dev/stat"
      awk '{ print "dev.reads", $1; print "dev.read_sectors", $3; print "dev.writes", $5; print "dev.write_sectors", $7 }' \
        "/sys/block/$main_dev/stat"
    } >"$1"
  }
  p_enter() {  # memory: the server alone in a fresh group, LIMIT or unlimited (whole)
    local lim=-1
    [ "$1" = whole ] || lim=$p_limit_b
    p_group=$((p_group + 1))
    cg_suffix=-p$p_group cg_enter memory "memory.limit_in_bytes=$lim"
  }
  p_warm() {  # base: every file's page cache dropped, then the WS read once, charged to the group
    "$bench" url="$ws_url" rw=read bs=1M numjobs=4 iodepth=8 size="$ws_file" filename=ws --drop-cache "$DCACHE_MNT" \
      --server-pid 0 --json "$1.warm.json" --no-progress 2>"$1.warm.err" || log "pressure: warming the WS failed ($1)"
    echo 0 >"${cg_group[memory]}/memory.max_usage_in_bytes"
  }
  ws_args() {  # kind: the working set's readers (p_ws_job); each reads its quarter of WS
    local common=(size="$ws_file" filename=ws time_based=1 "${verify_arg[@]}")
    case $1 in
      hot) p_ws_job=(rw=randread bs="$p_ws_bs" numjobs=4 iodepth=4 "${common[@]}") ;;
      touch) p_ws_job=(rw=read bs="$p_ws_bs" numjobs=4 iodepth=4 pass_interval="$p_touch" "${common[@]}") ;;
      lat) p_ws_job=(rw=randread bs="$p_ws_bs" numjobs=4 iodepth=1 thinktime=2000 "${common[@]}") ;;
    esac
  }
  stream_args() {  # workload: p_stream_job, p_ws_kind, p_wfiles (the write set, emptied before and after)
    p_wfiles=""
    case $1 in
      seq_write) p_stream_job=(rw=write bs=1M numjobs=1 iodepth=16 size="$p_stream_b" filename=sw truncate=1)
                 p_wfiles=sw ;;
      multi_write) p_stream_job=(rw=write bs=1M numjobs=16 iodepth=4 size="$p_sixteenth" filename=mw truncate=1)
                   p_wfiles=mw ;;
      seq_read) p_stream_job=(rw=read bs=1M numjobs=1 iodepth=16 size="$p_stream_b" filename=sr "${verify_arg[@]}") ;;
      noisy_writer*|lat_reader)
        p_stream_job=(rw=write bs=1M numjobs=4 iodepth=8 size="$p_quarter" filename=nw truncate=1 time_based=1
                      runtime="$p_runtime")
        p_wfiles=nw ;;
      noisy_reader*)
        p_stream_job=(rw=read bs=1M numjobs=4 iodepth=8 size="$p_quarter" filename=nr time_based=1 runtime="$p_runtime"
                      "${verify_arg[@]}") ;;
    esac
    p_ws_kind=hot
    case $1 in
      *_touch) p_ws_kind="touch"; p_stream_job+=(runtime="$p_touch_runtime") ;;
      lat_reader) p_ws_kind=lat ;;
    esac
  }
  p_empty() {  # variant: its write set emptied (a run's stream data must not pile up on the image)
    [ -z "$p_wfiles" ] || find "$DCACHE_MNT/$1" -maxdepth 1 -name "$p_wfiles.*" -exec truncate -s 0 {} +
  }
  p_log() {  # base: a line on what the run measured
    python3 - "$1" <<'PY' >&2 || true
import json, sys
b = sys.argv[1]
def load(x):
    try:
        return json.load(open(f"{b}.{x}.json"))
    except (OSError, ValueError):
        return None
def kv(x):
    try:
        return {k: v for k, _, v in (l.strip().partition(" ") for l in open(f"{b}.{x}"))}
    except OSError:
        return {}
s, w, a, z = load("stream"), load("ws"), kv("sys0"), kv("sys1")
d = lambda k: int(float(z.get(k, 0))) - int(float(a.get(k, 0)))
out = [b.rsplit("/", 1)[-1] + ":"]
if s:
    out.append(f"stream {s['total']['mib_s']:.0f} MiB/s")
if w:
    ws = w["passes"]["mib_s"] if "passes" in w else w["total"]["mib_s"]
    out.append(f"WS {ws:.0f} MiB/s p99 {w['read']['lat_p99_us'] / 1000:.1f} ms")
out.append(f"WS dev reads {d('wsdev.read_sectors') * 512 >> 20} MiB, limit hits {d('memcg.failcnt')}")
print("[pressure] " + ", ".join(out))
PY
  }
  p_run() {  # memory workload variant repeat: the stream beside the WS readers
    local m=$1 w=$2 v=$3 r=$4 base sp wp src=0 wrc=0
    base=$pdir/$pressure_kernel.$m.$w.$v.$r
    stream_args "$w"
    ws_args "$p_ws_kind"
    rm -f "$base.stop"
    p_empty "$v"
    p_enter "$m" || { log "pressure: could not set up a memory group"; cg_leave memory; return 0; }
    p_warm "$base"
    sys_snapshot "$base.sys0"
    fsal_stats_reset "$base.stats0"
    # both connect first, then start together (--go-file); the WS readers
    # stop when the stream is over (--stop-file), with no `timeout` around
    # them: they also stop after runtime, or 60 s without a reply
    timeout --kill-after=10 "$stream_timeout" "$bench" url="nfs://$DCACHE_SERVER/$v" "${p_stream_job[@]}" \
      --label "$pressure_kernel/$m/$w/$v/$r" --sample-dir "$DCACHE_MNT/$v" --server-pid "$DCACHE_PID" \
      --thread-interval-ms 500 --go-file "$base.go.stream" --json "$base.stream.json" --no-progress \
      2>"$base.stream.err" &
    sp=$!
    "$bench" url="$ws_url" "${p_ws_job[@]}" runtime=$((stream_timeout + 60)) --stop-file "$base.stop" \
      --label "$pressure_kernel/$m/$w/$v/$r/ws" --sample-dir "$ws_dir" --server-pid 0 --go-file "$base.go.ws" \
      --json "$base.ws.json" --no-progress 2>"$base.ws.err" &
    wp=$!
    while { [ ! -e "$base.go.stream.ready" ] || [ ! -e "$base.go.ws.ready" ]; } &&
          kill -0 "$sp" 2>/dev/null && kill -0 "$wp" 2>/dev/null; do
      sleep 0.02
    done
    touch "$base.go.stream" "$base.go.ws"
    wait "$sp" || src=$?
    touch "$base.stop"
    wait "$wp" || wrc=$?
    sys_snapshot "$base.sys1"
    fsal_stats "$base.stats1"
    cg_leave memory
    p_empty "$v"
    rm -f "$base.stop" "$base".go.*
    [ "$src" = 0 ] || { echo "$src" >"$base.stream.failed"; log "FAILED: $base stream (status $src): $(tail -n 2 "$base.stream.err" | tr '\n' ' ')"; }
    [ "$wrc" = 0 ] || { echo "$wrc" >"$base.ws.failed"; log "FAILED: $base WS (status $wrc): $(tail -n 2 "$base.ws.err" | tr '\n' ' ')"; }
    p_log "$base"
  }
  p_solo() {  # memory kind repeat solo|solo_end: the WS readers alone, in a group as the runs'
    local m=$1 kind=$2 r=$3 base rc=0 rt=$p_solo
    base=$pdir/$pressure_kernel.$m.$4.$kind.$r
    ws_args "$kind"
    [ "$kind" != touch ] || rt=$p_touch_runtime
    p_enter "$m" || { cg_leave memory; return 0; }
    p_warm "$base"
    sys_snapshot "$base.sys0"
    "$bench" url="$ws_url" "${p_ws_job[@]}" runtime="$rt" --label "$pressure_kernel/$m/$4/$kind/$r" \
      --sample-dir "$ws_dir" --server-pid "$DCACHE_PID" --thread-interval-ms 500 --json "$base.ws.json" \
      --no-progress 2>"$base.ws.err" || rc=$?
    sys_snapshot "$base.sys1"
    cg_leave memory
    [ "$rc" = 0 ] || { echo "$rc" >"$base.ws.failed"; log "FAILED: $base (status $rc)"; }
    p_log "$base"
  }

  log "pressure ($pressure_kernel): WS $p_ws, group $p_limit, STREAM $p_stream, variants ${vlist[*]}"
  # the cold data sets, written once through the first variant's export;
  # the others get reflinked copies (the same blocks on XFS and btrfs)
  first=${vlist[0]}
  if [[ " ${wlist[*]} " == *" noisy_reader"* ]]; then
    "$bench" url="nfs://$DCACHE_SERVER/$first" rw=write bs=1M numjobs=4 iodepth=8 size="$p_quarter" filename=nr \
      --server-pid 0 --json "$pdir/$pressure_kernel.layout.nr.json" --no-progress 2>"$pdir/$pressure_kernel.layout.err" ||
      log "pressure: laying out nr failed"
  fi
  if [[ " ${wlist[*]} " == *" seq_read "* ]]; then
    "$bench" url="nfs://$DCACHE_SERVER/$first" rw=write bs=1M numjobs=1 iodepth=16 size="$p_stream_b" filename=sr \
      --server-pid 0 --json "$pdir/$pressure_kernel.layout.sr.json" --no-progress 2>>"$pdir/$pressure_kernel.layout.err" ||
      log "pressure: laying out sr failed"
  fi
  for v in "${vlist[@]:1}"; do
    find "$DCACHE_MNT/$first" -maxdepth 1 \( -name 'nr.*' -o -name 'sr.*' \) -exec cp --reflink=auto -t "$DCACHE_MNT/$v" {} +
  done
  # Ganesha's own memory as after a load (its arenas, the duplicate request
  # cache): grown here, outside any group, so that no run's group is
  # charged for what the first run of a server would otherwise allocate
  p_prime=$(awk -v q="$quick" 'BEGIN { print q ? 1 : 3 }')
  "$bench" url="nfs://$DCACHE_SERVER/$first" rw=write bs=1M numjobs=16 iodepth=4 size="$p_sixteenth" filename=mw \
    truncate=1 time_based=1 runtime="$p_prime" --server-pid 0 --json /dev/null --no-progress 2>/dev/null &
  "$bench" url="$ws_url" rw=randread bs="$p_ws_bs" numjobs=4 iodepth=4 size="$ws_file" filename=ws time_based=1 \
    runtime="$p_prime" --server-pid 0 --json /dev/null --no-progress 2>/dev/null || true
  wait || true
  find "$DCACHE_MNT/$first" -maxdepth 1 -name 'mw.*' -exec truncate -s 0 {} +
  # the solo runs each workload's WS readers need
  p_kinds=()
  for w in "${wlist[@]}"; do
    stream_args "$w"
    [[ " ${p_kinds[*]} " == *" $p_ws_kind "* ]] || p_kinds+=("$p_ws_kind")
  done
  for x in "${p_runlist[@]}"; do
    [ "${x%.*}" = "$pressure_kernel" ] || continue
    m=${x#*.}
    for ((r = 1; r <= p_repeats; r++)); do
      for kind in "${p_kinds[@]}"; do p_solo "$m" "$kind" "$r" solo; done
      for w in "${wlist[@]}"; do
        for v in "${vlist[@]}"; do p_run "$m" "$w" "$v" "$r"; done
      done
      # the WS alone again: how far the machine drifted during the runs
      for kind in "${p_kinds[@]}"; do p_solo "$m" "$kind" "$r" solo_end; done
    done
  done
  exit 0
fi

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
}

run_timeout=$(awk -v r="$runtime" -v s="$size_b" 'BEGIN { printf "%d", 60 + 4 * r + s / 1048576 / 4 }')
ileave_writers=${DCACHE_BENCH_INTERLEAVE_WRITERS:-32}
mix_args=(rw=rw rwmixread=60 bs=1M numjobs=16 iodepth=16 size="$per_job" filename=mix verify=1)
ileave_stride=(rw=interleave numjobs="$ileave_writers" iodepth=2 record=47008 size="$ileave_size" verify=1
               interleave_order=stride commit_at_end=1)
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
