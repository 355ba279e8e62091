#!/usr/bin/env bash
# Live reconfiguration: a DCACHE export's settings change with SIGHUP,
# without a restart, and a bad value on reload is refused while the export
# keeps serving with the settings it had.
#
#   live_update_test.sh        (runs itself through with_server.sh)
#
# Evidence is the plugin's own counters over DBus: nfs-cp writes UNSTABLE
# over NFSv3, so WRITEs answered FILE_SYNC ("raised") appear only once
# IO_Cache_Write = direct_file_sync is in force.
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != --inside ]; then
  exec "$here/with_server.sh" -- "$here/$prog" --inside
fi
: "${DCACHE_STATE:?run me through with_server.sh}" "${DCACHE_PID:?}" "${DCACHE_LOG:?}"
conf=$DCACHE_STATE/ganesha.conf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passes=0 failures=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

counter() {  # export 2's counter <name> (0 when not yet counted)
  "$here/../../tools/dcache-stats" --json --export 2 |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("2", {}).get(sys.argv[1], 0))' "$1"
}
write_file() {  # name
  nfs-cp "$work/data" "nfs://$DCACHE_SERVER/dcache/$1?version=3" >/dev/null &&
    cmp -s "$work/data" "$DCACHE_MNT/dcache/$1"
}
# shellcheck source=sighup.sh
. "$here/sighup.sh"
reload() { sighup_and_wait 'Export 2 updated|update refused'; }

head -c 3000000 /dev/urandom >"$work/data"

write_file before || fail "write before the reload"
r0=$(counter writes_raised_stable)
[ "$r0" = 0 ] && pass "buffered: no WRITE raised to FILE_SYNC ($r0)" || fail "buffered raised $r0 WRITEs"

sed -i 's/FSAL { Name = DCACHE; FSAL { Name = VFS; } }/FSAL { Name = DCACHE; IO_Cache_Write = direct_file_sync; IO_Workers_Max = 1; FSAL { Name = VFS; } }/' "$conf"
grep -q 'IO_Cache_Write = direct_file_sync' "$conf" || fail "could not edit $conf"
reload || fail "no sign of the reload in the log"
grep -q 'DCACHE: export 2 .* updated: .*IO_Cache_Write = direct_file_sync' "$DCACHE_LOG" &&
  pass "log: export 2 updated to direct_file_sync" || fail "no 'updated' line naming direct_file_sync"
grep -q 'DCACHE: export 2 .* updated: .*IO_Workers_Max = 1' "$DCACHE_LOG" &&
  ! grep -q 'IO_Workers_Max = 1 not applied' "$DCACHE_LOG" &&
  pass "log: IO_Workers_Max = 1 applied live" || fail "IO_Workers_Max = 1 not applied: $(grep -m1 'IO_Workers_Max' "$DCACHE_LOG")"
write_file after || fail "write after the reload"
r1=$(counter writes_raised_stable)
[ "$r1" -gt "$r0" ] && pass "direct_file_sync in force without a restart: $((r1 - r0)) WRITEs answered FILE_SYNC" ||
  fail "no WRITE raised after the reload ($r0 -> $r1)"
f1=$(counter syncs_fsync)
[ "$f1" -ge "$((r1 - r0))" ] && pass "one fsync per raised WRITE ($f1)" || fail "fsyncs $f1 < raised $((r1 - r0))"

sed -i 's/IO_Cache_Write = direct_file_sync;/IO_Cache_Write = fastest;/' "$conf"
reload || fail "no sign of the second reload in the log"
grep -q 'IO_Cache_Write = "fastest" is not valid; allowed: .*update refused, the export keeps its current settings' "$DCACHE_LOG" &&
  pass "log: the bad value is refused and named" || fail "no refusal line for IO_Cache_Write = fastest"
write_file bad || fail "export 2 stopped serving after a refused update"
r2=$(counter writes_raised_stable)
[ "$r2" -gt "$r1" ] && pass "the previous settings stay in force: $((r2 - r1)) more WRITEs raised" ||
  fail "settings changed by a refused update ($r1 -> $r2)"
[ "$(cat /proc/"$DCACHE_PID"/comm 2>/dev/null)" = ganesha.nfsd ] && pass "server still running" || fail "server gone"

echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
