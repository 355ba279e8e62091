"""A clean shutdown of a server with DCACHE exports logs no CRIT or MAJ
line that the same shutdown of a VFS-only server does not: every reference
DCACHE took on the VFS module and its exports is put back.

Each test stops its servers itself (SIGTERM) after I/O on each export and
compares the shutdown's CRIT/MAJ lines (from "Removing all exports" on,
without time, pid and thread) with a VFS-only server's:
  - four DCACHE exports (cache modes, io_uring and sync);
  - two DCACHE exports refused at creation (a bad value, an unknown word);
  - three reloads (SIGHUP) of a DCACHE-only server leave what a VFS-only
    server's leave (Ganesha's own, of the export's FSAL), nothing of VFS;
  - after three GetFSALStats over DBus, nothing either: Ganesha's
    GetFSALStats looks the module up and never puts it back ("Extra
    references (3) hanging around to FSAL DCACHE", 6.5 and 9.14: "Extra
    fsal references"), and DCACHE's answer gives the reference back.
"""

import os
import re

import pytest

from dcache_testbed import nfs
from dcache_testbed.exports import dcache, vfs

DCACHE_EXPORTS = [vfs(1, "vfs"),
                  dcache(40, "d40", IO_Cache_Read="buffered", IO_Cache_Write="buffered"),
                  dcache(41, "d41", IO_Cache_Read="dontcache", IO_Cache_Write="dontcache"),
                  dcache(42, "d42", IO_Cache_Read="direct", IO_Cache_Write="direct"),
                  dcache(43, "d43", IO_Cache_Read="direct", IO_Cache_Write="direct", IO_Backend="sync")]


def shutdown_lines(make, tmp_path, exports, io_on, stats=0, reloads=0):
    """Starts a server (make: a make_server), writes and reads a file on
    each export named in io_on, reads the counters stats times (GetFSALStats),
    reloads, stops it: the shutdown's CRIT and MAJ lines."""
    srv = make(exports=exports)
    data = os.urandom(300007)
    local = tmp_path / "data"
    local.write_bytes(data)
    for name in io_on:
        assert nfs.put(srv, str(local), f"{name}/f"), f"writing /{name}/f over NFSv3"
        assert nfs.get(srv, f"{name}/f", 4) == data, f"/{name}/f does not read back over NFSv4"
    for _ in range(stats):
        srv.counters()  # what an operator reads the counters with
    for _ in range(reloads):
        srv.reload("Reread exports complete")
    status = srv.stop_ganesha(grace=30)
    assert status == 0, f"ganesha.nfsd ended with status {status} after SIGTERM (killed after 30 s, or crashed)"
    log = srv.log()
    start = log.find("Removing all exports")
    lines = log[log.rfind("\n", 0, start) + 1:].splitlines() if start >= 0 else []
    return sorted({re.sub(r"^.*:(CRIT|MAJ) :", r"\1 ", line) for line in lines if re.search(r":(CRIT|MAJ) :", line)})


@pytest.fixture(scope="module")
def vfs_lines(make_module_server, tmp_path_factory):
    """The baseline: a VFS-only server's shutdown lines."""
    lines = shutdown_lines(make_module_server, tmp_path_factory.mktemp("vfs"), [vfs(1, "vfs")], ["vfs"])
    print(f"VFS-only shutdown, CRIT/MAJ lines: {lines or '(none)'}")
    return lines


def test_dcache_exports_leave_nothing_behind(make_server, tmp_path, vfs_lines):
    lines = shutdown_lines(make_server, tmp_path, DCACHE_EXPORTS, ["vfs", "d40", "d41", "d42", "d43"])
    extra = sorted(set(lines) - set(vfs_lines))
    assert not extra, f"the DCACHE server's shutdown logged what the VFS-only one does not: {extra}"


def test_exports_refused_at_creation_leave_nothing_behind(make_server, tmp_path, vfs_lines):
    # a value out of range, and one Ganesha's parser reads but DCACHE does
    # not know; beside them a served DCACHE export
    exports = [vfs(1, "vfs"), dcache(60, "r60", IO_Cache_Read="-1"), dcache(61, "r61", IO_Cache_Write="fast"),
               dcache(62, "r62", IO_Cache_Read="direct")]
    lines = shutdown_lines(make_server, tmp_path, exports, ["vfs", "r62"])
    extra = sorted(set(lines) - set(vfs_lines))
    assert not extra, f"with two DCACHE exports refused at creation the shutdown logged: {extra}"


def test_reloads_leave_only_ganeshas_own_references(make_server, tmp_path):
    # Ganesha itself leaks one reference to an export's FSAL per SIGHUP (a
    # VFS-only server: "Extra references (3) ... FSAL VFS" after three). A
    # DCACHE-only server may show the same of DCACHE, its export's FSAL,
    # and nothing of VFS under it: DCACHE puts back what each reload of its
    # nested FSAL block takes.
    vfs_reloaded = shutdown_lines(make_server, tmp_path, [vfs(1, "vfs")], ["vfs"], reloads=3)
    dcache_reloaded = shutdown_lines(make_server, tmp_path,
                                     [dcache(2, "d2", IO_Cache_Read="direct", IO_Cache_Write="direct")], ["d2"],
                                     reloads=3)
    print(f"after 3 reloads, VFS-only: {vfs_reloaded or '(none)'}; DCACHE-only: {dcache_reloaded or '(none)'}")
    assert not [line for line in dcache_reloaded if "FSAL VFS" in line], \
        f"after 3 reloads a DCACHE-only server leaves references to FSAL VFS behind: {dcache_reloaded}"
    assert [line.replace("FSAL VFS", "FSAL X") for line in vfs_reloaded] == \
        [line.replace("FSAL DCACHE", "FSAL X") for line in dcache_reloaded], \
        "after 3 reloads a DCACHE-only server leaves other references than the VFS-only control's: " \
        f"{dcache_reloaded} against {vfs_reloaded}"


def test_get_fsal_stats_leaves_nothing_behind(make_server, tmp_path, vfs_lines):
    lines = shutdown_lines(make_server, tmp_path, DCACHE_EXPORTS, ["vfs", "d40", "d41", "d42", "d43"], stats=3)
    extra = sorted(set(lines) - set(vfs_lines))
    assert not extra, f"after three GetFSALStats the shutdown logged what the VFS-only one does not: {extra}"
