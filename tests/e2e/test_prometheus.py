"""DCACHE's metrics in a real Prometheus (Debian's package), on every
release: scraped from Ganesha's own endpoint where its release has the
registry (9.14: Enable_Metrics), from dcache-exporter elsewhere (4.3, 6.5,
started here in the server's namespaces, as its systemd unit would be).

One server with a `direct` export (2) and a `dontcache` export (3), one
known workload through dcache-bench, an NFS client (libnfs): N 64 KiB
WRITEs to 2, M 64 KiB READs from 3 of a file laid out on the server's
filesystem, exactly N and M requests (the WRITEs are UNSTABLE, so the
bench COMMITs once at close if the server left them so, and its report
says how many it sent). Prometheus scrapes every second; then everything
asked of the metrics, through its HTTP API:

- the series the workload implies, with their values and labels;
- the same metric names on every release: the names Prometheus holds are
  those metrics.def promises every endpoint serves (and the names another
  release's run recorded in the build tree, when there is one);
- every query of the Grafana dashboard (deploy/grafana), its variables
  substituted as Grafana would, returns data;
- the alert rules (deploy/prometheus) load, evaluate healthy, and none is
  pending or firing.

A second server has export 3 removed and added back and export 2's modes
changed, by SIGHUP, cycle after cycle while Prometheus scrapes it: the
metrics follow each reload, no scrape fails, Ganesha survives (--long: 100
cycles, and its memory does not grow).

DCACHE_PROMETHEUS_PICTURE=FILE.png also takes a picture of Prometheus's
graph page of the key series with headless Chromium (docs/monitoring.md).
"""

import hashlib
import json
import os
import re
import shutil
import sys
import time
import urllib.parse
from datetime import datetime

import pytest

from dcache_testbed import prometheus as promlib
from dcache_testbed.exports import dcache, vfs
from dcache_testbed.procs import Timeout, wait_for
from dcache_testbed.releases import TOP

sys.path.insert(0, os.path.join(TOP, "tools"))
import dcache_metrics  # noqa: E402  pylint: disable=wrong-import-position

KIB = 1 << 10
WRITES, WRITE_SIZE = 40, 64 * KIB      # N WRITEs of 64 KiB to the direct export
READS, READ_SIZE = 24, 64 * KIB        # M READs of 64 KiB from the dontcache export
THINK_US = 50_000                      # the client's pause after each request: 3.2 s in all
DIRECT, DONTCACHE = "export_id=2", "export_id=3"
DASHBOARD = os.path.join(TOP, "deploy", "grafana", "dcache-dashboard.json")
RULES = os.path.join(TOP, "deploy", "prometheus", "dcache-alerts.yml")
EXPORTER_OWN = "dcache_exporter_ganesha_up"
RATE_INTERVAL = "4s"  # Grafana's $__rate_interval at a 1 s scrape: 4 x the scrape interval
WAIT = 30             # the longest a value may take to reach Prometheus (its targets come after 5 s)


def modes_of(op):
    """How many modes metrics.def gives dcache_export_mode for op: each
    export serves one series per mode, the one it has at 1."""
    return sum(1 for _, metric, labels in dcache_metrics.Table().sources
               if metric == "dcache_export_mode" and f"op={op}," in labels + ",")


class Run:
    """The server, its endpoint, Prometheus, and what the workload did."""

    def __init__(self, srv, port, prom, started, writes, reads, ended):
        self.srv, self.port, self.prom, self.started = srv, port, prom, started
        self.writes, self.reads, self.ended = writes, reads, ended


def bench(srv, build, export, *args):
    out = os.path.join(srv.state, f"bench-{export}.json")
    srv.run([build.bin("dcache-bench"), f"--url=nfs://127.0.0.1/{export}", *args, "--json", out,
             "--no-progress", "--thread-interval-ms=0"], quiet=True)
    with open(out, encoding="utf-8") as f:
        report = json.load(f)
    assert report["errors"] == 0, f"dcache-bench on /{export}: {report['first_error']}"
    return report


