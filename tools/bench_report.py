#!/usr/bin/env python3
"""Aggregates a bench-report.sh run directory: medians per (workload,
variant), ratios to the VFS baseline, results.json, table.md and three
charts: chart.png (throughput relative to VFS), chart-cpu.png (server CPU
per GiB) and chart-pagecache.png (page-cache peak), one colour per variant.
The pressure workloads (DIR/pressure/: a stream beside a working set, the
server in a memory group) get tables of their own (pressure_tables).

usage: bench_report.py DIR                 aggregate DIR/runs/, write all
       bench_report.py --charts-only DIR   redraw the charts from
                                           DIR/results.json (nothing rerun)
"""
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

WORKLOADS = ["mix", "randread", "randwrite", "reread", "interleave", "interleave_commit_end",
             "interleave_commit_every", "interleave_slow", "mempressure", "commit", "latency"]
MiB = 1 << 20
GiB = 1 << 30


def fsal_counters(path, export_id):
    """One export's counters from what tools/dcache-stats --json printed
    (the service times, lists, left out)."""
    if not path.exists():
        return {}
    try:
        entry = json.loads(path.read_text(errors="replace")).get(str(export_id), {})
    except ValueError:
        return {}
    return {k: v for k, v in entry.items() if isinstance(v, int)}


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# One colour per variant, the same in every chart; an io_uring variant and
# its IO_Backend = sync twin share a hue (dark / light).
PALETTE = {
    "vfs": "#000000",
    "buffered": "#1f5fbf", "buffered_sync": "#8fb8f0",
    "dontcache": "#1a9641", "dontcache_sync": "#a6dba0",
    "fadvise": "#8c510a",
    "direct": "#d7191c", "direct_sync": "#fc9a8f",
    "direct_async": "#ff8c00",
    "direct_untracked": "#6a3d9a", "direct_untracked_sync": "#c9b3e0",
    "direct_cached_edges": "#b8b800",
    "direct_mem_buffered": "#e7298a",
    "direct_data_sync": "#00b5c8",
    "direct_file_sync": "#7f7f7f",
}
# for variants not above, then the same colours again with a fill pattern
EXTRA_COLOURS = ["#00441b", "#fdd49e", "#4d004b", "#41b6c4", "#bf812d", "#f768a1"]


def variant_styles(variants):
    """variant -> (colour, gnuplot fill style), stable for known variants."""
    spare = [c for c in EXTRA_COLOURS]
    styles = {}
    n = 0
    for v in variants:
        if v in PALETTE:
            styles[v] = (PALETTE[v], "solid 0.9")
            continue
        if spare:
            styles[v] = (spare.pop(0), "solid 0.9")
        else:
            cols = list(PALETTE.values()) + EXTRA_COLOURS
            styles[v] = (cols[n % len(cols)], f"pattern {1 + (n // len(cols)) % 7}")
            n += 1
    return styles


def gp_str(text):
    """A gnuplot single-quoted string."""
    return "'" + text.replace("'", "''") + "'"


def run_gnuplot(gp):
    for term in ("pngcairo", "png"):  # pngcairo may be missing from gnuplot-nox builds
        if term != "pngcairo":
            gp.write_text(gp.read_text().replace("set terminal pngcairo", "set terminal png"))
        try:
            subprocess.run(["gnuplot", str(gp)], check=True, capture_output=True, text=True)
            return True
        except (OSError, subprocess.CalledProcessError) as e:
            err = getattr(e, "stderr", None) or e
    print(f"chart: gnuplot failed on {gp}: {err}", file=sys.stderr)
    return False


def legend_cmds(variants, styles, x, y):
    """Draws the variants' legend at screen (x, y) (top left), in a plot of
    its own right of the panels: constants below its y range, so only their
    key entries show."""
    entries = ", ".join(f"-1 with boxes fs {styles[v][1]} border lc rgb 'black' "
                        f"lc rgb '{styles[v][0]}' title {gp_str(v)}" for v in variants)
    return (f"set key at screen {x}, screen {y} left top Left reverse samplen 2 spacing 1.15 "
            f"box opaque title 'variant'\n"
            f"set origin {x:.4f}, 0\nset size {1 - x:.4f}, {y:.4f}\n"
            "unset border\nunset tics\nunset xlabel\nunset ylabel\nunset title\nunset grid\n"
            "set xrange [0:1]\nset yrange [0:1]\n"
            f"plot {entries}\n")


