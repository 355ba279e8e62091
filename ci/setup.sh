#!/usr/bin/env bash
# One idempotent setup for a fresh Debian 12 machine: installs every package
# the build, tests, benchmark and demo need, fetches the nfs-ganesha 4.3
# source tree from Debian's source package (checksum verified against the
# .dsc) into the ignored cache .cache/, and generates a config.h matching
# Debian's build of ganesha.nfsd.
#
# Safe to run again: each step checks whether it is already done.
#
#   ci/setup.sh [--ganesha 6.5]      (or DCACHE_GANESHA=6.5 ci/setup.sh)
#
# With 6.5 it also makes a Debian 13 (trixie) root in .cache/trixie/root
# holding trixie's toolchain and nfs-ganesha 6.5-5, fetches the 6.5-5 source
# package (checksums verified against its .dsc) into .cache/nfs-ganesha-6.5
# and configures that tree inside the root, as Debian 13's debian/rules does,
# into .cache/ganesha-build-6.5 (ci/trixie-root.sh).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache="$top/.cache"
ganesha_version=4.3
ganesha_debian_version=4.3-2
mkdir -p "$cache"

target=${DCACHE_GANESHA:-4.3}
while [ $# -gt 0 ]; do
  case $1 in
    --ganesha) [ $# -ge 2 ] || { echo "setup: --ganesha needs a version" >&2; exit 2; }; target=$2; shift 2 ;;
    --ganesha=*) target=${1#--ganesha=}; shift ;;
    *) echo "usage: ci/setup.sh [--ganesha 4.3|6.5]" >&2; exit 2 ;;
  esac
done
case $target in
  4.3|6.5) ;;
  *) echo "setup: Ganesha $target: only 4.3 (Debian 12's, the default) and 6.5 (Debian 13's)" >&2; exit 2 ;;
esac

packages=(
  # build
  cmake g++ gcc pkg-config bison flex dpkg-dev
  # Ganesha runtime and what its headers need
  nfs-ganesha nfs-ganesha-vfs nfs-ganesha-nullfs rpcbind libntirpc-dev liburcu-dev libacl1-dev
  libkrb5-dev libdbus-1-dev libblkid-dev libcap-dev uuid-dev libnfsidmap-dev
  libwbclient-dev
  # the plugin's own dependencies
  liburing-dev xfslibs-dev systemtap-sdt-dev
  # the filesystems the end-to-end suite runs on besides XFS
  btrfs-progs e2fsprogs
  # tests, benchmark and demo
  libgtest-dev libgmock-dev libnfs-dev libnfs-utils xfsprogs dbus iproute2
  util-linux procps gnuplot-nox python3
  # lint: shell scripts, formatting, and clang's lock-annotation check
  shellcheck clang clang-format
  # the Debian package and its man pages
  debhelper lintian go-md2man man-db
)
# the Debian 13 root for Ganesha 6.5
[ "$target" != 6.5 ] || packages+=(debootstrap)

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

[ "$target" = 6.5 ] || exit 0
# --- Ganesha 6.5: a Debian 13 root, its source tree and config.h ------------
# shellcheck source=trixie-root.sh
. "$top/ci/trixie-root.sh"
t65_started=$SECONDS
t65_debian_version=6.5-5
t65_dir="$cache/trixie"
t65_packages=(
  # build tools
  cmake g++ gcc pkgconf make bison flex
  # the plugin's own dependencies, and what Ganesha's headers need
  liburing-dev libntirpc-dev liburcu-dev libdbus-1-dev libacl1-dev libkrb5-dev libblkid-dev
  libcap-dev uuid-dev libnfsidmap-dev libwbclient-dev xfslibs-dev systemtap-sdt-dev
  # the server the end-to-end harness runs from the root
  nfs-ganesha nfs-ganesha-vfs nfs-ganesha-nullfs dbus rpcbind
  # the Debian package for 6.5 (ci/package.sh --ganesha 6.5) and its man pages
  build-essential dpkg-dev debhelper lintian go-md2man man-db
)
mkdir -p "$t65_dir"
trixie_no_mounts

