"""cgroup v1 for the benchmark (dcache_testbed.cgroups places the server):
a device throttle (blkio), a memory group (memory), and the counters a
run in a memory group reads before and after it (snapshot), which
tools/bench_report_pressure.py takes the differences of."""

import os
import time

from dcache_testbed import cgroups
from dcache_testbed.cgroups import Unavailable  # noqa: F401  (re-exported: what callers catch)


def device(loopdev):
    """"MAJ:MIN" of a block device."""
    rdev = os.stat(loopdev).st_rdev
    return f"{os.major(rdev)}:{os.minor(rdev)}"


def throttle(srv, bps, loopdev=None):
    """The server alone in a blkio group limiting reads and writes of its
    loop device (or loopdev) to bps bytes/s: a context manager. Throttles
    what the server issues: reads and direct I/O, not buffered write-back."""
    dev = device(loopdev or srv.loopdev)
    return srv.cgroup("blkio", {"blkio.throttle.write_bps_device": f"{dev} {bps}",
                                "blkio.throttle.read_bps_device": f"{dev} {bps}"})


def memory(srv, limit=None):
    """The server alone in a fresh memory group, limited to limit bytes
    (None: unlimited, its counters still read): a context manager."""
    return srv.cgroup("memory", {"memory.limit_in_bytes": limit if limit else -1})


def available(controller):
    """"" when a group of controller can be made here, else why not."""
    try:
        with cgroups.Group(controller):
            return ""
    except cgroups.Unavailable as e:
        return str(e)


def kswapd_pids():
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm", encoding="ascii") as f:
                    if f.read().strip().startswith("kswapd"):
                        out.append(int(pid))
            except OSError:
                pass
    return out


def _lines(path, prefix, wanted=None):
    out = []
    with open(path, encoding="ascii") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and (wanted is None or parts[0].startswith(wanted)):
                out.append(f"{prefix}{parts[0]} {parts[1]}")
    return out


def _dev_stat(loopdev):
    with open(f"/sys/block/{os.path.basename(loopdev)}/stat", encoding="ascii") as f:
        return [int(x) for x in f.read().split()]


def snapshot(path, group, ws_loopdev, loopdev, kswapd):
    """Writes `key value` lines to path: the memory group's memory.stat
    and files (memcg.*), /proc/vmstat's reclaim counters (pgscan/pgsteal
    anon and file count the group's limit reclaim too, cgroup v1's
    memory.stat has none), PSI memory totals, kswapd's CPU ticks, the
    working set's device (wsdev.*) and the main one (dev.*)."""
    lines = [f"time {time.time():.6f}"]
    if group is not None:
        lines += [f"memcg.{k} {v}" for k, v in group.stat().items()]
        for key in ("failcnt", "max_usage_in_bytes", "usage_in_bytes", "limit_in_bytes"):
            lines.append(f"memcg.{key} {group.read_int('memory.' + key)}")
    reclaim = ("pgscan", "pgsteal", "allocstall", "workingset_refault", "pgmajfault")
    lines += _lines("/proc/vmstat", "vmstat.", reclaim)
    if os.path.exists("/proc/pressure/memory"):
        with open("/proc/pressure/memory", encoding="ascii") as f:
            for line in f:
                kind, *fields = line.split()
                total = dict(x.split("=") for x in fields).get("total", "0")
                lines.append(f"psi.{kind}_us {total}")
    ticks = 0
    for pid in kswapd:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            ticks += int(stat[11]) + int(stat[12])
        except (OSError, IndexError, ValueError):
            pass
    lines += [f"kswapd.ticks {ticks}", f"clk_tck {os.sysconf('SC_CLK_TCK')}"]
    ws = _dev_stat(ws_loopdev)
    lines += [f"wsdev.reads {ws[0]}", f"wsdev.read_sectors {ws[2]}"]
    main = _dev_stat(loopdev)
    lines += [f"dev.reads {main[0]}", f"dev.read_sectors {main[2]}", f"dev.writes {main[4]}",
              f"dev.write_sectors {main[6]}"]
    with open(path, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")
