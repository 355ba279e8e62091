#!/usr/bin/env bash
# The random-operation stress test: dcache-fsx against every cache mode
# through one real ganesha.nfsd on one loop XFS, all exports at once.
#
#   stress_test.sh [--long] [--rounds N] [--ops N] FSX
#
# Per export and round, at the same time:
#   - one NFSv3 stream on a file of its own (UNSTABLE and FILE_SYNC
#     WRITEs, READs checked against the model, truncates up and down,
#     COMMITs);
#   - one NFSv4.1 stream on a file of its own (the project's client);
#   - two NFSv3 streams sharing one file, each WRITE sent as four adjacent
#     pieces in flight at once (the boundary pages of the pieces and of the
#     two streams are shared);
#   - one NFSv3 stream running dcache-fsx's "appends" scenario: a
#     fragmented file, a small WRITE past EOF, page-aligned appends behind
#     it, one last operation of a random kind (what took XFS down when held
#     edges stayed dirty; see docs/architecture.md).
# Every export lives on the same filesystem (XFS, or DCACHE_E2E_FS: ext4,
# btrfs), so a shutdown caused by one takes all of them down.
#
# Fails on any mismatch or error that dcache-fsx reports, on any line the
# kernel logged for this run's filesystem about a shutdown, corruption or
# error, or about O_DIRECT colliding with the page cache for this run's
# files, and on a mode whose files stay more cached than it should (below).
#
# The ctest run is short (a few minutes, CI); --long is the documented
# long run (docs/architecture.md): 20,000 operations a stream, 10 rounds.
# DCACHE_E2E_BACKEND=sync runs every export on the synchronous backend.
set -euo pipefail

prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/../with_server.sh
rounds=1 ops=1500
while [ $# -gt 1 ]; do
  case $1 in
    --long) rounds=10; ops=20000; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $prog [--long] [--rounds N] [--ops N] FSX" >&2; exit 2; }
fsx=$(realpath "$1")
[ -x "$fsx" ] || { echo "$prog: $fsx is not executable" >&2; exit 2; }

if [ -z "${DCACHE_SERVER:-}" ]; then
  # Outside the harness: run inside it, with our exports.
  exec "$harness" --no-default-exports --exports "$here/stress_exports.conf" -- \
    "$0" --rounds "$rounds" --ops "$ops" "$fsx"
fi

exports=(s_vfs s_buffered s_dontcache s_fadvise s_direct s_direct_data_sync s_direct_file_sync
         s_direct_cached_edges s_direct_mem_buffered s_direct_untracked)
