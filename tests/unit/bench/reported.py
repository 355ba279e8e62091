"""What tools/bench_report.py makes of a run directory written by hand:
the bench report tests' one way to run it."""

import json
import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[3] / "tools"


def report(d):
    """(results.json, table.md) of run directory d, bench_report.py
    having exited 0."""
    rc = subprocess.run([sys.executable, str(TOOLS / "bench_report.py"), str(d)], capture_output=True, text=True,
                        check=False)
    assert rc.returncode == 0, rc.stdout + rc.stderr
    return json.loads((d / "results.json").read_text()), (d / "table.md").read_text()
