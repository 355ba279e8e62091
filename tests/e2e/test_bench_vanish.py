"""dcache-bench's error paths under ASan+UBSan: the asan preset's build of
it (build-address/tools/dcache-bench, $DCACHE_ASAN_BENCH) runs against a
real ganesha.nfsd with the plugin while what it talks to goes away:

  - the server is killed (SIGKILL) mid-run,
  - the export is removed mid-run (DBus RemoveExport),
  - the export it mounts does not exist.

Each time two runs go at once, one over NFSv3 and one over NFSv4 (random
READs and WRITEs, verified, several in flight on two connections each).
Each must exit 1 within a bound, with an error that names what happened,
and the sanitizers must report nothing (ASAN_OPTIONS detect_leaks=1,
halt_on_error=1, handle_abort=1: a report, or an abort such as a failed
assertion in libnfs, ends the run with exit code 66 or a signal, and the
reports' text is looked for on stderr too).

Skipped, with the reason, when that build is not there; failed instead
where it must be (CI=true, or DCACHE_REQUIRE_ASAN_BENCH=1, which
ci/test.sh sets once it has built the asan preset)."""

import os
import re
import signal
import subprocess
import time

import pytest

from dcache_testbed import releases
from dcache_testbed.exports import dcache, vfs
from dcache_testbed.procs import Timeout, wait_for
from dcache_testbed.server import Server

SANITIZER_EXIT = 66
SANITIZER_ENV = {
    "ASAN_OPTIONS": f"detect_leaks=1:halt_on_error=1:handle_abort=1:exitcode={SANITIZER_EXIT}",
    "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:exitcode={SANITIZER_EXIT}",
}
SANITIZER_REPORT = re.compile(r"ERROR: AddressSanitizer|runtime error:|LeakSanitizer|UndefinedBehaviorSanitizer")
STALL_TIMEOUT = 5  # dcache-bench's stall_timeout: a server gone fails the run after this
EXPORTS = [vfs(1, "vfs"), dcache(2, "dcache"), dcache(3, "gone")]
GONE_ID = 3
# what a removed export's handles and (NFSv4) states are answered
REMOVED = re.compile(r"NFS[34]ERR_(STALE|BAD_STATEID|ADMIN_REVOKED)")


@pytest.fixture(scope="module")
def bench():
    """The ASan+UBSan dcache-bench (skip, or fail where it must be there)."""
    path = os.environ.get("DCACHE_ASAN_BENCH") or os.path.join(releases.TOP, "build-address", "tools", "dcache-bench")
    why = ""
    if not os.access(path, os.X_OK):
        why = f"no ASan build of dcache-bench at {path} (cmake --preset asan && cmake --build --preset asan)"
    else:
        with open(path, "rb") as f:
            if b"__asan_init" not in f.read():
                why = f"{path} is not built with AddressSanitizer (its build dir is not the asan preset's)"
    if why:
        if os.environ.get("CI") == "true" or os.environ.get("DCACHE_REQUIRE_ASAN_BENCH") == "1":
            pytest.fail(why + "; required here (CI=true or DCACHE_REQUIRE_ASAN_BENCH=1)")
        pytest.skip(why)
    return path


class Run:
    """One dcache-bench started in the server's namespaces, its stderr kept."""

    def __init__(self, srv, bench, tmp_path, name, export, version, go=None):
        self.name = f"{name} (NFSv{version})"
        self.err_path = tmp_path / f"{name}.v{version}.stderr"
        argv = [bench, f"url=nfs://127.0.0.1/{export}", f"nfs_version={version}", "rw=randrw", "bs=64k",
                "numjobs=2", "iodepth=4", "size=4M", "time_based=1", "runtime=120", "verify=1",
                f"stall_timeout={STALL_TIMEOUT}", f"filename=v{version}", "--no-progress",
                "--json", str(tmp_path / f"{name}.v{version}.json")]
        argv += ["--go-file", go] if go else []
        with open(self.err_path, "wb") as err:
            self.child = srv.popen(argv, env=SANITIZER_ENV, stdout=subprocess.DEVNULL, stderr=err)

    def stderr(self):
        return self.err_path.read_text(errors="replace")

    def wait_exit(self, bound, since):
        """Asserts it exits within bound seconds of since (time.monotonic),
        sanitizer-clean, with status 1; returns its last stderr line."""
        exited = self.child.wait_gone(max(0.0, since + bound - time.monotonic()))
        took = time.monotonic() - since
        if not exited:
            self.child.stop()
        err = self.stderr()
        reports = [line for line in err.splitlines() if SANITIZER_REPORT.search(line)]
        assert not reports, f"{self.name}: the sanitizers reported:\n{err[-6000:]}"
        assert exited, f"{self.name}: still running {bound} s later; stderr: {err[-2000:]}"
        status = self.child.proc.returncode
        assert status != SANITIZER_EXIT, f"{self.name}: exit {status}, a sanitizer's; stderr:\n{err[-6000:]}"
        assert status == 1, f"{self.name}: exit {status}, not 1; stderr: {err[-2000:]}"
        # its own last line (LeakSanitizer may list the suppressions used after it)
        lines = [line for line in err.splitlines() if line.startswith("dcache-bench: ")]
        last = lines[-1] if lines else ""
        print(f"{self.name}: exit 1 after {took:.1f} s: {last}")
        return last


