# shellcheck shell=bash
# The outer part of tools/bench-report.sh, sourced by it (as root, without
# --inner*): one export per variant, the image sizes, machine.txt, then the
# servers through tests/e2e/with_server.sh, which runs the script again
# inside them (--inner: the workloads sharing one server; --inner-server:
# memory and overload, a server per variant; --inner-pressure KERNEL: the
# pressure workloads, a server per kernel mode), and the report
# (tools/bench_report.py). Exits with the runs' status.
# shellcheck disable=SC2154  # set by tools/bench-report.sh before it sources this
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
    [ -z "$dev_bps" ] || echo "device: throttled to $dev_bps bytes/s (DCACHE_BENCH_DEVICE_BPS, cgroup v1 blkio), except latency (its own)"
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
