#!/usr/bin/env python3
"""The demo (ci/demo.sh, README's first command): a ganesha.nfsd with the
DCACHE plugin on 127.0.0.1, serving

  /vfs        plain VFS (for comparison)
  /dontcache  DCACHE, reads and writes with RWF_DONTCACHE
  /direct     DCACHE, O_DIRECT reads, O_DIRECT writes made FILE_SYNC

from an XFS filesystem in a loop device under the state dir. It writes and
reads files (1 byte, 1 MiB + 123 bytes, 64 MiB) through every export and
checks they round-trip, prints how much of them each export left in the
server's page cache (cachestat(2)) and what DCACHE counted (WRITEs
answered FILE_SYNC, COMMITs received), then serves until Ctrl-C / SIGTERM,
which stop it cleanly (status 0).

  ci/demo.sh [--check] [--state DIR] [--ganesha 4.3|6.5|9.14]
    --check                run the workload, verify it, stop (for CI)
    --state DIR            state dir (default ./state; the image is reused,
                           the workload's own files are rewritten each run)
    --ganesha X            that release's ganesha.nfsd (ci/releases.tsv; or
                           DCACHE_GANESHA=X): 6.5 (Debian 13) and 9.14
                           (Debian 13 backports) chrooted in their Debian
                           root (ci/setup.sh --ganesha X) in a mount
                           namespace of its own that binds /run, /proc, /dev
                           and the state dir in and ends with it; the module
                           is build-X's. Default 4.3, Debian 12's on this
                           machine.
  DCACHE_DEMO_SECONDS=N    serve N seconds after the workload, then stop
  DCACHE_DEMO_IMAGE_SIZE   image size when first created (default 4G)
  DCACHE_BUILD_DIR         build dir (default build/, for X build-X/);
                           when its fsal_dcache/adapter/libfsaldcache.so is
                           missing, runs ci/setup.sh and builds only that
                           module (for X with ci/build.sh --ganesha X)

Needs root. Refuses to start if something already listens on port 2049.
Counters go over the system bus when one runs, else over a private
dbus-daemon (the address is printed; tools/dcache-stats needs it).

The server runs on this machine's network (dcache_testbed's host_net), each
process it starts in a process group of its own: Ctrl-C reaches the demo
alone, which stops everything it started (ganesha.nfsd, rpcbind and
dbus-daemon when it started them, mounts, the loop device) in the reverse
order, whatever step it was at.
"""

import argparse
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tools"))
# pylint: disable=wrong-import-position
from dcache_testbed import exports, releases  # noqa: E402
from dcache_testbed.procs import Timeout  # noqa: E402
from dcache_testbed.server import Server, ServerError  # noqa: E402

PROG = "demo"
EXPORTS = [
    exports.vfs(1, "vfs"),
    exports.dcache(2, "dontcache", IO_Cache_Read="dontcache", IO_Cache_Write="dontcache"),
    exports.dcache(3, "direct", IO_Cache_Read="direct", IO_Cache_Write="direct_file_sync"),
]
# the summary's rows: export, its modes as shown
MODES = {"vfs": "(plain VFS)", "dontcache": "dontcache / dontcache", "direct": "direct / direct_file_sync"}
FILES = [("one-byte", 1), ("misaligned", 1024 * 1024 + 123), ("sixty-four-mib", 64 * 1024 * 1024)]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TOOLS = ["rpcinfo", "rpcbind", "mkfs.xfs", "losetup", "ss", "nfs-cp", "nfs-cat", "nfs-ls", "dbus-daemon", "dbus-send"]