def start_loaded(srv, bench, tmp_path, name, export, export_id):
    """A v3 and a v4 run on export, connected, laid out and running (export
    serving READs and WRITEs after they were told to go)."""
    gos = [os.path.join(srv.state, f"{name}.v{v}.go") for v in (3, 4)]
    runs = [Run(srv, bench, tmp_path, name, export, v, go) for v, go in zip((3, 4), gos)]
    for r, go in zip(runs, gos):
        try:
            wait_for(lambda go=go: os.path.exists(go + ".ready"), 60, f"{r.name} connected and laid out",
                     alive=r.child.alive)
        except Timeout as e:
            pytest.fail(f"{e}; stderr: {r.stderr()[-2000:]}")
    before = srv.counters(export_id)
    for go in gos:
        with open(go, "w", encoding="utf-8"):
            pass
    try:
        wait_for(lambda: (lambda now: now.reads > before.reads + 20 and now.writes > before.writes + 20)(
            srv.counters(export_id)), 30, f"export {export_id} serving the runs' READs and WRITEs", 0.1)
    except Timeout as e:
        pytest.fail(f"{e}; stderr: {[r.stderr()[-500:] for r in runs]}")
    for r in runs:
        assert r.child.alive(), f"{r.name} ended before the subject: {r.stderr()[-2000:]}"
    return runs


def test_server_killed(bench, tmp_path):
    """SIGKILL to ganesha.nfsd mid-run: over NFSv4 the connection is lost at
    once; over NFSv3 libnfs reconnects without end, and the run fails after
    stall_timeout. Either way the error says so, with the transport's own
    error."""
    srv = Server(exports=EXPORTS)
    try:
        srv.start()
        runs = start_loaded(srv, bench, tmp_path, "killed", "dcache", 2)
        print(f"SIGKILL to ganesha.nfsd (pid {srv.pid}) with both runs going")
        since = time.monotonic()
        srv.ganesha.signal(signal.SIGKILL)
        for r in runs:
            last = r.wait_exit(STALL_TIMEOUT + 25, since)
            assert re.search(rf"(connection lost|no reply from the server for {STALL_TIMEOUT} s; "
                             r"last error on a connection): \S", last), \
                f"{r.name}: the error does not name the lost connection: {last!r}"
    finally:
        status = srv.stop()
        print(f"ganesha.nfsd ended with status {status} (killed: not judged)")


@pytest.fixture(scope="module")
def srv(make_module_server):
    return make_module_server(exports=EXPORTS)


def test_export_removed(bench, srv, tmp_path):
    """RemoveExport of the export mid-run: its handles go stale (and over
    NFSv4 its open states with them), each run fails at once, naming the
    server's answer."""
    runs = start_loaded(srv, bench, tmp_path, "removed", "gone", GONE_ID)
    since = time.monotonic()
    res = srv.run(["dbus-send", "--system", "--print-reply", "--dest=org.ganesha.nfsd",
                   "/org/ganesha/nfsd/ExportMgr", "org.ganesha.nfsd.exportmgr.RemoveExport",
                   f"uint16:{GONE_ID}"], check=False, timeout=30)
    assert res.returncode == 0, f"RemoveExport {GONE_ID} failed: {res.stderr.strip()}"
    for r in runs:
        last = r.wait_exit(30, since)
        assert re.search(REMOVED, last), f"{r.name}: the error does not name the server's answer: {last!r}"
    assert srv.ganesha.alive(), "ganesha.nfsd died after RemoveExport"


def test_export_missing(bench, srv, tmp_path):
    """A mount of an export the server does not have: each run fails at
    once, naming the mount."""
    runs = [Run(srv, bench, tmp_path, "missing", "nothere", v) for v in (3, 4)]
    since = time.monotonic()
    for r in runs:
        last = r.wait_exit(30, since)
        assert re.search(r"mount 127\.0\.0\.1:/nothere: \S", last), \
            f"{r.name}: the error does not name the mount: {last!r}"
