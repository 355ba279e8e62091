#!/usr/bin/env bash
# Builds the Debian package nfs-ganesha-dcache (debian/) from the working
# tree with dpkg-buildpackage, for the nfs-ganesha installed here, and
# checks it with lintian: any error or warning fails.
#   ci/package.sh [--ganesha 4.3|6.5] [OUT_DIR]    (or DCACHE_GANESHA=6.5)
#     the .deb lands in OUT_DIR (default build/deb, for 6.5 build-6.5/deb)
# The tree is copied (the files git tracks or would track) to
# .cache/deb/src so that dpkg-buildpackage's output stays out of the
# repository's parent directory; Ganesha's source tree (headers only) is
# linked in from .cache/, where ci/setup.sh fetched it.
#
# 4.3 (the default): Debian 12's nfs-ganesha on this machine, version as in
# debian/changelog (0.1.0). 6.5: Debian 13's, built, and checked with
# trixie's lintian, inside the trixie root (ci/setup.sh --ganesha 6.5,
# ci/trixie-root.sh) in .cache/deb-6.5; the copied tree's debian/changelog
# gets a top entry for trixie whose version adds +deb13 (0.1.0+deb13, above
# bookworm's 0.1.0 for upgrades, and a file name of its own, so both sit in
# one repository).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
prog=${0##*/}
target=${DCACHE_GANESHA:-4.3}
case ${1:-} in
  --ganesha) [ $# -ge 2 ] || { echo "$prog: --ganesha needs a version" >&2; exit 2; }; target=$2; shift 2 ;;
  --ganesha=*) target=${1#--ganesha=}; shift ;;
esac
case $target in
  4.3) default_out=$top/build/deb work=$top/.cache/deb ;;
  6.5) default_out=$top/build-6.5/deb work=$top/.cache/deb-6.5 ;;
  *) echo "$prog: Ganesha $target: only 4.3 (the default) and 6.5" >&2; exit 2 ;;
esac
[ -n "${DCACHE_SKIP_SETUP:-}" ] || "$top/ci/setup.sh" --ganesha "$target"
out=$(mkdir -p "${1:-$default_out}" && cd "${1:-$default_out}" && pwd)

rm -rf "$work"
mkdir -p "$work/src/.cache"
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$work/src"
ganesha_build=$top/.cache/ganesha-build
[ "$target" = 4.3 ] || ganesha_build=$top/.cache/ganesha-build-$target
for d in "$top"/.cache/nfs-ganesha-* "$ganesha_build"; do
  [ -d "$d" ] && ln -s "$d" "$work/src/.cache/"
done

# Where dpkg-buildpackage and lintian run: here, or in the root with the
# repository bound at its own path (the links above, $work and $out when
# below it resolve there as here).
run=()
if [ "$target" = 6.5 ]; then
  # shellcheck source=trixie-root.sh
  . "$top/ci/trixie-root.sh"
  run=(trixie_chroot --bind "$top" --)
  version=$(cd "$work/src" && dpkg-parsechangelog -S Version)
  # the top entry for trixie, before the bookworm one
  {
    printf 'nfs-ganesha-dcache (%s+deb13) trixie; urgency=medium\n\n' "$version"
    printf '  * Built for Debian 13: nfs-ganesha 6.5-5 (FSAL API 13).\n\n'
    printf ' -- %s  %s\n\n' "$(cd "$work/src" && dpkg-parsechangelog -S Maintainer)" "$(date -R)"
    cat "$work/src/debian/changelog"
  } >"$work/changelog.new"
  mv "$work/changelog.new" "$work/src/debian/changelog"
fi

echo "$prog: building the package for Ganesha $target (log: $work/build.log)"
# shellcheck disable=SC2016  # expanded by the inner shell
if ! "${run[@]}" sh -c 'cd "$1" && dpkg-buildpackage -b --no-sign' sh "$work/src" >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log" >&2
  echo "$prog: dpkg-buildpackage failed, see $work/build.log" >&2
  exit 1
fi
changes=$(ls "$work"/nfs-ganesha-dcache_*.changes)
echo "$prog: lintian $changes"
"${run[@]}" lintian --fail-on error,warning --display-info "$changes" || {
  echo "$prog: lintian reports errors or warnings (above)" >&2
  exit 1
}
[ "$target" != 6.5 ] || trixie_no_mounts
rm -f "$out"/nfs-ganesha-dcache_*.deb
cp "$work"/nfs-ganesha-dcache_*.deb "$out/"
ls "$out"/nfs-ganesha-dcache_*.deb
