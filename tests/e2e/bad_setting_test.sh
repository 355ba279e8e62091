#!/usr/bin/env bash
# e2e_bad_setting: a server with one DCACHE export holding a bad value
# (IO_Cache_Read = fast) and one with an unknown key (IO_Cache_Wrte) must
# come up, serve /vfs and /dcache, refuse exactly the two bad exports, and
# say in ganesha.log which export, which setting, which value and what is
# allowed. Also checks the log shows the module loaded and /dcache created.
#
# Usage: DCACHE_PLUGIN=.../libfsaldcache.so bad_setting_test.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" != --inner ]; then
  exec "$here/with_server.sh" --exports "$here/bad_setting_exports.conf" -- "$here/bad_setting_test.sh" --inner
fi

# ---- inside the harness: DCACHE_SERVER, DCACHE_LOG, DCACHE_PID are set ----
failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
srv=${DCACHE_SERVER:?run through with_server.sh}
log=${DCACHE_LOG:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if kill -0 "$DCACHE_PID" 2>/dev/null; then
  pass "ganesha.nfsd (pid $DCACHE_PID) is running"
else
  fail "ganesha.nfsd (pid $DCACHE_PID) is not running"
fi

# The good exports serve I/O: written over NFSv3 (nfs-cp over NFSv4 fails
# inside libnfs 4.0, whose NFSv4 WRITE cannot carry 4000 bytes), read back
# over NFSv3 and NFSv4.
head -c 100003 /dev/urandom >"$work/data"
for exp in vfs dcache; do
  if timeout 60 nfs-cp "$work/data" "nfs://$srv/$exp/probe?version=3" >/dev/null 2>"$work/err"; then
    for ver in 3 4; do
      if timeout 60 nfs-cat "nfs://$srv/$exp/probe?version=$ver" >"$work/back" 2>"$work/err" &&
         cmp -s "$work/data" "$work/back"; then
        pass "/$exp serves a 100003-byte round trip (read over NFSv$ver)"
      else
        fail "/$exp does not read back over NFSv$ver: $(tr '\n' ' ' <"$work/err")"
      fi
    done
  else
    fail "/$exp refuses a write over NFSv3: $(tr '\n' ' ' <"$work/err")"
  fi
done

# The bad exports are absent: no MOUNT (v3), no pseudo-fs entry (v4).
root_v4=$(timeout 30 nfs-ls "nfs://$srv/?version=4" 2>&1) || true
if grep -qw vfs <<<"$root_v4" && grep -qw dcache <<<"$root_v4"; then
  pass "pseudo root lists vfs and dcache"
else
  fail "pseudo root listing lacks vfs/dcache: $root_v4"
fi
for bad in bad_value bad_key; do
  if grep -qw "$bad" <<<"$root_v4"; then fail "/$bad appears in the NFSv4 pseudo fs"; else pass "/$bad is not in the NFSv4 pseudo fs"; fi
  if timeout 30 nfs-ls "nfs://$srv/$bad/?version=3" >/dev/null 2>&1; then
    fail "/$bad can be mounted over NFSv3"
  else
    pass "/$bad cannot be mounted over NFSv3"
  fi
  if timeout 30 nfs-ls "nfs://$srv/$bad/?version=4" >/dev/null 2>&1; then
    fail "/$bad can be listed over NFSv4"
  else
    pass "/$bad cannot be reached over NFSv4"
  fi
done

# The log names the export, the setting, the value and what is allowed.
check_log() {  # description, then grep -E patterns that one line must all match
  local what=$1 line
  shift
  line=$(grep -i -E -- "$1" "$log" || true)
  shift
  for pat in "$@"; do line=$(grep -i -E -- "$pat" <<<"$line" || true); done
  if [ -n "$line" ]; then pass "log: $what: $(head -n1 <<<"$line" | sed 's/^.*\] //')"; else fail "log has no line for: $what"; fi
}
check_log "bad value refused, with export, setting, value and choices" \
  'IO_Cache_Read' 'export 21|bad_value' '"?fast"?' 'buffered' 'dontcache' 'direct'
check_log "unknown key reported" 'IO_Cache_Wrte'
check_log "export with unknown key refused" 'export 22|bad_key' 'refused|error'
check_log "module loaded" 'DCACHE' 'loaded'
check_log "export /dcache created" 'DCACHE' 'export 2 ' 'created'
if grep -E 'DCACHE: export (21|22) .*created' "$log" >/dev/null; then
  fail "log says a bad export was created"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; ganesha.log: $log" >&2
  exit 1
fi
echo "all checks passed"
