"""CTDB failover of a DCACHE direct export, against the real processes:
three ganesha.nfsd heads (dcache_testbed.heads: network and private mount
namespaces, one shared XFS) export the same directory as Export_Id 2, DCACHE
with IO_Cache_Read = IO_Cache_Write = direct, all three with the same EXPORT
block; a ctdbd in each head's namespaces (dcache_testbed.ctdb) holds one
public address, 192.0.2.100, with CTDB's legacy 06.nfs/10.interface/60.nfs
event scripts and the project's callout (deploy/ctdb/), which puts the head
taking the address into Ganesha's grace period over DBus.

Two NFSv3 clients in a namespace of their own write streams of records
through the public address (dcache_e2e_failover: one FILE_SYNC, one
UNSTABLE + COMMIT with the write verifier checked) and note every byte the
server acknowledged. Mid-stream the holding head's cable is pulled (its port
on the bridge goes down): CTDB moves the address to another head (timed),
the callout's grace reaches that head's Ganesha, the clients reconnect and
carry on past the end of grace. Then every acknowledged byte is read back
through the address and compared: bytes acknowledged = bytes read back, and
no client error besides reconnects and retries.

The tests run in this order, each on the state the previous ones left.
DCACHE_GANESHA=6.5: the heads run that release's ganesha.nfsd chrooted;
ctdbd, the callout and the clients are the machine's.
"""

import os
import re
import subprocess
import time

import pytest

from dcache_testbed import ctdb as ctdblib
from dcache_testbed.exports import dcache
from dcache_testbed.procs import Child, Timeout, wait_for
from dcache_testbed.releases import TOP

PUBLIC, CLIENT_IP = "192.0.2.100", "192.0.2.50"
CALLOUT = os.path.join(TOP, "deploy", "ctdb", "ganesha-dcache-callout")
CHECKS = os.path.join(TOP, "deploy", "ctdb", "nfs-checks-ganesha.d")
# The grace period is on, short: a head out of grace while clients of a
# moved address could still reclaim would be the bug
GRACE = ("Graceless = false;", "Grace_Period = 10;", "Lease_Lifetime = 10;")
CREATED = re.compile(r"DCACHE: export 2 \(.*\) created over VFS: .*")


def now_ms():
    return int(time.time() * 1000)


class Failover:
    """The heads, CTDB, the client namespace and what the test measured."""

    def __init__(self, cluster, tool, work):
        self.cluster, self.heads, self.tool, self.work = cluster, cluster.heads, tool, work
        self.ctdb = None
        self.client_ns = ""
        self.clients = {}
        self.times = {}
        self.holder = self.new = None

    def status(self, name, key):
        """A field of client name's status file (or None)."""
        try:
            with open(os.path.join(self.work, f"{name}.status"), encoding="utf-8") as f:
                m = re.search(rf"(?:^| ){key}=(\S*)", f.read())
        except OSError:
            return None
        return m.group(1) if m else None

    def acked(self, name):
        return int(self.status(name, "acked_bytes") or 0)

    def wait_acked(self, name, count, timeout):
        try:
            wait_for(lambda: self.acked(name) >= count, timeout, f"client {name}: {count} bytes acknowledged", 0.1,
                     alive=self.clients[name].alive)
            return True
        except Timeout:
            return False

    def start_client(self, name, *args):
        with open(os.path.join(self.work, f"{name}.out"), "wb") as out, \
                open(os.path.join(self.work, f"{name}.err"), "wb") as err:
            self.clients[name] = Child(["ip", "netns", "exec", self.client_ns, self.tool, "write",
                                        f"server={PUBLIC}", "export=/shared", f"file=/ctdb/{name}",
                                        f"out={self.work}", f"name={name}", *args], f"client {name}",
                                       stdout=out, stderr=err)
        self.heads.stack.callback(self.clients[name].stop)

    def in_grace(self, n):
        out = self.heads[n].run(["dbus-send", "--system", "--print-reply", "--dest=org.ganesha.nfsd",
                                 "/org/ganesha/nfsd/admin", "org.ganesha.nfsd.admin.get_grace"],
                                check=False, quiet=True).stdout
        m = re.search(r"^\s*boolean (\w+)", out, re.M)
        return m.group(1) if m else None

    def counter(self, n, *names):
        c = self.heads[n].counters(2)
        return sum(c[name] for name in names)

    def holders(self):
        return [n for n in (1, 2, 3) if self.ctdb.on(n)]


