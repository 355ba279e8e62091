# shellcheck shell=bash
# Sourced by the multi-head tests: several ganesha.nfsd "heads" on this
# machine, all exporting one directory of one XFS filesystem, each started
# by ci/server.sh the way with_server.sh starts one. Per head hN (N = 1,
# 2, ...):
#   - a network namespace of its own (own loopback and ports 111/2049) and a
#     mount namespace with a private /run (rpcbind's socket);
#   - rpcbind, a private dbus-daemon and ganesha.nfsd in them, each a direct
#     child of the test's shell, stopped by its pid;
#   - $heads_state/hN/: ganesha.conf, ganesha.log, ganesha.pid, recov/,
#     dbus/system_bus_socket, and env (holder=PID bus=ADDRESS) for
#     $heads_state/via, which runs a command in that head's namespaces with
#     its DBUS_SYSTEM_BUS_ADDRESS:  $heads_state/via hN COMMAND [ARGS...]
# The filesystem: a sparse image, losetup --direct-io=on, mounted once at
# $heads_state/mnt (before the namespaces are made, so each of them sees it).
#
#   heads_setup            state dir, image, loop device, mount, plugin dir
#   heads_network          put the heads on one network: a bridge in a
#                          namespace of its own (nothing on the host's
#                          network), 192.0.2.0/24 (TEST-NET-1); head hN, once
#                          started, is 192.0.2.(10+N) on its eth0
#   heads_attach NETNS IP [DEV]
#                          attach another namespace (a client, a Ceph
#                          daemon, ...) to that network as IP/24 on DEV
#                          (default eth0)
#   heads_conf_core N      the core blocks of hN's ganesha.conf (NFS_CORE_PARAM,
#                          NFSV4, KRB5, LOG), to which the test adds exports
#   head_start N CONFIG    start head hN on the config text CONFIG
#   head_wait N PSEUDO     until hN serves PSEUDO over NFSv3 (30 s)
#   heads_cleanup          stop and remove everything (also on failure)
# Needs DCACHE_PLUGIN (ctest's, for 4.3). The caller traps EXIT to
# heads_cleanup. DCACHE_GANESHA (ci/release.sh): every head runs that
# release's ganesha.nfsd, chrooted in its Debian root, with its module.
# shellcheck disable=SC2317  # functions run from the caller and its trap

heads_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
top=$heads_top
# shellcheck source=../../../ci/release.sh
. "$heads_top/ci/release.sh"
# shellcheck source=../../../ci/server.sh
. "$heads_top/ci/server.sh"

heads_state=""
# shellcheck disable=SC2034  # for the caller
# shellcheck disable=SC2034  # for the caller
heads_loopdev=""      # the loop device under $heads_state/mnt
heads_ganeshas=()     # the pid of each head's ganesha.nfsd
heads_netns_of=()     # the network namespace of each head
heads_bridge=""       # the namespace holding the heads' bridge (heads_network)
heads_extra=()        # more children to stop first (the test's clients)

heads_cleanup() {
  local pid rc=0
  for pid in "${heads_extra[@]}"; do srv_stop_pid "$pid" 5 "client"; done
  heads_extra=()
  srv_cleanup || rc=$?
  if [ -n "$heads_state" ]; then
    if [ "${DCACHE_E2E_KEEP:-0}" = 1 ]; then
      echo "heads: kept $heads_state" >&2
    else
      rm -rf --one-file-system "$heads_state"
    fi
  fi
  return "$rc"
}

# Exit 77 (skipped) when the kernel lacks what the heads need.
heads_skip() { echo "SKIP: $*"; exit 77; }

