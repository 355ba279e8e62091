"""The server variants a suite runs over: filesystem x I/O backend x
RWF_DONTCACHE, as pytest parameters.

    @pytest.mark.parametrize("variant", matrix.variants(), ids=str)
    def test_x(make_server, variant):
        srv = make_server(exports=..., **variant.server_args())

A variant's id, "xfs-io_uring-rwf_dontcache", is what a ctest name selects
(pytest -k "test_x[xfs-io_uring-rwf_dontcache]"); no id is a substring of
another's once bracketed.
"""

import itertools
from dataclasses import dataclass

FILESYSTEMS = ("xfs", "ext4", "btrfs")
BACKENDS = ("io_uring", "sync")
# the plugin takes RWF_DONTCACHE as refused, as kernels before 6.14 refuse it
NO_RWF_DONTCACHE = {"DCACHE_TEST_NO_RWF_DONTCACHE": "1"}


@dataclass(frozen=True)
class Variant:
    """fs: the server's filesystem; backend: IO_Backend of the DCACHE
    exports (io_uring, the default, is left unwritten); rwf_dontcache:
    False to have the plugin take RWF_DONTCACHE as refused (btrfs refuses
    it anyway, and XFS and ext4 before 6.14)."""

    fs: str = "xfs"
    backend: str = "io_uring"
    rwf_dontcache: bool = True

    def __str__(self):
        return f"{self.fs}-{self.backend}-{'' if self.rwf_dontcache else 'no_'}rwf_dontcache"

    def server_args(self):
        """The Server arguments that make this variant."""
        return {"fs": self.fs, "backend": None if self.backend == "io_uring" else self.backend,
                "ganesha_env": {} if self.rwf_dontcache else dict(NO_RWF_DONTCACHE)}


def variants():
    """Every variant, XFS on io_uring with RWF_DONTCACHE first."""
    return [Variant(fs, backend, dontcache)
            for fs, backend, dontcache in itertools.product(FILESYSTEMS, BACKENDS, (True, False))]
