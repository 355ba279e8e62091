"""README.md's install and first-export steps, run verbatim as a newcomer
runs them on a new machine: the fenced blocks README marks
`<!-- steps SUITE...: ROLE -->` for the Debian suite of the release under
test (bookworm for 4.3, trixie for 6.5, trixie-backports for 9.14), in
README's order, by role:

  build   here, as root, at the top of the tree (ci/package.sh; run once
          for both package tests, conftest.py); the package must be where
          the block's `# -> PATH` says
  server  on the server, as root, in /root, where the package is copied: a
          new `debootstrap --variant=minbase` root of the suite
          (dcache_testbed.freshroot; trixie-backports in its apt sources
          for 9.14), its /srv an XFS filesystem of its own (the data
          disk), every question answered yes as a person would
  start   `systemctl restart nfs-ganesha`: no init runs in the root, so the
          test starts what the machine's would, the root's own rpcbind,
          system bus (dbus-daemon --system) and the nfs-ganesha unit's
          ExecStart (with -F), in a network namespace of its own
  client  as an unprivileged user (uid 1000), with this machine's
          libnfs-utils, in the server's network

Then the file the client wrote over NFSv3 and read over NFSv4 must be the
client's own (its bytes, its owner), read back over NFSv3 too, and counted
by dcache-stats. The example export's four old failures each stop a step:
PR_SET_IO_FLUSHER refused without CAP_SYS_RESOURCE (6.5 and later: no
server), NFSv3 MOUNT by a Pseudo path that is not the Path, CREATE refused
to a user by the export's directory, NFS3ERR_JUKEBOX in the grace period
(the client's first request comes right after the start).
"""

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import time

import pytest

from dcache_testbed import kernel, releases, server, stats
from dcache_testbed.freshroot import CACHE, FreshRoot
from dcache_testbed.procs import Child, Timeout, wait_for
from readme import steps, suite_of

CLIENT_UID = 1000


def test_readme_marks_every_suites_steps():
    for release in releases.read_table():
        roles = [role for role, _ in steps(suite_of(release))]
        assert roles[:1] == ["build"] and "server" in roles and "start" in roles and "client" in roles, \
            f"README's steps for {suite_of(release)} (Ganesha {release.name}): {roles}"


