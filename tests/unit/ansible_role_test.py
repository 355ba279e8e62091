"""Unit tests of the Python in deploy/ansible/roles/dcache: the module that
edits a DCACHE block (library/dcache_settings.py), the module that checks a
head's whole file against what it serves (library/dcache_head.py) and the
filters that read the plugin's log lines (filter_plugins/dcache.py); and
that the role's tables agree with the repository's (the man page, the
core's restart-only settings) and its ansible.cfg refuses duplicate keys.

  python3 -m unittest ansible_role_test      (from tests/unit; ctest -L unit)
"""
import contextlib
import importlib.util
import io
import json
import os
import re
import stat
import sys
import tempfile
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROLE = os.path.join(TOP, "deploy", "ansible", "roles", "dcache")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


settings = load("dcache_settings", os.path.join(ROLE, "library", "dcache_settings.py"))
head = load("dcache_head", os.path.join(ROLE, "library", "dcache_head.py"))
filters = load("dcache_filters", os.path.join(ROLE, "filter_plugins", "dcache.py"))

CONF = """\
# heads' configuration; Export_Id = 2 in a comment
NFS_CORE_PARAM { Enable_FSAL_Stats = true; }   # trailing comment
EXPORT {
  Export_Id = 2; Path = "/srv/a#b"; Pseudo = /a;
  FSAL {
    Name = DCACHE;   # the stack
    IO_Cache_Read = direct;
    io_cache_write = "direct";
    FSAL { Name = VFS; }
  }
}
EXPORT
{
\tExport_Id = "3"; Path = /srv/c; Pseudo = /c;
\tFSAL { name = "dcache"; IO_Cache_Read = buffered; FSAL { Name = VFS; } }
}
EXPORT { Export_Id = 4; Path = /srv/d; Pseudo = /d; FSAL { Name = VFS; } }
"""


def edit(text, export_id, **values):
    return settings.edit(text, [{"export_id": export_id, "settings": values}])


