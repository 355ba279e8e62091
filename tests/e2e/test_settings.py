"""Every kind of malformed DCACHE setting refuses its export, at creation
and on SIGHUP, with one log line naming the export, the setting, the value
as written and what is allowed, while a good DCACHE export and a VFS export
keep serving throughout. dcache-check, given the very configuration the
server read, says the same lines for every export the server refused, and
the same settings for every export it serves.

CASES is the test: each row is one export whose FSAL block (or, for the
misplaced kinds, EXPORT block or nested VFS block; for sub and nosub, the
nested block itself) holds one mistake, and the patterns the refusal line
of ganesha.log must match. At creation each row is an export of its own
(ids 100 on); on SIGHUP export 2 (/dcache) gets each row in turn.

dcache-check is built per Ganesha release, like the module, and links that
release's parser: another release's runs in its Debian root.
"""

import os
import re
import subprocess

import pytest

from dcache_testbed import nfs
from dcache_testbed.exports import Export, dcache, default_exports, vfs
from dcache_testbed.releases import TOP

# where | what is written there | patterns the refusal names
CASES = [
    ("fsal", "IO_Cache_Read = -1;", [r'IO_Cache_Read = "-1" is not valid', r"buffered, dontcache"]),
    ("fsal", "IO_Cache_Write = -4;", [r'IO_Cache_Write = "-4" is not valid', r"direct_file_sync"]),
    ("fsal", "IO_Queue_Depth = -4096;", [r'IO_Queue_Depth = "-4096" is not valid', r"1 to 4096"]),
    ("fsal", "Direct_Misaligned_Num_Pages = -1;", [r'Direct_Misaligned_Num_Pages = "-1" is not valid', r"0 to 1024"]),
    ("fsal", "Boundary_Max_Age_Ms = -5;", [r'Boundary_Max_Age_Ms = "-5" is not valid']),
    ("fsal", "Boundary_Tracking = -1;", [r'Boundary_Tracking = "-1" is not valid', r"true, false"]),
    ("fsal", "IO_Cache_Read = ~1;", [r'IO_Cache_Read = "~1" is not valid']),
    ("fsal", 'IO_Cache_Read = "-1";', [r'IO_Cache_Read = "-1" is not valid']),
    ("fsal", "IO_Queue_Depth = 1e3;", [r'IO_Queue_Depth = "1e3" .*has no value', r"1 to 4096"]),
    ("fsal", "IO_Queue_Depth = 2k;", [r'IO_Queue_Depth = "2k" .*has no value']),
    ("fsal", "Boundary_Max_Pages = 10M;", [r'Boundary_Max_Pages = "10M" .*has no value']),
    ("fsal", "Boundary_Max_Age_Ms = 5s;", [r'Boundary_Max_Age_Ms = "5s" .*has no value']),
    ("fsal", "IO_Queue_Depth = 64k;", [r'IO_Queue_Depth = "64k" .*has no value']),
    ("fsal", "IO_Cache_Read = ;", [r"IO_Cache_Read = \(nothing\) .*has no value"]),
    ("fsal", "IO_Cache_Read = direct IO_Cache_Write = direct;",
     [r'IO_Cache_Read = "direct IO_Cache_Write = direct" .*has no value']),
    ("fsal", "IO_Cache_Write { }", [r"IO_Cache_Write \{ \.\.\. \} .*is a block"]),
    ("fsal", "IO_Cache_Read = fast; IO_Cache_Read = direct;",
     [r'IO_Cache_Read is set more than once \("fast" at .*, then "direct" at']),
    ("fsal", "IO_Cache_Read = direct, buffered;", [r"IO_Cache_Read .*is given 2 values"]),
    ("fsal", "Direct_Misaligned_Num_Pages = 000002;", [r'Direct_Misaligned_Num_Pages = "000002" is not valid']),
    ("fsal", "Boundary_Max_Pages = 0000000001;", [r'Boundary_Max_Pages = "0000000001" is not valid']),
    ("fsal", "IO_Queue_Depth = 0x40;", [r'IO_Queue_Depth = "0x40" is not valid']),
    ("fsal", "IO_Queue_Depth = 4097;", [r'IO_Queue_Depth = "4097" is not valid']),
    ("fsal", "IO_Workers_Max = 4097;", [r'IO_Workers_Max = "4097" is not valid', r"0 to 4096"]),
    ("fsal", "Boundary_Tracking = maybe;", [r'Boundary_Tracking = "maybe" is not valid']),
    # a newline inside the quotes, logged escaped
    ("fsal", 'IO_Cache_Read = "dir\nect";', [r'IO_Cache_Read = "dir\\nect" is not valid']),
    ("fsal", 'IO_Cache_Read = " direct ";', [r'IO_Cache_Read = " direct " is not valid']),
    ("export", "IO_Cache_Read = direct;",
     [r"IO_Cache_Read .* is in the EXPORT block; DCACHE settings belong in the export.s FSAL \{ Name = DCACHE"]),
    ("nested", "IO_Cache_Write = direct;", [r"IO_Cache_Write .* is in the nested FSAL block"]),
    ("fsal", "IO_Cache_Wrte = direct;",
     [r"unknown setting in the FSAL block", r"allowed settings: Name, IO_Cache_Read"]),
    ("sub", "MEM", [r'DCACHE stacks only on FSAL VFS \(got "MEM" at']),
    ("sub", "", [r"the nested FSAL block .* names no FSAL to stack on"]),
    ("nosub", "", [r"missing the nested FSAL \{ Name = VFS; \} block"]),
]
CASE_IDS = [f"{where}:{what}" if what else where for where, what, _ in CASES]
FIRST_ID = 100
REFUSED = "export refused"
UPDATE_REFUSED = "update refused, the export keeps its current settings"
# A DCACHE setting in the EXPORT block: Ganesha refuses that block itself
# and removes the export at the end of the reload, and the line says so.
UPDATE_DROPPED = ("update refused, and Ganesha refuses this EXPORT block itself (a parameter it does not know "
                  "there): the export is removed at the end of this reload")
