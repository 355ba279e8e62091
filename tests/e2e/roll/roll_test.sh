#!/usr/bin/env bash
# tools/dcache-roll against three real ganesha.nfsd heads that export one
# shared XFS directory (Export_Id 2, DCACHE), with NFS clients writing and
# reading through every head all the time:
#   - direct -> dontcache (DBus UpdateExport) -> direct (SIGHUP): every head
#     reports the new IO_Cache_Read/IO_Cache_Write, its counters show the new
#     mode serving the clients, no client error, the data verified;
#   - --dry-run, a misspelt setting and a roll to what already runs change
#     nothing they should not;
#   - IO_Cache_Write = fast: h1 refuses, the roll stops there (exit 1), h1's
#     config file is restored byte for byte and it keeps serving direct, h2
#     and h3 are not touched (same bytes, no reload in their logs).
#
#   roll_test.sh DCACHE_ROLL DCACHE_STATS DCACHE_BENCH   (as root; DCACHE_PLUGIN set)
#
# Exit 77: a kernel feature the heads need is missing (namespaces, XFS, loop).
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# = 3 ] || { echo "usage: ${0##*/} DCACHE_ROLL DCACHE_STATS DCACHE_BENCH" >&2; exit 2; }
roll_tool=$(realpath "$1")
stats_tool=$(realpath "$2")
bench=$(realpath "$3")
# shellcheck source=heads.sh
. "$here/heads.sh"

passes=0 failures=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

