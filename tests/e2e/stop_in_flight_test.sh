#!/usr/bin/env bash
# Stopping the server with I/O in flight neither crashes nor hangs: starts
# a load with many requests in flight (dcache-bench: 16 connections x
# depth 16 of 1 MiB mixed READs and WRITEs) against a DCACHE export, sends
# ganesha.nfsd SIGTERM in the middle of it, and checks that the server
# exits by itself within a bound, cleanly (Ganesha's own shutdown line in
# its log, no crash signal). The load must be running and served when the
# signal comes (the bench alive, export 2's READ and WRITE counters above
# zero), or the test fails.
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
# Let the load build up: until the plugin has served READs and WRITEs of
# it (the bench lays its files out first), for at most 20 s.
served() {  # prints export 2's READ and WRITE counts
  "$(dirname "$0")/../../tools/dcache-stats" --json --export 2 |
    python3 -c 'import json, sys; e = json.load(sys.stdin).get("2", {}); print(e.get("reads", 0), e.get("writes", 0))'
}
reads=0 writes=0
for ((i = 0; i < 200; i++)); do
  read -r reads writes <<<"$(served)"
  [ "${reads:-0}" -gt 0 ] && [ "${writes:-0}" -gt 0 ] && break
  sleep 0.1
done
sleep 1
# The load must be running, and the plugin serving it, when the signal
# comes: the bench still runs, and export 2 counts READs and WRITEs.
status=0
if kill -0 "$load" 2>/dev/null; then
  echo "ok: the load runs"
else
  echo "FAIL: the load exited before SIGTERM"; status=1
fi
if [ "${reads:-0}" -gt 0 ] && [ "${writes:-0}" -gt 0 ]; then
  echo "ok: the plugin served $reads READs and $writes WRITEs before SIGTERM"
else
  echo "FAIL: the plugin served ${reads:-0} READs and ${writes:-0} WRITEs before SIGTERM"; status=1
fi
echo "$prog: SIGTERM to ganesha.nfsd (pid $DCACHE_PID) with the load running"
start=$(date +%s%N)
kill -TERM "$DCACHE_PID"
# The harness is the server's parent and reaps it; a zombie means it
# exited, and so does a pid that is no longer ganesha.nfsd's (once reaped,
# the pid may soon be another process's: pid_max is 32768).
exited=0
for ((i = 0; i < 600; i++)); do
  state=$(awk '{print $3}' "/proc/$DCACHE_PID/stat" 2>/dev/null || echo gone)
  [ "$(cat "/proc/$DCACHE_PID/comm" 2>/dev/null)" = ganesha.nfsd ] || state=gone
  if [ "$state" = Z ] || [ "$state" = gone ]; then exited=1; break; fi
  sleep 0.1
done
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
kill "$load" 2>/dev/null || true
wait "$load" 2>/dev/null || true

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
