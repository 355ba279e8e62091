"""IO_Cache_Read/Write = auto end to end, one export carrying both kinds of
data, the server in a memory group: a working-set file read again stays in
the page cache while a stream larger than the group is read through the
same export past it, and the decision counters dcache-stats prints say why
(docs/configuration.md, "auto: chosen per request"). A stream written
through the export in the full group is not left in the page cache either:
only what memory had room for, written behind. And a file emptied by the
OPEN that truncates (NFSv4's UNCHECKED4 with size 0) is new data again,
no rewrite. With memory to spare a stream is written cached unless the
machine reports its free memory to a host (Auto_Write_Spare_Memory).
With Auto_Stream_Yield_Ms a stream written beside a working set read in
bursts waits for the bursts, written whole, and one of files copied one
after another never waits. With
Auto_Write_Stream = direct_when_quiet a stream is written direct alone and
dontcache beside readers that never pause.

The group is cgroup v1's memory controller (skipped where there is none);
the server's namespace sees it through the cgroup filesystems the testbed
mounts there, as a server on a machine does.
"""

import contextlib
import os
import subprocess
import time

import pytest

from dcache_testbed import cgroups, nfs, stats
from dcache_testbed.exports import dcache, default_exports

MIB = 1 << 20
AUTO_ID = 3
GROUP = 384 * MIB  # the server's ~100-150 MiB and a page cache of ~250 MiB
WS = 16 * MIB  # the working set: one file, larger than Auto_Stream_Min_MiB
STREAM = 1024 * MIB  # four times what the group's page cache could hold
WRITTEN = 256 * MIB
PUT = 64 * MIB  # written three times over NFSv4.1: a stream (Auto_Stream_Min_MiB 4) that fits
CACHED = ("small", "no_stream", "memory_free", "reused")
UNCACHED = ("too_big", "stream", "free_reported")
VIRTIO = "/sys/bus/virtio/devices"


def residency(path):
    """The share (0-1) of path's bytes in the page cache (fincore)."""
    out = subprocess.run(["fincore", "-n", "-b", "-o", "RES,SIZE", path], capture_output=True, text=True,
                         check=True).stdout.split()
    return int(out[0]) / int(out[1])