on_exit() {
  local rc=$? n
  trap - EXIT
  set +e
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -n "$heads_state" ]; then
    for n in 1 2 3; do
      [ -f "$heads_state/h$n/ganesha.log" ] || continue
      echo "--- h$n ganesha.log, last lines:"
      grep -v ' :DEBUG :' "$heads_state/h$n/ganesha.log" | tail -n 8 | sed 's/^/  | /'
      [ -z "${DCACHE_E2E_ARTIFACTS:-}" ] ||
        { mkdir -p "$DCACHE_E2E_ARTIFACTS" && cp "$heads_state/h$n/ganesha.log" "$DCACHE_E2E_ARTIFACTS/roll-h$n.log"; }
    done
    cat "$heads_state"/work/*.err 2>/dev/null | tail -n 20 | sed 's/^/  client| /'
  fi
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
mkdir -p "$work" "$mnt/shared"

head_config() {  # N
  heads_conf_core "$1"
  cat <<EOF
EXPORT {
  Export_Id = 2; Path = "$mnt/shared"; Pseudo = /shared;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4;
  Transports = TCP; SecType = sys;
  FSAL {
    Name = DCACHE;
    IO_Cache_Read = direct;
    IO_Cache_Write = direct;
    FSAL { Name = VFS; }
  }
}
EOF
}
for n in 1 2 3; do head_start "$n" "$(head_config "$n")"; done
for n in 1 2 3; do head_wait "$n" /shared; done
pass "three heads serve /shared from one XFS ($heads_loopdev)"

conf() { echo "$st/h$1/ganesha.conf"; }
log() { echo "$st/h$1/ganesha.log"; }
sums() { sha256sum "$(conf 1)" "$(conf 2)" "$(conf 3)"; }
log_sizes() { local n; for n in 1 2 3; do wc -c <"$(log "$n")"; done; }
since() {  # N OFFSET: the log of hN written after byte OFFSET, into $work/since
  tail -c +"$(($2 + 1))" "$(log "$1")" >"$work/since"
}
dcache_lines() { grep -c 'DCACHE: export 2 (' "$(log "$1")" || true; }
roll() {
  "$roll_tool" --via "$st/via {head}" --config "$st/{head}/ganesha.conf" \
    --log "$st/{head}/ganesha.log" --pid-file "$st/{head}/ganesha.pid" --export-id 2 "$@" h1 h2 h3
}
counter() {  # N NAME...: sum of export 2's counters on hN
  "$st/via" "h$1" "$stats_tool" --json --export 2 >"$work/stats.json"
  shift
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])).get("2", {}); print(sum(d.get(k, 0) for k in sys.argv[2:]))' \
    "$work/stats.json" "$@"
}

# --------------------------------------------------------------- clients --
# Two clients per head, NFSv3 and NFSv4, each rewriting its own 4 files.
clients=()
for n in 1 2 3; do
  holder=$(sed -n 's/^holder=//p' "$st/h$n/env")
  for v in 3 4; do
    name=h$n-v$v
    nsenter --target "$holder" --net -- setpriv --pdeathsig KILL -- \
      "$here/client.sh" "$bench" nfs://127.0.0.1/shared "$v" "$name" "$work" &
    heads_extra+=("$!")
    clients+=("$name")
  done
done
verified() { local c=$1; [ -f "$work/$c.count" ] && cut -d' ' -f1 "$work/$c.count" || echo 0; }
errors() {  # total client errors so far
  local c total=0
  for c in "${clients[@]}"; do
    [ -f "$work/$c.count" ] && total=$((total + $(cut -d' ' -f2 "$work/$c.count")))
  done
  echo "$total"
}
wait_rounds() {  # K: until every client has verified K more rounds (60 s)
  local c i deadline=$((SECONDS + 60)) target=()
  for c in "${clients[@]}"; do target+=($(($(verified "$c") + $1))); done
  for i in "${!clients[@]}"; do
    until [ "$(verified "${clients[$i]}")" -ge "${target[$i]}" ]; do
      [ "$SECONDS" -lt "$deadline" ] || { echo "client ${clients[$i]} made no progress" >&2; return 1; }
      sleep 0.2
    done
  done
}
no_client_errors() {  # WHEN
  local e
  e=$(errors)
  [ "$e" = 0 ] && pass "$1: 0 client errors" || { fail "$1: $e client errors"; cat "$work"/*.err >&2; }
}
wait_rounds 2 && pass "6 clients read and write through all heads" || fail "clients do not progress"

for n in 1 2 3; do
  grep -q 'DCACHE: export 2 (.*) created over VFS: IO_Cache_Read = direct, IO_Cache_Write = direct,' "$(log "$n")" &&
    pass "h$n started with direct/direct" || fail "h$n: no 'created over VFS' line with direct/direct"
done

# ---------------------------------------------------- nothing to change --
sums >"$work/sums.0"
for n in 1 2 3; do dcache_lines "$n"; done >"$work/lines.0"
rc=0
roll --set IO_Cache_Wrte=direct >"$work/out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'IO_Cache_Wrte: not a DCACHE setting' "$work/out" &&
  pass "misspelt setting: usage error (exit 2) naming it" || fail "misspelt setting: exit $rc: $(cat "$work/out")"
rc=0
roll --dry-run --set IO_Cache_Read=dontcache --set IO_Cache_Write=dontcache >"$work/out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ "$(grep -c '^+ *IO_Cache_Write = dontcache;' "$work/out")" = 3 ] &&
  [ "$(grep -c '^-.*IO_Cache_Write = direct;' "$work/out")" = 3 ] &&
  pass "--dry-run shows the change for each of the 3 heads" || fail "--dry-run: exit $rc: $(cat "$work/out")"
sums | cmp -s - "$work/sums.0" && pass "usage error and --dry-run leave every config file as it was" ||
  fail "a config file changed without a roll"
for n in 1 2 3; do dcache_lines "$n"; done | cmp -s - "$work/lines.0" &&
  pass "usage error and --dry-run reload no head" || fail "a head reloaded without a roll"

# ------------------------------------------------------------ good rolls --
# roll_to READ WRITE [ARGS...]: roll, then every check of a successful step
roll_to() {
  local r=$1 w=$2 n before=() rc=0 new old d1=() d2=()
  shift 2
  for n in 1 2 3; do before+=("$(grep -c "updated: IO_Cache_Read = $r, IO_Cache_Write = $w," "$(log "$n")" || true)"); done
  wait_rounds 1 || fail "clients stalled before the roll to $r/$w"
  roll --set IO_Cache_Read="$r" --set IO_Cache_Write="$w" "$@" >"$work/out" 2>&1 || rc=$?
  sed 's/^/  roll| /' "$work/out"
  [ "$rc" = 0 ] && pass "roll to $r/$w${*:+ ($*)}: exit 0" || fail "roll to $r/$w: exit $rc"
  for n in 1 2 3; do
    grep -qE "^h$n +updated +IO_Cache_Read = $r, IO_Cache_Write = $w\$" "$work/out" &&
      pass "h$n: table says updated, running $r/$w" || fail "h$n: no 'updated $r/$w' row"
    grep -q "IO_Cache_Read = $r;" "$(conf "$n")" && grep -q "IO_Cache_Write = $w;" "$(conf "$n")" &&
      pass "h$n: config file has $r/$w" || fail "h$n: config file lacks $r/$w"
    [ "$(grep -c "updated: IO_Cache_Read = $r, IO_Cache_Write = $w," "$(log "$n")" || true)" = $((before[n - 1] + 1)) ] &&
      pass "h$n: its log has one new 'updated: IO_Cache_Read = $r, IO_Cache_Write = $w' line" ||
      fail "h$n: no new 'updated' line for $r/$w in its log"
  done
  grep -q '^dcache-roll: h1: updated.*' "$work/out" && [ "$(grep -n 'h1: updated' "$work/out" | cut -d: -f1)" -lt \
    "$(grep -n 'h2: setting' "$work/out" | cut -d: -f1)" ] && pass "h2 started only after h1 was verified" ||
    fail "heads not rolled one at a time"
  # what the clients meet now: the new mode serves them on every head
  wait_rounds 2 || fail "clients stalled after the roll to $r/$w"
  if [ "$w" = dontcache ]; then new=(write_dontcache read_dontcache) old=(write_direct write_split read_direct)
  else new=(write_direct write_split read_direct) old=(write_dontcache); fi
  for n in 1 2 3; do d1+=("$(counter "$n" "${new[@]}")/$(counter "$n" "${old[@]}")"); done
  wait_rounds 2 || fail "clients stalled after the roll to $r/$w"
  for n in 1 2 3; do d2+=("$(counter "$n" "${new[@]}")/$(counter "$n" "${old[@]}")"); done
  for n in 1 2 3; do
    [ "${d2[n - 1]%/*}" -gt "${d1[n - 1]%/*}" ] && pass "h$n serves the clients $r/$w (${new[*]}: ${d1[n - 1]%/*} -> ${d2[n - 1]%/*})" ||
      fail "h$n: ${new[*]} did not grow (${d1[n - 1]} -> ${d2[n - 1]})"
    if [ "$w" = dontcache ]; then
      [ "${d2[n - 1]#*/}" = "${d1[n - 1]#*/}" ] && pass "h$n: no direct I/O any more" ||
        fail "h$n: ${old[*]} still grow (${d1[n - 1]#*/} -> ${d2[n - 1]#*/})"
    fi
  done
  no_client_errors "roll to $r/$w"
}
roll_to dontcache dontcache
roll_to direct direct --reload sighup