@pytest.fixture(scope="module")
def run(make_module_server, release, build):
    srv = make_module_server(
        release=release, core_lines=promlib.core_lines(release),
        exports=[vfs(1, "vfs"),
                 dcache(2, "direct", IO_Cache_Read="direct", IO_Cache_Write="direct", IO_Queue_Depth=16,
                        Boundary_Max_Pages=1024),
                 dcache(3, "dontcache", IO_Cache_Read="dontcache", IO_Cache_Write="dontcache")])
    port = promlib.start_endpoint(srv)
    prom = promlib.Prometheus(srv, [port], rule_files=[RULES])
    started = time.time()
    prom.start()
    srv.stack.callback(prom.stop)
    # Scraped once before the workload: its counters rise in Prometheus
    # (rate() sees the workload) rather than appear at their final values.
    wait_for(lambda: prom.query('up{job="dcache"} == 1'), WAIT, "Prometheus's first scrape", 0.2,
             alive=prom.child.alive)
    # the file the READs read, laid out on the server's side and out of
    # the page cache: the bench lays out none (no WRITE to the export)
    path = os.path.join(srv.mnt, "dontcache", "rd.0")
    with open(path, "wb") as f:
        f.write(os.urandom(READS * READ_SIZE))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    # spread over a few scrapes: the counters rise in steps, rate() and
    # the dashboard's rates see them move
    pace = f"thinktime={THINK_US}"
    writes = bench(srv, build, "direct", "rw=write", f"bs={WRITE_SIZE}", f"size={WRITES * WRITE_SIZE}",
                   "filename=wr", pace)
    reads = bench(srv, build, "dontcache", "rw=read", f"bs={READ_SIZE}", f"size={READS * READ_SIZE}",
                  "filename=rd", pace)
    assert (writes["write"]["ops"], reads["read"]["ops"], reads["write"]["ops"]) == (WRITES, READS, 0), \
        "dcache-bench did not send exactly the WRITEs and READs asked"
    assert "layout" not in reads, "dcache-bench laid the READs' file out (WRITEs to the dontcache export)"
    return Run(srv, port, prom, started, writes, reads, time.time())


def value(prom, expr):
    """expr's one value now (0 when it selects nothing)."""
    got = prom.query(f"sum({expr}) or vector(0)")
    return got[0][1]


def expect(run, expr, want, timeout=WAIT):
    """expr (summed) reaches want in Prometheus (polled, bounded)."""
    run.prom.wait_value(f"sum({expr}) or vector(0)", want, timeout)


def fallbacks(run, reason):
    return value(run.prom, f'dcache_fallbacks_total{{reason="{reason}"}}')


# ----------------------------------------------------- the workload's values --

