#!/usr/bin/env bash
# The Ansible role deploy/ansible/roles/dcache, run by the real
# ansible-playbook on its example playbook, against three real ganesha.nfsd
# heads (tests/e2e/roll/heads.sh) that export one shared XFS directory
# (Export_Id 2, DCACHE, direct/direct) beside another DCACHE export with
# the same settings (Export_Id 3, never to be touched), reached through the
# community.docker.nsenter connection (each head's namespace holder), with
# NFS clients writing and reading through every head all the time:
#   - direct -> dontcache on every head: exit 0, one head after the other;
#     each file changed in those two values only, byte for byte elsewhere;
#     each head's log has the plugin's "updated" line and its counters show
#     dontcache serving the clients, direct no more;
#   - the same again: changed=0 on every head, no file written, no reload;
#   - IO_Cache_Write = fast: dcache-check refuses it on h1 before anything
#     is written; the play stops: h1's file byte for byte as it was, no
#     reload, still serving dontcache; h2 and h3 not contacted;
#   - a value dcache-check accepts but the head refuses on reload: h1's file
#     holds an unreloaded restart-only VFS change (fsid_type), which
#     dcache-check cannot see against what the head started with; the role
#     writes the valid change, UpdateExport is refused, the previous file
#     comes back byte for byte and is reloaded, the play stops, h1 keeps
#     dontcache, h2 and h3 are not contacted;
#   - at the end every file written through one head reads back intact
#     through another; no client error all along.
#
#   cluster_test.sh ANSIBLE_DIR DCACHE_STATS DCACHE_BENCH
#     (as root; DCACHE_PLUGIN and DCACHE_CHECK set, ctest sets both;
#      DCACHE_GANESHA=6.5: the heads and dcache-check are 6.5's)
#
# Exit 77: a kernel feature the heads need is missing (namespaces, XFS, loop).
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# = 3 ] || { echo "usage: ${0##*/} ANSIBLE_DIR DCACHE_STATS DCACHE_BENCH" >&2; exit 2; }
ansible_dir=$(realpath "$1")
stats_tool=$(realpath "$2")
bench=$(realpath "$3")
# shellcheck source=../roll/heads.sh
. "$here/../roll/heads.sh"
# shellcheck source=common.sh
. "$here/common.sh"
command -v ansible-playbook >/dev/null || { echo "no ansible-playbook (run ci/setup.sh)" >&2; exit 2; }

