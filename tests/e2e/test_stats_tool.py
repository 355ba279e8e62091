"""tools/dcache-stats against a real server: the counters it prints are the
plugin's (bytes moved through /dcache by a real client), --reset zeroes
them, and without a reachable bus it fails with a clear message."""

import os
import re
import subprocess

import pytest

from dcache_testbed import nfs, stats

SIZE = 2000000


@pytest.fixture(scope="module")
def server(make_module_server):
    """One server with /vfs (1) and /dcache (2) for both tests."""
    return make_module_server()


def tool(srv, *args, env=None):
    return srv.run([stats.TOOL, *args], check=False, quiet=True, env=env, timeout=60)


def test_the_counters_are_the_plugins_and_reset_zeroes_them(server, tmp_path):
    data = os.urandom(SIZE)
    local = tmp_path / "data"
    local.write_bytes(data)
    assert nfs.put(server, str(local), "dcache/stats"), "writing 2000000 bytes through /dcache"
    assert nfs.get(server, "dcache/stats") == data, "the 2000000 bytes do not read back through /dcache"

    res = tool(server, "--json")
    assert res.returncode == 0, f"--json exited {res.returncode}: {res.stderr}"
    counters = stats.parse(res.stdout).get(2, stats.Counters({}))
    assert counters.write_bytes == SIZE, f"write_bytes = {counters.write_bytes}, not {SIZE}"
    assert counters.read_bytes == SIZE, f"read_bytes = {counters.read_bytes}, not {SIZE}"

    table = tool(server, "--export", "2")
    assert table.returncode == 0 and re.search(r"^  write +[0-9]+ +avg", table.stdout, re.M), \
        f"the table shows no WRITE service times: {table.stdout}{table.stderr}"

    # a reader that is gone before the tool writes
    read_end, write_end = os.pipe()
    os.close(read_end)
    with os.fdopen(write_end, "wb") as closed:
        res = subprocess.run(server.ns.argv([stats.TOOL, "--export", "2"]), stdout=closed, stderr=subprocess.PIPE,
                             env=dict(os.environ, **server.env()), timeout=60, check=False)
    assert res.returncode == 0 and not res.stderr, \
        f"output into a closed pipe: exit {res.returncode}, {res.stderr.decode(errors='replace')}"

    res = tool(server, "--export", "1", "--json")
    assert res.stdout.strip() == "{}", f"export 1 (plain VFS) has DCACHE counters: {res.stdout}"

    assert tool(server, "--reset").returncode == 0, "--reset failed"
    after = server.counters(2).write_bytes
    assert after == 0, f"after --reset write_bytes = {after}"


def test_without_a_bus_the_error_is_clear(server):
    res = tool(server, env={"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent"})
    assert res.returncode != 0, "dcache-stats succeeded without a bus"
    assert "cannot reach ganesha.nfsd over DBus" in res.stderr, f"the error says: {res.stderr}"