def test_the_workload_reaches_prometheus_with_its_values(run):
    n, m = WRITES, READS
    commits = run.writes["commits_sent"]
    file_sync = run.writes["writes_by_stability"]["file_sync"]
    # The last of the workload first: once there, the rest came with it
    # (one scrape, one push).
    expect(run, f'dcache_request_duration_microseconds_count{{export="{DONTCACHE}",op="read"}}', m)
    read_path = "buffered" if fallbacks(run, "no_dontcache") else "dontcache"
    checks = [
        # requests by disposition, each request once
        (f'dcache_requests_total{{export="{DIRECT}",op="write",disposition="direct"}}', n),
        (f'dcache_requests_total{{export="{DIRECT}"}}', n),
        (f'dcache_requests_total{{export="{DONTCACHE}",op="read",disposition="dontcache"}}', m),
        (f'dcache_requests_total{{export="{DONTCACHE}"}}', m),
        ("dcache_requests_total", n + m),
        # bytes for clients, and by path to the files
        (f'dcache_bytes_total{{export="{DIRECT}",op="write"}}', n * WRITE_SIZE),
        (f'dcache_bytes_total{{export="{DIRECT}",op="read"}}', 0),
        (f'dcache_bytes_total{{export="{DONTCACHE}",op="read"}}', m * READ_SIZE),
        (f'dcache_bytes_total{{export="{DONTCACHE}",op="write"}}', 0),
        (f'dcache_io_bytes_total{{export="{DIRECT}",op="write",path="direct"}}', n * WRITE_SIZE),
        (f'dcache_io_bytes_total{{export="{DIRECT}"}}', n * WRITE_SIZE),
        (f'dcache_io_bytes_total{{export="{DONTCACHE}",op="read",path="{read_path}"}}', m * READ_SIZE),
        (f'dcache_io_bytes_total{{export="{DONTCACHE}"}}', m * READ_SIZE),
        # service times: a count and a +Inf bucket per request, COMMITs too
        (f'dcache_request_duration_microseconds_count{{export="{DIRECT}",op="write"}}', n),
        (f'dcache_request_duration_microseconds_bucket{{export="{DIRECT}",op="write",le="+Inf"}}', n),
        (f'dcache_request_duration_microseconds_count{{export="{DIRECT}",op="commit"}}', commits),
        (f'dcache_request_duration_microseconds_bucket{{export="{DIRECT}",op="commit",le="+Inf"}}', commits),
        (f'dcache_request_duration_microseconds_count{{export="{DIRECT}",op="read"}}', 0),
        (f'dcache_request_duration_microseconds_bucket{{export="{DONTCACHE}",op="read",le="+Inf"}}', m),
        (f'dcache_request_duration_microseconds_count{{export="{DONTCACHE}",op=~"write|commit"}}', 0),
        # stability: what the bench saw answered
        (f'dcache_commits_total{{export="{DIRECT}"}}', commits),
        (f'dcache_writes_stable_total{{export="{DIRECT}"}}', file_sync),
        # nothing went wrong
        ("dcache_errors_total", 0),
        ("dcache_short_transfers_total", 0),
        ('dcache_fallbacks_total{reason!="no_dontcache"}', 0),
        # the gauges: modes, places, boundary pages, side work, after the workload
        (f'dcache_export_mode{{export="{DIRECT}",op="write",mode="direct"}}', 1),
        (f'dcache_export_mode{{export="{DIRECT}",op="read",mode="direct"}}', 1),
        (f'dcache_export_mode{{export="{DONTCACHE}",op="write",mode="dontcache"}}', 1),
        (f'dcache_export_mode{{export="{DONTCACHE}",op="read",mode="dontcache"}}', 1),
        ("dcache_export_mode", 4),  # one mode per operation and export, the others 0
        (f'count(dcache_export_mode{{export="{DIRECT}",op="write"}})', modes_of("write")),
        (f'count(dcache_export_mode{{export="{DIRECT}",op="read"}})', modes_of("read")),
        (f'dcache_places{{export="{DIRECT}"}}', 16),
        (f'dcache_places{{export="{DONTCACHE}"}}', 32),
        ("dcache_places_taken", 0),
        ("dcache_requests_waiting", 0),
        ("dcache_side_work_pending", 0),
        (f'dcache_boundary_max_pages{{export="{DIRECT}"}}', 1024),
        (f'dcache_boundary_max_pages{{export="{DONTCACHE}"}}', 4096),
        ("dcache_boundary_held_pages", 0),
        ("dcache_boundary_held_bytes", 0),
        # the VFS export has none
        ('count({__name__=~"dcache_.+",export="export_id=1"})', 0),
    ]
    wrong = []
    for expr, want in checks:
        try:
            expect(run, expr, want, timeout=5)
        except promlib.PrometheusError as e:
            wrong.append(str(e))
    assert not wrong, "series without the workload's values:\n  " + "\n  ".join(wrong)


