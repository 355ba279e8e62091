#!/usr/bin/env bash
# DCACHE exports kept in RADOS the way cephadm keeps Ganesha's (a common
# object per head set, an object per export, watch_url), rolled head by head,
# against the real processes: one ceph-mon and one ceph-osd (tests/e2e/cluster/
# ceph.sh) in a network namespace on the heads' bridge, three ganesha.nfsd
# heads (tests/e2e/roll/heads.sh) exporting one XFS directory as Export_Id 2
# (DCACHE over VFS), sharing one grace period through rados_cluster, and
# NFSv3/v4 clients writing and reading through every head all along.
#
# The objects (pool nfs, namespace dcache), docs/cluster.md's layout:
#   head-hN          hN's own object, the one it watches (watch_url): one
#                    line, %url of the head set's common object it runs
#   conf-dcache.G    the common object of generation G: %url of each export
#   export-ID.G      one EXPORT block
# and the heads' local ganesha.conf ends in %url "rados://nfs/dcache/head-hN".
# Publishing is docs/cluster.md's command block, sourced from the page as it
# is (dcache_check, dcache_publish, dcache_point).
#
# Checks: the initial generation published and served by each head (one
# watcher on each head object, the grace database listing h1-h3); a roll of
# IO_Cache_Read/IO_Cache_Write direct -> dontcache head by head, each head
# verified (its log's `updated` line, its counters) before the next is
# pointed, the others not reloaded meanwhile; h2 restarted mid-roll comes up
# with its export as its object still says and the cluster's grace period is
# entered and lifted; a malformed value stopped by the validator before
# anything reaches RADOS (every object unchanged, no head reloaded); a missing
# configuration object: the check names it, a running head keeps its export
# on a reload, a restarted head does not start, and putting the object back
# (the mitigation) brings it up; the clients' data read back through another
# head; no client error.
#
#   rados_test.sh DCACHE_CHECK DCACHE_STATS DCACHE_BENCH   (as root; DCACHE_PLUGIN set)
#
# Exit 77: a kernel feature or a package the test needs is missing.
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# = 3 ] || { echo "usage: ${0##*/} DCACHE_CHECK DCACHE_STATS DCACHE_BENCH" >&2; exit 2; }
check_bin=$(realpath "$1")
stats_tool=$(realpath "$2")
bench=$(realpath "$3")
# shellcheck source=../roll/heads.sh
. "$here/../roll/heads.sh"
# shellcheck source=ceph.sh
. "$here/ceph.sh"
# shellcheck source=common.sh
. "$here/common.sh"

t_test=$(date +%s%N)
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
section() { echo "== $* (at $(ms_since "$t_test") ms)"; }

on_exit() {
  local rc=$? n
  trap - EXIT
  set +e
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -n "$heads_state" ]; then
    cluster_show_logs rados 12
    for n in "$heads_state"/ceph/*.log; do
      [ -f "$n" ] || continue
      echo "--- ${n##*/}, last lines:"
      tail -n 5 "$n" | sed 's/^/  | /'
    done
  fi
  heads_cleanup || { [ "$rc" != 0 ] || rc=5; }
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

heads_setup
# Ganesha's RADOS pieces, where the heads' ganesha.nfsd runs (the host or
# the release's root)
for lib in libganesha_rados_urls.so libganesha_rados_recov.so; do
  [ -e "$release_root$release_lib_dir/$lib" ] ||
    heads_skip "no $lib for Ganesha $release (nfs-ganesha-ceph; run $release_setup)"
done
command -v ganesha-rados-grace >/dev/null || heads_skip "no ganesha-rados-grace (nfs-ganesha-rados-grace; run ci/setup.sh)"
command -v ceph-mon >/dev/null || heads_skip "no ceph-mon (run ci/setup.sh)"
st=$heads_state
work=$st/work
mnt=$st/mnt
mkdir -p "$work" "$mnt/shared"

# dcache-check of the heads' release (run in its root for 6.5 and 9.14)
# (check_cmd here; head_check_cmd in a head's namespaces, whose root sees
# the state dir only: a copy there)
check_cmd=("$check_bin") head_check_cmd=("$check_bin")
if [ -n "$release_root" ]; then
  check_bin=$release_build_dir/fsal_dcache/adapter/dcache-check
  check_cmd=(release_chroot --bind "$top" --bind "$st" -- "$check_bin")
  head_check_cmd=(chroot "$release_root" "$st/dcache-check")