def panel_chart(d, name, variants, rows, ws, field, scale, fmt, title, subtitle, ylabel, styles):
    """Small multiples: one panel per workload, each with its own y scale,
    one bar per variant (left to right in legend order), value on top."""
    cols = max(1, min(5, len(ws)))
    nrows = (len(ws) + cols - 1) // cols
    width = 320 + 316 * cols
    legend_w = 300 / width
    height = 90 + 380 * nrows
    top = 1 - 75 / height  # the panels' top; the titles above
    pw, ph = (1 - legend_w) / cols, (top - 0.01) / nrows
    g = [f"set terminal pngcairo size {width},{height} noenhanced font 'Sans,11'",
         f"set output {gp_str(str(d / name))}",
         "set encoding utf8",
         "set multiplot",
         f"set label 1 {gp_str(title)} at screen 0.5, screen {1 - 18 / height:.4f} center font 'Sans,14'",
         f"set label 2 {gp_str(subtitle)} at screen 0.5, screen {1 - 44 / height:.4f} center font 'Sans,11'"]
    for k, w in enumerate(ws):
        data = []
        for i, v in enumerate(variants, 1):
            r = next((r for r in rows if r["workload"] == w and r["variant"] == v), None)
            val = r.get(field) if r else None
            if val is None:
                continue
            colour = int(styles[v][0][1:], 16)
            data.append((i, val * scale, colour))
        highest = max((y for _, y, _ in data), default=0)
        ymax = highest * 1.3 if highest > 0 else 1
        col, row = k % cols, k // cols
        g += [f"set origin {col * pw:.4f}, {top - (row + 1) * ph:.4f}",
              f"set size {pw:.4f}, {ph:.4f}",
              "set lmargin 9", "set rmargin 1", "set tmargin 2", "set bmargin 1.5",
              f"set title {gp_str(w)} font 'Sans,12'",
              f"set xrange [0:{len(variants) + 1}]",
              f"set yrange [0:{ymax:.6g}]",
              "unset xtics", "set ytics nomirror", "set border 3", "set grid ytics",
              f"set ylabel {gp_str(ylabel)}" if col == 0 else "unset ylabel",
              "set boxwidth 0.8", "set style fill solid 0.9 border lc rgb 'black'",
              "unset key", "unset label 1; unset label 2" if k else "",
              "$d%d << EOD" % k]
        g += [f"{i} {y:.6g} {c}" for i, y, c in data] or ["0 NaN 0"]
        g += ["EOD",
              f"plot $d{k} using 1:2:3 with boxes lc rgb variable notitle, "
              f"$d{k} using 1:2:(sprintf('{fmt}', $2)) with labels rotate by 90 left offset 0,0.4 "
              f"font 'Sans,8' notitle"]
    g.append(legend_cmds(variants, styles, 1 - legend_w + 0.01, top))
    g.append("unset multiplot")
    gp = d / (Path(name).stem + ".gp")
    gp.write_text("\n".join(x for x in g if x) + "\n")
    return run_gnuplot(gp)


def charts(d, variants, rows):
    """chart.png, chart-cpu.png, chart-pagecache.png from the aggregated rows."""
    styles = variant_styles(variants)
    ws = [w for w in WORKLOADS if any(r["workload"] == w for r in rows)]
    ws += [w for w in dict.fromkeys(r["workload"] for r in rows) if w not in ws]
    repeats = max((r.get("repeats", 1) for r in rows), default=1)
    of = f"median of {repeats} repeats" if repeats > 1 else "one run"
    ok = True

    # throughput: ratio to VFS per workload, one bar per variant
    dat = d / "chart.dat"
    with dat.open("w") as fh:
        fh.write("# workload " + " ".join(variants) + "\n")
        for w in ws:
            vals = []
            for v in variants:
                r = next((r for r in rows if r["workload"] == w and r["variant"] == v), None)
                vals.append(f'{r["ratio_to_vfs"]:.3f}' if r and r.get("ratio_to_vfs") is not None else "NaN")
            fh.write(w + " " + " ".join(vals) + "\n")
    # long workload names on two lines (interleave_commit_end -> interleave\ncommit_end)
    tics = ", ".join('"%s" %d' % (w.replace("_", "\\n", 1) if len(w) > 11 else w, i)
                     for i, w in enumerate(ws))
    plots = ", ".join(f"'{dat}' using {i + 2} title {gp_str(v)} fs {styles[v][1]} border lc rgb 'black' "
                      f"lc rgb '{styles[v][0]}'" for i, v in enumerate(variants))
    gp = d / "chart.gp"
    gp.write_text(f"""set terminal pngcairo size 1900,720 noenhanced font 'Sans,11'
set output {gp_str(str(d / "chart.png"))}
set encoding utf8
set title 'Throughput relative to plain VFS, per workload ({of}; 1.0 = VFS, higher is faster)' font 'Sans,14'
set style data histograms
set style histogram cluster gap 2
set boxwidth 0.9
set yrange [0:*]
set xrange [-0.6:{len(ws) - 0.4}]
set ylabel 'throughput ÷ VFS throughput (MiB/s ÷ MiB/s)'
set xlabel 'workload (tools/bench-report.sh --help)' offset 0,-0.8
set bmargin 5
set xtics ({tics}) nomirror
set ytics nomirror
set grid ytics
set key outside right top Left reverse samplen 2 spacing 1.15 box title 'variant'
set rmargin 30
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5 lc rgb 'black' front
plot {plots}
""")
    ok &= run_gnuplot(gp)
    ok &= panel_chart(d, "chart-cpu.png", variants, rows, ws, "server_cpu_s_per_gib", 1, "%.2f",
                      "Server CPU per GiB moved (ganesha.nfsd)",
                      f"user + system seconds per GiB read and written; {of}; lower is cheaper; "
                      "each workload on its own scale",
                      "CPU s / GiB", styles)
    ok &= panel_chart(d, "chart-pagecache.png", variants, rows, ws, "cache_peak_mib", 1, "%.0f",
                      "Page-cache peak of the export's files during the run",
                      f"MiB, cachestat(2) over the files at every sample; {of}; lower leaves the memory "
                      "to others; each workload on its own scale",
                      "page cache peak, MiB", styles)
    return ok


