#!/bin/sh
# The benchmark: every DCACHE cache mode side by side against plain VFS on
# private ganesha.nfsd servers (docs/benchmarks.md). The driver is Python,
# tools/bench_driver/ over tools/dcache_testbed; --help lists its options.
tools=$(cd "$(dirname "$0")" && pwd)
PYTHONPATH=$tools${PYTHONPATH:+:$PYTHONPATH} exec python3 -m bench_driver "$@"