class EditTest(unittest.TestCase):
    def test_replaces_values_and_keeps_every_other_byte(self):
        new, changed = edit(CONF, 2, IO_Cache_Read="dontcache", IO_Cache_Write="dontcache")
        want = CONF.replace("IO_Cache_Read = direct;", "IO_Cache_Read = dontcache;") \
                   .replace('io_cache_write = "direct";', "io_cache_write = dontcache;")
        self.assertEqual(new, want)
        self.assertEqual(changed, {2: ["IO_Cache_Read", "IO_Cache_Write"]})

    def test_adds_a_missing_setting_after_name_with_its_indent(self):
        new, _ = edit(CONF, 2, IO_Workers_Max=4)
        self.assertIn("    Name = DCACHE;\n    IO_Workers_Max = 4;   # the stack\n", new)

    def test_one_line_block_and_quoted_id(self):
        new, changed = edit(CONF, 3, IO_Cache_Read="direct", Boundary_Tracking=False)
        self.assertIn('FSAL { name = "dcache"; Boundary_Tracking = false; IO_Cache_Read = direct; '
                      'FSAL { Name = VFS; } }', new)
        self.assertEqual(changed, {3: ["IO_Cache_Read", "Boundary_Tracking"]})
        self.assertEqual(new.replace(" Boundary_Tracking = false;", "")
                         .replace("IO_Cache_Read = direct; FSAL", "IO_Cache_Read = buffered; FSAL"), CONF)

    def test_same_values_change_nothing(self):
        new, changed = edit(CONF, 2, IO_Cache_Read="direct")
        self.assertEqual((new, changed), (CONF, {2: []}))
        once, _ = edit(CONF, 2, IO_Cache_Write="fast", IO_Workers_Max=2)
        twice, changed = edit(once, 2, IO_Cache_Write="fast", IO_Workers_Max=2)
        self.assertEqual((twice, changed), (once, {2: []}))

    def test_several_exports_at_once(self):
        new, changed = settings.edit(CONF, [
            {"export_id": 3, "settings": {"IO_Cache_Read": "dontcache"}},
            {"export_id": 2, "settings": {"IO_Cache_Read": "fadvise"}}])
        self.assertIn("IO_Cache_Read = fadvise;", new)
        self.assertIn("IO_Cache_Read = dontcache; FSAL", new)
        self.assertEqual(changed, {3: ["IO_Cache_Read"], 2: ["IO_Cache_Read"]})

    def test_a_signed_value_is_written_for_dcache_check_to_judge(self):
        new, changed = edit(CONF, 2, Direct_Misaligned_Num_Pages=-1, IO_Queue_Depth="+64")
        self.assertIn("    Direct_Misaligned_Num_Pages = -1;\n    IO_Queue_Depth = +64;   # the stack\n", new)
        self.assertEqual(changed, {2: ["Direct_Misaligned_Num_Pages", "IO_Queue_Depth"]})

    def test_empty_value_gets_one(self):
        new, _ = edit("EXPORT { Export_Id = 1; FSAL { Name = DCACHE; IO_Cache_Read = ; } }",
                      1, IO_Cache_Read="direct")
        self.assertEqual(new, "EXPORT { Export_Id = 1; FSAL { Name = DCACHE; IO_Cache_Read = direct; } }")

    def test_refusals(self):
        cases = [
            (CONF, 4, "has 0 FSAL { Name = DCACHE; } blocks"),
            (CONF, 9, "0 EXPORT blocks with Export_Id = 9"),
            (CONF + CONF, 2, "2 EXPORT blocks with Export_Id = 2"),
            ("%include /etc/ganesha/exports.conf\n", 2, "only this file is edited"),
            (CONF.replace("IO_Cache_Read = direct;", "IO_Cache_Read = direct; IO_CACHE_READ = x;"), 2,
             "IO_Cache_Read is set 2 times"),
            ("EXPORT { Export_Id = 2; ", 2, "not closed"),
            ("EXPORT { } }", 2, "unbalanced"),
        ]
        for text, export_id, why in cases:
            with self.subTest(why=why), self.assertRaisesRegex(settings.EditError, re.escape(why)):
                edit(text, export_id, IO_Cache_Read="direct")
        for value in ("two words", "x;y", '"q"', ""):
            with self.subTest(value=value), self.assertRaisesRegex(settings.EditError, "one word"):
                edit(CONF, 2, IO_Cache_Read=value)

    def test_check_exports(self):
        cases = [([{"export_id": "x", "settings": {"a": 1}}], "not a number"),
                 ([{"export_id": 1, "settings": {}}], "non-empty"),
                 ([{"export_id": 1}], "export_id: N"),
                 ([{"export_id": 1, "settings": {"a": 1, "A": 2}}], "given twice"),
                 ([{"export_id": 1, "settings": {"a": 1}}] * 2, "export 1 is given twice")]
        for exports, why in cases:
            with self.subTest(why=why), self.assertRaisesRegex(settings.EditError, why):
                settings.check_exports([dict(e) for e in exports])


class CoreTest(unittest.TestCase):
    """NFS_CORE_PARAM settings (the metrics' Enable_Metrics on Ganesha 9.14)."""
    METRICS = {"Enable_Metrics": True, "Monitoring_Port": 9587}

    def test_one_line_block_gets_them_after_its_last_setting(self):
        new, changed = settings.edit(CONF, [], self.METRICS)
        added = "Enable_FSAL_Stats = true; Enable_Metrics = true; Monitoring_Port = 9587; }"
        self.assertEqual(new, CONF.replace("Enable_FSAL_Stats = true; }", added))
        self.assertEqual(changed, {"core": ["Enable_Metrics", "Monitoring_Port"]})
        self.assertEqual(settings.edit(new, [], self.METRICS), (new, {"core": []}), "twice: no change")

    def test_values_replaced_and_added_with_the_blocks_indent(self):
        text = "nfs_core_param {\n\tProtocols = 3, 4;\n\tEnable_Metrics = false;\n}\n" + CONF.split("\n", 2)[2]
        new, changed = settings.edit(text, [{"export_id": 2, "settings": {"IO_Cache_Read": "dontcache"}}],
                                     dict(self.METRICS, Monitoring_Addr="10.0.0.7"))
        self.assertTrue(new.startswith("nfs_core_param {\n\tProtocols = 3, 4;\n\tEnable_Metrics = true;"
                                       "\n\tMonitoring_Port = 9587;\n\tMonitoring_Addr = 10.0.0.7;\n}\n"), new)
        self.assertIn("IO_Cache_Read = dontcache;", new)
        self.assertEqual(changed, {"core": ["Enable_Metrics", "Monitoring_Port", "Monitoring_Addr"],
                                   2: ["IO_Cache_Read"]})

    def test_a_file_without_the_block_gets_one_at_its_end(self):
        text = CONF.split("\n", 2)[2]
        new, _ = settings.edit(text, [], self.METRICS)
        self.assertEqual(new, text + "NFS_CORE_PARAM {\n  Enable_Metrics = true;\n  Monitoring_Port = 9587;\n}\n")

    def test_refusals(self):
        for text, why in [("%include /etc/ganesha/core.conf\n", "%include"),
                          (CONF + "NFS_CORE_PARAM { Protocols = 4; }\n", "2 NFS_CORE_PARAM blocks"),
                          ("NFS_CORE_PARAM { }\n", "empty")]:
            with self.subTest(why=why), self.assertRaisesRegex(settings.EditError, re.escape(why)):
                settings.edit(text, [], self.METRICS)


