"""dcache-exporter's mapping of the DBus statistics onto the metrics table
(tools/dcache_metrics.py), with canned GetFSALStats replies: the series,
labels and values it serves, and that it reads core/metrics.def as the
module's core does (the core's reading comes from metrics_dump, path in
DCACHE_METRICS_DUMP)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[3]
TOOLS = TOP / "tools"
sys.path.insert(0, str(TOOLS))

import dcache_dbus  # noqa: E402
import dcache_metrics  # noqa: E402

REPLY = Path(__file__).with_name("getfsalstats_reply.txt")


def reply(entries, message="OK"):
    """A dbus-send --print-reply rendering of GetFSALStats's answer."""
    lines = ["method return time=1764990000.000000 sender=:1.1 -> destination=:1.2 serial=9 reply_serial=2",
             "   boolean true", '   string "OK"', "   struct {", "      uint64 1764990000",
             "      uint64 123456789", "   }", '   string "DCACHE"', "   array ["]
    for name, count, avg, low, high in entries:
        lines += ["      struct {", f'         string "{name}"', f"         uint64 {count}",
                  f"         double {avg}", f"         double {low}", f"         double {high}", "      }"]
    lines += ["   ]", f'   string "{message}"']
    return "\n".join(lines) + "\n"


def counter(name, value):
    return (name, value, 0, 0, 0)


# Export 2: 3 READs through dontcache (two within 10 us, one of 40 us);
# export 3: 2 WRITEs through direct; a counter no row names; a left-out one.
CANNED = [
    ("export_2.read", 3, 0.02, 0.005, 0.04),
    counter("export_2.read.le_10", 2),
    counter("export_2.read.le_50", 1),
    counter("export_2.reads", 3),
    counter("export_2.read_dontcache", 3),
    counter("export_2.read_bytes", 12288),
    counter("export_2.read_dontcache_bytes", 12288),
    counter("export_2.dontcache_bytes", 12288),
    counter("export_2.read_mode_dontcache", 1),
    counter("export_2.write_mode_buffered", 1),
    counter("export_2.places", 32),
    counter("export_2.backend_io_uring", 1),
    counter("export_2.boundary_max_pages", 4096),
    ("export_3.write", 2, 1.5, 1.0, 2.0),
    counter("export_3.write.le_1000", 1),
    counter("export_3.write.le_2500", 1),
    counter("export_3.write_direct", 2),
    counter("export_3.write_bytes", 2097152),
    counter("export_3.write_direct_bytes", 2097152),
    counter("export_3.read_mode_buffered", 1),
    counter("export_3.write_mode_direct", 1),
    counter("export_3.places", 32),
    counter("export_3.places_taken", 1),
    counter("export_3.boundary_pages_current", 7),
    counter("export_3.fallback_no_dontcache", 1),
    counter("export_3.auto_stream", 5),
    counter("export_3.brand_new_counter", 9),
]


@pytest.fixture(scope="module")
def table():
    return dcache_metrics.Table()


def scrape(table, text):
    """The exposition dcache-exporter serves for this reply."""
    from prometheus_client import CollectorRegistry, generate_latest
    sys.path.insert(0, str(TOOLS))
    exporter = _exporter_module()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter.Collector(table, get_stats=lambda: dcache_dbus.parse(text)))
    return generate_latest(registry).decode()


