"""A new Debian root of a suite, as a freshly installed machine has it:
`debootstrap --variant=minbase` from the archive this machine's apt uses,
with netbase (/etc/services, /etc/protocols: every installed Debian system
has it, priority important, and rpcbind cannot start without it), and
nothing installed since (the release roots under .cache/ have had setup's
packages; this one has had none). debootstrap runs once per suite; its
result is kept as a tarball, .cache/fresh-roots/SUITE.minbase-netbase.tar.zst,
which every use unpacks anew (seconds, where debootstrap takes half a
minute to minutes; delete the tarball for a newer one).

    root = FreshRoot.unpack("trixie", directory, extra_suites=["trixie-backports"])
    Namespace(stack, state, net, release=root)   # root.root is the directory

What a booted machine has and a chroot lacks is made as the machine would
have it: /etc/mtab (a link to /proc/self/mounts), this machine's apt
settings for stale Release dates (a snapshot archive), and a policy-rc.d
that keeps package scripts from starting services (no init runs there:
the caller starts what the machine's would).
"""

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from . import releases

CACHE = os.path.join(releases.TOP, ".cache", "fresh-roots")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def archive_uri(codename, sources="", sources_list=""):
    """The URI of the archive the deb entry for codename names: in a deb822
    debian.sources text (Types: deb, Suites: ... codename ...), else in a
    one-line sources.list text; "" when neither has one."""
    for stanza in re.split(r"\n\s*\n", sources):
        fields = dict(re.findall(r"^([\w-]+):[ \t]*(.*)$", stanza, re.M))
        if "deb" in fields.get("Types", "").split() and codename in fields.get("Suites", "").split():
            return fields.get("URIs", "").split()[0].rstrip("/") if fields.get("URIs") else ""
    for line in sources_list.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == codename:
            return words[1].rstrip("/")
    return ""


def host_archive():
    """The archive this machine's apt uses (its own suite's deb entry)."""
    def read(path):
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""
    codename = re.search(r"^VERSION_CODENAME=(\S+)", read("/etc/os-release"), re.M)
    uri = archive_uri(codename.group(1) if codename else "", read("/etc/apt/sources.list.d/debian.sources"),
                      read("/etc/apt/sources.list"))
    if not uri:
        raise RuntimeError("no deb entry for this machine's suite in its apt sources to take the archive from")
    return uri


def tarball(suite, log=None):
    """The suite's minbase root as a tarball, made when missing."""
    path = os.path.join(CACHE, f"{suite}.minbase-netbase.tar.zst")
    if os.path.exists(path):
        return path
    os.makedirs(CACHE, exist_ok=True)
    work = os.path.join(CACHE, f"{suite}.new")
    shutil.rmtree(work, ignore_errors=True)
    archive = host_archive()
    with open(log or os.devnull, "w", encoding="utf-8") as out:
        # its own mounts (/proc, /sys in the root) stay in a private namespace
        res = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "debootstrap",
                              "--variant=minbase", "--include=netbase", suite, work, archive], stdout=out,
                             stderr=subprocess.STDOUT, check=False)
    if res.returncode:
        shutil.rmtree(work, ignore_errors=True)
        raise RuntimeError(f"debootstrap {suite} from {archive} failed (exit {res.returncode}; log: {log})")
    subprocess.run(["tar", "-C", work, "--zstd", "-cf", path + ".new", "."], check=True)
    os.rename(path + ".new", path)
    shutil.rmtree(work, ignore_errors=True)
    return path


@dataclass
class FreshRoot:
    """A fresh root unpacked at root (a Namespace's release: it has .root)."""

    root: str
    suite: str

    @classmethod
    def unpack(cls, suite, directory, extra_suites=(), log=None):
        """The suite's fresh root at directory/root; apt's sources name the
        suite and extra_suites (trixie-backports: the machine enabled it)."""
        source = tarball(suite, log)
        root = os.path.join(directory, "root")
        os.makedirs(root)
        subprocess.run(["tar", "-C", root, "--zstd", "-xf", source], check=True)
        sources = os.path.join(root, "etc", "apt", "sources.list")
        with open(sources, encoding="utf-8") as f:
            archive = f.read().split()[1]
        with open(sources, "a", encoding="utf-8") as f:
            f.writelines(f"deb {archive} {s} main\n" for s in extra_suites)
        stale = [line for line in subprocess.run(["apt-config", "dump"], capture_output=True, text=True,
                                                 check=True).stdout.splitlines()
                 if re.match(r"Acquire::Check-(Valid-Until|Date) ", line)]
        with open(os.path.join(root, "etc", "apt", "apt.conf.d", "99this-machine"), "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in stale))
        policy = os.path.join(root, "usr", "sbin", "policy-rc.d")
        with open(policy, "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\n# no init runs here: package scripts start no service\nexit 101\n")
        os.chmod(policy, 0o755)
        if not os.path.lexists(os.path.join(root, "etc", "mtab")):
            os.symlink("../proc/self/mounts", os.path.join(root, "etc", "mtab"))
        return cls(root, suite)

    def argv(self, argv, user=None, cwd="/"):
        """argv chrooted in the root, in a clean environment (as a login
        would give it), as user (uid:gid) when given, in cwd."""
        chroot = ["chroot"] + ([f"--userspec={user}"] if user else []) + [self.root]
        home = "/root" if not user else "/"
        return chroot + ["/usr/bin/env", "-i", f"PATH={PATH}", f"HOME={home}", "LANG=C.UTF-8",
                         "DEBIAN_FRONTEND=noninteractive", "/bin/sh", "-c", 'cd "$1" && shift && exec "$@"',
                         "sh", cwd, *argv]
