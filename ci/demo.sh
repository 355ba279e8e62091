#!/bin/sh
# README's first command: the demo, tools/demo.py over the server library
# tools/dcache_testbed (ci/demo.sh --help says what it does and takes).
exec python3 -B "$(dirname "$0")/../tools/demo.py" "$@"
