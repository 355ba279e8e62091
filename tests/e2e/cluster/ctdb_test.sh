#!/usr/bin/env bash
# CTDB failover of a DCACHE direct export, against the real processes: three
# ganesha.nfsd heads (tests/e2e/roll/heads.sh: network and private mount
# namespaces, one shared XFS) export the same directory as Export_Id 2,
# DCACHE with IO_Cache_Read = IO_Cache_Write = direct, all three with the
# same EXPORT block; a ctdbd in each head's namespaces (ctdb.sh) holds one
# public address, 192.0.2.100, with CTDB's legacy 06.nfs/10.interface/60.nfs
# event scripts and the project's callout (deploy/ctdb/), which puts the
# head taking the address into Ganesha's grace period over DBus.
#
# Two NFSv3 clients in a namespace of their own write streams of records
# through the public address (dcache_e2e_failover: one FILE_SYNC, one
# UNSTABLE + COMMIT with the write verifier checked) and note every byte the
# server acknowledged. Mid-stream the holding head's cable is pulled (its
# port on the bridge goes down): CTDB moves the address to another head
# (timed), the callout's grace reaches that head's Ganesha, the clients
# reconnect and carry on past the end of grace. Then every acknowledged
# byte is read back through the address and compared: bytes acknowledged =
# bytes read back, and no client error besides reconnects and retries.
#
#   ctdb_test.sh DCACHE_E2E_FAILOVER DCACHE_STATS   (as root; DCACHE_PLUGIN set)
#
# DCACHE_GANESHA=6.5: the heads run that release's ganesha.nfsd chrooted;
# ctdbd, the callout and the clients are the machine's. Exit 77: a kernel
# feature the heads need is missing.
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# = 2 ] || { echo "usage: ${0##*/} DCACHE_E2E_FAILOVER DCACHE_STATS" >&2; exit 2; }
client_tool=$(realpath "$1")
stats_tool=$(realpath "$2")
# shellcheck source=../roll/heads.sh
. "$here/../roll/heads.sh"
# shellcheck source=ctdb.sh
. "$here/ctdb.sh"
# shellcheck source=common.sh
. "$here/common.sh"

public=192.0.2.100
client_ip=192.0.2.50
now_ms() { date +%s%3N; }
started=$SECONDS

