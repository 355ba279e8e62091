"""DCACHE exports kept in RADOS the way cephadm keeps Ganesha's (a common
object per head set, an object per export, watch_url), rolled head by head
with tools/dcache-rados, against the real processes: one ceph-mon and one
ceph-osd (dcache_testbed.ceph) in a network namespace on the heads' bridge,
three ganesha.nfsd heads (dcache_testbed.heads) exporting one XFS directory
as Export_Id 2 (DCACHE over VFS), sharing one grace period through
rados_cluster, and NFSv3/v4 clients writing and reading through every head.

The objects (pool nfs, namespace dcache), docs/cluster.md's layout: head-hN
(hN's own object, the one it watches: %url of the common object it runs),
conf-dcache.G (generation G's common object: %url of each export) and
export-ID.G (one EXPORT block); each head's local ganesha.conf ends in
%url "rados://nfs/dcache/head-hN".

Checks: the first generation published and served by each head (one
watcher on each head object, the grace database listing h1-h3); a roll of
direct -> dontcache head by head, each head verified (its log's `updated`
line, its counters) before the next is pointed, the others not reloaded;
h2 restarted mid-roll comes up as its object still says and the cluster's
grace period is entered and lifted; a malformed value stopped by the check
before anything reaches RADOS; a missing configuration object: the check
names it, a running head keeps its export on a reread, a restarted head
does not start, and putting the object back brings it up; a broken live
object (a syntax error written over it with a plain rados put): verify
finds it, the rereading heads and a head restarted on it as they are
observed, the CTDB callout's health check failing a head that serves none
of its exports, and restore with reload/restart bringing every head back;
the clients' data read back through another head; no client error.

The tests run in this order, each on the state the previous ones left.
"""

import hashlib
import os
import re
import shutil
import subprocess
import time

import pytest

from dcache_testbed import clients as clientlib
from dcache_testbed.ceph import TOOLS as CEPH_TOOLS, Ceph
from dcache_testbed.exports import dcache
from dcache_testbed.procs import Timeout, wait_for
from dcache_testbed.releases import TOP
from dcache_testbed.server import Namespace
from support import need

RADOS_TOOL = os.path.join(TOP, "tools", "dcache-rados")
CALLOUT = os.path.join(TOP, "deploy", "ctdb", "ganesha-dcache-callout")
MODES = {"direct": ("write_direct", "write_split", "read_direct"), "dontcache": ("write_dontcache", "read_dontcache")}
OTHER = {"direct": "dontcache", "dontcache": "direct"}
# one grace period for the heads, in RADOS (rados_cluster)
GRACE = ("Graceless = false;", "RecoveryBackend = rados_cluster;", "Lease_Lifetime = 5;", "Grace_Period = 5;")
RELOADED = re.compile(r"DCACHE: export 2 \(|reread_exports|Adding export from file", re.I)


def created(mode):
    return re.compile(rf"DCACHE: export 2 \(.*\) created over VFS: IO_Cache_Read = {mode}, IO_Cache_Write = {mode},")


