# shellcheck shell=bash
# The Ganesha releases DCACHE is built for and tested against, and how each
# is reached, from the one table of them (ci/releases.tsv); sourced by ci/
# and tools/ after they set $top (the repository).
#
# A release other than the host's is built and run in a Debian root of its
# suite (debootstrap --variant=minbase, made by `ci/setup.sh --ganesha X`),
# with that suite's toolchain, nfs-ganesha and libntirpc-dev. Nothing is ever
# mounted in a root on the host: every mount a command in it needs is made in
# a private mount namespace that ends with the command (release_chroot).
#
#   release_all             the releases, in the table's order
#   release_select X        sets the release_* variables below for X (the
#                           host's when X is empty), or fails naming the
#                           releases
#   release_parse_ganesha ARGS...
#                           the --ganesha X / --ganesha=X option, else
#                           $DCACHE_GANESHA, else the host's: release_select's
#                           it and leaves the other arguments in release_rest
#   release_chroot [--bind DIR]... [--] CMD...
#   release_no_mounts       fails when anything is mounted below the root
#   release_archive_uri     the Debian archive this machine's apt uses
# Releases Debian's archive has but this machine cannot build for: 5.9
# (bookworm-backports) and 15.2 (sid) publish no source package there
# (docs/ganesha-releases.md).

: "${top:?ci/release.sh needs \$top, the repository}"
release_table=$top/ci/releases.tsv
mapfile -t release_all < <(awk -F'\t' '!/^#/ && $1 != "release" && NF { print $1 }' "$release_table")

