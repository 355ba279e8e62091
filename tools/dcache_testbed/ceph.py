"""The smallest Ceph that Ganesha's RADOS pieces need (%url rados://,
RADOS_URLS watch_url, the rados_cluster recovery backend): one ceph-mon and
one ceph-osd (memstore: objects in memory, nothing mounted, no device) in a
network namespace of their own on the heads' network, no ceph-mgr (pools,
objects, watch/notify and the grace database need none), no systemd.

    ceph = Ceph(heads.stack, heads.network, directory)
    ceph.start()                       # returns once an object round-trips
    ceph.key("nfs", "mon", "allow r", "osd", "allow rw pool=nfs namespace=dcache")
    ceph.run(["rados", "-p", "nfs", "ls"])

Every file (ceph.conf, keyrings, mon and osd data, logs, admin sockets) is
in directory; both daemons run in the foreground as children of the
caller, entered into the namespace with nsenter --net only (no mount
namespace of their own: no copy of another test's mounts to pin), and are
stopped by stack, which also removes the namespace.
"""

import os
import subprocess
import time
import uuid

from .procs import Child, Timeout, wait_for

TOOLS = ("ceph-mon", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rados")


def ceph_conf(directory, fsid, ip):
    """Everything below directory; one replica; no mgr to wait for or warn
    about; small caches (a test cluster holding a few kilobytes)."""
    subnet = ip.rsplit(".", 1)[0] + ".0/24"
    return f"""[global]
fsid = {fsid}
mon host = [v2:{ip}:3300,v1:{ip}:6789]
public network = {subnet}
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = {directory}/$cluster.$name.keyring
run dir = {directory}/run
log file = {directory}/$name.log
crash dir = {directory}/crash
ms bind ipv6 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
auth allow insecure global id reclaim = false
[client]
# the heads and the commands are clients with one name: no admin socket
admin socket =
[mon]
admin socket = {directory}/run/$name.asok
mon data = {directory}/mon.$id
mon rocksdb options = write_buffer_size=8388608,compression=kNoCompression
[osd]
admin socket = {directory}/run/$name.asok
osd data = {directory}/osd.$id
osd objectstore = memstore
memstore device bytes = 268435456
osd op num shards = 1
osd op num threads per shard = 2
"""


class CephError(Exception):
    """Ceph did not come up."""


class Ceph:
    """One mon and one memstore osd at ip on network (heads.Network), a
    replicated pool of size 1. conf: the ceph.conf clients use (with the
    admin keyring); started_ms and rss_kib: how long the start took and
    what the daemons held then."""

    def __init__(self, stack, network, directory, ip="192.0.2.2", pool="nfs"):
        self.stack, self.network, self.dir, self.ip, self.pool = stack, network, directory, ip, pool
        self.conf = os.path.join(directory, "ceph.conf")
        self.netns = ""
        self.daemons = []
        self.started_ms = self.rss_kib = 0

    def argv(self, argv):
        """argv in Ceph's network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--"] + list(argv)

    def run(self, argv, check=True, timeout=60, stdin=None):
        """argv (rados, ceph, ganesha-rados-grace) in Ceph's namespace with
        CEPH_CONF set; its output captured as bytes."""
        return subprocess.run(self.argv(argv), env=dict(os.environ, CEPH_CONF=self.conf), capture_output=True,
                              check=check, timeout=timeout, input=stdin)

    def _daemon(self, what, argv):
        with open(os.path.join(self.dir, f"{what}.out"), "ab") as out:
            child = Child(self.argv(argv), what, grace=10, stdout=out, stderr=subprocess.STDOUT)
        self.daemons.append(child)
        self.stack.callback(child.stop)

    def _tail(self, name, lines=20):
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def start(self):
        t0 = time.monotonic()
        for d in ("run", "mon.a", "osd.0"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        self.netns = self.network.add_namespace("ceph", self.ip)
        fsid, osd_uuid = str(uuid.uuid4()), str(uuid.uuid4())
        with open(self.conf, "w", encoding="utf-8") as f:
            f.write(ceph_conf(self.dir, fsid, self.ip))
        k = self.dir
        for argv in (
                ["ceph-authtool", "--create-keyring", f"{k}/ceph.mon.keyring", "--gen-key", "-n", "mon.",
                 "--cap", "mon", "allow *"],
                ["ceph-authtool", "--create-keyring", f"{k}/ceph.client.admin.keyring", "--gen-key", "-n",
                 "client.admin", "--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mgr", "allow *"],
                ["ceph-authtool", "--create-keyring", f"{k}/ceph.osd.0.keyring", "--gen-key", "-n", "osd.0",
                 "--cap", "mon", "allow profile osd", "--cap", "osd", "allow *", "--cap", "mgr",
                 "allow profile osd"],
                ["ceph-authtool", f"{k}/ceph.mon.keyring", "--import-keyring", f"{k}/ceph.client.admin.keyring"],
                ["ceph-authtool", f"{k}/ceph.mon.keyring", "--import-keyring", f"{k}/ceph.osd.0.keyring"],
                ["monmaptool", "--create", "--fsid", fsid, "--addv", "a", f"[v2:{self.ip}:3300,v1:{self.ip}:6789]",
                 f"{k}/monmap"],
                # the monitor's store is made where its address is (its namespace)
                self.argv(["ceph-mon", "-c", self.conf, "--mkfs", "-i", "a", "--monmap", f"{k}/monmap",
                           "--keyring", f"{k}/ceph.mon.keyring"]),
                ["ceph-osd", "-c", self.conf, "--mkfs", "-i", "0", "--osd-uuid", osd_uuid, "--no-mon-config"]):
            res = subprocess.run(argv, capture_output=True, text=True, check=False)
            if res.returncode:
                raise CephError(f"{' '.join(argv[:3])}... failed: {res.stdout}{res.stderr}")
        self._daemon("ceph-mon", ["ceph-mon", "-c", self.conf, "-f", "-i", "a"])
        # the OSD joins the map, then boots into it (and puts itself in the
        # CRUSH map under this host)
        if self.run(["timeout", "30", "ceph", "osd", "new", osd_uuid, "0"], check=False).returncode:
            raise CephError(f"the monitor did not answer:\n{self._tail('ceph-mon.out')}{self._tail('mon.a.log')}")
        self._daemon("ceph-osd", ["ceph-osd", "-c", self.conf, "-f", "-i", "0"])
        for argv in (["ceph", "osd", "pool", "create", self.pool],
                     ["ceph", "osd", "pool", "application", "enable", self.pool, "nfs"]):
            if self.run(["timeout", "30"] + argv, check=False).returncode:
                raise CephError(f"could not create pool {self.pool}")
        try:
            wait_for(self._round_trip, 60, f"pool {self.pool} writable", 0.5,
                     alive=lambda: all(d.alive() for d in self.daemons))
        except Timeout as e:
            raise CephError(f"{e}\n{self._tail('ceph-osd.out')}") from None
        self.run(["rados", "-p", self.pool, "rm", "ceph-up"])
        self.started_ms = int((time.monotonic() - t0) * 1000)
        self.rss_kib = self.rss()

    def _round_trip(self):
        """An object written and read back (the PG is active)."""
        put = self.run(["timeout", "10", "rados", "-p", self.pool, "put", "ceph-up", "-"], check=False, stdin=b"up")
        return put.returncode == 0 and self.run(["timeout", "10", "rados", "-p", self.pool, "get", "ceph-up", "-"],
                                                check=False).stdout == b"up"

    def key(self, name, *caps):
        """A key for client.name (ceph auth get-or-create) in
        directory/ceph.client.NAME.keyring."""
        self.run(["timeout", "30", "ceph", "auth", "get-or-create", f"client.{name}", *caps, "-o",
                  os.path.join(self.dir, f"ceph.client.{name}.keyring")])

    def rss(self):
        """The daemons' resident memory now, in KiB."""
        total = 0
        for d in self.daemons:
            try:
                with open(f"/proc/{d.pid}/status", encoding="ascii") as f:
                    total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
            except OSError:
                pass
        return total
