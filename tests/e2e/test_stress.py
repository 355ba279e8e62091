"""The random-operation stress test: dcache-fsx (stress/fsx.cpp) against
every cache mode through one real ganesha.nfsd on one loop filesystem, all
exports at once. Per export and round, at the same time:
  - one NFSv3 stream on a file of its own (UNSTABLE and FILE_SYNC WRITEs,
    READs checked against the model, truncates up and down, COMMITs);
  - one NFSv4.1 stream on a file of its own (the project's client);
  - two NFSv3 streams sharing one file, each WRITE sent as four adjacent
    pieces in flight at once (the boundary pages of the pieces and of the
    two streams are shared);
  - one NFSv3 stream running dcache-fsx's "appends" scenario: a fragmented
    file, a small WRITE past EOF, page-aligned appends behind it, one last
    operation of a random kind (what took XFS down when held edges stayed
    dirty; see docs/architecture.md).
Every export lives on the same filesystem, so a shutdown caused by one takes
all of them down.

Fails on any mismatch or error dcache-fsx reports, on any line the kernel
logged about a shutdown, corruption or error of this run's filesystem (by
its loop device) or about O_DIRECT colliding with the page cache on this
run's files (by their name), and on a mode whose files stay more cached
than it should (bounds()).

One test over filesystem x backend x RWF_DONTCACHE (dcache_testbed.matrix);
ctest runs e2e_stress (XFS, io_uring), e2e_stress_sync, and a smaller round
(--stress-ops 1000) on ext4, btrfs and XFS with RWF_DONTCACHE refused. The
long run (docs/architecture.md) is --long: 10 rounds of 20,000 operations a
stream.
"""

import os
import re
import subprocess
import time

import pytest

from dcache_testbed import matrix
from dcache_testbed.exports import MODES, dcache, vfs
from dcache_testbed.procs import wait_for
from dcache_testbed.stats import Counters

EXPORTS = [vfs(59, "s_vfs")] + [
    dcache(export_id, "s_" + mode, **settings)
    for export_id, (mode, settings) in zip((60, 61, 62, 63, 65, 66, 67, 68), MODES)
] + [dcache(69, "s_direct_untracked", IO_Cache_Read="direct", IO_Cache_Write="direct",
            Boundary_Tracking="false")]
DONTCACHE_ID = 61

FS_FAILED = re.compile(r"Shutting down|[Cc]orruption|Internal error|[Ff]orce shutdown|[Ee]rror|critical"
                       r"|read-only|[Aa]borting")
COLLIDED = re.compile(r"collision|invalidation failure")


