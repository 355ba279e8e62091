"""The options: what to run (variants, workloads), how big and how long,
with the defaults of a full run and of --quick. Every knob the shell
driver read from a DCACHE_BENCH_* variable is an option now; such a
variable still set is refused with the option's name (old_knobs)."""

import argparse
import os
import re
from dataclasses import dataclass

from . import variants as variantlib

# The workloads of the one shared server, in table order; those with a
# server per variant; the pressure matrix's (a stream beside a working set
# on a VFS export of its own); the one-export workloads (a stream and a
# working set through the same export).
SHARED = ["mix", "randread", "randwrite", "reread", "stream", "interleave", "interleave_commit_end",
          "interleave_commit_every", "interleave_slow", "mempressure", "commit", "latency"]
OWN_SERVER = ["memory", "overload"]
PRESSURE = ["seq_write", "seq_read", "multi_write", "noisy_writer", "noisy_writer_touch", "noisy_reader",
            "noisy_reader_touch", "lat_reader"]
ONE_EXPORT = ["mixed", "reread_fit", "reread_big", "noisy_pair"]
ALL = SHARED + OWN_SERVER + PRESSURE + ONE_EXPORT
# names that stand for several workloads in --workloads
FAMILIES = {"pressure": PRESSURE, "one_export": ONE_EXPORT}

# (option, full default, --quick default); None: no default (see Config)
DEFAULTS = {
    "size": ("1G", "256M"), "runtime": ("5", "2"), "repeats": ("3", "1"),
    "interleave_writers": ("32", "32"),
    "latency_variants": ("vfs,buffered,buffered_sync,direct,direct_sync",) * 2,
    "latency_bps": ("50M", "50M"), "latency_jobs": ("128", "32"), "latency_depth": ("4", "4"),
    "latency_load": ("20", "6"),
    "memory_variants": ("vfs,buffered,dontcache,direct",) * 2,
    "memory_load": ("180", "20"), "memory_idle": ("60", "10"),
    "overload_variants": ("vfs,direct,direct_sync",) * 2,
    "overload_load": ("20", "5"), "overload_bps": ("50M", "50M"),
    "pressure_variants": ("vfs,buffered,dontcache,fadvise,direct,direct_file_sync", "vfs,dontcache,direct"),
    "pressure_runs": ("rwf.limit,norwf.limit,rwf.whole", "rwf.limit,norwf.limit"),
    "pressure_ws": ("384M", "64M"), "pressure_limit": ("1G", "256M"), "pressure_stream": ("3G", "1G"),
    "pressure_runtime": ("20", "3"), "pressure_touch": ("8", "1.5"), "pressure_touches": ("3", "2"),
    "pressure_solo": ("10", "3"), "pressure_repeats": ("1", "1"), "pressure_ws_bs": ("64k", "64k"),
    # the one-export workloads: `auto` joins these lists when the module
    # accepts it (variants.auto_refused)
    "one_export_variants": ("vfs,buffered,dontcache,fadvise,direct,direct_file_sync", "vfs,dontcache,direct"),
    "one_export_runs": ("rwf.limit,rwf.whole", "rwf.limit,rwf.whole"),
    "mixed_ws": ("384M", "64M"), "mixed_file": ("4M", "4M"), "mixed_stream": ("6G", "1G"),
    "reread_fit": ("512M", "128M"), "reread_big": ("2G", "512M"),
}

# The shell driver's variables, and the option each became.
OLD_KNOBS = {
    "DCACHE_BENCH_DEVICE_BPS": "--device-bps", "DCACHE_BENCH_INTERLEAVE_WRITERS": "--interleave-writers",
    "DCACHE_BENCH_LATENCY_VARIANTS": "--latency-variants", "DCACHE_BENCH_LATENCY_BPS": "--latency-bps",
    "DCACHE_BENCH_LATENCY_JOBS": "--latency-jobs", "DCACHE_BENCH_LATENCY_DEPTH": "--latency-depth",
    "DCACHE_BENCH_MEMORY_VARIANTS": "--memory-variants", "DCACHE_BENCH_MEMORY_LOAD": "--memory-load",
    "DCACHE_BENCH_MEMORY_IDLE": "--memory-idle", "DCACHE_BENCH_OVERLOAD_VARIANTS": "--overload-variants",
    "DCACHE_BENCH_OVERLOAD_LOAD": "--overload-load", "DCACHE_BENCH_OVERLOAD_BPS": "--overload-bps",
    **{f"DCACHE_BENCH_PRESSURE_{k.upper()}": f"--pressure-{k.replace('_', '-')}"
       for k in ("variants", "runs", "ws", "limit", "stream", "runtime", "touch", "touches", "solo", "repeats",
                 "verify", "ws_bs")},
    "DCACHE_E2E_FS": "--fs", "DCACHE_E2E_LOG_LEVEL": "--log-level",
}

UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class UsageError(Exception):
    """A bad option value: the message says which and why."""


