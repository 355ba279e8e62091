#!/usr/bin/env python3
"""Two builds side by side: bench-report.sh runs of build A and of build B
(the same workloads and variants), each possibly several runs.

  tools/bench_compare.py A_DIR[,A_DIR...] B_DIR[,B_DIR...]

Prints a markdown table: per workload and variant, the MiB/s of every repeat
of every run of each side, the medians' ratio B / A, the medians of x VFS,
server CPU per GiB and COMMIT p50, and whether B's median lies below or above
every A value (outside A's spread)."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report_common import med  # noqa: E402


def load(dirs):
    rows = {}
    for d in dirs:
        with open(f"{d}/results.json") as f:
            for r in json.load(f)["rows"]:
                # a phase of a workload of several is a row of its own
                key = (r["workload"] + (f" ({r['phase']})" if r.get("phase") else ""), r["variant"])
                e = rows.setdefault(key, {"mib": [], "cpu": [], "vfs": [], "c50": []})
                e["mib"] += r.get("mib_s_all") or [r["mib_s"]]
                e["cpu"].append(r.get("server_cpu_s_per_gib"))
                e["vfs"].append(r.get("ratio_to_vfs"))
                if r.get("commit_lat_p50_us"):
                    e["c50"].append(r["commit_lat_p50_us"] / 1000)
    return rows


def num(x):
    return "–" if x is None else f"{x:.2f}"


def runs(xs):
    return ", ".join(f"{x:.0f}" for x in xs)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a_rows, b_rows = load(sys.argv[1].split(",")), load(sys.argv[2].split(","))
    print("| workload | variant | MiB/s A (every repeat) | MiB/s B (every repeat) | B ÷ A | × VFS A / B "
          "| CPU s/GiB A / B | COMMIT p50 ms A / B | B beyond A |")
    print("|---|---|---|---|---:|---|---|---|---|")
    outside = 0
    for k, a in a_rows.items():
        b = b_rows.get(k)
        if b is None:
            continue
        ma, mb = med(a["mib"]), med(b["mib"])
        beyond = "below" if mb < min(a["mib"]) else "above" if mb > max(a["mib"]) else ""
        outside += beyond == "below"
        print(f"| {k[0]} | {k[1]} | {ma:.0f} ({runs(a['mib'])}) | {mb:.0f} ({runs(b['mib'])}) | {mb / ma:.2f} "
              f"| {num(med(a['vfs']))} / {num(med(b['vfs']))} | {num(med(a['cpu']))} / {num(med(b['cpu']))} "
              f"| {num(med(a['c50']))} / {num(med(b['c50']))} | {beyond} |")
    print(f"\nrows whose B median is below every A value: {outside}")


if __name__ == "__main__":
    main()