def test_the_latency_histograms_are_cumulative_and_end_at_their_count(run):
    expect(run, f'dcache_request_duration_microseconds_count{{export="{DONTCACHE}",op="read"}}', READS)
    table = dcache_metrics.Table()
    want_les = [str(b) for b in table.bounds_us] + ["+Inf"]
    for export, op, count in ((DIRECT, "write", WRITES), (DONTCACHE, "read", READS)):
        sel = f'export="{export}",op="{op}"'
        buckets = run.prom.query(f"dcache_request_duration_microseconds_bucket{{{sel}}}")
        les = sorted((float(lb["le"]), lb["le"], v) for lb, v in buckets)
        assert [float(le) for _, le, _ in les] == [float(le) for le in want_les], \
            f"{op} of {export}: buckets {[le for _, le, _ in les]}, not metrics.def's {want_les}"
        counts = [v for _, _, v in les]
        assert counts == sorted(counts) and counts[-1] == count, \
            f"{op} of {export}: bucket counts {counts} not cumulative up to {count}"
        assert value(run.prom, f"dcache_request_duration_microseconds_sum{{{sel}}}") > 0, \
            f"{op} of {export}: the histogram's sum is 0"


def test_every_series_has_its_metrics_labels_and_a_row_of_metrics_def(run):
    expect(run, f'dcache_request_duration_microseconds_count{{export="{DONTCACHE}",op="read"}}', READS)
    table = dcache_metrics.Table()
    rows = {}
    for source, metric, labels in table.sources:
        if metric and not source.endswith("*"):
            rows.setdefault(metric, set()).add(tuple(kv.split("=", 1)[1] for kv in labels.split(",") if kv))
    # and what a prefix row (`read_auto_*`) gives each counter the core has:
    # Ganesha's endpoint (9.14) shows every series registered, zero or not
    with open(os.path.join(TOP, "fsal_dcache", "core", "stats.h"), encoding="utf-8") as f:
        for counter in re.findall(r"\bX\((\w+)\)", f.read()):
            kind, metric, values = table.resolve(counter)
            if kind == "series":
                rows.setdefault(metric.name, set()).add(values)
    instance = f"127.0.0.1:{run.port}"
    wrong = []
    for labels, _ in run.prom.query('{__name__=~"dcache_.+"}'):
        name = labels["__name__"]
        if name == EXPORTER_OWN:
            if set(labels) != {"__name__", "instance", "job"}:
                wrong.append(f"{labels}: labels besides instance and job")
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        metric = table.metrics.get(name) or table.metrics.get(base)
        if metric is None:
            wrong.append(f"{name}: not a metric of metrics.def")
            continue
        keys = set(metric.keys) | {"__name__", "instance", "job", "export"}
        if name.endswith("_bucket"):
            keys.add("le")
        if set(labels) != keys:
            wrong.append(f"{labels}: labels {sorted(set(labels) - {'__name__'})}, not {sorted(keys - {'__name__'})}")
        elif labels["instance"] != instance or labels["job"] != "dcache" \
                or labels["export"] not in (DIRECT, DONTCACHE):
            wrong.append(f"{labels}: instance, job or export not this server's")
        elif tuple(labels[k] for k in metric.keys) not in rows.get(metric.name, set()):
            wrong.append(f"{labels}: label values no row of metrics.def gives {metric.name}")
    assert not wrong, "series with wrong labels:\n  " + "\n  ".join(wrong)
    up = run.prom.query(EXPORTER_OWN)
    if promlib.has_registry(run.srv.release):
        assert not up, f"{EXPORTER_OWN} on Ganesha's own endpoint: {up}"
    else:
        assert [v for _, v in up] == [1], f"{EXPORTER_OWN}: {up}, not one series at 1"


def test_ganesha_and_dcache_series_join_on_the_export_label(run):
    if not promlib.has_registry(run.srv.release):
        pytest.skip(f"Ganesha {run.srv.release.name} has no metrics of its own")
    # Ganesha's own per-export request sizes count the same WRITEs
    joined = ('sum by (export) (dcache_requests_total{op="write"}) == on (export) '
              'sum by (export) (nfs_request_size_by_export_bytes_count{operation="write"})')
    wait_for(lambda: run.prom.query(joined), WAIT, "the join", 0.2)
    got = run.prom.query(joined)
    assert [(lb.get("export"), v) for lb, v in got] == [(DIRECT, WRITES)], \
        f"DCACHE's and Ganesha's WRITE counts do not join on export as expected: {got}"


