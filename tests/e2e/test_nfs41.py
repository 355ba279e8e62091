"""NFSv4.1 end to end (dcache_e2e_nfs41, nfs41/nfs41_test.cpp): data and
"no export escape" over sessions, through the project's own NFSv4.1 client
(libnfs 4.0 speaks NFSv4.0 only), against /vfs and /dcache, with the
backing files read on the server's side to check what reached the disk."""

from dcache_testbed import gtest


def test_nfs41(server, build):
    gtest.run(server, [build.bin("dcache_e2e_nfs41")])
