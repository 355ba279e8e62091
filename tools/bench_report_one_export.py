"""tools/bench_report.py's tables of the one-export workloads (DIR/one_export/:
a stream and a working set through the same export, the server in a
memory group; KERNEL.MEMORY.WORKLOAD-PHASE.VARIANT.REPEAT, read as the
pressure matrix's runs are): one_export_tables. Every ratio is within the
run: to VFS's figure of the same phase, to the variant's own working set
alone, to the best of the single modes (every variant whose name does not
begin with auto)."""
from bench_report_pressure import KERNELS, numfmt, pressure_aggregate

AUTO = "auto"
# the workloads in table order, each with its phases in the order they run
PHASES = {"mixed": ["solo", "write", "read"], "reread_fit": ["pass1", "pass2", "pass3"],
          "reread_big": ["pass1", "pass2", "pass3"], "noisy_pair": ["solo", "noisy"]}


def ratio(a, b):
    return a / b if a is not None and b else None


class View:
    """The rows of one kernel mode and memory, by (workload, phase, variant)."""

    def __init__(self, rows, variants):
        self.by = {(r["workload"], r["phase"], r["variant"]): r for r in rows}
        self.variants = [v for v in variants if any(r["variant"] == v for r in rows)]

    def get(self, w, p, v, key):
        return self.by.get((w, p, v), {}).get(key)

    def has(self, w):
        return any(k[0] == w for k in self.by)

    def best_single(self, w, p, key):
        """The highest figure of the phase among the single modes."""
        vals = [self.get(w, p, v, key) for v in self.variants if not v.startswith(AUTO)]
        vals = [x for x in vals if x is not None]
        return max(vals) if vals else None


def mixed_tables(t, f):
    if not t.has("mixed"):
        return []

    def g(v, p, key, fmt="{:.0f}"):
        return f(t.get("mixed", p, v, key), fmt)

    def three(v, key, fmt="{:.0f}"):
        return " / ".join(g(v, p, key, fmt) for p in ("solo", "write", "read"))
    vfs_solo = t.get("mixed", "solo", "vfs", "ws_mib_s")
    vfs_dev = sum(t.get("mixed", p, "vfs", "ws_dev_read_mib") or 0 for p in ("write", "read"))
    lines = ["", "`mixed`, the working set (one client per file, each file read whole every TOUCH s):", "",
             "| variant | WS MiB/s solo / write / read | ÷ VFS solo: write / read | ÷ VFS same phase: write / read "
             "| WS p99 ms solo / write / read | p99 × solo: write / read | WS device reads MiB write / read "
             "| ÷ VFS's |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for v in t.variants:
        solo_p99 = t.get("mixed", "solo", v, "ws_p99_ms")
        dev = [t.get("mixed", p, v, "ws_dev_read_mib") for p in ("write", "read")]
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            v, three(v, "ws_mib_s"),
            " / ".join(f(ratio(t.get("mixed", p, v, "ws_mib_s"), vfs_solo), "{:.2f}") for p in ("write", "read")),
            " / ".join(f(ratio(t.get("mixed", p, v, "ws_mib_s"), t.get("mixed", p, "vfs", "ws_mib_s")), "{:.2f}")
                       for p in ("write", "read")),
            three(v, "ws_p99_ms", "{:.2f}"),
            " / ".join(f(ratio(t.get("mixed", p, v, "ws_p99_ms"), solo_p99), "{:.2f}") for p in ("write", "read")),
            " / ".join(f(x, "{:.0f}") for x in dev),
            f(ratio(sum(x or 0 for x in dev), vfs_dev), "{:.2f}")))
    lines += ["", "`mixed`, the stream (written in 1 MiB WRITEs, then read back) and the group:", "",
              "| variant | stream MiB/s write / read | ÷ VFS: write / read | ÷ best single mode: write / read "
              "| limit hits solo / write / read | group peak MiB | srv CPU s/GiB solo / write / read |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for v in t.variants:
        rates = [t.get("mixed", p, v, "stream_mib_s") for p in ("write", "read")]
        lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            v, " / ".join(f(x, "{:.0f}") for x in rates),
            " / ".join(f(ratio(x, t.get("mixed", p, "vfs", "stream_mib_s")), "{:.2f}")
                       for x, p in zip(rates, ("write", "read"))),
            " / ".join(f(ratio(x, t.best_single("mixed", p, "stream_mib_s")), "{:.2f}")
                       for x, p in zip(rates, ("write", "read"))),
            three(v, "limit_hits"), g(v, "read", "group_peak_mib"), three(v, "server_cpu_s_per_gib", "{:.2f}")))
    return lines


