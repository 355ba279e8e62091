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
# Every export lives on the same filesystem, so a shutdown caused by one
# takes all of them down.
#
# Fails on any mismatch or error that dcache-fsx reports, and on any line
# the kernel logged for this run's filesystem about a shutdown or
# corruption, or about O_DIRECT colliding with the page cache for this
# run's files.
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

exports=(s_buffered s_dontcache s_fadvise s_direct s_direct_data_sync s_direct_file_sync
         s_direct_cached_edges s_direct_mem_buffered s_direct_untracked)
tag=stress$$
dev=${DCACHE_LOOPDEV##*/}
uuid=$(blkid -p -s UUID -o value "$DCACHE_LOOPDEV")
[ -n "$uuid" ] || { echo "$prog: no UUID for $DCACHE_LOOPDEV" >&2; exit 2; }

# What the kernel said about this run's filesystem (since it was mounted)
# and this run's files.
kernel_lines() {
  dmesg | awk -v dev="XFS ($dev):" -v uuid="$uuid" -v tag="$tag" '
    index($0, dev) && index($0, "Mounting") && index($0, uuid) { ours = 1; next }
    index($0, dev) && index($0, "Mounting") { ours = 0 }
    ours && index($0, dev) && /Shutting down|[Cc]orruption|Internal error|[Ff]orce shutdown/ { print; next }
    index($0, tag) && /collision|invalidation failure/ { print }'
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
  echo "$prog: round $round/$rounds: ${#exports[@]} exports x 5 streams, $ops operations a stream: no mismatch, no error, kernel log clean ($((SECONDS - start)) s)"
done
exit $status
