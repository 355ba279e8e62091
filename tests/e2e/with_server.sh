#!/usr/bin/env bash
# Runs one command against a real, private ganesha.nfsd.
#
#   with_server.sh [--exports FILE]... [--no-default-exports] -- COMMAND [ARGS...]
#
# What it sets up (ci/server.sh does the work), all of it owned by this one
# invocation so that several can run side by side:
#   - a state dir (mktemp -d) holding a sparse image, formatted XFS (or
#     DCACHE_E2E_FS), attached with `losetup --direct-io=on` and mounted at
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
#   DCACHE_GANESHA         the Ganesha release that serves (ci/release.sh):
#                          4.3 (default, the host's), 6.5 or 9.14, chrooted
#                          in that release's Debian root (ci/setup.sh
#                          --ganesha X) with the state dir, /run, /proc and
#                          /dev bound in; rpcbind, dbus-daemon and the
#                          command stay the host's. The module is then that
#                          release's build (build-X/, ci/build.sh --ganesha X)
#   DCACHE_PLUGIN          path to libfsaldcache.so for 4.3 (required unless
#                          FSAL=NULL or DCACHE_E2E_PLUGINS=stock)
#   DCACHE_E2E_PLUGINS=stock  no Plugins_Dir: Ganesha loads every module from
#                          its default directory, where the package installs
#                          libfsaldcache.so
#   DCACHE_E2E_MOUNT_AT=DIR  the filesystem also appears at DIR inside the
#                          namespaces (over a tmpfs on DIR's parent, which
#                          must exist), so exports can name the paths an
#                          installed configuration uses (/srv/nfs/...)
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
# shellcheck disable=SC2317  # cleanup runs from the trap
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../../ci/release.sh
. "$top/ci/release.sh"
# shellcheck source=../../ci/server.sh
. "$top/ci/server.sh"

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
release_select "${DCACHE_GANESHA:-}" || exit 2
[ -z "$release_root" ] || [ -x "$release_root/usr/bin/ganesha.nfsd" ] ||
  die "DCACHE_GANESHA=$release: no ganesha.nfsd in $release_root (run $release_setup)"

fsal=${DCACHE_E2E_FSAL:-DCACHE}
case $fsal in
  DCACHE)
    if [ "${DCACHE_E2E_PLUGINS:-}" = stock ]; then
      plugin=$release_fsal_dir/libfsaldcache.so
      [ -f "$release_root$plugin" ] || die "DCACHE_E2E_PLUGINS=stock: $release_root$plugin is not installed"
    else
      # ctest names the host's (4.3) build in DCACHE_PLUGIN; another
      # release's module is its own build
      [ -z "$release_root" ] || DCACHE_PLUGIN=$release_plugin
      [ -n "${DCACHE_PLUGIN:-}" ] || die "DCACHE_PLUGIN must name the built libfsaldcache.so (or set DCACHE_E2E_FSAL=NULL)"
      [ -f "$DCACHE_PLUGIN" ] || die "DCACHE_PLUGIN=$DCACHE_PLUGIN: no such file${release_root:+ (ci/build.sh --ganesha $release)}"
      plugin=$(realpath "$DCACHE_PLUGIN")
    fi ;;
  NULL)
    plugin=$release_fsal_dir/libfsalnull.so
    [ -f "$release_root$plugin" ] || die "$release_root$plugin missing: install nfs-ganesha-nullfs" ;;
  *) die "DCACHE_E2E_FSAL=$fsal: must be DCACHE or NULL" ;;
