"""tools/dcache-stats against canned GetFSALStats replies (a dbus-send of
its own on PATH): the counters it prints, and what it says when the server
answers without them, naming the setting that turns them on and where it
goes."""

import json
import os
import stat
import subprocess
import sys

import pytest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "dcache-stats")


def reply(ok, message, entries=()):
    """dbus-send --print-reply's text for a GetFSALStats reply."""
    lines = ["method return time=1.0 sender=:1.1 -> destination=:1.2 serial=3 reply_serial=2",
             f"   boolean {'true' if ok else 'false'}", f'   string "{message}"']
    if ok:
        lines += ["   struct {", "      uint64 1", "      uint64 2", "   }", '   string "DCACHE"']
        for name, count in entries:
            lines += [f'      string "{name}"', f"      uint64 {count}", "      double 0.5", "      double 0.1",
                      "      double 0.9"]
        lines.append('   string "OK"')
    return "\n".join(lines) + "\n"


@pytest.fixture
def run_tool(tmp_path):
    """Runs dcache-stats with a dbus-send that prints answer."""
    def run(answer, *args):
        fake = tmp_path / "dbus-send"
        fake.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write({answer!r})\n", encoding="utf-8")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
        return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, env=env,
                              timeout=60, check=False)
    return run


@pytest.mark.parametrize("message", ["FSAL stat counting disabled", "FSAL stats disabled"])
def test_counting_disabled_names_the_setting_and_where_it_goes(run_tool, message):
    done = run_tool(reply(False, message))
    assert done.returncode == 1
    assert done.stdout == ""
    assert f"dcache-stats: ganesha.nfsd answered: {message}: " in done.stderr
    assert "NFS_CORE_PARAM { Enable_FSAL_Stats = true; }" in done.stderr
    assert "in ganesha.conf and restart ganesha.nfsd" in done.stderr
    assert "org.ganesha.nfsd.exportstats.EnableStats string:fsal" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_no_dcache_module_says_so(run_tool):
    done = run_tool(reply(False, "Incorrect FSAL name"))
    assert done.returncode == 1
    assert "Incorrect FSAL name: no FSAL named DCACHE is loaded" in done.stderr


def test_another_answer_is_passed_on_as_it_is(run_tool):
    done = run_tool(reply(False, "something new"))
    assert done.returncode == 1
    assert done.stderr == "dcache-stats: ganesha.nfsd answered: something new\n"


def test_counters_are_printed(run_tool):
    done = run_tool(reply(True, "OK", [("export_2.write_bytes", 4096), ("export_2.read", 3)]), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"2": {"write_bytes": 4096, "read": [3, 0.5, 0.1, 0.9]}}
