"""The order of a run: the options, the build, the variants (`auto` only
when the module accepts it), machine.txt, then each kind of run on its
servers (shared, a server per variant, the pressure matrix, one export
carrying both), then the report (tools/bench_report.py)."""

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

from dcache_testbed import releases
from dcache_testbed.procs import Timeout
from dcache_testbed.server import Server, ServerError

from . import config, groups, shared, variants as variantlib
from .one_export import OneExport, server_args
from .own_server import OwnServer
from .pressure import Pressure
from .runner import Bench, log

TOP = releases.TOP
GiB = 1 << 30
MiB = 1 << 20


class Failed(Exception):
    """A usage or setup error: the message says what to do."""


def newer_source(module, sources):
    """A file under sources changed since module was built (its path), or
    None: a release's module is built once into its own build-X/ and
    would otherwise be served after the code moved on."""
    built = os.path.getmtime(module)
    for d, _, files in os.walk(sources):
        for f in files:
            p = os.path.join(d, f)
            if os.path.getmtime(p) > built:
                return p
    return None


def refused_exports(srv, ids):
    """variant -> the log line of each export the server refused."""
    by_id = {i: v for v, i in ids.items()}
    out = {}
    for m in re.finditer(r"^.*DCACHE: export (\d+) .*export refused.*$", srv.log(), re.M):
        v = by_id.get(int(m.group(1)))
        if v:
            out[v] = m.group(0).strip()
    return out


