"""A stream and a working set through ONE export: what `auto` is for.
A server per kernel mode with one export per variant; each export's
directory holds `stream/` (the server's filesystem) and `ws/`, a second
filesystem on a loop device of its own mounted inside the export (the
export serves it: Ganesha's VFS claims the filesystems below an export),
so the working set's device reads are counted apart from the stream's
although both go through the same export. Every run is the server in a
fresh memory group (the limit, or none for `whole`), its phases one after
the other, each measured with the group's and the machine's counters
(one_export/KERNEL.MEMORY.WORKLOAD-PHASE.VARIANT.REPEAT.*).

  mixed       a working set of many files (--mixed-ws in files of
              --mixed-file) read whole by one client per file every TOUCH
              s; phases: solo (alone), write (beside a stream of
              --mixed-stream written in 1 MiB WRITEs), read (beside the
              stream read back)
  reread_fit  a data set read three times (phases pass1, pass2, pass3),
  reread_big  --reread-fit (within the group) and --reread-big (larger)
  noisy_pair  nfsd-io-bench's noisy writer and latency reader scaled to 2
              cores: 4 readers of 4 KiB random READs, one at a time, over
              a data set of --mixed-ws, alone (solo) and beside 4 writers
              of 1 MiB sequential WRITEs for RUNTIME s (noisy)
"""

import os

from . import groups
from . import variants as variantlib
from .pressure import GroupRuns, Load, mib_floor
from .runner import log

MiB = 1 << 20
PHASES = {"mixed": ["solo", "write", "read"], "reread_fit": ["pass1", "pass2", "pass3"],
          "reread_big": ["pass1", "pass2", "pass3"], "noisy_pair": ["solo", "noisy"]}


def server_args(cfg, variants, ids):
    """Server keywords: the exports, a second filesystem inside each, the
    image sizes (sparse: what the runs hold at most, and slack)."""
    ws = cfg.size_of("mixed_ws")
    extra = 2 * ws + cfg.size_of("reread_big") + (1 << 30)
    image = cfg.size_of("mixed_stream") + cfg.size_of("pressure_stream") + (2 << 30)
    return dict(exports=[variantlib.export(v, ids[v]) for v in variants],
                extra_fs=[(f"{v}/ws", str(extra)) for v in variants], image_size=str(image))


