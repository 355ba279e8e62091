"""dcache-bench against one server: its command line from a job (a dict
of dcache-bench keys), run in the server's namespaces with its stderr in
a file and a time bound; a measured run with the plugin's counters read
before and after (BASE.stats0/.stats1), perf around it, and a failure
recorded (BASE.failed) for the report."""

import os
import subprocess
import sys
import time

from dcache_testbed import stats
from dcache_testbed.procs import Child, Timeout, wait_for

TIMED_OUT = 124


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def job_args(job):
    """{"rw": "read", "bs": "1M"} -> ["rw=read", "bs=1M"] (booleans as 1/0)."""
    return [f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in job.items()]


def tail(path, lines=2):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return " ".join(f.read().splitlines()[-lines:])
    except OSError:
        return ""


def go(runs, timeout=600):
    """Once every run ((Child, go file) pairs, started with --go-file) is
    connected and laid out (its FILE.ready exists), all start at once (FILE
    created); a run that died first leaves the others to end on their own
    (a missing go file: dcache-bench gives up after its own bound)."""
    try:
        wait_for(lambda: all(os.path.exists(f + ".ready") for _, f in runs), timeout, "dcache-bench connected",
                 0.02, alive=lambda: all(c.alive() for c, _ in runs))
    except Timeout as e:
        log(f"not every run got ready: {e}")
    for _, f in runs:
        with open(f, "w", encoding="ascii"):
            pass


def remove_go(go_file):
    for f in (go_file, go_file + ".ready"):
        if os.path.exists(f):
            os.unlink(f)


class Bench:
    """dcache-bench (binary) against srv; perf: profile each measured run."""

    def __init__(self, binary, srv, perf=False):
        self.binary, self.srv, self.perf = binary, srv, perf

    def argv(self, export, job, json_path="/dev/null", label=None, sample_dir=None, server_pid=True,
             drop_cache=None, go_file=None, stop_file=None, thread_interval_ms=None):
        """The command line: job's keys on export (a pseudo path below the
        server, "direct/ws": a directory of it); server_pid=False: no
        server sampling (--server-pid 0)."""
        argv = [self.binary, f"url=nfs://127.0.0.1/{export}", *job_args(job), "--json", json_path, "--no-progress",
                "--server-pid", str(self.srv.pid if server_pid else 0)]
        for flag, value in (("--label", label), ("--sample-dir", sample_dir), ("--drop-cache", drop_cache),
                            ("--go-file", go_file), ("--stop-file", stop_file),
                            ("--thread-interval-ms", thread_interval_ms)):
            if value is not None:
                argv += [flag, str(value)]
        return argv

    def start(self, err_path, *args, **kw):
        """dcache-bench started (argv's arguments), its stderr in err_path: a Child."""
        with open(err_path, "wb") as err:
            return Child(self.srv.ns.argv(self.argv(*args, **kw)), "dcache-bench",
                         env=dict(os.environ, **self.srv.env()), stdout=subprocess.DEVNULL, stderr=err)

    @staticmethod
    def wait(child, timeout=None):
        """Its exit status; TIMED_OUT (after stopping it) past timeout s."""
        if child.wait_gone(timeout):
            return child.proc.returncode
        child.stop()
        return TIMED_OUT

    def run(self, err_path, *args, timeout=None, **kw):
        """dcache-bench run to its end (at most timeout s): its exit status."""
        return self.wait(self.start(err_path, *args, **kw), timeout)

    def quiet(self, *args, **kw):
        """An unmeasured run (a layout, a warm-up): its status; stderr dropped."""
        return self.run("/dev/null", *args, **kw)

    # ------------------------------------------------------ measured --
    def counters(self, path, reset=False):
        """The plugin's counters, every export (dcache-stats --json) into
        path; reset: zeroed afterwards, path gets the empty reading."""
        res = self.srv.run([stats.TOOL, "--json"] + (["--reset"] if reset else []), check=False, quiet=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write("{}\n" if reset else res.stdout)

    def measured(self, base, what, *args, timeout=None, start_with=(), **kw):
        """A run whose results are BASE.json (stderr BASE.err): the
        counters reset before it and read after it (BASE.stats0/.stats1),
        perf record around it with --perf (BASE.perf.data), BASE.failed
        holding the status when it failed. Returns the status.
        start_with: (Child, go file) of runs started beside it, which
        start their measured phase together with it (kw's go_file)."""
        self.counters(base + ".stats0", reset=True)
        perf = self.srv.perf_record(base + ".perf.data") if self.perf else None
        child = self.start(base + ".err", *args, json_path=base + ".json", **kw)
        if start_with:
            go([(child, kw["go_file"]), *start_with])
        rc = self.wait(child, timeout)
        for _, f in start_with:
            remove_go(f)
        if start_with:
            remove_go(kw["go_file"])
        self.counters(base + ".stats1")
        if perf:
            perf.stop()
        self.record(base, what, rc)
        return rc

    @staticmethod
    def record(base, what, rc, err=None):
        """A failed run: BASE.failed and a line naming it."""
        if rc != 0:
            with open(base + ".failed", "w", encoding="ascii") as f:
                f.write(f"{rc}\n")
            log(f"FAILED: {what} (status {rc}): {tail(err or base + '.err')}")
