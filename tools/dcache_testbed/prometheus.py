"""DCACHE's metrics as Prometheus sees them, in a server's network: the
metrics endpoint (Ganesha's own where its release has the registry, else
tools/dcache-exporter), and a real Prometheus (Debian's `prometheus`)
scraping it, queried through its HTTP API (docs/monitoring.md).

    srv = Server(exports=..., core_lines=prometheus.core_lines(release))
    port = prometheus.start_endpoint(srv)       # the exporter started if needed
    prometheus.scrape(srv, port)                # [(name, labels, value)]
    with Prometheus(srv, [port], rule_files=[...]) as prom:
        prom.wait_value('dcache_bytes_total{op="write"}', 8 << 20)
        prom.query("sum(dcache_requests_total)")  # [(labels, value)]
    prometheus.grafana_substitute(expr, {"export": prometheus.grafana_regex(ids)})  # as Grafana

Everything listens on the server's loopback, in its network namespace: the
test talks to it over sockets made in that namespace (netns_socket), so
nothing is exposed on the machine and tests side by side never meet.
Prometheus runs in the server's namespaces, its data in the state dir; it
is stopped with the server.
"""

import ctypes
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse

from .procs import Timeout, wait_for
from .releases import TOP

GANESHA_PORT = 9587   # Monitoring_Port's default
EXPORTER_PORT = 9588  # dcache-exporter's
PROMETHEUS_PORT = 9090
EXPORTER = os.path.join(TOP, "tools", "dcache-exporter")
CLONE_NEWNET = 0x40000000


def has_registry(release):
    """Whether the release's Ganesha serves metrics itself (built with
    USE_MONITORING: 9.14); the others need dcache-exporter."""
    return "+USE_MONITORING" in release.config_h


def core_lines(release, port=GANESHA_PORT):
    """The NFS_CORE_PARAM lines that turn Ganesha's endpoint on, where the
    release has one (none elsewhere: 4.3 refuses the keys)."""
    return ["Enable_Metrics = true;", f"Monitoring_Port = {port};"] if has_registry(release) else []


def netns_socket(pid, host, port, timeout=10):
    """A TCP socket connected to host:port in the network namespace of
    process pid: made in a thread that joined that namespace (setns
    changes the calling thread only), usable from any thread."""
    import socket  # pylint: disable=import-outside-toplevel
    out = {}

    def connect():
        libc = ctypes.CDLL(None, use_errno=True)
        with open(f"/proc/{pid}/ns/net", "rb") as ns:
            if libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
                out["error"] = OSError(ctypes.get_errno(), f"setns into the network of pid {pid}")
                return
        try:
            out["sock"] = socket.create_connection((host, port), timeout)
        except OSError as e:
            out["error"] = e
    t = threading.Thread(target=connect)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["sock"]


