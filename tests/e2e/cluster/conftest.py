"""What the cluster tests share (tests/e2e/conftest.py's fixtures too):

  need_cluster      skips where the kernel lacks what the heads need
                    (network and mount namespaces, XFS); fails naming
                    ci/setup.sh where a program is missing
  make_heads        make_heads(count, **Heads arguments) starts heads
                    (dcache_testbed.heads) for the whole module (start=False:
                    their filesystem and network only); on a
                    failure each head's log (its last lines without DEBUG,
                    the whole file kept in /tmp) and the clients' errors
                    are printed; stopped at the module's end
  dcache_check      dcache_check(head) is the argv of the heads' release's
                    dcache-check in that head's namespaces
"""

import os
import shutil
import subprocess

import pytest

from dcache_testbed.heads import Heads
from support import TOOLS, Cluster, need, report


@pytest.fixture(scope="session")
def need_cluster():
    if os.geteuid() != 0:
        pytest.fail("the cluster tests need root (loop devices, mounts, namespaces)")
    need(*TOOLS)
    if subprocess.run(["unshare", "--net", "--mount", "true"], check=False,
                      stderr=subprocess.DEVNULL).returncode != 0:
        pytest.skip("no network or mount namespaces in this kernel")
    with open("/proc/filesystems", encoding="ascii") as f:
        if "xfs" not in f.read().split() and subprocess.run(["modprobe", "xfs"], check=False).returncode:
            pytest.skip("no XFS in this kernel")


@pytest.fixture(scope="module")
def make_heads(request, need_cluster):  # pylint: disable=unused-argument,redefined-outer-name
    made = []

    def make(count=3, start=True, **kw):
        heads = Heads(count, **kw)
        cluster = Cluster(heads)
        made.append(cluster)
        try:
            if start:
                heads.start()
            else:
                heads.prepare()
        except BaseException:
            report(heads, [])
            heads.stop()
            raise
        return cluster

    yield make
    failed = request.session.testsfailed > 0
    for cluster in reversed(made):
        if failed:
            report(cluster.heads, cluster.clients)
        cluster.heads.stop()


@pytest.fixture(scope="module")
def dcache_check(release, build):
    """dcache-check of the heads' release: dcache_check(srv) is the argv
    (FILE or - after it) that runs it in head srv's namespaces; the host's
    from the build tree, another release's copied into the head's state
    dir (which its root sees at the same path) and run chrooted there."""
    if not release.root:
        host = build.bin("dcache-check")
        return lambda srv: [host]
    if not os.access(release.dcache_check, os.X_OK):
        pytest.fail(f"no {release.dcache_check} (ci/build.sh --ganesha {release.name})")

    def argv(srv):
        copy = os.path.join(srv.state, f"dcache-check.{release.name}")
        if not os.path.exists(copy):
            shutil.copy(release.dcache_check, copy)
        return ["chroot", release.root, copy]
    return argv
