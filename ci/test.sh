#!/usr/bin/env bash
# README command (2): set up everything, build, and run every test: the
# unit tests (also under ASan+UBSan and TSan), the lint tests, the clang
# build that checks the lock annotations, and the end-to-end tests against
# a real ganesha.nfsd on a loop XFS filesystem: Debian 12's 4.3, then
# Debian 13's 6.5.
#   ci/test.sh            everything (as root: loop devices, mounts, namespaces)
#   ci/test.sh -L unit    only tests with that ctest label; unit and lint
#                         need no root once ci/setup.sh has run as root
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
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
DCACHE_GANESHA=4.3 DCACHE_SKIP_SETUP=1 DCACHE_BUILD_DIR="$top/build" "$top/ci/build.sh"

status=0
# The core's unit tests again under the sanitizers (no Ganesha involved),
# and the clang build whose -Wthread-safety -Werror checks the lock
# annotations (compile only).
for preset in asan tsan; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j"$(nproc)"
  ctest --preset "$preset" || status=1
done
cmake --preset clang-tsa >/dev/null
cmake --build --preset clang-tsa -j"$(nproc)" || { echo "test: the clang thread-safety build failed" >&2; status=1; }

ctest --test-dir "$top/build" --output-on-failure "$@" || status=1

# The same end-to-end suite against Debian 13's nfs-ganesha 6.5: a trixie
# root under .cache/ (ci/setup.sh --ganesha 6.5), the module built there with
# trixie's toolchain, each server run chrooted in it (with_server.sh,
# DCACHE_E2E_GANESHA=6.5; the package test builds the trixie package and
# installs it into the root, the demo and the three heads run the root's
# ganesha.nfsd too). Left out: the kernel-only XFS reproducer, which runs
# no server. On a full run, or with -L e2e.
if [ $# -eq 0 ] || [ "$*" = "-L e2e" ]; then
  echo "test: the end-to-end suite against Ganesha 6.5 (Debian 13)"
  if "$top/ci/setup.sh" --ganesha 6.5 && DCACHE_SKIP_SETUP=1 "$top/ci/build.sh" --ganesha 6.5; then
    DCACHE_E2E_GANESHA=6.5 DCACHE_PLUGIN_6_5="$top/build-6.5/fsal_dcache/adapter/libfsaldcache.so" \
      ctest --test-dir "$top/build" --output-on-failure -L e2e \
      -E '^e2e_xfs_delalloc_repro$' || status=1
  else
    echo "test: setting up or building for Ganesha 6.5 failed" >&2
    status=1
  fi
fi
exit $status
