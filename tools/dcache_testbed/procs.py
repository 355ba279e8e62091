"""Processes the testbed starts: children of the caller that die with it,
stopped by their pid, and waiting for a state instead of sleeping."""

import os
import shutil
import signal
import subprocess
import sys
import time


class Timeout(Exception):
    """A state did not come within its time."""


def wait_for(predicate, timeout, what, interval=0.05, alive=None):
    """Polls predicate() until it returns something true and returns that;
    raises Timeout naming what after timeout seconds, or at once when
    alive() turns false (the process that should bring the state died)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if alive is not None and not alive():
            raise Timeout(f"{what}: the process it waits on is gone")
        if time.monotonic() >= deadline:
            raise Timeout(f"{what}: not within {timeout} s")
        time.sleep(interval)


def die_with_parent(argv):
    """argv prefixed so that the process gets SIGKILL when its parent dies
    (the caller killed outright leaves nothing running)."""
    return ["setpriv", "--pdeathsig", "KILL", "--"] + list(argv)


def gone(pid):
    """Whether pid has exited (or is a zombie: a child not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


def threads(pid):
    """What each thread of a process that will not stop is doing (state,
    kernel wait channel and stack; the user stacks too when gdb is there)."""
    lines = []
    task_dir = f"/proc/{pid}/task"
    for tid in sorted(os.listdir(task_dir)) if os.path.isdir(task_dir) else []:
        def read(name, tid=tid):
            try:
                with open(f"{task_dir}/{tid}/{name}", encoding="utf-8", errors="replace") as f:
                    return f.read().strip()
            except OSError:
                return "?"
        state = read("stat").rsplit(")", 1)[-1].split()[:1]
        lines.append(f"  thread {tid} ({read('comm')}): state {state[0] if state else '?'}, wchan {read('wchan')}")
        lines += ["    " + s for s in read("stack").splitlines()[:6]]
    if shutil.which("gdb"):
        try:
            out = subprocess.run(["gdb", "-batch", "-nx", "-p", str(pid), "-ex", "thread apply all bt 12"],
                                 capture_output=True, text=True, timeout=30, check=False).stdout
            lines += ["  " + s for s in out.splitlines() if s.startswith(("Thread", "#"))]
        except subprocess.TimeoutExpired:
            pass
    return "\n".join(lines)


class Child:
    """A process started by the testbed: stop() ends it (SIGTERM, grace,
    SIGKILL) and says how it ended."""

    def __init__(self, argv, what, grace=5, **popen_args):
        self.what = what
        self.grace = grace
        self.proc = subprocess.Popen(die_with_parent(argv), **popen_args)  # pylint: disable=consider-using-with
        self.pid = self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def wait_gone(self, timeout):
        """Whether it exits within timeout seconds."""
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, grace=None):
        """SIGTERM, then SIGKILL after grace seconds; returns the exit status
        (negative: the signal that ended it). A process still there 30 s
        after SIGKILL (in the kernel, uninterruptible) is reported and left."""
        grace = self.grace if grace is None else grace
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            if not self.wait_gone(grace):
                print(f"testbed: {self.what} (pid {self.pid}) ignored SIGTERM for {grace} s; its threads:\n"
                      f"{threads(self.pid)}\ntestbed: sending SIGKILL", file=sys.stderr)
                self.proc.kill()
                if not self.wait_gone(30):
                    print(f"testbed: {self.what} (pid {self.pid}) still there 30 s after SIGKILL; left",
                          file=sys.stderr)
                    return -signal.SIGKILL
        return self.proc.returncode
