# shellcheck shell=bash
# Sourced by roll_test.sh: several ganesha.nfsd "heads" on this machine, all
# exporting one directory of one XFS filesystem, the way with_server.sh runs
# one (read it for why each step is there). Per head hN (N = 1, 2, ...):
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
#   head_start N CONFIG    start head hN on the config text CONFIG
#   heads_cleanup          stop and remove everything (also on failure)
# Needs DCACHE_PLUGIN. The caller traps EXIT to heads_cleanup.
# DCACHE_E2E_GANESHA=6.5: every head runs Debian 13's ganesha.nfsd chrooted
# in the trixie root (ci/setup.sh --ganesha 6.5), as with_server.sh does, with
# the 6.5 module (DCACHE_PLUGIN_6_5 when set); the config text then needs
# $heads_core_param_extra inside NFS_CORE_PARAM.
# shellcheck disable=SC2317  # functions run from the caller and its trap

# shellcheck source=../../../tools/private-dbus.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../tools/private-dbus.sh"

heads_state=""
heads_loopdev=""
heads_mounted=0
heads_netns=()
heads_holders=()
heads_daemons=()      # rpcbind and dbus-daemon pids
heads_ganeshas=()
heads_extra=()        # more children to stop first (the test's clients)
heads_root=""         # the trixie root for 6.5, "" for the host's 4.3
heads_core_param_extra=""

# SIGTERM, up to $2 seconds, then SIGKILL; sets stopped_rc. Our children only.
heads_stop_pid() {
  local pid=$1 grace=$2 what=$3 i
  stopped_rc=0
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" != Z ] || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" != Z ]; then
    echo "heads: $what (pid $pid) ignored SIGTERM for ${grace}s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || stopped_rc=$?
}

heads_cleanup() {
  local pid n i rc=0
  for pid in "${heads_extra[@]}"; do heads_stop_pid "$pid" 5 "client"; done
  # all servers at once, then wait for each
  for pid in "${heads_ganeshas[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for i in "${!heads_ganeshas[@]}"; do
    heads_stop_pid "${heads_ganeshas[$i]}" 20 "ganesha.nfsd of h$((i + 1))"
    # Ganesha exits 0 on SIGTERM: a signal here is a crash in shutdown
    if [ "$stopped_rc" -gt 128 ]; then
      echo "heads: ganesha.nfsd of h$((i + 1)) died by a signal while stopping (status $stopped_rc)" >&2
      rc=5
    fi
  done
  heads_ganeshas=()
  for pid in "${heads_daemons[@]}"; do heads_stop_pid "$pid" 5 "rpcbind/dbus-daemon"; done
  for pid in "${heads_holders[@]}"; do heads_stop_pid "$pid" 5 "namespace holder"; done
  for n in "${heads_netns[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  # the (now unmounted, empty) mount point the holders made in the root
  [ -z "$heads_root" ] || [ -z "$heads_state" ] || rmdir "$heads_root$heads_state" 2>/dev/null || true
  if [ "$heads_mounted" = 1 ]; then
    for ((i = 0; i < 50; i++)); do
      umount "$heads_state/mnt" 2>/dev/null && { heads_mounted=0; break; }
      sleep 0.1
    done
    if [ "$heads_mounted" = 1 ]; then
      echo "heads: $heads_state/mnt still busy; detaching it lazily" >&2
      umount -l "$heads_state/mnt" || true
    fi
  fi
  [ -z "$heads_loopdev" ] || losetup -d "$heads_loopdev" 2>/dev/null ||
    echo "heads: could not detach $heads_loopdev" >&2
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
  local ganesha=ganesha.nfsd top
  case ${DCACHE_E2E_GANESHA:-4.3} in
    4.3) ;;
    6.5)
      top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
      # shellcheck source=../../../ci/trixie-root.sh
      . "$top/ci/trixie-root.sh"
      heads_root=$trixie_root
      [ -x "$heads_root/usr/bin/ganesha.nfsd" ] ||
        { echo "heads: no ganesha.nfsd in $heads_root (run ci/setup.sh --ganesha 6.5)" >&2; exit 2; }
      [ -z "${DCACHE_PLUGIN_6_5:-}" ] || DCACHE_PLUGIN=$DCACHE_PLUGIN_6_5
      # 6.5 refuses to start when prctl(PR_SET_IO_FLUSHER) fails (no
      # CAP_SYS_RESOURCE), as with_server.sh says
      # shellcheck disable=SC2034  # read by the caller's config text
      heads_core_param_extra="Allow_Set_Io_Flusher_Fail = true;"
      ganesha=chroot ;;
    *) echo "heads: DCACHE_E2E_GANESHA=$DCACHE_E2E_GANESHA: must be 4.3 or 6.5" >&2; exit 2 ;;
  esac
  [ -f "${DCACHE_PLUGIN:-}" ] || { echo "heads: DCACHE_PLUGIN must name libfsaldcache.so" >&2; exit 2; }
  for tool in "$ganesha" rpcbind rpcinfo dbus-daemon dbus-send mkfs.xfs losetup nsenter unshare \
              setpriv ip nfs-cp nfs-cat nfs-ls; do
    command -v "$tool" >/dev/null || { echo "heads: '$tool' not found (run ci/setup.sh)" >&2; exit 2; }
  done
  unshare --net --mount true 2>/dev/null || heads_skip "no network or mount namespaces in this kernel"
  grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null || heads_skip "no XFS in this kernel"
  heads_state=$(mktemp -d "${TMPDIR:-/tmp}/dcache-roll.XXXXXX")
  chmod 755 "$heads_state"
  mkdir -p "$heads_state/mnt" "$heads_state/plugins"
  truncate -s "${DCACHE_E2E_IMAGE_SIZE:-1G}" "$heads_state/xfs.img"
  mkfs.xfs -q "$heads_state/xfs.img"
  heads_loopdev=$(losetup --direct-io=on -f --show "$heads_state/xfs.img") ||
    heads_skip "no loop device could be attached"
  mount "$heads_loopdev" "$heads_state/mnt"
  heads_mounted=1
  ln -s /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so "$heads_state/plugins/libfsalvfs.so"
  if [ -n "$heads_root" ]; then
    cp "$DCACHE_PLUGIN" "$heads_state/plugins/libfsaldcache.so"   # the root sees the state dir only
  else
    ln -s "$(realpath "$DCACHE_PLUGIN")" "$heads_state/plugins/libfsaldcache.so"
  fi
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

