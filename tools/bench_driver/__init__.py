"""The benchmark's driver: every DCACHE cache mode side by side against
plain VFS, on private ganesha.nfsd servers (tools/dcache_testbed), the
load from dcache-bench (tools/bench/), the report by tools/bench_report.py.
`tools/bench-report.sh` runs it (python3 -m bench_driver); `--help` lists
the options, docs/benchmarks.md is the method.

  config      the options, the workload families and their sizes
  variants    the variant table (one export each) and the check for `auto`
  groups      cgroup v1 memory groups and device throttles, the counters
              a pressure run reads before and after
  runner      dcache-bench in a server's namespaces: a measured run with
              the plugin's counters around it, perf, failures recorded
  shared      the workloads of the one shared server (mix, randread, ...)
  own_server  memory and overload: a server per variant
  pressure    a stream beside a working set on a VFS export of its own
  one_export  a stream and a working set through ONE export (mixed,
              reread_fit, reread_big, noisy_pair)
  main        the order of it all: build, machine.txt, servers, report

One server per kind of run: the shared workloads' server carries every
variant's export; memory and overload get a server per variant; the
pressure matrix a server per kernel mode; the one-export workloads a
server per kernel mode whose exports each hold a second filesystem.
"""
