"""ci/demo.sh (README's first command) as a new user meets it, in a
network namespace and /run of its own (its own port 2049; no system bus
unless a test starts one at /run/dbus; a veth address, so that Ganesha
resolves Bind_addr = 127.0.0.1): --check twice on one state dir (the second
run reuses the first's image), then serving mode stopped by Ctrl-C (SIGINT
to its process group, as a terminal sends it) with no system bus, so that
the demo starts its own dbus-daemon, and with one, by SIGTERM to the demo,
and by Ctrl-C during the workload. Every run stops within a bound and exits
0 (130 when interrupted before serving), shows the page-cache summary
(plain VFS keeps its files cached, dontcache and direct do not) and leaves
nothing behind: no process in the namespace but the test's own (no
ganesha.nfsd, rpcbind or dbus-daemon), no mount, no loop device.
"""

import contextlib
import os
import re
import signal
import subprocess

import pytest

from dcache_testbed import releases
from dcache_testbed.procs import Child, Timeout, wait_for
from dcache_testbed.server import Namespace, private_dbus_conf

DEMO = os.path.join(releases.TOP, "ci", "demo.sh")
# from a signal to the demo's exit: its teardown stops ganesha.nfsd
# (about a second), rpcbind, the bus, and unmounts
STOP_BOUND = 30
# to the workload's end: a first run also makes the image
SERVING_BOUND = 300


class Place:
    """The namespace the demo runs in, its working directory (./state is
    the demo's state dir) and the test's own processes there."""

    def __init__(self, stack, tmp):
        self.stack, self.cwd = stack, os.path.join(tmp, "cwd")
        os.makedirs(self.cwd)
        self.state = os.path.join(self.cwd, "state")
        net = f"dcache-demo-{os.getpid()}"
        self.ns = Namespace(stack, tmp, net)
        for cmd in (["ip", "link", "add", "dcache-demo0", "type", "veth", "peer", "name", "dcache-demo1"],
                    ["ip", "addr", "add", "192.0.2.1/24", "dev", "dcache-demo0"],
                    ["ip", "link", "set", "dcache-demo0", "up"]):
            subprocess.run(["ip", "netns", "exec", net] + cmd, check=True)
        self.own = {self.ns.holder.pid}
        self.tmp = tmp

    def start(self, *args):
        """The demo started in its own process group, as a shell starts a
        foreground job; its output in a file."""
        env = dict(os.environ, DCACHE_DEMO_IMAGE_SIZE="1G")
        release = releases.select()
        env.pop("DCACHE_BUILD_DIR", None)
        if not release.root and os.environ.get("DCACHE_BUILD"):
            env["DCACHE_BUILD_DIR"] = os.environ["DCACHE_BUILD"]
        out_path = os.path.join(self.tmp, f"demo.{len(os.listdir(self.tmp))}.out")
        with open(out_path, "wb") as out:
            child = Child(self.ns.argv([DEMO, *args], cwd=self.cwd), "ci/demo.sh", stdout=out,
                          stderr=subprocess.STDOUT, env=env, process_group=0)
        self.stack.callback(child.stop)
        child.out_path = out_path
        return child

    def system_bus(self):
        """A system bus at /run/dbus/system_bus_socket in the namespace
        (Ganesha's policy included, as the machine's has it), until the
        returned Child is stopped."""
        sock = "/run/dbus/system_bus_socket"
        subprocess.run(self.ns.argv(["mkdir", "-p", "/run/dbus"]), check=True)
        conf = os.path.join(self.tmp, "system-bus.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(private_dbus_conf(sock))
        bus = Child(self.ns.argv(["dbus-daemon", f"--config-file={conf}", "--nofork", "--nopidfile", "--nosyslog"]),
                    "the test's system bus")
        wait_for(lambda: subprocess.run(self.ns.argv(["test", "-S", sock]), check=False).returncode == 0, 5,
                 "the test's system bus socket", alive=bus.alive)
        return bus

    def left_behind(self, extra_own=()):
        """What a stopped demo left: processes in the namespace, mounts,
        loop devices."""
        found = []
        with open(f"/proc/{self.ns.holder.pid}/mountinfo", encoding="utf-8") as f:
            mountinfo = f.read()
        found += [f"{line.split()[4]} still mounted" for line in mountinfo.splitlines()
                  if line.split()[4].startswith(self.state)]
        loops = subprocess.run(["losetup", "-j", os.path.join(self.state, "xfs.img")], capture_output=True,
                               text=True, check=True).stdout.strip()
        if loops:
            found.append(f"a loop device still holds the image: {loops}")
        net = os.readlink(f"/proc/{self.ns.holder.pid}/ns/net")
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            if pid in self.own or pid in extra_own:
                continue
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/ns/net") == net:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                    found.append(f"still running: pid {pid}: {cmdline}")
        return found


def output(demo):
    with open(demo.out_path, encoding="utf-8", errors="replace") as f:
        return f.read()


def tail(text, lines=30):
    return "\n".join("  | " + s for s in text.splitlines()[-lines:])


def summary_problems(text):
    """What is wrong with the page-cache summary: /vfs keeps >= 90 % of
    what it moved cached, /dontcache and /direct <= 5 %."""
    rows = dict(re.findall(r"^  (/\w+) .*?(\d+) %", text, re.M))
    bad = []
    if int(rows.get("/vfs", -1)) < 90:
        bad.append(f"/vfs {rows.get('/vfs')} % resident (want >= 90)")
    for e in ("/dontcache", "/direct"):
        if not 0 <= int(rows.get(e, -1)) <= 5:
            bad.append(f"{e} {rows.get(e)} % resident (want <= 5)")
    return bad


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the demo needs root (loop devices, mounts, namespaces)")
    with contextlib.ExitStack() as stack:
        yield Place(stack, str(tmp_path_factory.mktemp("demo")))


def finish(demo, bound):
    """The demo's exit status, waiting at most bound seconds."""
    assert demo.wait_gone(bound), f"the demo did not stop within {bound} s:\n{tail(output(demo))}"
    return demo.proc.returncode


def test_check_twice_on_one_state_dir(place, release):
    for run in (1, 2):
        demo = place.start("--check")
        status = finish(demo, SERVING_BOUND)
        text = output(demo)
        assert status == 0 and "every file round-tripped through every export" in text, \
            f"--check run {run}: status {status}\n{tail(text)}"
        assert re.search(rf"^ganesha\.nfsd {re.escape(release.name)}[ (]", text, re.M), \
            f"--check run {run}: not served by Ganesha {release.name}:\n{tail(text)}"
        assert not summary_problems(text), f"--check run {run} summary: {summary_problems(text)}\n{tail(text)}"
        assert (run == 1) == ("creating 1G XFS image" in text), \
            f"--check run {run}: the image {'was not made' if run == 1 else 'was made again'}"
        assert not place.left_behind(), f"after --check run {run}: {place.left_behind()}"


@pytest.mark.parametrize("sig, bus", [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False)],
                         ids=["ctrl-c-no-system-bus", "ctrl-c-system-bus", "sigterm"])
