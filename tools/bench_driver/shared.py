"""The workloads of the one shared server: every variant's export on one
ganesha.nfsd, each workload run on each variant in turn, repeat by
repeat (runs/WORKLOAD.VARIANT.REPEAT.json; a workload of several phases
writes WORKLOAD-PHASE). docs/benchmarks.md, "Workloads", says what each
measures."""

import contextlib
import os

from dcache_testbed.exports import vfs

from . import groups
from .runner import log

MiB = 1 << 20
PROBE_ID = 19
LATENCY_FILE = 8 * MiB


def probe_export():
    """latency's probe: a plain VFS export whose 1 MiB file stays cached."""
    return vfs(PROBE_ID, "probe")


class Shared:
    """The shared server's workloads over cfg's variants."""

    def __init__(self, cfg, srv, bench, out):
        self.cfg, self.srv, self.bench, self.out = cfg, srv, bench, out
        self.per_job = max(cfg.size // 16 // MiB * MiB, MiB)
        self.timeout = 60 + 4 * cfg.runtime + cfg.size / MiB / 4
        writers = cfg.int_of("interleave_writers")
        self.interleave = dict(rw="interleave", numjobs=writers, iodepth=2, record=47008, size=cfg.size // 8,
                               verify=1)
        self.stride = dict(self.interleave, interleave_order="stride", commit_at_end=1)
        self.mix = dict(rw="rw", rwmixread=60, bs="1M", numjobs=16, iodepth=16, size=self.per_job, filename="mix",
                        verify=1)
        self.laid_out = set()
        self.workloads = {
            "mix": lambda v, r: self.measure("mix", v, r, self.mix),
            "randread": lambda v, r: self.measure("randread", v, r, self.random("randread")),
            "randwrite": lambda v, r: self.measure("randwrite", v, r, self.random("randwrite")),
            "reread": self.reread,
            "stream": self.stream,
            "interleave": lambda v, r: self.measure("interleave", v, r,
                                                    dict(self.interleave, filename=f"ileave{r}")),
            "interleave_commit_end": lambda v, r: self.measure("interleave_commit_end", v, r,
                                                               dict(self.stride, filename=f"ileave_end{r}")),
            "interleave_commit_every": lambda v, r: self.measure(
                "interleave_commit_every", v, r, dict(self.stride, fsync=16, filename=f"ileave_every{r}")),
            "interleave_slow": lambda v, r: self.measure("interleave_slow", v, r,
                                                         dict(self.stride, slow_writer=3, filename=f"ileave_slow{r}")),
            "mempressure": self.mempressure,
            "commit": lambda v, r: self.measure("commit", v, r, dict(rw="write", bs="1M", numjobs=4, iodepth=16,
                                                                     size=cfg.size // 4, filename="commit",
                                                                     verify=1)),
            "latency": self.latency,
        }

    def dir(self, v):
        return os.path.join(self.srv.mnt, v)

    def base(self, w, v, r):
        return os.path.join(self.out, "runs", f"{w}.{v}.{r}")

    def measure(self, w, v, r, job, drop=True):
        """A measured run of job on v's export, its files' cache dropped
        first (written back, then POSIX_FADV_DONTNEED) unless drop=False."""
        self.bench.measured(self.base(w, v, r), f"{w} {v} repeat {r}", v, job, label=f"{w}/{v}/{r}",
                            sample_dir=self.dir(v), drop_cache=self.dir(v) if drop else None, timeout=self.timeout)

    def random(self, rw):
        """4 KiB random I/O over the mix files, runtime seconds, verified."""
        return dict(rw=rw, bs="4k", numjobs=4, iodepth=16, size=self.per_job, filename="mix", time_based=1,
                    runtime=self.cfg.runtime, verify=1)

    # ----------------------------------------------------- the others --
    def reread(self, v, r):
        """The data read once (whatever the mode leaves cached stays), then
        again: the second pass is measured."""
        job = dict(rw="read", bs="1M", numjobs=4, iodepth=8, size=self.per_job, filename="mix")
        self.bench.quiet(v, job, drop_cache=self.dir(v), timeout=self.timeout)
        self.measure("reread", v, r, dict(job, verify=1), drop=False)

    def stream(self, v, r):
        """One writer, SIZE in 1 MiB WRITEs (iodepth 8) into an emptied file,
        the COMMIT at close in the time; then written again over its own
        blocks (no WRITE extends the file); then the file read back cold:
        phases write, rewrite and read (their CPU per GiB is a mode's
        floor)."""
        job = dict(bs="1M", numjobs=1, iodepth=8, size=self.cfg.size, filename="stream")
        self.measure("stream-write", v, r, dict(job, rw="write", truncate=1))
        self.measure("stream-rewrite", v, r, dict(job, rw="write"))
        self.measure("stream-read", v, r, dict(job, rw="read", verify=1))
        path = os.path.join(self.dir(v), "stream.0")
        if os.path.exists(path):
            os.truncate(path, 0)  # the image holds one stream per variant at a time

    def mempressure(self, v, r):
        """mix with the server in a memory group of max(SIZE/4, 384 MiB)
        (or --memcg-limit). cgroup v1 moves none of the server's memory into
        the group: the limit bounds what the run adds, and 16 jobs x
        iodepth 16 x 1 MiB of request buffers alone are 256 MiB."""
        limit = self.cfg.size_of("memcg_limit") if self.cfg.memcg_limit else max(self.cfg.size // 4, 384 * MiB)
        base = self.base("mempressure", v, r)
        try:
            with groups.memory(self.srv, limit) as g:
                with open(base + ".memcg_limit", "w", encoding="ascii") as f:
                    f.write(f"{limit}\n")
                self.measure("mempressure", v, r, self.mix)
                with open(base + ".memcg_failcnt", "w", encoding="ascii") as f:
                    f.write(f"{g.read_int('memory.failcnt')}\n")
        except groups.Unavailable as e:
            self.skip("mempressure", e)

    def latency(self, v, r):
        """The device throttled (--latency-bps), --latency-jobs connections
        streaming uncached 1 MiB READs; beside them one probe client
        alternates GETATTR and a cached 4 KiB READ on /probe, 10 ms apart:
        how long a request waits for a worker thread. Both connect first
        and start together; the probe stops 2 s before the stream."""
        if v not in self.cfg.list_of("latency_variants"):
            return
        jobs, load = self.cfg.int_of("latency_jobs"), self.cfg.seconds_of("latency_load")
        base = self.base("latency", v, r)
        if v not in self.laid_out:  # the streamed files, written once, before the throttle
            self.bench.quiet(v, dict(rw="write", bs="1M", numjobs=jobs, iodepth=4, size=LATENCY_FILE,
                                     filename="stream"), server_pid=False)
            self.laid_out.add(v)
        try:
            with groups.throttle(self.srv, self.cfg.size_of("latency_bps")):
                probe = self.bench.start(base + ".probe.err", "probe", dict(
                    rw="probe", bs="4k", size="1M", filename="probe", verify=1, time_based=1,
                    runtime=max(load - 2, 1)), json_path=base + ".probe", go_file=base + ".go.probe")
                self.bench.measured(base, f"latency {v} repeat {r}", v, dict(
                    rw="read", bs="1M", numjobs=jobs, iodepth=self.cfg.int_of("latency_depth"), size=LATENCY_FILE,
                    filename="stream", time_based=1, runtime=load), label=f"latency/{v}/{r}",
                    sample_dir=self.dir(v), drop_cache=self.dir(v), go_file=base + ".go.stream",
                    timeout=self.timeout + load, start_with=[(probe, base + ".go.probe")])
                self.bench.record(base + ".probe", f"latency probe {v}", self.bench.wait(probe, 60))
        except groups.Unavailable as e:
            self.skip("latency", e)

    def skip(self, w, why):
        path = os.path.join(self.out, "runs", f"{w}.skipped")
        if not os.path.exists(path):
            log(f"{w} skipped: {why}")
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"{why}\n")

    # ------------------------------------------------------------ all --
    def run(self, variants, workloads):
        """Repeat by repeat, workload by workload, every variant in turn."""
        for r in range(1, self.cfg.repeats + 1):
            for w in workloads:
                for v in variants:
                    with contextlib.ExitStack() as stack:
                        if self.cfg.device_bps and w != "latency":  # latency throttles on its own
                            stack.enter_context(groups.throttle(self.srv, self.cfg.device_bps))
                        self.workloads[w](v, r)
                    log(f"{w} {v} repeat {r} done")
