"""The Debian package as an operator gets it: README's build step
(ci/package.sh, conftest.py) builds nfs-ganesha-dcache, lintian clean; dpkg
installs it; a ganesha.nfsd with no Plugins_Dir (Ganesha's default
directory, where the package puts the module beside VFS's) serves the
installed example exports (%include "/etc/ganesha/dcache.conf", unchanged:
the test's XFS is mounted at their /srv/nfs inside the server's
namespaces) to a real client; the installed dcache-stats reads their
counters; the installed dcache-check serves the example exports the server
serves; the man pages resolve; the examples carry deploy/ (the Ansible
role, the CTDB callout, all it holds) and config/, and every deploy/ or
config/ path the shipped documents cite is among them. The package is
purged afterwards unless it was installed before the test.

DCACHE_GANESHA=X (6.5 or 9.14): the same inside that release's Debian root
(ci/setup.sh --ganesha X): ci/package.sh --ganesha X builds the package
there, dpkg installs it into the root (and purges it from there), the
root's man, dcache-check and dcache-stats answer, and the chrooted
ganesha.nfsd serves the root's /etc/ganesha/dcache.conf.
"""

import gzip
import os
import re
import shutil
import subprocess

import pytest

from dcache_testbed import nfs, releases, stats

PKG = "nfs-ganesha-dcache"
DOC = f"/usr/share/doc/{PKG}"
EXAMPLES = f"{DOC}/examples"
SIZE = 3 * 1024 * 1024 + 123
# a path the documents cite that an operator takes from the examples
CITED = re.compile(r"(?<![\w./-])(?:deploy|config)/[\w./-]*")


def in_root(release, argv, **kw):
    """argv where the package is installed (the release's root, or here)."""
    return subprocess.run(release.chroot_argv(argv), capture_output=True, text=True, check=False, **kw)


def query(release, *args):
    admindir = release.in_root("/var/lib/dpkg")
    return subprocess.run(["dpkg-query", f"--admindir={admindir}", *args], capture_output=True, text=True,
                          check=False).stdout


def is_installed(release):
    return "install ok installed" in query(release, "-W", "-f=${Status}", PKG)


@pytest.fixture(scope="module")
def package(release, deb):
    """The package README's build step made (conftest.py), installed, and
    purged at the end; its .deb."""
    was_installed = is_installed(release)
    # in a root, the .deb is put where dpkg there finds it
    staged = release.in_root(f"/tmp/{os.path.basename(deb)}")
    if release.root:
        shutil.copy(deb, staged)
    try:
        res = in_root(release, ["dpkg", "-i", f"/tmp/{os.path.basename(deb)}" if release.root else deb])
        assert res.returncode == 0, f"dpkg -i {os.path.basename(deb)}{' in ' + release.root if release.root else ''}" \
                                    f" failed:\n{res.stdout}{res.stderr}"
        yield deb
    finally:
        if release.root:
            os.unlink(staged)
        if not was_installed and is_installed(release):
            res = in_root(release, ["dpkg", "--purge", PKG])
            assert res.returncode == 0, f"dpkg --purge {PKG} failed: {res.stdout}{res.stderr}"


def test_depends_on_the_exact_nfs_ganesha(release, package):  # pylint: disable=unused-argument
    ganesha = query(release, "-W", "-f=${Version}", "nfs-ganesha")
    depends = query(release, "-W", "-f=${Depends}", PKG)
    assert depends.startswith(f"nfs-ganesha (= {ganesha}), nfs-ganesha-vfs (= {ganesha}), "), f"Depends: {depends}"


@pytest.mark.parametrize("path", [f"{releases.FSAL_DIR}/libfsaldcache.so", "/usr/bin/dcache-check",
                                  "/usr/bin/dcache-stats", "/etc/ganesha/dcache.conf"])
def test_installed(release, package, path):  # pylint: disable=unused-argument
    assert os.path.exists(release.in_root(path)), f"{release.in_root(path)} missing"


def test_the_example_exports_are_a_conffile(release, package):  # pylint: disable=unused-argument
    conffiles = query(release, "-W", "-f=${Conffiles}", PKG)
    assert " /etc/ganesha/dcache.conf " in conffiles, f"/etc/ganesha/dcache.conf is not a conffile: {conffiles}"


@pytest.mark.parametrize("page", ["ganesha-dcache-config", "dcache-check", "dcache-stats"])
def test_man_page(release, package, page):  # pylint: disable=unused-argument
    res = in_root(release, ["man", "-w", page])
    assert res.returncode == 0 and res.stdout.startswith("/usr/share/man/man8/"), \
        f"man -w {page}: {res.stdout}{res.stderr}"


def test_dcache_check_serves_the_example_exports(release, package):  # pylint: disable=unused-argument
    res = in_root(release, ["/usr/bin/dcache-check", "-v", "/etc/ganesha/dcache.conf"])
    served = re.findall(r": DCACHE: export 10[12] \(/srv/nfs/.*\): would be served: ", res.stdout + res.stderr)
    assert res.returncode == 0 and len(served) == 2, \
        f"/usr/bin/dcache-check -v /etc/ganesha/dcache.conf (exit {res.returncode}):\n{res.stdout}{res.stderr}"


