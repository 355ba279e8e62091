"""The end-to-end tests' fixtures, over tools/dcache_testbed (the one
library that starts and stops servers):

  release       the Ganesha release that serves ($DCACHE_GANESHA, else the
                host's): a dcache_testbed.releases.Release
  build         the host's build tree: build.bin("dcache-bench") is a
                program of it ($DCACHE_BUILD, else build/)
  make_server   make_server(exports=[...], ...) starts a Server (the
                arguments are dcache_testbed.server.Server's); every one is
                stopped and removed when the test ends, its log's last
                lines printed when the test failed
  server        one server with the default exports (/vfs 1, /dcache 2)
  make_module_server
                make_server for the tests of one module, which look at the
                same servers: stopped after the module's last test, their
                logs' last lines printed when one of its tests failed

A run where every test was skipped exits 77, which ctest counts as skipped
(SKIP_RETURN_CODE), never as passed.

Options: --stress-rounds N, --stress-ops N (test_stress.py's round: 1 of
1500 operations a stream) and --long (the long runs: test_stress.py's 10
rounds of 20,000, test_prometheus.py's 100 export cycles).
"""

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

# pylint: disable=wrong-import-position
from dcache_testbed import releases  # noqa: E402
from dcache_testbed.server import Server  # noqa: E402
from dcache_testbed.skipped import pytest_sessionfinish  # noqa: E402,F401  pylint: disable=unused-import


class Build:
    """The host's build tree (the clients, the tools, the C++ tests)."""

    def __init__(self, path):
        self.path = path

    def bin(self, name):
        """The program called name anywhere in the build tree."""
        for d, _, files in os.walk(self.path):
            if name in files and os.access(os.path.join(d, name), os.X_OK):
                return os.path.join(d, name)
        pytest.fail(f"{name} is not built in {self.path} (ci/build.sh)")
        return None


def pytest_addoption(parser):
    parser.addoption("--stress-rounds", type=int, default=1, help="test_stress.py: rounds (default 1)")
    parser.addoption("--stress-ops", type=int, default=1500,
                     help="test_stress.py: operations a stream and round (default 1500)")
    parser.addoption("--long", action="store_true",
                     help="the long runs: test_stress.py 10 rounds of 20,000 operations a stream,"
                     " test_prometheus.py 100 export remove/add/update cycles")


@pytest.fixture(scope="session")
def release():
    return releases.select()


@pytest.fixture(scope="session")
def build():
    return Build(os.environ.get("DCACHE_BUILD") or os.path.join(releases.TOP, "build"))


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def make_server(request):
    servers = []

    def make(**kw):
        srv = Server(**kw)
        servers.append(srv)
        try:
            srv.start()
        except BaseException:
            report_log(srv)
            raise
        return srv

    yield make
    failed = any(getattr(request.node, "rep_" + w, None) is not None and getattr(request.node, "rep_" + w).failed
                 for w in ("setup", "call"))
    errors = []
    for srv in reversed(servers):
        status = srv.stop_ganesha() if srv.ganesha else None
        if failed or status not in (None, 0):
            report_log(srv)
        if status not in (None, 0):
            errors.append(f"ganesha.nfsd {srv.release.name} ended with status {status} when stopped")
        srv.stack.close()
    if errors:
        pytest.fail("; ".join(errors) + " (a crash in its shutdown)")


def report_log(srv):
    """The server's log: its last lines printed, the file kept in /tmp."""
    if srv.state and os.path.exists(srv.log_path):
        kept = os.path.join(os.environ.get("TMPDIR", "/tmp"), os.path.basename(srv.state) + ".ganesha.log")
        shutil.copy(srv.log_path, kept)
        print(f"\n{srv.log_tail()}\n(whole log: {kept})")


@pytest.fixture(scope="module")
def make_module_server(request):
    failed_before = request.session.testsfailed
    servers = []

    def make(**kw):
        srv = Server(**kw)
        servers.append(srv)
        try:
            srv.start()
        except BaseException:
            report_log(srv)
            raise
        return srv

    yield make
    errors = []
    # after the module's last test: printed around pytest's capture
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        for srv in reversed(servers):
            failed = request.session.testsfailed > failed_before
            if failed:
                report_log(srv)  # before the shutdown's lines
            status = srv.stop_ganesha() if srv.ganesha else None
            if status not in (None, 0) and not failed:
                report_log(srv)
            if status not in (None, 0):
                errors.append(f"ganesha.nfsd {srv.release.name} ended with status {status} when stopped")
            srv.stack.close()
    if errors:
        pytest.fail("; ".join(errors) + " (a crash in its shutdown)")


@pytest.fixture
def server(make_server):
    return make_server()
