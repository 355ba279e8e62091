"""tools/bench_report.py's "Server CPU per GiB by phase": ganesha.nfsd's
user + system seconds during each measured phase (dcache-bench samples
/proc/PID/stat: every thread, io_uring's io-wq workers included) per GiB
read and written in it, for every variant and workload of the run, one
table per kind of run, with the two ratios the cost of the direct modes
is judged by (direct ÷ dontcache, direct ÷ vfs). docs/benchmarks.md,
"cpu", says how to read it and how to profile a phase."""
from bench_report_common import GiB, MEASURED

RATIOS = [("direct", "dontcache"), ("direct", "vfs")]


def server_rows(servers):
    """The workloads with a server per variant, as rows of CPU per GiB."""
    rows = []
    for w, runs in (servers or {}).items():
        for r in runs:
            cpu, moved = r.get("server_cpu_s"), r.get("bytes")
            rows.append({"workload": w, "variant": r["variant"],
                         "server_cpu_s_per_gib": cpu / (moved / GiB) if cpu is not None and cpu >= 0 and moved
                         else None})
    return rows


def table(rows, variants, keys, f):
    """Rows of (keys..., phase) x variant -> s/GiB, with the ratios."""
    here = [v for v in variants if any(r["variant"] == v and r.get("server_cpu_s_per_gib") is not None
                                       for r in rows)]
    if not here:
        return []
    ratios = [(a, b) for a, b in RATIOS if a in here and b in here]
    lines = ["| " + " | ".join([k for k, _ in keys] + ["phase"] + here + [f"{a} ÷ {b}" for a, b in ratios]) + " |",
             "|" + "---|" * (len(keys) + 1) + "---:|" * (len(here) + len(ratios))]
    cells = {}
    for r in rows:
        k = tuple(get(r) for _, get in keys) + (phase(r),)
        cells.setdefault(k, {})[r["variant"]] = r.get("server_cpu_s_per_gib")
    for k, by in cells.items():
        vals = [f(by.get(v), "{:.2f}") for v in here]
        for a, b in ratios:
            x, y = by.get(a), by.get(b)
            vals.append(f(x / y if x is not None and y else None, "{:.2f}"))
        lines.append("| " + " | ".join(list(k) + vals) + " |")
    return lines


def phase(r):
    """A row's phase: its own, or what the one measured phase of its
    workload does; the pressure matrix's is the stream beside the WS."""
    if r.get("phase"):
        return r["phase"]
    if "kernel" in r:
        return "stream + WS"
    return MEASURED.get(r["workload"], "run")


def cpu_tables(result, f):
    """The section's markdown from the aggregated results."""
    variants = result.get("variants", [])
    lines = ["", "## Server CPU per GiB by phase", "",
             "ganesha.nfsd's user + system seconds during each measured phase per GiB read and written in it "
             "(all its threads, io-wq workers included; medians over repeats). How to read it and how to profile "
             "a phase: docs/benchmarks.md, \"cpu\"."]
    workload = ("workload", lambda r: r["workload"])
    where = ("kernel, memory", lambda r: f"{r['kernel']}, {r['memory']}")
    parts = [("The shared server", result.get("rows", []), [workload]),
             ("A server per variant", server_rows(result.get("servers")), [workload]),
             ("Streaming beside a working set (the stream and the working set together)",
              (result.get("pressure") or {}).get("rows", []), [where, workload]),
             ("One export carrying both", (result.get("one_export") or {}).get("rows", []), [where, workload])]
    out = []
    for title, rows, keys in parts:
        body = table(rows, variants, keys, f)
        if body:
            out += ["", f"### {title}", ""] + body
    return lines + out if out else []