VERDICT_2 = r"DCACHE: export 2 \("


# where a row's text goes: the Export field it is ("nosub": no nested block)
WHERE = {"fsal": "fsal_text", "export": "export_text", "nested": "sub_text", "sub": "sub_fsal"}


def malformed(export_id, where, what, path=None, pseudo=""):
    """The export with the row's mistake where the row says."""
    kw = {WHERE[where]: what} if where in WHERE else {"sub_fsal": None}
    return Export(export_id, path or f"s{export_id}", pseudo, **kw)


def served_spellings(release):
    """Exports that are served: settings in odd spellings, each the server
    and dcache-check must read to the same values."""
    # Ganesha 6.5's parser keeps the quotes of a single-quoted value
    # (config_parsing/analyse.c:115-119: sanitize_token_str steps past the
    # opening quote in its own copy of the pointer, then looks for the
    # closing one a byte too far), so 6.5 refuses '1' for every setting,
    # its own as DCACHE's; 4.3 and 9.14 strip them.
    squoted = '"1"' if release.name == "6.5" else "'1'"
    return [
        Export(200, "s200", fsal_text='IO_Cache_Read = DIRECT; IO_Cache_Write = 4; Boundary_Tracking = "off";'
               " IO_Queue_Depth = 64;"),
        Export(201, "s201", fsal_text=f"io_cache_read = {squoted}; Direct_Misaligned_Memory = Buffered;"
               " IO_Workers_Max = 4096; IO_Blocking_Max = 0;"),
    ]


# ------------------------------------------------------------- helpers --
def matching(log, patterns):
    """The log's DCACHE export lines that match every pattern."""
    return [line for line in log.splitlines()
            if "DCACHE: export" in line and all(re.search(p, line) for p in patterns)]


def export_lines(log, export_id):
    """Every DCACHE line of the export (what a failure message shows)."""
    return [line[line.rindex("DCACHE: export "):] for line in log.splitlines()
            if f"DCACHE: export {export_id} (" in line]


def server_refusals(log, export_id, suffix):
    """The server's refusal lines of the export, from "DCACHE: export" on."""
    return [line[line.rindex("DCACHE: export "):] for line in log.splitlines()
            if f"DCACHE: export {export_id} (" in line and f"; {suffix}" in line]


def check_refusals(err, export_id, suffix):
    """dcache-check's refusal lines of the export (it checks as at creation:
    "export refused"), without FILE:LINE, ending as the server's do."""
    rx = re.compile(rf"^.*:[0-9]*: (DCACHE: export {export_id} \(.*); {REFUSED}$")
    return [m.group(1) + "; " + suffix for m in map(rx.match, err.splitlines()) if m]


