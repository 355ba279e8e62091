# shellcheck shell=bash
# Running ganesha.nfsd for the tests, the demo and the benchmark: the one
# library that starts and stops servers (tests/e2e/with_server.sh one in
# namespaces of its own, ci/demo.sh one on the host's network). Sourced after ci/release.sh and release_select, which
# say which Ganesha runs and where (the host's, or chrooted in a release's
# Debian root).
#
# Everything made is recorded as soon as it exists, so srv_cleanup undoes
# exactly what was made, whichever step failed: the caller traps EXIT (and
# INT/TERM) to it. Every process started is a direct child of the caller,
# stopped by its pid, and dies with it (setpriv --pdeathsig).
#
#   srv_fs_make IMAGE SIZE FS      a sparse image formatted xfs, ext4 or btrfs
#                                  (kept if it exists)
#   srv_fs_mount IMAGE MNT         attached (losetup --direct-io=on: the
#                                  backing file's own page cache does not hide
#                                  the server's) and mounted; sets srv_loopdev
#   srv_plugin_dir DIR [MODULE]    DIR holding VFS's module and MODULE (the
#                                  DCACHE module, or a stock module's path)
#   srv_conf_core STATE LOG PLUGINS [LINE...]
#                                  NFS_CORE_PARAM (LINEs added), NFSV4, KRB5
#                                  and LOG blocks for a server whose recovery
#                                  dir is STATE/recov
#   srv_ns_start [--net NAME] STATE [DIR...]
#                                  the namespaces a server runs in: with --net
#                                  its own network namespace (loopback only)
#                                  and a private /run (rpcbind's socket, the
#                                  bus); with a root, a mount namespace that
#                                  binds /run, /proc, /dev, STATE and each DIR
#                                  into it. Sets srv_holder and srv_in_ns (the
#                                  command prefix that enters them; empty when
#                                  the server runs on the host as it is)
#   srv_daemons_start DIR          rpcbind and a private dbus-daemon (socket
#                                  DIR/dbus/system_bus_socket) in srv_in_ns;
#                                  sets srv_bus (a DBUS_SYSTEM_BUS_ADDRESS);
#                                  srv_rpcbind_start, srv_dbus_start DIR: one
#                                  of them
#   srv_ganesha_start CONF LOG PIDFILE
#                                  ganesha.nfsd -F in srv_in_ns, on srv_bus
#                                  when set; sets srv_ganesha (its pid)
#   srv_wait_serving PID PSEUDO SECONDS
#                                  until NFSv3 and v4 are registered and
#                                  PSEUDO can be listed (srv_in_ns)
#   srv_note_root_dir PATH         a mount point the caller makes in the root
#                                  itself (removed at cleanup)
#   srv_stop_pid PID GRACE WHAT    SIGTERM, GRACE seconds, SIGKILL; sets
#                                  srv_stopped_rc
#   srv_cleanup                    stops and removes everything, servers
#                                  first; returns 5 if a ganesha.nfsd died by
#                                  a signal while stopping (a crash in its
#                                  shutdown), else 0
# shellcheck disable=SC2317  # functions run from the callers and their traps
# shellcheck disable=SC2154  # release_* come from ci/release.sh's release_select

# shellcheck source=../tools/private-dbus.sh
. "${top:?}/tools/private-dbus.sh"

srv_ganeshas=()   # "pid what" of each ganesha.nfsd, stopped first
srv_children=()   # "pid grace what" of every other child, in start order
srv_netns=()
srv_mounts=()     # host mount points, unmounted last first
srv_loopdevs=()
srv_root_dirs=()  # directories made in the release root, removed when empty
srv_holder=""
srv_in_ns=()
srv_bus=""
srv_loopdev=""
srv_ganesha=""

