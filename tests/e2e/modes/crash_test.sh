#!/usr/bin/env bash
# Crash test: data the server acknowledged as durable
# (FILE_SYNC answers to UNSTABLE WRITEs in direct_data_sync and
# direct_file_sync, the client's own FILE_SYNC WRITEs in buffered,
# dontcache and direct, COMMITs of UNSTABLE WRITEs) survives an XFS
# shutdown that does not flush (`xfs_io -x -c shutdown`, no -f), and
# uncommitted UNSTABLE data is reported as a control.
#
#   crash_test.sh PATH/TO/dcache_e2e_crash
#
# Two servers run on one image kept across runs (DCACHE_E2E_IMAGE): phase 1
# writes and shuts XFS down, phase 2 (log recovery at mount) verifies
# through NFS and the backing files. Environment: as with_server.sh
# (DCACHE_PLUGIN is required).
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/../with_server.sh

[ $# -eq 1 ] || { echo "usage: $prog PATH/TO/dcache_e2e_crash" >&2; exit 2; }
tool=$(realpath "$1")
[ -x "$tool" ] || { echo "$prog: $tool is not executable" >&2; exit 2; }
command -v xfs_io >/dev/null || { echo "$prog: xfs_io not found (xfsprogs)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/dcache-crash.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
chmod 755 "$work"
manifest=$work/manifest

image=$work/xfs.img
echo "$prog: phase 1 (write, acknowledge, shut XFS down) on $image"
# shellcheck disable=SC2016  # expanded by the inner shell, in the namespace
# The server cannot flush a shut-down filesystem: its own exit status
# does not matter, the tool's does (it writes the manifest last).
DCACHE_E2E_IMAGE=$image "$harness" --exports "$here/modes_exports.conf" -- \
  bash -c '"$1" write "$2" && xfs_io -x -c shutdown "$DCACHE_MNT" && echo shut down' \
  phase1 "$tool" "$manifest" || true
[ -s "$manifest" ] || { echo "$prog: phase 1 did not complete" >&2; exit 1; }
echo "$prog: phase 2 (recover, verify through NFS and the backing files)"
# shellcheck disable=SC2016  # expanded by the inner shell
DCACHE_E2E_IMAGE=$image "$harness" --exports "$here/modes_exports.conf" -- \
  bash -c '"$1" verify "$2" "$DCACHE_MNT"' phase2 "$tool" "$manifest"
