"""Several servers ("heads") on one filesystem and one network: a Ganesha
cluster on one machine, for the cluster tests (CTDB, Ceph, Ansible).

    with Heads(3, exports=[dcache(2, "shared", IO_Cache_Read="direct")],
               network=True) as heads:
        heads[1].run(["dcache-stats"])      # each head is a server.Server
        heads.network.add_namespace("client", "192.0.2.50")
        heads.link(2, "down")               # h2's cable pulled

One image (xfs by default) is attached and mounted once, at state/mnt,
before any head's namespaces are made, so each sees it; every head is a
Server serving from it (Server's shared_fs), with its own state dir,
network and mount namespaces, rpcbind, dbus-daemon and ganesha.nfsd.
With network=True the heads share a bridge in a namespace of its own
(nothing reaches the host's network), 192.0.2.0/24 (TEST-NET-1), head hN
at 192.0.2.(10+N) on its eth0, attached before its daemons start.

Everything is undone in the reverse order: what the caller registers on
heads.stack after start (clients, daemons in the heads' namespaces) goes
before the heads, the heads before the network and the filesystem.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from . import releases
from .procs import wait_for
from .server import TOOLS, Server, make_image, mount_image

SUBNET = "192.0.2."


def head_ip(n):
    """The address of head hN on the heads' network."""
    return f"{SUBNET}{10 + n}"


class Network:
    """A bridge (br0) in a network namespace of its own; namespaces join it
    through veth pairs. Undone by stack."""

    def __init__(self, stack, name):
        self.stack, self.name = stack, name
        self.ports = {}       # namespace -> the bridge side of its veth
        self._count = 0
        self._ip(["netns", "add", name])
        stack.callback(subprocess.run, ["ip", "netns", "del", name], check=False)
        self._ip(["-n", name, "link", "add", "br0", "type", "bridge"])
        self._ip(["-n", name, "link", "set", "br0", "up"])

    @staticmethod
    def _ip(args):
        subprocess.run(["ip"] + args, check=True)

    def attach(self, netns, ip, dev="eth0"):
        """netns on the bridge as ip/24 on dev; returns the bridge's port."""
        # veth names live in the host's namespace until moved: short (at
        # most 15 bytes) and unique on the machine
        self._count += 1
        a, b = f"dcv{os.getpid():x}{self._count}a", f"dcv{os.getpid():x}{self._count}b"
        self._ip(["link", "add", a, "type", "veth", "peer", "name", b])
        self._ip(["link", "set", a, "netns", self.name])
        self._ip(["link", "set", b, "netns", netns])
        self._ip(["-n", self.name, "link", "set", a, "master", "br0", "up"])
        self._ip(["-n", netns, "link", "set", b, "name", dev])
        self._ip(["-n", netns, "addr", "add", f"{ip}/24", "dev", dev])
        self._ip(["-n", netns, "link", "set", dev, "up"])
        self.ports[netns] = a
        return a

    def add_namespace(self, suffix, ip):
        """A network namespace of its own (loopback up) on the bridge at ip,
        removed at cleanup; its name."""
        netns = f"{self.name}-{suffix}"
        self._ip(["netns", "add", netns])
        self.stack.callback(subprocess.run, ["ip", "netns", "del", netns], check=False)
        self._ip(["-n", netns, "link", "set", "lo", "up"])
        self.attach(netns, ip)
        return netns

    def set_port(self, netns, state):
        """netns's port on the bridge up or down (a cable plugged or pulled:
        the namespace's interface loses its carrier)."""
        self._ip(["-n", self.name, "link", "set", self.ports[netns], state])


