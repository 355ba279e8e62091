"""tools/bench_report.py's figures and tables of the pressure workloads
(DIR/pressure/: a stream beside a working set, the server in a memory
group): pressure_tables."""
import json
from pathlib import Path

from bench_report_common import GiB, MiB, fsal_counters, med


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


def pressure_run(base, ids, failures, what="pressure"):
    """One run's figures from its files (base: the path without suffix)."""
    k, m, w, v, r = Path(base).name.split(".")
    a, z = read_counters(base + ".sys0"), read_counters(base + ".sys1")
    if not z:
        failures.append(f"{what} {k} {m} {w} {v} {r}: no counters after the run")
        return None

    def dl(key):
        return z.get(key, 0) - a.get(key, 0)
    stream, ws = load_json(base + ".stream.json", failures), load_json(base + ".ws.json", failures)
    for part in ("stream", "ws"):
        fl = Path(f"{base}.{part}.failed")
        if fl.exists():
            err = Path(f"{base}.{part}.err")
            failures.append(f"{what} {k} {m} {w} {v} {r}: {part} failed: "
                            + (err.read_text()[-300:].strip() if err.exists() else fl.read_text().strip()))
    run = {"kernel": k, "memory": m, "workload": w, "variant": v, "repeat": r}
    limit = z.get("memcg.limit_in_bytes")
    run["limit_mib"] = limit / MiB if limit is not None and limit < (1 << 60) else None
    run["limit_hits"] = dl("memcg.failcnt") if "memcg.failcnt" in z else None
    run["group_peak_mib"] = z["memcg.max_usage_in_bytes"] / MiB if "memcg.max_usage_in_bytes" in z else None
    run["group_cache_end_mib"] = z["memcg.cache"] / MiB if "memcg.cache" in z else None
    run["refault_mib"] = (dl("memcg.workingset_refault_file") * PAGE / MiB
                          if "memcg.workingset_refault_file" in z else None)
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
        # touch readers: the rate of a pass, none when no pass was complete
        run["ws_mib_s"] = (passes["mib_s"] if passes["count"] else None) if passes else ws["total"]["mib_s"]
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
        failures.append(f"{what} {k} {m} {w} {v} {r}: {run['errors']} errors")
    return run


def pressure_aggregate(d, ids, failures, sub="pressure"):
    """(rows, solo, config): medians over repeats per (kernel, memory,
    workload, variant) of DIR/sub/, each with its ratios within the run:
    the stream to VFS's, the working set to its solo run (the mean of
    before and after)."""
    pdir = d / sub
    config = load_json(pdir / "config.json", failures) or {}
    groups = {}
    for s0 in sorted(pdir.glob("*.sys0")):
        base = str(s0)[:-len(".sys0")]
        if len(Path(base).name.split(".")) != 5:
            continue
        run = pressure_run(base, ids, failures, sub)
        if run:
            groups.setdefault((run["kernel"], run["memory"], run["workload"], run["variant"]), []).append(run)

    def numeric(runs, key):
        return med([x.get(key) for x in runs if isinstance(x.get(key), (int, float))])
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
    variant_order = list(ids)

    def order(r):
        return (list(KERNELS).index(r["kernel"]) if r["kernel"] in KERNELS else 9,
                ["limit", "whole"].index(r["memory"]) if r["memory"] in ("limit", "whole") else 9,
                PRESSURE_WORKLOADS.index(r["workload"]) if r["workload"] in PRESSURE_WORKLOADS else 99)

    def vo(r):
        return variant_order.index(r["variant"]) if r["variant"] in variant_order else 99
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
            def g(key, fmt, a=a, b=b):
                return "{} / {}".format(f(a.get(key), fmt), f(b.get(key), fmt))
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
                  "| memory | workload | variant | stream MiB/s | stream × VFS | WS × solo | WS p99 × solo | "
                  "limit hits | reclaim scanned (k pages) | WS device reads MiB |",
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