def _exporter_module():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("dcache_exporter", str(TOOLS / "dcache-exporter"))
    spec = importlib.util.spec_from_loader("dcache_exporter", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def series(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def lab(**kw):
    return frozenset(kw.items())


def test_the_table_is_read_as_the_core_reads_it(table):
    core = core_dump()
    assert core["series"], "the core publishes series"
    for s in core["series"]:
        kind, metric, values = table.resolve(s["value"])
        assert kind in ("series", "unmatched"), s
        assert metric.name == s["name"], s
        assert metric.type == s["type"], s
        assert list(zip(metric.keys, values)) == [tuple(kv) for kv in s["labels"]], s
    for v in core["left_out"]:
        assert table.resolve(v)[0] == "left_out", v
    assert table.bounds_us == core["bounds_us"]


def core_dump():
    dump = os.environ.get("DCACHE_METRICS_DUMP")
    assert dump, "DCACHE_METRICS_DUMP must name the metrics_dump program (ctest sets it)"
    return json.loads(subprocess.run([dump], check=True, capture_output=True, text=True).stdout)


def test_the_names_are_those_ganesha_serves_from_the_module(table):
    """Ganesha's endpoint shows every metric the module registers (one
    series even when all are zero): the exporter serves the same names
    from an export that counted anything."""
    want = {"dcache_exporter_ganesha_up"}
    for s in core_dump()["series"]:
        want |= {s["name"] + x for x in ("_bucket", "_sum", "_count")} if s["type"] == "histogram" else {s["name"]}
    got = {name for name, _ in series(scrape(table, reply([counter("export_5.backend_io_uring", 1)])))}
    assert got == want
    got = {name for name, _ in series(scrape(table, reply(CANNED)))}
    assert got == want | {"dcache_auto_decisions_total", "dcache_brand_new_counter_total"}


def test_counters_carry_export_op_and_disposition_as_ganesha_writes_export(table):
    got = series(scrape(table, reply(CANNED)))
    assert got[("dcache_requests_total", lab(export="export_id=2", op="read", disposition="dontcache"))] == 3
    assert got[("dcache_requests_total", lab(export="export_id=3", op="write", disposition="direct"))] == 2
    assert got[("dcache_bytes_total", lab(export="export_id=3", op="write"))] == 2097152
    assert got[("dcache_io_bytes_total", lab(export="export_id=2", op="read", path="dontcache"))] == 12288
    assert got[("dcache_fallbacks_total", lab(export="export_id=3", reason="no_dontcache"))] == 1
    assert got[("dcache_exporter_ganesha_up", lab())] == 1


def test_left_out_values_and_zero_counters_are_not_served(table):
    text = scrape(table, reply(CANNED))
    names = {name for name, _ in series(text)}
    assert "dcache_reads_total" not in names, "reads is the sum of dcache_requests_total"
    assert "dcache_dontcache_bytes_total" not in names
    assert ("dcache_requests_total", lab(export="export_id=2", op="write", disposition="buffered")) not in series(text)


def test_rows_to_come_and_counters_without_a_row_get_a_metric(table):
    got = series(scrape(table, reply(CANNED)))
    assert got[("dcache_auto_decisions_total", lab(export="export_id=3", reason="stream"))] == 5
    assert got[("dcache_brand_new_counter_total", lab(export="export_id=3"))] == 9


def test_every_gauge_of_every_export_is_served_zero_when_dbus_skips_it(table):
    got = series(scrape(table, reply(CANNED)))
    for export in ("export_id=2", "export_id=3"):
        for value, metric, values in table.gauge_rows():
            assert (metric.name, lab(export=export, **dict(zip(metric.keys, values)))) in got, (export, value)
    mode = {k: v for k, v in got.items() if k[0] == "dcache_export_mode" and ("export", "export_id=2") in k[1]}
    assert sum(mode.values()) == 2, "one read mode and one write mode"
    assert mode[("dcache_export_mode", lab(export="export_id=2", op="read", mode="dontcache"))] == 1
    assert mode[("dcache_export_mode", lab(export="export_id=2", op="write", mode="buffered"))] == 1
    assert mode[("dcache_export_mode", lab(export="export_id=2", op="write", mode="direct"))] == 0, \
        "skipped on DBus (0): served as 0"
    assert got[("dcache_places_taken", lab(export="export_id=3"))] == 1
    assert got[("dcache_places_taken", lab(export="export_id=2"))] == 0
    assert got[("dcache_boundary_held_pages", lab(export="export_id=3"))] == 7
    assert got[("dcache_boundary_max_pages", lab(export="export_id=2"))] == 4096


def test_latency_histograms_have_every_bucket_cumulative_and_the_sum_in_microseconds(table):
    text = scrape(table, reply(CANNED))
    got = series(text)
    name = "dcache_request_duration_microseconds"
    read = {dict(k[1]).get("le"): v for k, v in got.items()
            if k[0] == name + "_bucket" and ("export", "export_id=2") in k[1]}
    assert len(read) == len(table.bounds_us) + 1
    assert read["10"] == 2 and read["25"] == 2 and read["50"] == 3 and read["+Inf"] == 3
    assert got[(name + "_count", lab(export="export_id=2", op="read"))] == 3
    assert got[(name + "_sum", lab(export="export_id=2", op="read"))] == pytest.approx(60)
    assert f"# TYPE {name} histogram" in text
    assert not any(k[0].startswith(name) and ("op", "commit") in k[1] for k in got), "no COMMIT yet: no series"


def test_ganesha_unreachable_is_up_zero_and_no_series(table):
    exporter = _exporter_module()
    from prometheus_client import CollectorRegistry, generate_latest

    def fail():
        raise RuntimeError("Failed to connect to socket")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter.Collector(table, get_stats=fail))
    got = series(generate_latest(registry).decode())
    assert got == {("dcache_exporter_ganesha_up", lab()): 0}
    disabled = 'method return time=1 sender=:1.1 -> destination=:1.2 serial=9 reply_serial=2\n' \
        '   boolean false\n   string "FSAL stat counting disabled"\n'
    got = series(scrape(table, disabled))
    assert got == {("dcache_exporter_ganesha_up", lab()): 0}


@pytest.fixture()
def fake_dbus_send(tmp_path, monkeypatch):
    """A dbus-send on PATH that prints a canned reply."""
    out = tmp_path / "reply.txt"
    out.write_text(reply(CANNED))
    tool = tmp_path / "dbus-send"
    tool.write_text(f"#!/bin/sh\ncat '{out}'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    return out


def test_the_commands_read_dbus_the_same_way(fake_dbus_send, table):
    once = subprocess.run([sys.executable, str(TOOLS / "dcache-exporter"), "--once"],
                          check=True, capture_output=True, text=True).stdout
    assert series(once) == series(scrape(table, reply(CANNED)))
    stats = json.loads(subprocess.run([sys.executable, str(TOOLS / "dcache-stats"), "--json"],
                                      check=True, capture_output=True, text=True).stdout)
    assert stats["2"]["read_dontcache"] == 3
    assert not any("." in k for e in stats.values() for k in e), "dcache-stats shows no bucket entries"


def test_installed_they_find_their_modules_and_write_nothing_beside_them(fake_dbus_send, tmp_path):
    """The package's layout: /usr/bin/dcache-*, the modules and the table in
    /usr/share/nfs-ganesha-dcache; run as root, they must not leave
    bytecode there (dpkg --purge would leave the directory behind)."""
    share = tmp_path / "usr" / "share" / "nfs-ganesha-dcache"
    share.mkdir(parents=True)
    (tmp_path / "usr" / "bin").mkdir()
    for name in ("dcache_dbus.py", "dcache_metrics.py"):
        (share / name).write_text((TOOLS / name).read_text())
    (share / "metrics.def").write_text((TOP / "fsal_dcache" / "core" / "metrics.def").read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "DCACHE_METRICS_TABLE")}
    for tool, args, want in (("dcache-exporter", ["--once"], 'export="export_id=2"'),
                             ("dcache-stats", ["--json"], '"read_dontcache": 3')):
        (tmp_path / "usr" / "bin" / tool).write_text((TOOLS / tool).read_text())
        out = subprocess.run([sys.executable, str(tmp_path / "usr" / "bin" / tool), *args], env=env,
                             check=True, capture_output=True, text=True).stdout
        assert want in out, tool
    assert sorted(p.name for p in share.iterdir()) == ["dcache_dbus.py", "dcache_metrics.py", "metrics.def"]


def test_a_real_reply_of_a_4_3_server(table):
    """A GetFSALStats reply recorded from ganesha.nfsd 4.3 (dbus-send
    --print-reply, as dcache_dbus.dbus_call runs it) after 3 MB written and
    read back through a direct and a dontcache export of
    tests/e2e/data_modes_exports.conf."""
    got = series(scrape(table, REPLY.read_text()))
    assert got[("dcache_exporter_ganesha_up", lab())] == 1
    exports = {dict(k[1])["export"] for k in got if "export" in dict(k[1])}
    assert exports, "the recorded reply has DCACHE exports"
    for export in exports:
        reads = got.get(("dcache_bytes_total", lab(export=export, op="read")), 0)
        io = sum(v for k, v in got.items() if k[0] == "dcache_io_bytes_total" and ("export", export) in k[1]
                 and ("op", "read") in k[1])
        assert io >= reads, "every byte READ came through one of the paths (widened direct READs: more)"
    assert got[("dcache_bytes_total", lab(export="export_id=13", op="write"))] == 3000000
    assert got[("dcache_requests_total", lab(export="export_id=11", op="read", disposition="dontcache"))] == 3
    assert got[("dcache_export_mode", lab(export="export_id=14", op="write", mode="direct_file_sync"))] == 1
