# shellcheck shell=bash
# Sourced by the cluster tests after ci/server.sh (tests/e2e/roll/heads.sh
# sources it): the smallest Ceph that Ganesha's RADOS pieces need, one
# ceph-mon and one ceph-osd (memstore: objects in memory, nothing mounted,
# no device) in a network namespace of their own, no ceph-mgr (pools, objects,
# watch/notify and the grace database need none; `ceph -s` says so), no
# systemd. Both daemons run in the foreground as direct children of the
# test's shell, entered into the namespace with nsenter --net only (no mount
# namespace of their own: no copy of another test's mounts to pin),
# recorded in srv_children and their namespace in srv_netns,
# so srv_cleanup (heads_cleanup) stops them by pid after every ganesha.nfsd
# and removes the namespace: the test's EXIT trap tears Ceph down with the
# heads.
#
#   ceph_start DIR NETNS IP POOL
#                   a cluster whose files (ceph.conf, keyrings, mon and osd
#                   data, logs, admin sockets) are all in DIR, its daemons in
#                   NETNS (which must exist: heads_attach it to the heads'
#                   network first) on IP, and a replicated pool POOL of size
#                   1; returns once an object can be written and read back.
#                   Sets ceph_conf (the ceph.conf clients use, with the
#                   admin keyring) and ceph_fsid; ceph_started_ms and
#                   ceph_rss_kib say how long it took and what the two
#                   daemons hold in memory
#   ceph_key NAME CAPS...
#                   a key for client.NAME (ceph auth get-or-create), written
#                   to DIR/ceph.client.NAME.keyring
#   ceph_in CMD...  CMD (rados, ceph, ganesha-rados-grace) in NETNS with
#                   CEPH_CONF=$ceph_conf
#   ceph_rss        the daemons' resident memory now, in KiB
# shellcheck disable=SC2317  # functions run from the caller
# shellcheck disable=SC2034  # ceph_* variables are for the caller

ceph_dir="" ceph_netns="" ceph_conf="" ceph_fsid="" ceph_pids=()
ceph_started_ms="" ceph_rss_kib=""

ceph_in() {
  nsenter --net="/run/netns/$ceph_netns" -- env CEPH_CONF="$ceph_conf" "$@"
}

# ceph_daemon WHAT ARGS...: a daemon in the foreground, in the namespace
ceph_daemon() {
  local what=$1
  shift
  nsenter --net="/run/netns/$ceph_netns" -- setpriv --pdeathsig KILL -- "$@" \
    >>"$ceph_dir/$what.out" 2>&1 &
  ceph_pids+=("$!")
  srv_children+=("$! 10 $what")
}

ceph_rss() {
  local pid total=0 kib
  for pid in "${ceph_pids[@]}"; do
    kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    total=$((total + ${kib:-0}))
  done
  echo "$total"
}

