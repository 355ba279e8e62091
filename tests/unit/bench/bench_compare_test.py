#!/usr/bin/env python3
"""Unit test of tools/bench_compare.py: two sides' results.json made by hand,
the ratio, the medians and the "beyond" column checked."""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TOOL = Path(__file__).resolve().parents[3] / "tools" / "bench_compare.py"


def results(rows):
    return {"rows": [{"workload": w, "variant": v, "mib_s": sorted(xs)[len(xs) // 2], "mib_s_all": xs,
                      "ratio_to_vfs": None, "server_cpu_s_per_gib": 1.0, "commit_lat_p50_us": None}
                     for (w, v), xs in rows.items()]}


class BenchCompare(unittest.TestCase):
    def run_tool(self, a_runs, b_runs):
        with tempfile.TemporaryDirectory() as tmp:
            dirs = []
            for i, run in enumerate(a_runs + b_runs):
                d = Path(tmp) / f"run{i}"
                d.mkdir()
                (d / "results.json").write_text(json.dumps(results(run)))
                dirs.append(str(d))
            a, b = ",".join(dirs[:len(a_runs)]), ",".join(dirs[len(a_runs):])
            out = subprocess.run([sys.executable, str(TOOL), a, b], check=True, capture_output=True, text=True)
            return {tuple(c.strip() for c in line.split("|")[1:3]): [c.strip() for c in line.split("|")[1:-1]]
                    for line in out.stdout.splitlines() if line.startswith("| mix")}, out.stdout

    def test_rows_pool_every_run_and_flag_what_lies_outside_a(self):
        a = [{("mix", "direct"): [100.0, 110.0], ("mix", "vfs"): [200.0, 220.0], ("mix", "fadvise"): [50.0, 70.0]},
             {("mix", "direct"): [90.0, 120.0], ("mix", "vfs"): [210.0, 230.0], ("mix", "fadvise"): [60.0, 80.0]}]
        b = [{("mix", "direct"): [60.0, 70.0], ("mix", "vfs"): [300.0, 320.0], ("mix", "fadvise"): [65.0, 66.0]}]
        rows, text = self.run_tool(a, b)
        direct = rows[("mix", "direct")]
        self.assertEqual(direct[2], "105 (100, 110, 90, 120)", "A: every repeat of both runs, their median")
        self.assertEqual(direct[3], "65 (60, 70)")
        self.assertEqual(direct[4], f"{65 / 105:.2f}")
        self.assertEqual(direct[8], "below")
        self.assertEqual(rows[("mix", "vfs")][8], "above")
        self.assertEqual(rows[("mix", "fadvise")][8], "", "inside A's spread")
        self.assertIn("rows whose B median is below every A value: 1", text)

    def test_a_row_missing_from_b_is_left_out(self):
        rows, _ = self.run_tool([{("mix", "direct"): [1.0], ("mix", "vfs"): [2.0]}], [{("mix", "vfs"): [2.0]}])
        self.assertEqual(set(rows), {("mix", "vfs")})


if __name__ == "__main__":
    unittest.main()
