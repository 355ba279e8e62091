"""Streaming beside a working set (the pressure matrix): a server per
kernel mode (rwf: RWF_DONTCACHE as the kernel has it; norwf: refused, as
before 6.14) with the variants' exports and the working set's (/ws:
plain VFS on a filesystem and loop device of its own, at MNT/ws). Every
run: a memory group of its own, every file of the mount written back and
dropped, the working set read once (so the new group is charged for it),
then the stream through the variant's export and the working set's
readers started together, the readers until the stream is over; the
group's and the machine's counters before and after (.sys0/.sys1).
docs/benchmarks.md, "Streaming beside a working set".

GroupRuns is what this and the one-export workloads share: a phase run
in a memory group, its counters, its line in the log."""

import json
import os
import subprocess
from dataclasses import dataclass, field

from dcache_testbed.exports import vfs

from . import groups
from . import variants as variantlib
from .runner import go, log, remove_go

MiB = 1 << 20
WS_ID = 18


def mib_floor(n):
    return n // MiB * MiB


@dataclass
class Load:
    """One side of a phase: dcache-bench's job on export (a pseudo path,
    maybe with a directory below it), sampling sample_dir's files."""

    export: str
    job: dict
    sample_dir: str = None
    extra: dict = field(default_factory=dict)


def read_counters(path):
    out = {}
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                k, _, v = line.strip().partition(" ")
                out[k] = float(v) if v else 0.0
    except (OSError, ValueError):
        pass
    return out