class Stopped(BaseException):
    """A signal asked the demo to stop (a BaseException, as
    KeyboardInterrupt: nothing on the way catches it)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.name = signal.Signals(signum).name
        self.status = 128 + signum


class Failed(Exception):
    """The demo cannot go on; the message says why."""


def ignore_signals():
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def on_signal(signum, _frame):
    # one signal stops the demo; the teardown it starts runs to its end
    ignore_signals()
    raise Stopped(signum)


def say(*lines, err=False):
    """Prints, never failing: a reader gone (demo | head) neither kills
    nor stops the demo, whose output then goes nowhere."""
    stream = sys.stderr if err else sys.stdout
    try:
        for line in lines:
            print(line, file=stream, flush=True)
    except (BrokenPipeError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())


# ----------------------------------------------------------- the summary --
def resident(path):
    """Bytes of path in the page cache (cachestat(2), Linux >= 6.5;
    fincore(1) before that)."""
    class Range(ctypes.Structure):
        _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]

    class Stat(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64) for n in
                    ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        rng, st = Range(0, 0), Stat()  # len 0: to the end of the file
        if libc.syscall(451, fd, ctypes.byref(rng), ctypes.byref(st), 0) == 0:
            return st.nr_cache * os.sysconf("SC_PAGE_SIZE")
    finally:
        os.close(fd)
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def summary(residency, counters):
    """The table the demo prints: residency {export name: (bytes cached,
    bytes written)}, counters {export id: stats.Counters} or None when
    they could not be read."""
    def mib(n):
        return n / (1 << 20)
    lines = ["Page cache each export left on the server, right after writing and reading back its",
             "files through NFS (cachestat(2) of the backing files), and DCACHE's counters",
             "(tools/dcache-stats):", "",
             f"  {'export':<11} {'IO_Cache_Read / _Write':<26} {'in page cache / written':>24}"
             f"  {'WRITEs':>6}  {'answered FILE_SYNC':>18}  {'COMMITs sent':>12}"]
    raised = 0
    for e in EXPORTS:
        cached, written = residency[e.name]
        cache = f"{mib(cached):5.1f} / {mib(written):5.1f} MiB {100 * cached / written if written else 0:3.0f} %"
        if e.fsal != "DCACHE":
            numbers = f"  {'-':>6}  {'-':>18}  {'-':>12}"
        elif counters is None:
            numbers = "  (counters unavailable)"
        else:
            c = counters.get(e.export_id)
            raised += c.writes_raised_stable if c else 0
            numbers = (f"  {c.writes if c else 0:>6}  {c.writes_reply_stable if c else 0:>18}"
                       f"  {c.commits if c else 0:>12}")
        lines.append(f"  {e.pseudo:<11} {MODES[e.name]:<26} {cache:>24}{numbers}")
    return lines + ["",
                    "A WRITE answered FILE_SYNC is on disk when answered: no COMMIT is needed for it",
                    f"({raised} came UNSTABLE and were raised, counter writes_raised_stable); nfs-cp",
                    "(libnfs) still COMMITs each file once at close. Plain VFS keeps no DCACHE counters."]


# ------------------------------------------------------------ the server --
class DemoServer(Server):
    """The testbed's server with the workload's files of an earlier run
    removed before ganesha.nfsd starts (nfs-cp does not overwrite);
    anything else under the exports stays."""

    def start_ganesha(self, wait=True):
        for e in EXPORTS:
            for name, _ in FILES:
                path = os.path.join(e.host_path(self.mnt), name)
                if os.path.lexists(path):
                    os.unlink(path)
        super().start_ganesha(wait)


def plugin_for(release):
    """The release's DCACHE module, built (the module only) when missing."""
    build = os.environ.get("DCACHE_BUILD_DIR") or release.build_dir
    plugin = os.path.join(build, "fsal_dcache", "adapter", "libfsaldcache.so")
    env = dict(os.environ, DCACHE_BUILD_DIR=build)
    if release.root:
        if not os.path.isfile(plugin) or not os.access(release.in_root("/usr/bin/ganesha.nfsd"), os.X_OK):
            say(f"{PROG}: {plugin} or {release.root}/usr/bin/ganesha.nfsd is missing: setting up"
                f" ({release.setup_command}), then building the module only")
            subprocess.run([os.path.join(TOP, "ci", "build.sh"), "--ganesha", release.name], env=env, check=True)
    elif not os.path.isfile(plugin):
        say(f"{PROG}: {plugin} is missing: setting up (ci/setup.sh), then building the module only")
        subprocess.run([os.path.join(TOP, "ci", "setup.sh")], check=True)
        os.makedirs(build, exist_ok=True)
        # configured as ci/build.sh does, so that a later ci/build.sh reuses it
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            with open(os.path.join(build, "configure.log"), "w", encoding="utf-8") as log:
                if subprocess.run(["cmake", "-S", TOP, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                                  stdout=log, stderr=subprocess.STDOUT, check=False).returncode:
                    raise Failed(f"configuring {build} failed: {build}/configure.log")
        subprocess.run(["cmake", "--build", build, "--target", "fsaldcache", f"-j{os.cpu_count()}"], check=True)
    if not os.path.isfile(plugin):
        raise Failed(f"built target fsaldcache but {plugin} is still missing")
    vfs = release.in_root(os.path.join(releases.FSAL_DIR, "libfsalvfs.so"))
    if not os.path.isfile(vfs):
        raise Failed(f"{vfs} missing (run {release.setup_command})")
    return plugin


def check_tools(release):
    for tool in (["chroot", "unshare", "setpriv"] if release.root else ["ganesha.nfsd"]) + TOOLS:
        if not shutil.which(tool):
            raise Failed(f"'{tool}' not found (run ci/setup.sh)")


def banner(srv, release):
    note = ""
    if release.root:
        suite = release.suite + (f"/{release.install_suite}" if release.install_suite else "")
        note = f" (Debian {suite}'s, chrooted in {release.root})"
    bus = f"DBUS_SYSTEM_BUS_ADDRESS={srv.bus} " if srv.bus else ""
    lines = ["  DCACHE: " + line.split("DCACHE: ", 1)[1] for line in srv.log().splitlines() if "DCACHE: export" in line]
    return lines + [
        "",
        f"ganesha.nfsd {release.name}{note} (pid {srv.pid}) serves on 127.0.0.1 (NFSv3 and NFSv4):",
        "  /vfs        plain VFS",
        "  /dontcache  DCACHE: IO_Cache_Read = dontcache, IO_Cache_Write = dontcache",
        "  /direct     DCACHE: IO_Cache_Read = direct,    IO_Cache_Write = direct_file_sync",
        "Connect with libnfs-utils, for example:",
        "  nfs-ls  nfs://127.0.0.1/direct/",
        "  nfs-cp  somefile nfs://127.0.0.1/direct/somefile",
        "  nfs-cat nfs://127.0.0.1/direct/somefile",
        "  nfs-ls  'nfs://127.0.0.1/dontcache/?version=4'",
        f"DCACHE's counters: {bus}tools/dcache-stats",
        f"Files land in {srv.mnt}/<export>; the server log is {srv.log_path}.",
        ""]


# ---------------------------------------------------------- the workload --
def round_trip(srv, local, url_path):
    """"ok", or what went wrong writing local over NFSv3 and reading it
    back over NFSv3 and v4."""
    res = srv.run(["nfs-cp", local, f"nfs://127.0.0.1/{url_path}?version=3"], check=False, quiet=True,
                  timeout=120)
    if res.returncode:
        return "write failed: " + " ".join(res.stderr.split())
    with open(local, "rb") as f:
        want = f.read()
    for version in (3, 4):
        res = subprocess.run(srv.ns.argv(["nfs-cat", f"nfs://127.0.0.1/{url_path}?version={version}"]),
                             capture_output=True, timeout=120, check=False)
        if res.returncode:
            return f"NFSv{version} read failed: " + " ".join(res.stderr.decode(errors="replace").split())
        if res.stdout != want:
            return f"NFSv{version} read returned different bytes"
    return "ok"


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def workload(srv):
    """Every file through every export; the summary printed. Raises
    Failed when a file did not round-trip."""
    work = os.path.join(srv.state, "work")
    os.makedirs(work, exist_ok=True)
    say("demo workload: write with nfs-cp (NFSv3), read back with nfs-cat (NFSv3 and NFSv4)")
    for name, size in FILES:
        with open(os.path.join(work, name), "wb") as f:
            f.write(os.urandom(size))
    result = {(e.name, name): round_trip(srv, os.path.join(work, name), f"{e.name}/{name}")
              for e in EXPORTS for name, _ in FILES}
    # residency before the backing files are compared here, which reads
    # them through the cache
    try:
        residency = {e.name: (sum(resident(os.path.join(e.host_path(srv.mnt), n)) for n, _ in FILES),
                              sum(size for _, size in FILES)) for e in EXPORTS}
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError) as err:
        say(f"demo workload: could not measure page-cache residency: {err}", err=True)
        residency = None
    failures = 0
    for e in EXPORTS:
        for name, size in FILES:
            r = result[(e.name, name)]
            backing = os.path.join(e.host_path(srv.mnt), name)
            if r == "ok" and not same_file(os.path.join(work, name), backing):
                r = f"backing file {backing} differs"
            say(f"  {e.pseudo:<10} {name:<14} {size:9d} bytes  {r}")
            failures += r != "ok"
    if failures:
        raise Failed(f"demo workload: {failures} file(s) did not round-trip")
    say("demo workload: every file round-tripped through every export")
    refused = [line for line in srv.log().splitlines()
               if "DCACHE" in line and ("refused" in line or "not valid" in line)]
    if refused:
        raise Failed("the server refused a DCACHE export:\n" + "\n".join(refused))
    say("")
    try:
        counters = srv.counters()
    except (subprocess.SubprocessError, ValueError) as err:
        detail = getattr(err, "stderr", "") or err
        say(f"demo: DCACHE counters unavailable: {str(detail).strip()}", err=True)
        counters = None
    if residency is not None:
        say(*summary(residency, counters))
    say("")


