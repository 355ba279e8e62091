"""The testbed's pure parts (tools/dcache_testbed): the EXPORT block
builder, the release table's reader, the counters, the gtest
runner's verdict, the server variants."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
# pylint: disable=wrong-import-position
from dcache_testbed import cgroups, exports, freshroot, gtest, matrix, releases, stats  # noqa: E402


def test_a_dcache_export_stacks_on_vfs_with_its_settings_in_order():
    block = exports.dcache(2, "dcache", IO_Cache_Read="direct", IO_Queue_Depth=8).block("/m")
    assert block == (
        "EXPORT {\n"
        '  Export_Id = 2; Path = "/m/dcache"; Pseudo = /dcache;\n'
        f"  {exports.ACCESS}\n"
        "  FSAL {\n"
        "    Name = DCACHE;\n"
        "    IO_Cache_Read = direct;\n"
        "    IO_Queue_Depth = 8;\n"
        "    FSAL { Name = VFS; }\n"
        "  }\n"
        "}\n")


def test_a_vfs_export_has_no_nested_block_and_an_absolute_path_stays():
    block = exports.vfs(1, "/srv/x", "/y").block("/m")
    assert 'Path = "/srv/x"; Pseudo = /y;' in block
    assert block.count("FSAL {") == 1 and "Name = VFS;" in block


def test_the_backend_goes_to_dcache_exports_that_set_none():
    assert "IO_Backend = sync;" in exports.dcache(2, "d").block("/m", backend="sync")
    assert "IO_Backend = io_uring;" in exports.dcache(2, "d", IO_Backend="io_uring").block("/m", backend="sync")
    assert "IO_Backend" not in exports.vfs(1, "v").block("/m", backend="sync")


def test_mistakes_are_written_where_asked():
    e = exports.Export(5, "s5", fsal_text="IO_Cache_Wrte = direct;", export_text="IO_Cache_Read = x;",
                       sub_text="IO_Cache_Write = y;")
    block = e.block("/m")
    assert "  IO_Cache_Read = x;\n  FSAL {" in block
    assert "    IO_Cache_Wrte = direct;\n    FSAL { Name = VFS; IO_Cache_Write = y; }" in block
    assert "FSAL { }" in exports.Export(6, "s6", sub_fsal="").block("/m")
    assert exports.Export(7, "s7", sub_fsal=None).block("/m").count("FSAL {") == 1


def test_with_settings_replaces_and_keeps_the_original():
    e = exports.dcache(2, "d", IO_Cache_Write="direct")
    f = e.with_settings(IO_Cache_Write="buffered", IO_Workers_Max=1)
    assert e.settings == {"IO_Cache_Write": "direct"}
    assert f.settings == {"IO_Cache_Write": "buffered", "IO_Workers_Max": 1}


def test_mode_exports_are_the_modes_tests_ids_and_names():
    m = exports.mode_exports(31, "m_")
    assert [(e.export_id, e.name) for e in m[:2]] == [(31, "m_buffered"), (32, "m_dontcache")]
    t = exports.mode_exports(41, "t_", count=6, base="/tmpfs")
    assert len(t) == 6 and t[-1].export_id == 46 and t[-1].path == "/tmpfs/t_direct_file_sync"


def test_the_release_table_reader_refuses_a_short_row(tmp_path):
    table = tmp_path / "releases.tsv"
    table.write_text("# comment\nrelease\tx\n4.3\t4.3-2\t11\n")
    with pytest.raises(ValueError, match="3 columns, not 12"):
        releases.read_table(str(table))
    with pytest.raises(LookupError, match="DCACHE builds for 4.3, 6.5, 9.14"):
        releases.select("1.0")


def test_counters_read_as_objects_with_zero_for_what_was_not_counted():
    every = stats.parse('{"2": {"writes": 3, "write": [3, 0.1, 0.1, 0.2]}}')
    c = every[2]
    assert c.writes == 3 and c["writes"] == 3 and c.reads == 0
    assert (stats.Counters({"writes": 5}) - c).writes == 2


def test_a_command_runs_chrooted_in_a_release_root_only_where_there_is_one():
    table = releases.read_table()
    assert releases.host_release(table).chroot_argv(["dcache-check", "-v", "c"], binds=["/x"]) == \
        ["dcache-check", "-v", "c"]
    r = next(r for r in table if r.root)
    argv = r.chroot_argv(["dcache-check", "-v", "c"], binds=["/x", "/y"])
    assert argv[:2] == ["env", "PYTHONPATH=" + os.path.join(r.top, "tools")]
    assert argv[2:6] == ["unshare", "--mount", "--propagation", "private"]
    assert argv[-11:] == ["dcache_testbed.inroot", "--root", r.root, "--bind", "/x", "--bind", "/y", "--",
                          "dcache-check", "-v", "c"]


def test_gtest_failures_are_named_once_without_the_summary_line():
    out = ("[ RUN      ] escape/escape.V3DotDot/vfs\n"
           "[  FAILED  ] escape/escape.V3DotDot/vfs, where GetParam() = 8-byte object <01-00> (5 ms)\n"
           "[  FAILED  ] creds.Write (3 ms)\n"
           "[  FAILED  ] 2 tests, listed below:\n"
           "[  FAILED  ] escape/escape.V3DotDot/vfs, where GetParam() = 8-byte object <01-00>\n"
           "[  FAILED  ] creds.Write\n")
    assert gtest.failures(out) == ["escape/escape.V3DotDot/vfs", "creds.Write"]
    assert gtest.verdict("t", 1, out) == "t exited with status 1; failed: escape/escape.V3DotDot/vfs, creds.Write"
    assert gtest.verdict("t", 0, "", server_alive=False) == "ganesha.nfsd died while t ran"
    assert gtest.verdict("t", 0, out) == ""


def test_variants_are_the_whole_matrix_with_distinct_bracketed_ids():
    ids = [f"[{v}]" for v in matrix.variants()]
    assert len(ids) == 12 and ids[0] == "[xfs-io_uring-rwf_dontcache]"
    assert not [a for a in ids for b in ids if a != b and a in b], "one id selects another's test"
    assert matrix.Variant().server_args() == {"fs": "xfs", "backend": None, "ganesha_env": {}}
    assert matrix.Variant("btrfs", "sync", False).server_args() == {
        "fs": "btrfs", "backend": "sync", "ganesha_env": {"DCACHE_TEST_NO_RWF_DONTCACHE": "1"}}


def test_a_server_with_a_grace_period_has_its_nfsv4_lines_instead_of_graceless():
    from dcache_testbed import server  # pylint: disable=import-outside-toplevel
    r = releases.host_release()
    assert "  Graceless = true;\n" in server.core_conf(r, "/s", "/s/log", "/p")
    text = server.core_conf(r, "/s", "/s/log", "/p", nfsv4_lines=("Graceless = false;", "Grace_Period = 5;"))
    assert "Graceless = true" not in text and "NFSV4 {\n  Graceless = false;\n  Grace_Period = 5;\n" in text


def test_heads_and_ceph_addresses_are_on_the_test_network():
    from dcache_testbed import ceph, heads  # pylint: disable=import-outside-toplevel
    assert [heads.head_ip(n) for n in (1, 3)] == ["192.0.2.11", "192.0.2.13"]
    conf = ceph.ceph_conf("/d", "f-s-i-d", "192.0.2.2")
    assert "mon host = [v2:192.0.2.2:3300,v1:192.0.2.2:6789]\n" in conf and "public network = 192.0.2.0/24\n" in conf
    assert "keyring = /d/$cluster.$name.keyring" in conf and "osd objectstore = memstore" in conf


MOUNTINFO = """\
22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 25 0:31 / /sys/fs/cgroup/net\\040cls rw,relatime - cgroup cgroup rw,net_cls,net_prio
36 25 0:32 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_a_cgroup_hierarchy_is_found_by_its_controller_in_mountinfo():
    assert cgroups.hierarchy("memory", MOUNTINFO) == "/sys/fs/cgroup/memory"
    assert cgroups.hierarchy("net_prio", MOUNTINFO) == "/sys/fs/cgroup/net cls"
    assert cgroups.hierarchy("blkio", MOUNTINFO) == "", "no blkio hierarchy is mounted"
    assert cgroups.hierarchy("cpuacct", MOUNTINFO) == "", "cpu's hierarchy is not cpuacct's"


def test_a_fresh_root_takes_the_archive_of_this_machines_own_suite():
    sources = ("Types: deb deb-src\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n\n"
               "Types: deb deb-src\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\n"
               "Components: main\n")
    assert freshroot.archive_uri("bookworm", sources) == "http://mirror.example/debian"
    assert freshroot.archive_uri("trixie", sources) == ""
    listed = "deb-src http://a/debian bookworm main\ndeb [arch=amd64] http://b/debian/ bookworm main\n"
    assert freshroot.archive_uri("bookworm", "", listed) == "http://b/debian"
    assert freshroot.archive_uri("bookworm", "Types: deb-src\nURIs: http://c\nSuites: bookworm\n", listed) \
        == "http://b/debian"
