#!/usr/bin/env bash
# Lint: each man page renders without a groff or man warning.
#   tools/lint-man.sh PAGE.8...
set -euo pipefail
status=0
for page in "$@"; do
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || {
    echo "$page: man failed: $warnings" >&2
    status=1
    continue
  }
  if [ -n "$warnings" ]; then
    echo "$page: $warnings" >&2
    status=1
  fi
done
exit "$status"
