#!/usr/bin/env bash
# The demo: a ganesha.nfsd with the DCACHE plugin on 127.0.0.1, serving
#   /vfs        plain VFS (for comparison)
#   /dontcache  DCACHE, reads and writes with RWF_DONTCACHE
#   /direct     DCACHE, O_DIRECT reads, O_DIRECT writes made FILE_SYNC
# from an XFS filesystem in a loop device under the state dir. It writes
# and reads files (1 byte, 1 MiB + 123 bytes, 64 MiB) through every export
# and checks they round-trip, prints how much of them each export left in
# the server's page cache (cachestat(2)) and what DCACHE counted (WRITEs
# answered FILE_SYNC, COMMITs received), then serves until Ctrl-C /
# SIGTERM, which stop it cleanly (status 0).
#
#   ci/demo.sh [--check] [--state DIR] [--ganesha 4.3|6.5|9.14]
#     --check                run the workload, verify it, stop (for CI)
#     --state DIR            state dir (default ./state; the image is reused,
#                            the workload's own files are rewritten each run)
#     --ganesha X            that release's ganesha.nfsd (ci/release.sh; or
#                            DCACHE_GANESHA=X): 6.5 (Debian 13) and 9.14
#                            (Debian 13 backports) chrooted in their Debian
#                            root (ci/setup.sh --ganesha X) in a mount
#                            namespace of its own that binds /run, /proc, /dev
#                            and the state dir in and ends with it; the module
#                            is build-X's. Default 4.3, Debian 12's on this
#                            machine.
#   DCACHE_DEMO_SECONDS=N    serve N seconds after the workload, then stop
#   DCACHE_DEMO_IMAGE_SIZE   image size when first created (default 4G)
#   DCACHE_BUILD_DIR         build dir (default build/, for X build-X/);
#                            when its fsal_dcache/adapter/libfsaldcache.so is
#                            missing, runs ci/setup.sh and builds only that
#                            module (for X with ci/build.sh --ganesha X)
#
# Needs root. Refuses to start if something already listens on port 2049.
# Counters go over the system bus when one runs, else over a private
# dbus-daemon (the address is printed; tools/dcache-stats needs it).
set -euo pipefail

