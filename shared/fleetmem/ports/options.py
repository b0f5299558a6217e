"""How a storage port method's keyword options are written once: a `TypedDict` types the method
(`**opts: Unpack[FactReadOptions]`, PEP 692) in the Protocol and in every adapter, and a frozen
dataclass deriving from `Options` holds the defaults; an implementation reads its options as
`q = FactRead.of(opts)`. Conventions: `fleetmem.ports`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self


class Options:
    """Base of the options dataclasses: `of` builds one from the keyword options a method was
    called with, the dataclass filling in what the caller left out."""

    @classmethod
    def of(cls, opts: Mapping[str, Any]) -> Self:
        return cls(**opts)
