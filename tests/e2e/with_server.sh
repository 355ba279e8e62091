#!/usr/bin/env bash
# Runs one command against a real, private ganesha.nfsd.
#
#   with_server.sh [--exports FILE]... [--no-default-exports] -- COMMAND [ARGS...]
#
# What it sets up, all of it owned by this one invocation so that several
# can run side by side:
#   - a state dir (mktemp -d) holding a sparse image, formatted XFS (or
#     DCACHE_E2E_FS), attached
#     with `losetup --direct-io=on` (so the backing file's own page cache
#     does not hide what the server's page cache does) and mounted at
#     $state/mnt, with the export roots $state/mnt/vfs and $state/mnt/dcache;
#   - a network namespace of its own (own loopback and ports, so it never
#     meets an NFS server already on the machine) and a mount namespace
#     with a private tmpfs on /run (otherwise rpcbind's unix socket is the
#     host's and Ganesha's shutdown would unregister the host's services);
#   - rpcbind, a private dbus-daemon and ganesha.nfsd in those namespaces,
#     every one a direct child of this script, stopped by its pid.
# COMMAND runs in the same namespaces with
#   DCACHE_SERVER=127.0.0.1 DCACHE_MNT DCACHE_STATE DCACHE_LOG DCACHE_PID
#   DCACHE_LOOPDEV (the loop device under DCACHE_MNT) DBUS_SYSTEM_BUS_ADDRESS
#   DCACHE_EXTRA_LOOPDEV (DCACHE_E2E_EXTRA_FS's loop device, or empty)
# and this script exits with COMMAND's status.
#
# Environment:
#   DCACHE_PLUGIN          path to libfsaldcache.so (required unless FSAL=NULL
#                          or DCACHE_E2E_PLUGINS=stock)
#   DCACHE_E2E_PLUGINS=stock  no Plugins_Dir: Ganesha loads every module from
#                          its default directory, where the package installs
#                          libfsaldcache.so
#   DCACHE_E2E_MOUNT_AT=DIR  the XFS also appears at DIR inside the namespaces
#                          (over a tmpfs on DIR's parent, which must exist),
#                          so exports can name the paths an installed
#                          configuration uses (/srv/nfs/...); nothing on the
#                          host changes
#   DCACHE_E2E_FSAL=NULL   stack Ganesha's NULL FSAL instead of DCACHE
#   DCACHE_E2E_FS          the filesystem of the image: xfs (default), ext4
#                          or btrfs (which refuses RWF_DONTCACHE and reports
#                          no statx DIOALIGN)
#   DCACHE_E2E_IMAGE_SIZE  size of the image (default 2G)
#   DCACHE_E2E_EXTRA_FS=NAME:SIZE  a second filesystem of the same type, on
#                          an image and loop device of its own (direct I/O
#                          too), mounted at $mnt/NAME before the server
#                          starts: exports under it are on their own device,
#                          whose /sys/block/loopN/stat counts their I/O alone
#                          (DCACHE_EXTRA_LOOPDEV names it to the command)
#   DCACHE_E2E_IMAGE       an image to use (made if missing) and keep
#   DCACHE_E2E_BACKEND     IO_Backend for every DCACHE export (io_uring, sync)
#   DCACHE_E2E_SERVER_STOPS=1  the command stops ganesha.nfsd itself: an exit
#                          without a signal is then not a failure
#   DCACHE_E2E_KEEP=1      keep the state dir (and its log) afterwards
#   DCACHE_E2E_ARTIFACTS   directory to copy ganesha.log into on failure
#   DCACHE_E2E_TIMEOUT     seconds to wait for the server to serve (default 30)
#   DCACHE_E2E_LOG_LEVEL   FSAL component log level (default DEBUG)
#   DCACHE_E2E_GANESHA=6.5 run Debian 13's ganesha.nfsd 6.5, its VFS and NULL
#                          modules, from the trixie root (ci/setup.sh
#                          --ganesha 6.5), chrooted in the namespaces below
#                          with the state dir, /run, /proc and /dev bound in;
#                          rpcbind, dbus-daemon and the command stay the
#                          host's. DCACHE_PLUGIN is then a 6.5 build (copied
#                          into the state dir; DCACHE_PLUGIN_6_5, when set,
#                          takes its place). Default 4.3: the host's.
# shellcheck disable=SC2317  # stop_pid and cleanup run from the trap
set -euo pipefail
# shellcheck source=../../tools/private-dbus.sh
. "$(dirname "$0")/../../tools/private-dbus.sh"

