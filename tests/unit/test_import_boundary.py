"""The domain (fleetmem.memory) sees only ports: it never imports an SDK, the MCP stack or an adapter.

Walks every module under shared/fleetmem/memory with `ast`, so an import hidden inside a function
or an `if TYPE_CHECKING:` block is caught as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MEMORY = Path(__file__).resolve().parents[2] / "shared" / "fleetmem" / "memory"
FORBIDDEN = (
    "boto3",
    "botocore",
    "opensearchpy",
    "mcp",
    "mcp_types",
    "aws_lambda_powertools",
    "fleetmem.adapters",
)


def imported_modules(path: Path, *, as_path: Path | None = None) -> list[tuple[int, str]]:
    """Every module `path` imports (absolute names), with line numbers. `as_path` parses the file as
    if it lived there, which decides what its relative imports mean."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    location = as_path or path
    module_parts = ["fleetmem", *location.relative_to(MEMORY.parent).with_suffix("").parts]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: strip `level` trailing parts of this module's dotted name
                base = module_parts[: -node.level]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def is_forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def domain_files() -> list[Path]:
    return sorted(MEMORY.rglob("*.py"))


def test_the_domain_package_exists_and_has_modules() -> None:
    assert domain_files(), f"no python modules found under {MEMORY}"


@pytest.mark.parametrize("path", domain_files(), ids=lambda p: str(p.relative_to(MEMORY)))
def test_domain_module_imports_no_sdk_transport_or_adapter(path: Path) -> None:
    bad = [f"line {line}: {module}" for line, module in imported_modules(path) if is_forbidden(module)]
    assert not bad, f"{path.relative_to(MEMORY.parent)} imports forbidden modules: {bad}"


@pytest.mark.parametrize(
    "source, forbidden",
    [
        ("import boto3", True),
        ("from botocore.exceptions import ClientError", True),
        ("def f():\n    import opensearchpy", True),
        ("from mcp.server import Server", True),
        ("import mcp_types as t", True),
        ("from aws_lambda_powertools import Logger", True),
        ("from fleetmem.adapters.local import open_local", True),
        ("from fleetmem import adapters", True),
        ("from ...adapters import local", True),
        ("from ..ports import Deps", False),
        ("import mcpish", False),
        ("from fleetmem.ports import Deps", False),
        ("from fleetmem.models import Fact", False),
    ],
)
def test_boundary_checker_flags_exactly_the_forbidden_imports(tmp_path: Path, source: str, forbidden: bool) -> None:
    fake = tmp_path / "probe.py"
    fake.write_text(source, encoding="utf-8")
    modules = [m for _, m in imported_modules(fake, as_path=MEMORY / "verbs" / "probe.py")]
    assert any(is_forbidden(m) for m in modules) is forbidden
