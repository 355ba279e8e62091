"""bench_smoke's pytest run: a run where every test was skipped (no root)
exits 77, which ctest counts as skipped (SKIP_RETURN_CODE), never as
passed (dcache_testbed.skipped)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
# pylint: disable=wrong-import-position
from dcache_testbed.skipped import pytest_sessionfinish  # noqa: E402,F401  pylint: disable=unused-import
