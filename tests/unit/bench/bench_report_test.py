#!/usr/bin/env python3
"""Unit tests of tools/bench_report.py's pressure tables
(tools/bench_report_pressure.py): a run directory made by hand (what
bench-report.sh's pressure workloads leave in DIR/pressure/), aggregated,
and the figures checked against the counters written into it."""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[3] / "tools"
sys.path.insert(0, str(TOOLS))
import bench_report_pressure  # noqa: E402

MiB = 1 << 20


def bench_json(mib_s=0.0, nbytes=0, reads=0, p50=0.0, p99=0.0, p999=0.0, cpu=1.0, passes=None, errors=0):
    """The parts of a dcache-bench result the report reads."""
    j = {"elapsed_s": 2.0, "total": {"mib_s": mib_s, "bytes": nbytes},
         "read": {"ops": reads, "lat_p50_us": p50, "lat_p99_us": p99, "lat_p999_us": p999},
         "write": {"ops": 0, "lat_p99_us": 0}, "commits_sent": 0, "errors": errors,
         "verify": {"errors": 0, "bytes_checked": 0},
         "server": {"cache_peak": 8 * MiB, "cpu_s": cpu, "threads": {"rss_peak_kib": 102400}}}
    if passes:
        j["passes"] = passes
    return j


def counters(**kv):
    return "".join(f"{k.replace('__', '.')} {v}\n" for k, v in kv.items())


def stats(export_id, **kv):
    """What tools/dcache-stats --json prints for one export's counters."""
    return json.dumps({str(export_id): {**kv, "write": [1, 0.5, 0.5, 0.5]}}) + "\n"


