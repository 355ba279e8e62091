#!/usr/bin/env bash
# Crash test (issue 3, item 9): data the server acknowledged as durable
# (FILE_SYNC answers to UNSTABLE WRITEs in direct_data_sync and
# direct_file_sync, the client's own FILE_SYNC WRITEs in buffered,
# dontcache and direct, COMMITs of UNSTABLE WRITEs) survives an XFS
# shutdown that does not flush (`xfs_io -x -c shutdown`, no -f), and
# uncommitted UNSTABLE data is reported as a control.
#
#   crash_test.sh PATH/TO/dcache_e2e_crash
#
# With a with_server.sh that keeps an image across runs (DCACHE_E2E_IMAGE)
# it runs two servers on one image: phase 1 writes and shuts XFS down,
# phase 2 (log recovery at mount) verifies through NFS and the backing
# files. Without it, one server run does phase 1, then copies the shut-down
# image, mounts the copy (-o nouuid, log recovery) and verifies the backing
# files only. Environment: as with_server.sh (DCACHE_PLUGIN is required).
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/../with_server.sh

# ---- inner step of the one-server variant (runs inside the namespace) ----
if [ "${1:-}" = --inner-local ]; then
  tool=$2 manifest=$3 work=$4
  loop="" mounted=0
  inner_cleanup() {
    set +e
    [ "$mounted" = 0 ] || umount "$work/recovered"
    [ -z "$loop" ] || losetup -d "$loop"
    rm -f "$work/copy.img"
  }
  trap inner_cleanup EXIT
  "$tool" write "$manifest"
  xfs_io -x -c shutdown "$DCACHE_MNT"
  echo "$prog: XFS at $DCACHE_MNT shut down without flushing"
  # The image now holds exactly what reached the device (the loop device
  # does direct I/O on it). Recover a copy: the original stays mounted.
  cp --sparse=always "$DCACHE_STATE/xfs.img" "$work/copy.img"
  loop=$(losetup -f --show "$work/copy.img")
  mkdir -p "$work/recovered"
  mount -o nouuid "$loop" "$work/recovered"
  mounted=1
  env -u DCACHE_SERVER "$tool" verify "$manifest" "$work/recovered"
  exit $?
fi

[ $# -eq 1 ] || { echo "usage: $prog PATH/TO/dcache_e2e_crash" >&2; exit 2; }
tool=$(realpath "$1")
[ -x "$tool" ] || { echo "$prog: $tool is not executable" >&2; exit 2; }
command -v xfs_io >/dev/null || { echo "$prog: xfs_io not found (xfsprogs)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/dcache-crash.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
chmod 755 "$work"
manifest=$work/manifest

if grep -q 'DCACHE_E2E_IMAGE[^_]' "$harness"; then
  image=$work/xfs.img
  echo "$prog: phase 1 (write, acknowledge, shut XFS down) on $image"
  # The server cannot flush a shut-down filesystem: its own exit status
  # does not matter, the tool's does (it writes the manifest last).
  DCACHE_E2E_IMAGE=$image "$harness" --exports "$here/modes_exports.conf" -- \
    bash -c '"$1" write "$2" && xfs_io -x -c shutdown "$DCACHE_MNT" && echo shut down' \
    phase1 "$tool" "$manifest" || true
  [ -s "$manifest" ] || { echo "$prog: phase 1 did not complete" >&2; exit 1; }
  echo "$prog: phase 2 (recover, verify through NFS and the backing files)"
  DCACHE_E2E_IMAGE=$image "$harness" --exports "$here/modes_exports.conf" -- \
    bash -c '"$1" verify "$2" "$DCACHE_MNT"' phase2 "$tool" "$manifest"
else
  echo "$prog: with_server.sh does not support DCACHE_E2E_IMAGE yet: one server," \
       "then the backing files of a recovered copy of the image are verified (not through NFS)"
  "$harness" --exports "$here/modes_exports.conf" -- \
    "$here/$prog" --inner-local "$tool" "$manifest" "$work"
fi