on_exit() {
  local rc=$? n ns leftover
  trap - EXIT
  set +e
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -n "$heads_state" ]; then
    for n in 1 2 3; do
      [ -f "$heads_state/h$n/ctdb/ctdbd.out" ] || continue
      echo "--- h$n ctdbd, last lines:"
      grep -v 'CTDB_WAIT_UNTIL_RECOVERED\|wait for pending recoveries' "$heads_state/h$n/ctdb/ctdbd.out" |
        tail -n 12 | sed 's/^/  | /'
      echo "--- h$n callout.log:"
      tail -n 8 "$heads_state/h$n/ctdb/callout.log" 2>/dev/null | sed 's/^/  | /'
      [ -z "${DCACHE_E2E_ARTIFACTS:-}" ] || {
        mkdir -p "$DCACHE_E2E_ARTIFACTS" &&
          cp "$heads_state/h$n/ganesha.log" "$DCACHE_E2E_ARTIFACTS/ctdb-h$n-ganesha.log" &&
          cp "$heads_state/h$n/ctdb/ctdbd.out" "$DCACHE_E2E_ARTIFACTS/ctdb-h$n-ctdbd.log"
      }
    done
    cat "$heads_state"/work/*.err "$heads_state"/work/*.events 2>/dev/null | tail -n 20 | sed 's/^/  client| /'
  fi
  for pid in "${heads_extra[@]}"; do srv_stop_pid "$pid" 5 client; done
  heads_extra=()
  ctdb_cleanup || { [ "$rc" != 0 ] || rc=5; }
  ns=${heads_bridge%-net}
  heads_cleanup || { [ "$rc" != 0 ] || rc=5; }
  # nothing left: no namespace of this run, no mount of its state, no ctdbd
  # process (ctdb_cleanup checked every process of theirs)
  if [ -n "$ns" ]; then
    leftover=$(ip netns list | grep -c "^$ns-" || true)
    [ "$leftover" = 0 ] || { echo "ctdb_test: $leftover network namespaces left" >&2; [ "$rc" != 0 ] || rc=5; }
  fi
  if [ -n "$heads_state" ] && grep -q " $heads_state" /proc/self/mountinfo; then
    echo "ctdb_test: mounts left under $heads_state" >&2
    [ "$rc" != 0 ] || rc=5
  fi
  [ "$rc" != 0 ] || echo "teardown: ctdbd, heads, namespaces and mounts gone"
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

heads_setup
heads_network
ctdb_require
st=$heads_state
work=$st/work
mnt=$st/mnt
mkdir -p "$work" "$mnt/shared/ctdb"

# --------------------------------------------------------------- heads --
# The grace period is on (Graceless = false), short: a head out of grace
# while clients of a moved address could still reclaim would be the bug
head_config() {  # N
  heads_conf_core "$1" | sed 's/^\( *\)Graceless = true;/\1Graceless = false;\n\1Grace_Period = 10;\n\1Lease_Lifetime = 10;/'
  shared_export direct direct
}
# each head in a second of its own: Ganesha's write verifier is its start
# time in seconds, and the UNSTABLE client must see it change at the move
for n in 1 2 3; do
  s=$(date +%s)
  while [ "$(date +%s)" = "$s" ]; do sleep 0.05; done
  head_start "$n" "$(head_config "$n")"
done
for n in 1 2 3; do head_wait "$n" /shared; done
pass "three heads serve /shared from one XFS ($heads_loopdev), release ${release:-4.3}"

export_block() { sed -n '/^EXPORT {/,/^}/p' "$(conf "$1")"; }
created() { grep -o 'DCACHE: export 2 (.*) created over VFS: .*' "$(log "$1")" | head -n 1; }
[ "$(export_block 1)" = "$(export_block 2)" ] && [ "$(export_block 1)" = "$(export_block 3)" ] &&
  pass "the same EXPORT block (Export_Id 2, DCACHE direct/direct) in every head's configuration" ||
  fail "the heads' EXPORT blocks differ"
for n in 1 2 3; do
  created "$n" | grep -q 'IO_Cache_Read = direct, IO_Cache_Write = direct,' &&
    pass "h$n: $(created "$n" | cut -c1-110)..." || fail "h$n: no 'created over VFS: IO_Cache_Read = direct, IO_Cache_Write = direct' line"
done
[ "$(created 1)" = "$(created 2)" ] && [ "$(created 1)" = "$(created 3)" ] &&
  pass "every head logs the same settings in force for export 2" || fail "the heads run different settings"
epochs=$(for n in 1 2 3; do grep -o -m1 'epoch [0-9a-f]*' "$(log "$n")"; done | sort -u | wc -l)
[ "$epochs" = 3 ] && pass "three different server epochs (write verifiers)" || fail "heads share an epoch"

# ---------------------------------------------------------------- CTDB --
ctdb_setup 3 "$public/24"
t=$(now_ms)
for n in 1 2 3; do ctdb_start "$n"; done
ctdb_wait_ready 60 || { fail "CTDB not ready"; exit 1; }
pass "CTDB: 3 nodes OK, $public up after $(($(now_ms) - t)) ms"
ctdb_in 1 ctdb event script list legacy | sed 's/^/  ctdb| /'
holder=$(ctdb_holder "$public")
leader=$(ctdb_pnn_head "$(ctdb_in 1 ctdb leader)")
echo "  $public on h$holder, leader (cluster lock) h$leader"
# The cluster lock lives on storage a head keeps reaching with its cable
# out (one kernel's XFS): a leader cut off keeps the lock and the others
# cannot take over (docs/cluster.md, "Under CTDB"). So the head that will be
# cut gives up the leader role first (`ctdb moveip` would do too, but it
# holds back takeover runs for 20 s, the failover among them)
ctdb_in "$holder" ctdb setleaderrole off >/dev/null
for ((i = 0; i < 200; i++)); do
  l=$(ctdb_in "$holder" ctdb leader 2>/dev/null || true)
  [ -n "$l" ] && [ "$l" != UNKNOWN ] && [ "$(ctdb_pnn_head "$l")" != "$holder" ] &&
    ctdb_in "$holder" ctdb nodestatus all >/dev/null 2>&1 && break
  sleep 0.1
done
[ "$i" -lt 200 ] && [ "$(ctdb_holder "$public")" = "$holder" ] &&
  pass "h$holder, holding $public, gave up the leader role: h$(ctdb_pnn_head "$l") leads" ||
  { fail "leader after setleaderrole off on h$holder: ${l:-none}, $public on h$(ctdb_holder "$public")"; exit 1; }
cl=$st/h$holder/ctdb/callout.log
grep -qE "takeip(-pre)? eth0 $public 24: grace 5:$public started" "$cl" &&
  pass "h$holder's callout started Ganesha's grace for $public at takeip" || fail "h$holder: no grace at takeip in $cl"
grep -q "recovery event 5 nodeid -1 ip $public" "$(log "$holder")" &&
  pass "h$holder's Ganesha took the grace event (5:$public) over DBus" || fail "h$holder's Ganesha logged no grace event"

# ------------------------------------------------------------- clients --
client_ns=${heads_bridge%-net}-client
ip netns add "$client_ns"
srv_netns+=("$client_ns")
ip -n "$client_ns" link set lo up
heads_attach "$client_ns" "$client_ip"
start_client() {  # NAME ARGS...
  local name=$1
  shift
  ip netns exec "$client_ns" setpriv --pdeathsig KILL -- "$client_tool" write server="$public" export=/shared \
    file="/ctdb/$name" out="$work" name="$name" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  heads_extra+=("$!")
}
start_client fsync stable=file_sync record=65536 interval_ms=5
start_client unstable stable=unstable record=40000 commit_every=8 interval_ms=5
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p; s/^$2=\([^ ]*\).*/\1/p" "$work/$1.status" 2>/dev/null | head -n 1; }
wait_acked() {  # NAME BYTES SECONDS: until NAME has BYTES acknowledged
  local deadline=$((SECONDS + $3))
  until [ "$(field "$1" acked_bytes)" -ge "$2" ] 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "client $1: ${2} bytes not acknowledged within $3 s" >&2; return 1; }
    sleep 0.1
  done
}
wait_acked fsync 1048576 30 && wait_acked unstable 1048576 30 || { fail "clients do not write"; exit 1; }
pass "two clients write through $public: FILE_SYNC and UNSTABLE+COMMIT records"
# the new holder resets the clients' connections at once only if it knows
# them: CTDB's tickle list (60.nfs records it at every monitor event, every
# node gets it every TickleUpdateInterval)
other=$((holder % 3 + 1))
for ((i = 0; i < 100; i++)); do
  [ "$(ctdb_in "$other" ctdb gettickles "$public" 2>/dev/null | grep -c "SRC: $client_ip:")" -ge 2 ] && break
  sleep 0.1
