#!/usr/bin/env bash
# e2e_settings: every kind of malformed DCACHE setting refuses its export —
# at creation and on SIGHUP — with one log line naming the export, the
# setting, the value as written and what is allowed, while a good DCACHE
# export and a VFS export keep serving throughout.  dcache-check, given the
# very configuration the server read, says the same line for every export
# the server refused, and the same settings for every export it serves.
#
#   settings_test.sh          (runs itself through with_server.sh)
#   DCACHE_CHECK              the dcache-check to compare (default: the one
#                             beside DCACHE_PLUGIN in the build tree)
#
# The table below is the test: each row is one export whose FSAL block (or,
# for the misplaced kinds, EXPORT block or nested VFS block; for sub and
# nosub, the nested block itself) holds one mistake, and the patterns one
# line of ganesha.log must match.
# shellcheck disable=SC2015  # `check && pass || fail`: pass always succeeds
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=../../ci/release.sh
. "$top/ci/release.sh"
release_select "${DCACHE_GANESHA:-}" || exit 2

# where | what is written there | patterns (;-separated) the refusal names
cases=(
  'fsal|IO_Cache_Read = -1;|IO_Cache_Read = "-1" is not valid;buffered, dontcache'
  'fsal|IO_Cache_Write = -4;|IO_Cache_Write = "-4" is not valid;direct_file_sync'
  'fsal|IO_Queue_Depth = -4096;|IO_Queue_Depth = "-4096" is not valid;1 to 4096'
  'fsal|Direct_Misaligned_Num_Pages = -1;|Direct_Misaligned_Num_Pages = "-1" is not valid;0 to 1024'
  'fsal|Boundary_Max_Age_Ms = -5;|Boundary_Max_Age_Ms = "-5" is not valid'
  'fsal|Boundary_Tracking = -1;|Boundary_Tracking = "-1" is not valid;true, false'
  'fsal|IO_Cache_Read = ~1;|IO_Cache_Read = "~1" is not valid'
  'fsal|IO_Cache_Read = "-1";|IO_Cache_Read = "-1" is not valid'
  'fsal|IO_Queue_Depth = 1e3;|IO_Queue_Depth = "1e3" .*has no value;1 to 4096'
  'fsal|IO_Queue_Depth = 2k;|IO_Queue_Depth = "2k" .*has no value'
  'fsal|Boundary_Max_Pages = 10M;|Boundary_Max_Pages = "10M" .*has no value'
  'fsal|Boundary_Max_Age_Ms = 5s;|Boundary_Max_Age_Ms = "5s" .*has no value'
  'fsal|IO_Queue_Depth = 64k;|IO_Queue_Depth = "64k" .*has no value'
  'fsal|IO_Cache_Read = ;|IO_Cache_Read = \(nothing\) .*has no value'
  'fsal|IO_Cache_Read = direct IO_Cache_Write = direct;|IO_Cache_Read = "direct IO_Cache_Write = direct" .*has no value'
  'fsal|IO_Cache_Write { }|IO_Cache_Write \{ \.\.\. \} .*is a block'
  'fsal|IO_Cache_Read = fast; IO_Cache_Read = direct;|IO_Cache_Read is set more than once \("fast" at .*, then "direct" at'
  'fsal|IO_Cache_Read = direct, buffered;|IO_Cache_Read .*is given 2 values'
  'fsal|Direct_Misaligned_Num_Pages = 000002;|Direct_Misaligned_Num_Pages = "000002" is not valid'
  'fsal|Boundary_Max_Pages = 0000000001;|Boundary_Max_Pages = "0000000001" is not valid'
  'fsal|IO_Queue_Depth = 0x40;|IO_Queue_Depth = "0x40" is not valid'
  'fsal|IO_Queue_Depth = 4097;|IO_Queue_Depth = "4097" is not valid'
  'fsal|IO_Workers_Max = 4097;|IO_Workers_Max = "4097" is not valid;0 to 4096'
  'fsal|Boundary_Tracking = maybe;|Boundary_Tracking = "maybe" is not valid'
  'fsal|IO_Cache_Read = "dir\nect";|IO_Cache_Read = "dir\\nect" is not valid'
  'fsal|IO_Cache_Read = " direct ";|IO_Cache_Read = " direct " is not valid'
  'export|IO_Cache_Read = direct;|IO_Cache_Read .* is in the EXPORT block; DCACHE settings belong in the export.s FSAL \{ Name = DCACHE'
  'nested|IO_Cache_Write = direct;|IO_Cache_Write .* is in the nested FSAL block'
  'fsal|IO_Cache_Wrte = direct;|unknown setting in the FSAL block;allowed settings: Name, IO_Cache_Read'
  'sub|MEM|DCACHE stacks only on FSAL VFS \(got "MEM" at'
  'sub||the nested FSAL block .* names no FSAL to stack on'
  'nosub||missing the nested FSAL \{ Name = VFS; \} block'
)
# Exports that are served: settings in odd spellings, each the server and
# dcache-check must read to the same values.
# Ganesha 6.5's parser keeps the quotes of a single-quoted value
# (config_parsing/analyse.c:115-119: sanitize_token_str steps past the
# opening quote in its own copy of the pointer, then looks for the closing
# one a byte too far), so 6.5 refuses '1' for every setting, its own as
# DCACHE's; 4.3 and 9.14 strip them.
squoted="'1'"
if [ "$release" = 6.5 ]; then
  squoted='"1"'
  [ "${1:-}" = --inside ] || echo "note: Ganesha 6.5 keeps the quotes of '1' (its parser's bug): that spelling is double-quoted here"
