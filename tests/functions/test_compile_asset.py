"""`scripts/lib/compile_asset.py`: the asset ships bytecode the runtime's Python reads without
checking source timestamps, or says plainly that it could not compile."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("compile_asset", ROOT / "scripts" / "lib" / "compile_asset.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_module_gets_unchecked_hash_bytecode_for_the_runtime_version(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text("X = 1\n")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    report = _module().compile_asset(tmp_path, version)
    tag = sys.implementation.cache_tag
    pycs = sorted(p.name for p in tmp_path.rglob("*.pyc"))
    assert pycs == [f"__init__.{tag}.pyc", f"mod.{tag}.pyc"]
    flags = int.from_bytes((tmp_path / "pkg" / "__pycache__" / f"mod.{tag}.pyc").read_bytes()[4:8], "little")
    assert flags == 0b01  # hash-based, not checked against the source (PEP 552)
    assert "2 modules compiled" in report


def test_without_an_interpreter_of_that_version_it_compiles_nothing_and_says_why(tmp_path):
    (tmp_path / "mod.py").write_text("X = 1\n")
    report = _module().compile_asset(tmp_path, "2.1")
    assert "skipped, no python 2.1" in report
    assert not list(tmp_path.rglob("*.pyc"))
