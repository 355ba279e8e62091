#!/usr/bin/env bash
# The Debian package as an operator gets it: ci/package.sh builds
# nfs-ganesha-dcache (lintian clean), dpkg installs it, and a ganesha.nfsd
# with no Plugins_Dir (Ganesha's default directory, where the package puts
# the module beside VFS's) serves the installed example exports
# (%include "/etc/ganesha/dcache.conf", unchanged: the test's XFS is
# mounted at their /srv/nfs inside the server's namespaces) to a real
# client; the installed dcache-stats reads their counters; the installed
# dcache-check serves the example exports the server serves; the man pages
# resolve. The package is purged afterwards unless it was installed
# before the test.
#
#   package_test.sh          (as root; runs its checks through with_server.sh)
#
# DCACHE_GANESHA=X (ci/release.sh, 6.5 or 9.14): the same inside that
# release's Debian root (ci/setup.sh --ganesha X): ci/package.sh --ganesha X
# builds the package there, dpkg installs it into the root (and purges it
# from there), the root's man and dcache-stats answer, and the chrooted
# ganesha.nfsd serves the root's /etc/ganesha/dcache.conf.
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
# shellcheck disable=SC2016  # dpkg-query formats
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
pkg=nfs-ganesha-dcache
passes=0 failures=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# shellcheck source=../../../ci/release.sh
. "$top/ci/release.sh"
release_select "${DCACHE_GANESHA:-}" || exit 2
fsal_dir=$release_fsal_dir
# root: "" for the host's Ganesha (4.3), else the release's Debian root;
# in_root runs a command where the package is installed.
root=$release_root
in_root() {  # [--bind DIR]... [--] COMMAND...: the binds are the root's only
  if [ -n "$root" ]; then
    release_chroot "$@"
    return
  fi
  while [ "$1" = --bind ]; do shift 2; done
  [ "$1" != -- ] || shift
  "$@"
}

if [ "${1:-}" = --inside ]; then
  : "${DCACHE_SERVER:?run me through with_server.sh}"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  [ "$(findmnt -n -o SOURCE /srv/nfs)" = "$DCACHE_LOOPDEV" ] && pass "/srv/nfs is the test's XFS (in the namespace)" ||
    fail "/srv/nfs is not the test's filesystem: $(findmnt -n -o SOURCE /srv/nfs)"
  # (a chrooted server's mappings read from here carry the root's path)
  grep -qF " $root$fsal_dir/libfsaldcache.so" "/proc/$DCACHE_PID/maps" &&
    pass "ganesha.nfsd loaded $root$fsal_dir/libfsaldcache.so" || fail "the module in memory is not the installed one"
  head -c $((3 * 1024 * 1024 + 123)) /dev/urandom >"$work/data"
  for exp in stream direct; do
    # the examples squash root: the client's root writes as nobody
    chmod 1777 "$DCACHE_MNT/$exp"
    nfs-cp "$work/data" "nfs://$DCACHE_SERVER/$exp/data?version=3" >/dev/null &&
      pass "/$exp: NFSv3 WRITE of 3 MiB + 123 bytes" || fail "/$exp: nfs-cp failed"
    for v in 3 4; do
      nfs-cat "nfs://$DCACHE_SERVER/$exp/data?version=$v" >"$work/back" && cmp -s "$work/data" "$work/back" &&
        pass "/$exp: NFSv$v READ returns the bytes written" || fail "/$exp: NFSv$v read back differs"
    done
    cmp -s "$work/data" "$DCACHE_MNT/$exp/data" && pass "/$exp: the backing file holds them" ||
      fail "/$exp: backing file differs"
  done
  # the installed dcache-stats, in the root (the bus socket is in the state
  # dir)
  in_root --bind "$DCACHE_STATE" -- env DBUS_SYSTEM_BUS_ADDRESS="$DBUS_SYSTEM_BUS_ADDRESS" \
    /usr/bin/dcache-stats --json >"$work/stats.json" && pass "$root/usr/bin/dcache-stats --json" ||
    fail "dcache-stats failed"
  check_counters() {
    python3 - "$work/stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
want = 3 * 1024 * 1024 + 123
bad = []
for export_id in ("101", "102"):
    e = s.get(export_id, {})
    if e.get("write_bytes") != want:
        bad.append(f"export {export_id} write_bytes = {e.get('write_bytes')}, want {want}")
if not s.get("102", {}).get("writes_raised_stable"):
    bad.append("export 102 (direct_file_sync) raised no WRITE to stable")
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
  }
  out=$(check_counters) && pass "counters: both exports wrote the file, direct_file_sync raised WRITEs stable" ||
    fail "counters: $out"
  grep -q "DCACHE: export 102 .*direct_file_sync" "$DCACHE_LOG" && pass "log names export 102's settings" ||
    fail "no DCACHE line for export 102 in the log"
  echo "$passes passed, $failures failed (inside)"
  [ "$failures" = 0 ]
  exit