fi
served=(
  'IO_Cache_Read = DIRECT; IO_Cache_Write = 4; Boundary_Tracking = "off"; IO_Queue_Depth = 64;'
  "io_cache_read = $squoted; Direct_Misaligned_Memory = Buffered; IO_Workers_Max = 4096; IO_Blocking_Max = 0;"
)

# one export: $1 id, $2 where, $3 what
export_block() {
  local in_export="" in_fsal="" in_nested=""
  case $2 in
    fsal | served) in_fsal=$3 ;;
    export) in_export=$3 ;;
    nested) in_nested=$3 ;;
  esac
  printf 'EXPORT {\n  Export_Id = %s; Path = "@MNT@/s%s"; Pseudo = /s%s;\n' "$1" "$1" "$1"
  printf '  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;\n'
  [ -z "$in_export" ] || printf '  %s\n' "$in_export"
  printf '  FSAL {\n    Name = DCACHE;\n'
  [ -z "$in_fsal" ] || printf '    %b\n' "$in_fsal"
  case $2 in
    sub) printf '    FSAL { %s}\n' "${3:+Name = $3; }" ;;  # another FSAL, or none named
    nosub) ;;                                            # no nested block at all
    *) printf '    FSAL { Name = VFS; %s }\n' "$in_nested" ;;
  esac
  printf '  }\n}\n'
}

if [ "${1:-}" != --inside ]; then
  conf=$(mktemp "${TMPDIR:-/tmp}/dcache-settings.XXXXXX")
  trap 'rm -f "$conf"' EXIT
  for i in "${!cases[@]}"; do
    IFS='|' read -r where what _ <<<"${cases[$i]}"
    export_block $((100 + i)) "$where" "$what" >>"$conf"
  done
  for j in "${!served[@]}"; do
    export_block $((200 + j)) served "${served[$j]}" >>"$conf"
  done
  rc=0
  "$here/with_server.sh" --exports "$conf" -- "$here/$prog" --inside || rc=$?
  exit "$rc"
fi

: "${DCACHE_STATE:?run me through with_server.sh}" "${DCACHE_PID:?}" "${DCACHE_LOG:?}"
srv=$DCACHE_SERVER log=$DCACHE_LOG gconf=$DCACHE_STATE/ganesha.conf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passes=0 failures=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# dcache-check is built per Ganesha release, like the module, and links that
# release's parser: another release's runs in its Debian root, with the
# repository, the state dir and the work dir bound in.
check=${DCACHE_CHECK:-$(dirname "${DCACHE_PLUGIN:-.}")/dcache-check}
check_cmd=("$check")
if [ -n "$release_root" ]; then
  check=$release_build_dir/fsal_dcache/adapter/dcache-check
  check_cmd=(release_chroot --bind "$top" --bind "$DCACHE_STATE" --bind "$work" -- "$check")
fi
if [ ! -x "$check" ]; then
  fail "no dcache-check at $check (DCACHE_CHECK${release_root:+, ci/build.sh --ganesha $release})"
  check=""
fi

# one line of the log (from line $1 on) matching every pattern in $2 (;-separated)
line_with() {
  local from=$1 line pat
  line=$(tail -n +"$from" "$log" | grep -F 'DCACHE: export' || true)
  IFS=';' read -r -a pats <<<"$2"
  for pat in "${pats[@]}"; do line=$(grep -E -- "$pat" <<<"$line" || true); done
  head -n 1 <<<"$line"
}
serves() {  # export: a round trip over NFSv3 and a read over NFSv4
  head -c 70001 /dev/urandom >"$work/data"
  timeout 60 nfs-cp "$work/data" "nfs://$srv/$1/probe$RANDOM?version=3" >/dev/null 2>&1 &&
    timeout 60 nfs-ls "nfs://$srv/$1/?version=4" >/dev/null 2>&1
}