sums >"$work/sums.1"
rc=0
roll --set IO_Cache_Read=direct --set IO_Cache_Write=direct >"$work/out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ "$(grep -cE '^h[123] +unchanged +IO_Cache_Read = direct, IO_Cache_Write = direct$' "$work/out")" = 3 ] &&
  pass "roll to what already runs: exit 0, 3 heads unchanged" || fail "roll to the same: exit $rc: $(cat "$work/out")"
sums | cmp -s - "$work/sums.1" && pass "roll to the same: config files untouched" || fail "roll to the same rewrote a file"

# ------------------------------------------------------------- bad value --
sums >"$work/sums.2"
mapfile -t off < <(log_sizes)
wait_rounds 1 || fail "clients stalled before the bad roll"
h1_direct0=$(counter 1 write_direct write_split)
rc=0
roll --set IO_Cache_Read=dontcache --set IO_Cache_Write=fast >"$work/out" 2>&1 || rc=$?
sed 's/^/  roll| /' "$work/out"
[ "$rc" = 1 ] && pass "IO_Cache_Write = fast: the roll stops (exit 1)" || fail "bad value: exit $rc"
grep -q '^dcache-roll: h1 refused: DCACHE: export 2 (.*): IO_Cache_Write = "fast" is not valid; allowed: .*update refused' "$work/out" &&
  pass "names h1 and prints its own refusal line" || fail "no 'h1 refused' with h1's refusal line"
