"""A command run chrooted in a release's Debian root (what ci/release.sh's
release_chroot does for the scripts), for the programs built per release
that run outside a server: dcache-check, say, which links that release's
libganesha_nfsd. Started by releases.Release.chroot_argv inside `unshare
--mount`, so every mount it makes ends with the command:

    python3 -m dcache_testbed.inroot --root ROOT [--bind DIR]... -- CMD...

It binds /dev, /proc and each DIR at its own path into the root (a
directory made for a bind stays, as release_chroot's do), detaches the
copies of other loop mounts in this namespace (as the server's holder does:
a copy would keep a test beside this one from detaching its loop device),
then chroots and runs CMD in the current directory (the root's / if the
root has no such directory), with a standard PATH.
"""

import argparse
import os
import subprocess

from .holder import loop_mounts, under

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--bind", action="append", default=[])
    p.add_argument("command", nargs="+")
    a = p.parse_args()
    root = a.root.rstrip("/")
    for _, target in loop_mounts():
        if target == "/" or any(under(d, target) or under(target, d) for d in a.bind + [root]):
            continue
        subprocess.run(["umount", "-l", target], check=False, stderr=subprocess.DEVNULL)
    for d in ["/dev", "/proc"] + a.bind:
        os.makedirs(root + d, exist_ok=True)
        subprocess.run(["mount", "--rbind", d, root + d], check=True)
    cwd = os.getcwd()
    os.chroot(root)
    os.chdir(cwd if os.path.isdir(cwd) else "/")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = PATH
    os.execvpe(a.command[0], a.command, env)


if __name__ == "__main__":
    main()