def contents(deb):
    """path -> mode string of every entry of the .deb (dpkg -c)."""
    out = subprocess.run(["dpkg", "-c", deb], capture_output=True, text=True, check=True).stdout
    entries = {}
    for line in out.splitlines():
        fields = line.split(None, 5)
        entries[fields[5].split(" -> ")[0].lstrip(".").rstrip("/")] = fields[0]
    return entries


def test_the_examples_carry_deploy_and_config(package):
    entries = contents(package)
    tracked = subprocess.run(["git", "-C", releases.TOP, "ls-files", "deploy", "config"], capture_output=True,
                             text=True, check=True).stdout.split()
    missing = [p for p in tracked if f"{EXAMPLES}/{p}" not in entries]
    assert tracked and not missing, f"{len(missing)} of deploy/ and config/'s {len(tracked)} files are not in" \
                                    f" {EXAMPLES}/: {missing[:10]}"
    callout = f"{EXAMPLES}/deploy/ctdb/ganesha-dcache-callout"
    assert entries[callout].startswith("-rwx"), f"{callout} is not executable: {entries[callout]}"


def test_the_documents_cite_only_examples_it_has(package, tmp_path):
    entries = contents(package)
    docs = [p for p in entries if p.startswith(DOC + "/") and not p.startswith(EXAMPLES)
            and re.search(r"\.md(\.gz)?$", p)]
    assert docs, f"no documents in {DOC}"
    unpacked = str(tmp_path / "x")
    subprocess.run(["dpkg-deb", "-x", package, unpacked], check=True)
    missing = []
    for doc in docs:
        with open(unpacked + doc, "rb") as f:
            data = f.read()
        text = (gzip.decompress(data) if doc.endswith(".gz") else data).decode()
        cited = {p.rstrip("./") for p in CITED.findall(text)}
        missing += [f"{os.path.basename(doc)} cites {p}" for p in sorted(cited) if f"{EXAMPLES}/{p}" not in entries]
    assert not missing, f"the documents point at what the package lacks: {missing}"


def test_the_installed_module_serves_the_example_exports(release, package, make_server, tmp_path):
    # pylint: disable=unused-argument
    conf = release.in_root("/etc/ganesha/dcache.conf")
    with open(conf, encoding="utf-8") as f:
        paths = re.findall(r"^\s*Path = (/srv/nfs/\S+);", f.read(), re.M)
    assert len(paths) == 2, f"the example exports no longer live under /srv/nfs/: {paths}"
    srv = make_server(exports=[], conf_extra='%include "/etc/ganesha/dcache.conf"\n', stock=True,
                      mount_at="/srv/nfs", dirs=paths, log_level="INFO")
    source = srv.run(["findmnt", "-n", "-o", "SOURCE", "/srv/nfs"], quiet=True).stdout.strip()
    assert source == srv.loopdev, f"/srv/nfs is not the test's filesystem in the namespace: {source}"
    module = os.path.realpath(release.in_root(f"{releases.FSAL_DIR}/libfsaldcache.so"))
    with open(f"/proc/{srv.pid}/maps", encoding="utf-8") as f:
        assert f" {module}\n" in f.read(), f"ganesha.nfsd did not load the installed {module}"

    data = os.urandom(SIZE)
    local = tmp_path / "data"
    local.write_bytes(data)
    for name in ("stream", "direct"):
        os.chmod(os.path.join(srv.mnt, name), 0o1777)  # the examples squash root: the client writes as nobody
        assert nfs.put(srv, str(local), f"{name}/data"), f"/{name}: NFSv3 WRITE of {SIZE} bytes failed"
        for version in (3, 4):
            assert nfs.get(srv, f"{name}/data", version) == data, \
                f"/{name}: NFSv{version} READ does not return the bytes written"
        with open(os.path.join(srv.mnt, name, "data"), "rb") as f:
            assert f.read() == data, f"/{name}: the backing file does not hold the bytes written"

    # the installed dcache-stats, in the root (the bus's socket is in the state dir)
    res = subprocess.run(release.chroot_argv(["env", f"DBUS_SYSTEM_BUS_ADDRESS={srv.bus}", "/usr/bin/dcache-stats",
                                              "--json"], binds=[srv.state]),
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"{release.in_root('/usr/bin/dcache-stats')} --json failed: {res.stderr}"
    counters = stats.parse(res.stdout)
    for export_id in (101, 102):
        got = counters.get(export_id, stats.Counters({})).write_bytes
        assert got == SIZE, f"export {export_id} write_bytes = {got}, want {SIZE}"
    assert counters[102].writes_raised_stable, "export 102 (direct_file_sync) raised no WRITE to stable"
    assert re.search(r"DCACHE: export 102 .*direct_file_sync", srv.log()), "no DCACHE line for export 102 in the log"