grep -qE '^h1 +refused +IO_Cache_Read = direct, IO_Cache_Write = direct \(kept\)$' "$work/out" &&
  grep -qE '^h2 +not reached +-$' "$work/out" && grep -qE '^h3 +not reached +-$' "$work/out" &&
  pass "table: h1 refused (keeps direct/direct), h2 and h3 not reached" || fail "table wrong"
for n in 1 2 3; do
  [ "$(sums | sed -n "${n}p")" = "$(sed -n "${n}p" "$work/sums.2")" ] &&
    pass "h$n: config file bytes as before the roll" || fail "h$n: config file differs after the refused roll"
done
since 1 "${off[0]}"
grep -q 'DCACHE: export 2 (.*): IO_Cache_Write = "fast" is not valid' "$work/since" &&
  pass "h1's log: the refusal, after the roll started" || fail "h1's log has no refusal since the roll started"
! grep -q 'DCACHE: export 2 (.*) updated:' "$work/since" &&
  pass "h1's log: no update taken" || fail "h1 logged an update during the refused roll"
for n in 2 3; do
  since "$n" "${off[n - 1]}"
  ! grep -qE 'DCACHE: export 2 \(|Adding export from file|Reread' "$work/since" &&
    pass "h$n's log: no reload during the refused roll" || fail "h$n was reloaded"
done
wait_rounds 2 || fail "clients stalled after the bad roll"
h1_direct1=$(counter 1 write_direct write_split)
[ "$h1_direct1" -gt "$h1_direct0" ] && pass "h1 still serves direct WRITEs ($h1_direct0 -> $h1_direct1)" ||
  fail "h1: no direct WRITE after the refusal ($h1_direct0 -> $h1_direct1)"
no_client_errors "refused roll"

# ---------------------------------------------------------- data at rest --
touch "$work/stop"
for c in "${clients[@]}"; do
  for ((i = 0; i < 600; i++)); do [ -e "$work/$c.manifest" ] && break; sleep 0.1; done
done
for pid in "${heads_extra[@]}"; do wait "$pid" || fail "a client exited with status $?"; done
heads_extra=()
no_client_errors "all steps"
# each file read back through another head than the one that wrote it
files=0 bad=0
for c in "${clients[@]}"; do
  [ "$(verified "$c")" -gt 0 ] || fail "client $c verified nothing"
  [ -s "$work/$c.manifest" ] || fail "client $c left no manifest"
  n=${c#h}; n=${n%%-*}; other=$((n % 3 + 1))
  while read -r file size seed; do
    files=$((files + 1))
    if [ "$(stat -c %s "$mnt/shared/$file.0")" != "$size" ] ||
       ! "$st/via" "h$other" "$bench" url=nfs://127.0.0.1/shared rw=read layout=0 verify=1 size="$size" bs=32768 \
         seed="$seed" filename="$file" --json "$work/readback.json" >/dev/null 2>"$work/readback.err"; then
      bad=$((bad + 1))
      echo "$file (seed $seed) does not read back through h$other: $(cat "$work/readback.err")"
    fi
  done <"$work/$c.manifest"
done
[ "$files" -gt 0 ] && [ "$bad" = 0 ] && pass "$files files written through one head read back intact through another" ||
  fail "$bad of $files files do not read back through another head"

echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
