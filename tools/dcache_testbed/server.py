"""One real ganesha.nfsd on a loop filesystem, in namespaces of its own.

    with Server(exports=[vfs(1, "vfs"), dcache(2, "dcache", ...)]) as srv:
        srv.run(["nfs-cp", ...])          # a command in the server's network
        srv.counters(2).writes            # the plugin's counters
        srv.reload("DCACHE: export 2")    # SIGHUP, until the log says so

What it makes, all owned by the one Server so that several run side by
side: a state dir (ganesha.conf, ganesha.log, recov/, plugins/, dbus/), a
sparse image formatted xfs, ext4 or btrfs, attached with `losetup
--direct-io=on` (the backing file's own page cache does not hide the
server's) and mounted at state/mnt, a network namespace (its own loopback
and ports, so it never meets an NFS server already on the machine) and a
mount namespace with a private /run (rpcbind's socket, the bus), rpcbind,
a private dbus-daemon and ganesha.nfsd. A release other than the host's
runs chrooted in its Debian root (ci/setup.sh --ganesha X), with the state
dir, /run, /proc and /dev bound in; rpcbind, dbus-daemon and the clients
stay the host's.
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

from . import exports as exportlib
from . import cgroups, releases, stats
from .procs import Child, Timeout, wait_for

MKFS = {"xfs": ["mkfs.xfs", "-q"], "ext4": ["mkfs.ext4", "-q", "-F"], "btrfs": ["mkfs.btrfs", "-q", "-f"]}
TOOLS = os.path.join(releases.TOP, "tools")
# rpcinfo as nobody: as root, libtirpc binds each query to a reserved
# port (bindresvport, 512-1023), left in TIME_WAIT after it. A server
# starting then finds its own reserved port (RQUOTA's 875) taken and exits
# ("Error binding to V6 interface").
RPCINFO = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "rpcinfo"]


class ServerError(Exception):
    """The server could not be started, or did not behave."""


def mkfs_argv(fs, sector_size=None):
    """The mkfs command for fs; sector_size: the smallest unit the
    filesystem writes (XFS: -s size=N), for a device whose sectors are
    that large (mount_image's sector_size)."""
    if fs not in MKFS:
        raise ServerError(f"filesystem {fs!r}: xfs, ext4 or btrfs")
    if not sector_size:
        return list(MKFS[fs])
    return MKFS[fs] + {"xfs": ["-s", f"size={sector_size}"], "ext4": ["-b", str(sector_size)],
                       "btrfs": ["--sectorsize", str(sector_size)]}[fs]


def make_image(image, size, fs, sector_size=None):
    """A sparse image formatted fs (kept if it exists); sector_size as for
    mkfs_argv."""
    argv = mkfs_argv(fs, sector_size)
    if os.path.exists(image):
        return
    if not shutil.which(argv[0]):
        raise ServerError(f"{argv[0]} not found (run ci/setup.sh)")
    subprocess.run(["truncate", "-s", str(size), image + ".new"], check=True)
    subprocess.run(argv + [image + ".new"], check=True, stdout=subprocess.DEVNULL)
    os.rename(image + ".new", image)


def queue_path(dev, name):
    """The file of the block device dev's queue limit name."""
    return f"/sys/block/{os.path.basename(dev)}/queue/{name}"


def queue_limit(dev, name):
    """The block device dev's queue limit name (max_sectors_kb, ...)."""
    with open(queue_path(dev, name), encoding="ascii") as f:
        return int(f.read())


def mount_image(stack, image, mnt, sector_size=None):
    """image attached to a loop device and mounted at mnt; undone by stack.
    Returns the loop device. sector_size: the device's logical sector size
    (losetup -b) and its largest request (max_sectors_kb), so that every
    request is one sector: over a backing file that cannot grow (a full
    tmpfs) each write then fails whole, with EIO, where a larger request
    may be half written and reported as done (the loop driver)."""
    os.makedirs(mnt, exist_ok=True)
    if os.path.ismount(mnt):
        raise ServerError(f"{mnt} is already mounted")
    sector = ["-b", str(sector_size)] if sector_size else []
    dev = subprocess.run(["losetup", "--direct-io=on", *sector, "-f", "--show", image], check=True,
                         capture_output=True, text=True).stdout.strip()
    # -d on a device still held (lazy unmount) sets autoclear: it detaches
    # when the last user goes away
    stack.callback(subprocess.run, ["losetup", "-d", dev], check=False)
    # Set every time: a loop device keeps the largest request its last
    # user set after it is detached, and one left at a sector (4 KiB)
    # split every later user's 1 MiB request into 256 (a direct READ
    # stream's server CPU per GiB 2.3x, its worker threads waiting for the
    # device's tags); without sector_size, the device's own largest.
    with open(queue_path(dev, "max_sectors_kb"), "w", encoding="ascii") as f:
        f.write(str(max(sector_size // 1024, 4) if sector_size else queue_limit(dev, "max_hw_sectors_kb")))
    subprocess.run(["mount", dev, mnt], check=True)
    stack.callback(unmount, mnt)
    return dev


def unmount(mnt):
    """Unmounts mnt, retrying while it is busy (5 s), then lazily."""
    try:
        wait_for(lambda: subprocess.run(["umount", mnt], check=False,
                                        stderr=subprocess.DEVNULL).returncode == 0, 5, f"unmount {mnt}", 0.1)
    except Timeout:
        print(f"testbed: {mnt} still busy; detaching it lazily", file=sys.stderr)
        subprocess.run(["umount", "-l", mnt], check=False)


def private_dbus_conf(socket):
    """A private dbus-daemon acting as a system bus, on which ganesha.nfsd
    may own org.ganesha.nfsd (its policy file is included) and root may
    call it."""
    return f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="root"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <include ignore_missing="yes">/etc/dbus-1/system.d/nfs-ganesha-dbus.conf</include>
</busconfig>
"""


def core_conf(release, state, log, plugins, lines=(), log_level="DEBUG", nfsv4_lines=None):
    """NFS_CORE_PARAM, NFSV4, NFS_KRB5 and LOG blocks for a test server;
    nfsv4_lines: NFSV4 lines in place of `Graceless = true;` (a server with
    a grace period: Graceless = false, Grace_Period, RecoveryBackend, ...)."""
    extra = "".join(f"\n  {line}" for line in list(release.core_param) + list(lines))
    grace = "\n  ".join(["Graceless = true;"] if nfsv4_lines is None else list(nfsv4_lines))
    plugins_line = (f'Plugins_Dir = "{plugins}";' if plugins
                    else f"# Plugins_Dir: Ganesha's default, {releases.FSAL_DIR}")
    return f"""# No Bind_addr in a namespace: Ganesha resolves it with AI_ADDRCONFIG, which
# finds no address where there is only loopback ("No IP address found for
# 127.0.0.1"); with nothing but lo, "any" is loopback only.
NFS_CORE_PARAM {{
  {plugins_line}{extra}
  Protocols = 3, 4;
  Enable_FSAL_Stats = true;
  # v3 MOUNT takes the pseudo path (/vfs), as v4 does, so one URL fits both
  Mount_Path_Pseudo = true;
  Enable_NLM = false;
  Enable_RQUOTA = false;
}}
NFSV4 {{
  {grace}
  RecoveryRoot = "{state}/recov";
  minor_versions = 0, 1;
  # owners as "0", not "root@domain": libnfs maps only numeric owners and
  # there is no idmapd in the namespace
  Only_Numeric_Owners = true;
}}
NFS_KRB5 {{ Active_krb5 = false; }}
LOG {{
  Default_Log_Level = EVENT;
  Components {{ FSAL = {log_level}; EXPORT = INFO; CONFIG = INFO; }}
  Facility {{ name = FILE; destination = "{log}"; enable = active; }}
}}
"""


class Namespace:
    """The namespaces a server runs in: with net, a network namespace of
    its own (loopback only) and a private /run; with a release root, a
    mount namespace binding /run, /proc, /dev, the state dir and binds into
    it. run()/popen() enter them."""

    def __init__(self, stack, state, net=None, release=None, keep_loopdevs=(), binds=(), mount_at=None,
                 child_args=None):
        self.net = net
        self.holder = None
        root = release.root if release else ""
        if net:
            subprocess.run(["ip", "netns", "add", net], check=True)
            stack.callback(subprocess.run, ["ip", "netns", "del", net], check=False)
            subprocess.run(["ip", "netns", "exec", net, "ip", "link", "set", "lo", "up"], check=True)
        if not net and not root and not mount_at:
            self.prefix = []
            return
        if root:
            for d in [state, *binds, *([mount_at[0]] if mount_at else [])]:
                note_root_dir(stack, root, d)
        ready = os.path.join(state, f"holder.{os.getpid()}.ready")
        argv = (["ip", "netns", "exec", net] if net else []) + [
            "unshare", "--mount", "--propagation", "private", "setpriv", "--pdeathsig", "KILL", "--",
            sys.executable, "-m", "dcache_testbed.holder", "--ready", ready, "--state", state]
        argv += ["--private-run"] if net else []
        # ip netns exec's fresh /sys has no cgroup filesystems: the server
        # sees its memory group through them (auto's memory signal)
        argv += [arg for m in cgroups.memory_mounts() for arg in ("--cgroup", *m)] if net and not root else []
        argv += [arg for dev in keep_loopdevs for arg in ("--keep", dev)]
        argv += ["--root", root] if root else []
        argv += [arg for d in binds for arg in ("--bind", d)]
        argv += ["--mount-at", *mount_at] if mount_at else []
        env = dict(os.environ, PYTHONPATH=TOOLS)
        self.holder = Child(argv, "namespace holder", env=env, **(child_args or {}))
        stack.callback(self.holder.stop)
        wait_for(lambda: os.path.exists(ready), 10, "the namespace holder", alive=self.holder.alive)
        os.unlink(ready)
        self.prefix = ["nsenter", "--target", str(self.holder.pid), "--mount"] + (["--net"] if net else [])

    def argv(self, argv, cwd=None):
        if not self.prefix:
            return list(argv)
        return self.prefix + [f"--wd={cwd or os.getcwd()}", "--"] + list(argv)


def port_listeners(port):
    """What listens on TCP port in the caller's network ("" when nothing)."""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True,
                         check=True).stdout
    return " ".join(out.split()) if out.strip() else ""


def system_bus_free(run):
    """Whether the system bus answers with no org.ganesha.nfsd on it (run:
    a Server.run, the check in the server's namespaces)."""
    res = run(["dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
               "org.freedesktop.DBus.NameHasOwner", "string:org.ganesha.nfsd"], check=False, quiet=True, timeout=10)
    return res.returncode == 0 and "boolean false" in res.stdout


def note_root_dir(stack, root, path):
    """A directory about to be made at path in the release's root: removed
    at cleanup (once empty), with the directories made for it, up to the
    topmost one that did not exist (never further)."""
    top_made, p = "", path
    while not os.path.exists(root + p) and p != "/":
        top_made, p = p, os.path.dirname(p)
    if not top_made:
        return

    def remove():
        d = path
        while True:
            try:
                os.rmdir(root + d)
            except OSError:
                return
            if d == top_made:
                return
            d = os.path.dirname(d)
    stack.callback(remove)


class Server:
    """A ganesha.nfsd serving exports from a loop filesystem of its own.

    release      a releases.Release (default: $DCACHE_GANESHA, else the host's)
    exports      exports.Export values (default: /vfs and /dcache)
    conf_extra   more top-level configuration (MDCACHE { ... }, ...)
    fs           xfs, ext4 or btrfs; image_size; image: a file to use (made
                 if missing) and keep, across servers (the crash test)
    loop_sector_size
                 the loop device's sector size and largest request
                 (mount_image: each request fails whole on a backing file
                 that cannot grow); the image is made for it (mkfs_argv)
    extra_fs     (name, size): a second filesystem mounted at mnt/name before
                 the server starts, on a loop device of its own (its
                 /sys/block/loopN/stat counts its exports' I/O alone); or a
                 list of them, mounted in order (a name may be a path below
                 mnt, inside an export's directory: the export serves it
                 too); extra_loopdevs maps each name to its device,
                 extra_loopdev is the first's
    backend      IO_Backend for every DCACHE export that sets none
    plugin       the DCACHE module (default: $DCACHE_PLUGIN for the host's
                 release, the release's build otherwise); stock=True: no
                 Plugins_Dir, Ganesha loads its installed modules
    mount_at     the filesystem also appears at this path inside the
                 namespaces (an installed configuration's /srv/nfs/...)
    core_lines   more NFS_CORE_PARAM lines
    ganesha_env  more environment for ganesha.nfsd (DCACHE_TEST_NO_RWF_DONTCACHE=1:
                 the plugin takes RWF_DONTCACHE as refused, as before 6.14)
    wait_pseudo  the export whose listing means "serving" (None: any)
    nfsv4_lines  NFSV4 lines in place of `Graceless = true;` (core_conf)
    shared_fs    (mnt, loopdev): a filesystem already mounted (by the
                 caller, who unmounts it) to serve from instead of an image
                 of its own: several servers on one filesystem (heads.py)
    on_namespace called with the server once its namespaces exist, before
                 rpcbind and ganesha.nfsd start in them (a network to join)
    root_binds   more directories a release's root sees at the same path
                 (what exports= does not name: exports kept in RADOS)
    host_net     on the caller's network and /run, in no network namespace
                 (a server a person connects to: the demo): refuses to start
                 when something listens on port 2049; rpcbind is the
                 machine's when one answers, the bus the system bus when one
                 runs and no other ganesha.nfsd owns org.ganesha.nfsd there
                 (bus ""), else its own; a Bind_addr goes in core_lines
    own_group    every process it starts in a process group of its own: a
                 terminal's Ctrl-C (SIGINT to the foreground group) reaches
                 the caller alone, which stops them in order
    state_dir    the state dir to use and keep (made if missing), instead of
                 a new one removed at the end: with image= in it, what the
                 next server there starts from (the demo's ./state)
    dirs         directories made on the filesystem (relative to mnt, or
                 absolute below mount_at) before the server starts: the
                 paths of exports it reads from elsewhere (conf_extra's
                 %include of an installed file)
    """

    def __init__(self, release=None, exports=None, conf_extra="", fs="xfs", image_size="2G", image=None,
                 extra_fs=None, backend=None, plugin=None, stock=False, mount_at=None, core_lines=(),
                 ganesha_env=None, log_level="DEBUG", timeout=30, wait_pseudo="/vfs", keep=False,
                 nfsv4_lines=None, shared_fs=None, on_namespace=None, root_binds=(),
                 host_net=False, own_group=False, state_dir=None, dirs=(), loop_sector_size=None):
        self.release = release or releases.select()
        self.exports = list(exportlib.default_exports() if exports is None else exports)
        self.conf_extra, self.fs, self.image_size, self.image = conf_extra, fs, image_size, image
        self.extra_fs, self.backend, self.stock, self.mount_at = extra_fs, backend, stock, mount_at
        self.core_lines, self.log_level, self.timeout = list(core_lines), log_level, timeout
        self.ganesha_env = dict(ganesha_env or {})
        self.wait_pseudo, self.keep = wait_pseudo, keep
        self.nfsv4_lines, self.shared_fs, self.on_namespace = nfsv4_lines, shared_fs, on_namespace
        self.root_binds = list(root_binds)
        self.host_net = host_net
        self.child_args = {"process_group": 0} if own_group else {}
        self.state_dir = state_dir
        self.dirs = list(dirs)
        self.loop_sector_size = loop_sector_size
        self.plugin = plugin or (os.environ.get("DCACHE_PLUGIN") if not self.release.root else None) \
            or self.release.plugin
        self.stack = contextlib.ExitStack()
        self.state = self.mnt = self.loopdev = self.extra_loopdev = ""
        self.extra_loopdevs = {}
        self.ns = self.ganesha = None
        self.bus = ""
        self.stopped_status = None

    # ------------------------------------------------------------ paths --
    @property
    def log_path(self):
        return os.path.join(self.state, "ganesha.log")

    @property
    def conf_path(self):
        return os.path.join(self.state, "ganesha.conf")

    @property
    def pid(self):
        return self.ganesha.pid

    @property
    def plugins_dir(self):
        return "" if self.stock else os.path.join(self.state, "plugins")

    def env(self):
        """What a command run against the server is told (the C++ tests
        read it): DCACHE_SERVER, DCACHE_MNT, DCACHE_STATE, DCACHE_LOG,
        DCACHE_PID, DCACHE_LOOPDEV, DCACHE_EXTRA_LOOPDEV and the bus."""
        return {"DCACHE_SERVER": "127.0.0.1", "DCACHE_MNT": self.mnt, "DCACHE_STATE": self.state,
                "DCACHE_LOG": self.log_path, "DCACHE_PID": str(self.pid), "DCACHE_LOOPDEV": self.loopdev,
                "DCACHE_EXTRA_LOOPDEV": self.extra_loopdev, **self.bus_env()}

    def bus_env(self):
        """DBUS_SYSTEM_BUS_ADDRESS of its private bus (nothing on the
        system bus, which the caller's environment names)."""
        return {"DBUS_SYSTEM_BUS_ADDRESS": self.bus} if self.bus else {}

    # ----------------------------------------------------------- config --
    def conf_text(self, exports=None, conf_extra=None):
        """The whole configuration: the core blocks, conf_extra, the exports."""
        exports = self.exports if exports is None else exports
        conf_extra = self.conf_extra if conf_extra is None else conf_extra
        text = core_conf(self.release, self.state, self.log_path, self.plugins_dir, self.core_lines,
                         self.log_level, self.nfsv4_lines)
        text += conf_extra + ("\n" if conf_extra and not conf_extra.endswith("\n") else "")
        return text + "".join(e.block(self.mnt, self.backend) for e in exports)

    def write_conf(self, exports=None, conf_extra=None):
        """Writes the configuration (for a reload); the export paths made."""
        for e in self.exports if exports is None else exports:
            self._make_export_dir(e.host_path(self.mnt))
        with open(self.conf_path, "w", encoding="utf-8") as f:
            f.write(self.conf_text(exports, conf_extra))

    def _make_export_dir(self, path):
        if self.mount_at and (path == self.mount_at or path.startswith(self.mount_at + "/")):
            path = self.mnt + path[len(self.mount_at):]
        os.makedirs(path, exist_ok=True)

    # ------------------------------------------------------- lifecycle --
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        status = self.stop()
        if status not in (None, 0) and not exc[0]:
            raise ServerError(f"ganesha.nfsd {self.release.name} ended with status {status} when stopped"
                              f" (a crash in its shutdown); log: {self.log_path}")

    def start(self):
        r = self.release
        if os.geteuid() != 0:
            raise ServerError("the server needs root (loop devices, mounts, namespaces)")
        if r.root and not os.access(r.root + "/usr/bin/ganesha.nfsd", os.X_OK):
            raise ServerError(f"Ganesha {r.name}: no ganesha.nfsd in {r.root} (run {r.setup_command})")
        if self.host_net:
            listening = port_listeners(2049)
            if listening:
                raise ServerError(f"port 2049 is already in use (another NFS server?): {listening}")
        if self.state_dir:
            self.state = os.path.abspath(self.state_dir)
            os.makedirs(self.state, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.state, "ganesha.log"))  # the previous server's
        else:
            self.state = tempfile.mkdtemp(prefix="dcache-e2e.", dir=os.environ.get("TMPDIR", "/tmp"))
            os.chmod(self.state, 0o755)
            self.stack.callback(self._remove_state)
        self.mnt = os.path.join(self.state, "mnt")
        os.makedirs(os.path.join(self.state, "recov"), exist_ok=True)
        if self.shared_fs:
            self.mnt, self.loopdev = self.shared_fs
        else:
            image = self.image or os.path.join(self.state, f"{self.fs}.img")
            make_image(image, self.image_size, self.fs, self.loop_sector_size)
            self.loopdev = mount_image(self.stack, image, self.mnt, self.loop_sector_size)
        loopdevs = [self.loopdev]
        extra = [self.extra_fs] if isinstance(self.extra_fs, tuple) else list(self.extra_fs or [])
        for name, size in extra:
            extra_image = os.path.join(self.state, name.replace("/", "_") + ".img")
            make_image(extra_image, size, self.fs)
            self.extra_loopdevs[name] = mount_image(self.stack, extra_image, os.path.join(self.mnt, name))
            loopdevs.append(self.extra_loopdevs[name])
        self.extra_loopdev = self.extra_loopdevs[extra[0][0]] if extra else ""
        if not self.stock:
            self._plugin_dir()
        for d in self.dirs:
            self._make_export_dir(d if os.path.isabs(d) else os.path.join(self.mnt, d))
        self.write_conf()
        net = None if self.host_net else f"dcache-e2e-{os.getpid()}-{os.path.basename(self.state).split('.')[-1]}"
        self.ns = Namespace(self.stack, self.state, net, r, loopdevs, self._root_binds(),
                            (self.mount_at, self.mnt) if self.mount_at else None, self.child_args)
        if self.on_namespace:
            self.on_namespace(self)
        self._daemons()
        self.start_ganesha()

    def _remove_state(self):
        if self.keep:
            print(f"testbed: kept state dir {self.state}", file=sys.stderr)
        else:
            shutil.rmtree(self.state, ignore_errors=True)

    def _plugin_dir(self):
        r, d = self.release, self.plugins_dir
        shutil.rmtree(d, ignore_errors=True)  # a kept state dir's, from an earlier server
        os.makedirs(d)
        for module in ("libfsalvfs.so", "libfsalnull.so"):
            if os.path.exists(r.in_root(os.path.join(releases.FSAL_DIR, module))):
                os.symlink(os.path.join(releases.FSAL_DIR, module), os.path.join(d, module))
        if not self.plugin or not os.path.isfile(self.plugin):
            raise ServerError(f"no DCACHE module at {self.plugin!r} (ci/build.sh"
                              f"{' --ganesha ' + r.name if r.root else ''}; DCACHE_PLUGIN names it)")
        target = os.path.join(d, "libfsaldcache.so")
        if r.root:
            shutil.copy(self.plugin, target)  # the root sees the state dir, not the build
        else:
            os.symlink(os.path.realpath(self.plugin), target)

    def _root_binds(self):
        """In a root: the filesystems of export paths outside the state dir
        and mount_at (a test's own tmpfs), bound in whole (Ganesha resolves
        an export to its filesystem by mount point)."""
        if not self.release.root:
            return []
        binds = set(self.root_binds)
        for e in self.exports:
            p = e.host_path(self.mnt)
            if p.startswith(self.state + "/") or (self.mount_at and p.startswith(self.mount_at)):
                continue
            target = subprocess.run(["findmnt", "-n", "-o", "TARGET", "--target", p], capture_output=True,
                                    text=True, check=False).stdout.strip()
            if target and target != "/":
                binds.add(target)
        return sorted(binds)

    def _daemons(self):
        def rpcbind_answers():
            return self.run([*RPCINFO, "-p", "127.0.0.1"], check=False, quiet=True).returncode == 0
        if not (self.host_net and rpcbind_answers()):
            rpcbind = Child(self.ns.argv(["rpcbind", "-f", "-w"]), "rpcbind", **self.child_args)
            self.stack.callback(rpcbind.stop)
            wait_for(rpcbind_answers, 5, "rpcbind answering", alive=rpcbind.alive)
        if self.host_net and system_bus_free(self.run):
            self.bus = ""
            return
        sock_dir = os.path.join(self.state, "dbus")
        os.makedirs(sock_dir, exist_ok=True)
        sock = os.path.join(sock_dir, "system_bus_socket")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)  # a kept state dir's, from a server killed outright
        conf = os.path.join(self.state, "dbus.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(private_dbus_conf(sock))
        with open(os.path.join(self.state, "dbus.log"), "wb") as log:
            dbus = Child(self.ns.argv(["dbus-daemon", f"--config-file={conf}", "--nofork", "--nopidfile",
                                       "--nosyslog"]), "dbus-daemon", stdout=log, stderr=subprocess.STDOUT,
                         **self.child_args)
        self.stack.callback(dbus.stop)
        wait_for(lambda: os.path.exists(sock), 5, "dbus-daemon's socket", alive=dbus.alive)
        self.bus = f"unix:path={sock}"

    def start_ganesha(self, wait=True):
        """Starts ganesha.nfsd on the configuration as it is now (again after
        stop_ganesha: the same state, filesystem and namespaces)."""
        r = self.release
        nfsd = ["chroot", r.root, "/usr/bin/ganesha.nfsd"] if r.root else ["ganesha.nfsd"]
        env = [f"{k}={v}" for k, v in {**self.bus_env(), **self.ganesha_env}.items()]
        argv = ["env"] + env + nfsd + [
            "-F", "-L", self.log_path, "-f", self.conf_path, "-p", os.path.join(self.state, "ganesha.pid")]
        self.ganesha = Child(self.ns.argv(argv), f"ganesha.nfsd {r.name}", grace=20, **self.child_args)
        self.stopped_status = None
        if wait:
            self.wait_serving()

    def serving(self, pseudo=None):
        """Whether NFSv3 and v4 are registered and pseudo can be listed."""
        rpc = self.run([*RPCINFO, "-p", "127.0.0.1"], check=False, quiet=True).stdout
        if not re.search(r"^\s*100003\s+3\s+tcp", rpc, re.M) or not re.search(r"^\s*100005\s", rpc, re.M):
            return False
        if self.run([*RPCINFO, "-T", "tcp", "127.0.0.1", "nfs", "4"], check=False, quiet=True).returncode:
            return False
        pseudo = self.wait_pseudo if pseudo is None else pseudo
        return not pseudo or self.run(["nfs-ls", f"nfs://127.0.0.1{pseudo}?version=3"], check=False,
                                      quiet=True, timeout=5).returncode == 0

    def wait_serving(self, timeout=None):
        wanted = self.wait_pseudo if any(e.pseudo == self.wait_pseudo for e in self.exports) else ""
        try:
            wait_for(lambda: self.serving(wanted), timeout or self.timeout, "ganesha.nfsd serving",
                     0.2, alive=self.ganesha.alive)
        except Timeout as e:
            raise ServerError(f"{e}\n{self.log_tail()}") from None

    def stop_ganesha(self, grace=20):
        """SIGTERM (SIGKILL after grace s); its exit status, negative for a
        signal. Ganesha exits 0 on SIGTERM: anything else is a crash."""
        if self.ganesha is not None and self.stopped_status is None:
            self.stopped_status = self.ganesha.stop(grace)
        return self.stopped_status

    def stop(self):
        """Stops and removes everything, the server first; returns its
        exit status (None if it never started)."""
        status = self.stop_ganesha() if self.ganesha else None
        self.stack.close()
        return status

    # ---------------------------------------------------------- running --
    def run(self, argv, check=True, quiet=False, timeout=None, env=None, stdin_text=None, cwd=None):
        """argv in the server's namespaces, with env() added; its output
        captured (stdout, stderr as text) and echoed unless quiet."""
        full_env = dict(os.environ, **(self.env() if self.ganesha else self.bus_env()))
        full_env.update(env or {})
        res = subprocess.run(self.ns.argv(argv, cwd), capture_output=True, text=True, timeout=timeout,
                             env=full_env, input=stdin_text, check=False)
        if not quiet:
            sys.stdout.write(res.stdout)
            sys.stderr.write(res.stderr)
        if check and res.returncode != 0:
            raise subprocess.CalledProcessError(res.returncode, argv, res.stdout, res.stderr)
        return res

    def popen(self, argv, env=None, **kw):
        """argv started in the server's namespaces (a load beside a test),
        a Child stopped with the server."""
        full_env = dict(os.environ, **self.env())
        full_env.update(env or {})
        child = Child(self.ns.argv(argv), os.path.basename(argv[0]), env=full_env, **{**self.child_args, **kw})
        self.stack.callback(child.stop)
        return child

    # -------------------------------------------------------------- log --
    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def epoch(self):
        """The server's epoch (its start time in seconds, which Ganesha also
        uses as its NFS write verifier), read from the first log line that
        carries it."""
        m = re.search(r": epoch ([0-9a-f]+) ", self.log())
        if not m:
            raise AssertionError(f"{self.log_path}: no line names the server's epoch")
        return int(m.group(1), 16)

    def log_mark(self):
        """Where the log ends now: log_since(mark) is what came after."""
        return os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0

    def log_since(self, mark):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            f.seek(mark)
            return f.read()

    def log_tail(self, lines=25):
        text = self.log() if os.path.exists(self.log_path) else ""
        return "ganesha.log, last lines:\n" + "\n".join("  | " + s for s in text.splitlines()[-lines:])

    def wait_log(self, pattern, mark=0, timeout=10):
        """Until the log after mark has a line matching pattern; the match."""
        rx = re.compile(pattern)
        return wait_for(lambda: rx.search(self.log_since(mark)), timeout, f"a log line matching {pattern!r}",
                        0.05, alive=self.ganesha.alive)

    def reload(self, pattern, exports=None, conf_extra=None, timeout=10):
        """SIGHUP (after writing exports/conf_extra when given); waits until
        the log says pattern after it; returns the log since the signal."""
        if exports is not None or conf_extra is not None:
            self.write_conf(exports, conf_extra)
        mark = self.log_mark()
        self.ganesha.signal(signal.SIGHUP)
        self.wait_log(pattern, mark, timeout)
        return self.log_since(mark)

    # -------------------------------------------------------- counters --
    def counters(self, export_id=None):
        """The plugin's counters (stats.Counters) of export_id, or a dict
        of every DCACHE export's by id."""
        every = stats.read(self)
        return every if export_id is None else every.get(export_id, stats.Counters({}))

    # --------------------------------------------------------- placement --
    def cgroup(self, controller, settings=None):
        """ganesha.nfsd alone in a new cgroup v1 group of controller with
        settings, while the returned cgroups.Group is entered (raises
        cgroups.Unavailable where there is no such hierarchy)."""
        return cgroups.Group(controller, settings, [self.pid])

    def perf_record(self, path, freq=999):
        """`perf record -g` of ganesha.nfsd (every thread) into path, its
        messages into path.err, until the returned Child is stopped (perf
        writes its file on SIGTERM)."""
        with open(path + ".err", "wb") as err:
            return Child(["perf", "record", "-q", "-g", "-F", str(freq), "-p", str(self.pid), "-o", path],
                         "perf record", grace=30, stdout=err, stderr=subprocess.STDOUT)
