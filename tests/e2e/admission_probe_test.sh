#!/usr/bin/env bash
# No request waits behind another client's admission: 64 connections
# saturate a direct export (48 x depth 16 of 1 MiB mixed READs and WRITEs,
# 16 x depth 16 of 4 KiB: far more requests than the export's 8 places,
# which every request the ring serves needs), while probe clients work
# beside them:
#   - on the saturated export and on another export of the same server,
#     dcache-bench rw=probe alternates GETATTR and a 4 KiB READ, 10 ms
#     apart: no error, and p99.9 of each under DCACHE_PROBE_P999_MS
#     (1000);
#   - new connections CREATE and write a 4 KiB file on each export
#     (nfs-cp: mount, LOOKUP, CREATE, WRITE), one after another: every one
#     succeeds within DCACHE_PROBE_CREATE_MS (5000, against the 30 s an
#     RPC client waits).
# The load must have been served and must have waited for places (the
# export's reads, writes and admission_waits above zero), or the test
# fails: it would have probed nothing.
#
#   admission_probe_test.sh PATH/TO/dcache-bench
#
# Runs inside with_server.sh (env DCACHE_SERVER, DCACHE_PID).
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" != --inside ]; then
  [ $# -eq 1 ] || { echo "usage: $prog PATH/TO/dcache-bench" >&2; exit 2; }
  DCACHE_E2E_IMAGE_SIZE=${DCACHE_E2E_IMAGE_SIZE:-3G} exec "$here/with_server.sh" --no-default-exports \
    --exports "$here/admission_exports.conf" -- "$here/$prog" --inside "$(realpath "$1")"
fi
bench=$2
: "${DCACHE_SERVER:?run me through with_server.sh}" "${DCACHE_PID:?}"
p999_max=${DCACHE_PROBE_P999_MS:-1000}
create_max=${DCACHE_PROBE_CREATE_MS:-5000}
load_s=${DCACHE_PROBE_LOAD_S:-30}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "$prog: FAIL: $*" >&2; exit 1; }

stats() {  # prints export 71's reads, writes and admission_waits
  "$here/../../tools/dcache-stats" --json --export 71 |
    python3 -c 'import json, sys; e = json.load(sys.stdin).get("71", {}); print(e.get("reads", 0), e.get("writes", 0), e.get("admission_waits", 0))'
}

# The probes' files, written before the load.
for e in a_direct a_other; do
  "$bench" url="nfs://$DCACHE_SERVER/$e" rw=write bs=4k size=1M filename=probe --json /dev/null --no-progress \
    >/dev/null 2>"$out/setup.err" || fail "writing the probe file of /$e: $(tail -1 "$out/setup.err")"
done
head -c 4096 /dev/urandom >"$out/small"

url=nfs://$DCACHE_SERVER/a_direct
"$bench" url="$url" rw=rw rwmixread=60 bs=1M numjobs=48 iodepth=16 size=16M filename=big \
  time_based=1 runtime="$load_s" --json "$out/big.json" --no-progress 2>"$out/big.err" &
big=$!
"$bench" url="$url" rw=randrw bs=4k numjobs=16 iodepth=16 size=16M filename=small \
  time_based=1 runtime="$load_s" --json "$out/small.json" --no-progress 2>"$out/small.err" &
small=$!

# Until the load waits for places (its files are laid out first).
for ((i = 0; i < 300; i++)); do
  read -r reads writes waits <<<"$(stats)"
  [ "${reads:-0}" -gt 0 ] && [ "${writes:-0}" -gt 0 ] && [ "${waits:-0}" -gt 0 ] && break
  kill -0 "$big" 2>/dev/null || fail "the load ended before it was served: $(tail -2 "$out/big.err")"
  sleep 0.1
done
[ "${waits:-0}" -gt 0 ] || fail "no request of the load waited for a place in 30 s (reads ${reads:-0}, writes ${writes:-0})"
echo "$prog: the load is served and waits for places (reads $reads, writes $writes, admission_waits $waits)"

probe_s=$((load_s - 12))
for e in a_direct a_other; do
  "$bench" url="nfs://$DCACHE_SERVER/$e" rw=probe bs=4k size=1M filename=probe probe_interval_ms=10 \
    time_based=1 runtime="$probe_s" --json "$out/probe.$e.json" --no-progress 2>"$out/probe.$e.err" &
done
slowest=0
for ((i = 1; i <= 5; i++)); do
  for e in a_direct a_other; do
    t0=$(date +%s%N)
    timeout 30 nfs-cp "$out/small" "nfs://$DCACHE_SERVER/$e/created.$i" >/dev/null 2>"$out/cp.err" ||
      fail "CREATE on /$e (new connection $i) failed or timed out: $(tail -1 "$out/cp.err")"
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "$prog: CREATE + WRITE on /$e, new connection $i: $ms ms"
    [ "$ms" -le "$create_max" ] || fail "CREATE + WRITE on /$e took $ms ms (at most $create_max)"
    ((ms > slowest)) && slowest=$ms
  done
done
rc=0
for e in a_direct a_other; do wait -n || rc=$?; done
[ "$rc" -eq 0 ] || fail "a probe client failed (status $rc): $(cat "$out"/probe.*.err | tail -2)"
wait "$big" || fail "the 1 MiB load failed: $(tail -2 "$out/big.err")"
wait "$small" || fail "the 4 KiB load failed: $(tail -2 "$out/small.err")"
read -r reads writes waits <<<"$(stats)"

python3 - "$out" "$p999_max" "$reads" "$writes" "$waits" "$slowest" <<'PY'
import json, sys
out, p999_max = sys.argv[1], float(sys.argv[2])
reads, writes, waits, slowest = sys.argv[3:7]
bad = []
for name in ("big", "small"):
    j = json.load(open(f"{out}/{name}.json"))
    if j["errors"]:
        bad.append(f"load {name}: {j['errors']} errors ({j['first_error']})")
    print(f"load {name}: {j['total']['mib_s']:.0f} MiB/s, READ p99.9 {j['read'].get('lat_p999_us', 0) / 1e3:.0f} ms")
for e in ("a_direct", "a_other"):
    j = json.load(open(f"{out}/probe.{e}.json"))
    if j["errors"]:
        bad.append(f"probe /{e}: {j['errors']} errors ({j['first_error']})")
    for op in ("getattr", "read"):
        r = j[op]
        n = r.get("ops", 0)
        p999 = r.get("lat_p999_us", 0) / 1e3
        print(f"probe /{e} {op}: {n} ops, p50 {r.get('lat_p50_us', 0) / 1e3:.1f} ms, "
              f"p99.9 {p999:.1f} ms, max {r.get('lat_max_us', 0) / 1e3:.1f} ms")
        if n < 20:
            bad.append(f"probe /{e} {op}: only {n} answers")
        if p999 > p999_max:
            bad.append(f"probe /{e} {op}: p99.9 {p999:.0f} ms > {p999_max:.0f} ms")
print(f"export 71: reads {reads}, writes {writes}, admission_waits {waits}; slowest CREATE {slowest} ms")
for b in bad:
    print(f"admission_probe_test.sh: FAIL: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
echo "$prog: PASS"
