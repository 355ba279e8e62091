"""A nearly full filesystem (dcache_e2e_nospace, modes/nospace_test.cpp):
every cache mode answers a client's WRITEs as plain VFS does, what fits and
then NFS3ERR_NOSPC, and keeps every byte it acknowledged. The program fills
the server's filesystem to the same free space before each export's turn,
/vfs and the DCACHE export of each mode (the modes tests' exports)."""

from dcache_testbed import gtest
from dcache_testbed.exports import default_exports, mode_exports


def test_nospace(make_server, build):
    srv = make_server(exports=default_exports() + mode_exports(31, "m_"))
    gtest.run(srv, [build.bin("dcache_e2e_nospace")])
