"""Stopping the server with I/O in flight neither crashes nor hangs: a load
with many requests in flight (dcache-bench: 16 connections x depth 16 of
1 MiB mixed READs and WRITEs) runs against a DCACHE export, ganesha.nfsd
gets SIGTERM in the middle of it, and must exit by itself within 60 s,
cleanly (Ganesha's own shutdown line in its log, no crash signal). The load
must be running and served when the signal comes (the bench alive, export
2's READ and WRITE counters above zero), or the test fails."""

import re
import signal
import subprocess
import time

from dcache_testbed.procs import Timeout, wait_for

CRASH = re.compile(r"SIGSEGV|SIGABRT|Segmentation|core dumped|assert", re.I)


def test_sigterm_with_io_in_flight(server, build):
    load = server.popen([build.bin("dcache-bench"), "url=nfs://127.0.0.1/dcache", "rw=rw", "rwmixread=60", "bs=1M",
                         "numjobs=16", "iodepth=16", "size=64M", "time_based=1", "runtime=30", "filename=stop",
                         "--json", "/dev/null", "--no-progress"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # until the plugin has served READs and WRITEs of the load (the bench
    # lays its 1 GiB out first: on a busy machine that alone has taken
    # 20 s), for at most 60 s
    counters = {}

    def served():
        counters["now"] = server.counters(2)
        return counters["now"].reads > 0 and counters["now"].writes > 0
    try:
        wait_for(served, 60, "export 2 serving READs and WRITEs of the load", 0.1, alive=load.alive)
    except Timeout:
        pass  # said by the assertion below
    # The subject: the load running at full depth for a second, not one
    # just starting, when the signal comes.
    time.sleep(1)
    reads, writes = counters["now"].reads, counters["now"].writes
    assert load.alive(), "the load exited before SIGTERM"
    assert reads > 0 and writes > 0, f"the plugin served {reads} READs and {writes} WRITEs before SIGTERM"

    print(f"SIGTERM to ganesha.nfsd (pid {server.pid}) with the load running "
          f"({reads} READs and {writes} WRITEs served)")
    start = time.monotonic()
    server.ganesha.signal(signal.SIGTERM)
    exited = server.ganesha.wait_gone(60)
    elapsed_ms = (time.monotonic() - start) * 1000
    load.stop()
    assert exited, "ganesha.nfsd still running 60 s after SIGTERM (hang)"
    print(f"ganesha.nfsd exited {elapsed_ms:.0f} ms after SIGTERM")
    status = server.stop_ganesha()
    assert status == 0, f"ganesha.nfsd ended with status {status} after SIGTERM"
    log = server.log()
    orderly = "NFS EXIT: stopping NFS service" in log
    assert orderly, "no orderly shutdown line (NFS EXIT: stopping NFS service) in ganesha.log"
    crash = [line for line in log.splitlines() if CRASH.search(line)]
    assert not crash, f"crash signs in the log: {crash[:10]}"