def server_settings(log, export_id, what):
    rx = re.compile(rf"^.*DCACHE: export {export_id} \((.*)\) {what}: (.*) \(running: .*\)$")
    return [f"{m.group(1)}: {m.group(2)}" for m in map(rx.match, log.splitlines()) if m]


def check_settings(out, export_id):
    rx = re.compile(rf"^.*:[0-9]*: DCACHE: export {export_id} \((.*)\): would be served: (.*)$")
    return [f"{m.group(1)}: {m.group(2)}" for m in map(rx.match, out.splitlines()) if m]


def serves(srv, tmp_path, name):
    """A round trip over NFSv3 and a listing over NFSv4."""
    local = tmp_path / "data"
    local.write_bytes(os.urandom(70001))
    return nfs.put(srv, str(local), f"{name}/probe{os.urandom(4).hex()}") and nfs.ls(srv, name + "/", 4) is not None


# ------------------------------------------------------------ fixtures --
@pytest.fixture(scope="module")
def check(release, build):
    """Runs dcache-check -v on a configuration of srv: (status, stdout, stderr)."""
    path = release.dcache_check if release.root else os.environ.get("DCACHE_CHECK") or build.bin("dcache-check")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no dcache-check at {path} (ci/build.sh{' --ganesha ' + release.name if release.root else ''})")

    def run(srv, conf):
        argv = release.chroot_argv([path, "-v", conf], binds=[TOP, srv.state])
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        return res.returncode, res.stdout, res.stderr
    return run


@pytest.fixture(scope="module")
def srv(make_module_server, release):
    if release.name == "6.5":
        print("note: Ganesha 6.5 keeps the quotes of '1' (its parser's bug): that spelling is double-quoted here")
    exports = default_exports() + [malformed(FIRST_ID + i, where, what) for i, (where, what, _) in enumerate(CASES)]
    return make_module_server(exports=exports + served_spellings(release))


@pytest.fixture(scope="module")
def created(srv, check):
    """dcache-check's verdict on the configuration the server started with
    (the file itself: the lines name it), before a reload rewrites it."""
    return check(srv, srv.conf_path)


# ---------------------------------------------------------- at creation --
@pytest.mark.parametrize("index", range(len(CASES)), ids=CASE_IDS)
def test_refused_at_creation(srv, index):
    where, what, patterns = CASES[index]
    export_id = FIRST_ID + index
    log = srv.log()
    found = matching(log, [rf"export {export_id} \(", *patterns, REFUSED])
    assert found, f"export {export_id} ({where}: {what!r}): no refusal line matching {patterns}; " \
        f"its lines: {export_lines(log, export_id)}"
    assert nfs.ls(srv, f"s{export_id}/", 3) is None, f"export {export_id} ({what!r}) can be mounted"
    assert not re.search(rf"DCACHE: export {export_id} .*created", log), f"export {export_id} ({what!r}) was created"


def test_every_refusal_is_one_line(srv):
    split = [line for line in srv.log().splitlines()
             if re.search(r"DCACHE: export 1[0-9][0-9] ", line) and REFUSED not in line]
    assert not split, f"a DCACHE line of a malformed export is not the one-line refusal: {split[:2]}"


def test_the_good_exports_and_odd_spellings_serve(srv, tmp_path):
    for e in default_exports() + served_spellings(srv.release):
        assert serves(srv, tmp_path, e.name), f"/{e.name} ({e.fsal_text or e.fsal}) does not serve"


def test_check_says_what_the_server_did_at_creation(srv, created):
    status, out, err = created
    assert status == 1, f"dcache-check exited {status}, not 1: {err.splitlines()[:3]}"
    log = srv.log()
    for i in range(len(CASES)):
        server, mine = server_refusals(log, FIRST_ID + i, REFUSED), check_refusals(err, FIRST_ID + i, REFUSED)
        assert server and server == mine, \
            f"export {FIRST_ID + i}: the server logged {server or 'nothing'}, dcache-check says {mine or 'nothing'}"
    for export_id in [2] + [e.export_id for e in served_spellings(srv.release)]:
        server, mine = server_settings(log, export_id, "created over VFS"), check_settings(out, export_id)
        assert server and server == mine, \
            f"export {export_id}: the server runs {server or 'nothing'}, dcache-check says {mine or 'nothing'}"
    refused = {int(m.group(1)) for m in re.finditer(r": DCACHE: export ([0-9]+) ", err)}
    assert refused == {FIRST_ID + i for i in range(len(CASES))}, \
        f"dcache-check refuses exports {sorted(refused)}, the server {FIRST_ID}..{FIRST_ID + len(CASES) - 1}"


