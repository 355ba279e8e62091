"""Unit tests of tools/bench_report.py's phases and its "Server CPU per GiB
by phase" (bench_report_cpu.py): runs of the shared server made by hand
(a workload of one phase, one of two: runs/stream-write, stream-read),
aggregated; the rows, the CPU table and its ratios checked, and
tools/bench_compare.py keeping the phases apart."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from reported import report

TOOLS = Path(__file__).resolve().parents[3] / "tools"
MiB = 1 << 20


def run_json(mib_s, cpu_s, reads=0, writes=0):
    """A dcache-bench result with what the report reads: mib_s over 1 s,
    cpu_s of server CPU."""
    op = {"ops": 0, "lat_p50_us": 0, "lat_p99_us": 0}
    return {"total": {"mib_s": mib_s, "bytes": int(mib_s * MiB), "iops": mib_s},
            "read": dict(op, ops=reads), "write": dict(op, ops=writes), "errors": 0,
            "verify": {"bytes_checked": int(mib_s * MiB), "errors": 0},
            "writes_by_stability": {"unstable": writes, "file_sync": 0, "data_sync": 0},
            "commits_sent": 1, "commits_saved": 0, "commit_lat": {"count": 0},
            "server": {"cpu_s": cpu_s, "cache_peak": 0, "cache_final": 0, "dirty_peak": 0,
                       "meminfo_cached_peak": 0, "meminfo_cached_start": 0, "dev_reads": 0,
                       "dev_read_bytes": 0, "dev_write_bytes": 0, "vmstat": {},
                       "threads": {"d_mean": 0, "d_peak": 0, "workers_peak": 10}}}


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "variants.txt").write_text("vfs 20\ndontcache 21\ndirect 22\n")
    runs = tmp_path / "runs"
    runs.mkdir()
    # 1 GiB each; CPU s: write vfs 1.0, dontcache 1.2, direct 0.6; read
    # vfs 0.8, dontcache 1.0, direct 0.4; mix 0.5 each
    for v, w, r in (("vfs", 1.0, 0.8), ("dontcache", 1.2, 1.0), ("direct", 0.6, 0.4)):
        (runs / f"stream-write.{v}.1.json").write_text(json.dumps(run_json(1024.0, w, writes=1024)))
        (runs / f"stream-read.{v}.1.json").write_text(json.dumps(run_json(1024.0, r, reads=1024)))
        (runs / f"mix.{v}.1.json").write_text(json.dumps(run_json(1024.0, 0.5, reads=600, writes=400)))
    return tmp_path


def test_a_workload_of_two_phases_is_two_rows_in_their_order(run_dir):
    result, table = report(run_dir)
    rows = [(r["workload"], r["phase"], r["variant"]) for r in result["rows"]]
    assert rows[:3] == [("mix", "", "vfs"), ("mix", "", "dontcache"), ("mix", "", "direct")]
    assert rows[3:6] == [("stream", "write", v) for v in ("vfs", "dontcache", "direct")], "write before read"
    assert rows[6:] == [("stream", "read", v) for v in ("vfs", "dontcache", "direct")]
    assert "| stream (write) | direct | 1024.0 | 1.00 | 0.60 |" in table


def test_cpu_per_gib_by_phase_with_the_direct_ratios(run_dir):
    _, table = report(run_dir)
    assert "## Server CPU per GiB by phase" in table
    assert "| workload | phase | vfs | dontcache | direct | direct ÷ dontcache | direct ÷ vfs |" in table
    assert "| mix | read+write | 0.50 | 0.50 | 0.50 | 1.00 | 1.00 |" in table
    assert "| stream | write | 1.00 | 1.20 | 0.60 | 0.50 | 0.60 |" in table
    assert "| stream | read | 0.80 | 1.00 | 0.40 | 0.40 | 0.50 |" in table


def test_bench_compare_keeps_the_phases_apart(run_dir):
    report(run_dir)
    out = subprocess.run([sys.executable, str(TOOLS / "bench_compare.py"), str(run_dir), str(run_dir)],
                         capture_output=True, text=True, check=True).stdout
    assert "| stream (write) | direct |" in out and "| stream (read) | direct |" in out


def test_the_kernel_threads_cpu_is_added_by_phase_with_its_families(run_dir):
    """dcache-bench's kthread_cpu_s: a table of the server's and the kernel
    threads' seconds together, and the families that took the most."""
    runs = run_dir / "runs"
    for v, k in (("vfs", 0.1), ("dontcache", 0.3), ("direct", 0.2)):
        f = runs / f"stream-write.{v}.1.json"
        j = json.loads(f.read_text())
        j["server"]["kthread_cpu_s"] = k
        j["server"]["kthread_cpu_by_family"] = {"kworker xfs-conv": k - 0.05, "ksoftirqd": 0.05}
        f.write_text(json.dumps(j))
    result, table = report(run_dir)
    row = next(r for r in result["rows"] if r["phase"] == "write" and r["variant"] == "dontcache")
    assert row["kthread_cpu_s_per_gib"] == pytest.approx(0.3)
    assert row["with_kthreads_cpu_s_per_gib"] == pytest.approx(1.5)
    assert row["kthread_cpu_s_per_gib_by_family"]["kworker xfs-conv"] == pytest.approx(0.25)
    section = table.split("### The shared server with the kernel's threads")[1]
    assert "| stream | write | 1.10 | 1.50 | 0.80 | 0.53 | 0.73 |" in section
    assert "- stream write dontcache: kworker xfs-conv 0.25, ksoftirqd 0.05" in section
    assert "| stream | read |" not in section, "runs without the figure have no row"