class Machine:
    """The fresh root, its namespaces and what runs there."""

    def __init__(self, stack, tmp, release):
        self.stack, self.tmp = stack, tmp
        self.log = os.path.join(tmp, "debootstrap.log")
        stack.callback(subprocess.run, ["rm", "-rf", "--one-file-system", os.path.join(tmp, "fresh")], check=False)
        self.root = FreshRoot.unpack(release.suite, os.path.join(tmp, "fresh"),
                                     [release.install_suite] if release.install_suite else [], self.log)
        # the data disk
        image = os.path.join(tmp, "srv.img")
        server.make_image(image, "512M", "xfs")
        dev = subprocess.run(["losetup", "--direct-io=on", "-f", "--show", image], check=True, capture_output=True,
                             text=True).stdout.strip()
        stack.callback(subprocess.run, ["losetup", "-d", dev], check=False)
        state = os.path.join(tmp, "state")
        os.makedirs(state)
        self.ns = server.Namespace(stack, state, f"dcache-readme-{os.getpid()}", self.root, [dev])
        self.mount_ns = ["nsenter", "--target", str(self.ns.holder.pid), "--mount", "--"]
        subprocess.run(self.mount_ns + ["mount", dev, self.root.root + "/srv"], check=True)
        # apt's downloads kept between runs (a cache of the archive: what is
        # installed stays apt's choice)
        archives = os.path.join(CACHE, f"apt-archives-{suite_of(release)}")
        os.makedirs(archives, exist_ok=True)
        subprocess.run(self.mount_ns + ["mount", "--bind", archives, self.root.root + "/var/cache/apt/archives"],
                       check=True)

    def as_root(self, block, timeout=1200):
        """A server block, as root in /root, on this machine's network;
        every question (apt-get's "Do you want to continue? [Y/n]")
        answered yes, as a person following README would."""
        with subprocess.Popen(["yes"], stdout=subprocess.PIPE) as yes:
            try:
                return subprocess.run(self.mount_ns + self.root.argv(["/bin/sh", "-ec", block], cwd="/root"),
                                      stdin=yes.stdout, capture_output=True, text=True, timeout=timeout,
                                      check=False)
            finally:
                yes.kill()

    def in_ns(self, argv, **kw):
        return subprocess.run(self.ns.argv(argv), capture_output=True, text=True, check=False, **kw)

    def daemon(self, argv, what, grace=5):
        """argv started in the root and the namespaces; what it prints goes
        to a file named after it, for the failure message."""
        out = os.path.join(self.tmp, re.sub(r"\W+", "-", what) + ".out")
        with open(out, "wb") as f:
            child = Child(self.ns.argv(self.root.argv(argv)), what, grace=grace, stdout=f, stderr=subprocess.STDOUT)
        child.out = out
        self.stack.callback(child.stop)
        return child

    def ganesha_log(self, lines=25):
        """ganesha.log's warnings and worse first (a short failure message
        still names the cause), then its last lines."""
        path = self.root.root + "/var/log/ganesha/ganesha.log"
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
            log = f.read().splitlines()
            worse = [s for s in log if re.search(r" :(WARN|MAJ|CRIT|FATAL) :", s)]
            return "ganesha.log, warnings and worse:\n" + "\n".join("  | " + s for s in worse[-lines:]) + \
                "\nganesha.log, the end:\n" + "\n".join("  | " + s for s in log[-lines:])
        return "(no ganesha.log)"

    def start(self):
        """What `systemctl restart nfs-ganesha` does on a booted machine:
        rpcbind and the system bus up (nfs-ganesha depends on both), then
        the unit's ExecStart, in the foreground."""
        unit = next((self.root.root + d + "/nfs-ganesha.service" for d in ("/usr/lib/systemd/system",
                                                                           "/lib/systemd/system")
                     if os.path.exists(self.root.root + d + "/nfs-ganesha.service")), None)
        assert unit, "nfs-ganesha installed no nfs-ganesha.service"
        with open(unit, encoding="utf-8") as f:
            exec_start = re.search(r"^ExecStart=(.*)$", f.read(), re.M).group(1)
        assert "/usr/bin/ganesha.nfsd -C ${OPTIONS}" in exec_start, f"the unit's ExecStart changed: {exec_start}"
        with open(self.root.root + "/etc/default/nfs-ganesha", encoding="utf-8") as f:
            options = shlex.split(re.search(r"^OPTIONS=(.*)$", f.read(), re.M).group(1))[0]
        self.in_ns(["mkdir", "-p", "/run/ganesha", "/run/dbus", "/run/rpcbind"])
        rpcbind = self.daemon(["rpcbind", "-f", "-w"], "the root's rpcbind")
        wait_for(lambda: self.in_ns([*server.RPCINFO, "-p", "127.0.0.1"]).returncode == 0, 10, "rpcbind answering",
                 alive=rpcbind.alive)
        if os.path.exists(self.root.root + "/usr/bin/dbus-daemon"):
            bus = self.daemon(["dbus-daemon", "--system", "--nofork", "--nopidfile"], "the root's system bus")
            wait_for(lambda: self.in_ns(["test", "-S", "/run/dbus/system_bus_socket"]).returncode == 0, 10,
                     "the system bus's socket", alive=bus.alive)
        klog = self.stack.enter_context(kernel.KernelLog())
        ganesha = self.daemon(["/usr/bin/ganesha.nfsd", "-F", "-C", *shlex.split(options)], "ganesha.nfsd", 20)

        def serving():
            rpc = self.in_ns([*server.RPCINFO, "-p", "127.0.0.1"]).stdout
            return re.search(r"^\s*100003\s+3\s+tcp", rpc, re.M) and \
                self.in_ns([*server.RPCINFO, "-T", "tcp", "127.0.0.1", "nfs", "4"]).returncode == 0
        try:
            wait_for(serving, 60, "ganesha.nfsd serving NFSv3 and v4", 0.2, alive=ganesha.alive)
        except Timeout as e:
            status = ganesha.proc.poll()
            with open(ganesha.out, encoding="utf-8", errors="replace") as f:
                printed = f.read()[-3000:]
            pytest.fail(f"systemctl restart nfs-ganesha: {e} (exit status {status}; negative: the signal)\n"
                        f"{self.ganesha_log()}\nwhat it printed:\n{printed}\nthe kernel on ganesha since the start:\n"
                        + "\n".join(s for s in klog.lines() if "ganesha" in s))

    def as_user(self, argv, **kw):
        """argv as an unprivileged client user, in the server's network."""
        env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
        return subprocess.run(self.ns.argv(["setpriv", f"--reuid={CLIENT_UID}", f"--regid={CLIENT_UID}",
                                            "--clear-groups", "--", *argv], cwd="/"),
                              capture_output=True, check=False, env=env, **kw)


