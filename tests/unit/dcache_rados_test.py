"""tools/dcache-rados without Ceph: a stand-in rados (objects as files, with
their xattrs and the notifies sent), a stand-in dcache-check (refuses
"fast", fails "SYNTAX" as Ganesha's parser does, -v prints what it would
serve) and a stand-in dbus-send answering ShowExports. What is tested: the
%url inlining, publishing (never over an object), pointing, restoring a
published object's exact bytes (and nothing else), and verify finding an
overwritten, broken or missing object and a head that serves none of its
exports or other settings. The real thing runs in e2e_rados.

  python3 -m pytest dcache_rados_test.py      (from tests/unit; ctest -L unit)
"""

import importlib.machinery
import importlib.util
import os
import subprocess
import sys

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.path.join(TOP, "tools", "dcache-rados")
_loader = importlib.machinery.SourceFileLoader("dcache_rados", TOOL)
_spec = importlib.util.spec_from_loader("dcache_rados", _loader)
tool = importlib.util.module_from_spec(_spec)
_loader.exec_module(tool)

RADOS = f"""#!{sys.executable}
import os, sys
a = sys.argv[1:]
pool, ns, cmd, args = a[1], a[3], a[4], a[5:]
top = os.path.join(os.environ["FAKE_RADOS"], pool, ns)
os.makedirs(top, exist_ok=True)
def path(o):
    return os.path.join(top, o)
if cmd in ("get", "stat", "getxattr", "setxattr", "notify", "rm") and not os.path.exists(path(args[0])):
    sys.exit(f"error {{cmd}} {{pool}}/{{args[0]}}: (2) No such file or directory")
if cmd == "get":
    data = open(path(args[0]), "rb").read()
    sys.stdout.buffer.write(data) if args[1] == "-" else open(args[1], "wb").write(data)
elif cmd == "put":
    data = sys.stdin.buffer.read() if args[1] == "-" else open(args[1], "rb").read()
    open(path(args[0]), "wb").write(data)
elif cmd == "setxattr":
    open(path(args[0]) + "@" + args[1], "w").write(args[2])
elif cmd == "getxattr":
    if not os.path.exists(path(args[0]) + "@" + args[1]):
        sys.exit("error getting xattr: (61) No data available")
    print(open(path(args[0]) + "@" + args[1]).read())
elif cmd == "rm":
    os.unlink(path(args[0]))
elif cmd == "ls":
    print("\\n".join(o for o in sorted(os.listdir(top)) if "@" not in o))
elif cmd == "notify":
    open(os.path.join(os.environ["FAKE_RADOS"], "notifies"), "a").write(args[0] + "\\n")
"""
CHECK = f"""#!{sys.executable}
import re, sys
text = sys.stdin.read()
if "SYNTAX" in text:
    sys.exit("(stdin):2: Config File ((stdin):2): Syntax error in statement")
if "fast" in text:
    print('(stdin):5: DCACHE: export 2 (/srv): IO_Cache_Write = "fast" is not valid; allowed: a, b; export refused',
          file=sys.stderr)
    sys.exit(1)
if "-v" in sys.argv:
    for i, mode in re.findall(r"Export_Id = (\\d+);.*?IO_Cache_Read = (\\w+);", text, re.S):
        print(f"(stdin):1: DCACHE: export {{i}} (/srv): would be served: IO_Cache_Read = {{mode}}")
"""
DBUS = f"""#!{sys.executable}
import os
print("method return\\n   array [\\n" + "".join(
    f"      struct {{{{\\n         uint16 {{i}}\\n         string \\"/p\\"\\n      }}}}\\n"
    for i in os.environ.get("FAKE_EXPORTS", "").split()) + "   ]")
"""


def export(export_id, mode):
    return (f"EXPORT {{ Export_Id = {export_id}; Path = /srv; # a comment {{\n"
            f"  FSAL {{ Name = DCACHE; IO_Cache_Read = {mode}; FSAL {{ Name = VFS; }} }} }}\n")


