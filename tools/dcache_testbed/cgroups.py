"""cgroup v1 groups for a server's processes: a memory limit, a device
throttle (the benchmark's memory groups and slow devices).

    with srv.cgroup("memory", {"memory.limit_in_bytes": 1 << 30}) as g:
        ...                                   # ganesha.nfsd runs in the group
        g.read_int("memory.failcnt")

A Group is a new directory in the controller's v1 hierarchy (found in
/proc/self/mountinfo, or mounted privately for the group's lifetime when
the machine has none mounted), its settings written, then the processes
moved in (cgroup.procs: every thread, io_uring's io-wq workers included).
Leaving moves them back to the hierarchy's root and removes the directory.
cgroup v1 does not move the memory a process already has into its new
group: a limit bounds what it charges from then on.
"""

import os
import subprocess
import tempfile


class Unavailable(Exception):
    """No writable cgroup v1 hierarchy of that controller here (a cgroup v2
    only machine, or a controller bound to v2)."""


def hierarchy(controller, mountinfo=None):
    """Where a v1 hierarchy with controller is mounted ("" if none), from
    the text of /proc/self/mountinfo (read when not given)."""
    if mountinfo is None:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            mountinfo = f.read()
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if fields[sep + 1] == "cgroup" and controller in fields[sep + 3].split(","):
            return fields[4].replace("\\040", " ")
    return ""


class Group:
    """A cgroup v1 group of controller holding pids, with settings
    ({file: value}, written in order before the processes move in)."""

    def __init__(self, controller, settings=None, pids=(), name=None):
        self.controller = controller
        self.settings = dict(settings or {})
        self.pids = list(pids)
        self.name = name or f"dcache-testbed-{os.getpid()}-{id(self):x}"
        self.root = self.path = ""
        self._private = ""

    def __enter__(self):
        self.root = hierarchy(self.controller)
        if not self.root:
            self._mount_private()
        self.path = os.path.join(self.root, self.name)
        try:
            os.mkdir(self.path)
            for key, value in self.settings.items():
                self.write(key, value)
            for pid in self.pids:
                self.write("cgroup.procs", pid)
        except OSError as e:
            self.__exit__(None, None, None)
            raise Unavailable(f"cgroup v1 {self.controller}: {e}") from None
        return self

    def __exit__(self, *exc):
        for pid in self.pids:
            try:
                with open(os.path.join(self.root, "cgroup.procs"), "w", encoding="ascii") as f:
                    f.write(str(pid))
            except OSError:
                pass  # gone already
        if self.path:
            try:
                os.rmdir(self.path)
            except OSError:
                pass
        if self._private:
            subprocess.run(["umount", self._private], check=False)
            os.rmdir(self._private)
            self._private = ""

    def _mount_private(self):
        self._private = tempfile.mkdtemp(prefix=f"dcache-cgroup-{self.controller}.")
        res = subprocess.run(["mount", "-t", "cgroup", "-o", self.controller, f"dcache-{self.controller}",
                              self._private], capture_output=True, text=True, check=False)
        if res.returncode != 0 or not os.access(os.path.join(self._private, "cgroup.procs"), os.W_OK):
            if res.returncode == 0:
                subprocess.run(["umount", self._private], check=False)
            os.rmdir(self._private)
            self._private = ""
            raise Unavailable(f"no cgroup v1 {self.controller} hierarchy (mount -t cgroup -o {self.controller}: "
                              f"{res.stderr.strip() or 'not writable'})")
        self.root = self._private

    def write(self, key, value):
        with open(os.path.join(self.path, key), "w", encoding="ascii") as f:
            f.write(str(value))

    def read(self, key):
        with open(os.path.join(self.path, key), encoding="ascii") as f:
            return f.read()

    def read_int(self, key):
        return int(self.read(key).split()[0])

    def stat(self, key="memory.stat"):
        """A `name value` file (memory.stat) as {name: int}."""
        return {k: int(v) for k, v in (line.split() for line in self.read(key).splitlines() if line.strip())}
