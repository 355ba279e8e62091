#!/usr/bin/env bash
# Stopping the server with I/O in flight neither crashes nor hangs: starts
# a load with many requests in flight (dcache-bench: 16 connections x
# depth 16 of 1 MiB mixed READs and WRITEs) against a DCACHE export, sends
# ganesha.nfsd SIGTERM in the middle of it, and checks that the server
# exits by itself within a bound, cleanly (Ganesha's own shutdown line in
# its log, no crash signal).
#
#   stop_in_flight_test.sh PATH/TO/dcache-bench
#
# Runs inside with_server.sh (env DCACHE_SERVER, DCACHE_PID, DCACHE_LOG).
set -euo pipefail
prog=${0##*/}

if [ "${1:-}" != --inside ]; then
  [ $# -eq 1 ] || { echo "usage: $prog PATH/TO/dcache-bench" >&2; exit 2; }
  here=$(cd "$(dirname "$0")" && pwd)
  DCACHE_E2E_SERVER_STOPS=1 exec "$here/with_server.sh" -- "$here/$prog" --inside "$(realpath "$1")"
fi
bench=$2
: "${DCACHE_SERVER:?run me through with_server.sh}" "${DCACHE_PID:?}" "${DCACHE_LOG:?}"

"$bench" url="nfs://$DCACHE_SERVER/dcache" rw=rw rwmixread=60 bs=1M numjobs=16 iodepth=16 \
  size=64M time_based=1 runtime=30 filename=stop --json /dev/null --no-progress \
  >/dev/null 2>&1 &
load=$!
# Let the load build up: wait for the plugin to have served some WRITEs.
for ((i = 0; i < 100; i++)); do
  [ "$(find "$DCACHE_MNT/dcache" -name 'stop*' -size +1M 2>/dev/null | head -n1)" ] && break
  sleep 0.1
done
sleep 1
echo "$prog: SIGTERM to ganesha.nfsd (pid $DCACHE_PID) with the load running"
start=$(date +%s%N)
kill -TERM "$DCACHE_PID"
# The harness is the server's parent and reaps it; a zombie means it exited.
exited=0
for ((i = 0; i < 600; i++)); do
  state=$(awk '{print $3}' "/proc/$DCACHE_PID/stat" 2>/dev/null || echo gone)
  if [ "$state" = Z ] || [ "$state" = gone ]; then exited=1; break; fi
  sleep 0.1
done
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
kill "$load" 2>/dev/null || true
wait "$load" 2>/dev/null || true

status=0
if [ "$exited" = 1 ]; then
  echo "ok: ganesha.nfsd exited ${elapsed_ms} ms after SIGTERM"
else
  echo "FAIL: ganesha.nfsd still running 60 s after SIGTERM (hang)"; status=1
fi
if grep -q "NFS EXIT: stopping NFS service" "$DCACHE_LOG"; then
  echo "ok: Ganesha logged its orderly shutdown"
else
  echo "FAIL: no orderly shutdown line in $DCACHE_LOG"; status=1
fi
if grep -qiE "SIGSEGV|SIGABRT|Segmentation|core dumped|assert" "$DCACHE_LOG"; then
  echo "FAIL: crash signs in the log:"; grep -iE "SIGSEGV|SIGABRT|Segmentation|core dumped|assert" "$DCACHE_LOG" | head; status=1
fi
exit $status