class PressureTables(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = Path(self.tmp.name)
        (self.d / "variants.txt").write_text("vfs 20\ndontcache 21\n")
        self.p = self.d / "pressure"
        self.p.mkdir()
        (self.p / "config.json").write_text(json.dumps(
            {"ws": 384 * MiB, "limit": 1024 * MiB, "stream": 3072 * MiB, "runtime": 20, "touch": 8, "touches": 3,
             "touch_runtime": 28, "solo": 10, "repeats": 1}))
        before = counters(time=100, memcg__failcnt=5, memcg__max_usage_in_bytes=400 * MiB,
                          memcg__limit_in_bytes=1024 * MiB, memcg__workingset_refault_file=1000,
                          memcg__cache=384 * MiB, vmstat__pgscan_file=10, vmstat__pgscan_anon=0,
                          vmstat__pgsteal_file=10, vmstat__pgsteal_anon=0, vmstat__pgscan_kswapd=0,
                          vmstat__pgscan_direct=0, vmstat__allocstall_normal=0, psi__some_us=1000,
                          psi__full_us=0, kswapd__ticks=50, clk_tck=100, wsdev__reads=7,
                          wsdev__read_sectors=1000, dev__reads=0, dev__read_sectors=0, dev__writes=0,
                          dev__write_sectors=0)
        self.before = before
        # the working set alone, before and after: 1000 and 800 MiB/s, p99 1 ms
        for w, mib in (("solo", 1000.0), ("solo_end", 800.0)):
            base = self.p / f"rwf.limit.{w}.hot.1"
            Path(f"{base}.sys0").write_text(before)
            Path(f"{base}.sys1").write_text(before.replace("time 100", "time 110"))
            Path(f"{base}.ws.json").write_text(json.dumps(bench_json(mib, int(mib * 10 * MiB), 1000, 100, 1000, 2000)))

    def tearDown(self):
        self.tmp.cleanup()

    def run_of(self, kernel, variant, stream_mib, ws_mib, p99_us, after, plugin=None, workload="noisy_writer"):
        base = self.p / f"{kernel}.limit.{workload}.{variant}.1"
        Path(f"{base}.sys0").write_text(self.before)
        Path(f"{base}.sys1").write_text(after)
        Path(f"{base}.stream.json").write_text(json.dumps(bench_json(stream_mib, int(stream_mib * 20 * MiB))))
        Path(f"{base}.ws.json").write_text(json.dumps(bench_json(ws_mib, int(ws_mib * 20 * MiB), 5000, 200, p99_us,
                                                                 3 * p99_us)))
        if plugin is not None:
            Path(f"{base}.stats0").write_text(stats(21))
            Path(f"{base}.stats1").write_text(stats(21, **plugin))
        return base

    def aggregate(self):
        rc = subprocess.run([sys.executable, str(TOOLS / "bench_report.py"), str(self.d)],
                            capture_output=True, text=True)
        result = json.loads((self.d / "results.json").read_text())
        return rc, result, (self.d / "table.md").read_text()

    def test_ratios_and_counters_of_a_run(self):
        # VFS: 100 more limit hits, 2560 pages refaulted (10 MiB), 20480
        # sectors (10 MiB) read from the WS's device, 300 + 50 pages scanned,
        # 250 ms of memory stall, 0.5 s of kswapd
        vfs_after = counters(time=130, memcg__failcnt=105, memcg__max_usage_in_bytes=1024 * MiB,
                             memcg__limit_in_bytes=1024 * MiB, memcg__workingset_refault_file=3560,
                             memcg__cache=900 * MiB, vmstat__pgscan_file=310, vmstat__pgscan_anon=50,
                             vmstat__pgsteal_file=210, vmstat__pgsteal_anon=0, vmstat__pgscan_kswapd=0,
                             vmstat__pgscan_direct=0, vmstat__allocstall_normal=0, psi__some_us=251000,
                             psi__full_us=4000, kswapd__ticks=100, clk_tck=100, wsdev__reads=107,
                             wsdev__read_sectors=21480, dev__reads=0, dev__read_sectors=0, dev__writes=3,
                             dev__write_sectors=2048)
        self.run_of("rwf", "vfs", 200.0, 450.0, 8000, vfs_after)
        self.run_of("rwf", "dontcache", 500.0, 720.0, 2000, self.before.replace("time 100", "time 125"),
                    plugin={"write_dontcache": 100})
        rc, result, table = self.aggregate()
        self.assertEqual(rc.returncode, 0, rc.stdout + rc.stderr)
        rows = {(r["kernel"], r["workload"], r["variant"]): r for r in result["pressure"]["rows"]}
        vfs, dc = rows[("rwf", "noisy_writer", "vfs")], rows[("rwf", "noisy_writer", "dontcache")]
        self.assertAlmostEqual(vfs["solo_ws_mib_s"], 900.0)  # the mean of before and after
        self.assertAlmostEqual(vfs["ws_x_solo"], 0.5)
        self.assertAlmostEqual(dc["ws_x_solo"], 0.8)
        self.assertAlmostEqual(vfs["ws_p99_x_solo"], 8.0)
        self.assertAlmostEqual(dc["stream_x_vfs"], 2.5)
        self.assertEqual(vfs["limit_hits"], 100)
        self.assertEqual(dc["limit_hits"], 0)
        self.assertAlmostEqual(vfs["refault_mib"], 10.0)
        self.assertAlmostEqual(vfs["ws_dev_read_mib"], 10.0)
        self.assertEqual(vfs["ws_dev_reads"], 100)
        self.assertEqual(vfs["reclaim_scanned"], 350)
        self.assertEqual(vfs["reclaim_stolen"], 200)
        self.assertAlmostEqual(vfs["psi_some_ms"], 250.0)
        self.assertAlmostEqual(vfs["kswapd_s"], 0.5)
        self.assertAlmostEqual(vfs["group_peak_mib"], 1024.0)
        self.assertAlmostEqual(vfs["limit_mib"], 1024.0)
        self.assertAlmostEqual(vfs["ws_p999_ms"], 24.0)
        self.assertEqual(dc["plugin"], {"write_dontcache": 100})
        self.assertIn("## Streaming beside a working set", table)
        self.assertIn("| noisy_writer | dontcache | 500 | 2.50 | 720 | 0.80 |", table)
        self.assertIn("a memory group of 1024 MiB", table)

    def test_fallback_cost_and_headline_tables(self):
        for k, dc_mib, plugin in (("rwf", 500.0, {}), ("norwf", 400.0, {"fallback_no_dontcache": 77})):
            self.run_of(k, "vfs", 200.0, 450.0, 8000, self.before.replace("time 100", "time 120"))
            self.run_of(k, "dontcache", dc_mib, 720.0, 2000, self.before.replace("time 100", "time 120"),
                        plugin=plugin)
        # the norwf server's WS alone
        for w in ("solo", "solo_end"):
            for suffix in ("sys0", "sys1", "ws.json"):
                src = self.p / f"rwf.limit.{w}.hot.1.{suffix}"
                (self.p / f"norwf.limit.{w}.hot.1.{suffix}").write_text(src.read_text())
        rc, result, table = self.aggregate()
        self.assertEqual(rc.returncode, 0, rc.stdout + rc.stderr)
        self.assertIn("what the fallback costs", table)
        self.assertIn("| limit | noisy_writer | dontcache | 500 / 400 | 0.80 |", table)
        self.assertRegex(table, r"\| limit \| noisy_writer \| dontcache \|[^\n]*\| 77 \|")
        self.assertIn("### dontcache and direct against VFS (RWF / no RWF)", table)
        self.assertIn("| limit | noisy_writer | dontcache | 500 / 400 | 2.50 / 2.00 | 0.80 / 0.80 |", table)

    def test_a_failed_stream_fails_the_report(self):
        base = self.run_of("rwf", "vfs", 200.0, 450.0, 8000, self.before.replace("time 100", "time 120"))
        Path(f"{base}.stream.failed").write_text("1\n")
        Path(f"{base}.stream.err").write_text("dcache-bench: no reply from the server for 60 s\n")
        rc, result, table = self.aggregate()
        self.assertEqual(rc.returncode, 1)
        self.assertTrue(any("no reply from the server" in f for f in result["failures"]), result["failures"])

    def test_touch_runs_use_the_passes_rate_and_their_own_solo(self):
        for w in ("solo", "solo_end"):
            base = self.p / f"rwf.limit.{w}.touch.1"
            Path(f"{base}.sys0").write_text(self.before)
            Path(f"{base}.sys1").write_text(self.before)
            Path(f"{base}.ws.json").write_text(json.dumps(bench_json(
                5.0, 384 * MiB, 100, 100, 1000, 1000,
                passes={"count": 3, "bytes": 288 * MiB, "busy_s": 0.6, "mib_s": 1920.0, "p50_us": 2e5})))
        base = self.p / "rwf.limit.noisy_writer_touch.vfs.1"
        Path(f"{base}.sys0").write_text(self.before)
        Path(f"{base}.sys1").write_text(self.before)
        Path(f"{base}.stream.json").write_text(json.dumps(bench_json(300.0, 300 * MiB)))
        Path(f"{base}.ws.json").write_text(json.dumps(bench_json(
            5.0, 384 * MiB, 100, 100, 1000, 1000,
            passes={"count": 3, "bytes": 288 * MiB, "busy_s": 2.4, "mib_s": 480.0, "p50_us": 8e5})))
        rc, result, _ = self.aggregate()
        self.assertEqual(rc.returncode, 0, rc.stdout + rc.stderr)
        row = result["pressure"]["rows"][0]
        self.assertEqual(row["workload"], "noisy_writer_touch")
        self.assertAlmostEqual(row["ws_mib_s"], 480.0)
        self.assertAlmostEqual(row["ws_x_solo"], 0.25)
        self.assertEqual(row["ws_passes"], 3)
        self.assertAlmostEqual(row["ws_pass_p50_ms"], 800.0)

    def test_ws_kind(self):
        self.assertEqual(bench_report_pressure.ws_kind("noisy_reader_touch"), "touch")
        self.assertEqual(bench_report_pressure.ws_kind("lat_reader"), "lat")
        self.assertEqual(bench_report_pressure.ws_kind("seq_write"), "hot")


if __name__ == "__main__":
    unittest.main()
