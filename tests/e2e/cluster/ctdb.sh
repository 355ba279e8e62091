# shellcheck shell=bash
# Sourced by the CTDB tests after tests/e2e/roll/heads.sh: one ctdbd (the
# machine's CTDB, Debian 12's 4.17, also when the heads run another
# release's ganesha.nfsd chrooted) per head, in that head's network and
# mount namespaces, so that a public address CTDB puts on the head's eth0 is
# one its ganesha.nfsd answers on. Per head hN, under $heads_state/hN/ctdb/:
#   etc/   bound on /etc/ctdb in hN's mount namespace: ctdb.conf, nodes,
#          public_addresses, ctdb.tunables, script.options,
#          ganesha-dcache-callout.options, Debian's functions file, and
#          events/legacy/ holding links to the enabled event scripts
#   var/   bound on /var/lib/ctdb (CTDB's databases and script state)
#   log.ctdb (ctdbd's log), ctdbd.out (its standard output and error),
#   callout.log (one line per callout operation)
# /run/ctdb (ctdbd's socket) is in the head's private /run. Nothing is bound
# or written on the host's /etc/ctdb or /var/lib/ctdb. The cluster lock is a
# file on the heads' shared XFS ($heads_state/mnt/.ctdb/reclock).
#
#   ctdb_setup HEADS IP/BITS  the files of heads 1..HEADS: nodes 192.0.2.11
#                             ..., one public address IP/BITS on eth0, the
#                             project's callout (deploy/ctdb/) with its check
#                             files, legacy scripts 00.ctdb, 06.nfs,
#                             10.interface and 60.nfs enabled, and tunables
#                             that notice a dead node in about 3 s
#   ctdb_start N              ctdbd -i for head hN (after head_start N), a
#                             direct child of the test, stopped by its pid
#   ctdb_in N CMD [ARGS...]   CMD in hN's namespaces (ctdb, ip, ...)
#   ctdb_wait_ready SECONDS   until every node is OK and the public address is
#                             on one head's eth0
#   ctdb_holder IP            the head (N) whose eth0 carries IP now, or
#                             nothing
#   ctdb_pnn_head PNN         the head N of CTDB node PNN (the nodes file order)
#   ctdb_link N up|down       hN's port on the heads' bridge: down is a cable
#                             pulled (hN's eth0 loses its carrier; CTDB's
#                             10.interface cannot bring it back up)
#   ctdb_cleanup              stops every ctdbd (ctdb shutdown, then by its
#                             pid); returns 1 and names any process of theirs
#                             still alive (then killed)
# The caller's EXIT trap calls ctdb_cleanup before heads_cleanup.
# shellcheck disable=SC2317  # functions run from the caller and its trap
# shellcheck disable=SC2154  # heads_* come from heads.sh

ctdb_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
ctdb_callout=$ctdb_top/deploy/ctdb/ganesha-dcache-callout
ctdb_checks=$ctdb_top/deploy/ctdb/nfs-checks-ganesha.d
ctdb_pids=()   # ctdbd of each head
ctdb_heads=0
ctdb_public=""

ctdb_require() {
  local tool
  for tool in ctdbd ctdb ethtool iptables ss dbus-send rpcinfo; do
    command -v "$tool" >/dev/null || { echo "ctdb: '$tool' not found (run ci/setup.sh)" >&2; exit 2; }
  done
  if ! [ -d /etc/ctdb ] || ! [ -d /var/lib/ctdb ] || ! [ -r /etc/ctdb/functions ] || ! [ -r /etc/ctdb/notify.sh ] ||
     ! [ -d /usr/share/ctdb/events/legacy ]; then
    echo "ctdb: CTDB's files are missing (run ci/setup.sh)" >&2
    exit 2
  fi
}

ctdb_setup() {  # HEADS IP/BITS
  local heads=$1 n i dir s
  ctdb_heads=$heads ctdb_public=$2
  ctdb_require
  mkdir -p "$heads_state/mnt/.ctdb"
  for ((n = 1; n <= heads; n++)); do
    dir=$heads_state/h$n/ctdb
    mkdir -p "$dir/etc/events/legacy" "$dir/etc/events/notification" "$dir/var/volatile" "$dir/var/persistent" \
      "$dir/var/state"
    for ((i = 1; i <= heads; i++)); do echo "192.0.2.$((10 + i))"; done >"$dir/etc/nodes"
    echo "$ctdb_public eth0" >"$dir/etc/public_addresses"
    cat >"$dir/etc/ctdb.conf" <<EOF
[logging]
	location = file:$dir/log.ctdb
	log level = NOTICE
[cluster]
	# on the heads' shared filesystem; the node holding it leads
	cluster lock = $heads_state/mnt/.ctdb/reclock
	# the first election 3 s after start, not 5
	leader timeout = 3
[legacy]
	# a test machine shared with other work
	realtime scheduling = false
EOF
    # Keepalives every second, a node unreachable for 3 of them is
    # DISCONNECTED; monitor events (and the tickle lists of the connections
    # to the public addresses, which the new holder resets after a move)
    # every 2 s; after a recovery the next one may come 3 s later, not 10
    # (the startup event waits for that)
    cat >"$dir/etc/ctdb.tunables" <<'EOF'
KeepaliveInterval=1
KeepaliveLimit=3
MonitorInterval=2
TickleUpdateInterval=2
RerecoveryTimeout=3
EOF
    cat >"$dir/etc/script.options" <<EOF
CTDB_NFS_CALLOUT=$ctdb_callout
CTDB_NFS_CHECKS_DIR=$ctdb_checks
CTDB_RPCINFO_LOCALHOST=127.0.0.1
EOF
    cat >"$dir/etc/ganesha-dcache-callout.options" <<EOF
GANESHA_CONF=$heads_state/h$n/ganesha.conf
GANESHA_PIDFILE=$heads_state/h$n/ganesha.pid
GANESHA_DBUS_ADDRESS=unix:path=$heads_state/h$n/dbus/system_bus_socket
GANESHA_CALLOUT_LOG=$dir/callout.log
EOF
    # Debian's: the functions the event scripts source, and the
    # notification script ctdbd runs on node state changes
    cp /etc/ctdb/functions /etc/ctdb/notify.sh "$dir/etc/"
    for s in 00.ctdb 06.nfs 10.interface 60.nfs; do
      ln -s "/usr/share/ctdb/events/legacy/$s.script" "$dir/etc/events/legacy/$s.script"
    done
  done
}