# ---- streaming beside a working set (DIR/pressure/, bench-report.sh's
# pressure workloads): one run is KERNEL.MEMORY.WORKLOAD.VARIANT.REPEAT with
# .stream.json and .ws.json (dcache-bench), .sys0/.sys1 (counters before and
# after: the memory group's memory.stat and files, /proc/vmstat, PSI,
# kswapd's CPU ticks, the two loop devices) and .stats0/.stats1 (the
# plugin's); the WS alone is WORKLOAD solo (before the runs) or solo_end
# (after), VARIANT its readers' kind (hot, touch, lat).
PRESSURE_WORKLOADS = ["seq_write", "seq_read", "multi_write", "noisy_writer", "noisy_writer_touch",
                      "noisy_reader", "noisy_reader_touch", "lat_reader"]
KERNELS = {"rwf": "RWF_DONTCACHE as the kernel has it",
           "norwf": "RWF_DONTCACHE refused (DCACHE_TEST_NO_RWF_DONTCACHE=1, as kernels before 6.14)"}
PAGE = 4096


def ws_kind(workload):
    """The working set's readers beside a workload's stream."""
    if workload.endswith("_touch"):
        return "touch"
    return "lat" if workload == "lat_reader" else "hot"


def read_counters(path):
    """`key value` lines -> {key: float}; {} when the file is missing."""
    out = {}
    try:
        text = Path(path).read_text()
    except OSError:
        return out
    for line in text.splitlines():
        k, _, v = line.strip().partition(" ")
        try:
            out[k] = float(v)
        except ValueError:
            pass
    return out


def load_json(path, failures):
    try:
        return json.loads(Path(path).read_text())
    except OSError:
        return None
    except ValueError as e:
        failures.append(f"{Path(path).name}: unreadable JSON ({e})")
        return None


