"""The OpenAPI document is generated from the registry: every tool has a result model and an
operation; the status map covers every code; fixes render nested arguments as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator

from pydantic import BaseModel

from fleetmem.contract.status import HTTP_STATUS, status_for
from fleetmem.memory.verbs import REGISTRY
from fleetmem.models import Caller
from fleetmem.protocol import ERROR_CODES
from fleetmem.transport.dispatch import dispatch
from fleetmem.transport.openapi import description_examples, openapi_document


def test_every_tool_has_a_result_model_and_an_operation_with_its_schemas():
    doc = openapi_document("full")
    for name, spec in REGISTRY.items():
        assert issubclass(spec.result, BaseModel) and spec.result is not BaseModel, name
        op = doc["paths"][f"/v1/{name}"]["post"]
        assert op["operationId"] == name
        assert f"{name}.result" in doc["components"]["schemas"]
        assert op["requestBody"]["content"]["application/json"]["schema"]["type"] == "object"
        assert op["responses"]["403"] == {"$ref": "#/components/responses/Error403"}
    assert {p.removeprefix("/v1/") for p in openapi_document("verbs")["paths"]} == {
        s.name for s in REGISTRY.values() if s.surface == "verbs"
    } | {"tools", "openapi.json"}


def _references(node: object) -> Iterator[str]:
    """Every reference in a document: `$ref` values and discriminator mapping targets."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            elif k == "discriminator" and isinstance(v, dict):
                yield from v.get("mapping", {}).values()
            else:
                yield from _references(v)
    elif isinstance(node, list):
        for v in node:
            yield from _references(v)


def test_every_ref_in_the_document_resolves():
    doc = openapi_document("full")
    refs = set(_references(doc))
    for ref in refs:
        assert ref.startswith("#/"), ref
        node = doc
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]


def test_every_error_code_has_an_http_status():
    assert set(ERROR_CODES) <= set(HTTP_STATUS)
    assert status_for("rate_limited") == 429 and status_for("unavailable") == 503
    assert status_for("no_such_code") == 500


def test_examples_come_from_the_tool_descriptions():
    assert description_examples('Call it. Example: {"name": "Alice"}. More.') == [{"name": "Alice"}]
    doc = openapi_document("full")
    assert doc["paths"]["/v1/entity"]["post"]["requestBody"]["content"]["application/json"]["examples"]


def test_a_refused_put_page_timeline_renders_as_json(deps):
    """Regression (found by the Schemathesis run): the fix echoed put_page's timeline items as
    pydantic objects, so the envelope could not be rendered as JSON."""
    caller = Caller(tenant="t1", client_id="c", scopes=frozenset({"read", "write"}))
    result = dispatch(
        "put_page",
        {"slug": "\u0019 bad slug", "content": "x", "timeline": [{"date": "2026-06-01", "text": "t"}]},
        caller,
        deps,
    )
    assert result.is_error and result.body["code"] == "invalid_params"
    json.dumps(result.body)
