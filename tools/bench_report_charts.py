"""tools/bench_report.py's charts (gnuplot): chart.png (throughput
relative to VFS), chart-cpu.png (server CPU per GiB) and
chart-pagecache.png (page-cache peak), one colour per variant."""
import subprocess
import sys
from pathlib import Path

from bench_report_common import WORKLOADS


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
    """chart.png, chart-cpu.png, chart-pagecache.png from the aggregated rows
    (a workload of several phases has a panel per phase, WORKLOAD-PHASE)."""
    styles = variant_styles(variants)
    rows = [dict(r, workload=r["workload"] + ("-" + r["phase"] if r.get("phase") else "")) for r in rows]
    order = {w: i for i, w in enumerate(WORKLOADS)}
    ws = sorted(dict.fromkeys(r["workload"] for r in rows), key=lambda w: order.get(w.split("-")[0], len(order)))
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