# shellcheck disable=SC2034  # the variables are for the scripts sourcing this
release_select() {
  local row field
  local -a cols
  # the host's release is the one that runs in no root
  release=${1:-$(awk -F'\t' '!/^#/ && $1 != "release" && $7 == "-" { print $1; exit }' "$release_table")}
  row=$(awk -F'\t' -v r="$release" '!/^#/ && $1 == r' "$release_table")
  if [ -z "$row" ]; then
    echo "release: Ganesha '$release': DCACHE builds for ${release_all[*]}" >&2
    return 2
  fi
  IFS=$'\t' read -r -a cols <<<"$row"
  for field in "${!cols[@]}"; do [ "${cols[$field]}" != - ] || cols[field]=""; done
  release_debian_version=${cols[1]} release_fsal_api=${cols[2]} release_ntirpc_major=${cols[3]}
  release_suite=${cols[4]} release_install_suite=${cols[5]} release_root_name=${cols[6]}
  release_deb_version_suffix=${cols[7]} release_config_h=${cols[8]}
  # Lines a server's NFS_CORE_PARAM needs on this release (6.5 and later
  # refuse to start when prctl(PR_SET_IO_FLUSHER) fails, as it does without
  # CAP_SYS_RESOURCE), one per line.
  release_core_param=${cols[9]:+${cols[9]//|/;$'\n'};}
  # Why the release's VFS refuses to export a tmpfs ("" where it does not).
  release_tmpfs_refused=""
  [ "${cols[10]}" = yes ] || release_tmpfs_refused="Ganesha $release does not export tmpfs (FSAL/localfs.c skips tmpfs mounts)"
  # Which end-to-end tests CI runs against it (ci/test.sh): all, or releases.
  release_e2e=${cols[11]}
  # where nfs-ganesha-vfs puts its modules and where libganesha_nfsd.so.X is,
  # on the host and in every root alike
  release_fsal_dir=/usr/lib/x86_64-linux-gnu/ganesha
  release_lib_dir=/usr/lib/ganesha
  release_root=${release_root_name:+${top:?}/.cache/$release_root_name/root}
  release_state=${release_root_name:+$top/.cache/$release_root_name}
  release_build_dir=$top/build${release_root_name:+-$release}
  # The module this checkout builds for the release.
  release_plugin=$release_build_dir/fsal_dcache/adapter/libfsaldcache.so
  # The setup command that makes the release's root and source tree.
  release_setup="ci/setup.sh${release_root:+ --ganesha $release}"
}

release_parse_ganesha() {
  local want=${DCACHE_GANESHA:-}
  release_rest=()
  while [ $# -gt 0 ]; do
    case $1 in
      --ganesha)
        [ $# -ge 2 ] || { echo "release: --ganesha needs a release (${release_all[*]})" >&2; return 2; }
        want=$2; shift 2 ;;
      --ganesha=*) want=${1#--ganesha=}; shift ;;
      *) release_rest+=("$1"); shift ;;
    esac
  done
  release_select "$want"
}

# The Debian archive this machine's apt already uses: the URIs of the deb
# entry whose Suites has the host's plain release (not -security or
# -updates) in /etc/apt/sources.list.d/debian.sources, else the first such
# `deb` line of /etc/apt/sources.list.
release_archive_uri() {
  local codename uri="" f=/etc/apt/sources.list.d/debian.sources
  # shellcheck disable=SC1091  # the host's, not ours
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || { echo "release: no VERSION_CODENAME in /etc/os-release" >&2; return 1; }
  if [ -f "$f" ]; then
    uri=$(awk -v c="$codename" '
      function flush() { if (!done && deb && hit && u != "") { print u; done = 1 } u = ""; deb = 0; hit = 0 }
      /^[[:space:]]*$/ { flush(); next }
      /^Types:/ { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
      /^URIs:/ { u = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == c) hit = 1 }
      END { flush() }' "$f")
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk -v c="$codename" '
      $1 == "deb" { i = 2; if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
                    if ($(i + 1) == c) { print $i; exit } }' /etc/apt/sources.list)
  fi
  [ -n "$uri" ] || { echo "release: no '$codename' deb entry in the apt sources to take the archive from" >&2; return 1; }
  echo "${uri%/}"
}

# release_chroot [--bind DIR]... [--] COMMAND [ARGS...]
# Runs COMMAND inside the release's root, with a clean environment (PATH,
# HOME, LANG, DEBIAN_FRONTEND; pass more with `env`), in private mount and
# pid namespaces: /proc, /dev and each DIR (at the same absolute path, made
# in the root if missing) are mounted there only, and COMMAND and anything it
# leaves running die with the namespace. Ctrl-C (or SIGTERM to the process
# group) stops COMMAND; SIGKILL to unshare kills the whole namespace.
release_chroot() {
  local binds=()
  while [ $# -gt 0 ]; do
    case $1 in
      --bind) binds+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ -n "$release_root" ] || { echo "release: Ganesha $release runs on the host, in no root" >&2; return 1; }
  [ -x "$release_root/usr/bin/env" ] || { echo "release: no root at $release_root (run $release_setup)" >&2; return 1; }
  # shellcheck disable=SC2016  # expanded by the inner shell
  unshare --mount --propagation private --pid --fork --kill-child -- /bin/bash -euc '
    root=$1 n=$2
    shift 2
    while [ "$n" -gt 0 ]; do
      mkdir -p "$root$1"
      mount --rbind "$1" "$root$1"
      shift; n=$((n - 1))
    done
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    # This shell is the init of the namespace, which gets no signal it has no
    # handler for: it passes INT, TERM and HUP on to COMMAND as TERM.
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@" <&0 &
    child=$!
    trap "kill -TERM $child 2>/dev/null || true" INT TERM HUP
    while :; do
      rc=0
      wait "$child" || rc=$?
      kill -0 "$child" 2>/dev/null || exit "$rc"
    done' \
    release-chroot "$release_root" "${#binds[@]}" "${binds[@]}" "$@"
}

# Fails when anything is still mounted below the root on the host.
release_no_mounts() {
  local left
  [ -n "$release_root" ] || return 0
  left=$(findmnt -rn -o TARGET | grep -F "$release_root" || true)
  [ -z "$left" ] || { echo "release: still mounted on the host: $left" >&2; return 1; }
}
