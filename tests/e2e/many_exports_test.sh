#!/usr/bin/env bash
# What an export costs: one server with N plain VFS exports, then one with
# N DCACHE exports (io_uring, the defaults), each on a directory of its own;
# each served (a file written into the last export), then stopped.
# Measured per server: threads and RSS once serving, the start (from the
# process's birth to serving) and the stop (SIGTERM to gone).  DCACHE's
# exports share the server's rings (a completion thread per ring, a ring
# per CPU at most), so:
#   threads <= VFS's + 2 x CPUs, RSS <= 1.2 x VFS's,
#   start and stop <= 1.5 x VFS's (+ DCACHE_MANY_SLACK_S, 0.5 s, for the
#   harness's polling on a shared machine).
#
#   many_exports_test.sh [N]     (N: DCACHE_MANY_EXPORTS, default 1000)
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ "${1:-}" = --inside ]; then
  out=$2 variant=$3 n=$4
  # from the server's birth to now (it serves: the harness checked)
  hz=$(getconf CLK_TCK)
  born=$(awk '{print $22}' "/proc/$DCACHE_PID/stat")
  up=$(awk '{print $1}' /proc/uptime)
  start=$(awk -v u="$up" -v b="$born" -v hz="$hz" 'BEGIN { printf "%.2f", u - b / hz }')
  threads=$(find "/proc/$DCACHE_PID/task" -mindepth 1 -maxdepth 1 | wc -l)
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$DCACHE_PID/status")
  head -c 65536 /dev/urandom >"$DCACHE_STATE/data"
  nfs-cp "$DCACHE_STATE/data" "nfs://$DCACHE_SERVER/e$n/f" >/dev/null
  t0=$(date +%s%N)
  kill -TERM "$DCACHE_PID"
  # shellcheck source=../../ci/server.sh
  . "$top/ci/server.sh"
  srv_wait_gone "$DCACHE_PID" 120 || { echo "$prog: $variant: ganesha.nfsd did not stop within 120 s" >&2; exit 1; }
  stop=$(awk -v t="$(($(date +%s%N) - t0))" 'BEGIN { printf "%.2f", t / 1e9 }')
  echo "$variant $threads $rss $start $stop" >>"$out"
  exit 0
fi

n=${1:-${DCACHE_MANY_EXPORTS:-1000}}
slack=${DCACHE_MANY_SLACK_S:-0.5}
work=$(mktemp -d "${TMPDIR:-/tmp}/dcache-many.XXXXXX")
trap 'rm -rf "$work"' EXIT
for variant in vfs dcache; do
  for ((i = 1; i <= n; i++)); do
    if [ "$variant" = vfs ]; then fsal='FSAL { Name = VFS; }'; else fsal='FSAL { Name = DCACHE; FSAL { Name = VFS; } }'; fi
    printf 'EXPORT { Export_Id = %d; Path = "@MNT@/e%d"; Pseudo = /e%d; Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys; %s }\n' \
      $((100 + i)) "$i" "$i" "$fsal"
  done >"$work/$variant.conf"
  DCACHE_E2E_SERVER_STOPS=1 DCACHE_E2E_LOG_LEVEL=${DCACHE_E2E_LOG_LEVEL:-INFO} DCACHE_E2E_TIMEOUT=300 \
    "$here/with_server.sh" --no-default-exports --exports "$work/$variant.conf" -- \
    "$here/$prog" --inside "$work/results" "$variant" "$n"
done
cpus=$(nproc)
python3 - "$work/results" "$n" "$cpus" "$slack" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    v, threads, rss, start, stop = line.split()
    rows[v] = dict(threads=int(threads), rss=int(rss), start=float(start), stop=float(stop))
n, cpus, slack = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
v, d = rows["vfs"], rows["dcache"]
print(f"{n} exports     threads   RSS MiB   start s   stop s")
for name, r in (("VFS", v), ("DCACHE", d)):
    print(f"{name:<13} {r['threads']:7d} {r['rss'] / 1024:9.1f} {r['start']:9.2f} {r['stop']:8.2f}")
print(f"DCACHE / VFS  {d['threads'] - v['threads']:+7d} {d['rss'] / v['rss']:8.2f}x {d['start'] / max(v['start'], 0.01):8.2f}x {d['stop'] / max(v['stop'], 0.01):7.2f}x")
bad = []
if d["threads"] > v["threads"] + 2 * cpus:
    bad.append(f"threads {d['threads']} > VFS's {v['threads']} + 2 x {cpus} CPUs")
if d["rss"] > 1.2 * v["rss"]:
    bad.append(f"RSS {d['rss']} KiB > 1.2 x VFS's {v['rss']} KiB")
for k in ("start", "stop"):
    if d[k] > 1.5 * v[k] + slack:
        bad.append(f"{k} {d[k]:.2f} s > 1.5 x VFS's {v[k]:.2f} s + {slack} s")
for b in bad:
    print(f"many_exports_test.sh: FAIL: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