# srv_threads PID: what each thread of a process that will not stop is
# doing (state, kernel wait channel, kernel stack; its user stacks too when
# gdb is installed), so that a hang leaves its trace in the test's log
srv_threads() {
  local pid=$1 t
  for t in /proc/"$pid"/task/*; do
    [ -d "$t" ] || continue
    echo "  thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)): state $(cut -d' ' -f3 "$t/stat" 2>/dev/null), wchan $(cat "$t/wchan" 2>/dev/null)"
    sed -n '1,6s/^/    /p' "$t/stack" 2>/dev/null || true
  done
  if command -v gdb >/dev/null; then
    timeout 30 gdb -batch -nx -p "$pid" -ex 'thread apply all bt 12' 2>/dev/null | grep -E '^(Thread|#)' | sed 's/^/  /' || true
  fi
}

# srv_stop_pid PID GRACE WHAT: SIGTERM, GRACE seconds, then SIGKILL; the
# exit status in srv_stopped_rc. A process still there 30 s after SIGKILL
# (in the kernel, uninterruptible) is reported and left: the test fails
# with its trace instead of hanging until ctest's timeout.
srv_stop_pid() {
  local pid=$1 grace=$2 what=$3 i
  srv_stopped_rc=0
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || srv_stopped_rc=$?; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  srv_wait_gone "$pid" "$grace" && { wait "$pid" 2>/dev/null || srv_stopped_rc=$?; return 0; }
  echo "server: $what (pid $pid) ignored SIGTERM for ${grace}s; its threads:" >&2
  srv_threads "$pid" >&2
  echo "server: sending SIGKILL to $what (pid $pid)" >&2
  kill -KILL "$pid" 2>/dev/null || true
  if ! srv_wait_gone "$pid" 30; then
    echo "server: $what (pid $pid) still there 30 s after SIGKILL (state $(ps -o stat= -p "$pid")); left as it is" >&2
    srv_stopped_rc=137
    return 0
  fi
  wait "$pid" 2>/dev/null || srv_stopped_rc=$?
}

# srv_wait_gone PID SECONDS: whether PID exits (or is a zombie) within SECONDS
srv_wait_gone() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    # a zombie child still answers kill -0
    [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" != Z ] || return 0
    sleep 0.1
  done
  return 1
}

srv_cleanup() {
  local rc=0 entry pid grace what i m d
  # Teardown must finish even when stderr is a closed pipe (`| head`).
  trap '' PIPE
  # every server at once, then wait for each: Ganesha exits 0 on SIGTERM,
  # so a signal here is a crash in its shutdown
  for entry in "${srv_ganeshas[@]}"; do kill -TERM "${entry%% *}" 2>/dev/null || true; done
  for entry in "${srv_ganeshas[@]}"; do
    srv_stop_pid "${entry%% *}" 20 "${entry#* }"
    if [ "$srv_stopped_rc" -gt 128 ]; then
      echo "server: ${entry#* } died by signal $((srv_stopped_rc - 128)) while stopping" >&2
      rc=5
    fi
  done
  srv_ganeshas=()
  for ((i = ${#srv_children[@]} - 1; i >= 0; i--)); do
    read -r pid grace what <<<"${srv_children[$i]}"
    srv_stop_pid "$pid" "$grace" "$what"
  done
  srv_children=()
  for m in "${srv_netns[@]}"; do ip netns del "$m" 2>/dev/null || true; done
  srv_netns=()
  # the (now unmounted, empty) mount points a holder made in the root, up to
  # the topmost directory it added
  for entry in "${srv_root_dirs[@]}"; do
    d=${entry%|*}
    while rmdir "$release_root$d" 2>/dev/null && [ "$d" != "${entry#*|}" ]; do d=$(dirname "$d"); done
  done
  srv_root_dirs=()
  srv_root_dirs=()
  for ((i = ${#srv_mounts[@]} - 1; i >= 0; i--)); do
    m=${srv_mounts[$i]}
    for ((d = 0; d < 50; d++)); do umount "$m" 2>/dev/null && { m=""; break; }; sleep 0.1; done
    if [ -n "$m" ]; then
      echo "server: $m still busy; detaching it lazily" >&2
      umount -l "$m" || true
    fi
  done
  srv_mounts=()
  # -d on a device still held (lazy unmount) sets autoclear: it detaches
  # when the last user goes away
  for m in "${srv_loopdevs[@]}"; do losetup -d "$m" 2>/dev/null || echo "server: could not detach $m" >&2; done
  srv_loopdevs=()
  return "$rc"
}

srv_fs_make() {
  local image=$1 size=$2 fs=$3
  local -a mkfs
  case $fs in
    xfs) mkfs=(mkfs.xfs -q) ;;
    ext4) mkfs=(mkfs.ext4 -q -F) ;;
    btrfs) mkfs=(mkfs.btrfs -q -f) ;;
    *) echo "server: filesystem '$fs': xfs, ext4 or btrfs" >&2; return 2 ;;
  esac
  [ ! -e "$image" ] || return 0
  command -v "${mkfs[0]}" >/dev/null || { echo "server: '${mkfs[0]}' not found (run ci/setup.sh)" >&2; return 2; }
  truncate -s "$size" "$image.new"
  "${mkfs[@]}" "$image.new" >/dev/null
  mv "$image.new" "$image"
}

srv_fs_mount() {
  local image=$1 mnt=$2
  mkdir -p "$mnt"
  if mountpoint -q "$mnt"; then
    echo "server: $mnt is already mounted" >&2
    return 1
  fi
  srv_loopdev=$(losetup --direct-io=on -f --show "$image") || return 1
  srv_loopdevs+=("$srv_loopdev")
  mount "$srv_loopdev" "$mnt"
  srv_mounts+=("$mnt")
}

srv_plugin_dir() {
  local dir=$1 module=${2:-}
  mkdir -p "$dir"
  ln -sfn "$release_fsal_dir/libfsalvfs.so" "$dir/libfsalvfs.so"
  [ -n "$module" ] || return 0
  rm -f "$dir/${module##*/}"
  if [ -n "$release_root" ] && [ "${module#"$release_fsal_dir"/}" = "$module" ]; then
    cp "$module" "$dir/"   # the root sees the state dir, not the build
  else
    ln -s "$module" "$dir/"
  fi
}

