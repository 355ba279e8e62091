#!/usr/bin/env bash
# Builds the Debian package nfs-ganesha-dcache (debian/) from the working
# tree with dpkg-buildpackage, for the nfs-ganesha installed here, and
# checks it with lintian: any error or warning fails.
#   ci/package.sh [OUT_DIR]    the .deb lands in OUT_DIR (default build/deb)
# The tree is copied (the files git tracks or would track) to
# .cache/deb/src so that dpkg-buildpackage's output stays out of the
# repository's parent directory; Ganesha's source tree (headers only) is
# linked in from .cache/, where ci/setup.sh fetched it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
prog=${0##*/}
[ -n "${DCACHE_SKIP_SETUP:-}" ] || "$top/ci/setup.sh"
out=$(mkdir -p "${1:-$top/build/deb}" && cd "${1:-$top/build/deb}" && pwd)

work=$top/.cache/deb
rm -rf "$work"
mkdir -p "$work/src/.cache"
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$work/src"
for d in "$top"/.cache/nfs-ganesha-* "$top/.cache/ganesha-build"; do
  [ -d "$d" ] && ln -s "$d" "$work/src/.cache/"
done

echo "$prog: building the package (log: $work/build.log)"
if ! (cd "$work/src" && dpkg-buildpackage -b --no-sign) >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log" >&2
  echo "$prog: dpkg-buildpackage failed, see $work/build.log" >&2
  exit 1
fi
changes=$(ls "$work"/nfs-ganesha-dcache_*.changes)
echo "$prog: lintian $changes"
lintian --fail-on error,warning --display-info "$changes" || {
  echo "$prog: lintian reports errors or warnings (above)" >&2
  exit 1
}
rm -f "$out"/nfs-ganesha-dcache_*.deb
cp "$work"/nfs-ganesha-dcache_*.deb "$out/"
ls "$out"/nfs-ganesha-dcache_*.deb