def pressure_run(base, ids, failures):
    """One run's figures from its files (base: the path without suffix)."""
    k, m, w, v, r = Path(base).name.split(".")
    a, z = read_counters(base + ".sys0"), read_counters(base + ".sys1")
    if not z:
        failures.append(f"pressure {k} {m} {w} {v} {r}: no counters after the run")
        return None
    dl = lambda key: z.get(key, 0) - a.get(key, 0)
    stream, ws = load_json(base + ".stream.json", failures), load_json(base + ".ws.json", failures)
    for part in ("stream", "ws"):
        fl = Path(f"{base}.{part}.failed")
        if fl.exists():
            err = Path(f"{base}.{part}.err")
            failures.append(f"pressure {k} {m} {w} {v} {r}: {part} failed: "
                            + (err.read_text()[-300:].strip() if err.exists() else fl.read_text().strip()))
    run = {"kernel": k, "memory": m, "workload": w, "variant": v, "repeat": r}
    limit = z.get("memcg.limit_in_bytes")
    run["limit_mib"] = limit / MiB if limit is not None and limit < (1 << 60) else None
    run["limit_hits"] = dl("memcg.failcnt") if "memcg.failcnt" in z else None
    run["group_peak_mib"] = z["memcg.max_usage_in_bytes"] / MiB if "memcg.max_usage_in_bytes" in z else None
    run["group_cache_end_mib"] = z["memcg.cache"] / MiB if "memcg.cache" in z else None
    run["refault_mib"] = dl("memcg.workingset_refault_file") * PAGE / MiB if "memcg.workingset_refault_file" in z else None
    # every reclaim, the group's own limit reclaim included (pgscan_kswapd
    # and _direct leave that out; cgroup v1's memory.stat counts none)
    run["reclaim_scanned"] = dl("vmstat.pgscan_file") + dl("vmstat.pgscan_anon")
    run["reclaim_stolen"] = dl("vmstat.pgsteal_file") + dl("vmstat.pgsteal_anon")
    run["kswapd_scanned"] = dl("vmstat.pgscan_kswapd")
    run["direct_scanned"] = dl("vmstat.pgscan_direct")
    run["allocstalls"] = sum(dl(x) for x in z if x.startswith("vmstat.allocstall_"))
    run["psi_some_ms"] = dl("psi.some_us") / 1000 if "psi.some_us" in z else None
    run["psi_full_ms"] = dl("psi.full_us") / 1000 if "psi.full_us" in z else None
    run["kswapd_s"] = dl("kswapd.ticks") / z.get("clk_tck", 100)
    run["ws_dev_reads"] = dl("wsdev.reads")
    run["ws_dev_read_mib"] = dl("wsdev.read_sectors") * 512 / MiB
    run["dev_read_mib"] = dl("dev.read_sectors") * 512 / MiB
    run["dev_write_mib"] = dl("dev.write_sectors") * 512 / MiB
    run["elapsed_s"] = z.get("time", 0) - a.get("time", 0)
    run["errors"] = 0
    if stream:
        run["stream_mib_s"] = stream["total"]["mib_s"]
        run["stream_bytes"] = stream["total"]["bytes"]
        run["stream_s"] = stream["elapsed_s"]
        run["stream_cache_peak_mib"] = stream["server"]["cache_peak"] / MiB
        run["stream_write_p99_us"] = stream["write"]["lat_p99_us"] if stream["write"]["ops"] else None
        run["commits_sent"] = stream["commits_sent"]
        run["errors"] += stream["errors"] + stream["verify"]["errors"]
    srv = (stream or ws or {}).get("server", {})
    run["server_cpu_s"] = srv.get("cpu_s") if srv.get("cpu_s", -1) >= 0 else None
    run["rss_peak_mib"] = srv.get("threads", {}).get("rss_peak_kib", 0) / 1024 or None
    if ws:
        rd = ws["read"]
        passes = ws.get("passes")
        run["ws_mib_s"] = passes["mib_s"] if passes else ws["total"]["mib_s"]
        run["ws_passes"] = passes["count"] if passes else None
        run["ws_pass_p50_ms"] = passes["p50_us"] / 1000 if passes and passes["count"] else None
        run["ws_ops"] = rd["ops"]
        for q in ("p50", "p99", "p999"):
            run[f"ws_{q}_ms"] = rd[f"lat_{q}_us"] / 1000 if rd["ops"] else None
        run["ws_bytes"] = ws["total"]["bytes"]
        run["ws_verify_bytes"] = ws["verify"]["bytes_checked"]
        run["errors"] += ws["errors"] + ws["verify"]["errors"]
    moved = (run.get("stream_bytes") or 0) + (run.get("ws_bytes") or 0)
    run["server_cpu_s_per_gib"] = run["server_cpu_s"] / (moved / GiB) if run["server_cpu_s"] and moved else None
    if v in ids:
        c0 = fsal_counters(Path(base + ".stats0"), ids[v])
        c1 = fsal_counters(Path(base + ".stats1"), ids[v])
        run["plugin"] = {x: c1[x] - c0.get(x, 0) for x in c1 if c1[x] - c0.get(x, 0)}
    else:
        run["plugin"] = {}
    if run["errors"]:
        failures.append(f"pressure {k} {m} {w} {v} {r}: {run['errors']} errors")
    return run