srv_conf_core() {
  local state=$1 log=$2 plugins=$3 line extra="" dir_line
  shift 3
  for line in "$release_core_param" "$@"; do [ -z "$line" ] || extra+="
  $line"; done
  if [ -n "$plugins" ]; then
    dir_line="Plugins_Dir = \"$plugins\";"
  else
    dir_line="# Plugins_Dir: Ganesha's default, $release_fsal_dir"
  fi
  cat <<EOF
# No Bind_addr in a namespace: Ganesha resolves it with AI_ADDRCONFIG, which
# finds no address where there is only loopback ("No IP address found for
# 127.0.0.1"); with nothing but lo, "any" is loopback only.
NFS_CORE_PARAM {
  $dir_line$extra
  Protocols = 3, 4;
  Enable_FSAL_Stats = true;
  # v3 MOUNT takes the pseudo path (/vfs), as v4 does, so one URL fits both
  Mount_Path_Pseudo = true;
  Enable_NLM = false;
  Enable_RQUOTA = false;
}
NFSV4 {
  Graceless = true;
  RecoveryRoot = "$state/recov";
  minor_versions = 0, 1;
  # owners as "0", not "root@domain": libnfs maps only numeric owners and
  # there is no idmapd in the namespace
  Only_Numeric_Owners = true;
}
NFS_KRB5 { Active_krb5 = false; }
LOG {
  Default_Log_Level = EVENT;
  Components { FSAL = ${DCACHE_E2E_LOG_LEVEL:-DEBUG}; EXPORT = INFO; CONFIG = INFO; }
  Facility { name = FILE; destination = "$log"; enable = active; }
}
EOF
}

# A mount point about to be made at PATH in the release's root: removed at
# cleanup, with the directories made for it, up to the topmost one that did
# not exist (never further).
srv_note_root_dir() {
  local d=$1 p=$1 top_made=""
  while [ ! -e "$release_root$p" ] && [ "$p" != / ]; do top_made=$p; p=$(dirname "$p"); done
  [ -z "$top_made" ] || srv_root_dirs+=("$d|$top_made")
}

srv_ns_start() {
  local net="" state d ready i
  if [ "${1:-}" = --net ]; then net=$2; shift 2; fi
  state=$1
  shift
  srv_holder="" srv_in_ns=()
  [ -n "$net$release_root" ] || return 0
  ready=$state/holder.$$.$RANDOM.ready
  local -a enter=()
  if [ -n "$net" ]; then
    ip netns add "$net"
    srv_netns+=("$net")
    ip netns exec "$net" ip link set lo up
    enter=(ip netns exec "$net")
  fi
  if [ -n "$release_root" ]; then
    for d in "$state" "$@"; do srv_note_root_dir "$d"; done
  fi
  # The holder owns the mount namespace; every daemon and command joins it
  # with nsenter, so all of them are children of the caller (--pdeathsig:
  # if the caller is killed outright, none outlives it). The namespace
  # starts as a copy of the host's mounts, among them the loop filesystems
  # of tests running beside this one: each would stay alive here for as long
  # as the server runs, and its test could not detach its loop device. So
  # every loop mount but the caller's own (srv_loopdevs) and those the
  # server stands on is detached here, in this namespace only.
  # shellcheck disable=SC2016  # expanded by the inner shell
  "${enter[@]}" unshare --mount --propagation private setpriv --pdeathsig KILL -- \
    bash -c 'ready=$1 private_run=$2 root=$3 keep=" $4 "; shift 4
      while read -r src target; do
        target=${target//\\040/ }
        case $keep in *" $src "*) continue ;; esac
        # never what the server stands on (/, its state dir, its root)
        [ "$target" != / ] && [ "${1#"$target"/}" = "$1" ] && [ "${root#"$target"/}" = "$root" ] || continue
        umount -l "$target" 2>/dev/null || true
      done < <(awk '\''{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 2) ~ /^\/dev\/loop/) print $(i + 2), $5; break } }'\'' /proc/self/mountinfo)
      if [ -n "$private_run" ]; then mount -t tmpfs -o size=16m,mode=755 dcache-run /run || exit 1; fi
      if [ -n "$root" ]; then
        mount --rbind /run "$root/run" && mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" || exit 1
        for d in "$@"; do mkdir -p "$root$d" && mount --rbind "$d" "$root$d" || exit 1; done
      fi
      touch "$ready" && exec sleep infinity' \
    holder "$ready" "$net" "$release_root" "${srv_loopdevs[*]}" "$state" "$@" &
  srv_holder=$!
  srv_children+=("$srv_holder 5 namespace-holder")
  for ((i = 0; i < 100; i++)); do
    [ -e "$ready" ] && break
    kill -0 "$srv_holder" 2>/dev/null || { echo "server: could not make the private mount namespace" >&2; return 1; }
    sleep 0.05
  done
  [ -e "$ready" ] || { echo "server: the namespace holder did not come up" >&2; return 1; }
  rm -f "$ready"
  srv_in_ns=(nsenter --target "$srv_holder" --mount)
  [ -z "$net" ] || srv_in_ns+=(--net)
  srv_in_ns+=(--wd="$PWD" --)
}