prog=${0##*/}
die() { echo "$prog: $*" >&2; exit 2; }
usage() {
  echo "usage: $prog [--exports FILE]... [--no-default-exports] -- COMMAND [ARGS...]" >&2
  exit 2
}

export_files=()
default_exports=1
while [ $# -gt 0 ]; do
  case $1 in
    --exports)
      [ $# -ge 2 ] || usage
      [ -r "$2" ] || die "--exports $2: no such readable file"
      export_files+=("$(realpath "$2")")
      shift 2 ;;
    --exports=*)
      f=${1#--exports=}
      [ -r "$f" ] || die "--exports $f: no such readable file"
      export_files+=("$(realpath "$f")")
      shift ;;
    --no-default-exports) default_exports=0; shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "$prog: unknown argument '$1'" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || usage
[ "$(id -u)" = 0 ] || die "must run as root (loop devices, mounts, namespaces)"

fsal=${DCACHE_E2E_FSAL:-DCACHE}
fsal_dir=/usr/lib/x86_64-linux-gnu/ganesha
# ganesha_root: "" runs the host's ganesha.nfsd; for 6.5 the trixie root, whose
# fsal_dir is the same path inside it.
ganesha_root=""
case ${DCACHE_E2E_GANESHA:-4.3} in
  4.3) ;;
  6.5)
    top=$(cd "$(dirname "$0")/../.." && pwd)
    # shellcheck source=../../ci/trixie-root.sh
    . "$top/ci/trixie-root.sh"
    ganesha_root=$trixie_root
    [ -x "$ganesha_root/usr/bin/ganesha.nfsd" ] || die "DCACHE_E2E_GANESHA=6.5: no ganesha.nfsd in $ganesha_root (run ci/setup.sh --ganesha 6.5)" ;;
  *) die "DCACHE_E2E_GANESHA=$DCACHE_E2E_GANESHA: must be 4.3 or 6.5" ;;
esac
# A suite run by ctest has DCACHE_PLUGIN set to the 4.3 build; the same
# suite against 6.5 names the 6.5 build in DCACHE_PLUGIN_6_5.
[ -z "$ganesha_root" ] || [ -z "${DCACHE_PLUGIN_6_5:-}" ] || DCACHE_PLUGIN=$DCACHE_PLUGIN_6_5
case $fsal in
  DCACHE)
    if [ "${DCACHE_E2E_PLUGINS:-}" = stock ]; then
      DCACHE_PLUGIN=$fsal_dir/libfsaldcache.so
      [ -f "$ganesha_root$DCACHE_PLUGIN" ] || die "DCACHE_E2E_PLUGINS=stock: $DCACHE_PLUGIN is not installed"
    fi
    [ -n "${DCACHE_PLUGIN:-}" ] || die "DCACHE_PLUGIN must name the built libfsaldcache.so (or set DCACHE_E2E_FSAL=NULL)"
    if [ -n "$ganesha_root" ] && [ "${DCACHE_E2E_PLUGINS:-}" = stock ]; then
      plugin=$DCACHE_PLUGIN   # the root's, checked above
    else
      [ -f "$DCACHE_PLUGIN" ] || die "DCACHE_PLUGIN=$DCACHE_PLUGIN: no such file"
      plugin=$(realpath "$DCACHE_PLUGIN")
    fi
    plugin_name=libfsaldcache.so ;;
  NULL)
    plugin=$fsal_dir/libfsalnull.so
    plugin_name=libfsalnull.so
    [ -f "$ganesha_root$plugin" ] || die "$ganesha_root$plugin missing: install nfs-ganesha-nullfs" ;;
  *) die "DCACHE_E2E_FSAL=$fsal: must be DCACHE or NULL" ;;
