"""Clients, in a server's network: libnfs's nfs-cp, nfs-cat and nfs-ls."""

import os
import subprocess


def url(path, version=3, server="127.0.0.1"):
    """nfs://server/path?version=N (path: the pseudo path and below)."""
    return f"nfs://{server}/{path.lstrip('/')}?version={version}"


def put(srv, local, path, version=3, timeout=60):
    """Copies the local file to path over NFS; True when it worked."""
    return srv.run(["nfs-cp", local, url(path, version)], check=False, quiet=True,
                   timeout=timeout).returncode == 0


def get(srv, path, version=3, timeout=60):
    """The bytes of path read over NFS, or None when the read failed."""
    res = subprocess.run(srv.ns.argv(["nfs-cat", url(path, version)]), capture_output=True, timeout=timeout,
                         check=False)
    return res.stdout if res.returncode == 0 else None


def ls(srv, path, version=3, timeout=30):
    """nfs-ls's listing of path, or None when it failed."""
    res = srv.run(["nfs-ls", url(path, version)], check=False, quiet=True, timeout=timeout)
    return res.stdout if res.returncode == 0 else None


def round_trip(srv, tmp_path, path, size=100003, read_versions=(3, 4)):
    """Writes size random bytes to path over NFSv3 and reads them back over
    each of read_versions; returns the versions that gave them back whole
    (nfs-cp over NFSv4 cannot carry a WRITE in libnfs 4.0, so writes are v3)."""
    data = os.urandom(size)
    local = os.path.join(tmp_path, "round_trip.data")
    with open(local, "wb") as f:
        f.write(data)
    if not put(srv, local, path):
        return []
    return [v for v in read_versions if get(srv, path, v) == data]
