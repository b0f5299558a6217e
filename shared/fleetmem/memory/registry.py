"""The tool registry: one entry per tool, the single source of tools/list, dispatch, the CLI,
`fleetmem protocol --json`, the CDK function list and the conformance runner.

Each verb module defines its `SPEC = ToolSpec(...)` (usually through `read_tool` / `write_tool`)
and registers nothing; the one list of tools is `fleetmem.memory.verbs.TOOLS`, which registers
every spec here in that order (the order of tools/list). Read the registry from
`fleetmem.memory.verbs.REGISTRY`: it is this module's `REGISTRY`, complete.

Every tool has a typed parameter model (a `params.Params`, whose failures become the tool's
`invalid_params`; strict, with every integer parameter bounded in its schema — D18) and a result
model that describes its success body (`validate_result`); the contract they spell out is
docs/protocol.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union, get_args

from pydantic import BaseModel, Field, RootModel, create_model

from fleetmem.errors import Outcome
from fleetmem.memory.params import Params
from fleetmem.models import Caller
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import Scope, Surface

RunFn = Callable[[Deps, Caller, Any, CallContext], Outcome]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str  # written for the model: what, when, an example, the common fix
    params: type[Params]  # pydantic model; its JSON schema is the tool's inputSchema
    run: RunFn
    result: type[BaseModel]  # the success body's shape (`protocol --json`, conformance, tests)
    scope: Scope  # the scope needed to list and call it
    surface: Surface  # "verbs": one of the seven (on both surfaces); "full": full surface only
    writes: bool  # D3: writes reject unknown params, reads ignore them with a notice
    annotations: dict[str, bool] = field(default_factory=dict)  # readOnlyHint, idempotentHint, ...
    idempotency: bool = False  # D2: accepts `idempotency_key`
    calls_out: bool = False  # waits on a service outside the store (a model): never run on the event loop

    def __post_init__(self) -> None:
        # D28: every success body may carry the call's notices; the result model declares them.
        object.__setattr__(self, "result", with_notices_field(self.result))

    def input_schema(self) -> dict[str, Any]:
        schema = self.params.model_json_schema()
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        return schema

    def validate_result(self, body: dict[str, Any]) -> BaseModel:
        """The success body as this tool's result model (raises pydantic's ValidationError when the
        body does not match its contract). A replayed write (D2) adds only `idempotent_replay`."""
        return self.result.model_validate(body)


#: D28: the optional `notices` of every success body (AGENT_OPERATOR RenderedNotice objects:
#: `{code, kind, why, fix?, user_message?, contract_version}`), absent when the call has none.
NOTICES_FIELD = "notices"
_WITH_NOTICES: dict[type[BaseModel], type[BaseModel]] = {}


def with_notices_field(result: type[BaseModel]) -> type[BaseModel]:
    """The result model with the optional `notices` array declared last (the model itself when it
    declares one already). Same name and docstring, so schemas and messages read as before."""
    if NOTICES_FIELD in result.model_fields:
        return result
    if result not in _WITH_NOTICES and issubclass(result, RootModel):
        # A body that is one of several shapes (remember: one fact or a batch): each shape gets it.
        shapes = tuple(with_notices_field(a) for a in get_args(result.model_fields["root"].annotation))
        root: Any = Union[shapes]  # noqa: UP007 (a union built at run time)
        _WITH_NOTICES[result] = create_model(
            result.__name__, __base__=result, __module__=result.__module__, __doc__=result.__doc__, root=(root, ...)
        )
    if result not in _WITH_NOTICES:
        notices = Field(
            default=None,
            description="Notices (AGENT_OPERATOR): advice about this call, each {code, kind, why, fix?, "
            "user_message?, contract_version}; absent when there is none (D28).",
        )
        _WITH_NOTICES[result] = create_model(
            result.__name__,
            __base__=result,
            __module__=result.__module__,
            __doc__=result.__doc__,
            notices=(list[dict[str, Any]] | None, notices),
        )
    return _WITH_NOTICES[result]


#: The annotations of every tool that only reads.
READ_ONLY: dict[str, bool] = {"readOnlyHint": True}


#: The annotations of a write tool that states all three hints, in this order: it adds; it removes;
#: it removes, and calling it again changes nothing more.
ADDS: dict[str, bool] = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False}
REMOVES: dict[str, bool] = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}
REMOVES_IDEMPOTENT: dict[str, bool] = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}


def read_tool(
    name: str,
    description: str,
    params: type[Params],
    result: type[BaseModel],
    run: RunFn,
    *,
    scope: Scope = "read",
    surface: Surface = "full",
    calls_out: bool = False,
) -> ToolSpec:
    """A tool that only reads (D3: it ignores unknown parameters with a notice; readOnlyHint);
    `calls_out`: it waits on a service outside the store (synthesize's model)."""
    return ToolSpec(
        name,
        description,
        params,
        run,
        result,
        scope,
        surface,
        writes=False,
        annotations=dict(READ_ONLY),
        calls_out=calls_out,
    )


def write_tool(
    name: str,
    description: str,
    params: type[Params],
    result: type[BaseModel],
    run: RunFn,
    *,
    annotations: dict[str, bool],
    scope: Scope = "write",
    surface: Surface = "full",
    idempotency: bool = False,
) -> ToolSpec:
    """A tool that writes (D3: it refuses unknown parameters); `idempotency` (D2) takes `idempotency_key`."""
    return ToolSpec(
        name,
        description,
        params,
        run,
        result,
        scope,
        surface,
        writes=True,
        annotations=dict(annotations),
        idempotency=idempotency,
    )


REGISTRY: dict[str, ToolSpec] = {}


def register(spec: ToolSpec) -> ToolSpec:
    """Add one spec to `REGISTRY` (the tool list does it for every tool; tests add probe tools)."""
    if spec.name in REGISTRY:
        raise ValueError(f"tool {spec.name!r} registered twice")
    if issubclass(spec.params, Params):
        spec.params.tool = spec.name  # the tool its invalid_params fixes call
        unbounded = unbounded_integers(spec.input_schema())
        if unbounded:
            # D18: every integer parameter advertises its bounds, and validation enforces them, so a
            # number no store can hold (2**64) is the caller's invalid_params, never a server error.
            raise ValueError(f"tool {spec.name!r}: integer parameter(s) without minimum/maximum: {unbounded}")
    REGISTRY[spec.name] = spec
    return spec


def unbounded_integers(schema: dict[str, Any]) -> list[str]:
    """Top-level integer properties of an input schema that lack `minimum` or `maximum`."""
    out = []
    for name, prop in (schema.get("properties") or {}).items():
        for variant in [prop, *(prop.get("anyOf") or [])]:
            kind = variant.get("type")
            kinds = kind if isinstance(kind, list) else [kind]
            if "integer" in kinds and ("minimum" not in variant or "maximum" not in variant):
                out.append(name)
                break
    return out


def on_surface(spec: ToolSpec, surface: Surface) -> bool:
    """Whether a server of this surface offers the tool at all (before scopes)."""
    return surface == "full" or spec.surface == "verbs"


def tools_for(surface: Surface, caller: Caller) -> list[ToolSpec]:
    """Exactly what tools/list shows and tools/call accepts for this caller on this surface."""
    return [s for s in REGISTRY.values() if on_surface(s, surface) and caller.has_scope(s.scope)]


def either_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a result model that holds one of several answers (a `RootModel` of a union:
    remember's single-or-batch, entity's name-or-names), still an object schema (MCP's
    `outputSchema` is one): the `anyOf` of the answers, with every property any of them may hold (a
    property the answers type apart: the `anyOf` of its types)."""
    defs = schema.get("$defs", {})
    properties: dict[str, Any] = {}
    for variant in schema.get("anyOf", []):
        target = defs[variant["$ref"].rsplit("/", 1)[-1]] if "$ref" in variant else variant
        for name, prop in target.get("properties", {}).items():
            seen = properties.setdefault(name, prop)
            if not _json_types(prop) <= _json_types(seen):  # the answers type it apart (entity's `found`)
                properties[name] = {"anyOf": [seen, prop]}
    return {**schema, "type": "object", "properties": properties}


def _json_types(prop: dict[str, Any]) -> set[str]:
    """The JSON types a property schema admits ("any" when it names none, e.g. a `$ref`)."""
    found = {prop["type"]} if isinstance(prop.get("type"), str) else set()
    for alt in prop.get("anyOf", []):
        found |= _json_types(alt)
    return found or {"any"}