done
[ "$i" -lt 100 ] && pass "h$other knows the clients' connections to $public (ctdb gettickles)" ||
  fail "h$other has no tickles for $public"
wait_acked fsync 4194304 30 || fail "fsync client stalled before the move"

# -------------------------------------------------------- cable pulled --
acked_before=$(field fsync acked_bytes)
t0=$(now_ms)
ctdb_link "$holder" down
new=""
until [ -n "$new" ]; do
  for n in 1 2 3; do
    [ "$n" != "$holder" ] || continue
    ctdb_in "$n" ip -o -4 addr show dev eth0 | grep -q " $public/" && new=$n
  done
  [ $(($(now_ms) - t0)) -lt 30000 ] || break
  [ -n "$new" ] || sleep 0.05
done
t1=$(now_ms)
[ -n "$new" ] && pass "h$holder's cable out: $public moved to h$new in $((t1 - t0)) ms" ||
  { fail "$public did not move within 30 s"; ctdb_in "$other" ctdb status; exit 1; }
move_ms=$((t1 - t0))
ncl=$st/h$new/ctdb/callout.log
grace_on=""
for ((i = 0; i < 100; i++)); do
  grace_on=$(grep -E "takeip(-pre)? eth0 $public 24: grace 5:$public started" "$ncl" | tail -n 1 | cut -d' ' -f1)
  [ -z "$grace_on" ] || break
  sleep 0.1
