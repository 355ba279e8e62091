#!/usr/bin/env bash
# Builds the plugin, the tests and the tools into build/ (after setup).
#   ci/build.sh [--ganesha X] [extra cmake -D options]
#
# For a release other than the host's 4.3 (--ganesha 6.5 or 9.14, or
# DCACHE_GANESHA; ci/release.sh): builds the module and dcache-check,
# targets fsaldcache and dcache-check (DCACHE_BUILD_TARGETS="..." for
# others, e.g. dcache_core), into build-X/ inside that release's Debian root
# made by `ci/setup.sh --ganesha X`, with its suite's toolchain: the
# repository is bound at its own path in the root, in a private mount
# namespace, so the paths in build-X's CMake cache are the host's too.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=release.sh
. "$top/ci/release.sh"
release_parse_ganesha "$@" || exit 2
set -- "${release_rest[@]+"${release_rest[@]}"}"
[ -n "${DCACHE_SKIP_SETUP:-}" ] || "$top/ci/setup.sh" --ganesha "$release"
build=${DCACHE_BUILD_DIR:-$release_build_dir}
mkdir -p "$build"
build=$(cd "$build" && pwd)
if [ -n "$release_root" ]; then
  binds=(--bind "$top")
  [ "${build#"$top"/}" != "$build" ] || binds+=(--bind "$build")
  # .cache may be a link to another checkout's (a git worktree's)
  cache=$(realpath "$top/.cache")
  [ "${cache#"$top"/}" != "$cache" ] || binds+=(--bind "$cache")
  read -r -a targets <<<"${DCACHE_BUILD_TARGETS:-fsaldcache dcache-check}"
  # shellcheck disable=SC2016  # expanded by the inner shell
  release_chroot "${binds[@]}" -- sh -c 'top=$1 build=$2 release=$3; shift 3
    cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGanesha_VERSION="$release" \
      -DDCACHE_BUILD_TESTS=OFF -DDCACHE_BUILD_TOOLS=OFF -DDCACHE_BUILD_MAN=OFF "$@" >"$build/configure.log" 2>&1' \
    sh "$top" "$build" "$release" "$@" \
    || { cat "$build/configure.log" >&2; echo "build: configuring for Ganesha $release in its Debian root failed" >&2; exit 1; }
  release_chroot "${binds[@]}" -- cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
  release_no_mounts
  echo "build: built ${targets[*]} for Ganesha $release in $build (module: $build/fsal_dcache/adapter/libfsaldcache.so, validator: dcache-check beside it)"
  exit 0
fi
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log" >&2; echo "build: configuring failed" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)"
echo "build: module at $build/fsal_dcache/adapter/libfsaldcache.so, dcache-check beside it"
