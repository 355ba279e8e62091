#!/usr/bin/env bash
# ci/demo.sh (README command 1) as a new user meets it, in network and
# mount namespaces of its own (its port 2049, its /run; one veth address
# so that Ganesha resolves Bind_addr = 127.0.0.1): --check twice on one
# state dir (the second run finds the first's files), then serving mode
# stopped with Ctrl-C's SIGINT to its process group, as it tells you to,
# and with SIGTERM to the script. Every run exits
# 0, shows the page-cache summary (plain VFS keeps its files cached,
# dontcache and direct do not) and leaves no mount or loop device behind.
#
#   demo_test.sh DEMO [BUILD_DIR]      (as root)
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
prog=${0##*/}
if [ "${1:-}" != --inside ]; then
  [ $# -ge 1 ] || { echo "usage: $prog DEMO [BUILD_DIR]" >&2; exit 2; }
  [ "$(id -u)" = 0 ] || { echo "$prog: needs root" >&2; exit 2; }
  # shellcheck disable=SC2016  # expanded by the inner shell
  exec unshare --net --mount --propagation private bash -c '
    mount -t tmpfs -o size=16m,mode=755 dcache-demo-run /run &&
    ip link set lo up && ip link add dcache-demo0 type veth peer name dcache-demo1 &&
    ip addr add 192.0.2.1/24 dev dcache-demo0 && ip link set dcache-demo0 up &&
    exec "$0" --inside "$@"' "$0" "$@"
fi
shift
demo=$1
export DCACHE_BUILD_DIR=${2:-}
[ -n "$DCACHE_BUILD_DIR" ] || unset DCACHE_BUILD_DIR
# The suite's Ganesha (DCACHE_GANESHA, ci/release.sh) is the demo's own
# switch; for a release other than 4.3 its module is that release's build,
# not the build dir given.
[ "${DCACHE_GANESHA:-4.3}" = 4.3 ] || unset DCACHE_BUILD_DIR
state=$(mktemp -d /tmp/dcache-demo-test.XXXXXX)
trap 'rm -rf "$state"' EXIT
export DCACHE_DEMO_IMAGE_SIZE=1G
passes=0 failures=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

left_behind() {  # what a stopped demo must not leave
  mountpoint -q "$state/state/mnt" && echo "$state/state/mnt still mounted"
  losetup -j "$state/state/xfs.img" | grep . && echo "a loop device still holds the image"
  pgrep -f "ganesha.nfsd .*$state" >/dev/null && echo "ganesha.nfsd still running"
  true
}
summary_ok() {  # output file
  python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rows = dict(re.findall(r"^  (/\w+) .*?(\d+) %", text, re.M))
bad = []
if int(rows.get("/vfs", -1)) < 90:
    bad.append(f"/vfs {rows.get('/vfs')} % resident (want >= 90)")
for e in ("/dontcache", "/direct"):
    if not 0 <= int(rows.get(e, -1)) <= 5:
        bad.append(f"{e} {rows.get(e)} % resident (want <= 5)")
print("; ".join(bad) or "/vfs %s %%, /dontcache %s %%, /direct %s %%" % (rows["/vfs"], rows["/dontcache"], rows["/direct"]))
sys.exit(1 if bad else 0)
PY
}

for run in 1 2; do
  rc=0
  (cd "$state" && "$demo" --check) >"$state/check$run.out" 2>&1 || rc=$?
  [ "$rc" = 0 ] && grep -q "every file round-tripped through every export" "$state/check$run.out" &&
    pass "--check run $run exits 0, every file round-trips" ||
    { fail "--check run $run: status $rc"; tail -n 30 "$state/check$run.out"; }
  grep -q "^ganesha.nfsd ${DCACHE_GANESHA:-4.3}[ (]" "$state/check$run.out" &&
    pass "--check run $run served with Ganesha ${DCACHE_GANESHA:-4.3}" || fail "--check run $run: not Ganesha ${DCACHE_GANESHA:-4.3}"
  out=$(summary_ok "$state/check$run.out") && pass "--check run $run summary: $out" || fail "--check run $run summary: $out"
  lb=$(left_behind); [ -z "$lb" ] && pass "--check run $run left nothing behind" || fail "after --check run $run: $lb"
done

# Job control: the demo runs in a process group of its own, as a terminal's
# foreground job does, and Ctrl-C's SIGINT goes to the whole group (the
# demo and the ganesha.nfsd, rpcbind and dbus-daemon it started).
set -m
for sig in INT TERM; do
  (cd "$state" && exec "$demo") >"$state/serve-$sig.out" 2>&1 &
  pid=$!
  for ((i = 0; i < 1200; i++)); do
    grep -q "serving until Ctrl-C" "$state/serve-$sig.out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if grep -q "serving until Ctrl-C" "$state/serve-$sig.out"; then
    if [ "$sig" = INT ]; then kill -INT -- -"$pid"; else kill -TERM "$pid"; fi
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" = 0 ] && grep -q "stopped on SIG$sig" "$state/serve-$sig.out" &&
      pass "serving, SIG$sig: exits 0 with a clean stop" ||
      { fail "serving, SIG$sig: status $rc"; tail -n 20 "$state/serve-$sig.out"; }
  else
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    fail "serving, SIG$sig: never reached 'serving until Ctrl-C'"
    tail -n 30 "$state/serve-$sig.out"
  fi
  lb=$(left_behind); [ -z "$lb" ] && pass "SIG$sig left nothing behind" || fail "after SIG$sig: $lb"
done

echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