@pytest.fixture(scope="module")
def failover(make_heads, build, tmp_path_factory):
    lacking = ctdblib.missing()
    if lacking:
        pytest.fail(f"CTDB's {', '.join(lacking)} missing (run ci/setup.sh)")
    # each head in a second of its own: Ganesha's write verifier is its
    # start time in seconds, and the UNSTABLE client must see it change at
    # the move
    cluster = make_heads(3, network=True, apart=True, exports=[dcache(2, "shared", IO_Cache_Read="direct",
                                                                      IO_Cache_Write="direct")],
                         nfsv4_lines=GRACE, wait_pseudo="/shared", log_level="EVENT")
    os.makedirs(os.path.join(cluster.heads.mnt, "shared", "ctdb"), exist_ok=True)
    return Failover(cluster, build.bin("dcache_e2e_failover"), str(tmp_path_factory.mktemp("ctdb")))


def test_three_heads_run_the_same_export(failover):
    heads = failover.heads
    blocks = [re.findall(r"^EXPORT \{.*?^\}", open(srv.conf_path, encoding="utf-8").read(), re.M | re.S)
              for srv in heads]
    assert blocks[0] and blocks[0] == blocks[1] == blocks[2], "the heads' EXPORT blocks differ"
    created = []
    for srv in heads:
        m = CREATED.search(srv.log())
        assert m and "IO_Cache_Read = direct, IO_Cache_Write = direct," in m.group(0), \
            f"{srv.name}: no 'created over VFS: IO_Cache_Read = direct, IO_Cache_Write = direct' line"
        created.append(m.group(0))
    assert created[0] == created[1] == created[2], f"the heads run different settings: {created}"
    epochs = {srv.name: f"{srv.epoch():08x}" for srv in heads}
    assert len(set(epochs.values())) == 3, f"heads share an epoch (write verifier): {epochs}"


def test_ctdb_puts_the_address_on_a_head_in_grace(failover):
    f = failover
    f.ctdb = ctdblib.Ctdb(f.heads, f"{PUBLIC}/24", CALLOUT, CHECKS)
    t = now_ms()
    f.ctdb.start(60)
    print(f"CTDB: 3 nodes OK, {PUBLIC} up after {now_ms() - t} ms")
    print(f.ctdb.run(1, ["ctdb", "event", "script", "list", "legacy"]).stdout)
    f.holder = f.ctdb.holder()
    # The cluster lock lives on storage a head keeps reaching with its cable
    # out (one kernel's XFS): a leader cut off keeps the lock and the others
    # cannot take over (docs/cluster.md, "Under CTDB"). So the head that will
    # be cut gives up the leader role first (`ctdb moveip` would do too, but
    # it holds back takeover runs for 20 s, the failover among them)
    f.ctdb.run(f.holder, ["ctdb", "setleaderrole", "off"])

    def other_leads():
        leader = f.ctdb.run(f.holder, ["ctdb", "leader"]).stdout.strip()
        return leader.isdigit() and f.ctdb.pnn_head(leader) != f.holder and \
            f.ctdb.run(f.holder, ["ctdb", "nodestatus", "all"]).returncode == 0 and leader
    leader = wait_for(other_leads, 20, "another head leading", 0.1)
    assert f.ctdb.holder() == f.holder, f"{PUBLIC} left h{f.holder} when it gave up the leader role"
    print(f"{PUBLIC} on h{f.holder}, h{f.ctdb.pnn_head(leader)} leads")
    log = open(f.ctdb.callout_log(f.holder), encoding="utf-8").read()
    assert re.search(rf"takeip(-pre)? eth0 {PUBLIC} 24: grace 5:{PUBLIC} started", log), \
        f"h{f.holder}'s callout gave no grace at takeip: {log}"
    assert f"recovery event 5 nodeid -1 ip {PUBLIC}" in f.heads[f.holder].log(), \
        f"h{f.holder}'s Ganesha logged no grace event"


