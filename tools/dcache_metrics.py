"""DCACHE's metrics table (fsal_dcache/core/metrics.def, the one table the
module reads too) and the DBus statistics mapped onto it, for
dcache-exporter: the same names, labels and types Ganesha 9.14 serves from
the module's registration (docs/monitoring.md).

The rules are metrics.def's (its header); the module applies them in the
core (core/metrics_table.cpp), and unit.exporter checks that both agree on
every value of the core.
"""
import ast
import os
import re
from collections import namedtuple

Metric = namedtuple("Metric", "name type keys help")

# The label value Ganesha gives its own per-export series.
EXPORT_LABEL = "export_id={}"
# What the registry appends to a histogram's help (its unit).
HISTOGRAM_UNIT = " [us]"

_CALL = re.compile(r"\b(DCACHE_METRIC|DCACHE_SOURCE|DCACHE_LATENCY_BUCKETS_US)\s*\(")


def _default_table():
    here = os.path.dirname(os.path.realpath(__file__))
    for path in (os.path.join(here, "metrics.def"),
                 os.path.join(here, "..", "fsal_dcache", "core", "metrics.def")):
        if os.path.exists(path):
            return path
    return os.path.join(here, "metrics.def")


def _calls(text):
    """(macro, args) of every entry, comments skipped."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    for m in _CALL.finditer(text):
        depth, i, quoted = 1, m.end(), False
        while depth:
            c = text[i]
            if quoted:
                if c == "\\":
                    i += 1
                elif c == '"':
                    quoted = False
            elif c == '"':
                quoted = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            i += 1
        yield m.group(1), ast.literal_eval("(" + text[m.end():i - 1] + ",)")


def _keys(labels):
    return tuple(kv.split("=", 1)[0] for kv in labels.split(",")) if labels else ()


class Table:
    """metrics.def: metrics by name, source rows in order, latency bounds."""

    def __init__(self, path=None):
        self.path = path or os.environ.get("DCACHE_METRICS_TABLE") or _default_table()
        with open(self.path, encoding="utf-8") as f:
            text = f.read()
        self.metrics = {}
        self.sources = []
        self.bounds_us = []
        for macro, args in _calls(text):
            if macro == "DCACHE_METRIC":
                name, kind, labels, help_text = args
                self.metrics[name] = Metric(name, kind, _keys(labels), help_text)
            elif macro == "DCACHE_SOURCE":
                self.sources.append(args)
            else:
                self.bounds_us = list(args)

    def resolve(self, value):
        """Where the core's value goes: ("series", Metric, label values),
        ("left_out", None, ()) or ("unmatched", Metric, ()) for a counter no
        row names (dcache_<value>_total)."""
        for pattern, metric, labels in self.sources:
            if pattern.endswith("*"):
                prefix = pattern[:-1]
                if len(value) <= len(prefix) or not value.startswith(prefix):
                    continue
                rest = value[len(prefix):]
            elif value == pattern:
                rest = ""
            else:
                continue
            if not metric:
                return "left_out", None, ()
            values = tuple(kv.split("=", 1)[1].replace("*", rest, 1) for kv in labels.split(",")) if labels else ()
            return "series", self.metrics[metric], values
        name = f"dcache_{value}_total"
        return "unmatched", Metric(name, "counter", (), f"DCACHE's counter {value} (docs/monitoring.md)."), ()

    def gauge_rows(self):
        """(value, Metric, label values) of every gauge: each has a row of
        its own (unit.MetricsTable.gauges_have_rows_of_their_own)."""
        for value, metric, _ in self.sources:
            if metric and self.metrics[metric].type == "gauge":
                yield (value,) + self.resolve(value)[1:]

    def names(self):
        """Every metric name the table can publish (histograms with their
        _bucket, _sum and _count series), for checking queries."""
        out = set()
        for m in self.metrics.values():
            out.add(m.name)
            if m.type == "histogram":
                out.update(m.name + s for s in ("_bucket", "_sum", "_count"))
        return out


def samples(table, exports):
    """The series of the parsed DBus statistics (dcache_dbus.parse):
    {Metric name: (Metric, [(labels dict, value)])}, where a histogram's
    value is (cumulative buckets [(le, count)], sum in microseconds).

    As Ganesha's endpoint serves them: counters and histograms once they
    are not zero (the DBus statistics skip zeros, Ganesha's endpoint leaves
    them out), but one series of each such metric even when all are zero
    (Ganesha keeps one "so it's easier to query": here the metric's first
    exact row, of the lowest Export_Id); every gauge of every export (0
    when the statistics skip it).
    """
    out = {}

    def put(metric, labels, value):
        out.setdefault(metric.name, (metric, []))[1].append((labels, value))

    for export_id in sorted(exports):
        entry = exports[export_id]
        base = {"export": EXPORT_LABEL.format(export_id)}
        for name, value in sorted(entry.items()):
            if "." in name:
                continue  # a bucket: taken with its operation
            if isinstance(value, tuple):
                kind, metric, values = table.resolve("latency." + name)
                if kind != "series":
                    continue
                counts = [entry.get(f"{name}.le_{b}", 0) for b in table.bounds_us] + [entry.get(f"{name}.le_inf", 0)]
                if not sum(counts):
                    continue
                les = [str(b) for b in table.bounds_us] + ["+Inf"]
                cumulative, total = [], 0
                for le, n in zip(les, counts):
                    total += n
                    cumulative.append((le, total))
                count, avg_ms = value[0], value[1]
                put(metric, dict(base, **dict(zip(metric.keys, values))), (cumulative, avg_ms * count * 1000))
                continue
            kind, metric, values = table.resolve(name)
            if kind == "left_out" or metric.type == "gauge":
                continue
            put(metric, dict(base, **dict(zip(metric.keys, values))), value)
        for value, metric, values in table.gauge_rows():
            put(metric, dict(base, **dict(zip(metric.keys, values))), entry.get(value, 0))
    if exports:
        base = {"export": EXPORT_LABEL.format(min(exports))}
        zero_histogram = ([(str(b), 0) for b in table.bounds_us] + [("+Inf", 0)], 0)
        for value, metric, _ in table.sources:
            m = table.metrics.get(metric)
            if m is None or m.type == "gauge" or m.name in out or value.endswith("*"):
                continue
            values = table.resolve(value)[2]
            put(m, dict(base, **dict(zip(m.keys, values))), zero_histogram if m.type == "histogram" else 0)
    return out


def families(table, exports):
    """samples() as prometheus_client metric families."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
    for name, (metric, rows) in sorted(samples(table, exports).items()):
        keys = ["export", *metric.keys]
        if metric.type == "counter":
            fam = CounterMetricFamily(name, metric.help, labels=keys)
            for labels, value in rows:
                fam.add_metric([labels[k] for k in keys], value)
        elif metric.type == "gauge":
            fam = GaugeMetricFamily(name, metric.help, labels=keys)
            for labels, value in rows:
                fam.add_metric([labels[k] for k in keys], value)
        else:
            fam = HistogramMetricFamily(name, metric.help + HISTOGRAM_UNIT, labels=keys)
            for labels, (buckets, total) in rows:
                fam.add_metric([labels[k] for k in keys], buckets, total)
        yield fam