done
[ -n "$grace_on" ] && pass "h$new's callout: Ganesha in grace for $public ($(grep -E "takeip(-pre)? eth0 $public" "$ncl" | tail -n 2 | cut -d' ' -f2- | tr '\n' ';'))" ||
  fail "h$new: no grace at takeip"
grep -q "recovery event 5 nodeid -1 ip $public" "$(log "$new")" &&
  pass "h$new's Ganesha: NFS Server Now IN GRACE, recovery event 5 ip $public" || fail "h$new's Ganesha logged no grace event"
# the end of grace, from the head itself (get_grace over DBus)
in_grace() {
  "$st/via" "h$new" dbus-send --system --print-reply --dest=org.ganesha.nfsd /org/ganesha/nfsd/admin \
    org.ganesha.nfsd.admin.get_grace | awk '$1 == "boolean" { print $2; exit }'
}
for ((i = 0; i < 300; i++)); do [ "$(in_grace)" = false ] && break; sleep 0.1; done
t2=$(now_ms)
[ "$i" -lt 300 ] && pass "h$new out of grace $((t2 - t1)) ms after the address came up" || fail "h$new still in grace after 30 s"
grace_end=$t2
# both clients carry on after grace: more acknowledged after its end
a_fsync=$(field fsync acked_bytes) a_unstable=$(field unstable acked_bytes)
wait_acked fsync $((a_fsync + 4194304)) 30 && wait_acked unstable $((a_unstable + 4194304)) 30 &&
  [ "$(field fsync last_ack_ms)" -gt "$grace_end" ] && [ "$(field unstable last_ack_ms)" -gt "$grace_end" ] &&
  pass "both clients continue after grace ($(field fsync acked_bytes) and $(field unstable acked_bytes) bytes acknowledged)" ||
  fail "clients do not continue after the move"
[ "$(field fsync acked_bytes)" -gt "$acked_before" ] || fail "nothing acknowledged after the move"

# ------------------------------------------------------ stop and verify --
touch "$work/stop"
for pid in "${heads_extra[@]}"; do
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || fail "a client exited with status $rc"
done
heads_extra=()
for c in fsync unstable; do
  echo "  $c| $(cat "$work/$c.out")"
  sed 's/^[0-9]* /  '"$c"' event| /' "$work/$c.events"
  [ "$(field "$c" errors)" = 0 ] && [ ! -s "$work/$c.err" ] &&
    pass "$c: no client error (reconnects $(field "$c" reconnects), retries $(field "$c" retries))" ||
    fail "$c: errors $(field "$c" errors): $(cat "$work/$c.err")"
  [ "$(field "$c" reconnects)" -ge 1 ] && pass "$c: libnfs reconnected to $public and sent the request in flight again" ||
    fail "$c: no reconnect seen"
  echo "  $c: longest wait for an acknowledgement $(field "$c" max_gap_ms) ms"
