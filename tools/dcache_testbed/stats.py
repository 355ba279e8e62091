"""The plugin's counters as objects, read through tools/dcache-stats (the
one reader of GetFSALStats) in a server's namespaces."""

import json
import os

from .releases import TOP

TOOL = os.path.join(TOP, "tools", "dcache-stats")


class Counters:
    """One export's counters: counters.writes, counters["write_bytes"];
    a counter not counted yet is 0. Service times (read, write, commit)
    are (count, avg ms, min ms, max ms)."""

    def __init__(self, values):
        self.values = dict(values)

    def __getitem__(self, name):
        return self.values.get(name, 0)

    def __getattr__(self, name):
        if name.startswith("_") or name == "values":
            raise AttributeError(name)
        return self.values.get(name, 0)

    def __sub__(self, before):
        """What was counted since before (counters only)."""
        return Counters({k: v - before[k] for k, v in self.values.items() if isinstance(v, int)})

    def __repr__(self):
        return f"Counters({self.values!r})"


def parse(text):
    """dcache-stats --json output -> {export id: Counters}."""
    return {int(k): Counters(v) for k, v in json.loads(text).items()}


def read(server, export_id=None):
    """Every DCACHE export's counters on server (or only export_id's)."""
    argv = [TOOL, "--json"] + (["--export", str(export_id)] if export_id is not None else [])
    return parse(server.run(argv, quiet=True).stdout)