class Rados:
    """Ceph, the heads reading from it and the tool rolling them."""

    def __init__(self, cluster, ceph, work, check, bench):
        self.cluster, self.heads, self.ceph, self.work, self.check, self.bench = \
            cluster, cluster.heads, ceph, work, check, bench

    def tool(self, *args, stage=None):
        """dcache-rados in Ceph's namespace: (exit status, its output)."""
        env = dict(os.environ, CEPH_CONF=self.ceph.conf, DCACHE_CHECK=" ".join(self.check))
        res = subprocess.run(self.ceph.argv([RADOS_TOOL, "--dir", stage or self.work, *args]), capture_output=True,
                             text=True, check=False, env=env)
        out = res.stdout + res.stderr
        print("\n".join("  dcache-rados| " + s for s in out.splitlines()))
        return res.returncode, out

    def verify(self, n):
        """dcache-rados verify --local hN in hN's namespaces (its bus, its log)."""
        srv = self.heads[n]
        res = srv.run([RADOS_TOOL, "verify", "--local", f"h{n}", "--log", srv.log_path], check=False, quiet=True,
                      env={"CEPH_CONF": self.ceph.conf, "DCACHE_CHECK": " ".join(self.check)})
        return res.returncode, res.stdout + res.stderr

    def rados(self, *args, check=True, stdin=None):
        return self.ceph.run(["rados", "-p", "nfs", "-N", "dcache", *args], check=check, stdin=stdin)

    def stage(self, g, read, write):
        """gen-G/: export-2.G (export 2 with these modes), conf-dcache.G and
        head-h1..3 naming it."""
        d = os.path.join(self.work, f"gen-{g}")
        os.makedirs(d, exist_ok=True)
        files = {f"export-2.{g}": dcache(2, "shared", IO_Cache_Read=read, IO_Cache_Write=write).block(self.heads.mnt),
                 f"conf-dcache.{g}": f'%url "rados://nfs/dcache/export-2.{g}"\n'}
        files.update({f"head-h{n}": f'%url "rados://nfs/dcache/conf-dcache.{g}"\n' for n in (1, 2, 3)})
        for name, text in files.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        return d

    def head_confs(self):
        return [os.path.join(self.work, f"h{n}.conf") for n in (1, 2, 3)]

    def watchers(self, n):
        return self.rados("listwatchers", f"head-h{n}").stdout.decode().count("watcher=")

    def grace_db(self):
        return self.ceph.run(["ganesha-rados-grace", "--pool", "nfs", "--ns", "dcache", "dump"]).stdout.decode()

    def objects(self):
        """The head set's objects and their bytes."""
        names = sorted(o for o in self.rados("ls").stdout.decode().split() if re.match(r"(head|conf|export)-", o))
        return {o: hashlib.sha256(self.rados("get", o, "-").stdout).hexdigest() for o in names}

    def counter(self, n, mode):
        c = self.heads[n].counters(2)
        return sum(c[name] for name in MODES[mode])

    def serves(self, **modes):
        """Each hN=MODE's counters of MODE grow over a round each of its
        clients begins after the first sample, and those of the other mode
        do not (the round under way at the call may have begun before a
        change: it is waited out first)."""
        heads = {int(k[1:]): v for k, v in modes.items()}
        clients = [c for n in heads for c in self.cluster.of(n)]
        assert not clientlib.wait_all(clients, 1), f"the clients of {sorted(heads)} stalled"
        before = {n: (self.counter(n, m), self.counter(n, OTHER[m])) for n, m in heads.items()}
        for _ in range(2):   # a round may have done all its I/O before the sample
            assert not clientlib.wait_all(clients, 1), f"the clients of {sorted(heads)} stalled"
            after = {n: (self.counter(n, m), self.counter(n, OTHER[m])) for n, m in heads.items()}
            if all(after[n][0] != before[n][0] for n in heads):
                break
        for n, m in heads.items():
            assert after[n][0] > before[n][0] and after[n][1] == before[n][1], \
                f"h{n} does not serve {m} only ({m} counters {before[n][0]} -> {after[n][0]}, " \
                f"{OTHER[m]}'s {before[n][1]} -> {after[n][1]})"

    def restart(self, n, wait=True):
        """hN's ganesha.nfsd stopped (SIGTERM) and started again in the
        same namespaces on the same local ganesha.conf; the log mark."""
        srv = self.heads[n]
        status = srv.stop_ganesha()
        assert status is not None and status >= 0, f"h{n}'s ganesha.nfsd died by signal {-status} while stopping"
        mark = srv.log_mark()
        srv.start_ganesha(wait=False)
        if wait:
            wait_for(lambda: srv.serving("/shared"), 30, f"h{n} serving /shared", 0.2, alive=srv.ganesha.alive)
        return mark

    def no_client_errors(self, when):
        assert self.cluster.errors() == 0, f"{when}: client errors:\n{self.cluster.error_text()}"


