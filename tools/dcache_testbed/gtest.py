"""GoogleTest programs (the C++ end-to-end clients) run against a server.

    gtest.run(srv, [build.bin("dcache_e2e_creds")])

runs the program in the server's namespaces with Server.env() (where it
reads DCACHE_SERVER, DCACHE_MNT, ...) and raises AssertionError naming the
tests that failed, or saying the server died while the program ran.
"""

import re

# "[  FAILED  ] Suite.Test", "[  FAILED  ] Inst/Suite.Test/param, where
# GetParam() = ..." or "... (12 ms)"; not the summary "[  FAILED  ] 2 tests,
# listed below:"
_FAILED = re.compile(r"^\[  FAILED  \] ([^\s,]+\.[^\s,]+)", re.M)


def failures(output):
    """The tests a gtest program's output says failed, each once, in order."""
    return list(dict.fromkeys(_FAILED.findall(output)))


def verdict(what, returncode, output, server_alive=True):
    """What went wrong in a gtest program's run ("" if nothing did)."""
    problems = []
    if returncode != 0:
        failed = failures(output)
        problems.append(f"{what} exited with status {returncode}"
                        + (f"; failed: {', '.join(failed)}" if failed else " (no test reported as failed)"))
    if not server_alive:
        problems.append(f"ganesha.nfsd died while {what} ran")
    return "; ".join(problems)


def run(srv, argv, env=None, timeout=None, what=None):
    """argv in srv's namespaces; its result (subprocess.CompletedProcess)
    when it passed and the server still serves, else AssertionError."""
    what = what or argv[0].rsplit("/", 1)[-1]
    res = srv.run(argv, check=False, env=env, timeout=timeout)
    why = verdict(what, res.returncode, res.stdout, srv.ganesha.alive())
    if why:
        raise AssertionError(why)
    return res