# 1. debootstrap (bookworm's debootstrap knows trixie: scripts/trixie -> sid,
# and debian-archive-keyring 2023.3+deb12u2 has trixie's release keys)
if [ ! -f "$t65_dir/debootstrap.done" ] || [ ! -x "$trixie_root/usr/bin/env" ]; then
  need_root "no Debian 13 root yet"
  archive=$(trixie_archive_uri)
  echo "setup: debootstrap $trixie_suite into $trixie_root (archive $archive)"
  [ ! -e "$trixie_root" ] || rm -rf --one-file-system "$trixie_root"
  rm -f "$t65_dir/debootstrap.done" "$t65_dir/packages.done"
  mkdir -p "$trixie_root"
  # its own mounts (/proc, /sys in the root) stay in a private namespace
  unshare --mount --propagation private -- \
    debootstrap --variant=minbase "$trixie_suite" "$trixie_root" "$archive" >"$t65_dir/debootstrap.log" 2>&1 \
    || { echo "setup: debootstrap failed, see $t65_dir/debootstrap.log" >&2; tail -n 5 "$t65_dir/debootstrap.log" >&2; exit 1; }
  echo "$archive" >"$t65_dir/debootstrap.done"
fi

# 2. the root's apt: trixie (with deb-src) from the same archive, no
# services started by maintainer scripts, and the host's view of stale
# Release dates (a snapshot archive's Valid-Until has passed)
archive=$(cat "$t65_dir/debootstrap.done")
want_sources="Types: deb deb-src
URIs: $archive
Suites: $trixie_suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
if [ "$(cat "$trixie_root/etc/apt/sources.list.d/debian.sources" 2>/dev/null)" != "$want_sources" ]; then
  need_root "the Debian 13 root's apt sources need writing"
  printf '%s\n' "$want_sources" >"$trixie_root/etc/apt/sources.list.d/debian.sources"
  rm -f "$trixie_root/etc/apt/sources.list" "$t65_dir/packages.done"
fi
if [ ! -f "$trixie_root/usr/sbin/policy-rc.d" ]; then
  need_root "the Debian 13 root needs a policy-rc.d"
  printf '#!/bin/sh\n# made by ci/setup.sh: nothing starts services in this root\nexit 101\n' >"$trixie_root/usr/sbin/policy-rc.d"
  chmod 755 "$trixie_root/usr/sbin/policy-rc.d"
fi
# Ganesha's VFS finds its filesystems in /etc/mtab, which a minbase root
# lacks (systemd's tmpfiles make it on a booted system)
if [ "$(readlink "$trixie_root/etc/mtab" || true)" != ../proc/self/mounts ]; then
  need_root "the Debian 13 root needs /etc/mtab"
  ln -sfn ../proc/self/mounts "$trixie_root/etc/mtab"
fi
want_conf="$(apt-config dump | grep -E '^Acquire::Check-(Valid-Until|Date) ' || true)
APT::Install-Recommends \"false\";"
if [ "$(cat "$trixie_root/etc/apt/apt.conf.d/99dcache" 2>/dev/null)" != "${want_conf#$'\n'}" ]; then
  need_root "the Debian 13 root's apt settings need writing"
  printf '%s\n' "${want_conf#$'\n'}" >"$trixie_root/etc/apt/apt.conf.d/99dcache"
fi

# 3. packages (again when the list changes)
if [ "$(cat "$t65_dir/packages.done" 2>/dev/null)" != "${t65_packages[*]}" ] || [ ! -x "$trixie_root/usr/bin/ganesha.nfsd" ]; then
  need_root "packages missing in the Debian 13 root"
  echo "setup: installing into the Debian 13 root: ${t65_packages[*]}"
  trixie_chroot -- sh -c 'apt-get update -qq && apt-get install -y -qq "$@"' sh "${t65_packages[@]}" \
    >"$t65_dir/packages.log" 2>&1 \
    || { echo "setup: apt-get in the Debian 13 root failed, see $t65_dir/packages.log" >&2; tail -n 5 "$t65_dir/packages.log" >&2; exit 1; }
  trixie_chroot -- apt-get clean
  echo "${t65_packages[*]}" >"$t65_dir/packages.done"
