"""Outside the package, too, only `fleetmem.wiring` names an adapter: the Lambda handlers
(`functions/`) import the Lambda glue (`fleetmem.transport.aws_lambda`), and the CDK app (`infra/`)
reads the AWS adapter's table and index schema through `fleetmem.wiring`. Inside the package the
import-linter contract "Only the composition root names an adapter" keeps the same rule
(tests/unit/test_import_contract.py); these two trees are not part of the package, so their imports
are read here from the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, at any depth (imports inside functions too)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from fleetmem import adapters` names the package as well
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _adapter_imports(tree: str) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted((ROOT / tree).rglob("*.py"))
        if "cdk.out" not in path.parts and "node_modules" not in path.parts
        for line, module in _imported(path)
        if module == "fleetmem.adapters" or module.startswith("fleetmem.adapters.")
    ]


@pytest.mark.parametrize("tree", ["functions", "infra"])
def test_no_module_outside_the_package_imports_an_adapter(tree: str) -> None:
    assert (ROOT / tree).is_dir()
    assert _adapter_imports(tree) == [], f"{tree}/ imports an adapter; reach it through fleetmem.wiring"


def test_every_handler_imports_only_the_lambda_glue_powertools_and_protocol_names() -> None:
    allowed = ("fleetmem.transport.aws_lambda", "aws_lambda_powertools", "fleetmem.protocol")
    handlers = sorted((ROOT / "functions").glob("*/handler.py"))
    assert handlers
    stray = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in handlers
        for _, module in _imported(path)
        if not any(module == a or module.startswith(a + ".") for a in allowed)
    ]
    assert stray == []