def reread_table(t, f):
    ws = [w for w in ("reread_fit", "reread_big") if t.has(w)]
    if not ws:
        return []
    passes = ("pass1", "pass2", "pass3")
    lines = ["", "`reread_fit`, `reread_big`: a data set read three times:", "",
             "| workload | variant | MiB/s pass 1 / 2 / 3 | pass 2 / 3 ÷ VFS | pass 2 / 3 ÷ best single mode "
             "| device reads MiB pass 1 / 2 / 3 | limit hits | srv CPU s/GiB pass 1 / 2 / 3 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for w in ws:
        for v in t.variants:
            def each(key, fmt, ps=passes, w=w, v=v):
                return " / ".join(f(t.get(w, p, v, key), fmt) for p in ps)
            hits = sum(t.get(w, p, v, "limit_hits") or 0 for p in passes)
            lines.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
                w, v, each("stream_mib_s", "{:.0f}"),
                " / ".join(f(ratio(t.get(w, p, v, "stream_mib_s"), t.get(w, p, "vfs", "stream_mib_s")), "{:.2f}")
                           for p in passes[1:]),
                " / ".join(f(ratio(t.get(w, p, v, "stream_mib_s"), t.best_single(w, p, "stream_mib_s")), "{:.2f}")
                           for p in passes[1:]),
                each("ws_dev_read_mib", "{:.0f}"), f(hits, "{:.0f}"), each("server_cpu_s_per_gib", "{:.2f}")))
    return lines


