"""NFS clients that keep working beside a test: each, until stopped,
rewrites files of its own through one server and reads every byte back
(dcache-bench rw=write verify=1: a pattern that depends on the seed and the
offset; each round a new seed, so a WRITE that did not reach the file reads
back as the previous round's data).

    c = Rounds(srv, bench, "shared", version=4, name="h1-v4-2")
    c.start(); c.wait_rounds(2); c.stop()
    c.verified, c.errors, c.grace, c.unreachable, c.manifest
    read_back(other_srv, bench, c, mnt, "shared")    # another head's view

A client runs in a thread of the test, each round a dcache-bench in the
server's network namespace (127.0.0.1), stopped with it, and waits PAUSE
seconds between rounds, as a user's program would: six clients back to
back kept both cores of the test machine busy, and the heads' control
path under test (ansible-playbook, dcache-rados, CTDB) ran behind them.
"""

import os
import subprocess
import threading
import time
import zlib

from .procs import Timeout, wait_for

# odd and even sizes; misaligned and aligned WRITE sizes
SIZES = (1000003, 524288, 70001, 1049088)
BLOCKS = (65536, 131072, 47008, 4096)
PAUSE = 0.5


class Rounds:
    """One client of srv's export (its pseudo path without the slash).

    verified     rounds whose every byte read back as written
    errors       rounds that failed otherwise (their messages in error_text)
    grace        rounds a grace period refused (NFS4ERR_GRACE), retried as
                 a client does, not errors
    unreachable  rounds whose MOUNT failed (the server not there: a restart)
    manifest     {file name: (size, seed)} of every file whose content is
                 known (dcache-bench's filename=NAME writes NAME.0)
    """

    def __init__(self, srv, bench, export, version, name, state_dir=None):
        self.srv, self.bench, self.export, self.version, self.name = srv, bench, export, version, name
        self.dir = state_dir or srv.state
        self.verified = self.errors = self.grace = self.unreachable = 0
        self.error_text = []
        self.manifest = {}
        self._stop = threading.Event()
        self._proc = None
        self._thread = None
        self._seed0 = zlib.crc32(name.encode()) * 1000

    def start(self):
        self._thread = threading.Thread(target=self._loop, name=f"client {self.name}", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self):
        return self._thread is not None and self._thread.is_alive()

    def _loop(self):
        url = f"nfs://127.0.0.1/{self.export}"
        out = os.path.join(self.dir, f"client-{self.name}.json")
        rnd = 0
        while not self._stop.is_set():
            slot = rnd % len(SIZES)
            seed, file = self._seed0 + rnd, f"{self.name}-{slot}"
            argv = [self.bench, f"url={url}", f"nfs_version={self.version}", "rw=write", f"size={SIZES[slot]}",
                    f"bs={BLOCKS[slot]}", "verify=1", f"seed={seed}", f"filename={file}", "--json", out]
            ok, text, rc = self._run(argv)
            if ok:
                self.manifest[file] = (SIZES[slot], seed)
                self.verified += 1
            else:
                self.manifest.pop(file, None)
                if "NFS4ERR_GRACE" in text:
                    self.grace += 1
                    # a client's back-off before it retries, not a wait for a state
                    self._stop.wait(0.5)
                elif "dcache-bench: mount " in text:
                    self.unreachable += 1
                    self._stop.wait(0.2)
                elif not self._stop.is_set():
                    self.errors += 1
                    how = f"killed by signal {-rc}" if rc < 0 else f"exit {rc}"
                    self.error_text.append(f"{time.strftime('%T')} {self.name} round {rnd} (seed {seed}, "
                                           f"file {file}.0): dcache-bench {how}: {text.strip()}")
            rnd += 1
            self._stop.wait(PAUSE)

    def _run(self, argv):
        with subprocess.Popen(self.srv.ns.argv(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) as proc:
            self._proc = proc
            try:
                _, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
                err = "dcache-bench did not finish within 120 s\n" + err
            self._proc = None
            return proc.returncode == 0, err, proc.returncode

    def wait_rounds(self, more, timeout=60):
        """Until more rounds than now are verified; False if not within
        timeout (the client makes no progress) or it stopped."""
        target = self.verified + more
        try:
            wait_for(lambda: self.verified >= target, timeout, f"client {self.name}", 0.1, alive=lambda: self.running)
            return True
        except Timeout:
            return False

    def stop(self, abort=False):
        """Ends the client after its round (abort: at once, the round
        killed) and waits for it."""
        self._stop.set()
        if abort and self._proc is not None:
            self._proc.kill()
        if self._thread is not None:
            self._thread.join()


def wait_all(clients, more, timeout=60):
    """Until every running client of clients verified more rounds; the
    names of those that did not."""
    targets = [(c, c.verified + more) for c in clients if c.running]
    deadline = time.monotonic() + timeout
    for c, target in targets:
        try:
            wait_for(lambda c=c, t=target: c.verified >= t, max(0.1, deadline - time.monotonic()),
                     f"client {c.name}", 0.1, alive=lambda c=c: c.running)
        except Timeout:
            pass
    return [c.name for c, target in targets if c.verified < target]


def read_back(srv, bench, client, mnt, export):
    """Every file of client's manifest read through srv and verified;
    (files, [what did not read back])."""
    bad = []
    for file, (size, seed) in sorted(client.manifest.items()):
        path = os.path.join(mnt, export, file + ".0")
        if not os.path.exists(path) or os.path.getsize(path) != size:
            bad.append(f"{file}: {os.path.getsize(path) if os.path.exists(path) else 'no'} bytes, not {size}")
            continue
        res = srv.run([bench, f"url=nfs://127.0.0.1/{export}", "rw=read", "layout=0", "verify=1", f"size={size}",
                       "bs=32768", f"seed={seed}", f"filename={file}", "--json",
                       os.path.join(srv.state, "readback.json")], check=False, quiet=True, timeout=120)
        if res.returncode != 0:
            bad.append(f"{file} (seed {seed}) does not read back through {getattr(srv, 'name', 'the server')}: "
                       f"{res.stderr.strip()}")
    return len(client.manifest), bad
