"""CTDB in front of heads (heads.Heads on a network): one ctdbd (the
machine's CTDB, also when the heads run another release's ganesha.nfsd
chrooted) per head, in that head's network and mount namespaces, so that a
public address CTDB puts on the head's eth0 is one its ganesha.nfsd
answers on.

    ctdb = Ctdb(heads, "192.0.2.100/24", callout, checks_dir)
    ctdb.start()                      # every node OK, the address on a head
    ctdb.holder("192.0.2.100")        # the head (N) whose eth0 has it
    ctdb.run(2, ["ctdb", "status"])
    ctdb.stop()                       # the processes still there, if any

Per head hN, under its state dir's ctdb/: etc/ (bound on /etc/ctdb in hN's
mount namespace: ctdb.conf, nodes, public_addresses, ctdb.tunables,
script.options, ganesha-dcache-callout.options, Debian's functions and
notify.sh, events/legacy/ with links to the enabled event scripts), var/
(bound on /var/lib/ctdb), log.ctdb, ctdbd.out and callout.log (one line per
callout operation). /run/ctdb is in the head's private /run. Nothing is
bound or written on the host's /etc/ctdb or /var/lib/ctdb. The cluster
lock is a file on the heads' shared filesystem.
"""

import os
import shutil
import signal
import subprocess
import sys

from .heads import head_ip
from .procs import Child, Timeout, gone, wait_for

TOOLS = ("ctdbd", "ctdb", "ethtool", "iptables", "ss", "dbus-send", "rpcinfo")
FILES = ("/etc/ctdb/functions", "/etc/ctdb/notify.sh", "/usr/share/ctdb/events/legacy")
SCRIPTS = ("00.ctdb", "06.nfs", "10.interface", "60.nfs")

# Keepalives every second, a node unreachable for 3 of them is DISCONNECTED;
# monitor events (and the tickle lists of the connections to the public
# addresses, which the new holder resets after a move) every 2 s; after a
# recovery the next one may come 3 s later, not 10 (the startup event waits
# for that)
TUNABLES = {"KeepaliveInterval": 1, "KeepaliveLimit": 3, "MonitorInterval": 2, "TickleUpdateInterval": 2,
            "RerecoveryTimeout": 3}


def missing():
    """What CTDB needs that the machine lacks (ci/setup.sh installs it)."""
    return [t for t in TOOLS if not shutil.which(t)] + [f for f in FILES if not os.path.exists(f)]