def head_conf(heads, ceph, n):
    """The head's local ganesha.conf's blocks after the core ones (cephadm's
    bootstrap file): the RADOS blocks and the %url of its own object."""
    return f"""RADOS_KV {{
  ceph_conf = "{ceph.conf}"; userid = nfs;
  pool = nfs; namespace = dcache; nodeid = h{n};
}}
RADOS_URLS {{
  ceph_conf = "{ceph.conf}"; userid = nfs;
  watch_url = "rados://nfs/dcache/head-h{n}";
}}
%url "rados://nfs/dcache/head-h{n}"
"""


@pytest.fixture(scope="module")
def rados(make_heads, release, build, tmp_path_factory):
    for lib in ("libganesha_rados_urls.so", "libganesha_rados_recov.so"):
        if not os.path.exists(release.in_root(f"/usr/lib/ganesha/{lib}")):
            pytest.skip(f"no {lib} for Ganesha {release.name} (nfs-ganesha-ceph; run {release.setup_command})")
    for tool in ("ganesha-rados-grace", "ceph-mon"):
        if not os.access(f"/usr/bin/{tool}", os.X_OK):
            pytest.skip(f"no {tool} (run ci/setup.sh)")
    need(*CEPH_TOOLS)
    cluster = make_heads(3, start=False, network=True, exports=[], nfsv4_lines=GRACE, wait_pseudo="",
                         log_level="EVENT")
    heads = cluster.heads
    # Ceph's files on the heads' filesystem: a release's root sees it
    ceph = Ceph(heads.stack, heads.network, os.path.join(heads.mnt, ".ceph"))
    ceph.start()
    print(f"Ceph (1 mon, 1 memstore osd, pool nfs) answers in {ceph.started_ms} ms, "
          f"daemons' RSS {ceph.rss_kib // 1024} MiB")
    # the heads' key: the head set's namespace only
    ceph.key("nfs", "mon", "allow r", "osd", "allow rw pool=nfs namespace=dcache")
    heads.server_args["conf_extra"] = ""
    heads.head_args = lambda n: {"conf_extra": head_conf(heads, ceph, n)}
    os.makedirs(os.path.join(heads.mnt, "shared"))
    # dcache-check of the heads' release, reading standard input: another
    # release's run chrooted in its root, in a mount namespace that binds
    # /proc (its standard input is read through /proc/self/fd) and a
    # directory holding a copy of it into the root
    check = [build.bin("dcache-check")]
    if release.root:
        state = os.path.join(heads.state, "check")
        os.makedirs(state)
        shutil.copy(release.dcache_check, state)
        ns = Namespace(heads.stack, state, release=release)
        check = ns.argv(["chroot", release.root, os.path.join(state, "dcache-check")])
    work = str(tmp_path_factory.mktemp("rados"))
    return Rados(cluster, ceph, work, check, build.bin("dcache-bench"))


def test_ceph_and_the_grace_database(rados):
    rados.ceph.run(["ganesha-rados-grace", "--pool", "nfs", "--ns", "dcache", "add", "h1", "h2", "h3"])
    db = rados.grace_db()
    assert len(re.findall(r"^h[123]\s", db, re.M)) == 3, f"the grace database does not list h1 h2 h3: {db}"