# ---------------------------------------------------------------- the names --

def names_every_endpoint_serves(table):
    """The metric names (histograms as their series) metrics.def promises
    on every endpoint whatever the workload: every metric a row names
    exactly (a pattern row's, dcache_auto_decisions_total, only once an
    auto export counted something)."""
    names = set()
    for source, metric, _ in table.sources:
        if not metric or source.endswith("*"):
            continue
        if table.metrics[metric].type == "histogram":
            names.update(metric + s for s in ("_bucket", "_sum", "_count"))
        else:
            names.add(metric)
    return names


def records_dir(build):
    return os.path.join(build.path, "e2e-records")


def test_the_metric_names_are_metrics_defs_on_every_release(run, build):
    expect(run, f'dcache_request_duration_microseconds_count{{export="{DONTCACHE}",op="read"}}', READS)
    table = dcache_metrics.Table()
    want = names_every_endpoint_serves(table)
    seen = run.prom.names('{__name__=~"dcache_.+"}') - {EXPORTER_OWN}
    assert seen == want, (f"Ganesha {run.srv.release.name}'s endpoint: names metrics.def does not promise"
                          f" {sorted(seen - want)}, promised and missing {sorted(want - seen)}")
    # What this release served, for the other releases' runs to compare
    # against (CI runs each release's tests separately, on one build tree).
    with open(table.path, "rb") as f:
        stamp = f"# metrics.def {hashlib.sha256(f.read()).hexdigest()}\n"
    os.makedirs(records_dir(build), exist_ok=True)
    mine = os.path.join(records_dir(build), f"prometheus-names-{run.srv.release.name}.txt")
    with open(mine, "w", encoding="utf-8") as f:
        f.write(stamp + "".join(n + "\n" for n in sorted(seen)))
    for other in sorted(os.listdir(records_dir(build))):
        path = os.path.join(records_dir(build), other)
        if not other.startswith("prometheus-names-") or path == mine:
            continue
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        if lines[:1] != [stamp.strip()]:
            print(f"{other}: recorded with another metrics.def, not compared")
            continue
        assert set(lines[1:]) == seen, (f"{other} differs from Ganesha {run.srv.release.name}'s names:"
                                        f" only there {sorted(set(lines[1:]) - seen)},"
                                        f" only here {sorted(seen - set(lines[1:]))}")


# ------------------------------------------------------------ the dashboard --

def dashboard_variables(prom, dash):
    """Each query variable's values (label_values(selector, label)), in
    order, all selected, as Grafana substitutes them."""
    variables = {"__rate_interval": RATE_INTERVAL}
    for var in dash["templating"]["list"]:
        if var["type"] != "query":
            continue
        q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.fullmatch(r"\s*label_values\((.+),\s*(\w+)\)\s*", q)
        assert m, f"variable {var['name']}: {q!r} is not label_values(selector, label)"
        values = prom.label_values(m.group(2), promlib.grafana_substitute(m.group(1), variables))
        assert values, f"variable {var['name']}: {q} has no values"
        variables[var["name"]] = promlib.grafana_regex(values)
    return variables


def test_every_dashboard_query_returns_data(run):
    expect(run, f'dcache_request_duration_microseconds_count{{export="{DONTCACHE}",op="read"}}', READS)
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    variables = dashboard_variables(run.prom, dash)
    assert re.fullmatch(r"\(export_id=2\|export_id=3\)", variables["export"]), \
        f"the export variable offers {variables['export']}, not the two DCACHE exports"
    queries = [(p["title"], promlib.grafana_substitute(t["expr"], variables))
               for p in dash["panels"] for t in p.get("targets", [])]
    empty = {}

    def all_return_data():
        now = time.time()
        empty.clear()
        for title, expr in queries:
            if not run.prom.query_range(expr, run.started, now, 1):
                empty[title] = expr
        return not empty
    try:
        wait_for(all_return_data, WAIT, "every panel's query returning data", 0.5, alive=run.prom.child.alive)
    except Timeout:
        pass  # said below, query by query
    assert not empty, "dashboard queries without data:\n  " + "\n  ".join(f"{t}: {e}" for t, e in empty.items())