srv_rpcbind_start() {
  local i
  "${srv_in_ns[@]}" setpriv --pdeathsig KILL -- rpcbind -f -w &
  srv_children+=("$! 5 rpcbind")
  for ((i = 0; i < 100; i++)); do
    "${srv_in_ns[@]}" rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "server: rpcbind is not answering" >&2
  return 1
}

srv_dbus_start() {
  local dir=$1 i
  mkdir -p "$dir/dbus"
  private_dbus_conf "$dir/dbus/system_bus_socket" >"$dir/dbus.conf"
  rm -f "$dir/dbus/system_bus_socket"
  "${srv_in_ns[@]}" setpriv --pdeathsig KILL -- dbus-daemon --config-file="$dir/dbus.conf" --nofork \
    --nopidfile --nosyslog >"$dir/dbus.log" 2>&1 &
  srv_children+=("$! 5 dbus-daemon")
  for ((i = 0; i < 100; i++)); do
    [ -S "$dir/dbus/system_bus_socket" ] && break
    sleep 0.05
  done
  [ -S "$dir/dbus/system_bus_socket" ] || { cat "$dir/dbus.log" >&2; echo "server: dbus-daemon made no socket" >&2; return 1; }
  srv_bus="unix:path=$dir/dbus/system_bus_socket"
}

srv_daemons_start() {
  srv_rpcbind_start && srv_dbus_start "$1"
}

srv_ganesha_start() {
  local conf=$1 log=$2 pidfile=$3
  local -a nfsd=(ganesha.nfsd) env=()
  [ -z "$release_root" ] || nfsd=(chroot "$release_root" /usr/bin/ganesha.nfsd)
  [ -z "$srv_bus" ] || env=(env DBUS_SYSTEM_BUS_ADDRESS="$srv_bus")
  # An array, not a function: a backgrounded simple command is exec'd in
  # the forked child, so $! is the daemon's own pid.
  "${srv_in_ns[@]}" "${env[@]}" setpriv --pdeathsig KILL -- \
    "${nfsd[@]}" -F -L "$log" -f "$conf" -p "$pidfile" &
  srv_ganesha=$!
  srv_ganeshas+=("$srv_ganesha ganesha.nfsd $release ($conf)")
}

srv_wait_serving() {
  local pid=$1 pseudo=$2 deadline=$((SECONDS + $3)) rpc
  until rpc=$("${srv_in_ns[@]}" rpcinfo -p 127.0.0.1 2>/dev/null) &&
        grep -qE '^[[:space:]]*100003[[:space:]]+3[[:space:]]+tcp' <<<"$rpc" &&
        grep -qE '^[[:space:]]*100005[[:space:]]' <<<"$rpc" &&
        "${srv_in_ns[@]}" rpcinfo -T tcp 127.0.0.1 nfs 4 >/dev/null 2>&1 &&
        { [ -z "$pseudo" ] || "${srv_in_ns[@]}" timeout 5 nfs-ls "nfs://127.0.0.1$pseudo?version=3" >/dev/null 2>&1; }; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "server: ganesha.nfsd exited during startup" >&2
      return 3
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "server: ganesha.nfsd did not serve within $3 s" >&2
      return 3
    fi
    sleep 0.2
  done
}