def pair_table(t, f):
    if not t.has("noisy_pair"):
        return []
    w = "noisy_pair"
    lines = ["", "`noisy_pair`: 4 readers of random 4 KiB READs, one at a time, alone and beside 4 writers of "
             "1 MiB sequential WRITEs:", "",
             "| variant | readers p50 / p99 / p99.9 ms alone | beside the writers | p99 × alone | p99 ÷ dontcache's "
             "| readers MiB/s alone / beside | writers MiB/s | ÷ VFS | readers' device reads MiB | limit hits |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    dc = t.get(w, "noisy", "dontcache", "ws_p99_ms")
    for v in t.variants:
        def lat(p, v=v):
            return " / ".join(f(t.get(w, p, v, k), "{:.2f}") for k in ("ws_p50_ms", "ws_p99_ms", "ws_p999_ms"))
        p99 = t.get(w, "noisy", v, "ws_p99_ms")
        lines.append("| {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |".format(
            v, lat("solo"), lat("noisy"), f(ratio(p99, t.get(w, "solo", v, "ws_p99_ms")), "{:.2f}"),
            f(ratio(p99, dc), "{:.2f}"), f(t.get(w, "solo", v, "ws_mib_s"), "{:.1f}"),
            f(t.get(w, "noisy", v, "ws_mib_s"), "{:.1f}"), f(t.get(w, "noisy", v, "stream_mib_s"), "{:.0f}"),
            f(ratio(t.get(w, "noisy", v, "stream_mib_s"), t.get(w, "noisy", "vfs", "stream_mib_s")), "{:.2f}"),
            f(t.get(w, "noisy", v, "ws_dev_read_mib"), "{:.0f}"), f(t.get(w, "noisy", v, "limit_hits"), "{:.0f}")))
    return lines


def target_figures(t, memory, a):
    """auto variant a's figures against what auto is for, each a ratio of
    this run: (what, value, "≥" or "≤", bound) rows."""
    g = t.get
    figures = []
    if t.has("mixed") and memory == "limit":
        vfs_solo = g("mixed", "solo", "vfs", "ws_mib_s")
        for p in ("write", "read"):
            figures += [
                (f"mixed {p}: WS ÷ VFS's WS alone", ratio(g("mixed", p, a, "ws_mib_s"), vfs_solo), "≥", 0.8),
                (f"mixed {p}: WS p99 × its own alone",
                 ratio(g("mixed", p, a, "ws_p99_ms"), g("mixed", "solo", a, "ws_p99_ms")), "≤", 3),
                (f"mixed {p}: stream ÷ best single mode",
                 ratio(g("mixed", p, a, "stream_mib_s"), t.best_single("mixed", p, "stream_mib_s")), "≥", 0.9)]
        dev = [sum(g("mixed", p, v, "ws_dev_read_mib") or 0 for p in ("write", "read")) for v in (a, "vfs")]
        figures.append(("mixed: WS device reads ÷ VFS's", ratio(*dev), "≤", 0.05))
    if memory == "whole":
        figures += [(f"mixed {p}: WS ÷ VFS's", ratio(g("mixed", p, a, "ws_mib_s"), g("mixed", p, "vfs", "ws_mib_s")),
                     "≥", 0.95) for p in ("write", "read") if t.has("mixed")]
        figures += [(f"{w} {p} ÷ VFS", ratio(g(w, p, a, "stream_mib_s"), g(w, p, "vfs", "stream_mib_s")), "≥", 0.95)
                    for w in ("reread_fit", "reread_big") if t.has(w) for p in ("pass2", "pass3")]
    if t.has("reread_big") and memory == "limit":
        figures += [(f"reread_big {p} ÷ best single mode",
                     ratio(g("reread_big", p, a, "stream_mib_s"), t.best_single("reread_big", p, "stream_mib_s")),
                     "≥", 0.9) for p in ("pass1", "pass2", "pass3")]
    if t.has("noisy_pair"):
        figures.append(("noisy_pair: readers' p99 ÷ dontcache's",
                        ratio(g("noisy_pair", "noisy", a, "ws_p99_ms"),
                              g("noisy_pair", "noisy", "dontcache", "ws_p99_ms")), "≤", 1))
    return figures


def auto_targets(t, memory, f):
    """Each auto variant's figures against auto's targets: a column per
    variant (auto, auto_direct, ...), the value and whether it is met."""
    autos = [v for v in t.variants if v.startswith(AUTO)]
    columns = [target_figures(t, memory, a) for a in autos]
    if not columns or not columns[0]:
        return []
    lines = ["", "`auto` against its targets (ratios of this run; every variant of `auto` run):", "",
             "| figure | " + " | ".join(autos) + " | target |", "|---|" + "---:|" * len(autos) + "---|"]
    for i, (what, _, sign, bound) in enumerate(columns[0]):
        cells = []
        for figures in columns:
            value = figures[i][1]
            met = "–" if value is None else "met" if (value >= bound if sign == "≥" else value <= bound) else "not met"
            cells.append(f"{f(value, '{:.2f}')} ({met})")
        lines.append(f"| {what} | " + " | ".join(cells) + f" | {sign} {bound:g} |")
    return lines


def one_export_tables(d, ids, result, failures, f):
    """Markdown for the one-export workloads; fills result["one_export"]."""
    if not (d / "one_export").is_dir():
        return []
    rows, _, config = pressure_aggregate(d, ids, failures, "one_export")
    for r in rows:
        r["workload"], _, r["phase"] = r["workload"].partition("-")
    order, variants = list(PHASES), list(ids)

    def key(r):
        phases = PHASES.get(r["workload"], [])
        return (r["kernel"] != "rwf", r["memory"] != "limit",
                order.index(r["workload"]) if r["workload"] in order else len(order),
                phases.index(r["phase"]) if r["phase"] in phases else len(phases),
                variants.index(r["variant"]) if r["variant"] in variants else len(variants))
    rows.sort(key=key)
    result["one_export"] = {"config": config, "rows": rows}
    sk = d / "one_export" / "skipped"
    if sk.exists():
        result["skipped"]["one_export"] = sk.read_text().strip()
    if not rows:
        return []
    lines = ["", "## One export carrying both", ""]
    if config:
        sizes = [numfmt(config.get(k)) for k in ("ws", "file", "stream", "reread_fit", "reread_big", "limit")]
        lines.append("Each variant's export holds a working set of {} in files of {} (on a filesystem of its own "
                     "mounted inside the export, so its device reads are its own) and a stream of {}; reread "
                     "data sets {} and {}; memory group {} (`limit`) or none (`whole`); ".format(*sizes)
                     + f"TOUCH {config.get('touch')} s, the pair's writers {config.get('runtime')} s.")
    lines += ["", "Columns: docs/benchmarks.md, \"One export carrying both\"."]
    for k, m in dict.fromkeys((r["kernel"], r["memory"]) for r in rows):
        here = [r for r in rows if (r["kernel"], r["memory"]) == (k, m)]
        lim = next((r["limit_mib"] for r in here if r.get("limit_mib")), None)
        mem = f"a memory group of {lim:.0f} MiB" if m == "limit" and lim else "the machine's whole memory"
        t = View(here, list(ids))
        lines += ["", f"### {KERNELS.get(k, k)}; {mem}"]
        lines += mixed_tables(t, f) + reread_table(t, f) + pair_table(t, f) + auto_targets(t, m, f)
    return lines
