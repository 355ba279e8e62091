#!/usr/bin/env bash
# README command (2): set up everything, build, and run every test: the
# unit tests (also under ASan+UBSan and TSan), the lint tests, the clang
# build that checks the lock annotations, and the end-to-end tests against
# a real ganesha.nfsd on a loop filesystem, for every Ganesha release
# (ci/releases.tsv): the whole suite against the host's (Debian 12's 4.3),
# with the cluster tests (label cluster: real Ceph, Ansible and CTDB with
# three heads) and the benchmark's smoke; against each other release the
# tests its row names (e2e: `releases`, the tests of what differs between
# releases; docs/ganesha-releases.md).
#
#   ci/test.sh                everything (as root: loop devices, mounts, namespaces)
#   ci/test.sh --ganesha X    the whole end-to-end suite against release X
#                             (set up and built for X first; the clients
#                             and tools are this machine's build)
#   ci/test.sh -L unit        only tests with that ctest label; unit and lint
#                             need no root once ci/setup.sh has run as root
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=release.sh
. "$top/ci/release.sh"
only_release=""
case ${1:-} in --ganesha | --ganesha=*) only_release=1 ;; esac
release_parse_ganesha "$@" || exit 2
set -- "${release_rest[@]+"${release_rest[@]}"}"
wanted_release=$release
release_select ""   # the host's: what the clients, tools and tests are built for
host_release=$release
stamp() {  # what starts now, after how long: where a CI run's minutes go
  printf 'test: [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"
}
stamp "setup"
"$top/ci/setup.sh"

