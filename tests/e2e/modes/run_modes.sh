#!/usr/bin/env bash
# Runs a command (the dcache_e2e_modes binary) under with_server.sh with the
# per-mode exports on the harness's XFS plus the same modes on a tmpfs.
#
#   run_modes.sh -- COMMAND [ARGS...]
#
# with_server.sh creates export directories only under its own XFS mount
# and mounts nothing else, so this script mounts a small tmpfs first (the
# server's mount namespace is copied from ours, so it sees it), fills
# tmpfs_exports.conf.in's @TMPFS@ with its path, passes DCACHE_TMPFS to the
# command, and unmounts it afterwards, also on failure.
# Environment: as with_server.sh (DCACHE_PLUGIN is required).
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
# shellcheck source=../../../ci/release.sh
. "$top/ci/release.sh"
release_select "${DCACHE_GANESHA:-}" || exit 2
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: $prog -- COMMAND [ARGS...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$prog: must run as root (mounts)" >&2; exit 2; }

work=""
mounted=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  if [ "$mounted" = 1 ]; then
    umount "$work/tmpfs" || umount -l "$work/tmpfs"
  fi
  [ -z "$work" ] || rm -rf --one-file-system "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Ganesha 6.x and later never export a tmpfs (populate_posix_file_systems
# skips the type): their tmpfs cases are skipped, saying why.
if [ -n "$release_tmpfs_refused" ]; then
  export DCACHE_TMPFS_WHY=$release_tmpfs_refused
  echo "$prog: $DCACHE_TMPFS_WHY: the tmpfs exports are left out" >&2
  exec "$here/../with_server.sh" --exports "$here/modes_exports.conf" -- "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dcache-modes.XXXXXX")
mkdir -p "$work/tmpfs"
mount -t tmpfs -o size=256m,mode=755 dcache-modes-tmpfs "$work/tmpfs"
mounted=1
sed "s|@TMPFS@|$work/tmpfs|g" "$here/tmpfs_exports.conf.in" >"$work/tmpfs_exports.conf"
grep -oE '"[^"]*/tmpfs/[^"]+"' "$work/tmpfs_exports.conf" | tr -d '"' | while read -r d; do mkdir -p "$d"; done

export DCACHE_TMPFS="$work/tmpfs"
"$here/../with_server.sh" --exports "$here/modes_exports.conf" --exports "$work/tmpfs_exports.conf" -- "$@"
