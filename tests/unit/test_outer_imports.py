"""`functions/` and `infra/` sit outside the `fleetmem` package, so import-linter does not see them:
their place is kept here by reading their imports with `ast` (every import, inside functions too).

- `functions/*/handler.py` is a thin Lambda entry point: it imports the standard library, Powertools
  and `fleetmem.transport.aws_lambda*` only; everything else is reached through the transport.
- `infra/` (the CDK app) describes the deployment: it imports no transport, no domain
  (`fleetmem.memory`) and no CLI.

Which modules may import `fleetmem.adapters` is a contract of its own, kept elsewhere.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HANDLER_ALLOWED = ("aws_lambda_powertools", "fleetmem.transport.aws_lambda")
#: Kept by another contract (only wiring imports the adapters), not by this test.
NOT_JUDGED_HERE = ("fleetmem.adapters",)
INFRA_FORBIDDEN = ("fleetmem.transport", "fleetmem.memory", "fleetmem.cli")

#: Imports that break these rules today: each needs a name moved into a module the rule allows (the
#: tool groups into the Lambda transport; the wire constants infra reads into fleetmem.config or
#: fleetmem.contract), which is work in the transport and domain packages. Emptied as they move;
#: nothing is added. (file, imported module) -> what has to move.
BEING_MOVED: dict[tuple[str, str], str] = {
    ("functions/admin/handler.py", "fleetmem.protocol"): "its tool groups, to come from the Lambda transport",
    ("functions/pages/handler.py", "fleetmem.protocol"): "PAGE_TOOLS, to come from the Lambda transport",
    ("infra/cold_start.py", "fleetmem.transport.aws_lambda.runtime"): "INIT_IMPORTS needs a home below transport",
    ("infra/constructs/common.py", "fleetmem.transport.aws_lambda.runtime"): "ENV_FUNCTION_GROUP belongs in config",
    ("infra/constructs/waf.py", "fleetmem.transport.aws_lambda.authorizer"): "credential_shape belongs in contract",
    ("infra/constructs/edge.py", "fleetmem.transport.aws_lambda.proxy"): "gateway bodies belong in contract",
    ("infra/constructs/heartbeat.py", "fleetmem.transport.aws_lambda.heartbeat"): "WAKE_FIELD belongs in config",
    ("infra/config.py", "fleetmem.memory.verbs"): "the tool list in registry order belongs in contract",
    ("infra/constructs/tool_functions.py", "fleetmem.memory.verbs"): "the tool list belongs in contract",
    ("infra/cost.py", "fleetmem.memory.verbs"): "the tool list in registry order belongs in contract",
}


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
        if m.split(".")[0] not in sys.stdlib_module_names
        and not _under(m, HANDLER_ALLOWED)
        and not _under(m, NOT_JUDGED_HERE)
    ]


def infra_violations(path: Path) -> list[str]:
    return [m for m in sorted(imported_modules(path)) if _under(m, INFRA_FORBIDDEN)]


def _found(paths: list[Path], check) -> list[tuple[str, str]]:
    return [(rel, m) for p in paths for m in check(p) if (rel := p.relative_to(ROOT).as_posix(), m) not in BEING_MOVED]


def test_handlers_import_only_the_lambda_transport_powertools_and_the_standard_library() -> None:
    handlers = sorted(ROOT.glob("functions/*/handler.py"))
    assert len(handlers) >= 10, "the function handlers moved: update this test"
    assert _found(handlers, handler_violations) == []


def test_infra_imports_no_transport_domain_or_cli() -> None:
    modules = sorted((ROOT / "infra").rglob("*.py"))
    assert _found(modules, infra_violations) == []


@pytest.mark.parametrize(
    ("where", "source", "check", "expected"),
    [
        ("functions/x/handler.py", "import boto3\n", handler_violations, ["boto3"]),
        ("functions/x/handler.py", "from fleetmem.memory import verbs\n", handler_violations, ["fleetmem.memory"]),
        ("functions/x/handler.py", "from fleetmem import cli\n", handler_violations, ["fleetmem", "fleetmem.cli"]),
        (
            "functions/x/handler.py",
            "import json\nfrom aws_lambda_powertools import Logger\nfrom fleetmem.transport.aws_lambda import X\n",
            handler_violations,
            [],
        ),
        (
            "infra/x.py",
            "def f():\n    from fleetmem.transport.http_api import app\n",
            infra_violations,
            ["fleetmem.transport.http_api"],
        ),
        ("infra/x.py", "from fleetmem import cli\n", infra_violations, ["fleetmem.cli"]),
        ("infra/x.py", "from fleetmem.config import ENV_LLM\n", infra_violations, []),
    ],
)
def test_the_checker_sees_a_planted_import(tmp_path, where, source, check, expected) -> None:
    planted = tmp_path / where
    planted.parent.mkdir(parents=True)
    planted.write_text(source)
    assert check(planted) == expected