def summary_line(base):
    """What a phase measured, one line: the stream's and the working set's
    rates, the working set's p99, its device reads, the limit hits."""
    def load(part):
        try:
            with open(f"{base}.{part}.json", encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    s, w = load("stream"), load("ws")
    a, z = read_counters(base + ".sys0"), read_counters(base + ".sys1")
    out = []
    if s:
        out.append(f"stream {s['total']['mib_s']:.0f} MiB/s")
    if w:
        rate = w["passes"]["mib_s"] if "passes" in w else w["total"]["mib_s"]
        out.append(f"WS {rate:.0f} MiB/s p99 {w['read']['lat_p99_us'] / 1000:.1f} ms")
    ws_mib = int(z.get("wsdev.read_sectors", 0) - a.get("wsdev.read_sectors", 0)) * 512 >> 20
    out.append(f"WS dev reads {ws_mib} MiB, limit hits {int(z.get('memcg.failcnt', 0) - a.get('memcg.failcnt', 0))}")
    return os.path.basename(base) + ": " + ", ".join(out)


class GroupRuns:
    """Phases run with the server in a memory group, on one server."""

    def __init__(self, cfg, srv, bench, pdir, kernel):
        self.cfg, self.srv, self.bench, self.pdir, self.kernel = cfg, srv, bench, pdir, kernel
        self.kswapd = groups.kswapd_pids()
        self.limit = cfg.size_of("pressure_limit")
        self.verify = {"verify": 1} if cfg.pressure_verify else {}
        self.ws_bs = cfg.knob("pressure_ws_bs")
        self.touch = cfg.seconds_of("pressure_touch")
        # a time-based stream with touches: the working set starts with it,
        # touches at TOUCH, 2 TOUCH, ..., the last with half a TOUCH left
        self.touch_runtime = cfg.int_of("pressure_touches") * self.touch + self.touch / 2

    def group(self, memory):
        """A fresh memory group: the limit, or none for `whole`."""
        return groups.memory(self.srv, self.limit if memory == "limit" else None)

    def warm(self, base, group, load, drop_dir):
        """drop_dir's files written back and dropped, then load (the working
        set read once) charged to the group; its peak reset after."""
        rc = self.bench.run(base + ".warm.err", load.export, load.job, json_path=base + ".warm.json",
                            drop_cache=drop_dir, server_pid=False)
        if rc:
            log(f"warming the working set failed ({os.path.basename(base)})")
        group.write("memory.max_usage_in_bytes", 0)

    def phase(self, base, group, ws_loopdev, stream=None, ws=None, timeout=600):
        """One measured phase: counters before (BASE.sys0, .stats0), the
        stream and the working set's readers (each a Load, or None) both
        connected, then started together; the readers stop when the stream
        is over (their runtime is only a bound); counters after."""
        name = os.path.basename(base)
        label = "/".join(name.split("."))
        groups.snapshot(base + ".sys0", group, ws_loopdev, self.srv.loopdev, self.kswapd)
        self.bench.counters(base + ".stats0", reset=True)
        runs = []
        if stream:
            sc = self.bench.start(base + ".stream.err", stream.export, stream.job, json_path=base + ".stream.json",
                                  label=label, sample_dir=stream.sample_dir, thread_interval_ms=500,
                                  go_file=base + ".go.stream" if ws else None, **stream.extra)
            runs.append((sc, base + ".go.stream"))
        if ws:
            job = dict(ws.job, runtime=timeout + 60) if stream else ws.job
            wc = self.bench.start(base + ".ws.err", ws.export, job, json_path=base + ".ws.json",
                                  label=label + "/ws", sample_dir=ws.sample_dir, server_pid=not stream,
                                  thread_interval_ms=500, go_file=base + ".go.ws" if stream else None,
                                  stop_file=base + ".stop" if stream else None, **ws.extra)
            runs.append((wc, base + ".go.ws"))
        if len(runs) == 2:
            go(runs)
        if stream:
            self.bench.record(base + ".stream", f"{name} stream", self.bench.wait(sc, timeout))
            with open(base + ".stop", "w", encoding="ascii"):
                pass
        if ws:
            # without a stream its runtime ends it; with one, the stop file
            # (dcache-bench also stops after 60 s without a reply)
            self.bench.record(base + ".ws", f"{name} working set",
                              self.bench.wait(wc, None if not stream else 180))
        groups.snapshot(base + ".sys1", group, ws_loopdev, self.srv.loopdev, self.kswapd)
        self.bench.counters(base + ".stats1")
        for _, f in runs:
            remove_go(f)
        if os.path.exists(base + ".stop"):
            os.unlink(base + ".stop")
        log("[pressure] " + summary_line(base))


class Pressure(GroupRuns):
    """The eight pressure workloads on one kernel mode's server."""

    def __init__(self, cfg, srv, bench, pdir, kernel, variants):
        super().__init__(cfg, srv, bench, pdir, kernel)
        self.variants = variants
        self.ws_dir = os.path.join(srv.mnt, "ws", "data")
        self.ws_file = mib_floor(cfg.size_of("pressure_ws") // 4)
        self.stream = cfg.size_of("pressure_stream")
        self.quarter, self.sixteenth = mib_floor(self.stream // 4), mib_floor(self.stream // 16)
        self.runtime = cfg.seconds_of("pressure_runtime")
        self.timeout = 600 + self.stream / MiB / 10

    @staticmethod
    def exports(variants, ids):
        """The variants' exports and the working set's (plain VFS, on the
        second filesystem mounted at MNT/ws)."""
        return [variantlib.export(v, ids[v]) for v in variants] + [vfs(WS_ID, "ws/data", "/ws")]

    def ws_readers(self, kind):
        """The working set's readers, each its quarter: hot (random READs
        without pause), touch (the whole quarter every TOUCH s), lat (paced:
        one READ at a time, 2 ms after each answer)."""
        common = dict(size=self.ws_file, filename="ws", time_based=1, **self.verify)
        job = {"hot": dict(rw="randread", bs=self.ws_bs, numjobs=4, iodepth=4),
               "touch": dict(rw="read", bs=self.ws_bs, numjobs=4, iodepth=4, pass_interval=self.touch),
               "lat": dict(rw="randread", bs=self.ws_bs, numjobs=4, iodepth=1, thinktime=2000)}[kind]
        return Load("ws", dict(job, **common), self.ws_dir)

    def stream_of(self, w):
        """(the stream's job, the readers' kind, the write set's file name)."""
        noisy_w = dict(rw="write", bs="1M", numjobs=4, iodepth=8, size=self.quarter, filename="nw", truncate=1,
                       time_based=1, runtime=self.runtime)
        noisy_r = dict(rw="read", bs="1M", numjobs=4, iodepth=8, size=self.quarter, filename="nr", time_based=1,
                       runtime=self.runtime, **self.verify)
        job, written = {
            "seq_write": (dict(rw="write", bs="1M", numjobs=1, iodepth=16, size=self.stream, filename="sw",
                               truncate=1), "sw"),
            "multi_write": (dict(rw="write", bs="1M", numjobs=16, iodepth=4, size=self.sixteenth, filename="mw",
                                 truncate=1), "mw"),
            "seq_read": (dict(rw="read", bs="1M", numjobs=1, iodepth=16, size=self.stream, filename="sr",
                              **self.verify), ""),
            "noisy_writer": (noisy_w, "nw"), "noisy_writer_touch": (noisy_w, "nw"), "lat_reader": (noisy_w, "nw"),
            "noisy_reader": (noisy_r, ""), "noisy_reader_touch": (noisy_r, ""),
        }[w]
        kind = "touch" if w.endswith("_touch") else "lat" if w == "lat_reader" else "hot"
        if kind == "touch":
            job = dict(job, runtime=self.touch_runtime)
        return job, kind, written

    def empty(self, v, written):
        """v's write set emptied (a run's stream data must not pile up)."""
        d = os.path.join(self.srv.mnt, v)
        for f in os.listdir(d) if written else []:
            if f.startswith(written + "."):
                os.truncate(os.path.join(d, f), 0)

    def run_one(self, m, w, v, r):
        base = os.path.join(self.pdir, f"{self.kernel}.{m}.{w}.{v}.{r}")
        job, kind, written = self.stream_of(w)
        self.empty(v, written)
        try:
            with self.group(m) as g:
                self.warm(base, g, self.warm_load(), self.srv.mnt)
                self.phase(base, g, self.srv.extra_loopdev, Load(v, job, os.path.join(self.srv.mnt, v)),
                           self.ws_readers(kind), self.timeout)
        except groups.Unavailable as e:
            log(f"pressure: no memory group: {e}")
        self.empty(v, written)

    def warm_load(self):
        return Load("ws", dict(rw="read", bs="1M", numjobs=4, iodepth=8, size=self.ws_file, filename="ws"))

    def solo(self, m, kind, r, tag):
        """The working set's readers alone, in a group as the runs'."""
        base = os.path.join(self.pdir, f"{self.kernel}.{m}.{tag}.{kind}.{r}")
        ws = self.ws_readers(kind)
        ws.job["runtime"] = self.touch_runtime if kind == "touch" else self.cfg.seconds_of("pressure_solo")
        try:
            with self.group(m) as g:
                self.warm(base, g, self.warm_load(), self.srv.mnt)
                self.phase(base, g, self.srv.extra_loopdev, None, ws)
        except groups.Unavailable as e:
            log(f"pressure: no memory group: {e}")

    def prepare(self, workloads):
        """The cold data sets, written once through the first variant's
        export and reflinked into the others' (the same blocks on XFS and
        btrfs, copies on ext4); then Ganesha's own memory grown as after a
        load (its arenas, the duplicate request cache), outside any group,
        so that no run's group is charged for it."""
        first = self.variants[0]
        if any(w.startswith("noisy_reader") for w in workloads):
            self.bench.quiet(first, dict(rw="write", bs="1M", numjobs=4, iodepth=8, size=self.quarter,
                                         filename="nr"), server_pid=False)
        if "seq_read" in workloads:
            self.bench.quiet(first, dict(rw="write", bs="1M", numjobs=1, iodepth=16, size=self.stream,
                                         filename="sr"), server_pid=False)
        src = os.path.join(self.srv.mnt, first)
        cold = [os.path.join(src, f) for f in os.listdir(src) if f.startswith(("nr.", "sr."))]
        for v in self.variants[1:]:
            if cold:
                subprocess.run(["cp", "--reflink=auto", "-t", os.path.join(self.srv.mnt, v), *cold], check=False)
        prime = 1 if self.cfg.quick else 3
        writer = self.bench.start("/dev/null", first, dict(rw="write", bs="1M", numjobs=16, iodepth=4,
                                                           size=self.sixteenth, filename="mw", truncate=1,
                                                           time_based=1, runtime=prime), server_pid=False)
        self.bench.quiet("ws", dict(rw="randread", bs=self.ws_bs, numjobs=4, iodepth=4, size=self.ws_file,
                                    filename="ws", time_based=1, runtime=prime), server_pid=False)
        self.bench.wait(writer, prime + 300)
        self.empty(first, "mw")

    def run(self, workloads, runs):
        log(f"pressure ({self.kernel}): WS {self.cfg.knob('pressure_ws')}, group {self.cfg.knob('pressure_limit')}, "
            f"STREAM {self.cfg.knob('pressure_stream')}, variants {' '.join(self.variants)}")
        self.prepare(workloads)
        kinds = list(dict.fromkeys(self.stream_of(w)[1] for w in workloads))
        for m in [x.split(".")[1] for x in runs if x.split(".")[0] == self.kernel]:
            for r in range(1, self.cfg.int_of("pressure_repeats") + 1):
                for kind in kinds:
                    self.solo(m, kind, r, "solo")
                for w in workloads:
                    for v in self.variants:
                        self.run_one(m, w, v, r)
                # the working set alone again: how far the machine drifted
                for kind in kinds:
                    self.solo(m, kind, r, "solo_end")
