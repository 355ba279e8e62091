"""The DCACHE plugin's statistics from a running ganesha.nfsd over DBus
(org.ganesha.nfsd.exportstats.GetFSALStats string:DCACHE): the one reader
of that reply, shared by dcache-stats and dcache-exporter.

The reply (adapter/stats.c): status, message, timestamp, "DCACHE", then
entries (name, count, average ms, min ms, max ms), then a message.  Names
are "export_<id>.<op>" (read, write, commit: service times),
"export_<id>.<counter>" (count only) and "export_<id>.<op>.le_<us>" (the
latency histogram's bucket up to <us> microseconds, le_inf the last: count
only).  Entries that are zero are left out.
"""
import re
import subprocess

DEST = "org.ganesha.nfsd"
PATH = "/org/ganesha/nfsd/ExportMgr"
OPS = ("read", "write", "commit")

_ENTRY = re.compile(r"export_(\d+)\.(\w+(?:\.le_(?:\d+|inf))?)")


def dbus_call(method, *args):
    """dbus-send's printed reply; RuntimeError when the call failed."""
    cmd = ["dbus-send", "--system", "--print-reply", "--dest=" + DEST, PATH,
           "org.ganesha.nfsd.exportstats." + method, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"dbus-send exited {done.returncode}")
    return done.stdout


def get_stats():
    """GetFSALStats for DCACHE, parsed (see parse)."""
    return parse(dbus_call("GetFSALStats", "string:DCACHE"))


def parse(reply):
    """Returns (ok, message, {export_id: {name: value}}): the value of an
    operation (read, write, commit) is (count, avg ms, min ms, max ms), of a
    counter its count, of a bucket ("read.le_100") its count."""
    tokens = re.findall(r'^\s*(boolean|string|uint64|double)\s+(.*?)\s*$', reply, re.M)
    values = []
    for kind, text in tokens:
        if kind == "string":
            values.append(text.strip('"'))
        elif kind == "boolean":
            values.append(text == "true")
        elif kind == "uint64":
            values.append(int(text))
        else:
            values.append(float(text))
    if not values or values[0] is not True:
        return False, values[1] if len(values) > 1 else "no reply", {}
    exports = {}
    # status, message, timestamp (2 x uint64), "DCACHE", then entries of
    # (name, count, avg ms, min ms, max ms), then the final message.
    body = values[5:-1]
    for i in range(0, len(body) - 4, 5):
        name, count, avg, low, high = body[i:i + 5]
        m = _ENTRY.fullmatch(str(name))
        if not m:
            continue
        export_id, counter = int(m.group(1)), m.group(2)
        entry = exports.setdefault(export_id, {})
        entry[counter] = (count, avg, low, high) if counter in OPS else count
    return True, values[-1], exports


def is_bucket(name):
    """A latency histogram's bucket entry (read.le_100)?"""
    return "." in name
