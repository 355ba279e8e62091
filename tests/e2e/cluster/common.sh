# What the cluster tests share, sourced after ../roll/heads.sh (heads_setup
# run, $st the heads' state directory, $work and $mnt set): the tally of
# checks, each head's files, the clients that write and read through every
# head all along (tests/e2e/roll/client.sh), their counters, and the data
# read back at the end through another head than the one that wrote it.
# shellcheck shell=bash
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
# shellcheck disable=SC2154  # st, work, mnt, here, bench, stats_tool: the test's

passes=0 failures=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
conf() { echo "$st/h$1/ganesha.conf"; }
log() { echo "$st/h$1/ganesha.log"; }

# cluster_show_logs NAME LINES: on a failure, the heads' last log lines and
# the clients' errors (and each log in $DCACHE_E2E_ARTIFACTS as NAME-hN.log)
cluster_show_logs() {
  local n
  [ -n "$heads_state" ] || return 0
  for n in 1 2 3; do
    [ -f "$heads_state/h$n/ganesha.log" ] || continue
    echo "--- h$n ganesha.log, last lines:"
    grep -v ' :DEBUG :' "$heads_state/h$n/ganesha.log" | tail -n "$2" | sed 's/^/  | /'
    [ -z "${DCACHE_E2E_ARTIFACTS:-}" ] ||
      { mkdir -p "$DCACHE_E2E_ARTIFACTS" && cp "$heads_state/h$n/ganesha.log" "$DCACHE_E2E_ARTIFACTS/$1-h$n.log"; }
  done
  cat "$heads_state"/work/c/*/*.err 2>/dev/null | tail -n 20 | sed 's/^/  client| /'
}

# shared_export READ WRITE: the EXPORT block every head serves, Export_Id 2,
# /shared, DCACHE over VFS with these IO_Cache_Read and IO_Cache_Write
shared_export() {
  cat <<EOF
EXPORT {
  Export_Id = 2; Path = "$mnt/shared"; Pseudo = /shared;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4;
  Transports = TCP; SecType = sys;
  FSAL {
    Name = DCACHE;
    IO_Cache_Read = $1;
    IO_Cache_Write = $2;
    FSAL { Name = VFS; }
  }
}
EOF
}

# counter N NAME...: the sum of export 2's counters NAME... on hN
counter() {
  "$st/via" "h$1" "$stats_tool" --json --export 2 >"$work/stats.json"
  shift
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])).get("2", {}); print(sum(d.get(k, 0) for k in sys.argv[2:]))' \
    "$work/stats.json" "$@"
}

# ---- clients ----------------------------------------------------------------
# Two per head (NFSv3 and NFSv4), each rewriting its own files and reading
# every byte back; a head's clients have a directory of their own
# ($work/c/hN), so they can be stopped while that head restarts.
clients=()
declare -A client_pid=()
clients_start() {  # N
  local n=$1 holder v name
  holder=$(sed -n 's/^holder=//p' "$st/h$n/env")
  mkdir -p "$work/c/h$n"
  rm -f "$work/c/h$n/stop"
  for v in 3 4; do
    name=h$n-v$v-$((${#clients[@]} + 1))
    nsenter --target "$holder" --net -- setpriv --pdeathsig KILL -- \
      "$here/../roll/client.sh" "$bench" nfs://127.0.0.1/shared "$v" "$name" "$work/c/h$n" &
    client_pid[$name]=$!
    heads_extra+=("$!")
    clients+=("$name")
  done
}
clients_stop() {  # N: until each of hN's clients finished its round and left its manifest
  local c
  touch "$work/c/h$1/stop"
  for c in "${clients[@]}"; do
    [ "${c%%-*}" = "h$1" ] && [ -n "${client_pid[$c]:-}" ] || continue
    wait "${client_pid[$c]}" || fail "client $c exited with status $?"
    client_pid[$c]=""
  done
}
cdir() { echo "$work/c/${1%%-*}"; }
# client_count C FIELD: a field of client C's tally (1 rounds verified,
# 2 errors, 3 rounds refused by a grace period and retried)
client_count() {
  local f
  f=$(cdir "$1")/$1.count
  [ -f "$f" ] && cut -d' ' -f"$2" "$f" | sed 's/^$/0/' || echo 0
}
verified() { client_count "$1" 1; }
clients_sum() {  # FIELD: the clients' total
  local c total=0
  for c in "${clients[@]}"; do total=$((total + $(client_count "$c" "$1"))); done
  echo "$total"
}
wait_rounds() {  # K [hN...]: until every running client (of these heads) verified K more rounds (60 s)
  local c i k=$1 deadline=$((SECONDS + 60)) run=() target=()
  shift
  for c in "${clients[@]}"; do
    [ -n "${client_pid[$c]}" ] && { [ $# = 0 ] || [[ " $* " == *" ${c%%-*} "* ]]; } || continue
    run+=("$c") target+=($(($(verified "$c") + k)))
  done
  for i in "${!run[@]}"; do
    until [ "$(verified "${run[$i]}")" -ge "${target[$i]}" ]; do
      [ "$SECONDS" -lt "$deadline" ] || { echo "client ${run[$i]} made no progress" >&2; return 1; }
      sleep 0.2
    done
  done
}
no_client_errors() {  # WHEN
  local e
  e=$(clients_sum 2)
  [ "$e" = 0 ] && pass "$1: 0 client errors" || { fail "$1: $e client errors"; cat "$work"/c/*/*.err >&2; }
}

# read_back_all: every client stopped, each file it wrote read back through
# the next head (h1's through h2, ..., h3's through h1) and verified
read_back_all() {
  local c n reader file size seed files=0 bad=0
  for n in 1 2 3; do clients_stop "$n"; done
  no_client_errors "all steps"
  for c in "${clients[@]}"; do
    [ "$(verified "$c")" -gt 0 ] || fail "client $c verified nothing"
    n=${c#h} n=${n%%-*} reader=$((n % 3 + 1))
    while read -r file size seed; do
      files=$((files + 1))
      if [ "$(stat -c %s "$mnt/shared/$file.0")" != "$size" ] ||
         ! "$st/via" "h$reader" "$bench" url=nfs://127.0.0.1/shared rw=read layout=0 verify=1 size="$size" bs=32768 \
           seed="$seed" filename="$file" --json "$work/readback.json" >/dev/null 2>"$work/readback.err"; then
        bad=$((bad + 1))
        echo "$file (seed $seed) does not read back through h$reader: $(cat "$work/readback.err")"
      fi
    done <"$(cdir "$c")/$c.manifest"
  done
  [ "$files" -gt 0 ] && [ "$bad" = 0 ] && pass "$files files written through one head read back intact through another" ||
    fail "$bad of $files files do not read back through another head"
}
