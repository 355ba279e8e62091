"""Acknowledged data survives a crash (dcache_e2e_crash, modes/crash_tool.cpp):
what the server acknowledged as durable (FILE_SYNC answers to UNSTABLE
WRITEs in direct_data_sync and direct_file_sync, the client's own FILE_SYNC
WRITEs in buffered, dontcache and direct, COMMITs of UNSTABLE WRITEs)
survives an XFS shutdown that does not flush (`xfs_io -x -c shutdown`, no
-f); uncommitted UNSTABLE data is reported as a control.

Two servers run one after the other on one image kept between them
(Server(image=...)): the first writes, the tool recording every record in
a manifest, then XFS is shut down under it; the second mounts the image
(XFS log recovery) and the tool checks every acknowledged record byte for
byte, through NFS and in the backing files.
"""

import os
import shutil

from dcache_testbed.exports import default_exports, mode_exports
from dcache_testbed.server import Server

EXPORTS = default_exports() + mode_exports(31, "m_")


def write_and_shut_down(tool, image, manifest):
    """Phase 1, on a server of its own, not judged when it stops: it cannot
    flush a shut-down filesystem."""
    srv = Server(exports=EXPORTS, image=image)
    try:
        srv.start()
        res = srv.run([tool, "write", manifest], check=False)
        assert res.returncode == 0, f"phase 1: dcache_e2e_crash write exited {res.returncode}: {res.stderr.strip()}"
        res = srv.run(["xfs_io", "-x", "-c", "shutdown", srv.mnt], check=False)
        assert res.returncode == 0, f"phase 1: xfs_io could not shut XFS down: {res.stderr.strip()}"
    except BaseException:
        if srv.state and os.path.exists(srv.log_path):
            print(srv.log_tail())
        raise
    finally:
        status = srv.stop()
        print(f"phase 1: ganesha.nfsd ended with status {status} on the shut-down filesystem (not judged)")


def test_modes_crash(make_server, build, tmp_path):
    assert shutil.which("xfs_io"), "xfs_io not found (xfsprogs: ci/setup.sh)"
    tool = build.bin("dcache_e2e_crash")
    image, manifest = str(tmp_path / "xfs.img"), str(tmp_path / "manifest")
    write_and_shut_down(tool, image, manifest)
    assert os.path.exists(manifest) and os.path.getsize(manifest) > 0, "phase 1 did not complete: no manifest"

    srv = make_server(exports=EXPORTS, image=image)
    res = srv.run([tool, "verify", manifest, srv.mnt], check=False)
    assert res.returncode == 0, ("phase 2: acknowledged data damaged or lost after the shutdown"
                                 if res.returncode == 1 else f"phase 2: dcache_e2e_crash verify exited "
                                 f"{res.returncode}: {res.stderr.strip()}")
    assert srv.ganesha.alive(), "phase 2: ganesha.nfsd died while the data was verified"
