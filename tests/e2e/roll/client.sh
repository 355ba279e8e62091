#!/usr/bin/env bash
# One NFS client of the multi-head tests (tests/e2e/cluster/cluster_test.sh): until OUT/stop exists, rewrites files of
# its own through one head and reads each back through the same head,
# checking every byte (dcache-bench rw=write verify=1: a pattern that
# depends on the seed and the offset; each round a new seed, so a WRITE
# that did not reach the file reads back as the previous round's data).
#
#   client.sh BENCH URL NFS_VERSION NAME OUT
#     URL    nfs://127.0.0.1/shared (run in the head's network namespace)
#     NAME   file prefix, unique per client
#     OUT    OUT/NAME.count "<verified> <errors> <grace>" after every round
#            (grace: rounds the server's grace period refused, retried),
#            OUT/NAME.err what went wrong, OUT/NAME.manifest at the end:
#            "FILENAME SIZE SEED" (dcache-bench filename=, a file FILENAME.0)
#            for each file whose content is known
set -uo pipefail
bench=$1 url=$2 version=$3 name=$4 out=$5
# odd and even sizes; misaligned and aligned WRITE sizes
sizes=(1000003 524288 70001 1049088)
bss=(65536 131072 47008 4096)
declare -A last=()
ok=0 errs=0 grace=0 round=0 child=""
seed0=$(($(cksum <<<"$name" | cut -d' ' -f1) * 1000))
# each tool runs as a job, so that a SIGTERM (the test's cleanup) stops it too
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 143' TERM
run() { timeout 120 "$@" & child=$!; wait "$child"; }
while [ ! -e "$out/stop" ]; do
  slot=$((round % ${#sizes[@]}))
  seed=$((seed0 + round))
  if run "$bench" url="$url" nfs_version="$version" rw=write size="${sizes[$slot]}" bs="${bss[$slot]}" \
       verify=1 seed="$seed" filename="$name-$slot" --json "$out/$name.json" >/dev/null 2>"$out/$name.last"; then
    ok=$((ok + 1))
    last[$name-$slot]="${sizes[$slot]} $seed"
  elif grep -q 'NFS4ERR_GRACE' "$out/$name.last"; then
    # the heads' grace period (a clustered recovery backend, after a head
    # started): OPEN answers NFS4ERR_GRACE, which a client waits out and
    # retries, as the kernel's does; libnfs returns it. Not an error;
    # counted, and the file's content is no longer taken as known.
    grace=$((grace + 1))
    unset "last[$name-$slot]"
    sleep 0.5
  else
    errs=$((errs + 1))
    unset "last[$name-$slot]"
    { echo "$(date +%T.%N) $name round $round (seed $seed, file $name-$slot.0):"; cat "$out/$name.last"; } >>"$out/$name.err"
  fi
  echo "$ok $errs $grace" >"$out/$name.count.new" && mv -f "$out/$name.count.new" "$out/$name.count"
  round=$((round + 1))
done
for file in "${!last[@]}"; do echo "$file ${last[$file]}"; done >"$out/$name.manifest"