# dcache-check's verdict on the configuration $1 (the one the server read):
# stderr in $work/check.err, stdout in $work/check.out; $2 the exit status
# it must give.
run_check() {
  local rc=0
  "${check_cmd[@]}" -v "$1" >"$work/check.out" 2>"$work/check.err" || rc=$?
  [ "$rc" = "$2" ] && pass "dcache-check exits $rc on the server's configuration" ||
    fail "dcache-check exited $rc, not $2: $(head -n 3 "$work/check.err")"
}
# The server's refusal of export $1 (log from line $2 on, ending in $3) and
# dcache-check's line for it (without its FILE:LINE, ending "export
# refused": it checks as at creation) must be the same text.
same_refusal() {
  local id=$1 from=$2 suffix=$3 server mine
  server=$(tail -n +"$from" "$log" | grep -F "DCACHE: export $id (" | grep -F "; $suffix" |
    sed 's/^.*\(DCACHE: export \)/\1/' | head -n 1)
  mine=$(sed -n "s/^.*:[0-9]*: \(DCACHE: export $id (.*\); export refused\$/\1; $suffix/p" "$work/check.err" |
    head -n 1)
  [ -n "$server" ] && [ "$server" = "$mine" ] && pass "dcache-check says what the server logged: $mine" ||
    fail "export $id: the server logged '${server:-nothing}', dcache-check says '${mine:-nothing}'"
}
# The settings the server runs export $1 with (log from line $2 on, the
# line saying $3) and those dcache-check says it would be served with.
same_settings() {
  local id=$1 from=$2 what=$3 server mine
  server=$(tail -n +"$from" "$log" | sed -n "s/^.*DCACHE: export $id (\(.*\)) $what: \(.*\) (running: .*)\$/\1: \2/p" |
    head -n 1)
  mine=$(sed -n "s/^.*:[0-9]*: DCACHE: export $id (\(.*\)): would be served: \(.*\)\$/\1: \2/p" "$work/check.out" |
    head -n 1)
  [ -n "$server" ] && [ "$server" = "$mine" ] && pass "dcache-check serves export $id as the server does: $mine" ||
    fail "export $id: the server runs '${server:-nothing}', dcache-check says '${mine:-nothing}'"
}

# ---- at creation -----------------------------------------------------------
for e in vfs dcache; do
  serves "$e" && pass "/$e serves" || fail "/$e does not serve"
done
for i in "${!cases[@]}"; do
  IFS='|' read -r where what pats <<<"${cases[$i]}"
  id=$((100 + i))
  line=$(line_with 1 "export $id \\(;$pats;export refused")
  [ -n "$line" ] && pass "export $id ($where: $what) refused: ${line#*DCACHE: }" ||
    fail "export $id ($where: $what): no refusal line matching $pats"
  if timeout 30 nfs-ls "nfs://$srv/s$id/?version=3" >/dev/null 2>&1; then
    fail "export $id ($what) can be mounted"
  fi
  if grep -E "DCACHE: export $id .*created" "$log" >/dev/null; then
    fail "export $id ($what) was created"
  fi
done
# every refusal is one line (no value splits it)
if grep -n 'DCACHE: export 1[0-9][0-9] ' "$log" | grep -v 'export refused' >/dev/null; then
  fail "a DCACHE line of a malformed export is not the one-line refusal: $(grep 'DCACHE: export 1[0-9][0-9] ' "$log" | grep -v 'export refused' | head -n 2)"
fi
for j in "${!served[@]}"; do
  serves "s$((200 + j))" && pass "/s$((200 + j)) (${served[$j]}) serves" || fail "/s$((200 + j)) does not serve"
