"""bench_smoke: tools/bench-report.sh --quick with tiny sizes on real
servers (tools/dcache_testbed), run once for the module; the tests read
its results.json. That every variant of every workload ran (or says why
it was skipped), read data and verified it without an error; that
ganesha.nfsd's threads were sampled and every IO_Backend = sync twin got
its io_uring/sync ratio; that the boundary-page tracker kept the shared
pages; that COMMITs were timed; that the latency probe was answered
beside the throttled streaming load; that the servers of the memory and
overload workloads gave back their memory after the load and made
requests wait for a place under overload; that the pressure workloads
ran for vfs, dontcache and direct with and without RWF_DONTCACHE, their
working set read and verified beside every stream, the group's counters
read, and dontcache took its fallback exactly where RWF_DONTCACHE was
refused; that the one-export workloads ran every phase with the working
set's device reads counted; that table.md reports the server's CPU per
GiB for every phase; and that the charts were drawn.

Run by ctest as bench_smoke (labels e2e, bench; BUILD from DCACHE_BUILD).
"""

import json
import os
import re
import subprocess
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(TOP, "tools"))
# pylint: disable=wrong-import-position
from bench_driver import variants as variantlib  # noqa: E402

BUILD = os.environ.get("DCACHE_BUILD") or os.path.join(TOP, "build")
INTERLEAVES = ["interleave", "interleave_commit_end", "interleave_commit_every", "interleave_slow"]
SHARED = ["mix", "randread", "randwrite", "reread", *INTERLEAVES, "mempressure", "commit"]
PRESSURE = ["seq_write", "seq_read", "multi_write", "noisy_writer", "noisy_writer_touch", "noisy_reader",
            "noisy_reader_touch", "lat_reader"]
ONE_EXPORT = {"mixed": ["solo", "write", "read"], "reread_fit": ["pass1", "pass2", "pass3"],
              "reread_big": ["pass1", "pass2", "pass3"], "noisy_pair": ["solo", "noisy"]}
# The pressure group (GROUP_MIB) is between the working set (16M) and
# working set + stream (336M), and holds what cannot be reclaimed: the
# server's own memory, Ganesha's buffers for multi_write's 16 x 4 WRITEs
# of 1 MiB in flight (two each on 4.3: the receive buffer and the copy its
# decoder makes of the data, 128 MiB charged to the group), a direct
# export's bounce buffers, and dontcache's pages under write-back without
# RWF_DONTCACHE (up to one per WRITE in flight: 64 MiB). At 192M the
# memory group's OOM killer took the server in multi_write (direct, then
# dontcache without RWF_DONTCACHE: 132 MiB of its own and 59 MiB under
# write-back), at 96M in multi_write/direct. reread_big's data set (320M)
# is larger than the group, reread_fit's (32M) fits; mixed's stream (512M)
# outlasts half a touch (the first pass beside it). The loads are as short
# as still gives every figure the tests read: the run took 6:05 with
# 1 s random loads, 6 s of latency's, 1.5 s streams, 1 s working sets
# alone and a 1G mixed stream.
GROUP_MIB = 256
ARGS = ["--quick", "--size", "32M", "--runtime", "0.5",
        "--memory-load", "5", "--memory-idle", "4", "--overload-load", "2", "--latency-load", "3",
        "--memory-variants", "vfs,direct", "--overload-variants", "direct,direct_sync",
        "--latency-variants", "vfs,direct,direct_sync",
        "--pressure-variants", "vfs,dontcache,direct", "--pressure-runs", "rwf.limit,norwf.limit",
        "--pressure-ws", "16M", "--pressure-limit", f"{GROUP_MIB}M", "--pressure-stream", "320M",
        "--pressure-runtime", "1", "--pressure-touch", "0.5", "--pressure-touches", "1", "--pressure-solo", "0.5",
        "--pressure-verify",
        "--one-export-variants", "vfs,dontcache,direct", "--one-export-runs", "rwf.limit",
        "--mixed-ws", "16M", "--mixed-file", "2M", "--mixed-stream", "512M", "--reread-fit", "32M",
        "--reread-big", "320M"]