esac
[ -f "$release_root$release_fsal_dir/libfsalvfs.so" ] || die "$release_root$release_fsal_dir/libfsalvfs.so missing: install nfs-ganesha-vfs"
tools=(rpcbind rpcinfo dbus-daemon losetup nsenter unshare setpriv ip)
if [ -n "$release_root" ]; then tools+=(chroot); else tools+=(ganesha.nfsd); fi
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || die "'$tool' not found (run ci/setup.sh)"
done
mount_at=${DCACHE_E2E_MOUNT_AT:-}
if [ -n "$mount_at" ]; then
  [[ "$mount_at" == /*/* ]] || die "DCACHE_E2E_MOUNT_AT=$mount_at: must be an absolute path below a directory"
  [ -d "$(dirname "$mount_at")" ] || die "DCACHE_E2E_MOUNT_AT=$mount_at: $(dirname "$mount_at") does not exist"
fi

# ---------------------------------------------------------------- teardown --
state=""
cmd_pid=""
status=0
cleanup() {
  local rc=$? log_lines=0 saved
  trap - EXIT INT TERM
  set +e
  [ "$status" != 0 ] || status=$rc
  srv_stop_pid "$cmd_pid" 5 "command"
  # what the log said when things went wrong, before shutdown chatter
  [ -z "$state" ] || [ ! -f "$state/ganesha.log" ] || log_lines=$(wc -l <"$state/ganesha.log")
  srv_cleanup || { [ "$status" != 0 ] || status=5; }
  if [ "$status" != 0 ] && [ -n "$state" ] && [ -f "$state/ganesha.log" ]; then
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
mkdir -p "$state/recov"
# DCACHE_E2E_IMAGE keeps the filesystem across runs (the crash test writes,
# shuts XFS down, then a second run recovers and verifies): used as it is
# when it exists, made when it does not, never deleted.
fs_type=${DCACHE_E2E_FS:-xfs}
image=${DCACHE_E2E_IMAGE:-$state/$fs_type.img}
srv_fs_make "$image" "${DCACHE_E2E_IMAGE_SIZE:-2G}" "$fs_type" || exit 2
srv_fs_mount "$image" "$mnt"
loopdev=$srv_loopdev
mkdir -p "$mnt/vfs" "$mnt/dcache"
extra_loopdev=""
if [ -n "${DCACHE_E2E_EXTRA_FS:-}" ]; then
  extra_name=${DCACHE_E2E_EXTRA_FS%%:*} extra_size=${DCACHE_E2E_EXTRA_FS#*:}
  if ! [[ $extra_name =~ ^[A-Za-z0-9_-]+$ ]] || [ "$extra_size" = "$DCACHE_E2E_EXTRA_FS" ]; then
    die "DCACHE_E2E_EXTRA_FS=$DCACHE_E2E_EXTRA_FS: must be NAME:SIZE"
  fi
  srv_fs_make "$state/$extra_name.img" "$extra_size" "$fs_type" || exit 2
  srv_fs_mount "$state/$extra_name.img" "$mnt/$extra_name"
  extra_loopdev=$srv_loopdev
fi
plugins_dir=""
if [ "${DCACHE_E2E_PLUGINS:-}" != stock ]; then
  plugins_dir=$state/plugins
  srv_plugin_dir "$plugins_dir" "$plugin"
fi

# ----------------------------------------------------------------- config --
{
  echo "# generated by $prog for $state"
  srv_conf_core "$state" "$state/ganesha.log" "$plugins_dir"
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
conf_files=("$state/ganesha.conf")
# In a root, ganesha.nfsd reads an absolute %include there (the root's
# /etc/ganesha/dcache.conf, say), except below the state dir, which is bound
# in at its own path.
while IFS= read -r f; do
  if [ -n "$release_root" ]; then
    case $f in "$state"/*) ;; /*) f=$release_root$f ;; esac
  fi
  conf_files+=("$f")
done < <(sed -nE 's/^[[:space:]]*%include[[:space:]]+"?([^"]+)"?.*/\1/p' "$state/ganesha.conf")
export_paths=$(grep -ohiE '(^|[^[:alnum:]_])path[[:space:]]*=[[:space:]]*"?[^";[:space:]]+' "${conf_files[@]}" |
               sed -E 's/.*=[[:space:]]*"?//')
while IFS= read -r p; do
  case $p in
    "$mnt"/*) mkdir -p "$p" ;;
    *) [ -z "$mount_at" ] || [ "${p#"$mount_at"/}" = "$p" ] || mkdir -p "$mnt/${p#"$mount_at"/}" ;;
  esac
done <<<"$export_paths"
# In a root: the filesystems of export paths outside the state dir and
# DCACHE_E2E_MOUNT_AT (a test's own tmpfs, say) are bound into it too, whole
# (Ganesha resolves an export to its filesystem by mount point).
binds=()
if [ -n "$release_root" ]; then
  while IFS= read -r p; do
    [ -z "$p" ] || binds+=("$p")
  done < <(while IFS= read -r p; do
             case $p in "$state"/* | "$state" | "") continue ;; esac
             [ -z "$mount_at" ] || [ "${p#"$mount_at"}" = "$p" ] || continue
             [ -d "$p" ] && findmnt -n -o TARGET --target "$p"
           done <<<"$export_paths" | sort -u | grep -v -x /)
  [ -z "$mount_at" ] || srv_note_root_dir "$mount_at"
fi

# ------------------------------------------------------------- namespaces --
srv_ns_start --net "$netns" "$state" "${binds[@]}"
if [ -n "$mount_at" ]; then
  # DCACHE_E2E_MOUNT_AT: the filesystem at that path too, in the namespace
  # only (over a tmpfs on its parent)
  # shellcheck disable=SC2016  # expanded by the inner shell
  "${srv_in_ns[@]}" bash -c 'mount -t tmpfs -o size=1m,mode=755 dcache-e2e-at "$(dirname "$1")" &&
    mkdir "$1" && mount --bind "$2" "$1" &&
    if [ -n "$3" ]; then mkdir -p "$3$1" && mount --rbind "$1" "$3$1"; fi' \
    at "$mount_at" "$mnt" "$release_root" || die "could not mount the filesystem at $mount_at"
fi
srv_daemons_start "$state"
export DBUS_SYSTEM_BUS_ADDRESS=$srv_bus
srv_ganesha_start "$state/ganesha.conf" "$state/ganesha.log" "$state/ganesha.pid"
ganesha_pid=$srv_ganesha

# ------------------------------------------------------- wait for service --
# with exports, serving means a client can list one
serving_pseudo=""
[ "$default_exports" = 0 ] || serving_pseudo=/vfs
srv_wait_serving "$ganesha_pid" "$serving_pseudo" "${DCACHE_E2E_TIMEOUT:-30}" || { status=3; exit 3; }
if [ -s "$state/ganesha.pid" ] && [ "$(cat "$state/ganesha.pid")" != "$ganesha_pid" ]; then
  die "ganesha.pid says $(cat "$state/ganesha.pid"), expected $ganesha_pid"
fi

# ---------------------------------------------------------------- command --
# Run in the background and wait, so a SIGTERM to this script is handled at
# once (bash defers traps while a foreground child runs).
"${srv_in_ns[@]}" env DCACHE_SERVER=127.0.0.1 DCACHE_MNT="$mnt" DCACHE_STATE="$state" \
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
  srv_ganeshas=()
  if [ "${DCACHE_E2E_SERVER_STOPS:-0}" = 1 ] && [ "$server_rc" -lt 128 ]; then
    echo "$prog: ganesha.nfsd exited with status $server_rc, as the command asked" >&2
  else
    echo "$prog: ganesha.nfsd died while the command ran (status $server_rc)" >&2
    [ "$status" != 0 ] || status=4
  fi
fi
exit "$status"
