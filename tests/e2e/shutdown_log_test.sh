#!/usr/bin/env bash
# e2e_shutdown_log: a clean shutdown of a server with DCACHE exports logs no
# CRIT or MAJ line that the same shutdown of a VFS-only server does not.
#
#   shutdown_log_test.sh        (runs three servers through with_server.sh)
#
# 1. VFS only: I/O on /vfs, SIGTERM: its shutdown lines are the baseline.
# 2. VFS and four DCACHE exports (cache modes, io_uring and sync): I/O on
#    each, SIGTERM: no CRIT/MAJ line beyond the baseline (every reference
#    DCACHE took on the VFS module and its exports is put back).
# 3. Two DCACHE exports refused at creation: nothing left behind either.
# 4. Three reloads (SIGHUP) of a DCACHE-only server leave what a VFS-only
#    server's leave (Ganesha's own, of the export's FSAL), nothing of VFS.
# 5. As 2 with a GetFSALStats over DBus first: the one extra line allowed is
#    Ganesha's own "Extra references (1) hanging around to FSAL DCACHE"
#    (6.5: "Extra fsal references"; its GetFSALStats looks the module up
#    and never puts it back, in 4.3 and 6.5 alike).
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = --inside ]; then
  # inside the harness: I/O on each export, maybe stats, then stop the server
  shift
  stats=$1; shift
  head -c 300007 /dev/urandom >"$DCACHE_STATE/data"
  for e in "$@"; do
    nfs-cp "$DCACHE_STATE/data" "nfs://$DCACHE_SERVER/$e/f?version=3" >/dev/null
    nfs-cat "nfs://$DCACHE_SERVER/$e/f?version=4" | cmp -s - "$DCACHE_STATE/data"
  done
  if [ "$stats" = 1 ]; then
    # what an operator reads the counters with (GetFSALStats)
    "$(dirname "$0")/../../tools/dcache-stats" --json >/dev/null
  fi
  # reloads, each of the whole configuration (SIGHUP), before the stop
  # shellcheck source=sighup.sh
  . "$(dirname "$0")/sighup.sh"
  for ((i = 0; i < ${DCACHE_SHUTDOWN_RELOADS:-0}; i++)); do
    sighup_and_wait 'Reread exports complete' || { echo "$prog: reload $i did not complete" >&2; exit 1; }
  done
  kill -TERM "$DCACHE_PID"
  # the server library's wait: the harness may reap its child between two
  # looks, and a zombie or a pid no longer there has stopped
  top=$(cd "$here/../.." && pwd)
  # shellcheck source=../../ci/server.sh
  . "$top/ci/server.sh"
  srv_wait_gone "$DCACHE_PID" 30 || { echo "$prog: ganesha.nfsd did not stop within 30 s of SIGTERM" >&2; exit 1; }
  # the shutdown's CRIT and MAJ messages, without time, pid and thread
  sed -n '/Removing all exports/,$p' "$DCACHE_LOG" | { grep -E ':(CRIT|MAJ) :' || true; } |
    sed -E 's/^.*:(CRIT|MAJ) :/\1 /' | sort -u >"$DCACHE_STATE/shutdown.txt"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dcache-shutdown.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/vfs.conf" <<'EOF'
EXPORT {
  Export_Id = 1; Path = "@MNT@/vfs"; Pseudo = /vfs;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = VFS; }
}
EOF
cp "$work/vfs.conf" "$work/dcache.conf"
i=40
for m in 'IO_Cache_Read = buffered; IO_Cache_Write = buffered;' 'IO_Cache_Read = dontcache; IO_Cache_Write = dontcache;' \
         'IO_Cache_Read = direct; IO_Cache_Write = direct;' 'IO_Cache_Read = direct; IO_Cache_Write = direct; IO_Backend = sync;'; do
  cat >>"$work/dcache.conf" <<EOF
EXPORT {
  Export_Id = $i; Path = "@MNT@/d$i"; Pseudo = /d$i;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = DCACHE; $m FSAL { Name = VFS; } }
}
EOF
  i=$((i + 1))
done

# Refused at creation: a value out of range, and one Ganesha's parser
# reads but DCACHE does not know; beside them a served DCACHE export.
cp "$work/vfs.conf" "$work/refused.conf"
for e in '60|IO_Cache_Read = -1;' '61|IO_Cache_Write = fast;' '62|IO_Cache_Read = direct;'; do
  cat >>"$work/refused.conf" <<EOF
