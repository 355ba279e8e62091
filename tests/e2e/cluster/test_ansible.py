"""The Ansible role deploy/ansible/roles/dcache, run by the real
ansible-playbook on its example playbook, against three real ganesha.nfsd
heads (dcache_testbed.heads) that export one shared XFS directory
(Export_Id 2, DCACHE, direct/direct) beside another DCACHE export with the
same settings (Export_Id 3, never to be touched), reached through the
community.docker.nsenter connection (each head's namespace holder), with NFS
clients writing and reading through every head all the time:

  - direct -> dontcache on every head: exit 0, one head after the other;
    each file changed in those two values only, byte for byte elsewhere;
    each head's log has the plugin's "updated" line and its counters show
    dontcache serving the clients, direct no more;
  - the same again: changed=0 on every head, no file written, no reload;
  - IO_Cache_Write = fast: dcache-check refuses it on h1 before anything is
    written; the play stops: h1's file byte for byte as it was, no reload,
    still serving dontcache; h2 and h3 not contacted;
  - a value dcache-check accepts but the head refuses on reload: h1's file
    holds an unreloaded restart-only VFS change (fsid_type), which
    dcache-check cannot see against what the head started with; the role
    writes the valid change, UpdateExport is refused, the previous file
    comes back byte for byte and is reloaded, the play stops, h1 keeps
    dontcache, h2 and h3 are not contacted;
  - IO_Queue_Depth = 0 hand-written into h2's file and never reloaded, the
    roll asking for what every head runs: h1 changed=0, h2 stops the roll
    with dcache-check's line and the allowed values, nothing changed;
  - a duplicate key in a YAML vars file: the role's ansible.cfg stops the
    run before any head is contacted;
  - h3 refusing on reload (fsid_type) after h1 and h2 took the change: with
    dcache_restore_on_failure, h1 and h2 are put back byte for byte and
    reloaded; without it, they keep the new settings and the play says so;
  - IO_Queue_Depth is refused without dcache_restart; with it, each head
    is restarted in turn (the testbed's stand-in for systemctl restart),
    its grace period and its clients waited for before the next, and
    starts with the new value;
  - at the end every file written through one head reads back intact
    through another; no client error all along but the rounds the
    restarts cut.

The tests run in this order, each on the state the previous ones left.
DCACHE_GANESHA=6.5: the heads and dcache-check are 6.5's.
"""

import glob
import hashlib
import json
import os
import re
import subprocess
from dataclasses import replace

import pytest

from support import need
from dcache_testbed import clients as clientlib
from dcache_testbed.exports import dcache
from dcache_testbed.releases import TOP

ANSIBLE = os.path.join(TOP, "deploy", "ansible")
NOTE = "# an operator note on /shared: kept as it is"
SHARED = replace(dcache(2, "shared", IO_Cache_Read="direct", IO_Cache_Write="direct"), export_text=NOTE)
OTHER = dcache(3, "other", IO_Cache_Read="direct", IO_Cache_Write="direct")
# a grace period, short, that a restart must wait out (NFSv4 clients
# reclaim), as a head in production has
GRACE = ("Graceless = false;", "Grace_Period = 5;", "Lease_Lifetime = 5;")
# Ganesha's line for each DBus UpdateExport ("Adding export from file: ..."
# on 4.3, "Updating ..." from 6.5 on)
UPDATE_ASKED = re.compile(r"(Adding|Updating) export from file: ")
NEW, OLD = ("write_dontcache", "read_dontcache"), ("write_direct", "write_split", "read_direct")


class Result:
    """What ansible-playbook did."""

    def __init__(self, rc, out):
        self.rc, self.out = rc, out

    def recap(self, n):
        m = re.search(rf"^h{n} +: ok=.*$", self.out, re.M)
        return m.group(0) if m else f"h{n} not in the recap"

    def lines_of(self, n):
        return [i for i, line in enumerate(self.out.splitlines())
                if re.match(rf"^(ok|changed|fatal|skipping|failed): \[h{n}\]", line)]

    def touched(self, n):
        return bool(self.lines_of(n))