def test_two_clients_write_through_the_address(failover):
    f = failover
    f.client_ns = f.heads.network.add_namespace("client", CLIENT_IP)
    f.start_client("fsync", "stable=file_sync", "record=65536", "interval_ms=5")
    f.start_client("unstable", "stable=unstable", "record=40000", "commit_every=8", "interval_ms=5")
    assert f.wait_acked("fsync", 1 << 20, 30) and f.wait_acked("unstable", 1 << 20, 30), "the clients do not write"
    # the new holder resets the clients' connections at once only if it
    # knows them: CTDB's tickle list (60.nfs records it at every monitor
    # event, every node gets it every TickleUpdateInterval)
    other = f.holder % 3 + 1
    try:
        wait_for(lambda: f.ctdb.run(other, ["ctdb", "gettickles", PUBLIC]).stdout.count(f"SRC: {CLIENT_IP}:") >= 2,
                 10, "tickles", 0.1)
    except Timeout:
        pytest.fail(f"h{other} has no tickles for {PUBLIC}: it does not know the clients' connections")
    assert f.wait_acked("fsync", 4 << 20, 30), "the fsync client stalled before the move"


def test_cable_out_the_address_moves_and_the_new_head_is_in_grace(failover):
    f = failover
    f.times["acked_before"] = f.acked("fsync")
    t0 = now_ms()
    f.heads.link(f.holder, "down")
    try:
        f.new = wait_for(lambda: next((n for n in (1, 2, 3) if n != f.holder and f.ctdb.on(n)), None), 30,
                         f"{PUBLIC} on another head", 0.05)
    except Timeout:
        pytest.fail(f"{PUBLIC} did not move within 30 s:\n{f.ctdb.run(f.holder % 3 + 1, ['ctdb', 'status']).stdout}")
    t1 = f.times["moved"] = now_ms()
    f.times["move_ms"] = t1 - t0
    print(f"h{f.holder}'s cable out: {PUBLIC} moved to h{f.new} in {t1 - t0} ms")
    takeip = re.compile(rf"^(\S+) takeip(-pre)? eth0 {PUBLIC} 24: grace 5:{PUBLIC} started", re.M)

    def grace_given():
        return takeip.search(open(f.ctdb.callout_log(f.new), encoding="utf-8").read()) \
            if os.path.exists(f.ctdb.callout_log(f.new)) else None
    try:
        f.times["grace_on"] = wait_for(grace_given, 10, "the callout's grace", 0.1).group(1)
    except Timeout:
        pytest.fail(f"h{f.new}'s callout gave no grace at takeip")
    assert f"recovery event 5 nodeid -1 ip {PUBLIC}" in f.heads[f.new].log(), \
        f"h{f.new}'s Ganesha logged no grace event"
    try:
        wait_for(lambda: f.in_grace(f.new) == "false", 30, "the end of grace", 0.1)
    except Timeout:
        pytest.fail(f"h{f.new} still in grace 30 s after the move")
    f.times["grace_end"] = now_ms()
    print(f"h{f.new} out of grace {f.times['grace_end'] - t1} ms after the address came up")


def test_both_clients_continue_after_grace(failover):
    f = failover
    a_fsync, a_unstable = f.acked("fsync"), f.acked("unstable")
    assert f.wait_acked("fsync", a_fsync + (4 << 20), 30) and f.wait_acked("unstable", a_unstable + (4 << 20), 30) \
        and int(f.status("fsync", "last_ack_ms")) > f.times["grace_end"] \
        and int(f.status("unstable", "last_ack_ms")) > f.times["grace_end"], \
        "the clients do not continue after the move"
    assert f.acked("fsync") > f.times["acked_before"], "nothing acknowledged after the move"