class OneExport(GroupRuns):
    """The one-export workloads on one kernel mode's server."""

    def __init__(self, cfg, srv, bench, pdir, kernel, variants):
        super().__init__(cfg, srv, bench, pdir, kernel)
        self.variants = variants
        self.file = mib_floor(cfg.size_of("mixed_file"))
        self.files = max(cfg.size_of("mixed_ws") // self.file, 1)
        self.stream = cfg.size_of("mixed_stream")
        self.quarter = mib_floor(cfg.size_of("pressure_stream") // 4)
        self.runtime = cfg.seconds_of("pressure_runtime")
        self.solo_s = cfg.seconds_of("pressure_solo")
        self.timeout = 600 + self.stream / MiB / 10
        for v in variants:
            os.makedirs(os.path.join(srv.mnt, v, "stream"), exist_ok=True)

    def path(self, v, *sub):
        return os.path.join(self.srv.mnt, v, *sub)

    def ws_loopdev(self, v):
        return self.srv.extra_loopdevs[f"{v}/ws"]

    def empty(self, v, prefix):
        """v's written files (prefix.N in stream/) emptied: the next run's
        writers open them with truncate=1, through the server."""
        d = self.path(v, "stream")
        for f in os.listdir(d):
            if f.startswith(prefix + "."):
                os.truncate(os.path.join(d, f), 0)

    # ------------------------------------------------------ workloads --
    def ws_touch(self, v, first=None):
        """mixed's working set: one client per file, each reading its file
        whole every TOUCH s, the first TOUCH s after the start (first: s)."""
        first = {} if first is None else {"pass_first": first}
        return Load(f"{v}/ws", dict(rw="read", bs=self.ws_bs, numjobs=self.files, iodepth=2, size=self.file,
                                    filename="ws", time_based=1, pass_interval=self.touch, **first, **self.verify),
                    self.path(v, "ws"))

    def mixed(self, g, base, v):
        warm = Load(f"{v}/ws", dict(rw="read", bs="1M", numjobs=self.files, iodepth=2, size=self.file,
                                    filename="ws"))
        self.warm(base("solo"), g, warm, self.path(v))
        solo = self.ws_touch(v)
        solo.job["runtime"] = self.touch_runtime
        self.phase(base("solo"), g, self.ws_loopdev(v), None, solo)
        # beside the stream written, the first touch comes half a TOUCH
        # after its start (the stream has passed through some memory);
        # beside it read back, at its start (what the writing left), so
        # that a read shorter than TOUCH (from the page cache) has one
        stream = dict(bs="1M", numjobs=1, iodepth=16, size=self.stream, filename="s")
        self.phase(base("write"), g, self.ws_loopdev(v),
                   Load(f"{v}/stream", dict(stream, rw="write", truncate=1), self.path(v, "stream")),
                   self.ws_touch(v, self.touch / 2), self.timeout)
        self.phase(base("read"), g, self.ws_loopdev(v),
                   Load(f"{v}/stream", dict(stream, rw="read", **self.verify), self.path(v, "stream")),
                   self.ws_touch(v, 0), self.timeout)
        self.empty(v, "s")

    def reread(self, size):
        def run(g, base, v):
            job = dict(rw="read", bs="1M", numjobs=4, iodepth=8, size=mib_floor(size // 4), filename="rr")
            for i, p in enumerate(PHASES["reread_fit"]):
                # the first pass starts cold: every file of the export dropped
                extra = {"drop_cache": self.path(v)} if i == 0 else {}
                self.phase(base(p), g, self.ws_loopdev(v),
                           Load(f"{v}/ws", dict(job, **self.verify), self.path(v, "ws"), extra), None, self.timeout)
        return run

    def noisy_pair(self, g, base, v):
        size = mib_floor(self.cfg.size_of("mixed_ws") // 4)
        readers = dict(rw="randread", bs="4k", numjobs=4, iodepth=1, size=size, filename="lat", time_based=1,
                       **self.verify)
        self.warm(base("solo"), g, Load(f"{v}/ws", dict(rw="read", bs="1M", numjobs=4, iodepth=8, size=size,
                                                        filename="lat")), self.path(v))
        self.phase(base("solo"), g, self.ws_loopdev(v), None,
                   Load(f"{v}/ws", dict(readers, runtime=self.solo_s), self.path(v, "ws")))
        writers = dict(rw="write", bs="1M", numjobs=4, iodepth=8, size=self.quarter, filename="nw", truncate=1,
                       time_based=1, runtime=self.runtime)
        self.phase(base("noisy"), g, self.ws_loopdev(v), Load(f"{v}/stream", writers, self.path(v, "stream")),
                   Load(f"{v}/ws", readers, self.path(v, "ws")), self.timeout)
        self.empty(v, "nw")

    def run_one(self, m, w, v, r):
        def base(phase):
            return os.path.join(self.pdir, f"{self.kernel}.{m}.{w}-{phase}.{v}.{r}")
        body = {"mixed": self.mixed, "reread_fit": self.reread(self.cfg.size_of("reread_fit")),
                "reread_big": self.reread(self.cfg.size_of("reread_big")), "noisy_pair": self.noisy_pair}[w]
        data = dict(bs="1M", numjobs=4, iodepth=8, size=mib_floor(self.cfg.size_of(w) // 4), filename="rr") \
            if w.startswith("reread") else None
        if data:
            # laid out outside any group, through the variant's export (a
            # read job writes its files first when they are short)
            self.bench.quiet(f"{v}/ws", dict(data, rw="read", io_size="1M"), server_pid=False, timeout=self.timeout)
        try:
            with self.group(m) as g:
                body(g, base, v)
        except groups.Unavailable as e:
            log(f"one export: no memory group: {e}")
        if data:
            # emptied through the server (never behind its back: it may
            # hold the files open), down to one MiB, laid out again next run
            self.bench.quiet(f"{v}/ws", dict(data, rw="write", truncate=1, io_size="1M"), server_pid=False,
                             timeout=self.timeout)

    def run(self, workloads, runs):
        log(f"one export ({self.kernel}): working set {self.cfg.knob('mixed_ws')} in {self.files} files, group "
            f"{self.cfg.knob('pressure_limit')}, stream {self.cfg.knob('mixed_stream')}, variants "
            f"{' '.join(self.variants)}")
        for m in [x.split(".")[1] for x in runs if x.split(".")[0] == self.kernel]:
            for r in range(1, self.cfg.int_of("pressure_repeats") + 1):
                for w in workloads:
                    for v in self.variants:
                        self.run_one(m, w, v, r)