class Roll:
    """The heads, their clients and ansible-playbook against them."""

    def __init__(self, cluster, bench, check, work):
        self.cluster, self.heads, self.bench, self.work = cluster, cluster.heads, bench, work
        self.restart_errors = 0     # client rounds a head's restart cut
        self.inventory = os.path.join(work, "inventory.yml")
        hosts = {}
        for n, srv in enumerate(self.heads, 1):
            hosts[srv.name] = {"ansible_nsenter_pid": srv.ns.holder.pid, "dcache_ganesha_conf": srv.conf_path,
                               "dcache_ganesha_log": srv.log_path, "dcache_dbus_address": srv.bus,
                               "dcache_check": " ".join(check(srv)),
                               # a stand-in for systemctl restart (the testbed restarts the head)
                               "dcache_restart_command": self.heads.restart_argv(n)}
        # The inventory an operator writes (JSON is YAML), but each head
        # reached through nsenter into its namespaces, and its files where
        # the testbed keeps them; the module is the build's, in the heads'
        # Plugins_Dir.
        with open(self.inventory, "w", encoding="utf-8") as f:
            json.dump({"ganesha_heads": {"hosts": hosts, "vars": {
                "ansible_connection": "community.docker.nsenter",
                "ansible_python_interpreter": "/usr/bin/python3",
                "dcache_install_package": False,
                "dcache_stats": os.path.join(TOP, "tools", "dcache-stats")}}}, f, indent=1)
        # The role's own ansible.cfg, and Ansible's files in the work dir
        home = os.path.join(work, "ansible")
        os.makedirs(os.path.join(home, "local"))
        os.makedirs(os.path.join(home, "remote"))
        self.env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ANSIBLE, "ansible.cfg"), ANSIBLE_HOME=home,
                        ANSIBLE_LOCAL_TEMP=f"{home}/local", ANSIBLE_REMOTE_TEMP=f"{home}/remote", ANSIBLE_NOCOLOR="1",
                        ANSIBLE_RETRY_FILES_ENABLED="0")

    def play(self, read=None, write=None, settings=None, args=(), **extra):
        """ansible-playbook of the example playbook setting export 2's
        modes (or settings), with extra variables and arguments."""
        settings = dict(settings or {"IO_Cache_Read": read, "IO_Cache_Write": write})
        extra["dcache_exports"] = [{"export_id": 2, "settings": settings}]
        res = subprocess.run(["ansible-playbook", "-i", self.inventory, os.path.join(ANSIBLE, "dcache-settings.yml"),
                              "-e", json.dumps(extra), *args], cwd=self.work, capture_output=True, text=True,
                             env=self.env, check=False)
        out = res.stdout + res.stderr
        print("\n".join("  play| " + s for s in out.splitlines() if s.strip()))
        return Result(res.returncode, out)

    def sums(self):
        return [hashlib.sha256(open(srv.conf_path, "rb").read()).hexdigest() for srv in self.heads]

    def marks(self):
        return [srv.log_mark() for srv in self.heads]

    def since(self, marks):
        return [srv.log_since(m) for srv, m in zip(self.heads, marks)]

    def counter(self, n, names):
        c = self.heads[n].counters(2)
        return sum(c[name] for name in names)


def reloads(text):
    return len(UPDATE_ASKED.findall(text))


def reloaded(text):
    return bool(re.search(r"DCACHE: export [23] \(", text) or UPDATE_ASKED.search(text))


def backups(srv):
    return glob.glob(srv.conf_path + ".*~")


@pytest.fixture(scope="module")
def roll(make_heads, build, dcache_check, tmp_path_factory):
    need("ansible-playbook")
    cluster = make_heads(3, exports=[SHARED, OTHER], wait_pseudo="/shared", log_level="EVENT", nfsv4_lines=GRACE,
                         conf_extra="# ---- exports: an operator's notes and layout stay as they are ----")
    cluster.heads.serve_restarts()
    for srv in cluster.heads:
        srv.wait_log("NFS Server Now NOT IN GRACE", timeout=30)
    return Roll(cluster, build.bin("dcache-bench"), dcache_check, str(tmp_path_factory.mktemp("ansible")))


def test_three_heads_serve_one_filesystem_with_clients_on_each(roll):
    for srv in roll.heads:
        assert srv.serving("/shared"), f"{srv.name} does not serve /shared"
    for n in (1, 2, 3):
        roll.cluster.start_clients(roll.bench, "shared", n)
    assert not clientlib.wait_all(roll.cluster.clients, 1), "clients do not progress through every head"