ceph_start() {  # DIR NETNS IP POOL
  local dir=$1 ip=$3 pool=$4 tool osd_uuid t0 deadline i
  ceph_dir=$dir ceph_netns=$2
  t0=$(date +%s%N)
  for tool in ceph-mon ceph-osd ceph ceph-authtool monmaptool rados; do
    command -v "$tool" >/dev/null || { echo "ceph: '$tool' not found (run ci/setup.sh)" >&2; return 2; }
  done
  mkdir -p "$dir/run" "$dir/mon.a" "$dir/osd.0"
  ceph_fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  ceph_conf=$dir/ceph.conf
  # Everything below DIR; one replica; no mgr to wait for or warn about;
  # small caches (a test cluster holding a few kilobytes).
  cat >"$ceph_conf" <<EOF
[global]
fsid = $ceph_fsid
mon host = [v2:$ip:3300,v1:$ip:6789]
public network = ${ip%.*}.0/24
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/\$cluster.\$name.keyring
run dir = $dir/run
log file = $dir/\$name.log
crash dir = $dir/crash
ms bind ipv6 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
auth allow insecure global id reclaim = false
[client]
# the heads and the commands are clients with one name: no admin socket
admin socket =
[mon]
admin socket = $dir/run/\$name.asok
mon data = $dir/mon.\$id
mon rocksdb options = write_buffer_size=8388608,compression=kNoCompression
[osd]
admin socket = $dir/run/\$name.asok
osd data = $dir/osd.\$id
osd objectstore = memstore
memstore device bytes = 268435456
osd op num shards = 1
osd op num threads per shard = 2
EOF
  {
    ceph-authtool --create-keyring "$dir/ceph.mon.keyring" --gen-key -n mon. --cap mon 'allow *' &&
      ceph-authtool --create-keyring "$dir/ceph.client.admin.keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' &&
      ceph-authtool --create-keyring "$dir/ceph.osd.0.keyring" --gen-key -n osd.0 \
        --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd' &&
      ceph-authtool "$dir/ceph.mon.keyring" --import-keyring "$dir/ceph.client.admin.keyring" &&
      ceph-authtool "$dir/ceph.mon.keyring" --import-keyring "$dir/ceph.osd.0.keyring" &&
      monmaptool --create --fsid "$ceph_fsid" --addv a "[v2:$ip:3300,v1:$ip:6789]" "$dir/monmap"
  } >"$dir/keys.out" 2>&1 || { cat "$dir/keys.out" >&2; echo "ceph: could not make the keys and the monitor map" >&2; return 1; }
  # the monitor's store is made where its address is (its namespace)
  if ! nsenter --net="/run/netns/$ceph_netns" -- ceph-mon -c "$ceph_conf" --mkfs -i a \
         --monmap "$dir/monmap" --keyring "$dir/ceph.mon.keyring" >"$dir/mkfs.out" 2>&1 ||
     ! ceph-osd -c "$ceph_conf" --mkfs -i 0 --osd-uuid "$osd_uuid" --no-mon-config >>"$dir/mkfs.out" 2>&1; then
    cat "$dir/mkfs.out" >&2
    echo "ceph: mkfs failed" >&2
    return 1
  fi
  ceph_daemon ceph-mon ceph-mon -c "$ceph_conf" -f -i a
  # the OSD joins the map, then boots into it (and puts itself in the
  # CRUSH map under this host)
  ceph_in timeout 30 ceph osd new "$osd_uuid" 0 >/dev/null ||
    { cat "$dir/ceph-mon.out" "$dir/mon.a.log" 2>/dev/null | tail -n 20 >&2; echo "ceph: the monitor did not answer" >&2; return 1; }
  ceph_daemon ceph-osd ceph-osd -c "$ceph_conf" -f -i 0
  if ! ceph_in timeout 30 ceph osd pool create "$pool" >/dev/null 2>&1 ||
     ! ceph_in timeout 30 ceph osd pool application enable "$pool" nfs >/dev/null 2>&1; then
    echo "ceph: could not create pool $pool" >&2
    return 1
  fi
  # up when an object can be written and read back (the PG is active)
  deadline=$((SECONDS + 60))
  until echo up | ceph_in timeout 10 rados -p "$pool" put ceph-up - 2>/dev/null &&
        [ "$(ceph_in timeout 10 rados -p "$pool" get ceph-up - 2>/dev/null)" = up ]; do
    for i in "${ceph_pids[@]}"; do
      kill -0 "$i" 2>/dev/null || { tail -n 20 "$dir"/*.out >&2; echo "ceph: a daemon exited" >&2; return 1; }
    done
    [ "$SECONDS" -lt "$deadline" ] ||
      { ceph_in timeout 10 ceph -s >&2; echo "ceph: pool $pool not writable within 60 s" >&2; return 1; }
    sleep 0.5
  done
  ceph_in rados -p "$pool" rm ceph-up
  ceph_started_ms=$((($(date +%s%N) - t0) / 1000000))
  ceph_rss_kib=$(ceph_rss)
}

ceph_key() {  # NAME CAPS...
  local name=$1
  shift
  ceph_in timeout 30 ceph auth get-or-create "client.$name" "$@" -o "$ceph_dir/ceph.client.$name.keyring"
}
