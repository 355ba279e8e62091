"""Helpers of the cluster tests (their conftest.py makes the fixtures):
the programs the heads need, the heads with their clients, and what is
printed when a test fails."""

import os
import shutil

import pytest

from dcache_testbed import clients as clientlib

TOOLS = ("rpcbind", "rpcinfo", "dbus-daemon", "dbus-send", "mkfs.xfs", "losetup", "nsenter", "unshare", "setpriv",
         "ip", "nfs-cp", "nfs-cat", "nfs-ls")


def need(*tools):
    """Fails naming ci/setup.sh when a program is missing."""
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found (run ci/setup.sh)")


class Cluster:
    """The heads of a module and what runs beside them: clients by name."""

    def __init__(self, heads):
        self.heads = heads
        self.clients = []

    def start_clients(self, bench, export, n, versions=(3, 4)):
        """One client per NFS version through hN, stopped before the heads."""
        started = []
        for v in versions:
            c = clientlib.Rounds(self.heads[n], bench, export, v, f"h{n}-v{v}-{len(self.clients) + 1}")
            self.clients.append(c)
            self.heads.stack.callback(c.stop, True)
            started.append(c.start())
        return started

    def of(self, n, running=True):
        return [c for c in self.clients if c.name.startswith(f"h{n}-") and (c.running or not running)]

    def stop_clients(self, n):
        for c in self.of(n):
            c.stop()

    def errors(self):
        return sum(c.errors for c in self.clients)

    def error_text(self):
        return "\n".join(t for c in self.clients for t in c.error_text)


def report(heads, clients, lines=12):
    """The heads' logs and the clients' errors, printed (pytest shows them
    for a failed test)."""
    kept = os.environ.get("TMPDIR", "/tmp")
    for srv in heads:
        if not srv.state or not os.path.exists(srv.log_path):
            continue
        keep = os.path.join(kept, f"{os.path.basename(heads.state)}.{srv.name}.ganesha.log")
        shutil.copy(srv.log_path, keep)
        text = [s for s in srv.log().splitlines() if " :DEBUG :" not in s][-lines:]
        print(f"--- {srv.name} ganesha.log, last lines (whole log: {keep}):")
        print("\n".join("  | " + s for s in text))
    for c in clients:
        for t in c.error_text[-5:]:
            print(f"  client| {t}")
