"""A bad setting refuses its export, not the server: a server with one
DCACHE export holding a bad value (IO_Cache_Read = fast) and one with an
unknown key (IO_Cache_Wrte) comes up, serves /vfs and /dcache, refuses
exactly the two bad exports, and says in ganesha.log which export, which
setting, which value and what is allowed. The log also shows the module
loaded and /dcache created."""

import os
import re

import pytest

from dcache_testbed import nfs
from dcache_testbed.exports import Export, default_exports

BAD = [Export(21, "bad_value", settings={"IO_Cache_Read": "fast"}),
       Export(22, "bad_key", settings={"IO_Cache_Wrte": "direct"})]


def log_lines(log, *patterns):
    """The log's lines that match every pattern (case-insensitive)."""
    return [line for line in log.splitlines() if all(re.search(p, line, re.I) for p in patterns)]


@pytest.fixture(scope="module")
def srv(make_module_server):
    """One server for every test here: they only look at it."""
    return make_module_server(exports=default_exports() + BAD)


def test_the_good_exports_serve(srv, tmp_path):
    assert srv.ganesha.alive(), f"ganesha.nfsd (pid {srv.pid}) is not running"
    data = os.urandom(100003)
    local = tmp_path / "data"
    local.write_bytes(data)
    for name in ("vfs", "dcache"):
        # written over NFSv3: libnfs 4.0's NFSv4 WRITE cannot carry it
        assert nfs.put(srv, str(local), f"{name}/probe"), f"/{name} refuses a write over NFSv3"
        for version in (3, 4):
            assert nfs.get(srv, f"{name}/probe", version) == data, \
                f"/{name} does not give the 100003 bytes back over NFSv{version}"


def test_the_bad_exports_are_absent(srv):
    root = nfs.ls(srv, "/", 4)
    assert root is not None and re.search(r"\bvfs\b", root) and re.search(r"\bdcache\b", root), \
        f"the NFSv4 pseudo root does not list vfs and dcache: {root!r}"
    for e in BAD:
        assert not re.search(rf"\b{e.name}\b", root), f"/{e.name} appears in the NFSv4 pseudo fs"
        assert nfs.ls(srv, e.name + "/", 3) is None, f"/{e.name} can be mounted over NFSv3"
        assert nfs.ls(srv, e.name + "/", 4) is None, f"/{e.name} can be listed over NFSv4"


@pytest.mark.parametrize("what,patterns", [
    ("a bad value refused, with export, setting, value and choices",
     ["IO_Cache_Read", "export 21|bad_value", '"?fast"?', "buffered", "dontcache", "direct"]),
    ("an unknown key reported", ["IO_Cache_Wrte"]),
    ("the export with an unknown key refused", ["export 22|bad_key", "refused|error"]),
    ("the module loaded", ["DCACHE", "loaded"]),
    ("the export /dcache created", ["DCACHE", "export 2 ", "created"]),
], ids=["bad_value", "unknown_key", "unknown_key_refused", "loaded", "created"])
def test_the_log_says_what_happened(srv, what, patterns):
    log = srv.log()
    found = log_lines(log, *patterns)
    assert found, f"the log has no line for {what} (matching all of {patterns}); " \
        f"lines with {patterns[0]!r}: {log_lines(log, patterns[0])[:3]}"


def test_no_bad_export_is_created(srv):
    created = [line for line in srv.log().splitlines() if re.search(r"DCACHE: export (21|22) .*created", line)]
    assert not created, f"the log says a bad export was created: {created}"
