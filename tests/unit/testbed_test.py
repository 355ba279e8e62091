"""The testbed's pure parts (tools/dcache_testbed): the EXPORT block
builder, the release table's reader, the counters."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
# pylint: disable=wrong-import-position
from dcache_testbed import exports, releases, stats  # noqa: E402


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
