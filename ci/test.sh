#!/usr/bin/env bash
# README command (2): set up everything, build, and run every test:
# unit tests (also under ASan+UBSan and TSan) and the end-to-end tests
# against a real ganesha.nfsd on a loop XFS filesystem.
#   ci/test.sh            everything
#   ci/test.sh -L unit    only tests with that ctest label
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/ci/setup.sh"

[ "$(id -u)" = 0 ] || { echo "test: the end-to-end tests need root (loop devices, mounts, network namespaces)" >&2; exit 1; }

build=$top/build
"$top/ci/build.sh"

status=0
# The core's unit tests again under the sanitizers (no Ganesha involved).
for san in address thread; do
  dir=$top/build-$san
  cmake -S "$top" -B "$dir" -DDCACHE_SANITIZE=$san -DDCACHE_BUILD_ADAPTER=OFF >/dev/null
  cmake --build "$dir" -j"$(nproc)" --target dcache_unit_tests dcache_backend_tests
  ctest --test-dir "$dir" -R "^(unit|backend)\\." -E "^unit\\.bench\\." --output-on-failure -j2 || status=1
done

ctest --test-dir "$build" --output-on-failure "$@" || status=1
exit $status
