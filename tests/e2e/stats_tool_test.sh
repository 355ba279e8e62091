#!/usr/bin/env bash
# tools/dcache-stats against a real server: the counters it prints are the
# plugin's (bytes moved through /dcache by a real client), --reset zeroes
# them, and without a reachable bus it fails with a clear message.
#
#   stats_tool_test.sh        (runs itself through with_server.sh)
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != --inside ]; then
  exec "$here/with_server.sh" -- "$here/$prog" --inside
fi
: "${DCACHE_SERVER:?run me through with_server.sh}"
tool=$here/../../tools/dcache-stats
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passes=0 failures=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
field() {  # JSON file, export id, counter -> value (0 when absent)
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get(sys.argv[2], {}).get(sys.argv[3], 0))' "$@"
}

head -c 2000000 /dev/urandom >"$work/data"
nfs-cp "$work/data" "nfs://$DCACHE_SERVER/dcache/stats?version=3" >/dev/null
nfs-cat "nfs://$DCACHE_SERVER/dcache/stats?version=3" >"$work/back"
cmp -s "$work/data" "$work/back" && pass "2000000 bytes round-trip through /dcache" || fail "round trip"

"$tool" --json >"$work/s1.json" && pass "--json exits 0" || fail "--json failed"
[ "$(field "$work/s1.json" 2 write_bytes)" = 2000000 ] && pass "write_bytes = 2000000" ||
  fail "write_bytes = $(field "$work/s1.json" 2 write_bytes)"
[ "$(field "$work/s1.json" 2 read_bytes)" = 2000000 ] && pass "read_bytes = 2000000" ||
  fail "read_bytes = $(field "$work/s1.json" 2 read_bytes)"
# The table whole first: grep -q leaves at its first match, and the tool
# writing the rest into the closed pipe must not fail the check.
"$tool" --export 2 >"$work/table" && grep -qE '^  write +[0-9]+ +avg' "$work/table" &&
  pass "table shows WRITE service times" || fail "no write line: $(cat "$work/table")"
# A reader that is gone before the tool writes (true exits at once).
rc=0
"$tool" --export 2 2>"$work/pipe_err" | true || rc=$?
[ "$rc" = 0 ] && [ ! -s "$work/pipe_err" ] && pass "output into a closed pipe: no error" ||
  fail "output into a closed pipe: exit $rc, $(cat "$work/pipe_err")"
[ "$("$tool" --export 1 --json)" = "{}" ] && pass "export 1 (plain VFS) has no DCACHE counters" || fail "export 1 shown"

"$tool" --reset >/dev/null
"$tool" --json >"$work/s2.json"
[ "$(field "$work/s2.json" 2 write_bytes)" = 0 ] && pass "--reset zeroes the counters" ||
  fail "after --reset write_bytes = $(field "$work/s2.json" 2 write_bytes)"

if DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent "$tool" >/dev/null 2>"$work/err"; then
  fail "succeeded without a bus"
else
  grep -q "cannot reach ganesha.nfsd over DBus" "$work/err" && pass "no bus: clear error" || fail "error text: $(cat "$work/err")"
fi

echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