def test_every_acknowledged_byte_reads_back(failover):
    f = failover
    open(os.path.join(f.work, "stop"), "w", encoding="utf-8").close()
    for name, child in f.clients.items():
        assert child.wait_gone(60), f"client {name} did not stop"
        assert child.proc.returncode == 0, f"client {name} exited with status {child.proc.returncode}"
    for name in ("fsync", "unstable"):
        print(f"{name}: {open(os.path.join(f.work, name + '.out'), encoding='utf-8').read().strip()}")
        err = open(os.path.join(f.work, name + ".err"), encoding="utf-8").read()
        assert f.status(name, "errors") == "0" and not err.strip(), f"{name}: errors {f.status(name, 'errors')}: {err}"
        assert int(f.status(name, "reconnects") or 0) >= 1, f"{name}: no reconnect seen"
        print(f"{name}: longest wait for an acknowledgement {f.status(name, 'max_gap_ms')} ms")
    assert int(f.status("unstable", "verifier_changes") or 0) >= 1, "unstable: no verifier change seen at the move"
    for name in ("fsync", "unstable"):
        res = subprocess.run(["ip", "netns", "exec", f.client_ns, f.tool, "verify", f"server={PUBLIC}",
                              "export=/shared", f"file=/ctdb/{name}", f"acked={f.work}/{name}.acked"],
                             capture_output=True, text=True, check=False)
        out = (res.stdout + res.stderr).strip()
        m = re.match(r"^acknowledged (\d+) bytes.*read back (\d+) bytes identical$", out)
        assert res.returncode == 0 and m and m.group(1) == m.group(2) and int(m.group(1)) > 0, f"{name}: {out}"


def test_dcache_served_the_io_direct_on_both_heads(failover):
    f = failover
    # the old head is cut off from the clients, not from its own bus
    for n in (f.holder, f.new):
        w, r = f.counter(n, "write_direct", "write_split"), f.counter(n, "read_direct")
        assert w > 0, f"h{n}: no direct WRITE counted (write_direct+write_split {w}, read_direct {r})"
    assert f.counter(f.new, "read_direct") > 0, f"h{f.new}: no direct READ for the read-back"


def test_cable_back_one_head_holds_the_address(failover):
    f = failover
    print(f"with the cable out, {PUBLIC} is on: {f.holders()}")
    t3 = now_ms()
    f.heads.link(f.holder, "up")
    try:
        wait_for(lambda: f.ctdb.run(f.new, ["ctdb", "nodestatus", "all"]).returncode == 0 and f.holders() == [f.new],
                 30, "the old head rejoined without the address", 0.1)
    except Timeout:
        pytest.fail(f"cable back: after 30 s, {PUBLIC} on {f.holders()}")
    print(f"cable back: h{f.holder} rejoined and dropped {PUBLIC} within {now_ms() - t3} ms")
    log = open(f.ctdb.callout_log(f.holder), encoding="utf-8").read()
    released = [s for s in log.splitlines() if f"releaseip eth0 {PUBLIC} 24: " in s]
    print(f"h{f.holder}'s callout at its releaseip: {released[-1]}" if released
          else f"h{f.holder}: no releaseip event (the address went with 10.interface's check)")
    res = subprocess.run(["ip", "netns", "exec", f.client_ns, "timeout", "10", "nfs-ls",
                          f"nfs://{PUBLIC}/shared/ctdb?version=3"], capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"nfs-ls after the cable is back: {res.stderr}"
    print(f"summary: release {f.heads.release.name}; address move {f.times['move_ms']} ms; grace on h{f.new} "
          f"from {f.times['grace_on']}, out of grace {f.times['grace_end'] - f.times['moved']} ms after the move; "
          f"clients' longest wait {f.status('fsync', 'max_gap_ms')}/{f.status('unstable', 'max_gap_ms')} ms")


def test_teardown_leaves_nothing(failover):
    f = failover
    left = f.ctdb.stop()
    assert not left, f"ctdbd's processes still running after it stopped: {left}"
    prefix, state = f.heads.network.name, f.heads.state
    f.heads.stop()
    namespaces = [s for s in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                            check=True).stdout.splitlines() if s.startswith(prefix)]
    assert not namespaces, f"network namespaces left: {namespaces}"
    with open("/proc/self/mountinfo", encoding="utf-8") as mi:
        assert f" {state}" not in mi.read(), f"mounts left under {state}"