fi
[ -x "$check_bin" ] || { echo "no dcache-check at $check_bin" >&2; exit 2; }
[ -z "$release_root" ] || cp "$check_bin" "$st/dcache-check"

# ------------------------------------------------------------------ Ceph --
section "Ceph"
heads_network
ceph_ns="dcache-heads-$$-${st##*.}-ceph"
ip netns add "$ceph_ns"
srv_netns+=("$ceph_ns")
ip -n "$ceph_ns" link set lo up
heads_attach "$ceph_ns" 192.0.2.2
ceph_start "$st/ceph" "$ceph_ns" 192.0.2.2 nfs
pass "Ceph (1 mon, 1 memstore osd, pool nfs) answers in ${ceph_started_ms} ms, daemons' RSS $((ceph_rss_kib / 1024)) MiB"
# the heads' key: the head set's namespace only
ceph_key nfs mon 'allow r' osd 'allow rw pool=nfs namespace=dcache' >/dev/null
ceph_in ganesha-rados-grace --pool nfs --ns dcache add h1 h2 h3
ceph_in ganesha-rados-grace --pool nfs --ns dcache dump >"$work/grace"
[ "$(grep -cE '^h[123][[:space:]]' "$work/grace")" = 3 ] && pass "grace database (nfs/dcache/grace) lists h1 h2 h3" ||
  fail "grace database: $(cat "$work/grace")"

# ------------------------------------------- docs/cluster.md's commands --
# The page's block, as it is; rados and dcache-check reach this test's Ceph
# and the heads' release through two small wrappers.
sed -n '/^<!-- dcache-rados: /,/^```$/p' "$top/docs/cluster.md" | sed '1,2d;$d' >"$work/publish.sh"
grep -q '^dcache_point()' "$work/publish.sh" || { echo "docs/cluster.md has no dcache-rados block" >&2; exit 2; }
rados() { ceph_in rados "$@"; }
dcache-check() { "${check_cmd[@]}" "$@"; }
# shellcheck disable=SC2034  # read by the page's commands
DCACHE_POOL=nfs DCACHE_NS=dcache
# shellcheck source=/dev/null
. "$work/publish.sh"

# stage GEN READ WRITE: a directory gen-GEN holding export-2.GEN (export 2
# with these settings), conf-dcache.GEN and head-h1..3 naming it
stage() {
  local g=$1 d=$work/gen-$1 h
  mkdir -p "$d"
  shared_export "$2" "$3" >"$d/export-2.$g"
  printf '%%url "rados://nfs/dcache/export-2.%s"\n' "$g" >"$d/conf-dcache.$g"
  for h in h1 h2 h3; do printf '%%url "rados://nfs/dcache/conf-dcache.%s"\n' "$g" >"$d/head-$h"; done
}

head_config() {  # N: the head's local ganesha.conf (cephadm's bootstrap one)
  local core
  core=$(heads_conf_core "$1")
  grep -q '^  Graceless = true;$' <<<"$core" || { echo "heads_conf_core: no 'Graceless = true;' line to replace" >&2; return 1; }
  core=${core/  Graceless = true;/  # one grace period for the heads, in RADOS (rados_cluster)
  Graceless = false;
  RecoveryBackend = rados_cluster;
  Lease_Lifetime = 5;
  Grace_Period = 5;}
  cat <<EOF
$core
RADOS_KV {
  ceph_conf = "$ceph_conf"; userid = nfs;
  pool = nfs; namespace = dcache; nodeid = h$1;
}
RADOS_URLS {
  ceph_conf = "$ceph_conf"; userid = nfs;
  watch_url = "rados://nfs/dcache/head-h$1";
}
%url "rados://nfs/dcache/head-h$1"
EOF
}
for n in 1 2 3; do head_config "$n" >"$work/h$n.conf"; done

# --------------------------------------------------- first generation --
section "generation 1: direct/direct, published before the heads start"
stage 1 direct direct
cd "$work/gen-1"
dcache_check "$work"/h{1,2,3}.conf >"$work/out" 2>&1 && pass "generation 1 checked (export-2.1 alone, each head's config inlined)" ||
  { cat "$work/out"; fail "generation 1 refused by the check"; }
dcache_publish export-2.1 conf-dcache.1 head-h1 head-h2 head-h3
cd "$work"