EXPORT {
  Export_Id = ${e%%|*}; Path = "@MNT@/r${e%%|*}"; Pseudo = /r${e%%|*};
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = DCACHE; ${e#*|} FSAL { Name = VFS; } }
}
EOF
done

run() {  # exports-file stats exports... -> prints the shutdown's CRIT/MAJ lines
  local conf=$1 stats=$2 out
  shift 2
  out=$(DCACHE_E2E_SERVER_STOPS=1 DCACHE_E2E_KEEP=1 "$here/with_server.sh" --no-default-exports --exports "$conf" -- \
    "$here/$prog" --inside "$stats" "$@" 2>&1) || { echo "$out" >&2; return 1; }
  local state
  state=$(sed -n 's/^with_server.sh: kept state dir //p' <<<"$out")
  [ -f "$state/shutdown.txt" ] || { echo "$out" >&2; return 1; }
  cat "$state/shutdown.txt"
  rm -rf --one-file-system "$state"
}
status=0
vfs_lines=$(run "$work/vfs.conf" 0 vfs)
echo "VFS-only shutdown, CRIT/MAJ lines: ${vfs_lines:-(none)}"
dcache_lines=$(run "$work/dcache.conf" 0 vfs d40 d41 d42 d43)
extra=$(comm -13 <(printf '%s\n' "$vfs_lines" | sort -u) <(printf '%s\n' "$dcache_lines" | sort -u) | sed '/^$/d')
if [ -n "$extra" ]; then
  echo "FAIL: the DCACHE server's shutdown logged what the VFS-only one does not:" >&2
  printf '  %s\n' "$extra" >&2
  status=1
else
  echo "ok: DCACHE server (4 DCACHE exports, I/O on each): shutdown logs nothing the VFS-only one does not"
fi
refused_lines=$(run "$work/refused.conf" 0 vfs r62)
extra=$(comm -13 <(printf '%s\n' "$vfs_lines" | sort -u) <(printf '%s\n' "$refused_lines" | sort -u) | sed '/^$/d')
if [ -n "$extra" ]; then
  echo "FAIL: with two DCACHE exports refused at creation the shutdown logged what the VFS-only one does not:" >&2
  printf '  %s\n' "$extra" >&2
  status=1
else
  echo "ok: two DCACHE exports refused at creation (a bad value, an unknown word) leave nothing behind at shutdown"
fi
# Reloads: Ganesha itself leaks one reference to an export's FSAL per
# SIGHUP (a VFS-only server: "Extra references (3) ... FSAL VFS" after
# three). A DCACHE-only server may show the same of DCACHE, its export's
# FSAL, and nothing of VFS under it: DCACHE puts back what each reload of
# its nested FSAL block takes.
cat >"$work/vfs_only_reload.conf" <<'EOF'
EXPORT {
  Export_Id = 1; Path = "@MNT@/vfs"; Pseudo = /vfs;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = VFS; }
}
EOF
cat >"$work/dcache_only_reload.conf" <<'EOF'
EXPORT {
  Export_Id = 2; Path = "@MNT@/d2"; Pseudo = /d2;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; FSAL { Name = VFS; } }
}
EOF
vfs_reload_lines=$(DCACHE_SHUTDOWN_RELOADS=3 run "$work/vfs_only_reload.conf" 0 vfs)
dcache_reload_lines=$(DCACHE_SHUTDOWN_RELOADS=3 run "$work/dcache_only_reload.conf" 0 d2)
echo "after 3 reloads, VFS-only: ${vfs_reload_lines:-(none)}; DCACHE-only: ${dcache_reload_lines:-(none)}"
if grep -q 'FSAL VFS' <<<"$dcache_reload_lines"; then
  echo "FAIL: after 3 reloads a DCACHE-only server leaves references to FSAL VFS behind" >&2
  status=1
elif [ "${vfs_reload_lines//FSAL VFS/FSAL X}" != "${dcache_reload_lines//FSAL DCACHE/FSAL X}" ]; then
  echo "FAIL: after 3 reloads a DCACHE-only server leaves other references than Ganesha's own (the VFS-only control's)" >&2
  status=1
else
  echo "ok: after 3 reloads a DCACHE-only server leaves what a VFS-only one does (Ganesha's own, for its export's FSAL) and nothing of VFS"
fi
stats_lines=$(run "$work/dcache.conf" 1 vfs d40 d41 d42 d43)
extra=$(comm -13 <(printf '%s\n' "$vfs_lines" | sort -u) <(printf '%s\n' "$stats_lines" | sort -u) | sed '/^$/d' |
  grep -v -x -E 'CRIT Extra (fsal )?references \(1\) hanging around to FSAL DCACHE' || true)
if [ -n "$extra" ]; then
  echo "FAIL: after GetFSALStats the shutdown logged more than Ganesha's own known line:" >&2
  printf '  %s\n' "$extra" >&2
  status=1
else
  echo "ok: after GetFSALStats, only Ganesha's own known line: $(grep -c 'FSAL DCACHE' <<<"$stats_lines" || true) of it"
fi
exit $status