fi

[ "$(id -u)" = 0 ] || { echo "$prog: needs root (dpkg, loop devices, namespaces)" >&2; exit 2; }
query() { dpkg-query --admindir="$root/var/lib/dpkg" "$@"; }
installed() { query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; }
was_installed=0
installed && was_installed=1
work=$(mktemp -d)
cleanup() {
  local rc=$?
  if [ "$was_installed" = 0 ] && installed; then
    in_root dpkg --purge "$pkg" >/dev/null || { echo "$prog: dpkg --purge $pkg failed${root:+ in $root}" >&2; rc=1; }
  fi
  # the mount point release_chroot made in the root for the .deb's directory
  [ -z "$root" ] || rmdir "$root$work/deb" "$root$work" 2>/dev/null || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

DCACHE_SKIP_SETUP=1 "$top/ci/package.sh" --ganesha "$release" "$work/deb" && pass "package for $release built, lintian clean" ||
  { fail "ci/package.sh --ganesha $release failed"; exit 1; }
deb=$(ls "$work"/deb/"$pkg"_*.deb)
in_root --bind "$work/deb" -- dpkg -i "$deb" >"$work/dpkg.log" 2>&1 && pass "dpkg -i $(basename "$deb")${root:+ in $root}" ||
  { cat "$work/dpkg.log"; fail "dpkg -i failed"; exit 1; }

ganesha_deb=$(query -W -f='${Version}' nfs-ganesha)
depends=$(query -W -f='${Depends}' "$pkg")
[[ "$depends" == "nfs-ganesha (= $ganesha_deb), nfs-ganesha-vfs (= $ganesha_deb), "* ]] &&
  pass "Depends on nfs-ganesha and nfs-ganesha-vfs (= $ganesha_deb)" || fail "Depends: $depends"
for f in "$fsal_dir/libfsaldcache.so" /usr/bin/dcache-check /usr/bin/dcache-stats /etc/ganesha/dcache.conf; do
  [ -e "$root$f" ] && pass "installed $root$f" || fail "$root$f missing"
done
query -W -f='${Conffiles}' "$pkg" | grep -q ' /etc/ganesha/dcache.conf ' &&
  pass "/etc/ganesha/dcache.conf is a conffile" || fail "/etc/ganesha/dcache.conf is not a conffile"
for page in ganesha-dcache-config dcache-check dcache-stats; do
  p=$(in_root man -w "$page" 2>/dev/null) && [ "${p#/usr/share/man/man8/}" != "$p" ] &&
    pass "man $page: $p${root:+ (in the root)}" || fail "man $page not found"
done
# the installed validator, with its RUNPATH to Ganesha's private library:
# both example exports would be served
check_out=$(in_root /usr/bin/dcache-check -v /etc/ganesha/dcache.conf 2>&1) &&
  [ "$(grep -c ': DCACHE: export 10[12] (/srv/nfs/.*): would be served: ' <<<"$check_out")" = 2 ] &&
  pass "/usr/bin/dcache-check serves /etc/ganesha/dcache.conf's two exports" ||
  fail "/usr/bin/dcache-check -v /etc/ganesha/dcache.conf: $check_out"

# The example exports as installed, included from the stock directory; the
# test's XFS stands at their /srv/nfs inside the server's namespaces only.
# (In a root the chrooted server reads the root's /etc/ganesha/dcache.conf.)
grep -q 'Path = /srv/nfs/direct;' "$root/etc/ganesha/dcache.conf" || fail "the example exports no longer live under /srv/nfs/"
echo '%include "/etc/ganesha/dcache.conf"' >"$work/exports.conf"
DCACHE_GANESHA=$release DCACHE_E2E_PLUGINS=stock DCACHE_E2E_MOUNT_AT=/srv/nfs DCACHE_E2E_LOG_LEVEL=INFO \
  "$top/tests/e2e/with_server.sh" --exports "$work/exports.conf" -- "$here/$prog" --inside &&
  pass "the installed module serves the example exports" || fail "checks against the running server (above)"

echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