# ---------------------------------------------------------------- the rules --

def test_the_alert_rules_load_evaluate_healthy_and_none_fires(run):
    expect(run, f'dcache_request_duration_microseconds_count{{export="{DONTCACHE}",op="read"}}', READS)
    visible = time.time()

    def evaluated_since():
        rules = [r for g in run.prom.get("/api/v1/rules")["groups"] for r in g["rules"]]
        done = rules and all(r["health"] != "unknown" and r.get("lastEvaluation", "")[:1].isdigit()
                             and seconds(r["lastEvaluation"]) > visible for r in rules)
        return rules if done else None
    rules = wait_for(evaluated_since, WAIT, "every rule evaluated after the workload", 0.2)
    assert {r["name"] for r in rules} >= {"DcacheFallbacksRising", "DcacheRequestsWaitingForPlaces",
                                          "DcacheBoundaryPagesNearCeiling", "DcacheExporterCannotReachGanesha"}, \
        f"rules loaded: {[r['name'] for r in rules]}"
    sick = [f"{r['name']}: {r['health']} {r.get('lastError', '')}" for r in rules if r["health"] != "ok"]
    assert not sick, f"unhealthy rules: {sick}"
    alerts = run.prom.get("/api/v1/alerts")["alerts"]
    assert not alerts, f"alerts pending or firing after a clean workload: {alerts}"


def seconds(stamp):
    """Prometheus's RFC 3339 time (UTC, in nanoseconds) as epoch seconds."""
    return datetime.fromisoformat(stamp).timestamp()


# -------------------------------------------------------------- the picture --

PICTURE_QUERIES = [
    "dcache_requests_total",
    "sum by (export, op, path) (rate(dcache_io_bytes_total[3s]))",
    "histogram_quantile(0.99, sum by (export, op, le) (rate(dcache_request_duration_microseconds_bucket[3s])))",
]


def test_picture_of_the_key_series(run):
    """DCACHE_PROMETHEUS_PICTURE=FILE.png: Prometheus's graph page of the
    run's key series, in headless Chromium (Debian's chromium)."""
    picture = os.environ.get("DCACHE_PROMETHEUS_PICTURE")
    if not picture:
        pytest.skip("DCACHE_PROMETHEUS_PICTURE not set: no picture asked for")
    expect(run, f'dcache_request_duration_microseconds_count{{export="{DONTCACHE}",op="read"}}', READS)
    # A pause that is the picture's subject: the series after the workload,
    # for as long as before it.
    wait_for(lambda: time.time() - run.ended > run.ended - run.started, WAIT, "the run's second half", 0.2)
    span = f"{int(time.time() - run.started) + 1}s"  # the run, from Prometheus's start
    params = []
    for i, expr in enumerate(PICTURE_QUERIES):
        params += [(f"g{i}.expr", expr), (f"g{i}.tab", "0"), (f"g{i}.range_input", span), (f"g{i}.stacked", "0")]
    url = f"http://127.0.0.1:{run.prom.port}/graph?" + urllib.parse.urlencode(params)
    profile = os.path.join(run.srv.state, "chromium")
    os.makedirs(profile, exist_ok=True)
    out = os.path.join(run.srv.state, "picture.png")
    run.srv.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--hide-scrollbars", "--virtual-time-budget=5000",
                 f"--screenshot={out}", "--window-size=1280,2350", url], quiet=True, timeout=120)
    assert os.path.getsize(out) > 10000, "Chromium's picture is (nearly) empty"
    shutil.copy(out, picture)
    print(f"picture of {url} in {picture}")


# ---------------------------------------------------------------- churn --

