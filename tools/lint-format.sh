#!/usr/bin/env bash
# Checks that every tracked C and C++ file is as clang-format leaves it
# (the .clang-format files).  The style was set with clang-format 14,
# Debian 12's; another major version formats some constructs differently,
# so there the check is skipped with the reason (exit 77).
#   tools/lint-format.sh [clang-format binary]     check
#   tools/lint-format.sh --fix [binary]            reformat in place
set -euo pipefail
fix=false
if [ "${1:-}" = --fix ]; then
  fix=true
  shift
fi
cf=${1:-clang-format}
major=$("$cf" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$major" != 14 ]; then
  echo "lint-format: $cf is version ${major:-unknown}; the style is checked with clang-format 14 (Debian 12)"
  exit 77
fi
cd "$(dirname "$0")/.."
if $fix; then
  git ls-files -z -- '*.c' '*.h' '*.cpp' '*.hpp' | xargs -0 "$cf" -i
else
  git ls-files -z -- '*.c' '*.h' '*.cpp' '*.hpp' | xargs -0 "$cf" --dry-run -Werror
fi
