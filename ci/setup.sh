#!/usr/bin/env bash
# One idempotent setup for a fresh Debian 12 machine: installs every package
# the build, tests, benchmark and demo need, fetches the nfs-ganesha 4.3
# source tree from Debian's source package (checksum verified against the
# .dsc) into the ignored cache .cache/, and generates a config.h matching
# Debian's build of ganesha.nfsd.
#
# Safe to run again: each step checks whether it is already done.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache="$top/.cache"
ganesha_version=4.3
ganesha_debian_version=4.3-2
mkdir -p "$cache"

packages=(
  # build
  cmake g++ gcc pkg-config bison flex dpkg-dev
  # Ganesha runtime and what its headers need
  nfs-ganesha nfs-ganesha-vfs nfs-ganesha-nullfs rpcbind libntirpc-dev liburcu-dev libacl1-dev
  libkrb5-dev libdbus-1-dev libblkid-dev libcap-dev uuid-dev libnfsidmap-dev
  libwbclient-dev
  # the plugin's own dependencies
  liburing-dev xfslibs-dev systemtap-sdt-dev
  # tests, benchmark and demo
  libgtest-dev libgmock-dev libnfs-dev libnfs-utils xfsprogs dbus iproute2
  util-linux procps gnuplot-nox python3
  # lint: shell scripts, formatting, and clang's lock-annotation check
  shellcheck clang clang-format
  # the Debian package and its man pages
  debhelper lintian go-md2man man-db
)

# Installing needs root; once everything is there, setup (and so the unit
# tests) runs as any user.
need_root() {
  [ "$(id -u)" = 0 ] && return 0
  echo "setup: $1; run ci/setup.sh as root once" >&2
  exit 1
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  need_root "missing packages: ${missing[*]}"
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- Ganesha source tree (headers only; never committed) -------------------
src="$cache/nfs-ganesha-$ganesha_version"
if [ ! -f "$src/.verified" ]; then
  # Source packages come from the archives this machine already uses: deb-src
  # beside each configured deb entry, if there is none yet.
  sources=/etc/apt/sources.list.d/debian.sources
  if [ -f "$sources" ] && ! grep -q '^Types:.*deb-src' "$sources"; then
    need_root "no deb-src entries in $sources"
    echo "setup: adding deb-src entries to $sources"
    sed -i 's/^Types: deb$/Types: deb deb-src/' "$sources"
    apt-get update -qq
  elif [ ! -f "$sources" ] && ! grep -rqs '^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    need_root "no deb-src entries in the apt sources"
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | sed 's/^deb /deb-src /' \
      > /etc/apt/sources.list.d/dcache-src.list
    [ -s /etc/apt/sources.list.d/dcache-src.list ] || { echo "setup: no deb entries to derive deb-src from" >&2; exit 1; }
    apt-get update -qq
  fi
  dl="$cache/download"
  mkdir -p "$dl"
  # apt-get source fails as a whole because the .debian.tar.xz is gone from
  # the archive; the .dsc and .orig.tar.gz arrive and are all we need.
  (cd "$dl" && apt-get source --download-only "nfs-ganesha=$ganesha_debian_version" >/dev/null 2>&1) || true
  dsc="$dl/nfs-ganesha_$ganesha_debian_version.dsc"
  tarball="$dl/nfs-ganesha_$ganesha_version.orig.tar.gz"
  if [ ! -f "$dsc" ] || [ ! -f "$tarball" ]; then
    echo "setup: could not download nfs-ganesha $ganesha_debian_version source" >&2
    exit 1
  fi
  want=$(awk '/^Checksums-Sha256:/{s=1;next} /^[^ ]/{s=0} s && $3=="nfs-ganesha_'"$ganesha_version"'.orig.tar.gz"{print $1}' "$dsc")
  have=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [ -z "$want" ] || [ "$want" != "$have" ]; then
    echo "setup: checksum mismatch for $tarball: .dsc says '$want', file is '$have'" >&2
    exit 1
  fi
  rm -rf "$src"
  tar -xzf "$tarball" -C "$cache"
  echo "$have" > "$src/.verified"
fi

# --- config.h matching Debian's build ---------------------------------------
cfg="$cache/ganesha-build"
if [ ! -f "$cfg/include/config.h" ]; then
  off=()
  for f in CEPH GLUSTER GPFS PROXY_V4 PROXY_V3 RGW XFS LUSTRE KVSFS MEM NULL LIZARDFS; do off+=("-DUSE_FSAL_$f=OFF"); done
  cmake -S "$src/src" -B "$cfg" -Wno-dev \
    -DUSE_SYSTEM_NTIRPC=ON -DBUILD_CONFIG=debian \
    -DFSAL_DESTINATION=/usr/lib/x86_64-linux-gnu/ganesha -DLIB_INSTALL_DIR=/usr/lib/ganesha \
    -DUSE_9P=ON -DUSE_NFS3=ON -DUSE_NLM=ON -DUSE_RQUOTA=ON -DUSE_NFSACL3=ON \
    -DUSE_GSS=ON -DUSE_DBUS=ON -DUSE_LTTNG=OFF -DDEBUG_SAL=OFF -DUSE_VSOCK=OFF \
    -DUSE_NFS_RDMA=OFF -DENABLE_VFS_DEBUG_ACL=OFF -DUSE_ADMIN_TOOLS=OFF -DUSE_GUI_ADMIN_TOOLS=OFF \
    -DUSE_MAN_PAGE=OFF -DUSE_RADOS_RECOV=OFF -DRADOS_URLS=OFF -DUSE_9P_RDMA=OFF \
    "${off[@]}" >"$cache/ganesha-configure.log" 2>&1 \
    || { echo "setup: configuring Ganesha's tree failed, see $cache/ganesha-configure.log" >&2; exit 1; }
fi
for want in _USE_9P _USE_NFS3 _USE_NLM _USE_RQUOTA USE_NFSACL3 _HAVE_GSSAPI USE_DBUS; do
  grep -q "^#define $want" "$cfg/include/config.h" || { echo "setup: $want missing from generated config.h; Debian's ABI would not match" >&2; exit 1; }
done
echo "setup: ready (Ganesha tree $src, config.h $cfg/include/config.h)"
