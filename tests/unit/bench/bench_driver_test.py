"""Unit tests of the benchmark driver's pure parts (tools/bench_driver):
the options and their defaults, the shell driver's variables refused
with the option that replaced them, the variants' EXPORT blocks, the
check of whether the module accepts `auto`, a run's log line."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
# pylint: disable=wrong-import-position
from bench_driver import config, main, pressure, runner, variants  # noqa: E402

MiB = 1 << 20


@pytest.fixture(autouse=True)
def no_old_knobs(monkeypatch):
    for k in config.OLD_KNOBS:
        monkeypatch.delenv(k, raising=False)


def test_sizes_are_binary_units_and_bad_ones_say_which_option():
    assert config.to_bytes("256M", "--size") == 256 * MiB
    assert config.to_bytes("1.5G", "--size") == 1536 * MiB
    assert config.to_bytes("64k", "--size") == 65536
    assert config.to_bytes("4096", "--size") == 4096
    with pytest.raises(config.UsageError, match="--pressure-ws 12X: not a size"):
        config.to_bytes("12X", "--pressure-ws")


def test_quick_and_full_defaults():
    full, quick = config.parse([]), config.parse(["--quick"])
    assert (full.size, full.runtime, full.repeats) == (1 << 30, 5, 3)
    assert (quick.size, quick.runtime, quick.repeats) == (256 * MiB, 2, 1)
    assert full.size_of("pressure_limit") == 1 << 30 and quick.size_of("pressure_limit") == 256 * MiB
    assert quick.list_of("pressure_variants") == ["vfs", "dontcache", "direct"]
    assert full.knob("one_export_runs") == "rwf.limit,rwf.whole"
    assert config.parse(["--quick", "--pressure-ws", "16M"]).size_of("pressure_ws") == 16 * MiB
    assert full.variants is None, "the default variants wait for the module's answer about auto"


def test_workload_families_expand_in_order_without_duplicates():
    cfg = config.parse(["--workloads", "mix,pressure,seq_write,one_export"])
    assert cfg.workloads == ["mix"] + config.PRESSURE + config.ONE_EXPORT
    assert config.parse([]).workloads == config.ALL


@pytest.mark.parametrize("argv,message", [
    (["--workloads", "mix,nope"], "unknown workload 'nope'"),
    (["--variants", "vfs,fast"], "unknown variant 'fast'"),
    (["--pressure-variants", "vfs,fast"], "--pressure-variants: unknown variant 'fast'"),
    (["--pressure-runs", "rwf.half"], "'rwf.half' is not KERNEL.MEMORY"),
    (["--repeats", "0"], "--repeats 0: must be a positive integer"),
    (["--pressure-touch", "soon"], "--pressure-touch soon: must be seconds"),
    (["--pressure-ws", "2G"], "--pressure-limit .* must be above the working set"),
    (["--mixed-file", "1G", "--mixed-ws", "64M"], "--mixed-file must not be larger"),
])
def test_bad_options_are_refused_with_the_reason(argv, message):
    with pytest.raises(config.UsageError, match=message):
        config.parse(argv)


def test_the_shell_drivers_variables_name_their_options(monkeypatch):
    monkeypatch.setenv("DCACHE_BENCH_PRESSURE_RUNS", "rwf.limit")
    monkeypatch.setenv("DCACHE_BENCH_DEVICE_BPS", "100M")
    with pytest.raises(config.UsageError) as e:
        config.parse([])
    assert "DCACHE_BENCH_DEVICE_BPS (now --device-bps)" in str(e.value)
    assert "DCACHE_BENCH_PRESSURE_RUNS (now --pressure-runs)" in str(e.value)
    assert config.OLD_KNOBS["DCACHE_BENCH_PRESSURE_WS_BS"] == "--pressure-ws-bs"


def test_every_option_a_knob_names_exists():
    actions = config.parser()._actions  # pylint: disable=protected-access
    known = {a for action in actions for a in action.option_strings}
    assert set(config.OLD_KNOBS.values()) <= known
    assert {"--" + k.replace("_", "-") for k in config.DEFAULTS} <= known


def test_the_variants_exports_are_the_reports_blocks():
    block = variants.export("direct", 26).block("/m")
    assert 'Export_Id = 26; Path = "/m/direct"; Pseudo = /direct;' in block
    assert ("Name = DCACHE;\n    IO_Cache_Read = direct;\n    IO_Cache_Write = direct;\n"
            "    Direct_Misaligned_Memory = bounce;\n    FSAL { Name = VFS; }") in block
    assert "IO_Backend = sync;" in variants.export("dontcache_sync", 24).block("/m")
    assert "IO_Cache_Write = direct_file_sync;" in variants.export("direct_file_sync", 34).block("/m")
    vfs = variants.export("vfs", 20, path="one/vfs").block("/m")
    assert 'Path = "/m/one/vfs"; Pseudo = /vfs;' in vfs and vfs.count("FSAL {") == 1
    assert variants.ids(["vfs", "auto"]) == {"vfs": 20, "auto": 21}
    assert variants.names()[0] == "vfs"
    assert variants.names()[-9:] == ["auto", "auto_direct", "auto_yield", "auto_direct_yield", "auto_yield_1s",
                                     "auto_quiet", "auto_quiet_yield", "auto_spare", "auto_no_yield"]
    assert variants.defaults()[-1] == "auto", "auto's other variants run only when named"
    assert "Auto_Stream_Yield_Ms = 500;" in variants.export("auto_yield", 41).block("/m")
    assert "Auto_Stream_Yield_Ms = 1000;" in variants.export("auto_yield_1s", 43).block("/m")
    assert "Auto_Stream_Yield_Ms = 0;" in variants.export("auto_no_yield", 48).block("/m")
    assert "IO_Cache_Write = auto;\n    Auto_Write_Stream = direct;" in variants.export("auto_direct", 40).block("/m")
    assert "Auto_Write_Stream = direct_when_quiet;" in variants.export("auto_quiet", 42).block("/m")
    assert "Auto_Write_Spare_Memory = cache;" in variants.export("auto_spare", 44).block("/m")


def fake_check(tmp_path, status, line=""):
    check = tmp_path / "dcache-check"
    check.write_text(f"#!/bin/sh\ngrep -q 'IO_Cache_Read = auto;' \"$1\" || exit 9\necho '{line}' >&2\n"
                     f"exit {status}\n")
    check.chmod(0o755)
    return str(check)


def test_whether_the_module_takes_auto_is_asked_of_its_dcache_check(tmp_path):
    assert variants.auto_refused(fake_check(tmp_path, 0)) == ""
    why = variants.auto_refused(fake_check(tmp_path, 1, 'x.conf:4: IO_Cache_Read = "auto" is not valid'))
    assert why == 'x.conf:4: IO_Cache_Read = "auto" is not valid'
    assert "no dcache-check at" in variants.auto_refused(str(tmp_path / "missing"))


def test_a_job_becomes_dcache_bench_keys():
    assert runner.job_args({"rw": "read", "bs": "1M", "verify": True, "numjobs": 4}) == [
        "rw=read", "bs=1M", "verify=1", "numjobs=4"]


def test_a_runs_log_line(tmp_path):
    base = str(tmp_path / "rwf.limit.seq_write.direct.1")
    (tmp_path / "rwf.limit.seq_write.direct.1.stream.json").write_text(json.dumps({"total": {"mib_s": 321.4}}))
    (tmp_path / "rwf.limit.seq_write.direct.1.ws.json").write_text(json.dumps(
        {"total": {"mib_s": 5.0}, "passes": {"mib_s": 800.0}, "read": {"lat_p99_us": 2500}}))
    (tmp_path / "rwf.limit.seq_write.direct.1.sys0").write_text("wsdev.read_sectors 0\nmemcg.failcnt 3\n")
    (tmp_path / "rwf.limit.seq_write.direct.1.sys1").write_text("wsdev.read_sectors 4096\nmemcg.failcnt 10\n")
    assert pressure.summary_line(base) == ("rwf.limit.seq_write.direct.1: stream 321 MiB/s, WS 800 MiB/s p99 "
                                           "2.5 ms, WS dev reads 2 MiB, limit hits 7")


class LoggedServer:
    def __init__(self, text):
        self.text = text

    def log(self):
        return self.text


def test_a_refused_export_is_named_by_its_variant():
    log = ("06/12/2026 02:24:56 : epoch 1 : vm : nfs-ganesha-1[main] dcache_create_export :FSAL :CRIT :DCACHE: "
           'export 23 (/tmp/s/mnt/auto): IO_Cache_Read = "auto" is not valid; allowed: buffered, dontcache, '
           "fadvise, direct (or the kernel's numbers 0, 1, 2); export refused\n"
           "06/12/2026 02:24:57 : epoch 1 : vm : nfs-ganesha-1[main] export 20 is served\n")
    refused = main.refused_exports(LoggedServer(log), {"vfs": 20, "direct": 22, "auto": 23})
    assert list(refused) == ["auto"]
    assert 'IO_Cache_Read = "auto" is not valid' in refused["auto"]
    assert main.refused_exports(LoggedServer("nothing refused\n"), {"vfs": 20}) == {}


def test_a_release_module_older_than_the_source_is_found(tmp_path):
    module, src = tmp_path / "libfsaldcache.so", tmp_path / "src" / "core"
    src.mkdir(parents=True)
    (src / "a.cpp").write_text("old")
    module.write_text("so")
    os.utime(src / "a.cpp", (1000, 1000))
    os.utime(module, (2000, 2000))
    assert main.newer_source(str(module), str(tmp_path / "src")) is None
    os.utime(src / "a.cpp", (3000, 3000))
    assert main.newer_source(str(module), str(tmp_path / "src")) == str(src / "a.cpp")
