"""The kernel's log from a point on (/dev/kmsg): what happened to a test's
own devices while it ran, whatever other tests beside it log.

    with KernelLog() as klog:       # from now on
        ...
        lines = klog.lines()        # every message since, in order
        shutdowns(lines, "loop3")   # XFS shutdowns of /dev/loop3

Reading /dev/kmsg from its end (not dmesg's whole buffer) keeps the lines
of earlier runs on a reused loop device out; records overwritten before
they were read are said so in a line of their own.
"""

import os
import re

LOST = "testbed: kernel log records lost (overwritten before they were read)"
# XFS's words for a shutdown: "User initiated shutdown (0x2) received",
# "Metadata I/O Error ... Shutting down filesystem", "Log I/O Error ...
# Shutting down filesystem", "Filesystem has been shut down ..."
_SHUTDOWN = re.compile(r"shut(ting)? ?down", re.I)


def record_text(raw):
    """A /dev/kmsg record ("PRI,SEQ,USEC,FLAGS;text\\n KEY=value...") as
    its message text."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    head, _, rest = text.partition(";")
    return (rest if "," in head else text).split("\n", 1)[0]


def about(lines, dev):
    """The lines naming a device (loopN): "XFS (loopN): ...", "loopN: ...",
    "..., dev loopN, ..."."""
    marks = (f"({dev})", f"{dev}:", f"dev {dev},")
    return [line for line in lines if any(m in line for m in marks)]


def shutdowns(lines, dev):
    """The lines saying the filesystem on dev (loopN) was shut down."""
    return [line for line in about(lines, dev) if line.startswith("XFS") and _SHUTDOWN.search(line)]


class KernelLog:
    """The kernel's messages from its creation on."""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        os.lseek(self.fd, 0, os.SEEK_END)
        self.seen = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def lines(self):
        """Every message since the start, in order."""
        while self.fd >= 0:
            try:
                raw = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # EPIPE: the next records were overwritten
                self.seen.append(LOST)
                continue
            self.seen.append(record_text(raw))
        return list(self.seen)