class Env:
    """A stand-in cluster, a staging directory and the tool run on them."""

    def __init__(self, tmp):
        self.tmp = str(tmp)
        self.objects = os.path.join(self.tmp, "cluster")
        self.stage = os.path.join(self.tmp, "gen")
        os.makedirs(self.stage)
        for name, text in (("rados", RADOS), ("dcache-check", CHECK), ("dbus-send", DBUS)):
            with open(os.path.join(self.tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(os.path.join(self.tmp, name), 0o755)
        self.log = os.path.join(self.tmp, "ganesha.log")
        self.served = "0 2"

    def write(self, name, text):
        with open(os.path.join(self.stage, name), "w", encoding="utf-8") as f:
            f.write(text)

    def obj(self, name):
        path = os.path.join(self.objects, "nfs", "dcache", name)
        return open(path, encoding="utf-8").read() if os.path.exists(path) else None

    def notifies(self):
        path = os.path.join(self.objects, "notifies")
        return open(path, encoding="utf-8").read().split() if os.path.exists(path) else []

    def run(self, *args):
        """(exit status, stdout + stderr) of the tool."""
        env = dict(os.environ, FAKE_RADOS=self.objects, FAKE_EXPORTS=self.served,
                   DCACHE_CHECK=os.path.join(self.tmp, "dcache-check"))
        res = subprocess.run([sys.executable, TOOL, "--rados", os.path.join(self.tmp, "rados"), "--dir", self.stage,
                              *args], env=env, capture_output=True, text=True, check=False)
        return res.returncode, res.stdout + res.stderr

    def generation(self, g, mode, heads=("h1", "h2")):
        self.write(f"export-2.{g}", export(2, mode))
        self.write(f"conf-dcache.{g}", f'%url "rados://nfs/dcache/export-2.{g}"\n')
        for h in heads:
            self.write(f"head-{h}", f'%url "rados://nfs/dcache/conf-dcache.{g}"\n')
        return [f"export-2.{g}", f"conf-dcache.{g}"]


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    assert e.run("publish", *e.generation(1, "direct"), "head-h1", "head-h2")[0] == 0
    return e


def test_help_names_every_command():
    out = subprocess.run([sys.executable, TOOL, "--help"], capture_output=True, text=True, check=True).stdout
    for cmd in ("check", "publish", "point", "verify", "restore", "reload", "inline"):
        assert f"dcache-rados {cmd}" in out, f"--help does not show {cmd}"


def test_export_ids_and_the_settings_a_log_says():
    assert tool.export_ids(export(2, "x") + '# EXPORT { Export_Id = 9; }\nEXPORT { Path = "a{"; Export_Id = "7"; '
                           "CLIENT { Export_Id = 8; } }\n") == [2, 7]
    log = ("x :EVENT :DCACHE: export 2 (/srv) created over VFS: IO_Cache_Read = direct (running: io_uring)\n"
           "x :EVENT :DCACHE: export 12 (/b) updated: IO_Cache_Read = buffered (running: sync)\n"
           "x :EVENT :DCACHE: export 2 (/srv) updated: IO_Cache_Read = dontcache (running: io_uring)\n")
    assert tool.last_settings(log, 2) == "IO_Cache_Read = dontcache"
    assert tool.last_settings(log, 3) is None


def test_publish_records_the_bytes_and_never_writes_over_an_object(env):
    assert env.obj("export-2.1") == export(2, "direct")
    rc, out = env.run("publish", "export-2.1")
    assert rc == 1 and "export-2.1 exists; a new generation takes new names" in out, out


def test_inline_prefers_staged_objects_and_names_a_missing_one(env):
    env.generation(2, "dontcache")
    rc, out = env.run("inline", os.path.join(env.stage, "head-h1"))
    assert rc == 0 and "IO_Cache_Read = dontcache" in out and "%url" not in out, out
    os.unlink(os.path.join(env.stage, "conf-dcache.2"))
    rc, out = env.run("inline", os.path.join(env.stage, "head-h1"))
    assert rc == 1 and 'cannot read %url "rados://nfs/dcache/conf-dcache.2": no object conf-dcache.2' in out, out


def test_check_stops_at_a_refused_export_object(env):
    env.generation(3, "fast")
    conf = os.path.join(env.tmp, "h1.conf")
    with open(conf, "w", encoding="utf-8") as f:
        f.write('%url "rados://nfs/dcache/head-h1"\n')
    rc, out = env.run("check", conf)
    assert rc == 1 and 'IO_Cache_Write = "fast" is not valid' in out and "dcache-rados: export-2.3 refused" in out, out


def test_point_keeps_the_previous_head_object_and_notifies_the_head(env):
    env.run("publish", *env.generation(2, "dontcache"))
    rc, out = env.run("point", "h1")
    assert rc == 0, out
    assert env.obj("head-h1") == '%url "rados://nfs/dcache/conf-dcache.2"\n'
    assert open(os.path.join(env.stage, "head-h1.prev"), encoding="utf-8").read() == \
        '%url "rados://nfs/dcache/conf-dcache.1"\n'
    assert env.notifies() == ["head-h1"]
    assert env.obj("head-h2").endswith("conf-dcache.1\"\n"), "h2's object changed"


def test_restore_puts_back_the_published_bytes_only(env):
    broken = export(2, "direct").replace("FSAL {", "FSAL { SYNTAX", 1)
    os.makedirs(os.path.join(env.tmp, "other"))
    with open(os.path.join(env.objects, "nfs", "dcache", "export-2.1"), "w", encoding="utf-8") as f:
        f.write(broken)                                 # a plain `rados put` over a live object
    env.write("export-2.1", export(2, "buffered"))      # not what was published
    rc, out = env.run("restore", "export-2.1")
    assert rc == 1 and "is not what export-2.1 was published with" in out and env.obj("export-2.1") == broken, out
    env.write("export-2.1", export(2, "direct"))
    rc, out = env.run("restore", "export-2.1", "--reload", "h1", "h2")
    assert rc == 0 and "export-2.1: restored" in out and env.obj("export-2.1") == export(2, "direct"), out
    assert env.notifies() == ["head-h1", "head-h2"]
    rc, out = env.run("restore", "export-2.1")
    assert rc == 0 and "as published, nothing to restore" in out, out
    os.unlink(os.path.join(env.objects, "nfs", "dcache", "conf-dcache.1"))
    rc, out = env.run("restore", "conf-dcache.1")
    assert rc == 0 and "it was missing" in out and env.obj("conf-dcache.1"), out


def test_verify_finds_what_is_wrong_with_each_head(env):
    rc, out = env.run("verify")
    assert rc == 0 and "h1: conf-dcache.1 (export-2.1) checked" in out and "h2: conf-dcache.1" in out, out
    with open(os.path.join(env.objects, "nfs", "dcache", "export-2.1"), "w", encoding="utf-8") as f:
        f.write(export(2, "direct").replace("FSAL {", "FSAL { SYNTAX", 1))
    rc, out = env.run("verify", "h1")
    assert rc == 1 and "h1: export-2.1 is not what was published" in out, out
    assert "h1: export-2.1 refused by dcache-check (exit 1): (stdin):2: Config File ((stdin):2): Syntax error" \
        in out, out
    os.unlink(os.path.join(env.objects, "nfs", "dcache", "conf-dcache.1"))
    rc, out = env.run("verify", "h2")
    assert rc == 1 and "h2: cannot read %url \"rados://nfs/dcache/conf-dcache.1\"" in out, out
    rc, out = env.run("verify", "h3")
    assert rc == 1 and "h3: no object head-h3" in out, out


def test_verify_local_compares_what_the_head_serves(env):
    args = ("verify", "--local", "h1", "--log", env.log, "--dbus-send", os.path.join(env.tmp, "dbus-send"))
    with open(env.log, "w", encoding="utf-8") as f:
        f.write("x :EVENT :DCACHE: export 2 (/srv) created over VFS: IO_Cache_Read = direct (running: io_uring)\n")
    rc, out = env.run(*args)
    assert rc == 0 and "h1: conf-dcache.1 (export-2.1) checked; ganesha.nfsd here serves it" in out, out
    env.served = "0"
    rc, out = env.run(*args)
    assert rc == 1 and "h1: ganesha.nfsd serves no export 2 of its configuration (it serves 0)" in out, out
    env.served = "0 2"
    with open(env.log, "a", encoding="utf-8") as f:
        f.write("x :EVENT :DCACHE: export 2 (/srv) updated: IO_Cache_Read = buffered (running: io_uring)\n")
    rc, out = env.run(*args)
    assert rc == 1 and "h1: export 2 runs IO_Cache_Read = buffered, its object says IO_Cache_Read = direct" in out, out
