"""A stand-in for `systemctl restart nfs-ganesha` on a head the testbed
runs (heads.Heads.serve_restarts): asks the test to restart the
ganesha.nfsd of state dir STATE and waits until it did.

    python3 -m dcache_testbed.restart STATE

Exit 0 once the test answered (ganesha.nfsd started again, not necessarily
serving yet, as with systemctl), 1 when no answer came within 60 s.
"""

import os
import sys

from .procs import Timeout, wait_for


def main():
    state = sys.argv[1]
    done = os.path.join(state, "restart.done")
    if os.path.exists(done):
        os.unlink(done)
    with open(os.path.join(state, "restart.request"), "w", encoding="utf-8"):
        pass
    try:
        wait_for(lambda: os.path.exists(done), 60, "the restart", 0.05)
    except Timeout as e:
        sys.exit(f"dcache_testbed.restart: {e} (does the test serve restarts?)")
    with open(done, encoding="utf-8") as f:
        sys.stdout.write(f.read())


if __name__ == "__main__":
    main()
