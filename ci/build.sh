#!/usr/bin/env bash
# Builds the plugin, the tests and the tools into build/ (after setup).
#   ci/build.sh [extra cmake -D options]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/ci/setup.sh"
build=${DCACHE_BUILD_DIR:-$top/build}
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "build: module at $build/fsal_dcache/adapter/libfsaldcache.so"