def test_the_first_generation_published_and_served(rados):
    heads = rados.heads
    for n in (1, 2, 3):
        with open(os.path.join(rados.work, f"h{n}.conf"), "w", encoding="utf-8") as f:
            f.write(head_conf(heads, rados.ceph, n))
    stage = rados.stage(1, "direct", "direct")
    rc, out = rados.tool("check", *rados.head_confs(), stage=stage)
    assert rc == 0, f"generation 1 refused by the check: {out}"
    rc, out = rados.tool("publish", "export-2.1", "conf-dcache.1", "head-h1", "head-h2", "head-h3", stage=stage)
    assert rc == 0, f"publishing generation 1: {out}"
    t0 = time.monotonic()
    for n in (1, 2, 3):
        srv = heads.start_head(n)
        wait_for(lambda srv=srv: srv.serving("/shared"), 30, f"h{n} serving /shared", 0.2, alive=srv.ganesha.alive)
    print(f"three heads serve /shared from their objects in RADOS in {int((time.monotonic() - t0) * 1000)} ms")
    for n in (1, 2, 3):
        assert created("direct").search(heads[n].log()), f"h{n}: no 'created over VFS' direct/direct line"
        assert rados.watchers(n) == 1, f"head-h{n}: {rados.watchers(n)} watchers, not 1"
    # NFSv4 opens wait until the heads' first grace period is over
    for srv in heads:
        srv.wait_log("NFS Server Now NOT IN GRACE", timeout=30)
    db = rados.grace_db()
    assert not re.search(r"^h[123]\s+[NE]", db, re.M), f"grace not lifted after the start: {db}"
    for n in (1, 2, 3):
        rados.cluster.start_clients(rados.bench, "shared", n)
    rados.serves(h1="direct", h2="direct", h3="direct")


def test_the_second_generation_is_checked_and_published_without_a_reload(rados):
    stage = rados.stage(2, "dontcache", "dontcache")
    conf1 = rados.rados("get", "conf-dcache.1", "-").stdout.decode()
    assert conf1.replace("/export-2.1\"", "/export-2.2\"") == open(os.path.join(stage, "conf-dcache.2")).read(), \
        "conf-dcache.2 is not conf-dcache.1 with export 2's line moved to export-2.2"
    rc, out = rados.tool("check", *rados.head_confs(), stage=stage)
    assert rc == 0, f"generation 2 refused by the check: {out}"
    marks = [srv.log_mark() for srv in rados.heads]
    rc, out = rados.tool("publish", "export-2.2", "conf-dcache.2", stage=stage)
    assert rc == 0, f"publishing generation 2: {out}"
    # nothing a head reads changed: a reload would come within 0.2 s (the
    # notify), none is expected; half a second is the test's window
    time.sleep(0.5)
    for n, (srv, m) in enumerate(zip(rados.heads, marks), 1):
        assert not RELOADED.search(srv.log_since(m)), f"h{n} reloaded when generation 2 was written"


def point(rados, n, read, write):
    """dcache-rados point hN, then the check that must pass before the next
    head is touched: its updated line, the others not reloaded, verify."""
    marks = [srv.log_mark() for srv in rados.heads]
    t0 = time.monotonic()
    rc, out = rados.tool("point", f"h{n}", stage=os.path.join(rados.work, "gen-2"))
    assert rc == 0, f"dcache-rados point h{n}: {out}"
    srv = rados.heads[n]
    try:
        srv.wait_log(r"DCACHE: export 2 \(.*\) (updated|update refused)", marks[n - 1], 30)
    except Timeout:
        pytest.fail(f"h{n}: no DCACHE line within 30 s of dcache-rados point")
    since = srv.log_since(marks[n - 1])
    assert re.search(rf"DCACHE: export 2 \(.*\) updated: IO_Cache_Read = {read}, IO_Cache_Write = {write},", since), \
        f"h{n}: {[s for s in since.splitlines() if 'DCACHE: export 2' in s]}"
    print(f"h{n}: updated {int((time.monotonic() - t0) * 1000)} ms after dcache-rados point")
    for m in (1, 2, 3):
        if m != n:
            assert not RELOADED.search(rados.heads[m].log_since(marks[m - 1])), f"h{m} reloaded by h{n}'s step"
    rc, out = rados.verify(n)
    assert rc == 0 and f"h{n}: conf-dcache.2 (export-2.2) checked; ganesha.nfsd here serves it" in out, \
        f"dcache-rados verify --local h{n}: {out}"


def test_the_roll_to_dontcache_at_h1(rados):
    point(rados, 1, "dontcache", "dontcache")
    rados.serves(h1="dontcache", h2="direct", h3="direct")