# A script's background commands start with SIGINT ignored, and bash cannot
# trap a signal ignored at entry: `ci/demo.sh &` run from a script would not
# stop on kill -INT. Start over once with SIGINT at its default.
if (( (16#$(awk '/^SigIgn:/ { print $2 }' /proc/$$/status) >> 1) & 1 )) && [ -z "${DCACHE_DEMO_SIGINT:-}" ]; then
  DCACHE_DEMO_SIGINT=default exec env --default-signal=INT "$BASH" "$0" "$@"
fi

top=$(cd "$(dirname "$0")/.." && pwd)
prog=${0##*/}
# shellcheck source=release.sh
. "$top/ci/release.sh"
# shellcheck source=server.sh
. "$top/ci/server.sh"
die() { echo "$prog: $*" >&2; exit 2; }

check=0
state=${DCACHE_DEMO_STATE:-$PWD/state}
release_parse_ganesha "$@" || exit 2
set -- "${release_rest[@]+"${release_rest[@]}"}"
while [ $# -gt 0 ]; do
  case $1 in
    --check) check=1; shift ;;
    --state) [ $# -ge 2 ] || die "--state needs a directory"; state=$2; shift 2 ;;
    --state=*) state=${1#--state=}; shift ;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
seconds=${DCACHE_DEMO_SECONDS:-}
[ -z "$seconds" ] || [[ "$seconds" =~ ^[0-9]+$ ]] || die "DCACHE_DEMO_SECONDS=$seconds: not a number of seconds"
[ "$(id -u)" = 0 ] || die "must run as root (loop device, mount, ports below 1024)"
root=$release_root

# ---- the plugin (only the module, never the tests) ---------------------------
build=${DCACHE_BUILD_DIR:-$release_build_dir}
plugin=$build/fsal_dcache/adapter/libfsaldcache.so
if [ -n "$root" ]; then
  if [ ! -f "$plugin" ] || [ ! -x "$root/usr/bin/ganesha.nfsd" ]; then
    echo "$prog: $plugin or $root/usr/bin/ganesha.nfsd is missing: setting up ($release_setup), then building the module only"
    DCACHE_BUILD_DIR=$build "$top/ci/build.sh" --ganesha "$release"
    [ -f "$plugin" ] || die "built target fsaldcache but $plugin is still missing"
  fi
elif [ ! -f "$plugin" ]; then
  echo "$prog: $plugin is missing: setting up (ci/setup.sh), then building the module only"
  "$top/ci/setup.sh"
  mkdir -p "$build"
  # configured as ci/build.sh does, so that a later ci/build.sh reuses it
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log" >&2; die "configuring $build failed"; }
  fi
  cmake --build "$build" --target fsaldcache -j"$(nproc)"
  [ -f "$plugin" ] || die "built target fsaldcache but $plugin is still missing"
fi
[ -f "$root$release_fsal_dir/libfsalvfs.so" ] || die "$root$release_fsal_dir/libfsalvfs.so missing (run $release_setup)"
[ -z "$root" ] || [ -x "$root/usr/bin/ganesha.nfsd" ] || die "$root/usr/bin/ganesha.nfsd missing (run $release_setup)"
if [ -n "$root" ]; then server_tools=(chroot unshare setpriv); else server_tools=(ganesha.nfsd); fi
for tool in "${server_tools[@]}" rpcinfo rpcbind mkfs.xfs losetup ss nfs-cp nfs-cat nfs-ls python3 dbus-daemon dbus-send; do
  command -v "$tool" >/dev/null || die "'$tool' not found (run ci/setup.sh)"
done

# ---- never meet another NFS server ------------------------------------------
listeners=$(ss -Hltn 'sport = :2049') || die "ss could not list the listening sockets"
if [ -n "$listeners" ]; then
  die "port 2049 is already in use (another NFS server?): $(ss -Hltnp 'sport = :2049' | tr -s ' ' | head -n1). Stop it or run the tests' namespaced harness (tests/e2e/with_server.sh) instead."
fi

# ---- teardown ----------------------------------------------------------------
mnt=$state/mnt
ganesha_pid=""
sleep_pid=""
serving=0
signalled=""
# shellcheck disable=SC2317  # runs from the trap
cleanup() {
  local rc=$?
  trap - EXIT
  # the teardown always finishes: no second Ctrl-C cuts it short, and a
  # closed stdout (demo | head) neither kills nor stops it
  trap '' INT TERM HUP PIPE
  set +e
  echo "$prog: stopping"
  srv_stop_pid "$sleep_pid" 1 sleep
  srv_cleanup || { [ "$rc" != 0 ] || rc=1; }
  [ -z "$srv_bus" ] || rm -f "$state/dbus/system_bus_socket"
  [ -z "$srv_loopdev" ] || rm -rf "$state/work"
  if [ "$rc" = 0 ]; then
    echo "$prog: stopped${signalled:+ on $signalled}: server stopped, $mnt unmounted${srv_loopdev:+, $srv_loopdev detached}; $state/xfs.img kept"
  elif [ -n "$signalled" ] && [ "$serving" = 0 ]; then
    echo "$prog: interrupted by $signalled before serving (status $rc); stopped, $mnt unmounted" >&2
  else
    echo "$prog: failed (status $rc); server log: $state/ganesha.log" >&2
  fi
  exit "$rc"
}
# shellcheck disable=SC2317  # runs from the trap
on_signal() {  # name, status when the demo was not yet serving
  signalled=$1
  if [ "$serving" = 1 ]; then
    echo
    exit 0
  fi
  exit "$2"
}
trap cleanup EXIT
trap 'on_signal SIGINT 130' INT
trap 'on_signal SIGTERM 143' TERM
trap 'on_signal SIGHUP 129' HUP

# ---- filesystem (the image survives between runs) ---------------------------
exports=(vfs dontcache direct)
files=(one-byte misaligned sixty-four-mib)
mkdir -p "$state" "$mnt"
state=$(cd "$state" && pwd)
mnt=$state/mnt
[ -f "$state/xfs.img" ] || echo "$prog: creating ${DCACHE_DEMO_IMAGE_SIZE:-4G} XFS image $state/xfs.img"
srv_fs_make "$state/xfs.img" "${DCACHE_DEMO_IMAGE_SIZE:-4G}" xfs
srv_fs_mount "$state/xfs.img" "$mnt" || die "$mnt could not be mounted (another demo running from this state dir?)"
mkdir -p "$mnt/vfs" "$mnt/dontcache" "$mnt/direct" "$state/recov" "$state/work" "$state/dbus"
# the workload's files from an earlier run go before the server starts
# (nfs-cp does not overwrite); anything else under the exports stays
for exp in "${exports[@]}"; do
  for f in "${files[@]}"; do rm -f "$mnt/$exp/$f"; done
done
srv_plugin_dir "$state/plugins" "$plugin"

{
  echo "# generated by ci/demo.sh"
  DCACHE_E2E_LOG_LEVEL=INFO srv_conf_core "$state" "$state/ganesha.log" "$state/plugins" "Bind_addr = 127.0.0.1;"
  cat <<EOF
EXPORT {
  Export_Id = 1; Path = "$mnt/vfs"; Pseudo = /vfs;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = VFS; }
}
EXPORT {
  Export_Id = 2; Path = "$mnt/dontcache"; Pseudo = /dontcache;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = DCACHE; IO_Cache_Read = dontcache; IO_Cache_Write = dontcache; FSAL { Name = VFS; } }
}
EXPORT {
  Export_Id = 3; Path = "$mnt/direct"; Pseudo = /direct;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct_file_sync; FSAL { Name = VFS; } }
}
EOF
} >"$state/ganesha.conf"

# ---- DBus (for the counters), rpcbind and ganesha ----------------------------
# The host's network: the server is for a person to connect to. With a root
# (6.5, 9.14) it runs chrooted in it, in a mount namespace of its own
# (nothing is mounted on the host) holding the host's /run (rpcbind's socket,
# the system bus), /proc, /dev and the state dir at their own paths.
srv_ns_start "$state"
# The system bus when it runs and no other ganesha.nfsd owns the name there;
# else a private dbus-daemon, as tests/e2e/with_server.sh runs.
bus_note=""
if ! dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
       org.freedesktop.DBus.NameHasOwner string:org.ganesha.nfsd 2>/dev/null | grep -q 'boolean false'; then
  srv_dbus_start "$state" || die "no private dbus-daemon"
  export DBUS_SYSTEM_BUS_ADDRESS=$srv_bus
  bus_note="DBUS_SYSTEM_BUS_ADDRESS=$DBUS_SYSTEM_BUS_ADDRESS "
fi
# NFSv3 needs a portmapper; use the machine's if one runs, else our own.
rpcinfo -p 127.0.0.1 >/dev/null 2>&1 || srv_rpcbind_start || die "no rpcbind"
: >"$state/ganesha.log"
srv_ganesha_start "$state/ganesha.conf" "$state/ganesha.log" "$state/ganesha.pid"
ganesha_pid=$srv_ganesha
srv_wait_serving "$ganesha_pid" /vfs 30 || { tail -n 20 "$state/ganesha.log" >&2; die "ganesha.nfsd did not serve"; }
grep -h 'DCACHE: export' "$state/ganesha.log" | sed 's/^.*DCACHE: /  DCACHE: /' || true
server_note=""
[ -z "$root" ] || server_note=" (Debian $release_suite${release_install_suite:+/$release_install_suite}'s, chrooted in $root)"

cat <<EOF

ganesha.nfsd $release$server_note (pid $ganesha_pid) serves on 127.0.0.1 (NFSv3 and NFSv4):
  /vfs        plain VFS
  /dontcache  DCACHE: IO_Cache_Read = dontcache, IO_Cache_Write = dontcache
  /direct     DCACHE: IO_Cache_Read = direct,    IO_Cache_Write = direct_file_sync
Connect with libnfs-utils, for example:
  nfs-ls  nfs://127.0.0.1/direct/
  nfs-cp  somefile nfs://127.0.0.1/direct/somefile
  nfs-cat nfs://127.0.0.1/direct/somefile
  nfs-ls  'nfs://127.0.0.1/dontcache/?version=4'
DCACHE's counters: ${bus_note}tools/dcache-stats
Files land in $mnt/<export>; the server log is $state/ganesha.log.

EOF

# ---- the demo workload ------------------------------------------------------
# Residency (cachestat(2), Linux >= 6.5; fincore's mincore(2) before that)
# of the backing files: taken after the NFS round trips and before the
# backing files are compared here, which reads them through the cache.
work=$state/work

echo "demo workload: write with nfs-cp (NFSv3), read back with nfs-cat (NFSv3 and NFSv4)"
failures=0
head -c 1 /dev/urandom >"$work/one-byte"
head -c $((1024 * 1024 + 123)) /dev/urandom >"$work/misaligned"
head -c $((64 * 1024 * 1024)) /dev/urandom >"$work/sixty-four-mib"
declare -A result
for exp in "${exports[@]}"; do
  for f in "${files[@]}"; do
    r=ok
    if ! timeout 120 nfs-cp "$work/$f" "nfs://127.0.0.1/$exp/$f?version=3" >/dev/null 2>"$work/err"; then
      r="write failed: $(tr '\n' ' ' <"$work/err")"
    else
      for ver in 3 4; do
        if ! timeout 120 nfs-cat "nfs://127.0.0.1/$exp/$f?version=$ver" >"$work/back" 2>"$work/err"; then
          r="NFSv$ver read failed: $(tr '\n' ' ' <"$work/err")"
        elif ! cmp -s "$work/$f" "$work/back"; then
          r="NFSv$ver read returned different bytes"
        fi
      done
    fi
    result[$exp/$f]=$r
  done
done
rm -f "$work/back"
residency_ok=1
python3 "$top/tools/demo_report.py" residency "$work/residency.json" "$mnt" "${exports[@]}" -- "${files[@]}" ||
  { echo "demo workload: could not measure page-cache residency" >&2; residency_ok=0; }
for exp in "${exports[@]}"; do
  for f in "${files[@]}"; do
    r=${result[$exp/$f]}
    [ "$r" != ok ] || cmp -s "$work/$f" "$mnt/$exp/$f" || r="backing file $mnt/$exp/$f differs"
    printf '  %-10s %-14s %9d bytes  %s\n' "/$exp" "$f" "$(stat -c %s "$work/$f")" "$r"
    [ "$r" = ok ] || failures=$((failures + 1))
  done
done
if [ "$failures" -ne 0 ]; then
  echo "demo workload: $failures file(s) did not round-trip" >&2
  exit 1
fi
echo "demo workload: every file round-tripped through every export"
grep -E 'DCACHE.*(refused|not valid)' "$state/ganesha.log" >&2 && exit 1
echo
"$top/tools/dcache-stats" --json >"$work/stats.json" 2>"$work/err" ||
  echo "demo: DCACHE counters unavailable: $(cat "$work/err")" >&2
[ "$residency_ok" = 0 ] || python3 "$top/tools/demo_report.py" table "$work/residency.json" "$work/stats.json"
echo

if [ "$check" = 1 ]; then
  exit 0
fi
serving=1
if [ -n "$seconds" ]; then
  echo "serving for $seconds s (DCACHE_DEMO_SECONDS)"
  sleep "$seconds" &
  sleep_pid=$!
  wait "$sleep_pid" || true
  sleep_pid=""
  exit 0
fi
echo "serving until Ctrl-C"
wait "$ganesha_pid" && rc=0 || rc=$?
srv_ganeshas=()
echo "$prog: ganesha.nfsd exited on its own (status $rc)" >&2
exit 1
