#!/usr/bin/env python3
"""Aggregates a bench-report.sh run directory: medians per (workload,
phase, variant), ratios to the VFS baseline, results.json, table.md and
three charts: chart.png (throughput relative to VFS), chart-cpu.png
(server CPU per GiB) and chart-pagecache.png (page-cache peak), one
colour per variant. The pressure workloads (DIR/pressure/: a stream
beside a working set, the server in a memory group) and the one-export
workloads (DIR/one_export/: both through one export) get tables of their
own, and every measured phase of every kind a line of "Server CPU per
GiB by phase" (bench_report_cpu.py).

usage: bench_report.py DIR                 aggregate DIR/runs/, write all
       bench_report.py --charts-only DIR   redraw the charts from
                                           DIR/results.json (nothing rerun)
"""
import json
import re
import sys
from pathlib import Path

# its parts, the modules beside it, wherever it is run or installed from
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report_charts import charts  # noqa: E402
from bench_report_common import MiB, PHASES, WORKLOADS, fsal_counters, med  # noqa: E402
from bench_report_cpu import cpu_per_gib, cpu_tables  # noqa: E402
from bench_report_one_export import one_export_tables  # noqa: E402
from bench_report_pressure import pressure_tables  # noqa: E402


def server_tables(d, ids, result, failures, f):
    """The workloads with a server per variant (servers/*.json): memory
    under a mixed load and under overload, against vfs's."""
    runs = {}
    for p in sorted((d / "servers").glob("*.*.json")):
        parts = p.name.split(".")
        if len(parts) != 3:
            continue  # the dcache-bench results beside each summary
        j = json.loads(p.read_text())
        base = p.with_suffix("")
        c0 = fsal_counters(Path(str(base) + ".stats0"), ids[j["variant"]])
        c1 = fsal_counters(Path(str(base) + ".stats1"), ids[j["variant"]])
        j["plugin"] = {k: c1[k] - c0.get(k, 0) for k in c1}
        runs.setdefault(j["workload"], []).append(j)
        if any(j["exit_codes"]) or j["errors"] or j["verify_errors"]:
            failures.append(f"{j['workload']} {j['variant']}: exit {j['exit_codes']}, {j['errors']} errors "
                            f"{j['first_error']}")
    result["servers"] = runs
    lines = []

    def mib(kib):
        return kib / 1024
    for w, title in (("memory", "Memory under a mixed load (`memory`: a server per variant; 48 connections of "
                      "60/40 1 MiB I/O and 16 of 4 KiB random I/O, iodepth 16, then idle)"),
                     ("overload", "Overload (`overload`: a server per variant, its device throttled by cgroup "
                      "v1 blkio; 1 MiB WRITEs from every connection at once)")):
        rs = runs.get(w)
        if not rs:
            continue
        ref = next((r for r in rs if r["variant"] == "vfs"), None)
        lines += ["", title + ":", "",
                  "| variant | RSS idle MiB | RSS peak MiB | peak × VFS | RSS after MiB | after ÷ idle | "
                  "threads / io-wq peak | MiB/s | srv CPU s | WRITE p99 ms | waited for a place | errors |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rs:
            lines.append("| {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} |".format(
                r["variant"], f(mib(r["idle_kib"]), "{:.0f}"), f(mib(r["rss_peak_kib"]), "{:.0f}"),
                f(r["rss_peak_kib"] / ref["rss_peak_kib"] if ref and ref["rss_peak_kib"] else None, "{:.2f}"),
                f(mib(r["after_kib"]) if w == "memory" else None, "{:.0f}"),
                f(r["after_kib"] / r["idle_kib"] if w == "memory" else None, "{:.2f}"),
                r["threads_peak"], r["iowq_peak"], f(r["mib_s"]), f(r["server_cpu_s"]),
                f(r["write_lat_p99_us"] and r["write_lat_p99_us"] / 1000, "{:.0f}"),
                f(r["plugin"].get("admission_waits") if r["variant"] != "vfs" else None, "{:.0f}"),
                r["errors"] + r["verify_errors"]))
    return lines


def workload_phases(runs):
    """(workload, phase) of the runs, in table order: the workloads in
    WORKLOADS' order, the phases in PHASES' (unknown ones after)."""
    seen = dict.fromkeys((w, p) for w, p, _ in runs)
    order = {w: i for i, w in enumerate(WORKLOADS)}

    def key(wp):
        w, p = wp
        phases = PHASES.get(w, [""])
        return order.get(w, len(order)), phases.index(p) if p in phases else len(phases)
    return sorted(seen, key=key)


def label(row):
    """A row's workload as the tables name it: WORKLOAD (PHASE)."""
    return row["workload"] + (f" ({row['phase']})" if row.get("phase") else "")


def main():
    args = sys.argv[1:]
    charts_only = "--charts-only" in args
    args = [a for a in args if a != "--charts-only"]
    if len(args) != 1 or args[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    d = Path(args[0])
    if charts_only:
        try:
            result = json.loads((d / "results.json").read_text())
        except (OSError, ValueError) as e:
            print(f"bench_report: cannot read {d / 'results.json'}: {e}", file=sys.stderr)
            return 2
        return 0 if charts(d, result["variants"], result["rows"]) else 1
    ids = {}
    for line in (d / "variants.txt").read_text().splitlines():
        v, i = line.split()
        ids[v] = int(i)
    variants = list(ids)
    runs = {}
    failures = []
    for f in sorted((d / "runs").glob("*.json")):
        name, v, r = f.stem.split(".")
        w, _, phase = name.partition("-")  # WORKLOAD-PHASE: one phase of several
        try:
            j = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            failures.append(f"{f.name}: unreadable JSON ({e})")
            continue
        base = f.with_suffix("")
        c0 = fsal_counters(Path(str(base) + ".stats0"), ids[v])
        c1 = fsal_counters(Path(str(base) + ".stats1"), ids[v])
        j["plugin"] = {k: c1[k] - c0.get(k, 0) for k in c1}
        lim = Path(str(base) + ".memcg_limit")
        if lim.exists():
            j["memcg_limit"] = int(lim.read_text())
        if Path(str(base) + ".failed").exists():
            failures.append(f"{name} {v} repeat {r}: dcache-bench failed: "
                            + Path(str(base) + ".err").read_text()[-300:].strip())
        runs.setdefault((w, phase, v), []).append(j)

    rows = []
    for w, phase in workload_phases(runs):
        base_mibs = med([j["total"]["mib_s"] for j in runs.get((w, phase, "vfs"), [])])
        for v in variants:
            rs = runs.get((w, phase, v))
            if not rs:
                continue
            mibs = med([j["total"]["mib_s"] for j in rs])
            srv = [j["server"] for j in rs]
            cpu = cpu_per_gib(rs)
            write_ops = med([j["write"]["ops"] for j in rs])
            dev_reads = med([s["dev_reads"] for s in srv])
            row = {
                "workload": w, "phase": phase, "variant": v, "repeats": len(rs),
                "mib_s": mibs, "mib_s_all": [round(j["total"]["mib_s"], 1) for j in rs],
                "iops": med([j["total"]["iops"] for j in rs]),
                "ratio_to_vfs": (mibs / base_mibs) if base_mibs and mibs is not None else None,
                "read_lat_p50_us": med([j["read"]["lat_p50_us"] for j in rs if j["read"]["ops"]]),
                "read_lat_p99_us": med([j["read"]["lat_p99_us"] for j in rs if j["read"]["ops"]]),
                "write_lat_p50_us": med([j["write"]["lat_p50_us"] for j in rs if j["write"]["ops"]]),
                "write_lat_p99_us": med([j["write"]["lat_p99_us"] for j in rs if j["write"]["ops"]]),
                "server_cpu_s_per_gib": cpu["server"],
                "kthread_cpu_s_per_gib": cpu["all"],
                "with_kthreads_cpu_s_per_gib": cpu["with_server"],
                "kthread_cpu_s_per_gib_by_family": cpu["by_family"],
                "cache_peak_mib": med([s["cache_peak"] / MiB for s in srv]),
                "cache_final_mib": med([s["cache_final"] / MiB for s in srv]),
                "dirty_peak_mib": med([s["dirty_peak"] / MiB for s in srv]),
                "meminfo_cached_peak_delta_mib": med([(s["meminfo_cached_peak"] - s["meminfo_cached_start"]) / MiB
                                                      for s in srv]),
                "dev_reads": dev_reads,
                "dev_read_mib": med([s["dev_read_bytes"] / MiB for s in srv]),
                "dev_write_mib": med([s["dev_write_bytes"] / MiB for s in srv]),
                "dev_reads_per_write": (dev_reads / write_ops) if write_ops else None,
                "reclaim_scanned": med([s["vmstat"].get("pgscan_kswapd", 0) + s["vmstat"].get("pgscan_direct", 0)
                                        for s in srv]),
                "writes_unstable": med([j["writes_by_stability"]["unstable"] for j in rs]),
                "writes_file_sync": med([j["writes_by_stability"]["file_sync"] + j["writes_by_stability"]["data_sync"]
                                         for j in rs]),
                "commits_sent": med([j["commits_sent"] for j in rs]),
                "commits_saved": med([j["commits_saved"] for j in rs]),
                # COMMIT round trips (dcache-bench's commit_lat), every run's
                "commit_lat_p50_us": med([j["commit_lat"]["p50_us"] for j in rs
                                          if j.get("commit_lat", {}).get("count")]),
                "commit_lat_p99_us": med([j["commit_lat"]["p99_us"] for j in rs
                                          if j.get("commit_lat", {}).get("count")]),
                "verify_bytes": sum(j["verify"]["bytes_checked"] for j in rs),
                "verify_errors": sum(j["verify"]["errors"] for j in rs),
                "errors": sum(j["errors"] for j in rs),
                # ganesha.nfsd's threads, sampled every 50 ms (sampler.hpp)
                "threads_d_mean": med([s.get("threads", {}).get("d_mean") for s in srv]),
                "threads_d_peak": med([s.get("threads", {}).get("d_peak") for s in srv]),
                "server_threads_file_io_mean": med([s.get("threads", {}).get("worker_file_io_mean") for s in srv]),
                "server_threads_file_io_peak": med([s.get("threads", {}).get("worker_file_io_peak") for s in srv]),
                "server_threads_peak": med([s.get("threads", {}).get("workers_peak") for s in srv]),
                "iowq_threads_peak": med([s.get("threads", {}).get("iowq_peak") for s in srv]),
                "iowq_d_mean": med([s.get("threads", {}).get("iowq_d_mean") for s in srv]),
                "memcg_limit_mib": med([j.get("memcg_limit", 0) / MiB for j in rs]) or None,
                "plugin": {k: med([j["plugin"].get(k, 0) for j in rs])
                           for k in sorted({k for j in rs for k in j["plugin"]})
                           if any(j["plugin"].get(k, 0) for j in rs)},
            }
            rows.append(row)

    skipped = {}
    for w in ("mempressure", "latency"):
        sk = d / "runs" / f"{w}.skipped"
        if sk.exists():
            skipped[w] = sk.read_text().strip()
    for sk in (d / "servers").glob("*.skipped"):
        skipped[sk.name.split(".")[0]] = sk.read_text().strip()
    machine = (d / "machine.txt").read_text() if (d / "machine.txt").exists() else ""
    # which Ganesha served (machine.txt's "ganesha: 6.5 (...)"; older reports: none)
    gm = re.search(r"^ganesha: (\S+)", machine, re.M)
    result = {"machine": machine, "ganesha": gm.group(1) if gm else None, "variants": variants, "rows": rows,
              "skipped": skipped, "failures": failures}

    def f(x, fmt="{:.1f}"):
        return "–" if x is None else fmt.format(x)

    lines = ["| workload | variant | MiB/s (median) | × VFS | srv CPU s/GiB | cache peak MiB | cache final MiB "
             "| dev reads (MiB) | dev reads/WRITE | WRITE unstable/stable | COMMITs sent/saved | verify errors |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} | {}/{} | {}/{} | {} |".format(
            label(r), r["variant"], f(r["mib_s"]), f(r["ratio_to_vfs"], "{:.2f}"),
            f(r["server_cpu_s_per_gib"], "{:.2f}"), f(r["cache_peak_mib"], "{:.0f}"),
            f(r["cache_final_mib"], "{:.0f}"), f(r["dev_reads"], "{:.0f}"), f(r["dev_read_mib"], "{:.0f}"),
            f(r["dev_reads_per_write"], "{:.2f}"),
            f(r["writes_unstable"], "{:.0f}"), f(r["writes_file_sync"], "{:.0f}"),
            f(r["commits_sent"], "{:.0f}"), f(r["commits_saved"], "{:.0f}"), r["verify_errors"]))
    # COMMIT latency of the commit workload, against buffered's
    crow = [r for r in rows if r["workload"] == "commit"]
    if crow:
        ref = next((r["commit_lat_p99_us"] for r in crow if r["variant"] == "buffered"), None)
        lines += ["", "COMMIT round trip (`commit`: each of 4 writers COMMITs its file at close; medians over "
                  "repeats):", "",
                  "| variant | COMMIT p50 ms | COMMIT p99 ms | p99 × buffered |", "|---|---:|---:|---:|"]
        for r in crow:
            p50, p99 = r["commit_lat_p50_us"], r["commit_lat_p99_us"]
            lines.append("| {} | {} | {} | {} |".format(
                r["variant"], f(p50 and p50 / 1000, "{:.1f}"), f(p99 and p99 / 1000, "{:.1f}"),
                f(p99 / ref if ref and p99 is not None else None, "{:.2f}")))
    # the latency probe beside the throttled streaming load
    lrow = [r for r in rows if r["workload"] == "latency"]
    if lrow:
        for r in lrow:
            ps = []
            for p in sorted((d / "runs").glob(f"latency.{r['variant']}.*.probe")):
                try:
                    ps.append(json.loads(p.read_text()))
                except ValueError as e:
                    failures.append(f"{p.name}: unreadable JSON ({e})")
            for p in (d / "runs").glob(f"latency.{r['variant']}.*.probe.failed"):
                failures.append(f"latency probe {r['variant']}: dcache-bench failed: "
                                + Path(str(p)[:-len(".failed")] + ".err").read_text()[-300:].strip())
            for k in ("getattr", "read"):
                r[f"probe_{k}_p50_us"] = med([j[k]["lat_p50_us"] for j in ps if j[k]["ops"]])
                r[f"probe_{k}_p99_us"] = med([j[k]["lat_p99_us"] for j in ps if j[k]["ops"]])
                r[f"probe_{k}_ops"] = med([j[k]["ops"] for j in ps])
            r["probe_errors"] = sum(j["errors"] + j["verify"]["errors"] for j in ps)
        by = {r["variant"]: r for r in lrow}

        def ms(x):
            return x and x / 1000

        def worst(x):
            return max((x.get(f"probe_{k}_p99_us") or 0) for k in ("getattr", "read")) if x else None
        lines += ["", "Latency probe under a throttled streaming load (`latency`: 1 MiB READs from every "
                  "streaming connection while one client alternates GETATTR and a cached 4 KiB READ on a plain "
                  "VFS export of the same server; medians over repeats):", "",
                  "| variant | streaming MiB/s | GETATTR p50 / p99 ms | READ p50 / p99 ms | probe ops | "
                  "p99 × its sync twin | p99 × VFS | probe errors |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in lrow:
            mine = worst(r)
            twin = by.get(r["variant"] + "_sync")
            vfs = by.get("vfs")
            lines.append("| {} | {} | {} / {} | {} / {} | {} | {} | {} | {} |".format(
                r["variant"], f(r["mib_s"]),
                f(ms(r["probe_getattr_p50_us"]), "{:.1f}"), f(ms(r["probe_getattr_p99_us"]), "{:.1f}"),
                f(ms(r["probe_read_p50_us"]), "{:.1f}"), f(ms(r["probe_read_p99_us"]), "{:.1f}"),
                f((r["probe_getattr_ops"] or 0) + (r["probe_read_ops"] or 0), "{:.0f}"),
                f(mine / worst(twin) if twin and worst(twin) else None, "{:.2f}"),
                f(mine / worst(vfs) if vfs and vfs is not r and worst(vfs) else None, "{:.2f}"),
                r["probe_errors"]))
    # server threads: what blocks where
    lines += ["", "Server threads (ganesha.nfsd, /proc/PID/task/*, every 50 ms; medians over repeats of each run's "
              "mean/peak):", "",
              "| workload | variant | threads in D mean / peak | server threads in file I/O syscall mean / peak "
              "| server threads / io-wq threads (peak) | io-wq in D mean | srv CPU s/GiB "
              "| plugin io_deferred / io_inline |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        p = r["plugin"]
        lines.append("| {} | {} | {} / {} | {} / {} | {} / {} | {} | {} | {} / {} |".format(
            label(r), r["variant"], f(r["threads_d_mean"]), f(r["threads_d_peak"], "{:.0f}"),
            f(r["server_threads_file_io_mean"]), f(r["server_threads_file_io_peak"], "{:.0f}"),
            f(r["server_threads_peak"], "{:.0f}"), f(r["iowq_threads_peak"], "{:.0f}"), f(r["iowq_d_mean"]),
            f(r["server_cpu_s_per_gib"], "{:.2f}"),
            f(p.get("io_deferred"), "{:.0f}"), f(p.get("io_inline"), "{:.0f}")))
    # io_uring vs sync: variants X and X_sync of one run
    pairs = [(v[:-5], v) for v in variants if v.endswith("_sync") and v[:-5] in variants
             and v not in ("direct_data_sync", "direct_file_sync")]
    if pairs:
        lines += ["", "IO_Backend: io_uring (default) vs sync, same mode, same run:", "",
                  "| workload | mode | MiB/s io_uring / sync | io_uring ÷ sync | srv CPU s/GiB io_uring / sync "
                  "| threads in D mean io_uring / sync | server threads in file I/O mean io_uring / sync |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for w in dict.fromkeys((r["workload"], r["phase"]) for r in rows):
            for a, b in pairs:
                ra = next((r for r in rows if (r["workload"], r["phase"]) == w and r["variant"] == a), None)
                rb = next((r for r in rows if (r["workload"], r["phase"]) == w and r["variant"] == b), None)
                if not ra or not rb:
                    continue
                ratio = ra["mib_s"] / rb["mib_s"] if ra["mib_s"] and rb["mib_s"] else None
                for r in (ra, rb):
                    r["io_uring_over_sync"] = ratio
                lines.append("| {} | {} | {} / {} | {} | {} / {} | {} / {} | {} / {} |".format(
                    label(ra), a, f(ra["mib_s"]), f(rb["mib_s"]), f(ratio, "{:.2f}"),
                    f(ra["server_cpu_s_per_gib"], "{:.2f}"), f(rb["server_cpu_s_per_gib"], "{:.2f}"),
                    f(ra["threads_d_mean"]), f(rb["threads_d_mean"]),
                    f(ra["server_threads_file_io_mean"]), f(rb["server_threads_file_io_mean"])))
    # boundary pages: the interleaved-record workloads, with the tracker's
    # own account of where each held page went
    ileave = [r for r in rows if r["workload"].startswith("interleave")]
    if ileave:
        lines += ["", "Boundary pages (interleaved misaligned records; the tracker's counters, medians over "
                  "repeats):", "",
                  "| workload | variant | dev reads/WRITE | WRITEs | held | completed "
                  "| released by age / ceiling / close / truncate | kept at COMMIT | edge write-backs | COMMITs sent "
                  "| cache final MiB | verify errors |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in ileave:
            p = r["plugin"]

            def g(k, p=p):
                return f(p.get(k, 0), "{:.0f}")
            lines.append("| {} | {} | {} | {} | {} | {} | {} / {} / {} / {} | {} | {} | {} | {} | {} |".format(
                r["workload"], r["variant"], f(r["dev_reads_per_write"], "{:.4f}"), g("writes"),
                g("boundary_held"), g("boundary_completed"), g("boundary_released_by_age"),
                g("boundary_released_by_ceiling"), g("boundary_released_at_close"),
                g("boundary_released_by_truncate"), g("boundary_kept_at_commit"), g("edge_writebacks"),
                f(r["commits_sent"], "{:.0f}"), f(r["cache_final_mib"], "{:.1f}"), r["verify_errors"]))
    if not rows:
        lines = []  # only workloads with a server of their own
    lines += server_tables(d, ids, result, failures, f)
    lines += pressure_tables(d, ids, result, failures, f)
    lines += one_export_tables(d, ids, result, failures, f)
    lines += cpu_tables(result, f)
    for k, why in skipped.items():
        lines.append(f"\n{k}: skipped: {why}")
    for fl in failures:
        lines.append(f"\nFAILED: {fl}")
    (d / "results.json").write_text(json.dumps(result, indent=1))
    table = "\n".join(lines) + "\n"
    (d / "table.md").write_text(table)
    print(table)

    if rows:
        charts(d, variants, rows)
    return 1 if failures or any(r["verify_errors"] or r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