def test_roll_to_dontcache_one_head_after_the_other(roll):
    before = [open(srv.conf_path, encoding="utf-8").read() for srv in roll.heads]
    marks = roll.marks()
    res = roll.play("dontcache", "dontcache")
    assert res.rc == 0, f"roll to dontcache: exit {res.rc}"
    for n, (srv, old, since) in enumerate(zip(roll.heads, before, roll.since(marks)), 1):
        want = old.replace("    IO_Cache_Read = direct;\n    IO_Cache_Write = direct;\n    FSAL { Name = VFS; }\n"
                           "  }\n}\nEXPORT {\n  Export_Id = 3;",
                           "    IO_Cache_Read = dontcache;\n    IO_Cache_Write = dontcache;\n    FSAL { Name = VFS; }\n"
                           "  }\n}\nEXPORT {\n  Export_Id = 3;")
        now = open(srv.conf_path, encoding="utf-8").read()
        assert want != old and now == want, \
            f"h{n}: the file did not change in export 2's two values only:\n{now}"
        assert len(re.findall(r"DCACHE: export 2 \(.*\) updated: IO_Cache_Read = dontcache, "
                              r"IO_Cache_Write = dontcache,", since)) == 1, \
            f"h{n}: no single new 'updated: IO_Cache_Read = dontcache, IO_Cache_Write = dontcache' line"
        assert reloads(since) == 1 and "DCACHE: export 3 (" not in since, \
            f"h{n}: {reloads(since)} exports reloaded (export 2 alone expected)"
        assert re.search(rf"^ok: \[h{n}\] => {{$", res.out, re.M) and "failed=0" in res.recap(n), \
            f"h{n}: the play did not verify it: {res.recap(n)}"
        assert not backups(srv), f"h{n}: a backup file was left: {backups(srv)}"
    assert res.lines_of(1)[-1] < res.lines_of(2)[0] and res.lines_of(2)[-1] < res.lines_of(3)[0], \
        "heads not rolled one at a time (h2 begun before h1 was checked, or h3 before h2)"


def test_the_heads_serve_dontcache_after_the_roll(roll):
    assert not clientlib.wait_all(roll.cluster.clients, 1), "clients stalled after the roll"
    first = [(roll.counter(n, NEW), roll.counter(n, OLD)) for n in (1, 2, 3)]
    assert not clientlib.wait_all(roll.cluster.clients, 2), "clients stalled after the roll"
    for n, (new0, old0) in enumerate(first, 1):
        new1, old1 = roll.counter(n, NEW), roll.counter(n, OLD)
        assert new1 > new0 and old1 == old0, \
            f"h{n}: {'+'.join(NEW)} {new0} -> {new1}, {'+'.join(OLD)} {old0} -> {old1}: not dontcache only"
    assert roll.cluster.errors() == 0, f"client errors during the roll:\n{roll.cluster.error_text()}"


def test_the_same_roll_again_changes_nothing(roll):
    sums = roll.sums()
    marks = roll.marks()
    res = roll.play("dontcache", "dontcache")
    assert res.rc == 0, f"the same roll again: exit {res.rc}"
    for n in (1, 2, 3):
        assert re.search(r"changed=0 +unreachable=0 +failed=0", res.recap(n)), f"h{n}: {res.recap(n)}"
    assert roll.sums() == sums, "a file was rewritten"
    assert [reloads(t) for t in roll.since(marks)] == [0, 0, 0], "a head was reloaded"


def test_a_value_dcache_check_refuses_stops_the_roll_at_the_first_head(roll):
    sums = roll.sums()
    marks = roll.marks()
    dc0 = roll.counter(1, ("write_dontcache",))
    res = roll.play("dontcache", "fast")
    assert res.rc == 2, f"IO_Cache_Write = fast: exit {res.rc}, not 2"
    assert "not changed: the candidate failed validation" in res.out and \
        re.search(r'DCACHE: export 2 \(.*\): IO_Cache_Write = \\?"fast\\?" is not valid', res.out), \
        "no dcache-check refusal, with the plugin's own line, in the play's output"
    assert f"h1: {roll.heads[1].conf_path} not changed" in res.out and "the roll stops here" in res.out, \
        "the play does not stop at h1 saying its file is not changed"
    assert roll.sums() == sums, "a file changed by the refused roll"
    for n, since in enumerate(roll.since(marks), 1):
        assert not reloaded(since), f"h{n} was reloaded"
    assert not res.touched(2) and not res.touched(3), "the play went on to h2 or h3"
    assert not clientlib.wait_all(roll.cluster.clients, 2), "clients stalled after the refused roll"
    dc1 = roll.counter(1, ("write_dontcache",))
    assert dc1 > dc0, f"h1: no dontcache WRITE after the refusal ({dc0} -> {dc1})"
    assert roll.cluster.errors() == 0, f"client errors:\n{roll.cluster.error_text()}"


