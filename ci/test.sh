#!/usr/bin/env bash
# README command (2): set up everything, build, and run every test: the
# unit tests (also under ASan+UBSan and TSan), the lint tests, the clang
# build that checks the lock annotations, and the end-to-end tests against
# a real ganesha.nfsd on a loop filesystem, for every Ganesha release
# (ci/release.sh):
#   - the whole end-to-end suite against Debian 12's 4.3 (this machine's)
#     and Debian 13's 6.5 (Debian stable), the cluster tests (label
#     cluster: real Ceph, Ansible and CTDB with three heads, about 3.5
#     minutes) once, with 4.3;
#   - against 9.14 (Debian 13 backports) the subset labelled `releases`,
#     the tests of what differs between releases (docs/ganesha-releases.md:
#     every mode's data round trip and residency, bad settings and their
#     messages, live update, the stress smoke, the counters over DBus, the
#     shutdown log, the package installed and served from), which keeps CI
#     under 45 minutes on two cores.
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
stamp "build for Ganesha 4.3"
DCACHE_GANESHA=4.3 DCACHE_SKIP_SETUP=1 DCACHE_BUILD_DIR="$top/build" "$top/ci/build.sh"

status=0
# The end-to-end suite (or the ctest arguments given) against one release
# other than the host's: its root, its module, each server chrooted there.
e2e_against() {  # RELEASE CTEST-ARGS...
  local rel=$1
  shift
  stamp "end-to-end tests against Ganesha $rel${*:+ ($*)}"
  if "$top/ci/setup.sh" --ganesha "$rel" && DCACHE_SKIP_SETUP=1 "$top/ci/build.sh" --ganesha "$rel"; then
    DCACHE_GANESHA=$rel ctest --test-dir "$top/build" --output-on-failure -L e2e \
      -E '^e2e_xfs_delalloc_repro$' "$@" || status=1
  else
    echo "test: setting up or building for Ganesha $rel failed" >&2
    status=1
  fi
}

if [ -n "$only_release" ]; then
  if [ "$release" = 4.3 ]; then
    ctest --test-dir "$top/build" --output-on-failure -L e2e "$@" || status=1
  else
    e2e_against "$release" "$@"
  fi
  exit $status
fi

# The core's unit tests again under the sanitizers (no Ganesha involved),
# and the clang build whose -Wthread-safety -Werror checks the lock
# annotations (compile only).
for preset in asan tsan; do
  stamp "unit tests under $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j"$(nproc)"
  ctest --preset "$preset" || status=1
done
stamp "clang thread-safety build"
cmake --preset clang-tsa >/dev/null
cmake --build --preset clang-tsa -j"$(nproc)" || { echo "test: the clang thread-safety build failed" >&2; status=1; }

stamp "every test against Ganesha 4.3"
ctest --test-dir "$top/build" --output-on-failure "$@" || status=1

# The other releases, on a full run or with -L e2e. Left out: the
# kernel-only XFS reproducer, which runs no server; on 6.5 the cluster
# tests and the benchmark's smoke (bench_smoke, 6 minutes: the report's
# workloads and parsers, which use the server as every other test does).
if [ $# -eq 0 ] || [ "$*" = "-L e2e" ]; then
  e2e_against 6.5 -LE 'cluster|bench'
  e2e_against 9.14 -L releases
fi
stamp "done"
exit $status