done
# dcache-check on the configuration the server started with
if [ -n "$check" ]; then
  run_check "$gconf" 1
  for i in "${!cases[@]}"; do
    same_refusal $((100 + i)) 1 "export refused"
  done
  for id in 2 $(seq 200 $((200 + ${#served[@]} - 1))); do
    same_settings "$id" 1 "created over VFS"
  done
  [ "$(grep -c ': DCACHE: export ' "$work/check.err")" = "${#cases[@]}" ] &&
    pass "dcache-check refuses the ${#cases[@]} exports the server refused, no other" ||
    fail "dcache-check refuses $(grep -c ': DCACHE: export ' "$work/check.err") exports, the server ${#cases[@]}"
fi

# ---- on SIGHUP: export 2 (/dcache) gets each malformed block in turn --------
head_lines=$(grep -n '^# from ' "$gconf" | head -n 1 | cut -d: -f1)
head -n "$((head_lines - 1))" "$gconf" >"$work/head.conf"
vfs_export() {
  printf 'EXPORT {\n  Export_Id = 1; Path = "%s/vfs"; Pseudo = /vfs;\n' "$DCACHE_MNT"
  printf '  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;\n'
  printf '  FSAL { Name = VFS; }\n}\n'
}
good_dcache() {
  printf 'EXPORT {\n  Export_Id = 2; Path = "%s/dcache"; Pseudo = /dcache;\n' "$DCACHE_MNT"
  printf '  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP; SecType = sys;\n'
  printf '  FSAL { Name = DCACHE; IO_Cache_Write = direct_file_sync; FSAL { Name = VFS; } }\n}\n'
}
# shellcheck source=sighup.sh
. "$here/sighup.sh"
reload() {  # $1: the new export 2 (a file); waits for export 2's verdict
  { cat "$work/head.conf"; vfs_export; cat "$1"; } >"$gconf"
  sighup_and_wait 'DCACHE: export 2 \('
}
good_dcache >"$work/good.conf"
from=$(($(wc -l <"$log") + 1))
reload "$work/good.conf" && grep -q 'DCACHE: export 2 .* updated: .*IO_Cache_Write = direct_file_sync' "$log" &&
  pass "SIGHUP: export 2 updated to direct_file_sync" || fail "SIGHUP: export 2 not updated to direct_file_sync"
if [ -n "$check" ]; then
  run_check "$gconf" 0
  same_settings 2 "$from" updated
fi
for i in "${!cases[@]}"; do
  IFS='|' read -r where what pats <<<"${cases[$i]}"
  from=$(($(wc -l <"$log") + 1))
  export_block 2 "$where" "$what" | sed -e "s|@MNT@/s2\"|$DCACHE_MNT/dcache\"|" -e 's|Pseudo = /s2;|Pseudo = /dcache;|' >"$work/bad.conf"
  if ! reload "$work/bad.conf"; then
    fail "SIGHUP with $what: no verdict for export 2 in the log"
    continue
  fi
  line=$(line_with "$from" "export 2 \\(;$pats;update refused, the export keeps its current settings")
  [ -n "$line" ] && pass "SIGHUP ($where: $what) refused: ${line#*DCACHE: }" ||
    fail "SIGHUP ($where: $what): no refusal matching $pats"
  if [ -n "$check" ]; then
    run_check "$gconf" 1
    same_refusal 2 "$from" "update refused, the export keeps its current settings"
  fi
done
# EXPORT_DEFAULTS applies to every export: it refuses the DCACHE one
from=$(($(wc -l <"$log") + 1))
{ printf 'EXPORT_DEFAULTS { IO_Cache_Read = direct; }\n'; cat "$work/good.conf"; } >"$work/defaults.conf"
if reload "$work/defaults.conf"; then
  line=$(line_with "$from" "export 2 \\(;IO_Cache_Read .* is in the EXPORT_DEFAULTS block;update refused")
  [ -n "$line" ] && pass "SIGHUP (EXPORT_DEFAULTS): refused: ${line#*DCACHE: }" || fail "EXPORT_DEFAULTS: no refusal line"
  if [ -n "$check" ]; then
    run_check "$gconf" 1
    same_refusal 2 "$from" "update refused, the export keeps its current settings"
  fi
else
  fail "SIGHUP with EXPORT_DEFAULTS: no verdict for export 2"
fi
reload "$work/good.conf" || true
# export 2 kept direct_file_sync through every refusal: its WRITEs still
# come back FILE_SYNC (raised), counted by the plugin
raised() {  # export 2's WRITEs raised to stable
  "$top/tools/dcache-stats" --json --export 2 |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("2", {}).get("writes_raised_stable", 0))'
}
raised_before=$(raised)
serves dcache && pass "/dcache still serves" || fail "/dcache stopped serving"
raised_after=$(raised)
[ "${raised_after:-0}" -gt "${raised_before:-0}" ] &&
  pass "export 2 still runs direct_file_sync (${raised_before:-0} -> $raised_after WRITEs raised)" ||
  fail "export 2 lost its settings (${raised_before:-0} -> ${raised_after:-0} WRITEs raised)"
serves vfs && pass "/vfs still serves" || fail "/vfs stopped serving"
[ "$(cat /proc/"$DCACHE_PID"/comm 2>/dev/null)" = ganesha.nfsd ] && pass "server still running" || fail "server gone"

echo "$passes passed, $failures failed"
[ "$failures" = 0 ]