def to_bytes(text, what):
    """"256M", "1.5G", "64k", "4096" -> bytes (binary units, as numfmt --from=iec)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", str(text).strip(), re.I)
    if not m:
        raise UsageError(f"{what} {text}: not a size (4096, 64k, 256M, 1G)")
    return int(float(m.group(1)) * UNITS[m.group(2).lower()])


def seconds(text, what):
    try:
        value = float(text)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"{what} {text}: must be seconds")
    return value


def positive(text, what):
    if not re.fullmatch(r"[1-9]\d*", str(text)):
        raise UsageError(f"{what} {text}: must be a positive integer")
    return int(text)


def runs_list(text, what):
    """KERNEL.MEMORY pairs: rwf|norwf . limit|whole."""
    out = [x for x in text.split(",") if x]
    for x in out:
        if not re.fullmatch(r"(rwf|norwf)\.(limit|whole)", x):
            raise UsageError(f"{what}: {x!r} is not KERNEL.MEMORY, (rwf|norwf).(limit|whole)")
    return out


@dataclass
class Config:
    """Everything a run is told, sizes in bytes, times in seconds."""

    args: argparse.Namespace
    quick: bool
    size: int
    runtime: float
    repeats: int
    variants: list        # None until main resolves the default (auto or not)
    workloads: list
    device_bps: int

    def __getattr__(self, name):
        if name == "args":
            raise AttributeError(name)
        return getattr(self.args, name)

    def knob(self, name):
        """The option's value, or its default for this kind of run."""
        value = getattr(self.args, name)
        return DEFAULTS[name][1 if self.quick else 0] if value is None else value

    def size_of(self, name):
        return to_bytes(self.knob(name), "--" + name.replace("_", "-"))

    def seconds_of(self, name):
        return seconds(self.knob(name), "--" + name.replace("_", "-"))

    def int_of(self, name):
        return positive(self.knob(name), "--" + name.replace("_", "-"))

    def list_of(self, name):
        return [x for x in self.knob(name).split(",") if x]

    def in_family(self, names):
        return [w for w in self.workloads if w in names]


def parser():
    p = argparse.ArgumentParser(
        prog="tools/bench-report.sh",
        description="Every DCACHE cache mode side by side against plain VFS on private ganesha.nfsd servers; "
                    "docs/benchmarks.md is the method, the workloads and the columns.",
        epilog="Families: --workloads pressure (the eight pressure workloads), --workloads one_export "
               f"({', '.join(ONE_EXPORT)}). Workloads: {', '.join(ALL)}. Variants: "
               f"{', '.join(variantlib.names())} (auto and its variants: only with a module that accepts auto; "
               f"{', '.join(variantlib.NAMED_ONLY)} only when named).")
    a = p.add_argument
    a("--quick", action="store_true", help="a smoke run: 1 repeat, small sizes, short loads")
    a("--out", help="the output directory (default: BUILD/bench-report-DATE)")
    a("--size", help="bytes per variant of mix, reread, stream, commit (1G; --quick 256M)")
    a("--runtime", help="seconds of randread and randwrite (5; --quick 2)")
    a("--repeats", help="repeats of the shared workloads (3; --quick 1)")
    a("--variants", help="comma-separated variants (default: all, auto when the module accepts it)")
    a("--workloads", help="comma-separated workloads or families (default: all)")
    a("--memcg-limit", help="mempressure's memory group (default max(SIZE/4, 384M))")
    a("--perf", action="store_true", help="perf record -g of ganesha.nfsd during every measured run, "
      "into runs/W.V.R.perf.data (perf report -i FILE)")
    a("--ganesha", help="the Ganesha release that serves (ci/releases.tsv; default $DCACHE_GANESHA, else the host's)")
    a("--build", help="the build tree with dcache-bench and the module (default $DCACHE_BUILD_DIR, else build/)")
    a("--fs", default="xfs", choices=["xfs", "ext4", "btrfs"], help="the servers' filesystem (xfs)")
    a("--log-level", default="EVENT", help="the FSAL component's log level in ganesha.log (EVENT)")
    a("--device-bps", help="throttle the shared server's loop device to RATE bytes/s (cgroup v1 blkio), "
      "every workload but latency")
    g = p.add_argument_group("shared server").add_argument
    g("--interleave-writers", help="writers of the interleave workloads (32)")
    g("--latency-variants", help="latency's variants (vfs,buffered,buffered_sync,direct,direct_sync)")
    g("--latency-bps", help="latency's device throttle (50M)")
    g("--latency-jobs", help="latency's streaming connections (128; --quick 32)")
    g("--latency-depth", help="their iodepth (4)")
    g("--latency-load", help="seconds of latency's load (20; --quick 6)")
    g = p.add_argument_group("a server per variant").add_argument
    g("--memory-variants", help="memory's variants (vfs,buffered,dontcache,direct)")
    g("--memory-load", help="seconds of memory's load (180; --quick 20)")
    g("--memory-idle", help="seconds idle after it (60; --quick 10)")
    g("--overload-variants", help="overload's variants (vfs,direct,direct_sync)")
    g("--overload-load", help="seconds of overload's load (20; --quick 5)")
    g("--overload-bps", help="overload's device throttle (50M)")
    g = p.add_argument_group("streaming beside a working set (pressure; the one-export workloads share "
                             "the group, touch, runtime, solo, repeats, verify and READ size)").add_argument
    g("--pressure-variants",
      help="vfs,buffered,dontcache,fadvise,direct,direct_file_sync (--quick vfs,dontcache,direct)")
    g("--pressure-runs", help="KERNEL.MEMORY runs: rwf.limit,norwf.limit,rwf.whole (--quick the limit two)")
    g("--pressure-ws", help="the working set (384M; --quick 64M)")
    g("--pressure-limit", help="the memory group (1G; --quick 256M)")
    g("--pressure-stream", help="size-based streams and cold data sets (3G; --quick 1G)")
    g("--pressure-runtime", help="seconds of a time-based stream (20; --quick 3)")
    g("--pressure-touch", help="seconds between two passes over the working set (8; --quick 1.5)")
    g("--pressure-touches", help="passes during a touch stream (3; --quick 2)")
    g("--pressure-solo", help="seconds of the working set alone (10; --quick 3)")
    g("--pressure-repeats", help="repeats (1)")
    g("--pressure-verify", action="store_true", help="verify every READ's pattern (off)")
    g("--pressure-ws-bs", help="the working set's READ size (64k)")
    g = p.add_argument_group("one export carrying both (mixed, reread_fit, reread_big, noisy_pair)").add_argument
    g("--one-export-variants", help="vfs,buffered,dontcache,fadvise,direct,direct_file_sync, and auto when the "
      "module accepts it (--quick vfs,dontcache,direct, auto)")
    g("--one-export-runs", help="KERNEL.MEMORY runs (rwf.limit,rwf.whole)")
    g("--mixed-ws", help="mixed's working set, and noisy_pair's readers' data (384M; --quick 64M)")
    g("--mixed-file", help="the size of each of its files (4M)")
    g("--mixed-stream", help="mixed's stream, written then read (6G; --quick 1G)")
    g("--reread-fit", help="reread_fit's data set, within the group (512M; --quick 128M)")
    g("--reread-big", help="reread_big's, larger than the group (2G; --quick 512M)")
    return p