done
[ "$(field unstable verifier_changes)" -ge 1 ] &&
  pass "unstable: the COMMIT verifier changed at the move; $(field unstable rewritten) extent(s) written before it were written again" ||
  fail "unstable: no verifier change seen at the move"
for c in fsync unstable; do
  out=$(ip netns exec "$client_ns" "$client_tool" verify server="$public" export=/shared file="/ctdb/$c" \
    acked="$work/$c.acked" 2>&1) && rc=0 || rc=$?
  if [ "$rc" = 0 ] && [[ $out =~ ^acknowledged\ ([0-9]+)\ bytes.*read\ back\ ([0-9]+)\ bytes\ identical$ ]] &&
     [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
    pass "$c through $public (h$new): bytes acknowledged = bytes read back = ${BASH_REMATCH[1]}"
  else
    fail "$c: $out"
  fi
done

# ------------------------------------------------- what served the I/O --
counter() {  # N NAME...: sum of export 2's counters on hN
  "$st/via" "h$1" "$stats_tool" --json --export 2 >"$work/stats.json"
  shift
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])).get("2", {}); print(sum(d.get(k, 0) for k in sys.argv[2:]))' \
    "$work/stats.json" "$@"
}
# the old head is cut off from the clients, not from its own bus
for n in "$holder" "$new"; do
  w=$(counter "$n" write_direct write_split) r=$(counter "$n" read_direct)
  [ "$w" -gt 0 ] && pass "h$n served DCACHE direct WRITEs (write_direct+write_split $w, read_direct $r)" ||
    fail "h$n: no direct WRITE counted"
done
[ "$(counter "$new" read_direct)" -gt 0 ] && pass "h$new served the read-back direct" || fail "h$new: no direct READ"

ctdb_in "$new" ctdb status | sed 's/^/  ctdb| /' | head -n 4

# ------------------------------------------------------ cable plugged back --
# The cut-off head kept the address on its eth0 (nobody told it to let go):
# once back, CTDB must take it off there, so that one head answers for it
holders() {  # the heads whose eth0 carries the address
  local n
  for n in 1 2 3; do ctdb_in "$n" ip -o -4 addr show dev eth0 | grep -q " $public/" && echo "h$n"; done | tr '\n' ' '
}
echo "  with the cable out, $public is on: $(holders)"
t3=$(now_ms)
ctdb_link "$holder" up
for ((i = 0; i < 300; i++)); do
  ctdb_in "$new" ctdb nodestatus all >/dev/null 2>&1 && [ "$(holders)" = "h$new " ] && break
  sleep 0.1
done
[ "$i" -lt 300 ] && pass "cable back: h$holder rejoined and dropped $public within $(($(now_ms) - t3)) ms; it stays on h$new" ||
  fail "cable back: after 30 s, $public on: $(holders); $(ctdb_in "$new" ctdb status | sed -n 2,4p | tr -s ' \n' ' ')"
grep -q "releaseip eth0 $public 24: " "$st/h$holder/ctdb/callout.log" &&
  pass "h$holder's callout at its releaseip: $(grep "releaseip eth0 $public 24: " "$st/h$holder/ctdb/callout.log" | tail -n 1 | cut -d: -f4-)" ||
  echo "  h$holder: no releaseip event (the address went with 10.interface's check)"
ip netns exec "$client_ns" timeout 10 nfs-ls "nfs://$public/shared/ctdb?version=3" >"$work/ls" 2>&1 &&
  pass "a new client lists /shared/ctdb through $public after the cable is back" || fail "nfs-ls after the cable is back: $(cat "$work/ls")"

echo "summary: release ${release:-4.3}; address move ${move_ms} ms; grace on h$new from $grace_on, out of grace" \
  "$((grace_end - t1)) ms after the move; clients' longest wait $(field fsync max_gap_ms)/$(field unstable max_gap_ms) ms;" \
  "test $((SECONDS - started)) s so far"
echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