def make_local(path, size):
    """A file of size bytes written on the server's filesystem, out of the
    page cache afterwards."""
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for _ in range(size // MIB):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    assert residency(path) < 0.02, f"{path}: could not drop it from the page cache first"


@contextlib.contextmanager
def in_group(srv):
    """ganesha.nfsd in a memory group of GROUP while in the block (the
    test skipped where there is none); the cgroups.Group."""
    try:
        group = srv.cgroup("memory", {"memory.limit_in_bytes": GROUP})
        group.__enter__()
    except cgroups.Unavailable as e:
        pytest.skip(f"no memory group for the server: {e}")
    try:
        yield group
    finally:
        group.__exit__(None, None, None)


def decisions(before, after):
    """READ decisions by reason between two readings of the counters."""
    d = after - before
    return {r: d["read_auto_" + r] for r in CACHED + UNCACHED}


def test_data_read_again_stays_cached_a_stream_beside_it_does_not(make_server, tmp_path):
    srv = make_server(exports=default_exports() + [dcache(AUTO_ID, "auto", IO_Cache_Read="auto",
                                                          IO_Cache_Write="auto")])
    top = os.path.join(srv.mnt, "auto")
    ws, stream = os.path.join(top, "ws"), os.path.join(top, "stream")
    make_local(ws, WS)
    make_local(stream, STREAM)
    with in_group(srv) as group:
        c0 = srv.counters(AUTO_ID)
        assert nfs.get(srv, "auto/ws") is not None, "the working set's first read failed"
        c1 = srv.counters(AUTO_ID)
        first = decisions(c0, c1)
        print(f"working set, first read: {first}, resident {residency(ws):.0%}")

        # the stream, read whole (not kept: 1 GiB through nfs-cat to /dev/null)
        res = subprocess.run(srv.ns.argv(["sh", "-c", f"nfs-cat '{nfs.url('auto/stream')}' > /dev/null"]),
                             check=False, timeout=300)
        assert res.returncode == 0, "reading the stream failed"
        c2 = srv.counters(AUTO_ID)
        by_stream = decisions(c1, c2)
        peak = group.read_int("memory.max_usage_in_bytes")
        print(f"stream: {by_stream}, resident {residency(stream):.0%}, group peak {peak >> 20} MiB "
              f"of {GROUP >> 20}")

        assert nfs.get(srv, "auto/ws") is not None, "the working set's second read failed"
        c3 = srv.counters(AUTO_ID)
        again = decisions(c2, c3)
        print(f"working set, read again: {again}, resident {residency(ws):.0%}")

        # a stream written through the export in the full group: cached
        # (and written behind) only while memory is free, the rest not
        local = tmp_path / "written"
        with open(local, "wb") as f:
            f.write(os.urandom(MIB) * (WRITTEN // MIB))
        c4 = srv.counters(AUTO_ID)
        assert nfs.put(srv, str(local), "auto/written"), "writing the stream failed"
        d = srv.counters(AUTO_ID) - c4

    requests = sum(by_stream.values())
    assert requests >= STREAM // MIB, f"the stream's READs were not counted per decision: {by_stream}"
    assert by_stream["stream"] + by_stream["too_big"] >= requests // 2, \
        f"most of the stream should have gone past the cache (stream/too_big): {by_stream}"
    assert c2.read_direct - c1.read_direct >= requests // 2, "the stream's uncached READs were not direct"
    # 1 MiB READs at 1 MiB offsets: each lands in the reply's buffer, which
    # the module makes page-aligned for an auto export as for a direct one
    bounced = c2.read_bounce_copies - c1.read_bounce_copies
    assert bounced == 0, f"{bounced} of the stream's direct READs took a bounce copy"
    # what it left cached is what it was cached for (memory free at first)
    cached_share = sum(by_stream[r] for r in CACHED) / requests
    assert residency(stream) <= cached_share + 0.05, \
        f"the stream left {residency(stream):.0%} of itself in the page cache, {cached_share:.0%} of its READs cached"
    assert sum(again[r] for r in UNCACHED) == 0, f"the working set read again went uncached: {again}"
    assert sum(again.values()) > 0, "the working set read again was not counted"
    assert residency(ws) >= 0.9, f"the working set is {residency(ws):.0%} resident after the stream"

    written = os.path.join(top, "written")
    subprocess.run(["sync", "-f", written], check=True)
    print(f"written: stream {d.write_auto_stream}, memory_free {d.write_auto_memory_free}, no_stream "
          f"{d.write_auto_no_stream}, small {d.write_auto_small}, resident {residency(written):.0%}")
    assert d.write_auto_stream > 0, f"no WRITE of the written stream went the stream's way: {d}"
    assert d.auto_write_behind == d.write_auto_memory_free, f"WRITEs cached for spare memory not written behind: {d}"
    writes = sum(d["write_auto_" + r] for r in CACHED + UNCACHED)
    cached_share = sum(d["write_auto_" + r] for r in CACHED) / writes
    assert residency(written) <= cached_share + 0.05, \
        f"the written stream left {residency(written):.0%} in the page cache, {cached_share:.0%} of its WRITEs cached"

    # the counters above are dcache-stats --json's; its table has them too
    table = srv.run([stats.TOOL, "--export", str(AUTO_ID)], quiet=True).stdout
    for name in ("read_auto_stream", "write_auto_stream", "read_mode_auto", "write_mode_auto"):
        assert name in table, f"dcache-stats --export {AUTO_ID} does not show {name}:\n{table}"


def test_a_file_emptied_by_its_open_is_written_as_new(make_server, build, tmp_path):
    """A file written over in place is a rewrite: with memory to spare
    (and Auto_Write_Spare_Memory = cache, whatever the machine) its WRITEs
    still go the stream's way (a rewrite replaces what is cached). Emptied
    by the OPEN a shell's `>` sends over NFSv4 (UNCHECKED4 with size 0,
    which reaches the FSAL as an open with FSAL_O_TRUNC, not a SETATTR),
    the same file is new data again, as after a SETATTR of the size."""
    srv = make_server(exports=default_exports() + [dcache(AUTO_ID, "auto", IO_Cache_Read="auto",
                                                          IO_Cache_Write="auto", Auto_Write_Spare_Memory="cache")])
    local = tmp_path / "data"
    local.write_bytes(os.urandom(MIB) * (PUT // MIB))
    put = build.bin("dcache_nfs41_put")

    def write(*how):
        before = srv.counters(AUTO_ID)
        res = srv.run([put, *how, "127.0.0.1", str(local), "/auto/f"], check=False, quiet=True, timeout=120)
        assert res.returncode == 0, f"dcache_nfs41_put {' '.join(how)}: {res.stderr}"
        d = srv.counters(AUTO_ID) - before
        opened = int(res.stdout.split()[-1])
        decided = {r: d["write_auto_" + r] for r in CACHED + UNCACHED}
        print(f"dcache_nfs41_put {' '.join(how)}: opened at {opened >> 20} MiB, WRITEs {decided}")
        return opened, decided

    opened, first = write()
    assert opened == 0 and sum(first.values()) >= PUT // MIB, f"the first write was not counted: {first}"
    if first["memory_free"] == 0:
        pytest.skip(f"no memory to spare on this machine: the first write went {first}")
    opened, over = write()
    assert opened == PUT, f"the OPEN without size 0 changed the file's size to {opened}"
    assert over["stream"] > 0 and over["memory_free"] == 0, f"written over in place, not a rewrite: {over}"
    opened, emptied = write("--truncate")
    assert opened == 0, f"the OPEN with size 0 left the file at {opened} bytes"
    assert emptied["stream"] == 0 and emptied["memory_free"] > 0, \
        f"emptied by its OPEN, the file was still written as a rewrite: {emptied}"
    with open(os.path.join(srv.mnt, "auto", "f"), "rb") as on_disk, open(local, "rb") as want:
        assert on_disk.read() == want.read(), "the file on the server is not what was written last"


def free_pages_reported():
    """Whether this machine reports its free memory to a host: a virtio
    balloon (device id 5) with a driver that negotiated feature bit 5,
    VIRTIO_BALLOON_F_REPORTING (the features file lists bit 0 first)."""
    if not os.path.isdir(VIRTIO):
        return False
    for name in os.listdir(VIRTIO):
        dev = os.path.join(VIRTIO, name)
        with open(os.path.join(dev, "device"), encoding="ascii") as f:
            if f.read().strip() != "0x0005" or not os.path.exists(os.path.join(dev, "driver")):
                continue
        with open(os.path.join(dev, "features"), encoding="ascii") as f:
            if f.read()[5:6] == "1":
                return True
    return False


def test_a_write_stream_with_memory_to_spare_is_cached_unless_the_host_takes_it(make_server, build, tmp_path):
    """A 64 MiB stream written with the whole machine's memory to spare:
    with Auto_Write_Spare_Memory's default it stays cached, written
    behind, unless this machine reports its free memory to a host (then
    it goes the stream's way, counted free_reported, leaves nothing
    cached, and the log says why once); with `stream` it goes the
    stream's way either way; with `cache` it stays cached either way.
    Where it went the stream's way, its first read-back is cached on an
    export that serves nothing else and goes the stream's way too beside
    a working set (other clients' cached READs)."""
    srv = make_server(exports=default_exports() + [
        dcache(AUTO_ID, "auto", IO_Cache_Read="auto", IO_Cache_Write="auto"),
        dcache(AUTO_ID + 1, "auto_stream", IO_Cache_Write="auto", Auto_Write_Spare_Memory="stream"),
        dcache(AUTO_ID + 2, "auto_cache", IO_Cache_Write="auto", Auto_Write_Spare_Memory="cache")])
    local = tmp_path / "data"
    local.write_bytes(os.urandom(MIB) * (PUT // MIB))
    reported = free_pages_reported()

    def write(export, export_id):
        before = srv.counters(export_id)
        assert nfs.put(srv, str(local), f"{export}/f"), f"writing through {export} failed"
        d = srv.counters(export_id) - before
        path = os.path.join(srv.mnt, export, "f")
        subprocess.run(["sync", "-f", path], check=True)
        decided = {r: d["write_auto_" + r] for r in CACHED + UNCACHED}
        print(f"{export}: {decided}, written behind {d.auto_write_behind}, resident {residency(path):.0%}")
        assert sum(decided.values()) >= PUT // MIB, f"{export}: the WRITEs were not counted: {decided}"
        assert d.auto_write_behind == decided["memory_free"], f"{export}: cached WRITEs not written behind: {d}"
        return decided, residency(path)

    default, resident = write("auto", AUTO_ID)
    spare = default["memory_free"] + default["free_reported"]
    if spare == 0:
        pytest.skip(f"no memory to spare on this machine: the stream went {default}")
    print(f"free page reporting: {'on' if reported else 'off'}")
    logged = [line for line in srv.log().splitlines() if "reports its free memory to a host" in line]
    assert bool(logged) == reported, f"the log's word on free page reporting, with reporting {reported}: {logged}"
    if reported:
        assert default["memory_free"] == 0 and default["free_reported"] > 0, \
            f"free memory is reported to the host, yet the stream was cached for it: {default}"
        assert resident <= 0.05 + default["no_stream"] * MIB / PUT, f"the stream left {resident:.0%} cached"
    else:
        assert default["free_reported"] == 0 and default["memory_free"] > 0, \
            f"nothing reported to a host, yet the stream was not cached for spare memory: {default}"
    streamed, _ = write("auto_stream", AUTO_ID + 1)
    assert streamed["memory_free"] == 0 and streamed["free_reported"] == 0 and streamed["stream"] > 0, \
        f"Auto_Write_Spare_Memory = stream: {streamed}"
    cached, _ = write("auto_cache", AUTO_ID + 2)
    assert cached["memory_free"] > 0 and cached["free_reported"] == 0, f"Auto_Write_Spare_Memory = cache: {cached}"
    if not reported:
        return

    def read_back(name):
        before = srv.counters(AUTO_ID)
        assert nfs.get(srv, f"auto/{name}") is not None, f"reading back auto/{name} failed"
        d = srv.counters(AUTO_ID) - before
        decided = {r: d["read_auto_" + r] for r in CACHED + UNCACHED}
        print(f"auto/{name} read back: {decided}, direct {d.read_direct}")
        return decided, d.read_direct

    # Read back on an export that serves nothing else, as a file is read to
    # warm the cache: cached for the memory to spare.
    assert nfs.put(srv, str(local), "auto/g"), "writing auto/g failed"
    alone, _ = read_back("g")
    assert alone["free_reported"] == 0 and alone["memory_free"] > 0, f"read back alone, it was not cached: {alone}"
    # Read back beside a working set (other clients' cached READs of the
    # export): the stream's way again; read once more, a re-read, cached
    # for the memory to spare.
    bench = build.bin("dcache-bench")

    def job(*keys):
        return [bench, "url=nfs://127.0.0.1/auto", "numjobs=2", "size=8M", "filename=busy", *keys, "--json",
                "/dev/null", "--no-progress"]
    srv.run(job("rw=read", "bs=64k"), quiet=True, timeout=120)  # laid out, read once
    readers = srv.popen(job("rw=randread", "bs=4k", "iodepth=1", "time_based=1", "runtime=120"),
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        beside, direct = read_back("f")
    finally:
        readers.stop()
    assert beside["free_reported"] > 0 and beside["memory_free"] == 0 and direct >= beside["free_reported"], \
        f"read back beside a working set, data written past the cache was cached: {beside}"
    again, _ = read_back("f")
    assert again["free_reported"] == 0 and again["memory_free"] > 0, f"read again, it was not cached: {again}"


YIELD_MS = 500


def test_a_stream_gives_way_to_the_working_set_read_in_bursts(make_server, build):
    """A working set of 16 files of 4 MiB, each read whole every 0.25 s
    (cached: files under Auto_Stream_Min_MiB), beside a 512 MiB stream
    written and then read back through the same export: the stream's
    requests wait for the bursts (auto_yields), none longer than
    Auto_Stream_Yield_Ms on average, and the stream is written whole. The
    same with the setting 0: no stream waits."""
    srv = make_server(exports=default_exports() + [
        dcache(AUTO_ID, "auto", IO_Cache_Read="auto", IO_Cache_Write="auto", Auto_Stream_Yield_Ms=YIELD_MS),
        dcache(AUTO_ID + 1, "auto0", IO_Cache_Read="auto", IO_Cache_Write="auto", Auto_Stream_Yield_Ms=0)])
    bench = build.bin("dcache-bench")

    def job(export, *keys):
        return [bench, f"url=nfs://127.0.0.1/{export}", *keys, "--json", "/dev/null", "--no-progress"]

    def run(export, export_id):
        # the working set laid out and read once before the stream
        srv.run(job(export, "rw=read", "bs=64k", "numjobs=16", "iodepth=2", "size=4M", "filename=ws"),
                quiet=True, timeout=120)
        before = srv.counters(export_id)
        ws = srv.popen(job(export, "rw=read", "bs=64k", "numjobs=16", "iodepth=2", "size=4M", "filename=ws",
                           "time_based=1", "runtime=60", "pass_interval=0.25"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for rw in ("write", "read"):
                res = srv.run(job(export, f"rw={rw}", "bs=1M", "numjobs=1", "iodepth=16", "size=512M",
                                  "filename=s", "verify=1"), check=False, quiet=True, timeout=300)
                assert res.returncode == 0, f"the stream's {rw} failed beside the working set: {res.stderr}"
        finally:
            ws.stop()
        return srv.counters(export_id) - before

    d = run("auto", AUTO_ID)
    streamed = sum(d[f"{op}_auto_{r}"] for op in ("read", "write")
                   for r in ("memory_free", "too_big", "stream", "free_reported"))
    print(f"yield {YIELD_MS} ms: {d.auto_yields} of {streamed} stream requests waited, "
          f"{d.auto_yield_us / 1000:.0f} ms in all; cached READs {d.read_auto_no_stream}")
    assert d.read_auto_no_stream > 0, f"the working set's READs were not kept cached: {d}"
    assert streamed >= 2 * 500, f"the stream's requests were not decided as a stream: {d}"
    assert d.auto_yields > 0, f"no stream request gave way to the working set's bursts: {d}"
    assert d.auto_yield_us <= d.auto_yields * (YIELD_MS + 100) * 1000, \
        f"stream requests waited {d.auto_yield_us} us in all, {d.auto_yields} of them: longer than the setting"
    assert os.path.getsize(os.path.join(srv.mnt, "auto", "s.0")) == 512 * MIB, "the stream was not written whole"

    d0 = run("auto0", AUTO_ID + 1)
    assert d0.auto_yields == 0 and d0.auto_yield_us == 0, f"a stream waited with Auto_Stream_Yield_Ms = 0: {d0}"


def test_a_write_stream_goes_direct_when_quiet_and_dontcache_beside_readers(make_server, build):
    """Auto_Write_Stream = direct_when_quiet, the server in the memory
    group: a 384 MiB stream written alone goes direct (past what the group
    takes as memory_free: at most half its page cache); written again while
    four clients keep reading a cached file at random (4 KiB READs: small,
    kept cached, never pausing), it goes dontcache. Both read back whole."""
    srv = make_server(exports=default_exports() + [
        dcache(AUTO_ID, "auto", IO_Cache_Read="auto", IO_Cache_Write="auto", Auto_Write_Stream="direct_when_quiet")])
    bench = build.bin("dcache-bench")

    def job(*keys):
        return [bench, "url=nfs://127.0.0.1/auto", *keys, "--json", "/dev/null", "--no-progress"]

    def stream(name):
        before = srv.counters(AUTO_ID)
        for rw in ("write", "read"):
            res = srv.run(job(f"rw={rw}", "bs=1M", "numjobs=1", "iodepth=16", "size=384M", f"filename={name}",
                              "verify=1"), check=False, quiet=True, timeout=300)
            assert res.returncode == 0, f"the stream {name}'s {rw} failed: {res.stderr}"
        d = srv.counters(AUTO_ID) - before
        print(f"{name}: WRITEs decided stream {d.write_auto_stream}, memory_free {d.write_auto_memory_free}; "
              f"direct {d.write_direct}, dontcache {d.write_dontcache}; cached READs {d.read_auto_small}")
        assert d.write_auto_stream >= 128, f"{name}: too few WRITEs went the stream's way to tell: {d}"
        return d

    # the readers' files laid out and read once before the group
    srv.run(job("rw=read", "bs=64k", "numjobs=4", "size=8M", "filename=ws"), quiet=True, timeout=120)
    with in_group(srv):
        alone = stream("alone")
        readers = srv.popen(job("rw=randread", "bs=4k", "numjobs=4", "iodepth=1", "size=8M", "filename=ws",
                                "time_based=1", "runtime=120"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            beside = stream("beside")
        finally:
            readers.stop()
    assert alone.write_direct >= 0.8 * alone.write_auto_stream, f"written alone, the stream did not go direct: {alone}"
    assert beside.read_auto_small > 1000, f"the readers' READs were not kept cached as small: {beside}"
    assert beside.write_dontcache >= 0.8 * beside.write_auto_stream and \
        beside.write_direct <= 0.1 * beside.write_auto_stream, \
        f"written beside the readers, the stream did not go dontcache: {beside}"


def test_files_copied_one_after_another_make_no_stream_wait(make_server, tmp_path):
    """A tree of files larger than Auto_Stream_Min_MiB copied in and then
    read, one file after another, through an export with
    Auto_Stream_Yield_Ms at 500 ms (its default): each file's run starts cached
    (no_stream) and goes on as a stream, and a stream does not wait for
    the start of its own file's run. Nothing else is served, so no stream
    request waits (without that rule: 16 of 128, 19 ms each)."""
    srv = make_server(exports=default_exports() + [dcache(AUTO_ID, "auto", IO_Cache_Read="auto",
                                                          IO_Cache_Write="auto", Auto_Stream_Yield_Ms=YIELD_MS)])
    files, size = 8, 12 * MIB
    local = tmp_path / "file"
    local.write_bytes(os.urandom(MIB) * (size // MIB))
    before = srv.counters(AUTO_ID)
    for i in range(files):
        assert nfs.put(srv, str(local), f"auto/tree.{i}"), f"copying tree.{i} in failed"
    for i in range(files):
        assert nfs.get(srv, f"auto/tree.{i}") == local.read_bytes(), f"tree.{i} read back differs"
    d = srv.counters(AUTO_ID) - before
    streamed = sum(d[f"{op}_auto_{r}"] for op in ("read", "write")
                   for r in ("memory_free", "too_big", "stream", "free_reported"))
    print(f"{files} files of {size >> 20} MiB in and out: {streamed} stream requests, {d.auto_yields} waited "
          f"({d.auto_yield_us / 1000:.0f} ms); run starts {d.read_auto_no_stream} READs, "
          f"{d.write_auto_no_stream} WRITEs")
    assert d.read_auto_no_stream > 0 and d.write_auto_no_stream > 0, f"no run started cached: {d}"
    assert streamed >= files, f"the files' runs did not go on as streams: {d}"
    assert d.auto_yields == 0, f"{d.auto_yields} stream requests waited for their own file's run start: {d}"