esac
[ -f "$ganesha_root$fsal_dir/libfsalvfs.so" ] || die "$ganesha_root$fsal_dir/libfsalvfs.so missing: install nfs-ganesha-vfs"
fs_type=${DCACHE_E2E_FS:-xfs}
case $fs_type in
  xfs) mkfs_cmd=(mkfs.xfs -q) ;;
  ext4) mkfs_cmd=(mkfs.ext4 -q -F) ;;
  btrfs) mkfs_cmd=(mkfs.btrfs -q -f) ;;
  *) die "DCACHE_E2E_FS=$fs_type: must be xfs, ext4 or btrfs" ;;
esac
host_tools=(ganesha.nfsd rpcbind rpcinfo dbus-daemon "${mkfs_cmd[0]}" losetup nsenter unshare setpriv ip)
[ -z "$ganesha_root" ] || host_tools=(chroot "${host_tools[@]:1}")
for tool in "${host_tools[@]}"; do
  command -v "$tool" >/dev/null || die "'$tool' not found (run ci/setup.sh)"
done
image_size=${DCACHE_E2E_IMAGE_SIZE:-2G}
ready_timeout=${DCACHE_E2E_TIMEOUT:-30}
fsal_log_level=${DCACHE_E2E_LOG_LEVEL:-DEBUG}

# ---------------------------------------------------------------- teardown --
# Everything below is recorded as soon as it exists, so the trap undoes
# exactly what was made, whichever step failed.
state=""
netns=""
loopdev=""
mounted=0
extra_loopdev=""
extra_mounted=
holder_pid=""
rpcbind_pid=""
dbus_pid=""
ganesha_pid=""
cmd_pid=""
root_binds=()
status=0

# Sends SIGTERM, waits up to $2 seconds, then SIGKILL. Only ever our own
# children, by pid.
stop_pid() {
  local pid=$1 grace=$2 what=$3 i
  [ -n "$pid" ] || return 0
  stopped_rc=0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || stopped_rc=$?; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    # a zombie child still answers kill -0; reap it when it is one
    if [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = Z ]; then break; fi
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" != Z ]; then
    echo "$prog: $what (pid $pid) ignored SIGTERM for ${grace}s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  stopped_rc=0
  wait "$pid" 2>/dev/null || stopped_rc=$?
}

cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  # Teardown must finish even when stderr is a closed pipe (`| head`): a
  # failed echo must neither kill us (SIGPIPE) nor stop us (set -e).
  trap '' PIPE
  set +e
  [ "$status" != 0 ] || status=$rc
  stop_pid "$cmd_pid" 5 "command"
  # what the log said when things went wrong, before shutdown chatter
  local log_lines=0
  [ -z "$state" ] || [ ! -f "$state/ganesha.log" ] || log_lines=$(wc -l <"$state/ganesha.log")
  stop_pid "$ganesha_pid" 20 "ganesha.nfsd"
  # Ganesha exits 0 on SIGTERM: a signal here is a crash in shutdown
  # (129..: killed by signal N-128), which fails the run.
  if [ -n "$ganesha_pid" ] && [ "$stopped_rc" -gt 128 ]; then
    echo "$prog: ganesha.nfsd died by a signal while stopping (status $stopped_rc)" >&2
    [ "$status" != 0 ] || status=5
  fi
  stop_pid "$dbus_pid" 5 "dbus-daemon"
  stop_pid "$rpcbind_pid" 5 "rpcbind"
  stop_pid "$holder_pid" 5 "namespace holder"
  # the (now unmounted, empty) mount points the holder made in the root
  if [ -n "$ganesha_root" ] && [ -n "$state" ]; then
    rmdir "$ganesha_root$state" 2>/dev/null || true
    [ -z "${DCACHE_E2E_MOUNT_AT:-}" ] || rmdir "$ganesha_root$DCACHE_E2E_MOUNT_AT" 2>/dev/null || true
    for p in "${root_binds[@]}"; do rmdir -p "$ganesha_root$p" 2>/dev/null || true; done
  fi

  if [ "$status" != 0 ] && [ -n "$state" ] && [ -f "$state/ganesha.log" ]; then
    local saved
    if [ -n "${DCACHE_E2E_ARTIFACTS:-}" ]; then
      mkdir -p "$DCACHE_E2E_ARTIFACTS"
      saved="$DCACHE_E2E_ARTIFACTS/ganesha-${netns:-e2e}.log"
    elif [ "${DCACHE_E2E_KEEP:-0}" = 1 ]; then
      saved="$state/ganesha.log"
    else
      saved="${TMPDIR:-/tmp}/${netns:-dcache-e2e}.ganesha.log"
    fi
    [ "$saved" = "$state/ganesha.log" ] || cp "$state/ganesha.log" "$saved"
    echo "$prog: failed (status $status); ganesha.log is at $saved; its last lines:" >&2
    head -n "$log_lines" "$saved" | tail -n 25 | sed 's/^/  | /' >&2
  fi

  if [ -n "$extra_mounted" ]; then
    for ((i = 0; i < 50; i++)); do
      umount "$extra_mounted" 2>/dev/null && { extra_mounted=""; break; }
      sleep 0.1
    done
    [ -z "$extra_mounted" ] || umount -l "$extra_mounted" || true
  fi
  [ -z "$extra_loopdev" ] || losetup -d "$extra_loopdev" 2>/dev/null ||
    echo "$prog: could not detach $extra_loopdev" >&2
  if [ "$mounted" = 1 ]; then
    for ((i = 0; i < 50; i++)); do
      umount "$state/mnt" 2>/dev/null && { mounted=0; break; }
      sleep 0.1
    done
    if [ "$mounted" = 1 ]; then
      echo "$prog: $state/mnt still busy; detaching it lazily" >&2
      umount -l "$state/mnt" || true
    fi
  fi
  # -d on a device still held (lazy unmount) sets autoclear: it detaches
  # when the last user goes away.
  [ -z "$loopdev" ] || losetup -d "$loopdev" 2>/dev/null ||
    echo "$prog: could not detach $loopdev" >&2
  [ -z "$netns" ] || ip netns del "$netns" 2>/dev/null || true
  if [ -n "$state" ]; then
    if [ "${DCACHE_E2E_KEEP:-0}" = 1 ]; then
      echo "$prog: kept state dir $state" >&2
    else
      rm -rf --one-file-system "$state"
    fi
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'status=130; exit 130' INT
trap 'status=143; exit 143' TERM
trap 'status=141; exit 141' PIPE

# ------------------------------------------------------------- filesystem --
state=$(mktemp -d "${TMPDIR:-/tmp}/dcache-e2e.XXXXXX")
chmod 755 "$state"
mnt=$state/mnt
netns="dcache-e2e-$$-${state##*.}"
mkdir -p "$mnt" "$state/plugins" "$state/recov" "$state/dbus"
# DCACHE_E2E_IMAGE keeps the filesystem across runs (the crash test writes,
# shuts XFS down, then a second run recovers and verifies): used as it is
# when it exists, made when it does not, never deleted.
image=${DCACHE_E2E_IMAGE:-$state/$fs_type.img}
if [ ! -e "$image" ]; then
  truncate -s "$image_size" "$image"
  "${mkfs_cmd[@]}" "$image" >/dev/null