class Ctdb:
    """ctdbd on every head of heads, one public address (IP/BITS) on eth0,
    the given NFS callout with its check files, legacy scripts 00.ctdb,
    06.nfs, 10.interface and 60.nfs, and TUNABLES."""

    def __init__(self, heads, public, callout, checks_dir, tunables=None):
        self.heads, self.public, self.callout, self.checks_dir = heads, public, callout, checks_dir
        self.address = public.split("/")[0]
        self.tunables = TUNABLES if tunables is None else tunables
        self.daemons = {}
        self.stopped = False

    def dir(self, n):
        return os.path.join(self.heads[n].state, "ctdb")

    def callout_log(self, n):
        return os.path.join(self.dir(n), "callout.log")

    def setup(self):
        lock_dir = os.path.join(self.heads.mnt, ".ctdb")
        os.makedirs(lock_dir, exist_ok=True)
        nodes = "".join(f"{head_ip(i)}\n" for i in range(1, self.heads.count + 1))
        for n in range(1, self.heads.count + 1):
            d, srv = self.dir(n), self.heads[n]
            for sub in ("etc/events/legacy", "etc/events/notification", "var/volatile", "var/persistent",
                        "var/state"):
                os.makedirs(os.path.join(d, sub), exist_ok=True)
            files = {
                "nodes": nodes,
                "public_addresses": f"{self.public} eth0\n",
                "ctdb.conf": f"""[logging]
\tlocation = file:{d}/log.ctdb
\tlog level = NOTICE
[cluster]
\t# on the heads' shared filesystem; the node holding it leads
\tcluster lock = {lock_dir}/reclock
\t# the first election 3 s after start, not 5
\tleader timeout = 3
[legacy]
\t# a test machine shared with other work
\trealtime scheduling = false
""",
                "ctdb.tunables": "".join(f"{k}={v}\n" for k, v in self.tunables.items()),
                "script.options": f"CTDB_NFS_CALLOUT={self.callout}\nCTDB_NFS_CHECKS_DIR={self.checks_dir}\n"
                                  "CTDB_RPCINFO_LOCALHOST=127.0.0.1\n",
                "ganesha-dcache-callout.options": f"GANESHA_CONF={srv.conf_path}\n"
                                                  f"GANESHA_PIDFILE={srv.state}/ganesha.pid\n"
                                                  f"GANESHA_DBUS_ADDRESS={srv.bus}\n"
                                                  f"GANESHA_CALLOUT_LOG={self.callout_log(n)}\n",
            }
            for name, text in files.items():
                with open(os.path.join(d, "etc", name), "w", encoding="utf-8") as f:
                    f.write(text)
            # Debian's: the functions the event scripts source, and the
            # notification script ctdbd runs on node state changes
            for f in ("/etc/ctdb/functions", "/etc/ctdb/notify.sh"):
                shutil.copy(f, os.path.join(d, "etc"))
            for s in SCRIPTS:
                os.symlink(f"/usr/share/ctdb/events/legacy/{s}.script",
                           os.path.join(d, "etc", "events", "legacy", f"{s}.script"))

    def start(self, timeout=60):
        """ctdbd -i on every head, until every node is OK and the address is
        on one head's eth0."""
        self.setup()
        self.heads.stack.callback(self.stop)
        for n in range(1, self.heads.count + 1):
            self.start_node(n)
        self.wait_ready(timeout)

    def start_node(self, n):
        srv, d = self.heads[n], self.dir(n)
        srv.run(["mount", "--bind", os.path.join(d, "etc"), "/etc/ctdb"], quiet=True)
        srv.run(["mount", "--bind", os.path.join(d, "var"), "/var/lib/ctdb"], quiet=True)
        srv.run(["mkdir", "-p", "/run/ctdb"], quiet=True)
        with open(os.path.join(d, "ctdbd.out"), "ab") as out:
            self.daemons[n] = Child(srv.ns.argv(["ctdbd", "-i"]), f"h{n} ctdbd", grace=10, stdout=out,
                                    stderr=subprocess.STDOUT)

    def run(self, n, argv, check=False):
        """argv in hN's namespaces; its CompletedProcess (text)."""
        return self.heads[n].run(argv, check=check, quiet=True, timeout=60)

    def holder(self, ip=None):
        """The head (N) whose eth0 carries ip (default: the public address)
        now, or None."""
        for n in range(1, self.heads.count + 1):
            if self.on(n, ip):
                return n
        return None

    def on(self, n, ip=None):
        out = self.run(n, ["ip", "-o", "-4", "addr", "show", "dev", "eth0"]).stdout
        return f" {ip or self.address}/" in out

    def ready(self):
        for n, d in self.daemons.items():
            if not d.alive():
                raise Timeout(f"h{n}: ctdbd exited:\n{self.tail(n, 'ctdbd.out')}")
        # every node OK in node 1's view (nodestatus exits with the nodes'
        # flags: 0 is OK) and the address hosted
        return self.run(1, ["ctdb", "nodestatus", "all"]).returncode == 0 and self.holder() is not None

    def wait_ready(self, timeout):
        try:
            wait_for(self.ready, timeout, "CTDB ready", 0.5)
        except Timeout as e:
            raise Timeout(f"{e}\n{self.run(1, ['ctdb', 'status']).stdout}") from None

    @staticmethod
    def pnn_head(pnn):
        """The head N of CTDB node PNN (the nodes file's order)."""
        return int(pnn) + 1

    def tail(self, n, name, lines=12):
        path = os.path.join(self.dir(n), name)
        if not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join("  | " + s for s in f.readlines()[-lines:])

    def stop(self):
        """`ctdb shutdown` on every node (the shutdown event: 10.interface
        drops the public addresses, 60.nfs calls the callout's shutdown),
        then each ctdbd by its pid; returns the processes of theirs still
        alive after that (killed), as 'PID COMM' strings."""
        if self.stopped:
            return []
        self.stopped = True
        every = []
        stoppers = []
        for n, d in self.daemons.items():
            if not d.alive():
                continue
            every += descendants(d.pid)
            stoppers.append(subprocess.Popen(self.heads[n].ns.argv(["timeout", "20", "ctdb", "shutdown"]),
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in stoppers:
            p.wait()
        for d in self.daemons.values():
            if not d.wait_gone(5):
                d.stop(10)
        # ctdb-eventd and the cluster lock's helper notice their parent went
        # away within a few seconds
        try:
            wait_for(lambda: all(gone(p) for p in every), 10, "ctdbd's processes gone", 0.1)
            return []
        except Timeout:
            left = [p for p in every if not gone(p)]
            names = []
            for p in left:
                try:
                    with open(f"/proc/{p}/comm", encoding="utf-8") as f:
                        names.append(f"{p} {f.read().strip()}")
                except OSError:
                    continue
                os.kill(p, signal.SIGKILL)
            print(f"testbed: ctdb: still running after ctdbd stopped: {names}", file=sys.stderr)
            return names


def descendants(pid):
    """pid and every process under it."""
    out = [pid]
    res = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    for child in res.stdout.split():
        out += descendants(int(child))
    return out
