"""The cache modes end to end (dcache_e2e_modes, modes/modes_test.cpp and
modes_stability_test.cpp): data integrity in every mode over NFSv3 and v4,
page-cache residency after WRITE+COMMIT and after READ, stability answers
and fallbacks, through one real ganesha.nfsd with one DCACHE export per mode
on the server's filesystem (m_*, ids 31-38) and the same modes on a tmpfs
(t_*, ids 41-46; no RWF_DONTCACHE, no STATX_DIOALIGN: the fallbacks). The
ids and names are modes.hpp's (k_exports).

One test over filesystem x backend x RWF_DONTCACHE (dcache_testbed.matrix);
ctest runs five of them:
  e2e_modes               XFS, io_uring, RWF_DONTCACHE as the kernel has it
  e2e_modes_sync          XFS, the synchronous backend
  e2e_modes_ext4, _btrfs  ext4 and btrfs (btrfs refuses RWF_DONTCACHE and
                          reports no statx DIOALIGN)
  e2e_modes_no_dontcache  XFS with RWF_DONTCACHE refused, as kernels before
                          6.14 refuse it: the same residency bounds per mode

Ganesha 6.x and later never export a tmpfs (their VFS skips tmpfs mounts):
there the tmpfs exports are left out and the program skips their tests,
saying why (DCACHE_TMPFS_WHY).
"""

import subprocess

import pytest

from dcache_testbed import gtest, matrix
from dcache_testbed.exports import default_exports, mode_exports
from dcache_testbed.server import unmount


@pytest.fixture
def tmpfs(tmp_path, release):
    """A 256 MiB tmpfs for the t_* exports, mounted before the server starts
    (the server's mount namespace is a copy of ours); None where the
    release does not export a tmpfs."""
    if release.tmpfs_refused:
        yield None
        return
    path = tmp_path / "tmpfs"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m,mode=755", "dcache-modes-tmpfs", str(path)],
                   check=True)
    yield str(path)
    unmount(str(path))


@pytest.mark.parametrize("variant", matrix.variants(), ids=str)
def test_modes(tmpfs, make_server, build, release, variant):
    exports = default_exports() + mode_exports(31, "m_")
    if tmpfs:
        exports += mode_exports(41, "t_", count=6, base=tmpfs)
        env = {"DCACHE_TMPFS": tmpfs}
    else:
        print(f"{release.tmpfs_refused}: the tmpfs exports are left out")
        env = {"DCACHE_TMPFS_WHY": release.tmpfs_refused}
    srv = make_server(exports=exports, **variant.server_args())
    gtest.run(srv, [build.bin("dcache_e2e_modes")], env=env)
