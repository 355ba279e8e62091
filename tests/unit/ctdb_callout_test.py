"""deploy/ctdb/ganesha-dcache-callout on its own, as CTDB's 60.nfs and 06.nfs
call it, against a stand-in dbus-send (it records each call and answers as
Ganesha 4.3 and 6.5 do) and a stand-in ganesha.nfsd (a sleep under that
name): the operations it registers, the shares it lists, its health check,
the grace calls at takeip-pre/takeip/releaseip and their failures, startup
with a start command; the health check failing a head that serves none of
the exports its configuration names. Any user, no daemons.

  python3 -m pytest ctdb_callout_test.py      (from tests/unit; ctest -L unit)
"""

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CALLOUT = os.path.join(TOP, "deploy", "ctdb", "ganesha-dcache-callout")

# dbus-send: appends its arguments (and the bus) to calls, answers from
# reply.METHOD (or fails when dbus-down exists)
DBUS_SEND = f"""#!{sys.executable}
import os, sys
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(here, "calls"), "a") as f:
    f.write(os.environ.get("DBUS_SYSTEM_BUS_ADDRESS", "system") + " " + " ".join(sys.argv[1:]) + "\\n")
if os.path.exists(os.path.join(here, "dbus-down")):
    sys.exit("Error org.freedesktop.DBus.Error.ServiceUnknown: no Ganesha")
method = [a for a in sys.argv if a.startswith("org.ganesha.nfsd.")][0].rsplit(".", 1)[1]
with open(os.path.join(here, "reply." + method)) as f:
    sys.stdout.write(f.read())
"""
GET_GRACE = """method return time=1 sender=:1.0 -> destination=:1.2 serial=3 reply_serial=2
   boolean false
   boolean true
   string "get grace success"
"""
GRACE = """method return time=1 sender=:1.0 -> destination=:1.2 serial=3 reply_serial=2
   boolean true
   string "Started grace period"
"""


def show_exports(*ids):
    """ShowExports' reply (4.3's form, trimmed): one struct per export."""
    structs = "".join(f'      struct {{\n         uint16 {i}\n         string "/p{i}"\n'
                      "         struct {\n         }\n      }\n" for i in ids)
    return "method return time=1 sender=:1.0 -> destination=:1.2 serial=3 reply_serial=2\n   struct {\n   }\n" \
        f"   array [\n{structs}   ]\n"


CONF = """NFS_CORE_PARAM { Mount_Path_Pseudo = true; }
EXPORT {
  Export_Id = 2; Path = "/srv/shared"; Pseudo = /shared;
  FSAL { Name = DCACHE; IO_Cache_Write = direct; FSAL { Name = VFS; } }
}
EXPORT { Export_Id = 3;
  path=/srv/other ;   # Path = /srv/commented
}
"""


class Callout:
    """The callout with its options, the stand-ins and what they saw."""

    def __init__(self, tmp):
        self.tmp = str(tmp)
        self.fake = None
        os.makedirs(os.path.join(self.tmp, "bin"))
        os.makedirs(os.path.join(self.tmp, "state"))
        self.write("bin/dbus-send", DBUS_SEND)
        os.chmod(self.path("bin/dbus-send"), 0o755)
        self.write("reply.get_grace", GET_GRACE)
        self.write("reply.grace", GRACE)
        self.write("reply.ShowExports", show_exports(2, 0))
        self.write("ganesha.conf", CONF)
        self.write("options", f"GANESHA_CONF={self.path('ganesha.conf')}\n"
                              f"GANESHA_PIDFILE={self.path('ganesha.pid')}\n"
                              f"GANESHA_DBUS_ADDRESS=unix:path={self.path('bus')}\n"
                              f"GANESHA_CALLOUT_LOG={self.path('callout.log')}\n"
                              "GANESHA_STARTUP_WAIT=5\n")
        shutil.copy(shutil.which("sleep"), self.path("ganesha.nfsd"))

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write(self, name, text, mode="w"):
        with open(self.path(name), mode, encoding="utf-8") as f:
            f.write(text)

    def read(self, name):
        if not os.path.exists(self.path(name)):
            return ""
        with open(self.path(name), encoding="utf-8") as f:
            return f.read()

    def run(self, *args):
        """The callout as 60.nfs runs it: (status, output)."""
        env = dict(os.environ, PATH=self.path("bin") + ":" + os.environ["PATH"],
                   GANESHA_CALLOUT_OPTIONS=self.path("options"), CTDB_NFS_CALLOUT_STATE_DIR=self.path("state"))
        res = subprocess.run([CALLOUT, *args], env=env, capture_output=True, text=True, check=False, timeout=30)
        return res.returncode, (res.stdout + res.stderr).strip()

    def calls(self):
        return self.read("calls").splitlines()

    def start_fake(self):
        """A process whose comm is ganesha.nfsd, its pid in the pid file."""
        self.fake = subprocess.Popen([self.path("ganesha.nfsd"), "600"])  # pylint: disable=consider-using-with
        self.write("ganesha.pid", f"{self.fake.pid}\n")

    def stop_fake(self):
        if self.fake is not None:
            self.fake.kill()
            self.fake.wait()
            self.fake = None


