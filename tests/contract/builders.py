"""Small record builders for the contract suites (explicit values, no randomness)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetmem.memory.vectors import pack
from fleetmem.models import Fact, Page, SearchDoc

T0 = datetime(2026, 6, 11, 9, 30, 0, tzinfo=UTC)


def at(minutes: float = 0, *, base: datetime = T0) -> datetime:
    return base + timedelta(minutes=minutes)


def fact(tenant: str, n: int, **kw: Any) -> Fact:
    values: dict[str, Any] = {
        "tenant": tenant,
        "fact_id": f"f_{n:04d}",
        "seq": n,
        "text": f"fact number {n}",
        "provenance": "test",
        "client_id": "agent-a",
        "created_at": at(n),
    }
    values.update(kw)
    return Fact(**values)


def page(tenant: str, slug: str, **kw: Any) -> Page:
    values: dict[str, Any] = {
        "tenant": tenant,
        "slug": slug,
        "title": slug.rsplit("/", 1)[-1].replace("-", " ").title(),
        "created_at": T0,
        "updated_at": T0,
    }
    values.update(kw)
    return Page(**values)


def unit(*components: float, dim: int = 8) -> bytes:
    """A packed unit vector of `dim` floats from the leading components."""
    v = list(components) + [0.0] * (dim - len(components))
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return pack([x / norm for x in v])


def doc(tenant: str, doc_id: str, text: str, **kw: Any) -> SearchDoc:
    kind = "fact" if doc_id.startswith("fact:") else "chunk"
    values: dict[str, Any] = {
        "tenant": tenant,
        "doc_id": doc_id,
        "kind": kind,
        "slug": doc_id.split(":", 1)[1].split("#", 1)[0] if kind == "chunk" else "",
        "title": "",
        "text": text,
        "updated_at": T0,
    }
    if kind == "fact":
        values["fact_id"] = doc_id.split(":", 1)[1]
    values.update(kw)
    return SearchDoc(**values)