def streams(fsx, export, seed, ops, tag):
    """The dcache-fsx processes of one export, five streams: (what, argv)."""
    def argv(proto, n, *args, name):
        return [fsx, "--server", "127.0.0.1", "--export", export.pseudo, "--proto", proto, "--ops", str(n),
                "--seed", str(seed), *args, "--name", f"{tag}.{name}", "--quiet"]
    big = ("--max-file", "1048576", "--max-len", "131072", "--mix", "10,5,35")
    small = ("--max-file", "262144", "--max-len", "65536", "--mix", "10,5,35")
    return [
        (f"{export.name} v3", argv("3", ops, *big, name="v3")),
        (f"{export.name} v4.1", argv("4.1", ops // 2, *small, name="v41")),
        (f"{export.name} v3 2 streams x 4 pieces", argv("3", ops, "--streams", "2", "--depth", "4", *big,
                                                        name="shared")),
        (f"{export.name} v3 appends scenario", argv("3", ops, "--scenario", "appends", "--max-file", "1048576",
                                                    name="appends")),
    ]


def kernel_lines(lines, dev, tag):
    """The kernel's lines saying this run's filesystem (on loop device dev)
    failed: an XFS shutdown or corruption, an ext4 or btrfs error, a remount
    read-only; and those about this run's files (names holding tag)
    colliding O_DIRECT with the page cache."""
    marks = (f"({dev})", f"(device {dev})", f"(device {dev}:")
    return [line for line in lines
            if (any(m in line for m in marks) and FS_FAILED.search(line))
            or (tag in line and COLLIDED.search(line))]


def dmesg():
    return subprocess.run(["dmesg"], capture_output=True, text=True, check=True).stdout.splitlines()


def residency(directory):
    """The share of the bytes of directory's files in the page cache, in
    whole percent (fincore)."""
    files = [os.path.join(d, f) for d, _, names in os.walk(directory) for f in names]
    if not files:
        return 0
    out = subprocess.run(["fincore", "-n", "-b", "-o", "RES,SIZE"] + files, capture_output=True, text=True,
                         check=False).stdout
    cached = size = 0
    for line in out.splitlines():
        res, total = line.split()
        cached, size = cached + int(res), size + int(total)
    return 100 * cached // size if size else 0


def drops_done(srv):
    """Every export's counters once no drop is pending (None before)."""
    every = srv.counters()
    return every if all(c.drops_pending == 0 for c in every.values()) else None


def bounds(export, no_dontcache):
    """How much of its files (percent) a mode may leave in the page cache
    after a round (misaligned files up to 1 MB, so held boundary pages
    weigh a lot). Measured at 1000 operations a stream (docs/configuration.md,
    "Filesystems and kernels"): VFS and buffered keep what they moved
    (47-70 %: the control, the page cache holds files here); RWF_DONTCACHE
    as the kernel does it keeps a folio it did not bring in itself
    (dontcache 20 % on XFS, 28 % on ext4, and ext4 keeps 38-44 % of
    Direct_Misaligned_Memory = buffered's DONTCACHE writes); without
    RWF_DONTCACHE its fallback drops whole pages (17-18 % on XFS, ext4 and
    btrfs); fadvise and the direct modes 0-11 %."""
    if export in ("s_vfs", "s_buffered"):
        return 30, 100
    if export == "s_dontcache":
        return 0, 25 if no_dontcache else 60
    if export == "s_direct_mem_buffered":
        return 0, 15 if no_dontcache else 60
    return 0, 15


@pytest.mark.parametrize("variant", matrix.variants(), ids=str)
def test_stress(make_server, build, request, variant):
    rounds, ops = request.config.getoption("stress_rounds"), request.config.getoption("stress_ops")
    if request.config.getoption("long"):
        rounds, ops = 10, 20000
    fsx = build.bin("dcache-fsx")
    srv = make_server(exports=EXPORTS, wait_pseudo="/s_vfs", **variant.server_args())
    tag = f"stress{os.getpid()}"
    dev = os.path.basename(srv.loopdev)
    log_from = len(dmesg())
    start = time.monotonic()
    for rnd in range(1, rounds + 1):
        running = []
        for k, export in enumerate(EXPORTS):
            for what, argv in streams(fsx, export, rnd * 1000 + 4 * k + 1, ops, tag):
                running.append((what, srv.popen(argv)))
        failed = [what for what, child in running if child.proc.wait() != 0]
        problems = [f"dcache-fsx failed on {what}" for what in failed]
        bad = kernel_lines(dmesg()[log_from:], dev, tag)
        if bad:
            problems.append("the kernel logged for this run's filesystem or files:\n  " + "\n  ".join(bad))
        assert not problems, f"round {rnd}: " + "; ".join(problems)

        # residency once the drops that follow the last replies are done
        every = wait_for(lambda: drops_done(srv), 30, "the deferred drops done (drops_pending 0)", 0.2,
                         alive=srv.ganesha.alive)
        no_dontcache = every.get(DONTCACHE_ID, Counters({})).fallback_no_dontcache > 0
        shares, outside = [], []
        for export in EXPORTS:
            pct = residency(os.path.join(srv.mnt, export.name))
            lo, hi = bounds(export.name, no_dontcache)
            shares.append(f"{export.name[2:]}={pct}%")
            if not lo <= pct <= hi:
                outside.append(f"{export.name[2:]} left {pct} % of its files in the page cache, outside {lo}-{hi} %")
        print(f"round {rnd}/{rounds}: page-cache residency of each export's files"
              f"{' (no RWF_DONTCACHE)' if no_dontcache else ''}: {' '.join(shares)}")
        assert not outside, f"round {rnd}: " + "; ".join(outside)
        print(f"round {rnd}/{rounds} on {variant.fs}: {len(EXPORTS)} exports x 5 streams, {ops} operations a"
              f" stream: no mismatch, no error, kernel log clean ({time.monotonic() - start:.0f} s)")