fi
trixie_no_mounts
# shellcheck disable=SC2016  # a dpkg-query format
have=$(dpkg-query --admindir="$trixie_root/var/lib/dpkg" -W -f='${Version}' nfs-ganesha)
[ "$have" = "$t65_debian_version" ] || { echo "setup: the Debian 13 root has nfs-ganesha $have, not $t65_debian_version" >&2; exit 1; }

# 4. the 6.5-5 source package, as for 4.3: sha256 of the tarballs against
# the .dsc, the orig tarball unpacked, then debian/ and Debian's patches
# as Debian builds (src/CMakeLists.txt, a few .c files, FSAL_RGW's header:
# nothing an FSAL over VFS includes)
src65="$cache/nfs-ganesha-6.5"
if [ ! -f "$src65/.verified" ]; then
  dl="$cache/download-6.5"
  mkdir -p "$dl"
  dsc="$dl/nfs-ganesha_$t65_debian_version.dsc"
  tarball="$dl/nfs-ganesha_6.5.orig.tar.gz"
  debtar="$dl/nfs-ganesha_$t65_debian_version.debian.tar.xz"
  if [ ! -f "$dsc" ] || [ ! -f "$tarball" ] || [ ! -f "$debtar" ]; then
    # shellcheck disable=SC2016  # expanded by the inner shell
    trixie_chroot --bind "$dl" -- sh -c 'cd "$1" && apt-get source --download-only "nfs-ganesha=$2"' sh "$dl" "$t65_debian_version" \
      >"$t65_dir/source.log" 2>&1 || true
  fi
  for f in "$dsc" "$tarball" "$debtar"; do
    [ -f "$f" ] || { echo "setup: could not download nfs-ganesha $t65_debian_version source ($f), see $t65_dir/source.log" >&2; exit 1; }
  done
  for f in "$tarball" "$debtar"; do
    want=$(awk -v n="${f##*/}" '/^Checksums-Sha256:/{s=1;next} /^[^ ]/{s=0} s && $3==n{print $1}' "$dsc")
    have=$(sha256sum "$f" | cut -d' ' -f1)
    if [ -z "$want" ] || [ "$want" != "$have" ]; then
      echo "setup: checksum mismatch for $f: .dsc says '$want', file is '$have'" >&2
      exit 1
    fi
  done
  rm -rf "$src65" "$cache/ganesha-build-6.5"
  tar -xzf "$tarball" -C "$cache"
  [ -d "$src65/src" ] || { echo "setup: $tarball did not unpack to $src65" >&2; exit 1; }
  tar -xJf "$debtar" -C "$src65"
  while read -r p _; do
    case $p in ''|'#'*) continue ;; esac
    patch -d "$src65" -p1 -s -N <"$src65/debian/patches/$p" \
      || { echo "setup: Debian's patch $p does not apply to $src65" >&2; exit 1; }
  done <"$src65/debian/patches/series"
  sha256sum "$tarball" | cut -d' ' -f1 >"$src65/.verified"
fi