def http_get(srv, port, path, params=None, timeout=10):
    """(status, body) of GET http://127.0.0.1:port/path in srv's network;
    params: a dict or (key, value) pairs, url-encoded."""
    if params:
        path += "?" + urllib.parse.urlencode(params)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.sock = netns_socket(srv.ns.holder.pid, "127.0.0.1", port, timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def answers(srv, port, path="/metrics", must_contain=b""):
    """Whether GET path answers 200 (with must_contain in the body)."""
    try:
        status, body = http_get(srv, port, path, timeout=2)
    except OSError:
        return False
    return status == 200 and must_contain in body


def parse_exposition(text):
    """Prometheus's text format -> [(sample name, labels dict, value)]."""
    from prometheus_client.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel
    return [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def scrape(srv, port):
    """One scrape of the endpoint on port, parsed (parse_exposition)."""
    status, body = http_get(srv, port, "/metrics")
    if status != 200:
        raise RuntimeError(f"GET /metrics on port {port}: HTTP {status}")
    return parse_exposition(body.decode())


def start_endpoint(srv, timeout=30):
    """The port DCACHE's metrics are served on in srv's network: Ganesha's
    Monitoring_Port where the release has the registry (the server started
    with core_lines()), else a dcache-exporter started in srv's namespaces
    (stopped with it, its log in the state dir); waits until the page
    serves DCACHE's series."""
    if has_registry(srv.release):
        port = GANESHA_PORT
        alive = srv.ganesha.alive
    else:
        port = EXPORTER_PORT
        log = open(os.path.join(srv.state, "dcache-exporter.log"), "wb")  # pylint: disable=consider-using-with
        srv.stack.callback(log.close)
        child = srv.popen([sys.executable, EXPORTER, "--address", "127.0.0.1", "--port", str(port)], stdout=log,
                          stderr=subprocess.STDOUT)
        alive = child.alive
    wait_for(lambda: answers(srv, port, must_contain=b"\ndcache_"), timeout,
             f"DCACHE's metrics on port {port}", 0.1, alive=alive)
    return port


def config(targets, rule_files=(), interval="1s"):
    """prometheus.yml's text (JSON, which is YAML) scraping targets
    (host:port) as job "dcache", evaluating rule_files, every interval."""
    conf = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [{"job_name": "dcache", "static_configs": [{"targets": list(targets)}]}],
    }
    if rule_files:
        conf["rule_files"] = list(rule_files)
    return json.dumps(conf, indent=2) + "\n"


def grafana_regex(values):
    """A multi-value variable as Grafana writes it into a Prometheus
    query: its values as alternatives of a regex, each escaped for the
    regex and then for PromQL's string (every backslash doubled), as
    Grafana's prometheusSpecialRegexEscape does."""
    escaped = [re.sub(r"([\^$.|?*+()\[\]{}])", r"\\\\\1", v.replace("\\", "\\" * 4)) for v in values]
    return "(" + "|".join(escaped) + ")"


def grafana_substitute(expr, variables):
    """expr with Grafana's $name and ${name} replaced by variables[name]
    (the longest names first: $export before $exp)."""
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", variables[name]).replace("$" + name, variables[name])
    return expr


class PrometheusError(Exception):
    """Prometheus did not start, or its API answered an error."""


class Prometheus:
    """Debian's prometheus in srv's namespaces, scraping ports on srv's
    loopback every interval and evaluating rule_files as often; its API
    on PROMETHEUS_PORT there (get, query, query_range, wait_value, ...)."""

    def __init__(self, srv, ports, rule_files=(), interval="1s", binary="prometheus"):
        self.srv, self.port = srv, PROMETHEUS_PORT
        self.dir = os.path.join(srv.state, "prometheus")
        self.conf = os.path.join(self.dir, "prometheus.yml")
        self.log_path = os.path.join(self.dir, "prometheus.log")
        self.targets = [f"127.0.0.1:{p}" for p in ports]
        self.rule_files, self.interval, self.binary = list(rule_files), interval, binary
        self.child = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self, timeout=30):
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        with open(self.conf, "w", encoding="utf-8") as f:
            f.write(config(self.targets, self.rule_files, self.interval))
        with open(self.log_path, "wb") as log:
            self.child = self.srv.popen([
                self.binary, f"--config.file={self.conf}", f"--storage.tsdb.path={self.dir}/data",
                f"--web.listen-address=127.0.0.1:{self.port}"], stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: answers(self.srv, self.port, "/-/ready"), timeout, "Prometheus ready", 0.1,
                     alive=self.child.alive)
        except Timeout as e:
            raise PrometheusError(f"{e}\n{self.log_tail()}") from None

    def stop(self):
        if self.child is not None:
            self.child.stop()

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                text = f.read().splitlines()[-lines:]
        except OSError:
            text = []
        return "prometheus.log, last lines:\n" + "\n".join("  | " + s for s in text)

    def get(self, path, params=None):
        """The `data` of an API call (/api/v1/...); PrometheusError when
        it answers an error."""
        status, body = http_get(self.srv, self.port, path, params)
        try:
            reply = json.loads(body)
        except ValueError:
            raise PrometheusError(f"{path}: HTTP {status}, not JSON: {body[:200]!r}") from None
        if reply.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {reply.get('errorType')}: {reply.get('error')}")
        return reply["data"]

    def query(self, expr, at=None):
        """An instant query: [(labels, value)] (a scalar: [({}, value)])."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.get("/api/v1/query", params)
        if data["resultType"] in ("scalar", "string"):
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def query_range(self, expr, start, end, step):
        """A range query: [(labels, [(time, value)])]."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}
        data = self.get("/api/v1/query_range", params)
        return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in data["result"]]

    def names(self, match):
        """The metric names of the series match selects."""
        return set(self.get("/api/v1/label/__name__/values", [("match[]", match)]))

    def label_values(self, label, match):
        return sorted(self.get(f"/api/v1/label/{label}/values", [("match[]", match)]))

    def wait_value(self, expr, want, timeout=30):
        """Polls expr (one series, or a sum) until its value is want;
        returns it. On timeout, PrometheusError says what it was."""
        seen = []

        def check():
            seen[:] = self.query(expr)
            return len(seen) == 1 and seen[0][1] == want
        try:
            wait_for(check, timeout, expr, 0.2, alive=self.child.alive)
        except Timeout:
            has = ", ".join(f"{v:g}" + (f" {labels}" if labels else "") for labels, v in seen) or "no series"
            raise PrometheusError(f"{expr}: wanted {want:g}, Prometheus has {has} after {timeout} s") from None
        return want
