"""The package tests' one build: README.md's build step for the Debian
suite of the release under test (bookworm for 4.3, trixie for 6.5,
trixie-backports for 9.14), run verbatim at the top of the tree, as root:
ci/package.sh, lintian included. test_package.py installs what it made
here, test_readme_steps.py in a fresh root of the suite.
"""

import os
import re
import subprocess

import pytest

from dcache_testbed import releases
from readme import steps, suite_of


@pytest.fixture(scope="session")
def deb(release):
    """The package README's build step makes for the release, where the
    step's `# -> PATH` says it is."""
    if os.geteuid() != 0:
        pytest.skip("building and installing the package needs root")
    suite = suite_of(release)
    build = [block for role, block in steps(suite) if role == "build"]
    assert len(build) == 1, f"README marks {len(build)} build steps for {suite}, not one"
    res = subprocess.run(["sh", "-ec", build[0]], cwd=releases.TOP, capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"README's build step for {suite} (build, lintian) failed: {build[0].strip()}\n" \
                                f"{res.stdout[-3000:]}{res.stderr[-3000:]}"
    path = os.path.join(releases.TOP, re.search(r"# -> (\S+)", build[0]).group(1))
    made = sorted(os.listdir(os.path.dirname(path))) if os.path.isdir(os.path.dirname(path)) else []
    assert os.path.isfile(path), f"`{build[0].strip()}` made no {path} (its directory: {made})"
    return path