@pytest.fixture
def callout(tmp_path):
    c = Callout(tmp_path)
    yield c
    c.stop_fake()
    pid = c.read("ganesha.pid").strip()
    if pid.isdigit():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_register_lists_every_operation(callout):
    rc, out = callout.run("register")
    assert rc == 0, f"register: exit {rc}"
    for op in ("startup", "shutdown", "stop", "start", "check", "takeip-pre", "takeip", "releaseip-pre",
               "releaseip", "monitor-pre", "monitor-post", "monitor-list-shares"):
        assert op in out.splitlines(), f"register does not list {op} (60.nfs and 06.nfs call it)"


def test_monitor_list_shares_lists_each_export_path(callout):
    rc, out = callout.run("monitor-list-shares")
    assert (rc, out.split()) == (0, ["/srv/other", "/srv/shared"]), \
        f"monitor-list-shares: each EXPORT's Path, quoted or not, comments and Mount_Path_Pseudo left out: {out!r}"


def test_without_ganesha(callout):
    rc, out = callout.run("check", "nfs")
    assert rc == 1, "check without ganesha.nfsd does not fail"
    assert "ganesha.nfsd is not running" in out, f"check does not say why: {out}"
    rc, _ = callout.run("takeip", "eth0", "192.0.2.100", "24")
    assert rc == 1, "takeip without ganesha.nfsd does not fail (an address on a head that cannot serve it)"
    rc, _ = callout.run("releaseip", "eth0", "192.0.2.100", "24")
    assert rc == 0, "releaseip without ganesha.nfsd (nothing to release) does not succeed"
    assert callout.calls() == [], "without ganesha.nfsd the callout called DBus"


def test_check_asks_ganesha_over_dbus(callout):
    callout.start_fake()
    assert callout.run("check", "nfs") == (0, ""), "check with ganesha.nfsd answering does not succeed silently"
    assert any(re.match(rf"^unix:path={re.escape(callout.path('bus'))} .*org\.ganesha\.nfsd\.admin\.get_grace", c)
               for c in callout.calls()), f"check does not ask get_grace on GANESHA_DBUS_ADDRESS: {callout.calls()}"
    callout.write("dbus-down", "")
    assert callout.run("check", "nfs")[0] == 1, "check with the bus not answering does not fail"


def test_check_fails_a_head_that_serves_none_of_its_exports(callout):
    callout.start_fake()
    callout.write("reply.ShowExports", show_exports(0))
    rc, out = callout.run("check", "nfs")
    assert rc == 1 and "serves none of the exports its configuration names (Export_Id 2 3); it serves 0" in out, \
        f"check of a head serving only the pseudo root: exit {rc}: {out}"
    assert any(c.endswith("org.ganesha.nfsd.exportmgr.ShowExports") for c in callout.calls()), \
        f"check did not ask ShowExports: {callout.calls()}"
    callout.write("reply.ShowExports", show_exports(3, 0))
    assert callout.run("check", "nfs") == (0, ""), "check of a head serving one of its two exports fails"
    callout.write("options", "GANESHA_EXPORT_IDS=7\n", mode="a")
    rc, out = callout.run("check", "nfs")
    assert rc == 1 and "(Export_Id 7)" in out, f"GANESHA_EXPORT_IDS not what check expects: {out}"


