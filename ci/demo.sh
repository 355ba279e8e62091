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
#   ci/demo.sh [--check] [--state DIR] [--ganesha 4.3|6.5]
#     --check                run the workload, verify it, stop (for CI)
#     --state DIR            state dir (default ./state; the image is reused,
#                            the workload's own files are rewritten each run)
#     --ganesha 6.5          Debian 13's ganesha.nfsd 6.5 (or DCACHE_GANESHA=6.5),
#                            chrooted in the trixie root (ci/setup.sh --ganesha
#                            6.5) in a mount namespace of its own that binds
#                            /run, /proc, /dev and the state dir in and ends
#                            with it; the module is build-6.5's. Default 4.3,
#                            Debian 12's on this machine.
#   DCACHE_DEMO_SECONDS=N    serve N seconds after the workload, then stop
#   DCACHE_DEMO_IMAGE_SIZE   image size when first created (default 4G)
#   DCACHE_BUILD_DIR         build dir (default build/, for 6.5 build-6.5/);
#                            when its fsal_dcache/adapter/libfsaldcache.so is
#                            missing, runs ci/setup.sh and builds only that
#                            module (for 6.5 with ci/build.sh --ganesha 6.5)
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
# shellcheck source=../tools/private-dbus.sh
. "$top/tools/private-dbus.sh"
die() { echo "$prog: $*" >&2; exit 2; }

check=0
state=${DCACHE_DEMO_STATE:-$PWD/state}
ganesha=${DCACHE_GANESHA:-4.3}
while [ $# -gt 0 ]; do
  case $1 in
    --check) check=1; shift ;;
    --state) [ $# -ge 2 ] || die "--state needs a directory"; state=$2; shift 2 ;;
    --state=*) state=${1#--state=}; shift ;;
    --ganesha) [ $# -ge 2 ] || die "--ganesha needs a version"; ganesha=$2; shift 2 ;;
    --ganesha=*) ganesha=${1#--ganesha=}; shift ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
seconds=${DCACHE_DEMO_SECONDS:-}
[ -z "$seconds" ] || [[ "$seconds" =~ ^[0-9]+$ ]] || die "DCACHE_DEMO_SECONDS=$seconds: not a number of seconds"
[ "$(id -u)" = 0 ] || die "must run as root (loop device, mount, ports below 1024)"
# root: "" runs the host's ganesha.nfsd (4.3); for 6.5 the trixie root's
root=""
case $ganesha in
  4.3) ;;
  6.5)
    # shellcheck source=trixie-root.sh
    . "$top/ci/trixie-root.sh"
    root=$trixie_root ;;
  *) die "--ganesha $ganesha: must be 4.3 or 6.5" ;;
esac

# ---- the plugin (only the module, never the tests) ---------------------------
if [ -n "$root" ]; then
  build=${DCACHE_BUILD_DIR:-$top/build-6.5}
  plugin=$build/fsal_dcache/adapter/libfsaldcache.so
  if [ ! -f "$plugin" ] || [ ! -x "$root/usr/bin/ganesha.nfsd" ]; then
    echo "$prog: $plugin or $root/usr/bin/ganesha.nfsd is missing: setting up (ci/setup.sh --ganesha 6.5), then building the module only"
    DCACHE_BUILD_DIR=$build "$top/ci/build.sh" --ganesha 6.5
    [ -f "$plugin" ] || die "built target fsaldcache but $plugin is still missing"
  fi
else
  build=${DCACHE_BUILD_DIR:-$top/build}
  plugin=$build/fsal_dcache/adapter/libfsaldcache.so