CHURN_CYCLES, LONG_CHURN_CYCLES = 3, 100
CHURN_MODES = ("dontcache", "buffered", "direct")  # export 2's, cycle after cycle
# ganesha.nfsd's growth allowed over the last nine tenths of a long run,
# the least of ten cycles' sizes against the least of ten: its size jumps
# by some 10 MiB for a cycle or two now and then (threads' memory)
LEAK_KIB = 8 * 1024
RELOADED = "Reread exports complete"


def rss_kib(pid):
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def modes_served(srv, port):
    """{export: {(op, mode) at 1}} of dcache_export_mode on the endpoint."""
    served = {}
    for name, labels, v in promlib.scrape(srv, port):
        if name == "dcache_export_mode":
            served.setdefault(labels["export"], set()).update({(labels["op"], labels["mode"])} if v == 1 else ())
    return served


def test_exports_removed_added_and_updated_while_scraped(make_server, release, request):
    """Each cycle, by SIGHUP: export 3 removed while export 2's modes
    change, then export 3 added back; Prometheus scraping every second
    throughout. After each reload the endpoint follows (export 3's modes
    all 0 or gone, export 2's the new one); Ganesha keeps running, every
    scrape succeeds, and Prometheus ends with the last modes.
    --long: 100 cycles, and ganesha.nfsd's memory after them within
    LEAK_KIB of what it was after the first tenth."""
    cycles = LONG_CHURN_CYCLES if request.config.getoption("long") else CHURN_CYCLES
    one = vfs(1, "vfs")
    three = dcache(3, "dontcache", IO_Cache_Read="dontcache", IO_Cache_Write="dontcache")

    def two(mode):
        return dcache(2, "direct", IO_Cache_Read=mode, IO_Cache_Write=mode)
    srv = make_server(release=release, core_lines=promlib.core_lines(release),
                      exports=[one, two("direct"), three])
    port = promlib.start_endpoint(srv)
    prom = promlib.Prometheus(srv, [port])
    prom.start()
    srv.stack.callback(prom.stop)
    wait_for(lambda: prom.query('up{job="dcache"} == 1'), WAIT, "Prometheus's first scrape", 0.2,
             alive=prom.child.alive)
    started, sizes = time.time(), []
    for i in range(cycles):
        mode = CHURN_MODES[i % len(CHURN_MODES)]
        for exports, want in (([one, two(mode)], {DIRECT: {("read", mode), ("write", mode)}, DONTCACHE: set()}),
                              ([one, two(mode), three], {DONTCACHE: {("read", "dontcache"), ("write", "dontcache")}})):
            srv.reload(RELOADED, exports)
            seen = {}

            def followed(want=want, seen=seen):
                seen.clear()
                seen.update(modes_served(srv, port))
                return all(seen.get(e, set()) == m for e, m in want.items())
            try:
                wait_for(followed, WAIT, "the metrics to follow", 0.05, alive=srv.ganesha.alive)
            except Timeout:
                pytest.fail(f"cycle {i + 1}, exports {[e.export_id for e in exports]}: modes served {seen},"
                            f" not {want}")
        sizes.append(rss_kib(srv.pid))
    tenth = cycles // 10
    grown = min(sizes[-10:]) - min(sizes[tenth:tenth + 10])
    print(f"{cycles} cycles in {time.time() - started:.1f} s; ganesha.nfsd grew {grown} KiB after the first tenth")
    for export, op, mode in ((DIRECT, "write", mode), (DIRECT, "read", mode),
                             (DONTCACHE, "write", "dontcache"), (DONTCACHE, "read", "dontcache")):
        prom.wait_value(f'dcache_export_mode{{export="{export}",op="{op}",mode="{mode}"}}', 1, WAIT)
    span = f"{int(time.time() - started) + 1}s"
    failed = prom.query(f'min_over_time(up{{job="dcache"}}[{span}]) < 1')
    assert not failed, f"scrapes failed during the cycles: {failed}"
    assert srv.ganesha.alive(), "ganesha.nfsd stopped"
    if cycles >= 50:
        assert grown < LEAK_KIB, f"ganesha.nfsd grew {grown} KiB over {cycles - tenth} cycles"