def old_knobs(environ=None):
    """The shell driver's variables still set: "VAR (now --option)" each."""
    environ = os.environ if environ is None else environ
    return [f"{k} (now {v})" for k, v in OLD_KNOBS.items() if environ.get(k)]


def parse(argv):
    """argv -> Config; raises UsageError with the reason."""
    args = parser().parse_args(argv)
    old = old_knobs()
    if old:
        raise UsageError("these variables are options now: " + ", ".join(old))
    quick = args.quick

    def pick(name):
        return getattr(args, name) or DEFAULTS[name][1 if quick else 0]
    workloads = []
    for w in (args.workloads.split(",") if args.workloads else ALL):
        for x in FAMILIES.get(w, [w]):
            if x not in ALL:
                raise UsageError(f"unknown workload {x!r} (known: {', '.join(ALL)}; families: "
                                 f"{', '.join(FAMILIES)})")
            if x not in workloads:
                workloads.append(x)
    chosen = None
    if args.variants:
        chosen = [v for v in args.variants.split(",") if v]
        for v in chosen:
            if v not in variantlib.names():
                raise UsageError(f"unknown variant {v!r} (known: {', '.join(variantlib.names())})")
    cfg = Config(args=args, quick=quick, size=to_bytes(pick("size"), "--size"),
                 runtime=seconds(pick("runtime"), "--runtime"), repeats=positive(pick("repeats"), "--repeats"),
                 variants=chosen, workloads=workloads,
                 device_bps=to_bytes(args.device_bps, "--device-bps") if args.device_bps else 0)
    # every value checked now, not an hour into the run
    for name in DEFAULTS:
        if name.endswith(("_variants",)):
            for v in cfg.list_of(name):
                if v not in variantlib.names():
                    raise UsageError(f"--{name.replace('_', '-')}: unknown variant {v!r}")
        elif name.endswith("_runs"):
            runs_list(cfg.knob(name), "--" + name.replace("_", "-"))
        elif name in ("pressure_runtime", "pressure_touch", "pressure_solo", "memory_load", "memory_idle",
                      "overload_load", "latency_load"):
            cfg.seconds_of(name)
        elif name in ("pressure_touches", "pressure_repeats", "interleave_writers", "latency_jobs",
                      "latency_depth"):
            cfg.int_of(name)
        elif name not in ("size", "runtime", "repeats"):
            cfg.size_of(name)
    if cfg.size_of("pressure_limit") <= cfg.size_of("pressure_ws"):
        raise UsageError(f"--pressure-limit ({cfg.knob('pressure_limit')}) must be above the working set "
                         f"({cfg.knob('pressure_ws')})")
    if cfg.size_of("mixed_file") > cfg.size_of("mixed_ws"):
        raise UsageError("--mixed-file must not be larger than --mixed-ws")
    return cfg
