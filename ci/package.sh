#!/usr/bin/env bash
# Builds the Debian package nfs-ganesha-dcache (debian/) from the working
# tree with dpkg-buildpackage, for one Ganesha release's nfs-ganesha, and
# checks it with lintian: any error or warning fails.
#   ci/package.sh [--ganesha X] [OUT_DIR]    (or DCACHE_GANESHA=X; ci/release.sh)
#     the .deb lands in OUT_DIR (default build/deb, for X build-X/deb)
# The tree is copied (the files git tracks or would track) to
# build[-X]/deb-work/src so that dpkg-buildpackage's output stays out of
# the repository's parent directory (in the checkout's own build dir:
# checkouts that share one .cache build side by side); Ganesha's source
# tree (headers only) is linked in from .cache/, where ci/setup.sh
# fetched it.
#
# 4.3 (the default): Debian 12's nfs-ganesha on this machine, version as in
# debian/changelog (0.1.0). Another release: built, and checked with its
# suite's lintian, inside that release's Debian root (ci/setup.sh --ganesha
# X); the copied tree's debian/changelog gets a top entry for the release's
# suite whose version adds the release's suffix, so every build has a file
# name of its own and all sit in one repository: 6.5 0.1.0+deb13; 9.14, from
# trixie-backports, 0.1.0+deb14~bpo13+1, as Debian versions a backport of
# what testing (forky, 14, nfs-ganesha 9.14 too) would carry: above trixie's
# for an operator who moves to backports' nfs-ganesha.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
prog=${0##*/}
# shellcheck source=release.sh
. "$top/ci/release.sh"
release_parse_ganesha "$@" || exit 2
set -- "${release_rest[@]+"${release_rest[@]}"}"
default_out=$release_build_dir/deb work=$release_build_dir/deb-work
[ -n "${DCACHE_SKIP_SETUP:-}" ] || "$top/ci/setup.sh" --ganesha "$release"
out=$(mkdir -p "${1:-$default_out}" && cd "${1:-$default_out}" && pwd)

rm -rf "$work"
mkdir -p "$work/src/.cache"
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$work/src"
ganesha_build=$top/.cache/ganesha-build
[ -z "$release_root" ] || ganesha_build=$top/.cache/ganesha-build-$release
for d in "$top/.cache/nfs-ganesha-$release" "$ganesha_build"; do
  [ -d "$d" ] && ln -s "$d" "$work/src/.cache/"
done

# Where dpkg-buildpackage and lintian run: here, or in the root with the
# repository bound at its own path (the links above, $work and $out when
# below it resolve there as here).
run=()
if [ -n "$release_root" ]; then
  run=(release_chroot --bind "$top")
  # .cache may be a link to another checkout's (a git worktree's): bound
  # too, as ci/build.sh does, or the work dir below it is not in the root
  cache=$(realpath "$top/.cache")
  [ "${cache#"$top"/}" != "$cache" ] || run+=(--bind "$cache")
  run+=(--)
  version=$(cd "$work/src" && dpkg-parsechangelog -S Version)
  suite=${release_install_suite:-$release_suite}
  # the top entry for the release's suite, before the bookworm one
  {
    printf 'nfs-ganesha-dcache (%s%s) %s; urgency=medium\n\n' "$version" "$release_deb_version_suffix" "$suite"
    printf '  * Built for %s: nfs-ganesha %s (FSAL API %s).\n\n' "$suite" "$release_debian_version" "$release_fsal_api"
    printf ' -- %s  %s\n\n' "$(cd "$work/src" && dpkg-parsechangelog -S Maintainer)" "$(date -R)"
    cat "$work/src/debian/changelog"
  } >"$work/changelog.new"
  mv "$work/changelog.new" "$work/src/debian/changelog"
fi

echo "$prog: building the package for Ganesha $release (log: $work/build.log)"
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
release_no_mounts
rm -f "$out"/nfs-ganesha-dcache_*.deb
cp "$work"/nfs-ganesha-dcache_*.deb "$out/"
ls "$out"/nfs-ganesha-dcache_*.deb