head_start() {  # N CONFIG-TEXT
  local n=$1 dir=$heads_state/h$1 ns holder i
  local -a in_ns
  mkdir -p "$dir/recov" "$dir/dbus"
  printf '%s\n' "$2" >"$dir/ganesha.conf"
  private_dbus_conf "$dir/dbus/system_bus_socket" >"$dir/dbus.conf"
  ns="dcache-roll-$$-${heads_state##*.}-h$n"
  ip netns add "$ns"
  heads_netns+=("$ns")
  ip netns exec "$ns" ip link set lo up
  # With a root (6.5) the holder also mounts, in this namespace only, the
  # private /run, /proc, /dev and the state dir (with the XFS) into it.
  # shellcheck disable=SC2016  # $1 expands in the inner shell
  ip netns exec "$ns" unshare --mount --propagation private setpriv --pdeathsig KILL -- \
    bash -c 'mount -t tmpfs -o size=16m,mode=755 dcache-roll-run /run &&
      if [ -n "$2" ]; then
        mount --rbind /run "$2/run" && mount -t proc proc "$2/proc" && mount --rbind /dev "$2/dev" &&
          mkdir -p "$2$3" && mount --rbind "$3" "$2$3"
      fi && touch "$1" && exec sleep infinity' \
    holder "$dir/holder.ready" "$heads_root" "$heads_state" &
  holder=$!
  heads_holders+=("$holder")
  for ((i = 0; i < 100; i++)); do
    [ -e "$dir/holder.ready" ] && break
    kill -0 "$holder" 2>/dev/null || { echo "heads: h$n: no private mount namespace" >&2; return 1; }
    sleep 0.05
  done
  [ -e "$dir/holder.ready" ] || { echo "heads: h$n: namespace holder did not come up" >&2; return 1; }
  printf 'holder=%s\nbus=%s\n' "$holder" "unix:path=$dir/dbus/system_bus_socket" >"$dir/env"
  in_ns=(nsenter --target "$holder" --mount --net --)

  "${in_ns[@]}" setpriv --pdeathsig KILL -- rpcbind -f -w &
  heads_daemons+=("$!")
  "${in_ns[@]}" setpriv --pdeathsig KILL -- dbus-daemon --config-file="$dir/dbus.conf" --nofork \
    --nopidfile --nosyslog >"$dir/dbus.log" 2>&1 &
  heads_daemons+=("$!")
  for ((i = 0; i < 100; i++)); do
    [ -S "$dir/dbus/system_bus_socket" ] && "${in_ns[@]}" rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break
    sleep 0.05
  done
  [ -S "$dir/dbus/system_bus_socket" ] || { echo "heads: h$n: dbus-daemon made no socket" >&2; return 1; }
  local -a ganesha_nfsd=(ganesha.nfsd)
  [ -z "$heads_root" ] || ganesha_nfsd=(chroot "$heads_root" /usr/bin/ganesha.nfsd)
  "${in_ns[@]}" env DBUS_SYSTEM_BUS_ADDRESS="unix:path=$dir/dbus/system_bus_socket" \
    setpriv --pdeathsig KILL -- \
    "${ganesha_nfsd[@]}" -F -L "$dir/ganesha.log" -f "$dir/ganesha.conf" -p "$dir/ganesha.pid" &
  heads_ganeshas+=("$!")
}

head_wait() {  # N PSEUDO: until hN serves PSEUDO over NFSv3 (30 s)
  local n=$1 pid=${heads_ganeshas[$(($1 - 1))]} deadline=$((SECONDS + 30))
  until "$heads_state/via" "h$n" timeout 5 nfs-ls "nfs://127.0.0.1$2?version=3" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { echo "heads: h$n: ganesha.nfsd exited during startup" >&2; return 1; }
    [ "$SECONDS" -lt "$deadline" ] || { echo "heads: h$n: not serving $2 within 30s" >&2; return 1; }
    sleep 0.2
  done
}
