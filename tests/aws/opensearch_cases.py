"""Fixed inputs of the OpenSearch request-body golden tests."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetmem.memory.vectors import pack
from fleetmem.models import SearchDoc, SearchQuery

INDEX = "fleetmem-docs-amazon-titan-embed-text-v2-0-4-v2"
MODEL = "amazon.titan-embed-text-v2:0"
VECTOR = [0.5, 0.5, 0.5, 0.5]
QUERY = SearchQuery(
    tenant="t1",
    text="green tea",
    vector=pack(VECTOR),
    vector_model=MODEL,
    kinds=("chunk", "fact"),
    world_only=True,
    k=20,
)
T = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)
DOCS = [
    SearchDoc(
        tenant="t1",
        doc_id="chunk:people/alice#0",
        kind="chunk",
        slug="people/alice",
        title="Alice",
        text="Alice\n\nDrinks green tea.",
        updated_at=T,
        vector=pack(VECTOR),
        vector_model=MODEL,
    ),
    SearchDoc(
        tenant="t1",
        doc_id="fact:f_1",
        kind="fact",
        slug="",
        title="",
        text="likes oolong",
        visibility="private",
        fact_id="f_1",
        updated_at=T,
        vector=pack([1.0, 0, 0, 0]),
        vector_model="another-model",
    ),
]
