"""README.md's steps for a newcomer, as the package tests read them: a
fenced block after `<!-- steps SUITE...: ROLE -->` is a step for each
Debian suite named (bookworm, trixie, trixie-backports), ROLE one of
build, server, start or client (test_readme_steps.py says who runs each)."""

import os
import re

from dcache_testbed import releases

README = os.path.join(releases.TOP, "README.md")
STEP = re.compile(r"^<!-- steps ([\w\s-]+): (build|server|start|client) -->\n```[^\n]*\n(.*?)^```", re.M | re.S)


def suite_of(release):
    """The Debian suite a release's package is for (its Ganesha's)."""
    return release.install_suite or release.suite


def steps(suite, text=None):
    """(role, block) of every block README marks for suite, in order."""
    if text is None:
        with open(README, encoding="utf-8") as f:
            text = f.read()
    return [(role, body) for suites, role, body in STEP.findall(text) if suite in suites.split()]
