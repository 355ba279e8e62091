"""The process that owns a server's mount namespace (started by
server.Namespace inside `unshare --mount`, and in the server's network
namespace): it makes the namespace's mounts, says it is ready, and stays
until it is stopped. Every daemon and command of the server joins it with
nsenter, so all of them are children of the caller.

    python3 -m dcache_testbed.holder --ready FILE [--private-run]
        [--keep LOOPDEV]... [--state DIR] [--root ROOT] [--bind DIR]...
        [--mount-at DIR SOURCE]

The namespace starts as a copy of the host's mounts, among them the loop
filesystems of tests running beside this one: each would stay alive here as
long as the server runs, and its test could not detach its loop device. So
every loop mount but the kept ones and those the server stands on is
detached here, in this namespace only.
"""

import argparse
import os
import signal
import subprocess
import sys


def mount(*args):
    subprocess.run(["mount", *args], check=True)


def loop_mounts():
    """(source, target) of every mount of a loop device, from mountinfo."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            source = fields[sep + 2]
            if source.startswith("/dev/loop"):
                out.append((source, fields[4].replace("\\040", " ")))
    return out


def under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ready", required=True)
    p.add_argument("--private-run", action="store_true")
    p.add_argument("--keep", action="append", default=[])
    p.add_argument("--state", default="")
    p.add_argument("--root", default="")
    p.add_argument("--bind", action="append", default=[])
    p.add_argument("--mount-at", nargs=2, metavar=("DIR", "SOURCE"))
    a = p.parse_args()

    for source, target in loop_mounts():
        if source in a.keep or target == "/":
            continue
        # never what the server stands on: its state dir, its root
        if any(top and under(top, target) for top in (a.state, a.root)):
            continue
        subprocess.run(["umount", "-l", target], check=False, stderr=subprocess.DEVNULL)
    if a.private_run:
        mount("-t", "tmpfs", "-o", "size=16m,mode=755", "dcache-run", "/run")
    binds = [a.state] + a.bind if a.state else list(a.bind)
    if a.mount_at:
        # the filesystem at that path too, over a tmpfs on its parent
        at, source = a.mount_at
        mount("-t", "tmpfs", "-o", "size=1m,mode=755", "dcache-e2e-at", os.path.dirname(at))
        os.mkdir(at)
        mount("--bind", source, at)
        binds.append(at)
    if a.root:
        mount("--rbind", "/run", a.root + "/run")
        mount("-t", "proc", "proc", a.root + "/proc")
        mount("--rbind", "/dev", a.root + "/dev")
        for d in binds:
            os.makedirs(a.root + d, exist_ok=True)
            mount("--rbind", d, a.root + d)
    with open(a.ready, "w", encoding="ascii"):
        pass
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