ctdb_holder_pid() { sed -n 's/^holder=//p' "$heads_state/h$1/env"; }

ctdb_in() {  # N CMD...
  local n=$1
  shift
  nsenter --target "$(ctdb_holder_pid "$n")" --mount --net -- "$@"
}

ctdb_start() {  # N
  local n=$1 dir=$heads_state/h$1/ctdb
  # shellcheck disable=SC2016  # expanded by the inner shell
  ctdb_in "$n" sh -c 'mount --bind "$1" /etc/ctdb && mount --bind "$2" /var/lib/ctdb && mkdir -p /run/ctdb' \
    sh "$dir/etc" "$dir/var" || { echo "ctdb: h$n: could not bind its /etc/ctdb and /var/lib/ctdb" >&2; return 1; }
  # a simple command: $! is ctdbd's own pid (nsenter and setpriv exec it)
  nsenter --target "$(ctdb_holder_pid "$n")" --mount --net -- setpriv --pdeathsig KILL -- \
    ctdbd -i >"$dir/ctdbd.out" 2>&1 &
  ctdb_pids[n - 1]=$!
}

ctdb_holder() {  # IP
  local n
  for ((n = 1; n <= ctdb_heads; n++)); do
    ctdb_in "$n" ip -o -4 addr show dev eth0 2>/dev/null | grep -q " ${1}/" && { echo "$n"; return 0; }
  done
  return 0
}

ctdb_pnn_head() { echo $(($1 + 1)); }

ctdb_wait_ready() {  # SECONDS
  local deadline=$((SECONDS + $1)) n ok
  while :; do
    ok=1
    for ((n = 1; n <= ctdb_heads; n++)); do
      kill -0 "${ctdb_pids[n - 1]}" 2>/dev/null || { echo "ctdb: h$n: ctdbd exited" >&2; tail -n 20 "$heads_state/h$n/ctdb/ctdbd.out" >&2; return 1; }
    done
    # every node OK in node 1's view (nodestatus exits with the nodes'
    # flags: 0 is OK) and the address hosted
    if ! ctdb_in 1 ctdb nodestatus all >/dev/null 2>&1 || [ -z "$(ctdb_holder "${ctdb_public%/*}")" ]; then
      ok=0
    fi
    [ "$ok" = 0 ] || return 0
    [ "$SECONDS" -lt "$deadline" ] || { echo "ctdb: not ready within $1 s" >&2; ctdb_in 1 ctdb status >&2; return 1; }
    sleep 0.5
  done
}

ctdb_link() {  # N up|down
  local peer
  # hN's eth0 is "eth0@ifK": K is its veth peer's index in the bridge's
  # namespace
  peer=$(ip -n "${heads_netns_of[$1 - 1]}" -o link show eth0 | sed -n 's/^[0-9]*: eth0@if\([0-9]*\):.*/\1/p')
  [ -n "$peer" ] || { echo "ctdb: h$1: no veth peer of eth0" >&2; return 1; }
  ip -n "$heads_bridge" link set "$(ip -n "$heads_bridge" -o link show | awk -F': ' -v k="$peer" '$1 == k { sub(/@.*/, "", $2); print $2 }')" "$2"
}

ctdb_descendants() {  # PID: PID and every process under it
  local c
  echo "$1"
  for c in $(pgrep -P "$1" 2>/dev/null); do ctdb_descendants "$c"; done
}

ctdb_cleanup() {
  local pid all=() left=() i n stoppers=()
  # `ctdb shutdown` runs the shutdown event (10.interface drops the public
  # addresses, 60.nfs calls the callout's shutdown) and stops ctdbd;
  # SIGTERM skips that. Then each ctdbd by its pid: SIGTERM, SIGKILL 10 s
  # later.
  for ((n = 1; n <= ${#ctdb_pids[@]}; n++)); do
    pid=${ctdb_pids[n - 1]}
    { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; } || continue
    mapfile -t -O "${#all[@]}" all < <(ctdb_descendants "$pid")
    ctdb_in "$n" timeout 20 ctdb shutdown >/dev/null 2>&1 &
    stoppers+=("$!")
  done
  for pid in "${stoppers[@]}"; do wait "$pid" || true; done
  for pid in "${ctdb_pids[@]}"; do
    [ -n "$pid" ] || continue
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    srv_stop_pid "$pid" 10 ctdbd
  done
  ctdb_pids=()
  # ctdb-eventd and the cluster lock's helper notice their parent went
  # away within a few seconds
  for ((i = 0; i < 100; i++)); do
    left=()
    for pid in "${all[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    [ ${#left[@]} -gt 0 ] || return 0
    sleep 0.1
  done
  echo "ctdb: still running after ctdbd stopped: $(ps -o pid=,comm= -p "$(IFS=,; echo "${left[*]}")" | tr -s ' \n' ' ')" >&2
  for pid in "${left[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  return 1
}
