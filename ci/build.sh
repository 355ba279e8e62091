#!/usr/bin/env bash
# Builds the plugin, the tests and the tools into build/ (after setup).
#   ci/build.sh [extra cmake -D options]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ -n "${DCACHE_SKIP_SETUP:-}" ] || "$top/ci/setup.sh"
build=${DCACHE_BUILD_DIR:-$top/build}
mkdir -p "$build"
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log" >&2; echo "build: configuring failed" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)"
echo "build: module at $build/fsal_dcache/adapter/libfsaldcache.so"