def test_h2_restarted_mid_roll_comes_up_as_its_object_says(rados):
    rados.cluster.stop_clients(2)
    graces = sum(c.grace for c in rados.cluster.clients)
    marks = [srv.log_mark() for srv in rados.heads]
    mark = rados.restart(2)
    assert created("direct").search(rados.heads[2].log_since(mark)), \
        "h2 did not come up with export 2 as head-h2 still says (generation 1: direct/direct)"
    # its start opened a grace period for the whole head set (rados_cluster):
    # every head enforces it, then lifts it
    for n, (srv, m) in enumerate(zip(rados.heads, marks), 1):
        try:
            srv.wait_log("NFS Server Now IN GRACE", m, 20)
            srv.wait_log("NFS Server Now NOT IN GRACE", m, 30)
        except Timeout:
            pytest.fail(f"h{n}: no grace period entered and lifted after h2's start")
    db = rados.grace_db()
    assert not re.search(r"^h[123]\s+[NE]", db, re.M), f"grace db after h2's restart: {db}"
    assert rados.watchers(2) == 1, f"head-h2: {rados.watchers(2)} watchers after h2's restart, not 1"
    rados.cluster.start_clients(rados.bench, "shared", 2)
    rados.serves(h2="direct")
    rados.no_client_errors("h2's restart and the grace period")
    print(f"NFSv4 OPENs answered NFS4ERR_GRACE meanwhile, waited out and retried: "
          f"{sum(c.grace for c in rados.cluster.clients) - graces}")


def test_the_roll_goes_on_to_h2_and_h3(rados):
    point(rados, 2, "dontcache", "dontcache")
    rados.serves(h2="dontcache", h3="direct")
    point(rados, 3, "dontcache", "dontcache")
    rados.serves(h1="dontcache", h2="dontcache", h3="dontcache")
    rados.no_client_errors("the roll to generation 2")


def test_a_malformed_value_reaches_no_object(rados):
    stage = rados.stage(3, "dontcache", "fast")
    before = rados.objects()
    marks = [srv.log_mark() for srv in rados.heads]
    rc, out = rados.tool("check", *rados.head_confs(), stage=stage)
    assert rc != 0 and re.search(r'^\(stdin\):\d+: DCACHE: export 2 \(.*\): IO_Cache_Write = "fast" is not valid; '
                                 r"allowed: .*; export refused$", out, re.M) \
        and "dcache-rados: export-2.3 refused" in out, f"IO_Cache_Write = fast not stopped by the check: {out}"
    # a publisher stops there (docs/cluster.md: check && publish)
    time.sleep(0.5)   # the window in which a notified head would reload
    assert rados.objects() == before, "RADOS objects changed"
    for n, (srv, m) in enumerate(zip(rados.heads, marks), 1):
        assert not RELOADED.search(srv.log_since(m)), f"h{n} reloaded by the refused generation"


