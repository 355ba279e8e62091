# shellcheck shell=bash
# Streaming beside a working set (the pressure workloads).
# A server per kernel mode (--inner-pressure rwf|norwf) with the variants'
# exports and the working set's (/ws: plain VFS, on a filesystem and loop
# device of its own at DCACHE_MNT/ws). Every run: a memory group of its own
# (cgroup v1: LIMIT, or none for `whole`), the page cache of every file of
# the mount written back and dropped, the WS read once (so the new group is
# charged for it), then the stream through the variant's export and the WS
# readers, started together, the readers until the stream is over.
# The group's and the system's counters are read before and after
# (.sys0/.sys1); tools/bench_report.py takes the differences.
# Sourced by tools/bench-report.sh in its inner part: under --inner-pressure
# KERNEL it runs the pressure workloads of that kernel mode, then exits.
# shellcheck disable=SC2154  # set by tools/bench-report.sh before it sources this
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