# ------------------------------------------------------------ on SIGHUP --
# Each reload's configuration is /vfs and export 2 (/dcache) as a row makes
# it. Ganesha itself drops an export at a reload when it cannot read the
# export's EXPORT block (the "export" row), so every row starts from GOOD.
GOOD = dcache(2, "dcache", IO_Cache_Write="direct_file_sync")


def reload(srv, export2, conf_extra=None):
    """SIGHUP with export 2 as given; the log since, once it has export 2's
    verdict and the reload is complete (exports it removes are gone)."""
    mark = srv.log_mark()
    srv.reload(VERDICT_2, [vfs(1, "vfs"), export2], conf_extra)
    srv.wait_log("Reread exports complete", mark)
    return srv.log_since(mark)


@pytest.mark.usefixtures("created")
def test_sighup_updates_export_2(srv, check):
    reload(srv, dcache(2, "dcache"))
    log = reload(srv, GOOD)
    assert re.search(r"DCACHE: export 2 .* updated: .*IO_Cache_Write = direct_file_sync", log), \
        "SIGHUP: export 2 not updated to direct_file_sync"
    status, out, err = check(srv, srv.conf_path)
    assert status == 0, f"dcache-check exited {status}, not 0: {err.splitlines()[:3]}"
    server, mine = server_settings(log, 2, "updated"), check_settings(out, 2)
    assert server and server == mine, \
        f"export 2: the server runs {server or 'nothing'}, dcache-check says {mine or 'nothing'}"


def refused_on_sighup(srv, check, patterns, what, export2=GOOD, conf_extra=None, suffix=UPDATE_REFUSED):
    reload(srv, GOOD)
    log = reload(srv, export2, conf_extra)
    found = matching(log, [r"export 2 \(", *patterns, re.escape(suffix)])
    assert found, f"SIGHUP ({what}): no refusal matching {patterns}; export 2's lines: {export_lines(log, 2)}"
    status, _, err = check(srv, srv.conf_path)
    assert status == 1, f"dcache-check exited {status}, not 1: {err.splitlines()[:3]}"
    server, mine = server_refusals(log, 2, suffix), check_refusals(err, 2, suffix)
    assert server and server == mine, \
        f"export 2: the server logged {server or 'nothing'}, dcache-check says {mine or 'nothing'}"
    # what the line says becomes of the export is what became of it
    kept = suffix == UPDATE_REFUSED
    assert (nfs.ls(srv, "dcache/", 4) is not None) == kept, \
        f"SIGHUP ({what}): the line says the export is {'kept' if kept else 'removed'}, and it is not"


@pytest.mark.usefixtures("created")
@pytest.mark.parametrize("index", range(len(CASES)), ids=CASE_IDS)
def test_refused_on_sighup(srv, check, index):
    where, what, patterns = CASES[index]
    refused_on_sighup(srv, check, patterns, f"{where}: {what!r}", malformed(2, where, what, "dcache", "/dcache"),
                      suffix=UPDATE_DROPPED if where == "export" else UPDATE_REFUSED)


@pytest.mark.usefixtures("created")
def test_export_defaults_refused_on_sighup(srv, check):
    # EXPORT_DEFAULTS applies to every export: it refuses the DCACHE one
    refused_on_sighup(srv, check, [r"IO_Cache_Read .* is in the EXPORT_DEFAULTS block"], "EXPORT_DEFAULTS",
                      conf_extra="EXPORT_DEFAULTS { IO_Cache_Read = direct; }")


@pytest.mark.usefixtures("created")
def test_a_refused_update_keeps_the_settings(srv, tmp_path):
    reload(srv, GOOD)
    where, what, _ = CASES[0]
    reload(srv, malformed(2, where, what, "dcache", "/dcache"))
    # export 2 kept direct_file_sync through the refusal: its WRITEs still
    # come back FILE_SYNC (raised), counted by the plugin
    before = srv.counters(2).writes_raised_stable
    assert serves(srv, tmp_path, "dcache"), "/dcache stopped serving"
    after = srv.counters(2).writes_raised_stable
    assert after > before, f"export 2 lost its settings ({before} -> {after} WRITEs raised)"
    assert serves(srv, tmp_path, "vfs"), "/vfs stopped serving"
    assert srv.ganesha.alive(), "the server is gone"