def pressure_aggregate(d, ids, failures):
    """(rows, solo, config): medians over repeats per (kernel, memory,
    workload, variant), each with its ratios within the run: the stream to
    VFS's, the working set to its solo run (the mean of before and after)."""
    pdir = d / "pressure"
    config = load_json(pdir / "config.json", failures) or {}
    groups = {}
    for s0 in sorted(pdir.glob("*.sys0")):
        base = str(s0)[:-len(".sys0")]
        if len(Path(base).name.split(".")) != 5:
            continue
        run = pressure_run(base, ids, failures)
        if run:
            groups.setdefault((run["kernel"], run["memory"], run["workload"], run["variant"]), []).append(run)
    numeric = lambda runs, key: med([x.get(key) for x in runs if isinstance(x.get(key), (int, float))])
    merged = {}
    for key, runs in groups.items():
        row = dict(zip(("kernel", "memory", "workload", "variant"), key))
        row["repeats"] = len(runs)
        for field in sorted({f for x in runs for f in x} - set(row) - {"repeat", "plugin"}):
            row[field] = numeric(runs, field)
        row["plugin"] = {x: med([r["plugin"].get(x, 0) for r in runs])
                         for x in sorted({x for r in runs for x in r["plugin"]})}
        merged[key] = row
    solo = [r for r in merged.values() if r["workload"] in ("solo", "solo_end")]
    rows = [r for r in merged.values() if r["workload"] not in ("solo", "solo_end")]
    ref = {}
    for r in solo:
        ref.setdefault((r["kernel"], r["memory"], r["variant"]), []).append(r)
    for r in rows:
        s = ref.get((r["kernel"], r["memory"], ws_kind(r["workload"])), [])
        base_mib = mean([x.get("ws_mib_s") for x in s])
        base_p99 = mean([x.get("ws_p99_ms") for x in s])
        r["solo_ws_mib_s"], r["solo_ws_p99_ms"] = base_mib, base_p99
        r["ws_x_solo"] = r["ws_mib_s"] / base_mib if base_mib and r.get("ws_mib_s") is not None else None
        r["ws_p99_x_solo"] = r["ws_p99_ms"] / base_p99 if base_p99 and r.get("ws_p99_ms") is not None else None
        vfs = merged.get((r["kernel"], r["memory"], r["workload"], "vfs"))
        r["stream_x_vfs"] = (r["stream_mib_s"] / vfs["stream_mib_s"]
                             if vfs and vfs.get("stream_mib_s") and r.get("stream_mib_s") is not None else None)
    order = lambda r: (list(KERNELS).index(r["kernel"]) if r["kernel"] in KERNELS else 9,
                       ["limit", "whole"].index(r["memory"]) if r["memory"] in ("limit", "whole") else 9,
                       PRESSURE_WORKLOADS.index(r["workload"]) if r["workload"] in PRESSURE_WORKLOADS else 99)
    variant_order = list(ids)
    vo = lambda r: variant_order.index(r["variant"]) if r["variant"] in variant_order else 99
    rows.sort(key=lambda r: (*order(r), vo(r)))
    solo.sort(key=lambda r: (*order(r), r["workload"], r["variant"]))
    return rows, solo, config


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def pressure_tables(d, ids, result, failures, f):
    """Markdown for the pressure workloads; fills result["pressure"]."""
    if not (d / "pressure").is_dir():
        return []
    rows, solo, config = pressure_aggregate(d, ids, failures)
    result["pressure"] = {"config": config, "rows": rows, "solo": solo}
    sk = d / "pressure" / "skipped"
    if sk.exists():
        result["skipped"]["pressure"] = sk.read_text().strip()
    if not rows and not solo:
        return []
    mib = lambda x: x and x / MiB
    lines = ["", "## Streaming beside a working set", ""]
    if config:
        lines.append("WS {} in 4 files on a plain VFS export of its own filesystem; memory group {} "
                     "(`limit`) or none (`whole`); size-based streams {}; time-based {} s; touches every {} s "
                     "({} of them, stream {} s); WS alone {} s; {} repeat(s).".format(
                         numfmt(config.get("ws")), numfmt(config.get("limit")), numfmt(config.get("stream")),
                         config.get("runtime"), config.get("touch"), config.get("touches"),
                         config.get("touch_runtime"), config.get("solo"), config.get("repeats")))
    lines += ["", "Columns: docs/benchmarks.md, \"Streaming beside a working set\". WS × solo and p99 × solo "
                 "divide by the working set alone in the same kind of group (the mean of the runs before and "
                 "after); stream × VFS by the vfs row of the same workload."]
    configs = list(dict.fromkeys((r["kernel"], r["memory"]) for r in rows + solo))
    for k, m in configs:
        here = [r for r in rows if (r["kernel"], r["memory"]) == (k, m)]
        lim = next((r["limit_mib"] for r in here + solo if r.get("limit_mib")), None)
        mem = f"a memory group of {lim:.0f} MiB" if m == "limit" and lim else "the machine's whole memory"
        lines += ["", f"### {KERNELS.get(k, k)}; {mem}", ""]
        ws_alone = []
        for r in [x for x in solo if (x["kernel"], x["memory"]) == (k, m)]:
            ws_alone.append("{} {} {} MiB/s, p99 {} ms".format(
                r["variant"], "before" if r["workload"] == "solo" else "after",
                f(r.get("ws_mib_s"), "{:.0f}"), f(r.get("ws_p99_ms"), "{:.2f}")))
        if ws_alone:
            lines += ["WS alone: " + "; ".join(ws_alone) + ".", ""]
        lines += ["| workload | variant | stream MiB/s | stream × VFS | WS MiB/s | WS × solo | WS p50 / p99 / p99.9 ms "
                  "| WS p99 × solo | WS device reads (MiB) | limit hits | group peak MiB | group refaults MiB |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in here:
            lines.append("| {} | {} | {} | {} | {} | {} | {} / {} / {} | {} | {} ({}) | {} | {} | {} |".format(
                r["workload"], r["variant"], f(r.get("stream_mib_s"), "{:.0f}"), f(r.get("stream_x_vfs"), "{:.2f}"),
                f(r.get("ws_mib_s"), "{:.0f}"), f(r.get("ws_x_solo"), "{:.2f}"), f(r.get("ws_p50_ms"), "{:.2f}"),
                f(r.get("ws_p99_ms"), "{:.2f}"), f(r.get("ws_p999_ms"), "{:.1f}"), f(r.get("ws_p99_x_solo"), "{:.2f}"),
                f(r.get("ws_dev_reads"), "{:.0f}"), f(r.get("ws_dev_read_mib"), "{:.0f}"),
                f(r.get("limit_hits"), "{:.0f}"), f(r.get("group_peak_mib"), "{:.0f}"),
                f(r.get("refault_mib"), "{:.0f}")))
        lines += ["", "| workload | variant | reclaim scanned / stolen (k pages) | memory stall some / full ms | "
                  "kswapd s | direct reclaim stalls / scanned | srv CPU s (s/GiB) | server RSS peak MiB | "
                  "stream cache peak MiB | group cache after MiB | DONTCACHE fallbacks |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in here:
            p = r["plugin"]
            lines.append("| {} | {} | {} / {} | {} / {} | {} | {} / {} | {} ({}) | {} | {} | {} | {} |".format(
                r["workload"], r["variant"], f(r.get("reclaim_scanned") and r["reclaim_scanned"] / 1000, "{:.1f}"),
                f(r.get("reclaim_stolen") and r["reclaim_stolen"] / 1000, "{:.1f}"),
                f(r.get("psi_some_ms"), "{:.0f}"), f(r.get("psi_full_ms"), "{:.0f}"), f(r.get("kswapd_s"), "{:.2f}"),
                f(r.get("allocstalls"), "{:.0f}"), f(r.get("direct_scanned"), "{:.0f}"),
                f(r.get("server_cpu_s"), "{:.1f}"), f(r.get("server_cpu_s_per_gib"), "{:.2f}"),
                f(r.get("rss_peak_mib"), "{:.0f}"), f(r.get("stream_cache_peak_mib"), "{:.0f}"),
                f(r.get("group_cache_end_mib"), "{:.0f}"),
                f(p.get("fallback_no_dontcache", 0) if r["variant"] != "vfs" else None, "{:.0f}")))
    # what the fallback costs: the same runs with and without RWF_DONTCACHE
    both = [(m, w, v) for (k, m, w, v) in dict.fromkeys((r["kernel"], r["memory"], r["workload"], r["variant"])
                                                        for r in rows) if k == "rwf"]
    by = {(r["kernel"], r["memory"], r["workload"], r["variant"]): r for r in rows}
    pairs = [(by[("rwf", m, w, v)], by[("norwf", m, w, v)]) for m, w, v in both if ("norwf", m, w, v) in by]
    if pairs:
        lines += ["", "### Without RWF_DONTCACHE: what the fallback costs (same memory, same workload; "
                  "with / without)", "",
                  "| memory | workload | variant | stream MiB/s | without ÷ with | stream × VFS | WS × solo | "
                  "WS p99 × solo | limit hits | srv CPU s/GiB | DONTCACHE fallbacks (without) |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for a, b in pairs:
            g = lambda key, fmt: "{} / {}".format(f(a.get(key), fmt), f(b.get(key), fmt))
            ratio = b["stream_mib_s"] / a["stream_mib_s"] if a.get("stream_mib_s") and b.get("stream_mib_s") else None
            lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                a["memory"], a["workload"], a["variant"], g("stream_mib_s", "{:.0f}"), f(ratio, "{:.2f}"),
                g("stream_x_vfs", "{:.2f}"), g("ws_x_solo", "{:.2f}"), g("ws_p99_x_solo", "{:.2f}"),
                g("limit_hits", "{:.0f}"), g("server_cpu_s_per_gib", "{:.2f}"),
                f(b["plugin"].get("fallback_no_dontcache", 0) if b["variant"] != "vfs" else None, "{:.0f}")))
    # the acceptance: the streaming export in dontcache and direct
    # against VFS, under each memory, with and without RWF_DONTCACHE
    head = [r for r in rows if r["variant"] in ("vfs", "dontcache", "direct")]
    if head:
        kernels = [k for k in KERNELS if any(r["kernel"] == k for r in head)]
        hdr = " / ".join("RWF" if k == "rwf" else "no RWF" for k in kernels)
        lines += ["", f"### dontcache and direct against VFS ({hdr})", "",
                  f"| memory | workload | variant | stream MiB/s | stream × VFS | WS × solo | WS p99 × solo | "
                  f"limit hits | reclaim scanned (k pages) | WS device reads MiB |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for m, w, v in dict.fromkeys((r["memory"], r["workload"], r["variant"]) for r in head):
            cells = []
            for key, fmt, scale in (("stream_mib_s", "{:.0f}", 1), ("stream_x_vfs", "{:.2f}", 1),
                                    ("ws_x_solo", "{:.2f}", 1), ("ws_p99_x_solo", "{:.2f}", 1),
                                    ("limit_hits", "{:.0f}", 1), ("reclaim_scanned", "{:.1f}", 1000),
                                    ("ws_dev_read_mib", "{:.0f}", 1)):
                vals = []
                for k in kernels:
                    x = by.get((k, m, w, v), {}).get(key)
                    vals.append(f(x / scale if x is not None else None, fmt))
                cells.append(" / ".join(vals))
            lines.append(f"| {m} | {w} | {v} | " + " | ".join(cells) + " |")
    return lines


def numfmt(n):
    if not isinstance(n, (int, float)):
        return "?"
    for unit, size in (("GiB", GiB), ("MiB", MiB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n:g} B"


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
    mib = lambda k: k / 1024
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
        w, v, r = f.stem.split(".")
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
            failures.append(f"{w} {v} repeat {r}: dcache-bench failed: "
                            + Path(str(base) + ".err").read_text()[-300:].strip())
        runs.setdefault((w, v), []).append(j)

    rows = []
    for w in WORKLOADS:
        base_mibs = med([j["total"]["mib_s"] for j in runs.get((w, "vfs"), [])])
        for v in variants:
            rs = runs.get((w, v))
            if not rs:
                continue
            mibs = med([j["total"]["mib_s"] for j in rs])
            srv = [j["server"] for j in rs]
            cpu_per_gib = med([s["cpu_s"] / (j["total"]["bytes"] / GiB)
                               for s, j in zip(srv, rs) if s["cpu_s"] >= 0 and j["total"]["bytes"]])
            write_ops = med([j["write"]["ops"] for j in rs])
            dev_reads = med([s["dev_reads"] for s in srv])
            row = {
                "workload": w, "variant": v, "repeats": len(rs),
                "mib_s": mibs, "mib_s_all": [round(j["total"]["mib_s"], 1) for j in rs],
                "iops": med([j["total"]["iops"] for j in rs]),
                "ratio_to_vfs": (mibs / base_mibs) if base_mibs and mibs is not None else None,
                "read_lat_p50_us": med([j["read"]["lat_p50_us"] for j in rs if j["read"]["ops"]]),
                "read_lat_p99_us": med([j["read"]["lat_p99_us"] for j in rs if j["read"]["ops"]]),
                "write_lat_p50_us": med([j["write"]["lat_p50_us"] for j in rs if j["write"]["ops"]]),
                "write_lat_p99_us": med([j["write"]["lat_p99_us"] for j in rs if j["write"]["ops"]]),
                "server_cpu_s_per_gib": cpu_per_gib,
                "cache_peak_mib": med([s["cache_peak"] / MiB for s in srv]),
                "cache_final_mib": med([s["cache_final"] / MiB for s in srv]),
                "dirty_peak_mib": med([s["dirty_peak"] / MiB for s in srv]),
                "meminfo_cached_peak_delta_mib": med([(s["meminfo_cached_peak"] - s["meminfo_cached_start"]) / MiB for s in srv]),
                "dev_reads": dev_reads,
                "dev_read_mib": med([s["dev_read_bytes"] / MiB for s in srv]),
                "dev_write_mib": med([s["dev_write_bytes"] / MiB for s in srv]),
                "dev_reads_per_write": (dev_reads / write_ops) if write_ops else None,
                "reclaim_scanned": med([s["vmstat"].get("pgscan_kswapd", 0) + s["vmstat"].get("pgscan_direct", 0) for s in srv]),
                "writes_unstable": med([j["writes_by_stability"]["unstable"] for j in rs]),
                "writes_file_sync": med([j["writes_by_stability"]["file_sync"] + j["writes_by_stability"]["data_sync"] for j in rs]),
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

    lines = ["| workload | variant | MiB/s (median) | × VFS | srv CPU s/GiB | cache peak MiB | cache final MiB | dev reads (MiB) | dev reads/WRITE | WRITE unstable/stable | COMMITs sent/saved | verify errors |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} | {}/{} | {}/{} | {} |".format(
            r["workload"], r["variant"], f(r["mib_s"]), f(r["ratio_to_vfs"], "{:.2f}"),
            f(r["server_cpu_s_per_gib"], "{:.2f}"), f(r["cache_peak_mib"], "{:.0f}"),
            f(r["cache_final_mib"], "{:.0f}"), f(r["dev_reads"], "{:.0f}"), f(r["dev_read_mib"], "{:.0f}"),
            f(r["dev_reads_per_write"], "{:.2f}"),
            f(r["writes_unstable"], "{:.0f}"), f(r["writes_file_sync"], "{:.0f}"),
            f(r["commits_sent"], "{:.0f}"), f(r["commits_saved"], "{:.0f}"), r["verify_errors"]))
    # COMMIT latency of the commit workload, against buffered's
    crow = [r for r in rows if r["workload"] == "commit"]
    if crow:
        ref = next((r["commit_lat_p99_us"] for r in crow if r["variant"] == "buffered"), None)
        lines += ["", "COMMIT round trip (`commit`: each of 4 writers COMMITs its file at close; medians over repeats):", "",
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
        ms = lambda x: x and x / 1000
        lines += ["", "Latency probe under a throttled streaming load (`latency`: 1 MiB READs from every "
                  "streaming connection while one client alternates GETATTR and a cached 4 KiB READ on a plain "
                  "VFS export of the same server; medians over repeats):", "",
                  "| variant | streaming MiB/s | GETATTR p50 / p99 ms | READ p50 / p99 ms | probe ops | "
                  "p99 × its sync twin | p99 × VFS | probe errors |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in lrow:
            worst = lambda x: max((x.get(f"probe_{k}_p99_us") or 0) for k in ("getattr", "read")) if x else None
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
    lines += ["", "Server threads (ganesha.nfsd, /proc/PID/task/*, every 50 ms; medians over repeats of each run's mean/peak):", "",
              "| workload | variant | threads in D mean / peak | server threads in file I/O syscall mean / peak | server threads / io-wq threads (peak) | io-wq in D mean | srv CPU s/GiB | plugin io_deferred / io_inline |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        p = r["plugin"]
        lines.append("| {} | {} | {} / {} | {} / {} | {} / {} | {} | {} | {} / {} |".format(
            r["workload"], r["variant"], f(r["threads_d_mean"]), f(r["threads_d_peak"], "{:.0f}"),
            f(r["server_threads_file_io_mean"]), f(r["server_threads_file_io_peak"], "{:.0f}"),
            f(r["server_threads_peak"], "{:.0f}"), f(r["iowq_threads_peak"], "{:.0f}"), f(r["iowq_d_mean"]),
            f(r["server_cpu_s_per_gib"], "{:.2f}"),
            f(p.get("io_deferred"), "{:.0f}"), f(p.get("io_inline"), "{:.0f}")))
    # io_uring vs sync: variants X and X_sync of one run
    pairs = [(v[:-5], v) for v in variants if v.endswith("_sync") and v[:-5] in variants
             and v not in ("direct_data_sync", "direct_file_sync")]
    if pairs:
        lines += ["", "IO_Backend: io_uring (default) vs sync, same mode, same run:", "",
                  "| workload | mode | MiB/s io_uring / sync | io_uring ÷ sync | srv CPU s/GiB io_uring / sync | threads in D mean io_uring / sync | server threads in file I/O mean io_uring / sync |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for w in WORKLOADS:
            for a, b in pairs:
                ra = next((r for r in rows if r["workload"] == w and r["variant"] == a), None)
                rb = next((r for r in rows if r["workload"] == w and r["variant"] == b), None)
                if not ra or not rb:
                    continue
                ratio = ra["mib_s"] / rb["mib_s"] if ra["mib_s"] and rb["mib_s"] else None
                for r in (ra, rb):
                    r["io_uring_over_sync"] = ratio
                lines.append("| {} | {} | {} / {} | {} | {} / {} | {} / {} | {} / {} |".format(
                    w, a, f(ra["mib_s"]), f(rb["mib_s"]), f(ratio, "{:.2f}"),
                    f(ra["server_cpu_s_per_gib"], "{:.2f}"), f(rb["server_cpu_s_per_gib"], "{:.2f}"),
                    f(ra["threads_d_mean"]), f(rb["threads_d_mean"]),
                    f(ra["server_threads_file_io_mean"]), f(rb["server_threads_file_io_mean"])))
    # boundary pages: the interleaved-record workloads, with the tracker's
    # own account of where each held page went
    ileave = [r for r in rows if r["workload"].startswith("interleave")]
    if ileave:
        lines += ["", "Boundary pages (interleaved misaligned records; the tracker's counters, medians over repeats):", "",
                  "| workload | variant | dev reads/WRITE | WRITEs | held | completed | released by age / ceiling / close / truncate | kept at COMMIT | edge write-backs | COMMITs sent | cache final MiB | verify errors |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in ileave:
            p = r["plugin"]
            g = lambda k: f(p.get(k, 0), "{:.0f}")
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