def test_check_reads_included_files_and_configurations_without_exports(callout):
    callout.start_fake()
    callout.write("ganesha.conf", 'NFS_CORE_PARAM { }\n%include "exports.conf"   # relative\n')
    callout.write("exports.conf", "EXPORT { export_id = 9; Path = /srv/n; }\n")
    callout.write("reply.ShowExports", show_exports(9, 0))
    assert callout.run("check", "nfs") == (0, ""), "an Export_Id in an %include'd file is not counted"
    # exports kept in RADOS: no Export_Id in the file, any export but 0
    callout.write("ganesha.conf", '%url "rados://nfs/dcache/head-h1"\n')
    assert callout.run("check", "nfs") == (0, ""), "check of a RADOS head serving an export fails"
    callout.write("reply.ShowExports", show_exports(0))
    rc, out = callout.run("check", "nfs")
    assert rc == 1 and "serves no export but the pseudo root (Export_Id 0)" in out, f"RADOS head serving nothing: {out}"


def test_grace_at_takeip_and_releaseip(callout):
    callout.start_fake()
    rc, _ = callout.run("takeip-pre", "eth0", "192.0.2.100", "24")
    assert rc == 0, "takeip-pre fails"
    assert callout.calls()[-1].endswith("org.ganesha.nfsd.admin.grace string:5:192.0.2.100"), \
        f"takeip-pre's call is not grace 5:IP (take IP): {callout.calls()}"
    rc, _ = callout.run("takeip", "eth0", "192.0.2.100", "24")
    assert (rc, len(callout.calls())) == (0, 1), \
        "takeip after takeip-pre made a second grace call (it would load the clients twice)"
    rc, _ = callout.run("takeip", "eth0", "192.0.2.101", "24")
    assert (rc, len(callout.calls())) == (0, 2), "takeip without takeip-pre (06.nfs not enabled) gave no grace"
    assert callout.calls()[-1].endswith("string:5:192.0.2.101"), f"takeip's call: {callout.calls()[-1]}"
    rc, _ = callout.run("releaseip", "eth0", "192.0.2.100", "24")
    assert rc == 0, "releaseip fails"
    assert callout.calls()[-1].endswith("string:2:192.0.2.100"), \
        f"releaseip's call is not grace 2:IP (release IP): {callout.calls()[-1]}"


def test_takeip_refused_by_ganesha_fails(callout):
    callout.start_fake()
    callout.write("reply.grace", GRACE.replace("boolean true", "boolean false"))
    rc, out = callout.run("takeip", "eth0", "192.0.2.102", "24")
    assert rc == 1, "takeip refused by Ganesha does not fail"
    assert "refused" in out, f"takeip refused does not say so: {out}"
    assert "takeip eth0 192.0.2.102 24: FAILED" in callout.read("callout.log"), \
        f"callout.log does not have the failure: {callout.read('callout.log')}"


def test_stop_and_unknown_operations(callout):
    assert callout.run("stop", "nlockmgr")[0] == 0, "stop nlockmgr (statd-callout): not nothing to do"
    assert callout.run("stop", "nfs")[0] == 0, "stop nfs without GANESHA_STOP_CMD is not left to the service manager"
    assert callout.run("bogus")[0] == 2, "an unknown operation: no usage, exit 2"


def test_startup_runs_the_start_command_and_forgets_takeip_pre(callout):
    callout.start_fake()
    callout.run("takeip-pre", "eth0", "192.0.2.103", "24")
    assert os.path.exists(callout.path("state/grace-192.0.2.103")), "takeip-pre noted nothing"
    callout.stop_fake()
    os.unlink(callout.path("ganesha.pid"))
    # startup waits until Ganesha serves: started a second later
    callout.write("options", f"GANESHA_START_CMD='(sleep 1; \"{callout.path('ganesha.nfsd')}\" 600 & "
                             f"echo $! >\"{callout.path('ganesha.pid')}\") &'\n", mode="a")
    rc, _ = callout.run("startup")
    assert rc == 0, "startup does not run GANESHA_START_CMD and wait until ganesha.nfsd answers"
    pid = callout.read("ganesha.pid").strip()
    assert pid and f"startup : serving (pid {pid})" in callout.read("callout.log"), \
        f"startup did not log serving: {callout.read('callout.log')}"
    assert not os.path.exists(callout.path("state/grace-192.0.2.103")), "startup left takeip-pre's notes"