def test_a_value_the_head_refuses_on_reload_puts_the_previous_file_back(roll, dcache_check):
    # An unreloaded change in h1's file that only a restart applies:
    # fsid_type in export 2's VFS block. dcache-check judges the DCACHE
    # block, not what the running export started with; VFS refuses the update.
    h1 = roll.heads[1]
    text = open(h1.conf_path, encoding="utf-8").read()
    edited = text.replace("    FSAL { Name = VFS; }\n  }\n}\nEXPORT {\n  Export_Id = 3;",
                          "    FSAL { Name = VFS; fsid_type = Device; }\n  }\n}\nEXPORT {\n  Export_Id = 3;")
    assert edited != text, "could not put fsid_type into h1's file"
    with open(h1.conf_path, "w", encoding="utf-8") as f:
        f.write(edited)
    check = h1.run(dcache_check(h1) + [h1.conf_path], check=False)
    assert check.returncode == 0, f"dcache-check refuses h1's file with fsid_type: {check.stderr}"
    sums, marks = roll.sums(), roll.marks()
    dc0 = roll.counter(1, ("write_dontcache",))
    res = roll.play("direct", "direct")
    assert res.rc == 2, f"h1 refuses on reload: exit {res.rc}, not 2"
    since = roll.since(marks)
    assert "Can not change fsid_type without restart" in since[0] and re.search(
        r"DCACHE: export 2 \(.*\): FSAL VFS refused the update \(see its message above\); update refused, "
        r"the export keeps its current settings", since[0]), "h1's log has no VFS refusal and plugin's line"
    assert reloads(since[0]) == 2, f"h1: {reloads(since[0])} reloads, not 2 (the new file, then its previous one)"
    assert not re.search(r"DCACHE: export 2 \(.*\) updated:", since[0]), "h1 logged an update"
    assert "export 2 refused the update: DCACHE: export 2" in res.out and "restored from" in res.out \
        and "the roll stops here" in res.out, "the play does not name h1's refusal, the restore and the stop"
    assert open(h1.conf_path, encoding="utf-8").read() == edited, "h1: the previous file is not back byte for byte"
    assert not backups(h1), "h1: the backup file was left"
    assert roll.sums()[1:] == sums[1:], "h2 or h3's file changed"
    for n in (2, 3):
        assert not reloaded(since[n - 1]), f"h{n} was reloaded"
    assert not res.touched(2) and not res.touched(3), "the play went on to h2 or h3"
    assert not clientlib.wait_all(roll.cluster.clients, 2), "clients stalled after the refused reload"
    dc1 = roll.counter(1, ("write_dontcache",))
    assert dc1 > dc0, f"h1: no dontcache WRITE after the refusal ({dc0} -> {dc1})"
    assert roll.cluster.errors() == 0, f"client errors:\n{roll.cluster.error_text()}"
    with open(h1.conf_path, "w", encoding="utf-8") as f:   # the head runs its file again
        f.write(text)


def hand_edit(srv, old, new):
    """srv's file with old replaced by new (as an operator's editor would
    leave it); returns the text it had."""
    text = open(srv.conf_path, encoding="utf-8").read()
    assert old in text, f"{srv.name}'s file has no {old!r}"
    with open(srv.conf_path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))
    return text


def conf(srv):
    return open(srv.conf_path, encoding="utf-8").read()


DCACHE_2 = "    Name = DCACHE;\n    IO_Cache_Read = "
VFS_2 = "    FSAL { Name = VFS; }\n  }\n}\nEXPORT {\n  Export_Id = 3;"
VFS_2_FSID = "    FSAL { Name = VFS; fsid_type = Device; }\n  }\n}\nEXPORT {\n  Export_Id = 3;"


