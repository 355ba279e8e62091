"""The Ganesha releases DCACHE is built for, from ci/releases.tsv (the one
table, also read by ci/release.sh and cmake/FindGanesha.cmake)."""

import os
import sys
from dataclasses import dataclass

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(TOP, "ci", "releases.tsv")
# where nfs-ganesha-vfs puts its modules, on the host and in every root
FSAL_DIR = "/usr/lib/x86_64-linux-gnu/ganesha"


@dataclass(frozen=True)
class Release:
    """One row of the table, with what follows from it."""

    name: str
    debian_version: str
    fsal_api: int
    ntirpc: int
    suite: str
    install_suite: str
    root_name: str
    package_suffix: str
    config_h: tuple
    core_param: tuple
    exports_tmpfs: bool
    e2e: str
    top: str = TOP

    @property
    def root(self):
        """The Debian root it runs in ("" for the host's release)."""
        return os.path.join(self.top, ".cache", self.root_name, "root") if self.root_name else ""

    @property
    def build_dir(self):
        return os.path.join(self.top, "build" + ("-" + self.name if self.root_name else ""))

    @property
    def plugin(self):
        """The module this checkout builds for the release."""
        return os.path.join(self.build_dir, "fsal_dcache", "adapter", "libfsaldcache.so")

    @property
    def dcache_check(self):
        return os.path.join(self.build_dir, "fsal_dcache", "adapter", "dcache-check")

    @property
    def setup_command(self):
        return "ci/setup.sh" + (" --ganesha " + self.name if self.root_name else "")

    @property
    def tmpfs_refused(self):
        """Why the release's VFS refuses to export a tmpfs ("" if it does not)."""
        if self.exports_tmpfs:
            return ""
        return f"Ganesha {self.name} does not export tmpfs (FSAL/localfs.c skips tmpfs mounts)"

    def in_root(self, path):
        """path as the host sees the file the release's server reads at path."""
        return self.root + path if self.root else path

    def chroot_argv(self, argv, binds=()):
        """argv as a command that runs it chrooted in the release's root,
        in a mount namespace of its own with /dev, /proc and binds (host
        directories, at their own paths) bound in (dcache_testbed.inroot);
        argv itself for the host's release. A program of the release's
        build (build-X/) needs TOP among the binds, a file it reads its
        directory."""
        if not self.root:
            return list(argv)
        tools = os.path.join(self.top, "tools")
        return (["env", f"PYTHONPATH={tools}", "unshare", "--mount", "--propagation", "private", "--",
                 sys.executable, "-m", "dcache_testbed.inroot", "--root", self.root]
                + [arg for d in binds for arg in ("--bind", d)] + ["--", *argv])


def _field(value):
    return "" if value == "-" else value


def read_table(path=TABLE, top=TOP):
    """Every release of the table, in its order."""
    releases = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#") or line.startswith("release\t"):
                continue
            cols = [_field(c) for c in line.split("\t")]
            if len(cols) != 12:
                raise ValueError(f"{path}: {len(cols)} columns, not 12: {line!r}")
            releases.append(Release(
                name=cols[0], debian_version=cols[1], fsal_api=int(cols[2]), ntirpc=int(cols[3]),
                suite=cols[4], install_suite=cols[5], root_name=cols[6], package_suffix=cols[7],
                config_h=tuple(cols[8].split()),
                core_param=tuple(p.strip() + ";" for p in cols[9].split("|") if p.strip()),
                exports_tmpfs=cols[10] == "yes", e2e=cols[11], top=top))
    return releases


def host_release(releases=None):
    """The release that runs on the host, in no root."""
    return next(r for r in (releases or read_table()) if not r.root_name)


def select(name=None, releases=None):
    """The release called name; by default $DCACHE_GANESHA, else the host's."""
    releases = releases or read_table()
    name = name or os.environ.get("DCACHE_GANESHA") or host_release(releases).name
    for r in releases:
        if r.name == name:
            return r
    raise LookupError(f"Ganesha {name!r}: DCACHE builds for {', '.join(r.name for r in releases)}")
