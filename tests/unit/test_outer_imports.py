"""`functions/` and `infra/` sit outside the `fleetmem` package, so import-linter does not see them:
their place in the layers is kept here by reading their imports with `ast` (every import, inside
functions too).

- `functions/*/handler.py` is a thin Lambda entry point, the top of its function's stack: it imports
  the standard library, Powertools, the Lambda glue (`fleetmem.transport.aws_lambda*`) and the wire
  constants (`fleetmem.protocol`) only; everything else is reached through the glue.
- `infra/` (the CDK app) stands on top of the house beside the CLI: it describes the deployment from
  the code's own lists (the tool registry, the Lambda runtime's groups, the AWS adapter's table and
  index schema), so it may read any module below, but no client-side module (the CLI, hooks, the
  console, the remote lane) and no adapter except through `fleetmem.wiring`, the one module that
  names adapters (the same rule import-linter keeps inside the package).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HANDLER_ALLOWED = ("aws_lambda_powertools", "fleetmem.transport.aws_lambda", "fleetmem.protocol")
INFRA_FORBIDDEN = (
    "fleetmem.adapters",
    "fleetmem.cli",
    "fleetmem.hooks",
    "fleetmem.web",
    "fleetmem.remote",
    "fleetmem.lanes",
)


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; `from a import b` counts as `a` and `a.b`
    when `a` is a package name of ours, so `from fleetmem import cli` is seen)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            if node.module == "fleetmem":
                out.update(f"fleetmem.{alias.name}" for alias in node.names)
    return out


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def handler_violations(path: Path) -> list[str]:
    return [
        m
        for m in sorted(imported_modules(path))
        if m.split(".")[0] not in sys.stdlib_module_names and m != "fleetmem" and not _under(m, HANDLER_ALLOWED)
    ]


def infra_violations(path: Path) -> list[str]:
    return [m for m in sorted(imported_modules(path)) if _under(m, INFRA_FORBIDDEN)]


def _found(paths: list[Path], check) -> list[tuple[str, str]]:
    return [(p.relative_to(ROOT).as_posix(), m) for p in paths for m in check(p)]


def test_handlers_import_only_the_lambda_glue_powertools_protocol_and_the_standard_library() -> None:
    handlers = sorted(ROOT.glob("functions/*/handler.py"))
    assert len(handlers) >= 10, "the function handlers moved: update this test"
    assert _found(handlers, handler_violations) == []


def test_nothing_else_under_functions_imports_an_adapter() -> None:
    modules = [p for p in sorted((ROOT / "functions").rglob("*.py")) if "node_modules" not in p.parts]
    found = [
        (rel, m)
        for rel, m in _found(modules, lambda p: sorted(imported_modules(p)))
        if _under(m, ("fleetmem.adapters",))
    ]
    assert found == [], "functions/ reaches an adapter; go through the Lambda glue"


def test_infra_imports_no_client_side_module_and_no_adapter() -> None:
    modules = [p for p in sorted((ROOT / "infra").rglob("*.py")) if "cdk.out" not in p.parts]
    assert modules
    assert _found(modules, infra_violations) == [], "reach an adapter's schema through fleetmem.wiring"


@pytest.mark.parametrize(
    ("where", "source", "check", "expected"),
    [
        ("functions/x/handler.py", "import boto3\n", handler_violations, ["boto3"]),
        ("functions/x/handler.py", "from fleetmem.memory import verbs\n", handler_violations, ["fleetmem.memory"]),
        ("functions/x/handler.py", "from fleetmem import cli\n", handler_violations, ["fleetmem.cli"]),
        (
            "functions/x/handler.py",
            "def f():\n    from fleetmem.adapters.aws import sdk_client\n",
            handler_violations,
            ["fleetmem.adapters.aws"],
        ),
        (
            "functions/x/handler.py",
            "import json\nfrom aws_lambda_powertools import Logger\nfrom fleetmem.transport.aws_lambda import X\n"
            "from fleetmem.protocol import PAGE_TOOLS\n",
            handler_violations,
            [],
        ),
        (
            "infra/x.py",
            "def f():\n    from fleetmem.adapters.aws.tables import TABLES\n",
            infra_violations,
            ["fleetmem.adapters.aws.tables"],
        ),
        ("infra/x.py", "from fleetmem import cli\n", infra_violations, ["fleetmem.cli"]),
        ("infra/x.py", "from fleetmem.web.app import App\n", infra_violations, ["fleetmem.web.app"]),
        (
            "infra/x.py",
            "from fleetmem.wiring import TABLES\nfrom fleetmem.config import ENV_LLM\n",
            infra_violations,
            [],
        ),
    ],
)
def test_the_checker_sees_a_planted_import(tmp_path, where, source, check, expected) -> None:
    planted = tmp_path / where
    planted.parent.mkdir(parents=True)
    planted.write_text(source)
    assert check(planted) == expected
