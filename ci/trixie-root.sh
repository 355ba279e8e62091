# shellcheck shell=bash
# The Debian 13 (trixie) root that builds the module against, and runs,
# trixie's nfs-ganesha 6.5: sourced by ci/setup.sh, ci/build.sh and
# tests/e2e/with_server.sh after they set $top (the repository).
#
# The root is .cache/trixie/root, made by `ci/setup.sh --ganesha 6.5`
# (debootstrap --variant=minbase, then trixie's toolchain, Ganesha and the
# -dev packages its headers need). Nothing is ever mounted in it on the
# host: every mount a command in the root needs is made in a private mount
# namespace that ends with the command.

# shellcheck disable=SC2034  # the variables are for the scripts sourcing this
{
trixie_suite=trixie
trixie_root=${top:?}/.cache/trixie/root
# Inside the root (and on the host, for 4.3, the same paths): where
# nfs-ganesha-vfs installs its modules and where libganesha_nfsd.so.6.5 is.
trixie_fsal_dir=/usr/lib/x86_64-linux-gnu/ganesha
trixie_lib_dir=/usr/lib/ganesha
}

# The Debian archive this machine's apt already uses: the URIs of the deb
# entry whose Suites has the host's plain release (not -security or
# -updates) in /etc/apt/sources.list.d/debian.sources, else the first such
# `deb` line of /etc/apt/sources.list.
trixie_archive_uri() {
  local codename uri="" f=/etc/apt/sources.list.d/debian.sources
  # shellcheck disable=SC1091  # the host's, not ours
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || { echo "trixie-root: no VERSION_CODENAME in /etc/os-release" >&2; return 1; }
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
  [ -n "$uri" ] || { echo "trixie-root: no '$codename' deb entry in the apt sources to take the archive from" >&2; return 1; }
  echo "${uri%/}"
}

# trixie_chroot [--bind DIR]... [--] COMMAND [ARGS...]
# Runs COMMAND inside the root, with a clean environment (PATH, HOME, LANG,
# DEBIAN_FRONTEND; pass more with `env`), in private mount and pid
# namespaces: /proc, /dev and each DIR (at the same absolute path, made in
# the root if missing) are mounted there only, and COMMAND and anything it
# leaves running die with the namespace. Ctrl-C (or SIGTERM to the process
# group) stops COMMAND; SIGKILL to unshare kills the whole namespace.
trixie_chroot() {
  local binds=()
  while [ $# -gt 0 ]; do
    case $1 in
      --bind) binds+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ -x "$trixie_root/usr/bin/env" ] || { echo "trixie-root: no root at $trixie_root (run ci/setup.sh --ganesha 6.5)" >&2; return 1; }
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
    trixie-chroot "$trixie_root" "${#binds[@]}" "${binds[@]}" "$@"
}

# Fails when anything is still mounted below the root on the host.
trixie_no_mounts() {
  local left
  left=$(findmnt -rn -o TARGET | grep -F "$trixie_root" || true)
  [ -z "$left" ] || { echo "trixie-root: still mounted on the host: $left" >&2; return 1; }
}
