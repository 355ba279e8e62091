#!/usr/bin/env bash
# deploy/ctdb/ganesha-dcache-callout on its own, as CTDB's 60.nfs and 06.nfs
# call it, against a stand-in dbus-send (it records each call and answers as
# Ganesha 4.3 and 6.5 do) and a stand-in ganesha.nfsd (a sleep under that
# name): the operations it registers, the shares it lists, its health check,
# the grace calls at takeip-pre/takeip/releaseip and their failures, startup
# with a start command. Any user, no daemons.
#
#   callout_test.sh
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
callout=$here/../../../deploy/ctdb/ganesha-dcache-callout
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dcache-callout.XXXXXX")
fake_pid=""
cleanup() {
  [ -z "$fake_pid" ] || kill "$fake_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

passes=0 failures=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() {  # WHAT WANT GOT
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: want '$2', got '$3'"; fi
}

mkdir -p "$tmp/bin" "$tmp/state"
# dbus-send: appends its arguments (and the bus) to calls, answers from
# $tmp/reply.METHOD (or fails when $tmp/dbus-down exists)
cat >"$tmp/bin/dbus-send" <<EOF
#!/bin/sh
echo "\${DBUS_SYSTEM_BUS_ADDRESS:-system} \$*" >>"$tmp/calls"
[ ! -e "$tmp/dbus-down" ] || { echo "Error org.freedesktop.DBus.Error.ServiceUnknown: no Ganesha" >&2; exit 1; }
for a; do case \$a in org.ganesha.nfsd.admin.*) m=\${a#org.ganesha.nfsd.admin.} ;; esac; done
cat "$tmp/reply.\$m"
EOF
chmod +x "$tmp/bin/dbus-send"
cat >"$tmp/reply.get_grace" <<'EOF'
method return time=1 sender=:1.0 -> destination=:1.2 serial=3 reply_serial=2
   boolean false
   boolean true
   string "get grace success"
EOF
cat >"$tmp/reply.grace" <<'EOF'
method return time=1 sender=:1.0 -> destination=:1.2 serial=3 reply_serial=2
   boolean true
   string "Started grace period"
EOF
cat >"$tmp/ganesha.conf" <<'EOF'
NFS_CORE_PARAM { Mount_Path_Pseudo = true; }
EXPORT {
  Export_Id = 2; Path = "/srv/shared"; Pseudo = /shared;
  FSAL { Name = DCACHE; IO_Cache_Write = direct; FSAL { Name = VFS; } }
}
EXPORT { Export_Id = 3;
  path=/srv/other ;   # Path = /srv/commented
}
EOF
cat >"$tmp/options" <<EOF
GANESHA_CONF=$tmp/ganesha.conf
GANESHA_PIDFILE=$tmp/ganesha.pid
GANESHA_DBUS_ADDRESS=unix:path=$tmp/bus
GANESHA_CALLOUT_LOG=$tmp/callout.log
GANESHA_STARTUP_WAIT=5
EOF
run() {  # OP ARGS...: the callout as 60.nfs runs it; output in $out, status in $rc
  rc=0
  out=$(PATH="$tmp/bin:$PATH" GANESHA_CALLOUT_OPTIONS="$tmp/options" CTDB_NFS_CALLOUT_STATE_DIR="$tmp/state" \
    "$callout" "$@" 2>&1) || rc=$?
}
calls() { if [ -f "$tmp/calls" ]; then wc -l <"$tmp/calls"; else echo 0; fi; }
start_fake() {  # a process whose comm is ganesha.nfsd, its pid in the pid file
  cp "$(command -v sleep)" "$tmp/ganesha.nfsd"
  "$tmp/ganesha.nfsd" 600 &
  fake_pid=$!
  echo "$fake_pid" >"$tmp/ganesha.pid"
}

run register
for o in startup shutdown stop start check takeip-pre takeip releaseip-pre releaseip monitor-pre monitor-post \
         monitor-list-shares; do
  grep -qx -- "$o" <<<"$out" || fail "register does not list $o"
done
expect "register: every operation 60.nfs and 06.nfs call" 0 "$rc"
run monitor-list-shares
expect "monitor-list-shares: each EXPORT's Path, quoted or not, comments and Mount_Path_Pseudo left out" \
  "/srv/other /srv/shared" "$(echo "$out" | tr '\n' ' ' | sed 's/ $//')"

run check nfs
expect "check without ganesha.nfsd: fails" 1 "$rc"
grep -q "ganesha.nfsd is not running" <<<"$out" && pass "check says why" || fail "check: $out"
run takeip eth0 192.0.2.100 24
expect "takeip without ganesha.nfsd: fails (no address on a head that cannot serve it)" 1 "$rc"
run releaseip eth0 192.0.2.100 24
expect "releaseip without ganesha.nfsd: nothing to release, succeeds" 0 "$rc"
expect "  ... and calls nothing" 0 "$(calls)"

start_fake
run check nfs
expect "check with ganesha.nfsd answering get_grace: succeeds, silently" "0 " "$rc $out"
grep -q "^unix:path=$tmp/bus .*org.ganesha.nfsd.admin.get_grace" "$tmp/calls" &&
  pass "check asks get_grace on GANESHA_DBUS_ADDRESS" || fail "check's DBus call: $(cat "$tmp/calls")"
touch "$tmp/dbus-down"
run check nfs
expect "check with the bus not answering: fails" 1 "$rc"
rm "$tmp/dbus-down"

: >"$tmp/calls"
run takeip-pre eth0 192.0.2.100 24
expect "takeip-pre: succeeds" 0 "$rc"
grep -q "org.ganesha.nfsd.admin.grace string:5:192.0.2.100$" "$tmp/calls" &&
  pass "takeip-pre: grace 5:IP (take IP) over DBus" || fail "takeip-pre's call: $(cat "$tmp/calls")"
run takeip eth0 192.0.2.100 24
expect "takeip after takeip-pre: no second grace call (it would load the clients twice)" "0 1" "$rc $(calls)"
run takeip eth0 192.0.2.101 24
expect "takeip without takeip-pre (06.nfs not enabled): grace there" "0 2" "$rc $(calls)"
grep -q "string:5:192.0.2.101$" "$tmp/calls" && pass "  ... 5:192.0.2.101" || fail "takeip's call: $(cat "$tmp/calls")"
run releaseip eth0 192.0.2.100 24
expect "releaseip: succeeds" 0 "$rc"
grep -q "string:2:192.0.2.100$" "$tmp/calls" && pass "releaseip: grace 2:IP (release IP)" ||
  fail "releaseip's call: $(cat "$tmp/calls")"

sed -i 's/boolean true/boolean false/' "$tmp/reply.grace"
run takeip eth0 192.0.2.102 24
expect "takeip refused by Ganesha: fails" 1 "$rc"
grep -q "refused" <<<"$out" && pass "  ... saying so" || fail "takeip refused: $out"
grep -q "takeip eth0 192.0.2.102 24: FAILED" "$tmp/callout.log" && pass "  ... and the log has it" ||
  fail "callout.log: $(cat "$tmp/callout.log")"

run stop nlockmgr
expect "stop nlockmgr (statd-callout): nothing to do" 0 "$rc"
run stop nfs
expect "stop nfs without GANESHA_STOP_CMD: left to the service manager" 0 "$rc"
run bogus
expect "an unknown operation: usage, exit 2" 2 "$rc"

# startup with a start command: waits until Ganesha serves, and forgets
# what takeip-pre noted before
sed -i 's/boolean false/boolean true/' "$tmp/reply.grace"
run takeip-pre eth0 192.0.2.103 24
[ -e "$tmp/state/grace-192.0.2.103" ] || fail "takeip-pre noted nothing"
kill "$fake_pid"
wait "$fake_pid" 2>/dev/null || true
fake_pid=""
rm -f "$tmp/ganesha.pid"
echo "GANESHA_START_CMD='(sleep 1; \"$tmp/ganesha.nfsd\" 600 & echo \$! >\"$tmp/ganesha.pid\") &'" >>"$tmp/options"
run startup
expect "startup: runs GANESHA_START_CMD and waits until ganesha.nfsd answers" 0 "$rc"
[ -s "$tmp/ganesha.pid" ] && fake_pid=$(cat "$tmp/ganesha.pid")
grep -q "startup : serving (pid $fake_pid)" "$tmp/callout.log" && pass "  ... logged serving" ||
  fail "callout.log: $(cat "$tmp/callout.log")"
[ ! -e "$tmp/state/grace-192.0.2.103" ] && pass "startup forgets takeip-pre's notes" || fail "state left at startup"

echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