def test_readme_steps_serve_a_file_to_a_user(release, deb, tmp_path):
    suite = suite_of(release)
    blocks = steps(suite)
    times = {}
    with contextlib.ExitStack() as stack:
        began = time.monotonic()
        machine = Machine(stack, str(tmp_path), release)
        shutil.copy(deb, machine.root.root + "/root/")
        times["fresh root"] = time.monotonic() - began
        for i, (role, block) in enumerate(blocks):
            began = time.monotonic()
            if role == "server":
                res = machine.as_root(block)
                assert res.returncode == 0, f"{suite}: README's server step failed (exit {res.returncode}):\n" \
                                            f"{block}\n{res.stdout[-4000:]}{res.stderr[-3000:]}"
                if block.strip() == "dcache-stats":
                    shown = res.stdout
            elif role == "start":
                assert block.strip() == "systemctl restart nfs-ganesha", f"{suite}: a start step the test" \
                                                                         f" cannot play: {block}"
                machine.start()
            elif role == "client":
                res = machine.as_user(["/bin/sh", "-ec", block])
                with open("/etc/os-release", "rb") as f:
                    want = f.read()
                # nfs-cp says what it copied, then nfs-cat prints the file
                assert res.returncode == 0 and res.stdout.endswith(b"\n" + want), \
                    f"{suite}: README's client step, as uid {CLIENT_UID}, did not write the file over NFSv3 and" \
                    f" read it back over NFSv4 (exit {res.returncode}):\n{block}\n" \
                    f"{res.stdout.decode(errors='replace')[-2000:]}{res.stderr.decode(errors='replace')}\n" \
                    f"{machine.ganesha_log()}"
            times[f"{i} {role}"] = time.monotonic() - began
        print(f"{suite}: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))

        # what the client's steps left: its file, as it wrote it
        back = machine.as_user(["nfs-cat", "nfs://127.0.0.1/srv/data/hello?version=3"])
        assert back.returncode == 0 and back.stdout == want, \
            f"{suite}: uid {CLIENT_UID} cannot read the file back over NFSv3: {back.stderr}"
        owner = machine.in_ns(["stat", "-c", "%u %s", machine.root.root + "/srv/data/hello"]).stdout.split()
        assert owner == [str(CLIENT_UID), str(len(want))], \
            f"{suite}: /srv/data/hello is (owner, size) {owner}, not ({CLIENT_UID}, {len(want)})"
        assert re.search(r"^export 1$", shown, re.M), f"{suite}: README's dcache-stats shows no export 1: {shown}"
        res = machine.as_root("dcache-stats --json")
        assert res.returncode == 0, f"{suite}: dcache-stats --json failed: {res.stderr}"
        counted = stats.parse(res.stdout).get(1, stats.Counters({}))
        assert counted.write_bytes == len(want) and counted.read_bytes >= 2 * len(want), \
            f"{suite}: DCACHE counted {counted.write_bytes} bytes written and {counted.read_bytes} read through" \
            f" /srv/data, not {len(want)} and 2 x {len(want)}"