class Driver:
    def __init__(self, cfg):
        self.cfg = cfg
        self.release = releases.select(cfg.ganesha)
        self.build = os.path.abspath(cfg.build or os.environ.get("DCACHE_BUILD_DIR") or os.path.join(TOP, "build"))
        self.bench = os.path.join(self.build, "tools", "dcache-bench")
        adapter = os.path.join(self.build, "fsal_dcache", "adapter")
        self.plugin = self.release.plugin if self.release.root else os.path.join(adapter, "libfsaldcache.so")
        self.check = os.path.join(adapter, "dcache-check")
        self.status = 0

    # ------------------------------------------------------- the setup --
    def ensure_built(self):
        env = dict(os.environ, DCACHE_BUILD_DIR=self.build)
        if not os.access(self.bench, os.X_OK) or (not self.release.root and not os.path.isfile(self.plugin)):
            log(f"building into {self.build} (ci/build.sh)")
            subprocess.run([os.path.join(TOP, "ci", "build.sh")], env=env, check=True, stdout=sys.stderr)
        changed = os.path.isfile(self.plugin) and self.release.root and \
            newer_source(self.plugin, os.path.join(TOP, "fsal_dcache"))
        if changed:
            log(f"the {self.release.name} module is older than {os.path.relpath(changed, TOP)}: built again")
        if not os.path.isfile(self.plugin) or changed:
            log(f"building the {self.release.name} module (ci/build.sh --ganesha {self.release.name})")
            subprocess.run([os.path.join(TOP, "ci", "build.sh"), "--ganesha", self.release.name], check=True,
                           stdout=sys.stderr)

    def choose_variants(self):
        """--variants, or every variant; `auto` asked for by name must be
        accepted by the module, and joins the defaults only when it is."""
        why = variantlib.auto_refused(self.check)
        chosen = self.cfg.variants
        if chosen is None:
            chosen = [v for v in variantlib.defaults() if v != "auto" or not why]
            if why:
                log(f"variant auto left out: the module refuses it ({why})")
        elif any(v.startswith("auto") for v in chosen) and why:
            raise Failed(f"variant auto: the module {self.plugin} refuses IO_Cache_Read/IO_Cache_Write = auto "
                         f"({why}); build one that has it, or leave auto out of --variants")
        self.cfg.variants = chosen
        self.ids = variantlib.ids(chosen)

    def family_variants(self, knob):
        """The variants of --variants that a family's list names (auto
        with them whenever it runs)."""
        wanted = self.cfg.list_of(knob) + (["auto"] if knob == "one_export_variants" else [])
        return [v for v in self.cfg.variants if v in wanted]

    def server(self, name, **kw):
        """A Server of the run's release and module; started by `with`."""
        return NamedServer(name, self.out, release=self.release, plugin=self.plugin, fs=self.cfg.fs,
                           log_level=self.cfg.log_level, **kw)

    def machine(self):
        r = self.release
        if r.root:
            version = subprocess.run(["dpkg-query", f"--admindir={r.root}/var/lib/dpkg", "-W", "-f=${Version}",
                                      "nfs-ganesha"], capture_output=True, text=True, check=False).stdout or "?"
            desc = (f"{r.name} (Debian {r.install_suite or r.suite}'s nfs-ganesha {version}, ganesha.nfsd chrooted "
                    f"in {os.path.relpath(r.root, TOP)})")
        else:
            version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "nfs-ganesha"], capture_output=True,
                                     text=True, check=False).stdout or "?"
            desc = f"{r.name} (Debian 12's nfs-ganesha {version}, the host's ganesha.nfsd)"
        with open("/proc/meminfo", encoding="ascii") as f:
            mem = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        tmp = os.environ.get("TMPDIR", "/tmp")
        src = subprocess.run(["findmnt", "-no", "SOURCE", "--target", tmp], capture_output=True, text=True,
                             check=False).stdout.strip()
        disk = subprocess.run(["lsblk", "-ndo", "NAME,SIZE,ROTA,MODEL", re.sub(r"[0-9]*$", "", src)],
                              capture_output=True, text=True, check=False).stdout.split()
        lines = [f"command: tools/bench-report.sh {' '.join(sys.argv[1:])}",
                 f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
                 f"nproc: {os.cpu_count()}", f"memory: {mem / 1048576:.1f} GiB", f"kernel: {os.uname().release}",
                 f"ganesha: {desc}", f"module: {self.plugin}",
                 f"disk: {' '.join(disk) or 'unknown'} (image on {tmp}, loop --direct-io=on, {self.cfg.fs.upper()})",
                 f"size: {self.cfg.knob('size')} ({self.cfg.size} bytes per variant), runtime: {self.cfg.runtime:g}s, "
                 f"repeats: {self.cfg.repeats}"]
        reporting = "/sys/module/page_reporting/parameters"
        if os.path.isdir(reporting):
            # a virtual machine handing free memory back to its host: the
            # first touch of memory free for a few seconds is a host page
            # fault (docs/benchmarks.md, "Known limits")
            try:
                with open(os.path.join(reporting, "page_reporting_order"), encoding="ascii") as f:
                    order = f.read().strip()
            except OSError:
                order = "?"
            lines.append(f"free page reporting: on (page_reporting_order {order}): memory free for a few seconds "
                         "goes back to the host, and growing the page cache costs a host fault per page")
        if self.cfg.device_bps:
            lines.append(f"device: throttled to {self.cfg.device_bps} bytes/s (--device-bps, cgroup v1 blkio), "
                         "except latency (its own)")
        self.note(*lines)

    def note(self, *lines):
        with open(os.path.join(self.out, "machine.txt"), "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))

    # ------------------------------------------------------ the kinds --
    def run_server(self, name, body, **kw):
        """body(srv, bench) on a server of its own; a server that fails is
        reported and the run goes on."""
        try:
            with self.server(name, **kw) as srv:
                refused = refused_exports(srv, self.ids)
                if refused:
                    raise Failed("; ".join(f"variant {v}: the server refused its export: {line}"
                                           for v, line in refused.items()))
                body(srv, Bench(self.bench, srv, self.cfg.perf))
        except (ServerError, Timeout, OSError, subprocess.CalledProcessError) as e:
            log(f"FAILED: the {name} server: {e}")
            self.status = 1

    def shared(self, workloads):
        exports = [variantlib.export(v, self.ids[v]) for v in self.cfg.variants]
        if "latency" in workloads:
            exports.append(shared.probe_export())
        n, size = len(self.cfg.variants), self.cfg.size
        # every variant's data, the interleave files of every repeat, one
        # stream, slack; latency's streamed files (twice, XFS preallocates)
        image = (size * 7 // 2 + size * self.cfg.repeats // 2) * n + GiB
        if "latency" in workloads:
            image += n * self.cfg.int_of("latency_jobs") * 16 * MiB
        self.run_server("shared", lambda srv, b: shared.Shared(self.cfg, srv, b, self.out).run(
            self.cfg.variants, workloads), exports=exports, image_size=str(image))

    def own_servers(self, workloads):
        # memory lays out 64 files of 64 MiB: 4 GiB and slack
        image = str(max(6 * GiB, 2 * self.cfg.size))
        for w in workloads:
            for v in self.family_variants(f"{w}_variants"):
                log(f"{w} {v}: a server of its own")

                def body(srv, b, w=w, v=v):
                    getattr(OwnServer(self.cfg, srv, b, self.out), w)(v)
                self.run_server(f"{w}.{v}", body, exports=[variantlib.export(v, self.ids[v])], image_size=image)

    def groups_family(self, family, workloads, knob_variants, knob_runs, make, server_kw, describe):
        """The pressure matrix or the one-export workloads: a server per
        kernel mode, results in DIR/family/."""
        pdir = os.path.join(self.out, family)
        os.makedirs(pdir, exist_ok=True)
        vs = self.family_variants(knob_variants)
        why = groups.available("memory")
        if not vs or why:
            why = why or f"no variant of --variants in --{knob_variants.replace('_', '-')}"
            log(f"{family}: {why}; skipped")
            with open(os.path.join(pdir, "skipped"), "w", encoding="utf-8") as f:
                f.write(why + "\n")
            return
        runs = config.runs_list(self.cfg.knob(knob_runs), knob_runs)
        with open(os.path.join(pdir, "config.json"), "w", encoding="utf-8") as f:
            json.dump(describe(vs, runs), f)
        for kernel in dict.fromkeys(x.split(".")[0] for x in runs):
            env = {"DCACHE_TEST_NO_RWF_DONTCACHE": "1"} if kernel == "norwf" else {}
            self.run_server(f"{family}.{kernel}", lambda srv, b, k=kernel: make(srv, b, pdir, k, vs).run(
                workloads, runs), ganesha_env=env, **server_kw(vs))

    def pressure(self, workloads):
        c = self.cfg
        ws, stream = c.size_of("pressure_ws"), c.size_of("pressure_stream")
        touch, touches = c.seconds_of("pressure_touch"), c.int_of("pressure_touches")

        def describe(vs, runs):
            return {"ws": ws, "limit": c.size_of("pressure_limit"), "stream": stream,
                    "runtime": c.seconds_of("pressure_runtime"), "touch": touch, "touches": touches,
                    "touch_runtime": touches * touch + touch / 2, "solo": c.seconds_of("pressure_solo"),
                    "repeats": c.int_of("pressure_repeats"), "ws_bs": c.knob("pressure_ws_bs"),
                    "runs": ",".join(runs), "variants": ",".join(vs), "fs": c.fs}

        def server_kw(vs):
            # the cold data sets (2 x STREAM, reflinked; copied per variant
            # on ext4), one write set at a time, slack; the working set's
            # filesystem: WS twice and slack
            image = 4 * stream + 2 * GiB + (2 * stream * len(vs) if c.fs == "ext4" else 0)
            return dict(exports=Pressure.exports(vs, self.ids), extra_fs=("ws", str(2 * ws + 512 * MiB)),
                        image_size=str(image))
        self.note(f"pressure: WS {c.knob('pressure_ws')}, memory group {c.knob('pressure_limit')}, STREAM "
                  f"{c.knob('pressure_stream')}, RUNTIME {c.knob('pressure_runtime')}s, TOUCH every "
                  f"{touch:g}s x {touches} (stream {touches * touch + touch / 2:g}s), runs "
                  f"{c.knob('pressure_runs')}, variants {','.join(self.family_variants('pressure_variants'))}")
        self.groups_family("pressure", workloads, "pressure_variants", "pressure_runs",
                           lambda srv, b, pdir, k, vs: Pressure(c, srv, b, pdir, k, vs), server_kw, describe)

    def one_export(self, workloads):
        c = self.cfg

        def describe(vs, runs):
            return {"ws": c.size_of("mixed_ws"), "file": c.size_of("mixed_file"), "stream": c.size_of("mixed_stream"),
                    "reread_fit": c.size_of("reread_fit"), "reread_big": c.size_of("reread_big"),
                    "limit": c.size_of("pressure_limit"), "runtime": c.seconds_of("pressure_runtime"),
                    "touch": c.seconds_of("pressure_touch"), "solo": c.seconds_of("pressure_solo"),
                    "runs": ",".join(runs), "variants": ",".join(vs), "fs": c.fs}
        self.note(f"one export: working set {c.knob('mixed_ws')} in files of {c.knob('mixed_file')}, stream "
                  f"{c.knob('mixed_stream')}, reread {c.knob('reread_fit')} / {c.knob('reread_big')}, memory group "
                  f"{c.knob('pressure_limit')}, runs {c.knob('one_export_runs')}, variants "
                  f"{','.join(self.family_variants('one_export_variants'))}")
        self.groups_family("one_export", workloads, "one_export_variants", "one_export_runs",
                           lambda srv, b, pdir, k, vs: OneExport(c, srv, b, pdir, k, vs),
                           lambda vs: server_args(c, vs, self.ids), describe)

    # ------------------------------------------------------------ all --
    def run(self):
        if os.geteuid() != 0:
            raise Failed("must run as root (loop devices, mounts, namespaces)")
        self.ensure_built()
        self.choose_variants()
        if self.cfg.device_bps and groups.available("blkio"):
            raise Failed(f"--device-bps: no device throttle here ({groups.available('blkio')})")
        self.out = os.path.abspath(self.cfg.out or os.path.join(
            self.build, "bench-report-" + time.strftime("%Y%m%d-%H%M%S")))
        os.makedirs(os.path.join(self.out, "runs"), exist_ok=True)
        with open(os.path.join(self.out, "variants.txt"), "w", encoding="ascii") as f:
            f.write("".join(f"{v} {i}\n" for v, i in self.ids.items()))
        self.machine()
        start = time.monotonic()
        os.environ.pop("DCACHE_TEST_NO_RWF_DONTCACHE", None)  # the norwf servers set it, no other
        if self.cfg.in_family(config.SHARED):
            self.shared(self.cfg.in_family(config.SHARED))
        if self.cfg.in_family(config.OWN_SERVER):
            self.own_servers(self.cfg.in_family(config.OWN_SERVER))
        if self.cfg.in_family(config.PRESSURE):
            self.pressure(self.cfg.in_family(config.PRESSURE))
        if self.cfg.in_family(config.ONE_EXPORT):
            self.one_export(self.cfg.in_family(config.ONE_EXPORT))
        self.note(f"elapsed: {time.monotonic() - start:.0f} s")
        report = subprocess.run([sys.executable, os.path.join(TOP, "tools", "bench_report.py"), self.out], check=False)
        log(f"results in {self.out} (table.md, results.json, chart.png, chart-cpu.png, chart-pagecache.png)")
        return self.status or report.returncode


class NamedServer(Server):
    """A Server whose ganesha.log is kept in OUT/logs/NAME.ganesha.log."""

    def __init__(self, name, out, **kw):
        super().__init__(**kw)
        self.name, self.out = name, out

    def stop(self):
        if self.ganesha:
            self.stop_ganesha()
        if self.state and os.path.exists(self.log_path):
            os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
            shutil.copy(self.log_path, os.path.join(self.out, "logs", f"{self.name}.ganesha.log"))
        return super().stop()


def main(argv=None):
    try:
        cfg = config.parse(sys.argv[1:] if argv is None else argv)
        return Driver(cfg).run()
    except (config.UsageError, Failed, LookupError) as e:
        print(f"bench-report: {e}", file=sys.stderr)
        return 2
