"""The monitoring files in deploy/: the Grafana dashboard is valid JSON
whose every query (panels and variables) names only metrics of the one
table (core/metrics.def), and so do the Prometheus alert rules (besides
dcache-exporter's own dcache_exporter_ganesha_up).  promtool checks the
rules themselves (lint.prometheus_rules)."""
import json
import re
import sys
from pathlib import Path

import yaml

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tools"))
import dcache_metrics  # noqa: E402

DASHBOARD = TOP / "deploy" / "grafana" / "dcache-dashboard.json"
RULES = TOP / "deploy" / "prometheus" / "dcache-alerts.yml"
EXPORTER_OWN = {"dcache_exporter_ganesha_up"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
            "offset", "inf", "nan"}


def metric_names(expr):
    """The metric names a PromQL expression selects."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)         # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)                     # matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                    # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\w+", "", expr)                         # Grafana variables
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        rest = expr[m.end():].lstrip()
        if rest.startswith("(") or m.group(0) in KEYWORDS:
            continue  # a function or an aggregation
        if m.start() > 0 and (expr[m.start() - 1].isdigit() or expr[m.start() - 1] == "."):
            continue  # a number's exponent or unit
        names.add(m.group(0))
    return names


def test_metric_names_sees_through_promql():
    assert metric_names('histogram_quantile(0.99, sum by (export, le) '
                        '(rate(a_bucket{x="y"}[$__rate_interval]))) / on (export) b > 1e3') == {"a_bucket", "b"}
    assert metric_names("label_values(dcache_export_mode{instance=~\"$instance\"}, export)") == \
        {"dcache_export_mode", "export"}


def dashboard_queries(dash):
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r}", target["expr"]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            # label_values(selector, label): the label is not a metric
            yield f"variable {var['name']}", re.sub(r",\s*\w+\)\s*$", ")", q)


def test_the_dashboard_is_json_and_queries_only_the_tables_metrics():
    dash = json.loads(DASHBOARD.read_text())
    table = dcache_metrics.Table().names()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    queries = list(dashboard_queries(dash))
    assert len(queries) >= 10
    for where, expr in queries:
        names = metric_names(expr)
        assert names, f"{where}: {expr} selects no metric"
        assert names <= table, f"{where}: {sorted(names - table)} not in core/metrics.def"


def test_the_alert_rules_query_only_the_tables_metrics():
    rules = yaml.safe_load(RULES.read_text())
    table = dcache_metrics.Table().names() | EXPORTER_OWN
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    assert {r["alert"] for r in alerts} >= {"DcacheFallbacksRising", "DcacheRequestsWaitingForPlaces",
                                            "DcacheBoundaryPagesNearCeiling"}
    for rule in alerts:
        names = metric_names(rule["expr"])
        assert names and names <= table, f"{rule['alert']}: {sorted(names - table)} not in core/metrics.def"
        assert "docs/monitoring.md" in rule["annotations"]["description"], rule["alert"]


def test_every_alert_has_its_section_in_the_docs():
    doc = (TOP / "docs" / "monitoring.md").read_text()
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            assert f"### {rule['alert']}" in doc, rule["alert"]


def test_every_metric_of_the_table_is_documented():
    doc = (TOP / "docs" / "monitoring.md").read_text()
    documented = set(re.findall(r"^\| `(dcache_\w+)` \|", doc, re.M))
    assert documented == set(dcache_metrics.Table().metrics), "docs/monitoring.md, \"The metrics\": one row each"