fi
if [ -z "$root" ] && [ ! -f "$plugin" ]; then
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
fsal_dir=/usr/lib/x86_64-linux-gnu/ganesha
[ -f "$root$fsal_dir/libfsalvfs.so" ] || die "$root$fsal_dir/libfsalvfs.so missing (run ci/setup.sh${root:+ --ganesha 6.5})"
[ -z "$root" ] || [ -x "$root/usr/bin/ganesha.nfsd" ] || die "$root/usr/bin/ganesha.nfsd missing (run ci/setup.sh --ganesha 6.5)"
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
loopdev=""
mounted=0
ganesha_pid=""
rpcbind_pid=""
dbus_pid=""
sleep_pid=""
serving=0
root_made=""   # 6.5: the topmost directory made in the root for the state dir
signalled=""
# shellcheck disable=SC2317  # runs from the trap
stop_pid() {  # pid grace-seconds name; sets stopped_rc to the pid's status
  local pid=$1 i
  stopped_rc=0
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || stopped_rc=$?; return 0; }
  for ((i = 0; i < $2 * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$prog: $3 (pid $pid) still running after ${2}s; SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || stopped_rc=$?
}
# shellcheck disable=SC2317  # runs from the trap
cleanup() {
  local rc=$? i
  trap - EXIT
  # the teardown always finishes: no second Ctrl-C cuts it short, and a
  # closed stdout (demo | head) neither kills nor stops it
  trap '' INT TERM HUP PIPE
  set +e
  echo "$prog: stopping"
  stop_pid "$sleep_pid" 1 sleep
  if [ -n "$ganesha_pid" ]; then
    stop_pid "$ganesha_pid" 20 ganesha.nfsd
    # ganesha.nfsd exits 0 on SIGTERM: a signal here is a crash in shutdown
    if [ "$stopped_rc" -gt 128 ]; then
      echo "$prog: ganesha.nfsd died by signal $((stopped_rc - 128)) while stopping" >&2
      [ "$rc" != 0 ] || rc=1
    fi
  fi
  stop_pid "$dbus_pid" 5 dbus-daemon
  stop_pid "$rpcbind_pid" 5 rpcbind
  [ -z "$dbus_pid" ] || rm -f "$state/dbus/system_bus_socket"
  # the (unmounted, empty) mount point made in the root, up to what was there
  if [ -n "$root_made" ]; then
    local d=$state
    while rmdir "$root$d" 2>/dev/null && [ "$d" != "$root_made" ]; do d=$(dirname "$d"); done
  fi
  if [ "$mounted" = 1 ]; then
    for ((i = 0; i < 50; i++)); do umount "$mnt" 2>/dev/null && { mounted=0; break; }; sleep 0.1; done
    if [ "$mounted" = 1 ]; then
      echo "$prog: $mnt still busy; detaching it lazily" >&2
      umount -l "$mnt" || true
    fi
  fi
  [ -z "$loopdev" ] || losetup -d "$loopdev" || echo "$prog: could not detach $loopdev" >&2
  [ -z "$loopdev" ] || rm -rf "$state/work"
  if [ "$rc" = 0 ]; then
    echo "$prog: stopped${signalled:+ on $signalled}: server stopped, $mnt unmounted${loopdev:+, $loopdev detached}; $state/xfs.img kept"
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
if mountpoint -q "$mnt"; then
  die "$mnt is already mounted (another demo running from this state dir?)"
fi
if [ ! -f "$state/xfs.img" ]; then
  echo "$prog: creating ${DCACHE_DEMO_IMAGE_SIZE:-4G} XFS image $state/xfs.img"
  truncate -s "${DCACHE_DEMO_IMAGE_SIZE:-4G}" "$state/xfs.img.new"
  mkfs.xfs -q "$state/xfs.img.new"
  mv "$state/xfs.img.new" "$state/xfs.img"
fi
loopdev=$(losetup --direct-io=on -f --show "$state/xfs.img")
mount "$loopdev" "$mnt"
mounted=1
mkdir -p "$mnt/vfs" "$mnt/dontcache" "$mnt/direct" "$state/plugins" "$state/recov" "$state/work" "$state/dbus"
# the workload's files from an earlier run go before the server starts
# (nfs-cp does not overwrite); anything else under the exports stays
for exp in "${exports[@]}"; do
  for f in "${files[@]}"; do rm -f "$mnt/$exp/$f"; done
done
ln -sfn "$fsal_dir/libfsalvfs.so" "$state/plugins/libfsalvfs.so"
if [ -n "$root" ]; then
  # the root sees the state dir, not the build (and resolves the VFS link
  # to its own module)
  rm -f "$state/plugins/libfsaldcache.so"
  cp "$plugin" "$state/plugins/libfsaldcache.so"
else
  ln -sfn "$plugin" "$state/plugins/libfsaldcache.so"
fi
# 6.5 refuses to start when prctl(PR_SET_IO_FLUSHER) fails, as it does
# without CAP_SYS_RESOURCE (containers); 4.3 has no such option.
core_param_extra=""
[ -z "$root" ] || core_param_extra="
  Allow_Set_Io_Flusher_Fail = true;"

cat >"$state/ganesha.conf" <<EOF
# generated by ci/demo.sh
NFS_CORE_PARAM {
  Plugins_Dir = "$state/plugins";$core_param_extra
  Protocols = 3, 4;
  Bind_addr = 127.0.0.1;
  Enable_NLM = false;
  Enable_RQUOTA = false;
  Enable_FSAL_Stats = true;
  Mount_Path_Pseudo = true;
}
NFSV4 { Graceless = true; RecoveryRoot = "$state/recov"; minor_versions = 0, 1; Only_Numeric_Owners = true; }
NFS_KRB5 { Active_krb5 = false; }
LOG {
  Default_Log_Level = EVENT;
  Components { FSAL = INFO; }
}
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

# ---- DBus (for the counters), rpcbind and ganesha ----------------------------
# The system bus when it runs and no other ganesha.nfsd owns the name there;
# else a private dbus-daemon, as tests/e2e/with_server.sh runs.
bus_note=""
if ! dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
       org.freedesktop.DBus.NameHasOwner string:org.ganesha.nfsd 2>/dev/null | grep -q 'boolean false'; then
  private_dbus_conf "$state/dbus/system_bus_socket" >"$state/dbus.conf"
  rm -f "$state/dbus/system_bus_socket"
  dbus-daemon --config-file="$state/dbus.conf" --nofork --nopidfile --nosyslog >"$state/dbus.log" 2>&1 &
  dbus_pid=$!
  for ((i = 0; i < 100; i++)); do [ -S "$state/dbus/system_bus_socket" ] && break; sleep 0.05; done
  [ -S "$state/dbus/system_bus_socket" ] || { cat "$state/dbus.log" >&2; die "dbus-daemon did not create its socket"; }
  export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$state/dbus/system_bus_socket"
  bus_note="DBUS_SYSTEM_BUS_ADDRESS=$DBUS_SYSTEM_BUS_ADDRESS "
fi
# NFSv3 needs a portmapper; use the machine's if one runs, else our own.
if ! rpcinfo -p 127.0.0.1 >/dev/null 2>&1; then
  rpcbind -f -w &
  rpcbind_pid=$!
  for ((i = 0; i < 50; i++)); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
fi
: >"$state/ganesha.log"
ganesha_args=(-F -L "$state/ganesha.log" -f "$state/ganesha.conf" -p "$state/ganesha.pid")
if [ -n "$root" ]; then
  # 6.5: chrooted in the root, in a mount namespace of its own (nothing is
  # mounted on the host) holding the host's /run (rpcbind's socket, the
  # system bus), /proc, /dev and the state dir (the XFS, the config, the
  # log) at their own paths; unshare, bash and chroot exec one another, so
  # $! is ganesha.nfsd's pid and the namespace ends with it (and it with
  # the demo: --pdeathsig).
  d=$state
  while [ ! -e "$root$d" ]; do root_made=$d; d=$(dirname "$d"); done
  mkdir -p "$root$state"
  # shellcheck disable=SC2016  # expanded by the inner shell
  setpriv --pdeathsig KILL -- unshare --mount --propagation private -- bash -ec '
    mount --rbind /run "$1/run"; mount -t proc proc "$1/proc"; mount --rbind /dev "$1/dev"
    mount --rbind "$2" "$1$2"
    exec chroot "$1" /usr/bin/ganesha.nfsd "${@:3}"' ganesha "$root" "$state" "${ganesha_args[@]}" &
else
  ganesha.nfsd "${ganesha_args[@]}" &
fi
ganesha_pid=$!
for ((i = 0; i < 300; i++)); do
  kill -0 "$ganesha_pid" 2>/dev/null || { tail -n 20 "$state/ganesha.log" >&2; die "ganesha.nfsd exited during startup"; }
  timeout 5 nfs-ls "nfs://127.0.0.1/vfs/?version=3" >/dev/null 2>&1 && break
  sleep 0.1
done
timeout 5 nfs-ls "nfs://127.0.0.1/vfs/?version=3" >/dev/null 2>&1 ||
  { tail -n 20 "$state/ganesha.log" >&2; die "ganesha.nfsd did not serve within 30s"; }
grep -h 'DCACHE: export' "$state/ganesha.log" | sed 's/^.*DCACHE: /  DCACHE: /' || true
server_note=""
[ -z "$root" ] || server_note=" (Debian 13's, chrooted in $root)"

cat <<EOF

ganesha.nfsd $ganesha$server_note (pid $ganesha_pid) serves on 127.0.0.1 (NFSv3 and NFSv4):
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
ganesha_pid=""
echo "$prog: ganesha.nfsd exited on its own (status $rc)" >&2
exit 1