def test_a_missing_configuration_object(rados, dcache_check):
    # The common object of the generation every head runs disappears (an
    # operator's rados rm, a cleanup that went too far).
    rados.rados("rm", "conf-dcache.2")
    empty = os.path.join(rados.work, "empty")
    os.makedirs(empty)
    rc, out = rados.tool("check", rados.head_confs()[0], stage=empty)
    assert rc != 0 and 'cannot read %url "rados://nfs/dcache/conf-dcache.2"' in out, \
        f"the check does not name the missing conf-dcache.2: {out}"
    h1 = rados.heads[1]
    # the validator itself on the head's own configuration (its %url fetched
    # through Ganesha's RADOS URL backend, as ganesha.nfsd reads it): exit 2
    res = h1.run(dcache_check(h1) + [h1.conf_path], check=False, quiet=True)
    assert res.returncode == 2 and re.search(r"conf-dcache\.2.*open error", res.stderr), \
        f"dcache-check of h1's ganesha.conf with conf-dcache.2 missing: exit {res.returncode}: {res.stderr}"
    rc, out = rados.tool("verify", "h1")
    assert rc == 1 and "h1: cannot read %url \"rados://nfs/dcache/conf-dcache.2\"" in out, f"verify: {out}"
    # a running head told to reread keeps what it serves
    mark = h1.log_mark()
    rados.rados("notify", "head-h1", "reload")
    try:
        h1.wait_log("conf-dcache.2", mark, 10)
    except Timeout:
        pytest.fail(f"h1 logged nothing about the missing object: {h1.log_since(mark)[-500:]}")
    assert "DCACHE: export 2 (" not in h1.log_since(mark), "h1 changed export 2 on a reread that failed"
    rados.serves(h1="dontcache")
    # a head that restarts now does not start
    rados.cluster.stop_clients(3)
    h3 = rados.heads[3]
    mark = rados.restart(3, wait=False)
    assert h3.ganesha.wait_gone(30), f"h3 restarted with conf-dcache.2 missing still runs: {h3.log_tail(3)}"
    print(f"h3 restarted with conf-dcache.2 missing exits (status {h3.ganesha.proc.returncode})")
    # the mitigation: the object put back from the generation's copy
    rc, out = rados.tool("restore", "conf-dcache.2", stage=os.path.join(rados.work, "gen-2"))
    assert rc == 0 and "it was missing" in out, f"restore conf-dcache.2: {out}"
    marks = [srv.log_mark() for srv in rados.heads]
    rados.restart(3)
    assert created("dontcache").search(h3.log_since(marks[2])), \
        f"h3 after conf-dcache.2 was put back: {h3.log_tail(3)}"
    for srv, m in zip(rados.heads, marks):
        srv.wait_log("NFS Server Now NOT IN GRACE", m, 30)
    rados.cluster.start_clients(rados.bench, "shared", 3)
    rados.serves(h3="dontcache")
    rados.no_client_errors("the missing object and h3's restarts")


def callout_check(rados, n):
    """The CTDB callout's health check (check nfs) on hN: (exit, output)."""
    srv = rados.heads[n]
    options = os.path.join(rados.work, f"callout-h{n}.options")
    with open(options, "w", encoding="utf-8") as f:
        f.write(f"GANESHA_CONF={srv.conf_path}\nGANESHA_PIDFILE={srv.state}/ganesha.pid\n"
                f"GANESHA_DBUS_ADDRESS={srv.bus}\n")
    res = srv.run([CALLOUT, "check", "nfs"], check=False, quiet=True, env={"GANESHA_CALLOUT_OPTIONS": options})
    return res.returncode, (res.stdout + res.stderr).strip()