heads_setup() {
  local tool
  [ "$(id -u)" = 0 ] || { echo "heads: must run as root" >&2; exit 2; }
  release_select "${DCACHE_GANESHA:-}" || exit 2
  if [ -n "$release_root" ]; then
    [ -x "$release_root/usr/bin/ganesha.nfsd" ] ||
      { echo "heads: no ganesha.nfsd in $release_root (run $release_setup)" >&2; exit 2; }
    DCACHE_PLUGIN=$release_plugin
  fi
  [ -f "${DCACHE_PLUGIN:-}" ] || { echo "heads: DCACHE_PLUGIN must name libfsaldcache.so" >&2; exit 2; }
  for tool in rpcbind rpcinfo dbus-daemon dbus-send mkfs.xfs losetup nsenter unshare \
              setpriv ip nfs-cp nfs-cat nfs-ls; do
    command -v "$tool" >/dev/null || { echo "heads: '$tool' not found (run ci/setup.sh)" >&2; exit 2; }
  done
  unshare --net --mount true 2>/dev/null || heads_skip "no network or mount namespaces in this kernel"
  grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null || heads_skip "no XFS in this kernel"
  heads_state=$(mktemp -d "${TMPDIR:-/tmp}/dcache-heads.XXXXXX")
  chmod 755 "$heads_state"
  srv_fs_make "$heads_state/xfs.img" "${DCACHE_E2E_IMAGE_SIZE:-1G}" xfs
  srv_fs_mount "$heads_state/xfs.img" "$heads_state/mnt" || heads_skip "no loop device could be attached"
  # shellcheck disable=SC2034  # for the caller
  heads_loopdev=$srv_loopdev
  srv_plugin_dir "$heads_state/plugins" "$(realpath "$DCACHE_PLUGIN")"
  cat >"$heads_state/via" <<'EOF'
#!/bin/sh
# via HEAD COMMAND [ARGS...]: runs COMMAND in HEAD's namespaces, on its bus
[ -r "$(dirname "$0")/$1/env" ] || { echo "via: no head '$1'" >&2; exit 255; }
. "$(dirname "$0")/$1/env"
shift
exec nsenter --target "$holder" --mount --net -- env DBUS_SYSTEM_BUS_ADDRESS="$bus" "$@"
EOF
  chmod 755 "$heads_state/via"
}

heads_network() {
  heads_bridge="dcache-heads-$$-${heads_state##*.}-net"
  ip netns add "$heads_bridge"
  srv_netns+=("$heads_bridge")
  ip -n "$heads_bridge" link add br0 type bridge
  ip -n "$heads_bridge" link set br0 up
}

heads_attach() {  # NETNS IP [DEV]
  local ns=$1 ip=$2 dev=${3:-eth0} id a b
  [ -n "$heads_bridge" ] || { echo "heads: heads_attach before heads_network" >&2; return 1; }
  # veth names live in the host's namespace until moved: short (at most
  # 15 bytes: pid and a random number in hex, 10 at most) and unique
  printf -v id '%x%04x' "$$" "$RANDOM"
  a=dcv${id}a b=dcv${id}b
  ip link add "$a" type veth peer name "$b" &&
    ip link set "$a" netns "$heads_bridge" &&
    ip link set "$b" netns "$ns" &&
    ip -n "$heads_bridge" link set "$a" master br0 up &&
    ip -n "$ns" link set "$b" name "$dev" &&
    ip -n "$ns" addr add "$ip/24" dev "$dev" &&
    ip -n "$ns" link set "$dev" up
}

heads_conf_core() {  # N
  DCACHE_E2E_LOG_LEVEL=${DCACHE_E2E_LOG_LEVEL:-EVENT} \
    srv_conf_core "$heads_state/h$1" "$heads_state/h$1/ganesha.log" "$heads_state/plugins"
}

head_start() {  # N CONFIG-TEXT
  local n=$1 dir=$heads_state/h$1
  mkdir -p "$dir/recov"
  printf '%s\n' "$2" >"$dir/ganesha.conf"
  heads_netns_of[n - 1]="dcache-heads-$$-${heads_state##*.}-h$n"
  srv_ns_start --net "${heads_netns_of[n - 1]}" "$heads_state" || return 1
  [ -z "$heads_bridge" ] || heads_attach "${heads_netns_of[n - 1]}" "192.0.2.$((10 + n))" || return 1
  printf 'holder=%s\nbus=%s\n' "$srv_holder" "unix:path=$dir/dbus/system_bus_socket" >"$dir/env"
  srv_daemons_start "$dir" || return 1
  srv_ganesha_start "$dir/ganesha.conf" "$dir/ganesha.log" "$dir/ganesha.pid"
  heads_ganeshas[n - 1]=$srv_ganesha
}

head_wait() {  # N PSEUDO: until hN serves PSEUDO over NFSv3 (30 s)
  local n=$1 pid=${heads_ganeshas[$(($1 - 1))]} deadline=$((SECONDS + 30))
  until "$heads_state/via" "h$n" timeout 5 nfs-ls "nfs://127.0.0.1$2?version=3" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { echo "heads: h$n: ganesha.nfsd exited during startup" >&2; return 1; }
    [ "$SECONDS" -lt "$deadline" ] || { echo "heads: h$n: not serving $2 within 30s" >&2; return 1; }
    sleep 0.2
  done
}