class ModuleTest(unittest.TestCase):
    """main() as Ansible runs it: arguments in, JSON out, SystemExit."""

    def run_module(self, **args):
        from ansible.module_utils import basic
        check = args.pop("_check", False)
        args.update(_ansible_check_mode=check, _ansible_diff=True, _ansible_tmpdir=self.dir)
        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()
        out = io.StringIO()
        with contextlib.redirect_stdout(out), self.assertRaises(SystemExit):
            settings.main()
        return json.loads(out.getvalue())

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.conf = os.path.join(self.dir, "ganesha.conf")
        with open(self.conf, "wb") as f:
            f.write(CONF.encode() + b"# not UTF-8: \xff\n")
        os.chmod(self.conf, 0o640)
        self.before = self.read()

    def read(self, path=None):
        with open(path or self.conf, "rb") as f:
            return f.read()

    def tearDown(self):
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        os.rmdir(self.dir)

    def exports(self, value):
        return [{"export_id": 2, "settings": {"IO_Cache_Write": value}}]

    def test_validated_write_with_backup(self):
        res = self.run_module(path=self.conf, exports=self.exports("dontcache"),
                              validate="grep -qi 'IO_Cache_Write = dontcache' %s", backup=True)
        self.assertTrue(res.get("changed"), res)
        after = self.read()
        self.assertEqual(after, self.before.replace(b'io_cache_write = "direct"', b"io_cache_write = dontcache"))
        self.assertEqual(self.read(res["backup_file"]), self.before)
        self.assertEqual(stat.S_IMODE(os.stat(self.conf).st_mode), 0o640)
        self.assertEqual(res["changed_settings"], {"2": ["IO_Cache_Write"]})
        again = self.run_module(path=self.conf, exports=self.exports("dontcache"), validate="false %s")
        self.assertFalse(again["changed"], again)

    def test_refused_by_the_validator_writes_nothing(self):
        res = self.run_module(path=self.conf, exports=self.exports("fast"),
                              validate="sh -c 'echo \"$1: refused\" >&2; exit 1' sh %s", backup=True)
        self.assertTrue(res["failed"])
        self.assertTrue(res["validation_failed"])
        self.assertIn("not changed: the candidate failed validation", res["msg"])
        self.assertRegex(res["msg"], r"/\.ganesha\.conf\.\w+\.dcache: refused")
        self.assertEqual(self.read(), self.before)
        self.assertEqual(os.listdir(self.dir), ["ganesha.conf"])   # no backup, no candidate left

    def test_check_mode_writes_nothing(self):
        res = self.run_module(path=self.conf, exports=self.exports("dontcache"), _check=True)
        self.assertTrue(res["changed"])
        self.assertIn("io_cache_write = dontcache", res["diff"]["after"])
        self.assertEqual(self.read(), self.before)

    def test_core_only(self):
        res = self.run_module(path=self.conf, core={"Enable_Metrics": True}, validate="grep -q Enable_Metrics %s")
        self.assertTrue(res["changed"], res)
        self.assertEqual(res["changed_settings"], {"core": ["Enable_Metrics"]})
        self.assertIn(b"Enable_FSAL_Stats = true; Enable_Metrics = true; }", self.read())

    def test_bad_request_fails(self):
        res = self.run_module(path=self.conf, exports=[{"export_id": 4, "settings": {"IO_Cache_Read": 0}}])
        self.assertTrue(res["failed"])
        self.assertIn("EXPORT 4 has 0 FSAL { Name = DCACHE; } blocks", res["msg"])


