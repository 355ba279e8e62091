"""The variants: one export each, a plain VFS baseline and a DCACHE export
per mode (docs/benchmarks.md, "Variants"), written by dcache_testbed's
export builder; and whether the module accepts `auto`."""

import os
import subprocess
import tempfile

from dcache_testbed import exports


def _modes(read, write=None, **more):
    return {"IO_Cache_Read": read, "IO_Cache_Write": write or read, **more}


# name -> the DCACHE settings (None: plain VFS), in table order; each
# *_sync backend twin right after its io_uring variant
VARIANTS = {
    "vfs": None,
    "buffered": _modes("buffered"),
    "buffered_sync": _modes("buffered", IO_Backend="sync"),
    "dontcache": _modes("dontcache"),
    "dontcache_sync": _modes("dontcache", IO_Backend="sync"),
    "fadvise": _modes("fadvise"),
    "direct": _modes("direct", Direct_Misaligned_Memory="bounce"),
    "direct_sync": _modes("direct", Direct_Misaligned_Memory="bounce", IO_Backend="sync"),
    # every step that waits for the device through io_uring, none blocking a worker
    "direct_async": _modes("direct", IO_Blocking_Max=0),
    # the boundary-page comparison: tracker off (DONTCACHE edges), and plain cached edges
    "direct_untracked": _modes("direct", Boundary_Tracking="false"),
    "direct_untracked_sync": _modes("direct", Boundary_Tracking="false", IO_Backend="sync"),
    "direct_cached_edges": _modes("direct", Direct_Misaligned_Dontcache="false"),
    "direct_mem_buffered": _modes("direct", Direct_Misaligned_Memory="buffered"),
    "direct_data_sync": _modes("direct", "direct_data_sync"),
    "direct_file_sync": _modes("direct", "direct_file_sync"),
    # per file, from how the file is used; refused by a module without it
    "auto": _modes("auto"),
    # ... with its write streams direct rather than dontcache (only when named)
    "auto_direct": _modes("auto", Auto_Write_Stream="direct"),
    # ... with its streams giving way to the export's cached requests for
    # 500 ms (the default since 2026-12-07; named, so older records' runs read the same)
    "auto_yield": _modes("auto", Auto_Stream_Yield_Ms="500"),
    "auto_direct_yield": _modes("auto", Auto_Write_Stream="direct", Auto_Stream_Yield_Ms="500"),
    # ... giving way for up to the most the setting allows: longer than a burst of the working set
    "auto_yield_1s": _modes("auto", Auto_Stream_Yield_Ms="1000"),
    # ... with its write streams direct only while its cached requests are quiet (only when named)
    "auto_quiet": _modes("auto", Auto_Write_Stream="direct_when_quiet"),
    "auto_quiet_yield": _modes("auto", Auto_Write_Stream="direct_when_quiet", Auto_Stream_Yield_Ms="500"),
    # ... caching its write streams for spare memory even where the host takes free memory back (only when named)
    "auto_spare": _modes("auto", Auto_Write_Spare_Memory="cache"),
    # ... with streams that never wait (the default before; only when named)
    "auto_no_yield": _modes("auto", Auto_Stream_Yield_Ms="0"),
}
NAMED_ONLY = ("auto_direct", "auto_yield", "auto_direct_yield", "auto_yield_1s", "auto_quiet", "auto_quiet_yield",
              "auto_spare", "auto_no_yield")
FIRST_ID = 20


def names():
    return list(VARIANTS)


def defaults():
    """The variants a run without --variants compares."""
    return [v for v in VARIANTS if v not in NAMED_ONLY]


def export(name, export_id, path=None):
    """The variant's export at path (default: its name), pseudo /NAME."""
    path = path or name
    settings = VARIANTS[name]
    if settings is None:
        return exports.vfs(export_id, path, "/" + name)
    return exports.dcache(export_id, path, "/" + name, **settings)


def ids(chosen):
    """variant -> Export_Id, the same on every server of a run
    (variants.txt; the report finds each export's counters by it)."""
    return {v: FIRST_ID + i for i, v in enumerate(chosen)}


def auto_refused(check):
    """Why the module refuses `auto` ("" when it accepts it), asked of its
    dcache-check (the plugin's own checks, no server): the line it prints.
    A missing dcache-check answers that it cannot tell."""
    if not os.access(check, os.X_OK):
        return f"no dcache-check at {check} to ask"
    with tempfile.TemporaryDirectory(prefix="dcache-bench-auto.") as d:
        conf = os.path.join(d, "ganesha.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(export("auto", FIRST_ID).block(d))
        res = subprocess.run([check, conf], capture_output=True, text=True, check=False)
    if res.returncode == 0:
        return ""
    return (res.stderr.strip().splitlines() or [f"dcache-check exited {res.returncode}"])[-1]
