"""No export escape (escape/): ".." (NFSv3 LOOKUP) and LOOKUPP (NFSv4) stop
at an export's root, for DCACHE exports and the plain VFS export alike,
probed with raw libnfs RPCs against a real server.

  escape        dcache_e2e_escape: from the roots and subdirectories of
                /vfs, /dcache, a DCACHE export nested in /dcache and two
                sibling DCACHE exports on one filesystem, also with the
                root's handle re-encoded
  escape_churn  dcache_e2e_escape_churn: the same probes after forcing bad
                states (the export root renamed or replaced from the host,
                MDCACHE churned past its high-water mark, stale handles)
                and with handles relabelled between DCACHE exports

The MDCACHE is kept small (200 entries) so that the churn's traffic evicts
what the probes need.
"""

import pytest

from dcache_testbed import gtest
from dcache_testbed.exports import dcache, default_exports

EXPORTS = default_exports() + [
    dcache(3, "dcache/inner", "/dcache/inner"),  # nested in /dcache's tree
    dcache(4, "sib1"),  # siblings on the same filesystem
    dcache(5, "sib2"),
]
SMALL_MDCACHE = "MDCACHE { Entries_HWMark = 200; }"


@pytest.mark.parametrize("program", ["escape", "escape_churn"])
def test_escape(make_server, build, program):
    srv = make_server(exports=EXPORTS, conf_extra=SMALL_MDCACHE)
    gtest.run(srv, [build.bin(f"dcache_e2e_{program}")])
