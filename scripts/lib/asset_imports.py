"""Static import check of a built Lambda asset: every import a handler can reach must name a module
the asset holds (or the standard library, or the SDK the Lambda runtime provides).

    python scripts/lib/asset_imports.py build/lambda      # exit 1 and one line per problem

How it walks: from each `functions/<name>/handler.py`, every `import` in a `fleetmem` or
`functions` module is followed — module-level ones and the ones inside functions (those run on
first use, which is every invocation's path) — together with the parent packages' `__init__`
that Python executes on the way. Imports under `if TYPE_CHECKING:` or guarded by
`except ImportError` are skipped. Third-party modules are checked to exist, not walked (pip
resolved their own dependencies) — except `NO_DEPS`, installed with `--no-deps`, whose imports
are walked too (that is how a missing `events` package for opensearch-py shows).

`LOCAL_ONLY` names the modules of the local backend (SQLite + numpy, the ONNX embedder): a
function-level import of one is the wiring choosing the local backend and is not followed; a
module-level import of one from anything a handler reaches is an error, because it would load
numpy in every function (the crash this check exists for).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Packages the AWS Lambda Python runtime puts on sys.path itself (after the function's code).
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "awslambdaric"})
#: Local-backend modules that a Lambda function never loads (see the module docstring).
LOCAL_ONLY = frozenset(
    {"fleetmem.adapters.local.sqlite", "fleetmem.adapters.local.embedder", "fleetmem.adapters.local.storebench"}
)
OWN = ("fleetmem", "functions")
#: Installed with --no-deps (pip resolved nothing for them), so their imports are walked like ours.
NO_DEPS = ("opensearchpy",)


def module_file(root: Path, name: str) -> Path | None:
    base = root.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def third_party_present(root: Path, name: str) -> bool:
    parts = name.split(".")
    base = root.joinpath(*parts)
    if base.is_dir() or base.with_suffix(".py").is_file():
        return True
    return base.parent.is_dir() and any(base.parent.glob(parts[-1] + ".*.so"))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _guards_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(n, ast.Name) and n.id in {"ImportError", "ModuleNotFoundError"} for n in names):
            return True
    return False


def imports_of(path: Path, module: str) -> Iterator[tuple[str, list[str], bool, int]]:
    """(imported module, names imported from it, nested in a function, line) for one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(nodes: list[Any], nested: bool) -> Iterator[tuple[str, list[str], bool, int]]:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield alias.name, [], nested, node.lineno
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                yield target, [a.name for a in node.names], nested, node.lineno
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from walk(node.orelse, nested)
            elif isinstance(node, ast.Try) and _guards_import_error(node):
                continue
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from walk(list(getattr(node, "body", [])), True)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    children = getattr(node, field, None)
                    if isinstance(children, list):
                        yield from walk([c for c in children if isinstance(c, ast.stmt | ast.excepthandler)], nested)

    yield from walk(tree.body, False)


def check(root: Path) -> list[str]:
    """Problems found in the asset at `root` (empty when every reachable import resolves)."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    problems: list[str] = []
    seen: set[str] = set()
    todo = sorted(f"functions.{p.parent.name}.handler" for p in (root / "functions").glob("*/handler.py"))
    if not todo:
        return [f"{root}: no functions/<name>/handler.py found"]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages run first
        path = module_file(root, module)
        if path is None:
            continue  # a namespace directory (functions/) or reported by the importer
        for target, names, nested, line in imports_of(path, module):
            top = target.split(".")[0]
            where = f"{path.relative_to(root)}:{line}"
            if top in OWN or top in NO_DEPS:
                candidates = [target] + [f"{target}.{n}" for n in names if module_file(root, f"{target}.{n}")]
                for name in candidates:
                    if name in LOCAL_ONLY:
                        if not nested:
                            problems.append(f"{where}: module-level import of local-only {name} (loads numpy)")
                        continue
                    if module_file(root, name) is None and not (root / name.replace(".", "/")).is_dir():
                        problems.append(f"{where}: imports {name}, which is not in the asset")
                        continue
                    todo.append(name)
            elif top in stdlib or top in RUNTIME_PROVIDED:
                continue
            elif not third_party_present(root, target):
                problems.append(f"{where}: imports {target}, which is not in the asset")
    return sorted(set(problems))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: asset_imports.py ASSET_DIR", file=sys.stderr)
        return 2
    problems = check(Path(argv[1]))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} import(s) the Lambda asset cannot satisfy", file=sys.stderr)
        return 1
    print("imports: every module a handler can reach is in the asset")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