class Heads:
    """count heads serving exports from one filesystem.

    count        how many heads: h1 ... hN
    network      put them on one bridged network (above)
    fs, image_size
                 the shared filesystem
    head_args    a function n -> more Server arguments for hN (its own
                 conf_extra, ...)
    apart        start each head in a second of its own (Ganesha's NFS
                 write verifier is its start time in seconds)
    server_args  every head's Server arguments (exports, nfsv4_lines,
                 wait_pseudo, release, ...)
    """

    def __init__(self, count=3, network=False, fs="xfs", image_size="1G", head_args=None, apart=False,
                 **server_args):
        self.count, self.fs, self.image_size, self.apart = count, fs, image_size, apart
        self.want_network = network
        self.head_args = head_args or (lambda n: {})
        self.server_args = server_args
        self.release = server_args.get("release") or releases.select()
        self.server_args["release"] = self.release
        self.stack = contextlib.ExitStack()
        self.state = self.mnt = self.loopdev = ""
        self.network = None
        self.heads = []

    def __getitem__(self, n):
        """Head hN (1-based)."""
        return self.heads[n - 1]

    def __iter__(self):
        return iter(self.heads)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        """The filesystem, the network, then every head."""
        self.prepare()
        for n in range(1, self.count + 1):
            srv = self.start_head(n)
            if self.apart and n < self.count:
                # the epoch is taken during start-up, which may end in a
                # later second than it began: wait past the one it logs
                epoch = srv.epoch()
                wait_for(lambda e=epoch: int(time.time()) > e, 3, f"a second after {srv.name}'s epoch", 0.02)

    def prepare(self):
        """The filesystem and the network without the heads (for what must
        run before they start: their configuration's cluster)."""
        self.state = tempfile.mkdtemp(prefix="dcache-heads.", dir=os.environ.get("TMPDIR", "/tmp"))
        os.chmod(self.state, 0o755)
        self.stack.callback(shutil.rmtree, self.state, ignore_errors=True)
        image = os.path.join(self.state, f"{self.fs}.img")
        make_image(image, self.image_size, self.fs)
        self.mnt = os.path.join(self.state, "mnt")
        self.loopdev = mount_image(self.stack, image, self.mnt)
        if self.want_network:
            self.network = Network(self.stack, f"dcache-heads-{os.getpid()}-{self.state.rsplit('.', 1)[-1]}")

    def start_head(self, n):
        """Starts hN (the next head) and waits until it serves."""
        args = dict(self.server_args)
        args.update(self.head_args(n))
        if self.network is not None:
            args["on_namespace"] = lambda srv, n=n: self.network.attach(srv.ns.net, head_ip(n))
        # a release's root sees the shared filesystem also when no export
        # names it (exports kept in RADOS)
        srv = Server(shared_fs=(self.mnt, self.loopdev), root_binds=[self.mnt], **args)
        srv.name = f"h{n}"
        self.heads.append(srv)
        self.stack.callback(self._stop_head, srv)
        srv.start()
        return srv

    @staticmethod
    def _stop_head(srv):
        status = srv.stop()
        if status not in (None, 0):
            print(f"testbed: {srv.name}'s ganesha.nfsd ended with status {status} when stopped",
                  file=sys.stderr)

    def stop(self):
        self.stack.close()

    # ------------------------------------------------------------ help --
    def holder_pid(self, n):
        """The pid of hN's namespace holder (nsenter --target PID)."""
        return self[n].ns.holder.pid

    def link(self, n, state):
        """hN's cable: its port on the heads' bridge up or down."""
        self.network.set_port(self[n].ns.net, state)

    # --------------------------------------------------------- restarts --
    def serve_restarts(self):
        """Lets a command run in a head's namespaces restart that head's
        ganesha.nfsd, as `systemctl restart nfs-ganesha` would on a real
        head: restart_argv(n) (python3 -m dcache_testbed.restart STATE)
        asks, a thread of the test stops the head's ganesha.nfsd (SIGTERM),
        starts it again on its configuration and answers. Until the heads
        stop; restarts[n] counts each head's."""
        stop = threading.Event()
        self.restarts = {n: 0 for n in range(1, len(self.heads) + 1)}

        def serve():
            while not stop.is_set():
                for n, srv in enumerate(self.heads, 1):
                    request = os.path.join(srv.state, "restart.request")
                    if os.path.exists(request):
                        os.unlink(request)
                        status = srv.stop_ganesha()
                        srv.start_ganesha(wait=False)
                        self.restarts[n] += 1
                        with open(os.path.join(srv.state, "restart.done"), "w", encoding="utf-8") as f:
                            f.write(f"{srv.name}: ganesha.nfsd stopped (status {status}) and started again\n")
                # a service's poll for requests, not a test waiting for a state
                stop.wait(0.1)
        thread = threading.Thread(target=serve, name="head restarts", daemon=True)
        thread.start()
        self.stack.callback(thread.join)
        self.stack.callback(stop.set)

    def restart_argv(self, n):
        """The command that restarts hN's ganesha.nfsd (serve_restarts)."""
        return ["env", f"PYTHONPATH={TOOLS}", sys.executable, "-m", "dcache_testbed.restart", self[n].state]
