"""The AWS SDKs stay inside their adapter package: nothing else in shared/fleetmem imports boto3,
botocore or opensearchpy (statically, anywhere in the module, including inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import fleetmem

SDKS = {"boto3", "botocore", "opensearchpy"}
PACKAGE = Path(fleetmem.__file__).resolve().parent
ALLOWED = PACKAGE / "adapters" / "aws"


def sdk_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names = [str(node.args[0].value)]
        found += [f"{path.relative_to(PACKAGE)}:{node.lineno} {n}" for n in names if n.split(".")[0] in SDKS]
    return found


def test_no_module_outside_the_aws_adapters_imports_an_aws_sdk():
    offenders = [hit for p in sorted(PACKAGE.rglob("*.py")) if ALLOWED not in p.parents for hit in sdk_imports(p)]
    assert offenders == []


def test_the_scan_sees_the_aws_adapters_own_imports():
    # guards the scanner itself: the adapter package does import the SDKs
    assert any(sdk_imports(p) for p in ALLOWED.rglob("*.py"))
