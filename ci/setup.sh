#!/usr/bin/env bash
# One idempotent setup for a fresh Debian 12 machine: installs every package
# the build, tests, benchmark and demo need, fetches the nfs-ganesha 4.3
# source tree from Debian's source package (checksum verified against the
# .dsc) into the ignored cache .cache/, and generates a config.h matching
# Debian's build of ganesha.nfsd.
#
# Safe to run again: each step checks whether it is already done.
#
#   ci/setup.sh [--ganesha 6.5|9.14]     (or DCACHE_GANESHA=..., ci/release.sh)
#
# With a release other than the host's 4.3 it also makes that release's
# Debian root (.cache/<suite>/root: trixie for 6.5, trixie-backports for
# 9.14) holding its suite's toolchain and nfs-ganesha, fetches its source
# package (checksums verified against the .dsc, or against the archive's
# signed Sources index where the archive no longer serves the .dsc) into
# .cache/nfs-ganesha-X and configures that tree inside the root, with the
# options of Debian's debian/rules, into .cache/ganesha-build-X.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache="$top/.cache"
ganesha_version=4.3
ganesha_debian_version=4.3-2
mkdir -p "$cache"
# shellcheck source=release.sh
. "$top/ci/release.sh"
release_parse_ganesha "$@" || { echo "usage: ci/setup.sh [--ganesha ${release_all[*]// /|}]" >&2; exit 2; }
[ ${#release_rest[@]} -eq 0 ] || { echo "usage: ci/setup.sh [--ganesha ${release_all[*]// /|}]" >&2; exit 2; }

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
  libgtest-dev libgmock-dev libnfs-dev libnfs-utils xfsprogs dbus iproute2 nlohmann-json3-dev
  util-linux procps gnuplot-nox python3
  # the end-to-end tests and the Python tools' tests (pytest), Python lint
  python3-pytest flake8
  # the threads of a server that will not stop, in the test's log (tools/dcache_testbed/procs.py)
  gdb
  # the Ansible role deploy/ansible and its cluster test: Debian's ansible, not
  # ansible-core alone, for the community.docker collection's nsenter
  # connection (heads in namespaces, no sshd); it brings python3-yaml
  ansible
  # the cluster tests: CTDB and what its event scripts use (10.interface
  # checks links with ethtool and blocks a released address with iptables)
  ctdb ethtool iptables
  # lint: shell scripts, formatting, and clang's lock-annotation check
  shellcheck clang clang-format
  # the Debian package and its man pages; the package test installs it in
  # a new root of the suite (tests/e2e/package/, dcache_testbed.freshroot)
  debhelper lintian go-md2man man-db debootstrap
  # metrics: dcache-exporter's client library; promtool for the alert rules
  # (and Prometheus itself, which the end-to-end tests run privately)
  python3-prometheus-client prometheus
  # the cluster tests' RADOS (tests/e2e/cluster/): one monitor and one OSD
  # (no mgr), the rados/ceph commands, Ganesha's %url rados://, watch_url
  # and rados_cluster recovery backend, and its grace database tool
  ceph-mon ceph-osd ceph-common nfs-ganesha-ceph nfs-ganesha-rados-grace
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

[ -n "$release_root" ] || exit 0
# --- another release: its Debian root, its source tree and config.h ---------
started=$SECONDS
rel_dir=$release_state
root_packages=(
  # build tools
  cmake g++ gcc pkgconf make bison flex
  # the plugin's own dependencies, and what Ganesha's headers need
  liburing-dev liburcu-dev libdbus-1-dev libacl1-dev libkrb5-dev libblkid-dev
  libcap-dev uuid-dev libnfsidmap-dev libwbclient-dev xfslibs-dev systemtap-sdt-dev
  # the server the end-to-end harness runs from the root
  dbus rpcbind
  # dcache-exporter as installed by the package (6.5: Ganesha has no metrics)
  python3-prometheus-client
  # the Debian package (ci/package.sh --ganesha X) and its man pages
  build-essential dpkg-dev debhelper lintian go-md2man man-db
)
# Ganesha and the ntirpc it was built with, from the release's suite, and
# its RADOS pieces (%url rados://, watch_url, rados_cluster: the cluster
# tests' heads run the root's ganesha.nfsd against the host's Ceph)
ganesha_packages=(nfs-ganesha nfs-ganesha-vfs nfs-ganesha-nullfs nfs-ganesha-ceph libntirpc-dev)
mkdir -p "$rel_dir"
release_no_mounts

# 1. debootstrap (bookworm's debootstrap knows trixie: scripts/trixie -> sid,
# and debian-archive-keyring 2023.3+deb12u2 has trixie's release keys)
if [ ! -f "$rel_dir/debootstrap.done" ] || [ ! -x "$release_root/usr/bin/env" ]; then
  need_root "no Debian root for Ganesha $release yet"
  archive=$(release_archive_uri)
  echo "setup: debootstrap $release_suite into $release_root (archive $archive)"
  [ ! -e "$release_root" ] || rm -rf --one-file-system "$release_root"
  rm -f "$rel_dir/debootstrap.done" "$rel_dir/packages.done"
  mkdir -p "$release_root"
  # its own mounts (/proc, /sys in the root) stay in a private namespace
  unshare --mount --propagation private -- \
    debootstrap --variant=minbase "$release_suite" "$release_root" "$archive" >"$rel_dir/debootstrap.log" 2>&1 \
    || { echo "setup: debootstrap failed, see $rel_dir/debootstrap.log" >&2; tail -n 5 "$rel_dir/debootstrap.log" >&2; exit 1; }
  echo "$archive" >"$rel_dir/debootstrap.done"
fi

# 2. the root's apt: its suite (and the one Ganesha comes from), with
# deb-src, from the same archive; no services started by maintainer
# scripts; the host's view of stale Release dates (a snapshot archive's
# Valid-Until has passed)
archive=$(cat "$rel_dir/debootstrap.done")
want_sources="Types: deb deb-src
URIs: $archive
Suites: $release_suite${release_install_suite:+ $release_install_suite}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
if [ "$(cat "$release_root/etc/apt/sources.list.d/debian.sources" 2>/dev/null)" != "$want_sources" ]; then
  need_root "the Debian root's apt sources need writing"
  printf '%s\n' "$want_sources" >"$release_root/etc/apt/sources.list.d/debian.sources"
  rm -f "$release_root/etc/apt/sources.list" "$rel_dir/packages.done"
fi
if [ ! -f "$release_root/usr/sbin/policy-rc.d" ]; then
  need_root "the Debian root needs a policy-rc.d"
  printf '#!/bin/sh\n# made by ci/setup.sh: nothing starts services in this root\nexit 101\n' >"$release_root/usr/sbin/policy-rc.d"
  chmod 755 "$release_root/usr/sbin/policy-rc.d"
fi
# Ganesha's VFS finds its filesystems in /etc/mtab, which a minbase root
# lacks (systemd's tmpfiles make it on a booted system)
if [ "$(readlink "$release_root/etc/mtab" || true)" != ../proc/self/mounts ]; then
  need_root "the Debian root needs /etc/mtab"
  ln -sfn ../proc/self/mounts "$release_root/etc/mtab"
fi
want_conf="$(apt-config dump | grep -E '^Acquire::Check-(Valid-Until|Date) ' || true)
APT::Install-Recommends \"false\";"
if [ "$(cat "$release_root/etc/apt/apt.conf.d/99dcache" 2>/dev/null)" != "${want_conf#$'\n'}" ]; then
  need_root "the Debian root's apt settings need writing"
  printf '%s\n' "${want_conf#$'\n'}" >"$release_root/etc/apt/apt.conf.d/99dcache"
fi

# 3. packages (again when the list changes): the suite's, then Ganesha at
# exactly the release's version (from the backports suite for 9.14)
want_done="${root_packages[*]} ${ganesha_packages[*]} $release_debian_version"
if [ "$(cat "$rel_dir/packages.done" 2>/dev/null)" != "$want_done" ] || [ ! -x "$release_root/usr/bin/ganesha.nfsd" ]; then
  need_root "packages missing in the Debian root"
  echo "setup: installing into the Debian root of Ganesha $release: ${root_packages[*]} ${ganesha_packages[*]}"
  # shellcheck disable=SC2016  # expanded by the inner shell
  # (the suite's packages: one word-split argument)
  release_chroot -- sh -c 'suite=$1 base=$2; shift 2
    apt-get update -qq
    apt-get install -y -qq $base
    apt-get install -y -qq ${suite:+-t "$suite"} "$@"' \
    sh "$release_install_suite" "${root_packages[*]}" "${ganesha_packages[@]}" \
    >"$rel_dir/packages.log" 2>&1 \
    || { echo "setup: apt-get in the Debian root failed, see $rel_dir/packages.log" >&2; tail -n 5 "$rel_dir/packages.log" >&2; exit 1; }
  release_chroot -- apt-get clean
  echo "$want_done" >"$rel_dir/packages.done"
fi
release_no_mounts
# shellcheck disable=SC2016  # a dpkg-query format
have=$(dpkg-query --admindir="$release_root/var/lib/dpkg" -W -f='${Version}' nfs-ganesha)
[ "$have" = "$release_debian_version" ] || { echo "setup: the Debian root has nfs-ganesha $have, not $release_debian_version" >&2; exit 1; }

# 4. the source package, as for 4.3: sha256 of the tarballs, the orig
# tarball unpacked, then Debian's patches as Debian builds where the archive
# has them (src/CMakeLists.txt, a few .c files, FSAL_RGW's header: nothing
# an FSAL over VFS includes).
src_rel="$cache/nfs-ganesha-$release"
if [ ! -f "$src_rel/.verified" ]; then
  dl="$cache/download-$release"
  mkdir -p "$dl"
  tarball="$dl/nfs-ganesha_$release.orig.tar.gz"
  dsc="$dl/nfs-ganesha_$release_debian_version.dsc"
  debtar="$dl/nfs-ganesha_$release_debian_version.debian.tar.xz"
  # apt-get source fails as a whole when the archive no longer serves a
  # part (9.14-1~bpo13+1's .dsc and .debian.tar.xz): what arrived is checked
  # below, against the .dsc where there is one, else against the root's
  # Sources index, which apt verified with the archive's key.
  # shellcheck disable=SC2016  # expanded by the inner shell
  release_chroot --bind "$dl" -- sh -c 'cd "$1" && apt-get source --download-only "nfs-ganesha=$2"' sh "$dl" "$release_debian_version" \
    >"$rel_dir/source.log" 2>&1 || true
  [ -f "$tarball" ] || { echo "setup: could not download nfs-ganesha $release_debian_version source ($tarball), see $rel_dir/source.log" >&2; exit 1; }
  if [ -f "$dsc" ]; then
    checksums=$(awk '/^Checksums-Sha256:/{s=1;next} /^[^ ]/{s=0} s{print $3, $1}' "$dsc")
    checked="its .dsc"
  else
    checksums=$(release_chroot -- apt-cache showsrc nfs-ganesha |
      awk -v v="$release_debian_version" '/^Version:/{ours = ($2 == v)} /^Checksums-Sha256:/{s=1;next} /^[^ ]/{s=0} ours && s{print $3, $1}')
    checked="the archive's Sources index (no .dsc served)"
  fi
  verified=()
  for f in "$tarball" "$debtar"; do
    [ -f "$f" ] || continue
    want=$(awk -v n="${f##*/}" '$1 == n {print $2}' <<<"$checksums")
    have=$(sha256sum "$f" | cut -d' ' -f1)
    if [ -z "$want" ] || [ "$want" != "$have" ]; then
      echo "setup: checksum mismatch for $f: $checked says '$want', file is '$have'" >&2
      exit 1
    fi
    verified+=("${f##*/}")
  done
  echo "setup: nfs-ganesha $release_debian_version source verified against $checked: ${verified[*]}"
  rm -rf "$src_rel" "$cache/ganesha-build-$release"
  tar -xzf "$tarball" -C "$cache"
  [ -d "$src_rel/src" ] || { echo "setup: $tarball did not unpack to $src_rel" >&2; exit 1; }
  if [ -f "$debtar" ]; then
    tar -xJf "$debtar" -C "$src_rel"
    while read -r p _; do
      case $p in ''|'#'*) continue ;; esac
      patch -d "$src_rel" -p1 -s -N <"$src_rel/debian/patches/$p" \
        || { echo "setup: Debian's patch $p does not apply to $src_rel" >&2; exit 1; }
    done <"$src_rel/debian/patches/series"
  fi
  sha256sum "$tarball" | cut -d' ' -f1 >"$src_rel/.verified"
fi

# 5. config.h: Ganesha's tree configured inside the root with
# override_dh_auto_configure's options from the release's debian/rules
# (amd64) and dh_auto_configure's own install paths, then OFF for what needs
# libraries the root does not have (Ceph, RGW, Gluster, RADOS, the Python
# admin tools, man pages; asked for on the command line, Ganesha fails
# rather than switch them off): none of them reaches a header an FSAL
# includes, and none adds a field to a structure the adapter sees.
cfg_rel="$cache/ganesha-build-$release"
opts=(
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc -DCMAKE_INSTALL_LOCALSTATEDIR=/var
  -DCMAKE_INSTALL_RUNSTATEDIR=/run -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu
  -DWITH_PYTHON3=3 -DBUILD_CONFIG=debian -DLIB_INSTALL_DIR="$release_lib_dir"
  -DFSAL_DESTINATION="$release_fsal_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DUSE_FSAL_NULL=YES -DUSE_FSAL_MEM=YES -DUSE_FSAL_XFS=NO -DUSE_FSAL_LUSTRE=NO
  -DUSE_FSAL_GPFS=YES -DUSE_FSAL_KVSFS=NO
  -DUSE_SYSTEM_NTIRPC=YES -DUSE_9P_RDMA=NO -DUSE_LTTNG=NO
  -DUSE_FSAL_VFS=ON -DENABLE_VFS_POSIX_ACL=ON -DUSE_FSAL_PROXY_V4=ON -DUSE_FSAL_PROXY_V3=OFF
  -DUSE_DBUS=ON -DUSE_9P=ON -DDISTNAME_HAS_GIT_DATA=OFF
  -D_MSPAC_SUPPORT=YES -DSANITIZE_ADDRESS=NO
  # not in the root
  -DUSE_FSAL_CEPH=NO -DUSE_FSAL_RGW=NO -DUSE_FSAL_GLUSTER=NO -DUSE_RADOS_RECOV=NO -DRADOS_URLS=NO
  -DUSE_ADMIN_TOOLS=NO -DUSE_GUI_ADMIN_TOOLS=NO -DUSE_MAN_PAGE=NO
)
# What Debian's binaries were built with (docs/ganesha-releases.md): these
# on, and RDMA, VSOCK, SAL debugging, LTTng (and for 6.5 monitoring) off.
wanted=(_USE_9P _USE_NFS3 _USE_NLM _USE_RQUOTA USE_NFSACL3 _HAVE_GSSAPI USE_DBUS _MSPAC_SUPPORT
        USE_NFSIDMAP USE_CAPS USE_BLKID ENABLE_VFS_POSIX_ACL RPCBIND)
unwanted=(_USE_NFS_RDMA _USE_9P_RDMA DEBUG_SAL USE_LTTNG)
# and the release's own (ci/releases.tsv): 9.14's debian/rules adds
# -DUSE_MONITORING=YES, 6.5's build has none; QoS stays off (it would change
# struct gsh_export, which the adapter reads)
for define in $release_config_h; do
  case $define in
    +*) wanted+=("${define#+}"); opts+=("-D${define#+}=YES") ;;
    -*) unwanted+=("${define#-}") ;;
  esac
