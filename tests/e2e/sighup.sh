# shellcheck shell=bash
# Sourced by the end-to-end scripts that reload ganesha.nfsd's
# configuration (run inside with_server.sh: DCACHE_PID, DCACHE_LOG set).
#
# sighup_and_wait PATTERN: sends SIGHUP and waits up to 10 s until the log
# holds one more line matching the grep -E PATTERN than before; status 1 if
# none came.
sighup_and_wait() {
  local before after i
  before=$(grep -c -E -- "$1" "$DCACHE_LOG" || true)
  kill -HUP "$DCACHE_PID"
  for ((i = 0; i < 100; i++)); do
    after=$(grep -c -E -- "$1" "$DCACHE_LOG" || true)
    [ "$after" -gt "$before" ] && return 0
    sleep 0.1
  done
  return 1
}