LOG = (
    "04/12/2026 10:00:00 : epoch 1 : h : ganesha.nfsd-7[main] log_settings :FSAL :EVENT :DCACHE: "
    "export 2 (/srv/a (x)) created over VFS: IO_Cache_Read = direct, IO_Cache_Write = direct, "
    "Boundary_Tracking = true, IO_Workers_Max = 0 (running: io_uring)\n"
    "04/12/2026 10:00:00 : epoch 1 : h : ganesha.nfsd-7[main] log_settings :FSAL :EVENT :DCACHE: "
    "export 12 (/srv/b) created over VFS: IO_Cache_Read = buffered, IO_Cache_Write = buffered, "
    "Boundary_Tracking = true, IO_Workers_Max = 0 (running: io_uring)\n"
    "04/12/2026 10:01:00 : epoch 1 : h : ganesha.nfsd-7[dbus] parse :CONFIG :CRIT :DCACHE: "
    'export 2 (/srv/a (x)): IO_Cache_Write = "fast" is not valid; allowed: ...; '
    "update refused, the export keeps its current settings\n"
)
UPDATED = ("05/12/2026 : ganesha.nfsd-7[dbus] log_settings :FSAL :EVENT :DCACHE: export 2 (/srv/a (x)) updated: "
           "IO_Cache_Read = dontcache, IO_Cache_Write = direct_file_sync, Boundary_Tracking = false, "
           "IO_Workers_Max = 4 (running: io_uring)\n")


class FilterTest(unittest.TestCase):
    def test_events(self):
        events = filters.dcache_events(LOG, 2)
        self.assertEqual([e["event"] for e in events], ["created", "refused"])
        self.assertEqual(events[0]["settings"]["IO_Cache_Read"], "direct")
        self.assertTrue(events[1]["line"].startswith('DCACHE: export 2 (/srv/a (x)): IO_Cache_Write = "fast"'))
        self.assertEqual(filters.dcache_last_event(LOG, 2, ("created", "updated"))["event"], "created")
        self.assertEqual(filters.dcache_last_event(LOG, 12)["settings"]["IO_Cache_Read"], "buffered")
        self.assertEqual(filters.dcache_last_event(LOG, 1)["event"], "none")

    def test_differs_normalises_as_the_plugin_prints(self):
        running = filters.dcache_last_event(UPDATED, 2)["settings"]
        self.assertEqual(filters.dcache_differs(running, {"io_cache_read": "DontCache", "IO_Cache_Write": 4,
                                                          "Boundary_Tracking": "no", "IO_Workers_Max": 4}), [])
        self.assertEqual(filters.dcache_differs(running, {"IO_Cache_Read": 2, "Boundary_Tracking": True}),
                         ["IO_Cache_Read = dontcache (asked: 2)", "Boundary_Tracking = false (asked: True)"])
        self.assertEqual(filters.dcache_differs({}, {"IO_Cache_Read": "direct"}),
                         ["IO_Cache_Read = ? (asked: direct)"])

    def test_to_reload(self):
        exports = [{"export_id": 2, "settings": {"IO_Cache_Read": "direct"}},
                   {"export_id": "12", "settings": {"IO_Cache_Read": "direct"}},
                   {"export_id": 5, "settings": {"IO_Cache_Read": "direct"}}]
        # 2 runs it already; 12 runs buffered (file never reloaded); 5: nothing in the log
        self.assertEqual(filters.dcache_to_reload(exports, {"2": [], "12": [], "5": []}, LOG), [12, 5])
        self.assertEqual(filters.dcache_to_reload(exports[:1], {"2": ["IO_Cache_Read"]}, LOG), [2])

    def test_reload_problems(self):
        exports = [{"export_id": 2, "settings": {"IO_Cache_Read": "dontcache", "IO_Cache_Write": 4}}]
        self.assertTrue(filters.dcache_reload_answered(UPDATED, [2]))
        self.assertEqual(filters.dcache_reload_problems(UPDATED, exports, [2]), [])
        self.assertEqual(filters.dcache_running(UPDATED, [2]), [UPDATED[UPDATED.index("DCACHE:"):].strip()])
        wrong = [{"export_id": 2, "settings": {"IO_Cache_Read": "direct"}}]
        self.assertRegex(filters.dcache_reload_problems(UPDATED, wrong, [2])[0],
                         r"^export 2 runs IO_Cache_Read = dontcache \(asked: direct\) after the reload: DCACHE:")
        refused = LOG.splitlines()[2]
        self.assertEqual(filters.dcache_reload_problems(refused, exports, [2]),
                         [f"export 2 refused the update: {refused[refused.index('DCACHE:'):]}"])
        crit = "x :FSAL :CRIT :Can not change fsid_type without restart.\n"
        self.assertFalse(filters.dcache_reload_answered(crit, [2]))
        self.assertEqual(filters.dcache_reload_problems(crit, exports, [2], [
            {"item": 2, "rc": 1, "stderr": "Error org.freedesktop.DBus.Error.InvalidArgs:\n no export"}]),
            ["export 2: no 'DCACHE: export 2 (...) updated' line in the log after the reload; DBus UpdateExport: "
             "Error org.freedesktop.DBus.Error.InvalidArgs: no export; the log says: "
             "Can not change fsid_type without restart."])

    def test_names(self):
        self.assertEqual(filters.dcache_unknown({"IO_Cache_Wrte": 1, "io_cache_read": 2}), ["IO_Cache_Wrte"])
        self.assertEqual(filters.dcache_restart_only({"io_backend": "sync", "IO_Cache_Read": 0}), ["io_backend"])
        self.assertEqual(filters.dcache_needs_restart({"2": ["IO_Cache_Read", "io_queue_depth"], "3": []}),
                         ["export 2: IO_Queue_Depth"])

    def test_rolled_heads_are_those_before_this_one_that_were_rolled(self):
        hostvars = {"h1": {"dcache_rolled": True}, "h2": {"dcache_rolled": False}, "h3": {"dcache_rolled": True},
                    "h4": {}}
        self.assertEqual(filters.dcache_rolled_heads(hostvars, ["h1", "h2", "h3", "h4"], "h3"), ["h1"])
        self.assertEqual(filters.dcache_rolled_heads(hostvars, ["h1", "h2", "h3", "h4"], ""), ["h1", "h3"])