tag=stress$$
dev=${DCACHE_LOOPDEV##*/}
fs_type=$(findmnt -n -o FSTYPE --target "$DCACHE_MNT")
# The kernel log from here on: lines about this run's filesystem (by its
# loop device) that say it failed (XFS shutdown or corruption, an ext4 or
# btrfs error, a remount read-only), and lines about this run's files
# (O_DIRECT colliding with the page cache).
log_from=$(dmesg | wc -l)
kernel_lines() {
  dmesg | tail -n +"$((log_from + 1))" | awk -v dev="$dev" -v tag="$tag" '
    (index($0, "(" dev ")") || index($0, "(device " dev ")") || index($0, "(device " dev ":")) &&
      /Shutting down|[Cc]orruption|Internal error|[Ff]orce shutdown|[Ee]rror|critical|read-only|[Aa]borting/ { print; next }
    index($0, tag) && /collision|invalidation failure/ { print }'
}

# The share of an export's files (bytes) in the page cache, in percent.
residency() {
  local out
  out=$(find "$DCACHE_MNT/$1" -type f -exec fincore -n -b -o RES,SIZE {} + 2>/dev/null)
  awk '{ res += $1; size += $2 } END { printf "%d", size ? 100 * res / size : 0 }' <<<"$out"
}

status=0
start=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  pids=() names=()
  for e in "${exports[@]}"; do
    seed=$((round * 1000 + ${#pids[@]} + 1))
    "$fsx" --server "$DCACHE_SERVER" --export "/$e" --proto 3 --ops "$ops" --seed "$seed" \
      --max-file 1048576 --max-len 131072 --mix 10,5,35 --name "$tag.v3" --quiet &
    pids+=($!) names+=("$e v3")
    "$fsx" --server "$DCACHE_SERVER" --export "/$e" --proto 4.1 --ops $((ops / 2)) --seed "$seed" \
      --max-file 262144 --max-len 65536 --mix 10,5,35 --name "$tag.v41" --quiet &
    pids+=($!) names+=("$e v4.1")
    "$fsx" --server "$DCACHE_SERVER" --export "/$e" --proto 3 --ops "$ops" --seed "$seed" \
      --streams 2 --depth 4 --max-file 1048576 --max-len 131072 --mix 10,5,35 --name "$tag.shared" --quiet &
    pids+=($!) names+=("$e v3 2 streams x 4 pieces")
    "$fsx" --server "$DCACHE_SERVER" --export "/$e" --proto 3 --ops "$ops" --seed "$seed" \
      --scenario appends --max-file 1048576 --name "$tag.appends" --quiet &
    pids+=($!) names+=("$e v3 appends scenario")
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      echo "$prog: round $round: dcache-fsx failed on ${names[$i]}" >&2
      status=1
    fi
  done
  bad=$(kernel_lines)
  if [ -n "$bad" ]; then
    echo "$prog: round $round: the kernel logged for this run's filesystem or files:" >&2
    printf '  %s\n' "$bad" >&2
    status=1
  fi
  [ "$status" = 0 ] || break
  sleep 2 # the drops that follow the last replies
  # Residency, per mode, of the files the round left behind (misaligned,
  # up to 1 MB each, so held boundary pages weigh a lot). Measured at 1000
  # operations a stream (docs/configuration.md, "Filesystems and kernels"):
  # VFS and buffered keep what they moved (47-70 %: the control, the page
  # cache holds files here); RWF_DONTCACHE as the kernel does it keeps a
  # folio it did not bring in itself (dontcache 20 % on XFS, 28 % on ext4,
  # and ext4 keeps 38-44 % of Direct_Misaligned_Memory = buffered's
  # DONTCACHE writes); without RWF_DONTCACHE its fallback drops whole pages
  # (17-18 % on XFS, ext4 and btrfs); fadvise and the direct modes 0-11 %.
  no_dontcache=$("$here/../../../tools/dcache-stats" --json |
    python3 -c 'import json, sys; print(int(json.load(sys.stdin).get("61", {}).get("fallback_no_dontcache", 0) > 0))')
  line=""
  for e in "${exports[@]}"; do
    pct=$(residency "$e")
    line+=" ${e#s_}=$pct%"
    case $e in
      s_vfs | s_buffered) lo=30 hi=100 ;;
      s_dontcache) lo=0; if [ "$no_dontcache" = 1 ]; then hi=25; else hi=60; fi ;;
      s_direct_mem_buffered) lo=0; if [ "$no_dontcache" = 1 ]; then hi=15; else hi=60; fi ;;
      *) lo=0 hi=15 ;;
    esac
    if [ "$pct" -lt "$lo" ] || [ "$pct" -gt "$hi" ]; then
      echo "$prog: round $round: ${e#s_} left $pct % of its files in the page cache, outside $lo-$hi %" >&2
      status=1
    fi
  done
  echo "$prog: round $round/$rounds: page-cache residency of each export's files$([ "$no_dontcache" = 1 ] && echo " (no RWF_DONTCACHE)"):$line"
  [ "$status" = 0 ] || break
  echo "$prog: round $round/$rounds on $fs_type: ${#exports[@]} exports x 5 streams, $ops operations a stream: no mismatch, no error, kernel log clean ($((SECONDS - start)) s)"
done
exit $status
