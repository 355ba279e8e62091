#!/usr/bin/env bash
# Builds the plugin, the tests and the tools into build/ (after setup).
#   ci/build.sh [extra cmake -D options]
#
# For Debian 13's nfs-ganesha 6.5 (DCACHE_GANESHA=6.5, or --ganesha 6.5
# first): builds the module and dcache-check, targets fsaldcache and
# dcache-check (DCACHE_BUILD_TARGETS="..." for others, e.g. dcache_core),
# into build-6.5/ inside the trixie root made by
# `ci/setup.sh --ganesha 6.5`, with trixie's toolchain: the repository is
# bound at its own path in the root, in a private mount namespace, so the
# paths in build-6.5's CMake cache are the host's too.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
target=${DCACHE_GANESHA:-4.3}
case ${1:-} in
  --ganesha) [ $# -ge 2 ] || { echo "build: --ganesha needs a version" >&2; exit 2; }; target=$2; shift 2 ;;
  --ganesha=*) target=${1#--ganesha=}; shift ;;
esac
if [ "$target" = 6.5 ]; then
  [ -n "${DCACHE_SKIP_SETUP:-}" ] || "$top/ci/setup.sh" --ganesha 6.5
  # shellcheck source=trixie-root.sh
  . "$top/ci/trixie-root.sh"
  build=${DCACHE_BUILD_DIR:-$top/build-6.5}
  mkdir -p "$build"
  build=$(cd "$build" && pwd)
  binds=(--bind "$top")
  [ "${build#"$top"/}" != "$build" ] || binds+=(--bind "$build")
  read -r -a targets <<<"${DCACHE_BUILD_TARGETS:-fsaldcache dcache-check}"
  # shellcheck disable=SC2016  # expanded by the inner shell
  trixie_chroot "${binds[@]}" -- sh -c 'top=$1 build=$2; shift 2
    cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGanesha_VERSION=6.5 \
      -DDCACHE_BUILD_TESTS=OFF -DDCACHE_BUILD_TOOLS=OFF -DDCACHE_BUILD_MAN=OFF "$@" >"$build/configure.log" 2>&1' \
    sh "$top" "$build" "$@" \
    || { cat "$build/configure.log" >&2; echo "build: configuring for Ganesha 6.5 in the Debian 13 root failed" >&2; exit 1; }
  trixie_chroot "${binds[@]}" -- cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
  trixie_no_mounts
  echo "build: built ${targets[*]} for Ganesha 6.5 in $build (module: $build/fsal_dcache/adapter/libfsaldcache.so, validator: dcache-check beside it)"
  exit 0
fi
[ "$target" = 4.3 ] || { echo "build: Ganesha $target: only 4.3 (the default) and 6.5" >&2; exit 2; }
[ -n "${DCACHE_SKIP_SETUP:-}" ] || "$top/ci/setup.sh"
build=${DCACHE_BUILD_DIR:-$top/build}
mkdir -p "$build"
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log" >&2; echo "build: configuring failed" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)"
echo "build: module at $build/fsal_dcache/adapter/libfsaldcache.so, dcache-check beside it"
