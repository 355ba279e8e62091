"""tools/bench_report.py's "Server CPU per GiB by phase": ganesha.nfsd's
user + system seconds during each measured phase (dcache-bench samples
/proc/PID/stat: every thread, io_uring's io-wq workers included) per GiB
read and written in it, for every variant and workload of the run, one
table per kind of run, with the two ratios the cost of the direct modes
is judged by (direct ÷ dontcache, direct ÷ vfs). docs/benchmarks.md,
"cpu", says how to read it and how to profile a phase.

Beside it, the same with the kernel's own threads added (kworkers, the loop
device's worker, ksoftirqd, kswapd: dcache-bench's kthread_cpu_s): work the
kernel does for the server off its threads, which a mode can move there
(a DONTCACHE WRITE's write-back completions and page drops run in
workqueues, a direct WRITE's in the server's thread), with the families
that took the most."""
from bench_report_common import GiB, MEASURED, med

RATIOS = [("direct", "dontcache"), ("direct", "vfs")]
SERVER = "server_cpu_s_per_gib"
WITH_KTHREADS = "with_kthreads_cpu_s_per_gib"


def cpu_per_gib(runs):
    """A row's CPU per GiB over its repeats (medians): the server's, the
    kernel threads' in all, both together, and the kernel threads' by
    family."""
    def per_gib(j, secs):
        moved = j["total"]["bytes"]
        return secs / (moved / GiB) if secs is not None and secs >= 0 and moved else None
    srv = [(j, j["server"]) for j in runs]
    families = sorted({k for _, s in srv for k in s.get("kthread_cpu_by_family", {})})
    return {
        "server": med([per_gib(j, s.get("cpu_s")) for j, s in srv]),
        "all": med([per_gib(j, s.get("kthread_cpu_s")) for j, s in srv]),
        "with_server": med([per_gib(j, s["kthread_cpu_s"] + s["cpu_s"]) for j, s in srv
                            if s.get("kthread_cpu_s", -1) >= 0 and s.get("cpu_s", -1) >= 0]),
        "by_family": {k: med([per_gib(j, s.get("kthread_cpu_by_family", {}).get(k, 0.0)) for j, s in srv])
                      for k in families},
    }


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


def table(rows, variants, keys, f, figure=SERVER):
    """Rows of (keys..., phase) x variant -> s/GiB, with the ratios."""
    here = [v for v in variants if any(r["variant"] == v and r.get(figure) is not None for r in rows)]
    if not here:
        return []
    ratios = [(a, b) for a, b in RATIOS if a in here and b in here]
    lines = ["| " + " | ".join([k for k, _ in keys] + ["phase"] + here + [f"{a} ÷ {b}" for a, b in ratios]) + " |",
             "|" + "---|" * (len(keys) + 1) + "---:|" * (len(here) + len(ratios))]
    cells = {}
    for r in rows:
        k = tuple(get(r) for _, get in keys) + (phase(r),)
        cells.setdefault(k, {})[r["variant"]] = r.get(figure)
    for k, by in cells.items():
        if all(by.get(v) is None for v in here):
            continue  # a phase without the figure (runs before it was kept)
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
    shared = result.get("rows", [])
    body = table(shared, variants, [workload], f, WITH_KTHREADS)
    if body:
        out += ["", "### The shared server with the kernel's threads", "",
                "ganesha.nfsd's seconds and the kernel threads' (kworkers, the loop device's worker, ksoftirqd, "
                "kswapd) during the phase, per GiB: a mode moves work between the two (a DONTCACHE WRITE's "
                "completions run in workqueues, a direct WRITE's in the server's thread). The machine's other "
                "work shows here too. The families that took the most:", ""] + body + [""]
        for r in shared:
            fam = sorted(((v, k) for k, v in (r.get("kthread_cpu_s_per_gib_by_family") or {}).items()
                          if v), reverse=True)[:4]
            if fam:
                out.append(f"- {r['workload']} {phase(r)} {r['variant']}: "
                           + ", ".join(f"{k} {v:.2f}" for v, k in fam))
    return lines + out if out else []
