"""Client credentials through a DCACHE export (dcache_e2e_creds,
creds/creds_test.cpp): a WRITE from NFS client uid/gid 1000 runs with the
client's credentials on a DCACHE export writing O_DIRECT on io_uring, where
a misaligned WRITE is split (buffered head, direct middle, buffered tail)
and its later segments are submitted from the ring's completion thread, as
it does on the plain VFS export: the setuid bit cleared, the data there,
created files owned by 1000."""

from dcache_testbed import gtest
from dcache_testbed.exports import dcache, default_exports

DIRECT = dcache(41, "dcache_direct", IO_Cache_Write="direct", IO_Backend="io_uring")


def test_creds(make_server, build):
    srv = make_server(exports=default_exports() + [DIRECT])
    gtest.run(srv, [build.bin("dcache_e2e_creds")])