# Only the end-to-end tests need root: a label selection without e2e runs
# as any user.
labels_without_root=false
if [ $# -eq 2 ] && [ "$1" = -L ] && [[ "$2" =~ ^(unit|lint)$ ]]; then
  labels_without_root=true
fi
if [ "$(id -u)" != 0 ] && ! $labels_without_root; then
  echo "test: the end-to-end tests need root (loop devices, mounts, network namespaces); ci/test.sh -L unit runs without" >&2
  exit 1
fi

cd "$top"
# On a full run, the other releases' roots (debootstrap, apt in the root,
# the source package: 113 s each alone, 83 of them CPU) are made in the
# background while the host's build and the sanitizer runs compile, and
# waited for before the end-to-end tests, whose bounds a neighbour would
# move; e2e_against's own setup then finds them ready (1 s). On a 2-core
# machine with fast downloads this about breaks even (the build 2.5
# minutes slower, the releases' phases 2.6 faster); the slower the
# archive, the more of its time the build hides.
declare -A background_setup=()
if [ -z "$only_release" ] && { [ $# -eq 0 ] || [ "$*" = "-L e2e" ]; }; then
  for rel in "${release_all[@]}"; do
    [ "$rel" != "$host_release" ] || continue
    "$top/ci/setup.sh" --ganesha "$rel" >"$top/.cache/setup-$rel.log" 2>&1 &
    background_setup[$rel]=$!
  done
fi
# Waits for them, each log shown once; a failure is e2e_against's to report
# (it runs the setup again, in the foreground).
wait_background_setup() {
  local rel
  [ ${#background_setup[@]} -gt 0 ] || return 0
  for rel in "${!background_setup[@]}"; do
    wait "${background_setup[$rel]}" || true
    sed "s/^/[background, Ganesha $rel] /" "$top/.cache/setup-$rel.log"
  done
  background_setup=()
  stamp "the other releases' roots are set up"
}

stamp "build for Ganesha $host_release"
DCACHE_GANESHA=$host_release DCACHE_SKIP_SETUP=1 DCACHE_BUILD_DIR="$top/build" "$top/ci/build.sh"

status=0
# The end-to-end suite (or the ctest arguments given) against one release
# other than the host's: its root, its module, each server chrooted there.
e2e_against() {  # RELEASE CTEST-ARGS...
  local rel=$1
  shift
  stamp "set up and build for Ganesha $rel"
  if "$top/ci/setup.sh" --ganesha "$rel" && DCACHE_SKIP_SETUP=1 "$top/ci/build.sh" --ganesha "$rel"; then
    stamp "end-to-end tests against Ganesha $rel${*:+ ($*)}"
    DCACHE_GANESHA=$rel ctest --test-dir "$top/build" --output-on-failure -L e2e \
      -E '^e2e_xfs_delalloc_repro$' "$@" || status=1
  else
    echo "test: setting up or building for Ganesha $rel failed" >&2
    status=1
  fi
}

if [ -n "$only_release" ]; then
  if [ "$wanted_release" = "$host_release" ]; then
    ctest --test-dir "$top/build" --output-on-failure -L e2e "$@" || status=1
  else
    e2e_against "$wanted_release" "$@"
  fi
  exit $status
fi

# The core's unit tests again under the sanitizers (no Ganesha involved;
# the asan preset also builds dcache-bench, whose error paths
# e2e_bench_vanish runs below against a real server), and the clang build
# whose -Wthread-safety -Werror checks the lock annotations (compile only).
# The sanitizer presets are Debug builds (-O0, assertions on): the
# sanitizers find the same errors unoptimised, and the asan build took
# 1:41 instead of 4:25 at -O2 (tsan 1:05 instead of 1:40), the tests as
# long (18 s against 15).
for preset in asan tsan; do
  stamp "unit tests under $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j"$(nproc)"
  ctest --preset "$preset" || status=1
done
stamp "clang thread-safety build"
cmake --preset clang-tsa >/dev/null
cmake --build --preset clang-tsa -j"$(nproc)" || { echo "test: the clang thread-safety build failed" >&2; status=1; }

stamp "every test against Ganesha $host_release"
# e2e_bench_vanish fails, not skips, without the asan preset's dcache-bench
if [ $# -eq 0 ]; then
  # the unit and lint tests one per core; the end-to-end tests that may
  # share the machine one per core (each owns its loop device, namespaces
  # and server), the benchmark's smoke among them, then one at a time
  # those that may not: label alone (their bounds are on time, latency or
  # a memory group) and cluster (three heads take both cores). Two passes,
  # not one ctest -j2, which drains the machine before every serial test
  # it meets: 7 of the shared tests took 307 s two at a time, against 495 s
  # one at a time.
  ctest --test-dir "$top/build" --output-on-failure -j"$(nproc)" -L '^(unit|lint)$' || status=1
  wait_background_setup
  stamp "end-to-end tests against Ganesha $host_release, one per core"
  ctest --test-dir "$top/build" --output-on-failure -j"$(nproc)" -LE '^(unit|lint|alone|cluster)$' || status=1
  stamp "end-to-end tests against Ganesha $host_release that run alone"
  DCACHE_REQUIRE_ASAN_BENCH=1 ctest --test-dir "$top/build" --output-on-failure \
    -L '^(alone|cluster)$' -LE '^(unit|lint)$' || status=1
else
  wait_background_setup
  DCACHE_REQUIRE_ASAN_BENCH=1 ctest --test-dir "$top/build" --output-on-failure "$@" || status=1
fi

# The other releases (ci/releases.tsv), on a full run or with -L e2e: the
# tests of what differs between releases (label releases: every mode's data
# round trip and residency, bad settings and their messages, live update,
# the stress smoke, the counters over DBus and in Prometheus, the shutdown
# log, the package installed and served from) where the table says
# `releases`, the whole suite but the cluster tests and the benchmark's
# smoke (which use the server as every other test does) where it says
# `all`. The `releases` tests run two at a time: none has a bound on time,
# latency or memory (none is ALONE), they passed so in every run tried,
# and each release's took 5-6 minutes one at a time.
if [ $# -eq 0 ] || [ "$*" = "-L e2e" ]; then
  for rel in "${release_all[@]}"; do
    [ "$rel" != "$host_release" ] || continue
    release_select "$rel"
    if [ "$release_e2e" = all ]; then
      e2e_against "$rel" -LE 'cluster|bench'
    else
      e2e_against "$rel" -L releases -j"$(nproc)"
    fi
  done
fi
stamp "done"
exit $status