SHOW = """method return time=1 sender=:1.0 -> destination=:1.2 serial=3 reply_serial=2
   struct {
      uint64 1
      uint64 2
   }
   array [
      struct {
         uint16 2
         string "/srv/a"
         struct {
            struct {
               string "NFSv3"
            }
         }
      }
      struct {
         uint16 0
         string "/"
      }
   ]
"""
CLIENTS = SHOW.replace('uint16 2\n         string "/srv/a"', 'string "192.0.2.50"').replace(
    'uint16 0\n         string "/"', 'string "::ffff:127.0.0.1"')
WOULD = ("/etc/ganesha/ganesha.conf:7: DCACHE: export 2 (/srv/a (x)): would be served: IO_Cache_Read = direct, "
         "IO_Cache_Write = direct, IO_Queue_Depth = 64\n"
         "/etc/ganesha/ganesha.conf:15: DCACHE: export 12 (/srv/b): would be served: IO_Cache_Read = buffered\n"
         "dcache-check: 2 DCACHE exports, 0 refused\n")
RUNNING = ("x :EVENT :DCACHE: export 2 (/srv/a (x)) created over VFS: IO_Cache_Read = direct, IO_Cache_Write = direct, "
           "IO_Queue_Depth = 64 (running: io_uring)\n"
           "x :EVENT :DCACHE: export 12 (/srv/b) created over VFS: IO_Cache_Read = buffered (running: io_uring)\n")