def auto_accepted():
    return not variantlib.auto_refused(os.path.join(BUILD, "fsal_dcache", "adapter", "dcache-check"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The report's run: (exit status, results.json, the output dir)."""
    if os.geteuid() != 0:
        pytest.skip("the benchmark needs root (loop devices, mounts, namespaces)")
    out = tmp_path_factory.mktemp("bench-smoke") / "r"
    env = dict(os.environ, DCACHE_BUILD_DIR=BUILD)
    rc = subprocess.run([os.path.join(TOP, "tools", "bench-report.sh"), *ARGS, "--out", str(out)], env=env,
                        check=False).returncode
    if not (out / "results.json").exists():
        pytest.fail(f"tools/bench-report.sh exited {rc} without a results.json")
    with open(out / "results.json", encoding="utf-8") as f:
        return rc, json.load(f), out


def row(r, w, v, phase=""):
    return next((x for x in r["rows"] if x["workload"] == w and x["variant"] == v
                 and x.get("phase", "") == phase), None)


def not_skipped(r, w):
    if w in r["skipped"]:
        print(f"bench_smoke: {w} skipped: {r['skipped'][w]}")
        return False
    return True


def test_the_run_ended_well_and_reported_no_failure(run):
    rc, r, _ = run
    assert not r["failures"], "the report lists failures:\n  " + "\n  ".join(r["failures"])
    assert rc == 0, f"tools/bench-report.sh exited {rc}"


def test_every_variant_ran(run):
    want = [v for v in variantlib.defaults() if v != "auto" or auto_accepted()]
    assert run[1]["variants"] == want, f"variants {run[1]['variants']} != {want}"


def test_every_shared_workload_read_verified_data_with_its_threads_sampled(run):
    r = run[1]
    bad = []
    for w in [x for x in SHARED if not_skipped(r, x)]:
        for v in r["variants"]:
            x = row(r, w, v)
            if x is None:
                bad.append(f"{w}/{v}: missing")
                continue
            if x["verify_errors"] or x["errors"]:
                bad.append(f"{w}/{v}: {x['verify_errors']} verify errors, {x['errors']} errors")
            if x["verify_bytes"] <= 0:
                bad.append(f"{w}/{v}: nothing verified")
            if not x["mib_s"] or x["mib_s"] <= 0:
                bad.append(f"{w}/{v}: no throughput")
            if x["threads_d_mean"] is None or x["server_threads_peak"] is None or x["server_threads_peak"] < 1:
                bad.append(f"{w}/{v}: server thread sampling missing ({x['server_threads_peak']} threads)")
    assert not bad, "\n  ".join(["shared workloads:"] + bad)


def test_the_stream_workload_wrote_and_read_back_verified_data(run):
    r = run[1]
    bad = []
    for v in r["variants"]:
        w, rw, rd = (row(r, "stream", v, p) for p in ("write", "rewrite", "read"))
        if not w or not rw or not rd:
            bad.append(f"stream/{v}: phases {'write' if w else ''} {'rewrite' if rw else ''} {'read' if rd else ''}")
            continue
        if not w["mib_s"] or not rw["mib_s"] or not rd["mib_s"] or rd["verify_bytes"] <= 0 or rd["verify_errors"] \
                or w["errors"] or rw["errors"]:
            bad.append(f"stream/{v}: write {w['mib_s']} MiB/s, rewrite {rw['mib_s']} MiB/s, read {rd['mib_s']} MiB/s, "
                       f"{rd['verify_bytes']} bytes verified, {rd['verify_errors']} verify errors")
        if any(x["server_cpu_s_per_gib"] is None or x["kthread_cpu_s_per_gib"] is None for x in (w, rw, rd)):
            bad.append(f"stream/{v}: no CPU per GiB, the server's or the kernel threads'")
    assert not bad, "\n  ".join(["stream:"] + bad)


def test_every_sync_twin_got_its_io_uring_ratio(run):
    r = run[1]
    bad = [f"{w}/{v}: no io_uring/sync ratio" for w in SHARED if w not in r["skipped"]
           for v in ("buffered_sync", "dontcache_sync", "direct_sync")
           if v in r["variants"] and row(r, w, v) is not None and row(r, w, v).get("io_uring_over_sync") is None]
    assert not bad, "\n  ".join(bad)


def test_the_boundary_page_tracker_kept_the_shared_pages(run):
    # ~1 device read per WRITE for the untracked control of the same run;
    # the bound leaves room for a stray read in this tiny file
    bad = []
    for w in INTERLEAVES:
        for v, most, least in [("direct", 0.05, None), ("direct_sync", 0.05, None),
                               ("direct_untracked", None, 0.5), ("direct_untracked_sync", None, 0.5)]:
            x = row(run[1], w, v)
            per = x and x["dev_reads_per_write"]
            if per is None:
                bad.append(f"{w}/{v}: no device reads per WRITE")
            elif (most is not None and per > most) or (least is not None and per < least):
                bad.append(f"{w}/{v}: {per:.3f} device reads per WRITE")
    assert not bad, "\n  ".join(bad)


def test_commits_were_timed(run):
    bad = []
    for x in [x for x in run[1]["rows"] if x["workload"] == "commit"]:
        if x["commits_sent"] and x["commit_lat_p99_us"] is None:
            bad.append(f"commit/{x['variant']}: COMMITs sent but not timed")
        if x["variant"] == "buffered" and not x["commits_sent"]:
            bad.append("commit/buffered: no COMMIT sent")
    assert not bad, "\n  ".join(bad)


def test_the_latency_probe_was_answered_beside_every_streaming_variant(run):
    r = run[1]
    if not not_skipped(r, "latency"):
        return
    lat = [x for x in r["rows"] if x["workload"] == "latency"]
    assert sorted(x["variant"] for x in lat) == ["direct", "direct_sync", "vfs"], \
        f"latency: variants {[x['variant'] for x in lat]}"
    bad = [f"latency/{x['variant']}: probe {x.get('probe_getattr_ops')} GETATTRs, {x.get('probe_read_ops')} READs, "
           f"{x.get('probe_errors')} errors" for x in lat
           if not x.get("probe_getattr_ops") or not x.get("probe_read_ops") or x.get("probe_errors")]
    assert not bad, "\n  ".join(bad)


def test_a_server_per_variant_gave_back_its_memory_and_made_requests_wait(run):
    r = run[1]
    servers = r.get("servers", {})
    mem = {x["variant"]: x for x in servers.get("memory", [])}
    assert sorted(mem) == ["direct", "vfs"], f"memory: variants {sorted(mem)}"
    bad = []
    for v, x in mem.items():
        if x["samples"] < 4 or x["rss_peak_kib"] <= x["idle_kib"]:
            bad.append(f"memory/{v}: {x['samples']} samples, RSS peak {x['rss_peak_kib']} idle {x['idle_kib']} KiB")
        if v != "vfs" and x["after_kib"] > x["rss_peak_kib"] // 2:
            bad.append(f"memory/{v}: RSS {x['after_kib']} KiB after the load, peak {x['rss_peak_kib']}: "
                       "not given back")
    if not_skipped(r, "overload"):
        over = {x["variant"]: x for x in servers.get("overload", [])}
        if sorted(over) != ["direct", "direct_sync"]:
            bad.append(f"overload: variants {sorted(over)}")
        elif not over["direct"]["plugin"].get("admission_waits"):
            bad.append("overload/direct: no request waited for a place")
    assert not bad, "\n  ".join(bad)


def test_the_pressure_matrix_read_its_working_set_and_counted_the_group(run):
    r = run[1]
    if not not_skipped(r, "pressure"):
        return
    pressure = r.get("pressure")
    assert pressure, "pressure: no results"
    prow = {(x["kernel"], x["workload"], x["variant"]): x for x in pressure["rows"]}
    # XFS has RWF_DONTCACHE from 6.15
    kernel = tuple(int(n) for n in re.findall(r"\d+", os.uname().release)[:2])
    bad = []
    for k in ("rwf", "norwf"):
        for w in PRESSURE:
            for v in ("vfs", "dontcache", "direct"):
                x = prow.get((k, w, v))
                if x is None:
                    bad.append(f"pressure {k}/{w}/{v}: missing")
                    continue
                if x.get("errors") or not x.get("stream_mib_s"):
                    bad.append(f"pressure {k}/{w}/{v}: {x.get('errors')} errors, stream {x.get('stream_mib_s')} MiB/s")
                if not x.get("ws_ops") or not x.get("ws_verify_bytes"):
                    bad.append(f"pressure {k}/{w}/{v}: working set {x.get('ws_ops')} READs, "
                               f"{x.get('ws_verify_bytes')} bytes verified")
                if x.get("limit_hits") is None or x.get("ws_dev_reads") is None or x.get("limit_mib") != GROUP_MIB:
                    bad.append(f"pressure {k}/{w}/{v}: group {x.get('limit_mib')} MiB, limit hits "
                               f"{x.get('limit_hits')}, WS device reads {x.get('ws_dev_reads')}")
                if not w.endswith("_touch") and x.get("ws_x_solo") is None:
                    bad.append(f"pressure {k}/{w}/{v}: no ratio to the working set alone")
                fb = x["plugin"].get("fallback_no_dontcache", 0)
                if v == "dontcache" and k == "norwf" and not fb:
                    bad.append(f"pressure {k}/{w}/{v}: no DONTCACHE fallback without RWF_DONTCACHE")
                if v == "dontcache" and k == "rwf" and fb and kernel >= (6, 15):
                    bad.append(f"pressure {k}/{w}/{v}: {fb} DONTCACHE fallbacks on {os.uname().release}")
    for x in pressure["solo"]:
        if not x.get("ws_ops") or (x["variant"] == "touch" and not x.get("ws_passes")):
            bad.append(f"pressure solo {x['kernel']}/{x['workload']}/{x['variant']}: {x.get('ws_ops')} READs, "
                       f"{x.get('ws_passes')} passes")
    assert not bad, "\n  ".join(bad)


def test_the_one_export_workloads_ran_every_phase_and_counted_the_working_set(run):
    r = run[1]
    if not not_skipped(r, "one_export"):
        return
    rows = {(x["workload"], x["phase"], x["variant"]): x for x in (r.get("one_export") or {}).get("rows", [])}
    assert rows, "one export: no results"
    variants = ["vfs", "dontcache", "direct"] + (["auto"] if "auto" in r["variants"] else [])
    bad = []
    for w, phases in ONE_EXPORT.items():
        for p in phases:
            for v in variants:
                x = rows.get((w, p, v))
                if x is None:
                    bad.append(f"{w}/{p}/{v}: missing")
                    continue
                if x.get("errors"):
                    bad.append(f"{w}/{p}/{v}: {x['errors']} errors")
                if x.get("ws_dev_reads") is None or x.get("limit_hits") is None or x.get("limit_mib") != GROUP_MIB:
                    bad.append(f"{w}/{p}/{v}: group {x.get('limit_mib')} MiB, limit hits {x.get('limit_hits')}, "
                               f"WS device reads {x.get('ws_dev_reads')}")
                reads = x.get("ws_verify_bytes") if w != "reread_fit" and w != "reread_big" else x.get("stream_mib_s")
                if not reads:
                    bad.append(f"{w}/{p}/{v}: nothing read and verified ({reads})")
                if x.get("server_cpu_s_per_gib") is None:
                    bad.append(f"{w}/{p}/{v}: no CPU per GiB")
    # the data set larger than the group is read from the device on every
    # pass by every mode; what fits is read again from the cache by VFS
    for v in variants:
        x = rows.get(("reread_big", "pass3", v))
        if x and not x.get("ws_dev_read_mib"):
            bad.append(f"reread_big/pass3/{v}: no device reads of a data set larger than the group")
    x = rows.get(("reread_fit", "pass3", "vfs"))
    if x and x.get("ws_dev_read_mib", 0) > 8:
        bad.append(f"reread_fit/pass3/vfs: {x['ws_dev_read_mib']:.0f} MiB read from the device, not the cache")
    assert not bad, "\n  ".join(bad)


def test_table_md_reports_cpu_per_gib_of_every_phase_and_the_charts_were_drawn(run):
    out = run[2]
    table = (out / "table.md").read_text()
    assert "## Server CPU per GiB by phase" in table, "table.md: no CPU per GiB section"
    assert "### The shared server with the kernel's threads" in table, "table.md: no CPU with the kernel threads"
    for line in ("| stream | write |", "| stream | rewrite |", "| stream | read |", "| rwf, limit | mixed | write |",
                 "| rwf, limit | noisy_pair | noisy |", "| rwf, limit | seq_write | stream + WS |"):
        assert line in table, f"table.md: no CPU per GiB row starting {line!r}"
    for chart in ("chart.png", "chart-cpu.png", "chart-pagecache.png"):
        assert (out / chart).stat().st_size > 0, f"no {chart}"
