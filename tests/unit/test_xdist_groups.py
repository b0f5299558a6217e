"""scripts/test runs the suite with `--dist loadgroup`: every test of one `xdist_group` (the local
stack's, the console's) must run on one worker, or each worker starts its own stack or server. The
grouping has broken silently before (pytest 9.2 with pytest-xdist 3.8: every test distributed on its
own), so a two-worker run of planted groups checks it: one group marked on its module, one added by
the hook of a package's conftest as tests/stack and tests/console add theirs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

MODULE = """
import pytest
pytestmark = pytest.mark.xdist_group("marked")
@pytest.mark.parametrize("i", range(6))
def test_marked(i):
    pass
"""
HOOKED = """
import pytest
@pytest.mark.parametrize("i", range(6))
def test_hooked(i):
    pass
"""
CONFTEST = """
import pytest
def pytest_collection_modifyitems(items):
    for item in items:
        if "test_hooked" in item.nodeid:
            item.add_marker(pytest.mark.xdist_group("hooked"))
"""
LOOSE = """
import pytest
@pytest.mark.parametrize("i", range(12))
def test_loose(i):
    pass
"""


def test_each_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "hooked").mkdir()
    for name, text in {
        "test_marked.py": MODULE,
        "hooked/test_hooked.py": HOOKED,
        "hooked/conftest.py": CONFTEST,
        "test_loose.py": LOOSE,
    }.items():
        (tmp_path / name).write_text(text)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "xdist",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            ".",
        ],
        cwd=tmp_path,
        # xdist alone (quicker workers), and none of the outer run's options or plugins
        env={
            **{k: v for k, v in os.environ.items() if k not in {"PYTEST_ADDOPTS", "PYTEST_PLUGINS"}},
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    ran = re.findall(r"\[(gw\d)\].*?PASSED (\S+?)::(test_\w+)", run.stdout)
    workers: dict[str, set[str]] = {}
    for worker, _path, test in ran:
        workers.setdefault(test, set()).add(worker)
    assert len(ran) == 24, run.stdout
    assert len(workers["test_marked"]) == 1 and len(workers["test_hooked"]) == 1, workers