t0=$(date +%s%N)
for n in 1 2 3; do head_start "$n" "$(cat "$work/h$n.conf")"; done
for n in 1 2 3; do head_wait "$n" /shared; done
pass "three heads serve /shared from their objects in RADOS in $(ms_since "$t0") ms"
for n in 1 2 3; do
  grep -q 'DCACHE: export 2 (.*) created over VFS: IO_Cache_Read = direct, IO_Cache_Write = direct,' "$(log "$n")" &&
    pass "h$n created export 2 direct/direct from export-2.1" || fail "h$n: no 'created over VFS' direct/direct line"
  [ "$(rados -p nfs -N dcache listwatchers "head-h$n" | grep -c watcher=)" = 1 ] &&
    pass "head-h$n: one watcher" || fail "head-h$n: watchers: $(rados -p nfs -N dcache listwatchers "head-h$n")"
done

# --------------------------------------------------------------- clients --
# Two clients per head (common.sh)
graces() { clients_sum 3; }  # rounds refused by a grace period (NFS4ERR_GRACE), retried
# shellcheck disable=SC2086  # the mode's counter names, as words
mode_counter() { counter "$1" ${!2}; }  # N MODE: the sum of export 2's counters of MODE on hN
# each mode's counters, as "NAME..." (counter's arguments)
# shellcheck disable=SC2034  # read as ${!mode}
direct="write_direct write_split read_direct" dontcache="write_dontcache read_dontcache"
other() { if [ "$1" = direct ]; then echo dontcache; else echo direct; fi; }
# serves N:MODE...: each hN's counters of MODE (direct or dontcache) grow
# over a round each of its clients begins after the first sample, and those
# of the other mode do not (the round under way at the call may have begun
# before a change: it is waited out first). The heads are sampled together.
serves() {
  local arg n mode heads=() a=() c=() b=() d=() i more
  for arg; do heads+=("h${arg%%:*}"); done
  wait_rounds 1 "${heads[@]}" || { fail "the clients of ${heads[*]} stalled"; return 0; }
  for arg; do
    n=${arg%%:*} mode=${arg#*:}
    a[n]=$(mode_counter "$n" "$mode") c[n]=$(mode_counter "$n" "$(other "$mode")")
  done
  for i in 1 2; do  # a round may have done all its I/O before the sample
    wait_rounds 1 "${heads[@]}" || { fail "the clients of ${heads[*]} stalled"; return 0; }
    more=0
    for arg; do
      n=${arg%%:*} mode=${arg#*:}
      b[n]=$(mode_counter "$n" "$mode") d[n]=$(mode_counter "$n" "$(other "$mode")")
      [ "${b[n]}" != "${a[n]}" ] || more=1
    done
    [ "$more" = 1 ] || break
  done
  for arg; do
    n=${arg%%:*} mode=${arg#*:}
    [ "${b[n]}" -gt "${a[n]}" ] && [ "${d[n]}" = "${c[n]}" ] &&
      pass "h$n serves $mode (dcache-stats: $mode counters ${a[n]} -> ${b[n]}, $(other "$mode")'s stay ${c[n]})" ||
      fail "h$n does not serve $mode only ($mode counters ${a[n]} -> ${b[n]}, $(other "$mode")'s ${c[n]} -> ${d[n]})"
  done
}

# NFSv4 opens wait until the heads' first grace period is over
for n in 1 2 3; do
  for ((i = 0; i < 150; i++)); do grep -q 'NFS Server Now NOT IN GRACE' "$(log "$n")" && break; sleep 0.2; done
done
ceph_in ganesha-rados-grace --pool nfs --ns dcache dump >"$work/grace"
! grep -qE '^h[123][[:space:]]+[NE]' "$work/grace" && pass "grace lifted on every head after the start (no N/E flag in the grace db)" ||
  fail "grace after the start: $(cat "$work/grace")"
section "clients on every head"
for n in 1 2 3; do clients_start "$n"; done
serves 1:direct 2:direct 3:direct

# ---------------------------------------------------- the roll, gen 2 --
offsets() { local n; for n in 1 2 3; do wc -c <"$(log "$n")"; done; }
since() {  # N OFFSET: hN's log after byte OFFSET, in a file (its path printed;
  # grep -q on a pipe would end the writer early, a failure under pipefail)
  tail -c +"$(($2 + 1))" "$(log "$1")" >"$work/since.h$1"
  echo "$work/since.h$1"
}
reloaded() {  # N OFFSET: hN's log shows a configuration reload since OFFSET
  grep -qiE 'DCACHE: export 2 \(|reread_exports|Adding export from file' "$(since "$1" "$2")"
}
# point N READ WRITE: docs/cluster.md's step for one head, then the check
# that must pass before the next head is touched (a failure returns 1, which
# ends the test there: the next head is not pointed)
point() {
  local n=$1 r=$2 w=$3 t0 off=() m deadline
  mapfile -t off < <(offsets)
  t0=$(date +%s%N)
  dcache_point "h$n" >"$work/out" 2>&1 || { cat "$work/out"; fail "dcache_point h$n failed"; return 1; }
  deadline=$((SECONDS + 30))
  until grep -qE 'DCACHE: export 2 \(.*\) (updated|update refused)' "$(since "$n" "${off[n - 1]}")"; do
    [ "$SECONDS" -lt "$deadline" ] || { fail "h$n: no DCACHE line within 30 s of dcache_point"; return 1; }
    sleep 0.05
  done
  grep -q "DCACHE: export 2 (.*) updated: IO_Cache_Read = $r, IO_Cache_Write = $w," "$(since "$n" "${off[n - 1]}")" &&
    pass "h$n: 'updated: IO_Cache_Read = $r, IO_Cache_Write = $w' $(ms_since "$t0") ms after dcache_point" ||
    { fail "h$n: $(grep 'DCACHE: export 2' "$(since "$n" "${off[n - 1]}")")"; return 1; }
  for m in 1 2 3; do
    [ "$m" != "$n" ] || continue
    ! reloaded "$m" "${off[m - 1]}" && pass "h$m not reloaded by h$n's step" || fail "h$m reloaded by h$n's step"
  done
}

section "generation 2: direct -> dontcache, rolled h1, h2, h3"
stage 2 dontcache dontcache
cd "$work/gen-2"
rados -p nfs -N dcache get conf-dcache.1 - | sed 's|/export-2\.1"|/export-2.2"|' | cmp -s - conf-dcache.2 &&
  pass "conf-dcache.2 is conf-dcache.1 with export 2's line moved to export-2.2" || fail "conf-dcache.2 differs otherwise"
dcache_check "$work"/h{1,2,3}.conf >"$work/out" 2>&1 && pass "generation 2 checked before anything is written" ||
  { cat "$work/out"; fail "generation 2 refused by the check"; }
dcache_publish export-2.2 conf-dcache.2
mapfile -t off0 < <(offsets)
sleep 0.5
for n in 1 2 3; do ! reloaded "$n" "${off0[n - 1]}" || fail "h$n reloaded when generation 2 was written"; done
pass "generation 2 written under new names: no head reloaded"

point 1 dontcache dontcache
serves 1:dontcache 2:direct 3:direct

# ------------------------------------------------ h2 restarted mid-roll --
section "h2 restarted mid-roll (h1 runs generation 2, h2 and h3 generation 1)"
# head_stop N / head_restart N: hN's ganesha.nfsd stopped by its pid (SIGTERM)
# and started again in the same namespaces, on the same local ganesha.conf
head_forget() {  # N: hN's ganesha.nfsd has exited and been waited for
  local pid=${heads_ganeshas[$(($1 - 1))]} e keep=()
  for e in "${srv_ganeshas[@]}"; do [ "${e%% *}" = "$pid" ] || keep+=("$e"); done
  srv_ganeshas=("${keep[@]}")
  heads_ganeshas[$1 - 1]=""
}
head_stop() {
  srv_stop_pid "${heads_ganeshas[$(($1 - 1))]}" 20 "h$1"
  [ "$srv_stopped_rc" -le 128 ] || fail "h$1's ganesha.nfsd died by signal $((srv_stopped_rc - 128)) while stopping"
  head_forget "$1"
}
head_restart() {
  local n=$1 dir=$st/h$1 holder
  holder=$(sed -n 's/^holder=//p' "$dir/env")
  srv_in_ns=(nsenter --target "$holder" --mount --net --wd="$PWD" --)
  srv_bus="unix:path=$dir/dbus/system_bus_socket"
  srv_ganesha_start "$dir/ganesha.conf" "$dir/ganesha.log" "$dir/ganesha.pid"
  heads_ganeshas[n - 1]=$srv_ganesha
}
wait_log() {  # N OFFSET PATTERN SECONDS: hN's log since OFFSET gains PATTERN
  local deadline=$((SECONDS + $4))
  until grep -q "$3" "$(since "$1" "$2")"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

clients_stop 2
g0=$(graces)
mapfile -t off < <(offsets)
head_stop 2
t0=$(date +%s%N)
head_restart 2
head_wait 2 /shared && pass "h2 restarted mid-roll serves /shared again $(ms_since "$t0") ms after its start" ||
  fail "h2 does not serve after its restart"
grep -q 'DCACHE: export 2 (.*) created over VFS: IO_Cache_Read = direct, IO_Cache_Write = direct,' "$(since 2 "${off[1]}")" &&
  pass "h2 came up with export 2 as head-h2 still says (generation 1: direct/direct)" ||
  fail "h2 after its restart: $(grep 'DCACHE: export 2' "$(since 2 "${off[1]}")" || echo 'no export 2')"
# its start opened a grace period for the whole head set (rados_cluster):
# every head enforces it, then lifts it
for n in 1 2 3; do
  wait_log "$n" "${off[n - 1]}" 'NFS Server Now IN GRACE' 20 && wait_log "$n" "${off[n - 1]}" 'NFS Server Now NOT IN GRACE' 30 &&
    pass "h$n: in grace after h2's start, then out of it" || fail "h$n: no grace period entered and lifted after h2's start"
done
ceph_in ganesha-rados-grace --pool nfs --ns dcache dump >"$work/grace"
! grep -qE '^h[123][[:space:]]+[NE]' "$work/grace" && pass "grace db: lifted ($(head -n1 "$work/grace"))" ||
  fail "grace db after h2's restart: $(cat "$work/grace")"
[ "$(rados -p nfs -N dcache listwatchers head-h2 | grep -c watcher=)" = 1 ] &&
  pass "head-h2: watched again by the restarted h2 (one watcher)" || fail "head-h2's watchers: $(rados -p nfs -N dcache listwatchers head-h2)"
clients_start 2
serves 2:direct
no_client_errors "h2's restart and the grace period"
echo "   (NFSv4 OPENs answered NFS4ERR_GRACE meanwhile, waited out and retried: $(($(graces) - g0)))"

# -------------------------------------------------------- rest of the roll --
section "the roll goes on: h2, h3"
point 2 dontcache dontcache
serves 2:dontcache 3:direct
point 3 dontcache dontcache
serves 1:dontcache 2:dontcache 3:dontcache
no_client_errors "the roll to generation 2"

# ------------------------------------------ a malformed value, gen 3 --
section "generation 3: IO_Cache_Write = fast"
# objects: the head set's objects and their bytes (the grace database and
# the recovery objects change on their own)
objects() {
  local o
  rados -p nfs -N dcache ls | grep -E '^(head|conf|export)-' | sort | while read -r o; do
    echo "$o $(rados -p nfs -N dcache get "$o" - | sha256sum | cut -d' ' -f1)"
  done
}
stage 3 dontcache fast
cd "$work/gen-3"
objects >"$work/objects.before"
mapfile -t off < <(offsets)
rc=0
dcache_check "$work"/h{1,2,3}.conf >"$work/out" 2>&1 || rc=$?
sed 's/^/  check| /' "$work/out"
[ "$rc" != 0 ] && grep -q '^(stdin):[0-9]*: DCACHE: export 2 (.*): IO_Cache_Write = "fast" is not valid; allowed: .*; export refused$' "$work/out" &&
  grep -q '^dcache_check: export-2.3 refused$' "$work/out" &&
  pass "IO_Cache_Write = fast: dcache_check stops at export-2.3 with the plugin's own refusal (exit $rc)" ||
  fail "malformed value not stopped by dcache_check (exit $rc)"
# a publisher stops there (docs/cluster.md: dcache_check && dcache_publish ...)
if [ "$rc" = 0 ]; then dcache_publish export-2.3 conf-dcache.3; fi
sleep 0.5
objects | cmp -s - "$work/objects.before" && pass "RADOS unchanged: $(wc -l <"$work/objects.before") objects, same names and bytes" ||
  fail "RADOS objects changed: $(objects | diff "$work/objects.before" - | tr '\n' ' ')"
for n in 1 2 3; do
  ! reloaded "$n" "${off[n - 1]}" && pass "h$n not reloaded by the refused generation" || fail "h$n reloaded"
done
cd "$work"

# ----------------------------------- a missing configuration object --
section "a missing configuration object: conf-dcache.2 removed"
# The common object of the generation every head runs disappears (an
# operator's rados rm, a cleanup that went too far).
rados -p nfs -N dcache rm conf-dcache.2
mkdir -p "$work/empty" && cd "$work/empty"
rc=0
dcache_check "$work/h1.conf" >"$work/out" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q 'dcache_inline: cannot read %url "rados://nfs/dcache/conf-dcache.2"' "$work/out" &&
  pass "dcache_check names the missing conf-dcache.2 (exit $rc)" || fail "dcache_check with conf-dcache.2 missing: exit $rc: $(cat "$work/out")"
cd "$work"
# the validator itself, on the head's own configuration (its %url fetched
# through Ganesha's RADOS URL backend, as ganesha.nfsd reads it): exit 2
rc=0
"$st/via" h1 "${head_check_cmd[@]}" "$(conf 1)" >"$work/out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'conf-dcache.2.*open error' "$work/out" &&
  pass "dcache-check of h1's ganesha.conf: exit 2, 'new url (...conf-dcache.2) open error': ganesha.nfsd would not start" ||
  fail "dcache-check with conf-dcache.2 missing: exit $rc: $(cat "$work/out")"
# a running head told to reread keeps what it serves
mapfile -t off < <(offsets)
rados -p nfs -N dcache notify head-h1 reload >/dev/null
wait_log 1 "${off[0]}" 'conf-dcache.2' 10 && pass "h1, notified: its reread fails on conf-dcache.2 ($(grep -m1 -o 'new url.*' "$(since 1 "${off[0]}")" || true))" ||
  fail "h1 logged nothing about the missing object: $(grep -v DEBUG "$(since 1 "${off[0]}")" | tail -n 3)"
if grep -q 'DCACHE: export 2 (' "$(since 1 "${off[0]}")"; then
  fail "h1 changed export 2 on a reread that failed: $(grep 'DCACHE: export 2 (' "$(since 1 "${off[0]}")")"
fi
serves 1:dontcache
# a head that restarts now does not start
clients_stop 3
head_stop 3
mapfile -t off < <(offsets)
head_restart 3
pid3=${heads_ganeshas[2]}
for ((i = 0; i < 300; i++)); do kill -0 "$pid3" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid3" 2>/dev/null; then
  fail "h3 restarted with conf-dcache.2 missing still runs: $(grep -v DEBUG "$(since 3 "${off[2]}")" | tail -n 3)"
else
  rc=0; wait "$pid3" || rc=$?
  pass "h3 restarted with conf-dcache.2 missing exits (status $rc): $(grep -m1 -oE '(new url|Fatal|Error while parsing).*' "$(since 3 "${off[2]}")" || true)"
fi
head_forget 3
# the mitigation: the object put back from the staged copy of what was
# published (the generation's directory), then the head starts
cd "$work/gen-2"
dcache_publish conf-dcache.2
cd "$work"
mapfile -t off < <(offsets)
head_restart 3
head_wait 3 /shared || fail "h3 does not serve after conf-dcache.2 was put back"
grep -q 'DCACHE: export 2 (.*) created over VFS: IO_Cache_Read = dontcache, IO_Cache_Write = dontcache,' "$(since 3 "${off[2]}")" &&
  pass "conf-dcache.2 put back from gen-2/: h3 starts with export 2 dontcache/dontcache" ||
  fail "h3 after conf-dcache.2 was put back: $(grep -v DEBUG "$(since 3 "${off[2]}")" | tail -n 3)"
for n in 1 2 3; do wait_log "$n" "${off[n - 1]}" 'NFS Server Now NOT IN GRACE' 30 || fail "h$n: grace not lifted after h3's start"; done
clients_start 3
serves 3:dontcache
no_client_errors "the missing object and h3's restarts"

# ---------------------------------------------------------- data at rest --
section "data at rest"
read_back_all
echo "Ceph: up in ${ceph_started_ms} ms, RSS $((ceph_rss_kib / 1024)) MiB at start, $(($(ceph_rss) / 1024)) MiB now; test $(ms_since "$t_test") ms"
echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
