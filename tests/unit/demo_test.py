"""The demo's pure parts (tools/demo.py, ci/demo.sh): its summary table and
its options."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
# pylint: disable=wrong-import-position
import demo  # noqa: E402
from dcache_testbed import stats  # noqa: E402

MIB = 1 << 20


def test_the_summary_shows_residency_per_export_and_dcaches_counters():
    residency = {"vfs": (64 * MIB, 65 * MIB), "dontcache": (0, 65 * MIB), "direct": (MIB // 2, 65 * MIB)}
    counters = {2: stats.Counters({"writes": 67, "commits": 3}),
                3: stats.Counters({"writes": 67, "writes_reply_stable": 67, "writes_raised_stable": 60, "commits": 3})}
    lines = demo.summary(residency, counters)
    rows = {line.split()[0]: line.split() for line in lines if line.startswith("  /")}
    assert rows["/vfs"][-5:] == ["98", "%", "-", "-", "-"]
    assert rows["/dontcache"][-5:] == ["0", "%", "67", "0", "3"]
    assert rows["/direct"][-5:] == ["1", "%", "67", "67", "3"]
    assert any("(60 came UNSTABLE and were raised" in line for line in lines)


def test_without_counters_the_summary_says_so():
    residency = {e.name: (0, MIB) for e in demo.EXPORTS}
    lines = demo.summary(residency, None)
    assert sum("(counters unavailable)" in line for line in lines) == 2  # the two DCACHE exports


def test_options(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DCACHE_DEMO_STATE", raising=False)
    monkeypatch.delenv("DCACHE_DEMO_SECONDS", raising=False)
    a = demo.parse(["--check", "--ganesha", "9.14"])
    assert a.check and a.release.name == "9.14" and a.state == str(tmp_path / "state") and a.seconds is None
    assert demo.parse(["--state=/x", "--ganesha=6.5"]).state == "/x"
    monkeypatch.setenv("DCACHE_DEMO_SECONDS", "soon")
    with pytest.raises(SystemExit):
        demo.parse([])
    monkeypatch.setenv("DCACHE_DEMO_SECONDS", "3")
    assert demo.parse([]).seconds == 3
    with pytest.raises(SystemExit):
        demo.parse(["--ganesha", "1.0"])