# ------------------------------------------------------------------ main --
def parse(argv):
    p = argparse.ArgumentParser(prog="ci/demo.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter, usage=argparse.SUPPRESS,
                                add_help=True)
    p.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--state", default=os.environ.get("DCACHE_DEMO_STATE") or os.path.join(os.getcwd(), "state"),
                   help=argparse.SUPPRESS)
    p.add_argument("--ganesha", default=os.environ.get("DCACHE_GANESHA") or None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    seconds = os.environ.get("DCACHE_DEMO_SECONDS", "")
    if seconds and not seconds.isdigit():
        p.error(f"DCACHE_DEMO_SECONDS={seconds}: not a number of seconds")
    a.seconds = int(seconds) if seconds else None
    try:
        a.release = releases.select(a.ganesha)
    except LookupError as e:
        p.error(str(e))
    return a


def serve(srv, seconds):
    if seconds is not None:
        say(f"serving for {seconds} s (DCACHE_DEMO_SECONDS)")
        time.sleep(seconds)  # serving is what it does meanwhile
        return 0
    say("serving until Ctrl-C")
    status = srv.ganesha.proc.wait()
    raise Failed(f"ganesha.nfsd exited on its own (status {status})")


def run(srv, a):
    """Everything up to the end of serving; a signal raises Stopped."""
    check_tools(a.release)
    srv.plugin = plugin_for(a.release)
    image = os.path.join(srv.state_dir, "xfs.img")
    if not os.path.exists(image):
        say(f"{PROG}: creating {srv.image_size} XFS image {image}")
    srv.start()
    say(*banner(srv, a.release))
    workload(srv)


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    for s in SIGNALS:
        signal.signal(s, on_signal)
    if os.geteuid() != 0:
        say(f"{PROG}: must run as root (loop device, mount, ports below 1024)", err=True)
        return 2
    state = os.path.abspath(a.state)
    srv = DemoServer(release=a.release, exports=EXPORTS, state_dir=state, image=os.path.join(state, "xfs.img"),
                     image_size=os.environ.get("DCACHE_DEMO_IMAGE_SIZE") or "4G", core_lines=["Bind_addr = 127.0.0.1;"],
                     log_level="INFO", host_net=True, own_group=True)
    status, stopped, serving, why = 0, None, False, ""
    try:
        try:
            run(srv, a)
            if not a.check:
                serving = True
                status = serve(srv, a.seconds)
        finally:
            ignore_signals()
    except Stopped as s:
        stopped, status = s, (0 if serving else s.status)
    except (Failed, ServerError, Timeout, subprocess.SubprocessError, OSError) as e:
        status, why = 1, str(e)
    # signals are ignored from here on: the teardown always finishes
    if why:
        say(f"{PROG}: {why}", err=True)
    if stopped and serving:
        say("")
    say(f"{PROG}: stopping")
    mnt, loopdev = srv.mnt, srv.loopdev
    try:
        ended = srv.stop()
    except Exception as e:  # pylint: disable=broad-except  # the message, then the status
        say(f"{PROG}: stopping failed: {e}", err=True)
        ended, status = None, status or 1
    if ended not in (None, 0):
        say(f"{PROG}: ganesha.nfsd ended with status {ended} when stopped (a crash in its shutdown)", err=True)
        status = status or 1
    shutil.rmtree(os.path.join(state, "work"), ignore_errors=True)
    if status == 0:
        detached = f", {loopdev} detached" if loopdev else ""
        say(f"{PROG}: stopped{' on ' + stopped.name if stopped else ''}: server stopped, {mnt or state + '/mnt'}"
            f" unmounted{detached}; {state}/xfs.img kept")
    elif stopped:
        say(f"{PROG}: interrupted by {stopped.name} before serving (status {status}); stopped,"
            f" {mnt or state + '/mnt'} unmounted", err=True)
    else:
        say(f"{PROG}: failed (status {status}); server log: {state}/ganesha.log", err=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
