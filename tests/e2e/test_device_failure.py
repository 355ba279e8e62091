"""A device that fills or fails under DCACHE exports of every cache mode:
each client's WRITE stream through them gets a clear NFS error
(NFS3ERR_NOSPC or NFS3ERR_IO, of its WRITE or of its COMMIT), the server
stays up, keeps serving the exports of another device (whose WRITE streams,
run through the failure, keep every byte they had committed), names the
failure in its log, and at SIGTERM exits by itself, with status 0, within
60 s, its shutdown log (from "Removing all exports" on) without an "Extra
references" line to FSAL DCACHE or VFS and without a CRIT or MAJ line that
a VFS-only server put through the same failure lacks. Servers logged "Extra
references (1) hanging around to FSAL DCACHE" there after every such
failure; it came from GetFSALStats, which each DCACHE server here answers
three times (dcache-stats), once before the failure and twice after.

The DCACHE server stands on two devices: the failing one (its filesystem
at mnt) holds /vfs and one DCACHE export per cache mode, each with a file
of 4 MiB + 1000 bytes written first (the misaligned tail leaves the direct
exports holding its last page); the healthy one (mnt/ok) holds /ok_vfs and
an export per mode again. Its VFS-only control stands on the failing device
alone, with /vfs (no statistics asked: Ganesha leaks that reference of VFS
itself). The failures:
  nospace      the filesystem filled from outside the exports (a
               fallocated file) until WRITEs get NFS3ERR_NOSPC;
  device_full  the image on a 200 MiB tmpfs, the tmpfs filled: the loop
               device (4 KiB sectors, one sector a request, so each fails
               whole) fails every write to a block not stored yet, and
               write-backs fail; this kernel reports such a write as
               BLK_STS_NOSPC ("critical space allocation error"), so the
               replies say NOSPC, or IO where XFS shut down on it;
  device_eio   the image on a second XFS that is then shut down: every
               read and write of the device fails with EIO;
  shutdown     the served XFS shut down (xfs_io -x -c shutdown).
The kernel's log, from the test's start, must show nothing but what the
failure explains: no XFS shutdown of the test's devices but the one it
asked for (xfs_io) and those the failing device's I/O errors bring, no
error line about the healthy device, no O_DIRECT colliding with the page
cache in the server's files, and no kernel warning, BUG or hung task.
"""

import contextlib
import os
import re
import signal
import subprocess
import time

import pytest

from dcache_testbed import kernel, nfs, server
from dcache_testbed.exports import mode_exports, vfs

TAIL = 4 * 1024 * 1024 + 1000
HEALTHY_FS = "ok"
FAILING = [vfs(1, "vfs")] + mode_exports(31, "m_")
HEALTHY = [vfs(2, f"{HEALTHY_FS}/vfs", "/ok_vfs")] + mode_exports(51, "ok_", base=HEALTHY_FS)
DIRECT_ID = next(e.export_id for e in FAILING if e.name == "m_direct")
EXTRA_REFS = re.compile(r"Extra (fsal )?references \(\d+\) hanging around to FSAL (DCACHE|VFS)")
NOSPC, IO = r"(WRITE|COMMIT) answered NFS3ERR_NOSPC \(28\)", r"(WRITE|COMMIT) answered NFS3ERR_IO \(5\)|NFS3ERR_IO"
# what a failed WRITE stream's dcache-bench says: the NFS3 status of a
# WRITE or a COMMIT by name and number, or libnfs's text of one
ERRORS = {"nospace": r"WRITE answered NFS3ERR_NOSPC \(28\)", "device_full": f"{NOSPC}|{IO}", "device_eio": IO,
          "shutdown": IO}
# how the server's log names each failure (the plugin's errno names, the
# C library's texts, Ganesha's NFS3 error conversions)
NAMED = {"nospace": r"ENOSPC|No space left on device",
         "device_full": r"ENOSPC|No space left on device|EIO\b|I/O error|Input/output error",
         "device_eio": r"EIO\b|I/O error|Input/output error",
         "shutdown": r"EIO\b|I/O error|Input/output error"}
# the kernel's words for trouble that no device failure explains
KERNEL_TROUBLE = re.compile(r"\bBUG\b|WARNING:|Oops|Call Trace|blocked for more than|general protection")
DEVICE_ERROR = re.compile(r"error|shut ?down|corrupt|fail", re.I)
# O_DIRECT colliding with the page cache: this line, then "File: PATH PID:
# N Comm: NAME" naming the file
COLLIDED = re.compile(r"collision with buffered I/O|invalidation failure")
HEALTHY_SIZE, HEALTHY_SEED, BS = "8M", 32343, 65536