on_exit() {
  local rc=$?
  trap - EXIT
  set +e
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || cluster_show_logs cluster 8
  heads_cleanup || { [ "$rc" != 0 ] || rc=5; }
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

heads_setup
st=$heads_state
work=$st/work
mnt=$st/mnt
mkdir -p "$work" "$mnt/shared" "$mnt/other"

# dcache-check as the role runs it on a head: the build's (production: the
# package's /usr/bin/dcache-check). Another release's links that release's
# libganesha_nfsd: it runs chrooted in the release's root, which sees the
# state dir (the heads' files and the role's candidates beside them) at the
# same path.
if [ -n "$release_root" ]; then
  check_bin=$release_build_dir/fsal_dcache/adapter/dcache-check
  [ -x "$check_bin" ] || { echo "no $check_bin (ci/build.sh --ganesha $release)" >&2; exit 2; }
  mkdir -p "$st/bin"
  cp "$check_bin" "$st/bin/dcache-check.$release"
  printf '#!/bin/sh\nexec chroot %q %q "$@"\n' "$release_root" "$st/bin/dcache-check.$release" >"$st/bin/dcache-check"
  chmod 755 "$st/bin/dcache-check"
  check=$st/bin/dcache-check
else
  check=$(realpath "${DCACHE_CHECK:?DCACHE_CHECK must name dcache-check}")
fi

head_config() {  # N
  heads_conf_core "$1"
  cat <<EOF
# ---- exports: the operator's notes and layout stay as they are ----
EXPORT {
  Export_Id = 2; Path = "$mnt/shared"; Pseudo = /shared;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4;
  Transports = TCP; SecType = sys;
  FSAL {
    Name = DCACHE;    # page-cache policy of /shared
    IO_Cache_Read = direct;
    IO_Cache_Write = direct;
    FSAL { Name = VFS; }
  }
}
EXPORT { Export_Id = 3; Path = "$mnt/other"; Pseudo = /other; Access_Type = RW;
  Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;
  FSAL { Name = DCACHE; IO_Cache_Read = direct; IO_Cache_Write = direct; FSAL { Name = VFS; } } }
EOF
}
for n in 1 2 3; do head_start "$n" "$(head_config "$n")"; done
for n in 1 2 3; do head_wait "$n" /shared; done
pass "three heads (Ganesha $release) serve /shared from one XFS ($heads_loopdev)"

sums() { sha256sum "$(conf 1)" "$(conf 2)" "$(conf 3)"; }
log_sizes() { local n; for n in 1 2 3; do wc -c <"$(log "$n")"; done; }
since() {  # N OFFSET: the log of hN written after byte OFFSET, into $work/since
  tail -c +"$(($2 + 1))" "$(log "$1")" >"$work/since"
}
# Ganesha's line for each DBus UpdateExport ("Adding export from file: ..."
# on 4.3, "Updating ..." from 6.5 on)
update_asked='(Adding|Updating) export from file: '
reloads() {  # N [FILE]: how many exports hN was asked to update (in its log, or FILE)
  grep -cE "$update_asked" "${2:-$(log "$1")}" || true
}
backups() {  # N: whether the role left a backup of hN's file (ganesha.conf.PID.DATE~)
  compgen -G "$st/h$1/ganesha.conf.*~" >/dev/null
}
# --------------------------------------------------------------- ansible --
# The inventory an operator writes, but each head reached through nsenter
# into its namespaces, and its files where heads.sh keeps them.
{
  echo "ganesha_heads:"
  echo "  hosts:"
  for n in 1 2 3; do
    holder=$(sed -n 's/^holder=//p' "$st/h$n/env")
    bus=$(sed -n 's/^bus=//p' "$st/h$n/env")
    echo "    h$n:"
    echo "      ansible_nsenter_pid: $holder"
    echo "      dcache_ganesha_conf: $(conf "$n")"
    echo "      dcache_ganesha_log: $(log "$n")"
    echo "      dcache_dbus_address: \"$bus\""
  done
  cat <<EOF
  vars:
    ansible_connection: community.docker.nsenter
    ansible_python_interpreter: /usr/bin/python3
    # the module is the build's, in the heads' plugin dir (heads.sh)
    dcache_install_package: false
    dcache_check: $check
    dcache_stats: $stats_tool
EOF
} >"$st/inventory.yml"
# Ansible's own files in the state dir, no ansible.cfg but this one
mkdir -p "$st/ansible/local" "$st/ansible/remote"
cat >"$st/ansible/ansible.cfg" <<EOF
[defaults]
home = $st/ansible
local_tmp = $st/ansible/local
remote_tmp = $st/ansible/remote
nocolor = true
retry_files_enabled = false
EOF
export ANSIBLE_CONFIG=$st/ansible/ansible.cfg
play_rc=0
play() {  # READ WRITE: ansible-playbook of the example playbook, into $work/play.out
  local settings
  settings=$(printf '{"dcache_exports": [{"export_id": 2, "settings": {"IO_Cache_Read": "%s", "IO_Cache_Write": "%s"}}]}' "$1" "$2")
  play_rc=0
  (cd "$work" && ansible-playbook -i "$st/inventory.yml" "$ansible_dir/dcache-settings.yml" -e "$settings") \
    >"$work/play.out" 2>&1 || play_rc=$?
  sed 's/^/  play| /' "$work/play.out" | grep -v '^  play| *$'
}
recap() {  # N: hN's PLAY RECAP line
  grep -E "^h$1 +: ok=" "$work/play.out" || echo "h$1 not in the recap"
}
touched() {  # N: whether the play ran anything on hN
  grep -qE "^(ok|changed|fatal|skipping|failed): \[h$1\]" "$work/play.out"
}


# --------------------------------------------------------------- clients --
# Two clients per head, NFSv3 and NFSv4 (common.sh)
for n in 1 2 3; do clients_start "$n"; done
wait_rounds 1 && pass "6 clients read and write through all heads" || fail "clients do not progress"

# ------------------------------------------------------- roll to dontcache --
for n in 1 2 3; do cp "$(conf "$n")" "$work/h$n.conf.0"; done
mapfile -t off < <(log_sizes)
start=$SECONDS
play dontcache dontcache
[ "$play_rc" = 0 ] && pass "roll to dontcache/dontcache: ansible-playbook exit 0 ($((SECONDS - start)) s)" ||
  fail "roll to dontcache: exit $play_rc"
for n in 1 2 3; do
  sed -e 's/^    IO_Cache_Read = direct;$/    IO_Cache_Read = dontcache;/' \
      -e 's/^    IO_Cache_Write = direct;$/    IO_Cache_Write = dontcache;/' "$work/h$n.conf.0" >"$work/h$n.conf.want"
  cmp -s "$(conf "$n")" "$work/h$n.conf.want" && ! cmp -s "$(conf "$n")" "$work/h$n.conf.0" &&
    pass "h$n: the file changed in export 2's two values only, every other byte as it was" ||
    fail "h$n: file not as expected: $(diff "$work/h$n.conf.0" "$(conf "$n")" | head -n 8)"
  since "$n" "${off[n - 1]}"
  [ "$(grep -c 'DCACHE: export 2 (.*) updated: IO_Cache_Read = dontcache, IO_Cache_Write = dontcache,' "$work/since" || true)" = 1 ] &&
    pass "h$n: one new 'updated: IO_Cache_Read = dontcache, IO_Cache_Write = dontcache' line in its log" ||
    fail "h$n: no new 'updated' line for dontcache/dontcache"
  [ "$(reloads "$n" "$work/since")" = 1 ] && ! grep -q 'DCACHE: export 3 (' "$work/since" &&
    pass "h$n: one export reloaded, export 3 not" || fail "h$n: $(reloads "$n" "$work/since") exports reloaded"
  grep -qE "^ok: \[h$n\] => \{\$" "$work/play.out" && recap "$n" | grep -q 'failed=0' &&
    pass "h$n: the play verified it: $(recap "$n" | tr -s ' ')" || fail "h$n: $(recap "$n")"
  backups "$n" && fail "h$n: a backup file was left: $(echo "$st/h$n"/ganesha.conf.*~)" || true
done
# one head at a time: h2's first task comes after h1's last check, h3's after h2's
first() { grep -nE "^(ok|changed|fatal|skipping): \[h$1\]" "$work/play.out" | head -n 1 | cut -d: -f1; }
last() { grep -nE "^(ok|changed|fatal|skipping): \[h$1\]" "$work/play.out" | tail -n 1 | cut -d: -f1; }
[ "$(last 1)" -lt "$(first 2)" ] && [ "$(last 2)" -lt "$(first 3)" ] &&
  pass "one head at a time: h2 begun after h1 was checked, h3 after h2" || fail "heads not rolled one at a time"
# what the clients meet now: dontcache serves them on every head, direct I/O no more
wait_rounds 1 || fail "clients stalled after the roll"
new=(write_dontcache read_dontcache) old=(write_direct write_split read_direct)
d1=() d2=()
for n in 1 2 3; do d1+=("$(counter "$n" "${new[@]}")/$(counter "$n" "${old[@]}")"); done
wait_rounds 2 || fail "clients stalled after the roll"
for n in 1 2 3; do d2+=("$(counter "$n" "${new[@]}")/$(counter "$n" "${old[@]}")"); done
for n in 1 2 3; do
  [ "${d2[n - 1]%/*}" -gt "${d1[n - 1]%/*}" ] && [ "${d2[n - 1]#*/}" = "${d1[n - 1]#*/}" ] &&
    pass "h$n serves the clients dontcache (${new[*]}: ${d1[n - 1]%/*} -> ${d2[n - 1]%/*}), no direct I/O" ||
    fail "h$n: ${new[*]}/${old[*]} ${d1[n - 1]} -> ${d2[n - 1]}"
done
no_client_errors "roll to dontcache"

# ------------------------------------------------------------ once more --
sums >"$work/sums.1"
for n in 1 2 3; do reloads "$n"; done >"$work/reloads.1"
play dontcache dontcache
[ "$play_rc" = 0 ] && pass "the same roll again: exit 0" || fail "the same roll again: exit $play_rc"
for n in 1 2 3; do
  recap "$n" | grep -qE 'changed=0 +unreachable=0 +failed=0' && pass "h$n: changed=0" || fail "h$n: $(recap "$n")"
done
sums | cmp -s - "$work/sums.1" && pass "no file written" || fail "a file was rewritten"
for n in 1 2 3; do reloads "$n"; done | cmp -s - "$work/reloads.1" && pass "no head reloaded" || fail "a head was reloaded"

# -------------------------------------------- refused by dcache-check --
sums >"$work/sums.2"
mapfile -t off < <(log_sizes)
h1_dc0=$(counter 1 write_dontcache)
play dontcache fast
[ "$play_rc" = 2 ] && pass "IO_Cache_Write = fast: the play fails (exit 2)" || fail "IO_Cache_Write = fast: exit $play_rc"
grep -qF 'not changed: the candidate failed validation' "$work/play.out" &&
  grep -qE 'DCACHE: export 2 \(.*\): IO_Cache_Write = \\?"fast\\?" is not valid' "$work/play.out" &&
  pass "h1: dcache-check refused the candidate, with the plugin's own line" || fail "no dcache-check refusal in the output"
grep -qF "h1: $(conf 1) not changed" "$work/play.out" && grep -qF 'the roll stops here' "$work/play.out" &&
  pass "the play stops at h1, saying its file is not changed" || fail "no stop message for h1"
for n in 1 2 3; do
  [ "$(sums | sed -n "${n}p")" = "$(sed -n "${n}p" "$work/sums.2")" ] &&
    pass "h$n: file byte for byte as before" || fail "h$n: file changed by the refused roll"
  since "$n" "${off[n - 1]}"
  ! grep -qE "DCACHE: export [23] \\(|$update_asked" "$work/since" &&
    pass "h$n: not reloaded" || fail "h$n was reloaded"
done
! touched 2 && ! touched 3 && pass "h2 and h3 not contacted" || fail "the play went on to h2 or h3"
wait_rounds 2 || fail "clients stalled after the refused roll"
h1_dc1=$(counter 1 write_dontcache)
[ "$h1_dc1" -gt "$h1_dc0" ] && pass "h1 still serves dontcache WRITEs ($h1_dc0 -> $h1_dc1)" ||
  fail "h1: no dontcache WRITE after the refusal ($h1_dc0 -> $h1_dc1)"
no_client_errors "roll refused by dcache-check"

# ------------------------- accepted by dcache-check, refused on reload --
# An unreloaded change in h1's file that only a restart applies: fsid_type
# in export 2's VFS block. dcache-check judges the DCACHE block, not what
# the running export started with; VFS refuses the update.
sed -i 's/^    FSAL { Name = VFS; }$/    FSAL { Name = VFS; fsid_type = Device; }/' "$(conf 1)"
grep -q 'fsid_type = Device' "$(conf 1)" || fail "could not put fsid_type into h1's file"
rc=0
"$st/via" h1 "$check" "$(conf 1)" >"$work/check.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && pass "dcache-check accepts h1's file with its direct/direct-to-be and fsid_type" ||
  fail "dcache-check: exit $rc: $(cat "$work/check.out")"
sums >"$work/sums.3"
cp "$(conf 1)" "$work/h1.conf.3"
mapfile -t off < <(log_sizes)
h1_dc0=$(counter 1 write_dontcache)
play direct direct
[ "$play_rc" = 2 ] && pass "h1 refuses on reload: the play fails (exit 2)" || fail "refused on reload: exit $play_rc"
since 1 "${off[0]}"
grep -q 'Can not change fsid_type without restart' "$work/since" &&
  grep -q 'DCACHE: export 2 (.*): FSAL VFS refused the update (see its message above); update refused, the export keeps its current settings' "$work/since" &&
  pass "h1's log: VFS refused the update, and the plugin's refusal line" || fail "h1's log has no refusal"
[ "$(reloads 1 "$work/since")" = 2 ] &&
  pass "h1 was reloaded twice: the new file, then its previous one" || fail "h1: $(reloads 1 "$work/since") reloads, not 2"
! grep -q 'DCACHE: export 2 (.*) updated:' "$work/since" && pass "h1 took no update" || fail "h1 logged an update"
grep -qF 'export 2 refused the update: DCACHE: export 2' "$work/play.out" &&
  grep -qF "restored from" "$work/play.out" && grep -qF 'the roll stops here' "$work/play.out" &&
  pass "the play names h1's refusal, the restore and the stop" || fail "no refusal/restore message"
cmp -s "$(conf 1)" "$work/h1.conf.3" && pass "h1: the previous file back, byte for byte" ||
  fail "h1: file differs after the restore: $(diff "$work/h1.conf.3" "$(conf 1)" | head -n 6)"
backups 1 && fail "h1: the backup file was left" || pass "h1: no backup left"
for n in 2 3; do
  [ "$(sums | sed -n "${n}p")" = "$(sed -n "${n}p" "$work/sums.3")" ] && pass "h$n: file as before" ||
    fail "h$n: file changed"
  since "$n" "${off[n - 1]}"
  ! grep -qE "DCACHE: export [23] \\(|$update_asked" "$work/since" &&
    pass "h$n: not reloaded" || fail "h$n was reloaded"
done
! touched 2 && ! touched 3 && pass "h2 and h3 not contacted" || fail "the play went on to h2 or h3"
wait_rounds 2 || fail "clients stalled after the refused reload"
h1_dc1=$(counter 1 write_dontcache)
[ "$h1_dc1" -gt "$h1_dc0" ] && pass "h1 still serves dontcache WRITEs ($h1_dc0 -> $h1_dc1)" ||
  fail "h1: no dontcache WRITE after the refusal ($h1_dc0 -> $h1_dc1)"
no_client_errors "roll refused on reload"

# ---------------------------------------------------------- data at rest --
read_back_all

echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