def test_a_broken_live_object_found_by_verify_and_restored(rados):
    # A plain `rados put` over the export object every head runs, its last
    # brace lost: Ganesha's parser fails the whole configuration that
    # includes it
    for c in rados.cluster.clients:
        c.stop()
    good = rados.rados("get", "export-2.2", "-").stdout
    rados.rados("put", "export-2.2", "-", stdin=good.rstrip()[:-1])
    rc, out = rados.tool("verify")
    for n in (1, 2, 3):
        assert rc == 1 and f"h{n}: export-2.2 is not what was published" in out and \
            re.search(rf"h{n}: export-2\.2 refused by dcache-check \(exit 2\)", out), \
            f"dcache-rados verify does not find export-2.2 broken for h{n}: {out}"
    # the heads told to reread: each drops the export and stays up
    marks = [srv.log_mark() for srv in rados.heads]
    rados.tool("reload", "h1", "h2", "h3")
    for n, (srv, m) in enumerate(zip(rados.heads, marks), 1):
        srv.wait_log("Reread exports complete", m, 10)
        assert srv.ganesha.alive(), f"h{n} stopped on a reread of a broken object"
        rc, out = rados.verify(n)
        assert rc == 1 and f"h{n}: ganesha.nfsd serves no export 2 of its configuration (it serves 0)" in out, \
            f"h{n} after rereading the broken object: dcache-rados verify --local: {out}"
    rc, out = callout_check(rados, 1)
    assert rc == 1 and "serves no export but the pseudo root (Export_Id 0)" in out, \
        f"the CTDB callout's health check passes a head that serves nothing: exit {rc}: {out}"
    # a head restarted on it: 4.3 comes up without its exports, and without
    # the rest of its configuration (no Plugins_Dir, no shared grace, no
    # stats); 6.5 exits
    h3 = rados.heads[3]
    mark = rados.restart(3, wait=False)
    wait_for(lambda: not h3.ganesha.alive() or "NFS SERVER INITIALIZED" in h3.log_since(mark), 30,
             "h3 started or gone", 0.2)
    if h3.ganesha.alive():
        rc, out = rados.verify(3)
        assert rc == 1 and "h3: ganesha.nfsd serves no export 2" in out, f"h3 restarted on it: verify: {out}"
        assert "Configuration syntax errors found" in h3.log_since(mark), "h3's log does not say its start failed"
    print(f"h3 restarted on the broken object: "
          f"{'up, serving nothing' if h3.ganesha.alive() else f'exited, status {h3.ganesha.proc.returncode}'}")
    # the fix: the published bytes back, the running heads reread
    running = [f"h{n}" for n in (1, 2, 3) if rados.heads[n].ganesha.alive()]
    rc, out = rados.tool("restore", "export-2.2", "--reload", *running, stage=os.path.join(rados.work, "gen-2"))
    assert rc == 0 and "export-2.2: restored" in out, f"dcache-rados restore: {out}"
    rc, out = rados.tool("verify")
    assert rc == 0, f"verify after the restore: {out}"
    for n in (1, 2):
        wait_for(lambda n=n: rados.verify(n)[0] == 0, 10, f"h{n} serving export 2 again", 0.2)
    assert callout_check(rados, 1) == (0, ""), "the callout's health check fails h1 after the restore"
    # the head started on the broken object read its reload without its
    # Plugins_Dir: it takes another restart
    if h3.ganesha.alive():
        h3.wait_log("Reread exports complete", mark, 10)
        assert re.search(r"Failed to load module \(.*libfsaldcache\.so\)", h3.log_since(mark)), \
            "h3, started on the broken object, loaded DCACHE on the reread after the restore"
    marks = [srv.log_mark() for srv in rados.heads]
    rados.restart(3)
    assert created("dontcache").search(h3.log_since(marks[2])), f"h3 restarted after the restore: {h3.log_tail(3)}"
    for srv, m in zip(rados.heads, marks):
        srv.wait_log("NFS Server Now NOT IN GRACE", m, 30)
    rc, out = rados.verify(3)
    assert rc == 0, f"h3 after its restart: verify --local: {out}"
    for n in (1, 2, 3):
        rados.cluster.start_clients(rados.bench, "shared", n)
    rados.serves(h1="dontcache", h2="dontcache", h3="dontcache")
    rados.no_client_errors("the broken object, its restore and h3's restarts")


def test_every_file_reads_back_through_another_head(rados):
    for c in rados.cluster.clients:
        c.stop()
    rados.no_client_errors("all steps")
    files, bad = 0, []
    for c in rados.cluster.clients:
        assert c.verified > 0, f"client {c.name} verified nothing"
        n = int(c.name[1:c.name.index("-")])
        count, wrong = clientlib.read_back(rados.heads[n % 3 + 1], rados.bench, c, rados.heads.mnt, "shared")
        files, bad = files + count, bad + wrong
    assert files > 0 and not bad, f"{len(bad)} of {files} files do not read back through another head:\n" + \
        "\n".join(bad)
    print(f"Ceph: up in {rados.ceph.started_ms} ms, RSS {rados.ceph.rss_kib // 1024} MiB at start, "
          f"{rados.ceph.rss() // 1024} MiB now")
