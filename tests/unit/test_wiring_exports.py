"""`fleetmem.wiring` is the one module that names adapters. The names other layers need from an
adapter (`ADAPTER_EXPORTS`) are imported on first use (PEP 562 `__getattr__`), so a Lambda or the
local server loads no adapter module it does not use; the same names are imported under
`TYPE_CHECKING`, so type checkers and the import graph see them. The two lists must agree, and
every name must resolve to the adapter's own object."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import fleetmem.wiring as wiring

SOURCE = Path(wiring.__file__)


def _type_checking_names() -> dict[str, str]:
    tree = ast.parse(SOURCE.read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    found.update({alias.name: imp.module for alias in imp.names})
    return found


def test_the_type_checking_imports_name_exactly_the_lazy_exports() -> None:
    assert _type_checking_names() == wiring.ADAPTER_EXPORTS


@pytest.mark.parametrize("name", sorted(wiring.ADAPTER_EXPORTS))
def test_every_export_is_the_adapters_own_object(name: str) -> None:
    module = importlib.import_module(wiring.ADAPTER_EXPORTS[name])
    assert getattr(wiring, name) is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_adapter_name"):
        wiring.no_such_adapter_name  # noqa: B018