done
if [ ! -f "$cfg_rel/include/config.h" ]; then
  mkdir -p "$cfg_rel"
  release_chroot --bind "$cache" -- cmake -S "$src_rel/src" -B "$cfg_rel" -Wno-dev "${opts[@]}" \
    >"$cache/ganesha-configure-$release.log" 2>&1 \
    || { echo "setup: configuring Ganesha $release's tree in the root failed, see $cache/ganesha-configure-$release.log" >&2; exit 1; }
fi
release_no_mounts
for want in "${wanted[@]}"; do
  grep -q "^#define $want" "$cfg_rel/include/config.h" || { echo "setup: $want missing from the $release config.h; Debian's ABI would not match" >&2; exit 1; }
done
for unwanted in "${unwanted[@]}"; do
  ! grep -q "^#define $unwanted" "$cfg_rel/include/config.h" || { echo "setup: $unwanted defined in the $release config.h; Debian's binaries are built without it" >&2; exit 1; }
done
# VSOCK is no config.h define but -DRPC_VSOCK on Ganesha's command line
# (which FindGanesha does not pass): off, as in Debian's build
grep -q '^USE_VSOCK:BOOL=OFF$' "$cfg_rel/CMakeCache.txt" \
  || { echo "setup: the $release tree was configured with USE_VSOCK; Debian's binaries are built without it" >&2; exit 1; }
grep -q "^#define GANESHA_VERSION \"$release\"" "$cfg_rel/include/config.h" \
  || { echo "setup: $cfg_rel/include/config.h is not for Ganesha $release" >&2; exit 1; }
echo "setup: ready for $release in $((SECONDS - started))s (root $release_root, Ganesha tree $src_rel, config.h $cfg_rel/include/config.h)"
