#!/usr/bin/env python3
"""The demo's summary (ci/demo.sh): page cache per export and DCACHE's counters.

  demo_report.py residency OUT.json MNT EXPORT... -- FILE...
      bytes of each export's files in the page cache (cachestat(2), Linux >= 6.5;
      fincore(1) before that) and their sizes, as JSON
  demo_report.py table RESIDENCY.json STATS.json
      the table the demo prints (STATS.json: dcache-stats --json)
"""
import ctypes
import json
import os
import subprocess
import sys


def resident(path):
    """Bytes of path in the page cache."""
    class Range(ctypes.Structure):
        _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]

    class Stat(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64) for n in
                    ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        rng, st = Range(0, 0), Stat()  # len 0: to the end of the file
        if libc.syscall(451, fd, ctypes.byref(rng), ctypes.byref(st), 0) == 0:
            return st.nr_cache * os.sysconf("SC_PAGE_SIZE")
    finally:
        os.close(fd)
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def mib(n):
    return n / (1 << 20)


if sys.argv[1] == "residency":  # OUT MNT EXPORT... -- FILE...
    out, mnt, rest = sys.argv[2], sys.argv[3], sys.argv[4:]
    exps, names = rest[:rest.index("--")], rest[rest.index("--") + 1:]
    res = {}
    for e in exps:
        paths = [os.path.join(mnt, e, n) for n in names]
        res[e] = [sum(resident(p) for p in paths), sum(os.path.getsize(p) for p in paths)]
    json.dump(res, open(out, "w"))
    sys.exit(0)

# table RESIDENCY.json STATS.json: the export ids are the demo's
res = json.load(open(sys.argv[2]))
try:
    stats = json.load(open(sys.argv[3]))
except (OSError, ValueError):
    stats = None
rows = [("/vfs", "vfs", None, "(plain VFS)"),
        ("/dontcache", "dontcache", "2", "dontcache / dontcache"),
        ("/direct", "direct", "3", "direct / direct_file_sync")]
print("Page cache each export left on the server, right after writing and reading back its")
print("files through NFS (cachestat(2) of the backing files), and DCACHE's counters")
print("(tools/dcache-stats):")
print()
print(f"  {'export':<11} {'IO_Cache_Read / _Write':<26} {'in page cache / written':>24}"
      f"  {'WRITEs':>6}  {'answered FILE_SYNC':>18}  {'COMMITs sent':>12}")
raised = 0
for path, e, eid, mode in rows:
    r, w = res[e]
    cache = f"{mib(r):5.1f} / {mib(w):5.1f} MiB {100 * r / w if w else 0:3.0f} %"
    if eid is None:
        counters = f"  {'-':>6}  {'-':>18}  {'-':>12}"
    elif stats is None:
        counters = "  (counters unavailable)"
    else:
        c = stats.get(eid, {})
        raised += c.get("writes_raised_stable", 0)
        counters = (f"  {c.get('writes', 0):>6}  {c.get('writes_reply_stable', 0):>18}"
                    f"  {c.get('commits', 0):>12}")
    print(f"  {path:<11} {mode:<26} {cache:>24}{counters}")
print()
print("A WRITE answered FILE_SYNC is on disk when answered: no COMMIT is needed for it")
print(f"({raised} came UNSTABLE and were raised, counter writes_raised_stable); nfs-cp")
print("(libnfs) still COMMITs each file once at close. Plain VFS keeps no DCACHE counters.")
