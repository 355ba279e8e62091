"""The workloads that measure the whole process (memory, overload): a
server of its own per variant, so its memory and threads are that
variant's (servers/WORKLOAD.VARIANT.json, a summary, beside the
dcache-bench results it was made from)."""

import json
import os
import time

from . import groups
from .runner import log

MiB = 1 << 20


def rss_kib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def summary(base, workload, variant, idle, end, after, rcs):
    """BASE.json: the server's RSS at the marks, its threads and io-wq
    workers (sampled by dcache-bench every 50 ms), the load's results."""
    jobs = []
    for part in ("big", "small", "write"):
        try:
            with open(f"{base}.{part}.json", encoding="utf-8") as f:
                jobs.append(json.load(f))
        except (OSError, ValueError):
            pass
    threads = [j["server"]["threads"] for j in jobs if "threads" in j.get("server", {})]
    out = {"workload": workload, "variant": variant, "idle_kib": idle, "load_end_kib": end, "after_kib": after,
           "rss_peak_kib": max((t.get("rss_peak_kib", 0) for t in threads), default=0),
           "threads_peak": max((t["threads_peak"] for t in threads), default=0),
           "iowq_peak": max((t["iowq_peak"] for t in threads), default=0),
           "samples": sum(t["samples"] for t in threads), "exit_codes": rcs,
           "mib_s": sum(j["total"]["mib_s"] for j in jobs),
           "bytes": sum(j["total"]["bytes"] for j in jobs),
           "errors": sum(j.get("errors", 0) for j in jobs),
           "first_error": next((j.get("first_error") for j in jobs if j.get("first_error")), ""),
           "verify_errors": sum(j.get("verify", {}).get("errors", 0) for j in jobs),
           # every job samples the same server over the same time
           "server_cpu_s": sum(j["server"]["cpu_s"] for j in jobs) / max(len(jobs), 1),
           "write_lat_p99_us": max((j["write"]["lat_p99_us"] for j in jobs if j["write"]["ops"]), default=None)}
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)


class OwnServer:
    """memory and overload on one variant's own server."""

    def __init__(self, cfg, srv, bench, out):
        self.cfg, self.srv, self.bench = cfg, srv, bench
        self.dir = os.path.join(out, "servers")
        os.makedirs(self.dir, exist_ok=True)

    def memory(self, v):
        """48 connections of 60/40 1 MiB I/O and 16 of 4 KiB random I/O,
        iodepth 16, for --memory-load s, then --memory-idle s idle: the
        RSS before, at peak and after."""
        load, idle_s = self.cfg.seconds_of("memory_load"), self.cfg.seconds_of("memory_idle")
        size = 16 * MiB if self.cfg.quick else 64 * MiB
        base = os.path.join(self.dir, f"memory.{v}")
        idle = rss_kib(self.srv.pid)
        self.bench.counters(base + ".stats0", reset=True)
        common = dict(size=size, time_based=1, runtime=load)
        big = dict(rw="rw", rwmixread=60, bs="1M", numjobs=48, iodepth=16, filename="mem", **common)
        small = dict(rw="randrw", bs="4k", numjobs=16, iodepth=16, filename="memsmall", **common)
        big = self.bench.start(base + ".big.err", v, big, json_path=base + ".big.json")
        small = self.bench.start(base + ".small.err", v, small, json_path=base + ".small.json")
        rcs = [self.bench.wait(big, load + 300), self.bench.wait(small, load + 300)]
        end = rss_kib(self.srv.pid)
        log(f"memory {v}: load done (RSS {end // 1024} MiB), idle {idle_s:g} s")
        time.sleep(idle_s)  # the idle time is what is measured: what the server gives back
        after = rss_kib(self.srv.pid)
        self.bench.counters(base + ".stats1")
        summary(base, "memory", v, idle, end, after, rcs)

    def overload(self, v):
        """The device throttled to --overload-bps, 256 connections x iodepth
        32 (--quick 32 x 8) of 1 MiB WRITEs for --overload-load s; what is in
        flight when it stops drains at the throttled rate."""
        jobs, depth = (32, 8) if self.cfg.quick else (256, 32)
        load, bps = self.cfg.seconds_of("overload_load"), self.cfg.size_of("overload_bps")
        base = os.path.join(self.dir, f"overload.{v}")
        try:
            with groups.throttle(self.srv, bps):
                idle = rss_kib(self.srv.pid)
                self.bench.counters(base + ".stats0", reset=True)
                drain = jobs * depth * MiB / bps
                rc = self.bench.run(base + ".write.err", v, dict(
                    rw="write", bs="1M", numjobs=jobs, iodepth=depth, size=64 * MiB, filename="over", time_based=1,
                    runtime=load), json_path=base + ".write.json", timeout=load + drain + 300)
                end = rss_kib(self.srv.pid)
                self.bench.counters(base + ".stats1")
        except groups.Unavailable as e:
            log(f"overload skipped: {e}")
            with open(base + ".skipped", "w", encoding="utf-8") as f:
                f.write(f"{e}\n")
            return
        summary(base, "overload", v, idle, end, end, [rc])