# ------------------------------------------------------------ failures --
class Failure:
    """A failure's device (server_args for the Server), how it is caused
    (cause(srv)) and which shutdowns of the test's devices it explains."""

    def __init__(self, name, tmp_path, stack):
        self.name, self.tmp_path, self.stack = name, tmp_path, stack
        self.server_dev = ""  # the failing device, once the server stands on it
        self.own_devices = []  # the test's other devices (the outer XFS)
        self.tmpfs_root, self.tmpfs_mnt, self.outer = -1, "", ""

    def server_args(self):
        if self.name == "device_full":
            return self._on_tmpfs()
        if self.name == "device_eio":
            return self._on_outer_xfs()
        return {"image_size": "1G"}

    def _on_tmpfs(self):
        """A sparse 1 GiB image on a 200 MiB tmpfs of its own."""
        mnt = self.tmp_path / "tmpfs"
        mnt.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200m", "dcache-e2e-full", str(mnt)], check=True)
        self.stack.callback(subprocess.run, ["umount", "-l", str(mnt)], check=False)
        # filled through this descriptor once the server stands on it (the
        # mount itself may be gone by then: started())
        self.tmpfs_root = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
        self.stack.callback(os.close, self.tmpfs_root)
        self.tmpfs_mnt = str(mnt)
        return {"image": str(mnt / "xfs.img"), "image_size": "1G", "loop_sector_size": 4096}

    def _on_outer_xfs(self):
        """The image on a second XFS, which is shut down to fail the device."""
        outer_img, self.outer = str(self.tmp_path / "outer.img"), str(self.tmp_path / "outer")
        server.make_image(outer_img, "2G", "xfs")
        self.own_devices.append(os.path.basename(server.mount_image(self.stack, outer_img, self.outer)))
        return {"image": os.path.join(self.outer, "xfs.img"), "image_size": "1G"}

    def started(self, srv):
        """The server stands on the device: the tmpfs need not be seen by
        the namespaces other tests make from now on (its root stays open)."""
        self.server_dev = os.path.basename(srv.loopdev)
        if self.tmpfs_root >= 0:
            subprocess.run(["umount", "-l", self.tmpfs_mnt], check=True)

    def cause(self, srv):
        if self.name == "nospace":
            fill(srv.mnt, dir_fd=None)
        elif self.name == "device_full":
            fill(".", dir_fd=self.tmpfs_root)
        elif self.name == "device_eio":
            xfs_shutdown(self.outer)
        else:
            xfs_shutdown(srv.mnt)

    def asked_on(self):
        """The device whose XFS the test shuts down itself (xfs_io), if any."""
        return {"shutdown": self.server_dev, "device_eio": (self.own_devices or [""])[0]}.get(self.name, "")

    def explains(self, line, dev):
        """Whether a shutdown line of the test's devices is the failure's."""
        asked = "User initiated shutdown" in line or "xfs_fs_goingdown" in line  # xfs_io's, by kernel
        if self.name == "nospace":
            return False
        if self.name == "shutdown":
            return dev == self.server_dev and asked
        if self.name == "device_eio" and dev in self.own_devices:
            return asked
        return dev == self.server_dev  # the failing device's own I/O errors


def fill(path, dir_fd):
    """Fills the filesystem at path (relative to dir_fd) from outside the
    exports: a file fallocated to the free space, then 4 KiB writes until
    ENOSPC."""
    fd = os.open(os.path.join(path, "filler"), os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=dir_fd)
    try:
        st = os.statvfs(fd)
        size = st.f_bavail * st.f_frsize
        while size > 0:
            try:
                os.posix_fallocate(fd, 0, size)
                break
            except OSError:
                size -= 1 << 20
        os.lseek(fd, 0, os.SEEK_END)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)


