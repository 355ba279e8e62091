"""What every part of tools/bench_report.py reads a run with: the
workloads of the shared server in table order and their phases, the
units, the median, one export's counters from a dcache-stats reading."""
import json
import statistics


WORKLOADS = ["mix", "randread", "randwrite", "reread", "stream", "interleave", "interleave_commit_end",
             "interleave_commit_every", "interleave_slow", "mempressure", "commit", "latency"]
# A workload of several measured phases writes runs/WORKLOAD-PHASE.V.R.json;
# the others' one measured phase, named for the CPU table by what it does.
PHASES = {"stream": ["write", "rewrite", "read"]}
MEASURED = {"mix": "read+write", "randread": "read", "randwrite": "write", "reread": "read again",
            "interleave": "write", "interleave_commit_end": "write", "interleave_commit_every": "write",
            "interleave_slow": "write", "mempressure": "read+write", "commit": "write", "latency": "read",
            "memory": "read+write", "overload": "write"}
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
