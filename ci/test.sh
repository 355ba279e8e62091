#!/usr/bin/env bash
# README command (2): set up everything, build, and run every test: the
# unit tests (also under ASan+UBSan and TSan), the lint tests, the clang
# build that checks the lock annotations, and the end-to-end tests against
# a real ganesha.nfsd on a loop XFS filesystem.
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
DCACHE_SKIP_SETUP=1 DCACHE_BUILD_DIR="$top/build" "$top/ci/build.sh"

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
exit $status