def test_a_bad_value_hand_written_on_an_unchanged_head_stops_the_roll(roll):
    # IO_Queue_Depth = 0 written by hand in h2's file and never reloaded: the
    # roll changes nothing on h2, yet its next restart would refuse export 2
    h2 = roll.heads[2]
    text = hand_edit(h2, DCACHE_2, "    Name = DCACHE;\n    IO_Queue_Depth = 0;\n    IO_Cache_Read = ")
    edited, sums, marks = conf(h2), roll.sums(), roll.marks()
    res = roll.play("dontcache", "dontcache")
    assert res.rc == 2, f"a bad value on an unchanged head: exit {res.rc}, not 2"
    assert re.search(r"changed=0 +unreachable=0 +failed=0", res.recap(1)), f"h1: {res.recap(1)}"
    assert re.search(rf"h2: {re.escape(h2.conf_path)} \(as it is, before the roll\): dcache-check refuses the file "
                     r'\(exit 1\): .*DCACHE: export 2 \(.*\): IO_Queue_Depth = \\?"0\\?" is not valid; '
                     r"allowed: an integer from 1 to 4096", res.out), \
        "the play does not stop at h2 with dcache-check's line and the allowed values"
    assert "not changed; the roll stops here" in res.out, "the play does not say h2's file is not changed"
    assert conf(h2) == edited and roll.sums() == sums, "a file changed"
    assert not any(reloaded(t) for t in roll.since(marks)), "a head was reloaded"
    assert not res.touched(3), "the play went on to h3"
    with open(h2.conf_path, "w", encoding="utf-8") as f:
        f.write(text)


def test_a_duplicate_yaml_key_stops_the_run_before_any_head(roll):
    # the settings in a vars file, IO_Cache_Read given twice: Ansible's
    # default takes the last with a warning, the role's ansible.cfg refuses
    varsfile = os.path.join(roll.work, "settings.yml")
    with open(varsfile, "w", encoding="utf-8") as f:
        f.write("dcache_exports:\n  - export_id: 2\n    settings:\n      IO_Cache_Read: direct\n"
                "      IO_Cache_Write: dontcache\n      IO_Cache_Read: dontcache\n")
    sums, marks = roll.sums(), roll.marks()
    res = subprocess.run(["ansible-playbook", "-i", roll.inventory, os.path.join(ANSIBLE, "dcache-settings.yml"),
                          "-e", f"@{varsfile}"], cwd=roll.work, capture_output=True, text=True, env=roll.env,
                         check=False)
    out = res.stdout + res.stderr
    print("\n".join("  play| " + s for s in out.splitlines() if s.strip()))
    assert res.returncode != 0 and re.search(r"duplicate.*IO_Cache_Read", out, re.I | re.S), \
        f"a duplicate key in a vars file: exit {res.returncode}, no duplicate key error"
    assert not any(Result(res.returncode, out).touched(n) for n in (1, 2, 3)), "a head was contacted"
    assert roll.sums() == sums and not any(reloaded(t) for t in roll.since(marks)), "a head was changed"


def refusing_h3(roll):
    """h3's file given an unreloaded fsid_type (VFS refuses the update)."""
    return hand_edit(roll.heads[3], VFS_2, VFS_2_FSID)


def test_a_later_head_refusing_with_restore_puts_every_head_back(roll):
    text3 = refusing_h3(roll)
    before, marks = [conf(srv) for srv in roll.heads], roll.marks()
    res = roll.play("direct", "direct", dcache_restore_on_failure=True)
    assert res.rc == 2, f"h3 refuses: exit {res.rc}, not 2"
    since = roll.since(marks)
    for n in (1, 2):
        srv = roll.heads[n]
        assert re.search(r"updated: IO_Cache_Read = direct, IO_Cache_Write = direct,.*"
                         r"updated: IO_Cache_Read = dontcache, IO_Cache_Write = dontcache,", since[n - 1], re.S), \
            f"h{n} was not rolled and then put back"
        assert conf(srv) == before[n - 1], f"h{n}'s file is not back byte for byte"
        assert not backups(srv), f"h{n}: a backup file was left"
    assert conf(roll.heads[3]) == before[2] and not backups(roll.heads[3]), "h3's file is not back"
    assert "the heads rolled before, h1, h2, are back on their previous files: h1: runs its previous file; " \
           "h2: runs its previous file" in " ".join(res.out.split()), "the play does not say h1 and h2 are back"
    with open(roll.heads[3].conf_path, "w", encoding="utf-8") as f:
        f.write(text3)
    assert not clientlib.wait_all(roll.cluster.clients, 1), "clients stalled"
    assert roll.cluster.errors() == 0, f"client errors:\n{roll.cluster.error_text()}"