def test_serving_stops_on_a_signal(place, sig, bus):
    bus_daemon = place.system_bus() if bus else None
    try:
        demo = place.start()
        try:
            wait_for(lambda: "serving until Ctrl-C" in output(demo), SERVING_BOUND, "the demo serving",
                     0.2, alive=demo.alive)
        except Timeout as e:
            pytest.fail(f"{e}:\n{tail(output(demo))}")
        text = output(demo)
        private_bus = "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + os.path.join(place.state, "dbus") in text
        assert private_bus != bus, \
            f"with{'' if bus else ' no'} system bus the demo {'started' if private_bus else 'did not start'}" \
            f" a dbus-daemon of its own:\n{tail(text)}"
        if sig == signal.SIGINT:
            os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C: the terminal's foreground process group
        else:
            os.kill(demo.pid, signal.SIGTERM)
        status = finish(demo, STOP_BOUND)
        text = output(demo)
        name = signal.Signals(sig).name
        assert status == 0 and f"stopped on {name}" in text, f"serving, {name}: status {status}\n{tail(text)}"
        assert not summary_problems(text), f"serving, {name}: {summary_problems(text)}\n{tail(text)}"
        assert "(counters unavailable)" not in text, f"serving, {name}: no counters over the bus:\n{tail(text)}"
        left = place.left_behind({bus_daemon.pid} if bus_daemon else ())
        assert not left, f"after {name}{' with a system bus' if bus else ''}: {left}"
    finally:
        if bus_daemon:
            bus_daemon.stop()


def test_ctrl_c_during_the_workload(place):
    demo = place.start()
    try:
        wait_for(lambda: "demo workload:" in output(demo), SERVING_BOUND, "the workload", 0.1, alive=demo.alive)
    except Timeout as e:
        pytest.fail(f"{e}:\n{tail(output(demo))}")
    os.killpg(demo.pid, signal.SIGINT)
    status = finish(demo, STOP_BOUND)
    text = output(demo)
    assert status == 128 + signal.SIGINT and "interrupted by SIGINT before serving" in text, \
        f"Ctrl-C during the workload: status {status}\n{tail(text)}"
    assert not place.left_behind(), f"after Ctrl-C during the workload: {place.left_behind()}"
