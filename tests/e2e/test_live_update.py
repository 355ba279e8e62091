"""Live reconfiguration: a DCACHE export's settings change with SIGHUP,
without a restart, and a bad value on reload is refused while the export
keeps serving with the settings it had.

The evidence is the plugin's own counters: nfs-cp writes UNSTABLE over
NFSv3, so WRITEs answered FILE_SYNC ("raised") appear only once
IO_Cache_Write = direct_file_sync is in force.
"""

import os

from dcache_testbed import nfs
from dcache_testbed.exports import dcache, vfs

UPDATED = r"Export 2 updated|update refused"


def write(srv, tmp_path, name):
    data = os.urandom(3000000)
    local = tmp_path / "data"
    local.write_bytes(data)
    assert nfs.put(srv, str(local), f"dcache/{name}"), f"writing {name} through /dcache"
    with open(os.path.join(srv.mnt, "dcache", name), "rb") as f:
        assert f.read() == data, f"{name} on the server's filesystem differs"


def test_settings_change_live_and_a_bad_value_is_refused(server, tmp_path):
    write(server, tmp_path, "before")
    assert server.counters(2).writes_raised_stable == 0, "buffered raised WRITEs to FILE_SYNC"

    exports = [vfs(1, "vfs"), dcache(2, "dcache", IO_Cache_Write="direct_file_sync", IO_Workers_Max=1)]
    log = server.reload(UPDATED, exports)
    assert "updated: " in log and "IO_Cache_Write = direct_file_sync" in log, "no 'updated' line naming it"
    assert "IO_Workers_Max = 1" in log and "IO_Workers_Max = 1 not applied" not in log, \
        "IO_Workers_Max = 1 was not applied live"
    write(server, tmp_path, "after")
    after = server.counters(2)
    assert after.writes_raised_stable > 0, "no WRITE raised after the reload: not in force without a restart"
    assert after.syncs_fsync >= after.writes_raised_stable, "fewer fsyncs than WRITEs raised"

    exports[1] = exports[1].with_settings(IO_Cache_Write="fastest")
    log = server.reload(UPDATED, exports)
    assert 'IO_Cache_Write = "fastest" is not valid; allowed: ' in log \
        and "update refused, the export keeps its current settings" in log, "the bad value is not refused by name"
    write(server, tmp_path, "bad")
    assert server.counters(2).writes_raised_stable > after.writes_raised_stable, \
        "a refused update changed the settings in force"
    assert server.ganesha.alive(), "the server stopped"