fi
loopdev=$(losetup --direct-io=on -f --show "$image")
mount "$loopdev" "$mnt"
mounted=1
mkdir -p "$mnt/vfs" "$mnt/dcache"
if [ -n "${DCACHE_E2E_EXTRA_FS:-}" ]; then
  extra_name=${DCACHE_E2E_EXTRA_FS%%:*} extra_size=${DCACHE_E2E_EXTRA_FS#*:}
  if ! [[ $extra_name =~ ^[A-Za-z0-9_-]+$ ]] || [ "$extra_size" = "$DCACHE_E2E_EXTRA_FS" ]; then
    die "DCACHE_E2E_EXTRA_FS=$DCACHE_E2E_EXTRA_FS: must be NAME:SIZE"
  fi
  truncate -s "$extra_size" "$state/$extra_name.img"
  "${mkfs_cmd[@]}" "$state/$extra_name.img" >/dev/null
  extra_loopdev=$(losetup --direct-io=on -f --show "$state/$extra_name.img")
  mkdir -p "$mnt/$extra_name"
  mount "$extra_loopdev" "$mnt/$extra_name"
  extra_mounted=$mnt/$extra_name
fi

ln -s "$fsal_dir/libfsalvfs.so" "$state/plugins/libfsalvfs.so"
if [ -n "$ganesha_root" ] && [ "$fsal" = DCACHE ] && [ "${DCACHE_E2E_PLUGINS:-}" != stock ]; then
  cp "$plugin" "$state/plugins/$plugin_name"   # the root sees the state dir, not the build
else
  ln -s "$plugin" "$state/plugins/$plugin_name"
fi

# ----------------------------------------------------------------- config --
plugins_dir_line="Plugins_Dir = \"$state/plugins\";"
[ "${DCACHE_E2E_PLUGINS:-}" != stock ] || plugins_dir_line="# Plugins_Dir: Ganesha's default ($fsal_dir)"
# 6.5 refuses to start when prctl(PR_SET_IO_FLUSHER) fails, as it does
# without CAP_SYS_RESOURCE (containers); 4.3 has no such call or option.
core_param_extra=""
[ -z "$ganesha_root" ] || core_param_extra="
  Allow_Set_Io_Flusher_Fail = true;"
{
  cat <<EOF
# generated by $prog for $state
# No Bind_addr: Ganesha resolves it with AI_ADDRCONFIG, which finds no
# address in a namespace that has only loopback ("No IP address found for
# 127.0.0.1"). The namespace has nothing but lo, so "any" is loopback only.
NFS_CORE_PARAM {
  $plugins_dir_line$core_param_extra
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
  Components { FSAL = $fsal_log_level; EXPORT = INFO; CONFIG = INFO; }
  Facility { name = FILE; destination = "$state/ganesha.log"; enable = active; }
}
EOF
  if [ "$default_exports" = 1 ]; then
    cat <<EOF
EXPORT {
  Export_Id = 1; Path = "$mnt/vfs"; Pseudo = /vfs;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4;
  Transports = TCP; SecType = sys;
  FSAL { Name = VFS; }
}
EXPORT {
  Export_Id = 2; Path = "$mnt/dcache"; Pseudo = /dcache;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4;
  Transports = TCP; SecType = sys;
  FSAL { Name = $fsal; FSAL { Name = VFS; } }
}
EOF
  fi
  for f in "${export_files[@]}"; do
    echo "# from $f"
    sed -e "s|@MNT@|$mnt|g" -e "s|@STATE@|$state|g" "$f"
  done
} >"$state/ganesha.conf"
# DCACHE_E2E_BACKEND runs every DCACHE export on that I/O backend, so one
# suite covers io_uring (the default) and the synchronous backend.
if [ -n "${DCACHE_E2E_BACKEND:-}" ]; then
  sed -i -E "s/(Name[[:space:]]*=[[:space:]]*DCACHE[[:space:]]*;)/\\1 IO_Backend = $DCACHE_E2E_BACKEND;/I" "$state/ganesha.conf"
fi

# Every Path the exports name under the mount must exist before Ganesha
# starts, or the export fails for a reason the test did not intend (also
# in files the configuration %includes).
mount_at=${DCACHE_E2E_MOUNT_AT:-}
if [ -n "$mount_at" ]; then
  [[ "$mount_at" == /*/* ]] || die "DCACHE_E2E_MOUNT_AT=$mount_at: must be an absolute path below a directory"
  [ -d "$(dirname "$mount_at")" ] || die "DCACHE_E2E_MOUNT_AT=$mount_at: $(dirname "$mount_at") does not exist"
fi
conf_files=("$state/ganesha.conf")
# With a root (6.5), ganesha.nfsd reads an absolute %include there (the
# root's /etc/ganesha/dcache.conf, say), except below the state dir, which
# is bound in at its own path.
while IFS= read -r f; do
  if [ -n "$ganesha_root" ]; then
    case $f in "$state"/*) ;; /*) f=$ganesha_root$f ;; esac
  fi
  conf_files+=("$f")
done < <(sed -nE 's/^[[:space:]]*%include[[:space:]]+"?([^"]+)"?.*/\1/p' "$state/ganesha.conf")
while IFS= read -r p; do
  case $p in
    "$mnt"/*) mkdir -p "$p" ;;
    *) [ -z "$mount_at" ] || [ "${p#"$mount_at"/}" = "$p" ] || mkdir -p "$mnt/${p#"$mount_at"/}" ;;
  esac
done < <(grep -ohiE '(^|[^[:alnum:]_])path[[:space:]]*=[[:space:]]*"?[^";[:space:]]+' "${conf_files[@]}" |
         sed -E 's/.*=[[:space:]]*"?//')
# With a root (6.5): the filesystems of export paths outside the state dir
# and DCACHE_E2E_MOUNT_AT (a test's own tmpfs, say) are bound into the root
# too, whole (Ganesha resolves an export to its filesystem by mount point).
if [ -n "$ganesha_root" ]; then
  while IFS= read -r p; do
    root_binds+=("$p")
  done < <(grep -ohiE '(^|[^[:alnum:]_])path[[:space:]]*=[[:space:]]*"?[^";[:space:]]+' "${conf_files[@]}" |
           sed -E 's/.*=[[:space:]]*"?//' | while IFS= read -r p; do
             case $p in "$state"/* | "$state") continue ;; esac
             [ -z "$mount_at" ] || [ "${p#"$mount_at"}" = "$p" ] || continue
             [ -d "$p" ] && findmnt -n -o TARGET --target "$p"
           done | sort -u | grep -v -x /)
fi

private_dbus_conf "$state/dbus/system_bus_socket" >"$state/dbus.conf"
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$state/dbus/system_bus_socket"

# ------------------------------------------------------------- namespaces --
ip netns add "$netns"
ip netns exec "$netns" ip link set lo up
# The holder owns the mount namespace (private /run); every daemon and the
# command join it with nsenter, so all of them are children of this script.
# --pdeathsig: if this script is killed outright, they do not outlive it.
# With a root (6.5), ganesha.nfsd runs chrooted in it: the holder also
# mounts, in this namespace only, the private /run, /proc, /dev, the state
# dir (with the XFS in it) and DCACHE_E2E_MOUNT_AT at their own paths there.
# shellcheck disable=SC2016  # $1 expands in the inner shell
ip netns exec "$netns" unshare --mount --propagation private \
  setpriv --pdeathsig KILL -- \
  bash -c 'mount -t tmpfs -o size=16m,mode=755 dcache-e2e-run /run &&
    if [ -n "$2" ]; then
      mount -t tmpfs -o size=1m,mode=755 dcache-e2e-at "$(dirname "$2")" && mkdir "$2" && mount --bind "$3" "$2"
    fi &&
    if [ -n "$4" ]; then
      mount --rbind /run "$4/run" && mount -t proc proc "$4/proc" && mount --rbind /dev "$4/dev" &&
        mkdir -p "$4$5" && mount --rbind "$5" "$4$5" &&
        if [ -n "$2" ]; then mkdir -p "$4$2" && mount --rbind "$2" "$4$2"; fi &&
        for p in "${@:6}"; do mkdir -p "$4$p" && mount --rbind "$p" "$4$p" || exit 1; done
    fi && touch "$1" && exec sleep infinity' \
  holder "$state/holder.ready" "$mount_at" "$mnt" "$ganesha_root" "$state" "${root_binds[@]}" &
holder_pid=$!
for ((i = 0; i < 100; i++)); do
  [ -e "$state/holder.ready" ] && break
  kill -0 "$holder_pid" 2>/dev/null || die "could not create the private mount namespace"
  sleep 0.05
done
[ -e "$state/holder.ready" ] || die "namespace holder did not come up"

# An array, not a function: a backgrounded simple command is exec'd in the
# forked child, so $! is the daemon's own pid (a backgrounded function would
# leave a subshell in between, and killing that orphans the daemon).
in_ns=(nsenter --target "$holder_pid" --mount --net --wd="$PWD" --)

"${in_ns[@]}" setpriv --pdeathsig KILL -- rpcbind -f -w &
rpcbind_pid=$!
"${in_ns[@]}" setpriv --pdeathsig KILL -- dbus-daemon --config-file="$state/dbus.conf" --nofork --nopidfile --nosyslog \
  >"$state/dbus.log" 2>&1 &
dbus_pid=$!
for ((i = 0; i < 100; i++)); do
  [ -S "$state/dbus/system_bus_socket" ] && "${in_ns[@]}" rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break
  sleep 0.05
done
[ -S "$state/dbus/system_bus_socket" ] || die "dbus-daemon did not create its socket"
"${in_ns[@]}" rpcinfo -p 127.0.0.1 >/dev/null 2>&1 || die "rpcbind is not answering in $netns"

ganesha_nfsd=(ganesha.nfsd)
[ -z "$ganesha_root" ] || ganesha_nfsd=(chroot "$ganesha_root" /usr/bin/ganesha.nfsd)
"${in_ns[@]}" setpriv --pdeathsig KILL -- \
  "${ganesha_nfsd[@]}" -F -L "$state/ganesha.log" -f "$state/ganesha.conf" -p "$state/ganesha.pid" &
ganesha_pid=$!

# ------------------------------------------------------- wait for service --
server_ready() {
  local rpc
  rpc=$("${in_ns[@]}" rpcinfo -p 127.0.0.1 2>/dev/null) || return 1
  grep -qE '^[[:space:]]*100003[[:space:]]+3[[:space:]]+tcp' <<<"$rpc" || return 1
  grep -qE '^[[:space:]]*100005[[:space:]]' <<<"$rpc" || return 1
  "${in_ns[@]}" rpcinfo -T tcp 127.0.0.1 nfs 4 >/dev/null 2>&1 || return 1
  # with exports, serving means a client can list one
  if [ "$default_exports" = 1 ] && command -v nfs-ls >/dev/null; then
    "${in_ns[@]}" timeout 5 nfs-ls "nfs://127.0.0.1/vfs?version=3" >/dev/null 2>&1 || return 1
  fi
}
deadline=$((SECONDS + ready_timeout))
until server_ready; do
  if ! kill -0 "$ganesha_pid" 2>/dev/null; then
    wait "$ganesha_pid" && rc=0 || rc=$?
    ganesha_pid=""
    echo "$prog: ganesha.nfsd exited with status $rc during startup" >&2
    status=3; exit 3
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "$prog: ganesha.nfsd did not serve within ${ready_timeout}s" >&2
    status=3; exit 3
  fi
  sleep 0.2
done
if [ -s "$state/ganesha.pid" ] && [ "$(cat "$state/ganesha.pid")" != "$ganesha_pid" ]; then
  die "ganesha.pid says $(cat "$state/ganesha.pid"), expected $ganesha_pid"
fi

# ---------------------------------------------------------------- command --
# Run in the background and wait, so a SIGTERM to this script is handled at
# once (bash defers traps while a foreground child runs).
"${in_ns[@]}" env DCACHE_SERVER=127.0.0.1 DCACHE_MNT="$mnt" DCACHE_STATE="$state" \
  DCACHE_LOG="$state/ganesha.log" DCACHE_PID="$ganesha_pid" DCACHE_LOOPDEV="$loopdev" \
  DCACHE_EXTRA_LOOPDEV="$extra_loopdev" \
  DBUS_SYSTEM_BUS_ADDRESS="$DBUS_SYSTEM_BUS_ADDRESS" "$@" &
cmd_pid=$!
wait "$cmd_pid" && status=0 || status=$?
cmd_pid=""
if ! kill -0 "$ganesha_pid" 2>/dev/null; then
  # DCACHE_E2E_SERVER_STOPS=1: the command stops the server itself (SIGTERM)
  # and wants to know how it went: a crash signal still fails the run.
  wait "$ganesha_pid" && server_rc=0 || server_rc=$?
  ganesha_pid=""
  if [ "${DCACHE_E2E_SERVER_STOPS:-0}" = 1 ] && [ "$server_rc" -lt 128 ]; then
    echo "$prog: ganesha.nfsd exited with status $server_rc, as the command asked" >&2
  else
    echo "$prog: ganesha.nfsd died while the command ran (status $server_rc)" >&2
    [ "$status" != 0 ] || status=4
  fi
fi
exit "$status"