def xfs_shutdown(mnt):
    res = subprocess.run(["xfs_io", "-x", "-c", "shutdown", mnt], capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"xfs_io could not shut {mnt} down: {res.stderr.strip()}"


# ------------------------------------------------------------- helpers --
def write_files(srv, tmp_path, names):
    """A file of 4 MiB + 1000 bytes through each export, and an empty g.0
    (what the WRITE after the failure extends: no CREATE then)."""
    data, empty = tmp_path / "data", tmp_path / "empty"
    data.write_bytes(os.urandom(TAIL))
    empty.write_bytes(b"")
    for name in names:
        assert nfs.put(srv, str(data), f"{name}/f"), f"writing /{name}/f over NFSv3 before the failure"
        assert nfs.put(srv, str(empty), f"{name}/g.0"), f"creating /{name}/g.0 before the failure"


def bench_argv(bench, name, *keys):
    return [bench, f"url=nfs://127.0.0.1/{name}", f"bs={BS}", *keys, "--no-progress", "--json", "/dev/null"]


def failed_write(srv, bench, name, failure):
    """A WRITE stream of 4 MiB to /name/g.0 after the failure: what
    dcache-bench says of it."""
    res = srv.run(bench_argv(bench, name, "filename=g", "rw=write", "size=4M"), check=False, quiet=True,
                  timeout=120)
    said = res.stderr.strip()
    assert res.returncode == 1 and re.search(ERRORS[failure.name], said), \
        f"{failure.name}: a WRITE stream through /{name} after the failure did not fail as it should " \
        f"({ERRORS[failure.name]}): dcache-bench exited {res.returncode}: {said or '(nothing)'}"
    return re.sub(r"\s+", " ", said)[:120]


def healthy_streams(srv, bench):
    """A WRITE stream through each export of the healthy device for 4 s,
    COMMIT every 16 WRITEs, beside the failure: the running dcache-benches."""
    return {e.name: srv.popen(bench_argv(bench, e.name, "filename=h", "rw=write", f"size={HEALTHY_SIZE}",
                                         f"seed={HEALTHY_SEED}", "fsync=16", "time_based=1", "runtime=4"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for e in HEALTHY}


def healthy_verdicts(streams):
    """What each healthy stream ended with: [] when all committed."""
    bad = []
    for name, child in streams.items():
        if not child.wait_gone(120):
            child.stop()
        err = child.proc.stderr.read().decode(errors="replace").strip()
        if child.proc.returncode != 0:
            bad.append(f"/{name}: exited {child.proc.returncode}: {err[:200] or '(nothing)'}")
    return bad


def healthy_kept(srv, bench, tmp_path):
    """The exports of the healthy device after the failure: the bytes the
    streams committed read back, the files of before the failure whole, a
    new file written and read back. The exports that fail, by name."""
    data = (tmp_path / "data").read_bytes()
    bad = []
    for e in HEALTHY:
        # a slow mode's stream may not have got through its first pass in
        # its 4 s: what it wrote, sequentially from 0, is what it committed
        written = os.path.getsize(os.path.join(e.host_path(srv.mnt), "h.0")) // BS * BS
        if written < 1 << 20:
            bad.append(f"/{e.name}: its stream wrote {written} bytes in 4 s, under 1 MiB")
            continue
        res = srv.run(bench_argv(bench, e.name, "filename=h", "rw=read", f"size={written}",
                                 f"seed={HEALTHY_SEED}", "verify=1", "layout=0"), check=False, quiet=True,
                      timeout=120)
        if res.returncode != 0:
            bad.append(f"/{e.name}: its committed stream does not read back: {res.stderr.strip()[:200]}")
        if nfs.get(srv, f"{e.name}/f") != data:
            bad.append(f"/{e.name}/f, written before the failure, does not read back whole")
        if nfs.round_trip(srv, tmp_path, f"{e.name}/after", read_versions=(3, 4)) != [3, 4]:
            bad.append(f"/{e.name}: a new file does not round-trip over NFSv3 and v4")
    return bad


def stop_and_read(srv):
    """SIGTERM; the server must go by itself within 60 s, with status 0.
    Its shutdown's lines: the Extra references lines and the CRIT/MAJ lines
    (without time, pid, thread and the state dir)."""
    start = time.monotonic()
    srv.ganesha.signal(signal.SIGTERM)
    gone = srv.ganesha.wait_gone(60)
    took = time.monotonic() - start
    status = srv.stop_ganesha()
    assert gone, "ganesha.nfsd still running 60 s after SIGTERM (killed)"
    assert status == 0, f"ganesha.nfsd exited with status {status} after SIGTERM"
    log = srv.log()
    start_at = log.find("Removing all exports")
    assert start_at >= 0, "no \"Removing all exports\" in ganesha.log: no orderly shutdown"
    lines = log[log.rfind("\n", 0, start_at) + 1:].replace(srv.state, "STATE").splitlines()
    extra = [line for line in lines if EXTRA_REFS.search(line)]
    crit = sorted({re.sub(r"^.*:(CRIT|MAJ) :", r"\1 ", line) for line in lines if re.search(r":(CRIT|MAJ) :", line)})
    return took, extra, crit


def kernel_trouble(klog, since, failure, devs, healthy_dev, state):
    """What the kernel's log says from its line since on that the failure
    does not explain: XFS shutdowns of the test's devices it did not cause,
    error lines about the healthy device, O_DIRECT colliding with the page
    cache in a file under state (the server's), warnings and BUGs."""
    lines = klog.lines()[since:]
    bad = [line for dev in devs for line in kernel.shutdowns(lines, dev) if not failure.explains(line, dev)]
    if healthy_dev:
        bad += [line for line in kernel.about(lines, healthy_dev) if DEVICE_ERROR.search(line)]
    bad += [f"{line} {after}" for line, after in zip(lines, lines[1:] + [""])
            if COLLIDED.search(line) and os.path.basename(state) in after]
    return bad + [line for line in lines if KERNEL_TROUBLE.search(line)]


# --------------------------------------------------------------- tests --
@pytest.fixture
def stack():
    """Cleanups that run after the servers' (requested before make_server)."""
    with contextlib.ExitStack() as s:
        yield s


@pytest.mark.parametrize("failure_name", ["nospace", "device_full", "device_eio", "shutdown"])
def test_a_device_failure(stack, make_server, build, tmp_path, failure_name):
    bench = build.bin("dcache-bench")
    klog = stack.enter_context(kernel.KernelLog())
    results = {}
    for role in ("control", "dcache"):
        began, since = time.monotonic(), len(klog.lines())  # this role's devices from here on
        failure = Failure(failure_name, tmp_path / role, stack)
        (tmp_path / role).mkdir()
        dcache = role == "dcache"
        exports = FAILING + HEALTHY if dcache else FAILING[:1]
        srv = make_server(exports=exports, extra_fs=(HEALTHY_FS, "1G") if dcache else None,
                          **failure.server_args())
        failure.started(srv)
        write_files(srv, tmp_path / role, [e.name for e in exports])
        if dcache:
            held = srv.counters(DIRECT_ID).boundary_pages_current  # GetFSALStats 1
            assert held > 0, "/m_direct holds no boundary page of its misaligned tails before the failure"
            streams = healthy_streams(srv, bench)
        mark = srv.log_mark()
        failure.cause(srv)
        said = {e.name: failed_write(srv, bench, e.name, failure) for e in (FAILING if dcache else FAILING[:1])}
        assert srv.ganesha.alive(), f"{failure_name}: ganesha.nfsd is gone after the failure"
        named = [line for line in srv.log_since(mark).splitlines() if re.search(NAMED[failure_name], line)]
        # (Ganesha itself logs no ENOSPC: the control's log may not name it)
        assert named or not dcache, \
            f"{failure_name}: the server's log does not name the failure ({NAMED[failure_name]})"
        if dcache:
            bad = healthy_verdicts(streams)
            assert not bad, f"{failure_name}: WRITE streams on the healthy device failed: {bad}"
            bad = healthy_kept(srv, bench, tmp_path / role)
            assert not bad, f"{failure_name}: the healthy device's exports did not keep serving: {bad}"
            srv.counters()  # GetFSALStats 2
            srv.counters()  # GetFSALStats 3
        took, extra, crit = stop_and_read(srv)
        bad = kernel_trouble(klog, since, failure, [failure.server_dev] + failure.own_devices,
                             os.path.basename(srv.extra_loopdev), srv.state)
        assert not bad, f"{failure_name} ({role}): the kernel logged what the failure does not explain: {bad}"
        asked = failure.asked_on()
        assert not asked or [line for line in kernel.shutdowns(klog.lines()[since:], asked)
                             if failure.explains(line, asked)], \
            f"{failure_name} ({role}): the kernel's log (/dev/kmsg) does not show the shutdown of {asked} asked for"
        results[role] = crit
        print(f"{failure_name} ({role}): {time.monotonic() - began:.1f} s; the WRITE streams after the failure:"
              f" {said}; the log named it: {named[0][-160:] if named else '(no)'}; stopped {took:.1f} s after SIGTERM;"
              f" CRIT/MAJ at shutdown: {crit or '(none)'}")
        assert not extra, f"{failure_name} ({role}): the shutdown left references: {extra}"
    more = sorted(set(results["dcache"]) - set(results["control"]))
    assert not more, f"{failure_name}: the DCACHE server's shutdown logged what the VFS-only one's does not: {more}"


def test_a_loop_device_left_at_one_sector_a_request_gets_its_largest_back(tmp_path):
    """A loop device keeps the largest request its user set after it is
    detached: device_full leaves its device at one 4 KiB sector a request,
    which split every 1 MiB request of the next test or benchmark on that
    device into 256. The next image mounted gets the device's own largest
    (losetup -f takes the first free device: the one just detached)."""
    limit = server.queue_limit
    with contextlib.ExitStack() as stack:
        image = str(tmp_path / "sectors.img")
        server.make_image(image, "512M", "xfs", 4096)
        first = server.mount_image(stack, image, str(tmp_path / "sectors"), sector_size=4096)
        assert limit(first, "max_sectors_kb") == 4, f"{first}: not one 4 KiB sector a request"
    with contextlib.ExitStack() as stack:
        image = str(tmp_path / "plain.img")
        server.make_image(image, "512M", "xfs")
        dev = server.mount_image(stack, image, str(tmp_path / "plain"))
        print(f"{first}, then {dev}: largest request {limit(dev, 'max_sectors_kb')} KiB")
        assert limit(dev, "max_sectors_kb") == limit(dev, "max_hw_sectors_kb"), \
            f"{dev} (after {first}) kept {limit(dev, 'max_sectors_kb')} KiB requests"
