#!/usr/bin/env bash
# Runs xfs_delalloc_repro on fresh scratch XFS filesystems and reads the
# kernel log of each one.
#
#   tools/xfs-repro/run.sh [--check] REPRO [RUNS]
#
# For each case (shutdown, collision), RUNS times (default 1) as DCACHE
# used to issue it and once with every cached write written back at once
# (--written-back, what DCACHE does now): a new 1 GiB image, mkfs.xfs
# defaults, losetup --direct-io=on, mounted under a private temp dir; then
# what the kernel logged for that device.  Prints one line per run.
#
# --check (the ctest): only the written-back runs, RUNS times each (the old
# pattern shuts XFS down on purpose: that is for a person to run, not CI);
# exits 1 if one of them failed or the kernel logged anything for it.
# Root only.
# shellcheck disable=SC2317  # cleanup runs from the trap
set -euo pipefail
check=0
[ "${1:-}" = --check ] && { check=1; shift; }
[ $# -ge 1 ] || { echo "usage: ${0##*/} [--check] REPRO [RUNS]" >&2; exit 2; }
repro=$(realpath "$1") runs=${2:-1}
[ "$(id -u)" = 0 ] || { echo "${0##*/}: needs root (loop devices, mounts)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/xfs-repro.XXXXXX")
dev="" mounted=0
cleanup() {
  [ "$mounted" = 0 ] || umount "$work/mnt" 2>/dev/null || umount -l "$work/mnt" || true
  [ -z "$dev" ] || losetup -d "$dev" 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# one run: prints the kernel's lines for the device; the program's own
# output goes to $work/out
one() {  # case [--written-back]
  truncate -s 1G "$work/img"
  mkfs.xfs -q -f "$work/img"
  dev=$(losetup --direct-io=on -f --show "$work/img")
  mkdir -p "$work/mnt"
  mount "$dev" "$work/mnt"
  mounted=1
  local uuid name=f$$.$RANDOM$RANDOM
  uuid=$(blkid -p -s UUID -o value "$dev")
  [ -n "$uuid" ] || { echo "${0##*/}: no UUID on $dev" >&2; exit 2; }
  "$repro" "${@:2}" "$1" "$work/mnt/$name" >"$work/out" 2>&1 || true
  sleep 0.2
  dmesg | awk -v d="XFS (${dev##*/}):" -v u="$uuid" -v n="$name" '
    index($0, d) && index($0, "Mounting") { ours = index($0, u) > 0; next }
    ours && index($0, d) && /Shutting down|[Cc]orruption|[Ee]rror/ { print }
    /Direct I\/O collision/ && index($0, "File: /" n " ") { print }'
  umount "$work/mnt"
  mounted=0
  losetup -d "$dev"
  dev=""
  rm -f "$work/img"
}

old_trips=0 new_trips=0 old_runs=0 new_runs=0
for c in shutdown collision; do
  for ((i = 1; i <= runs && check == 0; i++)); do
    k=$(one "$c")
    old_runs=$((old_runs + 1))
    if [ -n "$k" ]; then
      old_trips=$((old_trips + 1))
      echo "$c, as DCACHE used to issue it: the kernel logged:"
      printf '    %s\n' "$k"
    else
      echo "$c, as DCACHE used to issue it: nothing logged ($(tail -n 1 "$work/out"))"
    fi
  done
  for ((i = 1; i <= (check ? runs : 1); i++)); do
    k=$(one "$c" --written-back)
    new_runs=$((new_runs + 1))
    if [ -n "$k" ] || grep -q ': -1 (' "$work/out"; then
      new_trips=$((new_trips + 1))
      echo "$c, cached writes written back at once: FAILED"
      printf '    %s\n' "$k" "$(cat "$work/out")"
    else
      echo "$c, cached writes written back at once: no error, nothing logged"
    fi
  done
done
if [ "$check" = 1 ]; then
  echo "kernel $(uname -r): written back: $new_trips of $new_runs runs failed"
  [ "$new_trips" = 0 ]
  exit
fi
echo "kernel $(uname -r): old pattern tripped $old_trips of $old_runs runs; written back: $new_trips of $new_runs"