# 5. config.h: Ganesha's tree configured inside the root with
# override_dh_auto_configure's options from Debian 13's debian/rules (amd64)
# and dh_auto_configure's own install paths, then OFF for what needs
# libraries the root does not have (Ceph, RGW, Gluster, RADOS, the Python
# admin tools, man pages; asked for on the command line, Ganesha fails
# rather than switch them off): none of them reaches a header an FSAL
# includes, and none adds a field to a structure the adapter sees.
cfg65="$cache/ganesha-build-6.5"
if [ ! -f "$cfg65/include/config.h" ]; then
  mkdir -p "$cfg65"
  opts=(
    -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc -DCMAKE_INSTALL_LOCALSTATEDIR=/var
    -DCMAKE_INSTALL_RUNSTATEDIR=/run -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu
    -DWITH_PYTHON3=3 -DBUILD_CONFIG=debian -DLIB_INSTALL_DIR="$trixie_lib_dir"
    -DFSAL_DESTINATION="$trixie_fsal_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DUSE_FSAL_NULL=YES -DUSE_FSAL_MEM=YES -DUSE_FSAL_XFS=NO -DUSE_FSAL_LUSTRE=NO
    -DUSE_FSAL_CEPH=YES -DUSE_FSAL_RGW=YES -DUSE_FSAL_GPFS=YES -DUSE_FSAL_KVSFS=NO
    -DUSE_FSAL_GLUSTER=YES -DUSE_SYSTEM_NTIRPC=YES -DUSE_9P_RDMA=NO -DUSE_LTTNG=NO
    -DUSE_ADMIN_TOOLS=YES -DUSE_RADOS_RECOV=YES -DRADOS_URLS=YES -DUSE_GUI_ADMIN_TOOLS=YES
    -DUSE_FSAL_VFS=ON -DENABLE_VFS_POSIX_ACL=ON -DUSE_FSAL_PROXY_V4=ON -DUSE_FSAL_PROXY_V3=OFF
    -DUSE_DBUS=ON -DUSE_9P=ON -DDISTNAME_HAS_GIT_DATA=OFF -DUSE_MAN_PAGE=YES
    -D_MSPAC_SUPPORT=YES -DSANITIZE_ADDRESS=NO
    # not in the root
    -DUSE_FSAL_CEPH=NO -DUSE_FSAL_RGW=NO -DUSE_FSAL_GLUSTER=NO -DUSE_RADOS_RECOV=NO -DRADOS_URLS=NO
    -DUSE_ADMIN_TOOLS=NO -DUSE_GUI_ADMIN_TOOLS=NO -DUSE_MAN_PAGE=NO
  )
  trixie_chroot --bind "$cache" -- cmake -S "$src65/src" -B "$cfg65" -Wno-dev "${opts[@]}" \
    >"$cache/ganesha-configure-6.5.log" 2>&1 \
    || { echo "setup: configuring Ganesha 6.5's tree in the root failed, see $cache/ganesha-configure-6.5.log" >&2; exit 1; }
fi
trixie_no_mounts
# What Debian 13's binaries were built with (docs/ganesha-6.5.md, sections
# 14-15): these on, and RDMA, VSOCK, monitoring, SAL debugging, LTTng off.
for want in _USE_9P _USE_NFS3 _USE_NLM _USE_RQUOTA USE_NFSACL3 _HAVE_GSSAPI USE_DBUS _MSPAC_SUPPORT \
            USE_NFSIDMAP USE_CAPS USE_BLKID ENABLE_VFS_POSIX_ACL RPCBIND; do
  grep -q "^#define $want" "$cfg65/include/config.h" || { echo "setup: $want missing from the 6.5 config.h; Debian 13's ABI would not match" >&2; exit 1; }
done
for unwanted in _USE_NFS_RDMA _USE_9P_RDMA USE_MONITORING DEBUG_SAL USE_LTTNG; do
  ! grep -q "^#define $unwanted" "$cfg65/include/config.h" || { echo "setup: $unwanted defined in the 6.5 config.h; Debian 13's binaries are built without it" >&2; exit 1; }
done
# VSOCK is no config.h define but -DRPC_VSOCK on Ganesha's command line
# (which FindGanesha does not pass): off, as in Debian's build
grep -q '^USE_VSOCK:BOOL=OFF$' "$cfg65/CMakeCache.txt" \
  || { echo "setup: the 6.5 tree was configured with USE_VSOCK; Debian 13's binaries are built without it" >&2; exit 1; }
grep -q '^#define GANESHA_VERSION "6.5"' "$cfg65/include/config.h" \
  || { echo "setup: $cfg65/include/config.h is not for Ganesha 6.5" >&2; exit 1; }
echo "setup: ready for 6.5 in $((SECONDS - t65_started))s (root $trixie_root, Ganesha tree $src65, config.h $cfg65/include/config.h)"
