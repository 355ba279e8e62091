"""The data path through a real server (dcache_e2e_data, data_test.cpp):
sizes, offsets, holes, truncates and concurrent clients, read back and
compared, on /vfs and /dcache, and over one DCACHE export per cache mode of
the data path, on io_uring (the default) and on the synchronous backend."""

import pytest

from dcache_testbed.exports import dcache, default_exports

DATA_MODES = [
    dcache(11, "dcache_dontcache", IO_Cache_Read="dontcache", IO_Cache_Write="dontcache"),
    dcache(12, "dcache_fadvise", IO_Cache_Read="fadvise", IO_Cache_Write="fadvise"),
    dcache(13, "dcache_direct", IO_Cache_Read="direct", IO_Cache_Write="direct"),
    dcache(14, "dcache_direct_file_sync", IO_Cache_Read="direct", IO_Cache_Write="direct_file_sync",
           Direct_Misaligned_Num_Pages=2, Direct_Misaligned_Dontcache="true"),
]


@pytest.mark.parametrize("exports,backend", [
    pytest.param("default", None, id="default"),
    pytest.param("modes", None, id="modes"),
    pytest.param("modes", "sync", id="modes_sync"),
])
def test_data(make_server, build, exports, backend):
    env = {}
    if exports == "modes":
        env["DCACHE_E2E_DATA_EXPORTS"] = ",".join(e.pseudo for e in DATA_MODES)
        srv = make_server(exports=default_exports() + DATA_MODES, backend=backend)
    else:
        srv = make_server()
    srv.run([build.bin("dcache_e2e_data")], env=env)
