"""The one release table (ci/releases.tsv) and what is checked against it:
ci/release.sh's reading of it, the adapter's compat directories, the
Ansible role's package versions, README.md's table."""

import os
import re
import subprocess
import sys

import yaml

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tools"))
from dcache_testbed import releases  # noqa: E402  pylint: disable=wrong-import-position

TABLE = releases.read_table()


def upstream_version():
    with open(os.path.join(TOP, "debian", "changelog"), encoding="utf-8") as f:
        return re.match(r"nfs-ganesha-dcache \(([^)]+)\)", f.read()).group(1)


def test_one_host_release_and_every_release_has_its_compat_headers():
    assert [r.name for r in TABLE if not r.root_name] == ["4.3"]
    for r in TABLE:
        compat = os.path.join(TOP, "fsal_dcache", "adapter", "compat", r.name)
        assert os.path.isfile(os.path.join(compat, "dcache_compat.h")), compat
        assert os.path.isfile(os.path.join(compat, "dcache_abi.h")), compat
        assert r.e2e in ("all", "releases")


def test_release_sh_reads_what_the_testbed_reads():
    for r in TABLE:
        out = subprocess.run(
            ["bash", "-c", 'top=$1; . "$top/ci/release.sh"; release_select "$2" && printf "%s\\n" '
             '"$release_debian_version" "$release_fsal_api" "$release_root" "$release_build_dir" '
             '"$release_deb_version_suffix" "$release_core_param" "$release_tmpfs_refused" "$release_e2e"',
             "x", TOP, r.name], capture_output=True, text=True, check=True).stdout.split("\n")
        assert out[:8] == [r.debian_version, str(r.fsal_api), r.root, r.build_dir, r.package_suffix,
                           "\n".join(r.core_param), r.tmpfs_refused, r.e2e]
    bad = subprocess.run(["bash", "-c", 'top=$1; . "$top/ci/release.sh"; release_select 1.0', "x", TOP],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "DCACHE builds for 4.3 6.5 9.14" in bad.stderr


def test_the_ansible_roles_package_versions_are_the_tables():
    with open(os.path.join(TOP, "deploy", "ansible", "roles", "dcache", "defaults", "main.yml"),
              encoding="utf-8") as f:
        versions = yaml.safe_load(f)["dcache_package_versions"]
    assert versions == {r.debian_version: upstream_version() + r.package_suffix for r in TABLE}


def test_the_readmes_table_is_the_tables():
    with open(os.path.join(TOP, "README.md"), encoding="utf-8") as f:
        rows = [line for line in f if line.startswith("| ")]
    for r in TABLE:
        row = [line for line in rows if f"| {r.debian_version} | {r.fsal_api} |" in line]
        assert len(row) == 1, f"README.md has {len(row)} rows for {r.debian_version}"
        assert row[0].startswith(f"| {r.suite}" if not r.install_suite else f"| {r.install_suite}"), row[0]
        assert f" {upstream_version()}{r.package_suffix} " in row[0], row[0]


def test_the_ansible_roles_ganesha_with_metrics_are_the_releases_the_module_registers_them_on():
    """dcache_ganesha_with_metrics: the releases whose compat knob
    DCACHE_HAS_MONITORING is 1 (the module registers its metrics in
    Ganesha's registry; the others run dcache-exporter)."""
    with open(os.path.join(TOP, "deploy", "ansible", "roles", "dcache", "defaults", "main.yml"),
              encoding="utf-8") as f:
        listed = yaml.safe_load(f)["dcache_ganesha_with_metrics"]
    want = []
    for r in TABLE:
        with open(os.path.join(TOP, "fsal_dcache", "adapter", "compat", r.name, "dcache_compat.h"),
                  encoding="utf-8") as f:
            knob = re.search(r"^#define DCACHE_HAS_MONITORING ([01])$", f.read(), re.M)
        assert knob, r.name
        if knob.group(1) == "1":
            want.append(r.debian_version)
    assert listed == want