class HeadTest(unittest.TestCase):
    """library/dcache_head.py: what a head's whole file and its state say."""

    def problems(self, log=RUNNING, served=(0, 2, 12), stats=None, rc=0, out=WOULD, err="", pending=()):
        stats = {"2": {}, "12": {}} if stats is None else stats
        return head.problems(rc, out, err, set(served), stats, log, pending)

    def test_replies_and_lines(self):
        self.assertEqual(head.show_exports_ids(SHOW), {0, 2})
        self.assertEqual(head.show_clients(CLIENTS), ["192.0.2.50", "::ffff:127.0.0.1"])
        self.assertEqual(head.in_grace("method return\n   boolean true\n   boolean true\n"), True)
        self.assertEqual(head.in_grace("Error org.freedesktop.DBus.Error.ServiceUnknown"), None)
        self.assertEqual(head.would_serve(WOULD)[2], ("/srv/a (x)", "IO_Cache_Read = direct, IO_Cache_Write = direct, "
                                                                    "IO_Queue_Depth = 64"))
        events = head.last_events(RUNNING + LOG.splitlines()[2] + "\n")
        self.assertEqual(events[12], ("IO_Cache_Read = buffered", None))
        self.assertEqual(events[2][0], "IO_Cache_Read = direct, IO_Cache_Write = direct, IO_Queue_Depth = 64")
        self.assertTrue(events[2][1].startswith('DCACHE: export 2 (/srv/a (x)): IO_Cache_Write = "fast" is not valid'))

    def test_a_head_that_runs_its_file_has_no_problem(self):
        self.assertEqual(self.problems(), [])

    def test_the_file_dcache_check_refuses(self):
        err = ('/etc/ganesha/ganesha.conf:7: DCACHE: export 2 (/srv/a): IO_Queue_Depth = 0 is not valid; allowed: 1 to '
               "4096; export refused\n")
        self.assertEqual(self.problems(rc=1, out="", err=err),
                         ["dcache-check refuses the file (exit 1): " + err.strip()])

    def test_an_export_not_served_with_the_cause_from_the_log(self):
        refused = ('x :CONFIG :CRIT :DCACHE: export 12 (/srv/b): IO_Queue_Depth = 0 is not valid; allowed: 1 to 4096; '
                   "export refused\n")
        found = self.problems(log=RUNNING + refused, served=(0, 2))
        self.assertEqual(found, ["export 12 (/srv/b) is not served (ganesha.nfsd serves 0, 2); the head's last line "
                                 "about it: " + refused[refused.index("DCACHE"):].strip()])
        found = self.problems(stats={"2": {}})
        self.assertEqual(found, ["dcache-stats lists no DCACHE counters for export 12 (/srv/b): the head does not "
                                 "serve it through DCACHE"])
        self.assertEqual(self.problems(stats="FSAL stat counting disabled"),
                         ["dcache-stats fails: FSAL stat counting disabled"])

    def test_a_file_changed_and_not_reloaded(self):
        edited = WOULD.replace("IO_Queue_Depth = 64", "IO_Queue_Depth = 128")
        found = self.problems(out=edited)
        self.assertEqual(len(found), 1)
        self.assertRegex(found[0], r"^export 2 \(/srv/a \(x\)\) runs .*IO_Queue_Depth = 64; the file gives it "
                                   r".*IO_Queue_Depth = 128: the file was changed and not reloaded")
        self.assertEqual(self.problems(out=edited, pending=(2,)), [], "an export about to be rolled differs")

    def test_a_refused_update_after_which_the_export_runs_its_file(self):
        refused = "x :CONFIG :CRIT :DCACHE: export 2 (/srv/a (x)): FSAL VFS refused the update; update refused\n"
        self.assertEqual(self.problems(log=RUNNING + refused), [], "an old refusal counts though the head runs it")
        found = self.problems(log=RUNNING + refused, out=WOULD.replace("= 64", "= 128"))
        why = refused[refused.index("DCACHE"):].strip()
        self.assertTrue(found and found[0].endswith("the head's last line about it: " + why), found)


class TablesTest(unittest.TestCase):
    def test_restart_only_settings_are_the_cores(self):
        # the core's export_update: what a live update does not bring into
        # force, named in the line it logs about them
        with open(os.path.join(TOP, "fsal_dcache", "core", "export_state.cpp"), encoding="utf-8") as f:
            text = f.read()
        message = re.search(r'"dcache %s: ([^"]*) take effect at the next restart', text)
        self.assertIsNotNone(message, "export_state.cpp no longer says which settings take effect at a restart")
        self.assertEqual(tuple(re.findall(r"(\w+) = %", message.group(1))), filters.RESTART_ONLY)

    def test_settings_names_in_the_roles_messages(self):
        import yaml  # pylint: disable=import-outside-toplevel
        with open(os.path.join(ROLE, "vars", "main.yml"), encoding="utf-8") as f:
            self.assertEqual(tuple(yaml.safe_load(f)["dcache_settings_names"]), filters.SETTINGS)

    def test_ansible_cfg_makes_a_duplicate_key_an_error(self):
        import configparser  # pylint: disable=import-outside-toplevel
        cfg = configparser.ConfigParser()
        cfg.read(os.path.join(TOP, "deploy", "ansible", "ansible.cfg"))
        self.assertEqual(cfg.get("defaults", "duplicate_dict_key"), "error")

    def test_settings_are_the_man_pages(self):
        with open(os.path.join(TOP, "docs", "man", "ganesha-dcache-config.8.md")) as f:
            documented = re.findall(r"^\*\*(\w+)\*\* \(default", f.read(), re.M)
        self.assertEqual(tuple(documented), filters.SETTINGS)


if __name__ == "__main__":
    sys.exit(unittest.main())
