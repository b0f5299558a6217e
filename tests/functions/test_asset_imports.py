"""The static import check that `scripts/build-lambda` runs over the asset (scripts/lib/asset_imports.py),
and the lock file the build installs."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("asset_imports", ROOT / "scripts" / "lib" / "asset_imports.py")
assert _spec and _spec.loader
asset_imports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(asset_imports)


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def source_asset(tmp_path: Path) -> Path:
    """fleetmem + functions as the build copies them, with the third-party packages the lock
    installs stood in by empty packages (the check looks at names, not contents)."""
    out = tmp_path / "asset"
    shutil.copytree(ROOT / "shared" / "fleetmem", out / "fleetmem")
    shutil.copytree(ROOT / "functions", out / "functions")
    for top in (
        "pydantic",
        "yaml",
        "platformdirs",
        "mcp",
        "mcp_types",
        "aws_lambda_powertools",
        "jwt",
        "anyio",
        "starlette",
        "opensearchpy",
        "httpx",
        "cryptography",
        "uvicorn",
        "sse_starlette",
        "pydantic_core",
        "typing_extensions",
        "requests",
        "urllib3",
        "dateutil",
        "certifi",
        "jmespath",
        "httpx2",
    ):
        write(out, f"{top}/__init__.py", "")
    return out


def test_the_fleetmem_sources_pass_the_check_with_the_locked_packages(tmp_path):
    asset = source_asset(tmp_path)
    # (third-party submodules are absent from the stand-ins; the real build checks those)
    problems = [
        p
        for p in asset_imports.check(asset)
        if "local-only" in p or ": imports fleetmem" in p or ": imports functions" in p
    ]
    assert problems == []


def test_a_module_level_import_of_the_sqlite_store_on_a_handler_path_fails_the_check(tmp_path):
    asset = source_asset(tmp_path)
    write(asset, "fleetmem/adapters/local/__init__.py", "from fleetmem.adapters.local.sqlite import open_local\n")
    problems = asset_imports.check(asset)
    assert any("module-level import of local-only fleetmem.adapters.local.sqlite" in p for p in problems), problems


def test_an_import_of_a_package_missing_from_the_asset_fails_the_check(tmp_path):
    asset = tmp_path / "asset"
    write(asset, "functions/recall/handler.py", "from fleetmem.glue import handle\n")
    write(asset, "fleetmem/__init__.py", "")
    write(asset, "fleetmem/glue.py", "import json\n\ndef handle():\n    import numpy\n")
    assert asset_imports.check(asset) == ["fleetmem/glue.py:4: imports numpy, which is not in the asset"]


def test_type_checking_and_import_error_guarded_imports_are_not_required(tmp_path):
    asset = tmp_path / "asset"
    write(asset, "functions/recall/handler.py", "import fleetmem.glue\n")
    write(asset, "fleetmem/__init__.py", "")
    write(
        asset,
        "fleetmem/glue.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import numpy\n"
        "try:\n    import ujson\nexcept ImportError:\n    ujson = None\n",
    )
    assert asset_imports.check(asset) == []


def test_the_lambda_lock_pins_every_package_with_a_hash_and_has_no_stray_lines():
    for name in ("requirements-lambda.txt", "requirements-lambda-nodeps.txt"):
        text = (ROOT / "infra" / name).read_text()
        requirements = [ln for ln in text.splitlines() if ln and not ln.startswith((" ", "#"))]
        assert requirements, name
        for line in requirements:
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[^ ]+ \\", line), (name, line)
        assert text.count("--hash=sha256:") >= len(requirements)


@pytest.mark.parametrize("pkg", ["numpy", "onnxruntime", "tokenizers", "boto3"])
def test_the_lock_ships_none_of_the_local_embedder_or_the_runtime_sdk(pkg):
    text = (ROOT / "infra" / "requirements-lambda.txt").read_text().lower()
    assert not re.search(rf"^{pkg}==", text, re.M)