def test_a_later_head_refusing_leaves_the_heads_before_it_rolled(roll):
    text3 = refusing_h3(roll)
    before, marks = [conf(srv) for srv in roll.heads], roll.marks()
    res = roll.play("direct", "direct")
    assert res.rc == 2, f"h3 refuses: exit {res.rc}, not 2"
    since = roll.since(marks)
    for n in (1, 2):
        assert re.search(r"DCACHE: export 2 \(.*\) updated: IO_Cache_Read = direct, IO_Cache_Write = direct,",
                         since[n - 1]), f"h{n} was not rolled"
        assert "IO_Cache_Read = direct;" in conf(roll.heads[n]), f"h{n}'s file not rolled"
    assert "FSAL VFS refused the update" in since[2] and conf(roll.heads[3]) == before[2], \
        "h3 did not refuse, or its file is not back"
    assert "the heads rolled before, h1, h2, keep the new settings: the heads now run different settings " \
           "(dcache_restore_on_failure: true puts them back)" in " ".join(res.out.split()), \
        "the play does not say that h1 and h2 keep the new settings"
    with open(roll.heads[3].conf_path, "w", encoding="utf-8") as f:
        f.write(text3)


def test_a_restart_only_setting_is_rolled_by_restarting_each_head_in_turn(roll):
    marks, sums = roll.marks(), roll.sums()
    res = roll.play(settings={"IO_Queue_Depth": 16})
    assert res.rc == 2 and "IO_Queue_Depth apply only when ganesha.nfsd starts" in " ".join(res.out.split()) \
        and "set dcache_restart: true" in " ".join(res.out.split()), \
        f"IO_Queue_Depth without dcache_restart: exit {res.rc}, not refused naming dcache_restart"
    assert roll.sums() == sums and not any(reloaded(t) for t in roll.since(marks)), "a head was changed"
    errors0 = roll.cluster.errors()
    texts0 = {c.name: len(c.error_text) for c in roll.cluster.clients}
    res = roll.play(settings={"IO_Queue_Depth": 16}, dcache_restart=True)
    assert res.rc == 0, f"IO_Queue_Depth = 16 with dcache_restart: exit {res.rc}"
    since = roll.since(marks)
    for n in (1, 2, 3):
        assert roll.heads.restarts[n] == 1, f"h{n} restarted {roll.heads.restarts[n]} times, not once"
        assert re.search(r"DCACHE: export 2 \(.*\) created over VFS: .*IO_Queue_Depth = 16", since[n - 1]), \
            f"h{n} did not start with IO_Queue_Depth = 16"
        assert "NFS Server Now NOT IN GRACE" in since[n - 1].split("created over VFS")[-1], \
            f"h{n}'s grace period did not end after its restart"
    restart = [res.lines_of(n) for n in (1, 2, 3)]
    out = res.out.splitlines()
    waited = [[i for i in restart[n - 1] if "Wait until it answers" in out[i - 2] or "Wait until it answers"
               in out[i - 1]] for n in (1, 2, 3)]
    assert all(waited), "no head waited for after its restart"
    assert restart[0][-1] < restart[1][0] and restart[1][-1] < restart[2][0], "heads not restarted one at a time"
    assert not clientlib.wait_all(roll.cluster.clients, 1), "clients stalled after the restarts"
    # a round in flight when its head stops fails (its file's content is no
    # longer taken as known); none may read back other data than written
    failed = [t for c in roll.cluster.clients for t in c.error_text[texts0[c.name]:]]
    roll.restart_errors = roll.cluster.errors() - errors0
    assert not [t for t in failed if "expected 0x" in t], f"data read back wrong during the restarts: {failed}"
    mounts, graces = (sum(c.unreachable for c in roll.cluster.clients), sum(c.grace for c in roll.cluster.clients))
    print(f"client rounds cut by the restarts: {roll.restart_errors} {failed}; MOUNTs refused: {mounts}; "
          f"rounds in grace: {graces}")


def test_every_file_reads_back_through_another_head(roll):
    for c in roll.cluster.clients:
        c.stop()
    assert roll.cluster.errors() == roll.restart_errors, f"client errors:\n{roll.cluster.error_text()}"
    files, bad = 0, []
    for c in roll.cluster.clients:
        assert c.verified > 0, f"client {c.name} verified nothing"
        n = int(c.name[1:c.name.index("-")])
        count, wrong = clientlib.read_back(roll.heads[n % 3 + 1], roll.bench, c, roll.heads.mnt, "shared")
        files, bad = files + count, bad + wrong
    assert files > 0 and not bad, f"{len(bad)} of {files} files do not read back through another head:\n" + \
        "\n".join(bad)
